//! The switch from settings: the same [`Switch`] for the data path, the
//! harness and the fuzz targets. No I/O.

use anyhow::{Context, Result};

use crate::aqm::AqmKind;
use crate::bridge::BridgeConfig;
use crate::config::Settings;
use crate::shaper::START_GRACE_NS;
use crate::switch::{PortSpec, Switch};

/// Builds the switch from settings (no I/O), at time 0. Every rate and
/// time in the settings is emulated (`--dilation`): the switch runs on the
/// core's emulated time and knows nothing of D, except the shaper's
/// start-of-busy grace, which is the machine's and so 1/D as long.
pub fn build_switch(settings: &Settings) -> Result<Switch<AqmKind>> {
    let mut specs = Vec::with_capacity(settings.ports.len());
    for p in &settings.ports {
        let aqm = p
            .aqm
            .build(&p.env)
            .with_context(|| format!("port {}", p.name))?;
        specs.push(PortSpec {
            name: p.name.clone(),
            config: p.port.clone(),
            aqm,
            delay_ns: p.delay_ns,
        });
    }
    let bridge = BridgeConfig {
        ageing_ns: settings.ageing_ns,
        ..BridgeConfig::default()
    };
    let mut sw =
        Switch::new(specs, bridge, 0, settings.seed).map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(r) = &settings.raqm {
        sw.enable_raqm(r, 0);
    }
    // The grace of each busy period is the machine's forwarding latency,
    // real time: in the core's emulated time it is 1/D as long.
    if !settings.dilation.is_none() {
        let grace_ns = settings.dilation.to_emulated_ns(START_GRACE_NS);
        for p in sw.ports_mut() {
            p.egress.set_start_grace(grace_ns);
        }
    }
    let ingress: Vec<_> = settings.ports.iter().map(|p| p.ingress_rate).collect();
    if ingress.iter().any(Option::is_some) {
        let overhead = settings.ports[0].port.overhead_bytes;
        sw.enable_ingress_links(&ingress, overhead, settings.ingress_limit);
    }
    Ok(sw)
}
