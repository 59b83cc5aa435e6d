//! The AQM of every port (`--aqm`, `--aqm-opt`, `[aqm_opts]`, scaled to
//! `--rtt`), R-AQM on the reverse path (`--aqm r-aqm[+AQM]`,
//! `--raqm-forward`, `--raqm-opt`, `[raqm_opts]`), and `--aqm-opt help=1`.
//! What an AQM needs from its port comes from the AQM (`aqm::PortNeeds`):
//! nothing here names one.

use crate::aqm::config::port_needs;
use crate::aqm::{AqmConfig, AqmEnv, PortNeeds};
use crate::units::Nanos;

use super::options::Layers;
use super::values::{pairs, table_pairs, time_setting};
use super::{ConfigError, DEFAULT_RTT};

/// Which AQM the ports run, and whether R-AQM runs on the reverse path.
#[derive(Clone, Debug)]
pub(super) struct AqmChoice {
    /// The (forward-path) AQM's name as given.
    pub name: String,
    /// R-AQM on the reverse path (`--aqm r-aqm`).
    pub raqm: bool,
    /// What the AQM needs from its port.
    pub needs: PortNeeds,
}

/// `--aqm`, with `r-aqm` / `r-aqm+NAME` / `--raqm-forward` read out.
pub(super) fn choice(l: &Layers) -> Result<AqmChoice, ConfigError> {
    let given = l.text(|o| &o.aqm, "droptail");
    let (name, raqm) = match crate::raqm::parse_aqm_name(given) {
        Some(forward) => {
            let name = forward
                .or(l.get(|o| &o.raqm_forward).map(String::as_str))
                .unwrap_or(crate::raqm::DEFAULT_FORWARD_AQM);
            if crate::raqm::parse_aqm_name(name).is_some() {
                return Err(ConfigError::Invalid(format!(
                    "--raqm-forward {name}: name a forward-path AQM (dctcp, tcn, ...), not r-aqm"
                )));
            }
            (name, true)
        }
        None => {
            if l.flags.raqm_forward.is_some() || l.flags.raqm_opt.iter().any(|o| !is_help(o)) {
                return Err(ConfigError::Invalid(
                    "--raqm-forward / --raqm-opt need --aqm r-aqm".into(),
                ));
            }
            (given, false)
        }
    };
    Ok(AqmChoice {
        name: name.to_string(),
        raqm,
        needs: port_needs(name),
    })
}

/// The base RTT the AQM defaults are scaled to.
pub(super) fn rtt(l: &Layers) -> Result<Nanos, ConfigError> {
    let rtt_ns = time_setting("rtt", l.text(|o| &o.rtt, DEFAULT_RTT))?;
    if rtt_ns == 0 {
        return Err(ConfigError::Invalid(
            "--rtt must be positive: the base RTT the AQM thresholds are scaled to, e.g. 250us"
                .into(),
        ));
    }
    Ok(rtt_ns)
}

/// The AQM's parameters as given: `--aqm-opt` over `[aqm_opts]`.
#[derive(Clone, Debug)]
pub(super) struct AqmOptions {
    /// `--aqm-opt KEY=VALUE`, in order (applied last); `help` is not one.
    pub flags: Vec<(String, String)>,
    /// The file's `[aqm_opts]`.
    pub file: Vec<(String, toml::Value)>,
}

/// Reads `--aqm-opt` (each must be `KEY=VALUE`) and `[aqm_opts]`.
pub(super) fn options(l: &Layers) -> Result<AqmOptions, ConfigError> {
    let given: Vec<String> = l
        .flags
        .aqm_opt
        .iter()
        .filter(|o| !is_help(o))
        .cloned()
        .collect();
    Ok(AqmOptions {
        flags: pairs("--aqm-opt", &given)?,
        file: table_pairs(&l.file.aqm_opts),
    })
}

/// One port's AQM: the scaled defaults, the file's options, then the flags';
/// checked by building it once.
pub(super) fn for_port(
    choice: &AqmChoice,
    opts: &AqmOptions,
    env: &AqmEnv,
) -> Result<AqmConfig, ConfigError> {
    let invalid =
        |e: crate::aqm::AqmConfigError| ConfigError::Invalid(format!("--aqm {}: {e}", choice.name));
    let aqm = AqmConfig::defaults_for(&choice.name, env)
        .map_err(invalid)?
        .with_toml_overrides(&opts.file)
        .map_err(invalid)?
        .with_overrides(&opts.flags)
        .map_err(invalid)?;
    aqm.build(env).map_err(invalid)?;
    Ok(aqm)
}

/// The AQM of one port of a fabric (`--topology`): the topology's AQM for
/// it, if it names one other than `--aqm`, at its scaled defaults; else
/// `--aqm` as [`for_port`] builds it. The topology's `aqm_opts` for the port
/// come last (they are the most specific). An AQM that needs something else
/// from its port than `--aqm` does (per-flow queues) is refused: the
/// queues and classifier are the same on every port.
pub(super) fn for_fabric_port(
    choice: &AqmChoice,
    opts: &AqmOptions,
    port: &str,
    topo: &crate::fabric::PortDesc,
    env: &AqmEnv,
) -> Result<AqmConfig, ConfigError> {
    let name = topo.aqm.as_deref().unwrap_or(&choice.name);
    let invalid = |e: crate::aqm::AqmConfigError| {
        ConfigError::Invalid(format!("--topology: port {port}: aqm {name}: {e}"))
    };
    let base = if name == choice.name {
        for_port(choice, opts, env)?
    } else {
        if port_needs(name) != choice.needs {
            return Err(ConfigError::Invalid(format!(
                "--topology: port {port}: aqm {name} needs other queues than --aqm {} \
                 (every port of a fabric has the same queues and classifier): \
                 run it as --aqm {name} instead",
                choice.name
            )));
        }
        AqmConfig::defaults_for(name, env).map_err(invalid)?
    };
    let aqm = base.with_toml_overrides(&topo.aqm_opts).map_err(invalid)?;
    aqm.build(env).map_err(invalid)?;
    Ok(aqm)
}

/// R-AQM's parameters (with `--aqm r-aqm`): one set for the switch, scaled
/// to the first port's link (`env`), then `[raqm_opts]`, then `--raqm-opt`.
pub(super) fn raqm(
    l: &Layers,
    choice: &AqmChoice,
    env: &AqmEnv,
) -> Result<Option<crate::raqm::Config>, ConfigError> {
    if !choice.raqm {
        return Ok(None);
    }
    raqm_config(l, env).map(Some)
}

/// R-AQM's parameters on a port like `env`, whether or not `--aqm r-aqm`
/// runs it (`--raqm-opt help=1` lists them either way).
pub(super) fn raqm_config(l: &Layers, env: &AqmEnv) -> Result<crate::raqm::Config, ConfigError> {
    let given: Vec<String> = l
        .flags
        .raqm_opt
        .iter()
        .filter(|o| !is_help(o))
        .cloned()
        .collect();
    let flags = pairs("--raqm-opt", &given)?;
    let file = table_pairs(&l.file.raqm_opts);
    crate::raqm::Config::for_link(env.rate, env.rtt_ns)
        .with_overrides(&file)
        .and_then(|c| c.with_cli_overrides(&flags))
        .map_err(|e| ConfigError::Invalid(format!("--aqm r-aqm: {e}")))
}

/// Whether `--raqm-opt help=1` (or a bare `help`) asks for R-AQM's keys.
pub(super) fn raqm_help_requested(l: &Layers) -> bool {
    l.flags.raqm_opt.iter().any(|o| is_help(o))
}

/// Whether `--aqm-opt help=1` (or a bare `help`) asks for the AQM's keys.
pub(super) fn help_requested(l: &Layers) -> bool {
    l.flags.aqm_opt.iter().any(|o| is_help(o))
}

fn is_help(opt: &str) -> bool {
    opt.split('=').next().map(str::trim) == Some("help")
}
