//! `--cpu`: pinning the data path to one CPU.
//!
//! The data path is one busy-polling thread. On a machine with cores to
//! spare, pinning it to a core kept free of other work (`isolcpus`, a
//! cpuset) stops the scheduler from migrating it and from putting other
//! threads beside it. It is off by default: on the 2-vCPU machines the
//! project is measured on, pinning alone changes nothing measurable, and
//! moving the hosts' stack work off the switch's CPU (Receive Packet
//! Steering) raised unshaped throughput but made the hosts' ACKs arrive in
//! batches, so a 1 Gbit/s port overflowed its buffer (BENCHMARKS.md,
//! "Where the CPU goes").
//!
//! Everything here but [`allowed_cpus`], [`pin_current_thread`] and
//! [`machine_steal_ns`] is pure.

use std::fmt;

/// Which CPU the data-path thread runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CpuChoice {
    /// Do not pin; the scheduler decides.
    #[default]
    Unpinned,
    /// The highest-numbered CPU this process may use, if it may use two or
    /// more (on one CPU nothing is pinned).
    Last,
    /// This CPU.
    Cpu(u32),
}

impl std::str::FromStr for CpuChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "last" => Ok(Self::Last),
            "none" | "off" => Ok(Self::Unpinned),
            n => n.parse::<u32>().map(Self::Cpu).map_err(|_| {
                format!("CPU `{s}`: use a CPU number (e.g. 1), `last` (the highest-numbered CPU) or `none` (do not pin)")
            }),
        }
    }
}

impl fmt::Display for CpuChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Last => f.write_str("last"),
            Self::Unpinned => f.write_str("none"),
            Self::Cpu(n) => write!(f, "{n}"),
        }
    }
}

impl CpuChoice {
    /// The CPU to pin to, given the CPUs this process may use (sorted or
    /// not). `Ok(None)`: do not pin.
    pub fn resolve(self, allowed: &[u32]) -> Result<Option<u32>, String> {
        match self {
            Self::Unpinned => Ok(None),
            Self::Last if allowed.len() >= 2 => Ok(allowed.iter().copied().max()),
            Self::Last => Ok(None),
            Self::Cpu(n) if allowed.contains(&n) => Ok(Some(n)),
            Self::Cpu(n) => Err(format!(
                "CPU {n} is not available to softswitch (it may use CPUs {}): pick one of those or `none`",
                format_cpu_list(allowed)
            )),
        }
    }
}

/// Parses a kernel CPU list (`0-3,8,10-11`, as in `Cpus_allowed_list` or
/// `/sys/devices/system/cpu/online`) into sorted, distinct CPU numbers.
pub fn parse_cpu_list(s: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let bad = || format!("bad CPU list `{}`", s.trim());
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (
                a.parse::<u32>().map_err(|_| bad())?,
                b.parse::<u32>().map_err(|_| bad())?,
            ),
            None => {
                let n = part.parse::<u32>().map_err(|_| bad())?;
                (n, n)
            }
        };
        if lo > hi || hi - lo > 65_535 {
            return Err(bad());
        }
        out.extend(lo..=hi);
    }
    out.sort_unstable();
    out.dedup();
    if out.is_empty() {
        return Err(format!("empty CPU list `{}`", s.trim()));
    }
    Ok(out)
}

/// Formats CPU numbers as a kernel CPU list (`0-3,8`).
pub fn format_cpu_list(cpus: &[u32]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// CPUs this process may run on (its `Cpus_allowed_list`).
pub fn allowed_cpus() -> Result<Vec<u32>, String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("cannot read /proc/self/status: {e}"))?;
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .ok_or("no Cpus_allowed_list in /proc/self/status")?;
    parse_cpu_list(line)
}

/// Pins the calling thread to one CPU (`sched_setaffinity`). Threads it
/// spawns afterwards inherit the pinning.
pub fn pin_current_thread(cpu: u32) -> std::io::Result<()> {
    let mut set = nix::sched::CpuSet::new();
    // EINVAL: beyond CPU_SETSIZE.
    set.set(cpu as usize).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("CPU {cpu} is beyond CPU_SETSIZE"),
        )
    })?;
    // pid 0: the calling thread.
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)?;
    Ok(())
}

/// The CPUs the calling thread may use now, but `cpu`. Read it before
/// pinning the thread to `cpu`: `allowed_cpus` reads the process's main
/// thread.
pub fn allowed_but(cpu: u32) -> Result<Vec<u32>, String> {
    Ok(allowed_cpus()?.into_iter().filter(|&c| c != cpu).collect())
}

/// Lets the calling thread run on `cpus` (a no-op when empty).
pub fn set_current_thread_cpus(cpus: &[u32]) -> std::io::Result<()> {
    if cpus.is_empty() {
        return Ok(());
    }
    let mut set = nix::sched::CpuSet::new();
    for &c in cpus {
        set.set(c as usize)
            .map_err(|_| std::io::Error::other(format!("CPU {c} is beyond CPU_SETSIZE")))?;
    }
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)?;
    Ok(())
}

/// The calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), ns: exact
/// (the kernel brings the running thread's time up to date), and without
/// steal time where the kernel accounts steal (paravirt guests).
pub fn thread_cpu_ns() -> Option<u64> {
    let ts = nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID).ok()?;
    Some(ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64)
}

/// A thread's or process's `schedstat` line (`run_ns wait_ns timeslices`):
/// time on a CPU and time runnable but waiting for one, ns.
pub fn parse_schedstat(s: &str) -> Option<(u64, u64)> {
    let mut f = s.split_whitespace().map(|v| v.parse::<u64>().ok());
    Some((f.next()??, f.next()??))
}

/// The `steal` column of `/proc/stat`'s aggregate `cpu` line, in clock
/// ticks: time, summed over the machine's vCPUs, that the hypervisor ran
/// other work while a vCPU of this guest had something to run.
pub fn parse_proc_stat_steal(s: &str) -> Option<u64> {
    let line = s
        .lines()
        .find(|l| l.split_whitespace().next() == Some("cpu"))?;
    // cpu user nice system idle iowait irq softirq steal guest guest_nice
    line.split_whitespace().nth(8)?.parse().ok()
}

/// The whole machine's steal time so far, ns (all vCPUs together): on a
/// VM whose host takes the CPUs away at times, the part of a run in which
/// no setting of softswitch's could hold a link. `None` where `/proc/stat`
/// has no steal column.
pub fn machine_steal_ns() -> Option<u64> {
    let ticks = parse_proc_stat_steal(&std::fs::read_to_string("/proc/stat").ok()?)?;
    // /proc/stat counts in USER_HZ, which the kernel fixes at 100 on every
    // architecture but Alpha, whatever its own HZ.
    Some(ticks * 10_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_is_the_eighth_column_of_the_cpu_line() {
        // /proc/stat of this development VM, cut short.
        let s = "cpu  6624335 678619 1218373 3381282 27445 0 764652 158513 0 0\n\
                 cpu0 3312167 339309 609186 1690641 13722 0 382326 79256 0 0\n\
                 intr 1 2 3\n";
        assert_eq!(parse_proc_stat_steal(s), Some(158_513));
        // Old kernels without the column, and garbage: no value, no panic.
        assert_eq!(parse_proc_stat_steal("cpu  1 2 3 4 5 6 7\n"), None);
        assert_eq!(parse_proc_stat_steal("cpu0 1 2 3 4 5 6 7 8\n"), None);
        assert_eq!(parse_proc_stat_steal(""), None);
        assert!(machine_steal_ns().is_some(), "this machine's /proc/stat");
    }

    #[test]
    fn cpu_lists_parse_and_format() {
        assert_eq!(parse_cpu_list("0-1\n").unwrap(), vec![0, 1]);
        assert_eq!(
            parse_cpu_list("0-3,8,10-11").unwrap(),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(parse_cpu_list("5,1,1").unwrap(), vec![1, 5]);
        for bad in ["", "a", "3-1", "1-", "-2", "0-99999999"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad:?}");
        }
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(format_cpu_list(&[1]), "1");
        let v = vec![0, 2, 3, 4, 7, 31, 32, 33, 64];
        assert_eq!(parse_cpu_list(&format_cpu_list(&v)).unwrap(), v);
    }

    #[test]
    fn last_takes_the_last_cpu_only_when_there_are_two() {
        assert_eq!(CpuChoice::Last.resolve(&[0, 1]).unwrap(), Some(1));
        assert_eq!(CpuChoice::Last.resolve(&[3, 0, 2]).unwrap(), Some(3));
        assert_eq!(CpuChoice::Last.resolve(&[0]).unwrap(), None);
        assert_eq!(CpuChoice::Unpinned.resolve(&[0, 1]).unwrap(), None);
        assert_eq!(CpuChoice::Cpu(0).resolve(&[0, 1]).unwrap(), Some(0));
        let e = CpuChoice::Cpu(5).resolve(&[0, 1]).unwrap_err();
        assert!(
            e.contains("CPU 5") && e.contains("0-1") && e.contains("none"),
            "{e}"
        );
    }

    #[test]
    fn choices_parse_with_a_helpful_error() {
        assert_eq!("last".parse::<CpuChoice>().unwrap(), CpuChoice::Last);
        assert_eq!("none".parse::<CpuChoice>().unwrap(), CpuChoice::Unpinned);
        assert_eq!("3".parse::<CpuChoice>().unwrap(), CpuChoice::Cpu(3));
        let e = "auto".parse::<CpuChoice>().unwrap_err();
        assert!(e.contains("last") && e.contains("none"), "{e}");
        for c in [CpuChoice::Last, CpuChoice::Unpinned, CpuChoice::Cpu(7)] {
            assert_eq!(c.to_string().parse::<CpuChoice>().unwrap(), c);
        }
    }

    #[test]
    fn pinning_a_thread_leaves_it_one_cpu() {
        let cpu = *allowed_cpus().unwrap().last().unwrap();
        let after = std::thread::spawn(move || {
            pin_current_thread(cpu).unwrap();
            nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).unwrap()
        })
        .join()
        .unwrap();
        assert!(after.is_set(cpu as usize).unwrap());
        let count = (0..nix::sched::CpuSet::count())
            .filter(|&c| after.is_set(c).unwrap())
            .count();
        assert_eq!(count, 1);
        let e = pin_current_thread(1 << 20).unwrap_err();
        assert!(e.to_string().contains("CPU_SETSIZE"), "{e}");
    }

    #[test]
    fn this_process_has_cpus() {
        let a = allowed_cpus().unwrap();
        assert!(!a.is_empty());
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert!(a.len() >= n, "allowed {a:?}, available_parallelism {n}");
    }
}
