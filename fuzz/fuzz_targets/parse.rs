//! Fuzz target: the frame parser and the header rewrites on its output.
//!
//! Checks, besides "no panic":
//! * every offset `parse` returns lies inside the frame;
//! * `set_ce` on a copy gives the outcome the parsed ECN bits predict, keeps
//!   a correct IPv4 header checksum correct, and re-parses as CE with
//!   everything else unchanged;
//! * `set_ece` / `set_tcp_window` keep a correct TCP checksum correct;
//! * the rewrites given an `L3Info` built from fuzzer bytes (a wrong frame)
//!   never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use softswitch::wire::{
    ecn, parse, set_ce, set_ece, set_tcp_window, Ecn, IpVersion, Ipv4Packet, Ipv6Packet, L3Info,
    MarkOutcome, TcpInfo, TcpPacket,
};

fn tcp_checksum_ok(frame: &[u8], l3: &L3Info) -> Option<bool> {
    let t = l3.tcp?;
    let start = usize::from(t.offset);
    let end = start + usize::from(t.header_len) + usize::from(t.payload_len);
    let seg = TcpPacket::new_checked(frame.get(start..end)?).ok()?;
    let off = usize::from(l3.offset);
    Some(match l3.version {
        IpVersion::V4 => {
            let ip = Ipv4Packet::new_checked(&frame[off..]).ok()?;
            seg.verify_checksum_v4(ip.src_addr(), ip.dst_addr())
        }
        IpVersion::V6 => {
            let ip = Ipv6Packet::new_checked(&frame[off..]).ok()?;
            seg.verify_checksum_v6(&ip.src_addr(), &ip.dst_addr())
        }
    })
}

fuzz_target!(|data: &[u8]| {
    if let Ok(info) = parse(data) {
        if let Some(l3) = info.l3 {
            assert!(usize::from(l3.offset) < data.len());
            if let Some(t) = l3.tcp {
                let end =
                    usize::from(t.offset) + usize::from(t.header_len) + usize::from(t.payload_len);
                assert!(end <= data.len());
            }

            // CE marking.
            let mut copy = data.to_vec();
            let v4_ok = l3.version == IpVersion::V4
                && Ipv4Packet::new_checked(&data[usize::from(l3.offset)..])
                    .map(|p| p.verify_checksum())
                    .unwrap_or(false);
            let out = set_ce(&mut copy, &l3);
            let want = match l3.ecn {
                Ecn::NotEct => MarkOutcome::NotEct,
                Ecn::Ce => MarkOutcome::AlreadyCe,
                Ecn::Ect0 | Ecn::Ect1 => MarkOutcome::Marked,
            };
            assert_eq!(out, want);
            if out == MarkOutcome::Marked {
                let again = parse(&copy).expect("marked frame parses");
                let l3m = again.l3.expect("marked frame is IP");
                assert_eq!(l3m.ecn, Ecn::Ce);
                assert_eq!(L3Info { ecn: l3.ecn, ..l3m }, l3);
                if v4_ok {
                    let p = Ipv4Packet::new_checked(&copy[usize::from(l3.offset)..]).unwrap();
                    assert!(p.verify_checksum());
                }
            } else {
                assert_eq!(copy, data);
            }

            // TCP rewrites keep a correct checksum correct.
            if l3.tcp.is_some() {
                let before = tcp_checksum_ok(data, &l3);
                let mut copy = data.to_vec();
                assert!(set_ece(&mut copy, &l3));
                assert!(set_tcp_window(&mut copy, &l3, 1460));
                if before == Some(true) {
                    assert_eq!(tcp_checksum_ok(&copy, &l3), Some(true));
                }
                let _ = ecn::tcp_window_scale(&copy, &l3);
            }
        }
    }

    // Rewrites with an L3Info that need not match the frame.
    if data.len() >= 8 {
        let (h, frame) = data.split_at(8);
        let l3 = L3Info {
            version: if h[0] & 1 == 0 {
                IpVersion::V4
            } else {
                IpVersion::V6
            },
            offset: u16::from(h[1]),
            dscp: 0,
            ecn: Ecn::from_bits(h[0] >> 1),
            protocol: if h[0] & 8 == 0 { 6 } else { h[2] },
            flow_hash: 0,
            tcp: (h[0] & 16 == 0).then(|| TcpInfo {
                offset: u16::from_be_bytes([h[3] & 1, h[4]]),
                header_len: u16::from(h[5]),
                flags: h[6],
                payload_len: u16::from(h[7]),
            }),
        };
        let mut f = frame.to_vec();
        let _ = set_ce(&mut f, &l3);
        let _ = set_ece(&mut f, &l3);
        let _ = set_tcp_window(&mut f, &l3, u16::from(h[2]));
        let _ = ecn::tcp_window_scale(&f, &l3);
        assert_eq!(f.len(), frame.len());
    }
});
