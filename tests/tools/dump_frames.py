#!/usr/bin/python3
"""Writes compressed DICOM frames and their reference pixels for check_codecs.

Usage: dump_frames.py OUTDIR

For every encapsulated file in Debian's pydicom test data, each frame's bytes
(pydicom.encaps.generate_pixel_data_frame) go to OUTDIR/<name>.f<i>.bin and the
reference pixels from pydicom's pixel_array (pydicom 2.3.1 with the GDCM
handler) to OUTDIR/<name>.f<i>.ref, in the layout dcm_codec_decode writes:
row-major, samples interleaved, little-endian, 1/2/4 bytes per sample by
BitsAllocated, values masked to BitsStored (pydicom does not mask and returns
signed values). pydicom + GDCM returns JPEG YCbCr unconverted; for those the
reference is converted here to RGB with the float formulas of PS3.3
C.7.6.3.1.2, and the test expects the codec to report the conversion.

Tolerance -1 marks a stream that is corrupt on purpose: decoding must fail.
One line per frame goes to OUTDIR/manifest.tsv:
name kind rows cols samples bits_allocated bits_stored pixel_rep planar
photometric tolerance expect_rgb frame_file ref_file source
"""
import glob
import os
import sys
import warnings

import numpy as np
import pydicom
from pydicom.encaps import generate_pixel_data_frame

warnings.filterwarnings("ignore")

# dcm_codec_kind values of runtime/dicom/dcm_codec.h.
KIND = {
    "1.2.840.10008.1.2.4.50": 1, "1.2.840.10008.1.2.4.51": 2,
    "1.2.840.10008.1.2.4.57": 3, "1.2.840.10008.1.2.4.70": 3,
    "1.2.840.10008.1.2.4.80": 4, "1.2.840.10008.1.2.4.81": 4,
    "1.2.840.10008.1.2.4.90": 5, "1.2.840.10008.1.2.4.91": 5,
    "1.2.840.10008.1.2.4.201": 5, "1.2.840.10008.1.2.4.202": 5, "1.2.840.10008.1.2.4.203": 5,
    "1.2.840.10008.1.2.5": 6,
}
DATA = os.path.join(os.path.dirname(pydicom.__file__), "data", "test_files")


def ybr_to_rgb(a, bits):
    """PS3.3 C.7.6.3.1.2 YBR_FULL -> RGB, rounded to nearest, clamped."""
    c = float(1 << (bits - 1))
    y, cb, cr = (a[..., i].astype(np.float64) for i in range(3))
    r = y + 1.402 * (cr - c)
    g = y - 0.344136286 * (cb - c) - 0.714136286 * (cr - c)
    b = y + 1.772 * (cb - c)
    out = np.stack([r, g, b], axis=-1)
    return np.clip(np.floor(out + 0.5), 0, (1 << bits) - 1).astype(np.int64)


def j2k_uses_mct(cs):
    """1 when the main header's COD marker enables the multiple component transform."""
    i = cs.find(b"\xff\x52")
    return 1 if i >= 0 and i + 9 <= len(cs) and cs[i + 8] != 0 else 0


# Frames whose stream is corrupt on purpose: the codec must refuse them (pydicom
# + GDCM returns a mostly zero image for this one, see the file's name).
EXPECT_ERROR = {"JPEG2000-embedded-sequence-delimiter"}


def width_dtype(ba):
    return {8: "<u1", 16: "<u2", 32: "<u4"}[ba]


def write_ref(path, arr, ba, bs):
    v = arr.astype(np.int64) & ((1 << bs) - 1)
    v.astype(width_dtype(ba)).tofile(path)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    lines = []
    for path in sorted(glob.glob(os.path.join(DATA, "*.dcm"))):
        try:
            ds = pydicom.dcmread(path)
            ts = str(ds.file_meta.TransferSyntaxUID)
        except Exception:
            continue
        if ts not in KIND or "PixelData" not in ds:
            continue
        name = os.path.basename(path)[:-4]
        nf = int(getattr(ds, "NumberOfFrames", 1) or 1)
        # Header values first: pydicom's GDCM handler may rewrite some of them.
        rows, cols, spp = ds.Rows, ds.Columns, ds.SamplesPerPixel
        ba, bs, prep = ds.BitsAllocated, ds.BitsStored, ds.PixelRepresentation
        planar = int(getattr(ds, "PlanarConfiguration", 0))
        phot = str(ds.PhotometricInterpretation)
        try:
            arr = ds.pixel_array
        except Exception as e:  # no reference: reported by the C test as skipped
            print(f"dump_frames: {name}: pydicom cannot decode: {e}", file=sys.stderr)
            continue
        arr = arr.reshape(nf, rows, cols, spp)
        kind = KIND[ts]
        tol = 1 if kind in (1, 2) else 0
        expect_rgb = 0
        if kind in (1, 2) and spp == 3 and phot.startswith("YBR_FULL"):
            expect_rgb = 1
            arr = ybr_to_rgb(arr, 8 if ba == 8 else 12)
        frames = list(generate_pixel_data_frame(ds.PixelData, nf))
        for i, fr in enumerate(frames):
            if kind == 5 and spp == 3:
                expect_rgb = j2k_uses_mct(fr)
            t = -1 if name in EXPECT_ERROR else tol
            fb, rf = f"{name}.f{i}.bin", f"{name}.f{i}.ref"
            with open(os.path.join(out, fb), "wb") as f:
                f.write(fr)
            write_ref(os.path.join(out, rf), arr[i], ba, bs)
            lines.append("\t".join(str(x) for x in (
                name, kind, rows, cols, spp, ba, bs, prep, planar, phot, t, expect_rgb, fb, rf,
                "pydicom+gdcm")))
    with open(os.path.join(out, "manifest.tsv"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"dump_frames: {len(lines)} frames in {out}")


if __name__ == "__main__":
    main()
