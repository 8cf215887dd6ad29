#!/usr/bin/python3
"""Seeds for fuzz_model_folder: every SavedModel version folder found under
the given roots, packed as the target reads its input (saved_model.pb,
variables.index, the first variables data shard and the first asset file,
joined by "=DCMFZ=\\n"). Folders over 256 KiB in all are skipped.
Usage: seed_model_folder.py OUT_DIR ROOT..."""
import glob
import os
import sys

SEP = b"=DCMFZ=\n"


def read(path):
    if path is None or not os.path.isfile(path):
        return b""
    with open(path, "rb") as f:
        return f.read()


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    n = 0
    for root in sys.argv[2:]:
        for pb in sorted(glob.glob(os.path.join(root, "**", "saved_model.pb"), recursive=True)):
            d = os.path.dirname(pb)
            shards = sorted(glob.glob(os.path.join(d, "variables", "variables.data-*")))
            assets = sorted(p for p in glob.glob(os.path.join(d, "assets", "*")) if os.path.isfile(p))
            parts = [read(pb), read(os.path.join(d, "variables", "variables.index")),
                     read(shards[0] if shards else None), read(assets[0] if assets else None)]
            blob = SEP.join(parts)
            if len(blob) > 256 << 10:
                continue
            name = os.path.relpath(d, root).replace(os.sep, "_") or "model"
            with open(os.path.join(out, "%s_%s" % (os.path.basename(os.path.normpath(root)), name)), "wb") as f:
                f.write(blob)
            n += 1
    print("seed_model_folder: %d seeds in %s" % (n, out))


if __name__ == "__main__":
    main()
