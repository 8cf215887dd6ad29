"""it_examples_rest_v2: examples/rest/infer_v2_binary.sh (curl, KServe v2 REST
/v2/models/{m}/infer with the binary tensor data extension).

1. The request the script sends is parsed here as the Open Inference Protocol
   describes it (a local HTTP listener of this test receives it):
   Inference-Header-Content-Length bytes of JSON, then for the BYTES input
   "dicom" binary_data_size bytes of (4-byte little-endian length, element)
   pairs, which must be the files' exact bytes.
2. Against the real daemon serving the demo model, the reply's values are
   checked against pydicom + numpy.
"""
import http.server
import json
import os
import struct
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import Daemon, check, free_port  # noqa: E402
from it_demo_model import FILES, compare, reference  # noqa: E402

SRC = os.environ.get("DCM_SRC", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SCRIPT = os.path.join(SRC, "examples", "rest", "infer_v2_binary.sh")
MODEL_BASE = os.path.join(SRC, "models", "demo_ct")


def run(url, *files):
    return subprocess.run(["/bin/sh", SCRIPT, "-u", url] + list(files), capture_output=True,
                          text=True, timeout=60)


def check_request_encoding():
    got = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            n = int(self.headers["Content-Length"])
            got["path"] = self.path
            got["headers"] = dict(self.headers)
            got["body"] = self.rfile.read(n)
            reply = b'{"outputs": []}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.handle_request, daemon=True)
    t.start()
    r = run("http://127.0.0.1:%d" % srv.server_address[1], *FILES)
    t.join(30)
    srv.server_close()
    check(r.returncode == 0, "infer_v2_binary.sh against the listener: %s" % r.stderr)
    check(got.get("path") == "/v2/models/demo_ct/infer", "path %r" % got.get("path"))
    hlen = int(got["headers"]["Inference-Header-Content-Length"])
    body = got["body"]
    header = json.loads(body[:hlen])
    inp = header["inputs"][0]
    check(inp["name"] == "dicom" and inp["datatype"] == "BYTES" and inp["shape"] == [len(FILES)],
          "input %r" % inp)
    data = body[hlen:]
    check(inp["parameters"]["binary_data_size"] == len(data),
          "binary_data_size %r, %d bytes follow" % (inp["parameters"], len(data)))
    at, elems = 0, []
    while at < len(data):
        (n,) = struct.unpack_from("<I", data, at)
        elems.append(data[at + 4:at + 4 + n])
        at += 4 + n
    for f, e in zip(FILES, elems):
        with open(f, "rb") as fh:
            check(fh.read() == e, "%s: element bytes differ" % f)
    check(len(elems) == len(FILES) and at == len(data), "%d elements" % len(elems))


def flat(x):
    return [v for e in x for v in flat(e)] if isinstance(x, list) else [x]


def main():
    check_request_encoding()
    print("infer_v2_binary.sh: the request follows the binary tensor data extension")
    refs = [reference(p) for p in FILES]
    rest = free_port()
    d = Daemon(["--model_name=demo_ct", "--model_base_path=" + MODEL_BASE,
                "--rest_api_port=%d" % rest])
    try:
        d.wait_health(want=1)
        r = run("http://127.0.0.1:%d" % rest, *FILES)
        check(r.returncode == 0, "infer_v2_binary.sh failed: %s%s" % (r.stdout, r.stderr), d)
        outs = {o["name"]: o for o in json.loads(r.stdout)["outputs"]}
        check(outs["mean_hu"]["shape"] == [len(FILES)], "mean_hu %r" % outs["mean_hu"]["shape"])
        check(outs["tissue_fraction"]["shape"] == [len(FILES), 4],
              "tissue_fraction %r" % outs["tissue_fraction"]["shape"])
        # The protocol allows "data" flat (row-major) or nested as the shape.
        frac = flat(outs["tissue_fraction"]["data"])
        compare("REST v2 binary", flat(outs["mean_hu"]["data"]),
                [frac[4 * i:4 * i + 4] for i in range(len(FILES))], refs)
    finally:
        d.close()
    print("infer_v2_binary.sh: %d files, values match pydicom" % len(FILES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
