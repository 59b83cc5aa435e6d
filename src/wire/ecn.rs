//! CE marking: ECT → CE in IPv4 (incremental header checksum) and IPv6; and
//! the TCP rewrites R-AQM does on the reverse path (ECE flag, receive window),
//! each with an incremental TCP checksum update (RFC 1624 eq. 3).
//!
//! Every function takes the [`L3Info`] that [`parse()`](super::parse()) produced
//! for the frame, but trusts nothing in it: it re-reads the version, header
//! lengths and ECN bits from the frame itself, so an `L3Info` from another
//! frame (or a frame changed since) gives [`MarkOutcome::Invalid`] / `false`,
//! never a panic or a write outside the headers.

use super::ipv4::Ipv4Packet;
use super::ipv6::{self, Ipv6Packet};
use super::tcp::{flags, TcpPacket};
use super::{ip_proto, Ecn, IpVersion, L3Info};

/// What [`set_ce`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MarkOutcome {
    /// ECT(0) or ECT(1) became CE.
    Marked,
    /// Already CE: nothing to do (the mark still counts as a congestion signal).
    AlreadyCe,
    /// Not-ECT: cannot be marked; the caller decides (softswitch: pass by default).
    NotEct,
    /// The frame does not hold a valid IP header where `l3` says.
    Invalid,
}

/// Sets CE on an ECT(0)/ECT(1) packet (RFC 3168 §5). IPv4: the header
/// checksum is updated incrementally; IPv6: no checksum.
pub fn set_ce(frame: &mut [u8], l3: &L3Info) -> MarkOutcome {
    let Some(ip_bytes) = frame.get_mut(usize::from(l3.offset)..) else {
        return MarkOutcome::Invalid;
    };
    match l3.version {
        IpVersion::V4 => {
            let Ok(mut ip) = Ipv4Packet::new_checked(ip_bytes) else {
                return MarkOutcome::Invalid;
            };
            match ip.ecn() {
                Ecn::NotEct => MarkOutcome::NotEct,
                Ecn::Ce => MarkOutcome::AlreadyCe,
                Ecn::Ect0 | Ecn::Ect1 => {
                    ip.set_ecn(Ecn::Ce);
                    MarkOutcome::Marked
                }
            }
        }
        IpVersion::V6 => {
            let Ok(mut ip) = Ipv6Packet::new_checked(ip_bytes) else {
                return MarkOutcome::Invalid;
            };
            match ip.ecn() {
                Ecn::NotEct => MarkOutcome::NotEct,
                Ecn::Ce => MarkOutcome::AlreadyCe,
                Ecn::Ect0 | Ecn::Ect1 => {
                    ip.set_ecn(Ecn::Ce);
                    MarkOutcome::Marked
                }
            }
        }
    }
}

/// The TCP segment of `frame` as `l3` locates it, re-validated against the
/// frame: the IP header is valid at `l3.offset`, the packet is TCP and not a
/// fragment (IPv4), the TCP header starts after the IP header and lies with
/// its options inside the IP packet. The view ends where the IP length says.
fn tcp_segment<'a>(frame: &'a mut [u8], l3: &L3Info) -> Option<TcpPacket<&'a mut [u8]>> {
    let tcp = l3.tcp?;
    if l3.protocol != ip_proto::TCP {
        return None;
    }
    let ip_off = usize::from(l3.offset);
    let tcp_off = usize::from(tcp.offset);
    let ip_bytes = frame.get(ip_off..)?;
    // (first byte after the IP header, first byte after the IP packet), frame offsets.
    let (l4_start, ip_end) = match l3.version {
        IpVersion::V4 => {
            let ip = Ipv4Packet::new_checked(ip_bytes).ok()?;
            if ip.protocol() != ip_proto::TCP || ip.is_fragment() {
                return None;
            }
            // With IPv4 the TCP header must follow the IP header directly.
            if tcp_off != ip_off + ip.header_len() {
                return None;
            }
            (tcp_off, ip_off + usize::from(ip.total_len()))
        }
        IpVersion::V6 => {
            let ip = Ipv6Packet::new_checked(ip_bytes).ok()?;
            (
                ip_off + ipv6::HEADER_LEN,
                ip_off + ipv6::HEADER_LEN + usize::from(ip.payload_len()),
            )
        }
    };
    if tcp_off < l4_start || tcp_off >= ip_end {
        return None;
    }
    TcpPacket::new_checked(frame.get_mut(tcp_off..ip_end)?).ok()
}

/// Sets the TCP ECE flag (RFC 3168 §6.1.3), updating the TCP checksum
/// incrementally. Returns true when ECE is set afterwards (also when it
/// already was; then nothing is written), false when `frame` has no valid
/// TCP segment where `l3` says.
pub fn set_ece(frame: &mut [u8], l3: &L3Info) -> bool {
    let Some(mut tcp) = tcp_segment(frame, l3) else {
        return false;
    };
    let f = tcp.flags();
    if f & flags::ECE == 0 {
        tcp.set_flags(f | flags::ECE);
    }
    true
}

/// Rewrites the TCP receive window field (the raw 16-bit value; the caller
/// applies the connection's window scale), updating the TCP checksum
/// incrementally. Returns false when `frame` has no valid TCP segment where
/// `l3` says.
pub fn set_tcp_window(frame: &mut [u8], l3: &L3Info, window: u16) -> bool {
    let Some(mut tcp) = tcp_segment(frame, l3) else {
        return false;
    };
    tcp.set_window_len(window);
    true
}

/// The window-scale shift announced by a SYN (RFC 7323 §2.2), if `frame` is
/// a TCP SYN carrying a Window Scale option. R-AQM tracks it per connection
/// to turn "1 MSS" into a raw window value.
pub fn tcp_window_scale(frame: &[u8], l3: &L3Info) -> Option<u8> {
    let tcp = l3.tcp?;
    if tcp.flags & flags::SYN == 0 {
        return None;
    }
    // Read-only: the options lie inside the header `parse` measured; the
    // view re-checks that the header fits the frame and its data offset.
    let start = usize::from(tcp.offset);
    let end = start.checked_add(usize::from(tcp.header_len))?;
    let seg = TcpPacket::new_checked(frame.get(start..end)?).ok()?;
    if seg.flags() & flags::SYN == 0 {
        return None;
    }
    seg.window_scale()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::rng::SimRng;
    use crate::wire::checksum;
    use crate::wire::parse::tests::{fix_checksums, ipv4_tcp_data, ipv4_tcp_syn, ipv6_tcp_ack};
    use crate::wire::{parse, TcpInfo};

    fn ipv4_header_checksum_is_full_recomputation(f: &[u8], off: usize) {
        let hl = usize::from(f[off] & 0x0f) * 4;
        let mut h = f[off..off + hl].to_vec();
        let stored = u16::from_be_bytes([h[10], h[11]]);
        h[10] = 0;
        h[11] = 0;
        assert_eq!(stored, checksum::checksum(&h));
    }

    /// Full TCP checksum (pseudo-header included) recomputed from scratch,
    /// compared to what is in the frame.
    pub(crate) fn tcp_checksum_is_full_recomputation(f: &[u8]) {
        let l3 = parse(f).unwrap().l3.unwrap();
        let tcp = l3.tcp.unwrap();
        let off = usize::from(l3.offset);
        let t0 = usize::from(tcp.offset);
        let seg_len = usize::from(tcp.header_len) + usize::from(tcp.payload_len);
        let mut seg = f[t0..t0 + seg_len].to_vec();
        let stored = u16::from_be_bytes([seg[16], seg[17]]);
        seg[16] = 0;
        seg[17] = 0;
        let pseudo = match l3.version {
            IpVersion::V4 => {
                let ip = Ipv4Packet::new_checked(&f[off..]).unwrap();
                checksum::pseudo_header_v4(ip.src_addr(), ip.dst_addr(), 6, seg_len as u16)
            }
            IpVersion::V6 => {
                let ip = Ipv6Packet::new_checked(&f[off..]).unwrap();
                checksum::pseudo_header_v6(&ip.src_addr(), &ip.dst_addr(), 6, seg_len as u32)
            }
        };
        assert_eq!(stored, !checksum::fold(checksum::accumulate(pseudo, &seg)));
    }

    fn with_tos(mut f: Vec<u8>, ecn: Ecn) -> Vec<u8> {
        match f[14] >> 4 {
            4 => f[15] = (f[15] & !3) | ecn as u8,
            _ => f[15] = (f[15] & !0x30) | ((ecn as u8) << 4),
        }
        fix_checksums(&mut f, 14);
        f
    }

    #[test]
    fn ipv4_ect0_and_ect1_become_ce() {
        for ecn in [Ecn::Ect0, Ecn::Ect1] {
            let mut f = with_tos(ipv4_tcp_data(), ecn);
            let l3 = parse(&f).unwrap().l3.unwrap();
            assert_eq!(l3.ecn, ecn);
            let before = f.clone();
            assert_eq!(set_ce(&mut f, &l3), MarkOutcome::Marked);
            assert_eq!(parse(&f).unwrap().l3.unwrap().ecn, Ecn::Ce);
            assert_eq!(f[15] >> 2, 10, "DSCP kept");
            ipv4_header_checksum_is_full_recomputation(&f, 14);
            // Only the TOS byte and the checksum changed.
            let changed: Vec<usize> = (0..f.len()).filter(|&i| f[i] != before[i]).collect();
            assert!(
                changed.iter().all(|i| [15, 24, 25].contains(i)),
                "{changed:?}"
            );
            // TCP checksum does not cover the TOS byte: still right.
            tcp_checksum_is_full_recomputation(&f);
            // CE stays CE, nothing written.
            let marked = f.clone();
            assert_eq!(set_ce(&mut f, &l3), MarkOutcome::AlreadyCe);
            assert_eq!(f, marked);
        }
    }

    #[test]
    fn not_ect_is_untouched() {
        for f0 in [
            with_tos(ipv4_tcp_data(), Ecn::NotEct),
            ipv4_tcp_syn(),
            with_tos(ipv6_tcp_ack(), Ecn::NotEct),
        ] {
            let mut f = f0.clone();
            let l3 = parse(&f).unwrap().l3.unwrap();
            assert_eq!(set_ce(&mut f, &l3), MarkOutcome::NotEct);
            assert_eq!(f, f0);
        }
    }

    #[test]
    fn ipv6_marking() {
        for ecn in [Ecn::Ect0, Ecn::Ect1] {
            let mut f = with_tos(ipv6_tcp_ack(), ecn);
            let before = f.clone();
            let l3 = parse(&f).unwrap().l3.unwrap();
            assert_eq!(set_ce(&mut f, &l3), MarkOutcome::Marked);
            let l3m = parse(&f).unwrap().l3.unwrap();
            assert_eq!(l3m.ecn, Ecn::Ce);
            assert_eq!(l3m.dscp, l3.dscp);
            let changed: Vec<usize> = (0..f.len()).filter(|&i| f[i] != before[i]).collect();
            assert_eq!(changed, vec![15]);
            assert_eq!(set_ce(&mut f, &l3), MarkOutcome::AlreadyCe);
            tcp_checksum_is_full_recomputation(&f);
        }
    }

    #[test]
    fn marking_with_vlan_tag() {
        let mut f = with_tos(ipv4_tcp_data(), Ecn::Ect0);
        f.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
        let l3 = parse(&f).unwrap().l3.unwrap();
        assert_eq!(set_ce(&mut f, &l3), MarkOutcome::Marked);
        ipv4_header_checksum_is_full_recomputation(&f, 18);
        assert_eq!(parse(&f).unwrap().l3.unwrap().ecn, Ecn::Ce);
    }

    #[test]
    fn random_ipv4_headers_checksum_matches_full_recomputation() {
        let mut rng = SimRng::new(3168);
        let mut marked = 0;
        for _ in 0..20_000 {
            let ihl = 5 + (rng.next_u64() % 11) as usize;
            let hl = ihl * 4;
            let payload = (rng.next_u64() % 64) as usize;
            let mut f = vec![0u8; 14 + hl + payload];
            for b in f.iter_mut() {
                *b = rng.next_u64() as u8;
            }
            f[12] = 0x08;
            f[13] = 0x00;
            f[14] = 0x40 | ihl as u8;
            f[16..18].copy_from_slice(&((hl + payload) as u16).to_be_bytes());
            f[20] &= 0x40; // not a fragment, so TCP/UDP parsing may happen
            let mut ip = Ipv4Packet::new_checked(&mut f[14..]).unwrap();
            ip.fill_checksum();
            let ecn = ip.ecn();
            let l3 = parse(&f).unwrap().l3.unwrap();
            let before = f.clone();
            let out = set_ce(&mut f, &l3);
            match ecn {
                Ecn::Ect0 | Ecn::Ect1 => {
                    assert_eq!(out, MarkOutcome::Marked);
                    marked += 1;
                }
                Ecn::Ce => assert_eq!(out, MarkOutcome::AlreadyCe),
                Ecn::NotEct => assert_eq!(out, MarkOutcome::NotEct),
            }
            if out != MarkOutcome::Marked {
                assert_eq!(f, before);
            }
            ipv4_header_checksum_is_full_recomputation(&f, 14);
            assert!(Ipv4Packet::new_checked(&f[14..]).unwrap().verify_checksum());
        }
        assert!(marked > 8_000, "{marked}");
    }

    #[test]
    fn wrong_frame_is_invalid_not_a_panic() {
        let good = with_tos(ipv4_tcp_data(), Ecn::Ect0);
        let l3 = parse(&good).unwrap().l3.unwrap();
        // Every prefix of the frame with the L3Info of the whole frame.
        for n in 0..good.len() {
            let mut f = good[..n].to_vec();
            assert_eq!(set_ce(&mut f, &l3), MarkOutcome::Invalid, "prefix {n}");
            assert!(!set_ece(&mut f, &l3));
            assert!(!set_tcp_window(&mut f, &l3, 1));
            assert_eq!(f, good[..n]);
        }
        // An IPv6 frame with IPv4 L3Info and vice versa.
        let mut v6 = with_tos(ipv6_tcp_ack(), Ecn::Ect0);
        assert_eq!(set_ce(&mut v6, &l3), MarkOutcome::Invalid);
        assert!(!set_ece(&mut v6, &l3));
        let l3v6 = parse(&v6).unwrap().l3.unwrap();
        let mut v4 = good.clone();
        assert_eq!(set_ce(&mut v4, &l3v6), MarkOutcome::Invalid);
        assert!(!set_tcp_window(&mut v4, &l3v6, 1));
        // Offsets and TCP info pointing anywhere.
        let mut rng = SimRng::new(5);
        for _ in 0..20_000 {
            let mut bad = l3;
            bad.offset = (rng.next_u64() % 200) as u16;
            bad.version = if rng.next_u64() & 1 == 0 {
                IpVersion::V4
            } else {
                IpVersion::V6
            };
            bad.tcp = Some(TcpInfo {
                offset: (rng.next_u64() % 200) as u16,
                header_len: (rng.next_u64() % 80) as u16,
                flags: 0,
                payload_len: (rng.next_u64() % 200) as u16,
            });
            let mut f = if rng.next_u64() & 1 == 0 {
                good.clone()
            } else {
                v6.clone()
            };
            let _ = set_ce(&mut f, &bad);
            let _ = set_ece(&mut f, &bad);
            let _ = set_tcp_window(&mut f, &bad, 7);
            let _ = tcp_window_scale(&f, &bad);
        }
    }

    #[test]
    fn ece_and_window_rewrite_ipv4_and_ipv6() {
        for f0 in [ipv4_tcp_data(), ipv6_tcp_ack(), ipv4_tcp_syn()] {
            let mut f = f0.clone();
            let l3 = parse(&f).unwrap().l3.unwrap();
            tcp_checksum_is_full_recomputation(&f);
            assert!(set_ece(&mut f, &l3));
            let t = parse(&f).unwrap().l3.unwrap().tcp.unwrap();
            assert_eq!(t.flags, l3.tcp.unwrap().flags | flags::ECE);
            tcp_checksum_is_full_recomputation(&f);
            let once = f.clone();
            assert!(set_ece(&mut f, &l3));
            assert_eq!(f, once, "already ECE: nothing written");
            assert!(set_tcp_window(&mut f, &l3, 1));
            tcp_checksum_is_full_recomputation(&f);
            let t0 = usize::from(l3.tcp.unwrap().offset);
            assert_eq!(&f[t0 + 14..t0 + 16], &[0, 1]);
            if l3.version == IpVersion::V4 {
                ipv4_header_checksum_is_full_recomputation(&f, 14);
            }
        }
    }

    #[test]
    fn random_tcp_rewrites_match_full_recomputation() {
        let mut rng = SimRng::new(7323);
        for i in 0..5_000 {
            let mut f = if i % 2 == 0 {
                ipv4_tcp_data()
            } else {
                ipv6_tcp_ack()
            };
            let l3 = parse(&f).unwrap().l3.unwrap();
            let t0 = usize::from(l3.tcp.unwrap().offset);
            // Random seq/ack/window/flags, then a correct checksum.
            for b in &mut f[t0 + 4..t0 + 12] {
                *b = rng.next_u64() as u8;
            }
            f[t0 + 13] = rng.next_u64() as u8 & !flags::ECE;
            f[t0 + 14] = rng.next_u64() as u8;
            f[t0 + 15] = rng.next_u64() as u8;
            fix_checksums(&mut f, 14);
            let l3 = parse(&f).unwrap().l3.unwrap();
            assert!(set_ece(&mut f, &l3));
            tcp_checksum_is_full_recomputation(&f);
            assert!(set_tcp_window(&mut f, &l3, rng.next_u64() as u16));
            tcp_checksum_is_full_recomputation(&f);
        }
    }

    #[test]
    fn ipv6_rewrites_behind_extension_headers() {
        // ipv6_tcp_ack with a 16-byte destination-options header in front of TCP.
        let mut f = ipv6_tcp_ack();
        let mut ext = vec![6u8, 1, 1, 12];
        ext.extend_from_slice(&[0; 12]);
        f[20] = 60;
        f[19] += 16;
        f.splice(54..54, ext);
        let l3 = parse(&f).unwrap().l3.unwrap();
        let t0 = usize::from(l3.tcp.unwrap().offset);
        assert_eq!(t0, 70);
        let (s, d) = {
            let ip = Ipv6Packet::new_checked(&f[14..]).unwrap();
            (ip.src_addr(), ip.dst_addr())
        };
        TcpPacket::new_checked(&mut f[t0..])
            .unwrap()
            .fill_checksum_v6(&s, &d);
        tcp_checksum_is_full_recomputation(&f);
        assert!(set_ece(&mut f, &l3));
        assert!(set_tcp_window(&mut f, &l3, 3));
        tcp_checksum_is_full_recomputation(&f);
        assert_eq!(f[t0 + 13] & flags::ECE, flags::ECE);
        assert_eq!(set_ce(&mut f, &l3), MarkOutcome::Marked);
    }

    #[test]
    fn window_scale_from_syn() {
        let f = ipv4_tcp_syn();
        let l3 = parse(&f).unwrap().l3.unwrap();
        assert_eq!(tcp_window_scale(&f, &l3), Some(7));
        let f = ipv4_tcp_data();
        let l3 = parse(&f).unwrap().l3.unwrap();
        assert_eq!(tcp_window_scale(&f, &l3), None);
    }

    #[test]
    fn fragments_and_non_tcp_are_not_rewritten() {
        let mut f = ipv4_tcp_data();
        let l3 = parse(&f).unwrap().l3.unwrap();
        f[20] = 0x20; // now MF set: a fragment
        fix_checksums(&mut f, 14);
        assert!(!set_ece(&mut f, &l3));
        let mut f = ipv4_tcp_data();
        let mut l3 = parse(&f).unwrap().l3.unwrap();
        l3.protocol = 17;
        assert!(!set_tcp_window(&mut f, &l3, 1));
    }
}
