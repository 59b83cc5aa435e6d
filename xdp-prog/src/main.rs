//! softswitch's XDP program: every frame that arrives on a switch port goes to
//! the AF_XDP socket bound to the queue it arrived on.
//!
//! One copy of this program (and so one [`XSKS`] map) is loaded per port by
//! `softswitch::xdp::XdpAttachment`; user space fills the map with
//! `XskMap::set(queue, socket_fd)`. A frame whose queue has no socket goes up
//! the normal stack (`XDP_PASS`) — e.g. before the switch has bound its
//! sockets, or on a queue the switch does not serve.
#![no_std]
#![no_main]

use aya_ebpf::{
    bindings::xdp_action::{XDP_ABORTED, XDP_PASS},
    macros::{map, xdp},
    maps::XskMap,
    programs::XdpContext,
};

/// AF_XDP sockets of this port, keyed by rx queue index. 64 queues is more
/// than any NIC we expect to run on; veth has one rx queue per configured
/// channel (1 by default).
#[map]
static XSKS: XskMap = XskMap::with_max_entries(64, 0);

#[xdp]
pub fn softswitch_xdp(ctx: XdpContext) -> u32 {
    match try_softswitch_xdp(&ctx) {
        Ok(action) => action,
        Err(_) => XDP_ABORTED,
    }
}

fn try_softswitch_xdp(ctx: &XdpContext) -> Result<u32, u32> {
    // bpf_redirect_map returns XDP_REDIRECT, or the low bits of its flags
    // (our XDP_PASS) when the map holds no socket for this queue.
    match XSKS.redirect(ctx.rx_queue_index(), u64::from(XDP_PASS)) {
        Ok(action) => Ok(action),
        Err(XDP_PASS) => Ok(XDP_PASS),
        Err(other) => Err(other),
    }
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}
