//! softswitch: a software datacenter switch for AQM / ECN research.
//!
//! Layout (see README): a deterministic core that does no I/O and reads no
//! clock — [`wire`] (packet views), [`bridge`] (L2 learning), [`port`] (egress
//! queues, buffer, scheduler, AQM, shaper), [`aqm`], [`sched`], [`shaper`],
//! [`delay`], [`switch`], [`fabric`] (several switches and their links) — and the Linux layer around it: the XDP program loader and the
//! AF_XDP sockets (`xsk`, which holds the `unsafe` code with the traffic generator's `traffic::sock`), the data-path loop,
//! host namespaces and the command line.

#![deny(unsafe_code)]

/// The git commit this softswitch was built from ("unknown" outside a checkout).
pub const BUILD_COMMIT: &str = env!("SOFTSWITCH_GIT_COMMIT");

/// Whether the sources it was built from differed from [`BUILD_COMMIT`]
/// (`"true"`, `"false"`, or `"unknown"` without git).
pub const BUILD_DIRTY: &str = env!("SOFTSWITCH_GIT_DIRTY");

/// `--version` of every binary: the package version, the commit and
/// whether the sources differed from it.
pub const VERSION_LONG: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("SOFTSWITCH_GIT_COMMIT"),
    ", sources dirty: ",
    env!("SOFTSWITCH_GIT_DIRTY"),
    ")"
);

/// The build, as JSON reports carry it.
pub fn build_info() -> serde_json::Value {
    serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "git_commit": BUILD_COMMIT,
        "git_dirty": match BUILD_DIRTY {
            "true" => serde_json::Value::Bool(true),
            "false" => serde_json::Value::Bool(false),
            _ => serde_json::Value::Null,
        },
    })
}

pub mod aqm;
pub mod bridge;
pub mod capture;
pub mod cli;
pub mod config;
pub mod cpu;
pub mod dataplane;
pub mod delay;
pub mod exp;
pub mod fabric;
pub mod fidelity;
pub mod harness;
pub mod ingress;
pub mod live;
pub mod packet;
pub mod poll;
pub mod port;
pub mod portlock;
pub mod preflight;
pub mod raqm;
pub mod report;
pub mod rng;
pub mod sched;
pub mod shaper;
pub mod stats;
pub mod switch;
pub mod timebase;
pub mod timeseries;
pub mod topo;
pub mod traffic;
pub mod units;
pub mod wire;
pub mod xdp;

// The README and the other documents checked against themselves and the
// repository (links, contents, no tracker numbers).
#[cfg(test)]
mod docs_tests;
// The AF_XDP layer is where softswitch keeps its `unsafe` (ring memory,
// syscalls); every block carries a `// SAFETY:` comment.
#[allow(unsafe_code)]
pub mod xsk;
