//! Egress port configuration: link rate and shaper bucket, shared buffer,
//! queues and classifier, scheduler, Not-ECT policy, test hooks.

use crate::sched::{SchedConfig, SchedConfigError, MAX_QUEUES};
use crate::shaper::{TokenBucket, DEFAULT_BUCKET_BYTES, ETHERNET_WIRE_OVERHEAD};
use crate::units::{Nanos, Rate};

use super::flowmap::FlowClassConfig;

/// Default shared buffer per port: 96 KB, as the TCN testbed at 1 Gbit/s
/// (TCN paper §6.1: "Each switch port has a 96KB buffer which is completely
/// shared by all the queues").
pub const DEFAULT_BUFFER_BYTES: u64 = 96 * 1024;

/// Largest frame of a 1500-byte-MTU Ethernet link (no FCS).
pub const DEFAULT_MTU_FRAME_BYTES: u32 = 1514;

/// Default number of queues per port (8, as a datacenter switch port and the
/// TCN simulations, TCN paper §6.2).
pub const DEFAULT_QUEUES: usize = 8;

/// Shortest frame the port accepts: one Ethernet header.
pub const MIN_FRAME_BYTES: u32 = 14;

/// Packet → queue mapping.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Classifier {
    /// queue = DSCP mod number of queues (the default).
    #[default]
    DscpMod,
    /// An explicit 64-entry table: entry `d` is the queue of DSCP `d`.
    Map(Vec<u16>),
    /// Per-flow allocation by 5-tuple hash (DiffECN's QMU, `port::flowmap`).
    Flow(FlowClassConfig),
}

impl Classifier {
    /// The 64-entry lookup table for a port of `queues` queues.
    pub fn table(&self, queues: usize) -> [u16; 64] {
        let mut t = [0u16; 64];
        for (d, e) in t.iter_mut().enumerate() {
            *e = match self {
                Classifier::DscpMod => (d % queues) as u16,
                Classifier::Map(m) => m.get(d).copied().unwrap_or(0),
                Classifier::Flow(_) => 0,
            };
        }
        t
    }

    /// From the command line: `mod`, or `dscp=queue` pairs (`46=0,10=1`;
    /// unlisted DSCPs keep `dscp mod queues`), or 64 comma-separated queues.
    pub fn from_cli(s: &str, queues: usize) -> Result<Classifier, PortConfigError> {
        let s = s.trim();
        let bad = || PortConfigError::BadMap(s.to_string());
        if s.eq_ignore_ascii_case("mod") || s.is_empty() {
            return Ok(Classifier::DscpMod);
        }
        if s.contains('=') {
            let mut t: Vec<u16> = Classifier::DscpMod.table(queues.max(1)).to_vec();
            for pair in s.split(',') {
                let (d, q) = pair.split_once('=').ok_or_else(bad)?;
                let d: usize = d.trim().parse().map_err(|_| bad())?;
                let q: u16 = q.trim().parse().map_err(|_| bad())?;
                if d >= 64 {
                    return Err(bad());
                }
                t[d] = q;
            }
            return Ok(Classifier::Map(t));
        }
        let v: Vec<u16> = s
            .split(',')
            .map(|p| p.trim().parse().map_err(|_| bad()))
            .collect::<Result<_, _>>()?;
        Ok(Classifier::Map(v))
    }
}

impl Classifier {
    /// From `--classify`: `dscp` (the DSCP map decides, the default) or
    /// `flow[,temp=0|none][,pass-limit=SIZE][,timeout=TIME]` (per-flow
    /// allocation; `temp=0` keeps queue 0 as the strict temporary queue,
    /// the default; `none` has no temporary queue). `dscp_map` is the
    /// `--dscp-map` classifier used with `dscp`.
    pub fn classify_from_cli(
        s: &str,
        dscp_map: Classifier,
        default_timeout_ns: Nanos,
    ) -> Result<Classifier, PortConfigError> {
        let bad = |why: &str| PortConfigError::BadClassify(s.to_string(), why.to_string());
        let mut parts = s.split(',').map(str::trim);
        match parts.next().unwrap_or("").to_ascii_lowercase().as_str() {
            "dscp" | "" => {
                if parts.next().is_some() {
                    return Err(bad("dscp takes no options (use --dscp-map)"));
                }
                Ok(dscp_map)
            }
            "flow" | "per-flow" => {
                let mut c = FlowClassConfig {
                    idle_timeout_ns: default_timeout_ns,
                    ..Default::default()
                };
                for p in parts {
                    let (k, v) = p
                        .split_once('=')
                        .ok_or_else(|| bad("options are key=value"))?;
                    match k.trim().replace('_', "-").as_str() {
                        "temp" => {
                            c.temp_queue = match v.trim() {
                                "0" => true,
                                "none" | "off" => false,
                                _ => return Err(bad("temp is 0 (queue 0) or none")),
                            }
                        }
                        "pass-limit" => {
                            c.pass_limit_bytes = crate::units::parse_size(v)
                                .map_err(|e| bad(&format!("pass-limit: {e}")))?
                        }
                        "timeout" => {
                            c.idle_timeout_ns = crate::units::parse_duration(v)
                                .map_err(|e| bad(&format!("timeout: {e}")))?
                        }
                        _ => return Err(bad("flow options are temp, pass-limit, timeout")),
                    }
                }
                Ok(Classifier::Flow(c))
            }
            _ => Err(bad("use dscp or flow")),
        }
    }
}

/// What to do when an AQM wants to mark a packet that is not ECN-capable.
///
/// The default is `Pass`, as both authors' prototypes do: the TCN and
/// MQ-ECN qdiscs (HKUST-SING/TCN-Software `sch_dwrr/main.c`, `sch_wfq/main.c`;
/// HKUST-SING/MQ-ECN-Software `sch_dwrr/main.c`) call `INET_ECN_set_ce()` /
/// `IP_ECN_set_ce()`, which leave a Not-ECT packet unchanged, and never drop
/// on a mark decision. So pings, SYN-ACKs and the pure ACKs of non-DCTCP
/// hosts go through where the AQM would mark. `Drop` (what RFC 3168 §7 asks
/// of an AQM that would otherwise drop, and what Linux RED/CoDel do) is an
/// option: `--not-ect drop`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NotEctPolicy {
    /// Drop it, counted as `DropReason::NotEctMark` (option `--not-ect drop`).
    Drop,
    /// Let it through unmarked, counted as `not_ect_passed` (the prototypes'
    /// behaviour; the default).
    #[default]
    Pass,
}

/// Everything that configures one egress port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortConfig {
    /// Emulated link rate; 0 bit/s = unshaped.
    pub rate: Rate,
    /// Token-bucket size in bytes (default ≈ 1.67 MTU, TCN paper §5).
    pub bucket_bytes: u64,
    /// Per-frame wire overhead counted against the rate (preamble, FCS, IFG).
    pub overhead_bytes: u32,
    /// Shared buffer of the port in frame bytes.
    pub buffer_bytes: u64,
    /// Number of queues, 1..=128.
    pub queues: usize,
    /// Optional per-queue limit in bytes (in addition to the shared buffer).
    pub queue_limit_bytes: Option<u64>,
    /// DSCP → queue map.
    pub classifier: Classifier,
    /// Scheduler.
    pub sched: SchedConfig,
    /// Mark on a Not-ECT packet: pass (default, as the prototypes) or drop.
    pub not_ect: NotEctPolicy,
    /// Test hook: CE-mark every n-th ECT packet at dequeue (`MarkReason::Forced`).
    pub mark_every: Option<u32>,
    /// Largest frame the port carries (bytes, no FCS); larger ones are `TooBig`.
    pub mtu_frame_bytes: u32,
    /// Link time a busy port may make up after the I/O loop was late (see
    /// `shaper`); 0 = the prototype's strict token bucket.
    pub catchup_ns: Nanos,
}

impl Default for PortConfig {
    fn default() -> Self {
        PortConfig {
            rate: Rate::gbit(1),
            bucket_bytes: DEFAULT_BUCKET_BYTES,
            overhead_bytes: ETHERNET_WIRE_OVERHEAD,
            buffer_bytes: DEFAULT_BUFFER_BYTES,
            queues: DEFAULT_QUEUES,
            queue_limit_bytes: None,
            classifier: Classifier::DscpMod,
            sched: SchedConfig::default(),
            not_ect: NotEctPolicy::Pass,
            mark_every: None,
            mtu_frame_bytes: DEFAULT_MTU_FRAME_BYTES,
            catchup_ns: 0,
        }
    }
}

/// A port configuration that cannot work, with what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PortConfigError {
    /// Shared buffer below one frame.
    #[error("buffer {buffer} B is smaller than one {frame}-byte frame; use --buffer ≥ {frame}b (e.g. 96kb)")]
    BufferTooSmall {
        /// Configured buffer.
        buffer: u64,
        /// MTU frame.
        frame: u32,
    },
    /// Bucket cannot hold one frame.
    #[error("shaper bucket {bucket} B cannot hold one {frame}-byte frame plus {overhead} B wire overhead, so nothing could ever be sent; use --bucket ≥ {need}b (default {DEFAULT_BUCKET_BYTES}b)")]
    BucketTooSmall {
        /// Configured bucket.
        bucket: u64,
        /// MTU frame.
        frame: u32,
        /// Wire overhead.
        overhead: u32,
        /// Smallest workable bucket.
        need: u64,
    },
    /// A shaped rate below one MTU frame per second.
    #[error("rate {bps} bit/s is below one {frame}-byte frame (+{overhead} B wire overhead) per second ({need} bit/s), so a full-size frame would wait over a second to leave; use --rate (or --port-rate) ≥ {need}bit, or 0 for an unshaped port")]
    RateBelowOneFrame {
        /// Configured rate, bit/s.
        bps: u64,
        /// MTU frame.
        frame: u32,
        /// Wire overhead.
        overhead: u32,
        /// Smallest workable rate, bit/s.
        need: u64,
    },
    /// Queue count out of range.
    #[error("--queues {0} is out of range; a port has 1..={MAX_QUEUES} queues")]
    Queues(usize),
    /// Per-queue limit below one frame.
    #[error("queue limit {limit} B is smaller than one {frame}-byte frame; use a limit ≥ {frame}b or none")]
    QueueLimitTooSmall {
        /// Configured limit.
        limit: u64,
        /// MTU frame.
        frame: u32,
    },
    /// Map with the wrong number of entries.
    #[error("DSCP map has {0} entries; it needs exactly 64 (the queue of DSCP 0, 1, ..., 63)")]
    MapLength(usize),
    /// Map entry pointing past the last queue.
    #[error("DSCP map sends DSCP {dscp} to queue {queue}, but the port has queues 0..{queues}; raise --queues or fix the map")]
    MapEntry {
        /// DSCP value.
        dscp: usize,
        /// Queue it maps to.
        queue: u16,
        /// Number of queues.
        queues: usize,
    },
    /// Unreadable `--classify`.
    #[error("--classify {0:?}: {1}; write dscp, or flow[,temp=0|none][,pass-limit=15140b][,timeout=375us]")]
    BadClassify(String, String),
    /// Per-flow classifier with a temporary queue that is not strict.
    #[error("--classify flow keeps queue 0 as the strict-priority temporary queue for new flows (DiffECN paper §IV-B), but {0}; use --sched sp+dwrr (strict queue 0, the default) or --classify flow,temp=none")]
    TempQueueNotStrict(String),
    /// Per-flow classifier parameters out of range.
    #[error("--classify flow: {0}")]
    FlowParams(String),
    /// Unreadable map string.
    #[error("cannot read DSCP map {0:?}: write 'mod', dscp=queue pairs like 46=0,10=1, or 64 queue numbers separated by commas")]
    BadMap(String),
    /// MTU frame out of range.
    #[error("MTU frame size {0} B is out of range; use 64..=65535 (1514 for a 1500-byte MTU)")]
    Mtu(u32),
    /// mark_every = 0.
    #[error(
        "--mark-every 0 would mark nothing; use n ≥ 1 (mark every n-th ECT packet) or leave it off"
    )]
    MarkEveryZero,
    /// Scheduler configuration.
    #[error("scheduler: {0}")]
    Sched(#[from] SchedConfigError),
}

impl PortConfig {
    /// Checks everything `EgressPort::new` relies on.
    pub fn validate(&self) -> Result<(), PortConfigError> {
        let frame = self.mtu_frame_bytes;
        if !(64..=65535).contains(&frame) {
            return Err(PortConfigError::Mtu(frame));
        }
        if self.queues == 0 || self.queues > MAX_QUEUES {
            return Err(PortConfigError::Queues(self.queues));
        }
        if self.buffer_bytes < frame as u64 {
            return Err(PortConfigError::BufferTooSmall {
                buffer: self.buffer_bytes,
                frame,
            });
        }
        if let Some(limit) = self.queue_limit_bytes {
            if limit < frame as u64 {
                return Err(PortConfigError::QueueLimitTooSmall { limit, frame });
            }
        }
        let one_frame_bps = (frame as u64 + self.overhead_bytes as u64) * 8;
        if self.rate.bps() != 0 && self.rate.bps() < one_frame_bps {
            return Err(PortConfigError::RateBelowOneFrame {
                bps: self.rate.bps(),
                frame,
                overhead: self.overhead_bytes,
                need: one_frame_bps,
            });
        }
        let tb = TokenBucket::new(self.rate, self.bucket_bytes, self.overhead_bytes, 0);
        if !tb.fits(frame) {
            return Err(PortConfigError::BucketTooSmall {
                bucket: self.bucket_bytes,
                frame,
                overhead: self.overhead_bytes,
                need: frame as u64 + self.overhead_bytes as u64,
            });
        }
        if let Classifier::Map(m) = &self.classifier {
            if m.len() != 64 {
                return Err(PortConfigError::MapLength(m.len()));
            }
            if let Some((dscp, &queue)) = m
                .iter()
                .enumerate()
                .find(|(_, &q)| q as usize >= self.queues)
            {
                return Err(PortConfigError::MapEntry {
                    dscp,
                    queue,
                    queues: self.queues,
                });
            }
        }
        if let Classifier::Flow(f) = &self.classifier {
            if f.temp_queue {
                if self.queues < 2 {
                    return Err(PortConfigError::FlowParams(
                        "a temporary queue needs at least 2 queues (--queues 8..128)".into(),
                    ));
                }
                match self.sched.top_priority_queue(self.queues) {
                    Some(0) => {}
                    Some(q) => {
                        return Err(PortConfigError::TempQueueNotStrict(format!(
                            "queue {q} has the highest priority"
                        )))
                    }
                    None => {
                        return Err(PortConfigError::TempQueueNotStrict(format!(
                            "--sched {} has no strict queue",
                            self.sched.kind.as_str()
                        )))
                    }
                }
                if f.idle_timeout_ns == 0 {
                    return Err(PortConfigError::FlowParams(
                        "timeout must be > 0 (default 1.5 RTT)".into(),
                    ));
                }
            }
        }
        if self.mark_every == Some(0) {
            return Err(PortConfigError::MarkEveryZero);
        }
        self.sched.validate(self.queues)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid() {
        PortConfig::default().validate().unwrap();
    }

    #[test]
    fn messages_say_what_to_do() {
        let c = PortConfig {
            buffer_bytes: 1000,
            ..Default::default()
        };
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "buffer 1000 B is smaller than one 1514-byte frame; use --buffer ≥ 1514b (e.g. 96kb)"
        );
        let c = PortConfig {
            bucket_bytes: 1000,
            ..Default::default()
        };
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("--bucket ≥ 1538b"), "{e}");
        // Unshaped: any bucket will do.
        let c = PortConfig {
            bucket_bytes: 0,
            rate: Rate::from_bps(0),
            ..Default::default()
        };
        c.validate().unwrap();
        for q in [0, 129] {
            let c = PortConfig {
                queues: q,
                ..Default::default()
            };
            assert!(c.validate().unwrap_err().to_string().contains("1..=128"));
        }
        let mut m = vec![0u16; 64];
        m[46] = 8;
        let c = PortConfig {
            classifier: Classifier::Map(m),
            ..Default::default()
        };
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("DSCP 46 to queue 8"), "{e}");
        let c = PortConfig {
            classifier: Classifier::Map(vec![0; 8]),
            ..Default::default()
        };
        assert!(c.validate().unwrap_err().to_string().contains("exactly 64"));
        let c = PortConfig {
            queue_limit_bytes: Some(100),
            ..Default::default()
        };
        assert!(c.validate().is_err());
        let c = PortConfig {
            mark_every: Some(0),
            ..Default::default()
        };
        assert!(c.validate().is_err());
        let mut c = PortConfig::default();
        c.sched.weights = vec![1, 2];
        c.sched.kind = crate::sched::SchedName::Wfq;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.starts_with("scheduler:") && e.contains("8 queues"), "{e}");
    }

    #[test]
    fn classifier_from_cli() {
        assert_eq!(Classifier::from_cli("mod", 4).unwrap(), Classifier::DscpMod);
        let Classifier::Map(m) = Classifier::from_cli("46=0, 10=3", 4).unwrap() else {
            panic!()
        };
        assert_eq!((m[46], m[10], m[5]), (0, 3, 1));
        let t = Classifier::DscpMod.table(3);
        assert_eq!((t[0], t[1], t[5], t[63]), (0, 1, 2, 0));
        assert!(Classifier::from_cli("46=x", 4).is_err());
        assert!(Classifier::from_cli("99=0", 4).is_err());
        let s = vec!["1"; 64].join(",");
        assert_eq!(
            Classifier::from_cli(&s, 4).unwrap(),
            Classifier::Map(vec![1; 64])
        );
    }
}
