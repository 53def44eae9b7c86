"""Checkpoints of the GPU executor on the stand-in CUDA driver (docs/gpu.md): the device-side
snapshot and load of runtime/ckpt work as the CPU executor's (docs/checkpoints.md).

A tiny GPT (L=1, C=16, NH=2, T=8, B=2) on --device cuda trains 4 steps (the reference); the
same run stopped after step 2 (--stop-after 2, an asynchronous checkpoint at step 2, its
parameters exported) and resumed on the device continues bitwise: the log of the two halves
equals the reference's, loss for loss, and the final exported parameters equal the reference's
byte for byte. Across devices: the device's step-2 checkpoint loaded on the CPU (--stop-after
2: no step runs) exports byte for byte the parameters the device exported at step 2, and a CPU
checkpoint loaded on the device likewise: the state moves between executors exactly (their
trajectories differ by ulps, since the kernels differ, so only the loaded state is compared).

With `fsdp2 MPIEXEC`: the same exact resume on two ranks, --plan fsdp=2 on two stand-in devices
through the stand-in NCCL (each rank snapshots and loads its own shards on its device); the
cross-device checks are the one-rank mode's.

Usage: check_checkpoint_cuda.py TESSEL_GPT DATA_FILE [fsdp2 MPIEXEC]
(environment: the stand-ins', TESSEL_STANDIN_ENV)"""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

COMMON = ["--layers", "1", "--channels", "16", "--heads", "2", "--seq", "8", "--batch", "2", "--steps", "4",
          "--sample-bytes", "0", "--eval-batches", "1"]


def main():
    exe, data = sys.argv[1:3]
    ranks = 2 if sys.argv[3:4] == ["fsdp2"] else 1
    launch = [sys.argv[4], "--oversubscribe", "-np", "2"] if ranks == 2 else []
    plan = ["--plan", "fsdp=2", "--batch", "4"] if ranks == 2 else []
    env = dict(os.environ, TESSEL_STANDIN_DEVICES=str(ranks), OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)

        def run(device, *extra):
            cmd = [*launch, exe, "--data", data, *COMMON, *plan, "--device", device,
                   *([] if device == "cuda" else ["--threads", "1"]), *map(str, extra)]
            print("running:", " ".join(cmd), flush=True)
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
            if p.returncode != 0:
                raise RuntimeError(f"exit {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
            return p.stdout

        def losses(path):
            return [json.dumps(json.loads(line)["loss"]) for line in path.read_text().splitlines()]

        def same_file(name, a, b):
            same = a.read_bytes() == b.read_bytes()
            print(f"  {name}: {'byte for byte equal' if same else 'DIFFER'}")
            return int(not same)

        try:
            run("cuda", "--log-json", t / "ref.json", "--export-params", t / "ref.safetensors")
            run("cuda", "--log-json", t / "run.json", "--stop-after", 2, "--checkpoint-dir", t / "gpu",
                "--checkpoint-every", 2, "--async-checkpoint", "--export-params", t / "gpu2.safetensors")
            out = run("cuda", "--log-json", t / "run.json", "--resume", t / "gpu", "--export-params",
                      t / "end.safetensors")
            if "resumed from" not in out or "Tessel stand-in" not in out:
                print("  no 'resumed from' line, or not on the stand-in device:\n" + out[-1500:])
                failures += 1
            ref, got = losses(t / "ref.json"), losses(t / "run.json")
            print(f"  device resumed at step 2: losses {got} vs {ref}")
            failures += ref != got or len(ref) != 4
            failures += same_file("device resumed: final parameters vs the reference's", t / "end.safetensors",
                                  t / "ref.safetensors")
            if ranks == 1:  # across executors
                run("cpu", "--resume", t / "gpu", "--stop-after", 2, "--export-params", t / "gpu-on-cpu.safetensors")
                failures += same_file("device checkpoint loaded on the CPU", t / "gpu-on-cpu.safetensors",
                                      t / "gpu2.safetensors")
                run("cpu", "--stop-after", 2, "--checkpoint-dir", t / "cpu", "--checkpoint-every", 2,
                    "--export-params", t / "cpu2.safetensors")
                run("cuda", "--resume", t / "cpu", "--stop-after", 2, "--export-params", t / "cpu-on-gpu.safetensors")
                failures += same_file("CPU checkpoint loaded on the device", t / "cpu-on-gpu.safetensors",
                                      t / "cpu2.safetensors")
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print("FAIL:", e)
            return 1
    if failures:
        print(f"FAIL: {failures} check(s) failed")
        return 1
    print("PASS: the device run (fsdp=2 on two devices) resumes bitwise" if ranks == 2 else
          "PASS: the device run resumes bitwise; checkpoints move between the device and the CPU exactly")
    return 0


if __name__ == "__main__":
    sys.exit(main())
