"""it_check: `dcmserve check` on a model with unsupported ops and on one that
serves, `show --list_ops`, `show` / `run` on a base directory, and the daemon
serving one model while another fails its load with one message listing every
unsupported op (GetModelStatus carries it).

The model with unsupported ops is written here with the protobuf classes of
proto/: x -> NoSuchOpA ('a') -> NoSuchOpB ('b'), plus a second NoSuchOpA
('second_a') on x, added together (AddV2) into y.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import Daemon, check, float_tensor, gen_protos, tensor_values  # noqa: E402

DCMSERVE = os.environ["DCMSERVE"]
SRC = os.environ.get("DCM_SRC", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
HP2_BASE = os.path.join(SRC, "tests", "data", "savedmodels", "saved_model_half_plus_two_cpu")
pb = gen_protos()


def predict_sig(mg, key, fetch, out="y"):
    """A predict signature `key` of mg: input x (x:0), output `out` (fetch), floats."""
    sig = mg.signature_def[key]
    sig.method_name = "tensorflow/serving/predict"
    sig.inputs["x"].name = "x:0"
    sig.inputs["x"].dtype = pb.fw.DT_FLOAT
    sig.outputs[out].name = fetch
    sig.outputs[out].dtype = pb.fw.DT_FLOAT


def write_pb(d, sm):
    os.makedirs(d)
    with open(os.path.join(d, "saved_model.pb"), "wb") as f:
        f.write(sm.SerializeToString())


def write_bad_model(d):
    sm = pb.sm.SavedModel(saved_model_schema_version=1)
    mg = sm.meta_graphs.add()
    mg.meta_info_def.tags.append("serve")
    g = mg.graph_def

    def node(name, op, inputs=()):
        n = g.node.add(name=name, op=op)
        n.input.extend(inputs)
        n.attr["T"].type = pb.fw.DT_FLOAT
        return n

    x = node("x", "Placeholder")
    x.attr["dtype"].type = pb.fw.DT_FLOAT
    node("a", "NoSuchOpA", ["x"])
    node("b", "NoSuchOpB", ["a"])
    node("second_a", "NoSuchOpA", ["x"])
    node("y", "AddV2", ["b", "second_a"])
    predict_sig(mg, "serving_default", "y:0")
    write_pb(d, sm)


def write_unrestored_model(d):
    """x + v where the resource variable v is never restored (no variables/)."""
    sm = pb.sm.SavedModel(saved_model_schema_version=1)
    mg = sm.meta_graphs.add()
    mg.meta_info_def.tags.append("serve")
    g = mg.graph_def
    x = g.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = pb.fw.DT_FLOAT
    v = g.node.add(name="v", op="VarHandleOp")
    v.attr["dtype"].type = pb.fw.DT_FLOAT
    v.attr["shared_name"].s = b"dense/kernel"
    r = g.node.add(name="r", op="ReadVariableOp", input=["v"])
    r.attr["dtype"].type = pb.fw.DT_FLOAT
    y = g.node.add(name="y", op="AddV2", input=["x", "r"])
    y.attr["T"].type = pb.fw.DT_FLOAT
    predict_sig(mg, "serving_default", "y:0")
    write_pb(d, sm)


def write_neg_model(d, sig_keys):
    """y = Neg(x), with one predict signature under each of sig_keys (none: no
    signature at all)."""
    sm = pb.sm.SavedModel(saved_model_schema_version=1)
    mg = sm.meta_graphs.add()
    mg.meta_info_def.tags.append("serve")
    x = mg.graph_def.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = pb.fw.DT_FLOAT
    y = mg.graph_def.node.add(name="y", op="Neg", input=["x"])
    y.attr["T"].type = pb.fw.DT_FLOAT
    for key in sig_keys:
        predict_sig(mg, key, "y:0")
    write_pb(d, sm)


def write_unresolved_model(d):
    """serving_default: y = Neg(x); signature 'fn': a call of function body_fn
    whose node m reads n:nosuch:0, an output arg Neg does not have."""
    write_neg_model(d, ["serving_default"])
    path = os.path.join(d, "saved_model.pb")
    sm = pb.sm.SavedModel.FromString(open(path, "rb").read())
    mg = sm.meta_graphs[0]
    fd = mg.graph_def.library.function.add()
    fd.signature.name = "body_fn"
    fd.signature.input_arg.add(name="a", type=pb.fw.DT_FLOAT)
    fd.signature.output_arg.add(name="out", type=pb.fw.DT_FLOAT)
    for name, inp in (("n", "a"), ("m", "n:nosuch:0")):
        nd = fd.node_def.add(name=name, op="Neg", input=[inp])
        nd.attr["T"].type = pb.fw.DT_FLOAT
    fd.ret["out"] = "m:y:0"
    call = mg.graph_def.node.add(name="call", op="StatefulPartitionedCall", input=["x"])
    call.attr["f"].func.name = "body_fn"
    call.attr["Tin"].list.type.append(pb.fw.DT_FLOAT)
    call.attr["Tout"].list.type.append(pb.fw.DT_FLOAT)
    predict_sig(mg, "fn", "call:0", out="z")
    with open(path, "wb") as f:
        f.write(sm.SerializeToString())


def run(*args):
    p = subprocess.run([DCMSERVE] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


with tempfile.TemporaryDirectory() as tmp:
    bad_base = os.path.join(tmp, "bad")
    write_bad_model(os.path.join(bad_base, "1"))

    # check: the model with unsupported ops (base dir -> version 1), text and JSON.
    rc, out, err = run("check", bad_base)
    check(rc == 1, "check on the bad model: rc %d, want 1\n%s%s" % (rc, out, err))
    for want in ("does not serve", "2 unsupported ops: NoSuchOpA, NoSuchOpB", "    a\n",
                 "    second_a\n", "    b\n", "unsupported ops (2)"):
        check(want in out, "check output lacks %r:\n%s" % (want, out))
    rc, out, err = run("check", "--json", bad_base)
    check(rc == 1, "check --json: rc %d" % rc)
    j = json.loads(out)
    check(j["serves"] is False and "NoSuchOpA" in j["verdict"], "verdict: %r" % j["verdict"])
    sig = {s["key"]: s for s in j["signatures"]}["serving_default"]
    check(sig["serves"] is False, "serving_default should not serve")
    got = {u["op"]: sorted(u["nodes"]) for u in sig["unsupported"]}
    check(got == {"NoSuchOpA": ["a", "second_a"], "NoSuchOpB": ["b"]}, "unsupported: %r" % got)
    check(set(sig["ops"]) == {"AddV2", "NoSuchOpA", "NoSuchOpB", "Placeholder"},
          "ops: %r" % sig["ops"])

    # check: a model that serves (base dir with version 00000123).
    rc, out, err = run("check", "--json", HP2_BASE)
    check(rc == 0, "check on half_plus_two: rc %d\n%s%s" % (rc, out, err))
    j = json.loads(out)
    check(j["serves"] is True and j["verdict"] == "serves", "verdict %r" % j["verdict"])
    check(j["dir"].endswith("00000123"), "the base dir should resolve to 00000123: %s" % j["dir"])
    sigs = {s["key"]: s for s in j["signatures"]}
    sd = sigs["serving_default"]
    check(sd["serves"] and sd["unsupported"] == [], "serving_default: %r" % sd)
    check({v["name"] for v in sd["variables"]} == {"a", "b"} and
          all(v["restored"] for v in sd["variables"]), "variables: %r" % sd["variables"])
    check(sigs["classify_x_to_y"]["serves"] is True and "ParseExample" in sigs["classify_x_to_y"]["ops"],
          "classify_x_to_y serves through ParseExample: %r" % sigs["classify_x_to_y"])
    check("serving_default" in j["why"] and "2 of 2 variables read restored" in j["why"],
          "why it serves: %r" % j["why"])
    rc, out, err = run("check", HP2_BASE)
    check(rc == 0 and "\nverdict: serves (signature 'serving_default': " in out,
          "text verdict:\n%s" % out)

    # A model with no signature loads, but no request can reach it: check says so.
    nosig = os.path.join(tmp, "nosig")
    write_neg_model(nosig, [])
    rc, out, err = run("check", nosig)
    check(rc == 1 and "verdict: does not serve: the SavedModel has no signature" in out,
          "check on a model without signatures: rc %d\n%s%s" % (rc, out, err))
    # Only a signature 'predict': requests without a signature name fail; naming it serves.
    other = os.path.join(tmp, "other")
    write_neg_model(other, ["predict"])
    rc, out, err = run("check", "--json", other)
    j = json.loads(out)
    check(rc == 1 and j["serves"] is False and "no 'serving_default' signature" in j["verdict"]
          and "'predict'" in j["verdict"] and "--signature_name" in j["verdict"],
          "check on a model without serving_default: rc %d %s" % (rc, out))
    rc, out, err = run("check", "--signature_name", "predict", other)
    check(rc == 0 and "verdict: serves (signature 'predict': " in out,
          "check --signature_name predict: rc %d\n%s%s" % (rc, out, err))
    rc, out, err = run("check", "--signature_name", "nope", other)
    check(rc == 1 and "no signature 'nope'; the model has 'predict'" in out,
          "check --signature_name nope: rc %d\n%s%s" % (rc, out, err))

    # A function body that does not resolve fails only the signature that reaches it,
    # naming the op and the node; check lists it under the signature.
    unres_fn = os.path.join(tmp, "unresolved")
    write_unresolved_model(unres_fn)
    rc, out, err = run("check", unres_fn)
    check(rc == 0 and "verdict: serves (signature 'serving_default'" in out,
          "serving_default of the unresolved-body model: rc %d\n%s%s" % (rc, out, err))
    rc, out, err = run("check", "--signature_name", "fn", unres_fn)
    check(rc == 1 and "nodes that cannot run (1):" in out
          and "cannot resolve output 'nosuch' of op Neg (node 'call/n')" in out
          and "verdict: does not serve: signature 'fn': " in out,
          "check --signature_name fn: rc %d\n%s%s" % (rc, out, err))

    # A resource variable the signature reads and nothing restored: the load fails naming it.
    unres = os.path.join(tmp, "unrestored")
    write_unrestored_model(unres)
    rc, out, err = run("run", "--dir", unres, "--input_exprs", "x=[1.0]")
    check(rc != 0 and "1 variable read by the signature has no value after restore" in err
          and "'dense/kernel'" in err, "run on the unrestored model: rc %d %s" % (rc, err))
    rc, out, err = run("check", "--json", unres)
    j = json.loads(out)
    v = j["signatures"][0]["variables"]
    check(rc == 1 and v == [{"name": "dense/kernel", "restored": False, "value": ""}]
          and "dense/kernel" in j["verdict"], "check on the unrestored model: %s" % out)

    # show --list_ops (saved_model_cli's line) and show on a base directory.
    rc, out, err = run("show", "--dir", bad_base, "--tag_set", "serve", "--list_ops")
    check(rc == 0, "show --list_ops rc %d: %s" % (rc, err))
    want = ("The MetaGraph with tag set ['serve'] contains the following ops: "
            "{'AddV2', 'NoSuchOpA', 'NoSuchOpB', 'Placeholder'}")
    check(want in out, "show --list_ops:\n%s" % out)
    rc, out, err = run("show", "--dir", HP2_BASE, "--tag_set", "serve")
    check(rc == 0 and 'SignatureDef key: "serving_default"' in out, "show on a base dir:\n%s%s"
          % (out, err))

    # run on a base directory: half_plus_two, y = x / 2 + 2.
    rc, out, err = run("run", "--dir", HP2_BASE, "--signature_def", "serving_default",
                       "--input_exprs", "x=[[1],[4]]", "--outdir", os.path.join(tmp, "o"))
    check(rc == 0, "run on a base dir: rc %d %s" % (rc, err))
    import numpy as np
    y = np.load(os.path.join(tmp, "o", "y.npy"))
    check(np.allclose(y.ravel(), [2.5, 4.0]), "run y = %r" % y)

    # benchmark on the same base directory (its version folder is "00000123", not "123").
    rc, out, err = run("benchmark", "--dir", HP2_BASE, "--iterations", "2", "--warmup", "0")
    check(rc == 0 and "latency" in out, "benchmark on a base dir: rc %d %s%s" % (rc, out, err))

    # The daemon: 'bad' fails its load with the one message, 'good' serves.
    cfg = os.path.join(tmp, "models.config")
    with open(cfg, "w") as f:
        f.write('model_config_list { config { name: "bad" base_path: "%s" model_platform: '
                '"tensorflow" } config { name: "good" base_path: "%s" model_platform: '
                '"tensorflow" } }\n' % (bad_base, HP2_BASE))
    d = Daemon(["--model_config_file=" + cfg])
    try:
        import time
        msg = ""
        t0 = time.time()
        while time.time() - t0 < 60:
            try:
                r = d.stub.GetModelStatus(pb.tfs.GetModelStatusRequest(
                    model_spec=pb.tfs.ModelSpec(name="bad")), timeout=5)
            except Exception:  # not known yet
                time.sleep(0.1)
                continue
            msg = r.model_version_status[0].status.error_message if r.model_version_status else ""
            if msg:
                break
            time.sleep(0.1)
        check("2 unsupported ops: NoSuchOpA, NoSuchOpB" in msg and "'second_a'" in msg
              and "'b'" in msg, "GetModelStatus of 'bad': %r" % msg, d)
        req = pb.tfs.PredictRequest()
        req.model_spec.name = "good"
        req.inputs["x"].CopyFrom(float_tensor([2.0], [1, 1]))
        t0 = time.time()
        while True:
            try:
                resp = d.stub.Predict(req, timeout=10)
                break
            except Exception:
                if time.time() - t0 > 60:
                    raise
                time.sleep(0.1)
        check(abs(tensor_values(resp.outputs["y"])[0] - 3.0) < 1e-6, "good: y for x=2", d)
    finally:
        d.stop()
        d.close()

print("it_check: ok")
