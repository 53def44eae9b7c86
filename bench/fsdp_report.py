"""The report of bench/fsdp.sh (see there for what is measured and how): reads the Tessel JSON
logs and the PyTorch peer's JSON lines from the run's folder, checks fsdp=N against fsdp=1 on
both sides, prints the table and appends one row per N > 1 to RESULTS.md.

Usage: fsdp_report.py TMP STEPS PEER CPU NPROC PREFETCH_FLAG RESULTS_MD"""
import datetime
import json
import os
import statistics
import sys

TESSEL_RTOL = 1e-4  # bench/tp_step.sh's check of a parallel run against one rank
TORCH_RTOL = 1e-5   # bench/torch_tp_step.py's RTOL: the same check of the PyTorch peer
WARMUP = 5
L, C, T, V = 4, 128, 64, 256  # bench/fsdp.sh's MODEL
ROOT_BYTES = 4 * (V * C + T * C + 2 * C)  # FSDP2's root unit: wte, wpe, ln_f (f32)


def tessel(tmp, name, steps):
    """Medians over the timed steps of a Tessel run, its step 1 and its memory by rank."""
    path = os.path.join(tmp, name + ".json")
    if not os.path.exists(path):
        return None
    log = [json.loads(line) for line in open(path)]
    timed = log[WARMUP:steps - 1]
    kinds = {}
    for s in timed:
        for k, v in s.get("comm_bytes", {}).items():
            kinds.setdefault(k, []).append(v)
    return {"step_s": statistics.median(s["step_seconds"] for s in timed),
            "kinds": {k: statistics.median(v) for k, v in kinds.items()},
            "exposed_s": statistics.median(s.get("comm_exposed_s", 0.0) for s in timed),
            "peak": max(s["peak_memory_bytes"] for s in log),
            "memory": log[0]["run"]["memory"], "first": log[0]}


def wire(kinds, n):
    """Ring bytes a rank sends for its payload by kind."""
    f = (n - 1) / n
    return f * (kinds.get("all_gather", 0) + kinds.get("reduce_scatter", 0) + kinds.get("all_to_all", 0)) + \
        2 * f * kinds.get("all_reduce", 0)


def close(a, b, rtol):
    return abs(a - b) <= rtol * abs(b)


def main():
    tmp, steps, peer, cpu, nproc, prefetch_flag, results = sys.argv[1:8]
    steps, nproc, prefetch_flag = int(steps), int(nproc), prefetch_flag == "1"
    # Without --fsdp-prefetch the trainer gathers each parameter right before its first use:
    # its default run has no prefetch at all.
    tessel_default = "tessel fsdp, prefetch 1" if prefetch_flag else "tessel fsdp (no prefetch flag)"
    t = {name: tessel(tmp, name, steps) for name in ("fsdp1", "fsdp2", "fsdp4", "dp2", "dp4",
                                                      "fsdp2-noprefetch", "fsdp4-noprefetch")}
    pt = {n: json.loads(open(os.path.join(tmp, f"torch{n}.json")).read().splitlines()[-1]) for n in (1, 2, 4)}
    P = sum(m["parameters"] for m in t["fsdp1"]["memory"])  # all parameter bytes (one rank holds them all)
    closed = 3 * P - ROOT_BYTES

    # The checks: fsdp=N computes what fsdp=1 computes.
    failures = []
    one = t["fsdp1"]["first"]
    for n in (2, 4):
        got = t[f"fsdp{n}"]["first"]
        for k in ("loss", "grad_norm"):
            if not close(got[k], one[k], TESSEL_RTOL):
                failures.append(f"tessel fsdp={n} step 1 {k} {got[k]} vs fsdp=1 {one[k]}")
        ref = pt[1]["by_rank"][0]["default"]["first"]
        for variant, r in pt[n]["by_rank"][0].items():
            if not isinstance(r, dict):
                continue
            for k in ("loss", "grad_norm"):
                if not close(r["first"][k], ref[k], TORCH_RTOL):
                    failures.append(f"pytorch fsdp={n} ({variant}) step 1 {k} {r['first'][k]} vs 1 process {ref[k]}")
    for f in failures:
        print("check FAILED: " + f, file=sys.stderr)
    if failures:
        sys.exit("fsdp_report.py: fsdp=N does not match fsdp=1 (above); nothing recorded")
    print(f"check: step 1 loss and gradient norm of fsdp=2 and fsdp=4 match fsdp=1 (tessel {TESSEL_RTOL:g}, "
          f"pytorch {TORCH_RTOL:g} relative): ok", file=sys.stderr)

    mib = lambda b: b / 2**20
    ms = lambda s: 1e3 * s
    torch_version = pt[1]["torch"]
    print(f"GPT L={L} C={C} NH=4 T={T} B=32, AdamW, fsdp=N on CPU ranks ({nproc} cores), {cpu}")
    print(f"PyTorch peer: {peer}, FSDP2 fully_shard over gloo")
    print(f"P = {mib(P):.3f} MiB of f32 parameters, root unit R = {mib(ROOT_BYTES):.3f} MiB; closed form of the "
          f"payload per rank and step 3 P - R = {mib(closed):.3f} MiB")
    print()
    head = (f"{'':34} {'N':>2} {'step ms':>8} {'payload MiB':>12} {'/closed':>8} {'wire MiB':>9} {'dp wire':>8} "
            f"{'wire/dp':>8} {'exposed ms':>10} {'static MiB/rank':>15} {'peak MiB/rank':>13}")
    print(head)
    rows = {}
    for n in (1, 2, 4):
        f = (n - 1) / n
        for label, key in ((tessel_default, f"fsdp{n}"), ("tessel fsdp, prefetch 0", f"fsdp{n}-noprefetch")):
            r = t.get(key)
            if n == 1 and key.endswith("noprefetch"):
                continue
            if r is None:
                print(f"{label:34} {n:2d} skipped: tessel-gpt does not know --fsdp-prefetch yet")
                continue
            payload = sum(r["kinds"].values())
            dp = t.get(f"dp{n}")
            dp_wire = wire(dp["kinds"], n) if dp else 0.0
            static = max(m["parameters"] + m["optimizer_state"] for m in r["memory"])
            w = wire(r["kinds"], n)
            rows[(label, n)] = (r["step_s"], payload, w, r["exposed_s"], static, r["peak"], dp_wire)
            print(f"{label:34} {n:2d} {ms(r['step_s']):8.1f} {mib(payload):12.3f} "
                  f"{payload / closed if n > 1 else float('nan'):8.2f} {mib(w):9.3f} {mib(dp_wire):8.3f} "
                  f"{w / dp_wire if dp_wire else float('nan'):8.2f} {ms(r['exposed_s']):10.2f} "
                  f"{mib(static):15.3f} {mib(r['peak']):13.3f}")
        ranks = pt[n]["by_rank"]
        for variant in ("none", "default", "1"):
            if variant not in ranks[0]:
                continue
            r = ranks[0][variant]
            label = {"none": "pytorch FSDP2, no prefetch", "default": "pytorch FSDP2, default prefetch",
                     "1": "pytorch FSDP2, explicit prefetch 1"}[variant]
            static = max(x[variant]["parameter_bytes"] + x[variant]["gradient_bytes"] + x[variant]["optimizer_bytes"]
                         for x in ranks)
            rss = max(x["peak_rss_bytes"] for x in ranks)
            w = f * r["payload_bytes"]
            dp_closed = 2 * f * P
            rows[(label, n)] = (r["step_s"], r["payload_bytes"], w, r["exposed_s"], static, rss, dp_closed)
            print(f"{label:34} {n:2d} {ms(r['step_s']):8.1f} {mib(r['payload_bytes']):12.3f} "
                  f"{r['payload_bytes'] / closed if n > 1 else float('nan'):8.2f} {mib(w):9.3f} {mib(dp_closed):8.3f} "
                  f"{w / dp_closed if n > 1 else float('nan'):8.2f} {ms(r['exposed_s']):10.2f} {mib(static):15.3f} "
                  f"{mib(rss):13.1f}")
    print()
    print("payload: per rank per step, all kinds; /closed: against 3 P - R. wire: ring bytes sent per rank; dp wire: "
          "tessel's dp=N run counted, pytorch's column the DDP closed form 2 (N-1)/N P; closed forms: fsdp "
          "3 (N-1)/N P, 1.5x DDP's. static: tessel parameters + AdamW state shards (its gradients are in the "
          "arena), pytorch parameters + gradients + AdamW state shards; peak: tessel's peak_memory_bytes (rank 0), "
          "pytorch's peak resident set (max over ranks, includes the runtime).")

    d = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    with open(results, "a") as out:
        for n in (2, 4):
            th = max(1, nproc // n)
            tes = rows[(tessel_default, n)]
            off = rows.get(("tessel fsdp, prefetch 0", n))
            tor = rows[("pytorch FSDP2, default prefetch", n)]
            tor_none = rows[("pytorch FSDP2, no prefetch", n)]
            tor_one = rows[("pytorch FSDP2, explicit prefetch 1", n)]
            static1 = rows[(tessel_default, 1)][4]
            torch_static1 = rows[("pytorch FSDP2, default prefetch", 1)][4]
            out.write(
                f"| {d} | fsdp (GPT L4 C128 T64 B32, AdamW, fsdp={n}; payload/closed form 3P-R = {mib(closed):.3f} "
                f"MiB; wire vs DDP, closed form 1.5) | {n} ranks x {th} thread{'s' * (th > 1)}, {cpu} | "
                f"tessel {ms(tes[0]):.1f} ms/step, payload {mib(tes[1]):.3f} MiB ({tes[1] / closed:.2f} of closed), "
                f"wire {mib(tes[2]):.3f} MiB = {tes[2] / tes[6]:.2f}x dp={n}'s; exposed comm {ms(tes[3]):.2f} ms "
                + (f"prefetch 1, {ms(off[3]):.2f} ms prefetch 0; " if off else
                   "(no --fsdp-prefetch in this build: each gather right before its first use); ") +
                f"static {mib(tes[4]):.3f} MiB/rank ({mib(static1):.3f} at N=1), peak {mib(tes[5]):.3f} MiB | "
                f"pytorch FSDP2 gloo, {peer}: {ms(tor[0]):.1f} ms/step, payload {mib(tor[1]):.3f} MiB "
                f"({tor[1] / closed:.2f} of closed), wire {tor[2] / tor[6]:.2f}x DDP's closed form; exposed comm "
                f"{ms(tor[3]):.2f} ms default, {ms(tor_none[3]):.2f} ms no prefetch, {ms(tor_one[3]):.2f} ms explicit "
                f"prefetch 1; static {mib(tor[4]):.3f} MiB/rank ({mib(torch_static1):.3f} at N=1), peak RSS "
                f"{mib(tor[5]):.0f} MiB | {tes[0] / tor[0]:.3f} |\n")
    print(f"appended 2 rows to {results} (torch {torch_version})")


if __name__ == "__main__":
    main()
