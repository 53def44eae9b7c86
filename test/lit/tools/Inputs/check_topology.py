#!/usr/bin/env python3
"""`tessel topology` claims nothing it did not detect: checked against what this script reads
itself from /proc/cpuinfo and sysfs.

Usage: check_topology.py TESSEL

From `tessel topology --json` and the text output:
  - logical CPUs, sockets and cores equal /proc/cpuinfo's "processor" entries, distinct
    "physical id" and distinct (physical id, core id) pairs;
  - for every SIMD feature the tool checks, it is listed exactly when /proc/cpuinfo's flags
    have it, and the text's "AVX-512 yes/no" and "AMX yes/no" say the same;
  - InfiniBand devices are exactly /sys/class/infiniband's entries; with none, the text says
    "no InfiniBand";
  - no GPU (the test runs only where lit found none): the JSON lists no GPU, no NVLink matrix
    (null) and gives the reason, the text says "no GPU", and no text line mentions NVLink or
    InfiniBand except to say that there is none.
Prints one line and exits 1 listing every problem.
"""
import json
import os
import subprocess
import sys


def cpuinfo():
    processors, sockets, cores, flags = 0, set(), set(), None
    socket = None
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            key, value = key.strip(), value.strip()
            if key == "processor":
                processors += 1
                socket = None
            elif key == "physical id":
                socket = value
                sockets.add(value)
            elif key == "core id":
                cores.add((socket, value))
            elif key == "flags" and flags is None:
                flags = set(value.split())
    return processors, len(sockets) or 1, len(cores) or processors, flags or set()


def main(argv):
    tessel = argv[1]
    problems = []
    doc = json.loads(subprocess.run([tessel, "topology", "--json"], capture_output=True, text=True,
                                    check=True, timeout=60).stdout)
    text = subprocess.run([tessel, "topology"], capture_output=True, text=True, check=True, timeout=60).stdout
    processors, sockets, cores, flags = cpuinfo()
    cpu = doc["cpu"]
    for key, want in (("logical_cpus", processors), ("sockets", sockets), ("cores", cores)):
        if cpu[key] != want:
            problems.append(f"cpu {key} {cpu[key]}, /proc/cpuinfo says {want}")
    if not cpu["simd_checked"]:
        problems.append("no SIMD feature checked")
    for feature in cpu["simd_checked"]:
        if (feature in cpu["simd"]) != (feature in flags):
            problems.append(f"SIMD {feature}: reported {feature in cpu['simd']}, /proc/cpuinfo {feature in flags}")
    for name, flag in (("AVX-512", "avx512f"), ("AMX", "amx_tile")):
        want = f"{name} {'yes' if flag in flags else 'no'}"
        if want not in text:
            problems.append(f"the text does not say '{want}'")
    ib_dir = "/sys/class/infiniband"
    ib = sorted(os.listdir(ib_dir)) if os.path.isdir(ib_dir) else []
    if sorted(d["name"] for d in doc["infiniband"]) != ib:
        problems.append(f"InfiniBand devices {doc['infiniband']}, sysfs has {ib}")
    if not ib and "no InfiniBand" not in text:
        problems.append("no InfiniBand device, but the text does not say 'no InfiniBand'")
    if doc["gpus"] or doc["nvlink"] is not None or not doc.get("gpus_absent_reason"):
        problems.append(f"GPUs or NVLink claimed without a GPU: {doc['gpus']} {doc['nvlink']}")
    if "GPUs: no GPU (" not in text:
        problems.append("the text does not say 'no GPU' with a reason")
    for line in text.splitlines():
        if ("NVLink" in line or "InfiniBand" in line) and "no NVLink" not in line and "no InfiniBand" not in line:
            problems.append(f"a line mentions NVLink or InfiniBand without saying it is absent: {line!r}")
    for p in problems:
        print(p)
    print(f"topology: {cpu['cores']} cores, {len(cpu['simd'])} SIMD features, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
