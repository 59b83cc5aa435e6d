//! The usual port maker for [`Fabric::new`](super::Fabric::new): every
//! port from one base configuration, with the AQM the topology names for it
//! (or a default), at the paper's defaults scaled to that port's rate and
//! the base RTT, then the topology's `aqm_opts`. No I/O.

use super::PortCtx;
use crate::aqm::{AqmConfig, AqmEnv, AqmKind};
use crate::port::PortConfig;
use crate::units::{Nanos, Rate};

/// IP MTU the AQM defaults assume (as the single switch's configuration).
const MTU_BYTES: u32 = 1500;

/// A port maker: `base` for every port (the topology's rate and buffer
/// replace its own), `default_aqm` where the topology names none, AQM
/// defaults scaled to the port's rate and `rtt_ns`.
pub fn aqm_ports(
    base: PortConfig,
    default_aqm: &str,
    rtt_ns: Nanos,
) -> impl FnMut(&PortCtx) -> Result<(PortConfig, AqmKind), String> + '_ {
    move |ctx| {
        let mut cfg = base.clone();
        cfg.rate = ctx.desc.rate;
        if let Some(b) = ctx.desc.buffer_bytes {
            cfg.buffer_bytes = b;
        }
        cfg.validate().map_err(|e| e.to_string())?;
        let name = ctx.desc.aqm.as_deref().unwrap_or(default_aqm);
        let env = AqmEnv {
            // An unshaped port has no rate to scale thresholds to; as the
            // single switch does, take 100 Gbit/s.
            rate: if cfg.rate.bps() == 0 {
                Rate::gbit(100)
            } else {
                cfg.rate
            },
            rtt_ns,
            num_queues: cfg.queues,
            mtu_bytes: MTU_BYTES,
            quanta: if cfg.sched.is_round_robin() {
                cfg.sched.quanta(cfg.queues, cfg.overhead_bytes)
            } else {
                None
            },
        };
        let aqm = AqmConfig::defaults_for(name, &env)
            .and_then(|c| c.with_toml_overrides(&ctx.desc.aqm_opts))
            .and_then(|c| c.build(&env))
            .map_err(|e| format!("aqm {name}: {e}"))?;
        Ok((cfg, aqm))
    }
}
