#!/usr/bin/python3
"""Writes the benchmark inputs into DIR: CT 512x512 and 1024x1024 (explicit VR
LE, 16-bit signed, 12 bits stored, rescale -1024) made from pydicom's
CT_small.dcm by tiling, plus a 20-frame 512x512 file."""
import os
import sys

import numpy as np
import pydicom
from pydicom.data import get_testdata_file

out = sys.argv[1]
src = pydicom.dcmread(get_testdata_file("CT_small.dcm"))
base = src.pixel_array.astype(np.int16)
for n in (512, 1024):
    ds = pydicom.dcmread(get_testdata_file("CT_small.dcm"))
    a = np.tile(base, (n // 128, n // 128))
    ds.Rows, ds.Columns = n, n
    ds.PixelData = a.tobytes()
    ds.save_as(os.path.join(out, "ct_%d.dcm" % n))
ds = pydicom.dcmread(get_testdata_file("CT_small.dcm"))
a = np.tile(base, (20, 4, 4))
ds.Rows, ds.Columns, ds.NumberOfFrames = 512, 512, 20
ds.PixelData = a.tobytes()
ds.save_as(os.path.join(out, "ct_512_20frames.dcm"))

# Lossless compressed versions of ct_512 (GDCM from python3-gdcm re-encodes).
try:
    import gdcm
except ImportError:
    gdcm = None
if gdcm is not None:
    for tag, ts in (("jpegls", gdcm.TransferSyntax.JPEGLSLossless),
                    ("j2k", gdcm.TransferSyntax.JPEG2000Lossless),
                    ("jpeg_lossless", gdcm.TransferSyntax.JPEGLosslessProcess14_1),
                    ("rle", gdcm.TransferSyntax.RLELossless)):
        r = gdcm.ImageReader()
        r.SetFileName(os.path.join(out, "ct_512.dcm"))
        r.Read()
        c = gdcm.ImageChangeTransferSyntax()
        c.SetTransferSyntax(gdcm.TransferSyntax(ts))
        c.SetInput(r.GetImage())
        c.Change()
        w = gdcm.ImageWriter()
        w.SetFileName(os.path.join(out, "ct_512_%s.dcm" % tag))
        w.SetFile(r.GetFile())
        w.SetImage(c.GetOutput())
        w.Write()
