//! Standalone runner for the host namespaces, until `softswitch topo` exists:
//!
//! ```text
//! softswitch-topo up [--prefix ss] [--hosts 2] [--subnet 10.99.0.0/24] [--mtu 1500]
//!                    [--cc dctcp|NAME] [--no-ecn] [--rto-min-ms 5]
//! softswitch-topo down [--prefix ss]
//! softswitch-topo list
//! ```

use std::time::Duration;

use anyhow::{bail, Context, Result};
use softswitch::topo::{self, CongestionControl, TopoConfig};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((verb, rest)) = args.split_first() else {
        bail!("usage: softswitch-topo up|down|list [options]");
    };
    let mut cfg = TopoConfig::default();
    let mut it = rest.iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--prefix" => cfg.prefix = value()?.clone(),
            "--hosts" => cfg.hosts = value()?.parse().context("--hosts")?,
            "--subnet" => cfg.subnet = value()?.parse().map_err(|e: String| anyhow::anyhow!(e))?,
            "--mtu" => cfg.mtu = value()?.parse().context("--mtu")?,
            "--cc" => cfg.cc = value()?.parse::<CongestionControl>()?,
            "--no-ecn" => cfg.ecn = false,
            "--rto-min-ms" => {
                cfg.rto_min = Some(Duration::from_millis(
                    value()?.parse().context("--rto-min-ms")?,
                ))
            }
            other => bail!("unknown option {other}"),
        }
    }
    match verb.as_str() {
        "up" => {
            let t = topo::up(&cfg)?;
            println!(
                "topology `{}`: {} hosts, cc {}",
                t.prefix,
                t.hosts.len(),
                t.cc
            );
            for h in &t.hosts {
                println!(
                    "  {} netns {} {} {} <-> {}",
                    h.name,
                    h.ns,
                    h.ip,
                    topo::names::format_mac(&h.mac),
                    h.switch_if
                );
            }
        }
        "down" => println!("{}", topo::down(&cfg.prefix)?),
        "list" => {
            for r in topo::list() {
                println!("{} hosts={} cc={} pid={}", r.prefix, r.hosts, r.cc, r.pid);
            }
        }
        other => bail!("unknown command {other}; use up, down or list"),
    }
    Ok(())
}
