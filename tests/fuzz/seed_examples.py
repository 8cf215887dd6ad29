"""Seeds for fuzz_example and fuzz_rest_examples.
fuzz_example: byte 0 = op (bits 0-1) | defaults given (bit 2) | x width << 3,
byte 1 = batch size - 1, then tf.Example messages separated by 0xff, written
here field by field from the proto definition (Example.features = 1,
Features.feature = map entry 1 {key = 1, value = 2}, Feature: bytes_list = 1,
float_list = 2, int64_list = 3, each list's value = 1).
fuzz_rest_examples: byte 0 = regress (bit 0) | version 123 (bit 1), then a
:classify / :regress JSON body for half_plus_two's signatures.
Usage: seed_examples.py OUT_DIR (writes OUT_DIR/example, OUT_DIR/rest_examples)"""
import json
import os
import struct
import sys


def varint(v):
    out = bytearray()
    v &= (1 << 64) - 1
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def ld(field, payload):
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def feature(kind, values):
    if kind == "float":
        lst = ld(1, b"".join(struct.pack("<f", v) for v in values))  # packed
        return ld(2, lst)
    if kind == "int64":
        return ld(3, ld(1, b"".join(varint(v) for v in values)))
    return ld(1, b"".join(ld(1, v) for v in values))


def example(feats):
    body = b"".join(ld(1, ld(1, k.encode()) + ld(2, feature(kind, vals)))
                    for k, (kind, vals) in feats.items())
    return ld(1, body)


out = sys.argv[1]
ex_dir = os.path.join(out, "example")
rest_dir = os.path.join(out, "rest_examples")
os.makedirs(ex_dir, exist_ok=True)
os.makedirs(rest_dir, exist_ok=True)
e0 = example({"x": ("float", [1.5, -2.0]), "id": ("int64", [-3]), "s": ("bytes", [b"ab"])})
e1 = example({"x": ("float", [3.0, 4.0]), "s": ("bytes", [b"c"])})
seeds = {
    "pe_two": bytes([0 | 0 << 2 | 2 << 3, 1]) + e0 + b"\xff" + e1,
    "pe_dflt": bytes([0 | 1 << 2 | 2 << 3, 1]) + e0 + b"\xff" + e1,
    "pev2": bytes([1 | 1 << 2 | 2 << 3, 0]) + e0,
    "single": bytes([2 | 1 << 2 | 2 << 3, 0]) + e0,
}
for name, data in seeds.items():
    with open(os.path.join(ex_dir, name), "wb") as f:
        f.write(data)
bodies = {
    "classify": (0, {"signature_name": "classify_x_to_y", "examples": [{"x": 1.0}, {"x": 2.5}]}),
    "regress": (1, {"signature_name": "regress_x_to_y", "examples": [{"x": 1.0}]}),
    "regress_ctx": (3, {"signature_name": "regress_x_to_y", "context": {"x": 3.0},
                        "examples": [{}, {}]}),
    "regress_ints": (1, {"signature_name": "regress_x_to_y", "examples": [{"x": [1, 2]}]}),
    "classify_b64": (0, {"examples": [{"x": {"b64": "AAAA"}, "s": "t"}]}),
}
for name, (flags, doc) in bodies.items():
    with open(os.path.join(rest_dir, name), "wb") as f:
        f.write(bytes([flags]) + json.dumps(doc).encode())
