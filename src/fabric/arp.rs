//! Proxy ARP at the edge (RFC 826 packet, RFC 1027 proxying): an Ethernet /
//! IPv4 ARP request, untagged, is turned into the reply in place — the
//! frame keeps its length and goes back out of the port it came in on.
//! Tagged or malformed ARP is not answered (it is flooded like any other
//! broadcast).

use std::net::Ipv4Addr;

use crate::wire::ethernet::{self, ethertype};
use crate::wire::{be16, set_be16, FrameInfo, MacAddr};

/// Offsets in the ARP packet (after the Ethernet header).
mod field {
    pub const HTYPE: usize = 0;
    pub const PTYPE: usize = 2;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: usize = 6;
    pub const SHA: usize = 8;
    pub const SPA: usize = 14;
    pub const THA: usize = 18;
    pub const TPA: usize = 24;
    pub const END: usize = 28;
}

const HTYPE_ETHERNET: u16 = 1;
const OPER_REQUEST: u16 = 1;
const OPER_REPLY: u16 = 2;

/// The address an untagged Ethernet/IPv4 ARP request asks for; None for
/// anything else, and for a gratuitous ARP (sender = target: an
/// announcement, not a question).
pub fn request_target(frame: &[u8], info: &FrameInfo) -> Option<Ipv4Addr> {
    if info.ethertype != ethertype::ARP || info.vlan.is_some() {
        return None;
    }
    let arp = frame.get(ethernet::HEADER_LEN..ethernet::HEADER_LEN + field::END)?;
    let ok = be16(arp, field::HTYPE) == HTYPE_ETHERNET
        && be16(arp, field::PTYPE) == ethertype::IPV4
        && arp[field::HLEN] == 6
        && arp[field::PLEN] == 4
        && be16(arp, field::OPER) == OPER_REQUEST;
    let tpa: [u8; 4] = arp[field::TPA..field::TPA + 4].try_into().ok()?;
    let spa = &arp[field::SPA..field::SPA + 4];
    (ok && spa != tpa).then(|| tpa.into())
}

/// Rewrites a request [`request_target`] accepted into the reply from
/// `target_mac`: to the asker, from the target, sender and target swapped.
pub fn answer(frame: &mut [u8], target_mac: MacAddr) {
    let asker_mac: [u8; 6] = frame[6..12].try_into().expect("checked by request_target");
    frame[0..6].copy_from_slice(&asker_mac);
    frame[6..12].copy_from_slice(&target_mac.0);
    let arp = &mut frame[ethernet::HEADER_LEN..ethernet::HEADER_LEN + field::END];
    let mut sha = [0u8; 6];
    let mut spa = [0u8; 4];
    sha.copy_from_slice(&arp[field::SHA..field::SHA + 6]);
    spa.copy_from_slice(&arp[field::SPA..field::SPA + 4]);
    let tpa: [u8; 4] = arp[field::TPA..field::TPA + 4]
        .try_into()
        .expect("28 bytes");
    set_be16(arp, field::OPER, OPER_REPLY);
    arp[field::SHA..field::SHA + 6].copy_from_slice(&target_mac.0);
    arp[field::SPA..field::SPA + 4].copy_from_slice(&tpa);
    arp[field::THA..field::THA + 6].copy_from_slice(&sha);
    arp[field::TPA..field::TPA + 4].copy_from_slice(&spa);
}

/// An ARP request frame (42 bytes) from `asker` for `target` (tests, benches).
pub fn request(asker_mac: MacAddr, asker_ip: Ipv4Addr, target: Ipv4Addr) -> Vec<u8> {
    let mut f = vec![0u8; ethernet::HEADER_LEN + field::END];
    f[0..6].copy_from_slice(&MacAddr::BROADCAST.0);
    f[6..12].copy_from_slice(&asker_mac.0);
    set_be16(&mut f, 12, ethertype::ARP);
    let a = &mut f[ethernet::HEADER_LEN..];
    set_be16(a, field::HTYPE, HTYPE_ETHERNET);
    set_be16(a, field::PTYPE, ethertype::IPV4);
    a[field::HLEN] = 6;
    a[field::PLEN] = 4;
    set_be16(a, field::OPER, OPER_REQUEST);
    a[field::SHA..field::SHA + 6].copy_from_slice(&asker_mac.0);
    a[field::SPA..field::SPA + 4].copy_from_slice(&asker_ip.octets());
    a[field::TPA..field::TPA + 4].copy_from_slice(&target.octets());
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::parse;

    #[test]
    fn a_request_becomes_the_reply_in_place() {
        let asker = MacAddr([2, 0, 0, 0, 0, 1]);
        let target = MacAddr([2, 0, 0, 0, 0, 7]);
        let (a_ip, t_ip) = (Ipv4Addr::new(10, 99, 0, 1), Ipv4Addr::new(10, 99, 0, 7));
        let mut f = request(asker, a_ip, t_ip);
        let info = parse(&f).unwrap();
        assert_eq!(request_target(&f, &info), Some(t_ip));
        answer(&mut f, target);
        assert_eq!(&f[0..6], &asker.0, "to the asker");
        assert_eq!(&f[6..12], &target.0, "from the target");
        assert_eq!(be16(&f, 14 + field::OPER), OPER_REPLY);
        assert_eq!(&f[14 + field::SHA..14 + field::SHA + 6], &target.0);
        assert_eq!(&f[14 + field::SPA..14 + field::SPA + 4], &t_ip.octets());
        assert_eq!(&f[14 + field::THA..14 + field::THA + 6], &asker.0);
        assert_eq!(&f[14 + field::TPA..14 + field::TPA + 4], &a_ip.octets());
        // A reply is not a request.
        let info = parse(&f).unwrap();
        assert_eq!(request_target(&f, &info), None);
    }

    #[test]
    fn gratuitous_short_and_odd_arp_is_not_answered() {
        let m = MacAddr([2, 0, 0, 0, 0, 1]);
        let ip = Ipv4Addr::new(10, 99, 0, 1);
        let f = request(m, ip, ip);
        assert_eq!(request_target(&f, &parse(&f).unwrap()), None, "gratuitous");
        let mut short = request(m, ip, Ipv4Addr::new(10, 99, 0, 2));
        short.truncate(30);
        assert_eq!(request_target(&short, &parse(&short).unwrap()), None);
        let mut v6 = request(m, ip, Ipv4Addr::new(10, 99, 0, 2));
        v6[14 + field::PTYPE..14 + field::PTYPE + 2].copy_from_slice(&0x86ddu16.to_be_bytes());
        assert_eq!(request_target(&v6, &parse(&v6).unwrap()), None);
    }
}
