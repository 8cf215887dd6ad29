#!/usr/bin/python3
"""Send a folder of DICOM files to dcmserve's demo model (models/demo_ct) with
grpcio, through TensorFlow Serving's Predict and through KServe v2 ModelInfer,
and print each file's mean HU and tissue fractions.

    scripts/gen_python_stubs.sh /tmp/dcm_stubs          # once: message classes + stubs
    PYTHONPATH=/tmp/dcm_stubs examples/python/predict_dicom.py FOLDER_OR_FILE...
        [--target localhost:8500] [--model demo_ct] [--api predict|infer|both] [--json]

A folder contributes every file in it (not its subfolders) that has the DICOM
Part 10 marker "DICM" at byte 128; a file named on the command line is sent as
it is. All files go in one request: the model's input "dicom" is a 1-D string
tensor, one whole file per element (docs/demo.md). With --json each API prints
one JSON object per line: {"api", "file", "mean_hu", "tissue_fraction"}.
Needs only grpcio and protobuf (Debian: python3-grpcio, python3-protobuf).
"""
import argparse
import json
import os
import struct
import sys

import grpc

try:
    import inference_service_pb2_grpc
    import kserve_pb2
    import prediction_service_pb2_grpc
    import tf_framework_pb2
    import tf_serving_pb2
except ImportError as e:
    sys.exit("predict_dicom.py: %s: generate the stubs with scripts/gen_python_stubs.sh DIR "
             "and put DIR on PYTHONPATH" % e)


def dicom_files(paths):
    """Files named on the command line, and the DICOM files of named folders."""
    out = []
    for p in paths:
        if os.path.isdir(p):
            for name in sorted(os.listdir(p)):
                f = os.path.join(p, name)
                if os.path.isfile(f):
                    with open(f, "rb") as fh:
                        head = fh.read(132)
                    if head[128:132] == b"DICM":
                        out.append(f)
        else:
            out.append(p)
    return out


def tf_floats(tp):
    """A float TensorProto as (flat list, shape); values in tensor_content or float_val."""
    shape = [d.size for d in tp.tensor_shape.dim]
    if tp.dtype != tf_framework_pb2.DT_FLOAT:
        raise ValueError("expected DT_FLOAT, got dtype %d" % tp.dtype)
    if tp.tensor_content:
        n = len(tp.tensor_content) // 4
        return list(struct.unpack("<%df" % n, tp.tensor_content)), shape
    return list(tp.float_val), shape


def predict(channel, model, blobs, timeout):
    """TF Serving Predict: returns {output name: (flat values, shape)}."""
    req = tf_serving_pb2.PredictRequest()
    req.model_spec.name = model
    req.model_spec.signature_name = "serving_default"
    t = req.inputs["dicom"]
    t.dtype = tf_framework_pb2.DT_STRING
    t.tensor_shape.dim.add(size=len(blobs))
    t.string_val.extend(blobs)
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    resp = stub.Predict(req, timeout=timeout)
    return {k: tf_floats(v) for k, v in resp.outputs.items()}


def infer(channel, model, blobs, timeout):
    """KServe v2 ModelInfer: returns {output name: (flat values, shape)}."""
    req = kserve_pb2.ModelInferRequest(model_name=model)
    t = req.inputs.add(name="dicom", datatype="BYTES", shape=[len(blobs)])
    t.contents.bytes_contents.extend(blobs)
    stub = inference_service_pb2_grpc.GRPCInferenceServiceStub(channel)
    resp = stub.ModelInfer(req, timeout=timeout)
    out = {}
    for i, o in enumerate(resp.outputs):
        if o.datatype != "FP32":
            raise ValueError("%s: expected FP32, got %s" % (o.name, o.datatype))
        if i < len(resp.raw_output_contents):   # the binary form, little-endian
            raw = resp.raw_output_contents[i]
            values = list(struct.unpack("<%df" % (len(raw) // 4), raw))
        else:
            values = list(o.contents.fp32_contents)
        out[o.name] = (values, list(o.shape))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", help="DICOM files and folders of them")
    ap.add_argument("--target", default="localhost:8500", help="dcmserve's gRPC address")
    ap.add_argument("--model", default="demo_ct")
    ap.add_argument("--api", choices=("predict", "infer", "both"), default="both")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per call")
    ap.add_argument("--json", action="store_true", help="one JSON object per file and API")
    args = ap.parse_args()

    files = dicom_files(args.paths)
    if not files:
        sys.exit("predict_dicom.py: no DICOM files in %s" % " ".join(args.paths))
    blobs = []
    for f in files:
        with open(f, "rb") as fh:
            blobs.append(fh.read())

    # Requests carry whole files: allow messages beyond gRPC's 4 MiB default.
    channel = grpc.insecure_channel(args.target, options=[
        ("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)])
    apis = ("predict", "infer") if args.api == "both" else (args.api,)
    for api in apis:
        call = predict if api == "predict" else infer
        try:
            out = call(channel, args.model, blobs, args.timeout)
        except grpc.RpcError as e:
            sys.exit("predict_dicom.py: %s: %s: %s" % (api, e.code().name, e.details()))
        mean, _ = out["mean_hu"]
        frac, _ = out["tissue_fraction"]
        for i, f in enumerate(files):
            row = [round(x, 6) for x in frac[4 * i:4 * i + 4]]
            if args.json:
                print(json.dumps({"api": api, "file": f, "mean_hu": mean[i],
                                  "tissue_fraction": frac[4 * i:4 * i + 4]}))
            else:
                print("%-7s %s: mean_hu %.3f  tissue_fraction (air, fat/water, soft, bone) %s"
                      % (api, f, mean[i], row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
