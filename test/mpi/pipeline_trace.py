"""What a pipelined run's --trace measured, read from its pipeline action spans.

Used by check_trace.py (the measured peak of live activations against the prediction) and by
bench/pipeline.sh (the measured bubble fraction beside the prediction). Definitions:

  - A measured track is a rank's tid 0 (the executor's thread); the prediction is tid 1.
  - Compute spans: the events of category "pipeline" whose name is a compute action in
    PyTorch's text form, "<chunk><F|B|I|W><microbatch>" ("0F2"); comm spans (SEND_F...) are not
    compute.
  - Step k of a rank is its k-th traced train_step function event.
  - Live activations on a rank: a (chunk, microbatch) is live from the end of its F until the
    end of its B, or of its W when the backward is split into I and W (W reads what F saved).
    The peak is the most live at once, over the traced steps.
  - Bubble fraction of step k: the pipeline window W_k runs from the earliest start of a compute
    or comm span of step k on any rank to the latest end of one (the clocks of the ranks agree:
    runtime/exec/Trace.h), so the optimizer and the loss all-reduce after the schedule are not
    in it, as the simulator's makespan holds only the schedule. Then
        bubble_k = 1 - (sum over ranks of compute span time in step k) / (ranks x W_k),
    the time the ranks' compute units do not compute (waits, p2p and idle) over all the time
    they have, as runtime/pipeline's Simulation::bubbleFraction defines it.
"""
import re

ACTION = re.compile(r"^(\d+)(F|B|I|W)(\d+)$")


def tracks(doc):
    """{pid: [complete events of tid 0]} of a trace document."""
    out = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("tid") == 0:
            out.setdefault(e["pid"], []).append(e)
    return out


def steps_of(events):
    """The rank's traced train_step events, in time order, each with the pipeline spans inside it."""
    fns = sorted((e for e in events if e["cat"] == "function" and e["name"] == "train_step"), key=lambda e: e["ts"])
    spans = sorted((e for e in events if e["cat"] == "pipeline"), key=lambda e: e["ts"])
    return [(fn, [s for s in spans if fn["ts"] <= s["ts"] and s["ts"] + s["dur"] <= fn["ts"] + fn["dur"] + 1e-3])
            for fn in fns]


def peak_live(spans):
    """The most (chunk, microbatch) activations alive at once among `spans` (one step's)."""
    split = any(ACTION.match(s["name"]) and ACTION.match(s["name"]).group(2) == "W" for s in spans)
    live, peak = set(), 0
    for s in sorted(spans, key=lambda s: s["ts"] + s["dur"]):
        m = ACTION.match(s["name"])
        if not m:
            continue
        key = (int(m.group(1)), int(m.group(3)))
        if m.group(2) == "F":
            live.add(key)
            peak = max(peak, len(live))
        elif m.group(2) == ("W" if split else "B"):
            live.discard(key)
    return peak


def measured_peaks(doc):
    """{pid: peak live activations over the traced steps}."""
    return {pid: max((peak_live(spans) for _, spans in steps_of(evs)), default=0) for pid, evs in tracks(doc).items()}


def measured_bubbles(doc):
    """Per traced step the measured bubble fraction (see the module comment)."""
    per_rank = [steps_of(evs) for _, evs in sorted(tracks(doc).items())]
    out = []
    for k in range(min(len(s) for s in per_rank)):
        spans = [rank_steps[k][1] for rank_steps in per_rank]
        everything = [s for rank in spans for s in rank]
        if not everything:
            continue
        window = max(s["ts"] + s["dur"] for s in everything) - min(s["ts"] for s in everything)
        compute = sum(s["dur"] for s in everything if ACTION.match(s["name"]))
        out.append(1 - compute / (len(spans) * window))
    return out


def predicted(doc):
    """{pid: the "predicted step" event's args} of the predicted track."""
    return {e["pid"]: e.get("args", {}) for e in doc["traceEvents"]
            if e.get("ph") == "X" and e.get("tid") == 1 and e.get("name") == "predicted step"}
