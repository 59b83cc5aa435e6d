//! How the switch runs: how long, its UMEM, its data-path thread (`--nice`,
//! `--cpu`, `--poll`), MAC ageing, the fidelity guard's limits, and the
//! queue time series.

use std::path::PathBuf;

use crate::fidelity::Thresholds;
use crate::timebase::Dilation;
use crate::units::{self, Nanos};

use super::options::Layers;
use super::values::{share_setting, time_setting};
use super::ConfigError;

/// `--duration`: None runs until Ctrl-C.
pub(super) fn duration(l: &Layers) -> Result<Option<Nanos>, ConfigError> {
    let Some(d) = &l.flags.duration else {
        return Ok(None);
    };
    match time_setting("duration", d)? {
        0 => Err(ConfigError::Invalid(format!(
            "--duration {d}: give a positive time (e.g. 30s), or leave it off to run until Ctrl-C"
        ))),
        ns => Ok(Some(ns)),
    }
}

/// `--dilation` (file key `dilation`): D, 1 when not given.
pub(super) fn dilation(l: &Layers) -> Result<Dilation, ConfigError> {
    match l.get(|o| &o.dilation) {
        None => Ok(Dilation::NONE),
        Some(&d) => Dilation::new(d).map_err(|e| ConfigError::Invalid(format!("--dilation: {e}"))),
    }
}

/// UMEM frames each port's receive socket is lent at once: one full fill
/// ring (`dataplane::ports::ring_options` sizes the ring from this). The data
/// path fills the sockets' rings in port order, so with fewer frames than this
/// per port the last ports are lent few or none and receive little or nothing.
pub const FILL_RING_FRAMES: u32 = 1024;

/// `--frames`: None sizes the UMEM from the ports (`dataplane::frames_needed`);
/// a count must give every port's receive socket a full fill ring.
pub(super) fn frames(l: &Layers, ports: usize) -> Result<Option<u32>, ConfigError> {
    let frames = l.get(|o| &o.frames).copied();
    let least = FILL_RING_FRAMES.saturating_mul(ports as u32);
    match frames {
        Some(0) => Err(ConfigError::Invalid(
            "--frames 0: the switch needs UMEM frames; leave it off to size the UMEM from the ports"
                .into(),
        )),
        Some(n) if n < least => Err(ConfigError::Invalid(format!(
            "--frames {n}: {ports} ports need at least {least} UMEM frames (each port's receive \
             socket is lent a full fill ring of {FILL_RING_FRAMES}, one port after the other, \
             so with fewer the last ports receive little or nothing); give --frames {least} or \
             more, or leave it off to size the UMEM from the ports"
        ))),
        _ => Ok(frames),
    }
}

/// The data path's thread and tables.
#[derive(Clone, Debug)]
pub(super) struct DataPath {
    /// MAC ageing (file key `ageing`).
    pub ageing_ns: Nanos,
    /// Nice value of the data path.
    pub nice: i32,
    /// CPU it is pinned to.
    pub cpu: crate::cpu::CpuChoice,
    /// Spin or sleep between departures.
    pub poll: crate::poll::PollMode,
}

/// Ageing, `--nice` (−10 by default), `--cpu` (not pinned), `--poll` (busy).
pub(super) fn data_path(l: &Layers) -> Result<DataPath, ConfigError> {
    let ageing_ns = time_setting("ageing", l.file.ageing.as_deref().unwrap_or("300s"))?;
    let nice = match l.flags.nice.unwrap_or(-10) {
        n @ -20..=19 => n,
        n => {
            return Err(ConfigError::Invalid(format!(
                "--nice {n}: use a value from -20 (highest priority) to 19"
            )))
        }
    };
    let cpu = match l.get(|o| &o.cpu) {
        Some(c) => c
            .parse()
            .map_err(|e: String| ConfigError::Invalid(format!("--cpu: {e}")))?,
        None => crate::cpu::CpuChoice::Unpinned,
    };
    let poll = match l.get(|o| &o.poll) {
        Some(p) => p
            .parse()
            .map_err(|e: String| ConfigError::Invalid(format!("--poll: {e}")))?,
        None => crate::poll::PollMode::Busy,
    };
    Ok(DataPath {
        ageing_ns,
        nice,
        cpu,
        poll,
    })
}

/// The fidelity guard's limits (`--max-lost`, `--max-stall`, `--max-stalled`);
/// `--max-stall` is emulated time under dilation `dilation`, as every time
/// setting ([`Thresholds::dilated`]).
pub(super) fn guard(l: &Layers, dilation: Dilation) -> Result<Thresholds, ConfigError> {
    let d = Thresholds::default();
    Ok(Thresholds {
        max_lost: match l.get(|o| &o.max_lost) {
            Some(v) => share_setting("max-lost", v)?,
            None => d.max_lost,
        },
        max_stall_ns: match l.get(|o| &o.max_stall) {
            Some(v) => time_setting("max-stall", v)?,
            None => d.max_stall_ns,
        },
        max_stalled: match l.get(|o| &o.max_stalled) {
            Some(v) => share_setting("max-stalled", v)?,
            None => d.max_stalled,
        },
        ..d
    }
    .dilated(dilation))
}

/// `--timeseries FILE` and its sampling interval (1ms by default, ≥ 100us).
pub(super) fn timeseries(l: &Layers) -> Result<Option<(PathBuf, Nanos)>, ConfigError> {
    let Some(path) = &l.flags.timeseries else {
        return Ok(None);
    };
    let interval_ns = time_setting(
        "ts-interval",
        l.flags.ts_interval.as_deref().unwrap_or("1ms"),
    )?;
    if interval_ns < 100_000 {
        return Err(ConfigError::Invalid(format!(
            "--ts-interval {}: the shortest sampling interval is 100us",
            units::fmt_duration(interval_ns)
        )));
    }
    Ok(Some((path.clone(), interval_ns)))
}
