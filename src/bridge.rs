//! Learning L2 bridge (IEEE 802.1D §7.7–7.9 filtering database, the part a
//! datacenter switch needs): learn source addresses per port, forward known
//! unicast to its port, flood unknown / broadcast / multicast, filter frames
//! whose destination sits on the port they came in on, age entries out.
//!
//! Deterministic and I/O-free: time is the argument `now` (monotonic ns,
//! [`Nanos`]). An entry last seen at `t` is used up to `t + ageing_ns − 1`
//! and is gone from `t + ageing_ns` on (802.1D's default ageing: 300 s).
//!
//! Packet-path cost: one hash-map probe to learn, one to look up; no
//! allocation once the table has been created (its capacity is reserved up
//! front for twice `max_entries`, so removals' tombstones are cleaned by an
//! in-place rehash, never a reallocation). The hasher is a local multiply /
//! xor-shift on `MacAddr::to_u64` — SipHash would cost more than the rest of
//! the lookup, and a lab switch does not need flood-resistant hashing; the
//! table size limit bounds what a MAC flood can do.
//!
//! Choices where 802.1D leaves room (what a switch ASIC does):
//! * source addresses that are multicast or all-zero are not learned (not
//!   valid station addresses); the frame is still forwarded;
//! * when the table is full, new addresses are not learned (counted in
//!   [`Bridge::learn_failures`]); their frames are flooded. Before giving up
//!   the bridge sweeps out expired entries, at most once per
//!   [`SWEEP_INTERVAL_NS`] so a MAC flood cannot make it sweep per packet;
//! * static entries never age, are never moved by learning, and are installed
//!   even when the table is full;
//! * a frame from a port number ≥ `num_ports` is dropped without learning.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::units::{Nanos, SEC};
use crate::wire::MacAddr;

/// Minimum time between two opportunistic sweeps of a full table.
pub const SWEEP_INTERVAL_NS: Nanos = SEC;

/// Upper bound on the capacity reserved at creation (entries beyond it are
/// still stored; the map then grows as usual).
const MAX_RESERVED_ENTRIES: usize = 1 << 20;

/// Bridge parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BridgeConfig {
    /// How long a learned address stays valid without being seen, ns (default 300 s).
    pub ageing_ns: u64,
    /// Most addresses the table holds (default 16384).
    pub max_entries: usize,
}

impl Default for BridgeConfig {
    fn default() -> Self {
        BridgeConfig {
            ageing_ns: 300 * SEC,
            max_entries: 16384,
        }
    }
}

/// Where a frame goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Forward {
    /// To this one port.
    Unicast(u16),
    /// To all ports except the ingress port.
    Flood,
    /// Nowhere: the destination is on the ingress port itself (a bridge
    /// filters it), or the ingress port does not exist.
    Drop,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    port: u16,
    last_seen_ns: Nanos,
    is_static: bool,
}

/// Hasher for `u64` MAC keys: multiply by the golden-ratio constant (high
/// bits depend on all input bits), then fold the high half into the low half
/// (the map picks buckets with the low bits, control bytes with the high).
#[derive(Clone, Copy, Debug, Default)]
pub struct MacHasher(u64);

impl Hasher for MacHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Not used for u64 keys; FNV-1a keeps any other key type correct.
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    fn write_u64(&mut self, x: u64) {
        let h = (self.0 ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = h ^ (h >> 32);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type MacTable = HashMap<u64, Entry, BuildHasherDefault<MacHasher>>;

/// A learning bridge over `num_ports` ports.
#[derive(Debug)]
pub struct Bridge {
    // parameters
    num_ports: u16,
    cfg: BridgeConfig,
    // running state
    table: MacTable,
    next_sweep_ns: Nanos,
    // counters
    learn_failures: u64,
    station_moves: u64,
}

impl Bridge {
    /// An empty bridge.
    pub fn new(num_ports: u16, cfg: BridgeConfig) -> Self {
        let reserve = cfg
            .max_entries
            .saturating_mul(2)
            .clamp(16, MAX_RESERVED_ENTRIES);
        Bridge {
            num_ports,
            cfg,
            table: HashMap::with_capacity_and_hasher(reserve, Default::default()),
            next_sweep_ns: 0,
            learn_failures: 0,
            station_moves: 0,
        }
    }

    /// Number of ports.
    pub fn num_ports(&self) -> u16 {
        self.num_ports
    }

    /// The configuration.
    pub fn config(&self) -> &BridgeConfig {
        &self.cfg
    }

    /// Learns `src` on `ingress` (unless multicast / all-zero), then decides
    /// where a frame to `dst` goes.
    pub fn learn_and_forward(
        &mut self,
        ingress: u16,
        src: MacAddr,
        dst: MacAddr,
        now: Nanos,
    ) -> Forward {
        if ingress >= self.num_ports {
            return Forward::Drop;
        }
        self.learn(ingress, src, now);
        if dst.is_multicast() {
            return Forward::Flood;
        }
        match self.lookup(dst, now) {
            Some(port) if port == ingress => Forward::Drop,
            Some(port) => Forward::Unicast(port),
            None => Forward::Flood,
        }
    }

    fn learn(&mut self, port: u16, src: MacAddr, now: Nanos) {
        if src.is_multicast() || src == MacAddr::default() {
            return;
        }
        let key = src.to_u64();
        if let Some(e) = self.table.get_mut(&key) {
            if !e.is_static {
                if e.port != port {
                    self.station_moves += 1;
                    e.port = port;
                }
                e.last_seen_ns = e.last_seen_ns.max(now);
            }
            return;
        }
        if self.table.len() >= self.cfg.max_entries {
            if now >= self.next_sweep_ns {
                self.next_sweep_ns = now.saturating_add(SWEEP_INTERVAL_NS);
                self.age(now);
            }
            if self.table.len() >= self.cfg.max_entries {
                self.learn_failures += 1;
                return;
            }
        }
        self.table.insert(
            key,
            Entry {
                port,
                last_seen_ns: now,
                is_static: false,
            },
        );
    }

    /// Installs a static entry (never ages, not moved by learning), replacing
    /// any learned one. Returns false (and installs nothing) when `port` is
    /// not a port of this bridge or `mac` is multicast.
    pub fn static_entry(&mut self, mac: MacAddr, port: u16) -> bool {
        if port >= self.num_ports || mac.is_multicast() {
            return false;
        }
        self.table.insert(
            mac.to_u64(),
            Entry {
                port,
                last_seen_ns: 0,
                is_static: true,
            },
        );
        true
    }

    /// Entries in the table (static included; expired ones until the next [`age`](Self::age)).
    pub fn entries(&self) -> usize {
        self.table.len()
    }

    /// Removes expired entries. Cost is proportional to the table's
    /// capacity: call it occasionally (e.g. once a second), not per packet.
    pub fn age(&mut self, now: Nanos) {
        let ageing = self.cfg.ageing_ns;
        self.table
            .retain(|_, e| e.is_static || now.saturating_sub(e.last_seen_ns) < ageing);
    }

    /// The port `mac` was last seen on, if that is less than the ageing time ago.
    pub fn lookup(&self, mac: MacAddr, now: Nanos) -> Option<u16> {
        let e = self.table.get(&mac.to_u64())?;
        let live = e.is_static || now.saturating_sub(e.last_seen_ns) < self.cfg.ageing_ns;
        live.then_some(e.port)
    }

    /// New addresses not learned because the table was full.
    pub fn learn_failures(&self) -> u64 {
        self.learn_failures
    }

    /// Times a learned address showed up on a different port.
    pub fn station_moves(&self) -> u64 {
        self.station_moves
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SimRng;
    use std::collections::BTreeMap;

    fn mac(n: u64) -> MacAddr {
        let b = (0x0200_0000_0000u64 | n).to_be_bytes();
        MacAddr([b[2], b[3], b[4], b[5], b[6], b[7]])
    }

    const A: u64 = 0xa;
    const B: u64 = 0xb;

    #[test]
    fn learns_and_unicasts() {
        let mut br = Bridge::new(4, BridgeConfig::default());
        // A (port 0) → B unknown: flood; A learned.
        assert_eq!(br.learn_and_forward(0, mac(A), mac(B), 0), Forward::Flood);
        assert_eq!(br.lookup(mac(A), 0), Some(0));
        // B (port 2) → A known: unicast to 0; B learned.
        assert_eq!(
            br.learn_and_forward(2, mac(B), mac(A), 1),
            Forward::Unicast(0)
        );
        assert_eq!(
            br.learn_and_forward(0, mac(A), mac(B), 2),
            Forward::Unicast(2)
        );
        assert_eq!(br.entries(), 2);
        assert_eq!(br.lookup(mac(0xc), 2), None);
    }

    #[test]
    fn floods_broadcast_multicast_and_unknown() {
        let mut br = Bridge::new(3, BridgeConfig::default());
        br.learn_and_forward(1, mac(B), MacAddr::BROADCAST, 0);
        assert_eq!(
            br.learn_and_forward(0, mac(A), MacAddr::BROADCAST, 0),
            Forward::Flood
        );
        let v4_mcast = MacAddr([0x01, 0x00, 0x5e, 0x00, 0x00, 0x01]);
        let v6_mcast = MacAddr([0x33, 0x33, 0xff, 0x00, 0x00, 0x02]);
        assert_eq!(br.learn_and_forward(0, mac(A), v4_mcast, 0), Forward::Flood);
        assert_eq!(br.learn_and_forward(0, mac(A), v6_mcast, 0), Forward::Flood);
        assert_eq!(br.learn_and_forward(0, mac(A), mac(0xc), 0), Forward::Flood);
        // A multicast source is never learned, so frames to it flood too.
        br.learn_and_forward(2, v4_mcast, mac(A), 0);
        assert_eq!(br.lookup(v4_mcast, 0), None);
        // Neither is the all-zero address.
        br.learn_and_forward(2, MacAddr::default(), mac(A), 0);
        assert_eq!(br.lookup(MacAddr::default(), 0), None);
        assert_eq!(br.entries(), 2);
    }

    #[test]
    fn ageing_boundary() {
        let ageing = 300 * SEC;
        let mut br = Bridge::new(2, BridgeConfig::default());
        let t = 5 * SEC;
        br.learn_and_forward(0, mac(A), MacAddr::BROADCAST, t);
        assert_eq!(br.lookup(mac(A), t + ageing - 1), Some(0));
        assert_eq!(
            br.learn_and_forward(1, mac(B), mac(A), t + ageing - 1),
            Forward::Unicast(0)
        );
        assert_eq!(br.lookup(mac(A), t + ageing), None);
        assert_eq!(
            br.learn_and_forward(1, mac(B), mac(A), t + ageing),
            Forward::Flood
        );
        // age() removes exactly the expired entries.
        br.age(t + ageing - 1);
        assert_eq!(br.entries(), 2);
        br.age(t + ageing);
        assert_eq!(br.entries(), 1);
        assert_eq!(br.lookup(mac(B), t + ageing), Some(1));
        // Seeing a station again refreshes it.
        br.learn_and_forward(1, mac(B), MacAddr::BROADCAST, t + 2 * ageing - 1);
        assert_eq!(br.lookup(mac(B), t + 3 * ageing - 2), Some(1));
        // A timestamp older than the last one (out-of-order batch) does not shorten it.
        br.learn_and_forward(1, mac(B), MacAddr::BROADCAST, t);
        assert_eq!(br.lookup(mac(B), t + 3 * ageing - 2), Some(1));
    }

    #[test]
    fn station_move() {
        let mut br = Bridge::new(3, BridgeConfig::default());
        br.learn_and_forward(0, mac(A), MacAddr::BROADCAST, 0);
        br.learn_and_forward(1, mac(B), MacAddr::BROADCAST, 0);
        assert_eq!(
            br.learn_and_forward(1, mac(B), mac(A), 1),
            Forward::Unicast(0)
        );
        // A moves to port 2.
        br.learn_and_forward(2, mac(A), MacAddr::BROADCAST, 2);
        assert_eq!(
            br.learn_and_forward(1, mac(B), mac(A), 3),
            Forward::Unicast(2)
        );
        assert_eq!(br.entries(), 2);
        assert_eq!(br.station_moves(), 1);
    }

    #[test]
    fn hairpin_is_dropped() {
        let mut br = Bridge::new(2, BridgeConfig::default());
        br.learn_and_forward(0, mac(A), MacAddr::BROADCAST, 0);
        br.learn_and_forward(0, mac(B), MacAddr::BROADCAST, 0);
        assert_eq!(br.learn_and_forward(0, mac(A), mac(B), 1), Forward::Drop);
        // Frame to itself.
        assert_eq!(br.learn_and_forward(0, mac(A), mac(A), 1), Forward::Drop);
    }

    #[test]
    fn table_full() {
        let cfg = BridgeConfig {
            ageing_ns: 10 * SEC,
            max_entries: 4,
        };
        let mut br = Bridge::new(2, cfg);
        for n in 0..4 {
            br.learn_and_forward(0, mac(n), MacAddr::BROADCAST, 0);
        }
        assert_eq!(br.entries(), 4);
        // A fifth address is not learned; frames to it flood.
        br.learn_and_forward(1, mac(99), MacAddr::BROADCAST, 1);
        assert_eq!(br.learn_failures(), 1);
        assert_eq!(br.entries(), 4);
        assert_eq!(br.learn_and_forward(0, mac(0), mac(99), 2), Forward::Flood);
        // Known addresses still refresh and move while full.
        br.learn_and_forward(1, mac(3), MacAddr::BROADCAST, 3);
        assert_eq!(br.lookup(mac(3), 3), Some(1));
        assert_eq!(br.learn_failures(), 1);
        // Once entries expire, a full table sweeps itself and learns again.
        let later = 2 + 10 * SEC;
        br.learn_and_forward(1, mac(99), MacAddr::BROADCAST, later);
        assert_eq!(br.lookup(mac(99), later), Some(1));
        assert_eq!(br.lookup(mac(3), later), Some(1)); // seen at 3: still valid
        assert_eq!(br.entries(), 2);
        // max_entries 0: never learns, never panics.
        let mut none = Bridge::new(
            2,
            BridgeConfig {
                ageing_ns: SEC,
                max_entries: 0,
            },
        );
        assert_eq!(none.learn_and_forward(0, mac(A), mac(B), 0), Forward::Flood);
        assert_eq!(none.entries(), 0);
        assert_eq!(none.learn_failures(), 1);
    }

    #[test]
    fn sweep_is_rate_limited() {
        let cfg = BridgeConfig {
            ageing_ns: 10 * SEC,
            max_entries: 2,
        };
        let mut br = Bridge::new(2, cfg);
        br.learn_and_forward(0, mac(1), MacAddr::BROADCAST, 0);
        br.learn_and_forward(0, mac(2), MacAddr::BROADCAST, 9 * SEC);
        // Full at 9.5 s: sweeps (nothing expired), fails.
        br.learn_and_forward(0, mac(3), MacAddr::BROADCAST, 9 * SEC + SEC / 2);
        assert_eq!(br.learn_failures(), 1);
        // mac(1) expires at 10 s, but the next sweep is only allowed at 10.5 s.
        br.learn_and_forward(0, mac(3), MacAddr::BROADCAST, 10 * SEC);
        assert_eq!(br.learn_failures(), 2);
        br.learn_and_forward(0, mac(3), MacAddr::BROADCAST, 10 * SEC + SEC / 2);
        assert_eq!(br.learn_failures(), 2);
        assert_eq!(br.lookup(mac(3), 10 * SEC + SEC / 2), Some(0));
    }

    #[test]
    fn static_entries() {
        let cfg = BridgeConfig {
            ageing_ns: SEC,
            max_entries: 1,
        };
        let mut br = Bridge::new(3, cfg);
        assert!(br.static_entry(mac(A), 2));
        assert!(!br.static_entry(mac(B), 3), "no such port");
        assert!(!br.static_entry(MacAddr::BROADCAST, 0), "multicast");
        // Never ages, even across age().
        br.age(1000 * SEC);
        assert_eq!(br.lookup(mac(A), 1000 * SEC), Some(2));
        // Not moved by learning.
        br.learn_and_forward(0, mac(A), MacAddr::BROADCAST, 1000 * SEC);
        assert_eq!(br.lookup(mac(A), 1000 * SEC), Some(2));
        assert_eq!(br.station_moves(), 0);
        // Installed even when the table is full.
        br.learn_and_forward(0, mac(B), MacAddr::BROADCAST, 1000 * SEC);
        assert!(br.static_entry(mac(0xc), 1));
        assert_eq!(br.lookup(mac(0xc), u64::MAX), Some(1));
        // A static entry replaces a learned one.
        let mut br = Bridge::new(3, BridgeConfig::default());
        br.learn_and_forward(0, mac(A), MacAddr::BROADCAST, 0);
        br.static_entry(mac(A), 1);
        assert_eq!(
            br.learn_and_forward(2, mac(B), mac(A), 500 * SEC),
            Forward::Unicast(1)
        );
    }

    #[test]
    fn bad_ingress_port_is_dropped_without_learning() {
        let mut br = Bridge::new(2, BridgeConfig::default());
        assert_eq!(br.learn_and_forward(2, mac(A), mac(B), 0), Forward::Drop);
        assert_eq!(
            br.learn_and_forward(u16::MAX, mac(A), MacAddr::BROADCAST, 0),
            Forward::Drop
        );
        assert_eq!(br.entries(), 0);
        let mut empty = Bridge::new(0, BridgeConfig::default());
        assert_eq!(empty.learn_and_forward(0, mac(A), mac(B), 0), Forward::Drop);
    }

    #[test]
    fn no_reallocation_under_churn() {
        let cfg = BridgeConfig {
            ageing_ns: 1000,
            max_entries: 512,
        };
        let mut br = Bridge::new(8, cfg);
        let cap = br.table.capacity();
        let mut rng = SimRng::new(8021);
        let mut now = 0;
        for _ in 0..200_000 {
            now += rng.next_u64() % 3;
            let src = mac(rng.next_u64() % 5000);
            let dst = mac(rng.next_u64() % 5000);
            br.learn_and_forward((rng.next_u64() % 8) as u16, src, dst, now);
            if rng.next_u64().is_multiple_of(1000) {
                br.age(now);
            }
            assert!(br.entries() <= 512);
        }
        // capacity() is items + growth left: tombstones lower it, a resize would double it.
        assert!(br.table.capacity() <= cap, "table reallocated");
        assert!(br.learn_failures() > 0);
    }

    /// Random operations against a plain reference model (no size limit).
    #[test]
    fn matches_reference_model() {
        let ageing = 50;
        let mut br = Bridge::new(
            4,
            BridgeConfig {
                ageing_ns: ageing,
                max_entries: 1 << 16,
            },
        );
        let mut model: BTreeMap<u64, (u16, u64)> = BTreeMap::new();
        let mut rng = SimRng::new(1998);
        let mut now = 0u64;
        for step in 0..100_000 {
            now += rng.next_u64() % 4;
            let ingress = (rng.next_u64() % 5) as u16; // 4 is not a port
            let src = mac(rng.next_u64() % 12);
            let dst = if rng.next_u64().is_multiple_of(10) {
                MacAddr::BROADCAST
            } else {
                mac(rng.next_u64() % 12)
            };
            let got = br.learn_and_forward(ingress, src, dst, now);
            let want = if ingress >= 4 {
                Forward::Drop
            } else {
                let e = model.entry(src.to_u64()).or_insert((ingress, now));
                *e = (ingress, e.1.max(now));
                if dst.is_multicast() {
                    Forward::Flood
                } else {
                    match model.get(&dst.to_u64()) {
                        Some(&(p, seen)) if now - seen < ageing => {
                            if p == ingress {
                                Forward::Drop
                            } else {
                                Forward::Unicast(p)
                            }
                        }
                        _ => Forward::Flood,
                    }
                }
            };
            assert_eq!(got, want, "step {step}");
            if step % 777 == 0 {
                br.age(now);
                model.retain(|_, &mut (_, seen)| now - seen < ageing);
                assert_eq!(br.entries(), model.len());
            }
        }
    }

    #[test]
    fn hasher_spreads_sequential_macs() {
        use std::hash::Hash;
        let mut buckets = [0u32; 64];
        for n in 0..64 * 64 {
            let mut h = MacHasher::default();
            mac(n).to_u64().hash(&mut h);
            buckets[(h.finish() % 64) as usize] += 1;
        }
        assert!(
            buckets.iter().all(|&b| (32..=96).contains(&b)),
            "{buckets:?}"
        );
    }
}
