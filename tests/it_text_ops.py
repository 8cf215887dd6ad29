"""it_text_ops: a SavedModel that takes raw text serves (issue 29, text ops).

The graph, written here with the project's protos (no TensorFlow), is the
kind of preprocessing an exported text model carries: text -> StringLower ->
StringStrip -> StaticRegexReplace (punctuation out) -> StringSplitV2 (words,
sparse), and beside it StringLength (UTF8_CHAR), StaticRegexFullMatch,
Substr, StringJoin, Unique of the words and StringToHashBucketFast of a
second input. The expected values are worked out here in Python from
TensorFlow's documented semantics (str.lower / str.strip / str.split for
ASCII, re.sub / re.fullmatch on these patterns, which behave the same in RE2
and Python), and the hash buckets of "Hello", "TensorFlow", "2.x" are the
example of tf.strings.to_hash_bucket_fast's page ([0, 2, 2]).

It is served over gRPC and REST; `dcmserve check` says it serves. A second
model whose StaticRegexReplace uses a backreference (RE2 has none) is refused
by `check` naming the node, the op and the feature.
"""
import base64
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import DCMSERVE, Daemon, check, free_port, gen_protos  # noqa: E402

pb = gen_protos()
S, I32, I64 = pb.fw.DT_STRING, pb.fw.DT_INT32, pb.fw.DT_INT64
TEXT = ["  Hello, World!  ", "hello again... HELLO", "\u00c9t\u00e9 caf\u00e9!"]
KEYS = ["Hello", "TensorFlow", "2.x"]


def write_model(d, pattern=r"[[:punct:]]"):
    os.makedirs(d, exist_ok=True)
    sm = pb.sm.SavedModel(saved_model_schema_version=1)
    mg = sm.meta_graphs.add()
    mg.meta_info_def.tags.append("serve")
    g = mg.graph_def

    def node(name, op, inputs=(), **attrs):
        n = g.node.add(name=name, op=op)
        n.input.extend(inputs)
        for k, v in attrs.items():
            if isinstance(v, bool):
                n.attr[k].b = v
            elif isinstance(v, int) and k in ("num_buckets", "maxsplit", "N"):
                n.attr[k].i = v
            elif isinstance(v, int):
                n.attr[k].type = v
            else:
                n.attr[k].s = v.encode()
        return n

    def const(name, dtype, vals):
        n = node(name, "Const", dtype=dtype)
        t = n.attr["value"].tensor
        t.dtype = dtype
        if dtype == S:
            t.string_val.extend(v.encode() for v in vals)
        else:
            t.int_val.extend(vals)
        return n

    node("text", "Placeholder", dtype=S)
    node("keys", "Placeholder", dtype=S)
    node("lower", "StringLower", ["text"], encoding="")
    node("strip", "StringStrip", ["lower"])
    node("clean", "StaticRegexReplace", ["strip"], pattern=pattern, rewrite="",
         replace_global=True)
    const("sep", S, [""])
    node("split", "StringSplitV2", ["clean", "sep"], maxsplit=-1)
    node("len", "StringLength", ["clean"], unit="UTF8_CHAR")
    node("match", "StaticRegexFullMatch", ["clean"], pattern=r"hello\s.*")
    const("pos", I32, [0])
    const("n", I32, [3])
    node("sub", "Substr", ["clean", "pos", "n"], T=I32, unit="BYTE")
    const("bang", S, ["!"])
    node("join", "StringJoin", ["clean", "bang"], N=2, separator="")
    node("uniq", "Unique", ["split:1"], T=S, out_idx=I32)
    node("hash", "StringToHashBucketFast", ["keys"], num_buckets=3)
    sig = mg.signature_def["serving_default"]
    sig.method_name = "tensorflow/serving/predict"
    for k in ("text", "keys"):
        sig.inputs[k].name = k + ":0"
        sig.inputs[k].dtype = S
    outs = {"words": ("split:1", S), "shape": ("split:2", I64), "len": ("len:0", I32),
            "match": ("match:0", pb.fw.DT_BOOL), "sub": ("sub:0", S), "join": ("join:0", S),
            "uniq": ("uniq:0", S), "idx": ("uniq:1", I32), "hash": ("hash:0", I64)}
    for k, (name, dt) in outs.items():
        sig.outputs[k].name = name
        sig.outputs[k].dtype = dt
    with open(os.path.join(d, "saved_model.pb"), "wb") as f:
        f.write(sm.SerializeToString())


def expected():
    clean = [re.sub(r"[!-/:-@\[-`{-~]", "", t.encode().lower().decode().strip(" \t\n\v\f\r"))
             for t in TEXT]
    # bytes.lower() is ASCII-only, as StringLower with encoding "" is
    words = [w for c in clean for w in c.split()]
    uniq = list(dict.fromkeys(words))
    return {
        "words": words,
        "shape": [len(TEXT), max(len(c.split()) for c in clean)],
        "len": [len(c) for c in clean],
        "match": [re.fullmatch(r"hello\s.*", c) is not None for c in clean],
        "sub": [c.encode()[:3].decode("utf-8", "replace") for c in clean],
        "join": [c + "!" for c in clean],
        "uniq": uniq,
        "idx": [uniq.index(w) for w in words],
        "hash": [0, 2, 2],
    }


def rest_value(v):
    """A REST output value; strings that are not ASCII come as {"b64": ...}."""
    if isinstance(v, list):
        return [rest_value(x) for x in v]
    if isinstance(v, dict) and list(v) == ["b64"]:
        return base64.b64decode(v["b64"]).decode()
    return v


def grpc_values(tp):
    if tp.dtype == S:
        return [v.decode() for v in tp.string_val]
    if tp.dtype == pb.fw.DT_BOOL:
        return list(tp.bool_val)
    if tp.dtype == I32:
        return list(tp.int_val)
    return list(tp.int64_val)


def main():
    want = expected()
    # the first three bytes of each cleaned string are ASCII here, so sub compares as text
    check(all(len(s.encode()) == 3 for s in want["sub"]), "test data: ASCII prefixes")
    with tempfile.TemporaryDirectory(prefix="it_text_ops_") as tmp:
        base = os.path.join(tmp, "text")
        write_model(os.path.join(base, "1"))
        p = subprocess.run([DCMSERVE, "check", base], capture_output=True, text=True, timeout=60)
        check(p.returncode == 0 and "serves" in p.stdout, "check: %s%s" % (p.stdout, p.stderr))
        bad = os.path.join(tmp, "bad")
        write_model(os.path.join(bad, "1"), pattern=r"(\w)\1")
        p = subprocess.run([DCMSERVE, "check", bad], capture_output=True, text=True, timeout=60)
        out = p.stdout + p.stderr
        check(p.returncode != 0 and "clean" in out and "StaticRegexReplace" in out and
              "backreference" in out, "check of a backreference: %s" % out)

        rest = free_port()
        d = Daemon(["--model_name=text", "--model_base_path=" + base,
                    "--rest_api_port=%d" % rest])
        try:
            d.wait_health()  # the model loads after the port opens
            req = pb.tfs.PredictRequest()
            req.model_spec.name = "text"
            for k, vals in (("text", TEXT), ("keys", KEYS)):
                req.inputs[k].dtype = S
                req.inputs[k].tensor_shape.dim.add(size=len(vals))
                req.inputs[k].string_val.extend(v.encode() for v in vals)
            resp = d.stub.Predict(req, timeout=30)
            for k, v in want.items():
                got = grpc_values(resp.outputs[k])
                check(got == v, "gRPC %s: %r, expected %r" % (k, got, v), d)
            c = http.client.HTTPConnection("127.0.0.1", rest, timeout=30)
            c.request("POST", "/v1/models/text:predict",
                      json.dumps({"inputs": {"text": TEXT, "keys": KEYS}}),
                      {"Content-Type": "application/json"})
            r = c.getresponse()
            body = r.read()
            c.close()
            check(r.status == 200, "REST status %d: %s" % (r.status, body[:300]), d)
            outs = json.loads(body)["outputs"]
            for k, v in want.items():
                got = rest_value(outs[k])
                check(got == v, "REST %s: %r, expected %r" % (k, got, v), d)
        finally:
            d.close()
    print("it_text_ops: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
