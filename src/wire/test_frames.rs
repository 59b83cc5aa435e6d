//! Test fixture: hand-built frames for the tests that drive the whole
//! switch (capture, time dilation).

/// The MAC address of host `i`.
fn mac(i: u8) -> [u8; 6] {
    [2, 0, 0, 0, 0, i]
}

/// Ethernet + IPv4 + UDP frame of `len` bytes (at least 60) from host `src`
/// to `dst` (0xff: broadcast) with ECN field `ecn`: 10.99.0.src:1000 →
/// 10.99.0.dst:2000, the IPv4 checksum right.
pub(crate) fn udp_frame(src: u8, dst: u8, len: usize, ecn: u8) -> Vec<u8> {
    let mut f = vec![0u8; len.max(60)];
    let d = if dst == 0xff { [0xff; 6] } else { mac(dst) };
    f[0..6].copy_from_slice(&d);
    f[6..12].copy_from_slice(&mac(src));
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip_len = (f.len() - 14) as u16;
    f[14] = 0x45;
    f[15] = ecn;
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[10, 99, 0, src]);
    f[30..34].copy_from_slice(&[10, 99, 0, dst]);
    let sum = super::checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&sum.to_be_bytes());
    f[34..36].copy_from_slice(&1000u16.to_be_bytes());
    f[36..38].copy_from_slice(&2000u16.to_be_bytes());
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f
}
