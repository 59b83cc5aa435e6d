//! One-pass frame parser: Ethernet II, up to two VLAN tags, IPv4 / IPv6
//! (with extension headers), TCP / UDP ports.
//!
//! Never panics, never allocates. Only a frame too short for its Ethernet
//! header or its VLAN tags is an error; anything wrong further in (a bad IP
//! version, IHL < 5, a header cut off, a total length past the frame) gives
//! `l3: None`, so the frame is still bridged at L2 but never ECN-marked or
//! per-flow classified. A malformed transport header gives `tcp: None` and a
//! 3-tuple flow hash.
//!
//! Fragments: every fragment of a fragmented datagram (first included) is
//! hashed on the 3-tuple and carries no [`TcpInfo`], as Linux's flow
//! dissector does by default — the first fragment has ports but the later
//! ones do not, and hashing them alike keeps a datagram's fragments in one
//! per-flow queue (no reordering). The TCP payload length of a first
//! fragment would be wrong anyway.

use super::ethernet::{self, ethertype, EthernetFrame};
use super::ipv4::Ipv4Packet;
use super::ipv6::{self, Ipv6Packet};
use super::tcp::TcpPacket;
use super::{be16, ip_proto, FrameInfo, IpVersion, L3Info, ParseError, TcpInfo};

/// How many VLAN tags we look through (802.1ad S-tag + 802.1Q C-tag).
pub const MAX_VLAN_TAGS: usize = 2;

/// How many IPv6 extension headers we walk before giving up on the transport.
/// Each takes at least 8 bytes, so the walk is bounded by the payload anyway;
/// this bounds the per-packet cost of a crafted chain.
pub const MAX_IPV6_EXT_HEADERS: usize = 8;

/// Parses an Ethernet frame (no FCS) in one pass.
pub fn parse(frame: &[u8]) -> Result<FrameInfo, ParseError> {
    let eth = EthernetFrame::new_checked(frame).map_err(|_| ParseError::TooShort)?;
    let mut ethertype = eth.ethertype();
    let mut offset = ethernet::HEADER_LEN;
    let mut vlan = None;
    for _ in 0..MAX_VLAN_TAGS {
        if !ethertype::is_vlan_tag(ethertype) {
            break;
        }
        // TPID already read; the tag's TCI and the next EtherType follow.
        if frame.len() < offset + ethernet::VLAN_TAG_LEN {
            return Err(ParseError::TruncatedVlan);
        }
        if vlan.is_none() {
            vlan = Some(be16(frame, offset) & 0x0fff);
        }
        ethertype = be16(frame, offset + 2);
        offset += ethernet::VLAN_TAG_LEN;
    }
    // A third tag leaves `ethertype` a TPID: not IP, bridged only.
    let l3 = match ethertype {
        ethertype::IPV4 => parse_ipv4(frame, offset),
        ethertype::IPV6 => parse_ipv6(frame, offset),
        _ => None,
    };
    Ok(FrameInfo {
        dst: eth.dst_addr(),
        src: eth.src_addr(),
        vlan,
        ethertype,
        l3,
    })
}

fn parse_ipv4(frame: &[u8], offset: usize) -> Option<L3Info> {
    let ip = Ipv4Packet::new_checked(frame.get(offset..)?).ok()?;
    let protocol = ip.protocol();
    let l4_offset = offset + ip.header_len();
    let (ports, tcp) = if ip.is_fragment() {
        (None, None)
    } else {
        transport(protocol, ip.payload(), l4_offset)
    };
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    Some(L3Info {
        version: IpVersion::V4,
        offset: u16::try_from(offset).ok()?,
        dscp: ip.dscp(),
        ecn: ip.ecn(),
        protocol,
        flow_hash: flow_hash(&src, &dst, protocol, ports),
        tcp,
    })
}

fn parse_ipv6(frame: &[u8], offset: usize) -> Option<L3Info> {
    let ip = Ipv6Packet::new_checked(frame.get(offset..)?).ok()?;
    let payload = ip.payload();
    let mut next = ip.next_header();
    let mut pos = 0usize; // offset of header `next` within `payload`
    let mut fragment = false;
    let mut reached_transport = false;
    let mut walked = 0;
    loop {
        let ext_len = match next {
            ip_proto::HOP_BY_HOP | ip_proto::IPV6_ROUTE | ip_proto::IPV6_OPTS => {
                // RFC 8200 §4.3–4.6: length in 8-octet units, not counting the first 8.
                payload.get(pos + 1).map(|&l| (usize::from(l) + 1) * 8)
            }
            ip_proto::IPV6_FRAG => {
                // RFC 8200 §4.5: fixed 8 bytes; offset (13 bits) | res | M.
                if let Some(off_m) = payload.get(pos + 2..pos + 4) {
                    fragment |= u16::from_be_bytes([off_m[0], off_m[1]]) & 0xfff9 != 0;
                }
                Some(8)
            }
            // RFC 4302 §2.2: length in 4-octet units, minus 2.
            ip_proto::AH => payload.get(pos + 1).map(|&l| (usize::from(l) + 2) * 4),
            _ => {
                reached_transport = true;
                break;
            }
        };
        if walked == MAX_IPV6_EXT_HEADERS {
            break;
        }
        // The whole extension header must lie inside the payload.
        let Some(ext_len) = ext_len.filter(|&l| pos + l <= payload.len()) else {
            break;
        };
        next = payload[pos];
        pos += ext_len;
        walked += 1;
    }
    let (ports, tcp) = if reached_transport && !fragment {
        transport(next, &payload[pos..], offset + ipv6::HEADER_LEN + pos)
    } else {
        (None, None)
    };
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    Some(L3Info {
        version: IpVersion::V6,
        offset: u16::try_from(offset).ok()?,
        dscp: ip.dscp(),
        ecn: ip.ecn(),
        protocol: next,
        flow_hash: flow_hash(&src, &dst, next, ports),
        tcp,
    })
}

/// Ports (TCP/UDP, when the first 4 bytes are there) and TCP details (when
/// the whole TCP header is there). `segment` ends where the IP length says.
fn transport(
    protocol: u8,
    segment: &[u8],
    segment_offset: usize,
) -> (Option<(u16, u16)>, Option<TcpInfo>) {
    if protocol != ip_proto::TCP && protocol != ip_proto::UDP {
        return (None, None);
    }
    if segment.len() < 4 {
        return (None, None);
    }
    let ports = Some((be16(segment, 0), be16(segment, 2)));
    if protocol != ip_proto::TCP {
        return (ports, None);
    }
    let tcp = TcpPacket::new_checked(segment).ok().and_then(|t| {
        let header_len = t.header_len();
        Some(TcpInfo {
            offset: u16::try_from(segment_offset).ok()?,
            header_len: u16::try_from(header_len).ok()?,
            flags: t.flags(),
            payload_len: u16::try_from(segment.len() - header_len).ok()?,
        })
    });
    (ports, tcp)
}

/// Flow hash of (src, dst, protocol[, src port, dst port]).
///
/// FxHash-style word mixing (rotate, xor, multiply by a 64-bit odd constant)
/// over 32-bit words, then the MurmurHash3 `fmix64` finaliser so that every
/// output bit depends on every input bit — per-flow AQMs take it modulo a
/// small queue count, so the low bits must be good. Not keyed: this is for
/// spreading flows in a lab switch, not for resisting crafted collisions.
pub fn flow_hash(src: &[u8], dst: &[u8], protocol: u8, ports: Option<(u16, u16)>) -> u32 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut mix = |w: u32| h = (h.rotate_left(5) ^ u64::from(w)).wrapping_mul(K);
    for addr in [src, dst] {
        for w in addr.chunks(4) {
            let mut b = [0u8; 4];
            b[..w.len()].copy_from_slice(w);
            mix(u32::from_be_bytes(b));
        }
    }
    match ports {
        Some((sp, dp)) => {
            mix(0x100 | u32::from(protocol));
            mix((u32::from(sp) << 16) | u32::from(dp));
        }
        None => mix(u32::from(protocol)),
    }
    // fmix64 (MurmurHash3)
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    (h ^ (h >> 32)) as u32
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::wire::tcp::flags;
    use crate::wire::{Ecn, MacAddr};

    pub const DST: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x02];
    pub const SRC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x01];

    fn eth(ethertype: u16) -> Vec<u8> {
        let mut f = DST.to_vec();
        f.extend_from_slice(&SRC);
        f.extend_from_slice(&ethertype.to_be_bytes());
        f
    }

    /// A real Linux IPv4 TCP SYN with ECN setup (ECE|CWR), IP ECN Not-ECT as
    /// RFC 3168 §6.1.1 requires on SYNs; 10.0.0.1:40000 → 10.0.0.2:5201.
    /// Both checksums are correct.
    pub fn ipv4_tcp_syn() -> Vec<u8> {
        let mut f = eth(0x0800);
        f.extend_from_slice(&[
            0x45, 0x00, 0x00, 0x3c, // v4, IHL 5, TOS 0, total 60
            0x1c, 0x46, 0x40, 0x00, // ident, DF
            0x40, 0x06, 0x00, 0x00, // TTL 64, TCP, checksum (filled below)
            10, 0, 0, 1, 10, 0, 0, 2,
        ]);
        f.extend_from_slice(&crate::wire::tcp::tests::SYN);
        fix_checksums(&mut f, 14);
        f
    }

    /// IPv4 TCP data segment, ECT(0), DSCP 10 (AF11), 100 payload bytes, ACK|PSH.
    pub fn ipv4_tcp_data() -> Vec<u8> {
        let mut f = eth(0x0800);
        let total: u16 = 20 + 20 + 100;
        f.extend_from_slice(&[0x45, (10 << 2) | 2]);
        f.extend_from_slice(&total.to_be_bytes());
        f.extend_from_slice(&[
            0x00, 0x01, 0x40, 0x00, 0x40, 0x06, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ]);
        f.extend_from_slice(&[
            0x9c, 0x40, 0x14, 0x51, 0, 0, 0x10, 0, 0, 0, 0x20, 0, 0x50, 0x18, 0x01, 0xf6, 0, 0, 0,
            0,
        ]);
        f.extend((0..100).map(|i| i as u8));
        fix_checksums(&mut f, 14);
        f
    }

    /// IPv6 TCP pure ACK, traffic class ECT(1), 2001:db8::1 → 2001:db8::2,
    /// with timestamps option (doff 8).
    pub fn ipv6_tcp_ack() -> Vec<u8> {
        let mut f = eth(0x86dd);
        f.extend_from_slice(&[0x60, 0x10, 0x00, 0x00, 0x00, 32, 6, 64]);
        f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        f.extend_from_slice(&[
            0x14, 0x51, 0x9c, 0x40, 0, 0, 0, 1, 0, 0, 0x10, 0, 0x80, 0x10, 0x01, 0xf6, 0, 0, 0, 0,
            0x01, 0x01, 0x08, 0x0a, 0, 0, 0, 9, 0, 0, 0, 7,
        ]);
        fix_checksums(&mut f, 14);
        f
    }

    /// Recomputes the IPv4 header checksum and the TCP checksum (if TCP and
    /// not a fragment) of a frame whose IP header is at `off`.
    pub fn fix_checksums(f: &mut [u8], off: usize) {
        match f[off] >> 4 {
            4 => {
                let mut ip = Ipv4Packet::new_checked(&mut f[off..]).unwrap();
                ip.fill_checksum();
                let (s, d, p, frag) = (
                    ip.src_addr(),
                    ip.dst_addr(),
                    ip.protocol(),
                    ip.is_fragment(),
                );
                if p == 6 && !frag {
                    let mut t = TcpPacket::new_checked(ip.payload_mut()).unwrap();
                    t.fill_checksum_v4(s, d);
                }
            }
            _ => {
                let mut ip = Ipv6Packet::new_checked(&mut f[off..]).unwrap();
                let (s, d) = (ip.src_addr(), ip.dst_addr());
                if ip.next_header() == 6 {
                    let mut t = TcpPacket::new_checked(ip.payload_mut()).unwrap();
                    t.fill_checksum_v6(&s, &d);
                }
            }
        }
    }

    #[test]
    fn ipv4_tcp_syn_with_ecn_setup() {
        let f = ipv4_tcp_syn();
        let info = parse(&f).unwrap();
        assert_eq!(info.dst, MacAddr(DST));
        assert_eq!(info.src, MacAddr(SRC));
        assert_eq!(info.vlan, None);
        assert_eq!(info.ethertype, 0x0800);
        let l3 = info.l3.unwrap();
        assert_eq!(l3.version, IpVersion::V4);
        assert_eq!(l3.offset, 14);
        assert_eq!(l3.dscp, 0);
        assert_eq!(l3.ecn, Ecn::NotEct);
        assert_eq!(l3.protocol, 6);
        let tcp = l3.tcp.unwrap();
        assert_eq!(tcp.offset, 34);
        assert_eq!(tcp.header_len, 40);
        assert_eq!(tcp.flags, flags::SYN | flags::ECE | flags::CWR);
        assert_eq!(tcp.payload_len, 0);
        assert!(!tcp.is_pure_ack());
        assert_eq!(
            l3.flow_hash,
            flow_hash(&[10, 0, 0, 1], &[10, 0, 0, 2], 6, Some((40000, 5201)))
        );
    }

    #[test]
    fn ipv4_tcp_data_and_padding() {
        let mut f = ipv4_tcp_data();
        let l3 = parse(&f).unwrap().l3.unwrap();
        assert_eq!(l3.dscp, 10);
        assert_eq!(l3.ecn, Ecn::Ect0);
        let tcp = l3.tcp.unwrap();
        assert_eq!(tcp.payload_len, 100);
        assert_eq!(tcp.flags, flags::ACK | flags::PSH);
        // Ethernet padding after the IP packet does not count as TCP payload.
        f.extend_from_slice(&[0; 6]);
        assert_eq!(parse(&f).unwrap().l3.unwrap().tcp.unwrap().payload_len, 100);
    }

    #[test]
    fn ipv4_pure_ack_in_min_frame_with_padding() {
        // 54-byte ACK padded to the 60-byte Ethernet minimum.
        let mut f = ipv4_tcp_data();
        f.truncate(54);
        f[16..18].copy_from_slice(&40u16.to_be_bytes());
        f[47] = flags::ACK;
        fix_checksums(&mut f, 14);
        f.extend_from_slice(&[0; 6]);
        let tcp = parse(&f).unwrap().l3.unwrap().tcp.unwrap();
        assert_eq!(tcp.payload_len, 0);
        assert!(tcp.is_pure_ack());
    }

    #[test]
    fn ipv4_with_options() {
        let mut f = ipv4_tcp_data();
        // Insert 8 bytes of options (NOP ×7, EOL) after the 20-byte header.
        let opts = [1, 1, 1, 1, 1, 1, 1, 0];
        f.splice(34..34, opts);
        f[14] = 0x47;
        f[16..18].copy_from_slice(&148u16.to_be_bytes());
        let l3 = parse(&f).unwrap().l3.unwrap();
        let tcp = l3.tcp.unwrap();
        assert_eq!(tcp.offset, 14 + 28);
        assert_eq!(tcp.payload_len, 100);
    }

    #[test]
    fn ipv6_tcp() {
        let f = ipv6_tcp_ack();
        let info = parse(&f).unwrap();
        assert_eq!(info.ethertype, 0x86dd);
        let l3 = info.l3.unwrap();
        assert_eq!(l3.version, IpVersion::V6);
        assert_eq!(l3.offset, 14);
        assert_eq!(l3.dscp, 0);
        assert_eq!(l3.ecn, Ecn::Ect1);
        assert_eq!(l3.protocol, 6);
        let tcp = l3.tcp.unwrap();
        assert_eq!(tcp.offset, 54);
        assert_eq!(tcp.header_len, 32);
        assert_eq!(tcp.payload_len, 0);
        assert!(tcp.is_pure_ack());
    }

    /// Inserts an IPv6 extension header (bytes `ext`, whose first byte will be
    /// set to the current next header) right after the fixed header.
    fn insert_ext(f: &mut Vec<u8>, ext_type: u8, ext: &[u8]) {
        let mut ext = ext.to_vec();
        ext[0] = f[14 + 6];
        f[14 + 6] = ext_type;
        let plen = be16(f, 18) + ext.len() as u16;
        f[18..20].copy_from_slice(&plen.to_be_bytes());
        f.splice(54..54, ext);
    }

    #[test]
    fn ipv6_extension_headers_are_skipped() {
        let mut f = ipv6_tcp_ack();
        insert_ext(&mut f, 60, &[0, 0, 1, 4, 0, 0, 0, 0]); // dest opts, PadN
        insert_ext(
            &mut f,
            43,
            &[
                0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            ],
        ); // routing, 24 bytes
        insert_ext(&mut f, 0, &[0, 0, 1, 4, 0, 0, 0, 0]); // hop-by-hop
        insert_ext(&mut f, 51, &[0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1]); // AH, 12 bytes
        let l3 = parse(&f).unwrap().l3.unwrap();
        assert_eq!(l3.protocol, 6);
        let tcp = l3.tcp.unwrap();
        assert_eq!(tcp.offset, 54 + 12 + 8 + 24 + 8);
        assert_eq!(tcp.header_len, 32);
        assert_eq!(tcp.payload_len, 0);
        assert_eq!(
            l3.flow_hash,
            parse(&ipv6_tcp_ack()).unwrap().l3.unwrap().flow_hash
        );
    }

    #[test]
    fn ipv6_extension_chain_length_is_bounded() {
        let mut f = ipv6_tcp_ack();
        for _ in 0..MAX_IPV6_EXT_HEADERS {
            insert_ext(&mut f, 60, &[0, 0, 1, 4, 0, 0, 0, 0]);
        }
        let l3 = parse(&f).unwrap().l3.unwrap();
        assert_eq!(l3.protocol, 6);
        assert!(l3.tcp.is_some());
        insert_ext(&mut f, 60, &[0, 0, 1, 4, 0, 0, 0, 0]);
        let l3 = parse(&f).unwrap().l3.unwrap();
        assert_eq!(l3.protocol, 60);
        assert_eq!(l3.tcp, None);
    }

    #[test]
    fn ipv6_truncated_extension_chain_is_still_ip() {
        let mut f = ipv6_tcp_ack();
        insert_ext(&mut f, 60, &[0, 0, 1, 4, 0, 0, 0, 0]);
        f[54 + 1] = 200; // claims (200+1)*8 bytes: past the payload
        let l3 = parse(&f).unwrap().l3.unwrap();
        assert_eq!(l3.protocol, 60);
        assert_eq!(l3.tcp, None);
        assert_eq!(l3.ecn, Ecn::Ect1);
    }

    #[test]
    fn ipv6_fragments_use_three_tuple() {
        let whole = parse(&ipv6_tcp_ack()).unwrap().l3.unwrap();
        for off_m in [0x0001u16, 0x0008, 0x0009] {
            let mut f = ipv6_tcp_ack();
            let fo = off_m.to_be_bytes();
            insert_ext(&mut f, 44, &[0, 0, fo[0], fo[1], 0, 0, 0, 7]);
            let l3 = parse(&f).unwrap().l3.unwrap();
            assert_eq!(l3.protocol, 6);
            assert_eq!(l3.tcp, None);
            let mut src = [0u8; 16];
            src.copy_from_slice(&f[22..38]);
            let mut dst = [0u8; 16];
            dst.copy_from_slice(&f[38..54]);
            assert_eq!(l3.flow_hash, flow_hash(&src, &dst, 6, None));
            assert_ne!(l3.flow_hash, whole.flow_hash);
        }
        // An atomic fragment (offset 0, M 0) is a whole packet: 5-tuple.
        let mut f = ipv6_tcp_ack();
        insert_ext(&mut f, 44, &[0, 0, 0, 0, 0, 0, 0, 7]);
        assert_eq!(parse(&f).unwrap().l3.unwrap().flow_hash, whole.flow_hash);
    }

    #[test]
    fn ipv4_fragments_use_three_tuple() {
        let whole = parse(&ipv4_tcp_data()).unwrap().l3.unwrap();
        for flg_off in [0x2000u16, 0x0010, 0x2010] {
            let mut f = ipv4_tcp_data();
            f[20..22].copy_from_slice(&flg_off.to_be_bytes());
            let l3 = parse(&f).unwrap().l3.unwrap();
            assert_eq!(l3.tcp, None);
            assert_eq!(
                l3.flow_hash,
                flow_hash(&[10, 0, 0, 1], &[10, 0, 0, 2], 6, None)
            );
            assert_ne!(l3.flow_hash, whole.flow_hash);
        }
    }

    #[test]
    fn vlan_tags() {
        let plain = ipv4_tcp_data();
        // One 802.1Q tag, VID 100, PCP 5.
        let mut f = plain.clone();
        f.splice(12..12, [0x81, 0x00, 0xa0, 0x64]);
        let info = parse(&f).unwrap();
        assert_eq!(info.vlan, Some(100));
        assert_eq!(info.ethertype, 0x0800);
        let l3 = info.l3.unwrap();
        assert_eq!(l3.offset, 18);
        assert_eq!(l3.tcp.unwrap().offset, 38);
        assert_eq!(l3.flow_hash, parse(&plain).unwrap().l3.unwrap().flow_hash);
        // Q-in-Q: S-tag 0x88a8 VID 7 outside, C-tag VID 100 inside.
        let mut f2 = f.clone();
        f2.splice(12..12, [0x88, 0xa8, 0x00, 0x07]);
        let info = parse(&f2).unwrap();
        assert_eq!(info.vlan, Some(7));
        assert_eq!(info.l3.unwrap().offset, 22);
        // Three tags: not looked through, bridged as non-IP.
        let mut f3 = f2.clone();
        f3.splice(12..12, [0x81, 0x00, 0x00, 0x09]);
        let info = parse(&f3).unwrap();
        assert_eq!(info.vlan, Some(9));
        assert_eq!(info.ethertype, 0x8100);
        assert_eq!(info.l3, None);
        // Truncated tags.
        assert_eq!(parse(&f[..15]), Err(ParseError::TruncatedVlan));
        assert_eq!(parse(&f[..17]), Err(ParseError::TruncatedVlan));
        assert_eq!(parse(&f2[..21]), Err(ParseError::TruncatedVlan));
        // Tag and EtherType complete, no payload: fine, just not IP.
        assert_eq!(parse(&f[..18]).unwrap().l3, None);
    }

    #[test]
    fn arp_request_is_l2_only() {
        // Who has 10.0.0.2? Tell 10.0.0.1 — broadcast, 42 bytes.
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&SRC);
        f.extend_from_slice(&[0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x01]);
        f.extend_from_slice(&SRC);
        f.extend_from_slice(&[10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2]);
        assert_eq!(f.len(), 42);
        let info = parse(&f).unwrap();
        assert_eq!(info.dst, MacAddr::BROADCAST);
        assert!(info.dst.is_multicast());
        assert_eq!(info.ethertype, 0x0806);
        assert_eq!(info.l3, None);
    }

    #[test]
    fn ipv6_neighbor_solicitation() {
        // NS for 2001:db8::2 to its solicited-node group ff02::1:ff00:2,
        // dst MAC 33:33:ff:00:00:02, ICMPv6 type 135, hop limit 255.
        let mut f = vec![0x33, 0x33, 0xff, 0x00, 0x00, 0x02];
        f.extend_from_slice(&SRC);
        f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0x00, 32, 58, 255]);
        f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&[0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 2]);
        f.extend_from_slice(&[135, 0, 0, 0, 0, 0, 0, 0]);
        f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        f.extend_from_slice(&[1, 1]);
        f.extend_from_slice(&SRC);
        let info = parse(&f).unwrap();
        assert!(info.dst.is_multicast());
        let l3 = info.l3.unwrap();
        assert_eq!(l3.protocol, 58);
        assert_eq!(l3.ecn, Ecn::NotEct);
        assert_eq!(l3.tcp, None);
    }

    #[test]
    fn udp_ports_enter_the_hash() {
        let mut f = eth(0x0800);
        f.extend_from_slice(&[
            0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ]);
        f.extend_from_slice(&[0x30, 0x39, 0x00, 0x35, 0, 8, 0, 0]);
        let l3 = parse(&f).unwrap().l3.unwrap();
        assert_eq!(l3.protocol, 17);
        assert_eq!(l3.tcp, None);
        assert_eq!(
            l3.flow_hash,
            flow_hash(&[10, 0, 0, 1], &[10, 0, 0, 2], 17, Some((12345, 53)))
        );
    }

    #[test]
    fn malformed_ip_is_l2_only() {
        let good = ipv4_tcp_data();
        let cases: [(usize, u8); 3] = [
            (14, 0x65), // version 6 in an IPv4 EtherType
            (14, 0x44), // IHL 4
            (14, 0x40), // IHL 0
        ];
        for (i, (at, v)) in cases.iter().enumerate() {
            let mut f = good.clone();
            f[*at] = *v;
            let info = parse(&f).unwrap();
            assert_eq!(info.l3, None, "case {i}");
            assert_eq!(info.ethertype, 0x0800);
        }
        // Total length past the frame, and total length < header length.
        for total in [0u16, 19, 141, 0xffff] {
            let mut f = good.clone();
            f[16..18].copy_from_slice(&total.to_be_bytes());
            assert_eq!(parse(&f).unwrap().l3, None, "total {total}");
        }
        // IPv6 version nibble wrong / payload length past the frame.
        let mut f = ipv6_tcp_ack();
        f[14] = 0x40;
        assert_eq!(parse(&f).unwrap().l3, None);
        let mut f = ipv6_tcp_ack();
        f[19] += 1;
        assert_eq!(parse(&f).unwrap().l3, None);
    }

    #[test]
    fn malformed_tcp_keeps_l3() {
        let mut f = ipv4_tcp_data();
        f[46] = 0x40; // data offset 4
        let l3 = parse(&f).unwrap().l3.unwrap();
        assert_eq!(l3.tcp, None);
        assert_eq!(l3.ecn, Ecn::Ect0);
        // Ports were readable, so the hash is still the 5-tuple one.
        assert_eq!(
            l3.flow_hash,
            parse(&ipv4_tcp_data()).unwrap().l3.unwrap().flow_hash
        );
        let mut f = ipv4_tcp_data();
        f[46] = 0xf0; // data offset 15 = 60 bytes, fits in 120 bytes of segment
        assert_eq!(parse(&f).unwrap().l3.unwrap().tcp.unwrap().payload_len, 60);
    }

    #[test]
    fn short_frames() {
        for n in 0..14 {
            assert_eq!(parse(&vec![0u8; n]), Err(ParseError::TooShort));
        }
        let info = parse(&eth(0x0800)).unwrap();
        assert_eq!(info.l3, None);
    }

    #[test]
    fn every_prefix_is_safe() {
        for (name, f) in [
            ("syn", ipv4_tcp_syn()),
            ("data", ipv4_tcp_data()),
            ("v6", ipv6_tcp_ack()),
        ] {
            let ip_hdr = if f[14] >> 4 == 4 { 20 } else { 40 };
            let full = parse(&f).unwrap();
            for n in 0..=f.len() {
                match parse(&f[..n]) {
                    Err(e) => assert!(n < 14, "{name} {n}: {e}"),
                    Ok(info) => {
                        if n < 14 + ip_hdr {
                            assert_eq!(info.l3, None, "{name} prefix {n}");
                        }
                        // The IP length covers the whole packet: any cut is caught.
                        if n < f.len() {
                            assert_eq!(info.l3, None, "{name} prefix {n}");
                        } else {
                            assert_eq!(info, full);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = crate::rng::SimRng::new(99);
        let seeds = [ipv4_tcp_syn(), ipv4_tcp_data(), ipv6_tcp_ack()];
        for i in 0..20_000 {
            let mut f = seeds[i % 3].clone();
            // Flip a few bytes, sometimes cut.
            for _ in 0..1 + rng.next_u64() % 4 {
                let at = (rng.next_u64() as usize) % f.len();
                f[at] = rng.next_u64() as u8;
            }
            let cut = (rng.next_u64() as usize) % (f.len() + 1);
            if let Ok(info) = parse(&f[..cut]) {
                if let Some(l3) = info.l3 {
                    assert!(usize::from(l3.offset) < cut);
                    if let Some(t) = l3.tcp {
                        assert!(usize::from(t.offset) + usize::from(t.header_len) <= cut);
                    }
                }
            }
        }
    }

    proptest::proptest! {
        /// Any bytes: no panic, offsets inside the frame; marking a copy keeps
        /// its length and re-parses.
        #[test]
        fn arbitrary_frames(
            head in proptest::sample::select(vec![0usize, 1, 2]),
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
        ) {
            let mut f = match head {
                0 => eth(0x0800),
                1 => eth(0x86dd),
                _ => eth(0x8100),
            };
            f.extend_from_slice(&body);
            let Ok(info) = parse(&f) else {
                // Only a cut-off VLAN tag is an error once 14 bytes are there.
                proptest::prop_assert!(head == 2 && body.len() < 4);
                return Ok(());
            };
            if let Some(l3) = info.l3 {
                proptest::prop_assert!(usize::from(l3.offset) < f.len());
                if let Some(t) = l3.tcp {
                    let end = usize::from(t.offset) + usize::from(t.header_len)
                        + usize::from(t.payload_len);
                    proptest::prop_assert!(end <= f.len());
                }
                let mut g = f.clone();
                let _ = crate::wire::set_ce(&mut g, &l3);
                let _ = crate::wire::set_ece(&mut g, &l3);
                proptest::prop_assert_eq!(g.len(), f.len());
                proptest::prop_assert!(parse(&g).unwrap().l3.is_some());
            }
        }
    }

    #[test]
    fn flow_hash_spreads_and_distinguishes_direction() {
        let a = flow_hash(&[10, 0, 0, 1], &[10, 0, 0, 2], 6, Some((1000, 80)));
        let b = flow_hash(&[10, 0, 0, 2], &[10, 0, 0, 1], 6, Some((80, 1000)));
        assert_ne!(a, b);
        assert_eq!(
            a,
            flow_hash(&[10, 0, 0, 1], &[10, 0, 0, 2], 6, Some((1000, 80)))
        );
        // 4096 flows differing only in source port spread evenly over 8 queues.
        let mut buckets = [0u32; 8];
        for sp in 0..4096u16 {
            let h = flow_hash(&[10, 0, 0, 1], &[10, 0, 0, 2], 6, Some((sp, 80)));
            buckets[(h % 8) as usize] += 1;
        }
        for b in buckets {
            assert!((412..=612).contains(&b), "{buckets:?}");
        }
    }
}
