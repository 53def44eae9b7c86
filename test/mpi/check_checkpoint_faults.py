"""Acceptance: checkpoints survive the faults they exist for. tessel-gpt (L=2, C=32, NH=2, T=16,
global batch B=8, AdamW) on CPU ranks under mpirun, each scenario beside an uninterrupted run of
the same plan and steps:

  crash-during-save  fsdp=2 (both ranks write shards), --checkpoint-every 5 --async-checkpoint,
      with TESSEL_CKPT_TEST_DELAY_MS (runtime/ckpt/Checkpoint.h's test hook: each rank's writer
      sleeps after writing its shard file and before its marker). Rank 1 is SIGKILLed once its
      shard file of the step-10 save exists and before its marker does. Then `latest` names
      step 5, `tessel ckpt verify` passes on the root (and fails on the partial folder), and a
      resume from the root loads step 5, says the partial step_00000010.tmp folder was skipped,
      and gives steps 6-15 with losses bitwise equal to the uninterrupted run's.
  restart  `tessel launch --max-restarts 2 -- mpirun -np 2 ... --plan dp=2 --checkpoint-every 4
      --steps 12`; rank 1 is SIGKILLed after the first checkpoint is committed (the saves are
      slowed by the hook so the kill lands mid-run). The launch succeeds after one restart that
      resumed from the checkpoint; the final loss and validation loss are bitwise equal to the
      uninterrupted run's (same plan, same data order from the resumed step: the trainer's
      exact-resume promise); the launch log records the failed attempt's cause and the restart.
  min-ranks-dp, min-ranks-fsdp  hostfile `localhost slots=4`, plan dp=4 (then fsdp=4) on 4
      ranks under `tessel launch --min-ranks 2 --hostfile H`. After the first checkpoint the
      hostfile is rewritten to slots=2 ("a node was lost") and rank 1 is SIGKILLed: the
      launcher restarts on 2 ranks with --plan dp=2 (fsdp=2), the trainer reshards the 4-rank
      checkpoint on load (under fsdp every shard is cut anew), and the job finishes. Final loss
      and validation loss within LOSS_TOL of the uninterrupted 4-rank run, and the restarted
      job must say it resumed (a rerun from scratch would also match: same seed, same data).

LOSS_TOL: after the shrink the run has 2 data-parallel ranks where the reference has 4; the two
differ only in the order of f32 sums where the batch is split (two local means of 4 rows
averaged vs four of 2, and the gradients' reductions), a few ulps per step, as in
check_dp_training.py and check_fsdp_training.py, whose bound (5e-6 absolute on a loss near 5.5,
measured worst ~5e-7) this reuses. A resume from a wrong step or with a wrong optimizer state
moves the final loss by ~1e-3 or more (one step of training), far outside it.

Every job's ranks carry TESSEL_CKPT_FAULT_JOB (this process's pid) in their environment, so the
victim is found as the tessel-gpt process whose environment has it and OMPI_COMM_WORLD_RANK=1.

Usage: check_checkpoint_faults.py MPIEXEC TESSEL_GPT DATA_FILE TESSEL"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOSS_TOL = 5e-6
MODEL = ["--layers", "2", "--channels", "32", "--heads", "2", "--seq", "16", "--batch", "8",
         "--eval-batches", "1", "--sample-bytes", "0", "--device", "cpu", "--threads", "1"]
JOB = str(os.getpid())
WAIT_S = 60  # the longest wait for a file or a job; a scenario takes a few seconds


class Failure(Exception):
    pass


def gpt(args):
    return [GPT, "--data", DATA, *MODEL, *args]


def mpirun(ranks, args, hostfile=None):
    launch = [MPIEXEC, "--oversubscribe", "-x", "TESSEL_CKPT_FAULT_JOB"]
    if "TESSEL_CKPT_TEST_DELAY_MS" in os.environ:
        launch += ["-x", "TESSEL_CKPT_TEST_DELAY_MS"]
    if hostfile:
        launch += ["--hostfile", str(hostfile)]
    return [*launch, "-np", str(ranks), *gpt(args)]


def run(cmd, what):
    print("running:", " ".join(map(str, cmd)), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise Failure(f"{what} exited with {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p.stdout + p.stderr


def losses(log):
    """step -> record of a --log-json file (a resumed run's records for a step replace earlier ones)."""
    records = {}
    for line in Path(log).read_text().splitlines():
        r = json.loads(line)
        if "step" in r and "loss" in r:
            records[r["step"]] = r
    return records


def wait_for(predicate, what, proc=None):
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        if proc is not None and proc.poll() is not None:
            out, _ = proc.communicate()
            raise Failure(f"the job ended (status {proc.returncode}) before {what}:\n{out[-3000:]}")
        time.sleep(0.01)
    raise Failure(f"timed out after {WAIT_S} s waiting for {what}")


def ranks():
    """{world rank: pid} of this job's tessel-gpt processes."""
    found = {}
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            if not (p / "comm").read_text().startswith("tessel-gpt"):
                continue
            env = (p / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"TESSEL_CKPT_FAULT_JOB={JOB}".encode() in env:
            for var in env:
                if var.startswith(b"OMPI_COMM_WORLD_RANK="):
                    found[int(var.split(b"=", 1)[1])] = int(p.name)
    return found


def rank_pid(rank):
    """The pid of this job's tessel-gpt process of world rank `rank`, or None."""
    return ranks().get(rank)


def kill_rank(rank):
    pid = wait_for(lambda: rank_pid(rank), f"rank {rank}'s process")
    os.kill(pid, signal.SIGKILL)
    print(f"killed rank {rank} (pid {pid})", flush=True)


def start(cmd, delay_ms):
    print("starting:", " ".join(map(str, cmd)), flush=True)
    env = dict(os.environ, TESSEL_CKPT_TEST_DELAY_MS=str(delay_ms))
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def finish(proc):
    out, _ = proc.communicate(timeout=WAIT_S * 2)
    print(out[-4000:], flush=True)
    return proc.returncode, out


def same(name, got, want, tol):
    """Compares the final step's loss and validation loss; tol 0 means bitwise."""
    step = max(want)
    if max(got) != step:
        raise Failure(f"{name}: the run ended at step {max(got)}, not {step}")
    for key in ("loss", "val_loss"):
        g, w = got[step].get(key), want[step].get(key)
        if w is None:
            continue
        ok = g == w if tol == 0 else g is not None and abs(g - w) <= tol
        print(f"  {name} step {step} {key}: {g!r} vs uninterrupted {w!r}" + (" (bitwise)" if tol == 0 else
                                                                               f" (tolerance {tol})"), flush=True)
        if not ok:
            raise Failure(f"{name}: final {key} {g!r} differs from the uninterrupted run's {w!r}")


def crash_during_save(tmp):
    root = tmp / "crash"
    ref = tmp / "crash-ref.json"
    plan = ["--plan", "fsdp=2", "--steps", "15"]
    run(mpirun(2, [*plan, "--log-json", ref]), "the uninterrupted fsdp=2 run")
    proc = start(mpirun(2, [*plan, "--checkpoint-dir", root, "--checkpoint-every", "5", "--async-checkpoint",
                            "--log-json", tmp / "crash.json"]), delay_ms=4000)

    def shard_of_rank1():  # the step-10 save's shard file of rank 1, written, its marker not yet
        for folder in root.glob("step_00000010.tmp*"):
            files = [f.name for f in folder.iterdir()]
            if any(f.startswith("rank_00001") and f.endswith(".safetensors") for f in files):
                if "rank_00001.done" in files:
                    raise Failure(f"rank 1's marker exists as soon as its shard: the delay hook was not applied")
                return folder
        return None

    folder = wait_for(shard_of_rank1, "rank 1's shard file in step_00000010.tmp", proc)
    kill_rank(1)
    rc, _ = finish(proc)
    if rc == 0:
        raise Failure("the job with a killed rank exited 0")
    if not folder.exists() or (root / "step_00000010").exists():
        raise Failure(f"the interrupted step-10 save committed or vanished: {sorted(p.name for p in root.iterdir())}")
    latest = (root / "latest").read_text()
    if latest != "step_00000005\n":
        raise Failure(f"latest is {latest!r} after the crash, not 'step_00000005\\n'")
    print(run([TESSEL, "ckpt", "verify", root], "tessel ckpt verify of the root"), flush=True)
    partial = subprocess.run([TESSEL, "ckpt", "verify", folder], capture_output=True, text=True, timeout=60)
    if partial.returncode == 0:
        raise Failure(f"tessel ckpt verify passed the partial folder {folder.name}: {partial.stdout}")
    out = run(mpirun(2, [*plan, "--resume", root, "--log-json", tmp / "crash-resumed.json"]), "the resume")
    print(out[-3000:], flush=True)
    loaded = f"resumed from '{root / 'step_00000005'}' (step 5"
    if loaded not in out:
        raise Failure(f"the resume did not print {loaded!r}")
    if not any("skipped" in line and "step_00000010.tmp" in line for line in out.splitlines()):
        raise Failure("the resume did not say that the partial step_00000010.tmp folder was skipped")
    got, want = losses(tmp / "crash-resumed.json"), losses(ref)
    if sorted(got) != list(range(6, 16)):
        raise Failure(f"the resumed run logged steps {sorted(got)}, not 6-15")
    for step in range(6, 16):
        if got[step]["loss"] != want[step]["loss"]:
            raise Failure(f"step {step}: loss {got[step]['loss']!r} after the resume, {want[step]['loss']!r} "
                          "uninterrupted (must be bitwise equal on the same plan)")
    print("  crash-during-save: latest = step 5, verified; resumed steps 6-15 bitwise equal", flush=True)


def launch_log(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def restart(tmp):
    root, log, events = tmp / "restart", tmp / "restart.json", tmp / "restart-launch.jsonl"
    ref = tmp / "restart-ref.json"
    plan = ["--plan", "dp=2", "--steps", "12"]
    run(mpirun(2, [*plan, "--log-json", ref]), "the uninterrupted dp=2 run")
    proc = start([TESSEL, "launch", "--max-restarts", "2", "--log", events, "--",
                  *mpirun(2, [*plan, "--checkpoint-dir", root, "--checkpoint-every", "4", "--log-json", log])],
                 delay_ms=1500)
    wait_for(lambda: (root / "latest").exists(), "the first committed checkpoint", proc)
    kill_rank(1)
    rc, out = finish(proc)
    if rc != 0:
        raise Failure(f"tessel launch exited {rc} after the kill")
    if "resumed from '" not in out:
        raise Failure("the restarted job did not resume from a checkpoint")
    same("restart", losses(log), losses(ref), tol=0)
    ev = launch_log(events)
    exits = [e for e in ev if e["event"] == "exit"]
    restarts = [e for e in ev if e["event"] == "restart"]
    if len(exits) != 1 or exits[0]["exit_status"] == 0 and exits[0]["signal"] == 0:
        raise Failure(f"the launch log does not hold one failed attempt: {exits}")
    if len(restarts) != 1 or "latest checkpoint" not in restarts[0]["from"] or "--resume" not in restarts[0]["command"]:
        raise Failure(f"the launch log does not hold the restart from the checkpoint: {restarts}")
    if ev[-1]["event"] != "done" or ev[-1]["restarts"] != 1:
        raise Failure(f"the launch log does not end with success after 1 restart: {ev[-1]}")
    print(f"  restart: cause {exits[0]['cause']!r}, {restarts[0]['from']}; final loss bitwise equal", flush=True)


def min_ranks(tmp, axis):
    """The shrink of one data-parallel axis, `axis`=4 -> `axis`=2 (dp: replicas; fsdp: the
    shards are cut anew on load)."""
    root, log, events = tmp / "shrink", tmp / "shrink.json", tmp / "shrink-launch.jsonl"
    hosts = tmp / "hosts"
    ref = tmp / "shrink-ref.json"
    hosts.write_text("localhost slots=4\n")
    run(mpirun(4, ["--plan", f"{axis}=4", "--steps", "12", "--log-json", ref]), f"the uninterrupted {axis}=4 run")
    proc = start([TESSEL, "launch", "--max-restarts", "2", "--min-ranks", "2", "--hostfile", hosts, "--log", events,
                  "--", *mpirun(4, ["--plan", f"{axis}=4", "--steps", "12", "--checkpoint-dir", root,
                                    "--checkpoint-every", "4", "--log-json", log], hostfile=hosts)],
                 delay_ms=1500)
    wait_for(lambda: (root / "latest").exists(), "the first committed checkpoint", proc)
    hosts.write_text("localhost slots=2  # a node was lost\n")
    kill_rank(1)
    rc, out = finish(proc)
    if rc != 0:
        raise Failure(f"tessel launch exited {rc} after the kill")
    if not re.search(rf"resumed from .* \(step \d+, saved under plan {axis}=4\b.* on 4 ranks\)", out):
        raise Failure(f"the restarted job did not say it resumed a {axis}=4 checkpoint")
    shrinks = [e for e in launch_log(events) if e["event"] == "shrink"]
    if len(shrinks) != 1 or shrinks[0]["ranks"] != 2 or shrinks[0]["plan"] != f"{axis}=2":
        raise Failure(f"the launch log does not hold the shrink to 2 ranks, {axis}=2: {shrinks}")
    same(f"min-ranks {axis}", losses(log), losses(ref), tol=LOSS_TOL)
    print(f"  min-ranks: restarted on 2 ranks with {axis}=2 from the {axis}=4 checkpoint", flush=True)


def min_ranks_dp(tmp):
    min_ranks(tmp, "dp")


def min_ranks_fsdp(tmp):
    min_ranks(tmp, "fsdp")


def main():
    global MPIEXEC, GPT, DATA, TESSEL
    MPIEXEC, GPT, DATA, TESSEL = sys.argv[1:5]
    os.environ["TESSEL_CKPT_FAULT_JOB"] = JOB
    os.environ.pop("TESSEL_CKPT_TEST_DELAY_MS", None)
    failures = []
    for scenario in (crash_during_save, restart, min_ranks_dp, min_ranks_fsdp):
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory() as tmp:
            try:
                scenario(Path(tmp))
                print(f"{scenario.__name__}: PASS ({time.monotonic() - t0:.1f} s)", flush=True)
            except (Failure, subprocess.TimeoutExpired, OSError, KeyError, ValueError) as e:
                print(f"{scenario.__name__}: FAIL ({time.monotonic() - t0:.1f} s): {e}", flush=True)
                failures.append(scenario.__name__)
            finally:
                for pid in ranks().values():  # no rank of a failed scenario outlives it
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
    if failures:
        print("FAIL:", ", ".join(failures))
        return 1
    print("PASS: crash during an asynchronous save, restart under tessel launch, restart on fewer ranks (dp, fsdp)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
