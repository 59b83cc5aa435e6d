//! Root integration test of `scripts/slurm-sweep.sh` on a Slurm of its own:
//! a single-node cluster on this machine — munged, slurmctld and slurmd
//! with a key, a socket, ports, a configuration (`SLURM_CONF`) and state of
//! the test's own in a temporary directory — runs a 2-task array of
//! `scenarios/slurm-smoke.toml` (`--quick --repeat 2`) and the job that
//! merges it. Checks each task's node and shard, that the merged summary
//! has every combination once and is what `softswitch-exp report` gives on
//! the shard directories by hand, and that the merge job's batch file
//! refuses a missing shard. Everything it started is stopped, at the end
//! and on failure, and no namespace is left.
//!
//! Skipped unless root and unless Slurm and MUNGE are installed (Debian's
//! `slurm-wlm` and `munge`, which `scripts/setup.sh` installs): the test
//! installs nothing. It does not run beside a Slurm already running on the
//! machine (a slurmctld or slurmd). About 15 s.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use softswitch::exp::Scenario;

const TEST: &str = "a_sweep_runs_as_a_slurm_job_array_and_merges";

/// Every temporary directory of this test starts so: a daemon whose command
/// line names one is this test's.
const TAG: &str = "softswitch-slurm-test-";

/// What a task and the merge may take, all together: two shards of two
/// combinations of a few seconds each, one after the other on one node.
const JOBS_TIMEOUT: Duration = Duration::from_secs(150);

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `name` on PATH or in an sbin directory (root's daemons are there, and
/// PATH may not name them).
fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/sbin", "/sbin", "/usr/local/sbin", "/usr/bin"])
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file());
    found
}

/// Every process: pid, name (`comm`), command line.
fn processes() -> Vec<(i32, String, String)> {
    let mut out = Vec::new();
    for e in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let comm = fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        let cmdline = fs::read(e.path().join("cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        out.push((pid, comm.trim().to_owned(), cmdline.trim().to_owned()));
    }
    out
}

/// Processes that name a directory of this test: what an earlier run left.
fn ours_left() -> Vec<String> {
    let me = std::process::id() as i32;
    processes()
        .into_iter()
        .filter(|(pid, _, cmd)| *pid != me && cmd.contains(TAG))
        .map(|(pid, _, cmd)| format!("process {pid} ({cmd})"))
        .collect()
}

/// A Slurm daemon of someone else's on this machine.
fn foreign_slurm() -> Option<String> {
    processes()
        .into_iter()
        .find(|(_, comm, cmd)| (comm == "slurmctld" || comm == "slurmd") && !cmd.contains(TAG))
        .map(|(pid, comm, cmd)| format!("{comm} (pid {pid}: {cmd})"))
}

/// Runs `cmd` for at most `timeout`; None if it could not start or hung
/// (then it is killed).
fn output_within(cmd: &mut Command, timeout: Duration) -> Option<Output> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + timeout;
    while child.try_wait().ok()?.is_none() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().ok()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Two TCP ports nothing listens on now.
fn free_ports() -> (u16, u16) {
    let a = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let b = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    (
        a.local_addr().unwrap().port(),
        b.local_addr().unwrap().port(),
    )
}

/// This machine as a Slurm node: `slurmd -C`'s line (its name, real CPUs,
/// sockets, cores and memory).
fn node_line(slurmd: &Path) -> String {
    let o = Command::new(slurmd).arg("-C").output().unwrap();
    let line = String::from_utf8_lossy(&o.stdout)
        .lines()
        .find(|l| l.starts_with("NodeName="))
        .map(str::to_owned);
    line.unwrap_or_else(|| panic!("`slurmd -C` gave no NodeName line: {}", text(&o)))
}

fn tail(path: &Path, lines: usize) -> String {
    let t = fs::read_to_string(path).unwrap_or_else(|e| format!("({e})"));
    let all: Vec<&str> = t.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A single-node Slurm of the test's own; stopped, and its directory
/// removed, when dropped.
struct Cluster {
    dir: PathBuf,
    conf: PathBuf,
    /// munged, slurmctld, slurmd, in the order started.
    daemons: Vec<(&'static str, Child)>,
    /// slurmstepd processes that were there before (none, as no slurmd
    /// ran): any other one at the end is this cluster's.
    stepd_before: Vec<i32>,
}

impl Cluster {
    fn start() -> Cluster {
        let dir = std::env::temp_dir().join(format!("{TAG}{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let mut c = Cluster {
            conf: dir.join("slurm.conf"),
            dir,
            daemons: Vec::new(),
            stepd_before: processes()
                .into_iter()
                .filter(|(_, comm, _)| comm == "slurmstepd")
                .map(|(pid, _, _)| pid)
                .collect(),
        };
        let d = c.dir.clone();
        for sub in ["munge-key", "munge", "state", "spool", "log"] {
            fs::create_dir_all(d.join(sub)).unwrap();
        }
        // MUNGE: its key readable by root alone, in a directory of its own.
        fs::set_permissions(d.join("munge-key"), fs::Permissions::from_mode(0o700)).unwrap();
        let key = d.join("munge-key/munge.key");
        let mut bytes = vec![0u8; 1024];
        std::io::Read::read_exact(&mut fs::File::open("/dev/urandom").unwrap(), &mut bytes)
            .unwrap();
        fs::write(&key, bytes).unwrap();
        fs::set_permissions(&key, fs::Permissions::from_mode(0o400)).unwrap();
        let socket = d.join("munge/munge.socket");
        let munged = find_tool("munged").unwrap();
        let mut cmd = Command::new(munged);
        cmd.arg("--foreground")
            .arg("--force")
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--key-file={}", key.display()))
            .arg(format!(
                "--pid-file={}",
                d.join("munge/munged.pid").display()
            ))
            .arg(format!(
                "--seed-file={}",
                d.join("munge/munged.seed").display()
            ))
            .arg(format!("--log-file={}", d.join("log/munged.log").display()));
        c.spawn("munged", cmd);
        c.wait_for(Duration::from_secs(10), "munged's socket", |_| {
            socket.exists()
        });

        let (ctld_port, slurmd_port) = free_ports();
        let slurmd = find_tool("slurmd").unwrap();
        let node = node_line(&slurmd);
        let host = node
            .split_whitespace()
            .next()
            .and_then(|w| w.strip_prefix("NodeName="))
            .unwrap()
            .to_owned();
        let p = |s: &str| d.join(s).display().to_string();
        let conf = format!(
            "# A single-node Slurm for netns-tests/slurm.rs; nothing here is shared.
ClusterName=softswitchtest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={socket}
StateSaveLocation={state}
SlurmdSpoolDir={spool}
SlurmctldPidFile={ctld_pid}
SlurmdPidFile={slurmd_pid}
SlurmctldLogFile={ctld_log}
SlurmdLogFile={slurmd_log}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/linear
SchedulerType=sched/builtin
MpiDefault=none
MailProg=/bin/true
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
MinJobAge=600
KillWait=10
{node} NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP
",
            socket = socket.display(),
            state = p("state"),
            spool = p("spool"),
            ctld_pid = p("slurmctld.pid"),
            slurmd_pid = p("slurmd.pid"),
            ctld_log = p("log/slurmctld.log"),
            slurmd_log = p("log/slurmd.log"),
        );
        fs::write(&c.conf, conf).unwrap();
        for (name, args) in [("slurmctld", &["-D", "-i"][..]), ("slurmd", &["-D"][..])] {
            let mut cmd = Command::new(find_tool(name).unwrap());
            cmd.args(args).arg("-f").arg(&c.conf);
            c.spawn(name, cmd);
        }
        c.wait_for(Duration::from_secs(60), "the node idle", |c| {
            c.query(&["sinfo", "-h", "-N", "-o", "%t"])
                .is_some_and(|s| s.trim() == "idle")
        });
        c
    }

    /// Starts a daemon in the foreground, output to `log/<name>.out`.
    fn spawn(&mut self, name: &'static str, mut cmd: Command) {
        let log = fs::File::create(self.dir.join(format!("log/{name}.out"))).unwrap();
        let child = cmd
            .env("SLURM_CONF", &self.conf)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        self.daemons.push((name, child));
    }

    /// Waits for `ready`; panics with the daemons' logs if it does not come
    /// or a daemon exits.
    fn wait_for(&mut self, timeout: Duration, what: &str, ready: impl Fn(&Cluster) -> bool) {
        let deadline = Instant::now() + timeout;
        while !ready(self) {
            let exited = self
                .daemons
                .iter_mut()
                .find_map(|(name, child)| Some((*name, child.try_wait().ok()??)));
            if let Some((name, st)) = exited {
                panic!(
                    "{name} exited ({st}) while waiting for {what}\n{}",
                    self.logs()
                );
            }
            assert!(
                Instant::now() < deadline,
                "no {what} after {timeout:?}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// A command of this cluster's (`SLURM_CONF` set).
    fn cmd(&self, prog: &str) -> Command {
        let mut c = Command::new(prog);
        c.env("SLURM_CONF", &self.conf);
        c
    }

    /// A client command's stdout, if it succeeded within 20 s.
    fn query(&self, args: &[&str]) -> Option<String> {
        let o = output_within(self.cmd(args[0]).args(&args[1..]), Duration::from_secs(20))?;
        o.status
            .success()
            .then(|| String::from_utf8_lossy(&o.stdout).into_owned())
    }

    /// The daemons' logs and the jobs' logs, for a failure message.
    fn logs(&self) -> String {
        let mut s = String::new();
        let mut files = vec![
            self.dir.join("log/munged.out"),
            self.dir.join("log/slurmctld.log"),
            self.dir.join("log/slurmd.log"),
        ];
        let mut jobs: Vec<PathBuf> = fs::read_dir(self.dir.join("sweep/logs"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect();
        jobs.sort();
        files.extend(jobs);
        for f in files {
            s += &format!("--- {} (last lines)\n{}\n", f.display(), tail(&f, 25));
        }
        s
    }

    /// Stops everything this cluster started — its jobs, slurmctld, slurmd,
    /// munged, any slurmstepd or job process left — and says what had to
    /// be killed rather than stopping on its own.
    fn stop(&mut self) -> Vec<String> {
        let mut killed = Vec::new();
        if self.daemons.is_empty() {
            return killed;
        }
        let ctld_up = self
            .daemons
            .iter_mut()
            .any(|(n, c)| *n == "slurmctld" && matches!(c.try_wait(), Ok(None)));
        if ctld_up {
            // Cancel what is queued or running, then shut the daemons down.
            if let Some(ids) = self.query(&["squeue", "-h", "-o", "%A"]) {
                let ids: Vec<&str> = ids.split_whitespace().collect();
                if !ids.is_empty() {
                    eprintln!("cancelling jobs left: {ids:?}");
                    let _ = output_within(self.cmd("scancel").args(&ids), Duration::from_secs(20));
                    let deadline = Instant::now() + Duration::from_secs(30);
                    while Instant::now() < deadline
                        && self
                            .query(&["squeue", "-h", "-o", "%A"])
                            .is_some_and(|s| !s.trim().is_empty())
                    {
                        std::thread::sleep(Duration::from_millis(500));
                    }
                }
            }
            let _ = output_within(
                self.cmd("scontrol").arg("shutdown"),
                Duration::from_secs(20),
            );
        }
        // slurmd and slurmctld end on the shutdown; munged on SIGTERM.
        let deadline = Instant::now() + Duration::from_secs(15);
        for (name, child) in self.daemons.iter_mut().rev() {
            if *name == "munged" {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(child.id() as i32),
                    nix::sys::signal::Signal::SIGTERM,
                );
            }
            loop {
                match child.try_wait() {
                    Ok(Some(_)) => break,
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(100))
                    }
                    _ => {
                        killed.push(format!("{name} (pid {}) did not stop", child.id()));
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                }
            }
        }
        self.daemons.clear();
        // A step daemon ends shortly after its job, and a job cancelled
        // above may still be removing its namespaces: give them time, then
        // kill what is left.
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.strays().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
        }
        for (pid, comm, cmd) in self.strays() {
            killed.push(format!("process {pid} ({comm}: {cmd})"));
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        killed
    }

    /// Live processes of this cluster's besides its daemons: a step daemon
    /// that was not there before, anything working in or naming its
    /// directory. (An exited one not yet reaped has no command line.)
    fn strays(&self) -> Vec<(i32, String, String)> {
        let me = std::process::id() as i32;
        processes()
            .into_iter()
            .filter(|(pid, comm, cmd)| {
                let stepd = comm == "slurmstepd" && !self.stepd_before.contains(pid);
                let in_dir = fs::read_link(format!("/proc/{pid}/cwd"))
                    .is_ok_and(|cwd| cwd.starts_with(&self.dir))
                    || cmd.contains(TAG);
                *pid != me && !cmd.is_empty() && (stepd || in_dir)
            })
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let killed = self.stop();
        if !killed.is_empty() {
            eprintln!("slurm test cleanup: killed {killed:?}");
        }
        // A run killed mid-way may have left its namespaces: remove them.
        for k in 0..2 {
            let m = self.dir.join(format!("sweep/shard-{k}/manifest.json"));
            if let Some(prefix) = fs::read_to_string(m)
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .and_then(|v| v["prefix"].as_str().map(str::to_owned))
            {
                let _ = softswitch::topo::down(&prefix);
            }
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn read_json(p: &Path) -> serde_json::Value {
    serde_json::from_str(&fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// `Key=value` of a `scontrol -o show job` line.
fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or("")
}

/// The number after `label` on a line of the script's output.
fn job_id(out: &str, label: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix(label))
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .unwrap_or_else(|| panic!("no `{label} N` line in the script's output:\n{out}"))
}

#[test]
fn a_sweep_runs_as_a_slurm_job_array_and_merges() {
    if common::skip_unless_root(TEST) {
        return;
    }
    let tools = [
        "munged",
        "slurmctld",
        "slurmd",
        "sbatch",
        "squeue",
        "sinfo",
        "scontrol",
        "scancel",
    ];
    if let Some(t) = tools.iter().find(|t| find_tool(t).is_none()) {
        eprintln!(
            "SKIP {TEST}: `{t}` is not installed (Debian's slurm-wlm and munge: run `sudo scripts/setup.sh`)"
        );
        return;
    }
    let left = ours_left();
    assert!(
        left.is_empty(),
        "an earlier run of this test left its Slurm behind: {left:?}"
    );
    if let Some(other) = foreign_slurm() {
        eprintln!(
            "SKIP {TEST}: a Slurm is already running on this machine ({other}); the test starts one of its own and does not run beside it"
        );
        return;
    }
    let t0 = Instant::now();
    let mut cluster = Cluster::start();
    eprintln!(
        "single-node Slurm up in {:.1} s ({})",
        t0.elapsed().as_secs_f64(),
        cluster.conf.display()
    );
    let out = cluster.dir.join("sweep");
    let exp = env!("CARGO_BIN_EXE_softswitch-exp");
    let scenario = repo().join("scenarios/slurm-smoke.toml");

    // Submit: the script prints the job ids and how to watch them.
    let o = output_within(
        cluster
            .cmd("bash")
            .arg(repo().join("scripts/slurm-sweep.sh"))
            .arg(&scenario)
            .args(["--shards", "2", "--out"])
            .arg(&out)
            .args(["--exp", exp, "--", "--quick", "--repeat", "2"]),
        Duration::from_secs(60),
    )
    .expect("slurm-sweep.sh ran within 60 s");
    let said = text(&o);
    eprintln!("{said}");
    assert!(o.status.success(), "slurm-sweep.sh failed: {said}");
    let array = job_id(&said, "array job:");
    let merge = job_id(&said, "merge job:");
    for want in [
        format!("squeue -j {array},{merge}"),
        format!("sacct -j {array},{merge}"),
        "--exclusive".to_owned(),
        format!("--dependency=afterany:{array}"),
    ] {
        assert!(said.contains(&want), "`{want}` not in:\n{said}");
    }

    // Wait for the array and the merge.
    let t1 = Instant::now();
    let ids = format!("{array},{merge}");
    loop {
        let q = cluster.query(&["squeue", "-h", "-j", &ids, "-o", "%i %T"]);
        if q.as_deref().is_some_and(|s| s.trim().is_empty()) {
            break;
        }
        assert!(
            t1.elapsed() < JOBS_TIMEOUT,
            "jobs {ids} not done after {JOBS_TIMEOUT:?} (squeue: {q:?})\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    eprintln!(
        "array and merge done in {:.1} s",
        t1.elapsed().as_secs_f64()
    );
    let show = |id: &str| {
        cluster
            .query(&["scontrol", "-o", "show", "job", id])
            .unwrap_or_else(|| panic!("scontrol show job {id} failed\n{}", cluster.logs()))
    };
    let tasks = show(&array);
    let cpus = std::thread::available_parallelism().unwrap().get();
    let mut seen = Vec::new();
    for line in tasks.lines() {
        let (task, state, exit) = (
            field(line, "ArrayTaskId"),
            field(line, "JobState"),
            field(line, "ExitCode"),
        );
        eprintln!(
            "task {array}_{task}: {state} exit {exit} on {} ({} CPUs, OverSubscribe={}), {} to {}",
            field(line, "NodeList"),
            field(line, "NumCPUs"),
            field(line, "OverSubscribe"),
            field(line, "StartTime"),
            field(line, "EndTime")
        );
        // Exit 3: every result written, but a repeat was NOT FAITHFUL (a
        // shared 2-CPU machine may not hold the link): still merged.
        assert!(
            (state, exit) == ("COMPLETED", "0:0") || (state, exit) == ("FAILED", "3:0"),
            "task {task}: {state} {exit}\n{}",
            cluster.logs()
        );
        // The whole node: exclusive, every CPU.
        assert_eq!(field(line, "OverSubscribe"), "NO", "{line}");
        assert_eq!(field(line, "NumCPUs"), cpus.to_string(), "{line}");
        assert_eq!(field(line, "JobName"), "softswitch-slurm-smoke", "{line}");
        seen.push((
            task.to_owned(),
            field(line, "StartTime").to_owned(),
            field(line, "EndTime").to_owned(),
        ));
    }
    seen.sort();
    let ids: Vec<&str> = seen.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(ids, ["0", "1"], "{tasks}");
    // One node, each task exclusive: one after the other (RFC 3339 times
    // of one clock compare as strings).
    let (a, b) = if seen[0].1 <= seen[1].1 {
        (&seen[0], &seen[1])
    } else {
        (&seen[1], &seen[0])
    };
    assert!(a.2 <= b.1, "tasks overlapped on one node: {seen:?}");
    let m = show(&merge);
    assert_eq!(
        (field(&m, "JobState"), field(&m, "ExitCode")),
        ("COMPLETED", "0:0"),
        "the merge job\n{}",
        cluster.logs()
    );

    // Each shard: its part, its log, nothing left of its namespaces.
    for k in 0..2 {
        let dir = out.join(format!("shard-{k}"));
        let manifest = read_json(&dir.join("manifest.json"));
        assert_eq!(manifest["shard"], format!("{k}/2"));
        let command = manifest["command"].as_str().unwrap_or_default();
        assert!(
            command.contains(&format!("--shard {k}/2")) && command.contains("--repeat 2"),
            "{command}"
        );
        let log = fs::read_to_string(out.join(format!("logs/shard-{k}.out"))).unwrap();
        for l in log.lines().filter(|l| l.starts_with("shard ")) {
            eprintln!("  logs/shard-{k}.out: {l}");
        }
        assert!(
            log.contains(&format!("shard {k}/2 of ")) && log.contains(&format!("{cpus} CPUs")),
            "{log}"
        );
        let prefix = manifest["prefix"].as_str().unwrap();
        assert_eq!(
            softswitch::exp::runner::leftovers(prefix, &dir),
            Vec::<String>::new()
        );
    }

    // The merge: every combination once, as `report` gives it by hand.
    let mut sc = Scenario::load(&scenario).unwrap();
    sc.repeat = 2;
    let mut want: Vec<String> = sc.combos().into_iter().map(|c| c.dir).collect();
    want.sort();
    let merged = read_json(&out.join("merged/summary.json"));
    let mut got: Vec<String> = merged["repeats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["dir"].as_str().unwrap().to_owned())
        .collect();
    got.sort();
    assert_eq!(got, want, "every combination once");
    assert_eq!(merged["points"].as_array().unwrap().len(), 2);
    let by_hand = cluster.dir.join("by-hand");
    let o = Command::new(exp)
        .arg("report")
        .arg(out.join("shard-0"))
        .arg(out.join("shard-1"))
        .arg("--out")
        .arg(&by_hand)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let hand = read_json(&by_hand.join("summary.json"));
    assert_eq!(merged["points"], hand["points"]);
    assert_eq!(merged["repeats"], hand["repeats"]);
    assert_eq!(merged["faithful"], hand["faithful"]);
    eprintln!(
        "merged: {} repeats of {} points, faithful: {}",
        got.len(),
        merged["points"].as_array().unwrap().len(),
        merged["faithful"]
    );

    // The merge job refuses shards missing, or of another split: run its
    // batch file as the job would, for a sweep of 3 shards.
    let o = Command::new("bash")
        .arg(repo().join("scripts/slurm/report.sbatch"))
        .arg(exp)
        .arg("3")
        .arg(&out)
        .output()
        .unwrap();
    let said = text(&o);
    assert_eq!(o.status.code(), Some(1), "{said}");
    for want in [
        "NOT MERGED: 3 of 3 shards missing or unfinished",
        "shard 0/3: ",
        "is not shard 0/3's",
        "shard 2/3: no ",
    ] {
        assert!(said.contains(want), "`{want}` not in: {said}");
    }

    // Stopped, removed, nothing left.
    let killed = cluster.stop();
    assert!(
        killed.is_empty(),
        "had to kill what should have stopped: {killed:?}"
    );
    let dir = cluster.dir.clone();
    drop(cluster);
    assert!(!dir.exists(), "{} left", dir.display());
    assert_eq!(ours_left(), Vec::<String>::new());
    eprintln!(
        "slurm sweep test: {:.1} s in all",
        t0.elapsed().as_secs_f64()
    );
}
