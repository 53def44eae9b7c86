#!/usr/bin/env python3
"""Runs every text-valued flag and positional of a Tessel binary with an empty value.

Usage: check_empty_values.py BINARY [ARGS...]   (ARGS: what the binary needs besides the
flag, e.g. tessel-run's BUNDLE positional; parsing fails before it is used.)

The flags are read from `BINARY --help`: CLI11 prints TEXT, FILE or DIR after a flag or a
positional that takes a path, a name or a choice. An empty value ('--log-json ""') used to
mean "not given" for some of them (--emit-bundle '' trained instead of compiling), so every
one must be refused: the binary exits non-zero within MAX_SECONDS (a refusal happens while
parsing; a value taken as "not given" starts a compile or a training run), and its first
output line names the flag. Prints one line per binary and exits 1 listing every problem.
"""
import re
import subprocess
import sys

# Seconds a refusal may take: parsing takes well under a second; 20 s leaves room for a
# loaded machine, and a value wrongly accepted starts work that takes longer.
MAX_SECONDS = 20
OPTION = re.compile(r"^\s+(?:-\w,)?(--[\w-]+)(?:,[!\w-]+)*\s+(?:TEXT|FILE|DIR)\b")
POSITIONAL = re.compile(r"^\s+([A-Z][A-Z_]*)\s+(?:TEXT|FILE|DIR)\b")


def text_flags(binary):
    text = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=60).stdout
    options, positionals = [], []
    for line in text.splitlines():
        if m := OPTION.match(line):
            options.append(m.group(1))
        elif m := POSITIONAL.match(line):
            positionals.append(m.group(1))
    return options, positionals


def main(argv):
    binary, extra = argv[1], argv[2:]
    name = binary.rsplit("/", 1)[-1]
    options, positionals = text_flags(binary)
    problems = []
    if not options:
        problems.append(f"{name}: no text-valued flag found in --help")
    # An option: the empty value, with the positionals the binary needs. A positional: ""
    # in place of the (only) one.
    # (Two arguments: CLI11 reads "--flag=" as the flag without a value, and then takes the
    # next argument as its value.)
    runs = [(flag, [flag, ""] + extra) for flag in options]
    runs += [(pos, [""]) for pos in positionals]
    for flag, args in runs:
        try:
            r = subprocess.run([binary] + args, capture_output=True, text=True, timeout=MAX_SECONDS)
        except subprocess.TimeoutExpired:
            problems.append(f"{name} {flag} '': still running after {MAX_SECONDS} s (taken as not given?)")
            continue
        out = (r.stderr + r.stdout).strip()
        first = out.splitlines()[0] if out else ""
        if r.returncode == 0:
            problems.append(f"{name} {flag} '': accepted")
        elif flag not in first:
            problems.append(f"{name} {flag} '': the error does not name the flag: {first!r}")
    for p in problems:
        print(p)
    print(f"{name}: {len(runs)} text-valued flags, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
