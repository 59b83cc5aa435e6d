#!/usr/bin/env python3
"""Reference values for softswitch-exp's statistics (src/exp/stats.rs).

Computes, with scipy / numpy / statsmodels rather than our own code, every
statistic the experiment summaries use, on fixed samples, and writes them to
src/exp/testdata/stats_reference.json, which the unit tests compare against:

  * Student's t 95 % interval of the mean (scipy.stats.t.interval)
  * Welch's two-sample t-test, two-sided (scipy.stats.ttest_ind, equal_var=False)
  * Mann-Whitney U, two-sided: exact without ties, normal approximation with
    tie and continuity correction with ties (scipy.stats.mannwhitneyu)
  * Fieller's 95 % interval for a ratio of two independent means with Welch's
    degrees of freedom: found by root finding (scipy.optimize.brentq) on its
    defining equation (mean_a - r mean_b)^2 = t^2 (var_a/n_a + r^2 var_b/n_b),
    not by the closed form the Rust code uses
  * Holm's step-down adjusted p-values (statsmodels multipletests)
  * paired comparisons: the paired t-test (scipy.stats.ttest_rel) on the
    per-pair log-ratios (every value positive) or differences; the ratio's
    95 % interval: exp of the t interval of the mean log-ratio
    (scipy.stats.t.interval), or Fieller's interval for correlated means
    found by root finding on (mean_a - r mean_b)^2 = t^2 var(a - r b) / n
    with n - 1 degrees of freedom; Wilcoxon's signed-rank test on the same
    values (scipy.stats.wilcoxon, zero_method="wilcox", correction=False:
    exact without ties or zeros, normal approximation otherwise)
  * the seeded percentile bootstrap of the mean: the generator (xoshiro256**
    seeded by splitmix64, src/rng.rs) and the resampling are re-implemented
    here; the percentiles are numpy's (linear interpolation)

Run: pip install scipy numpy statsmodels; python3 scripts/stats-reference.py
"""

import json
import os

import numpy as np
from scipy import optimize, stats
from statsmodels.stats.multitest import multipletests

MASK = (1 << 64) - 1


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & MASK


class SimRng:
    def __init__(self, seed):
        st = seed & MASK
        self.s = []
        for _ in range(4):
            st, v = splitmix64(st)
            self.s.append(v)

    def next_u64(self):
        s = self.s
        result = (rotl((s[1] * 5) & MASK, 7) * 9) & MASK
        t = (s[1] << 17) & MASK
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return result

    def uniform(self):
        return (self.next_u64() >> 11) * (1.0 / (1 << 53))


def bootstrap_mean_ci(x, resamples, seed, level=0.95):
    rng = SimRng(seed)
    n = len(x)
    means = []
    for _ in range(resamples):
        total = 0.0
        for _ in range(n):
            total += x[int(rng.uniform() * n)]
        means.append(total / n)
    alpha = (1 - level) / 2
    lo, hi = np.percentile(means, [100 * alpha, 100 * (1 - alpha)])
    return [float(lo), float(hi)]


def t_ci(x):
    x = np.asarray(x, float)
    lo, hi = stats.t.interval(0.95, df=len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    return [float(lo), float(hi)]


def welch_df(a, b):
    va, vb = np.var(a, ddof=1) / len(a), np.var(b, ddof=1) / len(b)
    return (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))


def fieller(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    ma, mb = a.mean(), b.mean()
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    t = stats.t.ppf(0.975, welch_df(a, b))
    f = lambda r: (ma - r * mb) ** 2 - t**2 * (va + r**2 * vb)
    r0 = ma / mb
    # f(r0) < 0 inside the interval; widen until the sign changes on each side.
    lo, hi = r0, r0
    step = max(abs(r0), 1e-6) * 0.01
    while f(lo) < 0:
        lo -= step
        step *= 2
    step = max(abs(r0), 1e-6) * 0.01
    while f(hi) < 0:
        hi += step
        step *= 2
    return [
        float(optimize.brentq(f, lo, r0, xtol=1e-14, rtol=1e-15)),
        float(optimize.brentq(f, r0, hi, xtol=1e-14, rtol=1e-15)),
    ]


def has_ties(a, b):
    v = list(a) + list(b)
    return len(set(v)) < len(v)


def mann_whitney(a, b):
    method = "asymptotic" if has_ties(a, b) else "exact"
    r = stats.mannwhitneyu(a, b, alternative="two-sided", method=method, use_continuity=True)
    return {"u": float(r.statistic), "p": float(r.pvalue), "exact": method == "exact"}


def root_interval(f, r0):
    lo, hi = r0, r0
    step = max(abs(r0), 1e-6) * 0.01
    while f(lo) < 0:
        lo -= step
        step *= 2
    step = max(abs(r0), 1e-6) * 0.01
    while f(hi) < 0:
        hi += step
        step *= 2
    return [
        float(optimize.brentq(f, lo, r0, xtol=1e-14, rtol=1e-15)),
        float(optimize.brentq(f, r0, hi, xtol=1e-14, rtol=1e-15)),
    ]


def signed_rank(d):
    nz = [x for x in d if x != 0]
    absd = [abs(x) for x in nz]
    exact = len(nz) == len(d) and len(set(absd)) == len(absd)
    r = stats.wilcoxon(d, zero_method="wilcox", correction=False, method="exact" if exact else "approx")
    return {"w": float(r.statistic), "p": float(r.pvalue), "exact": exact}


def paired(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    n = len(a)
    if (a > 0).all() and (b > 0).all():
        d = np.log(a / b)
        t = stats.ttest_rel(np.log(a), np.log(b))
        lo, hi = stats.t.interval(0.95, df=n - 1, loc=d.mean(), scale=stats.sem(d))
        out = {"scale": "log_ratio", "ratio": float(np.exp(d.mean())), "ci": [float(np.exp(lo)), float(np.exp(hi))]}
    else:
        d = a - b
        t = stats.ttest_rel(a, b)
        tc = stats.t.ppf(0.975, n - 1)
        ma, mb = a.mean(), b.mean()
        f = lambda r: (ma - r * mb) ** 2 - tc**2 * np.var(a - r * b, ddof=1) / n
        out = {"scale": "difference", "ratio": float(ma / mb), "ci": root_interval(f, ma / mb)}
    out.update({"t": float(t.statistic), "p": float(t.pvalue), "signed_rank": signed_rank(list(d))})
    return out


def welch(a, b):
    r = stats.ttest_ind(a, b, equal_var=False)
    return {"t": float(r.statistic), "df": float(welch_df(a, b)), "p": float(r.pvalue)}


rng = np.random.default_rng(20261125)
PAIRS = {
    "fct_like": ([1.20, 1.35, 1.10, 1.42, 1.28], [1.05, 1.12, 0.98, 1.15, 1.09]),
    "three_each": ([10.0, 12.0, 11.0], [20.0, 22.0, 19.0]),
    "ties": ([3.0, 3.0, 4.0, 5.0, 5.0, 5.0], [1.0, 2.0, 3.0, 3.0, 4.0, 8.0]),
    "overlapping": ([0.56, 0.62, 0.58, 0.60, 0.57], [0.55, 0.61, 0.59, 0.63, 0.58]),
    "unequal_n": ([599.0, 917.0, 878.0], [640.0, 700.0, 705.0, 698.0, 720.0, 655.0]),
    "normal_30": (
        [round(v, 6) for v in rng.normal(100, 15, 30)],
        [round(v, 6) for v in rng.normal(108, 25, 25)],
    ),
}

out = {"t_ci": [], "bootstrap_mean_ci": [], "welch": [], "mann_whitney": [], "fieller": [], "holm": []}
for name, (a, b) in PAIRS.items():
    for label, x in (("a", a), ("b", b)):
        out["t_ci"].append({"name": f"{name}.{label}", "x": x, "ci": t_ci(x)})
    out["welch"].append({"name": name, "a": a, "b": b, **welch(a, b)})
    out["mann_whitney"].append({"name": name, "a": a, "b": b, **mann_whitney(a, b)})
    out["fieller"].append({"name": name, "a": a, "b": b, "ci": fieller(a, b)})

out["paired"] = []
PAIRED = {
    "fct_like": PAIRS["fct_like"],
    # A heavy flow mix for one seed lifts both schemes: separated per seed,
    # overlapping as independent samples.
    "seed_effect": ([38.0, 30.0, 265.0, 41.0, 35.0], [3.0, 2.8, 5.4, 3.1, 2.9]),
    "six_pairs": ([1.02, 0.97, 1.10, 1.31, 0.88, 1.05], [1.00, 1.01, 1.04, 1.20, 0.90, 0.99]),
    "drops_with_zeros": ([0.0, 3.0, 1.0, 0.0, 2.0], [10.0, 12.0, 9.0, 15.0, 11.0]),
    "normal_30": (
        [round(v, 6) for v in rng.normal(100, 15, 30)],
        [round(v, 6) for v in rng.normal(104, 15, 30)],
    ),
}
for name, (a, b) in PAIRED.items():
    out["paired"].append({"name": name, "a": a, "b": b, **paired(a, b)})
out["signed_rank"] = []
for name, d in {
    "five_exact": [0.5, -0.2, 1.3, 0.7, 0.9],
    "eight_exact": [0.31, -0.12, 0.44, 0.05, 0.27, 0.39, -0.08, 0.16],
    "ties": [0.5, -0.5, 1.3, 0.7, 0.7, 0.2],
    "zeros": [0.5, 0.0, 1.3, -0.7, 0.0, 0.9, 0.4],
}.items():
    out["signed_rank"].append({"name": name, "d": d, **signed_rank(d)})

for name, (x, seed, resamples) in {
    "five": ([1.20, 1.35, 1.10, 1.42, 1.28], 7, 2000),
    "skewed": ([1.0, 1.1, 0.9, 1.0, 5.0, 1.2, 0.95, 1.05, 1.0, 1.1], 42, 3000),
}.items():
    out["bootstrap_mean_ci"].append(
        {"name": name, "x": x, "seed": seed, "resamples": resamples, "ci": bootstrap_mean_ci(x, resamples, seed)}
    )

for p in ([0.01, 0.04, 0.03, 0.005], [0.2, 0.001, 0.04], [0.5], [0.03, 0.03, 0.9, 0.0001, 0.02]):
    out["holm"].append({"p": p, "adjusted": [float(v) for v in multipletests(p, method="holm")[1]]})

path = os.path.join(os.path.dirname(__file__), "..", "src", "exp", "testdata", "stats_reference.json")
with open(path, "w") as f:
    json.dump(
        {
            "generated_by": "scripts/stats-reference.py",
            "versions": {
                "scipy": __import__("scipy").__version__,
                "numpy": np.__version__,
                "statsmodels": __import__("statsmodels").__version__,
            },
            **out,
        },
        f,
        indent=1,
    )
    f.write("\n")
print("wrote", os.path.normpath(path))
