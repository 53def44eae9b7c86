#!/usr/bin/env python3
"""Edits a copy of a bundle once per EDIT, re-signs it (resign_bundle.py, so that the loader's
own checks are what refuse it) and runs tessel-run on it. Prints one line per edit:
"EDIT: <tessel-run's first line of output>" when tessel-run exits with 1, "EDIT: accepted" when
it exits with 0, and "EDIT: exit <code>" for any other exit (a signal shows as a negative code),
with the copy's path replaced by BUNDLE.

Usage: refused_config_edits.py BUNDLE WORKDIR EDIT...
EDIT is FIELD=JSON as resign_bundle.py takes it (config.heads=0, config=[], model='"lab-x"'), or
several separated by spaces, made together.
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resign_bundle import resign  # noqa: E402


def main():
    bundle, workdir, edits = sys.argv[1], sys.argv[2], sys.argv[3:]
    for i, edit in enumerate(edits):
        copy = os.path.join(workdir, f"edit{i}")
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(bundle, copy)
        resign(copy, edit.split())
        run = subprocess.run(["tessel-run", copy, "--steps", "1", "--threads", "1"], capture_output=True, text=True)
        lines = (run.stdout + run.stderr).splitlines()
        if run.returncode == 1:
            shown = (lines[0] if lines else "(no output)").replace(copy, "BUNDLE")
        elif run.returncode == 0:
            shown = "accepted"
        else:
            shown = f"exit {run.returncode}"
        print(f"{edit}: {shown}")


if __name__ == "__main__":
    main()
