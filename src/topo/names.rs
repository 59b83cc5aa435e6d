//! Names and addresses of a topology: pure functions, no I/O.
//!
//! Every object `up` creates carries the topology's prefix so that `down` can
//! find it again by name alone, even after a crash:
//!
//! | object                      | name            | example     |
//! |-----------------------------|-----------------|-------------|
//! | host network namespace      | `<prefix>-h<i>` | `ss-h1`     |
//! | switch-side veth (root ns)  | `<prefix>-h<i>-sw` | `ss-h1-sw` |
//! | host-side veth (in the ns)  | `eth0`          | `eth0`      |
//!
//! Host `i` (1-based) gets the `i`-th address of the subnet and the locally
//! administered MAC `02:00:00:00:<i / 256>:<i % 256>`.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

/// Longest interface name Linux accepts (IFNAMSIZ - 1).
pub const IFNAME_MAX: usize = 15;

/// Name of the host-side veth inside each namespace.
pub const HOST_IF: &str = "eth0";

/// An IPv4 network, e.g. `10.99.0.0/24`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Net {
    network: Ipv4Addr,
    prefix_len: u8,
}

impl Ipv4Net {
    /// `addr/prefix_len`; host bits of `addr` are cleared. `None` if
    /// `prefix_len > 32`.
    pub fn new(addr: Ipv4Addr, prefix_len: u8) -> Option<Self> {
        if prefix_len > 32 {
            return None;
        }
        let network = Ipv4Addr::from(u32::from(addr) & Self::mask_bits(prefix_len));
        Some(Self {
            network,
            prefix_len,
        })
    }

    fn mask_bits(prefix_len: u8) -> u32 {
        if prefix_len == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(prefix_len))
        }
    }

    /// The network address (host bits zero).
    pub fn network(&self) -> Ipv4Addr {
        self.network
    }

    /// Prefix length in bits.
    pub fn prefix_len(&self) -> u8 {
        self.prefix_len
    }

    /// How many host addresses the subnet has (without network and broadcast
    /// addresses; a /31 or /32 has none usable for this purpose).
    pub fn host_capacity(&self) -> u64 {
        let size = 1u64 << (32 - u32::from(self.prefix_len));
        size.saturating_sub(2)
    }

    /// The `index`-th host address (1-based), `None` past the capacity.
    pub fn host(&self, index: usize) -> Option<Ipv4Addr> {
        if index == 0 || index as u64 > self.host_capacity() {
            return None;
        }
        Some(Ipv4Addr::from(u32::from(self.network) + index as u32))
    }

    /// Whether `addr` lies in this network.
    pub fn contains(&self, addr: Ipv4Addr) -> bool {
        u32::from(addr) & Self::mask_bits(self.prefix_len) == u32::from(self.network)
    }
}

impl fmt::Display for Ipv4Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix_len)
    }
}

impl FromStr for Ipv4Net {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (addr, len) = s
            .split_once('/')
            .ok_or_else(|| format!("`{s}` is not a subnet: write it as a.b.c.d/len"))?;
        let addr: Ipv4Addr = addr
            .parse()
            .map_err(|_| format!("`{addr}` is not an IPv4 address"))?;
        let len: u8 = len
            .parse()
            .map_err(|_| format!("`{len}` is not a prefix length"))?;
        Ipv4Net::new(addr, len).ok_or_else(|| format!("prefix length {len} is above 32"))
    }
}

/// Checks a topology prefix: 1 or more ASCII lowercase letters and digits,
/// starting with a letter. No `-`, so `<prefix>-h<i>` parses back unambiguously.
pub fn validate_prefix(prefix: &str) -> Result<(), String> {
    let mut chars = prefix.chars();
    match chars.next() {
        None => return Err("the prefix is empty".into()),
        Some(c) if !c.is_ascii_lowercase() => {
            return Err(format!(
                "prefix `{prefix}` must start with a lowercase letter (a-z)"
            ))
        }
        Some(_) => {}
    }
    if !chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()) {
        return Err(format!(
            "prefix `{prefix}` may contain only lowercase letters and digits"
        ));
    }
    Ok(())
}

/// The longest prefix that keeps every interface name of an `hosts`-host
/// topology within [`IFNAME_MAX`].
pub fn max_prefix_len(hosts: usize) -> usize {
    IFNAME_MAX.saturating_sub(switch_if_name("", hosts.max(1)).len())
}

/// Logical host name: `h<i>`.
pub fn host_name(index: usize) -> String {
    format!("h{index}")
}

/// Network namespace of host `index`: `<prefix>-h<i>`.
pub fn netns_name(prefix: &str, index: usize) -> String {
    format!("{prefix}-h{index}")
}

/// Switch-side veth of host `index`, in the root namespace: `<prefix>-h<i>-sw`.
pub fn switch_if_name(prefix: &str, index: usize) -> String {
    format!("{prefix}-h{index}-sw")
}

/// Deterministic, locally administered unicast MAC of host `index`.
pub fn host_mac(index: usize) -> [u8; 6] {
    let i = index as u16;
    [0x02, 0x00, 0x00, 0x00, (i >> 8) as u8, i as u8]
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn format_mac(mac: &[u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// If `name` is the namespace of a host of topology `prefix`, its index.
pub fn parse_netns_name(prefix: &str, name: &str) -> Option<usize> {
    let rest = name.strip_prefix(prefix)?.strip_prefix("-h")?;
    parse_index(rest)
}

/// If `name` is the switch-side veth of a host of topology `prefix`, its index.
pub fn parse_switch_if_name(prefix: &str, name: &str) -> Option<usize> {
    let rest = name
        .strip_prefix(prefix)?
        .strip_prefix("-h")?
        .strip_suffix("-sw")?;
    parse_index(rest)
}

fn parse_index(digits: &str) -> Option<usize> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.starts_with('0') {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_ifnamsiz_for_default_prefix() {
        for i in 1..=254 {
            assert!(switch_if_name("ss", i).len() <= IFNAME_MAX);
        }
        assert_eq!(switch_if_name("ss", 1), "ss-h1-sw");
        assert_eq!(netns_name("ss", 12), "ss-h12");
        assert_eq!(host_name(3), "h3");
    }

    #[test]
    fn max_prefix_len_tracks_host_count() {
        // "-h9-sw" is 6 chars, "-h10-sw" 7, "-h100-sw" 8.
        assert_eq!(max_prefix_len(9), 9);
        assert_eq!(max_prefix_len(10), 8);
        assert_eq!(max_prefix_len(254), 7);
        let p = "a".repeat(max_prefix_len(254));
        assert_eq!(switch_if_name(&p, 254).len(), IFNAME_MAX);
    }

    #[test]
    fn names_are_unique_and_parse_back() {
        let mut seen = std::collections::HashSet::new();
        for i in 1..=300 {
            let ns = netns_name("ss", i);
            let sw = switch_if_name("ss", i);
            assert!(seen.insert(ns.clone()));
            assert!(seen.insert(sw.clone()));
            assert_eq!(parse_netns_name("ss", &ns), Some(i));
            assert_eq!(parse_switch_if_name("ss", &sw), Some(i));
            assert_eq!(parse_netns_name("ss", &sw), None);
            assert_eq!(parse_switch_if_name("ss", &ns), None);
        }
    }

    #[test]
    fn parse_rejects_other_prefixes_and_junk() {
        assert_eq!(parse_netns_name("ss", "ss2-h1"), None);
        assert_eq!(parse_netns_name("ss", "s-h1"), None);
        assert_eq!(parse_netns_name("ss", "ss-h"), None);
        assert_eq!(parse_netns_name("ss", "ss-h01"), None);
        assert_eq!(parse_netns_name("ss", "ss-h1x"), None);
        assert_eq!(parse_switch_if_name("ss", "ss-h1-swx"), None);
        assert_eq!(parse_switch_if_name("ss", "ss-h-sw"), None);
    }

    #[test]
    fn prefix_validation() {
        assert!(validate_prefix("ss").is_ok());
        assert!(validate_prefix("t1abc").is_ok());
        assert!(validate_prefix("").is_err());
        assert!(validate_prefix("1ss").is_err());
        assert!(validate_prefix("s-s").is_err());
        assert!(validate_prefix("Ss").is_err());
        assert!(validate_prefix("s s").is_err());
    }

    #[test]
    fn subnet_parsing_and_host_addresses() {
        let net: Ipv4Net = "10.99.0.0/24".parse().unwrap();
        assert_eq!(net.to_string(), "10.99.0.0/24");
        assert_eq!(net.host_capacity(), 254);
        assert_eq!(net.host(0), None);
        assert_eq!(net.host(1), Some(Ipv4Addr::new(10, 99, 0, 1)));
        assert_eq!(net.host(254), Some(Ipv4Addr::new(10, 99, 0, 254)));
        assert_eq!(net.host(255), None);
        assert!(net.contains(Ipv4Addr::new(10, 99, 0, 77)));
        assert!(!net.contains(Ipv4Addr::new(10, 99, 1, 1)));

        // Host bits are cleared.
        let net: Ipv4Net = "10.99.3.7/16".parse().unwrap();
        assert_eq!(net.network(), Ipv4Addr::new(10, 99, 0, 0));
        assert_eq!(net.host(256), Some(Ipv4Addr::new(10, 99, 1, 0)));

        assert_eq!("10.0.0.0/31".parse::<Ipv4Net>().unwrap().host_capacity(), 0);
        assert!("10.0.0.0".parse::<Ipv4Net>().is_err());
        assert!("10.0.0.0/33".parse::<Ipv4Net>().is_err());
        assert!("10.0.0/24".parse::<Ipv4Net>().is_err());
    }

    #[test]
    fn macs_are_deterministic_unique_and_local_unicast() {
        assert_eq!(format_mac(&host_mac(1)), "02:00:00:00:00:01");
        assert_eq!(format_mac(&host_mac(255)), "02:00:00:00:00:ff");
        assert_eq!(format_mac(&host_mac(256)), "02:00:00:00:01:00");
        let mut seen = std::collections::HashSet::new();
        for i in 1..=1000 {
            let mac = host_mac(i);
            assert_eq!(mac[0] & 0x01, 0, "unicast");
            assert_eq!(mac[0] & 0x02, 0x02, "locally administered");
            assert!(seen.insert(mac));
        }
    }
}
