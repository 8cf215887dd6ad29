#!/usr/bin/python3
"""it_dicom_fixes: regression files for issue #14's decoding fixes, built here
with pydicom from the real pixel data in pydicom's own test files (the DICOM
WG04 files that first showed these problems are not available here).

  1. JPEG-LS with pad bytes after EOI in the last fragment (PS3.5 A.4: a
     fragment is even length): 00H and FFH pads decode to the same HU as the
     unpadded stream, and equal pydicom's where pydicom can decode JPEG-LS.
  2. Modality LUT Sequence descriptors: SS and US, first value 0 (65536
     entries), an entry count above 32767 stored in an SS descriptor, a
     negative first mapped value, implicit VR (PixelRepresentation decides):
     HU equal pydicom's apply_modality_lut bit for bit (on stored values
     widened to int64: pydicom's own int16 subtraction wraps for a first
     mapped value of -32768).
  3. Not DICOM: a PNG (and a JPEG, a PDF) gets "not a DICOM file"; no message
     ends in an internal status code such as "(einval)".

Uses `$DCMSERVE dicom FILE --out hu.npy`.
"""
import os
import re
import struct
import subprocess
import sys
import tempfile
import warnings
import zlib

import numpy as np
import pydicom
from pydicom.encaps import encapsulate, generate_pixel_data_frame
from pydicom.pixel_data_handlers.util import apply_modality_lut
from pydicom.uid import ExplicitVRLittleEndian, ImplicitVRLittleEndian

warnings.filterwarnings("ignore")

DCMSERVE = os.environ.get("DCMSERVE") or os.path.join(os.environ.get("DCM_BIN", "build"),
                                                      "dcmserve")
TEST_FILES = os.path.join(os.path.dirname(pydicom.__file__), "data", "test_files")
FAILS = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        FAILS.append(what)


def ours(path, tmp):
    """(array, None) or (None, the last stderr line)."""
    out = os.path.join(tmp, "hu.npy")
    if os.path.exists(out):
        os.unlink(out)
    p = subprocess.run([DCMSERVE, "dicom", path, "--out", out], capture_output=True, text=True,
                       timeout=120)
    if p.returncode != 0:
        lines = p.stderr.strip().splitlines()
        return None, lines[-1] if lines else "rc=%d" % p.returncode
    return np.load(out), None


def jpegls_padding(tmp):
    src = os.path.join(TEST_FILES, "MR_small_jpeg_ls_lossless.dcm")
    ds = pydicom.dcmread(src)
    frag = next(generate_pixel_data_frame(ds.PixelData, 1))
    # Back to the bare codestream, whatever padding the file has.
    end = frag.rfind(b"\xff\xd9")
    check(end > 0, "JPEG-LS source fragment has an EOI")
    stream = frag[:end + 2]
    ref, err = ours(src, tmp)
    check(err is None, "JPEG-LS source decodes (%s)" % err)
    try:
        pyd = np.float32(ds.pixel_array) * np.float32(float(ds.get("RescaleSlope", 1))) + \
            np.float32(float(ds.get("RescaleIntercept", 0)))
    except Exception:  # pylint: disable=broad-except
        pyd = None
        print("note  pydicom has no JPEG-LS decoder here: comparing with the unpadded stream only")
    for pad in (b"\x00", b"\xff", b"\x00\x00\x00", b"\xff\x00\xff"):
        p = stream + pad
        if len(p) % 2:
            p += b"\x00"
        ds2 = pydicom.dcmread(src)
        ds2.PixelData = encapsulate([p])
        path = os.path.join(tmp, "ls_pad.dcm")
        ds2.save_as(path)
        got, err = ours(path, tmp)
        name = "JPEG-LS, %d-byte stream + pad %s" % (len(stream), pad.hex())
        check(err is None, name + " decodes (%s)" % err)
        if got is not None and ref is not None:
            check(np.array_equal(got.reshape(ref.shape), ref), name + ": HU equal the unpadded")
        if got is not None and pyd is not None:
            check(np.array_equal(got.reshape(pyd.shape), pyd), name + ": HU equal pydicom's")
    # A stream really cut short is still refused, naming the missing EOI.
    ds2 = pydicom.dcmread(src)
    cut = stream[:len(stream) // 2]
    ds2.PixelData = encapsulate([cut + b"\x00" * (len(cut) % 2)])
    path = os.path.join(tmp, "ls_cut.dcm")
    ds2.save_as(path)
    got, err = ours(path, tmp)
    check(got is None and "EOI" in (err or ""), "JPEG-LS cut in half: refused (%s)" % err)


def lut_file(tmp, name, desc_vr, desc, data, implicit=False):
    """CT_small (signed 16-bit) with a Modality LUT Sequence instead of rescale."""
    ds = pydicom.dcmread(os.path.join(TEST_FILES, "CT_small.dcm"))
    for kw in ("RescaleSlope", "RescaleIntercept", "RescaleType"):
        if kw in ds:
            delattr(ds, kw)
    it = pydicom.Dataset()
    it.add_new(0x00283002, desc_vr, desc)
    it.ModalityLUTType = "HU"
    it.add_new(0x00283006, "OW", np.asarray(data, dtype="<u2").tobytes())
    ds.ModalityLUTSequence = pydicom.Sequence([it])
    path = os.path.join(tmp, name + ".dcm")
    if implicit:
        ds.file_meta.TransferSyntaxUID = ImplicitVRLittleEndian
        ds.save_as(path, write_like_original=False)
    else:
        ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
        ds.save_as(path, write_like_original=False)
    return path


def modality_lut(tmp):
    base = pydicom.dcmread(os.path.join(TEST_FILES, "CT_small.dcm")).pixel_array
    lo, hi = int(base.min()), int(base.max())
    rng = np.random.default_rng(14)
    cases = []
    # SS descriptor, first value 0 = 65536 entries, first mapped value -32768:
    # every stored value is mapped.
    cases.append(("lut_ss_65536", "SS", [0, -32768, 16], rng.integers(0, 65536, 65536), False))
    # US descriptor, 0 entries = 65536, first mapped 0: negative stored values
    # clamp to entry 0.
    cases.append(("lut_us_65536", "US", [0, 0, 16], rng.integers(0, 65536, 65536), False))
    # SS descriptor with 40000 entries (stored as -25536) and a negative first.
    cases.append(("lut_ss_40000", "SS", [40000 - 65536, lo + 5, 16],
                  rng.integers(0, 4096, 40000), False))
    # US descriptor whose first value 65500 is not a negative number.
    cases.append(("lut_us_first_high", "US", [100, 65500, 16], np.arange(100) * 3, False))
    # Short LUT: values clamp at both ends.
    n = max(2, (hi - lo) // 2)
    cases.append(("lut_us_short", "US", [n, max(0, lo) + 7, 16], (np.arange(n) * 5) % 4096,
                  False))
    # Implicit VR: the descriptor is 'US or SS' by PixelRepresentation (1 here),
    # so a first value written as 0xFC00 means -1024.
    cases.append(("lut_implicit", "US", [0, 0xFC00, 16], rng.integers(0, 65536, 65536), True))
    for name, vr, desc, data, implicit in cases:
        path = lut_file(tmp, name, vr, desc, data, implicit)
        ds = pydicom.dcmread(path)
        # pydicom subtracts the first mapped value in the stored values' own
        # dtype, so sv - (-32768) wraps in int16; widened first, its function
        # gives the exact mapping (identical wherever it does not wrap).
        ref = np.float32(apply_modality_lut(ds.pixel_array.astype(np.int64), ds))
        got, err = ours(path, tmp)
        check(err is None, "%s decodes (%s)" % (name, err))
        if got is not None:
            check(np.array_equal(got.reshape(ref.shape), ref),
                  "%s: HU equal pydicom apply_modality_lut" % name)
    # A descriptor with 12-bit entries is refused, naming the bit count.
    path = lut_file(tmp, "lut_bad_bits", "US", [16, 0, 12], np.arange(16))
    got, err = ours(path, tmp)
    check(got is None and "12 bits" in (err or ""), "12-bit LUT entries refused (%s)" % err)


def png_bytes():
    def chunk(kind, body):
        c = kind + body
        return struct.pack(">I", len(body)) + c + struct.pack(">I", zlib.crc32(c))
    raw = b"".join(b"\x00" + bytes(range(16)) for _ in range(16))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 16, 16, 8, 0, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def not_dicom(tmp):
    others = {
        "png": png_bytes(),
        "jpeg": b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(200) + b"\xff\xd9",
        "pdf": b"%PDF-1.4\n" + b"1 0 obj << >> endobj\n" * 20,
    }
    for kind, data in others.items():
        path = os.path.join(tmp, "x." + kind)
        with open(path, "wb") as f:
            f.write(data)
        got, err = ours(path, tmp)
        check(got is None and "not a DICOM file" in (err or ""),
              "%s sent as DICOM: %s" % (kind.upper(), err))
        check(err is not None and re.search(r"\((e[a-z]+|ok)\)$", err) is None,
              "%s: no internal status code at the end of the message" % kind.upper())
    # A bare data set (no DICM, no meta) still decodes: plausibility is not
    # a DICM requirement.
    ds = pydicom.dcmread(os.path.join(TEST_FILES, "CT_small.dcm"))
    path = os.path.join(tmp, "bare.dcm")
    pydicom.filewriter.write_dataset(pydicom.filebase.DicomFile(path, "wb"), ds)
    got, err = ours(path, tmp)
    check(err is None, "bare data set without meta decodes (%s)" % err)
    # A real error keeps its message and has no "(einval)" either.
    ds.Rows = 4096
    path = os.path.join(tmp, "short_pixels.dcm")
    ds.save_as(path)
    got, err = ours(path, tmp)
    check(got is None and err is not None and "(einval)" not in err,
          "short Pixel Data refused without an internal code (%s)" % err)


def main():
    if not os.path.isdir(TEST_FILES):
        print("skip: pydicom test files missing (%s)" % TEST_FILES)
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        jpegls_padding(tmp)
        modality_lut(tmp)
        not_dicom(tmp)
    if FAILS:
        print("%d check(s) failed" % len(FAILS))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
