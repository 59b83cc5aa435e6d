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
the comparison softswitch-exp's summary makes: per seed (repeat r of every
AQM ran the same seed), the paired t-test on the per-seed log-ratios (every
value positive) or differences (a value is 0), two-sided, with the ratio
(geometric mean of the per-seed ratios, or ratio of the means) — and the
exact Wilcoxon signed-rank p beside it when no difference ties or is zero
(with 5 pairs its floor is 0.0625). A seed faithful on one side only leaves
the pair and is named; differences without spread get no p ("no spread").
The t distribution is computed here (the regularised incomplete beta by
its continued fraction) so the script needs nothing beyond Python;
`--self-test` checks both tests against scipy's reference values in
src/exp/testdata/stats_reference.json. Unfaithful repeats (the guard's
verdict in result.json) are left out and counted.

  scripts/static-phases.py results/diffecn --phase 0.5-2 --phase 2.5-4 \
      --phase 4.5-5.5 --low-window 0.1
"""
import argparse
import glob
import json
import math
import os
import re
import statistics
import sys


def betacf(a, b, x):
    """Continued fraction of the incomplete beta (Numerical Recipes 6.4)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((a + m2 - 1) * (a + m2)),
                   -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def betai(a, b, x):
    """Regularised incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1 - x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * betacf(b, a, 1.0 - x) / b


def paired_t_p(d):
    """Two-sided p of the one-sample t on d against 0; None without spread."""
    n = len(d)
    if n < 2 or all(x == d[0] for x in d):
        return None
    m = statistics.mean(d)
    se = statistics.stdev(d) / math.sqrt(n)
    t = m / se
    df = n - 1
    return betai(df / 2.0, 0.5, df / (df + t * t))


def signed_rank_exact_p(d):
    """Wilcoxon's exact two-sided p; None with a zero or tied |d|."""
    absd = [abs(x) for x in d]
    if any(x == 0 for x in d) or len(set(absd)) < len(absd) or not d:
        return None
    order = sorted(range(len(d)), key=lambda i: absd[i])
    rank = {i: r + 1 for r, i in enumerate(order)}
    w_plus = sum(rank[i] for i in range(len(d)) if d[i] > 0)
    n = len(d)
    w = min(w_plus, n * (n + 1) // 2 - w_plus)
    counts = [0] * (n * (n + 1) // 2 + 1)
    counts[0] = 1
    for r in range(1, n + 1):
        for s in range(len(counts) - 1, r - 1, -1):
            counts[s] += counts[s - r]
    return min(1.0, 2 * sum(counts[: w + 1]) / 2 ** n)


def paired(a, b):
    """a and b by seed ({seed: value}): (ratio, p_t, p_signed_rank, pairs,
    unpaired seeds, scale)."""
    seeds = sorted(set(a) & set(b))
    unpaired = sorted(set(a) ^ set(b))
    xa = [a[s] for s in seeds]
    xb = [b[s] for s in seeds]
    if all(x > 0 for x in xa + xb):
        d = [math.log(x / y) for x, y in zip(xa, xb)]
        ratio = math.exp(statistics.mean(d)) if d else None
        scale = "log-ratio"
    else:
        d = [x - y for x, y in zip(xa, xb)]
        mb = statistics.mean(xb) if xb else 0
        ratio = statistics.mean(xa) / mb if xb and mb else None
        scale = "difference"
    return ratio, paired_t_p(d), signed_rank_exact_p(d), len(seeds), unpaired, scale


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
    """Both paired tests against scipy's reference values."""
    ref = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src",
                       "exp", "testdata", "stats_reference.json")
    data = json.load(open(ref))
    n = 0
    for c in data["paired"]:
        a = dict(enumerate(c["a"]))
        b = dict(enumerate(c["b"]))
        ratio, p, sr, pairs, unpaired, scale = paired(a, b)
        assert scale.replace("-", "_") == c["scale"], (c["name"], scale)
        assert abs(ratio - c["ratio"]) < 1e-9 * max(1, abs(c["ratio"])), (c["name"], ratio)
        assert abs(p - c["p"]) < 1e-9, (c["name"], p, c["p"])
        if c["signed_rank"]["exact"]:
            assert abs(sr - c["signed_rank"]["p"]) < 1e-12, (c["name"], sr)
        n += 1
    for c in data["signed_rank"]:
        if c["exact"]:
            assert abs(signed_rank_exact_p(c["d"]) - c["p"]) < 1e-12, c["name"]
            n += 1
    assert paired_t_p([0.1, 0.1, 0.1]) is None
    print(f"self-test: {n} reference cases agree with scipy")


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
                per.setdefault(aqm, {}).setdefault(k, {})[r.get("seed", r["repeat"])] = v
    base = per.get(baseline, {})
    for aqm, metrics in per.items():
        n = max(len(v) for v in metrics.values())
        print(f"## {aqm}: {n} faithful repeats, {left.get(aqm, 0)} left out")
        for k, by_seed in metrics.items():
            v = list(by_seed.values())
            line = f"  {k:<22} {statistics.median(v):8.1f} [{min(v):.1f}-{max(v):.1f}]"
            if aqm != baseline and k in base:
                ratio, p, sr, pairs, unpaired, scale = paired(by_seed, base[k])
                r = "x-" if ratio is None else f"x{ratio:.2f}"
                pt = "no spread" if p is None else f"paired t p = {p:.3f}"
                srt = "" if sr is None else f", signed-rank p = {sr:.3f}"
                un = f", seeds {unpaired} unpaired" if unpaired else ""
                line += (f"   vs {baseline} {statistics.median(base[k].values()):.1f}: "
                         f"{r} ({pt}{srt}; {pairs} pairs, {scale}{un})")
            print(line)


if __name__ == "__main__":
    main()
