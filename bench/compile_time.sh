#!/usr/bin/env bash
# Benchmark (not a test): how compile time grows with depth. Times the compile phase alone,
# `tessel-gpt --emit-bundle DIR` with a warm kernel cache (the host compiler does not run),
# for a GPT with C=64, NH=4, T=64, B=4 (small, so the passes, lowering, memory plan and
# bundle writing dominate, not kernel builds) at L = 12, 48, 96 and 192 blocks.
#
# The kernel cache is a folder this script owns (TESSEL_CACHE_DIR); every depth is compiled
# once to fill it (its kernel library differs per depth), then timed RUNS times, keeping the
# fastest run (noise on a shared machine only adds time). Prints each time, the marginal
# seconds per layer early, (t48 - t12) / 36, and late, (t192 - t96) / 96, and their ratio,
# and appends a row to bench/RESULTS.md.
# Target: ratio <= 1.5 (compile time linear in depth; a quadratic part shows as a ratio
# well above 1: it was 7.0 before the memory plan and the param/assign verifiers were fixed).
#
# Then the cold start (issue 16's acceptance): GPT-2 small's shapes (L12 C768 NH12 T1024
# --vocab 50304, B=1) trained for one step with a COLD kernel cache (a fresh empty
# TESSEL_CACHE_DIR per run), timing from process start until the first train step is
# launched, with every kernel built (the whole library is built before the executor exists,
# nothing lazily) and the parameters initialised. The trainer's --profile prints the phases
# on stderr (runtime/train/StartupTimes.h): process start and flags, compile (graph and MLIR
# passes), data, lower and emit kernels, host compile, GEMM tuning, executor, parameter init, loop setup
# and first batch. Best of RUNS cold runs (by the launch time), each phase printed and a row
# appended. Target: first step launched <= 2 s after process start.
#
# Usage: bench/compile_time.sh [runs]   (default 3)
#   TESSEL_GPT=path/to/tessel-gpt times that binary instead of building build/bin/tessel-gpt.
#   ONLY=depth or ONLY=cold runs one of the two parts.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-3}"
GPT="${TESSEL_GPT:-}"
if [ -z "$GPT" ]; then
  scripts/build.sh tessel-gpt >/dev/null
  GPT=build/bin/tessel-gpt
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export TESSEL_CACHE_DIR="$tmp/cache"
DATA="${TESSEL_SHARED_DATA:-../shared/data}/tinyshakespeare.txt"

if [ "${ONLY:-depth}" = depth ] || [ -z "${ONLY:-}" ]; then
/usr/bin/python3 - "$GPT" "$tmp" "$RUNS" <<'PY'
import os, resource, shutil, subprocess, sys, time

gpt, tmp, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
depths = [12, 48, 96, 192]

def compile_once(layers):
    """Wall and CPU (user + sys) seconds of one --emit-bundle at `layers` blocks."""
    out = os.path.join(tmp, f"bundle{layers}")
    shutil.rmtree(out, ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([gpt, "--layers", str(layers), "--channels", "64", "--heads", "4",
                    "--seq", "64", "--batch", "4", "--emit-bundle", out],
                   check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu

for layers in depths:  # fill the kernel cache
    compile_once(layers)
wall, cpu = {}, {}
for layers in depths:
    samples = [compile_once(layers) for _ in range(runs)]
    wall[layers] = min(s[0] for s in samples)
    cpu[layers] = min(s[1] for s in samples)

def slopes(t):
    early = (t[48] - t[12]) / 36
    late = (t[192] - t[96]) / 96
    return early, late, late / early

print(f"GPT C=64 NH=4 T=64 B=4, --emit-bundle with a warm kernel cache, best of {runs}")
for layers in depths:
    print(f"L={layers:<4d} wall {wall[layers]:.3f} s   cpu {cpu[layers]:.3f} s")
for name, t in (("wall", wall), ("cpu", cpu)):
    early, late, ratio = slopes(t)
    print(f"{name}: marginal {early * 1e3:.2f} ms/layer (L 12->48), {late * 1e3:.2f} ms/layer "
          f"(L 96->192), ratio {ratio:.2f} (target <= 1.5)")

early, late, ratio = slopes(wall)
cpu_model = ""
with open("/proc/cpuinfo") as f:
    for line in f:
        if line.startswith("model name"):
            cpu_model = line.split(":", 1)[1].strip()
            break
times = ", ".join(f"L{l} {wall[l]:.2f} s" for l in depths)
row = (f"| {time.strftime('%Y-%m-%d', time.gmtime())} "
       f"| compile_time (GPT C64 NH4 T64 B4, --emit-bundle, warm kernel cache, best of {runs}; "
       f"ratio = late/early marginal s/layer, target <= 1.5) "
       f"| {os.cpu_count()} cores, {cpu_model} "
       f"| {times}; L96->192 {late * 1e3:.2f} ms/layer "
       f"| L12->48 {early * 1e3:.2f} ms/layer | {ratio:.2f} |\n")
with open("bench/RESULTS.md", "a") as f:
    f.write(row)
PY
fi

if [ "${ONLY:-cold}" = cold ] || [ -z "${ONLY:-}" ]; then
/usr/bin/python3 - "$GPT" "$tmp" "$RUNS" "$DATA" "$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)" <<'PY'
import os, re, shutil, subprocess, sys, time

gpt, tmp, runs, data = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
args = [gpt, "--data", data, "--layers", "12", "--channels", "768", "--heads", "12", "--seq", "1024",
        "--vocab", "50304", "--batch", "1", "--steps", "1", "--eval-batches", "1", "--sample-bytes", "0",
        "--profile"]

def cold_once(i):
    """The start-up phases of one run with an empty kernel cache: [(name, seconds)], launch s."""
    cache = os.path.join(tmp, f"cold{i}")
    shutil.rmtree(cache, ignore_errors=True)
    os.makedirs(cache)
    env = dict(os.environ, TESSEL_CACHE_DIR=cache)
    r = subprocess.run(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True)
    line = next(l for l in r.stderr.splitlines() if l.startswith("startup:"))
    phases = [(m.group(1).strip(), float(m.group(2))) for m in re.finditer(r" ([^,]+?) ([0-9.]+) s,", line)]
    launch = float(re.search(r"first step launched at ([0-9.]+) s", line).group(1))
    return phases, launch

results = [cold_once(i) for i in range(runs)]
phases, launch = min(results, key=lambda r: r[1])
print(f"GPT-2 small shapes (L12 C768 NH12 T1024 V50304 B1), cold kernel cache, best of {runs}: "
      f"first step launched at {launch:.2f} s after process start (target <= 2 s)")
for name, s in phases:
    print(f"  {name:<34} {s:7.3f} s")
cpu_model = sys.argv[5]
load = os.getloadavg()[0]
sys.path.insert(0, "bench")
from results_md import add_section_rows
add_section_rows(
    "bench/RESULTS.md", "## Cold start to the first step (bench/compile_time.sh)",
    "GPT-2 small's shapes (L12 C768 NH12 T1024 --vocab 50304, B=1) with an empty kernel cache: seconds from process "
    "start until the first train step is launched, every kernel built and the parameters initialised, by phase "
    "(tessel-gpt --profile's start-up line on stderr). Target: at most 2 s.\n\n"
    "| date | machine, load | phases | first step launched | target <= 2 s |\n|---|---|---|---|---|",
    [f"| {time.strftime('%Y-%m-%d', time.gmtime())} | {os.cpu_count()} cores, {cpu_model}, load average {load:.1f}, "
     f"best of {runs} | {'; '.join(f'{n} {s:.2f} s' for n, s in phases)} | {launch:.2f} s | "
     f"{'met' if launch <= 2 else 'not met'} |"])
PY
fi
