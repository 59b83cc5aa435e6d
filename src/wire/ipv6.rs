//! IPv6 fixed header view (RFC 8200 §3), with the ECN field of RFC 3168 §5
//! in the low two bits of the traffic class. IPv6 has no header checksum, so
//! CE marking is a plain bit write.

use super::{be16, Ecn, WireError};

mod field {
    pub type Field = core::ops::Range<usize>;
    // version(4) | traffic class(8) | flow label(20) in bytes 0..4
    pub const VER_TC_FLOW: Field = 0..4;
    pub const LENGTH: usize = 4;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC_ADDR: Field = 8..24;
    pub const DST_ADDR: Field = 24..40;
}

/// Length of the fixed IPv6 header.
pub const HEADER_LEN: usize = field::DST_ADDR.end;

/// A read/write view of an IPv6 packet starting at the fixed header (the
/// buffer may run past the packet, e.g. Ethernet padding).
#[derive(Debug, Clone)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps a buffer without checking it (getters may panic on short buffers).
    pub fn new_unchecked(buffer: T) -> Self {
        Ipv6Packet { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Ok when the fixed header fits, the version is 6 and 40 + payload
    /// length ≤ buffer length. After this no getter or setter panics.
    ///
    /// A jumbogram (payload length 0 with a Jumbo Payload option, RFC 2675)
    /// is read as a packet with an empty payload: it cannot cross an
    /// Ethernet link of ordinary MTU anyway.
    pub fn check_len(&self) -> Result<(), WireError> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if self.version() != 6 {
            return Err(WireError::Malformed);
        }
        if HEADER_LEN + usize::from(self.payload_len()) > len {
            return Err(WireError::Truncated);
        }
        Ok(())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
    /// Version nibble (6 for a packet that passed `check_len`).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }
    /// Traffic class byte (DSCP << 2 | ECN).
    pub fn traffic_class(&self) -> u8 {
        let b = self.buffer.as_ref();
        (b[0] << 4) | (b[1] >> 4)
    }
    /// DSCP (upper six bits of the traffic class).
    pub fn dscp(&self) -> u8 {
        self.traffic_class() >> 2
    }
    /// ECN codepoint (lower two bits of the traffic class).
    pub fn ecn(&self) -> Ecn {
        Ecn::from_bits(self.traffic_class())
    }
    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::VER_TC_FLOW];
        u32::from_be_bytes([0, b[1] & 0x0f, b[2], b[3]])
    }
    /// Payload length (extension headers included).
    pub fn payload_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }
    /// Next header of the fixed header.
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NXT_HDR]
    }
    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }
    /// Source address.
    pub fn src_addr(&self) -> [u8; 16] {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC_ADDR]);
        a
    }
    /// Destination address.
    pub fn dst_addr(&self) -> [u8; 16] {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST_ADDR]);
        a
    }
    /// The payload (extension headers included), up to the payload length.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + usize::from(self.payload_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Sets the ECN codepoint (bits 2..4 of byte 1; no checksum to update).
    pub fn set_ecn(&mut self, ecn: Ecn) {
        let b = self.buffer.as_mut();
        b[1] = (b[1] & !0x30) | ((ecn as u8) << 4);
    }
    /// The payload, mutable, up to the payload length.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Version 6, traffic class 0xb9 (DSCP 46 EF, ECT(1)), flow label 0x12345,
    // payload 8 bytes, next header UDP, hop limit 64, 2001:db8::1 → 2001:db8::2.
    fn packet() -> Vec<u8> {
        let mut p = vec![
            0x6b, 0x91, 0x23, 0x45, 0x00, 0x08, 0x11, 0x40, // ver/tc/flow, len, nh, hl
            0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, // src
            0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, // dst
        ];
        p.extend_from_slice(&[0x30, 0x39, 0x00, 0x35, 0x00, 0x08, 0x00, 0x00]);
        p
    }

    #[test]
    fn getters() {
        let p = packet();
        let ip = Ipv6Packet::new_checked(&p[..]).unwrap();
        assert_eq!(ip.traffic_class(), 0xb9);
        assert_eq!(ip.dscp(), 46);
        assert_eq!(ip.ecn(), Ecn::Ect1);
        assert_eq!(ip.flow_label(), 0x12345);
        assert_eq!(ip.payload_len(), 8);
        assert_eq!(ip.next_header(), 17);
        assert_eq!(ip.hop_limit(), 64);
        assert_eq!(ip.src_addr()[15], 1);
        assert_eq!(ip.dst_addr()[15], 2);
        assert_eq!(ip.payload().len(), 8);
    }

    #[test]
    fn check_len_rejects() {
        let p = packet();
        for n in 0..p.len() {
            assert_eq!(
                Ipv6Packet::new_checked(&p[..n]).unwrap_err(),
                WireError::Truncated
            );
        }
        let mut bad = p.clone();
        bad[0] = 0x4b;
        assert_eq!(
            Ipv6Packet::new_checked(&bad[..]).unwrap_err(),
            WireError::Malformed
        );
    }

    #[test]
    fn set_ecn_touches_only_ecn_bits() {
        let mut p = packet();
        let before = p.clone();
        let mut ip = Ipv6Packet::new_checked(&mut p[..]).unwrap();
        ip.set_ecn(Ecn::Ce);
        assert_eq!(ip.ecn(), Ecn::Ce);
        assert_eq!(ip.dscp(), 46);
        assert_eq!(ip.flow_label(), 0x12345);
        assert_eq!(ip.version(), 6);
        ip.set_ecn(Ecn::Ect1);
        assert_eq!(p, before);
    }
}
