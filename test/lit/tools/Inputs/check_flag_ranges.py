#!/usr/bin/env python3
"""Runs every numeric flag of a Tessel binary at out-of-range values and checks the errors.

Usage: check_flag_ranges.py BINARY [ARGS...]   (ARGS: what the binary needs besides the
flag, e.g. tessel-run's BUNDLE positional; parsing fails before it is used.)

A binary with subcommands (CLI11 lists them under "Subcommands:" in --help, as `tessel` does)
is checked subcommand by subcommand, `BINARY SUB --flag=value` (and `BINARY SUB SUBSUB ...` for
nested ones), so a new subcommand is covered without a change here.

The numeric flags are read from `BINARY --help` (CLI11 prints INT, UINT or FLOAT after a
flag that takes a number). Each must have out-of-range values in OUT_OF_RANGE below: a
flag missing from it fails the check, so a new flag cannot skip it. For every value the
binary must exit non-zero within MAX_SECONDS (a refusal happens while parsing; a value
accepted by mistake would start work), its first output line must name the flag, and no
number in the output may be longer than MAX_DIGITS digits (CLI11's own range checks printed
DBL_MAX in full: 309 digits). Every FLOAT flag must also be tried at HUGE values (1e10 and
1e30, where a conversion to an integer or a std::chrono duration overflows) or be listed
in HUGE_IN_RANGE with the reason huge values are meaningful. Prints one line per binary and
exits 1 listing every problem.
"""
import re
import subprocess
import sys

# Values outside every binary's range for the flag (ranges: runtime/train/FlagChecks.h and
# the add_option calls of dsl/trainer, runtime/train/Loop.cpp, the examples and tessel-run).
OUT_OF_RANGE = {
    "--seed": ["-1", "4611686018427387905"],  # [0, 2^62]
    "--steps": ["-1", "1099511627777", "2.5"],  # [0 or 1, 2^40]
    "--batch": ["0", "16777217"],
    "--grad-accumulation": ["0", "1048577"],
    "--fsdp-prefetch": ["-1", "1048577"],  # [0, 2^20]
    "--bucket-mb": ["0", "-1", "nan", "inf"],
    "--comm-timeout": ["0", "nan", "1000001", "1e10", "1e30"],  # (0, 1e6] s
    "--layers": ["0", "4097"],
    "--channels": ["0", "65537"],
    "--heads": ["0", "4097"],
    "--seq": ["0", "1048577"],
    "--vocab": ["255", "16777217"],
    "--hidden": ["0", "65537"],
    "--lr": ["0", "-1", "nan", "1e999"],
    "--warmup": ["-1", "1.5"],
    "--weight-decay": ["-1", "nan"],
    "--grad-clip": ["-1", "inf"],
    "--eval-every": ["-1"],
    "--eval-batches": ["-1", "1048577"],
    "--log-every": ["0", "1099511627777", "1.5"],  # [1, 2^40]
    "--sample-bytes": ["-1", "1048577"],
    "--temperature": ["0", "101", "nan", "1e10", "1e30"],
    "--top-k": ["-1", "257"],
    "--threads": ["-1", "1025"],
    "--cuda-device": ["-1", "1024"],
    # checkpoints (runtime/train/Checkpointing.cpp)
    "--checkpoint-every": ["0", "-1", "1099511627777", "2.5"],  # [1, 2^40]
    "--keep-checkpoints": ["-1", "1048577"],  # [0, 2^20]
    "--stop-after": ["-1", "1099511627777", "1.5"],  # [0, 2^40]
    # tessel bench-comm
    "--min-bytes": ["0", "1099511627777"],  # [1, 2^40]
    "--max-bytes": ["0", "1099511627777"],
    "--step-bytes": ["-1", "1099511627777"],  # [0, 2^40]
    "--iters": ["0", "1048577"],  # [1, 2^20]
    # tessel bench-gemm (--warmup and --threads share the trainers' rows)
    "--m": ["0", "65537"],  # [1, 2^16]
    "--n": ["0", "65537"],
    "--k": ["0", "65537"],
    "--runs": ["0", "1048577"],  # [1, 2^20]
    # tessel memory
    "--params-billions": ["0", "-1", "nan", "1e10", "1e30"],  # (0, 1e5]
    "--gpus": ["0", "-1", "1048577"],  # [1, 2^20]
    "--world": ["0", "-1", "1048577"],  # [1, 2^20]
    "--pp-virtual-stages": ["0", "4097"],  # [1, 4096]: at most one chunk per layer (--layers <= 4096)
    "--zero-stage": ["-1", "4"],  # trainers 1-3 (0: tessel-gpt-fsdp.test), tessel memory 0-3
    # tessel pipeline
    "--pp": ["0", "257"],  # [1, 256]
    "--microbatches": ["0", "-1", "1099511627777"],  # trainers [1, 2^20], tessel pipeline [1, 4096]
    "--pp-gemm-gflops": ["0", "-1", "nan", "1e10", "1e30"],  # (0, 1e6]
    "--pp-mem-gbps": ["0", "-1", "nan", "1e10", "1e30"],  # (0, 1e6]
    "--pp-p2p-gbps": ["0", "-1", "nan", "1e10", "1e30"],  # (0, 1e6]
    "--pp-p2p-latency-us": ["-1", "nan", "1e10", "1e30"],  # [0, 1e6]
    "--virtual-stages": ["0", "65"],  # [1, 64]
    "--forward-ms": ["0", "-1", "nan", "1e10", "1e30"],  # (0, 1e6]
    "--backward-ms": ["0", "-1", "nan", "1e10", "1e30"],
    "--p2p-ms": ["-1", "nan", "1e10", "1e30"],  # [0, 1e6]
    # tessel launch
    "--max-restarts": ["-1", "1048577", "1.5"],  # [0, 2^20]
    "--min-ranks": ["0", "-1", "1048577"],  # [1, 2^20]
}
HUGE = ["1e10", "1e30"]
# Commands that have no numeric flag, and why (any other command without one means the --help
# parsing above broke).
NO_NUMERIC_FLAGS = {
    "tessel report": "it reads a log file and writes a folder; nothing it takes is a number",
    "tessel ckpt info": "it reads a checkpoint folder; nothing it takes is a number",
    "tessel ckpt verify": "it reads a checkpoint folder; nothing it takes is a number",
    "tessel ckpt export": "it reads a checkpoint folder and writes a file; nothing it takes is a number",
    "tessel ckpt import": "it reads a file and writes a checkpoint folder; nothing it takes is a number",
}
# FLOAT flags for which huge values are in range, and why.
HUGE_IN_RANGE = {
    "--bucket-mb": "any capacity >= the gradients' size means one bucket; compared as a double",
    "--lr": "a diverging run is stopped by the non-finite loss check (runtime/train/Loop.cpp)",
    "--weight-decay": "as --lr: the non-finite loss check stops the run",
    "--grad-clip": "a threshold above every norm means no clipping",
}
MAX_DIGITS = 20
# Seconds a refusal may take: it happens while parsing, before any model or data is
# touched (well under a second); 20 s leaves room for a loaded machine, and a value
# accepted by mistake starts a compile or a training run that takes longer.
MAX_SECONDS = 20
NUMERIC = re.compile(r"^\s+(?:-\w,)?(--[\w-]+)(?:,[!\w-]+)*\s+(INT|UINT|FLOAT)\b")


SUBCOMMAND = re.compile(r"^  ([a-z][\w-]*)\s")


def help_text(command):
    return subprocess.run(command + ["--help"], capture_output=True, text=True, timeout=60).stdout


def commands(binary, command=None):
    """[[BINARY]], or [[BINARY, SUB], ...] for every subcommand --help lists, recursively (a
    subcommand with subcommands of its own, as `tessel ckpt`, gives [BINARY, SUB, SUBSUB], ...)."""
    command = command or [binary]
    subs, listing = [], False
    for line in help_text(command).splitlines():
        if line.strip() == "Subcommands:":
            listing = True
        elif listing and (m := SUBCOMMAND.match(line)):
            subs.append(m.group(1))
        elif listing and line and not line.startswith(" "):
            listing = False
    return [c for sub in subs for c in commands(binary, command + [sub])] or [command]


def numeric_flags(command):
    text = help_text(command)
    return [(m.group(1), m.group(2)) for line in text.splitlines() if (m := NUMERIC.match(line))]


def refusal(command, args, flag, label, problems):
    """Runs COMMAND ARGS (COMMAND: the binary, or the binary and a subcommand), which must exit
    non-zero within MAX_SECONDS with a first output line that names FLAG. Returns the output,
    or appends what went wrong (after LABEL) to PROBLEMS and returns None."""
    if isinstance(command, str):
        command = [command]
    try:
        r = subprocess.run(command + args, capture_output=True, text=True, timeout=MAX_SECONDS)
    except subprocess.TimeoutExpired:
        problems.append(f"{label}: still running after {MAX_SECONDS} s (accepted?)")
        return None
    out = (r.stderr + r.stdout).strip()
    first = out.splitlines()[0] if out else ""
    if r.returncode == 0:
        problems.append(f"{label}: accepted")
    elif flag not in first:
        problems.append(f"{label}: the error does not name the flag: {first!r}")
    else:
        return out
    return None


def report(problems, summary):
    """Prints every problem, then SUMMARY with their count; returns the exit status."""
    for p in problems:
        print(p)
    print(f"{summary}, {len(problems)} problems")
    return 1 if problems else 0


def main(argv):
    binary, extra = argv[1], argv[2:]
    name = binary.rsplit("/", 1)[-1]
    problems = []
    runs = flag_count = 0
    for command in commands(binary):
        label_name = " ".join([name] + command[1:])
        flags = numeric_flags(command)
        flag_count += len(flags)
        if not flags and label_name not in NO_NUMERIC_FLAGS:
            problems.append(f"{label_name}: no numeric flag found in --help")
        for flag, kind in flags:
            if flag not in OUT_OF_RANGE:
                problems.append(f"{label_name}: {flag} takes a number but has no out-of-range values in OUT_OF_RANGE")
                continue
            if kind == "FLOAT" and flag not in HUGE_IN_RANGE and not all(h in OUT_OF_RANGE[flag] for h in HUGE):
                problems.append(f"{label_name}: {flag} is a FLOAT flag without {HUGE} in OUT_OF_RANGE or a reason in "
                                "HUGE_IN_RANGE")
            for value in OUT_OF_RANGE[flag]:
                runs += 1
                label = f"{label_name} {flag}={value}"
                out = refusal(command, [f"{flag}={value}"] + extra, flag, label, problems)
                longest = max((len(d) for d in re.findall(r"\d+", out or "")), default=0)
                if longest > MAX_DIGITS:
                    problems.append(f"{label}: a {longest}-digit number in: {out.splitlines()[0][:160]!r}")
    return report(problems, f"{name}: {flag_count} numeric flags, {runs} out-of-range values")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
