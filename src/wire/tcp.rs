//! TCP header view (RFC 9293 §3.1), with the ECE/CWR flags of RFC 3168 §6.1
//! and the window-scale option of RFC 7323 §2.
//!
//! The view covers the TCP segment only (header + payload, as cut out by the
//! IP layer), so the checksum setters do not need the pseudo-header: they
//! update the checksum incrementally (RFC 1624 eq. 3) for the one 16-bit
//! word they change, and the pseudo-header does not change.

use super::checksum;
use super::{be16, set_be16, WireError};

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const SEQ_NUM: usize = 4;
    pub const ACK_NUM: usize = 8;
    // data offset(4) | reserved(3) | NS(1) || CWR ECE URG ACK PSH RST SYN FIN
    pub const OFF_FLAGS: usize = 12;
    pub const FLAGS: usize = 13;
    pub const WIN_SIZE: usize = 14;
    pub const CHECKSUM: usize = 16;
    pub const URGENT: usize = 18;
    pub const OPTIONS: usize = 20;
}

/// Length of a TCP header without options.
pub const HEADER_LEN: usize = field::OPTIONS;

/// TCP flag bits (the flags byte, byte 13 of the header).
pub mod flags {
    /// FIN
    pub const FIN: u8 = 0x01;
    /// SYN
    pub const SYN: u8 = 0x02;
    /// RST
    pub const RST: u8 = 0x04;
    /// PSH
    pub const PSH: u8 = 0x08;
    /// ACK
    pub const ACK: u8 = 0x10;
    /// URG
    pub const URG: u8 = 0x20;
    /// ECN-Echo (RFC 3168).
    pub const ECE: u8 = 0x40;
    /// Congestion Window Reduced (RFC 3168).
    pub const CWR: u8 = 0x80;
}

/// A read/write view of a TCP segment.
#[derive(Debug, Clone)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Wraps a buffer without checking it (getters may panic on short buffers).
    pub fn new_unchecked(buffer: T) -> Self {
        TcpPacket { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Ok when the fixed header fits, data offset ≥ 5 and the header with its
    /// options fits. After this no getter or setter panics.
    pub fn check_len(&self) -> Result<(), WireError> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let hl = self.header_len();
        if hl < HEADER_LEN {
            return Err(WireError::Malformed);
        }
        if hl > len {
            return Err(WireError::Truncated);
        }
        Ok(())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SRC_PORT)
    }
    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::DST_PORT)
    }
    /// Sequence number.
    pub fn seq_number(&self) -> u32 {
        let b = self.buffer.as_ref();
        let s = field::SEQ_NUM;
        u32::from_be_bytes([b[s], b[s + 1], b[s + 2], b[s + 3]])
    }
    /// Acknowledgment number.
    pub fn ack_number(&self) -> u32 {
        let b = self.buffer.as_ref();
        let s = field::ACK_NUM;
        u32::from_be_bytes([b[s], b[s + 1], b[s + 2], b[s + 3]])
    }
    /// Header length in bytes (data offset × 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::OFF_FLAGS] >> 4) * 4
    }
    /// The flags byte (see [`flags`]).
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }
    /// Receive window (unscaled, as on the wire).
    pub fn window_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::WIN_SIZE)
    }
    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }
    /// Urgent pointer.
    pub fn urgent_at(&self) -> u16 {
        be16(self.buffer.as_ref(), field::URGENT)
    }
    /// The option bytes between the fixed header and the payload.
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[field::OPTIONS..self.header_len()]
    }
    /// The payload (everything after the header).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
    /// The window-scale shift of a Window Scale option (kind 3, RFC 7323
    /// §2.2), if the header carries one (it only means something on a SYN).
    /// Shifts above 14 are clamped to 14 as the RFC requires of receivers.
    pub fn window_scale(&self) -> Option<u8> {
        let mut opts = self.options();
        while let Some((&kind, rest)) = opts.split_first() {
            match kind {
                0 => return None, // end of option list
                1 => opts = rest, // no-op
                _ => {
                    let len = usize::from(*rest.first()?);
                    if len < 2 || len > opts.len() {
                        return None; // malformed option list
                    }
                    if kind == 3 && len == 3 {
                        return Some(opts[2].min(14));
                    }
                    opts = &opts[len..];
                }
            }
        }
        None
    }
    /// Full checksum check over IPv4 pseudo-header + segment.
    pub fn verify_checksum_v4(&self, src: [u8; 4], dst: [u8; 4]) -> bool {
        let seg = self.buffer.as_ref();
        let Ok(len) = u16::try_from(seg.len()) else {
            return false;
        };
        let acc = checksum::pseudo_header_v4(src, dst, super::ip_proto::TCP, len);
        checksum::fold(checksum::accumulate(acc, seg)) == 0xffff
    }
    /// Full checksum check over IPv6 pseudo-header + segment.
    pub fn verify_checksum_v6(&self, src: &[u8; 16], dst: &[u8; 16]) -> bool {
        let seg = self.buffer.as_ref();
        let Ok(len) = u32::try_from(seg.len()) else {
            return false;
        };
        let acc = checksum::pseudo_header_v6(src, dst, super::ip_proto::TCP, len);
        checksum::fold(checksum::accumulate(acc, seg)) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    fn rewrite_word(&mut self, at: usize, new: u16) {
        let b = self.buffer.as_mut();
        let old = be16(b, at);
        set_be16(b, at, new);
        let hc = be16(b, field::CHECKSUM);
        set_be16(b, field::CHECKSUM, checksum::update_word(hc, old, new));
    }
    /// Sets the flags byte, updating the checksum incrementally.
    pub fn set_flags(&mut self, value: u8) {
        let b = self.buffer.as_ref();
        let word = (u16::from(b[field::OFF_FLAGS]) << 8) | u16::from(value);
        self.rewrite_word(field::OFF_FLAGS, word);
    }
    /// Sets the receive window, updating the checksum incrementally.
    pub fn set_window_len(&mut self, value: u16) {
        self.rewrite_word(field::WIN_SIZE, value);
    }
    /// Sets the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        set_be16(self.buffer.as_mut(), field::CHECKSUM, value);
    }
    /// Recomputes the checksum from scratch over the IPv4 pseudo-header.
    /// Does nothing for a segment longer than 65535 bytes.
    pub fn fill_checksum_v4(&mut self, src: [u8; 4], dst: [u8; 4]) {
        let Ok(len) = u16::try_from(self.buffer.as_ref().len()) else {
            return;
        };
        self.set_checksum(0);
        let acc = checksum::pseudo_header_v4(src, dst, super::ip_proto::TCP, len);
        let c = !checksum::fold(checksum::accumulate(acc, self.buffer.as_ref()));
        self.set_checksum(c);
    }
    /// Recomputes the checksum from scratch over the IPv6 pseudo-header.
    pub fn fill_checksum_v6(&mut self, src: &[u8; 16], dst: &[u8; 16]) {
        let Ok(len) = u32::try_from(self.buffer.as_ref().len()) else {
            return;
        };
        self.set_checksum(0);
        let acc = checksum::pseudo_header_v6(src, dst, super::ip_proto::TCP, len);
        let c = !checksum::fold(checksum::accumulate(acc, self.buffer.as_ref()));
        self.set_checksum(c);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    // SYN 40000 → 5201, seq 1, doff 10 (40 bytes), flags SYN|ECE|CWR (ECN setup),
    // window 64240; options MSS 1460, SACK-permitted, timestamps, NOP, wscale 7.
    pub(crate) const SYN: [u8; 40] = [
        0x9c, 0x40, 0x14, 0x51, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0xa0, 0xc2, 0xfa,
        0xf0, 0x00, 0x00, 0x00, 0x00, // checksum 0 (filled by tests), urgent 0
        0x02, 0x04, 0x05, 0xb4, // MSS 1460
        0x04, 0x02, // SACK permitted
        0x08, 0x0a, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, // timestamps
        0x01, // NOP
        0x03, 0x03, 0x07, // window scale 7
    ];

    #[test]
    fn getters() {
        let t = TcpPacket::new_checked(&SYN[..]).unwrap();
        assert_eq!(t.src_port(), 40000);
        assert_eq!(t.dst_port(), 5201);
        assert_eq!(t.seq_number(), 1);
        assert_eq!(t.ack_number(), 0);
        assert_eq!(t.header_len(), 40);
        assert_eq!(t.flags(), flags::SYN | flags::ECE | flags::CWR);
        assert_eq!(t.window_len(), 64240);
        assert_eq!(t.options().len(), 20);
        assert_eq!(t.window_scale(), Some(7));
        assert!(t.payload().is_empty());
    }

    #[test]
    fn check_len_rejects() {
        for n in 0..SYN.len() {
            assert_eq!(
                TcpPacket::new_checked(&SYN[..n]).unwrap_err(),
                WireError::Truncated
            );
        }
        let mut bad = SYN;
        bad[12] = 0x40; // data offset 4
        assert_eq!(
            TcpPacket::new_checked(&bad[..]).unwrap_err(),
            WireError::Malformed
        );
    }

    #[test]
    fn window_scale_option_edge_cases() {
        let mut s = SYN;
        s[39] = 20; // shift > 14 is clamped
        assert_eq!(TcpPacket::new_unchecked(&s[..]).window_scale(), Some(14));
        s[20] = 0; // end of option list first
        assert_eq!(TcpPacket::new_unchecked(&s[..]).window_scale(), None);
        let mut s = SYN;
        s[21] = 0; // option length 0: malformed, must stop
        assert_eq!(TcpPacket::new_unchecked(&s[..]).window_scale(), None);
        let mut s = SYN;
        s[21] = 60; // option length past the header
        assert_eq!(TcpPacket::new_unchecked(&s[..]).window_scale(), None);
        let mut s = SYN;
        s[38] = 2; // wscale with a wrong length is skipped, list ends
        assert_eq!(TcpPacket::new_unchecked(&s[..]).window_scale(), None);
    }

    #[test]
    fn setters_keep_checksum_valid() {
        let (src, dst) = ([10, 0, 0, 1], [10, 0, 0, 2]);
        let mut s = SYN.to_vec();
        s.extend_from_slice(b"hello");
        let mut t = TcpPacket::new_checked(&mut s[..]).unwrap();
        t.fill_checksum_v4(src, dst);
        assert!(t.verify_checksum_v4(src, dst));
        t.set_flags(flags::ACK | flags::ECE);
        assert!(t.verify_checksum_v4(src, dst));
        assert_eq!(t.header_len(), 40);
        t.set_window_len(1);
        assert!(t.verify_checksum_v4(src, dst));
        assert!(!t.verify_checksum_v4(src, [10, 0, 0, 3]));
    }
}
