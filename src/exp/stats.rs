//! Statistics across the repeats of an experiment: the spread of a number
//! over repeats, its 95 % confidence interval, and whether two schemes differ
//! beyond run-to-run noise.
//!
//! Every repeat of a combination is one sample (its own seed, its own run).
//! What is computed, and where the numbers come from:
//!
//! * **Interval of the mean** — Student's t, `mean ± t(0.975, n−1)·s/√n`
//!   (the t quantile from `statrs`), or a seeded percentile bootstrap of the
//!   mean ([`bootstrap_mean_interval`]; the percentiles interpolate linearly
//!   between order statistics, numpy's default). With n < 10 the percentile
//!   bootstrap covers less than 95 % (it cannot reach outside the observed
//!   range), so t is the default.
//! * **Welch's t-test** (unequal variances, Welch–Satterthwaite degrees of
//!   freedom), two-sided; the p-value is the regularised incomplete beta
//!   `I(df/(df+t²); df/2, 1/2)` (`statrs`).
//! * **Mann–Whitney U**, two-sided: exact (the distribution of U counted over
//!   every arrangement) when no value is tied, else the normal approximation
//!   with tie correction and continuity correction — as
//!   `scipy.stats.mannwhitneyu` (counted exactly up to 120 values in all).
//!   With 3 repeats per side its smallest
//!   possible p is 0.1, with 4 0.029, with 5 0.0079: too few repeats cannot
//!   show a difference with it at all.
//! * **Ratio of two means with Fieller's interval** (independent samples,
//!   Welch's degrees of freedom): the set of r with
//!   `(ā − r·b̄)² ≤ t²·(s_a²/n_a + r²·s_b²/n_b)`. It contains 1 exactly when
//!   Welch's test does not reject at 5 %; it is unbounded when the baseline's
//!   mean is not clearly above zero.
//! * **Holm's step-down correction** of a family of p-values.
//!
//! The distributions (t, normal via erfc, the incomplete beta) come from
//! `statrs`, a well-kept crate; the tests, intervals and corrections are
//! written here — a few dozen lines each — because the Rust crates that offer
//! some of them (rustats 0.1, hypors 0.3, inferust 0.1) are young 0.x
//! crates of one author each: rather than depend on their small-sample
//! behaviour, these are written here and pinned. The unit tests compare
//! every one of them with
//! reference values computed by scipy / numpy / statsmodels
//! (`scripts/stats-reference.py`, `testdata/stats_reference.json`).

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::rng::SimRng;

/// Confidence level of every interval.
pub const LEVEL: f64 = 0.95;

/// Arithmetic mean (NaN for an empty slice).
pub fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

/// Sample standard deviation (n − 1); 0 for fewer than two values.
pub fn sd(x: &[f64]) -> f64 {
    if x.len() < 2 {
        return 0.0;
    }
    let m = mean(x);
    (x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (x.len() - 1) as f64).sqrt()
}

/// The `q` quantile (0 ≤ q ≤ 1) of an ascending slice, interpolating
/// linearly between order statistics (numpy's default, R's type 7).
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    let n = sorted.len();
    if n == 0 {
        return f64::NAN;
    }
    let h = q * (n - 1) as f64;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(n - 1);
    let t = h - lo as f64;
    let (a, b) = (sorted[lo], sorted[hi]);
    // numpy's lerp: from the nearer end, so t = 1 gives b exactly.
    if t >= 0.5 {
        b - (b - a) * (1.0 - t)
    } else {
        a + (b - a) * t
    }
}

/// Median.
pub fn median(x: &[f64]) -> f64 {
    let mut v = x.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    quantile_sorted(&v, 0.5)
}

/// The two-sided critical value t(1 − (1 − LEVEL)/2, df).
pub fn t_critical(df: f64) -> f64 {
    match StudentsT::new(0.0, 1.0, df) {
        Ok(t) => t.inverse_cdf(1.0 - (1.0 - LEVEL) / 2.0),
        Err(_) => f64::NAN,
    }
}

/// Two-sided p-value of a t statistic with `df` degrees of freedom.
pub fn t_two_sided_p(t: f64, df: f64) -> f64 {
    if t.is_infinite() {
        return 0.0;
    }
    statrs::function::beta::beta_reg(df / 2.0, 0.5, df / (df + t * t)).clamp(0.0, 1.0)
}

/// Student's t interval of the mean; `None` with fewer than two values.
pub fn t_interval(x: &[f64]) -> Option<(f64, f64)> {
    if x.len() < 2 {
        return None;
    }
    let m = mean(x);
    let half = t_critical((x.len() - 1) as f64) * sd(x) / (x.len() as f64).sqrt();
    Some((m - half, m + half))
}

/// Percentile bootstrap interval of the mean: `resamples` resamples drawn
/// with replacement by a generator seeded with `seed` (index = ⌊u·n⌋);
/// `None` with fewer than two values.
pub fn bootstrap_mean_interval(x: &[f64], resamples: usize, seed: u64) -> Option<(f64, f64)> {
    if x.len() < 2 || resamples == 0 {
        return None;
    }
    let mut rng = SimRng::new(seed);
    let n = x.len();
    let mut means: Vec<f64> = (0..resamples)
        .map(|_| {
            let mut total = 0.0;
            for _ in 0..n {
                total += x[(rng.uniform() * n as f64) as usize];
            }
            total / n as f64
        })
        .collect();
    means.sort_by(|a, b| a.total_cmp(b));
    let tail = (1.0 - LEVEL) / 2.0;
    Some((
        quantile_sorted(&means, tail),
        quantile_sorted(&means, 1.0 - tail),
    ))
}

/// A two-sample test's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TestOutcome {
    /// t (Welch) or U of the first sample (Mann–Whitney).
    pub statistic: f64,
    /// Two-sided p-value.
    pub p: f64,
    /// Degrees of freedom (Welch).
    pub df: Option<f64>,
    /// Mann–Whitney: the exact distribution was used (no ties).
    pub exact: Option<bool>,
}

/// Welch–Satterthwaite degrees of freedom of two squared standard errors.
fn welch_df(va: f64, na: usize, vb: f64, nb: usize) -> f64 {
    let num = (va + vb) * (va + vb);
    let den = va * va / (na - 1) as f64 + vb * vb / (nb - 1) as f64;
    if den > 0.0 {
        num / den
    } else {
        (na + nb - 2) as f64
    }
}

/// Welch's two-sided t-test of equal means; `None` unless both samples
/// have at least two values, and `None` for two samples without spread
/// (no test can weigh them: report them as identical or not, see
/// [`no_spread`]).
pub fn welch(a: &[f64], b: &[f64]) -> Option<TestOutcome> {
    if a.len() < 2 || b.len() < 2 || (no_spread(a).is_some() && no_spread(b).is_some()) {
        return None;
    }
    let (va, vb) = (
        sd(a).powi(2) / a.len() as f64,
        sd(b).powi(2) / b.len() as f64,
    );
    let diff = mean(a) - mean(b);
    let df = welch_df(va, a.len(), vb, b.len());
    let se = (va + vb).sqrt();
    if se == 0.0 {
        return None;
    }
    let t = diff / se;
    Some(TestOutcome {
        statistic: t,
        p: t_two_sided_p(t, df),
        df: Some(df),
        exact: None,
    })
}

/// Mid-ranks (1-based) of `v` and Σ(t³ − t) over groups of ties.
fn ranks(v: &[f64]) -> (Vec<f64>, f64) {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&i, &j| v[i].total_cmp(&v[j]));
    let mut r = vec![0.0; v.len()];
    let mut ties = 0.0;
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
            j += 1;
        }
        let mid = (i + j) as f64 / 2.0 + 1.0;
        for &k in &idx[i..=j] {
            r[k] = mid;
        }
        let t = (j - i + 1) as f64;
        ties += t * t * t - t;
        i = j + 1;
    }
    (r, ties)
}

/// Largest n1 + n2 the exact distribution is counted for (C(120, 60)
/// arrangements still fit a u128).
const EXACT_MAX_N: usize = 120;

/// How many of the C(n1+n2, n1) arrangements without ties give each
/// U = 0..=n1·n2, by the recurrence over the largest value's sample: from
/// sample 1 it beats all n2 of sample 2 (U grows by n2), from sample 2 none.
fn u_counts(n1: usize, n2: usize) -> Vec<u128> {
    let max = n1 * n2;
    // prev[j][u]: counts for i − 1 and j.
    let mut prev: Vec<Vec<u128>> = (0..=n2)
        .map(|_| {
            let mut v = vec![0u128; max + 1];
            v[0] = 1;
            v
        })
        .collect();
    for i in 1..=n1 {
        let mut cur: Vec<Vec<u128>> = vec![vec![0u128; max + 1]; n2 + 1];
        cur[0][0] = 1;
        for j in 1..=n2 {
            for u in 0..=i * j {
                let from1 = if u >= j { prev[j][u - j] } else { 0 };
                cur[j][u] = from1 + cur[j - 1][u];
            }
        }
        prev = cur;
    }
    prev.swap_remove(n2)
}

/// Mann–Whitney U test, two-sided (see the module docs); `None` when a
/// sample is empty. The statistic is U of `a`.
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<TestOutcome> {
    let (n1, n2) = (a.len(), b.len());
    if n1 == 0 || n2 == 0 {
        return None;
    }
    let all: Vec<f64> = a.iter().chain(b).copied().collect();
    let (r, ties) = ranks(&all);
    let r1: f64 = r[..n1].iter().sum();
    let u1 = r1 - (n1 * (n1 + 1)) as f64 / 2.0;
    let (nf1, nf2) = (n1 as f64, n2 as f64);
    let u = u1.max(nf1 * nf2 - u1);
    if ties == 0.0 && n1 + n2 <= EXACT_MAX_N {
        let counts = u_counts(n1, n2);
        let total: u128 = counts.iter().sum();
        // Two-sided: twice P(U ≥ max(U1, U2)).
        let upper: u128 = counts[u as usize..].iter().sum();
        return Some(TestOutcome {
            statistic: u1,
            p: (2.0 * upper as f64 / total as f64).min(1.0),
            df: None,
            exact: Some(true),
        });
    }
    let n = nf1 + nf2;
    let mu = nf1 * nf2 / 2.0;
    let var = nf1 * nf2 / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)));
    let p = if var > 0.0 {
        let z = (u - mu - 0.5) / var.sqrt();
        statrs::function::erf::erfc(z / std::f64::consts::SQRT_2)
    } else {
        1.0
    };
    Some(TestOutcome {
        statistic: u1,
        p: p.clamp(0.0, 1.0),
        df: None,
        exact: Some(false),
    })
}

/// Paired t-test (`scipy.stats.ttest_rel`): Student's one-sample t on the
/// per-pair differences `d` against 0, two-sided, n − 1 degrees of
/// freedom. `None` with fewer than two pairs, or when the differences have
/// no spread (every pair differs by the same amount: no test can weigh
/// that, see [`no_spread`]).
pub fn paired_t(d: &[f64]) -> Option<TestOutcome> {
    let s = sd(d);
    if d.len() < 2 || no_spread(d).is_some() || s == 0.0 || !s.is_finite() {
        return None;
    }
    let df = (d.len() - 1) as f64;
    let t = mean(d) / (s / (d.len() as f64).sqrt());
    Some(TestOutcome {
        statistic: t,
        p: t_two_sided_p(t, df),
        df: Some(df),
        exact: None,
    })
}

/// Whether samples without spread can be told apart: `Some(true)` when the
/// values (or per-pair differences) are all equal to each other and
/// identical across the sides, `Some(false)` when they differ by a
/// constant, `None` when there is spread (a test applies). A sample
/// without spread is not infinitely precise — quantised counters
/// (goodput to 0.1 Mbit/s, drops in whole packets) often repeat exactly —
/// so two spread-free samples are reported as identical or not, never
/// with p = 0.
pub fn no_spread(d: &[f64]) -> Option<bool> {
    let first = *d.first()?;
    d.iter().all(|&x| x == first).then_some(first == 0.0)
}

/// Ranks 1..=n's exact null distribution for the signed-rank statistic:
/// how many of the 2ⁿ sign assignments give each W⁺ = 0..=n(n+1)/2.
fn signed_rank_counts(n: usize) -> Vec<u128> {
    let max = n * (n + 1) / 2;
    let mut c = vec![0u128; max + 1];
    c[0] = 1;
    for rank in 1..=n {
        for w in (rank..=max).rev() {
            c[w] += c[w - rank];
        }
    }
    c
}

/// Largest number of non-zero differences the signed-rank distribution is
/// counted for (2⁶⁰ assignments still fit a u128 sum many times over).
const SIGNED_RANK_EXACT_MAX_N: usize = 60;

/// Wilcoxon's signed-rank test on per-pair differences `d`, two-sided
/// (`scipy.stats.wilcoxon` with `zero_method="wilcox"`,
/// `correction=False`): zero differences are dropped, the rest ranked by
/// |d|; exact (the distribution counted over all sign assignments) when no
/// |d| is tied and none was zero, else the normal approximation with the
/// tie correction of the variance. The statistic is min(W⁺, W⁻), as
/// scipy reports it. With n pairs the smallest possible two-sided p is
/// 2/2ⁿ: 0.0625 with 5 pairs, so 5 repeats cannot reach p < 0.05 with it
/// (6 pairs: 0.031). `None` when every difference is zero.
pub fn wilcoxon_signed_rank(d: &[f64]) -> Option<TestOutcome> {
    let nz: Vec<f64> = d.iter().copied().filter(|&x| x != 0.0).collect();
    let n = nz.len();
    if n == 0 {
        return None;
    }
    let abs: Vec<f64> = nz.iter().map(|x| x.abs()).collect();
    let (r, ties) = ranks(&abs);
    let w_plus: f64 = r
        .iter()
        .zip(&nz)
        .filter(|(_, &x)| x > 0.0)
        .map(|(r, _)| r)
        .sum();
    let nf = n as f64;
    let total = nf * (nf + 1.0) / 2.0;
    let w = w_plus.min(total - w_plus);
    let zeros = d.len() - n;
    if ties == 0.0 && zeros == 0 && n <= SIGNED_RANK_EXACT_MAX_N {
        let counts = signed_rank_counts(n);
        let all: u128 = counts.iter().sum();
        let lower: u128 = counts[..=(w as usize)].iter().sum();
        return Some(TestOutcome {
            statistic: w,
            p: (2.0 * lower as f64 / all as f64).min(1.0),
            df: None,
            exact: Some(true),
        });
    }
    let var = nf * (nf + 1.0) * (2.0 * nf + 1.0) / 24.0 - ties / 48.0;
    let p = if var > 0.0 {
        let z = (w_plus - total / 2.0) / var.sqrt();
        statrs::function::erf::erfc(z.abs() / std::f64::consts::SQRT_2)
    } else {
        1.0
    };
    Some(TestOutcome {
        statistic: w,
        p: p.clamp(0.0, 1.0),
        df: None,
        exact: Some(false),
    })
}

/// How two paired samples are compared ([`paired_ratio`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PairedScale {
    /// Per-pair log-ratios ln(aᵢ/bᵢ): every value on both sides is > 0.
    /// The estimate is the geometric mean of the per-pair ratios.
    LogRatio,
    /// Per-pair differences aᵢ − bᵢ (some value is 0: a count of drops or
    /// RTOs). The estimate is the ratio of the means, with Fieller's
    /// interval for correlated means.
    Difference,
}

/// Two paired samples compared per pair.
#[derive(Clone, Debug, PartialEq)]
pub struct Paired {
    /// The scale the pairs were compared on.
    pub scale: PairedScale,
    /// The per-pair values tested: log-ratios or differences.
    pub d: Vec<f64>,
    /// The ratio (geometric mean of the per-pair ratios on the log scale,
    /// ratio of the means on the difference scale; `None` when b̄ = 0).
    pub ratio: Ratio,
    /// The paired t-test on `d` (`None`: fewer than two pairs, or no
    /// spread).
    pub t: Option<TestOutcome>,
    /// Wilcoxon's signed-rank test on `d`.
    pub signed_rank: Option<TestOutcome>,
    /// `Some(identical)` when `d` has no spread ([`no_spread`]).
    pub no_spread: Option<bool>,
}

/// Compares `a` with `b` pair by pair (`a[i]` and `b[i]` ran the same
/// seed): on log-ratios when every value is positive — FCTs, goodput,
/// sojourn times, whose differences between seeds are multiplicative (a
/// heavy flow mix lifts every scheme's FCT by a factor) — else on
/// differences. Either way the ratio's 95 % interval excludes 1 exactly
/// when the paired t-test on the same scale rejects at 5 %: on the log
/// scale it is exp(mean ± t·s/√n) of the log-ratios; on the difference
/// scale it is Fieller's interval for two correlated means, the set of r
/// with (ā − r·b̄)² ≤ t²·s²(a − r·b)/n, n − 1 degrees of freedom.
pub fn paired_ratio(a: &[f64], b: &[f64]) -> Paired {
    assert_eq!(a.len(), b.len(), "paired samples have equal lengths");
    let n = a.len();
    let positive = a.iter().chain(b).all(|&x| x > 0.0 && x.is_finite());
    let scale = if positive {
        PairedScale::LogRatio
    } else {
        PairedScale::Difference
    };
    let d: Vec<f64> = match scale {
        PairedScale::LogRatio => a.iter().zip(b).map(|(x, y)| (x / y).ln()).collect(),
        PairedScale::Difference => a.iter().zip(b).map(|(x, y)| x - y).collect(),
    };
    let no_spread = no_spread(&d);
    let ratio = match scale {
        PairedScale::LogRatio => {
            let m = mean(&d);
            let interval = if n >= 2 {
                let half = t_critical((n - 1) as f64) * sd(&d) / (n as f64).sqrt();
                Some(((m - half).exp(), (m + half).exp()))
            } else {
                None
            };
            Ratio {
                estimate: (n > 0).then(|| m.exp()),
                interval,
            }
        }
        PairedScale::Difference => paired_fieller(a, b),
    };
    Paired {
        scale,
        t: paired_t(&d),
        signed_rank: wilcoxon_signed_rank(&d),
        d,
        ratio,
        no_spread,
    }
}

/// `mean(a) / mean(b)` of paired samples with Fieller's interval for
/// correlated means (n − 1 degrees of freedom).
fn paired_fieller(a: &[f64], b: &[f64]) -> Ratio {
    let n = a.len();
    let (ma, mb) = (mean(a), mean(b));
    let estimate = (n > 0 && mb != 0.0).then(|| ma / mb);
    if n < 2 {
        return Ratio {
            estimate,
            interval: None,
        };
    }
    let nf = n as f64;
    let cov = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - ma) * (y - mb))
        .sum::<f64>()
        / (nf - 1.0);
    let (va, vb, c) = (sd(a).powi(2) / nf, sd(b).powi(2) / nf, cov / nf);
    if va == 0.0 && vb == 0.0 {
        return Ratio {
            estimate,
            interval: estimate.map(|r| (r, r)),
        };
    }
    let t2 = t_critical(nf - 1.0).powi(2);
    // (b̄² − t²v_b) r² − 2(ā b̄ − t²c) r + (ā² − t²v_a) ≤ 0
    let qa = mb * mb - t2 * vb;
    let qb = ma * mb - t2 * c;
    let qc = ma * ma - t2 * va;
    let disc = qb * qb - qa * qc;
    if qa <= 0.0 || disc < 0.0 {
        return Ratio {
            estimate,
            interval: None,
        };
    }
    let half = disc.sqrt();
    let (mut lo, hi) = ((qb - half) / qa, (qb + half) / qa);
    // Fieller's interval comes from a normal approximation and may reach
    // below 0; the ratio of two means of non-negative values (counts,
    // times) cannot, so the interval is cut at 0 there.
    if a.iter().chain(b).all(|&x| x >= 0.0) {
        lo = lo.max(0.0);
    }
    Ratio {
        estimate,
        interval: Some((lo, hi)),
    }
}

/// The ratio of two means and its Fieller interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ratio {
    /// ā / b̄ (`None` when b̄ = 0).
    pub estimate: Option<f64>,
    /// The interval (`None`: unbounded, or fewer than two values a side).
    pub interval: Option<(f64, f64)>,
}

/// `mean(a) / mean(b)` with Fieller's interval (Welch's degrees of freedom).
pub fn fieller_ratio(a: &[f64], b: &[f64]) -> Ratio {
    let (ma, mb) = (mean(a), mean(b));
    let estimate = (mb != 0.0 && a.len() * b.len() > 0).then(|| ma / mb);
    if a.len() < 2 || b.len() < 2 {
        return Ratio {
            estimate,
            interval: None,
        };
    }
    let (va, vb) = (
        sd(a).powi(2) / a.len() as f64,
        sd(b).powi(2) / b.len() as f64,
    );
    if va == 0.0 && vb == 0.0 {
        return Ratio {
            estimate,
            interval: estimate.map(|r| (r, r)),
        };
    }
    let t2 = t_critical(welch_df(va, a.len(), vb, b.len())).powi(2);
    // (b̄² − t²v_b) r² − 2 ā b̄ r + (ā² − t²v_a) ≤ 0
    let qa = mb * mb - t2 * vb;
    if qa <= 0.0 {
        return Ratio {
            estimate,
            interval: None,
        };
    }
    let half = (t2 * (ma * ma * vb + mb * mb * va - t2 * va * vb)).sqrt();
    Ratio {
        estimate,
        interval: Some(((ma * mb - half) / qa, (ma * mb + half) / qa)),
    }
}

/// Holm's step-down adjusted p-values, in the input's order.
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| p[i].total_cmp(&p[j]));
    let mut adjusted = vec![0.0; m];
    let mut running: f64 = 0.0;
    for (k, &i) in order.iter().enumerate() {
        running = running.max(((m - k) as f64 * p[i]).min(1.0));
        adjusted[i] = running;
    }
    adjusted
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn reference() -> Value {
        serde_json::from_str(include_str!("testdata/stats_reference.json")).unwrap()
    }

    fn floats(v: &Value) -> Vec<f64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    }

    fn close(got: f64, want: f64, what: &str) {
        let tol = 1e-9 * want.abs().max(1e-3);
        assert!(
            (got - want).abs() <= tol,
            "{what}: got {got}, reference {want}"
        );
    }

    #[test]
    fn t_intervals_match_scipy() {
        for case in reference()["t_ci"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let (lo, hi) = t_interval(&floats(&case["x"])).unwrap();
            let want = floats(&case["ci"]);
            close(lo, want[0], name);
            close(hi, want[1], name);
        }
        assert_eq!(t_interval(&[1.0]), None);
    }

    #[test]
    fn welch_matches_scipy() {
        for case in reference()["welch"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let w = welch(&floats(&case["a"]), &floats(&case["b"])).unwrap();
            close(w.statistic, case["t"].as_f64().unwrap(), name);
            close(w.df.unwrap(), case["df"].as_f64().unwrap(), name);
            close(w.p, case["p"].as_f64().unwrap(), name);
        }
    }

    #[test]
    fn no_test_without_spread() {
        // Two quantised samples that repeat exactly are not infinitely
        // significant: no p at all, and the caller says identical or not.
        assert!(welch(&[3.0, 3.0], &[3.0, 3.0]).is_none());
        assert!(welch(&[939.0, 939.0, 939.0], &[938.9, 938.9]).is_none());
        assert!(welch(&[1.0], &[1.0, 2.0]).is_none());
        assert!(welch(&[1.0, 2.0], &[5.0, 5.0]).is_some());
        assert_eq!(no_spread(&[0.0, 0.0, 0.0]), Some(true));
        assert_eq!(no_spread(&[-0.1, -0.1]), Some(false));
        assert_eq!(no_spread(&[0.1, 0.2]), None);
        assert!(paired_t(&[0.1, 0.1, 0.1]).is_none());
        let p = paired_ratio(&[939.0, 939.0, 939.0], &[938.9, 938.9, 938.9]);
        assert_eq!(p.no_spread, Some(false));
        assert!(p.t.is_none());
        let p = paired_ratio(&[0.0, 0.0], &[0.0, 0.0]);
        assert_eq!(
            (p.scale, p.no_spread),
            (PairedScale::Difference, Some(true))
        );
        assert!(p.signed_rank.is_none());
    }

    /// A ratio of non-negative values (drops, RTOs) has no negative bound:
    /// R-AQM's drops against DCTCP's at fan-in 128 (incast-raqm-10g) gave
    /// Fieller's interval a lower end below 0 before it was cut there.
    #[test]
    fn a_ratio_of_non_negative_values_is_not_negative() {
        let a = [0.0, 0.0, 12.0, 5.0, 0.0];
        let b = [183.0, 167.0, 319.0, 200.0, 170.0];
        let p = paired_ratio(&a, &b);
        assert_eq!(p.scale, PairedScale::Difference);
        let (lo, hi) = p.ratio.interval.unwrap();
        assert_eq!(lo, 0.0);
        assert!(hi > p.ratio.estimate.unwrap() && hi < 1.0, "{hi}");
        // Signed values keep Fieller's interval as it is.
        let p = paired_ratio(&[-1.0, 0.0, 12.0, 5.0, 0.0], &b);
        assert!(p.ratio.interval.unwrap().0 < 0.0);
    }

    #[test]
    fn mann_whitney_matches_scipy() {
        for case in reference()["mann_whitney"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let m = mann_whitney(&floats(&case["a"]), &floats(&case["b"])).unwrap();
            assert_eq!(m.exact, case["exact"].as_bool(), "{name}");
            close(m.statistic, case["u"].as_f64().unwrap(), name);
            close(m.p, case["p"].as_f64().unwrap(), name);
        }
    }

    #[test]
    fn paired_comparisons_match_scipy() {
        for case in reference()["paired"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let p = paired_ratio(&floats(&case["a"]), &floats(&case["b"]));
            let scale = serde_json::to_value(p.scale).unwrap();
            assert_eq!(scale, case["scale"], "{name}");
            close(
                p.ratio.estimate.unwrap(),
                case["ratio"].as_f64().unwrap(),
                name,
            );
            let (lo, hi) = p.ratio.interval.unwrap();
            let want = floats(&case["ci"]);
            // The reference is Fieller's interval as it is; ours is cut at
            // 0 for non-negative values (a_ratio_of_non_negative_values_…).
            let (a, b) = (floats(&case["a"]), floats(&case["b"]));
            let floor = a.iter().chain(&b).all(|&x| x >= 0.0);
            let want_lo = if floor { want[0].max(0.0) } else { want[0] };
            close(lo, want_lo, name);
            close(hi, want[1], name);
            let t = p.t.unwrap();
            close(t.statistic, case["t"].as_f64().unwrap(), name);
            close(t.p, case["p"].as_f64().unwrap(), name);
            // The interval excludes 1 exactly when the paired t rejects.
            assert_eq!(t.p < 1.0 - LEVEL, !(lo..=hi).contains(&1.0), "{name}");
            let sr = p.signed_rank.unwrap();
            let want = &case["signed_rank"];
            close(sr.statistic, want["w"].as_f64().unwrap(), name);
            close(sr.p, want["p"].as_f64().unwrap(), name);
            assert_eq!(sr.exact, want["exact"].as_bool(), "{name}");
        }
    }

    #[test]
    fn pairing_removes_the_seed_effect() {
        // Fully separated per seed, but one seed lifts both schemes: as
        // independent samples Welch cannot tell them apart, per seed the
        // paired test can.
        let a = [38.0, 30.0, 265.0, 41.0, 35.0];
        let b = [3.0, 2.8, 5.4, 3.1, 2.9];
        assert!(welch(&a, &b).unwrap().p > 0.05);
        assert!(paired_ratio(&a, &b).t.unwrap().p < 0.001);
    }

    #[test]
    fn signed_rank_matches_scipy() {
        for case in reference()["signed_rank"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let w = wilcoxon_signed_rank(&floats(&case["d"])).unwrap();
            assert_eq!(w.exact, case["exact"].as_bool(), "{name}");
            close(w.statistic, case["w"].as_f64().unwrap(), name);
            close(w.p, case["p"].as_f64().unwrap(), name);
        }
        // The floor: all n differences of one sign, 2 / 2^n.
        let floor = |n: usize| {
            wilcoxon_signed_rank(&(1..=n).map(|i| i as f64).collect::<Vec<_>>())
                .unwrap()
                .p
        };
        close(floor(5), 0.0625, "5 pairs");
        close(floor(6), 0.03125, "6 pairs");
        assert!(wilcoxon_signed_rank(&[0.0, 0.0]).is_none());
    }

    /// `scripts/static-phases.py` (the DiffECN phase tables) makes the
    /// same paired comparisons in Python: its own check against the same
    /// reference values must pass.
    #[test]
    fn the_phase_script_agrees_with_scipy() {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/static-phases.py");
        let out = match std::process::Command::new("python3")
            .args([script, "--self-test"])
            .output()
        {
            Ok(o) => o,
            Err(e) => {
                eprintln!("the_phase_script_agrees_with_scipy: no python3 ({e}); not run");
                return;
            }
        };
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{text}");
        assert!(text.contains("agree with scipy"), "{text}");
    }

    #[test]
    fn mann_whitney_floor_with_few_repeats() {
        // Complete separation is the most extreme outcome: 2 / C(n1+n2, n1).
        let p = |n: usize| {
            let a: Vec<f64> = (0..n).map(|i| i as f64).collect();
            let b: Vec<f64> = (0..n).map(|i| 100.0 + i as f64).collect();
            mann_whitney(&a, &b).unwrap().p
        };
        close(p(3), 0.1, "3 vs 3");
        close(p(4), 2.0 / 70.0, "4 vs 4");
        close(p(5), 2.0 / 252.0, "5 vs 5");
    }

    #[test]
    fn fieller_matches_root_finding() {
        for case in reference()["fieller"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let (a, b) = (floats(&case["a"]), floats(&case["b"]));
            let r = fieller_ratio(&a, &b);
            let (lo, hi) = r.interval.unwrap();
            let want = floats(&case["ci"]);
            close(lo, want[0], name);
            close(hi, want[1], name);
            // The interval excludes 1 exactly when Welch rejects at 5 %.
            let rejects = welch(&a, &b).unwrap().p < 1.0 - LEVEL;
            assert_eq!(rejects, !(lo..=hi).contains(&1.0), "{name}");
        }
    }

    #[test]
    fn fieller_edge_cases() {
        // Baseline indistinguishable from zero: unbounded.
        let r = fieller_ratio(&[1.0, 2.0, 3.0], &[0.0, 0.1, 5.0]);
        assert_eq!(r.interval, None);
        assert!(r.estimate.is_some());
        // No spread on either side: the ratio itself.
        let r = fieller_ratio(&[2.0, 2.0], &[4.0, 4.0]);
        assert_eq!(r.interval, Some((0.5, 0.5)));
        assert_eq!(fieller_ratio(&[1.0, 2.0], &[0.0, 0.0]).estimate, None);
    }

    #[test]
    fn bootstrap_matches_the_reference_resampling() {
        for case in reference()["bootstrap_mean_ci"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let (lo, hi) = bootstrap_mean_interval(
                &floats(&case["x"]),
                case["resamples"].as_u64().unwrap() as usize,
                case["seed"].as_u64().unwrap(),
            )
            .unwrap();
            let want = floats(&case["ci"]);
            close(lo, want[0], name);
            close(hi, want[1], name);
        }
    }

    #[test]
    fn holm_matches_statsmodels() {
        for case in reference()["holm"].as_array().unwrap() {
            let got = holm(&floats(&case["p"]));
            for (g, w) in got.iter().zip(floats(&case["adjusted"])) {
                close(*g, w, "holm");
            }
        }
    }

    #[test]
    fn quantiles_interpolate_like_numpy() {
        let v = [1.0, 2.0, 4.0, 8.0];
        assert_eq!(quantile_sorted(&v, 0.5), 3.0);
        assert_eq!(quantile_sorted(&v, 0.0), 1.0);
        assert_eq!(quantile_sorted(&v, 1.0), 8.0);
        // h = 0.25·3 = 0.75: between 1 and 2, from the nearer end 2 − 0.25·(2 − 1).
        assert_eq!(quantile_sorted(&v, 0.25), 1.75);
        assert_eq!(median(&[5.0, 1.0, 3.0]), 3.0);
    }
}
