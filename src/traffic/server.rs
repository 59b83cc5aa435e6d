//! The server: accepts persistent connections and answers each request
//! ([`super::proto`]) with the echoed header and `size` bytes, marked with
//! the requested DSCP and, if asked, paced to the requested rate.
//!
//! One thread per connection, blocking I/O. The accept loop waits at most
//! 50 ms at a time so it can notice the stop flag or the deadline.
//!
//! **Pacing** is application-limited, as TrafficGenerator's: the payload is
//! written in chunks of about 1 ms worth of bytes (1448 B .. 64 KiB) and
//! chunk k is not written before `start + k·chunk·8 / rate`. TCP's own
//! window still applies, so a paced flow never exceeds its rate but may fall
//! below it when the network is congested. Under time dilation D
//! ([`Server::dilation`], `softswitch-tg --dilation D`) the rate a request
//! asks for is the wire's (the emulated rate / D) and the 1 ms is
//! emulated: a chunk holds 1 ms of the *emulated* rate's bytes and is
//! written every D ms of real time, so a paced flow's bursts are the same
//! in emulated time at every D ([`paced_schedule`]).
//!
//! **TCP pacing** ([`Server::tcp_pacing`], `softswitch-tg server
//! --tcp-pacing`) is the kernel's, not the application's: every accepted
//! socket gets `SO_MAX_PACING_RATE` ([`sock::enable_tcp_pacing`]), so TCP
//! spaces what it sends at 1.2 × cwnd / srtt, as a host behind `fq` does.
//! It spaces GSO packets, which Linux sizes to about 1 ms of data, not
//! their segments: for a segment-by-segment sender the hosts also need
//! `gso_max_segs 1` (`topo up --gso-segs 1`; measured in scenarios/README.md,
//! "Why DiffECN under-filled"). Off by default.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::proto::{Request, HEADER_LEN, STREAM};
use super::sock;
use super::TgError;
use crate::timebase::Dilation;

/// Payload written per `write` call when not paced.
const UNPACED_CHUNK: usize = 256 * 1024;
/// The payload bytes, shared by every connection (zeros: never written, so
/// the pages stay the kernel's shared zero page).
static PAYLOAD: [u8; UNPACED_CHUNK] = [0; UNPACED_CHUNK];
/// Bounds of a paced chunk.
const PACED_CHUNK_MIN: u64 = 1448;
const PACED_CHUNK_MAX: u64 = 64 * 1024;
/// Longest the accept loop blocks before checking the stop flag.
const ACCEPT_POLL: Duration = Duration::from_millis(50);

/// Counters kept across all connections.
#[derive(Debug, Default)]
pub struct ServerStats {
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Requests answered completely.
    pub flows: AtomicU64,
    /// Payload bytes written.
    pub bytes: AtomicU64,
    /// Connections closed because of a bad request or an I/O error.
    pub errors: AtomicU64,
}

/// A bound, not yet running server.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    stats: Arc<ServerStats>,
    stop: Arc<AtomicBool>,
    quiet: bool,
    tcp_pacing: bool,
    dilation: Dilation,
}

impl Server {
    /// Listens on `addr` (port 0 = any free port).
    pub fn bind(addr: SocketAddr) -> Result<Self, TgError> {
        let listener = TcpListener::bind(addr).map_err(|source| TgError::Bind { addr, source })?;
        Ok(Server {
            listener,
            stats: Arc::default(),
            stop: Arc::default(),
            quiet: false,
            tcp_pacing: false,
            dilation: Dilation::NONE,
        })
    }

    /// Don't log per-connection errors to stderr (tests).
    pub fn quiet(mut self) -> Self {
        self.quiet = true;
        self
    }

    /// Turn on the kernel's TCP pacing on every connection (module docs).
    pub fn tcp_pacing(mut self, on: bool) -> Self {
        self.tcp_pacing = on;
        self
    }

    /// Time dilation D: paced chunks are 1 ms of emulated time (module
    /// docs). D = 1 (the default) is real time.
    pub fn dilation(mut self, d: Dilation) -> Self {
        self.dilation = d;
        self
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("bound listener has an address")
    }

    /// Setting this flag ends [`Server::run`] within ~50 ms.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Shared counters.
    pub fn stats(&self) -> Arc<ServerStats> {
        self.stats.clone()
    }

    /// Accepts and serves until the stop flag (or `also_stop`, e.g. the
    /// signal flag) is set or `until` passes. Connections already open keep
    /// being served by their threads.
    pub fn run(
        self,
        until: Option<Instant>,
        also_stop: Option<&AtomicBool>,
    ) -> Result<Arc<ServerStats>, TgError> {
        loop {
            if self.stop.load(Ordering::Relaxed)
                || also_stop.is_some_and(|f| f.load(Ordering::Relaxed))
                || until.is_some_and(|t| Instant::now() >= t)
            {
                return Ok(self.stats);
            }
            let ready =
                sock::wait_readable(&self.listener, ACCEPT_POLL).map_err(|source| TgError::Io {
                    context: "waiting for connections".into(),
                    source,
                })?;
            if !ready {
                continue;
            }
            let (stream, peer) = match self.listener.accept() {
                Ok(x) => x,
                Err(e) if is_transient_accept_error(&e) => continue,
                Err(source) => {
                    return Err(TgError::Io {
                        context: "accept".into(),
                        source,
                    })
                }
            };
            self.stats.connections.fetch_add(1, Ordering::Relaxed);
            let stats = self.stats.clone();
            let quiet = self.quiet;
            let tcp_pacing = self.tcp_pacing;
            let dilation = self.dilation;
            let spawned = thread::Builder::new()
                .name(format!("tg-srv-{peer}"))
                .stack_size(256 * 1024)
                .spawn(move || {
                    if let Err(e) = serve_connection(stream, &stats, tcp_pacing, dilation) {
                        stats.errors.fetch_add(1, Ordering::Relaxed);
                        if !quiet {
                            eprintln!("softswitch-tg server: connection from {peer} closed: {e}");
                        }
                    }
                });
            if let Err(e) = spawned {
                eprintln!("softswitch-tg server: cannot start a thread for {peer}: {e}; connection dropped");
            }
        }
    }
}

fn is_transient_accept_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
    )
}

/// Answers requests on one connection until the client closes it.
fn serve_connection(
    mut stream: TcpStream,
    stats: &ServerStats,
    tcp_pacing: bool,
    dilation: Dilation,
) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    // The last segment of a response must not wait for an ACK (Nagle +
    // delayed ACK would add up to 40 ms to small flows' FCT).
    stream.set_nodelay(true)?;
    if tcp_pacing {
        sock::enable_tcp_pacing(&stream)?;
    }
    let mut dscp_now: Option<u8> = None;
    let mut hdr = [0u8; HEADER_LEN];
    loop {
        match read_header(&mut stream, &mut hdr)? {
            HeaderRead::Closed => return Ok(()),
            HeaderRead::Full => {}
        }
        let req =
            Request::decode(&hdr).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        if dscp_now != Some(req.dscp) {
            sock::set_dscp(&stream, req.dscp)?;
            dscp_now = Some(req.dscp);
        }
        stream.write_all(&hdr)?;
        match send_payload(
            &mut stream,
            &PAYLOAD,
            req.size,
            req.rate_bps,
            dilation,
            stats,
        ) {
            Ok(()) => {
                stats.flows.fetch_add(1, Ordering::Relaxed);
            }
            // A stream request ends when the client closes: that is success.
            Err(e) if req.size == STREAM && is_peer_gone(&e) => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

enum HeaderRead {
    Full,
    Closed,
}

/// Reads a whole header; a clean close before its first byte is `Closed`.
fn read_header(stream: &mut TcpStream, hdr: &mut [u8; HEADER_LEN]) -> io::Result<HeaderRead> {
    let mut got = 0;
    while got < HEADER_LEN {
        match stream.read(&mut hdr[got..]) {
            Ok(0) if got == 0 => return Ok(HeaderRead::Closed),
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("client closed after {got} of {HEADER_LEN} request bytes"),
                ))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if got == 0 && is_peer_gone(&e) => return Ok(HeaderRead::Closed),
            Err(e) => return Err(e),
        }
    }
    Ok(HeaderRead::Full)
}

fn is_peer_gone(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
    )
}

/// Bytes per paced chunk at wire rate `rate_bps` under dilation `d`:
/// about 1 ms of emulated time at the emulated rate (`rate_bps` × D),
/// within the bounds — the same bytes at every D.
pub fn paced_chunk_bytes(rate_bps: u64, d: Dilation) -> u64 {
    let emulated_bps = d.emulated_bps(rate_bps as f64) as u64;
    (emulated_bps / 8 / 1000).clamp(PACED_CHUNK_MIN, PACED_CHUNK_MAX)
}

/// The writes of a paced response of `size` bytes at wire rate `rate_bps`
/// under dilation `d`: (earliest real time from the start, bytes) of each
/// chunk, in order — what [`send_payload`] does when the socket never
/// blocks.
pub fn paced_schedule(size: u64, rate_bps: u64, d: Dilation) -> Vec<(Duration, u64)> {
    let chunk = paced_chunk_bytes(rate_bps, d);
    let mut out = Vec::new();
    let mut sent = 0;
    while sent < size {
        let n = chunk.min(size - sent);
        out.push((paced_offset(sent, rate_bps), n));
        sent += n;
    }
    out
}

/// Real time after the start at which `sent_bytes` are due at `rate_bps`.
fn paced_offset(sent_bytes: u64, rate_bps: u64) -> Duration {
    Duration::from_nanos((sent_bytes as u128 * 8 * 1_000_000_000 / rate_bps as u128) as u64)
}

/// Earliest time chunk-boundary `sent_bytes` may be written at `rate_bps`.
pub fn paced_due(start: Instant, sent_bytes: u64, rate_bps: u64) -> Instant {
    start + paced_offset(sent_bytes, rate_bps)
}

/// Writes `size` payload bytes (or forever for [`STREAM`]), paced if asked.
fn send_payload(
    stream: &mut TcpStream,
    payload: &[u8],
    size: u64,
    rate_bps: u64,
    dilation: Dilation,
    stats: &ServerStats,
) -> io::Result<()> {
    let chunk = if rate_bps == 0 {
        payload.len() as u64
    } else {
        paced_chunk_bytes(rate_bps, dilation)
    };
    let start = Instant::now();
    let mut sent: u64 = 0;
    while sent < size {
        if rate_bps > 0 {
            let due = paced_due(start, sent, rate_bps);
            let now = Instant::now();
            if due > now {
                thread::sleep(due - now);
            }
        }
        let n = chunk.min(size - sent) as usize;
        stream.write_all(&payload[..n])?;
        sent += n as u64;
        stats.bytes.fetch_add(n as u64, Ordering::Relaxed);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paced_chunks_are_about_a_millisecond() {
        let one = Dilation::NONE;
        assert_eq!(paced_chunk_bytes(500_000_000, one), 62_500);
        assert_eq!(paced_chunk_bytes(10_000_000_000, one), PACED_CHUNK_MAX);
        assert_eq!(paced_chunk_bytes(1_000_000, one), PACED_CHUNK_MIN);
        let t = Instant::now();
        // 62 500 B at 500 Mbit/s = 1 ms.
        assert_eq!(
            paced_due(t, 62_500, 500_000_000) - t,
            Duration::from_millis(1)
        );
    }

    #[test]
    fn a_paced_chunk_is_one_emulated_millisecond_at_every_d() {
        // 100 KB asked at 40 Mbit/s emulated: 5 000 B per emulated ms.
        let size = 100_000;
        let d1 = paced_schedule(size, 40_000_000, Dilation::NONE);
        // At D = 4 the request carries the wire rate, 10 Mbit/s.
        let d4 = paced_schedule(size, 10_000_000, Dilation::new(4.0).unwrap());
        // The same chunks, bytes unchanged in emulated terms …
        let bytes = |s: &[(Duration, u64)]| s.iter().map(|c| c.1).collect::<Vec<_>>();
        assert_eq!(bytes(&d1), vec![5_000; 20]);
        assert_eq!(bytes(&d4), bytes(&d1));
        // … 1 ms apart in real time at D = 1, 4 ms (1 ms emulated) at D = 4.
        for (k, ((t1, _), (t4, _))) in d1.iter().zip(&d4).enumerate() {
            assert_eq!(*t1, Duration::from_millis(k as u64), "chunk {k}");
            assert_eq!(*t4, Duration::from_millis(4 * k as u64), "chunk {k}");
        }
        // A server not told D paces the wire rate in real milliseconds:
        // 1 250 B (raised to the 1 448 B floor) every 1.16 ms of real time,
        // 0.29 ms of emulated time — four times smaller bursts, four times
        // as often.
        let undilated = paced_schedule(size, 10_000_000, Dilation::NONE);
        assert_eq!(undilated[0].1, PACED_CHUNK_MIN);
        assert_eq!(undilated[1].0, Duration::from_nanos(1_158_400));
        // Fractional D, and the bounds hold in emulated terms.
        assert_eq!(
            paced_chunk_bytes(16_000_000, Dilation::new(2.5).unwrap()),
            5_000
        );
        assert_eq!(
            paced_chunk_bytes(250_000_000, Dilation::new(40.0).unwrap()),
            PACED_CHUNK_MAX
        );
        assert_eq!(
            paced_chunk_bytes(25_000, Dilation::new(40.0).unwrap()),
            PACED_CHUNK_MIN
        );
        // The last chunk carries the rest.
        let s = paced_schedule(12_000, 40_000_000, Dilation::NONE);
        assert_eq!(bytes(&s), vec![5_000, 5_000, 2_000]);
    }
}
