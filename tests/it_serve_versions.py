"""it_serve_versions: version policies (latest / all / specific), labels,
the JSON and text-format model config files, SIGHUP and timed config
re-reads, HandleReloadConfigRequest, and flag/config errors.

Uses saved_model_half_plus_two_2_versions (versions 123 and 124)."""
import os
import signal
import subprocess
import sys
import tempfile
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import (DCMSERVE, HPT, TWO_VERSIONS, WAIT, Daemon, check,  # noqa: E402
                          float_tensor, gen_protos, tensor_values)

pb = gen_protos()
AV = pb.tfs.ModelVersionStatus.AVAILABLE


def json_config(models):
    import json
    return json.dumps({"model_config_list": {"config": models}})


def status(d, name):
    r = d.stub.GetModelStatus(pb.tfs.GetModelStatusRequest(model_spec=pb.tfs.ModelSpec(name=name)), timeout=5)
    return {s.version: s.state for s in r.model_version_status}


def available(d, name):
    try:
        return sorted(v for v, s in status(d, name).items() if s == AV)
    except grpc.RpcError as e:
        if e.code() == grpc.StatusCode.NOT_FOUND:
            return None
        raise


def predict(d, name, version=None, label=None):
    r = pb.tfs.PredictRequest()
    r.model_spec.name = name
    if version is not None:
        r.model_spec.version.value = version
    if label is not None:
        r.model_spec.version_label = label
    r.inputs["x"].CopyFrom(float_tensor([2.0], [1, 1]))
    resp = d.stub.Predict(r, timeout=10)
    check(abs(tensor_values(resp.outputs["y"])[0] - 3.0) < 1e-6, "y for x=2 should be 0.5*2+2=3", d)
    return resp.model_spec.version.value


def wait_for(pred, timeout=WAIT):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if pred():
            return True
        time.sleep(0.02)
    return False


def expect_code(fn, code, d):
    try:
        fn()
    except grpc.RpcError as e:
        check(e.code() == code, "expected %s got %s %s" % (code, e.code(), e.details()), d)
        return e.details()
    raise AssertionError("expected %s" % code)


def run_policies(d):
    d.wait_health(1)
    check(wait_for(lambda: available(d, "all") == [123, 124]), "all: %s" % available(d, "all"), d)
    check(available(d, "latest") == [124], "latest: %s" % available(d, "latest"), d)
    check(available(d, "specific") == [123], "specific: %s" % available(d, "specific"), d)
    check(predict(d, "all", label="stable") == 123, "label stable -> 123", d)
    check(predict(d, "all", label="canary") == 124, "label canary -> 124", d)
    check(predict(d, "all") == 124, "no version -> highest", d)
    check(predict(d, "all", version=123) == 123, "version 123", d)
    check(predict(d, "latest") == 124, "latest", d)
    check(predict(d, "specific") == 123, "specific", d)
    msg = expect_code(lambda: predict(d, "specific", version=124), grpc.StatusCode.NOT_FOUND, d)
    check("available versions of specific: 123" in msg, msg, d)
    msg = expect_code(lambda: predict(d, "all", label="nolabel"), grpc.StatusCode.INVALID_ARGUMENT, d)
    check("nolabel" in msg and "version labels of all: " in msg and "stable" in msg, msg, d)
    km = d.stub.ModelMetadata(pb.ks.ModelMetadataRequest(name="all"), timeout=5)
    check(list(km.versions) == ["123", "124"], "kserve versions %s" % km.versions, d)
    st = d.stub.GetModelStatus(pb.tfs.GetModelStatusRequest(
        model_spec=pb.tfs.ModelSpec(name="all", version_label="stable")), timeout=5)
    check([s.version for s in st.model_version_status] == [123], "status by label %s" % st, d)


MODELS = [
    {"name": "all", "base_path": TWO_VERSIONS, "model_platform": "tensorflow",
     "model_version_policy": {"all": {}}, "version_labels": {"stable": 123, "canary": "124"}},
    {"name": "latest", "basePath": TWO_VERSIONS},
    {"name": "specific", "base_path": TWO_VERSIONS,
     "model_version_policy": {"specific": {"versions": [123]}}},
]

PBTXT = """
# TF Serving text format
model_config_list {
  config {
    name: 'all'
    base_path: '%(p)s'
    model_platform: "tensorflow"
    model_version_policy { all {} }
    version_labels { key: 'stable' value: 123 }
    version_labels { key: 'canary' value: 124 }
  }
  config { name: "latest" base_path: "%(p)s" model_version_policy { latest { num_versions: 1 } } }
  config {
    name: "specific"
    base_path: "%(p)s"
    model_version_policy: { specific { versions: 123 } }
  }
}
""" % {"p": TWO_VERSIONS}


def main():
    tmp = tempfile.mkdtemp(prefix="dcm_versions_")
    cfg = os.path.join(tmp, "models.json")
    with open(cfg, "w") as f:
        f.write(json_config(MODELS))

    # --- JSON config, policies and labels; then SIGHUP and ReloadConfig ---
    d = Daemon(["--model_config_file=" + cfg, "--enable_reload_config_rpc"])
    try:
        run_policies(d)

        # SIGHUP: specific now lists 124 only, latest is dropped.
        models = [MODELS[0], {"name": "specific", "base_path": TWO_VERSIONS,
                              "model_version_policy": {"specific": {"versions": ["124"]}}}]
        with open(cfg, "w") as f:
            f.write(json_config(models))
        d.proc.send_signal(signal.SIGHUP)
        check(wait_for(lambda: available(d, "specific") == [124]), "SIGHUP: specific %s" % available(d, "specific"), d)
        check(wait_for(lambda: available(d, "latest") is None), "SIGHUP: latest still there", d)
        check(predict(d, "specific") == 124, "specific after SIGHUP", d)
        expect_code(lambda: predict(d, "latest"), grpc.StatusCode.NOT_FOUND, d)

        # A broken file on SIGHUP keeps the current models.
        with open(cfg, "w") as f:
            f.write('{"model_config_list": {"config": [{"name": "x", "bse_path": "/nope"}]}}')
        d.proc.send_signal(signal.SIGHUP)
        check(wait_for(lambda: "bse_path" in d.log()), "bad config not reported", d)
        check(predict(d, "specific") == 124, "models kept after a bad config", d)

        # HandleReloadConfigRequest replaces the model list and waits for loads.
        req = pb.tfs.ReloadConfigRequest()
        c = req.config.model_config_list.config.add(name="two", base_path=TWO_VERSIONS)
        c.model_version_policy.latest.num_versions = 2
        resp = d.stub.HandleReloadConfigRequest(req, timeout=30)
        check(resp.status.error_code == 0, "reload status %s" % resp, d)
        check(available(d, "two") == [123, 124], "after reload: two %s" % available(d, "two"), d)
        check(wait_for(lambda: available(d, "all") is None), "old models still listed after reload", d)
        check(predict(d, "two", version=123) == 123, "two v123", d)

        bad = pb.tfs.ReloadConfigRequest()
        bad.config.model_config_list.config.add(name="dup", base_path=TWO_VERSIONS)
        bad.config.model_config_list.config.add(name="dup", base_path=TWO_VERSIONS)
        msg = expect_code(lambda: d.stub.HandleReloadConfigRequest(bad, timeout=10),
                          grpc.StatusCode.INVALID_ARGUMENT, d)
        check("dup" in msg, msg, d)
        check(available(d, "two") == [123, 124], "bad reload changed the models", d)
        check(d.stop() == 0, "exit code", d)
    finally:
        d.close()

    # --- the same config in text format, re-read by the poll timer ---
    pbtxt = os.path.join(tmp, "models.config")
    with open(pbtxt, "w") as f:
        f.write(PBTXT)
    d = Daemon(["--model_config_file=" + pbtxt, "--model_config_file_poll_wait_seconds=1"])
    try:
        run_policies(d)
        with open(pbtxt, "w") as f:
            f.write("model_config_list { config { name: 'only' base_path: '%s' } }" % TWO_VERSIONS)
        check(wait_for(lambda: available(d, "only") == [124]), "poll re-read: %s" % available(d, "only"), d)
        check(d.stop() == 0, "exit code", d)
    finally:
        d.close()

    # --- startup errors name the culprit ---
    def run(args):
        p = subprocess.run([DCMSERVE, "serve", "--port=0", "--bind_address=127.0.0.1"] + args,
                           capture_output=True, timeout=20)
        return p.returncode, p.stderr.decode() + p.stdout.decode()

    rc, out = run(["--model_base_path=" + HPT, "--no_such_flag=1"])
    check(rc == 2 and "--no_such_flag" in out, "unknown flag: rc=%d %s" % (rc, out))
    rc, out = run(["--port=99999", "--model_base_path=" + HPT])
    check(rc == 2 and "--port" in out and "99999" in out, "bad port: rc=%d %s" % (rc, out))
    with open(cfg, "w") as f:
        f.write(json_config([{"name": "a", "base_path": HPT, "model_version_policy": {"newest": {}}}]))
    rc, out = run(["--model_config_file=" + cfg])
    check(rc == 2 and "newest" in out, "bad policy: rc=%d %s" % (rc, out))
    with open(cfg, "w") as f:
        f.write('{"model_config_list": ')
    rc, out = run(["--model_config_file=" + cfg])
    check(rc == 2 and "JSON" in out, "bad JSON: rc=%d %s" % (rc, out))
    rc, out = run(["--help"])
    for flag in ("--port", "--rest_api_port", "--model_name", "--model_base_path", "--model_config_file",
                 "--model_config_file_poll_wait_seconds", "--file_system_poll_wait_seconds",
                 "--grpc_max_threads", "--log_level", "--max_message_bytes", "--drain_timeout_seconds"):
        check(flag in out, "--help lacks %s" % flag)
    check(rc == 0, "--help rc %d" % rc)
    print("it_serve_versions: ok")


if __name__ == "__main__":
    main()
