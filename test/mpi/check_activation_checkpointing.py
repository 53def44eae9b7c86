"""Acceptance: activation checkpointing never changes the math. tessel-gpt (L=2, C=64, NH=4,
T=32, global batch B=8, AdamW, clipping on) trains 5 steps with --activation-checkpointing
full and selective and without it, under each plan; the recomputed values are computed by
the same kernels on the same operands, so the loss and gradient norm of every step and every
parameter after the last step (--export-params) must be bitwise equal (tolerance 0: any
difference is a bug). The plans: one rank; one rank with gradient accumulation 2
(@accumulate_step is recomputed too); one rank in bf16; dp=2, tp=2 and tp=2 with sequence
parallelism on 2 MPI ranks; fsdp=2 (units per block, prefetch 1), in f32, in bf16 (the
backward gathers read the parameters' bf16 casts, which are kept, not recomputed) and in
bf16 without prefetch. Recomputation never communicates (a collective's result is
kept), so the runtime's count of collectives and bytes per kind must be the same too. Each
run's planned activation arena must also be smaller with full checkpointing than without (the
exact value is test/unit/ActivationCheckpointingTest.cpp's), and with selective checkpointing
no larger: the fused attention keeps no T x T probabilities, so selective checkpointing (which
recomputes only core attention) has nothing left to drop on the CPU path.

Usage: check_activation_checkpointing.py MPIEXEC TESSEL_GPT DATA_FILE"""
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

COMMON = ["--layers", "2", "--channels", "64", "--heads", "4", "--seq", "32", "--batch", "8", "--steps", "5",
          "--grad-clip", "0.5", "--eval-batches", "1", "--sample-bytes", "0", "--device", "cpu",
          "--threads", "1"]


def run(mpiexec, exe, data, tmp, name, ranks, extra, expect_fail=False):
    log, params = Path(tmp) / f"{name}.json", Path(tmp) / f"{name}.safetensors"
    cmd = [exe, "--data", data, *COMMON, "--log-json", str(log), "--export-params", str(params), *extra]
    if ranks > 1:
        cmd = [mpiexec, "--oversubscribe", "-np", str(ranks), *cmd]
    print("running:", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if expect_fail:
        return p
    if p.returncode != 0:
        sys.exit(f"FAIL: {name} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    steps = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    arena = re.search(r"arena planned ([0-9.]+) MiB", p.stdout)
    comm = re.search(r"communication by kind: .*", p.stdout)
    if not arena:
        sys.exit(f"FAIL: {name}: no 'arena planned' line in\n{p.stdout}")
    return {"loss": [s["loss"] for s in steps if "loss" in s],
            "norm": [s["grad_norm"] for s in steps if "grad_norm" in s],
            "params": params.read_bytes(), "arena": float(arena.group(1)),
            "comm": comm.group(0) if comm else ""}


def main():
    mpiexec, exe, data = sys.argv[1:4]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        plans = [("one rank", 1, []), ("accumulation 2", 1, ["--grad-accumulation", "2"]),
                 ("bf16", 1, ["--precision", "bf16"]), ("dp=2", 2, ["--plan", "dp=2"]),
                 ("tp=2", 2, ["--plan", "tp=2"]), ("tp=2 sp", 2, ["--plan", "tp=2", "--sequence-parallel"]),
                 ("fsdp=2", 2, ["--plan", "fsdp=2"]), ("fsdp=2 bf16", 2, ["--plan", "fsdp=2", "--precision", "bf16"]),
                 ("fsdp=2 bf16 no prefetch", 2, ["--plan", "fsdp=2", "--precision", "bf16", "--fsdp-prefetch", "0"])]
        for label, ranks, plan in plans:
            base = run(mpiexec, exe, data, tmp, f"{label}-none", ranks, plan)
            if len(base["loss"]) != 5:
                failures.append(f"{label}: expected 5 losses, got {base['loss']}")
            for mode in ["full", "selective"]:
                r = run(mpiexec, exe, data, tmp, f"{label}-{mode}", ranks,
                        plan + ["--activation-checkpointing", mode])
                for key in ("loss", "norm", "comm"):
                    if r[key] != base[key]:
                        failures.append(f"{label} {mode}: {key} {r[key]} != {base[key]} without checkpointing")
                if r["params"] != base["params"]:
                    failures.append(f"{label} {mode}: exported parameters differ from the run without checkpointing")
                if mode == "full" and not r["arena"] < base["arena"]:
                    failures.append(f"{label} {mode}: arena {r['arena']} MiB is not below {base['arena']} MiB")
                if mode == "selective" and r["arena"] > base["arena"]:
                    failures.append(f"{label} {mode}: arena {r['arena']} MiB is above {base['arena']} MiB")
                print(f"{label} {mode}: losses {r['loss']} bitwise equal; arena {base['arena']} -> {r['arena']} MiB",
                      flush=True)
    if failures:
        sys.exit("FAIL:\n" + "\n".join(failures))
    print("OK: activation checkpointing leaves every loss, norm, parameter and collective unchanged")


if __name__ == "__main__":
    main()
