#!/usr/bin/env python3
"""Every multi-rank run proves its program's communication before the first step.

Usage: check_pp_proof.py MPIEXEC TESSEL_GPT DATA

Runs tessel-gpt (L=2, C=64, NH=4, T=32, B=8, one step) under mpirun with the plans pp=2 (the
stages' programs differ: send/recv groups and the loss and norm all-reduces over pp) and dp=2
(no pipeline: gradient all-reduces only) and checks, for each:
  - the run succeeds;
  - rank 0 prints exactly one line "proof: N events on W ranks (P send/recv groups, C
    collectives): no rank can hang, every transfer and collective matches", with W the plan's
    ranks, before the first training step's line;
  - the counts fit the plan: under pp there are send/recv groups, without pp none, and both
    have collectives; N >= P + C (waits are events, neither groups nor collectives).
Exits 1 listing every problem.
"""
import re
import subprocess
import sys

LINE = re.compile(r"^proof: (\d+) events on (\d+) ranks \((\d+) send/recv groups, (\d+) collectives\): "
                  r"no rank can hang, every transfer and collective matches$")


def check(mpiexec, exe, data, plan, ranks, pipelined, problems):
    cmd = [mpiexec, "--oversubscribe", "-np", str(ranks), exe, "--data", data, "--layers", "2", "--channels", "64",
           "--heads", "4", "--seq", "32", "--batch", "8", "--steps", "1", "--eval-batches", "1",
           "--sample-bytes", "0", "--device", "cpu", "--threads", "1", "--plan", plan]
    print("running:", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        problems.append(f"{plan}: exit {p.returncode}: {p.stderr[-2000:]}")
        return
    lines = p.stdout.splitlines()
    proofs = [i for i, l in enumerate(lines) if l.startswith("proof:")]
    if len(proofs) != 1:
        problems.append(f"{plan}: {len(proofs)} proof lines, expected one (rank 0's):\n{p.stdout[-2000:]}")
        return
    m = LINE.match(lines[proofs[0]])
    if not m:
        problems.append(f"{plan}: malformed proof line: {lines[proofs[0]]}")
        return
    events, world, groups, collectives = map(int, m.groups())
    steps = [i for i, l in enumerate(lines) if l.startswith("step ")]
    if not steps or steps[0] < proofs[0]:
        problems.append(f"{plan}: the proof line is not before the first step's line")
    if world != ranks:
        problems.append(f"{plan}: the proof covers {world} ranks, the run has {ranks}")
    if (groups > 0) != pipelined:
        problems.append(f"{plan}: {groups} send/recv groups, expected {'some' if pipelined else 'none'}")
    if collectives == 0:
        problems.append(f"{plan}: no collective proved")
    if events < groups + collectives:
        problems.append(f"{plan}: {events} events fewer than {groups} groups + {collectives} collectives")
    print(lines[proofs[0]], flush=True)


def main():
    mpiexec, exe, data = sys.argv[1:4]
    problems = []
    check(mpiexec, exe, data, "pp=2", 2, True, problems)
    check(mpiexec, exe, data, "dp=2", 2, False, problems)
    if problems:
        print("\n".join(problems))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
