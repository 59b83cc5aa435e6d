//! CE marking: ECT → CE in IPv4 (incremental header checksum) and IPv6.
//!
//! TEMPORARY minimal implementation written on the `port` branch so the egress
//! port can apply marks; the wire engineer's version replaces it on merge
//! (same signature: `set_ce(&mut [u8], &L3Info) -> MarkOutcome`).

use super::{IpVersion, L3Info};

/// What [`set_ce`] did to the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkOutcome {
    /// ECT(0)/ECT(1) rewritten to CE (IPv4 checksum updated).
    Marked,
    /// Already CE: nothing to do.
    AlreadyCe,
    /// Not-ECT in the bytes: the caller must drop (or pass) instead.
    NotEct,
    /// The bytes do not hold the IP header `l3` describes.
    Invalid,
}

/// Sets CE in the IP header at `l3.offset` of `frame`.
pub fn set_ce(frame: &mut [u8], l3: &L3Info) -> MarkOutcome {
    let off = l3.offset as usize;
    match l3.version {
        IpVersion::V4 => {
            if frame.len() < off + 20 || frame[off] >> 4 != 4 {
                return MarkOutcome::Invalid;
            }
            let tos = frame[off + 1];
            match tos & 3 {
                0 => MarkOutcome::NotEct,
                3 => MarkOutcome::AlreadyCe,
                _ => {
                    let old = u16::from_be_bytes([frame[off], tos]);
                    let new = u16::from_be_bytes([frame[off], tos | 3]);
                    let hc = u16::from_be_bytes([frame[off + 10], frame[off + 11]]);
                    // RFC 1624 eq. 3: HC' = ~(~HC + ~m + m')
                    let mut sum = (!hc) as u32 + (!old) as u32 + new as u32;
                    while sum >> 16 != 0 {
                        sum = (sum & 0xffff) + (sum >> 16);
                    }
                    let hc2 = !(sum as u16);
                    frame[off + 1] = tos | 3;
                    frame[off + 10..off + 12].copy_from_slice(&hc2.to_be_bytes());
                    MarkOutcome::Marked
                }
            }
        }
        IpVersion::V6 => {
            if frame.len() < off + 40 || frame[off] >> 4 != 6 {
                return MarkOutcome::Invalid;
            }
            // Traffic class = low nibble of byte 0 | high nibble of byte 1;
            // its ECN bits are bits 5..4 of byte 1.
            match (frame[off + 1] >> 4) & 3 {
                0 => MarkOutcome::NotEct,
                3 => MarkOutcome::AlreadyCe,
                _ => {
                    frame[off + 1] |= 0x30;
                    MarkOutcome::Marked
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Ecn;

    fn l3(version: IpVersion) -> L3Info {
        L3Info {
            version,
            offset: 14,
            dscp: 0,
            ecn: Ecn::Ect0,
            protocol: 6,
            flow_hash: 0,
            tcp: None,
        }
    }

    #[test]
    fn ipv6_traffic_class() {
        let mut f = vec![0u8; 14 + 40];
        f[14] = 0x6b; // version 6, TC high nibble 0xb
        f[15] = 0xa0; // TC low nibble 0xa: DSCP 0b101110 (46), ECN 10 = ECT(0)
        assert_eq!(set_ce(&mut f, &l3(IpVersion::V6)), MarkOutcome::Marked);
        assert_eq!((f[14], f[15]), (0x6b, 0xb0));
        assert_eq!(set_ce(&mut f, &l3(IpVersion::V6)), MarkOutcome::AlreadyCe);
        f[15] = 0x80;
        assert_eq!(set_ce(&mut f, &l3(IpVersion::V6)), MarkOutcome::NotEct);
        assert_eq!(
            set_ce(&mut f[..30], &l3(IpVersion::V6)),
            MarkOutcome::Invalid
        );
    }

    #[test]
    fn ipv4_short_or_wrong_version_is_invalid() {
        let mut f = vec![0u8; 30];
        assert_eq!(set_ce(&mut f, &l3(IpVersion::V4)), MarkOutcome::Invalid);
        let mut f = vec![0u8; 34];
        f[14] = 0x65;
        assert_eq!(set_ce(&mut f, &l3(IpVersion::V4)), MarkOutcome::Invalid);
    }
}
