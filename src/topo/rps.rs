//! Where the hosts' receive processing runs (`topo up --rps`): Receive
//! Packet Steering on each host's interface.
//!
//! A copy-mode AF_XDP tx kick on a veth delivers the frames to the peer in
//! the switch's own `sendto`, and unless told otherwise the kernel runs the
//! receiving host's whole stack (IP, TCP, waking the application) right
//! there, on the switch's CPU: the data path stalls inside its kicks, and
//! a backlogged port loses link time (BENCHMARKS.md, "Lost link time
//! against time dilation"). With RPS the kick only queues each frame to
//! the backlog of a CPU in the set and raises an interrupt there; the host
//! stack runs on that CPU. `auto` is every CPU this process may use except
//! the highest-numbered one, the CPU `softswitch --cpu last` pins the data
//! path to. Linux's default (no RPS) is kept unless asked for.

use std::fmt;
use std::str::FromStr;

/// The CPUs that do the hosts' receive processing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RxCpus {
    /// Linux's default: no steering (the CPU that delivers the frame).
    #[default]
    Kernel,
    /// Every CPU this process may use but the highest-numbered one (the
    /// one `softswitch --cpu last` takes).
    Auto,
    /// These CPUs (bit `i`: CPU `i`), never empty.
    Mask(u64),
}

impl RxCpus {
    /// The mask to write to `rps_cpus`, given the CPUs this process may use
    /// (as a mask); None: leave Linux's default. `Auto` on a single CPU
    /// steers nowhere (there is no other CPU).
    pub fn mask(self, allowed: u64) -> Option<u64> {
        match self {
            RxCpus::Kernel => None,
            RxCpus::Mask(m) => Some(m),
            RxCpus::Auto => {
                let last = 63 - allowed.leading_zeros() as u64;
                let rest = allowed & !(1u64 << last);
                (allowed != 0 && rest != 0).then_some(rest)
            }
        }
    }

    /// The CPUs this process may use, as a mask (CPUs 0..64).
    pub fn allowed() -> u64 {
        crate::cpu::allowed_cpus()
            .map(|cpus| to_mask(&cpus))
            .unwrap_or(1)
    }
}

/// CPU numbers as a mask (those below 64).
fn to_mask(cpus: &[u32]) -> u64 {
    cpus.iter().filter(|&&c| c < 64).fold(0, |m, &c| m | 1 << c)
}

impl FromStr for RxCpus {
    type Err = String;
    /// `auto`, `off`, or a CPU list as the kernel writes one: `1`, `0-2`,
    /// `0,3`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "auto" => Ok(RxCpus::Auto),
            "off" | "kernel" => Ok(RxCpus::Kernel),
            list => match crate::cpu::parse_cpu_list(list) {
                Ok(cpus) if cpus.iter().all(|&c| c < 64) => Ok(RxCpus::Mask(to_mask(&cpus))),
                Ok(_) => Err(format!("rps `{s}`: CPUs run from 0 to 63 here")),
                Err(e) => Err(format!(
                    "rps `{s}`: {e} — give `auto` (every CPU but the switch's `--cpu last`), \
                     `off`, or a CPU list such as `1`, `0-2` or `0,3`"
                )),
            },
        }
    }
}

impl fmt::Display for RxCpus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RxCpus::Kernel => write!(f, "off"),
            RxCpus::Auto => write!(f, "auto"),
            RxCpus::Mask(m) => {
                let cpus: Vec<u32> = (0..64).filter(|i| m & (1 << i) != 0).collect();
                write!(f, "{}", crate::cpu::format_cpu_list(&cpus))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_auto_and_off_parse() {
        assert_eq!("1".parse(), Ok(RxCpus::Mask(0b10)));
        assert_eq!("0-2".parse(), Ok(RxCpus::Mask(0b111)));
        assert_eq!("0,3".parse(), Ok(RxCpus::Mask(0b1001)));
        assert_eq!("1-2,5".parse(), Ok(RxCpus::Mask(0b100110)));
        assert_eq!("auto".parse(), Ok(RxCpus::Auto));
        assert_eq!("off".parse(), Ok(RxCpus::Kernel));
        for bad in ["", "x", "2-1", "-1"] {
            let e = bad.parse::<RxCpus>().unwrap_err();
            assert!(e.contains("give `auto`"), "{bad}: {e}");
        }
        let e = "64".parse::<RxCpus>().unwrap_err();
        assert!(e.contains("0 to 63"), "{e}");
        assert_eq!(RxCpus::Mask(0b1001).to_string(), "0,3");
        assert_eq!(RxCpus::Mask(0b111).to_string(), "0-2");
        assert_eq!("0,3".parse::<RxCpus>().unwrap().to_string(), "0,3");
    }

    #[test]
    fn auto_leaves_the_last_allowed_cpu_to_the_switch() {
        assert_eq!(RxCpus::Auto.mask(0b11), Some(0b01));
        assert_eq!(RxCpus::Auto.mask(0b1111), Some(0b0111));
        // Allowed CPUs 1 and 4: the switch takes 4.
        assert_eq!(RxCpus::Auto.mask(0b10010), Some(0b00010));
        // One CPU: nowhere else to steer to.
        assert_eq!(RxCpus::Auto.mask(0b1), None);
        assert_eq!(RxCpus::Auto.mask(0), None);
        assert_eq!(RxCpus::Kernel.mask(0b11), None);
        assert_eq!(RxCpus::Mask(0b100).mask(0b11), Some(0b100));
        assert!(RxCpus::allowed() != 0);
    }
}
