#!/usr/bin/env python3
"""Checks a trainer's progress output on a terminal and off one (runtime/train/Progress.h).

Usage: check_progress.py STEPS EVERY TRAINER [ARGS...]   (ARGS: a short training run without
--steps, --log-every and --eval-every; this script adds them)

1. Under a pseudo-terminal (Python's pty: the trainer's stdout is a tty), --steps STEPS: the
   progress bar is redrawn in place. Every redraw starts with "\\r[" and shows "k/STEPS"; there
   are STEPS of them, for k = 1..STEPS in order; no newline comes between the first redraw
   and the last (a newline per step would scroll); the redraws show the last validation loss
   ("val -" before the first, a number after it); and the line is ended once afterwards.
   With an empty kernel cache ($TESSEL_CACHE_DIR, a fresh folder) the kernel build is
   announced: "compiling kernel library k<key>.so: N kernels, ... done in S s".
2. Through a pipe (not a terminal), --steps STEPS --log-every EVERY: the plain progress lines
   are exactly the steps k with k % EVERY == 0, plus the last step (which validates), and no
   "\\r" is printed; nor is the kernel build announced, from an empty cache as well.
Prints one line per problem and "progress: 0 problems"; exits 1 on a problem.
"""
import os
import pty
import re
import subprocess
import sys
import tempfile


def run_on_terminal(cmd, env):
    """The bytes `cmd` writes to a pseudo-terminal it has as stdout and stderr, and its exit code."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execvpe(cmd[0], cmd, env)
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    return out.decode("utf-8", "replace"), os.waitstatus_to_exitcode(status)


def main():
    steps, every, trainer, args = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4:]
    problems = []
    eval_every = steps // 2  # one validation mid-run and one at the end
    cold = tempfile.TemporaryDirectory()
    env = dict(os.environ, TESSEL_CACHE_DIR=os.path.join(cold.name, "terminal"))
    out, rc = run_on_terminal([trainer, *args, "--steps", str(steps), "--eval-every", str(eval_every)], env)
    if not re.search(r"compiling kernel library k[0-9a-f]{16}\.so: [1-9][0-9]* kernels, .* done in [0-9.]+ s", out):
        problems.append("terminal: the kernel build from an empty cache was not announced")
    if rc != 0:
        problems.append(f"terminal run exited {rc}: {out[-400:]!r}")
    redraws = [(m.start(), m.group(1), m.group(2)) for m in
               re.finditer(r"\r\[[#.]+\] (\d+)/\d+ \| loss [0-9.]+ \| val (-|[0-9.]+) \|", out)]
    got = [int(k) for _, k, _ in redraws]
    if got != list(range(1, steps + 1)):
        problems.append(f"terminal: redraws for steps {got}, want 1..{steps}")
    elif "\n" in out[redraws[0][0]:redraws[-1][0]]:
        problems.append("terminal: a newline between the first and the last redraw: the bar scrolls")
    else:
        vals = [v for _, _, v in redraws]
        want = ["-"] * (eval_every - 1)
        if vals[:eval_every - 1] != want or "-" in vals[eval_every - 1:]:
            problems.append(f"terminal: the last validation loss shown per redraw is {vals}")
        after = out[redraws[-1][0] + 1:]
        if "\n" not in after or "\r[" in after:
            problems.append(f"terminal: the bar's line is not ended once after the last redraw: {after[:200]!r}")
    p = subprocess.run([trainer, *args, "--steps", str(steps), "--log-every", str(every)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=dict(os.environ, TESSEL_CACHE_DIR=os.path.join(cold.name, "pipe")))
    cold.cleanup()
    if "compiling kernel library" in p.stdout:
        problems.append("pipe: the kernel build was announced on output that is not a terminal")
    if p.returncode != 0:
        problems.append(f"pipe run exited {p.returncode}: {p.stdout[-400:]!r}")
    lines = [int(m.group(1)) for m in re.finditer(r"^step +(\d+)/\d+ \| loss", p.stdout, re.M)]
    want = sorted({k for k in range(1, steps + 1) if k % every == 0} | {steps})
    if lines != want:
        problems.append(f"pipe: progress lines for steps {lines}, want {want}")
    if "\r" in p.stdout:
        problems.append("pipe: a carriage return in output that is not a terminal")
    for x in problems:
        print("PROBLEM:", x)
    print(f"progress: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
