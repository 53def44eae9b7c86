#!/usr/bin/env python3
"""Runs every text-valued flag and positional of a Tessel binary with an empty value.

Usage: check_empty_values.py BINARY [ARGS...]   (ARGS: what the binary needs besides the
flag, e.g. tessel-run's BUNDLE positional; parsing fails before it is used.)

The flags are read from `BINARY --help`: CLI11 prints TEXT, FILE or DIR after a flag or a
positional that takes a path, a name or a choice. An empty value ('--log-json ""') used to
mean "not given" for some of them (--emit-bundle '' trained instead of compiling), so every
one must be refused as check_flag_ranges.refusal checks: the binary exits non-zero within
20 s (a refusal happens while parsing; a value taken as "not given" starts a compile or a
training run), and its first output line names the flag. A binary with subcommands is checked
subcommand by subcommand (check_flag_ranges.commands). Prints one line per binary and exits 1 listing every problem.
"""
import re
import subprocess
import sys

from check_flag_ranges import commands, help_text, refusal, report  # the same checks, report and subcommands

OPTION = re.compile(r"^\s+(?:-\w,)?(--[\w-]+)(?:,[!\w-]+)*\s+(?:TEXT|FILE|DIR)\b")
POSITIONAL = re.compile(r"^\s+([A-Z][A-Z_]*)\s+(?:TEXT|FILE|DIR)\b")


def text_flags(command):
    text = help_text(command)
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
    problems = []
    count = 0
    for command in commands(binary):
        label_name = " ".join([name] + command[1:])
        options, positionals = text_flags(command)
        if not options and not positionals:
            problems.append(f"{label_name}: no text-valued flag found in --help")
        # An option: the empty value, with the positionals the binary needs. A positional: ""
        # in its place, "x" in the places of the others (non-empty, so only the empty one is
        # refused).
        # (Two arguments: CLI11 reads "--flag=" as the flag without a value, and then takes the
        # next argument as its value.)
        runs = [(flag, [flag, ""] + extra) for flag in options]
        runs += [(pos, ["x"] * i + [""] + ["x"] * (len(positionals) - i - 1)) for i, pos in enumerate(positionals)]
        count += len(runs)
        for flag, args in runs:
            refusal(command, args, flag, f"{label_name} {flag} ''", problems)
    return report(problems, f"{name}: {count} text-valued flags")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
