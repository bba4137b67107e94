//! Per-packet logs (`--log-console` traces) toward standard error, off the
//! workers' path.
//!
//! Invariants:
//! - a worker never writes to standard error itself: it hands its batch's
//!   log text to one logger thread through a queue of [`LOG_QUEUE`]
//!   chunks, without waiting;
//! - a chunk that finds the queue full is dropped and counted, so a
//!   standard error nobody reads (a full pipe) stops the logs, never the
//!   forwarding;
//! - the logger reports the chunks dropped so far at most once a second,
//!   after the logs it could write.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Chunks (one batch's log text each) waiting for the logger.
pub const LOG_QUEUE: usize = 1024;

static DROPPED: AtomicU64 = AtomicU64::new(0);

/// The logger's queue, started with the first chunk.
fn queue() -> &'static SyncSender<String> {
    static Q: OnceLock<SyncSender<String>> = OnceLock::new();
    Q.get_or_init(|| {
        let (tx, rx) = sync_channel::<String>(LOG_QUEUE);
        std::thread::Builder::new()
            .name("sluice-log".into())
            .spawn(move || {
                let (mut reported, mut at) = (0u64, None::<Instant>);
                while let Ok(text) = rx.recv() {
                    let mut err = std::io::stderr().lock();
                    let _ = err.write_all(text.as_bytes());
                    let dropped = DROPPED.load(Ordering::Relaxed);
                    if dropped != reported && at.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                        let _ = writeln!(
                            err,
                            "sluice: log: dropped so far {dropped} chunk(s) of per-packet log (standard error not \
                             keeping up; {LOG_QUEUE} waiting at most)"
                        );
                        (reported, at) = (dropped, Some(Instant::now()));
                    }
                }
            })
            .expect("the logger thread starts");
        tx
    })
}

/// Hands `text` to the logger without waiting; dropped and counted when
/// the queue is full.
pub fn log(text: &str) {
    if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = queue().try_send(text.to_string()) {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
}

/// Chunks of log dropped so far.
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}
