//! Who decides where a frame goes: the [`Forwarder`] a [`Switch`](super::Switch)
//! asks once per received frame. The learning [`Bridge`] is the default (one
//! switch); a fabric switch uses a route table (`fabric::Routes`).
//!
//! The switch keeps everything else — counting, capture, R-AQM, flooding's
//! copies, enqueueing — so a forwarder only answers "which port(s)".

use crate::bridge::{Bridge, Forward};
use crate::units::Nanos;
use crate::wire::FrameInfo;

/// Decides the egress of each received frame.
pub trait Forwarder {
    /// Where the frame received on `ingress` at `now` goes. `frame` is its
    /// bytes, parsed into `info`; a forwarder may rewrite them in place (a
    /// proxy-ARP answer turns a request into its reply and returns
    /// `Unicast(ingress)`), but must keep the frame's length and leave the
    /// IP header where `info` says it is.
    fn forward(&mut self, ingress: u16, frame: &mut [u8], info: &FrameInfo, now: Nanos) -> Forward;

    /// Whether a flooded frame that arrived on `ingress` is copied to `out`
    /// (default: every other port, as a bridge floods).
    #[inline]
    fn floods_to(&self, ingress: u16, out: u16) -> bool {
        ingress != out
    }
}

impl Forwarder for Bridge {
    #[inline]
    fn forward(&mut self, ingress: u16, _: &mut [u8], info: &FrameInfo, now: Nanos) -> Forward {
        self.learn_and_forward(ingress, info.src, info.dst, now)
    }
}
