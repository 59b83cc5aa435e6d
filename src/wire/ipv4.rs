//! IPv4 header view (RFC 791), with the ECN field of RFC 3168 §5.

use super::checksum;
use super::{be16, set_be16, Ecn, WireError};

mod field {
    pub type Field = core::ops::Range<usize>;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLG_OFF: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: usize = 10;
    pub const SRC_ADDR: Field = 12..16;
    pub const DST_ADDR: Field = 16..20;
}

/// Length of an IPv4 header without options.
pub const HEADER_LEN: usize = field::DST_ADDR.end;

/// A read/write view of an IPv4 packet starting at the IP header (the buffer
/// may run past the packet, e.g. Ethernet padding).
#[derive(Debug, Clone)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps a buffer without checking it (getters may panic on short buffers).
    pub fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Ok when: the fixed header fits, version is 4, IHL ≥ 5, the header with
    /// its options fits, and header length ≤ total length ≤ buffer length.
    /// After this no getter or setter panics.
    pub fn check_len(&self) -> Result<(), WireError> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if self.version() != 4 {
            return Err(WireError::Malformed);
        }
        let hl = self.header_len();
        if hl < HEADER_LEN {
            return Err(WireError::Malformed);
        }
        if hl > len {
            return Err(WireError::Truncated);
        }
        let total = usize::from(self.total_len());
        if total < hl {
            return Err(WireError::Malformed);
        }
        if total > len {
            return Err(WireError::Truncated);
        }
        Ok(())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
    /// Version nibble (4 for a packet that passed `check_len`).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }
    /// Header length in bytes (IHL × 4), options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }
    /// Differentiated services code point (upper six bits of the TOS byte).
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }
    /// ECN codepoint (lower two bits of the TOS byte).
    pub fn ecn(&self) -> Ecn {
        Ecn::from_bits(self.buffer.as_ref()[field::DSCP_ECN])
    }
    /// Total length (header + payload) in bytes.
    pub fn total_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }
    /// Identification.
    pub fn ident(&self) -> u16 {
        be16(self.buffer.as_ref(), field::IDENT)
    }
    /// Don't-fragment flag.
    pub fn dont_frag(&self) -> bool {
        be16(self.buffer.as_ref(), field::FLG_OFF) & 0x4000 != 0
    }
    /// More-fragments flag.
    pub fn more_frags(&self) -> bool {
        be16(self.buffer.as_ref(), field::FLG_OFF) & 0x2000 != 0
    }
    /// Fragment offset in bytes.
    pub fn frag_offset(&self) -> u16 {
        (be16(self.buffer.as_ref(), field::FLG_OFF) & 0x1fff) << 3
    }
    /// Part of a fragmented datagram (first or later fragment).
    pub fn is_fragment(&self) -> bool {
        be16(self.buffer.as_ref(), field::FLG_OFF) & 0x3fff != 0
    }
    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }
    /// Protocol of the payload.
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }
    /// Header checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }
    /// Source address.
    pub fn src_addr(&self) -> [u8; 4] {
        let mut a = [0u8; 4];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC_ADDR]);
        a
    }
    /// Destination address.
    pub fn dst_addr(&self) -> [u8; 4] {
        let mut a = [0u8; 4];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST_ADDR]);
        a
    }
    /// True when the header checksum is correct.
    pub fn verify_checksum(&self) -> bool {
        checksum::checksum(&self.buffer.as_ref()[..self.header_len()]) == 0
    }
    /// The payload, up to the total length (Ethernet padding excluded).
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        &b[self.header_len()..usize::from(self.total_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Sets the ECN codepoint and updates the header checksum incrementally
    /// (RFC 1624 eq. 3 on the version/IHL/TOS word), so a correct checksum
    /// stays correct and a wrong one stays wrong by the same amount.
    pub fn set_ecn(&mut self, ecn: Ecn) {
        let b = self.buffer.as_mut();
        let old = be16(b, field::VER_IHL);
        b[field::DSCP_ECN] = (b[field::DSCP_ECN] & !3) | ecn as u8;
        let new = be16(b, field::VER_IHL);
        let hc = be16(b, field::CHECKSUM);
        set_be16(b, field::CHECKSUM, checksum::update_word(hc, old, new));
    }
    /// Sets the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        set_be16(self.buffer.as_mut(), field::CHECKSUM, value);
    }
    /// Recomputes the header checksum from scratch (RFC 1071).
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let hl = self.header_len();
        let c = checksum::checksum(&self.buffer.as_ref()[..hl]);
        self.set_checksum(c);
    }
    /// The payload, mutable, up to the total length.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (hl, tl) = (self.header_len(), usize::from(self.total_len()));
        &mut self.buffer.as_mut()[hl..tl]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // 192.168.0.1 → 192.168.0.199, UDP, 0x73 bytes, DF; checksum b861.
    const HDR: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];

    fn packet() -> Vec<u8> {
        let mut p = HDR.to_vec();
        p.resize(0x73, 0);
        p
    }

    #[test]
    fn getters() {
        let p = packet();
        let ip = Ipv4Packet::new_checked(&p[..]).unwrap();
        assert_eq!(ip.version(), 4);
        assert_eq!(ip.header_len(), 20);
        assert_eq!(ip.total_len(), 0x73);
        assert!(ip.dont_frag());
        assert!(!ip.more_frags());
        assert!(!ip.is_fragment());
        assert_eq!(ip.ttl(), 64);
        assert_eq!(ip.protocol(), 17);
        assert_eq!(ip.src_addr(), [192, 168, 0, 1]);
        assert_eq!(ip.dst_addr(), [192, 168, 0, 199]);
        assert_eq!(ip.ecn(), Ecn::NotEct);
        assert!(ip.verify_checksum());
        assert_eq!(ip.payload().len(), 0x73 - 20);
    }

    #[test]
    fn check_len_rejects() {
        let p = packet();
        assert_eq!(
            Ipv4Packet::new_checked(&p[..19]).unwrap_err(),
            WireError::Truncated
        );
        // total length 0x73 > buffer
        assert_eq!(
            Ipv4Packet::new_checked(&p[..0x72]).unwrap_err(),
            WireError::Truncated
        );
        let mut bad = p.clone();
        bad[0] = 0x65; // version 6
        assert_eq!(
            Ipv4Packet::new_checked(&bad[..]).unwrap_err(),
            WireError::Malformed
        );
        let mut bad = p.clone();
        bad[0] = 0x44; // IHL 4
        assert_eq!(
            Ipv4Packet::new_checked(&bad[..]).unwrap_err(),
            WireError::Malformed
        );
        let mut bad = p.clone();
        bad[2] = 0;
        bad[3] = 19; // total length < header length
        assert_eq!(
            Ipv4Packet::new_checked(&bad[..]).unwrap_err(),
            WireError::Malformed
        );
        let mut bad = p.clone();
        bad[0] = 0x4f; // IHL 15 = 60 bytes, fits in 0x73
        assert!(Ipv4Packet::new_checked(&bad[..]).is_ok());
        assert_eq!(
            Ipv4Packet::new_checked(&bad[..50]).unwrap_err(),
            WireError::Truncated
        );
    }

    #[test]
    fn set_ecn_keeps_checksum_valid() {
        let mut p = packet();
        let mut ip = Ipv4Packet::new_checked(&mut p[..]).unwrap();
        for e in [Ecn::Ect0, Ecn::Ce, Ecn::Ect1, Ecn::NotEct, Ecn::Ce] {
            ip.set_ecn(e);
            assert_eq!(ip.ecn(), e);
            assert!(ip.verify_checksum());
        }
        ip.set_ecn(Ecn::NotEct);
        assert_eq!(ip.checksum(), 0xb861);
        ip.fill_checksum();
        assert_eq!(ip.checksum(), 0xb861);
    }
}
