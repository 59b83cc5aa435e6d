//! The capture files and the thread that writes them. The data path hands
//! over whole [`Batch`]es through a bounded crossbeam channel and gets
//! emptied ones back through another (no allocation once warm); when the
//! writer falls behind, the data path does not wait: the batch is counted as
//! lost, per file, and reused.
//!
//! Each file is bounded (`--pcap-max-mb`): a packet whose block would take
//! the file past the bound is not written but counted, and at close every
//! file gets an Interface Statistics Block saying how many packets the
//! switch saw, how many were written and how many were not, with a
//! "capture truncated" comment when the bound was hit. Room for that block
//! is kept free, so a file never exceeds its bound.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};
use serde::Serialize;

use super::{comment, pcapng, Batch, Dir};
use crate::units::Nanos;

/// Batches in flight between the data path and the writer.
const CHANNEL_BATCHES: usize = 64;
/// Longest closing comment; room for its block is kept in every file.
const MAX_CLOSING_COMMENT: usize = 200;

/// What to write where.
#[derive(Clone, Debug)]
pub struct WriterConfig {
    /// Directory of the files (created if missing).
    pub dir: PathBuf,
    /// Port names, by port number.
    pub names: Vec<String>,
    /// Ports captured.
    pub ports: Vec<bool>,
    /// Snap length (written into each file's interface block).
    pub snaplen: u32,
    /// Bound of one file, bytes.
    pub max_bytes: u64,
    /// Wall-clock time (ns since the Unix epoch) of switch time 0.
    pub epoch_ns: u64,
}

/// The path of the file of `port` (named `name`) and `dir`.
pub fn file_path(root: &Path, name: &str, dir: Dir) -> PathBuf {
    root.join(format!("{name}-{}.pcapng", dir.name()))
}

/// What one file got.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct FileSummary {
    /// Path.
    pub path: PathBuf,
    /// Port name.
    pub port: String,
    /// `rx` or `tx`.
    pub dir: &'static str,
    /// Packets the switch saw in this direction.
    pub seen: u64,
    /// Packets written.
    pub written: u64,
    /// Packets not written because the file reached its bound.
    pub truncated: u64,
    /// Packets not written because the writer fell behind.
    pub lost: u64,
    /// File size, bytes.
    pub bytes: u64,
}

/// Every file at close.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Summary {
    /// Files, port by port, rx before tx.
    pub files: Vec<FileSummary>,
}

impl Summary {
    /// Lines for the exit report.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for f in &self.files {
            out.push_str(&format!(
                "capture: {} {} packets ({:.1} MB)",
                f.path.display(),
                f.written,
                f.bytes as f64 / 1e6
            ));
            if f.truncated > 0 {
                out.push_str(&format!(
                    ", capture truncated: {} packets not written (file bound)",
                    f.truncated
                ));
            }
            if f.lost > 0 {
                out.push_str(&format!(", {} packets lost (writer behind)", f.lost));
            }
            out.push('\n');
        }
        out
    }
}

/// One open capture file.
struct CaptureFile {
    out: BufWriter<File>,
    sum: FileSummary,
    first_ns: Option<Nanos>,
    last_ns: Nanos,
}

/// The files, written on this thread (used by the writer thread and by tests).
pub struct Files {
    cfg: WriterConfig,
    /// Index port * 2 + dir; None: not captured.
    files: Vec<Option<CaptureFile>>,
    block: Vec<u8>,
    text: String,
    reserve: u64,
}

impl Files {
    /// Creates the directory and every file (section and interface blocks).
    pub fn create(cfg: WriterConfig) -> std::io::Result<Self> {
        std::fs::create_dir_all(&cfg.dir)?;
        let mut files = Vec::with_capacity(cfg.names.len() * 2);
        let mut block = Vec::with_capacity(4096);
        for (p, name) in cfg.names.iter().enumerate() {
            for dir in [Dir::Rx, Dir::Tx] {
                if !cfg.ports.get(p).copied().unwrap_or(false) {
                    files.push(None);
                    continue;
                }
                let path = file_path(&cfg.dir, name, dir);
                let f = File::create(&path).map_err(|e| {
                    std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
                })?;
                block.clear();
                pcapng::section_header(
                    &mut block,
                    concat!("softswitch ", env!("CARGO_PKG_VERSION")),
                );
                let what = match dir {
                    Dir::Rx => "received by",
                    Dir::Tx => "sent out of",
                };
                pcapng::interface(
                    &mut block,
                    name,
                    &format!("frames {what} softswitch port {name}"),
                    cfg.snaplen,
                );
                let mut out = BufWriter::with_capacity(1 << 20, f);
                out.write_all(&block)?;
                files.push(Some(CaptureFile {
                    out,
                    sum: FileSummary {
                        path,
                        port: name.clone(),
                        dir: dir.name(),
                        bytes: block.len() as u64,
                        ..FileSummary::default()
                    },
                    first_ns: None,
                    last_ns: 0,
                }));
            }
        }
        Ok(Files {
            reserve: pcapng::statistics_block_len(MAX_CLOSING_COMMENT) as u64,
            cfg,
            files,
            block,
            text: String::with_capacity(256),
        })
    }

    /// Writes the records of `b` (and counts its lost ones).
    pub fn write(&mut self, b: &Batch) -> std::io::Result<()> {
        for r in &b.records {
            let Some(Some(f)) = self.files.get_mut(r.port as usize * 2 + r.dir as usize) else {
                continue;
            };
            f.sum.seen += 1;
            comment(b.fates_of(r), &self.cfg.names, &mut self.text);
            let data = b.data(r);
            let len = pcapng::packet_block_len(data.len(), self.text.len()) as u64;
            if f.sum.bytes + len + self.reserve > self.cfg.max_bytes {
                f.sum.truncated += 1;
                continue;
            }
            let ts = self.cfg.epoch_ns + r.t_ns;
            self.block.clear();
            pcapng::packet(&mut self.block, ts, data, r.len, &self.text);
            f.out.write_all(&self.block)?;
            f.sum.bytes += self.block.len() as u64;
            f.sum.written += 1;
            f.first_ns.get_or_insert(ts);
            f.last_ns = ts;
        }
        for (p, l) in b.lost.iter().enumerate() {
            for (d, &n) in l.iter().enumerate() {
                if let Some(Some(f)) = self.files.get_mut(p * 2 + d) {
                    f.sum.lost += n;
                    f.sum.seen += n;
                }
            }
        }
        Ok(())
    }

    /// Writes each file's statistics block and closes it.
    pub fn finish(mut self) -> std::io::Result<Summary> {
        let mut files = Vec::new();
        for f in self.files.iter_mut().flatten() {
            let s = &mut f.sum;
            let mut note = String::new();
            if s.truncated > 0 {
                note = format!(
                    "capture truncated: {} packets not written (file bound {} bytes reached)",
                    s.truncated, self.cfg.max_bytes
                );
            }
            if s.lost > 0 {
                if !note.is_empty() {
                    note.push_str("; ");
                }
                note.push_str(&format!("{} packets lost (writer behind)", s.lost));
            }
            note.truncate(MAX_CLOSING_COMMENT);
            let stats = pcapng::Stats {
                start_ns: f.first_ns.unwrap_or(self.cfg.epoch_ns),
                end_ns: f.last_ns.max(f.first_ns.unwrap_or(self.cfg.epoch_ns)),
                seen: s.seen,
                not_written: s.truncated + s.lost,
                written: s.written,
            };
            self.block.clear();
            pcapng::statistics(&mut self.block, stats.end_ns, &stats, &note);
            f.out.write_all(&self.block)?;
            s.bytes += self.block.len() as u64;
            f.out.flush()?;
            files.push(s.clone());
        }
        Ok(Summary { files })
    }
}

/// The writer thread and the data path's ends of its channels.
pub struct Writer {
    to_writer: Sender<Batch>,
    recycled: Receiver<Batch>,
    handle: JoinHandle<std::io::Result<Summary>>,
    /// Records of batches the writer could not take, per (port, dir).
    lost: Vec<[u64; 2]>,
    epoch_ns: Arc<AtomicU64>,
}

impl Writer {
    /// Creates the files (errors here are the user's to fix: a directory
    /// that cannot be written) and starts the thread.
    pub fn start(cfg: WriterConfig) -> std::io::Result<Self> {
        let n = cfg.names.len();
        let epoch_ns = Arc::new(AtomicU64::new(cfg.epoch_ns));
        let epoch = epoch_ns.clone();
        let mut files = Files::create(cfg)?;
        let (to_writer, from_dp) = bounded::<Batch>(CHANNEL_BATCHES);
        let (to_dp, recycled) = bounded::<Batch>(CHANNEL_BATCHES);
        let handle = std::thread::Builder::new()
            .name("pcap-writer".into())
            .spawn(move || {
                let mut err = None;
                for b in from_dp {
                    // Set before the first batch was sent (the channel orders it).
                    files.cfg.epoch_ns = epoch.load(Ordering::Relaxed);
                    if err.is_none() {
                        if let Err(e) = files.write(&b) {
                            err = Some(e);
                        }
                    }
                    let _ = to_dp.try_send(b);
                }
                match err {
                    Some(e) => Err(e),
                    None => files.finish(),
                }
            })?;
        Ok(Writer {
            to_writer,
            recycled,
            handle,
            lost: vec![[0, 0]; n],
            epoch_ns,
        })
    }

    /// Sets the wall-clock time of switch time 0 (the files are created
    /// before the switch's clock starts).
    pub fn set_epoch(&self, epoch_ns: u64) {
        self.epoch_ns.store(epoch_ns, Ordering::Relaxed);
    }

    /// Hands `b` to the writer; returns an empty batch to record into next.
    /// Never blocks: if the writer is behind, `b`'s records are counted as lost.
    pub fn send(&mut self, b: Batch) -> Batch {
        match self.to_writer.try_send(b) {
            Ok(()) => self.recycled.try_recv().unwrap_or_default(),
            Err(TrySendError::Full(b)) | Err(TrySendError::Disconnected(b)) => {
                b.count_lost(&mut self.lost);
                b
            }
        }
    }

    /// Hands over the last batch, waits for the files to be closed.
    pub fn finish(self, last: Batch) -> std::io::Result<Summary> {
        let _ = self.to_writer.send(last);
        let tally = Batch {
            lost: self.lost,
            ..Batch::default()
        };
        let _ = self.to_writer.send(tally);
        drop(self.to_writer);
        self.handle
            .join()
            .map_err(|_| std::io::Error::other("the capture writer thread panicked"))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aqm::DropReason;
    use crate::capture::{Capture, CaptureConfig, Fate};

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("softswitch-pcap-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn config(dir: &Path, max_bytes: u64) -> WriterConfig {
        WriterConfig {
            dir: dir.to_path_buf(),
            names: vec!["p0".into(), "p1".into()],
            ports: vec![true, false],
            snaplen: 64,
            max_bytes,
            epoch_ns: 1_700_000_000_000_000_000,
        }
    }

    fn u32_at(b: &[u8], i: usize) -> u32 {
        u32::from_le_bytes(b[i..i + 4].try_into().unwrap())
    }

    /// (type, body) of every block of a file.
    fn blocks(mut b: &[u8]) -> Vec<(u32, Vec<u8>)> {
        let mut out = Vec::new();
        while !b.is_empty() {
            let len = u32_at(b, 4) as usize;
            assert_eq!(u32_at(b, len - 4) as usize, len);
            out.push((u32_at(b, 0), b[8..len - 4].to_vec()));
            b = &b[len..];
        }
        out
    }

    fn batch_of(n: u64) -> Batch {
        let mut c = Capture::new(CaptureConfig {
            snaplen: 64,
            ports: vec![true, false],
        });
        for i in 0..n {
            c.rx(0, 1_000 * i, &[0xEE; 100], 100);
            c.rx_fate(Fate::Dropped {
                port: 1,
                queue: 0,
                reason: DropReason::BufferFull,
            });
        }
        c.take(Batch::default())
    }

    #[test]
    fn files_hold_header_packets_with_comments_and_statistics() {
        let d = tmpdir("basic");
        let mut f = Files::create(config(&d, 1 << 20)).unwrap();
        f.write(&batch_of(3)).unwrap();
        let sum = f.finish().unwrap();
        assert_eq!(sum.files.len(), 2, "rx and tx of the captured port only");
        assert!(!file_path(&d, "p1", Dir::Rx).exists());
        let rx = std::fs::read(file_path(&d, "p0", Dir::Rx)).unwrap();
        assert_eq!(rx.len() as u64, sum.files[0].bytes);
        let bl = blocks(&rx);
        let types: Vec<u32> = bl.iter().map(|b| b.0).collect();
        assert_eq!(
            types,
            vec![
                pcapng::SHB_TYPE,
                pcapng::IDB_TYPE,
                pcapng::EPB_TYPE,
                pcapng::EPB_TYPE,
                pcapng::EPB_TYPE,
                pcapng::ISB_TYPE
            ]
        );
        // Second packet: epoch + 1 µs, 64 of 100 bytes, commented.
        let epb = &bl[3].1;
        let ts = ((u32_at(epb, 4) as u64) << 32) | u32_at(epb, 8) as u64;
        assert_eq!(ts, 1_700_000_000_000_001_000);
        assert_eq!((u32_at(epb, 12), u32_at(epb, 16)), (64, 100));
        let comment = b"p1 q0: dropped: buffer_full";
        assert_eq!(&epb[20 + 64 + 4..20 + 64 + 4 + comment.len()], comment);
        assert_eq!(sum.files[0].written, 3);
        assert_eq!(sum.files[0].seen, 3);
        // The tx file: headers and statistics only.
        let tx = std::fs::read(file_path(&d, "p0", Dir::Tx)).unwrap();
        assert_eq!(blocks(&tx).len(), 3);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn bound_is_never_exceeded_and_truncation_is_counted() {
        let d = tmpdir("bound");
        let max = 4096;
        let mut f = Files::create(config(&d, max)).unwrap();
        f.write(&batch_of(100)).unwrap();
        let sum = f.finish().unwrap();
        let s = &sum.files[0];
        let len = std::fs::metadata(&s.path).unwrap().len();
        assert!(len <= max, "file {len} B over its {max} B bound");
        assert!(s.written > 0 && s.truncated > 0, "{s:?}");
        assert_eq!(s.written + s.truncated, 100);
        let rx = std::fs::read(&s.path).unwrap();
        let bl = blocks(&rx);
        let isb = &bl.last().unwrap().1;
        // Packets stopped only when the next one would not have fitted
        // beside the room kept for the statistics block.
        let per_packet = pcapng::packet_block_len(64, "p1 q0: dropped: buffer_full".len()) as u64;
        let before_isb = len - (isb.len() as u64 + 12);
        let reserve = pcapng::statistics_block_len(MAX_CLOSING_COMMENT) as u64;
        assert!(before_isb + reserve <= max);
        assert!(before_isb + per_packet + reserve > max);
        assert_eq!(bl.last().unwrap().0, pcapng::ISB_TYPE);
        let text = String::from_utf8_lossy(isb);
        assert!(
            text.contains(&format!(
                "capture truncated: {} packets not written",
                s.truncated
            )),
            "{text}"
        );
        assert!(sum.render().contains("capture truncated"));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn writer_thread_writes_and_counts_lost_batches() {
        let d = tmpdir("thread");
        let mut w = Writer::start(config(&d, 1 << 20)).unwrap();
        let mut total = 0;
        for _ in 0..10 {
            let next = w.send(batch_of(5));
            assert!(next.records.is_empty());
            total += 5;
        }
        let sum = w.finish(batch_of(2)).unwrap();
        total += 2;
        let s = &sum.files[0];
        assert_eq!(s.seen, total);
        assert_eq!(s.written + s.lost, total);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn unwritable_directory_is_an_error() {
        let d = tmpdir("err");
        std::fs::write(&d, b"a file, not a directory").unwrap();
        assert!(Files::create(config(&d, 1 << 20)).is_err());
        let _ = std::fs::remove_file(&d);
    }
}
