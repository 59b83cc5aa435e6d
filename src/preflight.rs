//! Checks run before softswitch touches an interface, each failing with a
//! message that says what to do: the interface exists, is up, does not carry
//! the machine's default route (unless forced), its MTU fits XDP on veth and
//! the port's buffer, and we have the privileges to load XDP / open AF_XDP.
//!
//! Reads `/sys/class/net` and `/proc` only; paths are parameters so tests run
//! against fixture directories.

use std::fs;
use std::path::{Path, PathBuf};

/// Largest MTU for which XDP attaches on a veth (measured on Linux 6.x veth: attach fails if the
/// peer's MTU is above ~3506; frames must also fit one 4 KiB UMEM frame).
pub const MAX_XDP_VETH_MTU: u32 = 3500;

/// The Linux release softswitch needs (README, "Requirements"): the hosts'
/// DCTCP is a BPF `struct_ops` registered through a BPF link, which
/// arrived in 6.4 (`topo::cc`). Everything else it uses is older: XDP
/// through a bpf_link (5.9), AF_XDP sockets sharing a UMEM across
/// interfaces with their own fill rings (5.10), `SO_NETNS_COOKIE` (5.14),
/// `bpf_get_netns_cookie` in sock_ops (5.15, time dilation). Every message
/// that names the release softswitch needs names this one.
pub const MIN_LINUX: &str = "6.4";

/// A reason softswitch will not start on an interface.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PreflightError {
    /// Not root and lacking the capabilities.
    #[error("softswitch needs root (or CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF, CAP_SYS_ADMIN) to load XDP and open AF_XDP sockets; run it with sudo")]
    NotPrivileged,
    /// No such interface.
    #[error("interface {0:?} does not exist; list interfaces with `ip link`, or create a test topology with `sudo softswitch topo up --hosts 2`")]
    NoSuchInterface(String),
    /// The interface is administratively or operationally down.
    #[error("interface {name:?} is down (operstate {state}); bring it up with `ip link set {name} up`{peer_hint}")]
    InterfaceDown {
        /// Interface.
        name: String,
        /// operstate read from sysfs.
        state: String,
        /// Extra hint for a veth whose peer is down.
        peer_hint: String,
    },
    /// The interface carries the default route: taking it over would cut the machine off.
    #[error("interface {0:?} carries this machine's default route; softswitch would take all its traffic and cut the machine off. Use a dedicated interface (e.g. a veth from `softswitch topo up`), or pass --force if you really mean it")]
    DefaultRoute(String),
    /// MTU too large for XDP on this interface.
    #[error("interface {name:?} has MTU {mtu}; XDP on veth needs MTU ≤ {max} on both ends; run `ip link set {name} mtu 1500` (and on its peer)")]
    MtuTooLarge {
        /// Interface.
        name: String,
        /// Its MTU.
        mtu: u32,
        /// Largest allowed.
        max: u32,
    },
    /// The same interface named twice.
    #[error("interface {0:?} is listed twice in --ports; each port must be a different interface")]
    Duplicate(String),
    /// Fewer than one port.
    #[error("no ports given; name the interfaces to switch between, e.g. --ports veth0,veth1")]
    NoPorts,
}

/// Where to read system state from (real paths by default; fixtures in tests).
#[derive(Clone, Debug)]
pub struct SysPaths {
    /// `/sys/class/net`
    pub class_net: PathBuf,
    /// `/proc/net/route`
    pub route: PathBuf,
    /// `/proc/net/ipv6_route`
    pub route6: PathBuf,
}

impl Default for SysPaths {
    fn default() -> Self {
        SysPaths {
            class_net: "/sys/class/net".into(),
            route: "/proc/net/route".into(),
            route6: "/proc/net/ipv6_route".into(),
        }
    }
}

/// Facts about one interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IfaceInfo {
    /// Name.
    pub name: String,
    /// Kernel ifindex.
    pub ifindex: u32,
    /// MTU in bytes (IP MTU; the frame is 14–18 bytes more).
    pub mtu: u32,
    /// Hardware address.
    pub mac: [u8; 6],
    /// Whether it is a veth (copy-mode AF_XDP only).
    pub is_veth: bool,
}

fn read_trim(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

fn parse_mac(s: &str) -> [u8; 6] {
    let mut mac = [0u8; 6];
    for (i, part) in s.split(':').take(6).enumerate() {
        mac[i] = u8::from_str_radix(part, 16).unwrap_or(0);
    }
    mac
}

/// Interfaces that carry a default route (IPv4 destination 0.0.0.0/0 or IPv6 ::/0).
pub fn default_route_interfaces(paths: &SysPaths) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(t) = read_trim(&paths.route) {
        // Iface Destination Gateway Flags RefCnt Use Metric Mask ...
        for line in t.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() >= 8 && f[1] == "00000000" && f[7] == "00000000" {
                out.push(f[0].to_string());
            }
        }
    }
    if let Some(t) = read_trim(&paths.route6) {
        // dest destlen src srclen nexthop metric refcnt use flags iface
        for line in t.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() >= 10 && f[0].chars().all(|c| c == '0') && f[1] == "00" && f[9] != "lo" {
                // Only routes with a gateway (RTF_GATEWAY = 0x2) are default routes out.
                if u32::from_str_radix(f[8], 16).is_ok_and(|fl| fl & 0x2 != 0) {
                    out.push(f[9].to_string());
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Checks one interface and reads its facts.
pub fn check_interface(
    name: &str,
    force: bool,
    paths: &SysPaths,
) -> Result<IfaceInfo, PreflightError> {
    let dir = paths.class_net.join(name);
    if name.is_empty() || name.contains('/') || !dir.exists() {
        return Err(PreflightError::NoSuchInterface(name.to_string()));
    }
    let state = read_trim(&dir.join("operstate")).unwrap_or_else(|| "unknown".into());
    let flags = read_trim(&dir.join("flags"))
        .and_then(|f| u32::from_str_radix(f.trim_start_matches("0x"), 16).ok())
        .unwrap_or(0);
    let admin_up = flags & 0x1 != 0;
    // A virtual device whose iflink names another device: a veth (or vlan/macvlan).
    let is_veth = !dir.join("device").exists()
        && read_trim(&dir.join("iflink")) != read_trim(&dir.join("ifindex"));
    // "unknown" is what many virtual devices report while working; "up" is fine.
    if !admin_up || !(state == "up" || state == "unknown") {
        let peer_hint = if admin_up && (state == "lowerlayerdown" || is_veth) {
            " (for a veth, its peer must be up too)".to_string()
        } else {
            String::new()
        };
        return Err(PreflightError::InterfaceDown {
            name: name.to_string(),
            state,
            peer_hint,
        });
    }
    if !force && default_route_interfaces(paths).iter().any(|i| i == name) {
        return Err(PreflightError::DefaultRoute(name.to_string()));
    }
    let mtu: u32 = read_trim(&dir.join("mtu"))
        .and_then(|m| m.parse().ok())
        .unwrap_or(1500);
    if mtu > MAX_XDP_VETH_MTU {
        return Err(PreflightError::MtuTooLarge {
            name: name.to_string(),
            mtu,
            max: MAX_XDP_VETH_MTU,
        });
    }
    let ifindex = read_trim(&dir.join("ifindex"))
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    let mac = parse_mac(&read_trim(&dir.join("address")).unwrap_or_default());
    Ok(IfaceInfo {
        name: name.to_string(),
        ifindex,
        mtu,
        mac,
        is_veth,
    })
}

/// Checks the whole port list.
pub fn check_ports(
    names: &[String],
    force: bool,
    paths: &SysPaths,
) -> Result<Vec<IfaceInfo>, PreflightError> {
    if names.is_empty() {
        return Err(PreflightError::NoPorts);
    }
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(names.len());
    for n in names {
        if !seen.insert(n.as_str()) {
            return Err(PreflightError::Duplicate(n.clone()));
        }
        out.push(check_interface(n, force, paths)?);
    }
    Ok(out)
}

/// What the data path sees of a port's interface while it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    /// Present and administratively up.
    Up,
    /// Present but administratively down (`ip link set ... down`).
    Down,
    /// Gone: deleted (with its namespace, for a veth), or replaced by another
    /// interface of the same name (a new ifindex).
    Gone,
}

impl LinkState {
    /// Lower-case name, for reports.
    pub fn name(self) -> &'static str {
        match self {
            LinkState::Up => "up",
            LinkState::Down => "down",
            LinkState::Gone => "gone",
        }
    }
}

/// The state of interface `name`, which had `ifindex` when the switch started.
pub fn link_state(name: &str, ifindex: u32, paths: &SysPaths) -> LinkState {
    let dir = paths.class_net.join(name);
    let now_index = read_trim(&dir.join("ifindex")).and_then(|m| m.parse::<u32>().ok());
    if now_index != Some(ifindex) {
        return LinkState::Gone;
    }
    let flags = read_trim(&dir.join("flags"))
        .and_then(|f| u32::from_str_radix(f.trim_start_matches("0x"), 16).ok());
    match flags {
        Some(f) if f & 0x1 != 0 => LinkState::Up,
        Some(_) => LinkState::Down,
        None => LinkState::Gone,
    }
}

/// The effective uid from a `/proc/<pid>/status` text (`Uid: real effective saved fs`).
pub fn effective_uid(status: &str) -> Option<u32> {
    status
        .lines()
        .find(|l| l.starts_with("Uid:"))?
        .split_whitespace()
        .nth(2)?
        .parse()
        .ok()
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    effective_uid(&fs::read_to_string("/proc/self/status").unwrap_or_default()) == Some(0)
}

/// Root, or the capabilities XDP + AF_XDP need (read from /proc/self/status CapEff).
pub fn check_privileges() -> Result<(), PreflightError> {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    if effective_uid(&status) == Some(0) {
        return Ok(());
    }
    let caps = status
        .lines()
        .find(|l| l.starts_with("CapEff:"))
        .and_then(|l| u64::from_str_radix(l[7..].trim(), 16).ok())
        .unwrap_or(0);
    const CAP_NET_ADMIN: u64 = 1 << 12;
    const CAP_NET_RAW: u64 = 1 << 13;
    const CAP_SYS_ADMIN: u64 = 1 << 21;
    const CAP_BPF: u64 = 1 << 39;
    let need = CAP_NET_ADMIN | CAP_NET_RAW;
    if caps & need == need && caps & (CAP_BPF | CAP_SYS_ADMIN) != 0 {
        Ok(())
    } else {
        Err(PreflightError::NotPrivileged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixture {
        root: PathBuf,
    }

    impl Fixture {
        fn new(tag: &str) -> Self {
            let root =
                std::env::temp_dir().join(format!("ss-preflight-{}-{tag}", std::process::id()));
            let _ = fs::remove_dir_all(&root);
            fs::create_dir_all(root.join("net")).unwrap();
            fs::write(
                root.join("route"),
                "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n",
            )
            .unwrap();
            fs::write(root.join("route6"), "").unwrap();
            Fixture { root }
        }
        fn paths(&self) -> SysPaths {
            SysPaths {
                class_net: self.root.join("net"),
                route: self.root.join("route"),
                route6: self.root.join("route6"),
            }
        }
        fn iface(&self, name: &str, state: &str, flags: &str, mtu: u32, idx: u32, peer: u32) {
            let d = self.root.join("net").join(name);
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("operstate"), format!("{state}\n")).unwrap();
            fs::write(d.join("flags"), format!("{flags}\n")).unwrap();
            fs::write(d.join("mtu"), format!("{mtu}\n")).unwrap();
            fs::write(d.join("ifindex"), format!("{idx}\n")).unwrap();
            fs::write(d.join("iflink"), format!("{peer}\n")).unwrap();
            fs::write(d.join("address"), "02:00:00:00:00:01\n").unwrap();
        }
    }

    impl Drop for Fixture {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.root);
        }
    }

    /// The README and every message that says which Linux softswitch needs
    /// name the same release.
    #[test]
    fn every_kernel_requirement_names_the_same_release() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let readme = fs::read_to_string(root.join("README.md")).unwrap();
        assert!(
            readme.contains(&format!("**Linux ≥ {MIN_LINUX}**")),
            "README's Requirements"
        );
        // Spelt in two pieces so that this test is not a claim itself.
        let needle = ["needs Linux", " ≥ "].concat();
        let mut dirs = vec![root.join("src")];
        let mut claims = 0;
        while let Some(d) = dirs.pop() {
            for e in fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    let text = fs::read_to_string(&p).unwrap();
                    for (at, _) in text.match_indices(&needle) {
                        let release = &text[at + needle.len()..];
                        assert!(
                            release.starts_with(MIN_LINUX),
                            "{}: {needle}{}",
                            p.display(),
                            release.chars().take(8).collect::<String>()
                        );
                        claims += 1;
                    }
                }
            }
        }
        assert!(claims >= 5, "only {claims} claims found");
    }

    #[test]
    fn good_veth_passes() {
        let f = Fixture::new("good");
        f.iface("veth0", "up", "0x1003", 1500, 5, 4);
        let i = check_interface("veth0", false, &f.paths()).unwrap();
        assert_eq!(i.ifindex, 5);
        assert_eq!(i.mtu, 1500);
        assert!(i.is_veth);
        assert_eq!(i.mac, [2, 0, 0, 0, 0, 1]);
    }

    #[test]
    fn missing_interface_says_how_to_find_one() {
        let f = Fixture::new("missing");
        let e = check_interface("nope0", false, &f.paths()).unwrap_err();
        assert_eq!(e, PreflightError::NoSuchInterface("nope0".into()));
        assert!(e.to_string().contains("ip link"));
        assert!(check_interface("../etc", false, &f.paths()).is_err());
    }

    #[test]
    fn down_interface_is_refused() {
        let f = Fixture::new("down");
        f.iface("veth1", "down", "0x1002", 1500, 6, 7);
        let e = check_interface("veth1", false, &f.paths()).unwrap_err();
        assert!(matches!(e, PreflightError::InterfaceDown { .. }));
        assert!(e.to_string().contains("ip link set veth1 up"), "{e}");
        // Admin up but lower layer down (veth whose peer is down).
        f.iface("veth2", "lowerlayerdown", "0x1003", 1500, 8, 9);
        let e = check_interface("veth2", false, &f.paths()).unwrap_err();
        assert!(e.to_string().contains("peer"), "{e}");
    }

    #[test]
    fn link_state_follows_flags_and_ifindex() {
        let f = Fixture::new("linkstate");
        f.iface("veth3", "up", "0x1003", 1500, 10, 11);
        assert_eq!(link_state("veth3", 10, &f.paths()), LinkState::Up);
        f.iface("veth3", "down", "0x1002", 1500, 10, 11);
        assert_eq!(link_state("veth3", 10, &f.paths()), LinkState::Down);
        // Deleted and re-created under the same name: another interface.
        f.iface("veth3", "up", "0x1003", 1500, 12, 11);
        assert_eq!(link_state("veth3", 10, &f.paths()), LinkState::Gone);
        assert_eq!(link_state("nope9", 10, &f.paths()), LinkState::Gone);
    }

    #[test]
    fn default_route_needs_force() {
        let f = Fixture::new("route");
        f.iface("eth0", "up", "0x1003", 1500, 2, 2);
        fs::write(
            f.root.join("route"),
            "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n\
             eth0\t00000000\t0100A8C0\t0003\t0\t0\t0\t00000000\n\
             eth0\t0000A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\n",
        )
        .unwrap();
        let e = check_interface("eth0", false, &f.paths()).unwrap_err();
        assert_eq!(e, PreflightError::DefaultRoute("eth0".into()));
        assert!(e.to_string().contains("--force"));
        assert!(check_interface("eth0", true, &f.paths()).is_ok());
    }

    #[test]
    fn ipv6_default_route_counts() {
        let f = Fixture::new("route6");
        fs::write(
            f.root.join("route6"),
            "00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00000003     eth1\n",
        )
        .unwrap();
        assert_eq!(
            default_route_interfaces(&f.paths()),
            vec!["eth1".to_string()]
        );
    }

    #[test]
    fn mtu_too_large_for_xdp() {
        let f = Fixture::new("mtu");
        f.iface("veth3", "up", "0x1003", 9000, 10, 11);
        let e = check_interface("veth3", false, &f.paths()).unwrap_err();
        assert!(matches!(e, PreflightError::MtuTooLarge { mtu: 9000, .. }));
        assert!(e.to_string().contains("mtu 1500"));
    }

    #[test]
    fn reads_effective_uid() {
        assert_eq!(effective_uid("Name:\tx\nUid:\t1000\t0\t0\t0\n"), Some(0));
        assert_eq!(effective_uid("Uid:\t0\t1000\t0\t0\n"), Some(1000));
        assert_eq!(effective_uid("nothing"), None);
    }

    #[test]
    fn port_list_checks() {
        let f = Fixture::new("list");
        f.iface("a", "up", "0x1003", 1500, 3, 4);
        assert_eq!(
            check_ports(&[], false, &f.paths()).unwrap_err(),
            PreflightError::NoPorts
        );
        let e = check_ports(&["a".into(), "a".into()], false, &f.paths()).unwrap_err();
        assert_eq!(e, PreflightError::Duplicate("a".into()));
    }
}
