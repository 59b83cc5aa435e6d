//! The counter snapshot: what the data path copies out of the switch for
//! the live counters (`softswitch stats`, every 100 ms) and the exit report,
//! with the fidelity guard's verdict. No I/O: the harness takes the same
//! snapshot of a switch on a manual clock.
//!
//! Taking it copies plain values and small reports, so that it is cheap
//! (tens of µs for 3 ports × 8 queues); the JSON is built and serialised by
//! whoever reads it ([`Snapshot::to_json`], the stats-socket thread), not on
//! the data path's thread, where the whole snapshot used to take ~480 µs
//! every 100 ms (BENCHMARKS.md, Headroom).
//!
//! Time dilation (`--dilation D`): the switch's counters, sojourn times,
//! rates and `elapsed_s` are in the core's emulated time; the fidelity
//! guard's figures — each port's `link` (backlogged and lost link time, at
//! the wire rate rate / D) and the loop's passes and stalls — are real
//! time, and the snapshot says so (`dilation`, `real_elapsed_s`,
//! `fidelity.time`).

use std::sync::Arc;

use serde_json::json;

use crate::aqm::AqmKind;
use crate::fabric::{Fabric, FabricReport};
use crate::fidelity::{self, LoopStalls, PassIntervals, Thresholds, TxWaits};
use crate::ingress::IngressCounters;
use crate::port::{PortCounters, SojournSummary};
use crate::shaper::LinkFidelity;
use crate::switch::{Balance, Conservation, IoCounters, Switch, SwitchPort};
use crate::timebase::Dilation;
use crate::units::{Nanos, Rate};

/// The switch's counters at one instant of core time (see the module header).
pub struct Snapshot {
    names: Arc<[String]>,
    guard: Thresholds,
    now: Nanos,
    dilation: Dilation,
    real_elapsed_ns: Option<Nanos>,
    /// The learning bridge's entries (None: a fabric, which routes).
    mac_entries: Option<usize>,
    ports: Vec<PortSnapshot>,
    passes: Option<(serde_json::Value, LoopStalls)>,
    /// `--tx-thread`: how long frames waited on the tx rings.
    tx_waits: Option<TxWaits>,
    conservation: Conservation,
    /// A fabric's links whose two ends disagree.
    link_failures: Vec<String>,
    /// A fabric's routes and links ([`Fabric::report`]).
    fabric: Option<FabricReport>,
}

/// One port's part of a [`Snapshot`].
struct PortSnapshot {
    io: IoCounters,
    egress: PortCounters<SojournSummary>,
    backlog_bytes: u64,
    backlog_pkts: u32,
    on_wire_pkts: usize,
    aqm: serde_json::Value,
    classifier: Option<serde_json::Value>,
    /// In real time once [`Snapshot::dilated`].
    link: LinkFidelity,
    raqm: Option<serde_json::Value>,
    ingress: Option<(Rate, IngressCounters, usize)>,
}

impl PortSnapshot {
    fn take(p: &SwitchPort<AqmKind>, now: Nanos, flows_with_scale: usize) -> Self {
        PortSnapshot {
            io: p.io.clone(),
            egress: p.egress.counters().summary(),
            backlog_bytes: p.egress.backlog_bytes(),
            backlog_pkts: p.egress.backlog_pkts(),
            on_wire_pkts: p.wire.len(),
            aqm: p.egress.aqm().report(),
            classifier: p.egress.classifier_report(),
            link: p.egress.shaper().fidelity(now),
            raqm: p.raqm.as_ref().map(|r| r.report(now, flows_with_scale)),
            ingress: p
                .ingress_link
                .as_ref()
                .map(|l| (l.rate(), *l.counters(), l.len())),
        }
    }

    fn to_json(&self, name: &str) -> serde_json::Value {
        let l = &self.link;
        let mut v = json!({
            "name": name,
            "io": self.io,
            "egress": self.egress,
            "backlog_bytes": self.backlog_bytes,
            "backlog_pkts": self.backlog_pkts,
            "on_wire_pkts": self.on_wire_pkts,
            "aqm": self.aqm,
            "classifier": self.classifier,
            "link": {
                "busy_ns": l.busy_ns,
                "lost_ns": l.lost_ns,
                "lost_fraction": l.lost_fraction(),
                "excess_bytes": l.excess_bytes,
                "excess_pkts": l.excess_pkts,
            },
        });
        if let Some(r) = &self.raqm {
            v["raqm"] = r.clone();
        }
        if let Some((rate, c, len)) = &self.ingress {
            v["ingress_link"] = json!({
                "rate": rate.to_string(),
                "backlog_pkts": len,
                "released": c.released,
                "delayed": c.delayed,
                "dropped_full": c.dropped_full,
                "max_backlog_pkts": c.max_backlog_pkts,
                "waited_ms": c.waited_ns as f64 / 1e6,
            });
        }
        v
    }
}

impl Snapshot {
    /// A snapshot of `ports` and their `conservation` at core time `now`,
    /// judged against `guard`; the rest is added by the callers.
    fn new(
        names: &Arc<[String]>,
        now: Nanos,
        guard: &Thresholds,
        ports: Vec<PortSnapshot>,
        conservation: Conservation,
    ) -> Snapshot {
        Snapshot {
            names: names.clone(),
            guard: *guard,
            now,
            dilation: Dilation::NONE,
            real_elapsed_ns: None,
            mac_entries: None,
            ports,
            passes: None,
            tx_waits: None,
            conservation,
            link_failures: Vec::new(),
            fabric: None,
        }
    }

    /// Copies the switch's counters at core time `now`, to be judged
    /// against `guard`.
    pub fn take(
        sw: &Switch<AqmKind>,
        names: &Arc<[String]>,
        now: Nanos,
        guard: &Thresholds,
    ) -> Snapshot {
        let flows_with_scale = sw.window_scales().map_or(0, |s| s.len());
        let ports = sw
            .ports()
            .iter()
            .map(|p| PortSnapshot::take(p, now, flows_with_scale))
            .collect();
        Snapshot {
            mac_entries: Some(sw.bridge().entries()),
            ..Snapshot::new(names, now, guard, ports, sw.conservation())
        }
    }

    /// Copies a fabric's counters at core time `now`: its ports in `order`
    /// ((slot in [`Fabric::switches`], port) pairs in the order of
    /// [`Fabric::port_order`]) named by `names`, the
    /// counter identities of every switch (switch-wide: their sum) and
    /// link, and the routes' and links' report.
    pub fn take_fabric(
        f: &Fabric<AqmKind>,
        order: &[(usize, u16)],
        names: &Arc<[String]>,
        now: Nanos,
        guard: &Thresholds,
    ) -> Snapshot {
        let sw = f.switches();
        let c = f.conservation();
        let mut switch = Balance::default();
        for s in &c.switches {
            switch.input += s.switch.input;
            switch.output += s.switch.output;
        }
        let conservation = Conservation {
            ports: order
                .iter()
                .map(|&(s, p)| c.switches[s].ports[p as usize].clone())
                .collect(),
            switch,
            holds: c.switches.iter().all(|s| s.holds),
        };
        let ports = order
            .iter()
            .map(|&(s, p)| {
                let scales = sw[s].window_scales().map_or(0, |w| w.len());
                PortSnapshot::take(&sw[s].ports()[p as usize], now, scales)
            })
            .collect();
        Snapshot {
            link_failures: c.link_failures,
            fabric: Some(f.report()),
            ..Snapshot::new(names, now, guard, ports, conservation)
        }
    }

    /// Adds the data path's loop passes over a run `real_elapsed_ns` long
    /// (real time), for the report and the guard's stall verdict.
    pub fn with_passes(mut self, passes: &PassIntervals, real_elapsed_ns: Nanos) -> Snapshot {
        self.passes = Some((passes.report(), passes.stalls(real_elapsed_ns)));
        self.real_elapsed_ns = Some(real_elapsed_ns);
        self
    }

    /// Adds how long frames waited on the tx rings for a tx thread's kicks
    /// (`--tx-thread`; real time), for the report and the guard.
    pub fn with_tx_waits(mut self, w: Option<TxWaits>) -> Snapshot {
        self.tx_waits = w;
        self
    }

    /// Says the switch ran on emulated time, D times slower than real time
    /// (`--dilation`): each port's link fidelity, kept by its shaper in
    /// emulated time, becomes real time at the wire rate, as the guard
    /// judges it (the lost share is the same). Call it once.
    pub fn dilated(mut self, d: Dilation) -> Snapshot {
        self.dilation = d;
        for p in &mut self.ports {
            p.link = p.link.in_real_time(d);
        }
        self
    }

    /// The JSON snapshot of the switch's counters, served live and printed
    /// at exit, with the fidelity guard's verdict.
    pub fn to_json(&self) -> serde_json::Value {
        let ports: Vec<_> = self
            .ports
            .iter()
            .zip(self.names.iter())
            .map(|(p, n)| p.to_json(n))
            .collect();
        let mut v = json!({
            "elapsed_s": self.now as f64 / 1e9,
            "ports": ports,
        });
        if let Some(m) = self.mac_entries {
            v["mac_entries"] = json!(m);
        }
        if let Some(f) = &self.fabric {
            v["fabric"] = json!(f);
        }
        if !self.dilation.is_none() {
            v["dilation"] = json!(self.dilation);
            if let Some(r) = self.real_elapsed_ns {
                v["real_elapsed_s"] = json!(r as f64 / 1e9);
            }
        }
        if let Some((report, _)) = &self.passes {
            v["loop"] = report.clone();
        }
        if let Some(w) = &self.tx_waits {
            v["loop"]["tx_thread"] = json!({
                "batches": w.batches,
                "max_wait_us": w.max_ns as f64 / 1e3,
                "late": w.late,
                "late_ms": w.late_ns as f64 / 1e6,
            });
        }
        let named: Vec<(&str, _)> = self
            .names
            .iter()
            .map(|n| n.as_str())
            .zip(self.ports.iter().map(|p| p.link))
            .collect();
        for (i, b) in self.conservation.ports.iter().enumerate() {
            v["ports"][i]["balance"] = json!(b);
        }
        let mut failures = self.conservation.failures(&self.names);
        failures.extend(self.link_failures.iter().cloned());
        v["conservation"] = json!({
            "switch": self.conservation.switch,
            "holds": self.conservation.holds && self.link_failures.is_empty(),
            "failures": failures,
        });
        let stalls = self.passes.as_ref().map(|(_, s)| s);
        v["fidelity"] = json!(fidelity::judge(
            &named,
            stalls,
            self.tx_waits.as_ref(),
            &self.guard
        ));
        if !self.dilation.is_none() {
            v["fidelity"]["time"] = json!("real");
        }
        v["build"] = crate::build_info();
        v
    }
}

impl crate::stats::Render for Snapshot {
    fn render(&self) -> String {
        self.to_json().to_string()
    }
}
