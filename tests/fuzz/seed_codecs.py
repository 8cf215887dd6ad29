#!/usr/bin/python3
"""Seed corpus for fuzz_codecs from check_codecs' frame manifests.
Usage: seed_codecs.py OUTDIR MANIFEST_DIR..."""
import os
import struct
import sys

PHOT = {"MONOCHROME2": 0, "RGB": 1, "YBR_FULL": 2, "YBR_FULL_422": 3}
BITS = {8: 0, 16: 1, 32: 2, 1: 3}
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for d in sys.argv[2:]:
    for line in open(os.path.join(d, "manifest.tsv")):
        f = line.rstrip("\n").split("\t")
        if len(f) < 15:
            continue
        name, kind, rows, cols, spp, ba, bs, prep = f[0], *map(int, f[1:8])
        hdr = struct.pack("<BHHBBBBB", kind, rows - 1, cols - 1, spp == 3, BITS[ba], bs - 1,
                          prep, PHOT.get(f[9], 0))
        with open(os.path.join(d, f[12]), "rb") as src:
            frame = src.read()
        if len(frame) < 200_000:
            with open(os.path.join(out, name + "_" + f[12]), "wb") as dst:
                dst.write(hdr + frame)
