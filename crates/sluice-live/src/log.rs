//! What the workers write toward standard error (per-packet logs of
//! `--log-console`, reports of links that come and go), off the workers'
//! path.
//!
//! Invariants:
//! - a worker never writes to standard error itself: it hands its batch's
//!   log text, or a report line, to one logger thread through a queue of
//!   [`LOG_QUEUE`] chunks, without waiting;
//! - a chunk that finds the queue full is dropped and counted, so a
//!   standard error nobody reads (a full pipe) stops the logs, never the
//!   forwarding;
//! - the logger reports the chunks dropped so far at most once a second,
//!   after the logs it could write;
//! - [`flush`] (the end-of-run report calls it) waits, a bounded time, for
//!   the chunks queued before it to be written.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Chunks (one batch's log text or one report each) waiting for the logger.
pub const LOG_QUEUE: usize = 1024;

/// How long [`flush`] waits for the logger.
const FLUSH_WAIT: Duration = Duration::from_secs(1);

static DROPPED: AtomicU64 = AtomicU64::new(0);

/// What the logger is handed.
enum Chunk {
    Text(String),
    /// Answered once everything queued before it is written.
    Flush(SyncSender<()>),
}

/// The logger's queue, started with the first chunk.
fn queue() -> &'static SyncSender<Chunk> {
    static Q: OnceLock<SyncSender<Chunk>> = OnceLock::new();
    Q.get_or_init(|| {
        let (tx, rx) = sync_channel::<Chunk>(LOG_QUEUE);
        std::thread::Builder::new()
            .name("sluice-log".into())
            .spawn(move || {
                let (mut reported, mut at) = (0u64, None::<Instant>);
                while let Ok(chunk) = rx.recv() {
                    let text = match chunk {
                        Chunk::Text(t) => t,
                        Chunk::Flush(done) => {
                            let _ = done.try_send(());
                            continue;
                        }
                    };
                    let mut err = std::io::stderr().lock();
                    let _ = err.write_all(text.as_bytes());
                    let dropped = DROPPED.load(Ordering::Relaxed);
                    if dropped != reported && at.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                        let _ = writeln!(
                            err,
                            "sluice: log: dropped so far {dropped} chunk(s) of log (standard error not keeping up; \
                             {LOG_QUEUE} waiting at most)"
                        );
                        (reported, at) = (dropped, Some(Instant::now()));
                    }
                }
            })
            .expect("the logger thread starts");
        tx
    })
}

fn hand(chunk: Chunk) {
    if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = queue().try_send(chunk) {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
}

/// Hands `text` (a batch's per-packet log) to the logger without waiting;
/// dropped and counted when the queue is full.
pub fn log(text: &str) {
    hand(Chunk::Text(text.to_string()));
}

/// Hands one report line (a newline is added) to the logger without
/// waiting; dropped and counted when the queue is full.
pub fn report(line: String) {
    hand(Chunk::Text(line + "\n"));
}

/// Waits until the logger has written what was queued before this call,
/// or [`FLUSH_WAIT`] at most (standard error may not be read at all).
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
