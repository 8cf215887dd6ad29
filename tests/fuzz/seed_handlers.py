"""Seeds for fuzz_handlers: byte 0 picks the service (even: Predict, odd:
ModelInfer), the rest is a request for half_plus_two (x: float (-1, 1)), or
x given as large DT_STRING values (refused by the signature, after the tensor
conversion).
Usage: seed_handlers.py OUT_DIR"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from serve_client import float_tensor, gen_protos  # noqa: E402

pb = gen_protos()
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
seeds = {}
for i, (vals, shape, content) in enumerate((([1.0, 2.0, 5.0], [3, 1], False),
                                             ([1.0, 2.0], [2, 1], True), ([7.0], [4, 1], False))):
    q = pb.tfs.PredictRequest(model_spec=pb.tfs.ModelSpec(name="hpt", signature_name="serving_default"))
    q.inputs["x"].CopyFrom(float_tensor(vals, shape, content=content))
    seeds["predict%d" % i] = b"\0" + q.SerializeToString()
q = pb.tfs.PredictRequest(model_spec=pb.tfs.ModelSpec(name="hpt"))
q.inputs["x"].CopyFrom(float_tensor([1.0], [1, 1]))
q.output_filter.append("y")
seeds["predict_twice"] = b"\0" + q.SerializeToString() + pb.tfs.PredictRequest(
    model_spec=pb.tfs.ModelSpec(signature_name="serving_default")).SerializeToString()
# DT_STRING values of 16 KiB and more (a DICOM file's size class): the arena
# hands their chunks to the tensor uncopied (srv_pbarena_keep); one batch
# mixes a small value in, which is copied.
for name, sizes in (("predict_bytes", [20000]), ("predict_bytes_batch", [20000, 17000]),
                    ("predict_bytes_mixed", [20000, 10])):
    q = pb.tfs.PredictRequest(model_spec=pb.tfs.ModelSpec(name="hpt"))
    t = q.inputs["x"]
    t.dtype = pb.fw.DT_STRING
    t.tensor_shape.dim.add(size=len(sizes))
    t.string_val.extend(bytes([k % 251 for k in range(n)]) for n in sizes)
    seeds[name] = b"\0" + q.SerializeToString()
r = pb.ks.ModelInferRequest(model_name="hpt")
r.inputs.add(name="x", datatype="FP32", shape=[2, 1]).contents.fp32_contents.extend([1.0, 3.0])
seeds["infer_typed"] = b"\1" + r.SerializeToString()
r = pb.ks.ModelInferRequest(model_name="hpt")
r.inputs.add(name="x", datatype="FP32", shape=[1, 1])
r.raw_input_contents.append(b"\0\0\x80\x3f")
r.outputs.add(name="y")
seeds["infer_raw"] = b"\1" + r.SerializeToString()
for k, v in seeds.items():
    with open(os.path.join(out, k), "wb") as f:
        f.write(v)
