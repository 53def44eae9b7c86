#!/usr/bin/env python3
"""`tessel topology` under mpirun gathers every rank's host and warns about tp groups that
span hosts.

Usage: check_topology_ranks.py MPIEXEC TESSEL

One machine plays two hosts: ranks 0-1 run with TESSEL_HOSTNAME=hostA and ranks 2-3 with
hostB (OpenMPI's MPMD syntax, the same arguments on every rank). Checks:
  - --json lists the 4 ranks with those hosts, in rank order;
  - --plan dp=2,tp=2 (tp ranks are neighbours: 0-1 and 2-3, each on one host): no warning;
  - --plan tp=2,dp=2 (tp groups 0,2 and 1,3, each across both hosts): one warning per group,
    naming its ranks;
  - the text output names the layout ("4 ranks on 2 hosts") and prints the warnings.
Exits 1 listing every problem.
"""
import json
import subprocess
import sys


def run(mpiexec, tessel, args):
    cmd = [mpiexec, "--oversubscribe"]
    for i, host in enumerate(["hostA", "hostB"]):
        if i:
            cmd.append(":")
        cmd += ["-np", "2", "env", f"TESSEL_HOSTNAME={host}", tessel, "topology"] + args
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


def main(argv):
    mpiexec, tessel = argv[1], argv[2]
    problems = []
    rc, out, err = run(mpiexec, tessel, ["--json", "--plan", "dp=2,tp=2"])
    if rc != 0:
        problems.append(f"dp=2,tp=2: exit {rc}: {err.strip()[:300]}")
    else:
        doc = json.loads(out)
        hosts = [r["host"] for r in doc["ranks"]]
        if hosts != ["hostA", "hostA", "hostB", "hostB"]:
            problems.append(f"ranks' hosts {hosts}")
        if doc["plan_warnings"]:
            problems.append(f"dp=2,tp=2 keeps tp on one host but warns: {doc['plan_warnings']}")
    rc, out, err = run(mpiexec, tessel, ["--json", "--plan", "tp=2,dp=2"])
    if rc != 0:
        problems.append(f"tp=2,dp=2: exit {rc}: {err.strip()[:300]}")
    else:
        w = json.loads(out)["plan_warnings"]
        if len(w) != 2 or "ranks 0, 2 spans 2 hosts" not in w[0] or "ranks 1, 3 spans 2 hosts" not in w[1]:
            problems.append(f"tp=2,dp=2 spreads both tp groups over both hosts; warnings: {w}")
    rc, out, err = run(mpiexec, tessel, ["--plan", "tp=2,dp=2"])
    if rc != 0 or "Job: 4 ranks on 2 hosts" not in out or out.count("warning: plan tp=2,dp=2") != 2:
        problems.append(f"text output (exit {rc}) lacks the layout or the warnings:\n{out}{err}")
    for p in problems:
        print(p)
    print(f"topology under mpirun: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
