//! The data path: AF_XDP sockets around the deterministic [`Switch`].
//!
//! ```text
//! rx ring → Ports::receive → Switch::ingress ─┐   (core time from the Clock)
//!                                              Switch::poll
//! tx ring ← Ports::transmit (kicks) ← departures ┘
//! ```
//!
//! The rooms:
//! * [`build`] — the switch (or the fabric of `--topology`) from settings.
//!   No I/O.
//! * [`core`] — [`Core`]: what the loop drives, one switch or a fabric
//!   (whose hosts are the AF_XDP ports and whose links stay in memory).
//! * [`snapshot`] — the counter snapshot (`softswitch stats`, the exit
//!   report) and the fidelity verdict. No I/O.
//! * [`clock`] — core time (the switch's `now`) and real time (what the
//!   machine did), converted in one place.
//! * `every` — one timer for the periodic chores.
//! * `ports` — the AF_XDP sockets per port on one UMEM: receive, transmit
//!   with kicks, link states, shutdown and frame accounting.
//! * `watch` — the fidelity guard's real-time measurements of each pass.
//! * `run` — [`DataPath`]: set-up, the loop (`pass`, `housekeeping`,
//!   `idle`) and shutdown.
//!
//! `build` and `snapshot` use nothing that opens a socket: the harness and
//! the fuzz targets drive the same switch through them with a manual clock.
//!
//! [`Switch`]: crate::switch::Switch

pub mod build;
pub mod clock;
pub mod core;
#[cfg(test)]
mod dilation_tests;
mod every;
#[cfg(test)]
mod fabric_tests;
mod ports;
mod run;
pub mod snapshot;
mod txthread;
mod watch;

pub use build::{build_fabric, build_switch};
pub use core::{Core, FabricCore};
pub use ports::frames_needed;
pub use run::{run, DataPath, Pass, RunReport};
pub use snapshot::Snapshot;
