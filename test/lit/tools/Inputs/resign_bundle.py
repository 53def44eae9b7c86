#!/usr/bin/env python3
"""Recomputes the program checksum a bundle's bundle.json records, the way the loader does
(runtime/bundle/Bundle.cpp): FNV-1a 64 over program.json, kernels.cpp and the canonical JSON
(sorted keys, no spaces) of bundle.json's model, config, train_flags, optimizer and plan. A
forged bundle re-signed this way gets past the checksum, so that only the loader's independent
checks of what the program shows stand between the edit and the executor.

Usage: resign_bundle.py BUNDLE [FIELD=JSON ...]
FIELD is a dotted path into bundle.json (e.g. plan.mesh.0.size=2, optimizer='"sgd"'); each is
set to the JSON value before the checksum is recomputed.
"""
import json
import os
import sys

RECORDED = ["model", "config", "train_flags", "optimizer", "plan"]


def fnv1a64(data):
    h = 14695981039346656037
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def resign(bundle, edits=()):
    meta_path = os.path.join(bundle, "bundle.json")
    meta = json.load(open(meta_path))
    for edit in edits:
        path, value = edit.split("=", 1)
        keys = path.split(".")
        node = meta
        for k in keys[:-1]:
            node = node[int(k)] if isinstance(node, list) else node[k]
        last = keys[-1]
        if isinstance(node, list):
            node[int(last)] = json.loads(value)
        else:
            node[last] = json.loads(value)
    recorded = {k: meta[k] for k in RECORDED if k in meta}
    data = (open(os.path.join(bundle, "program.json"), "rb").read() +
            open(os.path.join(bundle, "kernels.cpp"), "rb").read() +
            json.dumps(recorded, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode())
    meta["program"]["checksum"] = f"fnv1a64:{fnv1a64(data):016x}:{len(data)}"
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=1)


if __name__ == "__main__":
    resign(sys.argv[1], sys.argv[2:])
