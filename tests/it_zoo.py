"""it_zoo: the standard-architecture SavedModels of ../shared/testdata/zoo
(README there), end to end with the real binary ($DCMSERVE).

Their checkpoints restore more than 256 tensors in one RestoreV2 (316 and
263). For each model: `dcmserve check` exits 0 saying why it serves (no
unsupported op, every variable it reads restored); the daemon serves it on
127.0.0.1; GetModelMetadata gives the serving_default signature; Predict
over gRPC and over REST (--rest_api_port) on the same batch of 2 inputs of
the signature's shape give finite outputs of the signature's shape, the same
over both APIs.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.request

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import Daemon, free_port, gen_protos, need_shared  # noqa: E402

DCMSERVE = os.environ["DCMSERVE"]
ZOO = need_shared("testdata/zoo")
BATCH = 2

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)
    return cond


def rest_predict(port, name, body):
    req = urllib.request.Request("http://127.0.0.1:%d/v1/models/%s:predict" % (port, name),
                                 data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return r.status, json.loads(r.read())


def sig_shape(ti):
    return [d.size for d in ti.tensor_shape.dim]


models = sorted(d for d in os.listdir(ZOO) if os.path.isfile(os.path.join(ZOO, d, "saved_model.pb")))
check(len(models) == 2, "expected the 2 models of the zoo README, found %s" % models)
pb = gen_protos()
rng = np.random.default_rng(29)
for name in models:
    model = os.path.join(ZOO, name)
    # check: the verdict and why
    p = subprocess.run([DCMSERVE, "check", "--dir", model], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=300)
    out = p.stdout
    check(p.returncode == 0 and "verdict: serves" in out,
          "%s: check rc=%d: %s %s" % (name, p.returncode, out[-300:], p.stderr[-300:]))
    check("unsupported ops (0)" in out, "%s: check does not say no op is unsupported" % name)
    m = re.search(r"variables read \((\d+), (\d+) restored\)", out)
    check(m is not None and m.group(1) == m.group(2) and int(m.group(1)) > 0,
          "%s: check does not say every variable read is restored: %s"
          % (name, m.group(0) if m else out[:300]))
    print("%s: check: %s" % (name, m.group(0) if m else "?"), flush=True)

    with tempfile.TemporaryDirectory() as base:
        os.symlink(os.path.abspath(model), os.path.join(base, "1"))
        rest = free_port()
        d = Daemon(["--model_name=" + name, "--model_base_path=" + base,
                    "--rest_api_port=%d" % rest])
        try:
            d.wait_health(timeout=120)
            mreq = pb.tfs.GetModelMetadataRequest()
            mreq.model_spec.name = name
            mreq.metadata_field.append("signature_def")
            meta = d.stub.GetModelMetadata(mreq, timeout=60)
            sdm = pb.tfs.SignatureDefMap.FromString(meta.metadata["signature_def"].value)
            sig = sdm.signature_def["serving_default"]
            check(len(sig.inputs) == 1 and len(sig.outputs) >= 1,
                  "%s: signature %s" % (name, sig))
            (ikey, iti), = sig.inputs.items()
            ishape = [BATCH if n < 0 else n for n in sig_shape(iti)]
            check(iti.dtype == pb.fw.DT_FLOAT, "%s: input dtype %d" % (name, iti.dtype))
            x = rng.random(ishape, dtype=np.float32)

            req = pb.tfs.PredictRequest()
            req.model_spec.name = name
            t = req.inputs[ikey]
            t.dtype = pb.fw.DT_FLOAT
            for n in x.shape:
                t.tensor_shape.dim.add(size=n)
            t.tensor_content = x.astype("<f4").tobytes()
            resp = d.stub.Predict(req, timeout=120)
            code, body = rest_predict(rest, name, {"inputs": {ikey: x.tolist()}})
            check(code == 200, "%s: REST predict %d" % (name, code))
            rest_out = body.get("outputs", {})
            if len(sig.outputs) == 1 and not isinstance(rest_out, dict):
                rest_out = {next(iter(sig.outputs)): rest_out}
            for okey, oti in sig.outputs.items():
                want = [BATCH if n < 0 else n for n in sig_shape(oti)]
                if not check(okey in resp.outputs, "%s: Predict has no output %s" % (name, okey)):
                    continue
                tp = resp.outputs[okey]
                got = (np.frombuffer(tp.tensor_content, dtype="<f4") if tp.tensor_content
                       else np.asarray(tp.float_val, dtype=np.float32))
                shape = [dd.size for dd in tp.tensor_shape.dim]
                check(shape == want and got.size == int(np.prod(want)),
                      "%s/%s: gRPC shape %s (%d values), signature says %s"
                      % (name, okey, shape, got.size, want))
                check(bool(np.all(np.isfinite(got))), "%s/%s: non-finite gRPC output" % (name, okey))
                r = np.asarray(rest_out.get(okey), dtype=np.float64)
                check(list(r.shape) == want, "%s/%s: REST shape %s, signature says %s"
                      % (name, okey, list(r.shape), want))
                if r.shape == got.reshape(shape).shape:
                    err = float(np.max(np.abs(r - got.reshape(shape))))
                    check(err <= 1e-5, "%s/%s: gRPC and REST differ by %g" % (name, okey, err))
                print("%s/%s: shape %s, finite, gRPC == REST" % (name, okey, shape), flush=True)
        except Exception as e:  # a failed call is a failure of this model, not of the test
            check(False, "%s: %s\n%s" % (name, e, d.log_tail()))
        finally:
            d.stop()
            d.close()

if failures:
    print("it_zoo: %d failure(s)" % len(failures))
    sys.exit(1)
print("it_zoo: ok")
