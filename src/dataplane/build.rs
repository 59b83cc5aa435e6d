//! The switch from settings: the same [`Switch`] for the data path, the
//! harness and the fuzz targets; or the [`Fabric`] of `--topology`. No I/O.

use anyhow::{Context, Result};

use crate::aqm::AqmKind;
use crate::bridge::BridgeConfig;
use crate::config::Settings;
use crate::fabric::{Fabric, PortRole};
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

/// Builds the fabric of `--topology` from settings (no I/O), at time 0:
/// every port as the settings resolved it (the topology's rate, delay,
/// buffer and AQM, the flags' queues and scheduler), the shaper's grace
/// under time dilation as [`build_switch`], and the emulated host links
/// (`--ingress-rate`) on the host ports.
pub fn build_fabric(settings: &Settings) -> Result<Fabric<AqmKind>> {
    let f = settings
        .fabric
        .as_ref()
        .context("no --topology: there is no fabric to build")?;
    let by_name: std::collections::HashMap<&str, &crate::config::PortSettings> =
        f.all_ports().map(|p| (p.name.as_str(), p)).collect();
    let mut fabric = Fabric::part(
        f.desc.clone(),
        &f.local,
        |ctx| {
            let p = by_name
                .get(ctx.name.as_str())
                .ok_or_else(|| "no settings for this port (a bug: please report it)".to_string())?;
            let aqm = p.aqm.build(&p.env).map_err(|e| e.to_string())?;
            Ok((p.port.clone(), aqm))
        },
        0,
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let grace_ns =
        (!settings.dilation.is_none()).then(|| settings.dilation.to_emulated_ns(START_GRACE_NS));
    let roles = fabric.layout().ports.clone();
    let ids = fabric.switch_ids().to_vec();
    let overhead = settings.ports[0].port.overhead_bytes;
    for (&s, sw) in ids.iter().zip(fabric.switches_mut()) {
        // R-AQM on every port of every switch, each with its link's values:
        // the ACKs arriving on a port are paced by that port's departures.
        if let Some(r) = &f.raqm {
            sw.enable_raqm_ports(&r[s], 0);
        }
        if let Some(g) = grace_ns {
            for p in sw.ports_mut() {
                p.egress.set_start_grace(g);
            }
        }
        let ingress: Vec<_> = roles[s]
            .iter()
            .enumerate()
            .map(|(p, r)| match r {
                PortRole::Host(_) => f.ports[s][p].ingress_rate,
                PortRole::Link { .. } => None,
            })
            .collect();
        if ingress.iter().any(Option::is_some) {
            sw.enable_ingress_links(&ingress, overhead, settings.ingress_limit);
        }
    }
    Ok(fabric)
}
