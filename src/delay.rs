//! Delay line: a fixed one-way propagation delay added after the shaper,
//! as the ECN# evaluation does with netem to emulate base RTT and
//! RTT variation. Packets in the delay line are "on the wire": they are not in
//! any queue and no AQM sees them. A constant delay keeps FIFO order, so a
//! ring of (release time, packet) is enough.

use std::collections::VecDeque;

use crate::packet::Packet;
use crate::units::Nanos;

/// Packets in flight on an emulated wire of fixed delay.
#[derive(Debug, Default)]
pub struct DelayLine {
    delay_ns: Nanos,
    wire: VecDeque<(Nanos, Packet)>,
    bytes: u64,
}

impl DelayLine {
    /// A line that holds each packet for `delay_ns` (0: pass straight through).
    pub fn new(delay_ns: Nanos) -> Self {
        DelayLine {
            delay_ns,
            wire: VecDeque::with_capacity(1024),
            bytes: 0,
        }
    }
    /// The configured delay.
    pub fn delay_ns(&self) -> Nanos {
        self.delay_ns
    }
    /// A packet left the shaper at `now`.
    pub fn push(&mut self, pkt: Packet, now: Nanos) {
        self.bytes += pkt.len as u64;
        self.wire.push_back((now + self.delay_ns, pkt));
    }
    /// The next packet whose delay has elapsed by `now`.
    pub fn pop_ready(&mut self, now: Nanos) -> Option<Packet> {
        match self.wire.front() {
            Some(&(t, _)) if t <= now => {
                let p = self.wire.pop_front().map(|(_, p)| p)?;
                self.bytes -= p.len as u64;
                Some(p)
            }
            _ => None,
        }
    }
    /// When the next packet is due, if any.
    pub fn next_release(&self) -> Option<Nanos> {
        self.wire.front().map(|&(t, _)| t)
    }
    /// Packets on the wire.
    pub fn len(&self) -> usize {
        self.wire.len()
    }
    /// Bytes on the wire (frame bytes).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
    /// No packet on the wire.
    pub fn is_empty(&self) -> bool {
        self.wire.is_empty()
    }
    /// Removes every packet (at shutdown, to return their frames).
    pub fn drain(&mut self) -> impl Iterator<Item = Packet> + '_ {
        self.bytes = 0;
        self.wire.drain(..).map(|(_, p)| p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::US;

    #[test]
    fn holds_for_delay_and_keeps_order() {
        let mut d = DelayLine::new(50 * US);
        d.push(Packet::new(1, 100, None, 0), 0);
        d.push(Packet::new(2, 100, None, 0), 10 * US);
        assert!(d.pop_ready(50 * US - 1).is_none());
        assert_eq!(d.next_release(), Some(50 * US));
        assert_eq!(d.bytes(), 200);
        assert_eq!(d.pop_ready(50 * US).unwrap().frame, 1);
        assert_eq!(d.bytes(), 100);
        assert!(d.pop_ready(59 * US).is_none());
        assert_eq!(d.pop_ready(60 * US).unwrap().frame, 2);
        assert!(d.is_empty());
    }

    #[test]
    fn zero_delay_passes_at_once() {
        let mut d = DelayLine::new(0);
        d.push(Packet::new(7, 64, None, 1), 123);
        assert_eq!(d.pop_ready(123).unwrap().frame, 7);
    }
}
