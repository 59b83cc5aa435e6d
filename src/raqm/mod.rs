//! R-AQM — Reverse ACK Active Queue Management.
//!
//! Xinle Du, Ke Xu, Lei Xu, Kai Zheng, Meng Shen, Bo Wu, Tong Li, "R-AQM:
//! Reverse ACK Active Queue Management in Multitenant Data Centers",
//! IEEE/ACM ToN 31(2), 2023.
//!
//! The switch holds the receiver's pure ACKs in a virtual input queue (VIQ)
//! of the port they arrive on — the congested port P, whose egress carries
//! the data they acknowledge — and releases them with a token bucket fed by
//! P's departures, so the senders' ACK clock follows P's drain rate
//! (§III, §IV-A, §IV-B, Fig. 4). No I/O and no clock: time is an argument.
//!
//! * **Which ACKs** (§IV-A): pure ACKs — ACK set, no payload, no SYN/FIN/RST
//!   ([`crate::wire::TcpInfo::is_pure_ack`]). Everything else passes.
//! * **VIQ** (§IV-A, §VI-A): FIFO per port, `viq_limit_pkts` = 500 ACKs
//!   (the simulations' "500 packets"); an ACK arriving at a full VIQ is
//!   dropped (counted `viq_full`).
//! * **Staleness** (§IV-D "Interaction with TCP RTO"): an ACK that has been
//!   held more than `stale` = 5 ms when it would leave is dropped (counted
//!   `stale`). We also drop it at that deadline rather than only at exit,
//!   which drops the same ACKs and frees the VIQ slot earlier.
//! * **Token bucket** (§IV-B, Algorithm 1): tokens are bytes of frames that
//!   left P's egress. `viq_send()`: in state S with `tokens ≥ α_S`,
//!   `tokens −= α_S` and `n_S` ACKs leave. α/n = 1 (NS), 0.5 (DS), 10 (CS)
//!   (§IV-F, §VI-A): defaults α = 1514 B (one full-sized frame: in NS one
//!   ACK per data frame departed, the per-packet ACK clock of §IV-F) with
//!   n = 1; DS α = 1514, n = 2; CS α = 15140, n = 1. Algorithm 1 line 3 is
//!   printed `token ← α`; we read it as the consumption its caption
//!   describes ("α … the number of tokens consumed").
//! * **Bucket depth** (paper silent): `bucket_bytes` = α_CS, the least that
//!   lets CS ever release; a token bucket never holds more than its depth.
//! * **State machine** (§IV-C, Fig. 5). The paper: "First, it calculates
//!   whether the queue length continues to grow or decline in time T. If
//!   the queue continues to grow, there will be a burst, so no matter how
//!   long the current queue is, it should trigger an active buffer […]. If
//!   the queue length continues to decrease, it means that the burst has
//!   ended. […] When the network state is stable, just like the traditional
//!   AQM, it can be determined by the threshold", and of an incast: "the
//!   queue length will continue to grow without any fluctuation". We read
//!   "continues to" over the samples within T: P's output queue length q
//!   (packets, all queues) is sampled `trend_samples` = k times per
//!   `interval` T, every T/k on a grid from the port's start, and at each T
//!   boundary the k + 1 samples spanning the T just ended decide
//!   ([`trend`], [`next_state`]):
//!   - q rose strictly at every step → CS, "no matter how long the current
//!     queue is" (the burst);
//!   - q fell strictly at every step → DS ("the burst has ended");
//!   - anything else — flat, or up over T with a dip in between — by the
//!     thresholds: q > K_max → CS, q < K_min → DS ("the forward queue is
//!     about to empty"), else NS ("the steady state"; "K_max and K_min
//!     represent the maximum and minimum values in the steady state",
//!     §IV-F). Fig. 5 itself is not in the text; this is its reading from
//!     §IV-C and §IV-F.
//!
//!   *Once per T*, not at every sample over a sliding window of T: the
//!   paper calculates the trend "in time T", and T is the period of the
//!   state update that §IV-F tunes (0.2–0.6·RTT); a sliding window would
//!   decide k times per T.
//!
//!   *k = 2 by default* (the paper gives no number of samples): the least k
//!   that looks inside T — k = 1 sees two samples and no fluctuation
//!   between them — and, at the paper's own settings, the largest k for
//!   which a queue draining at line rate is always seen to "continue to
//!   decrease". At C = 10 Gbit/s a 1514-B frame takes 1.2 µs and T = 3 µs
//!   is 2.5 frame times: every step of T/2 = 1.5 µs holds a departure;
//!   with k = 3 a step (1 µs) can hold none and be flat, so a drain with
//!   nothing arriving is seen falling only for some phases of its
//!   departures, and with k ≥ 4 never (T holds at most 3 departures, k
//!   steps need k). (With the 1 Gbit/s defaults T is 5.2 frame times. At
//!   250 Mbit/s with T = 62.5 µs, 1.3 frame times, a drain falls in both
//!   halves of T only when its departures fall so, and K_min catches the
//!   rest.)
//!
//!   *Missed samples* (an idle port, a late poll): a sample is q at the
//!   first step at or after its instant. Instants passed without a step
//!   are not replayed and have no sample: a window that lacks one has no
//!   trend (the thresholds decide), and the step from the last sample
//!   across the gap never counts; the grid goes on from the latest instant
//!   passed. [`RaqmPort::next_event`] wakes the port at every instant
//!   while P's egress or VIQ holds packets or the last samples were not 0.
//!
//!   *Ours, not the paper's*: `trend_min_pkts` (default 1: no condition
//!   beyond strict monotonicity) — q's net change over T must also be at
//!   least this many packets. `trend_samples` = 1 is the **older reading**,
//!   a difference of two samples one T apart (≥ `trend_min_pkts` growing →
//!   CS, shrinking → DS), which compares with the last sample taken even
//!   across missed ones, as it always did. Where T is only a frame time or
//!   two (T = 62.5 µs at 250 Mbit/s) a 1-packet difference is arrival
//!   jitter and that reading flips between CS and DS on it, holding little;
//!   measured in BENCHMARKS.md ("R-AQM incast with the paper's hosts"),
//!   where a difference of 4 packets restored the paper's behaviour.
//! * **When ACKs are held**: an ACK goes into the VIQ when P is in CS or the
//!   VIQ already holds ACKs (FIFO order within the port, so within every
//!   flow); in NS / DS with an empty VIQ it passes at once ("R-AQM is only
//!   triggered to avoid packet dropping", §V).
//! * **Idle credit** (`idle_credit`, our reading of §IV-C "R-AQM needs to
//!   ensure that the ACK is sent at a low rate, but not stopped"): while P's
//!   egress is empty no frame departs, so no token would ever come and held
//!   ACKs would only leave as stale drops. While P's egress is empty and its
//!   VIQ is not, tokens accrue at P's link rate (what P could send). Off:
//!   the strict departures-only bucket.
//! * **Header rewrites** (§IV-D "Interaction with TCP CC"): when the output
//!   queue plus the VIQ (packets) exceeds the ECN threshold, the leaving ACK gets ECE
//!   (`ece_threshold_pkts`, default the forward DCTCP K = C·RTT in MTU
//!   frames); when it exceeds the HSCC threshold its receive window is set
//!   to 1 MSS (`rwnd_threshold_pkts`, off by default as in the paper's ECN
//!   runs; the window is only lowered, never raised, and only on flows
//!   whose window scale was seen in both SYNs — see [`wscale`]).
//!   Rewrites apply to every pure ACK leaving R-AQM (held or not).
//! * **ACK priority** (`ack_priority`, §IV-A: "VIQ sets the highest priority
//!   of each ACK"): every pure ACK leaving R-AQM (held or not) goes into its
//!   egress port's highest-priority queue — the first strict queue of
//!   `sp`, `sp+dwrr` or `sp+wfq` — ahead of the data queued there. A port
//!   whose scheduler has no strict queue (`dwrr`, `wfq`, one queue) has no
//!   priority to give: the ACK is classified as any frame. Off: always so.
//!
//! Defaults scaled from C and RTT (§IV-F "Parameters Guidance"): K_min =
//! 1·BDP, K_max = 2·BDP (BDP = C·RTT in 1514-B frames, at least 2 / 4),
//! T = 0.25·RTT (the simulations' 3 µs at 12 µs, within 0.2–0.6·RTT),
//! sampled twice per T (see the state machine above).

pub mod wscale;

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::aqm::util::{de_duration, scale_ns, ser_duration};
use crate::aqm::DropReason;
use crate::packet::{FrameStore, Packet};
use crate::shaper::Bucket;
use crate::units::{fmt_duration, Nanos, Rate};

pub use wscale::WindowScales;

/// R-AQM's per-port congestion state (§IV-C, Fig. 5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[repr(u8)]
pub enum State {
    /// NS: steady state, α/n = 1.
    #[default]
    Normal = 0,
    /// DS: the forward queue is about to empty, α/n < 1.
    Draining = 1,
    /// CS: burst / heavy congestion, α/n ≫ 1.
    Congested = 2,
}

impl State {
    /// All states, in index order.
    pub const ALL: [State; 3] = [State::Normal, State::Draining, State::Congested];
    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            State::Normal => "normal",
            State::Draining => "draining",
            State::Congested => "congested",
        }
    }
}

/// R-AQM parameters (one set for every port; K and the ECE threshold in
/// packets as the paper counts them).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// K_min, packets (§IV-F: 0.5–1·BDP).
    pub k_min_pkts: u32,
    /// K_max, packets (§IV-F: 2·BDP).
    pub k_max_pkts: u32,
    /// T, the trend interval (§IV-F: 0.2–0.6·RTT).
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub interval: Nanos,
    /// Samples of q per T (k ≥ 1, T/k ≥ 1 ns): the trend is read from the
    /// k + 1 samples spanning T, "continues to grow / decline" = strictly
    /// at every step (§IV-C); 1 is the older two-sample difference.
    pub trend_samples: u32,
    /// Ours, not the paper's: q's net change over T must also be at least
    /// this many packets to count as a trend (1: no further condition).
    pub trend_min_pkts: u32,
    /// α_1 (NS), bytes of departed frames per release.
    pub alpha_normal: u64,
    /// n_1 (NS), ACKs per release.
    pub n_normal: u32,
    /// α_2 (DS).
    pub alpha_draining: u64,
    /// n_2 (DS).
    pub n_draining: u32,
    /// α_3 (CS).
    pub alpha_congested: u64,
    /// n_3 (CS).
    pub n_congested: u32,
    /// Token bucket depth, bytes.
    pub bucket_bytes: u64,
    /// VIQ size per port, ACKs.
    pub viq_limit_pkts: u32,
    /// Held longer than this → dropped (§IV-D: 5 ms).
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub stale: Nanos,
    /// Tokens at the link rate while P's egress is empty (see header).
    pub idle_credit: bool,
    /// Set ECE when q_out + VIQ > this many packets (0: never).
    pub ece_threshold_pkts: u32,
    /// Set rwnd = 1 MSS when q_out + VIQ > this many packets (0: never).
    pub rwnd_threshold_pkts: u32,
    /// The MSS the rwnd rewrite announces, bytes.
    pub mss_bytes: u32,
    /// ACKs leaving R-AQM go to their egress port's highest-priority queue.
    pub ack_priority: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config::for_link(Rate::gbit(1), 250_000)
    }
}

/// Frame size the packet-counted defaults are derived with.
pub const FULL_FRAME_BYTES: u64 = 1514;

impl Config {
    /// §IV-F guidance scaled to a link of rate C and base RTT.
    pub fn for_link(rate: Rate, rtt_ns: Nanos) -> Self {
        let bdp_pkts = (rate.bytes_in(rtt_ns) as f64 / FULL_FRAME_BYTES as f64).round() as u32;
        let k_min = bdp_pkts.max(2);
        Config {
            k_min_pkts: k_min,
            k_max_pkts: (2 * bdp_pkts).max(k_min + 2),
            interval: scale_ns(rtt_ns, 0.25).max(1),
            trend_samples: 2,
            trend_min_pkts: 1,
            alpha_normal: FULL_FRAME_BYTES,
            n_normal: 1,
            alpha_draining: FULL_FRAME_BYTES,
            n_draining: 2,
            alpha_congested: 10 * FULL_FRAME_BYTES,
            n_congested: 1,
            bucket_bytes: 10 * FULL_FRAME_BYTES,
            viq_limit_pkts: 500,
            stale: 5_000_000,
            idle_credit: true,
            // The forward DCTCP K = C·RTT (TCN paper Eq. 1, λ = 1), in frames.
            ece_threshold_pkts: bdp_pkts.max(1),
            rwnd_threshold_pkts: 0,
            mss_bytes: 1448,
            ack_priority: true,
        }
    }

    /// Checks the parameters make sense.
    pub fn validate(&self) -> Result<(), String> {
        if self.k_min_pkts >= self.k_max_pkts {
            return Err(format!(
                "r-aqm: k_min_pkts ({}) must be below k_max_pkts ({})",
                self.k_min_pkts, self.k_max_pkts
            ));
        }
        if self.interval == 0 {
            return Err("r-aqm: interval must be > 0".into());
        }
        if self.trend_samples == 0 {
            return Err("r-aqm: trend_samples must be ≥ 1".into());
        }
        if u64::from(self.trend_samples) > self.interval {
            return Err(format!(
                "r-aqm: trend_samples ({}) samples per interval ({}) would be less than 1 ns apart",
                self.trend_samples,
                fmt_duration(self.interval)
            ));
        }
        if self.trend_min_pkts == 0 {
            return Err("r-aqm: trend_min_pkts must be ≥ 1".into());
        }
        for (name, a, n) in [
            ("normal", self.alpha_normal, self.n_normal),
            ("draining", self.alpha_draining, self.n_draining),
            ("congested", self.alpha_congested, self.n_congested),
        ] {
            if a == 0 || n == 0 {
                return Err(format!(
                    "r-aqm: alpha_{name} and n_{name} must be > 0 (an ACK release costs tokens and releases ACKs)"
                ));
            }
            if a > self.bucket_bytes {
                return Err(format!(
                    "r-aqm: alpha_{name} ({a}) exceeds bucket_bytes ({}): that state could never release",
                    self.bucket_bytes
                ));
            }
        }
        if self.viq_limit_pkts == 0 {
            return Err("r-aqm: viq_limit_pkts must be ≥ 1".into());
        }
        if self.stale == 0 {
            return Err("r-aqm: stale must be > 0".into());
        }
        if self.rwnd_threshold_pkts > 0 && self.mss_bytes == 0 {
            return Err("r-aqm: mss_bytes must be > 0 for the rwnd rewrite".into());
        }
        Ok(())
    }

    /// α and n of a state (Algorithm 1).
    pub fn alpha_n(&self, s: State) -> (u64, u32) {
        match s {
            State::Normal => (self.alpha_normal, self.n_normal),
            State::Draining => (self.alpha_draining, self.n_draining),
            State::Congested => (self.alpha_congested, self.n_congested),
        }
    }

    /// The trend rule in words, for [`describe`](Self::describe).
    fn describe_trend(&self) -> String {
        let net = if self.trend_min_pkts > 1 {
            format!(" and by ≥ {} pkts over T (ours)", self.trend_min_pkts)
        } else {
            String::new()
        };
        if self.trend_samples == 1 {
            format!(
                "trend: 2 samples one T apart differ by ≥ {} pkt(s) (trend_samples=1, the older reading)",
                self.trend_min_pkts
            )
        } else {
            format!(
                "trend: q rises / falls at each of {} samples per T{net}",
                self.trend_samples
            )
        }
    }

    /// One line with the effective values, for the start-up banner.
    pub fn describe(&self) -> String {
        let opt = |v: u32| {
            if v == 0 {
                "off".to_string()
            } else {
                format!("> {v} pkts")
            }
        };
        format!(
            "r-aqm (R-AQM paper §IV): K_min {} / K_max {} pkts, T {}, {}; α/n NS {}/{} DS {}/{} CS {}/{} B; bucket {} B; VIQ {} ACKs, stale {}; idle credit {}; ECE {}; rwnd=1 MSS ({} B) {}; ACKs to the top-priority queue {}",
            self.k_min_pkts,
            self.k_max_pkts,
            fmt_duration(self.interval),
            self.describe_trend(),
            self.alpha_normal,
            self.n_normal,
            self.alpha_draining,
            self.n_draining,
            self.alpha_congested,
            self.n_congested,
            self.bucket_bytes,
            self.viq_limit_pkts,
            fmt_duration(self.stale),
            if self.idle_credit { "on" } else { "off" },
            opt(self.ece_threshold_pkts),
            self.mss_bytes,
            opt(self.rwnd_threshold_pkts),
            if self.ack_priority { "on" } else { "off" },
        )
    }
}

/// The forward-path AQM R-AQM runs with when none is named: DCTCP-style
/// ECN, the paper's "R-AQM (ECN)" (§VI-A, §VIII-A).
pub const DEFAULT_FORWARD_AQM: &str = "dctcp";

/// Reads an `--aqm` name: `r-aqm` → Some(None) (forward AQM from
/// `--raqm-forward`, default [`DEFAULT_FORWARD_AQM`]), `r-aqm+tcn` →
/// Some(Some("tcn")), anything else → None (R-AQM off).
pub fn parse_aqm_name(name: &str) -> Option<Option<&str>> {
    let n = name.trim();
    for prefix in ["r-aqm", "raqm"] {
        if n.eq_ignore_ascii_case(prefix) {
            return Some(None);
        }
        if let Some(rest) = n
            .get(..prefix.len() + 1)
            .filter(|p| p.eq_ignore_ascii_case(&format!("{prefix}+")))
            .and_then(|_| n.get(prefix.len() + 1..))
        {
            return Some(Some(rest));
        }
    }
    None
}

impl Config {
    /// Every `--raqm-opt` key with what it is and its unit, in the order
    /// `--raqm-opt help=1` lists them (a test holds them to the fields).
    pub const KEYS: &'static [(&'static str, &'static str)] = &[
        (
            "k_min_pkts",
            "K_min: below it the port is draining (DS), packets (§IV-F: 0.5–1·BDP)",
        ),
        (
            "k_max_pkts",
            "K_max: above it the port is congested (CS), packets (§IV-F: 2·BDP)",
        ),
        (
            "interval",
            "T, the queue-trend interval, time (§IV-F: 0.2–0.6·RTT)",
        ),
        (
            "trend_samples",
            "samples of the queue per T; a trend is a strict rise (fall) at every one (§IV-C: \"continues to grow or decline in time T\"); 1: the older two-sample difference",
        ),
        (
            "trend_min_pkts",
            "ours, not the paper's: the least net change of the queue over T that counts as a trend, packets",
        ),
        (
            "alpha_normal",
            "α_1: tokens one release costs in NS, bytes of departed frames",
        ),
        ("n_normal", "n_1: ACKs one release lets go in NS"),
        (
            "alpha_draining",
            "α_2: tokens one release costs in DS, bytes",
        ),
        ("n_draining", "n_2: ACKs one release lets go in DS"),
        (
            "alpha_congested",
            "α_3: tokens one release costs in CS, bytes",
        ),
        ("n_congested", "n_3: ACKs one release lets go in CS"),
        ("bucket_bytes", "token bucket depth, bytes"),
        ("viq_limit_pkts", "virtual input queue per port, ACKs"),
        (
            "stale",
            "an ACK held longer than this is dropped, time (§IV-D: 5ms)",
        ),
        (
            "idle_credit",
            "true: tokens accrue at the link rate while the port's egress is empty",
        ),
        (
            "ece_threshold_pkts",
            "set ECE when queue + VIQ exceeds this, packets (0: never)",
        ),
        (
            "rwnd_threshold_pkts",
            "set rwnd = 1 MSS when queue + VIQ exceeds this, packets (0: never)",
        ),
        ("mss_bytes", "the MSS the rwnd rewrite announces, bytes"),
        (
            "ack_priority",
            "true: ACKs leaving R-AQM go to their port's highest-priority queue (§IV-A)",
        ),
    ];

    /// What `--raqm-opt help=1` prints: the effective line, then every key
    /// with its value here, what it is and its unit — as `--aqm-opt help=1`
    /// does for an AQM.
    pub fn help(&self) -> String {
        crate::aqm::config::keys_help(
            &self.describe(),
            "--raqm-opt",
            "[raqm_opts]",
            Self::KEYS,
            &crate::aqm::config::to_table(self),
            |_, v| match v {
                toml::Value::String(s) => s.clone(),
                other => other.to_string(),
            },
            "Times need a unit (3us, 5ms); every other value is a plain number in the unit its \
             line names (packets, ACKs, bytes).",
        )
    }

    /// Applies `key=value` overrides (CLI strings) to these values, then
    /// validates; an unknown key or a bad value is an error naming it.
    pub fn with_cli_overrides(self, opts: &[(String, String)]) -> Result<Self, String> {
        let vals: Vec<_> = opts
            .iter()
            .map(|(k, v)| (k.clone(), crate::aqm::config::cli_value(v)))
            .collect();
        self.with_overrides(&vals)
    }

    /// Applies overrides given as TOML values, then validates.
    pub fn with_overrides(self, opts: &[(String, toml::Value)]) -> Result<Self, String> {
        let out = self.check_overrides(opts)?;
        out.validate()?;
        Ok(out)
    }

    /// Applies overrides given as TOML values (keys, values and units
    /// checked), without validating the result as a whole.
    pub fn check_overrides(self, opts: &[(String, toml::Value)]) -> Result<Self, String> {
        crate::aqm::config::apply("r-aqm", &self, opts).map_err(|e| e.to_string())
    }
}

/// What q did over T (§IV-C).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trend {
    /// "The queue continues to grow": a burst.
    Growing,
    /// "The queue length continues to decrease": the burst has ended.
    Declining,
    /// Neither: the thresholds decide.
    Neither,
}

/// The trend of `window`, the samples of q spanning one T, oldest first
/// (k + 1 of them for `trend_samples` = k): growing iff q rose strictly at
/// every step and by at least `trend_min_pkts` over the window, declining
/// likewise; a flat step, a dip or fewer than two samples: neither.
pub fn trend(cfg: &Config, window: &[u32]) -> Trend {
    if window.len() < 2 {
        return Trend::Neither;
    }
    let (first, last) = (window[0], window[window.len() - 1]);
    let m = cfg.trend_min_pkts;
    if window.windows(2).all(|w| w[1] > w[0]) && last >= first.saturating_add(m) {
        Trend::Growing
    } else if window.windows(2).all(|w| w[1] < w[0]) && last.saturating_add(m) <= first {
        Trend::Declining
    } else {
        Trend::Neither
    }
}

/// The state for a trend and the queue length now (§IV-C, Fig. 5): the
/// trend first ("no matter how long the current queue is"), then K_max /
/// K_min.
pub fn state_for(cfg: &Config, trend: Trend, q_now: u32) -> State {
    match trend {
        Trend::Growing => State::Congested,
        Trend::Declining => State::Draining,
        Trend::Neither if q_now > cfg.k_max_pkts => State::Congested,
        Trend::Neither if q_now < cfg.k_min_pkts => State::Draining,
        Trend::Neither => State::Normal,
    }
}

/// The next state from the samples of q spanning the T just ended, oldest
/// first, the last one q now (see [`trend`], [`state_for`]).
pub fn next_state(cfg: &Config, window: &[u32]) -> State {
    state_for(cfg, trend(cfg, window), window.last().copied().unwrap_or(0))
}

/// The samples of q on one port (§IV-C): k per T on a grid from the port's
/// start (instant j at `origin + ⌊j·T/k⌋`), each q at the first step at or
/// after its instant; missed instants have no sample (see the header). It
/// keeps what the trend of the last window needs, not the samples.
#[derive(Clone, Debug)]
struct Sampler {
    origin: Nanos,
    interval: Nanos,
    k: u64,
    /// The next instant's index, and the instant.
    next_j: u64,
    next_at: Nanos,
    /// The last sample taken (at the origin: 0, the empty port).
    last: u32,
    /// The sample at the last T boundary: the first of the current window.
    window_start: u32,
    /// Consecutive strictly rising / falling steps ending at `last` (≤ k).
    rising: u64,
    falling: u64,
}

impl Sampler {
    fn new(cfg: &Config, now: Nanos) -> Self {
        let interval = cfg.interval.max(1);
        // Unvalidated configurations: at most one instant per ns.
        let k = u64::from(cfg.trend_samples).clamp(1, interval);
        let mut s = Sampler {
            origin: now,
            interval,
            k,
            next_j: 1,
            next_at: 0,
            last: 0,
            window_start: 0,
            rising: 0,
            falling: 0,
        };
        s.next_at = s.at(1);
        s
    }

    /// Instant j.
    fn at(&self, j: u64) -> Nanos {
        let off = u128::from(j) * u128::from(self.interval) / u128::from(self.k);
        self.origin
            .saturating_add(off.min(u128::from(Nanos::MAX)) as Nanos)
    }

    /// The last instant at or before `now` (`now ≥ origin`): the largest j
    /// with ⌊j·T/k⌋ ≤ now − origin.
    fn latest(&self, now: Nanos) -> u64 {
        let d = u128::from(now - self.origin);
        let j = ((d + 1) * u128::from(self.k) - 1) / u128::from(self.interval);
        j.min(u128::from(u64::MAX)) as u64
    }

    /// Takes q as the sample of the latest instant at or before `now`, if
    /// one is due; at a T boundary, the trend of the window it closes.
    fn sample(&mut self, cfg: &Config, q: u32, now: Nanos) -> Option<Trend> {
        if now < self.next_at {
            return None;
        }
        let j = self.latest(now).max(self.next_j);
        let missed = j > self.next_j;
        if missed && self.k > 1 {
            // The step across missed instants was not seen.
            self.rising = 0;
            self.falling = 0;
        } else if q > self.last {
            self.rising = (self.rising + 1).min(self.k);
            self.falling = 0;
        } else if q < self.last {
            self.falling = (self.falling + 1).min(self.k);
            self.rising = 0;
        } else {
            self.rising = 0;
            self.falling = 0;
        }
        self.last = q;
        // A T boundary (a multiple of k) among the instants passed. Without
        // missed instants it is j itself, and the k steps of a full run are
        // the window's; with them (k > 1) there is no run.
        let boundary = (j / self.k) * self.k >= self.next_j;
        self.next_j = j + 1;
        self.next_at = self.at(self.next_j);
        if !boundary {
            return None;
        }
        let m = cfg.trend_min_pkts;
        let t = if self.rising >= self.k && q >= self.window_start.saturating_add(m) {
            Trend::Growing
        } else if self.falling >= self.k && q.saturating_add(m) <= self.window_start {
            Trend::Declining
        } else {
            Trend::Neither
        };
        self.window_start = q;
        Some(t)
    }

    /// Whether the window in progress holds a queue (the port must be
    /// woken at the next instant to see it empty).
    fn nonzero(&self) -> bool {
        self.last > 0 || self.window_start > 0
    }
}

/// Why an ACK left R-AQM without being forwarded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum AckDrop {
    /// The VIQ was full.
    ViqFull = 0,
    /// Held longer than `stale`.
    Stale = 1,
}

impl From<AckDrop> for DropReason {
    /// The switch's drop counter for an ACK R-AQM dropped.
    fn from(why: AckDrop) -> DropReason {
        match why {
            AckDrop::ViqFull => DropReason::ViqFull,
            AckDrop::Stale => DropReason::Stale,
        }
    }
}

/// What R-AQM reads and writes outside itself in one call on port P: P's
/// egress backlog (the state machine's q, the rewrites' q_out), the window
/// scales learned from SYNs and the frames (header rewrites, §IV-D).
pub struct AckCtx<'a, S> {
    /// P's egress backlog, packets (all queues).
    pub q_out_pkts: u32,
    /// Window scales per flow direction (the rwnd rewrite).
    pub scales: &'a WindowScales,
    /// The frames.
    pub store: &'a mut S,
}

/// Per-port counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PortCounters {
    /// Pure ACKs R-AQM saw arriving on this port.
    pub acks_seen: u64,
    /// ... that passed at once (NS / DS with an empty VIQ).
    pub acks_passed: u64,
    /// ... that went into the VIQ.
    pub acks_held: u64,
    /// Held ACKs released to their egress port.
    pub acks_released: u64,
    /// Held ACKs dropped: older than `stale`.
    pub dropped_stale: u64,
    /// ACKs dropped: VIQ full.
    pub dropped_viq_full: u64,
    /// ACKs given ECE.
    pub rewrite_ece: u64,
    /// ACKs whose receive window was lowered to 1 MSS.
    pub rewrite_rwnd: u64,
    /// ACKs that were due an rwnd rewrite but whose flow's window scale is unknown.
    pub rwnd_unknown_scale: u64,
    /// ACKs whose rewrite failed (no valid TCP header where parse said).
    pub rewrite_invalid: u64,
    /// Releases (token takes) by state.
    pub releases: [u64; 3],
    /// State changes.
    pub transitions: u64,
    /// Time spent in each state, ns (up to the last state change or report).
    pub state_ns: [u64; 3],
    /// Largest VIQ length seen.
    pub viq_max: u32,
}

/// A held ACK: the packet, the egress port the bridge chose, when it came.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Held {
    /// The ACK.
    pub pkt: Packet,
    /// Its egress port.
    pub out: u16,
    /// When it entered the VIQ.
    pub held_at: Nanos,
}

/// What [`RaqmPort::offer`] did with an ACK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offer {
    /// Forward it now (its headers already rewritten, [`RaqmPort::rewrite`]).
    Pass(Packet),
    /// It is in the VIQ.
    Held,
    /// Dropped (the caller releases the frame).
    Dropped(Packet, AckDrop),
}

/// R-AQM state of one port P: its VIQ, bucket and state machine.
#[derive(Clone, Debug)]
pub struct RaqmPort {
    cfg: Config,
    rate: Rate,
    viq: VecDeque<Held>,
    /// Tokens: bytes of frames departed from P (§IV-B).
    bucket: Bucket,
    state: State,
    state_since: Nanos,
    sampler: Sampler,
    /// While P's egress is empty and the VIQ is not: (start, bytes credited since).
    idle_anchor: Option<(Nanos, u64)>,
    /// Counters.
    pub counters: PortCounters,
}

impl RaqmPort {
    /// Port state for a port of link rate `rate`, starting at `now` in NS.
    pub fn new(cfg: Config, rate: Rate, now: Nanos) -> Self {
        let bucket = Bucket::empty(cfg.bucket_bytes as u128);
        let sampler = Sampler::new(&cfg, now);
        RaqmPort {
            viq: VecDeque::with_capacity(cfg.viq_limit_pkts.min(4096) as usize),
            cfg,
            rate,
            bucket,
            state: State::Normal,
            state_since: now,
            sampler,
            idle_anchor: None,
            counters: PortCounters::default(),
        }
    }
    /// Current state.
    pub fn state(&self) -> State {
        self.state
    }
    /// ACKs held.
    pub fn viq_len(&self) -> usize {
        self.viq.len()
    }
    /// Tokens in the bucket, bytes.
    pub fn tokens(&self) -> u64 {
        self.bucket.tokens() as u64
    }
    /// The parameters.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// A pure ACK arrived on this port at `now`, bound for egress port `out`:
    /// it passes (headers rewritten, [`rewrite`](Self::rewrite)), is held in
    /// the VIQ, or is dropped (the caller releases the frame).
    pub fn offer<S: FrameStore>(
        &mut self,
        pkt: Packet,
        out: u16,
        now: Nanos,
        cx: &mut AckCtx<'_, S>,
    ) -> Offer {
        self.counters.acks_seen += 1;
        if self.viq.is_empty() && self.state != State::Congested {
            self.counters.acks_passed += 1;
            self.rewrite(&pkt, cx.q_out_pkts, cx.scales, cx.store);
            return Offer::Pass(pkt);
        }
        if self.viq.len() >= self.cfg.viq_limit_pkts as usize {
            self.counters.dropped_viq_full += 1;
            return Offer::Dropped(pkt, AckDrop::ViqFull);
        }
        self.viq.push_back(Held {
            pkt,
            out,
            held_at: now,
        });
        self.counters.acks_held += 1;
        self.counters.viq_max = self.counters.viq_max.max(self.viq.len() as u32);
        Offer::Held
    }

    /// `bytes` of frame left P's egress (token credit, §IV-B).
    pub fn on_departure(&mut self, bytes: u64) {
        self.bucket.credit(bytes as u128);
    }

    fn set_state(&mut self, s: State, now: Nanos) {
        if s != self.state {
            self.counters.state_ns[self.state as usize] += now.saturating_sub(self.state_since);
            self.state = s;
            self.state_since = now;
            self.counters.transitions += 1;
        }
    }

    /// State-machine sample, idle credit, stale drops and releases at `now`.
    /// Released ACKs go to `out` as (egress port, packet), their headers
    /// rewritten; stale ones to `dropped` (the caller releases them).
    pub fn step<S: FrameStore>(
        &mut self,
        now: Nanos,
        cx: &mut AckCtx<'_, S>,
        out: &mut Vec<(u16, Packet)>,
        dropped: &mut Vec<Packet>,
    ) {
        let first = out.len();
        self.release(cx.q_out_pkts, now, out, dropped);
        // After the releases: the occupancy the rewrites see is the VIQ
        // they leave behind.
        for (_, pkt) in &out[first..] {
            self.rewrite(pkt, cx.q_out_pkts, cx.scales, cx.store);
        }
    }

    /// [`step`](Self::step) without the rewrites.
    fn release(
        &mut self,
        q_out_pkts: u32,
        now: Nanos,
        out: &mut Vec<(u16, Packet)>,
        dropped: &mut Vec<Packet>,
    ) {
        // Missed instants (an idle port, a late poll) are not replayed.
        if let Some(t) = self.sampler.sample(&self.cfg, q_out_pkts, now) {
            self.set_state(state_for(&self.cfg, t, q_out_pkts), now);
        }
        if self.viq.is_empty() {
            self.idle_anchor = None;
            return;
        }
        self.expire(now, dropped);
        if self.cfg.idle_credit && q_out_pkts == 0 {
            if self.rate.bps() == 0 {
                self.bucket.fill();
            } else {
                let (start, done) = *self.idle_anchor.get_or_insert((now, 0));
                let total = self.rate.bytes_in(now - start);
                self.bucket.credit((total - done) as u128);
                self.idle_anchor = Some((start, total));
            }
        } else {
            self.idle_anchor = None;
        }
        let (alpha, n) = self.cfg.alpha_n(self.state);
        while !self.viq.is_empty() && self.bucket.take(alpha as u128) {
            self.counters.releases[self.state as usize] += 1;
            for _ in 0..n {
                let Some(h) = self.viq.pop_front() else { break };
                self.counters.acks_released += 1;
                out.push((h.out, h.pkt));
            }
        }
        if self.viq.is_empty() {
            self.idle_anchor = None;
        }
    }

    /// Drops ACKs held longer than `stale` (the VIQ is FIFO: the oldest first).
    fn expire(&mut self, now: Nanos, dropped: &mut Vec<Packet>) {
        while let Some(h) = self.viq.front() {
            if now.saturating_sub(h.held_at) <= self.cfg.stale {
                break;
            }
            let h = self.viq.pop_front().expect("front exists");
            self.counters.dropped_stale += 1;
            dropped.push(h.pkt);
        }
    }

    /// When [`step`](Self::step) next has work: the next sample instant
    /// (while the VIQ holds ACKs, P's egress holds packets or the window in
    /// progress saw a queue), the oldest ACK going stale,
    /// the bucket reaching α while idle credit runs, or now (tokens ready).
    pub fn next_event(&self, q_out_pkts: u32, now: Nanos) -> Option<Nanos> {
        let mut t: Option<Nanos> = None;
        let mut at = |x: Nanos| t = Some(t.map_or(x, |t: Nanos| t.min(x)));
        if q_out_pkts > 0 || !self.viq.is_empty() || self.sampler.nonzero() {
            at(self.sampler.next_at);
        }
        let Some(head) = self.viq.front() else {
            return t;
        };
        at(head
            .held_at
            .saturating_add(self.cfg.stale)
            .saturating_add(1));
        let (alpha, _) = self.cfg.alpha_n(self.state);
        let tokens = self.tokens();
        if tokens >= alpha {
            at(now);
        } else if self.cfg.idle_credit && q_out_pkts == 0 {
            match (self.rate.bps(), self.idle_anchor) {
                (0, _) | (_, None) => at(now),
                (_, Some((start, done))) => {
                    at(start + self.rate.tx_time_ns(done + (alpha - tokens)));
                }
            }
        }
        t
    }

    /// Counters with the time in the current state added up to `now`.
    pub fn counters_at(&self, now: Nanos) -> PortCounters {
        let mut c = self.counters.clone();
        c.state_ns[self.state as usize] += now.saturating_sub(self.state_since);
        c
    }

    /// Takes every held ACK out (shutdown).
    pub fn drain(&mut self) -> impl Iterator<Item = Held> + '_ {
        self.viq.drain(..)
    }

    /// Header rewrites for a pure ACK leaving R-AQM (§IV-D): ECE when
    /// q_out + VIQ > the ECN threshold, rwnd = 1 MSS when above the HSCC
    /// threshold (flows with a known window scale only).
    pub fn rewrite<S: FrameStore>(
        &mut self,
        pkt: &Packet,
        q_out_pkts: u32,
        scales: &WindowScales,
        store: &mut S,
    ) {
        let occupancy = q_out_pkts as u64 + self.viq.len() as u64;
        let ece = self.cfg.ece_threshold_pkts > 0 && occupancy > self.cfg.ece_threshold_pkts as u64;
        let rwnd =
            self.cfg.rwnd_threshold_pkts > 0 && occupancy > self.cfg.rwnd_threshold_pkts as u64;
        if !(ece || rwnd) {
            return;
        }
        let Some(l3) = pkt.l3 else { return };
        let frame = store.bytes_mut(pkt.frame, pkt.len);
        if ece {
            if crate::wire::ecn::set_ece(frame, &l3) {
                self.counters.rewrite_ece += 1;
            } else {
                self.counters.rewrite_invalid += 1;
            }
        }
        if rwnd {
            match scales.shift(l3.flow_hash) {
                None => self.counters.rwnd_unknown_scale += 1,
                Some(shift) => match wscale::lower_window(frame, &l3, self.cfg.mss_bytes, shift) {
                    Some(true) => self.counters.rewrite_rwnd += 1,
                    Some(false) => {}
                    None => self.counters.rewrite_invalid += 1,
                },
            }
        }
    }

    /// Internal state for the time series.
    pub fn gauges(&self, emit: &mut dyn FnMut(&'static str, f64)) {
        emit("raqm_state", self.state as u8 as f64);
        emit("raqm_viq_pkts", self.viq.len() as f64);
        emit("raqm_tokens", self.tokens() as f64);
        emit("raqm_held", self.counters.acks_held as f64);
        emit("raqm_released", self.counters.acks_released as f64);
        emit("raqm_dropped_stale", self.counters.dropped_stale as f64);
        emit("raqm_rewrite_ece", self.counters.rewrite_ece as f64);
        emit("raqm_rewrite_rwnd", self.counters.rewrite_rwnd as f64);
    }

    #[cfg(test)]
    fn invariants(&self) {
        self.bucket.invariants();
        assert!(self.viq.len() <= self.cfg.viq_limit_pkts as usize);
        let c = &self.counters;
        assert_eq!(
            c.acks_seen,
            c.acks_passed
                + c.dropped_viq_full
                + c.acks_released
                + c.dropped_stale
                + self.viq.len() as u64
        );
    }
}

impl RaqmPort {
    /// JSON report of this port at `now`; `flows_with_scale`: flow
    /// directions whose window scale the switch has learned.
    pub fn report(&self, now: Nanos, flows_with_scale: usize) -> serde_json::Value {
        let c = self.counters_at(now);
        let by_state = |a: [u64; 3], f: fn(u64) -> serde_json::Value| {
            serde_json::json!({
                "normal": f(a[0]), "draining": f(a[1]), "congested": f(a[2]),
            })
        };
        serde_json::json!({
            "state": self.state.name(),
            "viq_pkts": self.viq.len(),
            "viq_max": c.viq_max,
            "tokens": self.tokens(),
            "acks_seen": c.acks_seen,
            "acks_passed": c.acks_passed,
            "acks_held": c.acks_held,
            "acks_released": c.acks_released,
            "dropped_stale": c.dropped_stale,
            "dropped_viq_full": c.dropped_viq_full,
            "rewrites": {
                "ece": c.rewrite_ece,
                "rwnd": c.rewrite_rwnd,
                "rwnd_unknown_scale": c.rwnd_unknown_scale,
                "invalid": c.rewrite_invalid,
            },
            "releases": by_state(c.releases, |v| v.into()),
            "transitions": c.transitions,
            "state_ms": by_state(c.state_ns, |v| (v as f64 / 1e6).into()),
            "flows_with_scale": flows_with_scale,
        })
    }
}

#[cfg(test)]
mod switch_tests;
#[cfg(test)]
pub(crate) mod tests;
