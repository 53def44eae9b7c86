#!/usr/bin/env python3
"""Edits a bundle's program.json the way a hostile or careless hand would, then recomputes
the checksum bundle.json records (resign_bundle.py), so that only the loader's validation
(runtime/exec/ProgramCheck.cpp, runtime/bundle/BundleConfig.cpp) stands between the edit and
the executor.

Usage: edit_bundle_program.py BUNDLE EDIT
EDIT: temp-past-arena   the first temp buffer moved to the end of the arena
      temps-overlap     the output of the first kernel step that reads a temp placed on that temp
      gemm-k            the first GEMM's k doubled
      kernel-args       the first kernel step's last argument dropped
      kernel-arg-size   the first kernel step's first argument swapped for a smaller buffer
      loss-parameter    output 0 of @train_step (the loss) pointed at the first parameter
      norm-lr           output 1 of @train_step (the gradient norm) pointed at its lr input
      collective-group  every all-reduce's group set to 1 (and the mesh dropped)
      collective-sum    every all-reduce's reduce set to sum
      collective-axis   every all-reduce's axes set to ["tp"] (and the mesh dropped)
"""
import json
import os
import sys

from resign_bundle import resign


def steps(program, op):
    return [s for f in program["functions"] for s in f["steps"] if s["op"] == op]


def numel(buffer):
    n = 1
    for d in buffer["shape"]:
        n *= d
    return n


def main(bundle, edit):
    path = os.path.join(bundle, "program.json")
    program = json.load(open(path))
    buffers = program["buffers"]
    arena = max(f["arenaBytes"] for f in program["functions"])
    kernel = steps(program, "kernel")[0]
    collectives = steps(program, "all_reduce_start") + steps(program, "all_reduce_wait")
    if edit == "temp-past-arena":
        next(b for b in buffers if b["kind"] == "temp")["offset"] = arena
    elif edit == "temps-overlap":
        # Temps no GEMM epilogue reads or writes: its own overlap check would refuse first.
        epilogue = {v for g in steps(program, "gemm") for v in g.get("epilogue", {}).values() if isinstance(v, int)}
        temp = lambda i: buffers[i]["kind"] == "temp" and i not in epilogue
        step = next(k for k in steps(program, "kernel")
                    if temp(k["args"][0]) and any(temp(i) and i != k["args"][0] for i in k["args"][1:]))
        src = next(i for i in step["args"][1:] if temp(i) and i != step["args"][0])
        buffers[step["args"][0]]["offset"] = buffers[src]["offset"]
    elif edit == "gemm-k":
        steps(program, "gemm")[0]["k"] *= 2
    elif edit == "kernel-args":
        kernel["args"].pop()
    elif edit == "kernel-arg-size":
        first = buffers[kernel["args"][0]]
        kernel["args"][0] = min((i for i, b in enumerate(buffers) if b["dtype"] == first["dtype"]),
                                key=lambda i: numel(buffers[i]))
    elif edit in ("loss-parameter", "norm-lr"):
        step = next(f for f in program["functions"] if f["name"] == "train_step")
        if edit == "loss-parameter":
            step["outputs"][0] = next(i for i, b in enumerate(buffers) if b["kind"] == "parameter")
        else:
            step["outputs"][1] = next(i for i, b in enumerate(buffers) if b["name"] == "train_step.lr")
    elif edit == "collective-group":
        program.pop("mesh", None)  # else the program's own check names the group first
        for c in collectives:
            c["group"] = 1
    elif edit == "collective-sum":
        for c in collectives:
            c["reduce"] = "sum"
    elif edit == "collective-axis":
        program.pop("mesh", None)
        for c in collectives:
            c["axes"] = ["tp"]
    else:
        sys.exit(f"unknown edit '{edit}'")
    with open(path, "w") as f:
        json.dump(program, f, indent=1)
    resign(bundle)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
