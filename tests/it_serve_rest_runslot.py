"""it_serve_rest_runslot: a REST call's body is read, checked and parsed on
the REST worker; only its model run takes one of the model's run slots
through the model's queue (issue 33, F2).

A model runs on at most one queue slot per core and every call of it, gRPC's
included, waits for a slot. Before, the whole REST call (the check of a
255 MiB body, its parse, the answer's JSON) ran inside the slot, on a gRPC
worker at nice 10: two such bodies held both slots of a 2-core machine for
seconds and every other call of that model waited (docs/reliability.md,
"REST under a 2 GiB memory limit").

No timing bound on the daemon: with --grpc_max_threads=2 (one run slot per
model) and --max_queued_requests_per_model=1, two endless :predict calls of
`spin` (it_serve_rest_deadline's while loop) fill the slot and the queue
(seen when gRPC Predicts of spin are refused UNAVAILABLE, queue full, for
4 s on end). Then
calls of spin that need no run must still be answered by their own checks:
a body that is not JSON 400, a body whose parse tree is past
--max_request_memory_bytes 413, a :classify body without "examples" 400;
before, each went to the full queue and got 503. A valid call of spin still
gets 503 (the queue stayed full), half_plus_two answers 200.
"""
import json
import os
import socket
import sys
import tempfile
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import WAIT, Daemon, check, free_port, gen_protos  # noqa: E402
from it_serve_rest_deadline import config, wait_available  # noqa: E402
from it_serve_rest_deadline_more import write_spin_all  # noqa: E402

pb = gen_protos()
MIB = 1 << 20


def request(path, body):
    return (b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (path.encode(), len(body)) + body)


def call(rest, path, body, timeout=60):
    """(status, body) of one call on a new connection; (None, why) on a
    timeout or a closed connection."""
    s = socket.create_connection(("127.0.0.1", rest), timeout=timeout)
    try:
        s.sendall(request(path, body))
        data = b""
        while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < clen(data):
            d = s.recv(65536)
            if not d:
                break
            data += d
    except OSError as e:
        return None, str(e).encode()
    finally:
        s.close()
    if not data.startswith(b"HTTP/1.1 "):
        return None, data[:200]
    return int(data.split()[1]), data.split(b"\r\n\r\n", 1)[-1]


def clen(data):
    for line in data.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":", 1)[1])
    return 0


def spin_grpc(d, timeout):
    """A gRPC Predict of spin: the status code's name."""
    req = pb.tfs.PredictRequest()
    req.model_spec.name = "spin"
    req.inputs["x"].dtype = pb.fw.DT_FLOAT
    req.inputs["x"].tensor_shape.dim.add(size=1)
    req.inputs["x"].float_val.append(1.0)
    try:
        d.stub.Predict(req, timeout=timeout)
        return "OK", ""
    except grpc.RpcError as e:
        return e.code().name, e.details() or ""


def main():
    top = tempfile.mkdtemp(prefix="it_rest_runslot_")
    write_spin_all(os.path.join(top, "spin", "1"))
    cfg = config(os.path.join(top, "spin"))
    rest = free_port()
    d = Daemon(["--model_config_file=" + cfg, "--rest_api_port=%d" % rest,
                "--rest_api_timeout_in_ms=600000", "--grpc_max_threads=2",
                "--max_queued_requests_per_model=1", "--rest_api_num_threads=4",
                "--max_request_memory_bytes=%d" % (16 * MIB), "--enable_model_warmup=false"])
    held = []
    try:
        check(wait_available(rest, "spin") and wait_available(rest, "hpt"), "models available", d)
        # The slot and the queue of spin: two endless calls, kept open (a
        # closed connection would cancel its run). Held once gRPC Predicts of
        # spin are refused as the queue is full for 4 s on end: a refusal
        # alone may come while the first call still waits in the queue for a
        # worker to take it into the slot (the second one then refused 503),
        # after which the queue has room again; a call that runs never ends,
        # so once a call runs and one waits (one of ours, or a probe whose
        # deadline passed in the queue), nothing moves.
        for _ in range(2):
            s = socket.create_connection(("127.0.0.1", rest), timeout=60)
            s.sendall(request("/v1/models/spin:predict", b'{"inputs": [1.0]}'))
            held.append(s)
        end = time.monotonic() + WAIT
        code, why, since, steady = None, "", None, False
        while time.monotonic() < end and not steady:
            code, why = spin_grpc(d, 5)
            if code != "UNAVAILABLE":
                since = None
                continue
            since = since if since is not None else time.monotonic()
            steady = time.monotonic() - since >= 4
            time.sleep(0.5)
        check(steady and code == "UNAVAILABLE" and "full" in why,
              "two endless calls of spin fill its one run slot and its queue of 1: a gRPC "
              "Predict of spin is refused as the queue is full (got %s %r)" % (code, why), d)
        cases = [
            ("a :predict body that is not JSON", "/v1/models/spin:predict", b"{not json",
             400, b"JSON Parse error"),
            ("a :predict body whose parse tree is past --max_request_memory_bytes (16 MiB)",
             "/v1/models/spin:predict", b'{"instances": [' + b"0," * MIB + b"0]}", 413,
             b"parse tree"),
            ("a :classify body without \"examples\"", "/v1/models/spin:classify",
             b'{"signature_name": "classify"}', 400, b"examples"),
        ]
        for what, path, body, want, text in cases:
            code, data = call(rest, path, body)
            check(code == want and text in data,
                  "spin's run slot and queue full: %s is answered %d by the REST worker's own "
                  "check, without a run slot (got %s %r; 503 = it went to the model's queue)"
                  % (what, want, code, data[:300]), d)
        code, data = call(rest, "/v1/models/spin:predict", b'{"inputs": [1.0]}')
        check(code == 503 and b"full" in data,
              "a valid call of spin still finds its queue full: 503 (got %s %r)"
              % (code, data[:300]), d)
        code, data = call(rest, "/v1/models/hpt:predict", b'{"instances": [1.0]}')
        check(code == 200 and json.loads(data)["predictions"] == [2.5],
              "half_plus_two answers: %s %r" % (code, data[:300]), d)
    finally:
        for s in held:
            s.close()
        d.close()
    print("ok: REST bodies are checked and parsed outside the model's run slots")
    return 0


if __name__ == "__main__":
    sys.exit(main())
