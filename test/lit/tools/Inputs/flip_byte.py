#!/usr/bin/env python3
"""Flips bit 0x40 of the byte at OFFSET of FILE (negative: from the end). Usage: flip_byte.py FILE OFFSET"""
import sys

path, offset = sys.argv[1], int(sys.argv[2])
data = bytearray(open(path, "rb").read())
data[offset] ^= 0x40
open(path, "wb").write(data)
