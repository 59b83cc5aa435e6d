//! A long-lived flow: the client asks one server for an endless response
//! (`size` = [`STREAM`]) or for `size` bytes, optionally paced, after waiting
//! `delay`; it reads until `duration` after its own start (or until the
//! `size` bytes are in, recording the flow completion time), and samples
//! goodput every `sample` (100 ms by default).
//!
//! With a [`Dilation`] D every time here is emulated: the flow waits
//! D × `delay`, runs D × `duration`, samples every D × `sample` and asks
//! for `rate` / D on the wire; `t_ms`, FCT and goodput are reported in
//! emulated time (real / D, bytes × D per real second).
//!
//! Sample k covers `((k−1)·sample, k·sample]` after the *process* started
//! (before the delay), so flows started together with different delays share
//! one time base: `t_ms` is the end of the interval, `bytes` the payload
//! bytes read in it, `goodput_mbps = bytes · 8 / sample`. Reads wake at least
//! every 10 ms, so a byte is attributed to the interval in which `read`
//! returned it.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::proto::{Request, HEADER_LEN, STREAM};
use super::sock;
use super::TgError;
use crate::timebase::Dilation;

/// Longest a read blocks, so samples are taken on time.
const READ_WAKE: Duration = Duration::from_millis(10);

/// What to run.
#[derive(Clone, Debug)]
pub struct LongConfig {
    /// The sending server.
    pub server: SocketAddr,
    /// When to stop receiving, from the start (the delay included).
    pub duration: Duration,
    /// Wait this long before connecting.
    pub delay: Duration,
    /// Ask for this many bytes and end when they are in (None: stream).
    pub size: Option<u64>,
    /// DSCP of the flow.
    pub dscp: u8,
    /// Pacing rate, bit/s (0 = unpaced).
    pub rate_bps: u64,
    /// Sampling period.
    pub sample: Duration,
    /// Time dilation: the times and the rate above are emulated; reported
    /// times and rates are emulated too.
    pub dilation: Dilation,
}

/// One goodput sample.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GoodputSample {
    /// End of the interval, ms since the request.
    pub t_ms: u64,
    /// Payload bytes received in the interval.
    pub bytes: u64,
    /// `bytes · 8 / interval`, Mbit/s.
    pub goodput_mbps: f64,
}

/// The result of a long-flow run.
#[derive(Clone, Debug, Serialize)]
pub struct LongReport {
    /// Samples in time order.
    pub samples: Vec<GoodputSample>,
    /// Payload bytes received.
    pub total_bytes: u64,
    /// Receiving time, µs.
    pub duration_us: u64,
    /// `total_bytes · 8 / duration`, Mbit/s.
    pub goodput_mbps: f64,
    /// When the request was written, ms after the start (the delay).
    pub start_ms: u64,
    /// Bytes asked for (None: a stream).
    pub size: Option<u64>,
    /// Flow completion time when all `size` bytes arrived, µs (request
    /// written → last byte read).
    pub fct_us: Option<u64>,
    /// DSCP used.
    pub dscp: u8,
    /// Requested rate, Mbit/s (0 = unpaced).
    pub rate_mbps: f64,
    /// Why the flow ended early, if it did.
    pub error: Option<String>,
}

impl LongReport {
    /// One line for people.
    pub fn one_line(&self) -> String {
        format!(
            "long flow: {} bytes in {:.2} s = {:.1} Mbit/s{} (dscp {}, rate {}){}",
            self.total_bytes,
            self.duration_us as f64 / 1e6,
            self.goodput_mbps,
            match self.fct_us {
                Some(f) => format!(", completed in {:.1} ms", f as f64 / 1e3),
                None => String::new(),
            },
            self.dscp,
            if self.rate_mbps > 0.0 {
                format!("{} Mbit/s paced", self.rate_mbps)
            } else {
                "unpaced".into()
            },
            self.error
                .as_ref()
                .map(|e| format!(" | STOPPED: {e}"))
                .unwrap_or_default()
        )
    }

    /// The samples as CSV with a header line.
    pub fn csv(&self) -> String {
        let mut s = String::from("t_ms,bytes,goodput_mbps\n");
        for x in &self.samples {
            s.push_str(&format!("{},{},{:.3}\n", x.t_ms, x.bytes, x.goodput_mbps));
        }
        s
    }
}

/// Runs one long flow. Fails only if the server cannot be reached; a
/// failure mid-run ends it and is returned in `error`.
pub fn run(cfg: &LongConfig) -> Result<LongReport, TgError> {
    if cfg.sample.is_zero() {
        return Err(TgError::Usage("the sampling period must be above 0".into()));
    }
    let addr = cfg.server;
    let dil = cfg.dilation;
    let origin = Instant::now();
    std::thread::sleep(dil.to_real(cfg.delay));
    let mut stream = connect(cfg)?;
    let req = Request {
        id: 1,
        size: cfg.size.unwrap_or(STREAM),
        dscp: cfg.dscp,
        rate_bps: dil.wire_bps(cfg.rate_bps),
    };
    let t0 = Instant::now();
    let mut sampler = Sampler::new(cfg, origin);
    let mut fct_us = None;
    let mut total: u64 = 0;
    let mut header_left = HEADER_LEN;
    let mut buf = vec![0u8; 64 * 1024];
    let mut error = stream
        .write_all(&req.encode())
        .err()
        .map(|e| flow_error(addr, e));
    while error.is_none() {
        let got = read_some(&mut stream, &mut buf).unwrap_or_else(|e| {
            error = Some(flow_error(addr, e));
            0
        });
        let skip = header_left.min(got);
        header_left -= skip;
        let payload = (got - skip) as u64;
        let now = Instant::now();
        total += payload;
        let done = cfg.size.is_some_and(|z| total >= z);
        if done {
            fct_us = Some(dil.emulated_us(now.duration_since(t0)));
        }
        sampler.close_intervals(now);
        // After closing the intervals that ended before `now`: these bytes
        // arrived in the current one (after a --delay, the first read comes
        // long after the first sample boundaries).
        sampler.in_interval += payload;
        if now >= sampler.end || done {
            break;
        }
    }
    let duration_us = dil.emulated_us(t0.elapsed());
    let _ = stream.shutdown(Shutdown::Both);
    Ok(LongReport {
        samples: sampler.samples,
        total_bytes: total,
        duration_us,
        goodput_mbps: if duration_us == 0 {
            0.0
        } else {
            total as f64 * 8.0 / duration_us as f64
        },
        dscp: cfg.dscp,
        rate_mbps: cfg.rate_bps as f64 / 1e6,
        start_ms: dil.emulated_us(t0.duration_since(origin)) / 1_000,
        size: cfg.size,
        fct_us,
        error,
    })
}

/// The connection to the server: no Nagle, the flow's DSCP, reads that
/// wake every [`READ_WAKE`].
fn connect(cfg: &LongConfig) -> Result<TcpStream, TgError> {
    let addr = cfg.server;
    let stream = TcpStream::connect_timeout(&addr, super::conn::connect_timeout(cfg.dilation))
        .map_err(|source| TgError::Connect { addr, source })?;
    let io_err = |context: &str| {
        let context = context.to_string();
        move |source| TgError::Io { context, source }
    };
    stream.set_nodelay(true).map_err(io_err("TCP_NODELAY"))?;
    sock::set_dscp(&stream, cfg.dscp).map_err(io_err("setting IP_TOS"))?;
    stream
        .set_read_timeout(Some(READ_WAKE))
        .map_err(io_err("SO_RCVTIMEO"))?;
    Ok(stream)
}

/// One read: the bytes it returned (0 when it only woke up), or why the
/// flow ended (the server's close included).
fn read_some(stream: &mut TcpStream, buf: &mut [u8]) -> io::Result<usize> {
    match stream.read(buf) {
        Ok(0) => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "server closed the connection",
        )),
        Ok(n) => Ok(n),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
            ) =>
        {
            Ok(0)
        }
        Err(e) => Err(e),
    }
}

/// The goodput samples: interval k is `((k−1)·sample, k·sample]` after
/// `origin` (real time; reported in emulated time).
struct Sampler {
    origin: Instant,
    /// The sampling period, real and emulated.
    real: Duration,
    emulated: Duration,
    /// No interval ends after this (origin + the real duration).
    end: Instant,
    /// The interval being filled.
    k: u32,
    in_interval: u64,
    samples: Vec<GoodputSample>,
}

impl Sampler {
    fn new(cfg: &LongConfig, origin: Instant) -> Self {
        let dil = cfg.dilation;
        Sampler {
            origin,
            real: dil.to_real(cfg.sample),
            emulated: cfg.sample,
            end: origin + dil.to_real(cfg.duration),
            k: 1,
            in_interval: 0,
            samples: Vec::new(),
        }
    }

    /// Records every interval that ended by `now` (and by the end).
    fn close_intervals(&mut self, now: Instant) {
        while now >= self.origin + self.real * self.k
            && self.origin + self.real * self.k <= self.end
        {
            self.samples.push(GoodputSample {
                t_ms: (self.emulated * self.k).as_millis() as u64,
                bytes: self.in_interval,
                goodput_mbps: self.in_interval as f64 * 8.0 / self.emulated.as_micros() as f64,
            });
            self.in_interval = 0;
            self.k += 1;
        }
    }
}

fn flow_error(addr: SocketAddr, e: io::Error) -> String {
    TgError::Flow {
        id: 1,
        addr,
        reason: e.to_string(),
    }
    .to_string()
}
