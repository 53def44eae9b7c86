"""The report of bench/checkpoint.sh: reads its runs' outputs and timings, prints a table and adds
one row under the checkpoint section of RESULTS_MD (see checkpoint.sh for what is measured).

Usage: checkpoint_report.py TMP REPEATS CPU NPROC DISK RESULTS_MD"""
import datetime
import os
import re
import statistics
import sys

from results_md import add_section_rows  # the script's folder is on sys.path

HEADING = "## Checkpoints (bench/checkpoint.sh)"
INTRO = """
GPT L8 C512 NH8 T16 B4 (25.4 M parameters; f32 parameters and AdamW's two moments, about 304 MB
per checkpoint), --plan fsdp=2 on 2 CPU ranks, a save every 3 of 9 steps. Blocked: median seconds
the training loop waits per save (rank 0), --async-checkpoint against synchronous saves of the same
state; ratio async/sync, lower is better. Save: shard bytes / seconds of a synchronous save (both
ranks writing, fsynced, committed) against dd of the same bytes with conv=fdatasync. Load: bytes
read by both ranks / seconds of a --resume (wall time of a run that only loads, minus one that only
starts) against dd reading a file of the same size; both cold (the files dropped from the page
cache before each read). Throughput ratios tessel/dd, higher is better; medians of 3 for dd and
the load. Whole run: wall time of the 9-step run with its 3 saves, async / sync (the writer
thread shares the 2 ranks' 2 cores, so an asynchronous save also slows the steps it overlaps).

| date | machine, disk | blocked per save: async / sync | save: tessel / dd write | load: tessel / dd read | whole run: async / sync |
|---|---|---|---|---|---|
"""
DURABLE = re.compile(r"^checkpoint step (\d+) durable: ([0-9.]+) (bytes|kB|MB|GB) from \d+ ranks? in ([0-9.]+) s "
                     r"\(blocked ([0-9.]+) s\)")
UNIT = {"bytes": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}  # decimal, as the durable line writes them
RESUMED = re.compile(r"^resumed from '.*' \(step \d+, .*\): (\d+) bytes read")


def saves(path):
    """(step, bytes, seconds, blocked seconds) of every durable line of a run's output."""
    out = []
    with open(path) as f:
        for line in f:
            if m := DURABLE.match(line):
                out.append((int(m[1]), float(m[2]) * UNIT[m[3]], float(m[4]), float(m[5])))
    if not out:
        sys.exit(f"checkpoint_report.py: no 'checkpoint step N durable' line in {path}")
    return out


def main(argv):
    tmp, repeats, cpu, nproc, disk, results = argv[1], int(argv[2]), argv[3], argv[4], argv[5], argv[6]
    sync, asyn = saves(os.path.join(tmp, "sync.out")), saves(os.path.join(tmp, "async.out"))
    if [s[:2] for s in sync] != [s[:2] for s in asyn]:
        sys.exit(f"checkpoint_report.py: the runs saved different states: {sync} vs {asyn}")
    blocked_sync = statistics.median(s[3] for s in sync)
    blocked_async = statistics.median(s[3] for s in asyn)
    save_bps = statistics.median(s[1] / s[2] for s in sync)
    times = {}
    with open(os.path.join(tmp, "times")) as f:
        for line in f:
            key, *values = line.split()
            times.setdefault(key, []).append([float(v) for v in values])
    dd_write = statistics.median(b / t for t, b in times["dd_write"])
    dd_read = statistics.median(b / t for t, b in times["dd_read"])
    read_bytes = []
    for i in range(repeats):
        with open(os.path.join(tmp, f"load{i}.out")) as f:
            read_bytes += [int(m[1]) for line in f if (m := RESUMED.match(line))]
    if len(read_bytes) != repeats:
        sys.exit("checkpoint_report.py: a load run did not print its 'resumed from ... bytes read' line")
    load_s = statistics.median(l[0] - s[0] for l, s in zip(times["load"], times["start"]))
    load_bps = statistics.median(read_bytes) / load_s
    run_sync, run_async = times["run_sync"][0][0], times["run_async"][0][0]
    mb = sync[-1][1] / 1e6
    print(f"state per checkpoint: {mb:.1f} MB; saves at steps {[s[0] for s in sync]}")
    print(f"{'':<22} {'tessel':>14} {'peer':>14} {'ratio':>7}")
    print(f"{'blocked per save':<22} {blocked_async:>12.4f} s {blocked_sync:>12.4f} s {blocked_async / blocked_sync:>7.3f}"
          "   (async / sync)")
    print(f"{'save throughput':<22} {save_bps / 1e6:>9.1f} MB/s {dd_write / 1e6:>9.1f} MB/s {save_bps / dd_write:>7.3f}"
          "   (sync save / dd write, fdatasync)")
    print(f"{'load throughput':<22} {load_bps / 1e6:>9.1f} MB/s {dd_read / 1e6:>9.1f} MB/s {load_bps / dd_read:>7.3f}"
          f"   (--resume / dd read, cold; load {load_s:.3f} s)")
    print(f"{'whole run':<22} {run_async:>12.2f} s {run_sync:>12.2f} s {run_async / run_sync:>7.3f}   (async / sync)")
    date = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    machine = f"{nproc} cores, {cpu}, load average {os.getloadavg()[0]:.2f}; {disk}"
    row = (f"| {date} | {machine} | {blocked_async:.4f} s / {blocked_sync:.4f} s ({blocked_async / blocked_sync:.3f}) "
           f"| {save_bps / 1e6:.0f} / {dd_write / 1e6:.0f} MB/s ({save_bps / dd_write:.3f}) "
           f"| {load_bps / 1e6:.0f} / {dd_read / 1e6:.0f} MB/s, load {load_s:.3f} s ({load_bps / dd_read:.3f}) "
           f"| {run_async:.2f} s / {run_sync:.2f} s ({run_async / run_sync:.3f}) |")
    add_section_rows(results, HEADING, INTRO, [row])
    print(f"added to {results}: {row}")


if __name__ == "__main__":
    main(sys.argv)
