//! The pcapng blocks softswitch writes (IETF draft-ietf-opsawg-pcapng,
//! "PCAP Now Generic"), little-endian (the byte-order magic says so):
//!
//! ```text
//! SHB  Section Header Block        (0x0A0D0D0A): magic 0x1A2B3C4D, v1.0, length -1, shb_userappl
//! IDB  Interface Description Block (0x00000001): LINKTYPE_ETHERNET, snaplen, if_name, if_description,
//!                                               if_tsresol = 9 (timestamps in ns)
//! EPB  Enhanced Packet Block       (0x00000006): interface 0, 64-bit ns timestamp (high, low),
//!                                               captured / original length, data padded to 4, opt_comment
//! ISB  Interface Statistics Block  (0x00000005): written once at close: isb_ifrecv, isb_osdrop,
//!                                               isb_usrdeliv, opt_comment
//! ```
//!
//! Every block is `type, total length, body, total length`; every option is
//! `code: u16, length: u16, value` padded to 4 bytes, and a list ends with
//! `opt_endofopt` (0, 0).
//!
//! Written by hand rather than with the `pcap-file` crate (see BENCHMARKS.md,
//! "Capture"): its only stable release (2.0.0) writes an EPB timestamp as a
//! raw nanosecond count whatever the IDB's `if_tsresol` says; the release that
//! honours `if_tsresol` is a release candidate that needs a newer rustc than
//! this crate's `rust-version`; and its blocks carry their options in a `Vec`,
//! an allocation per packet, where these functions append into one reused
//! buffer. What we need is the five small encoders below.

use crate::units::Nanos;

/// Section Header Block type.
pub const SHB_TYPE: u32 = 0x0A0D_0D0A;
/// Interface Description Block type.
pub const IDB_TYPE: u32 = 0x0000_0001;
/// Enhanced Packet Block type.
pub const EPB_TYPE: u32 = 0x0000_0006;
/// Interface Statistics Block type.
pub const ISB_TYPE: u32 = 0x0000_0005;
/// Byte-order magic.
pub const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;
/// LINKTYPE_ETHERNET.
pub const LINKTYPE_ETHERNET: u16 = 1;

const OPT_ENDOFOPT: u16 = 0;
const OPT_COMMENT: u16 = 1;
const SHB_USERAPPL: u16 = 4;
const IF_NAME: u16 = 2;
const IF_DESCRIPTION: u16 = 3;
const IF_TSRESOL: u16 = 9;
const ISB_STARTTIME: u16 = 2;
const ISB_ENDTIME: u16 = 3;
const ISB_IFRECV: u16 = 4;
const ISB_OSDROP: u16 = 7;
const ISB_USRDELIV: u16 = 8;

/// Longest option value (the length field is 16 bits); longer comments are cut.
pub const MAX_OPTION_BYTES: usize = 0xFFFC;

/// `n` rounded up to a multiple of 4.
#[inline]
pub fn pad4(n: usize) -> usize {
    (n + 3) & !3
}

/// Bytes an option with a `len`-byte value takes.
#[inline]
fn option_len(len: usize) -> usize {
    4 + pad4(len)
}

fn push_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn push_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}
/// A 64-bit timestamp as pcapng stores it: high 32 bits, then low 32 bits.
fn push_ts(out: &mut Vec<u8>, ts: u64) {
    push_u32(out, (ts >> 32) as u32);
    push_u32(out, ts as u32);
}
fn push_padded(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(bytes);
    out.resize(out.len() + pad4(bytes.len()) - bytes.len(), 0);
}
fn push_option(out: &mut Vec<u8>, code: u16, value: &[u8]) {
    let value = &value[..value.len().min(MAX_OPTION_BYTES)];
    push_u16(out, code);
    push_u16(out, value.len() as u16);
    push_padded(out, value);
}
fn push_end_of_options(out: &mut Vec<u8>) {
    push_u16(out, OPT_ENDOFOPT);
    push_u16(out, 0);
}

/// Starts a block of type `ty` (length filled in by [`end_block`]); returns where it starts.
fn begin_block(out: &mut Vec<u8>, ty: u32) -> usize {
    let start = out.len();
    push_u32(out, ty);
    push_u32(out, 0);
    start
}
/// Writes the block's total length at both ends.
fn end_block(out: &mut Vec<u8>, start: usize) {
    let total = (out.len() - start + 4) as u32;
    out[start + 4..start + 8].copy_from_slice(&total.to_le_bytes());
    push_u32(out, total);
}

/// Appends a Section Header Block naming `application` (shb_userappl).
pub fn section_header(out: &mut Vec<u8>, application: &str) {
    let b = begin_block(out, SHB_TYPE);
    push_u32(out, BYTE_ORDER_MAGIC);
    push_u16(out, 1); // major
    push_u16(out, 0); // minor
    out.extend_from_slice(&u64::MAX.to_le_bytes()); // section length: not given
    push_option(out, SHB_USERAPPL, application.as_bytes());
    push_end_of_options(out);
    end_block(out, b);
}

/// Appends an Ethernet Interface Description Block with nanosecond
/// timestamps (`if_tsresol` = 9: 10^-9 s).
pub fn interface(out: &mut Vec<u8>, name: &str, description: &str, snaplen: u32) {
    let b = begin_block(out, IDB_TYPE);
    push_u16(out, LINKTYPE_ETHERNET);
    push_u16(out, 0); // reserved
    push_u32(out, snaplen);
    push_option(out, IF_NAME, name.as_bytes());
    push_option(out, IF_DESCRIPTION, description.as_bytes());
    push_option(out, IF_TSRESOL, &[9]);
    push_end_of_options(out);
    end_block(out, b);
}

/// Size of the Enhanced Packet Block [`packet`] writes for `captured`
/// bytes of data and a `comment_len`-byte comment (0: no comment).
pub fn packet_block_len(captured: usize, comment_len: usize) -> usize {
    let options = if comment_len == 0 {
        0
    } else {
        option_len(comment_len.min(MAX_OPTION_BYTES)) + 4
    };
    28 + pad4(captured) + options + 4
}

/// Appends an Enhanced Packet Block on interface 0: `data` (already cut to
/// the snap length) of a frame of `original_len` bytes at `ts_ns` (ns since
/// the Unix epoch), with `comment` as its opt_comment when not empty.
pub fn packet(out: &mut Vec<u8>, ts_ns: u64, data: &[u8], original_len: u32, comment: &str) {
    let b = begin_block(out, EPB_TYPE);
    push_u32(out, 0); // interface id
    push_ts(out, ts_ns);
    push_u32(out, data.len() as u32);
    push_u32(out, original_len);
    push_padded(out, data);
    if !comment.is_empty() {
        push_option(out, OPT_COMMENT, comment.as_bytes());
        push_end_of_options(out);
    }
    end_block(out, b);
}

/// What a file's Interface Statistics Block reports at close.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// First and last packet timestamps (ns since the epoch).
    pub start_ns: Nanos,
    /// Last packet timestamp.
    pub end_ns: Nanos,
    /// Packets the switch saw in this direction (isb_ifrecv).
    pub seen: u64,
    /// Packets not written: file bound reached, or the writer fell behind (isb_osdrop).
    pub not_written: u64,
    /// Packets written (isb_usrdeliv).
    pub written: u64,
}

/// Bytes an Interface Statistics Block with a `comment_len`-byte comment takes.
pub fn statistics_block_len(comment_len: usize) -> usize {
    let comment = if comment_len == 0 {
        0
    } else {
        option_len(comment_len.min(MAX_OPTION_BYTES))
    };
    20 + comment + 5 * option_len(8) + 4 + 4
}

/// Appends an Interface Statistics Block for interface 0 at `ts_ns`.
pub fn statistics(out: &mut Vec<u8>, ts_ns: u64, s: &Stats, comment: &str) {
    let b = begin_block(out, ISB_TYPE);
    push_u32(out, 0);
    push_ts(out, ts_ns);
    if !comment.is_empty() {
        push_option(out, OPT_COMMENT, comment.as_bytes());
    }
    let mut ts = Vec::with_capacity(8);
    push_ts(&mut ts, s.start_ns);
    push_option(out, ISB_STARTTIME, &ts);
    ts.clear();
    push_ts(&mut ts, s.end_ns);
    push_option(out, ISB_ENDTIME, &ts);
    push_option(out, ISB_IFRECV, &s.seen.to_le_bytes());
    push_option(out, ISB_OSDROP, &s.not_written.to_le_bytes());
    push_option(out, ISB_USRDELIV, &s.written.to_le_bytes());
    push_end_of_options(out);
    end_block(out, b);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u32_at(b: &[u8], i: usize) -> u32 {
        u32::from_le_bytes(b[i..i + 4].try_into().unwrap())
    }
    fn u16_at(b: &[u8], i: usize) -> u16 {
        u16::from_le_bytes(b[i..i + 2].try_into().unwrap())
    }

    /// Splits a buffer into (type, body) blocks, checking both length fields.
    fn blocks(mut b: &[u8]) -> Vec<(u32, Vec<u8>)> {
        let mut out = Vec::new();
        while !b.is_empty() {
            let len = u32_at(b, 4) as usize;
            assert_eq!(len % 4, 0, "block length {len} not a multiple of 4");
            assert_eq!(u32_at(b, len - 4) as usize, len, "trailing length");
            out.push((u32_at(b, 0), b[8..len - 4].to_vec()));
            b = &b[len..];
        }
        out
    }

    /// (code, value) options from `b` until opt_endofopt.
    fn options(mut b: &[u8]) -> Vec<(u16, Vec<u8>)> {
        let mut out = Vec::new();
        loop {
            let (code, len) = (u16_at(b, 0), u16_at(b, 2) as usize);
            if code == 0 {
                assert_eq!(len, 0);
                assert_eq!(b.len(), 4, "bytes after opt_endofopt");
                return out;
            }
            out.push((code, b[4..4 + len].to_vec()));
            assert!(b[4 + len..4 + pad4(len)].iter().all(|&x| x == 0), "padding");
            b = &b[4 + pad4(len)..];
        }
    }

    #[test]
    fn section_header_bytes() {
        let mut b = Vec::new();
        section_header(&mut b, "ss");
        // type, length 40, magic, 1.0, -1, shb_userappl "ss" (padded), end, length.
        let expect: Vec<u8> = [
            &[0x0A, 0x0D, 0x0D, 0x0A][..],
            &40u32.to_le_bytes(),
            &[0x4D, 0x3C, 0x2B, 0x1A],
            &[1, 0, 0, 0],
            &[0xFF; 8],
            &[4, 0, 2, 0, b's', b's', 0, 0],
            &[0, 0, 0, 0],
            &40u32.to_le_bytes(),
        ]
        .concat();
        assert_eq!(b, expect);
    }

    #[test]
    fn interface_has_ethernet_snaplen_and_ns_resolution() {
        let mut b = Vec::new();
        interface(&mut b, "veth1", "veth1 rx", 256);
        let bl = blocks(&b);
        assert_eq!(bl.len(), 1);
        let (ty, body) = &bl[0];
        assert_eq!(*ty, IDB_TYPE);
        assert_eq!(u16_at(body, 0), LINKTYPE_ETHERNET);
        assert_eq!(u32_at(body, 4), 256);
        let o = options(&body[8..]);
        assert_eq!(
            o,
            vec![
                (IF_NAME, b"veth1".to_vec()),
                (IF_DESCRIPTION, b"veth1 rx".to_vec()),
                (IF_TSRESOL, vec![9]),
            ]
        );
    }

    #[test]
    fn packet_block_layout_timestamp_padding_comment() {
        let mut b = Vec::new();
        let ts = 0x0000_0001_2345_6789u64;
        let data = [0xAAu8; 61];
        packet(&mut b, ts, &data, 1514, "dropped: buffer_full");
        assert_eq!(b.len(), packet_block_len(61, 20));
        let bl = blocks(&b);
        let (ty, body) = &bl[0];
        assert_eq!(*ty, EPB_TYPE);
        assert_eq!(u32_at(body, 0), 0, "interface id");
        assert_eq!(u32_at(body, 4), 1, "timestamp high");
        assert_eq!(u32_at(body, 8), 0x2345_6789, "timestamp low");
        assert_eq!(u32_at(body, 12), 61, "captured length");
        assert_eq!(u32_at(body, 16), 1514, "original length");
        assert_eq!(&body[20..81], &data[..]);
        assert_eq!(&body[81..84], &[0, 0, 0], "data padded to 4");
        assert_eq!(
            options(&body[84..]),
            vec![(OPT_COMMENT, b"dropped: buffer_full".to_vec())]
        );
        // No comment: no options at all.
        let mut b = Vec::new();
        packet(&mut b, 5, &data[..60], 60, "");
        assert_eq!(b.len(), 28 + 60 + 4);
        assert_eq!(b.len(), packet_block_len(60, 0));
    }

    #[test]
    fn long_comments_are_cut_to_the_option_limit() {
        let long = "x".repeat(70_000);
        let mut b = Vec::new();
        packet(&mut b, 0, &[1, 2, 3], 3, &long);
        assert_eq!(b.len(), packet_block_len(3, long.len()));
        let bl = blocks(&b);
        let o = options(&bl[0].1[24..]);
        assert_eq!(o[0].1.len(), MAX_OPTION_BYTES);
    }

    #[test]
    fn statistics_block_counts() {
        let s = Stats {
            start_ns: 10,
            end_ns: 1 << 40,
            seen: 100,
            not_written: 7,
            written: 93,
        };
        let mut b = Vec::new();
        statistics(&mut b, 1 << 40, &s, "capture truncated");
        assert_eq!(b.len(), statistics_block_len("capture truncated".len()));
        let bl = blocks(&b);
        let (ty, body) = &bl[0];
        assert_eq!(*ty, ISB_TYPE);
        let o = options(&body[12..]);
        let get = |c: u16| o.iter().find(|x| x.0 == c).unwrap().1.clone();
        assert_eq!(get(OPT_COMMENT), b"capture truncated");
        assert_eq!(get(ISB_IFRECV), 100u64.to_le_bytes());
        assert_eq!(get(ISB_OSDROP), 7u64.to_le_bytes());
        assert_eq!(get(ISB_USRDELIV), 93u64.to_le_bytes());
        assert_eq!(
            get(ISB_ENDTIME),
            [&256u32.to_le_bytes()[..], &[0; 4]].concat()
        );
    }
}
