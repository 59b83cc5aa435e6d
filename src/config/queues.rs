//! Queues, classifier and scheduler (`--queues`, `--dscp-map`,
//! `--classify`, `--sched`, `--quantum`, `--weights`, `--strict`,
//! `--sched-bytes`, `--wfq-vtime`), the same on every port.

use crate::aqm::util::scale_ns;
use crate::aqm::PortNeeds;
use crate::port::{Classifier, FlowClassConfig, DEFAULT_QUEUES};
use crate::sched::{SchedConfig, SchedConfigError};
use crate::units::Nanos;

use super::options::Layers;
use super::ConfigError;

/// Queues per port: `--queues`, else the AQM's own count (DiffECN's
/// prototype port has 32), else 8 (a switch port's usual count) for
/// per-flow queues, else 1.
pub(super) fn count(l: &Layers, needs: PortNeeds) -> Result<usize, ConfigError> {
    let per_flow = needs.per_flow_queues.is_some()
        || l.get(|o| &o.classify)
            .is_some_and(|c| c.trim().starts_with("flow"));
    let queues = l.get(|o| &o.queues).copied().unwrap_or(match needs.queues {
        Some(n) => n,
        None if per_flow => DEFAULT_QUEUES,
        None => 1,
    });
    if !(1..=128).contains(&queues) {
        return Err(ConfigError::Invalid(format!(
            "--queues {queues}: a port has 1 to 128 queues"
        )));
    }
    Ok(queues)
}

/// Packet → queue: the DSCP map, or per-flow queues (`--classify flow`,
/// the default when the AQM needs them); a flow's idle timeout defaults to
/// 1.5 RTT.
pub(super) fn classifier(
    l: &Layers,
    queues: usize,
    rtt_ns: Nanos,
    needs: PortNeeds,
) -> Result<Classifier, ConfigError> {
    let invalid = |e: crate::port::PortConfigError| ConfigError::Invalid(e.to_string());
    let dscp = match l.get(|o| &o.dscp_map) {
        Some(m) => Classifier::from_cli(m, queues).map_err(invalid)?,
        None => Classifier::DscpMod,
    };
    let flow_timeout_ns = scale_ns(rtt_ns, 1.5);
    let classifier = match l.get(|o| &o.classify) {
        Some(c) => Classifier::classify_from_cli(c, dscp, flow_timeout_ns).map_err(invalid)?,
        None if needs.per_flow_queues.is_some() => Classifier::Flow(FlowClassConfig {
            idle_timeout_ns: flow_timeout_ns,
            ..Default::default()
        }),
        None => dscp,
    };
    match needs.per_flow_queues {
        Some(why) if !matches!(classifier, Classifier::Flow(_)) => {
            Err(ConfigError::Invalid(why.to_string()))
        }
        _ => Ok(classifier),
    }
}

/// The scheduler. Per-flow queues keep queue 0 as a strict temporary queue
/// (DiffECN's QMU): with one, the scheduler defaults to sp+dwrr.
pub(super) fn scheduler(
    l: &Layers,
    queues: usize,
    classifier: &Classifier,
) -> Result<SchedConfig, ConfigError> {
    let invalid = |e: SchedConfigError| ConfigError::Invalid(e.to_string());
    let temp_queue = matches!(classifier, Classifier::Flow(f) if f.temp_queue);
    let name = l.text(|o| &o.sched, if temp_queue { "sp+dwrr" } else { "dwrr" });
    let mut sched = SchedConfig::from_cli(name).map_err(invalid)?;
    if let Some(q) = l.get(|o| &o.quantum) {
        sched.set_quanta_str(q).map_err(invalid)?;
    }
    if let Some(w) = l.get(|o| &o.weights) {
        sched.set_weights_str(w).map_err(invalid)?;
    }
    if let Some(s) = l.get(|o| &o.strict) {
        sched.set_strict_str(s).map_err(invalid)?;
    }
    if let Some(b) = l.get(|o| &o.sched_bytes) {
        sched.set_bytes_str(b).map_err(invalid)?;
    }
    if let Some(v) = l.get(|o| &o.wfq_vtime) {
        sched.set_wfq_vtime_str(v).map_err(invalid)?;
    }
    sched.validate(queues).map_err(invalid)?;
    Ok(sched)
}
