//! Internet checksum helpers (RFC 1071) and incremental update (RFC 1624).
//!
//! The Internet checksum is the ones' complement of the ones' complement sum
//! of the data taken as big-endian 16-bit words, an odd last byte padded with
//! a zero byte (RFC 1071 §1). We accumulate in a `u64` and fold the carries
//! back in at the end ("end-around carry"), which gives the same sum because
//! 2^16 ≡ 1 (mod 2^16 − 1).
//!
//! Rewriting one 16-bit word `m` → `m'` of a checksummed header updates the
//! checksum `HC` without reading the rest of the header (RFC 1624 eq. 3):
//!
//! ```text
//! HC' = ~(~HC + ~m + m')
//! ```
//!
//! Eq. 3 (not eq. 2 of RFC 1141) is the one that never produces the
//! "negative zero" 0xFFFF where a full recomputation gives 0x0000: both sums
//! are non-zero, so both land on the same representative in 1..=0xFFFF.

/// Adds `data` (big-endian 16-bit words, odd tail padded with zero) to the
/// unfolded ones' complement accumulator `acc`.
///
/// No carry is lost for any slice shorter than 2^32 × 4 bytes.
pub fn accumulate(mut acc: u64, data: &[u8]) -> u64 {
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        // A 32-bit word hi·2^16 + lo ≡ hi + lo: the fold at the end sorts it out.
        acc += u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
    }
    let rest = words.remainder();
    let mut pairs = rest.chunks_exact(2);
    for p in &mut pairs {
        acc += u64::from(u16::from_be_bytes([p[0], p[1]]));
    }
    if let [last] = pairs.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

/// Folds an accumulator to 16 bits with end-around carry (the ones' complement sum).
pub fn fold(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// RFC 1071 checksum of `data`: the complement of its ones' complement sum.
///
/// Over a header whose checksum field holds a correct checksum, this gives 0.
pub fn checksum(data: &[u8]) -> u16 {
    !fold(accumulate(0, data))
}

/// RFC 1624 eq. 3: the checksum after one 16-bit word of the covered data
/// changes from `old` to `new`, given the current checksum `hc`.
pub fn update_word(hc: u16, old: u16, new: u16) -> u16 {
    let acc = u64::from(!hc) + u64::from(!old) + u64::from(new);
    !fold(acc)
}

/// Unfolded sum of the IPv4 pseudo-header (RFC 793 §3.1, RFC 768) for a
/// transport segment of `l4_len` bytes.
pub fn pseudo_header_v4(src: [u8; 4], dst: [u8; 4], protocol: u8, l4_len: u16) -> u64 {
    let acc = accumulate(0, &src);
    let acc = accumulate(acc, &dst);
    acc + u64::from(protocol) + u64::from(l4_len)
}

/// Unfolded sum of the IPv6 pseudo-header (RFC 8200 §8.1) for an upper-layer
/// packet of `l4_len` bytes.
pub fn pseudo_header_v6(src: &[u8; 16], dst: &[u8; 16], next_header: u8, l4_len: u32) -> u64 {
    let acc = accumulate(0, src);
    let acc = accumulate(acc, dst);
    acc + u64::from(l4_len >> 16) + u64::from(l4_len & 0xffff) + u64::from(next_header)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SimRng;

    /// Straightforward 16-bit-at-a-time reference, as printed in RFC 1071 §4.1.
    fn reference(data: &[u8]) -> u16 {
        let mut sum: u32 = 0;
        let mut i = 0;
        while i + 1 < data.len() {
            sum += u32::from(u16::from_be_bytes([data[i], data[i + 1]]));
            i += 2;
        }
        if i < data.len() {
            sum += u32::from(data[i]) << 8;
        }
        while sum >> 16 != 0 {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: 0001 f203 f4f5 f6f7 sums to ddf2 (with end-around carry).
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(accumulate(0, &d)), 0xddf2);
        assert_eq!(checksum(&d), !0xddf2);
    }

    #[test]
    fn ipv4_header_example() {
        // A classic IPv4 header whose checksum field is b861.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum(&h), 0);
        h[10] = 0;
        h[11] = 0;
        assert_eq!(checksum(&h), 0xb861);
    }

    #[test]
    fn odd_lengths_and_empty() {
        assert_eq!(checksum(&[]), 0xffff);
        assert_eq!(checksum(&[0xab]), !0xab00);
        assert_eq!(checksum(&[0x12, 0x34, 0x56]), !(0x1234u16 + 0x5600));
    }

    #[test]
    fn matches_reference_on_random_data() {
        let mut rng = SimRng::new(1071);
        for len in 0..200 {
            let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            assert_eq!(checksum(&data), reference(&data), "len {len}");
        }
    }

    #[test]
    fn incremental_update_equals_full_recomputation() {
        let mut rng = SimRng::new(1624);
        for _ in 0..10_000 {
            let words = 2 + (rng.next_u64() % 30) as usize;
            let mut data: Vec<u8> = (0..words * 2).map(|_| rng.next_u64() as u8).collect();
            // Word 0 is the checksum field.
            data[0] = 0;
            data[1] = 0;
            let hc = checksum(&data);
            data[..2].copy_from_slice(&hc.to_be_bytes());
            let w = 1 + (rng.next_u64() as usize % (words - 1));
            let old = u16::from_be_bytes([data[2 * w], data[2 * w + 1]]);
            let new = rng.next_u64() as u16;
            data[2 * w..2 * w + 2].copy_from_slice(&new.to_be_bytes());
            let inc = update_word(hc, old, new);
            data[0] = 0;
            data[1] = 0;
            assert_eq!(inc, checksum(&data));
        }
    }

    #[test]
    fn incremental_update_corner_cases() {
        // Changing a word to itself keeps the checksum.
        for hc in [0u16, 1, 0x7fff, 0xfffe] {
            for m in [0u16, 1, 0xffff, 0x1234] {
                assert_eq!(update_word(hc, m, m), hc, "hc {hc:#x} m {m:#x}");
            }
        }
        // Data 0001 0000 → checksum fffe; change word 1 to fffe → sum ffff → checksum 0000,
        // exactly what a full recomputation gives (eq. 3 does not yield ffff here).
        let hc = checksum(&[0x00, 0x01, 0x00, 0x00]);
        assert_eq!(hc, 0xfffe);
        assert_eq!(update_word(hc, 0x0000, 0xfffe), 0x0000);
        assert_eq!(checksum(&[0x00, 0x01, 0xff, 0xfe]), 0x0000);
    }
}
