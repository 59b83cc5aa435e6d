//! Live counters for other processes: the data path publishes a copy of its
//! plain counters every 100 ms, and a small thread serves the latest one as
//! JSON to whoever connects to a Unix socket, building and serialising the
//! JSON there (on the reader's time, not the data path's). `softswitch stats`
//! is such a client.

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread;

/// Where a switch serves its counters unless told otherwise.
pub const DEFAULT_SOCKET: &str = "/run/softswitch/stats.sock";

/// A published value that renders itself as JSON text when read.
pub trait Render: Send + Sync {
    /// The JSON text.
    fn render(&self) -> String;
}

impl Render for String {
    fn render(&self) -> String {
        self.clone()
    }
}

/// The latest snapshot, shared between the data path and the server thread:
/// a latest-value cell whose lock is held for one `Arc` swap or clone.
#[derive(Clone)]
pub struct Published(Arc<Mutex<Arc<dyn Render>>>);

impl Default for Published {
    fn default() -> Self {
        Published(Arc::new(Mutex::new(Arc::new(String::new()))))
    }
}

/// How long the server waits for one client to take a snapshot.
const WRITE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

impl Published {
    /// Replaces the snapshot with finished JSON text.
    pub fn set(&self, json: String) {
        self.set_lazy(Arc::new(json));
    }
    /// Replaces the snapshot with a value rendered only when read.
    pub fn set_lazy(&self, value: Arc<dyn Render>) {
        if let Ok(mut g) = self.0.lock() {
            *g = value;
        }
    }
    /// The latest snapshot, rendered (outside the lock).
    pub fn get(&self) -> String {
        let v = self.0.lock().map(|g| g.clone());
        v.map(|v| v.render()).unwrap_or_default()
    }
}

/// A running stats server; removes its socket file when dropped.
pub struct StatsServer {
    path: PathBuf,
}

impl StatsServer {
    /// Listens on `path` (creating its directory) and serves `published`.
    pub fn start(path: &Path, published: Published) -> std::io::Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        if path.exists() {
            // A live switch answers; a stale socket from a killed one does not.
            if UnixStream::connect(path).is_ok() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::AddrInUse,
                    format!(
                        "another softswitch serves stats on {}; stop it, or give this one --stats-socket PATH",
                        path.display()
                    ),
                ));
            }
            std::fs::remove_file(path)?;
        }
        let listener = UnixListener::bind(path)?;
        thread::Builder::new().name("stats".into()).spawn(move || {
            for mut conn in listener.incoming().flatten() {
                // A client that connects and never reads must not hold the
                // server (and every later client) once a large snapshot
                // fills the socket buffer. What a client writes is never
                // read: garbage is ignored.
                let _ = conn.set_write_timeout(Some(WRITE_TIMEOUT));
                let snap = published.get();
                let _ = conn.write_all(snap.as_bytes());
            }
        })?;
        Ok(StatsServer {
            path: path.to_path_buf(),
        })
    }
}

impl Drop for StatsServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Reads the latest snapshot from a running switch.
pub fn fetch(path: &Path) -> Result<String, String> {
    let mut s = UnixStream::connect(path).map_err(|e| {
        format!(
            "cannot reach a running softswitch at {}: {e}. Is it running (and did you start it with another --stats-socket)?",
            path.display()
        )
    })?;
    let mut out = String::new();
    s.read_to_string(&mut out)
        .map_err(|e| format!("reading {}: {e}", path.display()))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_latest_snapshot_and_cleans_up() {
        let dir = std::env::temp_dir().join(format!("ss-stats-{}", std::process::id()));
        let path = dir.join("s.sock");
        let p = Published::default();
        p.set("{\"a\":1}".into());
        let server = StatsServer::start(&path, p.clone()).unwrap();
        assert_eq!(fetch(&path).unwrap(), "{\"a\":1}");
        p.set("{\"a\":2}".into());
        assert_eq!(fetch(&path).unwrap(), "{\"a\":2}");
        // A lazily rendered value is rendered per reader, at read time.
        struct Counted(std::sync::atomic::AtomicU32);
        impl Render for Counted {
            fn render(&self) -> String {
                let n = self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                format!("{{\"reads\":{n}}}")
            }
        }
        p.set_lazy(Arc::new(Counted(Default::default())));
        assert_eq!(fetch(&path).unwrap(), "{\"reads\":1}");
        assert_eq!(fetch(&path).unwrap(), "{\"reads\":2}");
        // A second server on the same live socket is refused with advice.
        let e = StatsServer::start(&path, p.clone())
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("--stats-socket"), "{e}");
        // A client that never reads a snapshot larger than the socket
        // buffer holds the server for at most the write timeout; garbage
        // written to it is ignored.
        p.set("x".repeat(4 << 20));
        let mut stuck = UnixStream::connect(&path).unwrap();
        let _ = stuck.write_all(b"\x00\xffGET / HTTP/1.0\r\n\r\n");
        std::thread::sleep(std::time::Duration::from_millis(50));
        p.set("{\"a\":3}".into());
        let t = std::time::Instant::now();
        assert_eq!(fetch(&path).unwrap(), "{\"a\":3}");
        assert!(
            t.elapsed() < std::time::Duration::from_secs(3),
            "{:?}",
            t.elapsed()
        );
        drop(stuck);
        drop(server);
        assert!(!path.exists());
        assert!(fetch(&path).unwrap_err().contains("Is it running"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
