//! Host network namespaces around the switch ("Topology" and
//! "DCTCP").
//!
//! [`up`] creates `N` namespaces, each a host running the real Linux TCP
//! stack, joined to the root namespace by a veth pair whose root-side end is
//! a switch port:
//!
//! ```text
//!   netns ss-h1              root namespace             netns ss-h2
//!   eth0 10.99.0.1/24 ==veth== ss-h1-sw  [softswitch]  ss-h2-sw ==veth== eth0 10.99.0.2/24
//! ```
//!
//! Per host: MAC `02:00:00:00:00:<i>`, `lo` up, tx checksum offload and TSO
//! off on `eth0` (else TCP segments reach the switch with partial checksums;
//! GSO stays on: it segments in software before the veth, so the switch sees
//! MTU-sized frames — measured: 1512 B average over a 3 s iperf3 run — while
//! the sender keeps the cheap large-segment path), a `pfifo limit 1000` root qdisc (the
//! default `noqueue` drops at the veth when the switch is busy), ECN on,
//! DCTCP (or the named congestion control) as the namespace default,
//! `tcp_no_metrics_save=1` (no ssthresh carried from one flow to the next,
//! for repeatable runs), optional `rto_min` on the subnet route, IPv6 without
//! DAD delay or router solicitations. The switch-side ends stay in the root
//! namespace, up, without addresses and with IPv6 off, so the root namespace
//! sends nothing into the switch.
//!
//! [`down`] finds everything again by name (and the state files under
//! `/run/softswitch/topo`), so it works after a crash and is idempotent.

mod cc;
mod cmd;
pub mod dilation;
pub mod names;
pub mod netns;
pub mod rps;
pub mod site;
mod state;
pub mod wires;

use std::fmt;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

pub use cc::{
    parse_cc_list, register_struct_ops_as, BPF_DCTCP, DCTCP_BPF_SOURCE, DCTCP_LINK_PIN,
    KERNEL_DCTCP,
};
/// Runs a command to completion, its failure a [`TopoError::Command`] with
/// its stderr and `hint`.
pub use cmd::run as cmd_run;
pub use dilation::HostTimers;
pub use names::Ipv4Net;
pub use rps::RxCpus;
pub use site::Site;
pub use state::TopoRecord;
pub use wires::{
    add_host_tunnel, add_tunnel_end, add_wire, del_link_at, host_tunnel_names, move_link,
    source_address, wire_names, VXLAN_OVERHEAD,
};

use crate::timebase::Dilation;
use cmd::{ETHTOOL, IP, TC};
use netns::Sysctl;

/// Largest MTU accepted: XDP cannot attach to a veth whose peer's MTU is
/// above about 3506 bytes (one page minus headroom and skb_shared_info).
pub const MAX_MTU: u32 = 3500;

/// Smallest MTU IPv4 allows.
pub const MIN_MTU: u32 = 68;

/// Largest `initcwnd` accepted, segments (the kernel only clamps it to the
/// connection's window clamp; beyond this it is surely a typo).
pub const MAX_INITCWND: u32 = 1024;

/// Largest `gso_max_segs` the kernel accepts on a device (`GSO_MAX_SEGS`).
pub const MAX_GSO_SEGS: u32 = 65535;

/// Checks a `gso_max_segs` (segments); the error names the range.
pub fn check_gso_segs(n: u32) -> Result<(), String> {
    check_segments(
        "gso_segs",
        n,
        MAX_GSO_SEGS,
        "1 = every segment sent on its own",
    )
}

/// Checks an `initcwnd` (segments); the error names the range.
pub fn check_initcwnd(w: u32) -> Result<(), String> {
    check_segments("initcwnd", w, MAX_INITCWND, "the kernel's default is 10")
}

/// `n` in `1..=max` segments, else an error naming `key`, the range and `hint`.
fn check_segments(key: &str, n: u32, max: u32, hint: &str) -> Result<(), String> {
    if (1..=max).contains(&n) {
        Ok(())
    } else {
        Err(format!("{key} {n} is outside 1..={max} segments ({hint})"))
    }
}

/// Congestion control of the hosts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum CongestionControl {
    /// The kernel's `dctcp`, else the project's BPF struct_ops `bpf_dctcp`.
    /// Never silently anything else: `up` fails if neither is possible.
    #[default]
    Dctcp,
    /// Any congestion control the kernel has, e.g. `cubic` or `reno` for a
    /// plain-ECN baseline.
    Named(String),
}

impl fmt::Display for CongestionControl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CongestionControl::Dctcp => f.write_str("dctcp"),
            CongestionControl::Named(n) => f.write_str(n),
        }
    }
}

impl std::str::FromStr for CongestionControl {
    type Err = std::convert::Infallible;

    /// `dctcp` means [`CongestionControl::Dctcp`] (kernel or BPF); any other
    /// name is taken as is.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "dctcp" => CongestionControl::Dctcp,
            other => CongestionControl::Named(other.to_owned()),
        })
    }
}

/// What [`up`] builds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopoConfig {
    /// Prefix of every name (`<prefix>-h<i>`, `<prefix>-h<i>-sw`): lowercase
    /// letters and digits, starting with a letter, short enough that the
    /// interface names fit 15 characters.
    pub prefix: String,
    /// Number of hosts, at least 1.
    pub hosts: usize,
    /// Host addresses; host `i` gets the `i`-th address. Exists only inside
    /// the namespaces.
    pub subnet: Ipv4Net,
    /// MTU of both veth ends, bytes.
    pub mtu: u32,
    pub cc: CongestionControl,
    /// `net.ipv4.tcp_ecn=1` in the hosts (`0` when false). DCTCP needs it.
    pub ecn: bool,
    /// Minimum RTO on the subnet route (`ip route ... rto_min`), whole
    /// milliseconds; `None` keeps the kernel's 200 ms.
    pub rto_min: Option<Duration>,
    /// `quickack 1` on the subnet route: the receiver ACKs every segment
    /// (no delayed ACKs), the per-packet ACK clock R-AQM assumes
    /// (R-AQM paper §IV-F "Different ACK Mechanism").
    pub quickack: bool,
    /// `initcwnd N` on the subnet route: the initial congestion window, in
    /// segments, of every connection (and of every restart after idle);
    /// `None` keeps the kernel's 10. R-AQM's ns-3 hosts start from 1
    /// segment (ns-3's `TcpSocket::InitialCwnd` default before ns-3.36).
    pub initcwnd: Option<u32>,
    /// `gso_max_segs N` on each host's veth: the most segments the hosts'
    /// TCP puts in one GSO packet. Linux TCP always builds GSO packets
    /// (even with `gso off`), sized to about 1 ms of data at its pacing
    /// rate (`tcp_tso_autosize`), and the software segmentation sends each
    /// as a back-to-back burst — with SO_MAX_PACING_RATE too, since pacing
    /// spaces packets, not segments. `Some(1)` makes every segment its own
    /// packet, so a sender is ACK-clocked segment by segment as a
    /// simulator's hosts are; `None` keeps the kernel's default.
    pub gso_segs: Option<u32>,
    /// Which CPUs do the hosts' receive processing (RPS on their
    /// interfaces, [`rps`]); [`RxCpus::Kernel`] keeps Linux's default.
    pub rps: RxCpus,
    /// Time dilation D of the hosts' timers ([`HostTimers`], README "Time
    /// dilation"): RTO_min (`rto_min` above is the emulated value), the
    /// SYN's initial RTO, SACK compression and the other per-namespace
    /// time constants last D times longer. [`Dilation::NONE`] (D = 1)
    /// changes nothing.
    pub dilation: Dilation,
    /// More sysctls in every host's namespace, `(key, value)`, set after
    /// the ones the topology sets (so they may override them): e.g.
    /// `net.ipv4.tcp_early_retrans = 0` turns Linux's tail-loss probe off,
    /// whose 2 ms floor time dilation cannot stretch. Only `net.*` keys:
    /// the per-namespace ones.
    pub sysctls: Vec<(String, String)>,
}

impl Default for TopoConfig {
    fn default() -> Self {
        Self {
            prefix: "ss".into(),
            hosts: 2,
            subnet: Ipv4Net::new(Ipv4Addr::new(10, 99, 0, 0), 24).expect("valid /24"),
            mtu: 1500,
            cc: CongestionControl::Dctcp,
            ecn: true,
            rto_min: None,
            quickack: false,
            initcwnd: None,
            gso_segs: None,
            rps: RxCpus::Kernel,
            dilation: Dilation::NONE,
            sysctls: Vec::new(),
        }
    }
}

impl TopoConfig {
    /// Checks the config without touching the system.
    pub fn validate(&self) -> Result<(), TopoError> {
        let invalid = |m: String| Err(TopoError::InvalidConfig(m));
        names::validate_prefix(&self.prefix).map_err(TopoError::InvalidConfig)?;
        if self.hosts == 0 {
            return invalid("hosts must be at least 1".into());
        }
        let max_len = names::max_prefix_len(self.hosts);
        if self.prefix.len() > max_len {
            return invalid(format!(
                "prefix `{}` is too long for {} hosts: interface `{}` would exceed {} characters; \
                 use at most {} characters",
                self.prefix,
                self.hosts,
                names::switch_if_name(&self.prefix, self.hosts),
                names::IFNAME_MAX,
                max_len
            ));
        }
        if self.hosts as u64 > self.subnet.host_capacity() {
            return invalid(format!(
                "subnet {} has room for {} hosts, not {}",
                self.subnet,
                self.subnet.host_capacity(),
                self.hosts
            ));
        }
        if self.hosts > usize::from(u16::MAX) {
            return invalid(format!("at most {} hosts", u16::MAX));
        }
        if !(MIN_MTU..=MAX_MTU).contains(&self.mtu) {
            return invalid(format!(
                "mtu {} is outside {MIN_MTU}..={MAX_MTU} (XDP cannot attach to a veth with a larger MTU)",
                self.mtu
            ));
        }
        if let CongestionControl::Named(name) = &self.cc {
            if name.is_empty() || name.len() > 15 || name.contains(char::is_whitespace) {
                return invalid(format!("`{name}` is not a congestion control name"));
            }
        }
        if let Some(w) = self.initcwnd {
            check_initcwnd(w).map_err(TopoError::InvalidConfig)?;
        }
        if let Some(n) = self.gso_segs {
            check_gso_segs(n).map_err(TopoError::InvalidConfig)?;
        }
        for (k, v) in &self.sysctls {
            check_sysctl(k, v).map_err(TopoError::InvalidConfig)?;
        }
        if self.cc == CongestionControl::Dctcp && !self.ecn {
            return invalid("DCTCP needs ECN: set ecn = true or choose another cc".into());
        }
        if let Some(rto) = self.rto_min {
            if rto < Duration::from_millis(1) || rto.subsec_nanos() % 1_000_000 != 0 {
                return invalid(format!(
                    "rto_min {rto:?} must be a whole number of milliseconds, at least 1 ms \
                     (the route metric is in ms)"
                ));
            }
        }
        Ok(())
    }
}

/// A built topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    pub prefix: String,
    pub subnet: Ipv4Net,
    /// Congestion control the hosts use, as the kernel names it
    /// (`bpf_dctcp`, `dctcp`, `cubic`, ...).
    pub cc: String,
    pub hosts: Vec<Host>,
}

impl Topology {
    /// Switch-side interfaces of all hosts, in host order: the switch's ports.
    pub fn switch_ifs(&self) -> Vec<String> {
        self.hosts.iter().map(|h| h.switch_if.clone()).collect()
    }
}

/// One host: a network namespace with one interface towards the switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// 1-based host number.
    pub index: usize,
    /// Logical name, `h<i>`.
    pub name: String,
    /// Network namespace, `<prefix>-h<i>`.
    pub ns: String,
    /// Interface inside the namespace, `eth0`.
    pub host_if: String,
    /// Switch-side veth in the root namespace, `<prefix>-h<i>-sw`.
    pub switch_if: String,
    pub ip: Ipv4Addr,
    pub mac: [u8; 6],
}

impl Host {
    /// `ip netns exec <ns> <args...>`, not yet spawned.
    pub fn exec(&self, args: &[&str]) -> Command {
        let mut c = cmd::command(IP);
        c.args(["netns", "exec", &self.ns]).args(args);
        c
    }
}

/// What [`down`] removed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DownReport {
    pub namespaces: Vec<String>,
    pub links: Vec<String>,
    /// Processes that were still running inside the namespaces, killed.
    pub killed_pids: Vec<u32>,
    /// Struct_ops unregistered because no topology uses it any more.
    pub unregistered: Option<String>,
    /// The time-dilation sock_ops program was detached (no topology uses it).
    pub dilation_detached: bool,
    /// New `net.ipv4.tcp_allowed_congestion_control`, if changed back.
    pub allowed_cc_restored: Option<String>,
}

impl DownReport {
    /// Whether there was nothing to remove.
    pub fn is_empty(&self) -> bool {
        *self == DownReport::default()
    }
}

impl fmt::Display for DownReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("nothing to remove");
        }
        let mut parts = Vec::new();
        if !self.namespaces.is_empty() {
            parts.push(format!("namespaces {}", self.namespaces.join(" ")));
        }
        if !self.links.is_empty() {
            parts.push(format!("links {}", self.links.join(" ")));
        }
        if !self.killed_pids.is_empty() {
            let pids: Vec<String> = self.killed_pids.iter().map(u32::to_string).collect();
            parts.push(format!("killed pids {}", pids.join(" ")));
        }
        if let Some(u) = &self.unregistered {
            parts.push(format!("unregistered {u}"));
        }
        if let Some(a) = &self.allowed_cc_restored {
            parts.push(format!("tcp_allowed_congestion_control back to `{a}`"));
        }
        if self.dilation_detached {
            parts.push("detached the time-dilation sock_ops program".into());
        }
        write!(f, "removed {}", parts.join("; "))
    }
}

/// Why a topology could not be built or removed. Each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum TopoError {
    #[error(
        "must run as root: network namespaces, veth pairs and BPF need CAP_SYS_ADMIN/CAP_NET_ADMIN; \
         run it with sudo"
    )]
    NotRoot,
    #[error(
        "`{tool}` not found: install the Debian package `{package}` (apt-get install {package}) \
         or run `sudo scripts/setup.sh`"
    )]
    MissingTool {
        tool: &'static str,
        package: &'static str,
    },
    #[error("invalid topology config: {0}")]
    InvalidConfig(String),
    #[error(
        "prefix `{prefix}` is already in use ({}); run `softswitch topo down --prefix {prefix}` \
         first, or choose another prefix",
        names.join(", ")
    )]
    NamesInUse { prefix: String, names: Vec<String> },
    #[error(
        "DCTCP is unavailable: {reason}\nNothing else was chosen in its place; to run with plain \
         ECN TCP instead, ask for it explicitly (e.g. cc = cubic)"
    )]
    DctcpUnavailable { reason: String },
    #[error(
        "time dilation of the hosts' timers is unavailable: {reason}\nTo run without it, leave \
         out --dilation (D = 1)"
    )]
    DilationUnavailable { reason: String },
    #[error("congestion control `{name}` is not in this kernel (available: {available})")]
    CcUnavailable { name: String, available: String },
    #[error("`{command}` failed ({status}): {stderr}\n{hint}")]
    Command {
        command: String,
        status: String,
        stderr: String,
        hint: String,
    },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("timed out after {0:?} waiting for another `topo up`/`topo down` to finish")]
    LockTimeout(Duration),
    #[error("injected fault after host {0} (test hook)")]
    InjectedFault(usize),
    #[error(
        "{cause}\nCleaning up after that failed too, leaving: {}.\nRun `softswitch topo down --prefix {prefix}`",
        leftovers.join("; ")
    )]
    RollbackIncomplete {
        prefix: String,
        cause: Box<TopoError>,
        leftovers: Vec<String>,
    },
    #[error(
        "`topo down --prefix {prefix}` could not remove everything: {}\n(done: {report})",
        errors.join("; ")
    )]
    DownIncomplete {
        prefix: String,
        errors: Vec<String>,
        report: Box<DownReport>,
    },
}

/// Builds the topology. On any failure removes everything this call made
/// (and nothing else) before returning the error.
pub fn up(cfg: &TopoConfig) -> Result<Topology, TopoError> {
    up_inner(cfg, None)
}

/// [`up`] that fails on purpose right after host `fail_after_host` is
/// built, to test the rollback.
#[doc(hidden)]
pub fn up_with_fault(cfg: &TopoConfig, fail_after_host: usize) -> Result<Topology, TopoError> {
    up_inner(cfg, Some(fail_after_host))
}

/// Topologies that have a state file (built, or crashed and not downed).
pub fn list() -> Vec<TopoRecord> {
    state::records()
}

/// Objects `up` makes, in the order it makes them; undone in reverse.
#[derive(Debug)]
enum Made {
    /// The state file, and with it a use of the shared cc changes.
    Record,
    Netns(String),
    Link(String),
    /// A namespace's cookie in the time-dilation program's map.
    DilatedNetns(u64),
}

fn up_inner(cfg: &TopoConfig, fault: Option<usize>) -> Result<Topology, TopoError> {
    cfg.validate()?;
    cmd::require_root()?;
    cmd::require_tools(&[IP, TC, ETHTOOL])?;
    let _lock = state::GlobalLock::acquire()?;

    let mut in_use = existing_objects(&cfg.prefix)?.names();
    if state::exists(&cfg.prefix) {
        in_use.push(format!("state file of `{}`", cfg.prefix));
    }
    if !in_use.is_empty() {
        return Err(TopoError::NamesInUse {
            prefix: cfg.prefix.clone(),
            names: in_use,
        });
    }

    let mut made = Vec::new();
    match build(cfg, fault, &mut made) {
        Ok(topo) => Ok(topo),
        Err(cause) => {
            let leftovers = rollback(&cfg.prefix, made);
            if leftovers.is_empty() {
                Err(cause)
            } else {
                Err(TopoError::RollbackIncomplete {
                    prefix: cfg.prefix.clone(),
                    cause: Box::new(cause),
                    leftovers,
                })
            }
        }
    }
}

fn build(
    cfg: &TopoConfig,
    fault: Option<usize>,
    made: &mut Vec<Made>,
) -> Result<Topology, TopoError> {
    let mut record = TopoRecord {
        prefix: cfg.prefix.clone(),
        cc: String::new(),
        hosts: cfg.hosts,
        pid: std::process::id(),
        dilation: Dilation::NONE,
        netns_cookies: Vec::new(),
    };
    made.push(Made::Record);
    state::write_record(&record)?;
    let wanted = match &cfg.cc {
        CongestionControl::Dctcp => None,
        CongestionControl::Named(n) => Some(n.as_str()),
    };
    let cc_name = state::acquire_cc(wanted)?;
    record.cc = cc_name.clone();
    record.dilation = cfg.dilation;
    state::write_record(&record)?;
    ensure_bpffs()?;
    if !cfg.dilation.is_none() {
        state::acquire_dilation()?;
    }

    let mut hosts = Vec::with_capacity(cfg.hosts);
    for index in 1..=cfg.hosts {
        hosts.push(build_host(cfg, &cc_name, index, made)?);
        if let Some(Made::DilatedNetns(cookie)) = made.last() {
            // Recorded at once, so a `down` after a crash still removes it.
            record.netns_cookies.push(*cookie);
            state::write_record(&record)?;
        }
        if fault == Some(index) {
            return Err(TopoError::InjectedFault(index));
        }
    }
    Ok(Topology {
        prefix: cfg.prefix.clone(),
        subnet: cfg.subnet,
        cc: cc_name,
        hosts,
    })
}

/// The hosts' timers when `cfg` dilates time.
fn host_timers(cfg: &TopoConfig) -> Option<HostTimers> {
    (!cfg.dilation.is_none()).then(|| HostTimers::new(cfg.dilation, cfg.rto_min))
}

/// A host sysctl of [`TopoConfig::sysctls`]: a `net.*` key (the
/// per-namespace ones) of lowercase letters, digits, `_`, `-` and `.`, and
/// a value on one line.
pub fn check_sysctl(key: &str, value: &str) -> Result<(), String> {
    let key_ok = key.starts_with("net.")
        && key.len() > 4
        && !key.contains("..")
        && key.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'-' | b'.')
        });
    if !key_ok {
        return Err(format!(
            "sysctl `{key}`: only `net.*` keys (the per-namespace ones) of lowercase letters, \
             digits, `_`, `-` and `.`, e.g. net.ipv4.tcp_early_retrans"
        ));
    }
    if value.trim().is_empty() || value.contains(['\n', '\r']) {
        return Err(format!(
            "sysctl {key} = `{value}`: give a value on one line"
        ));
    }
    Ok(())
}

fn ns_sysctls(cfg: &TopoConfig, cc_name: &str) -> Vec<Sysctl> {
    let mut s = vec![
        Sysctl::new("net.ipv4.tcp_ecn", u8::from(cfg.ecn)),
        Sysctl::new("net.ipv4.tcp_congestion_control", cc_name),
        Sysctl::new("net.ipv4.tcp_no_metrics_save", 1),
    ];
    if let Some(t) = host_timers(cfg) {
        s.extend(t.sysctls());
    }
    if Path::new("/proc/sys/net/ipv6").exists() {
        // Set before eth0 exists so it inherits them: link-local addresses
        // usable at once, no router solicitations into the switch.
        s.extend([
            Sysctl::new("net.ipv6.conf.all.accept_dad", 0),
            Sysctl::new("net.ipv6.conf.default.accept_dad", 0),
            Sysctl::new("net.ipv6.conf.default.router_solicitations", 0),
        ]);
    }
    // The user's last, so that they may override the above.
    s.extend(cfg.sysctls.iter().map(|(k, v)| Sysctl::new(k, v)));
    s
}

/// Host `index`: its namespace, its veth pair to the switch, its
/// interface and (with route options) its subnet route.
fn build_host(
    cfg: &TopoConfig,
    cc_name: &str,
    index: usize,
    made: &mut Vec<Made>,
) -> Result<Host, TopoError> {
    let ns = names::netns_name(&cfg.prefix, index);
    let sw = names::switch_if_name(&cfg.prefix, index);
    let mac = names::host_mac(index);
    let ip = cfg
        .subnet
        .host(index)
        .expect("validate() checked the subnet has room");
    add_netns(cfg, cc_name, &ns, made)?;
    add_veth(cfg, &ns, &sw, &mac, made)?;
    set_up_host_if(cfg, &ns, &format!("{ip}/{}", cfg.subnet.prefix_len()))?;
    set_route_options(cfg, &ns, &ip.to_string())?;
    Ok(Host {
        index,
        name: names::host_name(index),
        ns,
        host_if: names::HOST_IF.to_owned(),
        switch_if: sw,
        ip,
        mac,
    })
}

/// The namespace `ns` with its sysctls (and, when time is dilated, its
/// sockets' timers), before any socket exists in it.
fn add_netns(
    cfg: &TopoConfig,
    cc_name: &str,
    ns: &str,
    made: &mut Vec<Made>,
) -> Result<(), TopoError> {
    cmd::run(
        cmd::command(IP).args(["netns", "add", ns]),
        "check `ip netns list` and that /run/netns is writable",
    )?;
    made.push(Made::Netns(ns.to_owned()));

    netns::write_sysctls(
        ns,
        &ns_sysctls(cfg, cc_name),
        "a namespace may select only congestion controls listed in the root namespace's \
         net.ipv4.tcp_allowed_congestion_control",
    )?;
    if let Some(t) = host_timers(cfg) {
        // Before any socket exists in it: every socket of the host is dilated.
        let cookie = netns::netns_cookie(ns)?;
        dilation::add_netns(cookie, &t)?;
        made.push(Made::DilatedNetns(cookie));
    }
    Ok(())
}

/// The veth pair: `sw` in the root namespace (the switch's port, up, L2
/// only), its peer in `ns` with the host's MAC.
fn add_veth(
    cfg: &TopoConfig,
    ns: &str,
    sw: &str,
    mac: &[u8; 6],
    made: &mut Vec<Made>,
) -> Result<(), TopoError> {
    let mtu = cfg.mtu.to_string();
    cmd::run(
        cmd::command(IP).args([
            "link",
            "add",
            sw,
            "mtu",
            &mtu,
            "type",
            "veth",
            "peer",
            "name",
            names::HOST_IF,
            "mtu",
            &mtu,
            "address",
            &names::format_mac(mac),
            "netns",
            ns,
        ]),
        "veth support (CONFIG_VETH) is needed",
    )?;
    made.push(Made::Link(sw.to_owned()));
    // The switch port is L2 only: no IPv6 link-local, RS or MLD from the root
    // namespace into the switch.
    wires::l2_up(&Site::Here, sw)
}

/// The host's interface in `ns`: address `cidr`, up, no tx checksum
/// offload or TSO, `--gso-segs`, a pfifo qdisc, `--rps`.
fn set_up_host_if(cfg: &TopoConfig, ns: &str, cidr: &str) -> Result<(), TopoError> {
    let host_if = names::HOST_IF;
    let ip_cmd = || cmd::command(IP);
    cmd::run(ip_cmd().args(["-n", ns, "link", "set", "lo", "up"]), "")?;
    cmd::run(
        ip_cmd().args(["-n", ns, "addr", "add", cidr, "dev", host_if]),
        "",
    )?;
    cmd::run(ip_cmd().args(["-n", ns, "link", "set", host_if, "up"]), "")?;
    cmd::run(
        ip_cmd().args([
            "netns", "exec", ns, "ethtool", "-K", host_if, "tx", "off", "tso", "off",
        ]),
        "tx checksum offload must be off on the host veth, else TCP breaks through the switch",
    )?;
    if let Some(n) = cfg.gso_segs {
        cmd::run(
            ip_cmd().args([
                "-n",
                ns,
                "link",
                "set",
                "dev",
                host_if,
                "gso_max_segs",
                &n.to_string(),
            ]),
            "gso_max_segs needs iproute2 ≥ 4.4 and a kernel that lets it change on a live device",
        )?;
    }
    cmd::run(
        cmd::command(TC).args([
            "-n", ns, "qdisc", "replace", "dev", host_if, "root", "pfifo", "limit", "1000",
        ]),
        "the pfifo qdisc (CONFIG_NET_SCH_FIFO) is needed",
    )?;
    if let Some(mask) = cfg.rps.mask(RxCpus::allowed()) {
        // sysfs shows a namespace's devices only where it is mounted inside
        // that namespace, as `ip netns exec` does.
        let write = format!(
            "for q in /sys/class/net/{host_if}/queues/rx-*; do echo {mask:x} > $q/rps_cpus; done"
        );
        cmd::run(
            cmd::command(IP).args(["netns", "exec", ns, "sh", "-c", &write]),
            "RPS needs a kernel with CONFIG_RPS",
        )?;
    }
    Ok(())
}

/// `--rto-min`, `--quickack` and `--initcwnd` on the subnet route in
/// `ns` (from source `src`); nothing without them.
fn set_route_options(cfg: &TopoConfig, ns: &str, src: &str) -> Result<(), TopoError> {
    if cfg.rto_min.is_none() && !cfg.quickack && cfg.initcwnd.is_none() {
        return Ok(());
    }
    let net = cfg.subnet.to_string();
    let mut args: Vec<String> = [
        "-n",
        ns,
        "route",
        "replace",
        &net,
        "dev",
        names::HOST_IF,
        "proto",
        "kernel",
        "scope",
        "link",
        "src",
        src,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Some(rto) = cfg.rto_min {
        let ms = match host_timers(cfg) {
            Some(t) => t.route_rto_min_ms(),
            None => rto.as_millis(),
        };
        args.extend(["rto_min".to_string(), format!("{ms}ms")]);
    }
    if cfg.quickack {
        args.extend(["quickack".to_string(), "1".to_string()]);
    }
    if let Some(w) = cfg.initcwnd {
        args.extend(["initcwnd".to_string(), w.to_string()]);
    }
    cmd::run(cmd::command(IP).args(&args), "")?;
    Ok(())
}

/// Undoes `made` in reverse; returns what could not be undone.
fn rollback(prefix: &str, made: Vec<Made>) -> Vec<String> {
    let mut leftovers = Vec::new();
    for m in made.into_iter().rev() {
        let result = match &m {
            Made::Link(name) => delete_link(name).map(|_| ()),
            Made::Netns(name) => delete_netns(name).map(|_| ()),
            Made::Record => state::remove_record(prefix)
                .and_then(|_| state::release_shared())
                .map(|_| ()),
            Made::DilatedNetns(cookie) => dilation::remove_netns(*cookie).map(|_| ()),
        };
        if let Err(e) = result {
            leftovers.push(format!("{m:?}: {e}"));
        }
    }
    leftovers
}

/// Namespaces and switch-side links of topology `prefix`, found by name.
#[derive(Debug, Default)]
struct Existing {
    namespaces: Vec<String>,
    links: Vec<String>,
}

impl Existing {
    fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .namespaces
            .iter()
            .map(|n| format!("netns {n}"))
            .collect();
        v.extend(self.links.iter().map(|l| format!("link {l}")));
        v
    }
}

fn dir_names(dir: &str) -> Result<Vec<String>, TopoError> {
    match std::fs::read_dir(dir) {
        Ok(entries) => Ok(entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(source) => Err(TopoError::Io {
            context: format!("cannot list {dir}"),
            source,
        }),
    }
}

fn existing_objects(prefix: &str) -> Result<Existing, TopoError> {
    let mut e = Existing {
        namespaces: dir_names("/run/netns")?
            .into_iter()
            .filter(|n| names::parse_netns_name(prefix, n).is_some())
            .collect(),
        links: dir_names("/sys/class/net")?
            .into_iter()
            .filter(|n| names::parse_switch_if_name(prefix, n).is_some())
            .collect(),
    };
    e.namespaces
        .sort_by_key(|n| names::parse_netns_name(prefix, n));
    e.links
        .sort_by_key(|n| names::parse_switch_if_name(prefix, n));
    Ok(e)
}

/// Deletes a root-namespace link; `Ok(false)` if it was already gone.
fn delete_link(name: &str) -> Result<bool, TopoError> {
    if !Path::new("/sys/class/net").join(name).exists() {
        return Ok(false);
    }
    cmd::run(cmd::command(IP).args(["link", "del", name]), "")?;
    Ok(true)
}

/// Kills what runs inside namespace `name`, then deletes it. Returns the
/// killed pids; `Ok(None)` if the namespace was already gone.
fn delete_netns(name: &str) -> Result<Option<Vec<u32>>, TopoError> {
    if !Path::new("/run/netns").join(name).exists() {
        return Ok(None);
    }
    let pids: Vec<u32> = cmd::run(cmd::command(IP).args(["netns", "pids", name]), "")?
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    // Processes keep the namespace (and its veth end) alive after the name
    // is gone. A pid that exited meanwhile makes kill fail: ignore.
    for &pid in &pids {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    cmd::run(cmd::command(IP).args(["netns", "del", name]), "")?;
    Ok(Some(pids))
}

/// Removes every namespace, veth and state file of topology `prefix`, and —
/// when no topology is left — the `bpf_dctcp` registration and the
/// `tcp_allowed_congestion_control` entries `up` added. Idempotent; works
/// from the names alone, so also after a crash. Tries everything before
/// reporting what failed.
pub fn down(prefix: &str) -> Result<DownReport, TopoError> {
    names::validate_prefix(prefix).map_err(TopoError::InvalidConfig)?;
    cmd::require_root()?;
    cmd::require_tools(&[IP])?;
    let _lock = state::GlobalLock::acquire()?;

    let mut report = DownReport::default();
    let mut errors = Vec::new();
    let existing = existing_objects(prefix)?;
    if let Err(e) = undilate(prefix, &existing.namespaces) {
        errors.push(e.to_string());
    }
    for link in &existing.links {
        match delete_link(link) {
            Ok(true) => report.links.push(link.clone()),
            Ok(false) => {}
            Err(e) => errors.push(e.to_string()),
        }
    }
    for ns in &existing.namespaces {
        match delete_netns(ns) {
            Ok(Some(pids)) => {
                report.namespaces.push(ns.clone());
                report.killed_pids.extend(pids);
            }
            Ok(None) => {}
            Err(e) => errors.push(e.to_string()),
        }
    }
    // Keep the record while anything is left, so a retry still knows.
    if errors.is_empty() {
        if let Err(e) = state::remove_record(prefix) {
            errors.push(e.to_string());
        }
    }
    match state::release_shared() {
        Ok(released) => {
            report.unregistered = released.unregistered;
            report.allowed_cc_restored = released.allowed_restored;
            report.dilation_detached = released.dilation_detached;
        }
        Err(e) => errors.push(e.to_string()),
    }
    if errors.is_empty() {
        Ok(report)
    } else {
        Err(TopoError::DownIncomplete {
            prefix: prefix.to_owned(),
            errors,
            report: Box::new(report),
        })
    }
}

/// Takes the namespaces of topology `prefix` out of the time-dilation
/// program's map: the cookies its state file recorded, and those of the
/// namespaces still there (a crash may have come before the record).
fn undilate(prefix: &str, namespaces: &[String]) -> Result<(), TopoError> {
    if !dilation::is_registered() {
        return Ok(());
    }
    let mut cookies = state::read_record(prefix)
        .map(|r| r.netns_cookies)
        .unwrap_or_default();
    for ns in namespaces {
        if let Ok(c) = netns::netns_cookie(ns) {
            cookies.push(c);
        }
    }
    for c in cookies {
        dilation::remove_netns(c)?;
    }
    Ok(())
}

/// Mounts bpffs on /sys/fs/bpf if nothing is mounted there (the XDP side pins
/// maps there).
fn ensure_bpffs() -> Result<(), TopoError> {
    let mountinfo =
        std::fs::read_to_string("/proc/self/mountinfo").map_err(|source| TopoError::Io {
            context: "cannot read /proc/self/mountinfo".into(),
            source,
        })?;
    if mountinfo
        .lines()
        .any(|l| l.split_whitespace().nth(4) == Some("/sys/fs/bpf"))
    {
        return Ok(());
    }
    nix::mount::mount(
        Some("bpf"),
        "/sys/fs/bpf",
        Some("bpf"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    )
    .map_err(|e| TopoError::Io {
        context: "cannot mount bpffs on /sys/fs/bpf (the kernel needs CONFIG_BPF_SYSCALL); \
                  mount it by hand: `mount -t bpf bpf /sys/fs/bpf`"
            .into(),
        source: e.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> TopoConfig {
        TopoConfig::default()
    }

    #[test]
    fn cc_parses_from_cli_names() {
        assert_eq!("dctcp".parse(), Ok(CongestionControl::Dctcp));
        assert_eq!(
            "cubic".parse(),
            Ok(CongestionControl::Named("cubic".into()))
        );
        assert_eq!(CongestionControl::Dctcp.to_string(), "dctcp");
    }

    #[test]
    fn default_config_is_valid() {
        let c = cfg();
        c.validate().unwrap();
        assert_eq!(c.prefix, "ss");
        assert_eq!(c.subnet.to_string(), "10.99.0.0/24");
        assert_eq!(c.mtu, 1500);
        assert_eq!(c.cc, CongestionControl::Dctcp);
        assert!(c.ecn);
    }

    #[test]
    fn host_sysctls_are_net_keys_set_last() {
        let c = TopoConfig {
            sysctls: vec![
                ("net.ipv4.tcp_early_retrans".into(), "0".into()),
                ("net.ipv4.tcp_ecn".into(), "2".into()),
            ],
            ..cfg()
        };
        c.validate().unwrap();
        let s: Vec<String> = ns_sysctls(&c, "bpf_dctcp")
            .iter()
            .map(|s| s.to_string())
            .collect();
        // After the topology's own, so a user's value wins.
        let ecn = s.iter().position(|x| x == "net.ipv4.tcp_ecn=1").unwrap();
        let mine = s.iter().position(|x| x == "net.ipv4.tcp_ecn=2").unwrap();
        assert!(mine > ecn, "{s:?}");
        assert_eq!(s.last().unwrap(), "net.ipv4.tcp_ecn=2");
        assert!(s.contains(&"net.ipv4.tcp_early_retrans=0".to_string()));
        for (k, v, want) in [
            ("kernel.hz", "1", "only `net.*` keys"),
            ("net.", "1", "only `net.*` keys"),
            ("net.ipv4/../x", "1", "only `net.*` keys"),
            ("net.ipv4..tcp_ecn", "1", "only `net.*` keys"),
            ("net.ipv4.tcp_ecn", " ", "a value on one line"),
            ("net.ipv4.tcp_ecn", "1\n2", "a value on one line"),
        ] {
            let e = TopoConfig {
                sysctls: vec![(k.into(), v.into())],
                ..cfg()
            }
            .validate()
            .unwrap_err()
            .to_string();
            assert!(e.contains(want), "{k}={v:?}: {e}");
        }
        // Values with spaces (tcp_rmem) are one line.
        check_sysctl("net.ipv4.tcp_rmem", "4096 131072 6291456").unwrap();
    }

    #[test]
    fn rejects_bad_configs() {
        let bad = [
            TopoConfig { hosts: 0, ..cfg() },
            TopoConfig {
                prefix: "toolongprefix".into(),
                ..cfg()
            },
            TopoConfig {
                prefix: "a-b".into(),
                ..cfg()
            },
            TopoConfig {
                hosts: 255,
                ..cfg()
            },
            TopoConfig { mtu: 9000, ..cfg() },
            TopoConfig { mtu: 60, ..cfg() },
            TopoConfig {
                ecn: false,
                ..cfg()
            },
            TopoConfig {
                rto_min: Some(Duration::from_micros(500)),
                ..cfg()
            },
            TopoConfig {
                rto_min: Some(Duration::from_micros(5500)),
                ..cfg()
            },
            TopoConfig {
                cc: CongestionControl::Named("cu bic".into()),
                ..cfg()
            },
            TopoConfig {
                cc: CongestionControl::Named(String::new()),
                ..cfg()
            },
            TopoConfig {
                initcwnd: Some(0),
                ..cfg()
            },
            TopoConfig {
                initcwnd: Some(MAX_INITCWND + 1),
                ..cfg()
            },
            TopoConfig {
                gso_segs: Some(0),
                ..cfg()
            },
            TopoConfig {
                gso_segs: Some(MAX_GSO_SEGS + 1),
                ..cfg()
            },
        ];
        for c in bad {
            assert!(
                matches!(c.validate(), Err(TopoError::InvalidConfig(_))),
                "{c:?} should be rejected"
            );
        }
    }

    #[test]
    fn accepts_edge_configs() {
        let good = [
            TopoConfig {
                hosts: 254,
                prefix: "abcdefg".into(),
                ..cfg()
            },
            TopoConfig {
                hosts: 9,
                prefix: "abcdefghi".into(),
                ..cfg()
            },
            TopoConfig {
                cc: CongestionControl::Named("cubic".into()),
                ecn: false,
                ..cfg()
            },
            TopoConfig {
                rto_min: Some(Duration::from_millis(5)),
                ..cfg()
            },
            TopoConfig {
                initcwnd: Some(1),
                ..cfg()
            },
            TopoConfig {
                initcwnd: Some(MAX_INITCWND),
                ..cfg()
            },
            TopoConfig {
                gso_segs: Some(1),
                ..cfg()
            },
            TopoConfig {
                gso_segs: Some(MAX_GSO_SEGS),
                ..cfg()
            },
            TopoConfig {
                hosts: 1000,
                prefix: "big".into(),
                subnet: "10.99.0.0/16".parse().unwrap(),
                ..cfg()
            },
        ];
        for c in good {
            c.validate().unwrap_or_else(|e| panic!("{c:?}: {e}"));
        }
    }

    #[test]
    fn prefix_length_error_names_the_offending_interface() {
        let c = TopoConfig {
            prefix: "abcdefgh".into(),
            hosts: 100,
            ..cfg()
        };
        let msg = c.validate().unwrap_err().to_string();
        assert!(msg.contains("abcdefgh-h100-sw"), "{msg}");
        assert!(msg.contains("at most 7"), "{msg}");
    }

    #[test]
    fn sysctls_follow_config() {
        let text = |c: &TopoConfig, cc: &str| -> Vec<String> {
            ns_sysctls(c, cc).iter().map(Sysctl::to_string).collect()
        };
        let s = text(&cfg(), "bpf_dctcp");
        assert!(s.contains(&"net.ipv4.tcp_ecn=1".to_owned()));
        assert!(s.contains(&"net.ipv4.tcp_congestion_control=bpf_dctcp".to_owned()));
        let c = TopoConfig {
            ecn: false,
            cc: CongestionControl::Named("cubic".into()),
            ..cfg()
        };
        assert!(text(&c, "cubic").contains(&"net.ipv4.tcp_ecn=0".to_owned()));
    }

    #[test]
    fn errors_say_what_to_do() {
        let e = TopoError::NamesInUse {
            prefix: "ss".into(),
            names: vec!["netns ss-h1".into()],
        };
        assert!(e.to_string().contains("softswitch topo down --prefix ss"));
        let e = TopoError::MissingTool {
            tool: "ethtool",
            package: "ethtool",
        };
        assert!(e.to_string().contains("apt-get install ethtool"));
        assert!(e.to_string().contains("scripts/setup.sh"));
        let e = TopoError::DctcpUnavailable {
            reason: "no clang".into(),
        };
        assert!(e.to_string().contains("no clang"));
    }

    #[test]
    fn host_exec_wraps_ip_netns_exec() {
        let h = Host {
            index: 1,
            name: "h1".into(),
            ns: "ss-h1".into(),
            host_if: "eth0".into(),
            switch_if: "ss-h1-sw".into(),
            ip: Ipv4Addr::new(10, 99, 0, 1),
            mac: names::host_mac(1),
        };
        let c = h.exec(&["ping", "-c1", "10.99.0.2"]);
        let args: Vec<String> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(args, ["netns", "exec", "ss-h1", "ping", "-c1", "10.99.0.2"]);
        assert!(cmd::render(&c).ends_with("ip netns exec ss-h1 ping -c1 10.99.0.2"));
    }

    #[test]
    fn down_report_display() {
        assert_eq!(DownReport::default().to_string(), "nothing to remove");
        let r = DownReport {
            namespaces: vec!["ss-h1".into()],
            unregistered: Some("bpf_dctcp".into()),
            ..Default::default()
        };
        let s = r.to_string();
        assert!(
            s.contains("ss-h1") && s.contains("unregistered bpf_dctcp"),
            "{s}"
        );
    }
}
