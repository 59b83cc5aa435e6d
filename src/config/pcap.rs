//! Capture (`--pcap DIR`, `--pcap-ports`, `--pcap-snaplen`, `--pcap-max-mb`;
//! `pcap*` in the file): which ports are captured and how much of each frame.
//! The capture itself is `crate::capture`.

use std::path::PathBuf;

use crate::capture::{DEFAULT_MAX_MB, DEFAULT_SNAPLEN};

use super::options::Layers;
use super::ConfigError::{self, Invalid};

/// Capture settings, resolved from `--pcap*` flags and `pcap*` TOML keys.
#[derive(Clone, Debug, PartialEq)]
pub struct PcapSettings {
    /// Directory of the files.
    pub dir: PathBuf,
    /// Per port (in `--ports` order): captured.
    pub ports: Vec<bool>,
    /// Bytes of each frame kept.
    pub snaplen: u32,
    /// Bound of one file, bytes.
    pub max_bytes: u64,
}

impl PcapSettings {
    /// Smallest file bound accepted (MB): room for headers and a few packets.
    pub const MIN_MAX_MB: f64 = 0.01;
}

/// Capture settings for `ports` (flags over the file); None: capture off.
pub(super) fn resolve(l: &Layers, ports: &[String]) -> Result<Option<PcapSettings>, ConfigError> {
    let Some(dir) = l.get(|o| &o.pcap) else {
        let f = l.flags;
        if !f.pcap_ports.is_empty() || f.pcap_snaplen.is_some() || f.pcap_max_mb.is_some() {
            return Err(Invalid(
                "--pcap-ports / --pcap-snaplen / --pcap-max-mb need --pcap DIR".into(),
            ));
        }
        return Ok(None);
    };
    let chosen = l.list(|o| &o.pcap_ports);
    if let Some(c) = chosen.iter().find(|c| !ports.contains(c)) {
        return Err(Invalid(format!(
            "--pcap-ports {c:?}: not one of the switch's ports ({})",
            ports.join(",")
        )));
    }
    let snaplen = l
        .get(|o| &o.pcap_snaplen)
        .copied()
        .unwrap_or(DEFAULT_SNAPLEN);
    if !(1..=65_535).contains(&snaplen) {
        return Err(Invalid(format!(
            "--pcap-snaplen {snaplen}: give 1 to 65535 bytes (256 keeps every header)"
        )));
    }
    let mb = l
        .get(|o| &o.pcap_max_mb)
        .copied()
        .unwrap_or(DEFAULT_MAX_MB as f64);
    if !mb.is_finite() || mb < PcapSettings::MIN_MAX_MB {
        return Err(Invalid(format!(
            "--pcap-max-mb {mb}: give a bound of at least {} MB per file",
            PcapSettings::MIN_MAX_MB
        )));
    }
    Ok(Some(PcapSettings {
        dir: dir.clone(),
        ports: ports
            .iter()
            .map(|p| chosen.is_empty() || chosen.contains(p))
            .collect(),
        snaplen,
        max_bytes: (mb * 1e6) as u64,
    }))
}
