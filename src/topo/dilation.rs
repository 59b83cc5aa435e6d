//! The hosts' timers under time dilation (README, "Time dilation").
//!
//! With factor D every host timer that can change a result must last D
//! times longer, or be shown not to matter. [`HostTimers`] is what
//! `topo up --dilation D` sets and how:
//!
//! * per-namespace sysctls (`net.ipv4.*`, written in each host's
//!   namespace): the minimum RTO (`tcp_rto_min_us`, no upper bound; the
//!   route's `rto_min` too when one is asked for), SACK compression's delay
//!   and slack (`tcp_comp_sack_delay_ns`, `tcp_comp_sack_slack_ns`), the
//!   min-RTT filter's window (`tcp_min_rtt_wlen`), the rate limit of ACKs
//!   to invalid segments (`tcp_invalid_ratelimit`), and TSO autosizing's
//!   RTT scale (`tcp_tso_rtt_log` + log2 D, so the extra GSO bytes granted
//!   below 512 µs of min RTT are those of the undilated RTT);
//! * a BPF sock_ops program (`bpf/dilation.bpf.c`) for what no sysctl sets:
//!   the initial RTO of SYN and SYN-ACK (`BPF_SOCK_OPS_TIMEOUT_INIT`,
//!   Linux's fixed 1 s). The hosts are namespaces, not cgroups, so the
//!   program is attached once to the root cgroup (v2) — every TCP socket of
//!   the machine passes it — and acts only on sockets whose namespace
//!   cookie is in its map, which `up` fills and `down` empties. The link
//!   and the map are pinned in bpffs (the registration outlives `up`), the
//!   state files record them, and the last `down` removes the pins and
//!   returns only once the kernel has freed the program (also after a
//!   crash), as for `bpf_dctcp`.
//!
//! What cannot be stretched on this kernel (README's table, checked against
//! Linux 6.18's source): the delayed ACK timer's 40 ms start
//! (`TCP_ATO_MIN`; only its cap, RTO_min − 1 jiffy, follows RTO_min, and
//! `TCP_BPF_DELACK_MAX` can only shorten it), the 2 ms that TLP and RACK's
//! reordering timer add (`TCP_TIMEOUT_MIN_US`, since Linux 6.7), the
//! maximum RTO (`tcp_rto_max_ms` ≤ 120 s, the default), the ~1 ms of data
//! per GSO packet at the pacing rate (`sk_pacing_shift`) and TSO
//! deferral's 1 ms, and the jiffy itself. `tcp_tso_rtt_log` moves in
//! powers of two: D = 40 acts as 32.

use std::fs;
use std::io::ErrorKind;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use libbpf_rs::{MapCore, MapFlags, MapHandle, ObjectBuilder};

use super::netns::Sysctl;
use super::TopoError;
use crate::timebase::Dilation;

/// Source of the sock_ops program (compiled into [`DILATION_BPF_OBJECT`]).
pub const DILATION_BPF_SOURCE: &str = include_str!("../../bpf/dilation.bpf.c");

/// The compiled object; empty when the build could not make it.
pub const DILATION_BPF_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/dilation.bpf.o"));

/// Why the build could not make [`DILATION_BPF_OBJECT`] (empty when it did).
const DILATION_BPF_UNAVAILABLE: &str =
    include_str!(concat!(env!("OUT_DIR"), "/dilation.bpf.unavailable"));

/// The program's name in the object (and, cut to 15 bytes, in the kernel).
const PROG_NAME: &str = "softswitch_dilation";
/// Its map of dilated namespaces (key: netns cookie).
const MAP_NAME: &str = "dilated_netns";

/// Where the cgroup link that attaches the program is pinned (bpffs).
pub const DILATION_LINK_PIN: &str = "/sys/fs/bpf/softswitch/dilation_link";
/// Where the map of dilated namespaces is pinned (bpffs).
pub const DILATION_MAP_PIN: &str = "/sys/fs/bpf/softswitch/dilation_netns";

/// How long the kernel may take to free the program after its link's pin
/// is removed (the link is put from a workqueue, as bpf_dctcp's).
const RELEASE_WAIT: Duration = Duration::from_secs(5);

/// Linux's undilated values (include/net/tcp.h and the sysctl defaults).
pub mod linux {
    use std::time::Duration;
    /// `TCP_RTO_MIN`, the default of `tcp_rto_min_us`.
    pub const RTO_MIN: Duration = Duration::from_millis(200);
    /// `TCP_TIMEOUT_INIT`: the initial RTO of SYN and SYN-ACK.
    pub const TIMEOUT_INIT: Duration = Duration::from_secs(1);
    /// `TCP_RTO_MAX`, the default and the largest `tcp_rto_max_ms`.
    pub const RTO_MAX: Duration = Duration::from_secs(120);
    /// `tcp_comp_sack_delay_ns` default.
    pub const COMP_SACK_DELAY_NS: u64 = 1_000_000;
    /// `tcp_comp_sack_slack_ns` default.
    pub const COMP_SACK_SLACK_NS: u64 = 100_000;
    /// `tcp_tso_rtt_log` default (min RTT in units of 2^9 µs).
    pub const TSO_RTT_LOG: u32 = 9;
    /// `tcp_min_rtt_wlen` default, seconds.
    pub const MIN_RTT_WLEN_S: u64 = 300;
    /// Largest `tcp_min_rtt_wlen` the kernel takes (one day), seconds.
    pub const MIN_RTT_WLEN_MAX_S: u64 = 86_400;
    /// `tcp_invalid_ratelimit` default, ms.
    pub const INVALID_RATELIMIT_MS: u64 = 500;
    /// `TCP_ATO_MIN` / `TCP_DELACK_MIN`: the shortest delayed-ACK timer (HZ/25).
    pub const ATO_MIN: Duration = Duration::from_millis(40);
}

/// The host timers of a topology at dilation D, real-time values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostTimers {
    /// Minimum RTO: D × (the asked `rto_min`, else Linux's 200 ms).
    pub rto_min: Duration,
    /// Initial RTO of SYN and SYN-ACK: D × 1 s, at most [`linux::RTO_MAX`].
    pub syn_rto: Duration,
    /// `tcp_comp_sack_delay_ns`: D × 1 ms.
    pub comp_sack_delay_ns: u64,
    /// `tcp_comp_sack_slack_ns`: D × 100 µs.
    pub comp_sack_slack_ns: u64,
    /// `tcp_tso_rtt_log`: 9 + log2 D, rounded.
    pub tso_rtt_log: u32,
    /// `tcp_min_rtt_wlen`, seconds: D × 300 s, at most one day.
    pub min_rtt_wlen_s: u64,
    /// `tcp_invalid_ratelimit`, ms: D × 500 ms.
    pub invalid_ratelimit_ms: u64,
}

impl HostTimers {
    /// The timers at dilation `d` with the emulated minimum RTO `rto_min`
    /// (None: Linux's 200 ms).
    pub fn new(d: Dilation, rto_min: Option<Duration>) -> Self {
        let real = |t: Duration| d.to_real(t);
        HostTimers {
            rto_min: real(rto_min.unwrap_or(linux::RTO_MIN)),
            syn_rto: real(linux::TIMEOUT_INIT).min(linux::RTO_MAX),
            comp_sack_delay_ns: d.to_real_ns(linux::COMP_SACK_DELAY_NS),
            comp_sack_slack_ns: d.to_real_ns(linux::COMP_SACK_SLACK_NS),
            tso_rtt_log: linux::TSO_RTT_LOG + d.factor().log2().round() as u32,
            min_rtt_wlen_s: d
                .to_real_ns(linux::MIN_RTT_WLEN_S)
                .min(linux::MIN_RTT_WLEN_MAX_S),
            invalid_ratelimit_ms: d.to_real_ns(linux::INVALID_RATELIMIT_MS),
        }
    }

    /// The per-namespace sysctls that carry them.
    pub fn sysctls(&self) -> Vec<Sysctl> {
        vec![
            Sysctl::new("net.ipv4.tcp_rto_min_us", self.rto_min.as_micros()),
            Sysctl::new("net.ipv4.tcp_comp_sack_delay_ns", self.comp_sack_delay_ns),
            Sysctl::new("net.ipv4.tcp_comp_sack_slack_ns", self.comp_sack_slack_ns),
            Sysctl::new("net.ipv4.tcp_tso_rtt_log", self.tso_rtt_log),
            Sysctl::new("net.ipv4.tcp_min_rtt_wlen", self.min_rtt_wlen_s),
            Sysctl::new("net.ipv4.tcp_invalid_ratelimit", self.invalid_ratelimit_ms),
        ]
    }

    /// The route's `rto_min` in whole milliseconds (the metric's unit),
    /// rounded, at least 1.
    pub fn route_rto_min_ms(&self) -> u128 {
        ((self.rto_min.as_micros() + 500) / 1_000).max(1)
    }

    /// The map value the sock_ops program reads (`struct host_timers`).
    fn map_value(&self) -> [u8; 16] {
        let mut v = [0u8; 16];
        let us = u32::try_from(self.syn_rto.as_micros()).unwrap_or(u32::MAX);
        v[..4].copy_from_slice(&us.to_ne_bytes());
        v
    }
}

fn unavailable(reason: impl Into<String>) -> TopoError {
    TopoError::DilationUnavailable {
        reason: reason.into(),
    }
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> TopoError {
    move |source| TopoError::Io { context, source }
}

/// Where the cgroup v2 hierarchy is mounted (its root cgroup), from
/// /proc/self/mountinfo.
pub fn cgroup2_root() -> Result<PathBuf, TopoError> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo")
        .map_err(io("cannot read /proc/self/mountinfo".into()))?;
    mountinfo
        .lines()
        .find_map(|l| {
            let (before, after) = l.split_once(" - ")?;
            let mount_point = before.split_whitespace().nth(4)?;
            (after.split_whitespace().next()? == "cgroup2").then(|| PathBuf::from(mount_point))
        })
        .ok_or_else(|| {
            unavailable(
                "no cgroup v2 hierarchy is mounted (the sock_ops program attaches to its root); \
                 mount one: `mkdir -p /sys/fs/cgroup/unified && mount -t cgroup2 none \
                 /sys/fs/cgroup/unified`",
            )
        })
}

/// Whether the program is attached through softswitch's pinned link.
pub fn is_registered() -> bool {
    Path::new(DILATION_LINK_PIN).exists() && Path::new(DILATION_MAP_PIN).exists()
}

/// Loads the sock_ops program, attaches it to the root cgroup through a
/// BPF link, pins link and map, and returns the map's id (what
/// [`unregister`] waits on).
pub fn register() -> Result<u32, TopoError> {
    if DILATION_BPF_OBJECT.is_empty() {
        return Err(unavailable(format!(
            "this softswitch was built without its sock_ops program ({}); install clang and \
             bpftool (`sudo scripts/setup.sh`) and rebuild",
            DILATION_BPF_UNAVAILABLE.trim()
        )));
    }
    // Pins left by a registration the kernel has since dropped are stale.
    remove_pins()?;
    let cgroup = cgroup2_root()?;
    let pin_dir = Path::new(DILATION_LINK_PIN)
        .parent()
        .expect("pin has a directory");
    fs::create_dir_all(pin_dir).map_err(io(format!(
        "cannot create {} (is bpffs mounted on /sys/fs/bpf? `mount -t bpf bpf /sys/fs/bpf`)",
        pin_dir.display()
    )))?;
    let failed = |what: &str, e: libbpf_rs::Error| {
        unavailable(format!(
            "{what} failed: {e} (needs BPF sock_ops with bpf_get_netns_cookie, since Linux \
             5.15 — softswitch needs Linux ≥ 6.4, README, Requirements — and the kernel's \
             config at /proc/config.gz or /boot for CONFIG_HZ)"
        ))
    };
    let mut obj = ObjectBuilder::default()
        .open_memory(DILATION_BPF_OBJECT)
        .map_err(|e| failed("opening the embedded sock_ops object", e))?
        .load()
        .map_err(|e| failed("loading the sock_ops program", e))?;
    let map_id = {
        let mut map = obj
            .maps_mut()
            .find(|m| m.name() == MAP_NAME)
            .ok_or_else(|| unavailable(format!("the embedded object has no map `{MAP_NAME}`")))?;
        map.pin(DILATION_MAP_PIN)
            .map_err(|e| failed(&format!("pinning the map at {DILATION_MAP_PIN}"), e))?;
        map.info()
            .map_err(|e| failed("reading the map's id", e))?
            .info
            .id
    };
    let prog = obj
        .progs_mut()
        .find(|p| p.name() == PROG_NAME)
        .ok_or_else(|| unavailable(format!("the embedded object has no `{PROG_NAME}`")))?;
    let cg = fs::File::open(&cgroup).map_err(io(format!("cannot open {}", cgroup.display())))?;
    let attached = prog
        .attach_cgroup(cg.as_raw_fd())
        .map_err(|e| failed(&format!("attaching to the cgroup {}", cgroup.display()), e))
        .and_then(|mut link| {
            link.pin(DILATION_LINK_PIN)
                .map_err(|e| failed(&format!("pinning the link at {DILATION_LINK_PIN}"), e))
        });
    if let Err(e) = attached {
        let _ = remove_pins();
        return Err(e);
    }
    // Dropping the object and the link here leaves the pins as the only
    // holders: removing them detaches and frees everything.
    Ok(map_id)
}

fn pinned_map() -> Result<MapHandle, TopoError> {
    MapHandle::from_pinned_path(DILATION_MAP_PIN).map_err(|e| {
        unavailable(format!(
            "cannot open the map pinned at {DILATION_MAP_PIN}: {e}; run `softswitch topo down` \
             for every topology and try again"
        ))
    })
}

/// The id of the pinned map of dilated namespaces, if it is pinned (what
/// a check after `down` looks for with [`map_exists`]).
pub fn pinned_map_id() -> Option<u32> {
    let map = MapHandle::from_pinned_path(DILATION_MAP_PIN).ok()?;
    Some(map.info().ok()?.info.id)
}

/// Dilates the sockets of the namespace with cookie `cookie`.
pub fn add_netns(cookie: u64, timers: &HostTimers) -> Result<(), TopoError> {
    pinned_map()?
        .update(&cookie.to_ne_bytes(), &timers.map_value(), MapFlags::ANY)
        .map_err(|e| unavailable(format!("cannot add namespace {cookie} to the map: {e}")))
}

/// Stops dilating namespace `cookie`; `Ok(false)` if it was not there (or
/// the map is gone).
pub fn remove_netns(cookie: u64) -> Result<bool, TopoError> {
    if !Path::new(DILATION_MAP_PIN).exists() {
        return Ok(false);
    }
    Ok(pinned_map()?.delete(&cookie.to_ne_bytes()).is_ok())
}

/// What the map holds for namespace `cookie`: (initial RTO in µs, how many
/// sockets the program answered), for checks.
pub fn lookup_netns(cookie: u64) -> Result<Option<(u32, u64)>, TopoError> {
    let v = pinned_map()?
        .lookup(&cookie.to_ne_bytes(), MapFlags::ANY)
        .map_err(|e| unavailable(format!("cannot read the map: {e}")))?;
    Ok(v.filter(|v| v.len() >= 16).map(|v| {
        (
            u32::from_ne_bytes(v[..4].try_into().expect("4 bytes")),
            u64::from_ne_bytes(v[8..16].try_into().expect("8 bytes")),
        )
    }))
}

fn remove_pins() -> Result<bool, TopoError> {
    let mut removed = false;
    for pin in [DILATION_LINK_PIN, DILATION_MAP_PIN] {
        match fs::remove_file(pin) {
            Ok(()) => removed = true,
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(source) => {
                return Err(TopoError::Io {
                    context: format!("cannot remove {pin}"),
                    source,
                })
            }
        }
    }
    Ok(removed)
}

/// Whether the map with id `map_id` still exists (the program holds it
/// until the kernel frees the program).
pub fn map_exists(map_id: u32) -> bool {
    MapHandle::from_map_id(map_id).is_ok()
}

/// Detaches the program: removes both pins and returns once the kernel has
/// freed the program (its map `map_id` gone), so nothing of it is left
/// when `down` returns. Whether there was something to remove.
pub fn unregister(map_id: Option<u32>) -> Result<bool, TopoError> {
    let removed = remove_pins()?;
    let Some(id) = map_id else {
        return Ok(removed);
    };
    let start = Instant::now();
    while map_exists(id) {
        if start.elapsed() > RELEASE_WAIT {
            return Err(unavailable(format!(
                "the sock_ops program is still loaded {} s after its pins under \
                 /sys/fs/bpf/softswitch were removed: another process holds it open \
                 (`bpftool prog show name softswitch_dila` names it); stop that process",
                RELEASE_WAIT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(removed || map_id.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(x: f64) -> Dilation {
        Dilation::new(x).unwrap()
    }

    #[test]
    fn every_timer_is_d_times_the_undilated_one() {
        let t = HostTimers::new(d(4.0), None);
        assert_eq!(t.rto_min, Duration::from_millis(800));
        assert_eq!(t.syn_rto, Duration::from_secs(4));
        assert_eq!(t.comp_sack_delay_ns, 4_000_000);
        assert_eq!(t.comp_sack_slack_ns, 400_000);
        assert_eq!(t.tso_rtt_log, 11, "2^11 µs = 4 × 2^9 µs");
        assert_eq!(t.min_rtt_wlen_s, 1_200);
        assert_eq!(t.invalid_ratelimit_ms, 2_000);
        // The emulated RTO_min the user gives is stretched too.
        let t = HostTimers::new(d(4.0), Some(Duration::from_millis(5)));
        assert_eq!(t.rto_min, Duration::from_millis(20));
        assert_eq!(t.route_rto_min_ms(), 20);
        let s: Vec<String> = t.sysctls().iter().map(Sysctl::to_string).collect();
        assert!(
            s.contains(&"net.ipv4.tcp_rto_min_us=20000".to_owned()),
            "{s:?}"
        );
        assert!(s.contains(&"net.ipv4.tcp_comp_sack_delay_ns=4000000".to_owned()));
        assert!(s.contains(&"net.ipv4.tcp_tso_rtt_log=11".to_owned()));
    }

    #[test]
    fn undilated_timers_are_linuxs_defaults() {
        let t = HostTimers::new(Dilation::NONE, None);
        assert_eq!(t.rto_min, linux::RTO_MIN);
        assert_eq!(t.syn_rto, linux::TIMEOUT_INIT);
        assert_eq!(t.comp_sack_delay_ns, linux::COMP_SACK_DELAY_NS);
        assert_eq!(t.tso_rtt_log, linux::TSO_RTT_LOG);
        assert_eq!(t.min_rtt_wlen_s, linux::MIN_RTT_WLEN_S);
    }

    #[test]
    fn kernel_limits_cap_what_cannot_grow() {
        // The SYN RTO cannot pass the maximum RTO; the min-RTT window one day.
        let t = HostTimers::new(d(1000.0), None);
        assert_eq!(t.syn_rto, linux::RTO_MAX);
        assert_eq!(t.min_rtt_wlen_s, linux::MIN_RTT_WLEN_MAX_S);
        assert_eq!(t.rto_min, Duration::from_secs(200));
        // Fractional D: rounded to the metric's whole milliseconds, log2 rounded.
        let t = HostTimers::new(d(2.5), Some(Duration::from_millis(5)));
        assert_eq!(t.rto_min, Duration::from_micros(12_500));
        assert_eq!(t.route_rto_min_ms(), 13);
        assert_eq!(t.tso_rtt_log, 10);
    }

    #[test]
    fn map_value_is_the_c_struct() {
        // struct host_timers { __u32 syn_rto_us; __u32 _pad; __u64 syn_rto_set; }
        let v = HostTimers::new(d(4.0), None).map_value();
        assert_eq!(u32::from_ne_bytes(v[..4].try_into().unwrap()), 4_000_000);
        assert_eq!(&v[4..], &[0u8; 12]);
        assert!(DILATION_BPF_SOURCE.contains("__u32 syn_rto_us;"));
        assert!(DILATION_BPF_SOURCE.contains("__u64 syn_rto_set;"));
        assert!(DILATION_BPF_SOURCE.contains(&format!("int {PROG_NAME}(")));
        assert!(DILATION_BPF_SOURCE.contains(&format!("}} {MAP_NAME} SEC(\".maps\")")));
    }

    #[test]
    fn embedded_object_is_built_or_says_why_not() {
        if DILATION_BPF_OBJECT.is_empty() {
            assert!(!DILATION_BPF_UNAVAILABLE.trim().is_empty());
        } else {
            assert_eq!(&DILATION_BPF_OBJECT[..4], b"\x7fELF");
            let text = String::from_utf8_lossy(DILATION_BPF_OBJECT);
            assert!(text.contains("sockops") && text.contains(".kconfig"));
        }
    }
}
