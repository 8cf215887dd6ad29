"""it_serve_flags: the real daemon started the way a TF Serving deployment
starts tensorflow_model_server, and its ports.

1. Every flag of tensorflow_model_server's main.cc (TF_SERVING_FLAGS below, in
   main.cc's order) is listed by `dcmserve serve --help`; the daemon starts
   with all of them, with values a deployment would pass, serves Predict, and
   logs exactly one warning line for each flag that has no effect here.
   All 48 are given: --model_name/--model_base_path next to
   --model_config_file are ignored with a warning each (as TF Serving ignores
   them), --version=false does not exit, --ssl_config_file gets a real
   SSLConfig with a server certificate made by openssl at test time, so gRPC
   and REST are spoken over TLS. With --request_log=all the log has exactly
   one request line per request (gRPC and REST), and the Prometheus page at
   the --monitoring_config_file path parses and its counters move.
2. A second daemon on a busy port exits non-zero with "port N is already in
   use" and no raw gRPC log line; with --grpc_channel_arguments=
   grpc.so_reuseport=1 on both, the second one starts.
3. --port=0 opens exactly one listening socket, the one it prints.
4. --saved_model_tags naming a tag set the SavedModel lacks fails the load.

Expected answers are computed from half_plus_two's definition y = 0.5 x + 2.
"""
import json
import os
import re
import ssl
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpc  # noqa: E402
import it_serve_rest  # noqa: E402
from it_serve_rest import call, free_port, metrics, sample  # noqa: E402
from it_serve_tls import make_ca, make_cert, read, write_ssl_config  # noqa: E402
from serve_client import (DCMSERVE, HPT, WAIT, Daemon, check, float_tensor,  # noqa: E402
                          gen_protos, tensor_values)

pb = gen_protos()

# tensorflow_model_server's flags, as its main.cc defines them.
TF_SERVING_FLAGS = [
    "port", "grpc_socket_path", "rest_api_port", "rest_api_num_threads", "rest_api_timeout_in_ms",
    "rest_api_enable_cors_support", "enable_batching",
    "allow_version_labels_for_unavailable_models", "batching_parameters_file",
    "enable_per_model_batching_parameters", "model_config_file",
    "model_config_file_poll_wait_seconds", "model_name", "model_base_path", "num_load_threads",
    "num_unload_threads", "max_num_load_retries", "load_retry_interval_micros",
    "file_system_poll_wait_seconds", "flush_filesystem_caches", "tensorflow_session_parallelism",
    "tensorflow_session_config_file", "tensorflow_intra_op_parallelism",
    "tensorflow_inter_op_parallelism", "use_alts_credentials", "ssl_config_file",
    "platform_config_file", "per_process_gpu_memory_fraction", "saved_model_tags",
    "grpc_channel_arguments", "grpc_max_threads", "enable_model_warmup",
    "num_request_iterations_for_warmup", "version", "monitoring_config_file",
    "remove_unused_fields_from_bundle_metagraph", "prefer_tflite_model", "num_tflite_pools",
    "num_tflite_interpreters_per_pool", "enable_signature_method_name_check",
    "xla_cpu_compilation_enabled", "xla_gpu_compilation_enabled", "enable_profiler",
    "thread_pool_factory_config_file", "mixed_precision", "skip_initialize_tpu",
    "enable_grpc_healthcheck_service", "enable_serialization_as_tensor_content",
]
NOT_IN_RUN = set()
# Flags that do what TF Serving's do: no warning line.
IMPLEMENTED = {"version", "port", "rest_api_port", "monitoring_config_file", "rest_api_num_threads", "rest_api_timeout_in_ms",
               "rest_api_enable_cors_support", "model_config_file", "model_config_file_poll_wait_seconds",
               "file_system_poll_wait_seconds", "tensorflow_session_parallelism",
               "tensorflow_intra_op_parallelism", "saved_model_tags", "grpc_channel_arguments",
               "grpc_max_threads", "enable_batching", "batching_parameters_file",
               "enable_per_model_batching_parameters", "enable_model_warmup",
               "num_request_iterations_for_warmup", "ssl_config_file",
               "per_process_gpu_memory_fraction"}


def predict_ok(d):
    r = pb.tfs.PredictRequest()
    r.model_spec.name = "hpt"
    x = np.array([1.0, 2.0, 5.0], dtype=np.float32)
    r.inputs["x"].CopyFrom(float_tensor(x.tolist(), [3, 1]))
    got = np.array(tensor_values(d.stub.Predict(r, timeout=10).outputs["y"]), dtype=np.float32)
    want = 0.5 * x + 2.0
    check(np.allclose(got, want), "Predict y=%s want %s" % (got, want), d)


def request_lines(d):
    return [ln for ln in d.log().splitlines() if re.search(r" (INFO |WARN ) request peer=", ln)]


def listening_sockets(pid):
    """(port) of each TCP socket in LISTEN state that process pid holds."""
    inodes = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        m = re.match(r"socket:\[(\d+)\]", link)
        if m:
            inodes.add(m.group(1))
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for row in f.readlines()[1:]:
                c = row.split()
                if c[3] == "0A" and c[9] in inodes:
                    ports.append(int(c[1].rsplit(":", 1)[1], 16))
    return ports


def every_flag(tmp):
    helptext = subprocess.run([DCMSERVE, "serve", "--help"], capture_output=True, text=True,
                              timeout=30).stdout
    listed = set(re.findall(r"^  --(\w+)", helptext, re.M))
    missing = [f for f in TF_SERVING_FLAGS if f not in listed]
    check(not missing, "--help lacks TF Serving flags %s" % missing)

    cfg = os.path.join(tmp, "models.json")
    with open(cfg, "w") as f:
        json.dump({"model_config_list": {"config": [
            {"name": "hpt", "base_path": HPT, "model_platform": "tensorflow"}]}}, f)
    for name in ("batching.pbtxt", "platform.pbtxt", "session.pbtxt", "threadpool.pbtxt"):
        with open(os.path.join(tmp, name), "w") as f:
            f.write("\n")
    make_ca(tmp, "ca")
    make_cert(tmp, "ca", "server", "localhost", server=True)
    write_ssl_config(os.path.join(tmp, "ssl.pbtxt"), tmp, "server.key", "server.crt")
    with open(os.path.join(tmp, "monitoring.pbtxt"), "w") as f:
        f.write('prometheus_config {\n  enable: true,\n  path: "/monitoring/prometheus/metrics"\n}\n')
    rest = free_port()
    values = {
        "port": "0", "grpc_socket_path": os.path.join(tmp, "grpc.sock"), "rest_api_port": str(rest),
        "rest_api_num_threads": "8", "rest_api_timeout_in_ms": "30000",
        "rest_api_enable_cors_support": "true", "enable_batching": "true",
        "allow_version_labels_for_unavailable_models": "true",
        "batching_parameters_file": os.path.join(tmp, "batching.pbtxt"),
        "enable_per_model_batching_parameters": "false", "model_config_file": cfg,
        "model_config_file_poll_wait_seconds": "60", "model_name": "hpt",
        "model_base_path": HPT, "num_load_threads": "2",
        "num_unload_threads": "1", "max_num_load_retries": "5",
        "load_retry_interval_micros": "60000000", "file_system_poll_wait_seconds": "1",
        "flush_filesystem_caches": "true", "tensorflow_session_parallelism": "2",
        "tensorflow_session_config_file": os.path.join(tmp, "session.pbtxt"),
        "tensorflow_intra_op_parallelism": "2", "tensorflow_inter_op_parallelism": "2",
        "use_alts_credentials": "false", "ssl_config_file": os.path.join(tmp, "ssl.pbtxt"),
        "platform_config_file": os.path.join(tmp, "platform.pbtxt"),
        "per_process_gpu_memory_fraction": "0.5", "saved_model_tags": "serve",
        "grpc_channel_arguments": "grpc.max_connection_age_ms=600000,grpc.http2.max_pings_without_data=0",
        "grpc_max_threads": "8", "enable_model_warmup": "true",
        "num_request_iterations_for_warmup": "1", "version": "false",
        "monitoring_config_file": os.path.join(tmp, "monitoring.pbtxt"),
        "remove_unused_fields_from_bundle_metagraph": "true", "prefer_tflite_model": "false",
        "num_tflite_pools": "1", "num_tflite_interpreters_per_pool": "1",
        "enable_signature_method_name_check": "false", "xla_cpu_compilation_enabled": "false",
        "xla_gpu_compilation_enabled": "false", "enable_profiler": "true",
        "thread_pool_factory_config_file": os.path.join(tmp, "threadpool.pbtxt"),
        "mixed_precision": "bfloat16", "skip_initialize_tpu": "true",
        "enable_grpc_healthcheck_service": "true", "enable_serialization_as_tensor_content": "true",
    }
    given = [f for f in TF_SERVING_FLAGS if f not in NOT_IN_RUN]
    check(sorted(given) == sorted(values), "test values do not match the flag list")
    d = Daemon(["--%s=%s" % (f, values[f]) for f in given] + ["--request_log=all"])
    # TLS on both ports: gRPC and REST clients trust the test's CA.
    d.channel.close()
    d.channel = grpc.secure_channel("localhost:%d" % d.port,
                                    grpc.ssl_channel_credentials(read(tmp, "ca.crt")))
    d.stub = type(d.stub)(d.channel)
    it_serve_rest.HTTPS_CONTEXT = ssl.create_default_context(cafile=os.path.join(tmp, "ca.crt"))
    try:
        d.wait_health(1)
        time.sleep(0.2)
        n0 = len(request_lines(d))
        mpath = "/monitoring/prometheus/metrics"
        m0 = metrics(rest, mpath)
        predict_ok(d)
        predict_ok(d)
        code, r, _ = call(rest, "POST", "/v1/models/hpt:predict", {"instances": [1.0, 2.0, 5.0]})
        check(code == 200 and r == {"predictions": [2.5, 3.0, 4.5]}, "REST predict %d %s" % (code, r), d)
        m1 = metrics(rest, mpath)
        for api, n in (("grpc_predict", 2), ("rest_predict", 1)):
            key = dict(model="hpt", version="123", signature="serving_default", api=api, code="OK")
            check(sample(m1, "dcmserve_requests_total", **key) == sample(m0, "dcmserve_requests_total", **key) + n,
                  "%s counter did not move by %d" % (api, n), d)
        tfs = dict(model_name="hpt", status="OK")
        check(sample(m1, ":tensorflow:serving:request_count_total", **tfs)
              == sample(m0, ":tensorflow:serving:request_count_total", **tfs) + 3, "request_count", d)
        # Requests: the first scrape, 2 Predict, 1 REST predict, the second scrape.
        end = time.monotonic() + WAIT
        while len(request_lines(d)) < n0 + 5 and time.monotonic() < end:
            time.sleep(0.02)
        time.sleep(0.3)
        lines = request_lines(d)[n0:]
        check(len(lines) == 5 and [ln.split("api=")[1].split()[0] for ln in lines]
              == ['"rest_other"', '"grpc_predict"', '"grpc_predict"', '"rest_predict"', '"rest_other"'],
              "request lines %s" % lines, d)
        log = d.log()
        for f in given:
            n = len(re.findall(r"WARN +flag --%s: " % f, log))
            want = 0 if f in IMPLEMENTED else 1
            check(n == want, "--%s: %d warning lines, want %d" % (f, n, want), d)
        check(d.stop() == 0, "daemon with every flag did not exit 0", d)
    finally:
        it_serve_rest.HTTPS_CONTEXT = None
        d.close()


def ports():
    d = Daemon(["--model_name=hpt", "--model_base_path=" + HPT])
    try:
        d.wait_health(1)
        socks = listening_sockets(d.proc.pid)
        check(socks == [d.port], "--port=0: listening on %s, printed %d" % (socks, d.port), d)

        second = subprocess.run(
            [DCMSERVE, "serve", "--port=%d" % d.port, "--bind_address=127.0.0.1",
             "--model_name=hpt", "--model_base_path=" + HPT],
            capture_output=True, text=True, timeout=60)
        check(second.returncode != 0, "second daemon on port %d exited 0" % d.port, d)
        check("port %d is already in use" % d.port in second.stderr,
              "second daemon's message: %r" % second.stderr[-500:], d)
        check("chttp2_server" not in second.stderr and not re.search(r"^E\d{4} ", second.stderr, re.M),
              "raw gRPC log line: %r" % second.stderr[-800:], d)
        check(d.stop() == 0, "first daemon did not exit 0", d)
    finally:
        d.close()

    reuse = "--grpc_channel_arguments=grpc.so_reuseport=1"
    a = Daemon(["--model_name=hpt", "--model_base_path=" + HPT, reuse])
    try:
        b = Daemon(["--port=%d" % a.port, "--model_name=hpt", "--model_base_path=" + HPT, reuse])
        try:
            check(b.port == a.port, "so_reuseport: second daemon on %d, first on %d"
                  % (b.port, a.port), b)
            b.wait_health(1)
            predict_ok(b)
            check(b.stop() == 0, "second so_reuseport daemon did not exit 0", b)
        finally:
            b.close()
        check(a.stop() == 0, "first so_reuseport daemon did not exit 0", a)
    finally:
        a.close()


def tags():
    d = Daemon(["--model_name=hpt", "--model_base_path=" + HPT, "--saved_model_tags=serve,gpu"])
    try:
        d.wait_health(2)  # NOT_SERVING: no MetaGraph has exactly {serve, gpu}
        # NOT_SERVING also holds while the load is still running: wait for its end.
        end = time.monotonic() + WAIT
        while "failed to load model hpt version 123" not in d.log() and time.monotonic() < end:
            time.sleep(0.05)
        check("failed to load model hpt version 123" in d.log(), "no load failure logged", d)
        d.stop()
    finally:
        d.close()


def main():
    tmp = tempfile.mkdtemp(prefix="dcm_flags_")
    every_flag(tmp)
    ports()
    tags()
    print("it_serve_flags: ok")


if __name__ == "__main__":
    main()
