#!/usr/bin/python3
"""Seeds for fuzz_rest_http: one connection's bytes each, for the model
"hpt" (half_plus_two) the target serves: TF Serving and KServe v2 routes,
keep-alive and pipelined requests, chunked bodies with a trailer, HTTP/1.0,
Expect: 100-continue, and bad framing. Usage: seed_rest_http.py OUT_DIR"""
import os
import sys


def req(method, path, body=None, headers=(), version="HTTP/1.1", length=True):
    h = ["%s %s %s" % (method, path, version), "Host: 127.0.0.1"] + list(headers)
    if body is not None and length:
        h.append("Content-Length: %d" % len(body))
    return ("\r\n".join(h) + "\r\n\r\n").encode() + (body or b"")


def chunked(body, sizes):
    out, i = b"", 0
    for n in sizes:
        out += b"%x\r\n" % n + body[i:i + n] + b"\r\n"
        i += n
    return out + b"%x\r\n" % (len(body) - i) + body[i:] + b"\r\n0\r\nX-Trailer: 1\r\n\r\n"


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    pred = b'{"instances": [1.0, 2.0, 5.0]}'
    v2 = b'{"inputs": [{"name": "x", "shape": [2, 1], "datatype": "FP32", "data": [1, 2]}]}'
    v2h = b'{"inputs": [{"name": "x", "shape": [2, 1], "datatype": "FP32", ' \
          b'"parameters": {"binary_data_size": 8}}]}'
    json = ["Content-Type: application/json"]
    seeds = {
        "predict": req("POST", "/v1/models/hpt:predict", pred, json),
        "predict_cols": req("POST", "/v1/models/hpt/versions/123:predict",
                            b'{"signature_name": "serving_default", "inputs": {"x": [[1.0], [2.0]]}}'),
        "predict_chunked": req("POST", "/v1/models/hpt:predict", None,
                               ["Transfer-Encoding: chunked"]) + chunked(pred, [7, 11]),
        "classify": req("POST", "/v1/models/hpt:classify", b'{"examples": [{"x": 1.0}, {"x": 2.0}]}'),
        "regress_http10": req("POST", "/v1/models/hpt:regress", b'{"examples": [{"x": 3}]}',
                              version="HTTP/1.0"),
        "v2_infer": req("POST", "/v2/models/hpt/infer", v2),
        "v2_binary": req("POST", "/v2/models/hpt/infer",
                         v2h + b"\x00\x00\x80\x3f\x00\x00\x00\x40",
                         ["Inference-Header-Content-Length: %d" % len(v2h)]),
        "gets": b"".join(req("GET", p) for p in
                         ["/v1/models/hpt", "/v1/models/hpt/metadata", "/v2/health/ready",
                          "/v2/health/live", "/v2", "/v2/models/hpt", "/v2/models/hpt/ready"]) +
                req("GET", "/metrics", headers=["Connection: close"]),
        "pipelined": req("POST", "/v1/models/hpt:predict", pred) + req("POST", "/v1/models/hpt:predict", pred),
        "expect": req("POST", "/v1/models/hpt:predict", pred, ["Expect: 100-continue"]),
        "bad_length": req("POST", "/v1/models/hpt:predict", None,
                          ["Content-Length: 99999999999999999999"]) + b"{}",
        "both_framings": req("POST", "/v1/models/hpt:predict", None,
                             ["Content-Length: 4", "Transfer-Encoding: chunked"]) + b"2\r\n{}\r\n0\r\n\r\n",
        "options": req("OPTIONS", "/v1/models/hpt:predict", headers=["Origin: http://a"]),
        "partial": b"POST /v1/models/hpt:predict HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"inst",
    }
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
