//! Loads softswitch's XDP program (`xdp-prog/`, built by `build.rs` and
//! embedded here) and attaches it to the switch ports.
//!
//! One `Ebpf` instance per port: each port gets its own program and its own
//! `XSKS` map (rx queue index → AF_XDP socket), so registering a socket on one
//! port can never redirect another port's frames.
//!
//! The program is attached through a **bpf_link** only. A link lives as long
//! as its file descriptor, so the kernel detaches the program when this
//! process exits however it exits — `Drop`, SIGINT, a panic or `kill -9`. The
//! legacy netlink attachment (which aya falls back to when `bpf_link_create`
//! says EINVAL) would outlive a crash and leave the port black-holing frames
//! into a map nobody reads; we refuse it.
//!
//! Driver (native) mode is tried first; if the driver has no XDP support the
//! program is attached in SKB (generic) mode and a line says so.

use std::os::fd::RawFd;

use aya::{
    maps::{MapData, XskMap},
    programs::{links::LinkType, loaded_links, ProgramError, Xdp, XdpMode},
    Ebpf, EbpfError,
};

/// The XDP object built from `xdp-prog/` by `build.rs`.
static XDP_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/softswitch-xdp.o"));

const PROGRAM_NAME: &str = "softswitch_xdp";
const XSK_MAP_NAME: &str = "XSKS";
/// `max_entries` of `XSKS` in `xdp-prog/src/main.rs`.
pub const MAX_QUEUES: u32 = 64;
/// Above this MTU (on the veth or its peer) the veth driver refuses XDP
/// (measured on veth: attach fails above ~3506).
const VETH_XDP_MAX_MTU: u32 = 3500;

/// How the program runs on a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachMode {
    /// In the driver (`XDP_FLAGS_DRV_MODE`): veth and most NIC drivers.
    Driver,
    /// Generic XDP in the stack (`XDP_FLAGS_SKB_MODE`): works everywhere, slower,
    /// and AF_XDP sockets on it are copy-mode only.
    Skb,
}

/// Why loading, attaching or registering failed — each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum XdpError {
    /// The interface does not exist (in this network namespace).
    #[error("no network interface named `{0}` in this namespace (see `ip link`); check the --ports list")]
    NoSuchInterface(String),
    /// The kernel refused to load the program or create its map.
    #[error(
        "loading the XDP program for `{ifname}` failed: {source}; softswitch must run as root \
         (or with CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON)"
    )]
    Load {
        /// Port being set up.
        ifname: String,
        /// What aya reported.
        #[source]
        source: Box<EbpfError>,
    },
    /// Neither driver nor SKB mode could be attached.
    #[error(
        "attaching XDP to `{ifname}` failed (driver mode: {}; SKB mode: {}){hint}",
        describe(driver),
        describe(skb)
    )]
    Attach {
        /// Port being set up.
        ifname: String,
        /// The driver-mode error.
        driver: Box<ProgramError>,
        /// The SKB-mode error.
        skb: Box<ProgramError>,
        /// What the user can do about it (starts with "; " or is empty).
        hint: String,
    },
    /// The kernel attached the program through netlink instead of a bpf_link.
    #[error(
        "the kernel attached XDP to `{0}` through netlink, not a bpf_link, so it would stay \
         attached if softswitch crashed; refusing. softswitch needs Linux ≥ 6.4 (README, Requirements; \
         bpf_link for XDP came in 5.9)"
    )]
    NotALink(String),
    /// Port index out of range.
    #[error("no port {port}: {count} ports were attached")]
    NoSuchPort {
        /// Index asked for.
        port: usize,
        /// Number of attached ports.
        count: usize,
    },
    /// Putting a socket into the port's XSKMAP failed.
    #[error(
        "registering the AF_XDP socket for `{ifname}` queue {queue} failed: {source} \
         (queues 0..{MAX_QUEUES} are supported; the socket must be bound to that interface and queue)"
    )]
    Register {
        /// Port.
        ifname: String,
        /// Queue index.
        queue: u32,
        /// What aya reported.
        #[source]
        source: aya::maps::MapError,
    },
    /// A program that aya loaded is not what `xdp-prog/` should contain (a build bug).
    #[error("the embedded XDP object is broken: {0}; rebuild (cargo clean -p softswitch)")]
    BadObject(String),
}

/// One port's program, link and map. Field order is drop order: the link
/// (detach) goes before the map and the program.
struct Port {
    link: Option<aya::programs::xdp::XdpLink>,
    xsks: XskMap<MapData>,
    _ebpf: Ebpf,
    ifname: String,
    ifindex: u32,
    mode: AttachMode,
}

/// The XDP program attached to every switch port; dropping it detaches them.
pub struct XdpAttachment {
    ports: Vec<Port>,
}

impl std::fmt::Debug for XdpAttachment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut l = f.debug_list();
        for p in &self.ports {
            l.entry(&(&p.ifname, p.ifindex, p.mode));
        }
        l.finish()
    }
}

impl XdpAttachment {
    /// Loads one program instance per interface and attaches it (driver mode,
    /// falling back to SKB mode). Port `i` is `ifnames[i]`. On error, whatever
    /// was attached already is detached again.
    pub fn attach<S: AsRef<str>>(ifnames: &[S]) -> Result<Self, XdpError> {
        let mut ports = Vec::with_capacity(ifnames.len());
        for name in ifnames {
            ports.push(attach_port(name.as_ref())?);
        }
        Ok(XdpAttachment { ports })
    }

    /// Makes frames arriving on rx queue `queue_id` of port `port` go to the
    /// AF_XDP socket `fd` (which must be bound to that interface and queue).
    pub fn register_socket(
        &mut self,
        port: usize,
        queue_id: u32,
        fd: RawFd,
    ) -> Result<(), XdpError> {
        let count = self.ports.len();
        let p = self
            .ports
            .get_mut(port)
            .ok_or(XdpError::NoSuchPort { port, count })?;
        p.xsks
            .set(queue_id, fd, 0)
            .map_err(|source| XdpError::Register {
                ifname: p.ifname.clone(),
                queue: queue_id,
                source,
            })
    }

    /// Number of ports.
    pub fn len(&self) -> usize {
        self.ports.len()
    }

    /// Whether no port is attached.
    pub fn is_empty(&self) -> bool {
        self.ports.is_empty()
    }

    /// Interface name of port `port`.
    pub fn ifname(&self, port: usize) -> Option<&str> {
        self.ports.get(port).map(|p| p.ifname.as_str())
    }

    /// Kernel interface index of port `port`.
    pub fn ifindex(&self, port: usize) -> Option<u32> {
        self.ports.get(port).map(|p| p.ifindex)
    }

    /// How the program runs on port `port`.
    pub fn mode(&self, port: usize) -> Option<AttachMode> {
        self.ports.get(port).map(|p| p.mode)
    }
}

impl Drop for XdpAttachment {
    fn drop(&mut self) {
        // Explicit for clarity: detach every link before maps and programs go.
        for p in &mut self.ports {
            drop(p.link.take());
        }
    }
}

fn attach_port(ifname: &str) -> Result<Port, XdpError> {
    let ifindex =
        crate::xsk::if_index(ifname).ok_or_else(|| XdpError::NoSuchInterface(ifname.to_owned()))?;
    let mut ebpf = Ebpf::load(XDP_OBJECT).map_err(|source| XdpError::Load {
        ifname: ifname.to_owned(),
        source: Box::new(source),
    })?;
    let xsks = ebpf
        .take_map(XSK_MAP_NAME)
        .ok_or_else(|| XdpError::BadObject(format!("no map {XSK_MAP_NAME}")))?;
    let xsks = XskMap::try_from(xsks).map_err(|e| XdpError::BadObject(e.to_string()))?;

    let program: &mut Xdp = ebpf
        .program_mut(PROGRAM_NAME)
        .ok_or_else(|| XdpError::BadObject(format!("no program {PROGRAM_NAME}")))?
        .try_into()
        .map_err(|e: ProgramError| XdpError::BadObject(e.to_string()))?;
    program.load().map_err(|e| XdpError::Load {
        ifname: ifname.to_owned(),
        source: Box::new(EbpfError::ProgramError(e)),
    })?;

    let (link_id, mode) = match program.attach_to_if_index(ifindex, XdpMode::Driver) {
        Ok(id) => (id, AttachMode::Driver),
        Err(driver) => match program.attach_to_if_index(ifindex, XdpMode::Skb) {
            Ok(id) => {
                eprintln!(
                    "softswitch: {ifname}: XDP driver mode unavailable ({}); using SKB \
                     (generic) mode — slower, AF_XDP copy mode only{}",
                    describe(&driver),
                    mtu_hint(ifname, &driver)
                );
                (id, AttachMode::Skb)
            }
            Err(skb) => {
                let hint = attach_hint(ifname, &driver, &skb);
                return Err(XdpError::Attach {
                    ifname: ifname.to_owned(),
                    driver: Box::new(driver),
                    skb: Box::new(skb),
                    hint,
                });
            }
        },
    };

    // aya silently falls back to netlink when bpf_link_create says EINVAL;
    // a netlink attachment shows up in no bpf_link, so look for ours.
    let prog_id = program.info().map(|i| i.id()).ok();
    let is_link = prog_id.is_some_and(|id| {
        loaded_links()
            .filter_map(Result::ok)
            .any(|l| l.program_id() == id && matches!(l.link_type(), Ok(LinkType::Xdp)))
    });
    if !is_link {
        let _ = program.detach(link_id);
        return Err(XdpError::NotALink(ifname.to_owned()));
    }
    let link = program
        .take_link(link_id)
        .map_err(|e| XdpError::BadObject(e.to_string()))?;

    Ok(Port {
        link: Some(link),
        xsks,
        _ebpf: ebpf,
        ifname: ifname.to_owned(),
        ifindex,
        mode,
    })
}

/// A program error with the OS error behind it (aya's Display omits it).
fn describe(e: &ProgramError) -> String {
    match e {
        ProgramError::SyscallError(s) => format!("{}: {}", s.call, s.io_error),
        e => e.to_string(),
    }
}

fn if_mtu(ifname: &str) -> Option<u32> {
    std::fs::read_to_string(format!("/sys/class/net/{ifname}/mtu"))
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
}

/// Why a veth may refuse driver mode: ERANGE is veth's "MTU (of this end or
/// its peer) too large for XDP".
fn mtu_hint(ifname: &str, driver: &ProgramError) -> String {
    let erange = matches!(driver, ProgramError::SyscallError(s) if s.io_error.raw_os_error() == Some(libc::ERANGE));
    match if_mtu(ifname) {
        Some(m) if m > VETH_XDP_MAX_MTU || erange => format!(
            "; the MTU ({m} here) is too large for XDP in the veth driver: lower the MTU of \
             `{ifname}` and its peer to ≤ {VETH_XDP_MAX_MTU}"
        ),
        _ => String::new(),
    }
}

/// A suggestion for the common reasons attaching fails.
fn attach_hint(ifname: &str, driver: &ProgramError, skb: &ProgramError) -> String {
    let errno = |e: &ProgramError| match e {
        ProgramError::SyscallError(s) => s.io_error.raw_os_error(),
        _ => None,
    };
    let mtu = if_mtu(ifname);
    if [errno(driver), errno(skb)].contains(&Some(libc::EBUSY)) {
        return format!(
            "; `{ifname}` already has an XDP program (see `ip -d link show {ifname}`): if \
             another softswitch (or another XDP user) runs on it, stop that program; a program \
             attached through netlink and left behind is removed with \
             `ip link set dev {ifname} xdp off`"
        );
    }
    if [errno(driver), errno(skb)].contains(&Some(libc::EPERM)) {
        return "; run softswitch as root (or with CAP_BPF and CAP_NET_ADMIN)".to_owned();
    }
    match mtu {
        Some(m) if m > VETH_XDP_MAX_MTU => format!(
            "; MTU {m} is too large for XDP on veth: lower the MTU of `{ifname}` and its peer to ≤ {VETH_XDP_MAX_MTU}"
        ),
        _ => format!(
            "; if `{ifname}` is a veth, lower the MTU of it and its peer to ≤ {VETH_XDP_MAX_MTU} \
             (XDP on veth needs the peer's MTU to fit one page)"
        ),
    }
}
