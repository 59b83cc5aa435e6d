//! Packet views over frame bytes (smoltcp style) and the one-pass parser the
//! data path runs on every frame.
//!
//! Contract: [`parse`] reads untrusted bytes and never panics; it returns a
//! [`FrameInfo`] whose offsets are valid for the frame it was given (every
//! offset + header length ≤ frame length). Functions that rewrite headers
//! ([`ecn::set_ce`]) take that `FrameInfo` and re-check lengths, so a caller
//! passing a different frame gets `false`/an error, never a panic.
//!
//! Checksums are updated incrementally (RFC 1624, eq. 3: HC' = ~(~HC + ~m + m')).

pub mod checksum;
pub mod ecn;
pub mod parse;

pub use parse::parse;

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
    /// A pure ACK: ACK set, no payload, no SYN/FIN/RST (r-aqm.txt §IV).
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
