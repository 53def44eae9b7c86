"""The table of examples/labs/README.md is true: every command in its "Command" column runs, in
the table's order (the checkpoint rows build on each other), from the repository root, and exits
0; and every `quoted` text in its "What to look for" column appears in that command's output
(stdout and stderr). The commands name the binaries as build/bin/...; a build folder elsewhere
(TESSEL_BUILD_DIR) is substituted for that prefix. A table without the labs' rows (a lab whose
binary no row runs) fails too.

Usage: check_labs_readme.py README SOURCE_ROOT BIN_DIR"""
import os
import re
import subprocess
import sys
from pathlib import Path

# Every lab's binary must appear in some row, and the tessel subcommands the labs use.
REQUIRED = ["tessel-lab-ddp", "tessel-lab-unused", "tessel-lab-fsdp", "tessel-lab-tp", "tessel pipeline",
            "tessel ckpt info", "--resume"]


def rows(readme):
    """(lab, command, texts to look for) of every table row, in order."""
    out, header = [], None
    for line in Path(readme).read_text().splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            continue
        if set("".join(cells)) <= set("-: "):
            continue  # the separator row
        if len(cells) != len(header):
            raise RuntimeError(f"a row has {len(cells)} cells, the header {len(header)}: {line}")
        row = dict(zip(header, cells))
        commands = re.findall(r"`([^`]+)`", row["Command"])
        if len(commands) != 1:
            raise RuntimeError(f"row '{row['Lab']}': the Command cell holds {len(commands)} commands, not one")
        out.append((row["Lab"], commands[0], re.findall(r"`([^`]+)`", row["What to look for"])))
    return out


def main():
    readme, root, bindir = sys.argv[1:4]
    table = rows(readme)
    commands = " ".join(c for _, c, _ in table)
    missing = [r for r in REQUIRED if r not in commands]
    if missing:
        print(f"FAIL: no row runs {missing}")
        return 1
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    failures = 0
    for lab, command, texts in table:
        run = command.replace("build/bin/", str(Path(bindir).resolve()) + "/")
        print(f"[{lab}] {run}", flush=True)
        try:
            p = subprocess.run(["bash", "-c", run], cwd=root, env=env, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            print(f"  FAIL: still running after 300 s")
            failures += 1
            continue
        output = p.stdout + p.stderr
        if p.returncode != 0:
            print(f"  FAIL: exit code {p.returncode}:\n{output[-3000:]}")
            failures += 1
            continue
        absent = [t for t in texts if t not in output]
        for t in texts:
            print(f"  {'found' if t not in absent else 'MISSING'}: {t}")
        if absent:
            print(f"  FAIL: {len(absent)} text(s) to look for are not in the output:\n{output[-3000:]}")
            failures += 1
    if failures:
        print(f"FAIL: {failures} of {len(table)} rows are not true")
        return 1
    print(f"PASS: all {len(table)} rows run and show what they say")
    return 0


if __name__ == "__main__":
    sys.exit(main())
