#!/usr/bin/env python3
"""--report and the log's new fields on 2 ranks: `mpirun -np 2 tessel-gpt --plan dp=2`.

Usage: check_report_ranks.py MPIEXEC TESSEL_GPT DATA

Checks, against references computed here:
  - the log's run record lists 2 ranks' memory; each rank's parameters are 4 bytes (f32) times
    the parameter count the trainer prints (data parallelism replicates every parameter), and
    AdamW's state is twice that (m and v);
  - every step's comm_bytes is {"all_reduce": 4 x parameters}: data parallelism all-reduces
    every f32 gradient once per step (the closed form of the gradient all-reduce), and
    comm_exposed_s is a non-negative time below the step's own time;
  - the page (check_report.py from test/lit/tools/Inputs) plots the logged values and has a
    memory row per rank;
  - the ranks print plain progress lines, one per step, no "\\r": OpenMPI gives every rank a
    pseudo-terminal even though mpirun's output here is a pipe.
Prints one line per problem; exits 1 on a problem.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

STEPS = 4


def main():
    mpiexec, gpt, data = sys.argv[1:4]
    here = os.path.dirname(os.path.abspath(__file__))
    check_report = os.path.join(here, "..", "lit", "tools", "Inputs", "check_report.py")
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        log, report = os.path.join(tmp, "log.jsonl"), os.path.join(tmp, "report")
        cmd = [mpiexec, "--oversubscribe", "-np", "2", gpt, "--data", data, "--layers", "1", "--channels", "32",
               "--heads", "2", "--seq", "16", "--batch", "4", "--steps", str(STEPS), "--eval-every", "2",
               "--eval-batches", "2", "--sample-bytes", "0", "--device", "cpu", "--threads", "1", "--plan", "dp=2",
               "--log-json", log, "--report", report]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
        if r.returncode != 0:
            print(f"FAIL: {' '.join(cmd)} exited {r.returncode}: {r.stdout[-2000:]}")
            return 1
        m = re.search(r"(\d+) parameters", r.stdout)
        params = int(m.group(1))
        records = [json.loads(line) for line in open(log) if line.strip()]
        memory = records[0].get("run", {}).get("memory", [])
        if [x.get("rank") for x in memory] != [0, 1]:
            problems.append(f"memory ranks {[x.get('rank') for x in memory]}, want [0, 1]")
        for x in memory:
            if x.get("parameters") != 4 * params or x.get("optimizer_state") != 8 * params:
                problems.append(f"rank {x.get('rank')}: parameters {x.get('parameters')} and optimizer state "
                                f"{x.get('optimizer_state')} bytes, want {4 * params} and {8 * params}")
        for rec in records:
            if rec.get("comm_bytes") != {"all_reduce": 4 * params}:
                problems.append(f"step {rec['step']}: comm_bytes {rec.get('comm_bytes')}, "
                                f"want {{'all_reduce': {4 * params}}}")
            e = rec.get("comm_exposed_s")
            if not isinstance(e, float) or not 0 <= e <= rec["step_seconds"]:
                problems.append(f"step {rec['step']}: comm_exposed_s {e} not in [0, {rec['step_seconds']}]")
        c = subprocess.run([sys.executable, check_report, log, os.path.join(report, "index.html"), "2"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if c.returncode != 0:
            problems.append(f"check_report.py: {c.stdout.strip()}")
        steps = [int(s) for s in re.findall(r"^step +(\d+)/", r.stdout, re.M)]
        if steps != list(range(1, STEPS + 1)) or "\r" in r.stdout:
            problems.append(f"progress under mpirun: lines for steps {steps}, carriage return "
                            f"{'present' if chr(13) in r.stdout else 'absent'}; want 1..{STEPS} and none")
    for p in problems:
        print("FAIL:", p)
    print(f"report on 2 ranks: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
