"""Acceptance: per-rank memory is known before launch, and the runtime measures the same.

1. Static bytes per rank under fsdp=N against a closed form this test states: the GPT's
   parameters (wte [V, C], wpe [T, C], ln_f, and per block ln1, attn.qkv [3C, C] + [3C],
   attn.proj [C, C] + [C], ln2, mlp.fc [4C, C] + [4C], mlp.proj [C, 4C] + [C]) are sharded on
   dimension 0, so a rank holds ceil(d0 / N) rows of each, in f32 (master weights, in bf16
   too); each buffer is one block of the executor, rounded up to its 64-byte alignment:
     parameters      = sum over parameters of align64(4 ceil(d0 / N) rest)
     optimizer_state = 2 x parameters (AdamW exp_avg and exp_avg_sq, each laid out as its
                       parameter)
     gradients       = 0, or 1 x parameters with gradient accumulation (f32 accumulators)
     gradient temporaries (the arena's gradients an optimizer step reads) = 1 x parameters
                       (f32 gradient shards, also in bf16)
   checked on `tessel-gpt --memory-json` (compile only) for one rank, fsdp=2 and fsdp=4, bf16
   and gradient accumulation.
2. Measured against predicted: training runs (one rank, fsdp=2 and fsdp=4 under mpirun, each
   without and with --activation-checkpointing full) log every rank's memory: the executor's
   AllocationCounter peak (the blocks it really allocated) must equal the prediction
   exactly, and so must the arena's; every step's peak_memory_bytes too; the highest arena
   byte a step touched, rounded up to the arena's 64-byte alignment, must be the arena's end
   (the memory plan places some temporary last); and with checkpointing the arena must be
   smaller. The prediction is taken from a separate compile-only process, before launch.
   Tolerance 0 throughout: these are byte counts.
3. --device-memory: with the predicted total as the budget the run trains; one byte less and
   both ranks of `mpirun -np 2` refuse before allocating, each naming itself, the bytes, the
   budget and the largest part, with no step trained and no hang.

   tessel-run refuses a dp=2 bundle alike (one byte short) and runs it at the prediction.

Usage: check_memory.py MPIEXEC TESSEL_GPT DATA_FILE TESSEL_RUN"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

L, C, NH, T, B, V = 2, 32, 2, 16, 8, 256
SHAPE = ["--layers", str(L), "--channels", str(C), "--heads", str(NH), "--seq", str(T), "--batch", str(B)]
COMMON = SHAPE + ["--steps", "2", "--eval-batches", "1", "--sample-bytes", "0", "--device", "cpu", "--threads", "1"]


def align64(n):
    return (n + 63) // 64 * 64


def parameter_shapes():
    shapes = [[V, C], [T, C], [C], [C]]
    for _ in range(L):
        shapes += [[C], [C], [3 * C, C], [3 * C], [C, C], [C], [C], [C], [4 * C, C], [4 * C], [C, 4 * C], [C]]
    return shapes


def shard_bytes(n):
    """Bytes of every f32 parameter shard of one rank under fsdp=n, each block aligned."""
    total = 0
    for shape in parameter_shapes():
        rows = -(-shape[0] // n)
        rest = 1
        for d in shape[1:]:
            rest *= d
        total += align64(4 * rows * rest)
    return total


def predicted(exe, extra):
    p = subprocess.run([exe, *SHAPE, *extra, "--memory-json"], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        sys.exit(f"FAIL: {exe} {' '.join(extra)} --memory-json exited {p.returncode}\n{p.stderr}")
    return json.loads(p.stdout)["per_rank"]


def launch(mpiexec, ranks, cmd, timeout=300):
    if ranks > 1:
        cmd = [mpiexec, "--oversubscribe", "-np", str(ranks), *cmd]
    print("running:", " ".join(cmd), flush=True)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def main():
    mpiexec, exe, data, runner = sys.argv[1:5]
    failures = []

    # 1. Static bytes against the closed form.
    for n, extra in [(1, []), (2, ["--plan", "fsdp=2"]), (4, ["--plan", "fsdp=4"]),
                     (2, ["--plan", "fsdp=2", "--precision", "bf16"]),
                     (2, ["--plan", "fsdp=2", "--grad-accumulation", "2"])]:
        m = predicted(exe, extra)
        want = shard_bytes(n)
        accumulating = "--grad-accumulation" in extra
        for field, expect in [("parameters", want), ("optimizer_state", 2 * want),
                              ("gradients", want if accumulating else 0), ("gradient_temporaries", want)]:
            if m[field] != expect:
                failures.append(f"static {extra or 'one rank'}: {field} {m[field]} bytes, the formula gives {expect}")

    # 2. Measured against predicted.
    with tempfile.TemporaryDirectory() as tmp:
        arenas = {}
        for label, ranks, plan in [("one rank", 1, []), ("fsdp=2", 2, ["--plan", "fsdp=2"]),
                                   ("fsdp=4", 4, ["--plan", "fsdp=4"])]:
            for mode in ["none", "full"]:
                extra = plan + ([] if mode == "none" else ["--activation-checkpointing", "full"])
                want = predicted(exe, extra)
                log = Path(tmp) / f"{label}-{mode}.jsonl"
                p = launch(mpiexec, ranks, [exe, "--data", data, *COMMON, *extra, "--log-json", str(log)])
                if p.returncode != 0:
                    failures.append(f"{label} {mode}: exited {p.returncode}\n{p.stdout}\n{p.stderr}")
                    continue
                records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
                memory = records[0]["run"]["memory"]
                if len(memory) != ranks:
                    failures.append(f"{label} {mode}: {len(memory)} memory rows for {ranks} ranks")
                for row in memory:
                    where = f"{label} {mode} rank {row['rank']}"
                    if row["measured_peak_bytes"] != want["total"] or row["predicted_bytes"] != want["total"]:
                        failures.append(f"{where}: measured peak {row['measured_peak_bytes']}, logged prediction "
                                        f"{row['predicted_bytes']}, compile-only prediction {want['total']} bytes")
                    if row["measured_arena_bytes"] != want["arena"] or row["activation_arena"] != want["arena"]:
                        failures.append(f"{where}: measured arena {row['measured_arena_bytes']}, predicted "
                                        f"{want['arena']} bytes")
                for rec in records:
                    if rec["peak_memory_bytes"] != want["total"]:
                        failures.append(f"{label} {mode} step {rec['step']}: peak_memory_bytes "
                                        f"{rec['peak_memory_bytes']}, predicted {want['total']}")
                    if align64(rec["arena_high_water_bytes"]) != want["arena"]:
                        failures.append(f"{label} {mode} step {rec['step']}: arena high-water "
                                        f"{rec['arena_high_water_bytes']} does not end the {want['arena']}-byte arena")
                arenas[(label, mode)] = want["arena"]
            if (label, "full") in arenas and not arenas[(label, "full")] < arenas[(label, "none")]:
                failures.append(f"{label}: checkpointing's arena {arenas[(label, 'full')]} is not below "
                                f"{arenas[(label, 'none')]}")

    # 3. --device-memory at the boundary, on two ranks: the trainer (fsdp=2) and tessel-run (a
    # dp=2 bundle, whose program is the one --memory-json lowers).
    with tempfile.TemporaryDirectory() as tmp:
        bundle = Path(tmp) / "bundle"
        p = subprocess.run([exe, *SHAPE, "--plan", "dp=2", "--emit-bundle", str(bundle)], capture_output=True,
                           text=True, timeout=300)
        if p.returncode != 0:
            sys.exit(f"FAIL: --emit-bundle exited {p.returncode}\n{p.stderr}")
        cases = [("tessel-gpt", "fsdp=2",
                  "fsdp=2 fully_shard=fsdp zero_stage=3 unit=blocks.* prefetch=1 bucket_mb=25 overlap=on",
                  [exe, "--data", data, *COMMON, "--plan", "fsdp=2", "--steps", "1"]),
                 ("tessel-run", "dp=2", "dp=2",
                  [runner, str(bundle), "--data", data, "--steps", "1", "--device", "cpu", "--threads", "1"])]
        for name, plan, described, base in cases:
            need = predicted(exe, ["--plan", plan])["total"]
            p = launch(mpiexec, 2, [*base, "--device-memory", f"{need}B"])
            if p.returncode != 0:
                failures.append(f"{name}: --device-memory {need}B (the prediction) was refused:\n{p.stdout}\n{p.stderr}")
            try:
                p = launch(mpiexec, 2, [*base, "--device-memory", f"{need - 1}B"], timeout=120)
            except subprocess.TimeoutExpired:
                failures.append(f"{name}: --device-memory one byte short: the job hung")
                continue
            out = p.stdout + p.stderr
            if p.returncode == 0:
                failures.append(f"{name}: --device-memory one byte short: the job exited 0")
            for r in [0, 1]:
                want = f"--device-memory {need - 1}B: the plan {described} does not fit: rank {r} needs"
                lines = [line for line in out.splitlines() if want in line]
                if not lines or f"needs {need} bytes" not in lines[0] or f"the {need - 1} bytes" not in lines[0] \
                        or "largest part is the" not in lines[0]:
                    failures.append(f"{name}: rank {r} did not refuse with its bytes, the budget and the largest "
                                    f"part:\n{out}")
            if any(line.startswith("step ") for line in p.stdout.splitlines()):
                failures.append(f"{name}: a rank trained despite the refusal:\n{p.stdout}")

    for f in failures:
        print("FAIL:", f)
    if failures:
        return 1
    print("ok: static bytes match the closed form; measured == predicted on every rank; --device-memory refuses")
    return 0


if __name__ == "__main__":
    sys.exit(main())
