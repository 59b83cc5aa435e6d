//! Ethernet II header view (IEEE 802.3 framing with an EtherType; no FCS —
//! AF_XDP hands us frames without it).

use super::{be16, MacAddr, WireError};

mod field {
    pub type Field = core::ops::Range<usize>;
    pub const DESTINATION: Field = 0..6;
    pub const SOURCE: Field = 6..12;
    pub const ETHERTYPE: usize = 12;
    pub const PAYLOAD: usize = 14;
}

/// Length of the Ethernet II header (no VLAN tag).
pub const HEADER_LEN: usize = field::PAYLOAD;

/// Length of one 802.1Q / 802.1ad tag (TPID is the EtherType slot; TCI + inner EtherType).
pub const VLAN_TAG_LEN: usize = 4;

/// EtherType values the switch looks at.
pub mod ethertype {
    /// IPv4.
    pub const IPV4: u16 = 0x0800;
    /// ARP.
    pub const ARP: u16 = 0x0806;
    /// 802.1Q customer VLAN tag.
    pub const VLAN: u16 = 0x8100;
    /// IPv6.
    pub const IPV6: u16 = 0x86dd;
    /// 802.1ad service VLAN tag (Q-in-Q).
    pub const QINQ: u16 = 0x88a8;
    /// Pre-standard Q-in-Q tag still sent by some equipment.
    pub const QINQ_LEGACY: u16 = 0x9100;
    /// True for the TPIDs of a VLAN tag.
    pub fn is_vlan_tag(t: u16) -> bool {
        t == VLAN || t == QINQ || t == QINQ_LEGACY
    }
}

/// A read/write view of an Ethernet II frame.
#[derive(Debug, Clone)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps a buffer without checking it (getters may panic on short buffers).
    pub fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }
    /// Wraps a buffer after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }
    /// Ok when the header fits; no getter panics afterwards.
    pub fn check_len(&self) -> Result<(), WireError> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(WireError::Truncated)
        } else {
            Ok(())
        }
    }
    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
    /// Destination address.
    pub fn dst_addr(&self) -> MacAddr {
        let mut m = [0u8; 6];
        m.copy_from_slice(&self.buffer.as_ref()[field::DESTINATION]);
        MacAddr(m)
    }
    /// Source address.
    pub fn src_addr(&self) -> MacAddr {
        let mut m = [0u8; 6];
        m.copy_from_slice(&self.buffer.as_ref()[field::SOURCE]);
        MacAddr(m)
    }
    /// EtherType (or the TPID of the first VLAN tag).
    pub fn ethertype(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ETHERTYPE)
    }
    /// Everything after the 14-byte header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields() {
        let f = [
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06,
            0xaa,
        ];
        let e = EthernetFrame::new_checked(&f[..]).unwrap();
        assert_eq!(e.dst_addr(), MacAddr::BROADCAST);
        assert_eq!(e.src_addr(), MacAddr([2, 0, 0, 0, 0, 1]));
        assert_eq!(e.ethertype(), ethertype::ARP);
        assert_eq!(e.payload(), &[0xaa]);
        assert_eq!(
            EthernetFrame::new_checked(&f[..13]).unwrap_err(),
            WireError::Truncated
        );
    }
}
