"""it_serve_rest_json: REST :predict looks the model up before it parses the
body, and charges cJSON's parse tree to the request's memory budget before
parsing (issue 33, F1).

- a body that is not JSON for a model we do not serve: 404 naming the model
  (the code before parsed first and answered 400 "JSON Parse error");
- {"instances": [0,0,...]} with 2,000,000 values (4 MB of body, a parse tree of
  about 160 MB) under --max_request_memory_bytes=67108864: 413 naming the flag,
  before the tree is built (the code before built it and ran the model);
- half_plus_two then answers as before.
"""
import http.client
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import HPT, Daemon, check, free_port  # noqa: E402


def post(port, path, data):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("POST", path, data, {"Content-Type": "application/json"})
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, body


def main():
    rest = free_port()
    d = Daemon(["--model_name=hpt", "--model_base_path=" + HPT, "--rest_api_port=%d" % rest,
                "--max_request_memory_bytes=67108864"])
    try:
        d.wait_health()  # the model loads after the port opens
        code, body = post(rest, "/v1/models/nosuch:predict", b"{not json" + b"0," * 1000)
        check(code == 404 and b"nosuch" in body,
              "unknown model with a body that is not JSON: 404 before parsing (got %s %r)"
              % (code, body[:200]))
        big = b'{"instances": [' + b"0," * 1999999 + b"0]}"
        code, body = post(rest, "/v1/models/hpt:predict", big)
        check(code == 413 and b"--max_request_memory_bytes" in body,
              "2,000,000 values under a 64 MiB budget: 413 naming the flag (got %s %r)"
              % (code, body[:300]))
        code, body = post(rest, "/v1/models/hpt:predict", json.dumps({"instances": [1.0, 2.0]}))
        check(code == 200 and json.loads(body)["predictions"] == [2.5, 3.0],
              "half_plus_two answers after: %s %r" % (code, body[:200]))
    finally:
        d.close()
    print("it_serve_rest_json: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
