#!/usr/bin/env python3
"""Checkpoint files against the Python `safetensors` library (the format's reference reader).

Usage: test_ckpt_safetensors_interop.py TESSEL   (run with the test venv's python,
TESSEL_TEST_PYTHON, which has safetensors; scripts/setup.sh creates it).

1. import/export round trip: numpy arrays (F32, F64, F16, a scalar, an empty tensor) saved by
   safetensors.numpy.save_file, plus a BF16 file written byte by byte here, go through
   `tessel ckpt import`; safetensors.numpy.load_file reads the shard file it wrote, and the
   file `tessel ckpt export` writes, and every value equals numpy's own conversion to float32
   bit for bit.
2. a checkpoint written entirely by this script (shards by save_file, byte ranges from the
   header, zlib CRCs, index.json by hand: an independent producer of the format) is read by
   `tessel ckpt info`, `verify` and `export --optimizer-state`; the export equals the arrays the
   shards were cut from, bit for bit.
3. a flipped byte in one of those shards makes `tessel ckpt verify` fail naming the file.
Exits 1 with the reasons on any mismatch.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np
from safetensors.numpy import load_file, save_file

TESSEL = sys.argv[1]
problems = []


def run(*args, fail=False):
    r = subprocess.run([TESSEL, "ckpt", *args], capture_output=True, text=True, timeout=120)
    if (r.returncode != 0) != fail:
        problems.append(f"tessel ckpt {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    return r.stdout + r.stderr


def same_bits(name, got, want):
    """float32 arrays equal bit for bit (NaNs included), with equal shapes."""
    if got.dtype != np.float32 or got.shape != want.shape or not np.array_equal(
            got.reshape(-1).view(np.uint32), want.reshape(-1).view(np.uint32)):
        problems.append(f"{name}: got {got.dtype} {got.shape} {got.ravel()[:4]}, want float32 {want.shape} "
                        f"{want.ravel()[:4]}")


def write_bf16(path, name, bits):
    """A safetensors file of one BF16 vector, written byte by byte (numpy has no bfloat16)."""
    header = json.dumps({name: {"dtype": "BF16", "shape": [len(bits)], "data_offsets": [0, 2 * len(bits)]}})
    header += " " * (-len(header) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header.encode() + struct.pack(f"<{len(bits)}H", *bits))


def import_export(tmp):
    rng = np.random.default_rng(5)
    arrays = {
        "wte.weight": rng.standard_normal((17, 8)).astype(np.float32),
        "h.0.bias": rng.standard_normal(5) * 1e-3,  # float64: rounded to float32 on import
        "h.0.gain": rng.standard_normal((3, 4)).astype(np.float16),
        "scale": np.array(2.5, dtype=np.float32),
        "empty": np.zeros((0, 3), np.float32),
    }
    arrays["wte.weight"][0, 0] = np.nan
    model = os.path.join(tmp, "model.safetensors")
    save_file(arrays, model)
    root = os.path.join(tmp, "imported")
    # The NaN is refused by default, and kept bit for bit with --allow-non-finite.
    msg = run("import", model, os.path.join(tmp, "nan_refused"), fail=True)
    if "tensor 'wte.weight' holds nan at [0, 0] (element 0)" not in msg:
        problems.append(f"NaN import: {msg.strip()}")
    run("import", model, root, "--allow-non-finite")
    want = {k: v.astype(np.float32) for k, v in arrays.items()}
    shard = load_file(os.path.join(root, "step_00000000", "rank_00000.safetensors"))
    if sorted(shard) != sorted(k for k, v in want.items() if v.size):
        problems.append(f"shard file keys {sorted(shard)}")
    for k, v in shard.items():
        same_bits(f"shard file '{k}'", v, want[k])
    run("verify", root)
    out = os.path.join(tmp, "exported.safetensors")
    run("export", root, out)
    exported = load_file(out)
    if sorted(exported) != sorted(want):
        problems.append(f"exported keys {sorted(exported)}")
    for k, v in exported.items():
        same_bits(f"exported '{k}'", v, want[k])
    # BF16: 1.0, -2.5, the largest finite, the smallest subnormal; float32 = the bits shifted up.
    bits = [0x3F80, 0xC020, 0x7F7F, 0x0001]
    bf16 = os.path.join(tmp, "bf16.safetensors")
    write_bf16(bf16, "w", bits)
    run("import", bf16, os.path.join(tmp, "bf16ckpt"))
    run("export", os.path.join(tmp, "bf16ckpt"), out)
    same_bits("BF16 import", load_file(out)["w"], np.array([b << 16 for b in bits], np.uint32).view(np.float32))
    # Integer tensors are refused by name.
    save_file({"ids": np.arange(3, dtype=np.int64)}, model)
    msg = run("import", model, os.path.join(tmp, "refused"), fail=True)
    if "tensor 'ids' is I64" not in msg:
        problems.append(f"integer import: {msg.strip()}")


def hand_written_checkpoint(tmp):
    """A checkpoint produced without Tessel: returns its root and the full arrays."""
    rng = np.random.default_rng(11)
    full = {"w": rng.standard_normal((10, 6)).astype(np.float32),
            "w:exp_avg": rng.standard_normal((10, 6)).astype(np.float32)}
    # Boxes (offsets, lengths, file): rows 0-3 whole, rows 4-9 split into two column halves.
    boxes = [((0, 0), (4, 6), "rank_00000.safetensors"), ((4, 0), (6, 3), "rank_00001.safetensors"),
             ((4, 3), (6, 3), "rank_00000.safetensors")]
    folder = os.path.join(tmp, "root", "step_00000003")
    os.makedirs(folder)
    files = {}
    for name, array in full.items():
        for (o0, o1), (l0, l1), file in boxes:
            files.setdefault(file, {})[f"{name}@{o0},{o1}"] = np.ascontiguousarray(array[o0:o0 + l0, o1:o1 + l1])
    for file, tensors in files.items():
        save_file(tensors, os.path.join(folder, file), metadata={"format": "pt"})
    block = 40  # bytes: shards of 72 and 96 bytes span several blocks, the last one short
    tensors = {}
    for name, array in full.items():
        shards = []
        for (o0, o1), (l0, l1), file in boxes:
            data = open(os.path.join(folder, file), "rb").read()
            n = struct.unpack("<Q", data[:8])[0]
            key = f"{name}@{o0},{o1}"
            begin, end = (8 + n + x for x in json.loads(data[8:8 + n])[key]["data_offsets"])
            shards.append({"offsets": [o0, o1], "lengths": [l0, l1], "file": file, "key": key,
                           "byte_range": [begin, end], "block_bytes": block,
                           "crc32": [zlib.crc32(data[b:min(b + block, end)]) for b in range(begin, end, block)]})
        kind = "optimizer_state" if ":" in name else "parameter"
        tensors[name] = {"kind": kind, "dtype": "F32", "shape": list(array.shape), "shards": shards}
    index = {"format": "tessel-checkpoint", "version": 1, "step": 3, "optimizer_state": True, "tensors": tensors,
             "trainer": {"step": 3, "plan": "hand-made"}}
    with open(os.path.join(folder, "index.json"), "w") as f:
        json.dump(index, f)
    with open(os.path.join(tmp, "root", "latest"), "w") as f:
        f.write("step_00000003\n")
    return os.path.join(tmp, "root"), full


def foreign_checkpoint(tmp):
    root, full = hand_written_checkpoint(tmp)
    info = run("info", root)
    if "step 3, 2 tensors, 6 shards in 2 files" not in info or "plan hand-made" not in info:
        problems.append(f"info: {info}")
    run("verify", root)
    out = os.path.join(tmp, "foreign.safetensors")
    run("export", root, out, "--optimizer-state")
    exported = load_file(out)
    if sorted(exported) != sorted(full):
        problems.append(f"exported keys {sorted(exported)}")
    for k, v in full.items():
        same_bits(f"export of the hand-written '{k}'", exported.get(k, np.zeros(0, np.float32)), v)
    run("export", root, out)
    if sorted(load_file(out)) != ["w"]:
        problems.append(f"export without --optimizer-state: {sorted(load_file(out))}")
    # One flipped byte: verify names the file and the block.
    path = os.path.join(root, "step_00000003", "rank_00001.safetensors")
    data = bytearray(open(path, "rb").read())
    data[-1] ^= 0x40
    open(path, "wb").write(data)
    msg = run("verify", root, fail=True)
    if f"'{path}'" not in msg or "CRC mismatch" not in msg:
        problems.append(f"verify of a corrupted shard: {msg.strip()}")


with tempfile.TemporaryDirectory() as tmp:
    import_export(tmp)
    foreign_checkpoint(tmp)
for p in problems:
    print(p)
print(f"ckpt safetensors interop: {len(problems)} problems")
sys.exit(1 if problems else 0)
