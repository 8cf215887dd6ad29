#!/usr/bin/python3
"""Makes compressed frames with independent encoders for check_codecs.

Usage: gen_streams.py OUTDIR

Known native images (pydicom's CT_small / MR_small / RGB test images and a few
synthetic ones at odd sizes and bit depths) are compressed by
  - GDCM's gdcmconv (libgdcm-tools): JPEG lossless SV1 (-J), 12-bit and 8-bit
    lossy JPEG (-J -Y), JPEG-LS lossless and near-lossless (-L [-Y -e N]),
    JPEG 2000 lossless and irreversible (-K [--irreversible]), RLE (-R);
  - OpenJPH's ojph_compress (openjph-tools): HTJ2K lossless (reference: the
    original) and irreversible (reference: OpenJPH's ojph_expand, within 1
    at <= 12 bits and 4 at 16 bits: two different float 9/7 implementations);
  - enc_lossless() below: a JPEG lossless (process 14) encoder covering
    predictors 1-7, point transform, restart intervals and separate scans,
    whose output is first checked to decode to the original in pydicom + GDCM.
The reference is the original image for lossless streams (for near-lossless
JPEG-LS with tolerance NEAR), and pydicom + GDCM's decode for lossy ones.
Output: frame/ref files and OUTDIR/manifest.tsv as in dump_frames.py.
"""
import os
import subprocess
import sys
import warnings

import numpy as np
import pydicom
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.encaps import encapsulate, generate_pixel_data_frame
from pydicom.uid import ExplicitVRLittleEndian, generate_uid

warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dump_frames import DATA, KIND, write_ref  # noqa: E402

OUT = sys.argv[1]
LINES = []


def native_ds(arr, bs, signed, phot):
    """A minimal native Explicit VR LE secondary-capture dataset for arr."""
    rows, cols = arr.shape[:2]
    spp = 1 if arr.ndim == 2 else arr.shape[2]
    ba = 8 if bs <= 8 else 16
    ds = Dataset()
    ds.file_meta = FileMetaDataset()
    ds.file_meta.MediaStorageSOPClassUID = "1.2.840.10008.5.1.4.1.1.7"
    ds.file_meta.MediaStorageSOPInstanceUID = generate_uid()
    ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds.SOPClassUID = ds.file_meta.MediaStorageSOPClassUID
    ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID
    ds.Modality = "OT"
    ds.Rows, ds.Columns, ds.SamplesPerPixel = rows, cols, spp
    ds.BitsAllocated, ds.BitsStored, ds.HighBit = ba, bs, bs - 1
    ds.PixelRepresentation = 1 if signed else 0
    ds.PhotometricInterpretation = phot
    if spp == 3:
        ds.PlanarConfiguration = 0
    dt = {(8, 0): "<u1", (8, 1): "<i1", (16, 0): "<u2", (16, 1): "<i2"}[(ba, int(signed))]
    ds.PixelData = arr.astype(dt).tobytes()
    ds.is_little_endian, ds.is_implicit_VR = True, False
    return ds


def add(name, ds_c, frame, ref, tol, source, expect_rgb=0):
    """Records one frame: ds_c gives the header, ref the expected pixels."""
    kind = KIND[str(ds_c.file_meta.TransferSyntaxUID)]
    fb, rf = name + ".bin", name + ".ref"
    with open(os.path.join(OUT, fb), "wb") as f:
        f.write(frame)
    write_ref(os.path.join(OUT, rf), ref, ds_c.BitsAllocated, ds_c.BitsStored)
    LINES.append("\t".join(str(x) for x in (
        name, kind, ds_c.Rows, ds_c.Columns, ds_c.SamplesPerPixel, ds_c.BitsAllocated,
        ds_c.BitsStored, ds_c.PixelRepresentation, int(getattr(ds_c, "PlanarConfiguration", 0)),
        ds_c.PhotometricInterpretation, tol, expect_rgb, fb, rf, source)))


def gdcmconv(name, ds, args):
    src, dst = os.path.join(OUT, name + ".in.dcm"), os.path.join(OUT, name + ".out.dcm")
    ds.save_as(src, write_like_original=False)
    r = subprocess.run(["gdcmconv", *args, src, dst], capture_output=True)
    os.remove(src)
    if r.returncode != 0:
        print(f"gen_streams: gdcmconv {' '.join(args)} failed on {name} (skipped)",
              file=sys.stderr)
        return None
    return pydicom.dcmread(dst)


def first_frame(ds):
    return next(generate_pixel_data_frame(ds.PixelData, 1))


# ---- a small JPEG lossless encoder (ITU T.81 Annex H) ----

# A fixed prefix code for the 17 difference categories, most frequent first.
HUFF_COUNTS = [0, 1, 3, 3, 3, 3, 4] + [0] * 9          # code lengths 1..16
HUFF_ORDER = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]


def huff_codes():
    codes, code, k = {}, 0, 0
    for length, n in enumerate(HUFF_COUNTS, start=1):
        for _ in range(n):
            codes[HUFF_ORDER[k]] = (code, length)
            code, k = code + 1, k + 1
        code <<= 1
    return codes


class BitWriter:
    def __init__(self):
        self.out, self.acc, self.n = bytearray(), 0, 0

    def put(self, v, n):
        for i in range(n - 1, -1, -1):
            self.acc = (self.acc << 1) | ((v >> i) & 1)
            self.n += 1
            if self.n == 8:
                self.out.append(self.acc)
                if self.acc == 0xFF:
                    self.out.append(0)
                self.acc, self.n = 0, 0

    def flush(self):
        if self.n:
            self.put((1 << (8 - self.n)) - 1, 8 - self.n)


def seg(marker, payload):
    return bytes([0xFF, marker]) + (len(payload) + 2).to_bytes(2, "big") + payload


def enc_lossless(img, precision, psv, pt=0, restart_rows=0, separate_scans=False):
    """img: (rows, cols, ncomp) ints < 2**precision. Returns a JPEG stream."""
    rows, cols, nc = img.shape
    codes = huff_codes()
    x = (img.astype(np.int64) >> pt).tolist()
    out = bytearray(b"\xff\xd8")
    sof = bytes([precision]) + rows.to_bytes(2, "big") + cols.to_bytes(2, "big") + bytes([nc])
    for c in range(nc):
        sof += bytes([c + 1, 0x11, 0])
    out += seg(0xC3, sof)
    out += seg(0xC4, bytes([0x00]) + bytes(HUFF_COUNTS) + bytes(HUFF_ORDER))
    ri = restart_rows * cols
    if ri:
        out += seg(0xDD, ri.to_bytes(2, "big"))
    scans = [[c] for c in range(nc)] if separate_scans else [list(range(nc))]
    for comps in scans:
        sos = bytes([len(comps)])
        for c in comps:
            sos += bytes([c + 1, 0x00])
        out += seg(0xDA, sos + bytes([psv, 0, pt]))
        bw, nrst, first_row = BitWriter(), 0, 0
        for r in range(rows):
            if ri and r and (r * cols) % ri == 0:
                bw.flush()
                out += bw.out + bytes([0xFF, 0xD0 + (nrst & 7)])
                bw, nrst, first_row = BitWriter(), nrst + 1, r
            for col in range(cols):
                for c in comps:
                    if r == first_row:
                        p = (1 << (precision - pt - 1)) if col == 0 else x[r][col - 1][c]
                    elif col == 0:
                        p = x[r - 1][col][c]
                    else:
                        ra, rb, rc = x[r][col - 1][c], x[r - 1][col][c], x[r - 1][col - 1][c]
                        p = [None, ra, rb, rc, ra + rb - rc, ra + ((rb - rc) >> 1),
                             rb + ((ra - rc) >> 1), (ra + rb) >> 1][psv]
                    d = (x[r][col][c] - p) & 0xFFFF
                    if d >= 0x8000:
                        d -= 0x10000
                    s = 16 if d == -32768 else abs(d).bit_length()
                    code, length = codes[s]
                    bw.put(code, length)
                    if 0 < s < 16:
                        bw.put(d if d >= 0 else d + (1 << s) - 1, s)
        bw.flush()
        out += bw.out
    return bytes(out + b"\xff\xd9")


# ---- a small sequential DCT encoder (ITU T.81 Annex F, Huffman), 8 or 12 bit ----

def _dct_matrix():
    d = np.zeros((8, 8))
    for u in range(8):
        for x in range(8):
            d[u, x] = (np.sqrt(0.5) if u == 0 else 1.0) * 0.5 * np.cos((2 * x + 1) * u * np.pi / 16)
    return d


ZIGZAG = [0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41,
          34, 27, 20, 13, 6, 7, 14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30,
          37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63]


def _table(symbols, lengths):
    """DHT counts + values and an encoding dict for symbols with given lengths."""
    counts = [0] * 16
    for ln in lengths:
        counts[ln - 1] += 1
    order = [s for _, s in sorted(zip(lengths, symbols), key=lambda t: t[0])]
    codes, code, k = {}, 0, 0
    for length, n in enumerate(counts, start=1):
        for _ in range(n):
            codes[order[k]] = (code, length)
            code, k = code + 1, k + 1
        code <<= 1
    return bytes(counts) + bytes(order), codes


def enc_dct(img, precision, q, restart_mcus=0, separate_scans=False):
    """img: (rows, cols, nc) ints < 2**precision; q: 64 quantiser steps
    (natural order). Returns a JPEG stream (SOF1, all components 1x1)."""
    rows, cols, nc = img.shape
    d = _dct_matrix()
    bh, bw = (rows + 7) // 8, (cols + 7) // 8
    pad = np.pad(img.astype(np.float64), ((0, bh * 8 - rows), (0, bw * 8 - cols), (0, 0)),
                 mode="edge") - (1 << (precision - 1))
    qa = np.array(q, dtype=np.float64).reshape(8, 8)
    blocks = {}
    for c in range(nc):
        for by in range(bh):
            for bx in range(bw):
                f = pad[by * 8:by * 8 + 8, bx * 8:bx * 8 + 8, c]
                coef = np.round(d @ f @ d.T / qa).astype(np.int64).reshape(64)
                blocks[c, by, bx] = [int(coef[z]) for z in ZIGZAG]
    dc_syms = list(range(16))
    dc_dht, dc_codes = _table(dc_syms, [4] * 16)
    ac_syms = [0x00, 0xF0] + [(r << 4) | s for r in range(16) for s in range(1, 15)]
    ac_dht, ac_codes = _table(ac_syms, [8] * 100 + [12] * (len(ac_syms) - 100))
    out = bytearray(b"\xff\xd8")
    qt = bytes([0x10]) + b"".join(int(q[z]).to_bytes(2, "big") for z in ZIGZAG)
    out += seg(0xDB, qt)
    sof = bytes([precision]) + rows.to_bytes(2, "big") + cols.to_bytes(2, "big") + bytes([nc])
    for c in range(nc):
        sof += bytes([c + 1, 0x11, 0])
    out += seg(0xC1, sof)
    out += seg(0xC4, bytes([0x00]) + dc_dht + bytes([0x10]) + ac_dht)
    if restart_mcus:
        out += seg(0xDD, restart_mcus.to_bytes(2, "big"))
    scans = [[c] for c in range(nc)] if separate_scans else [list(range(nc))]
    for comps in scans:
        sos = bytes([len(comps)]) + b"".join(bytes([c + 1, 0x00]) for c in comps)
        out += seg(0xDA, sos + bytes([0, 63, 0]))
        bw_, pred, nrst, mcu = BitWriter(), [0] * nc, 0, 0
        for by in range(bh):
            for bx in range(bw):
                if restart_mcus and mcu and mcu % restart_mcus == 0:
                    bw_.flush()
                    out += bw_.out + bytes([0xFF, 0xD0 + (nrst & 7)])
                    bw_, pred, nrst = BitWriter(), [0] * nc, nrst + 1
                mcu += 1
                for c in comps:
                    z = blocks[c, by, bx]
                    diff = z[0] - pred[c]
                    pred[c] = z[0]
                    s = abs(diff).bit_length()
                    bw_.put(*dc_codes[s])
                    if s:
                        bw_.put(diff if diff >= 0 else diff + (1 << s) - 1, s)
                    run = 0
                    last = max([k for k in range(1, 64) if z[k]] or [0])
                    for k in range(1, last + 1):
                        if z[k] == 0:
                            run += 1
                            continue
                        while run > 15:
                            bw_.put(*ac_codes[0xF0])
                            run -= 16
                        s = abs(z[k]).bit_length()
                        bw_.put(*ac_codes[(run << 4) | s])
                        bw_.put(z[k] if z[k] >= 0 else z[k] + (1 << s) - 1, s)
                        run = 0
                    if last < 63:
                        bw_.put(*ac_codes[0x00])
        bw_.flush()
        out += bw_.out
    return bytes(out + b"\xff\xd9")


def wrap(ds_native, frame, ts):
    """The native dataset re-labelled as compressed with one frame."""
    c = Dataset()
    c.update(ds_native)
    c.file_meta = FileMetaDataset(ds_native.file_meta)
    c.file_meta.TransferSyntaxUID = ts
    c.PixelData = encapsulate([frame])
    c["PixelData"].is_undefined_length = True
    c["PixelData"].VR = "OB"
    c.is_little_endian, c.is_implicit_VR = True, False
    return c


def gdcm_decode(ds):
    """pydicom + GDCM pixel_array of ds (saved and re-read, as from disk)."""
    p = os.path.join(OUT, "tmp_check.dcm")
    ds.save_as(p, write_like_original=False)
    a = pydicom.dcmread(p).pixel_array
    os.remove(p)
    return a


# ---- images ----

def images():
    ct = pydicom.dcmread(os.path.join(DATA, "CT_small.dcm")).pixel_array  # int16
    mr = pydicom.dcmread(os.path.join(DATA, "MR_small.dcm")).pixel_array  # int16
    rgb = pydicom.dcmread(os.path.join(DATA, "SC_rgb_rle.dcm")).pixel_array  # RLE = lossless
    yy, xx = np.mgrid[0:37, 0:53]
    smooth8 = ((np.sin(xx / 5.0) * np.cos(yy / 7.0) + 1) * 120 + (xx * yy) % 13).astype(np.int64)
    rng = np.random.default_rng(7)
    yy, xx = np.mgrid[0:45, 0:61]
    wide16 = ((xx * 1093 + yy * 977) % 65536 ^ rng.integers(0, 64, size=xx.shape)).astype(np.int64)
    return {
        "ct12": (np.clip(ct.astype(np.int64) + 1024, 0, 4095), 12, False, "MONOCHROME2"),
        "ct16s": (ct.astype(np.int64), 16, True, "MONOCHROME2"),
        "mr16s": (mr.astype(np.int64), 16, True, "MONOCHROME2"),
        "rgb8": (rgb.astype(np.int64), 8, False, "RGB"),
        "smooth8": (smooth8, 8, False, "MONOCHROME2"),
        "wide16": (wide16, 16, False, "MONOCHROME2"),
        "low2": (smooth8 >> 6, 2, False, "MONOCHROME2"),
        "low5": (smooth8 >> 3, 5, False, "MONOCHROME2"),
    }


def read_pnm(path, shape):
    """Pixels of a binary PGM/PPM (as written by ojph_expand)."""
    with open(path, "rb") as f:
        data = f.read()
    fields, pos = [], 0
    while len(fields) < 4:
        while data[pos:pos + 1].isspace():
            pos += 1
        if data[pos:pos + 1] == b"#":
            pos = data.index(b"\n", pos)
            continue
        end = pos
        while not data[end:end + 1].isspace():
            end += 1
        fields.append(data[pos:end])
        pos = end
    pos += 1
    dt = ">u1" if int(fields[3]) < 256 else ">u2"
    return np.frombuffer(data, dtype=dt, offset=pos).astype(np.int64).reshape(shape)


def unsigned(a, bs):
    return a.astype(np.int64) & ((1 << bs) - 1)


def main():
    os.makedirs(OUT, exist_ok=True)
    ims = images()
    for key, (arr, bs, signed, phot) in ims.items():
        if bs < 8:
            continue  # only for our lossless encoder below
        ds = native_ds(arr, bs, signed, phot)
        # GDCM encoders, lossless: reference is the original.
        for tag, args in (("jpegll", ["-J"]), ("jpegls", ["-L"]), ("j2k", ["-K"]),
                          ("rle", ["-R"])):
            c = gdcmconv(f"{key}_{tag}", ds, args)
            if c is not None:
                add(f"{key}_{tag}", c, first_frame(c), arr, 0, "gdcmconv-" + tag + "=original")
        # JPEG-LS near-lossless: within NEAR of the original.
        c = gdcmconv(f"{key}_jpegls_near3", ds, ["-L", "-Y", "-e", "3"])
        if c is not None:
            add(f"{key}_jpegls_near3", c, first_frame(c), arr, 3, "gdcmconv-jpegls-e3=original")
        # Lossy JPEG 2000 and JPEG: reference is pydicom + GDCM.
        c = gdcmconv(f"{key}_j2k_lossy", ds, ["-K", "--irreversible", "-q", "30"])
        if c is not None:
            add(f"{key}_j2k_lossy", c, first_frame(c), gdcm_decode(c), 0, "gdcmconv:pydicom+gdcm")
        if bs == 8 and not signed:  # gdcmconv writes P=16 DCT for 12-bit data
            c = gdcmconv(f"{key}_jpeg_lossy", ds, ["-J", "-Y", "-q", "85"])
        if bs == 8 and not signed and c is not None:
            ref = gdcm_decode(c)
            rgb = 0
            if c.SamplesPerPixel == 3 and str(c.PhotometricInterpretation).startswith("YBR"):
                from dump_frames import ybr_to_rgb
                ref, rgb = ybr_to_rgb(ref, 8), 1
            add(f"{key}_jpeg_lossy", c, first_frame(c), ref, 1, "gdcmconv:pydicom+gdcm", rgb)
        # HTJ2K lossless with OpenJPH from PGM/PPM (unsigned only).
        if not signed:
            ext = "ppm" if arr.ndim == 3 else "pgm"
            src = os.path.join(OUT, f"{key}.{ext}")
            maxv = (1 << bs) - 1
            with open(src, "wb") as f:
                f.write(f"P{6 if ext == 'ppm' else 5}\n{arr.shape[1]} {arr.shape[0]}\n{maxv}\n"
                        .encode())
                f.write(arr.astype(">u1" if maxv < 256 else ">u2").tobytes())
            j2c = os.path.join(OUT, f"{key}.j2c")
            subprocess.run(["ojph_compress", "-i", src, "-o", j2c, "-reversible", "true"],
                           check=True, capture_output=True)
            with open(j2c, "rb") as f:
                frame = f.read()
            c = wrap(ds, frame, "1.2.840.10008.1.2.4.201")
            add(f"{key}_htj2k", c, frame, arr, 0, "ojph_compress=original",
                1 if arr.ndim == 3 else 0)
            # HTJ2K irreversible (.4.203): the reference is OpenJPH's own decoder.
            r = subprocess.run(["ojph_compress", "-i", src, "-o", j2c, "-reversible", "false",
                                "-qstep", "0.002"], capture_output=True)
            dec = os.path.join(OUT, f"{key}.dec.{ext}")
            if r.returncode == 0 and subprocess.run(["ojph_expand", "-i", j2c, "-o", dec],
                                                    capture_output=True).returncode == 0:
                with open(j2c, "rb") as f:
                    frame = f.read()
                c = wrap(ds, frame, "1.2.840.10008.1.2.4.203")
                # Two float 9/7 implementations: one step at 12 bits, a few at 16.
                add(f"{key}_htj2k_lossy", c, frame, read_pnm(dec, arr.shape),
                    1 if bs <= 12 else 4,
                    "ojph_compress:ojph_expand", 1 if arr.ndim == 3 else 0)
                os.remove(dec)
            else:
                print(f"gen_streams: lossy HTJ2K of {key} failed (skipped)", file=sys.stderr)
            os.remove(src)
            os.remove(j2c)
    # Our JPEG lossless encoder: all predictors, point transform, restarts.
    variants = []
    for psv in range(1, 8):
        variants.append(("ct12", psv, 0, 0, False))
        variants.append(("wide16", psv, 0, 0, False))
    variants += [("smooth8", 1, 0, 0, False), ("smooth8", 7, 2, 0, False),
                 ("ct12", 4, 3, 0, False), ("ct12", 6, 0, 5, False), ("wide16", 5, 1, 7, False),
                 ("rgb8", 1, 0, 0, False), ("rgb8", 5, 0, 0, True), ("rgb8", 7, 1, 10, False),
                 ("low2", 1, 0, 0, False), ("low2", 4, 0, 3, False), ("low5", 6, 1, 0, False)]
    for key, psv, pt, rr, sep in variants:
        arr, bs, signed, phot = ims[key]
        arr = arr[:64, :72]  # pure Python encoding: keep it small
        img = unsigned(arr, bs)
        img3 = img if img.ndim == 3 else img[:, :, None]
        frame = enc_lossless(img3, bs, psv, pt, rr, sep)
        ds = native_ds(arr, bs, signed, phot)
        c = wrap(ds, frame, "1.2.840.10008.1.2.4.57")
        expect = (img >> pt) << pt
        # GDCM aborts on BitsStored < BitsAllocated below 8 bits: check those
        # streams through a header that says 8 bits stored (same stream).
        chk = c if bs >= 8 else wrap(native_ds(arr, 8, signed, phot), frame,
                                     "1.2.840.10008.1.2.4.57")
        got = unsigned(gdcm_decode(chk), bs).reshape(expect.shape)
        if not np.array_equal(got, expect):
            sys.exit(f"gen_streams: GDCM disagrees with our encoder on {key} psv {psv} pt {pt}")
        add(f"{key}_ll_p{psv}_pt{pt}_r{rr}{'_sep' if sep else ''}", c, frame, expect, 0,
            "own-encoder=gdcm=original")
    # Our 12-bit (and 8-bit) DCT encoder; the reference is pydicom + GDCM.
    from dump_frames import ybr_to_rgb
    ct12 = ims["ct12"][0]
    yy, xx = np.mgrid[0:45, 0:61]
    col12 = np.stack([(xx * 67) % 4096, (yy * 91) % 4096, ((xx + yy) * 37) % 4096], axis=-1)
    flat = [2] * 64
    ramp = [1 + (i % 8) + (i // 8) for i in range(64)]
    dct_variants = [
        ("ct12", ct12[:, :, None], 12, flat, 0, False, "MONOCHROME2"),
        ("ct12", ct12[:, :, None], 12, ramp, 7, False, "MONOCHROME2"),
        ("ct12odd", ct12[3:120, 5:101, None], 12, [1] * 64, 0, False, "MONOCHROME2"),
        ("col12", col12, 12, ramp, 0, False, "RGB"),
        ("col12", col12, 12, flat, 5, True, "RGB"),
        ("col12", col12, 12, ramp, 0, False, "YBR_FULL"),
    ]
    # Converting to RGB amplifies a one-step difference of the inverse DCT in
    # Cb/Cr by up to 1.772, so the YBR variant is compared within 3; its
    # YCbCr planes are compared within 1 by the "col12" variant labelled RGB
    # with the same quantiser and no restarts (same stream, no conversion).
    for vi, (key, img, prec, q, rst, sep, phot) in enumerate(dct_variants):
        frame = enc_dct(img, prec, q, rst, sep)
        arr = img[:, :, 0] if img.shape[2] == 1 else img
        ds = native_ds(arr, prec, False, phot)
        c = wrap(ds, frame, "1.2.840.10008.1.2.4.51")
        ref = gdcm_decode(c).reshape(arr.shape)
        rgb, tol = 0, 1
        if phot.startswith("YBR"):
            ref, rgb, tol = ybr_to_rgb(ref, prec), 1, 3
        elif np.abs(ref.astype(np.int64) - arr).max() > 64:
            sys.exit(f"gen_streams: GDCM decode of our DCT stream {key} is far from the image")
        name = f"{key}_dct{vi}_r{rst}{'_sep' if sep else ''}_{phot.lower()}"
        add(name, c, frame, ref, tol, "own-dct-encoder:pydicom+gdcm", rgb)
    with open(os.path.join(OUT, "manifest.tsv"), "w") as f:
        f.write("\n".join(LINES) + "\n")
    print(f"gen_streams: {len(LINES)} frames in {OUT}")


if __name__ == "__main__":
    main()
