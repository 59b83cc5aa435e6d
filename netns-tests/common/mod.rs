//! Helpers for root integration tests that build host namespaces.
//!
//! [`TestTopo`] builds a topology under a prefix unique to this process and
//! test, and removes it in `Drop` — also when the test panics — together
//! with the processes and bridges the test started through it.
//!
//! ```ignore
//! mod common;
//! #[test]
//! fn my_test() {
//!     if common::skip_unless_root("my_test") { return; }
//!     let mut t = common::TestTopo::new(2);
//!     t.bridge_all();
//!     common::ping(&t.hosts[0], t.hosts[1].ip);
//! }
//! ```
#![allow(dead_code)] // each test binary uses a different subset

use std::io::Read;
use std::net::Ipv4Addr;
use std::ops::Deref;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use softswitch::topo::{self, Host, TopoConfig, Topology};

/// True (after printing a SKIP line) unless running as root: call as
/// `if skip_unless_root("name") { return; }`.
pub fn skip_unless_root(test: &str) -> bool {
    let uid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(str::to_owned))
        });
    if uid.as_deref() == Some("0") {
        false
    } else {
        eprintln!("SKIP {test}: needs root (network namespaces, veth, BPF); run with sudo");
        true
    }
}

/// True (after printing a SKIP line) if one of `tools` is not installed.
pub fn skip_unless_tools(test: &str, tools: &[&str]) -> bool {
    for tool in tools {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .stdout(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !found {
            eprintln!("SKIP {test}: `{tool}` is not installed (run `sudo scripts/setup.sh`)");
            return true;
        }
    }
    false
}

/// A prefix no other test of this or any other process uses:
/// `t` + per-process counter + pid, both base 36; at most 8 characters, so
/// up to 99 hosts fit the 15-character interface names.
pub fn unique_prefix() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("t{:0>2}{}", base36(n % 1296), base36(std::process::id()))
}

fn base36(mut n: u32) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut s = Vec::new();
    loop {
        s.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    s.reverse();
    String::from_utf8(s).expect("ascii")
}

/// A topology that is torn down when dropped.
pub struct TestTopo {
    pub topo: Topology,
    bridges: Vec<String>,
    children: Vec<Child>,
}

impl TestTopo {
    /// `hosts` hosts with the default config (DCTCP, ECN, 10.99.0.0/24).
    pub fn new(hosts: usize) -> Self {
        Self::with(|c| c.hosts = hosts)
    }

    /// The default config under a unique prefix, changed by `edit`.
    pub fn with(edit: impl FnOnce(&mut TopoConfig)) -> Self {
        let mut cfg = TopoConfig {
            prefix: unique_prefix(),
            ..TopoConfig::default()
        };
        edit(&mut cfg);
        let prefix = cfg.prefix.clone();
        match topo::up(&cfg) {
            Ok(topo) => Self {
                topo,
                bridges: Vec::new(),
                children: Vec::new(),
            },
            Err(e) => panic!("topo up --prefix {prefix} failed: {e}"),
        }
    }

    /// Joins all switch-side veths with a Linux bridge `<prefix>br` (a
    /// stand-in for the switch); removed on drop.
    pub fn bridge_all(&mut self) -> String {
        let br = format!("{}br", self.topo.prefix);
        run_ok(Command::new("ip").args(["link", "add", &br, "type", "bridge"]));
        self.bridges.push(br.clone());
        let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{br}/disable_ipv6"), "1");
        for sw in self.topo.switch_ifs() {
            run_ok(Command::new("ip").args(["link", "set", &sw, "master", &br]));
        }
        run_ok(Command::new("ip").args(["link", "set", &br, "up"]));
        br
    }

    /// Starts `args` inside the namespace of `hosts[host]`, output captured;
    /// killed on drop if still running. Returns a handle for [`Self::wait`].
    pub fn spawn(&mut self, host: usize, args: &[&str]) -> usize {
        let child = self.topo.hosts[host]
            .exec(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn {args:?}: {e}"));
        self.children.push(child);
        self.children.len() - 1
    }

    /// Waits up to `timeout` for a spawned process; panics if it hangs or
    /// fails. Returns its stdout.
    pub fn wait(&mut self, handle: usize, timeout: Duration) -> String {
        let child = &mut self.children[handle];
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "process {handle} hung for {timeout:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut out = String::new();
        let mut err = String::new();
        if let Some(mut s) = child.stdout.take() {
            let _ = s.read_to_string(&mut out);
        }
        if let Some(mut s) = child.stderr.take() {
            let _ = s.read_to_string(&mut err);
        }
        assert!(
            status.success(),
            "process {handle} failed ({status}): {out}{err}"
        );
        out
    }

    /// Tears down now, returning `down`'s report (drop does the same, quietly).
    pub fn down(mut self) -> topo::DownReport {
        self.cleanup_children_and_bridges();
        let prefix = self.topo.prefix.clone();
        let report = topo::down(&prefix).unwrap_or_else(|e| panic!("topo down: {e}"));
        self.topo.prefix.clear(); // Drop: nothing left to do
        report
    }

    fn cleanup_children_and_bridges(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.children.clear();
        for br in self.bridges.drain(..) {
            let _ = Command::new("ip").args(["link", "del", &br]).status();
        }
    }
}

impl Deref for TestTopo {
    type Target = Topology;
    fn deref(&self) -> &Topology {
        &self.topo
    }
}

impl Drop for TestTopo {
    fn drop(&mut self) {
        self.cleanup_children_and_bridges();
        if self.topo.prefix.is_empty() {
            return;
        }
        if let Err(e) = topo::down(&self.topo.prefix) {
            // Never panic in drop (it may run during a panic): say what is left.
            eprintln!("TestTopo: cleanup of `{}` failed: {e}", self.topo.prefix);
        }
    }
}

/// Runs `cmd`, panics with its stderr unless it succeeds; returns stdout.
pub fn run_ok(cmd: &mut Command) -> String {
    let out: Output = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Pings `to` from `from` (3 tries, 1 s each); panics if no reply.
pub fn ping(from: &Host, to: Ipv4Addr) {
    run_ok(&mut from.exec(&["ping", "-c", "1", "-w", "3", "-q", &to.to_string()]));
}

/// Names of network namespaces and root-namespace links starting with
/// `<prefix>-` (what `down` must leave empty).
pub fn leftovers(prefix: &str) -> Vec<String> {
    let start = format!("{prefix}-");
    let mut left = Vec::new();
    for dir in ["/run/netns", "/sys/class/net"] {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with(&start) {
                    left.push(format!("{dir}/{name}"));
                }
            }
        }
    }
    left
}

/// Source of the CE-marking tc program (see the file's header).
pub const CE_MARK_SOURCE: &str = include_str!("ce_mark.bpf.c");

/// Sets CE on `per_mille`/1000 of the ECN-capable IPv4 packets arriving at
/// `host` (a clsact ingress BPF filter on its eth0) — a stand-in for a
/// marking switch. Removed with the namespace.
pub fn attach_ce_marker(host: &Host, per_mille: u32) {
    let dir =
        std::env::temp_dir().join(format!("softswitch-ce-{}-{}", std::process::id(), host.ns));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("ce_mark.bpf.c");
    let obj = dir.join("ce_mark.o");
    std::fs::write(&src, CE_MARK_SOURCE).unwrap();
    let mut clang = Command::new("clang");
    clang
        .args([
            "-O2",
            "-g",
            "-target",
            "bpf",
            "-I/usr/include/x86_64-linux-gnu",
        ])
        .arg(format!("-DMARK_PER_MILLE={per_mille}"))
        .arg("-c")
        .arg(&src)
        .arg("-o")
        .arg(&obj);
    run_ok(&mut clang);
    run_ok(&mut host.exec(&["tc", "qdisc", "add", "dev", &host.host_if, "clsact"]));
    let obj = obj.to_string_lossy().into_owned();
    run_ok(&mut host.exec(&[
        "tc",
        "filter",
        "add",
        "dev",
        &host.host_if,
        "ingress",
        "bpf",
        "da",
        "obj",
        &obj,
        "sec",
        "tc",
    ]));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `TcpExt` counter (e.g. `TCPDeliveredCE`) of `host`'s namespace, from
/// /proc/net/netstat.
pub fn tcp_ext_counter(host: &Host, name: &str) -> u64 {
    let text = run_ok(&mut host.exec(&["cat", "/proc/net/netstat"]));
    let mut lines = text.lines();
    while let (Some(keys), Some(values)) = (lines.next(), lines.next()) {
        if !keys.starts_with("TcpExt:") {
            continue;
        }
        let keys = keys.split_whitespace().skip(1);
        let values = values.split_whitespace().skip(1);
        for (k, v) in keys.zip(values) {
            if k == name {
                return v.parse().expect("counter value");
            }
        }
    }
    panic!("no TcpExt counter {name}");
}
