"""it_ops_doc: docs/ops.md is exactly what `dcmserve ops` prints from the op
registry; the test fails when the committed file is stale (regenerate with
`build/dcmserve ops > docs/ops.md`)."""
import difflib
import os
import subprocess
import sys

DCMSERVE = os.environ["DCMSERVE"]
SRC = os.environ.get("DCM_SRC", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

got = subprocess.run([DCMSERVE, "ops"], stdout=subprocess.PIPE, check=True, text=True,
                     timeout=60).stdout
with open(os.path.join(SRC, "docs", "ops.md")) as f:
    have = f.read()
if got != have:
    diff = "".join(difflib.unified_diff(have.splitlines(True), got.splitlines(True),
                                        "docs/ops.md", "dcmserve ops", n=1))
    print("it_ops_doc: docs/ops.md is stale; regenerate with `build/dcmserve ops > docs/ops.md`\n"
          + diff[:4000])
    sys.exit(1)
if "| `StatelessWhile` |" not in got or "| `Conv2D` |" not in got:
    print("it_ops_doc: the listing lacks StatelessWhile or Conv2D:\n" + got[:2000])
    sys.exit(1)
# The "used by" column comes from the op-family table: a family's ops carry its
# architectures, an op of no family an empty cell.
rows = {l.split("|")[1].strip(" `"): [c.strip() for c in l.split("|")[2:-1]]
        for l in got.splitlines() if l.startswith("| `")}
checks = [("DepthwiseConv2dNative", "MobileNet"), ("Einsum", "ViT"), ("RFFT", "YAMNet"),
          ("TensorArraySplitV3", "TF1"), ("CombinedNonMaxSuppression", "YOLO")]
for op, arch in checks:
    if op not in rows or len(rows[op]) != 3 or arch not in rows[op][2]:
        print("it_ops_doc: the row of %s lacks '%s' in its used-by column: %r"
              % (op, arch, rows.get(op)))
        sys.exit(1)
if rows.get("Cast", [None, None, "x"])[2] != "":
    print("it_ops_doc: Cast is in no family but its used-by cell is %r" % (rows.get("Cast"),))
    sys.exit(1)
print("it_ops_doc: ok (%d lines)" % len(got.splitlines()))
