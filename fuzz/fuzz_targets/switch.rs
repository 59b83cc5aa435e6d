//! Fuzz target: the whole switch (`softswitch::harness`).
//!
//! The first 10 bytes choose the configuration through the CLI (ports, AQM
//! including R-AQM, scheduler, queues, rate, bucket, buffer, delay, capture,
//! Not-ECT policy, catch-up, per-flow classifier, ...); the rest is a script
//! of frames (arbitrary bytes, or well-formed TCP / UDP / ARP / IPv6 / VLAN
//! frames from a template) arriving on ports, time steps from nanoseconds to
//! seconds with a poll after each, and housekeeping (MAC ageing, the stats
//! snapshot rendered, the capture batch taken). After every step: counters
//! add up per port and switch-wide, the frame store holds exactly what the
//! switch holds, every port's invariants (buffer never over its limit,
//! queue accounting, scheduler, shaper) hold, and no port released more than
//! rate × time + bucket. At the end the drained switch holds nothing.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    softswitch::harness::run_bytes(data);
});
