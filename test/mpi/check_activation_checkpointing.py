"""Acceptance: activation checkpointing never changes the math. tessel-gpt (L=2, C=64, NH=4,
T=32, global batch B=8, AdamW, clipping on) trains 5 steps with --activation-checkpointing
full and selective and without it, under each plan; the recomputed values are computed by
the same kernels on the same operands, so the loss and gradient norm of every step and every
parameter after the last step (--export-params) must be bitwise equal (tolerance 0: any
difference is a bug). The plans: one rank; one rank with gradient accumulation 2
(@accumulate_step is recomputed too); one rank in bf16; dp=2 on 2 MPI ranks; tp=2 on 2 ranks
(selective only: full checkpointing under tensor parallelism is refused with an error at
the flag, which is checked too). Each run's planned activation arena must also be smaller with
checkpointing than without (the exact value is test/unit/ActivationCheckpointingTest.cpp's).

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
    if not arena:
        sys.exit(f"FAIL: {name}: no 'arena planned' line in\n{p.stdout}")
    return {"loss": [s["loss"] for s in steps if "loss" in s],
            "norm": [s["grad_norm"] for s in steps if "grad_norm" in s],
            "params": params.read_bytes(), "arena": float(arena.group(1))}


def main():
    mpiexec, exe, data = sys.argv[1:4]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        plans = [("one rank", 1, []), ("accumulation 2", 1, ["--grad-accumulation", "2"]),
                 ("bf16", 1, ["--precision", "bf16"]), ("dp=2", 2, ["--plan", "dp=2"]),
                 ("tp=2", 2, ["--plan", "tp=2"])]
        for label, ranks, plan in plans:
            base = run(mpiexec, exe, data, tmp, f"{label}-none", ranks, plan)
            if len(base["loss"]) != 5:
                failures.append(f"{label}: expected 5 losses, got {base['loss']}")
            modes = ["full", "selective"] if label != "tp=2" else ["selective"]
            for mode in modes:
                r = run(mpiexec, exe, data, tmp, f"{label}-{mode}", ranks,
                        plan + ["--activation-checkpointing", mode])
                for key in ("loss", "norm"):
                    if r[key] != base[key]:
                        failures.append(f"{label} {mode}: {key} {r[key]} != {base[key]} without checkpointing")
                if r["params"] != base["params"]:
                    failures.append(f"{label} {mode}: exported parameters differ from the run without checkpointing")
                if not r["arena"] < base["arena"]:
                    failures.append(f"{label} {mode}: arena {r['arena']} MiB is not below {base['arena']} MiB")
                print(f"{label} {mode}: losses {r['loss']} bitwise equal; arena {base['arena']} -> {r['arena']} MiB",
                      flush=True)
        # Full checkpointing under tensor parallelism is refused at the flag, on every rank.
        p = run(mpiexec, exe, data, tmp, "tp=2-full", 2, ["--plan", "tp=2", "--activation-checkpointing", "full"],
                expect_fail=True)
        want = "--activation-checkpointing:1:1: error: checkpoint(\"blocks.*\", full): full activation " \
               "checkpointing does not compose with tensor parallelism yet"
        if p.returncode == 0 or want not in p.stderr:
            failures.append(f"tp=2 full: expected a refusal containing '{want}', got exit {p.returncode}:\n"
                            f"{p.stdout}\n{p.stderr}")
    if failures:
        sys.exit("FAIL:\n" + "\n".join(failures))
    print("OK: activation checkpointing leaves every loss, norm and parameter bitwise unchanged")


if __name__ == "__main__":
    main()
