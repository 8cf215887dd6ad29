#!/usr/bin/python3
"""Writes a synthetic full-field digital mammogram to FILE: 3328 x 2560,
12 bits stored in 16, MONOCHROME2, Modality MG, JPEG 2000 lossless (GDCM
from python3-gdcm encodes it), about 2.7 MB: the size of the mammograms of
issue 13's isolation finding (16 clients sending a 2.6 MB JPEG 2000
mammogram to one model). The image is a half ellipse of smooth tissue with
Gaussian blobs and a little noise, made from a fixed seed, so every run
writes the same bytes. Usage: make_mammogram.py FILE"""
import os
import sys
import tempfile

import gdcm
import numpy as np
import pydicom
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.uid import ExplicitVRLittleEndian

ROWS, COLS = 3328, 2560


def image():
    rng = np.random.default_rng(7)
    y, x = np.mgrid[0:ROWS, 0:COLS].astype(np.float32)
    r = np.sqrt(((y - ROWS / 2) / (ROWS * 0.48)) ** 2 + (x / (COLS * 0.85)) ** 2)
    inside = r < 1
    img = np.where(inside, 2200 - 900 * r ** 2, 80).astype(np.float32)
    for _ in range(40):
        by, bx = rng.uniform(0, ROWS), rng.uniform(0, COLS * 0.8)
        s, a = rng.uniform(40, 300), rng.uniform(-300, 300)
        img += a * np.exp(-((y - by) ** 2 + (x - bx) ** 2) / (2 * s * s)) * inside
    img += rng.normal(0, 3, img.shape) * inside
    return np.clip(img, 0, 4095).astype(np.uint16)


def main(out):
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = "1.2.840.10008.5.1.4.1.1.1.2"  # Digital Mammography X-Ray
    meta.MediaStorageSOPInstanceUID = "1.2.826.0.1.3680043.8.498.13.1"
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = Dataset()
    ds.file_meta = meta
    ds.SOPClassUID = meta.MediaStorageSOPClassUID
    ds.SOPInstanceUID = meta.MediaStorageSOPInstanceUID
    ds.Modality = "MG"
    ds.Rows, ds.Columns = ROWS, COLS
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = "MONOCHROME2"
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 12, 11, 0
    ds.PixelData = image().tobytes()
    ds.is_little_endian, ds.is_implicit_VR = True, False
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "raw.dcm")
        ds.save_as(raw, write_like_original=False)
        rd = gdcm.ImageReader()
        rd.SetFileName(raw)
        if not rd.Read():
            sys.exit("make_mammogram: GDCM cannot read %s" % raw)
        ch = gdcm.ImageChangeTransferSyntax()
        ch.SetTransferSyntax(gdcm.TransferSyntax(gdcm.TransferSyntax.JPEG2000Lossless))
        ch.SetInput(rd.GetImage())
        if not ch.Change():
            sys.exit("make_mammogram: GDCM cannot encode JPEG 2000")
        w = gdcm.ImageWriter()
        w.SetFileName(out)
        w.SetFile(rd.GetFile())
        w.SetImage(ch.GetOutput())
        if not w.Write():
            sys.exit("make_mammogram: cannot write %s" % out)
    pydicom.dcmread(out)  # the result parses


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
