#!/usr/bin/env python3
"""Phases of a static-flow run with staggered starts, over its repeats.

The DiffECN scenarios (diffecn.toml, diffecn-2ms.toml, diffecn-demand.toml)
start flows at 0, 2 and 4 s and ask how fast a newcomer reaches its share
and how far it pulls the earlier flows down (DiffECN paper §III-A, Fig. 3-4).
softswitch-exp's summary gives each flow's mean over its lifetime; this
script reads the 10 ms goodput samples every repeat stored
(`<dir>/<aqm>-r<N>/result.json`, `statics[].samples`) and prints, per AQM,
the median [min-max] over the faithful repeats of:

  phase means   each flow's mean goodput in each window (--phase A-B, s)
  reach         after a flow starts, the first sample at >= 80 % of its own
                mean over the window that follows its start, in ms from the
                start (the sample's end)
  low           the lowest sample of every earlier flow in the --low-window
                after a later flow starts

and, for each AQM against the baseline (--baseline, or summary.json's),
Mann-Whitney's exact two-sided p over the repeats: the rank sum's
distribution counted over every split of the pooled values. Without ties
that is scipy's exact test (`--self-test` checks it against the reference
values in src/exp/testdata/stats_reference.json, computed by scipy); with
ties (reach times come in 10 ms steps) it is the exact conditional test on
mid-ranks, where scipy and softswitch-exp's summary use the normal
approximation. With 5 repeats a side p < 0.05 needs nearly separated
ranges; fully separated gives 2/252 = 0.008. Unfaithful repeats (the
guard's verdict in result.json) are left out and counted.

  scripts/static-phases.py results/diffecn --phase 0.5-2 --phase 2.5-4 \
      --phase 4.5-5.5 --low-window 0.1
"""
import argparse
import glob
import itertools
import json
import os
import re
import statistics
import sys


def mann_whitney_exact(a, b):
    """Two-sided exact p of the rank-sum statistic (mid-ranks for ties),
    by enumerating every split of the pooled values."""
    pooled = sorted(a + b)
    ranks = {}
    i = 0
    while i < len(pooled):
        j = i
        while j < len(pooled) and pooled[j] == pooled[i]:
            j += 1
        ranks[pooled[i]] = (i + j + 1) / 2.0
        i = j
    r = [ranks[v] for v in a + b]
    n = len(a)
    observed = sum(r[:n])
    mean = n * (len(r) + 1) / 2.0
    dev = abs(observed - mean)
    extreme = total = 0
    for idx in itertools.combinations(range(len(r)), n):
        s = sum(r[k] for k in idx)
        total += 1
        if abs(s - mean) >= dev - 1e-9:
            extreme += 1
    return extreme / total


def window_mean(samples, lo_ms, hi_ms):
    v = [g for t, g in samples if lo_ms < t <= hi_ms]
    return statistics.mean(v) if v else None


def analyse(result, phases, low_window_ms, starts):
    flows = result["statics"]
    out = {}
    for i, f in enumerate(flows):
        for lo, hi in phases:
            if lo * 1e3 < starts[i]:
                continue
            m = window_mean(f["samples"], lo * 1e3, hi * 1e3)
            if m is not None:
                out[f"F{i + 1} {lo:g}-{hi:g} s"] = m
    for i, f in enumerate(flows):
        st = starts[i]
        if st < phases[0][0] * 1e3:
            continue
        nxt = [p for p in phases if p[0] * 1e3 >= st]
        if not nxt:
            continue
        lo, hi = nxt[0]
        target = window_mean(f["samples"], lo * 1e3, hi * 1e3)
        if target is None:
            continue
        reach = next(
            (t - st for t, g in f["samples"] if t > st and g >= 0.8 * target), None
        )
        if reach is not None:
            out[f"F{i + 1} reach ms"] = reach
        # Flows started within 100 ms of each other count as started
        # together (the scenarios start them whole seconds apart).
        group = round(st / 100) * 100
        for j, e in enumerate(flows):
            if round(starts[j] / 100) * 100 < group:
                w = [g for t, g in e["samples"] if st < t <= st + low_window_ms]
                if w:
                    key = f"F{j + 1} low after {group / 1e3:g} s"
                    out[key] = min(out.get(key, min(w)), min(w))
    return out


def starts_of(result):
    """Each flow's start, ms (`start_ms`, to the sample interval: flows
    started together differ by a millisecond or two; the samples cover the
    whole run, zero before a flow starts)."""
    out = []
    for f in result["statics"]:
        t = [x[0] for x in f["samples"]]
        step = t[1] - t[0] if len(t) > 1 else 10
        out.append(round((f.get("start_ms") or 0) / step) * step)
    return out


def self_test():
    """The exact p against scipy's on the tie-free reference cases."""
    ref = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src",
                       "exp", "testdata", "stats_reference.json")
    cases = [c for c in json.load(open(ref))["mann_whitney"]
             if c["exact"] and len(c["a"]) + len(c["b"]) <= 20]
    assert cases, "no exact Mann-Whitney case in the reference"
    for c in cases:
        p = mann_whitney_exact(c["a"], c["b"])
        assert abs(p - c["p"]) < 1e-12, (c["name"], p, c["p"])
    assert abs(mann_whitney_exact([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) - 2 / 252) < 1e-12
    print(f"self-test: {len(cases)} reference cases agree with scipy")


def main():
    if "--self-test" in sys.argv:
        self_test()
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="+", help="results directories of one scenario")
    ap.add_argument("--phase", action="append", required=True, help="window A-B in s")
    ap.add_argument("--low-window", type=float, default=0.1, help="s after a start")
    ap.add_argument("--baseline")
    a = ap.parse_args()
    phases = [tuple(float(x) for x in p.split("-")) for p in a.phase]
    per = {}
    left = {}
    baseline = a.baseline
    for d in a.dirs:
        if baseline is None and os.path.exists(f"{d}/summary.json"):
            baseline = json.load(open(f"{d}/summary.json"))["baseline"]
        for rj in sorted(glob.glob(f"{d}/*-r[0-9]*/result.json")):
            if re.search(r"\.unfaithful\d+/", rj):
                continue
            r = json.load(open(rj))
            aqm = r["aqm"]
            if not r["fidelity"]["faithful"]:
                left[aqm] = left.get(aqm, 0) + 1
                continue
            res = analyse(r, phases, a.low_window * 1e3, starts_of(r))
            for k, v in res.items():
                per.setdefault(aqm, {}).setdefault(k, []).append(v)
    base = per.get(baseline, {})
    for aqm, metrics in per.items():
        n = max(len(v) for v in metrics.values())
        print(f"## {aqm}: {n} faithful repeats, {left.get(aqm, 0)} left out")
        for k, v in metrics.items():
            line = f"  {k:<22} {statistics.median(v):8.1f} [{min(v):.1f}-{max(v):.1f}]"
            if aqm != baseline and k in base and len(v) > 1 and len(base[k]) > 1:
                p = mann_whitney_exact(v, base[k])
                line += f"   vs {baseline} {statistics.median(base[k]):.1f}: p = {p:.3f}"
            print(line)


if __name__ == "__main__":
    main()
