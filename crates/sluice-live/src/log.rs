//! What the workers write toward the user (per-packet logs, reports of
//! links that come and go), off the workers' path.
//!
//! Per-packet log lines go where [`set_target`] says, as bmv2's do:
//! standard output (`--log-console`) or a file (`--log-file`, rotated at a
//! size into `NAME.1.EXT`, `NAME.2.EXT`... as bmv2's logger does); reports
//! always go to standard error.
//!
//! Invariants:
//! - a worker never writes itself: it hands its batch's log text, or a
//!   report line, to one logger thread through a queue of [`LOG_QUEUE`]
//!   chunks, without waiting;
//! - a chunk that finds the queue full is dropped and counted, so an
//!   output nobody reads (a full pipe) stops the logs, never the
//!   forwarding;
//! - the logger reports the chunks dropped so far, on standard error, at
//!   most once a second, after the logs it could write;
//! - a file log is written through a buffer flushed whenever the queue is
//!   empty (with `--log-flush`, after every chunk), so a line reaches the
//!   file as soon as the logger is idle;
//! - [`flush`] (the end-of-run report calls it) waits, a bounded time, for
//!   the chunks queued before it to be written.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Chunks (one batch's log text or one report each) waiting for the logger.
pub const LOG_QUEUE: usize = 1024;

/// How long [`flush`] waits for the logger.
const FLUSH_WAIT: Duration = Duration::from_secs(1);

static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Where per-packet log lines go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogTarget {
    /// Standard error (the default).
    Stderr,
    /// Standard output (bmv2's `--log-console`).
    Stdout,
    /// A file (bmv2's `--log-file`).
    File(FileLog),
}

/// A log file and how it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileLog {
    pub path: PathBuf,
    /// Flush after every chunk (`--log-flush`).
    pub flush: bool,
    /// Size at which the file is rotated (`--log-file-max-size`, bmv2: 5 MiB).
    pub max_size: u64,
    /// Rotated files kept (`--log-file-max-files`, bmv2: 3).
    pub max_files: u32,
}

impl FileLog {
    /// A file log with bmv2's defaults.
    pub fn new(path: PathBuf) -> FileLog {
        FileLog { path, flush: false, max_size: 5 * 1024 * 1024, max_files: 3 }
    }
}

static TARGET: Mutex<Option<LogTarget>> = Mutex::new(None);

/// Sets where per-packet log lines go; takes effect if called before the
/// first line is logged. A file is created (truncated) here, so that a
/// path that cannot be written is an error at start.
pub fn set_target(t: LogTarget) -> Result<(), String> {
    if let LogTarget::File(f) = &t {
        File::create(&f.path).map_err(|e| format!("cannot write the log file {}: {e}", f.path.display()))?;
    }
    *TARGET.lock().unwrap_or_else(|e| e.into_inner()) = Some(t);
    Ok(())
}

/// What the logger is handed.
enum Chunk {
    /// Per-packet log text.
    Log(String),
    /// A report line (with its newline).
    Report(String),
    /// Answered once everything queued before it is written.
    Flush(SyncSender<()>),
}

/// The writer of per-packet log text.
enum Sink {
    Stderr,
    Stdout,
    File { cfg: FileLog, out: Option<BufWriter<File>>, size: u64 },
}

impl Sink {
    fn new(t: LogTarget) -> Sink {
        match t {
            LogTarget::Stderr => Sink::Stderr,
            LogTarget::Stdout => Sink::Stdout,
            LogTarget::File(cfg) => {
                let out = File::options().append(true).create(true).open(&cfg.path).ok().map(BufWriter::new);
                Sink::File { cfg, out, size: 0 }
            }
        }
    }

    fn write(&mut self, text: &str) {
        match self {
            Sink::Stderr => {
                let _ = std::io::stderr().lock().write_all(text.as_bytes());
            }
            Sink::Stdout => {
                let mut o = std::io::stdout().lock();
                let _ = o.write_all(text.as_bytes());
                let _ = o.flush();
            }
            Sink::File { cfg, out, size } => {
                if *size > 0 && *size + text.len() as u64 > cfg.max_size {
                    if let Some(mut o) = out.take() {
                        let _ = o.flush();
                    }
                    rotate(&cfg.path, cfg.max_files);
                    *out = File::create(&cfg.path).ok().map(BufWriter::new);
                    *size = 0;
                }
                if let Some(o) = out.as_mut() {
                    let _ = o.write_all(text.as_bytes());
                    *size += text.len() as u64;
                    if cfg.flush {
                        let _ = o.flush();
                    }
                }
            }
        }
    }

    fn flush(&mut self) {
        if let Sink::File { out: Some(o), .. } = self {
            let _ = o.flush();
        }
    }
}

/// `NAME.EXT` rotated: `NAME.K.EXT` becomes `NAME.K+1.EXT` (the oldest
/// beyond `keep` goes), `NAME.EXT` becomes `NAME.1.EXT`.
fn rotate(path: &Path, keep: u32) {
    let numbered = |k: u32| -> PathBuf {
        if k == 0 {
            return path.to_path_buf();
        }
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let name = match path.extension() {
            Some(ext) => format!("{stem}.{k}.{}", ext.to_string_lossy()),
            None => format!("{stem}.{k}"),
        };
        path.with_file_name(name)
    };
    if keep == 0 {
        let _ = std::fs::remove_file(path);
        return;
    }
    let _ = std::fs::remove_file(numbered(keep));
    for k in (0..keep).rev() {
        let _ = std::fs::rename(numbered(k), numbered(k + 1));
    }
}

/// The logger's queue, started with the first chunk.
fn queue() -> &'static SyncSender<Chunk> {
    static Q: OnceLock<SyncSender<Chunk>> = OnceLock::new();
    Q.get_or_init(|| {
        let (tx, rx) = sync_channel::<Chunk>(LOG_QUEUE);
        let target = TARGET.lock().unwrap_or_else(|e| e.into_inner()).clone().unwrap_or(LogTarget::Stderr);
        std::thread::Builder::new()
            .name("sluice-log".into())
            .spawn(move || run(rx, Sink::new(target)))
            .expect("the logger thread starts");
        tx
    })
}

fn run(rx: Receiver<Chunk>, mut sink: Sink) {
    let (mut reported, mut at) = (0u64, None::<Instant>);
    loop {
        let chunk = match rx.try_recv() {
            Ok(c) => c,
            Err(TryRecvError::Empty) => {
                // Idle: what is buffered goes out before waiting.
                sink.flush();
                match rx.recv() {
                    Ok(c) => c,
                    Err(_) => return,
                }
            }
            Err(TryRecvError::Disconnected) => return,
        };
        match chunk {
            Chunk::Log(t) => sink.write(&t),
            Chunk::Report(t) => {
                let _ = std::io::stderr().lock().write_all(t.as_bytes());
            }
            Chunk::Flush(done) => {
                sink.flush();
                let _ = done.try_send(());
                continue;
            }
        }
        let dropped = DROPPED.load(Ordering::Relaxed);
        if dropped != reported && at.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
            let _ = writeln!(
                std::io::stderr().lock(),
                "sluice: log: dropped so far {dropped} chunk(s) of log (the log's reader not keeping up; \
                 {LOG_QUEUE} waiting at most)"
            );
            (reported, at) = (dropped, Some(Instant::now()));
        }
    }
}

fn hand(chunk: Chunk) {
    if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = queue().try_send(chunk) {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
}

/// Hands `text` (a batch's per-packet log) to the logger without waiting;
/// dropped and counted when the queue is full.
pub fn log(text: String) {
    hand(Chunk::Log(text));
}

/// Hands one report line (a newline is added) to the logger without
/// waiting; dropped and counted when the queue is full.
pub fn report(line: String) {
    hand(Chunk::Report(line + "\n"));
}

/// Waits until the logger has written what was queued before this call,
/// or [`FLUSH_WAIT`] at most (its output may not be read at all).
pub fn flush() {
    let (done, wait) = sync_channel(1);
    let t0 = Instant::now();
    let mut chunk = Chunk::Flush(done);
    loop {
        match queue().try_send(chunk) {
            Ok(()) => break,
            Err(TrySendError::Full(c)) if t0.elapsed() < FLUSH_WAIT => {
                chunk = c;
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(_) => return,
        }
    }
    let _ = wait.recv_timeout(FLUSH_WAIT.saturating_sub(t0.elapsed()));
}

/// Chunks of log dropped so far.
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_shifts_numbered_files_and_keeps_at_most_the_count() {
        let dir = std::env::temp_dir().join(format!("sluice-rotate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s1.log");
        let mut sink =
            Sink::new(LogTarget::File(FileLog { path: path.clone(), flush: true, max_size: 10, max_files: 2 }));
        for line in ["aaaaaaaa\n", "bbbbbbbb\n", "cccccccc\n", "dddddddd\n"] {
            sink.write(line);
        }
        sink.flush();
        let read = |n: &str| std::fs::read_to_string(dir.join(n)).unwrap_or_default();
        assert_eq!(read("s1.log"), "dddddddd\n");
        assert_eq!(read("s1.1.log"), "cccccccc\n");
        assert_eq!(read("s1.2.log"), "bbbbbbbb\n");
        assert!(!dir.join("s1.3.log").exists(), "two rotated files at most");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
