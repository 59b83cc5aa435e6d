//! Packet views over frame bytes (smoltcp style) and the one-pass parser the
//! data path runs on every frame.
//!
//! Contract: [`parse()`] reads untrusted bytes and never panics; it returns a
//! [`FrameInfo`] whose offsets are valid for the frame it was given (every
//! offset + header length ≤ frame length). Functions that rewrite headers
//! ([`ecn::set_ce`], [`ecn::set_ece`], [`ecn::set_tcp_window`]) take its
//! [`L3Info`] and re-check version and lengths in the frame, so a caller
//! passing a different frame gets [`MarkOutcome::Invalid`] / `false`, never a
//! panic.
//!
//! The header views ([`EthernetFrame`], [`Ipv4Packet`], [`Ipv6Packet`],
//! [`TcpPacket`]) follow smoltcp: field offsets in a private `mod field`,
//! getters on `T: AsRef<[u8]>`, setters on `T: AsMut<[u8]>`, and the contract
//! that once `check_len()` (or `new_checked`) has succeeded no getter or setter
//! panics. Untrusted bytes only ever go through `new_checked`.
//!
//! Checksums are updated incrementally (RFC 1624, eq. 3: HC' = ~(~HC + ~m + m')).

pub mod checksum;
pub mod ecn;
pub mod ethernet;
pub mod ipv4;
pub mod ipv6;
pub mod parse;
pub mod tcp;
#[cfg(test)]
pub(crate) mod test_frames;

pub use ecn::{set_ce, set_ece, set_tcp_window, MarkOutcome};
pub use ethernet::EthernetFrame;
pub use ipv4::Ipv4Packet;
pub use ipv6::Ipv6Packet;
pub use parse::parse;
pub use tcp::TcpPacket;

/// Why a header view refused a buffer (`new_checked` / `check_len`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The buffer ends before the header (or the length the header claims) does.
    #[error("truncated header")]
    Truncated,
    /// A field holds a value the protocol does not allow (version, header length).
    #[error("malformed header")]
    Malformed,
}

/// IP protocol numbers the parser knows.
pub mod ip_proto {
    /// IPv6 hop-by-hop options (extension header).
    pub const HOP_BY_HOP: u8 = 0;
    /// ICMP.
    pub const ICMP: u8 = 1;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// IPv6 routing header.
    pub const IPV6_ROUTE: u8 = 43;
    /// IPv6 fragment header.
    pub const IPV6_FRAG: u8 = 44;
    /// IPsec authentication header.
    pub const AH: u8 = 51;
    /// ICMPv6.
    pub const ICMPV6: u8 = 58;
    /// IPv6 no next header.
    pub const IPV6_NONXT: u8 = 59;
    /// IPv6 destination options.
    pub const IPV6_OPTS: u8 = 60;
}

#[inline]
pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline]
pub(crate) fn set_be16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// A 48-bit Ethernet address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// ff:ff:ff:ff:ff:ff
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);
    /// Group bit set (broadcast and multicast).
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 1 == 1
    }
    /// The address as a u64 (upper 16 bits zero), for cheap hashing.
    pub fn to_u64(&self) -> u64 {
        let mut b = [0u8; 8];
        b[2..].copy_from_slice(&self.0);
        u64::from_be_bytes(b)
    }
}

impl std::fmt::Display for MacAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

/// The two ECN bits of the IP header (RFC 3168 §5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u8)]
pub enum Ecn {
    /// 00: transport is not ECN-capable.
    #[default]
    NotEct = 0,
    /// 01: ECT(1).
    Ect1 = 1,
    /// 10: ECT(0).
    Ect0 = 2,
    /// 11: congestion experienced.
    Ce = 3,
}

impl Ecn {
    /// From the low two bits of the TOS / traffic-class byte.
    pub fn from_bits(b: u8) -> Ecn {
        match b & 3 {
            0 => Ecn::NotEct,
            1 => Ecn::Ect1,
            2 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }
    /// ECT(0), ECT(1) or already CE: a mark is allowed instead of a drop.
    pub fn is_ect(self) -> bool {
        self != Ecn::NotEct
    }
}

/// IP version of the network header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpVersion {
    /// IPv4
    V4,
    /// IPv6
    V6,
}

/// What the switch needs from a TCP header (R-AQM reads it; the rest ignore it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// Frame offset of the TCP header.
    pub offset: u16,
    /// TCP header length in bytes (data offset × 4).
    pub header_len: u16,
    /// Flags byte (FIN=0x01 SYN=0x02 RST=0x04 PSH=0x08 ACK=0x10 URG=0x20 ECE=0x40 CWR=0x80).
    pub flags: u8,
    /// TCP payload bytes (from the IP length, not the frame length).
    pub payload_len: u16,
}

impl TcpInfo {
    /// A pure ACK: ACK set, no payload, no SYN/FIN/RST (R-AQM paper §IV).
    pub fn is_pure_ack(&self) -> bool {
        self.flags & 0x10 != 0 && self.flags & 0x07 == 0 && self.payload_len == 0
    }
}

/// The IP layer of a frame, as the queueing core sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct L3Info {
    /// IPv4 or IPv6.
    pub version: IpVersion,
    /// Frame offset of the IP header (14, or 18 with one VLAN tag, ...).
    pub offset: u16,
    /// DSCP (upper six bits of TOS / traffic class).
    pub dscp: u8,
    /// ECN codepoint.
    pub ecn: Ecn,
    /// IP protocol / IPv6 next header of the transport (after extension headers we skip).
    pub protocol: u8,
    /// Hash of the 5-tuple (or 3-tuple for non-TCP/UDP); stable for a flow, both
    /// directions hash differently. Used by per-flow AQMs (DiffECN, PRED).
    pub flow_hash: u32,
    /// TCP details when the transport is TCP and its header is in the frame.
    pub tcp: Option<TcpInfo>,
}

/// Everything the switch reads from a frame, in one pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameInfo {
    /// Destination MAC.
    pub dst: MacAddr,
    /// Source MAC.
    pub src: MacAddr,
    /// 802.1Q VLAN id of the outer tag, if tagged.
    pub vlan: Option<u16>,
    /// Ethertype after any VLAN tags.
    pub ethertype: u16,
    /// IP layer, when the frame is IPv4/IPv6 with a complete IP header.
    pub l3: Option<L3Info>,
}

/// Why a frame could not be used at all (it is dropped and counted).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Shorter than an Ethernet header.
    #[error("frame shorter than an Ethernet header")]
    TooShort,
    /// VLAN tag cut off.
    #[error("truncated VLAN tag")]
    TruncatedVlan,
}
