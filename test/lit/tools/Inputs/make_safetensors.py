#!/usr/bin/env python3
"""Writes a small safetensors file byte by byte (no safetensors package needed) for the
`tessel ckpt` lit tests.

Usage: make_safetensors.py OUT [--int | --bad KIND]
Default: "a" F32 [2, 3] = 1..6, "b" F64 [2] = [0.1, -2], "s" F32 [] = 7.
--int: one I64 tensor "ids" [3] (which import refuses).
--bad KIND: the default tensors plus one that import must refuse: "newline" and "nul" (a
name holding that control character), "empty" (an empty name), "rank200" (200 dimensions of
1), "nan" (F32 [2, 2] with a NaN at [1, 0]), "inf" (F64 [3] with -infinity at [2]).
"""
import json
import struct
import sys

out = sys.argv[1]
if "--int" in sys.argv:
    tensors = [("ids", "I64", [3], struct.pack("<3q", 0, 1, 2))]
else:
    tensors = [("a", "F32", [2, 3], struct.pack("<6f", 1, 2, 3, 4, 5, 6)),
               ("b", "F64", [2], struct.pack("<2d", 0.1, -2)),
               ("s", "F32", [], struct.pack("<f", 7))]
if "--bad" in sys.argv:
    kind = sys.argv[sys.argv.index("--bad") + 1]
    tensors.append({
        "newline": ("c\nd", "F32", [1], struct.pack("<f", 1)),
        "nul": ("c\0d", "F32", [1], struct.pack("<f", 1)),
        "empty": ("", "F32", [1], struct.pack("<f", 1)),
        "rank200": ("deep", "F32", [1] * 200, struct.pack("<f", 1)),
        "nan": ("w", "F32", [2, 2], struct.pack("<4f", 1, 2, float("nan"), 4)),
        "inf": ("v", "F64", [3], struct.pack("<3d", 1, 2, float("-inf"))),
    }[kind])
header, offset = {"__metadata__": {"format": "pt"}}, 0
for name, dtype, shape, data in tensors:
    header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
    offset += len(data)
text = json.dumps(header)
text += " " * (-len(text) % 8)
with open(out, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text.encode() + b"".join(t[3] for t in tensors))
