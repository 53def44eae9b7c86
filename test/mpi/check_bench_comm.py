#!/usr/bin/env python3
"""`tessel bench-comm` on N CPU ranks verifies every operation at sizes the world does not
divide, a size of one element, and the doubling sweep, and reports nccl-tests' bandwidths.

Usage: check_bench_comm.py MPIEXEC TESSEL NP

Runs `mpirun -np NP tessel bench-comm --json --save FILE` twice: a linear sweep of 1..18
elements (every remainder modulo NP, and one element) and a doubling sweep to 64 KiB. Checks,
from the JSON (and the saved file, which must be the same document):
  - exit status 0, and every operation (send_recv only when NP > 1) has a row at every size;
  - every row is verified;
  - algbw = S / t and busbw = algbw * factor, with the factors written out here from
    nccl-tests' PERFORMANCE.md (not imported from the tool), to 1e-6 relative (the JSON's
    doubles print with 17 significant digits; t is stored as a float, 1e-7 relative);
  - all_to_all's S is a multiple of 4 * NP bytes.
Exits 1 listing every problem.
"""
import json
import os
import subprocess
import sys
import tempfile

OPS = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv"]


def factor(op, n):
    return {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n,
            "all_to_all": (n - 1) / n, "broadcast": 1.0, "send_recv": 1.0}[op]


def run(mpiexec, tessel, np_, flags, problems):
    with tempfile.TemporaryDirectory() as tmp:
        save = os.path.join(tmp, "comm.json")
        cmd = [mpiexec, "--oversubscribe", "-np", str(np_), tessel, "bench-comm", "--json", "--iters", "2",
               "--warmup", "1", "--save", save] + flags
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
        if r.returncode != 0:
            problems.append(f"{' '.join(flags)}: exit {r.returncode}: {r.stderr.strip()[:400]}")
            return None
        doc = json.loads(r.stdout)
        with open(save) as f:
            if json.load(f) != doc:
                problems.append(f"{' '.join(flags)}: --save wrote another document than --json printed")
        return doc


def check(doc, np_, want_bytes, label, problems):
    if doc["world_size"] != np_:
        problems.append(f"{label}: world_size {doc['world_size']} != {np_}")
    ops = OPS if np_ > 1 else OPS[:-1]
    for op in ops:
        rows = [r for r in doc["results"] if r["op"] == op]
        if op == "all_to_all":
            want = sorted({max(b // 4 // np_, 1) * np_ * 4 for b in want_bytes})
        else:
            want = sorted({max(b // 4, 1) * 4 for b in want_bytes})
        got = sorted(r["bytes"] for r in rows)
        if got != want:
            problems.append(f"{label}: {op} measured sizes {got}, expected {want}")
        for r in rows:
            where = f"{label}: {op} {r['bytes']} B"
            if not r["verified"]:
                problems.append(f"{where}: not verified")
            if r["count"] * 4 != r["bytes"]:
                problems.append(f"{where}: count {r['count']} does not match the bytes")
            if r["time_s"] <= 0:
                problems.append(f"{where}: time {r['time_s']}")
                continue
            algbw = r["bytes"] / r["time_s"] / 1e9
            if abs(r["algbw_gbps"] - algbw) > 1e-6 * algbw:
                problems.append(f"{where}: algbw {r['algbw_gbps']} != S / t = {algbw}")
            busbw = algbw * factor(op, np_)
            if abs(r["busbw_gbps"] - busbw) > 1e-6 * max(busbw, 1e-30):
                problems.append(f"{where}: busbw {r['busbw_gbps']} != algbw * factor = {busbw}")
    if np_ == 1 and not any(s["op"] == "send_recv" for s in doc.get("skipped", [])):
        problems.append(f"{label}: one rank, but send_recv is not reported as skipped")


def main(argv):
    mpiexec, tessel, np_ = argv[1], argv[2], int(argv[3])
    problems = []
    linear = list(range(4, 4 * 18 + 1, 4))  # 1..18 elements: every remainder modulo np
    doc = run(mpiexec, tessel, np_, ["--min-bytes", "4", "--max-bytes", "72", "--step-bytes", "4"], problems)
    if doc:
        check(doc, np_, linear, "linear", problems)
    doubling = [8 << k for k in range(14)]  # 8 B .. 64 KiB
    doc = run(mpiexec, tessel, np_, ["--min-bytes", "8", "--max-bytes", str(64 << 10)], problems)
    if doc:
        check(doc, np_, doubling, "doubling", problems)
    for p in problems:
        print(p)
    print(f"bench-comm on {np_} rank(s): {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
