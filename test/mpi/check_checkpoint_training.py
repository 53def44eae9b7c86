"""Acceptance of distributed checkpoints end to end (docs/checkpoints.md), on a tiny GPT (L=2,
C=32, NH=2, T=16, V=256, global batch B=8, AdamW with weight decay 0.1, clipping at 0.5), CPU
ranks under mpirun.

Mode `resume` (exact resume, and interop of the shard files):
  For each of the plans dp=2, pp=2 and fsdp=2: train 20 steps (the reference, with
  --checkpoint-dir: it saves step 20 at its end); separately train --steps 20 --stop-after 10
  --checkpoint-every 10 (a checkpoint at step 10, then the run ends as if interrupted), then
  --steps 20 --resume DIR. The losses and gradient norms of steps 11-20 and the exported
  parameters must equal the reference's bit for bit (same plan, same global batches: the
  sampler position is the step; same schedule: it spans --steps). dp=2 also with
  --async-checkpoint on both halves. The dp=2 checkpoint resumed on one rank and under tp=2
  (another plan) must continue within the equivalence tolerance below, and resumed by tessel-run
  on a dp=2 bundle of the model, bitwise. Each checkpoint's trainer state holds the run's fields.
  Interop: Python's `safetensors` (safetensors.numpy.load_file) reads every shard file of every
  checkpoint written; each tensor assembled from the index's boxes covers its global shape
  exactly once, and the step-20 checkpoints' parameters equal --export-params's bit for bit
  (under pp=2 too: every stage's parameters, the tied embedding written once), as does the one
  file `tessel ckpt export` consolidates from each reference checkpoint.

Mode `reshard` (the reshard matrix): save step 10 under each of dp=4, fsdp=4 and dp=2,tp=2 (4
ranks each); load each under one rank, fsdp=2 and tp=2, twice: once with --stop-after 10 and
a second --checkpoint-dir (no step runs; the loaded state is saved again by the new layout),
whose parameters and optimizer state, assembled independently here from its index and shard
files, must equal the saved checkpoint's bit for bit; and once training on to step 13, whose
losses must equal the uninterrupted one-rank run's within the tolerance.

Tolerances (those of check_tp_training.py, and why they hold here): another plan reorders f32
sums (dp and fsdp average the ranks' partial means, tp splits a row-parallel product's k-sum),
moving a loss by an ulp or a few (5.5 has an ulp of 4.8e-7): loss 5e-6 absolute, about 10 ulps.
Resumed runs continue 3 (reshard) or 10 (resume) steps after an exact load, so the
differences are those of the plans from the start, not a loading error, which is far outside
the bound: the optimizer state left at zero on resume (measured: --allow-partial without the
exp_avg/exp_avg_sq tensors) moves the loss of step 12 by 2.9e-2 and of step 13 by 3.1e-2 (step
11's loss is computed before the first update, so each continuation runs 3 steps or more).
Measured worst differences: 4.8e-7 (1 ulp) for the dp=2 checkpoint continued on one rank and
tp=2; in the reshard matrix 4.8e-7 from dp=4, 9.5e-7 from fsdp=4, 1.4e-6 from dp=2,tp=2.
Time on two cores: `resume` 15 runs in 8 s, `reshard` 22 runs in 8 to 11 s with the kernel cache
warm; 17 s and 32 s with an empty one (TESSEL_CACHE_DIR).

Usage: check_checkpoint_training.py resume|reshard MPIEXEC TESSEL_GPT DATA_FILE TESSEL_RUN"""
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

STEPS = 20
SAVED = 10
LOSS_TOL = 5e-6  # see the module docstring
COMMON = ["--layers", "2", "--channels", "32", "--heads", "2", "--seq", "16", "--batch", "8", "--vocab", "256",
          "--steps", str(STEPS), "--weight-decay", "0.1", "--grad-clip", "0.5", "--eval-batches", "1",
          "--sample-bytes", "0", "--device", "cpu", "--threads", "1", "--lr", "3e-3"]
PLANS = {"one": (1, []), "dp2": (2, ["--plan", "dp=2"]), "pp2": (2, ["--plan", "pp=2"]),
         "fsdp2": (2, ["--plan", "fsdp=2"]), "tp2": (2, ["--plan", "tp=2"]), "dp4": (4, ["--plan", "dp=4"]),
         "fsdp4": (4, ["--plan", "fsdp=4"]), "dp2tp2": (4, ["--plan", "dp=2,tp=2"])}
DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64, "F16": np.float16}


class Runner:
    def __init__(self, mpiexec, exe, data, tmp):
        self.mpiexec, self.exe, self.data, self.tmp = mpiexec, exe, data, Path(tmp)
        self.runs, self.seconds = 0, 0.0

    def __call__(self, name, plan, extra, export=False, command=None):
        """Runs tessel-gpt (or `command`, flags and all) under `plan`; returns ({step: record} of its
        --log-json, stdout, export path)."""
        ranks, flags = PLANS[plan]
        log, params = self.tmp / f"{name}.jsonl", self.tmp / f"{name}.safetensors"
        cmd = [*(command or [self.exe, "--data", self.data, *COMMON, *flags]), *extra, "--log-json", str(log)]
        if export:
            cmd += ["--export-params", str(params)]
        if ranks > 1:
            cmd = [self.mpiexec, "--oversubscribe", "-np", str(ranks), *cmd, "--check-replicas"]
        print("running:", " ".join(cmd), flush=True)
        started = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        self.runs, self.seconds = self.runs + 1, self.seconds + time.monotonic() - started
        if p.returncode != 0:
            raise RuntimeError(f"{name} exited with {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
        records = {r["step"]: r for r in map(json.loads, log.read_text().splitlines())} if log.exists() else {}
        return records, p.stdout, params


def assemble(folder):
    """{name: (kind, array)} of a checkpoint folder, from its index.json and shard files read
    with safetensors; fails unless the boxes cover every tensor exactly once."""
    index = json.loads((folder / "index.json").read_text())
    files = {}
    out = {}
    for name, t in index["tensors"].items():
        value = np.zeros(t["shape"], dtype=DTYPES[t["dtype"]])
        covered = np.zeros(t["shape"], dtype=np.int32)
        for s in t["shards"]:
            if s["file"] not in files:
                files[s["file"]] = load_file(str(folder / s["file"]))  # every shard file, read by safetensors
            box = files[s["file"]][s["key"]]
            if list(box.shape) != s["lengths"] or box.dtype != value.dtype:
                raise RuntimeError(f"{folder}/{s['file']}: {s['key']} is {box.dtype}{list(box.shape)}, the index "
                                   f"says {t['dtype']}{s['lengths']}")
            where = tuple(slice(o, o + n) for o, n in zip(s["offsets"], s["lengths"]))
            value[where] = box
            covered[where] += 1
        if value.ndim and not (covered == 1).all():
            raise RuntimeError(f"{folder}: the shards of {name} do not cover it exactly once")
        out[name] = (t["kind"], value)
    on_disk = {p.name for p in folder.glob("*.safetensors")}
    if on_disk != set(files):
        raise RuntimeError(f"{folder}: shard files {sorted(on_disk)} but the index names {sorted(files)}")
    return out, index


def bitwise(name, got, want, kinds=("parameter", "optimizer_state")):
    """Failures: tensors of `kinds` that differ in name set, shape or any bit."""
    g = {k: v for k, (kind, v) in got.items() if kind in kinds}
    w = {k: v for k, (kind, v) in want.items() if kind in kinds}
    if sorted(g) != sorted(w):
        print(f"  {name}: tensor names differ: {sorted(set(g) ^ set(w))}")
        return 1
    bad = [k for k in w if g[k].shape != w[k].shape or g[k].tobytes() != w[k].tobytes()]
    print(f"  {name}: {len(w)} tensors ({', '.join(kinds)}), {len(bad)} differ{': ' + ', '.join(bad) if bad else ''}")
    return int(bool(bad))


def same_steps(name, got, want, steps, exact):
    """Failures: steps whose loss (and, exactly, gradient norm) differ from the reference's."""
    bad, worst = 0, 0.0
    for step in steps:
        if step not in got:
            print(f"  {name}: step {step} was not logged")
            bad += 1
            continue
        g, w = got[step], want[step]
        d = abs(g["loss"] - w["loss"])
        worst = max(worst, d)
        if exact:
            bad += g["loss"] != w["loss"] or g["grad_norm"] != w["grad_norm"] or g["lr"] != w["lr"]
        else:
            bad += d > LOSS_TOL or g["lr"] != w["lr"]
    print(f"  {name}: steps {steps[0]}-{steps[-1]} {'bitwise' if exact else 'within tolerance'}: worst loss |d| "
          f"{worst:.2e}, {bad} step(s) differ")
    return bad


def exported_equals_checkpoint(name, export, folder):
    """Failures: the parameters of checkpoint `folder` against the --export-params file."""
    tensors, _ = assemble(folder)
    exported = {k: ("parameter", v) for k, v in load_file(str(export)).items()}
    return bitwise(f"{name} export vs checkpoint", tensors, exported, kinds=("parameter",))


def consolidated_equals_export(name, tessel, root, export, tmp):
    """Failures: `tessel ckpt export ROOT OUT` (one consolidated file, read by Python's safetensors)
    against the run's --export-params file, bit for bit: the same names, shapes and values."""
    out = tmp / f"{name}-consolidated.safetensors"
    done = subprocess.run([tessel, "ckpt", "export", str(root), str(out)], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        print(f"  {name}: tessel ckpt export failed: {done.stderr.strip()}")
        return 1
    consolidated = {k: ("parameter", v) for k, v in load_file(str(out)).items()}
    exported = {k: ("parameter", v) for k, v in load_file(str(export)).items()}
    return bitwise(f"{name} tessel ckpt export vs --export-params", consolidated, exported, kinds=("parameter",))


def trainer_state(case, state, plan, step):
    """Failures: fields of a saved trainer state (docs/checkpoints.md) that are not this run's."""
    ranks, flags = PLANS[plan]
    want = {"step": step, "steps": STEPS, "seed": 1337, "world_size": ranks, "model": "gpt", "optimizer": "adamw",
            "precision": "f32", "sampler": {"global_batches_consumed": step, "global_batch": 8},
            "lr_schedule": {"lr": 3e-3, "warmup": 0, "schedule": "cosine", "min_lr_ratio": 0.1, "steps": STEPS},
            "config": {"layers": 2, "channels": 32, "heads": 2, "seq": 16, "vocab": 256}}
    bad = {k: state.get(k) for k, v in want.items() if state.get(k) != v}
    mesh = ",".join(f"{axis}={size}" for axis, size in state.get("mesh", []))
    if mesh != flags[1] or "rng" not in state:
        bad["mesh"] = state.get("mesh")
    if bad:
        print(f"  {case}: trainer state fields differ from the run's: {bad}")
    return int(bool(bad))


def resume_mode(run, tmp, run_bundle, tessel):
    failures = 0
    later = list(range(SAVED + 1, STEPS + 1))
    refs = {}
    for plan in ("dp2", "pp2", "fsdp2"):
        root = tmp / f"{plan}-ref-ckpt"
        refs[plan] = run(f"{plan}-ref", plan, ["--checkpoint-dir", str(root)], export=True)
        failures += exported_equals_checkpoint(f"{plan}-ref", refs[plan][2], root / f"step_{STEPS:08d}")
        failures += consolidated_equals_export(f"{plan}-ref", tessel, root, refs[plan][2], tmp)
        for mode, flags in (("sync", []), ("async", ["--async-checkpoint"])):
            if mode == "async" and plan != "dp2":
                continue
            case = f"{plan}-{mode}"
            ckpt = tmp / f"{case}-ckpt"
            first, out, _ = run(f"{case}-first", plan, ["--stop-after", str(SAVED), "--checkpoint-dir", str(ckpt),
                                                         "--checkpoint-every", str(SAVED), *flags])
            if sorted(first) != list(range(1, SAVED + 1)) or "durable" not in out:
                print(f"  {case}: the interrupted run logged steps {sorted(first)} and printed no durable save")
                failures += 1
            failures += same_steps(f"{case} first half", first, refs[plan][0], list(range(1, SAVED + 1)), True)
            failures += trainer_state(case, json.loads((ckpt / f"step_{SAVED:08d}" / "index.json").read_text())
                                      ["trainer"], plan, SAVED)
            # The resumed run saves into the same root: step 20 at its end (async: keeping only it).
            keep = ["--keep-checkpoints", "1"] if mode == "async" else []
            resumed, out, export = run(f"{case}-resumed", plan, ["--resume", str(ckpt), "--checkpoint-dir", str(ckpt),
                                                                 "--checkpoint-every", str(SAVED), *flags, *keep],
                                       export=True)
            if f"resumed from '{ckpt / f'step_{SAVED:08d}'}' (step {SAVED}" not in out:
                print(f"  {case}: no 'resumed from' line:\n{out[-1500:]}")
                failures += 1
            failures += same_steps(f"{case} resumed", resumed, refs[plan][0], later, True)
            failures += bitwise(f"{case} exported parameters", {k: ("parameter", v) for k, v in
                                                                 load_file(str(export)).items()},
                                {k: ("parameter", v) for k, v in load_file(str(refs[plan][2])).items()},
                                kinds=("parameter",))
            folders = sorted(p.name for p in ckpt.iterdir())
            want = [f"step_{STEPS:08d}"] if keep else [f"step_{SAVED:08d}", f"step_{STEPS:08d}"]
            # .lock: the lock file of the runs that saved there (docs/checkpoints.md).
            if folders != [".lock", "latest", *want] or (ckpt / "latest").read_text() != want[-1] + "\n":
                print(f"  {case}: the root holds {folders}, latest {(ckpt / 'latest').read_text()!r}; expected "
                      f"{want} and latest naming the last")
                failures += 1
            failures += exported_equals_checkpoint(f"{case}-resumed", export, ckpt / f"step_{STEPS:08d}")
    # tessel-run: a dp=2 bundle of the same model resumes the dp=2 checkpoint bitwise.
    bundle = tmp / "dp2-bundle"
    run("emit", "one", ["--plan", "dp=2", "--emit-bundle", str(bundle)])
    resumed, _, _ = run("dp2-bundle-resumed", "dp2", ["--resume", str(tmp / "dp2-sync-ckpt" / f"step_{SAVED:08d}")],
                        command=[run_bundle, str(bundle), "--data", run.data, "--steps", str(STEPS), "--device", "cpu",
                                 "--threads", "1", "--eval-batches", "1", "--lr", "3e-3", "--weight-decay", "0.1",
                                 "--grad-clip", "0.5"])
    failures += same_steps("dp2 checkpoint resumed by tessel-run", resumed, refs["dp2"][0], later, True)
    # The dp=2 checkpoint on other plans: within the tolerance of the dp=2 run.
    for plan in ("one", "tp2"):
        resumed, _, _ = run(f"dp2-on-{plan}", plan, ["--resume", str(tmp / "dp2-sync-ckpt" / f"step_{SAVED:08d}")])
        failures += same_steps(f"dp2 checkpoint resumed on {plan}", resumed, refs["dp2"][0], later, False)
    return failures


def reshard_mode(run, tmp):
    failures = 0
    reference, _, _ = run("one-ref", "one", [])
    continued = [SAVED + 1, SAVED + 2, SAVED + 3]
    for source in ("dp4", "fsdp4", "dp2tp2"):
        root = tmp / f"{source}-ckpt"
        run(f"{source}-save", source, ["--stop-after", str(SAVED), "--checkpoint-dir", str(root),
                                       "--checkpoint-every", str(SAVED)])
        saved, index = assemble(root / f"step_{SAVED:08d}")
        kinds = {kind for kind, _ in saved.values()}
        mesh = ",".join(f"{axis}={size}" for axis, size in index["trainer"]["mesh"])
        if kinds != {"parameter", "optimizer_state"} or mesh != PLANS[source][1][1]:
            print(f"  {source}: the checkpoint holds kinds {sorted(kinds)}, mesh {mesh}")
            failures += 1
        for target in ("one", "fsdp2", "tp2"):
            case = f"{source}-to-{target}"
            again = tmp / f"{case}-ckpt"
            run(f"{case}-load", target, ["--resume", str(root), "--stop-after", str(SAVED), "--checkpoint-dir",
                                         str(again), "--checkpoint-every", str(SAVED)])
            loaded, _ = assemble(again / f"step_{SAVED:08d}")
            failures += bitwise(f"{case} loaded state", loaded, saved)
            steps, _, _ = run(f"{case}-train", target, ["--resume", str(root), "--stop-after", str(continued[-1])])
            failures += same_steps(f"{case} continued", steps, reference, continued, False)
    return failures


def main():
    mode, mpiexec, exe, data, run_bundle, tessel = sys.argv[1:7]
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        run = Runner(mpiexec, exe, data, tmp)
        try:
            failures = resume_mode(run, Path(tmp), run_bundle, tessel) if mode == "resume" else reshard_mode(run, Path(tmp))
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print("FAIL:", e)
            return 1
    print(f"  {run.runs} runs in {time.monotonic() - started:.0f} s")
    if failures:
        print(f"FAIL: {failures} check(s) failed")
        return 1
    print("PASS: " + ("exact resume on dp=2 (sync and async), pp=2 and fsdp=2, within tolerance on one rank and "
                      "tp=2; every shard file and `tessel ckpt export`'s file read by safetensors and equal to --export-params" if mode == "resume"
                      else "every save of dp=4, fsdp=4, dp=2,tp=2 loads bitwise under one rank, fsdp=2 and tp=2 "
                      "and trains on within tolerance"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
