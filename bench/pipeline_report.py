#!/usr/bin/env python3
"""bench/pipeline.sh's report: per run the measured bubble fraction beside the predictions.

Reads TMP/pp<P>-<schedule>.json (--trace of a run, with its predicted track), computes the
measured bubble (test/mpi/pipeline_trace.py's definition, median over the traced steps), the
calibrated prediction (`tessel pipeline --json` with uniform costs measured in the run: median F
and backward spans, the fastest send/recv span as one transfer, since the others include waiting
for the peer), prints a table and adds one row per run under the pipeline section of RESULTS_MD.

Usage: pipeline_report.py TMP TESSEL MICROBATCHES NPROC CPU RESULTS_MD"""
import datetime
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "mpi"))
import pipeline_trace  # noqa: E402

from results_md import add_section_rows  # the script's folder is on sys.path

SCHEDULES = ("gpipe", "1f1b", "interleaved", "zero-bubble")
HEADING = "## Pipeline bubble (bench/pipeline.sh)"
INTRO = """
Measured from --trace's pipeline action spans (1 - compute span time / (ranks x the window from
the first action to the last), median of steps 3-8) beside the simulator: predicted on the
trainer's nominal cost model of the compiled stages, calibrated on this run's measured median F
and backward spans and fastest transfer, and the closed form for uniform stages without p2p time.
GPT L8 C64 NH2 T64 B32, M=8, one thread per rank. Where ranks share cores (more ranks than cores,
or a loaded machine) a rank waiting in a send/recv yields its core and gets it back milliseconds
later, so its p2p groups take 1-20 ms instead of ~0.02 ms and the measured bubble exceeds the
predictions (bench/pipeline.sh says more). With 4 ranks on 2 cores at most 2 ranks compute at a
time, so unless a compute span is stretched by preemption the measured bubble is at least
1 - cores / ranks = 0.5.

| date | run | machine | measured | predicted (cost model) | calibrated (measured costs) | closed form | step ms (measured / predicted) |
|---|---|---|---|---|---|---|---|
"""


def spans(doc, kinds):
    """Durations (ms) of the measured action spans whose kind letter is in `kinds`."""
    out = []
    for evs in pipeline_trace.tracks(doc).values():
        for _, ss in pipeline_trace.steps_of(evs):
            for s in ss:
                m = pipeline_trace.ACTION.match(s["name"])
                if m and m.group(2) in kinds:
                    out.append(s["dur"] / 1e3)
    return out


def calibrated(tessel, doc, p, schedule, m):
    v = 2 if schedule == "interleaved" else 1
    forward = statistics.median(spans(doc, "F")) * v
    backward = (statistics.median(spans(doc, "B")) if schedule != "zero-bubble"
                else statistics.median(spans(doc, "I")) + statistics.median(spans(doc, "W"))) * v
    comm = [s["dur"] / 1e3 for evs in pipeline_trace.tracks(doc).values() for s in evs
            if s["cat"] == "pipeline" and not pipeline_trace.ACTION.match(s["name"])]
    cmd = [tessel, "pipeline", "--schedule", schedule, "--pp", str(p), "--microbatches", str(m),
           "--forward-ms", f"{forward:.6f}", "--backward-ms", f"{backward:.6f}", "--p2p-ms",
           f"{min(comm) if comm else 0:.6f}", "--json"]
    if v > 1:
        cmd += ["--virtual-stages", str(v)]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def main(argv):
    tmp, tessel, m, nproc, cpu, results = argv[1], argv[2], int(argv[3]), argv[4], argv[5], argv[6]
    date = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    rows = []
    load = os.getloadavg()[0]  # other work on the machine stretches compute spans at random
    print(f"{'run':<18} {'measured':>9} {'predicted':>9} {'calibrated':>10} {'closed':>7} {'step ms':>9} "
          f"{'predicted ms':>12}")
    for p in (2, 4):
        for schedule in SCHEDULES:
            with open(os.path.join(tmp, f"pp{p}-{schedule}.json")) as f:
                doc = json.load(f)
            measured = statistics.median(pipeline_trace.measured_bubbles(doc))
            step = statistics.median(e["dur"] / 1e3 for e in doc["traceEvents"]
                                     if e.get("tid") == 0 and e.get("cat") == "function" and e["name"] == "train_step")
            pred = doc["otherData"]["predicted"]
            closed = pipeline_trace.predicted(doc)[0].get("closed_form_bubble")
            cal = calibrated(tessel, doc, p, schedule, m)
            run = f"pp={p} {schedule}" + (" v=2" if schedule == "interleaved" else "")
            print(f"{run:<18} {measured:>9.3f} {pred['bubble_fraction']:>9.3f} {cal['bubble_fraction']:>10.3f} "
                  f"{closed:>7.3f} {step:>9.1f} {pred['makespan_us'] / 1e3:>12.1f}")
            rows.append(f"| {date} | {run} | {p} ranks x 1 thread on {nproc} cores"
                        f"{' (oversubscribed)' if p > int(nproc) else ''}, {cpu}, load average {load:.2f} | "
                        f"{measured:.3f} | "
                        f"{pred['bubble_fraction']:.3f} | {cal['bubble_fraction']:.3f} | {closed:.3f} | "
                        f"{step:.1f} / {pred['makespan_us'] / 1e3:.1f} |")
    add_section_rows(results, HEADING, INTRO, rows)
    print(f"added {len(rows)} rows to {results}")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
