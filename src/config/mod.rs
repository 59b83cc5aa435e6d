//! The switch's configuration: command-line flags over a TOML file over
//! defaults, validated, and turned into per-port settings.
//!
//! ```toml
//! ports = ["veth0", "veth1"]
//! rate = "1gbit"          # emulated link rate of every port
//! buffer = "96kb"         # shared buffer per port
//! delay = "0"             # one-way delay after the shaper
//! rtt = "250us"           # base RTT the AQM defaults are scaled to
//! queues = 8
//! sched = "dwrr"          # sp | dwrr | wfq | sp+dwrr | sp+wfq
//! quantum = [1514]        # per queue (one value = all queues)
//! classify = "dscp"       # dscp | flow[,temp=0|none][,pass-limit=15140b][,timeout=375us]
//! aqm = "tcn"             # a name of aqm::config::AQM_NAMES, or r-aqm[+forward]
//! raqm_forward = "dctcp"  # with aqm = "r-aqm": the forward-path AQM
//! [raqm_opts]             # R-AQM's parameters (src/raqm), e.g. k_min_pkts = 20
//! [aqm_opts]              # the AQM's own parameters, e.g.
//! threshold = "100us"
//! [port.veth1]            # per-port overrides
//! delay = "50us"
//! ```
//!
//! Layout:
//!
//! * `options` — every setting, declared once as a field of [`Options`]
//!   (its flag, its file key, its `--help` line) — and `Layers`, the one
//!   way a setting is read: flag, else file, else default.
//! * [`resolve`] reads the areas in order: `ports` (names, per-port values,
//!   and what all ports share: link, queues, AQM, host links), `queues`
//!   (classifier, scheduler), `aqm` (the AQM, R-AQM, `--aqm-opt help=1`),
//!   `runtime` (duration, UMEM, data-path thread, guard, time series),
//!   `pcap` (capture) and `fabric` (`--topology`: several switches, whose
//!   ports the topology describes).
//! * `settings` — the result, [`Settings`], and its start-up description;
//!   `values` — reading rates, sizes, times and shares, and [`ConfigError`].

mod aqm;
mod fabric;
mod options;
mod pcap;
mod ports;
mod queues;
mod runtime;
mod settings;
mod values;

#[cfg(test)]
mod golden_tests;
#[cfg(test)]
mod tests;

pub use fabric::FabricSettings;
pub use options::{Options, PortOverride};
pub use pcap::PcapSettings;
pub use runtime::FILL_RING_FRAMES;
pub use settings::{PortSettings, Settings};
pub use values::{rate_setting, share_setting, size_setting, time_setting, ConfigError};

use options::Layers;

/// Default base RTT the AQM defaults are scaled to (the TCN testbed's ≈ 250 µs, TCN paper §6.1).
pub const DEFAULT_RTT: &str = "250us";
/// Default link rate.
pub const DEFAULT_RATE: &str = "1gbit";
/// Default shared buffer per port (TCN testbed: 96 KB per port at 1 Gbit/s).
pub const DEFAULT_BUFFER: &str = "96kb";
/// Default link time a busy port may make up when the poll loop was late:
/// none, the prototype's strict token bucket (TCN paper §5; see `shaper`).
/// Catch-up is a software-robustness option (`--catchup 1ms`).
pub const DEFAULT_CATCHUP: &str = "0";
/// IP MTU assumed for AQM defaults and buffer checks.
pub const MTU: u32 = 1500;

/// Layers the config file (if any) under the flags and resolves every area.
/// `--aqm-opt help=1` and `--raqm-opt help=1` end here with
/// [`ConfigError::Help`].
pub fn resolve(flags: &Options) -> Result<Settings, ConfigError> {
    let file = match &flags.config {
        Some(p) => Options::load(p)?,
        None => Options::default(),
    };
    let l = Layers { flags, file: &file };
    let help = [
        aqm::help_requested(&l).then(|| ports::aqm_help(&l)),
        aqm::raqm_help_requested(&l).then(|| ports::raqm_help(&l)),
    ];
    if help.iter().any(Option::is_some) {
        let texts = help.into_iter().flatten().collect::<Result<Vec<_>, _>>()?;
        return Err(ConfigError::Help(texts.join("\n")));
    }
    let names = ports::names(&l)?;
    let shared = ports::Shared::resolve(&l)?;
    let (fabric, ports) = match fabric::resolve(&l, &names, &shared)? {
        Some((f, ports)) => (Some(f), ports),
        None => {
            let ports = names
                .names
                .iter()
                .map(|name| ports::port(name, &names, &l, &shared))
                .collect::<Result<Vec<_>, _>>()?;
            (None, ports)
        }
    };
    let raqm = aqm::raqm(&l, &shared.aqm, &ports[0].env)?;
    let duration_ns = runtime::duration(&l)?;
    let frames = runtime::frames(&l, ports.len())?;
    // A fabric captures every egress port by its name (`leaf1:spine2`).
    let pcap = match &fabric {
        Some(f) => pcap::resolve(&l, &f.port_names())?,
        None => pcap::resolve(&l, &names.names)?,
    };
    let data_path = runtime::data_path(&l)?;
    let dilation = runtime::dilation(&l)?;
    Ok(Settings {
        dilation,
        pcap,
        raqm,
        ingress_limit: shared.ingress_limit,
        ports,
        fabric,
        force: flags.force,
        frames,
        seed: l.get(|o| &o.seed).copied().unwrap_or(1),
        stats_socket: l
            .get(|o| &o.stats_socket)
            .cloned()
            .unwrap_or_else(|| crate::stats::DEFAULT_SOCKET.into()),
        duration_ns,
        ageing_ns: data_path.ageing_ns,
        json: flags.json,
        allow_unfaithful: flags.allow_unfaithful,
        nice: data_path.nice,
        cpu: data_path.cpu,
        poll: data_path.poll,
        tx_thread: flags.tx_thread || l.file.tx_thread,
        guard: runtime::guard(&l, dilation)?,
        timeseries: runtime::timeseries(&l)?,
    })
}
