//! FCT summaries as the papers report them (TCN §6, ECN♯ §5, DiffECN §VI-A4):
//! mean and 99th-percentile flow completion time for small, medium, large
//! and all flows, plus goodput.
//!
//! * **Size classes** (bytes, decimal as in the papers' "<100KB", ">10MB"):
//!   small `size < 100_000`, large `size > 10_000_000`, medium the rest
//!   (DiffECN; TCN §6.1.2 writes small as (0, 100KB], which
//!   differs only for a flow of exactly 100 000 bytes).
//! * **Percentile** — nearest-rank: sort the n FCTs ascending, and the p-th
//!   percentile is the value at 1-based rank `⌈p/100 · n⌉` (rank 1 when that
//!   is 0). It is always one of the observed FCTs, never an interpolation;
//!   p99 of fewer than 100 flows is therefore the maximum.
//! * **Goodput** — per flow `size·8 / fct` (bit/µs = Mbit/s); aggregate
//!   `Σ size · 8 / wall time` of the run.

use serde::Serialize;

use super::record::FlowRecord;

/// Upper bound (exclusive) of the small class, bytes.
pub const SMALL_MAX_BYTES: u64 = 100_000;
/// Lower bound (exclusive) of the large class, bytes.
pub const LARGE_MIN_BYTES: u64 = 10_000_000;

/// FCT statistics of one group of flows, in microseconds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FctStats {
    /// Flows in the group.
    pub count: usize,
    /// Mean FCT, µs.
    pub mean_us: f64,
    /// 50th percentile (nearest rank), µs.
    pub p50_us: u64,
    /// 99th percentile (nearest rank), µs.
    pub p99_us: u64,
    /// Largest FCT, µs.
    pub max_us: u64,
}

/// The FCT breakdown of a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FctSummary {
    /// `size < 100 KB`; `None` when there were none.
    pub small: Option<FctStats>,
    /// `100 KB ≤ size ≤ 10 MB`.
    pub medium: Option<FctStats>,
    /// `size > 10 MB`.
    pub large: Option<FctStats>,
    /// Every completed flow.
    pub all: Option<FctStats>,
    /// Bytes received in completed flows.
    pub total_bytes: u64,
    /// `total_bytes · 8 / wall time`, Mbit/s (0 when the wall time is 0).
    pub goodput_mbps: f64,
    /// Mean of the per-flow goodputs, Mbit/s.
    pub mean_flow_goodput_mbps: f64,
}

/// The nearest-rank `p`-th percentile (0 < p ≤ 100) of an ascending slice.
pub fn nearest_rank(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len();
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, n) - 1])
}

/// Statistics of a group of FCTs (any order); `None` if empty.
pub fn fct_stats(fcts_us: &[u64]) -> Option<FctStats> {
    if fcts_us.is_empty() {
        return None;
    }
    let mut v = fcts_us.to_vec();
    v.sort_unstable();
    let sum: u128 = v.iter().map(|&x| x as u128).sum();
    Some(FctStats {
        count: v.len(),
        mean_us: sum as f64 / v.len() as f64,
        p50_us: nearest_rank(&v, 50.0)?,
        p99_us: nearest_rank(&v, 99.0)?,
        max_us: *v.last()?,
    })
}

impl FctSummary {
    /// Summarises completed flows; `wall_us` is the run's duration.
    pub fn from_records(records: &[FlowRecord], wall_us: u64) -> Self {
        let pick = |f: &dyn Fn(u64) -> bool| -> Vec<u64> {
            records
                .iter()
                .filter(|r| f(r.size))
                .map(|r| r.fct_us)
                .collect()
        };
        let total_bytes: u64 = records.iter().map(|r| r.size).sum();
        let goodput_mbps = if wall_us == 0 {
            0.0
        } else {
            total_bytes as f64 * 8.0 / wall_us as f64
        };
        let mean_flow_goodput_mbps = if records.is_empty() {
            0.0
        } else {
            records.iter().map(|r| r.goodput_mbps).sum::<f64>() / records.len() as f64
        };
        FctSummary {
            small: fct_stats(&pick(&|s| s < SMALL_MAX_BYTES)),
            medium: fct_stats(&pick(&|s| (SMALL_MAX_BYTES..=LARGE_MIN_BYTES).contains(&s))),
            large: fct_stats(&pick(&|s| s > LARGE_MIN_BYTES)),
            all: fct_stats(&pick(&|_| true)),
            total_bytes,
            goodput_mbps,
            mean_flow_goodput_mbps,
        }
    }

    /// One line for people: `all n=.. avg=..us p99=..us | small ... | goodput ..`.
    pub fn one_line(&self) -> String {
        let part = |name: &str, s: &Option<FctStats>| match s {
            Some(s) => format!(
                "{name} n={} avg={:.0}us p99={}us",
                s.count, s.mean_us, s.p99_us
            ),
            None => format!("{name} n=0"),
        };
        format!(
            "{} | {} | {} | {} | goodput {:.1} Mbit/s",
            part("all", &self.all),
            part("small<100KB", &self.small),
            part("medium", &self.medium),
            part("large>10MB", &self.large),
            self.goodput_mbps
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(size: u64, fct_us: u64) -> FlowRecord {
        FlowRecord::completed(0, 0, size, fct_us, 0, 0, 0)
    }

    #[test]
    fn nearest_rank_by_hand() {
        let v: Vec<u64> = (1..=10).collect();
        // ⌈0.99·10⌉ = 10 → 10; ⌈0.5·10⌉ = 5 → 5; ⌈0.25·10⌉ = 3 → 3 (not 2.75).
        assert_eq!(nearest_rank(&v, 99.0), Some(10));
        assert_eq!(nearest_rank(&v, 50.0), Some(5));
        assert_eq!(nearest_rank(&v, 25.0), Some(3));
        assert_eq!(nearest_rank(&v, 0.0), Some(1));
        assert_eq!(nearest_rank(&[], 99.0), None);
        // 200 values 1..=200: ⌈0.99·200⌉ = 198 → 198; ⌈0.5·200⌉ = 100 → 100.
        let w: Vec<u64> = (1..=200).collect();
        assert_eq!(nearest_rank(&w, 99.0), Some(198));
        assert_eq!(nearest_rank(&w, 50.0), Some(100));
        // 101 values 0..=100: ⌈99.99⌉ = 100 → value 99.
        let x: Vec<u64> = (0..=100).collect();
        assert_eq!(nearest_rank(&x, 99.0), Some(99));
    }

    #[test]
    fn classes_and_stats_by_hand() {
        let mut recs = vec![
            rec(1_000, 100),
            rec(99_999, 300),
            rec(50_000, 200),
            rec(100_000, 1_000), // medium: 100 KB is not < 100 KB
            rec(10_000_000, 5_000),
            rec(10_000_001, 90_000), // large
        ];
        // 100 more small flows with FCT 1..=100 µs.
        recs.extend((1..=100).map(|f| rec(10, f)));
        let s = FctSummary::from_records(&recs, 1_000_000);
        let small = s.small.unwrap();
        assert_eq!(small.count, 103);
        // Σ = 100 + 300 + 200 + 5050 = 5650; 5650 / 103.
        assert!((small.mean_us - 5650.0 / 103.0).abs() < 1e-9);
        // Sorted: 1..=100, 100, 200, 300 (103 values); ⌈0.99·103⌉ = 102 → 200.
        assert_eq!(small.p99_us, 200);
        assert_eq!(small.p50_us, 52); // ⌈51.5⌉ = 52 → 52
        assert_eq!(small.max_us, 300);
        let med = s.medium.unwrap();
        assert_eq!((med.count, med.p99_us), (2, 5_000));
        assert!((med.mean_us - 3_000.0).abs() < 1e-9);
        let large = s.large.unwrap();
        assert_eq!((large.count, large.p99_us), (1, 90_000));
        let all = s.all.unwrap();
        assert_eq!(all.count, 106);
        // ⌈0.99·106⌉ = 105 → second largest of {..., 1000, 5000, 90000} = 5000.
        assert_eq!(all.p99_us, 5_000);
        let bytes = 1_000 + 99_999 + 50_000 + 100_000 + 10_000_000 + 10_000_001 + 1_000;
        assert_eq!(s.total_bytes, bytes);
        assert!((s.goodput_mbps - bytes as f64 * 8.0 / 1e6).abs() < 1e-9);
    }

    #[test]
    fn empty_groups_are_none_and_serialize() {
        let s = FctSummary::from_records(&[rec(5, 7)], 0);
        assert!(s.medium.is_none() && s.large.is_none());
        assert_eq!(s.goodput_mbps, 0.0);
        let j = serde_json::to_value(&s).unwrap();
        assert_eq!(j["small"]["p99_us"], 7);
        assert!(j["large"].is_null());
        assert!(s.one_line().contains("large>10MB n=0"));
    }
}
