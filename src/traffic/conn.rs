//! A client-side persistent connection: the caller writes requests, a
//! reader thread per connection reads the responses and reports each flow.
//!
//! Protocol of one flow: the caller takes the start time, hands the reader a
//! [`Pending`] and then writes the 24-byte request; the reader reads the
//! echo (checking the id), then `size` bytes, takes the end time, reports an
//! [`Outcome`] and puts the connection back on its server's idle list. Only
//! the reader reports, so every flow handed over is reported exactly once —
//! also when the write fails (the caller then shuts the socket down, which
//! fails the reader's read).

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use super::proto::{Request, HEADER_LEN};
use super::sock;
use crate::timebase::Dilation;

/// Read buffer per connection (64 KiB: 2 000 reads/s at 1 Gbit/s, and a
/// thousand connections cost 64 MB, not 256).
const READ_BUF: usize = 64 * 1024;
/// Connect timeout, in emulated time: 3 s, long enough for one lost SYN or
/// SYN-ACK (Linux retransmits it after its 1 s initial RTO).
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// [`CONNECT_TIMEOUT`] in real time under time dilation D: the hosts'
/// initial RTO runs D times slower too (`topo up --dilation`), so a real 3 s
/// would not outlast a single lost SYN at D = 4 and would end the run.
pub(crate) fn connect_timeout(dil: Dilation) -> Duration {
    dil.to_real(CONNECT_TIMEOUT)
}

/// Indices (into a server's connection list) of connections with no flow.
pub(crate) type IdleList = Arc<Mutex<Vec<usize>>>;

/// A flow handed to a reader.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pending {
    pub req: Request,
    pub start: Instant,
}

/// How a flow ended.
#[derive(Clone, Debug)]
pub(crate) enum Outcome {
    Done {
        server: usize,
        req: Request,
        start: Instant,
        end: Instant,
    },
    Failed {
        server: usize,
        id: u32,
        reason: String,
    },
}

/// One persistent connection to a server.
pub(crate) struct Conn {
    stream: TcpStream,
    to_reader: Option<Sender<Pending>>,
    reader: Option<JoinHandle<()>>,
    dscp: Option<u8>,
}

impl Conn {
    /// Connects (within [`connect_timeout`]) and starts the reader. `slot`
    /// is this connection's index in the server's list, pushed onto `idle`
    /// after each completed flow.
    pub fn open(
        server: usize,
        addr: SocketAddr,
        slot: usize,
        idle: IdleList,
        outcomes: Sender<Outcome>,
        dil: Dilation,
    ) -> io::Result<Conn> {
        let stream = TcpStream::connect_timeout(&addr, connect_timeout(dil))?;
        stream.set_nodelay(true)?;
        let read_half = stream.try_clone()?;
        let (tx, rx) = crossbeam_channel::unbounded();
        let reader = thread::Builder::new()
            .name(format!("tg-rx-{addr}-{slot}"))
            .stack_size(128 * 1024)
            .spawn(move || read_loop(read_half, server, slot, rx, idle, outcomes))?;
        Ok(Conn {
            stream,
            to_reader: Some(tx),
            reader: Some(reader),
            dscp: None,
        })
    }

    /// Starts a flow: sets DSCP if it changed, stamps the start, writes the
    /// request. Once this returns `true` the reader reports the flow (also a
    /// failed write); `false` means the flow was not handed over because this
    /// connection's reader has already ended, and nobody will report it.
    #[must_use]
    pub fn start_flow(&mut self, req: Request) -> bool {
        if self.dscp != Some(req.dscp) {
            // A failure leaves the previous DSCP; the flow still runs.
            if sock::set_dscp(&self.stream, req.dscp).is_ok() {
                self.dscp = Some(req.dscp);
            }
        }
        let Some(tx) = &self.to_reader else {
            return false;
        };
        let start = Instant::now();
        if tx.send(Pending { req, start }).is_err() {
            return false;
        }
        if self.stream.write_all(&req.encode()).is_err() {
            let _ = self.stream.shutdown(Shutdown::Both);
        }
        true
    }

    /// Closes the connection and waits for its reader.
    pub fn close(&mut self) {
        let _ = self.stream.shutdown(Shutdown::Both);
        self.to_reader = None;
        if let Some(h) = self.reader.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.close();
    }
}

fn read_loop(
    mut stream: TcpStream,
    server: usize,
    slot: usize,
    flows: Receiver<Pending>,
    idle: IdleList,
    outcomes: Sender<Outcome>,
) {
    let mut buf = vec![0u8; READ_BUF];
    while let Ok(p) = flows.recv() {
        match read_response(&mut stream, &p.req, &mut buf) {
            Ok(()) => {
                let end = Instant::now();
                // Back on the idle list first, so the next arrival can use it.
                if let Ok(mut l) = idle.lock() {
                    l.push(slot);
                }
                let _ = outcomes.send(Outcome::Done {
                    server,
                    req: p.req,
                    start: p.start,
                    end,
                });
            }
            Err(e) => {
                let _ = outcomes.send(Outcome::Failed {
                    server,
                    id: p.req.id,
                    reason: e.to_string(),
                });
                let _ = stream.shutdown(Shutdown::Both);
                // Report the flows queued behind it too (none in practice:
                // a connection carries one flow at a time).
                while let Ok(p) = flows.try_recv() {
                    let _ = outcomes.send(Outcome::Failed {
                        server,
                        id: p.req.id,
                        reason: "connection failed before this flow".into(),
                    });
                }
                return;
            }
        }
    }
}

/// Reads the echo and the payload of one response.
fn read_response(stream: &mut TcpStream, req: &Request, buf: &mut [u8]) -> io::Result<()> {
    let mut hdr = [0u8; HEADER_LEN];
    stream
        .read_exact(&mut hdr)
        .map_err(|e| eof_context(e, "the response header"))?;
    let echoed =
        Request::decode(&hdr).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    if echoed.id != req.id || echoed.size != req.size {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "response for flow {} ({} B) arrived while waiting for flow {} ({} B)",
                echoed.id, echoed.size, req.id, req.size
            ),
        ));
    }
    let mut left = req.size;
    while left > 0 {
        let want = (buf.len() as u64).min(left) as usize;
        match stream.read(&mut buf[..want]) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "server closed the connection with {left} of {} bytes missing",
                        req.size
                    ),
                ))
            }
            Ok(n) => left -= n as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn eof_context(e: io::Error, what: &str) -> io::Error {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        io::Error::new(
            e.kind(),
            format!("server closed the connection before {what}"),
        )
    } else {
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connect_timeout_is_three_seconds_of_emulated_time() {
        // D = 4: the hosts retransmit a lost SYN after 4 s of real time, so
        // the wait must be 12 s real to outlast one loss as 3 s does at D = 1.
        assert_eq!(connect_timeout(Dilation::NONE), Duration::from_secs(3));
        let d4 = Dilation::new(4.0).unwrap();
        assert_eq!(connect_timeout(d4), Duration::from_secs(12));
        assert!(connect_timeout(d4) > d4.to_real(Duration::from_secs(1)));
    }
}
