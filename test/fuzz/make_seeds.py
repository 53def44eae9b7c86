#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora: valid checkpoint indexes and valid safetensors files
(each fuzzer starts from inputs that pass every check, so its mutations probe each check).

Usage: make_seeds.py INDEX_DIR HEADER_DIR
"""
import json
import os
import struct
import sys
import zlib

index_dir, header_dir = sys.argv[1], sys.argv[2]
os.makedirs(index_dir, exist_ok=True)
os.makedirs(header_dir, exist_ok=True)


def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape, bytes)] -> a whole file's bytes."""
    header, offset = ({"__metadata__": metadata} if metadata else {}), 0
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header)
    text += " " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text.encode() + b"".join(t[3] for t in tensors)


files = {
    "two_shards.safetensors": safetensors(
        [("w@0,0", "F32", [2, 4], bytes(32)), ("w@2,0", "F32", [2, 4], bytes(range(32))),
         ("b", "F64", [3], bytes(24))], {"format": "pt", "tessel_checkpoint_step": "7"}),
    "scalar.safetensors": safetensors([("s", "BF16", [], b"\x80\x3f")]),
    "empty.safetensors": safetensors([("e", "I64", [0, 5], b""), ("h", "F16", [1], b"\x00\x3c")]),
}
for name, data in files.items():
    open(os.path.join(header_dir, name), "wb").write(data)


def shard(offsets, lengths, file, key, begin, nbytes, block):
    return {"offsets": offsets, "lengths": lengths, "file": file, "key": key, "byte_range": [begin, begin + nbytes],
            "block_bytes": block, "crc32": [zlib.crc32(bytes(min(block, nbytes - b))) for b in range(0, nbytes, block)]}


indexes = {
    "rows.json": {"format": "tessel-checkpoint", "version": 1, "step": 7, "optimizer_state": True,
                  "tensors": {
                      "w": {"kind": "parameter", "dtype": "F32", "shape": [4, 4],
                            "shards": [shard([0, 0], [2, 4], "rank_00000.safetensors", "w@0,0", 96, 32, 16),
                                       shard([2, 0], [2, 4], "rank_00001.safetensors", "w@2,0", 96, 32, 16)]},
                      "w:exp_avg": {"kind": "optimizer_state", "dtype": "F32", "shape": [4, 4],
                                    "shards": [shard([0, 0], [4, 4], "rank_00000.safetensors", "w:exp_avg", 128, 64,
                                                     1048576)]}},
                  "trainer": {"step": 7, "plan": "dp=2", "sampler": {"global_batches_consumed": 7}}},
    "grid.json": {"format": "tessel-checkpoint", "version": 1, "step": 0, "optimizer_state": False,
                  "tensors": {
                      "m": {"kind": "parameter", "dtype": "BF16", "shape": [3, 5],
                            "shards": [shard([0, 0], [3, 2], "a", "m@0,0", 8, 12, 5),
                                       shard([0, 2], [3, 3], "b", "m@0,2", 8, 18, 5)]},
                      "s": {"kind": "parameter", "dtype": "I64", "shape": [],
                            "shards": [shard([], [], "a", "s", 20, 8, 8)]},
                      "z": {"kind": "parameter", "dtype": "F16", "shape": [0, 2], "shards": []}},
                  "trainer": {"step": 0, "imported_from": "model.safetensors"}},
}
for name, index in indexes.items():
    with open(os.path.join(index_dir, name), "w") as f:
        json.dump(index, f, indent=1)
