//! The request a client sends a server, and what the server answers.
//!
//! Modelled on TrafficGenerator's request (four native `unsigned int`s: flow
//! id, size, ToS, rate in Mbit/s, echoed back before the flow), with the
//! sizes widened to 64 bits, a fixed byte order and a magic so a stray
//! client is told off instead of being sent gigabytes.
//!
//! # Request: 24 bytes, big-endian (network order)
//!
//! ```text
//! offset size field
//!  0     2    magic     b"TG" (0x54 0x47)
//!  2     1    version   1
//!  3     1    dscp      0..=63; the server sets IP_TOS = dscp << 2 for the response
//!  4     4    id        flow id chosen by the client (echoed)
//!  8     8    size      response bytes; u64::MAX = stream until the client closes
//! 16     8    rate      response pacing in bit/s, application-limited; 0 = as fast as TCP goes
//! ```
//!
//! # Response
//!
//! The 24 request bytes echoed unchanged, then `size` bytes of payload
//! (content unspecified). A connection carries any number of request /
//! response exchanges, one at a time (persistent connections, as
//! TrafficGenerator); the client ends it by closing. FCT counts from writing
//! the request to reading the last payload byte, so it includes the echo.

/// Bytes in a request (and in the echo that opens each response).
pub const HEADER_LEN: usize = 24;
/// The first two bytes of every request.
pub const MAGIC: [u8; 2] = *b"TG";
/// Protocol version this code speaks.
pub const VERSION: u8 = 1;
/// `size` value meaning "stream until the client closes the connection".
pub const STREAM: u64 = u64::MAX;

mod field {
    use std::ops::Range;
    pub const MAGIC: Range<usize> = 0..2;
    pub const VERSION: usize = 2;
    pub const DSCP: usize = 3;
    pub const ID: Range<usize> = 4..8;
    pub const SIZE: Range<usize> = 8..16;
    pub const RATE: Range<usize> = 16..24;
}

/// One flow request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// Flow id (echoed back).
    pub id: u32,
    /// Response size in bytes, or [`STREAM`].
    pub size: u64,
    /// DSCP for the response, 0..=63.
    pub dscp: u8,
    /// Pacing rate for the response in bit/s; 0 = unpaced.
    pub rate_bps: u64,
}

/// Why 24 received bytes are not a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    /// Not our magic: another program is talking to us.
    #[error("not a softswitch-tg request (first bytes {0:02x?}, expected \"TG\")")]
    BadMagic([u8; 2]),
    /// Another version of the protocol.
    #[error("request protocol version {0}, this build speaks {VERSION}; use the same softswitch-tg on both ends")]
    BadVersion(u8),
    /// DSCP is 6 bits.
    #[error("DSCP {0} is out of range 0..=63")]
    BadDscp(u8),
}

impl Request {
    /// The 24 wire bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[field::MAGIC].copy_from_slice(&MAGIC);
        b[field::VERSION] = VERSION;
        b[field::DSCP] = self.dscp;
        b[field::ID].copy_from_slice(&self.id.to_be_bytes());
        b[field::SIZE].copy_from_slice(&self.size.to_be_bytes());
        b[field::RATE].copy_from_slice(&self.rate_bps.to_be_bytes());
        b
    }

    /// Parses and checks 24 wire bytes.
    pub fn decode(b: &[u8; HEADER_LEN]) -> Result<Self, ProtoError> {
        let magic = [b[0], b[1]];
        if magic != MAGIC {
            return Err(ProtoError::BadMagic(magic));
        }
        if b[field::VERSION] != VERSION {
            return Err(ProtoError::BadVersion(b[field::VERSION]));
        }
        let dscp = b[field::DSCP];
        if dscp > 63 {
            return Err(ProtoError::BadDscp(dscp));
        }
        let u32_at = |r: std::ops::Range<usize>| {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[r]);
            u32::from_be_bytes(a)
        };
        let u64_at = |r: std::ops::Range<usize>| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[r]);
            u64::from_be_bytes(a)
        };
        Ok(Request {
            id: u32_at(field::ID),
            size: u64_at(field::SIZE),
            dscp,
            rate_bps: u64_at(field::RATE),
        })
    }

    /// IP_TOS byte for this request's DSCP (ECN bits left 0 for the kernel).
    pub fn tos(&self) -> u8 {
        self.dscp << 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_fixture() {
        let r = Request {
            id: 0x0102_0304,
            size: 65_536,
            dscp: 46,
            rate_bps: 500_000_000,
        };
        let b = r.encode();
        assert_eq!(
            b,
            [
                b'T', b'G', 1, 46, 1, 2, 3, 4, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0x1d, 0xcd,
                0x65, 0x00
            ]
        );
        assert_eq!(Request::decode(&b), Ok(r));
        assert_eq!(r.tos(), 46 << 2);
    }

    #[test]
    fn rejects_foreign_bytes() {
        let mut b = Request {
            id: 1,
            size: 1,
            dscp: 0,
            rate_bps: 0,
        }
        .encode();
        b[3] = 64;
        assert_eq!(Request::decode(&b), Err(ProtoError::BadDscp(64)));
        b[2] = 2;
        assert_eq!(Request::decode(&b), Err(ProtoError::BadVersion(2)));
        // A TrafficGenerator request starts with a little-endian flow id.
        let tg = [
            1u8, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(Request::decode(&tg), Err(ProtoError::BadMagic([1, 0])));
    }
}
