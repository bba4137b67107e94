//! The workers' packet-ins on their way to the agent: a bounded channel
//! and a wake-up of the agent's poll.
//!
//! Concurrency invariants (this file owns them): a worker never blocks: a
//! note that finds the channel full is refused (the worker counts it as
//! dropped); the agent's poll is woken once per batch of notes, not per
//! note: the first note after the agent last looked wakes it (a flag the
//! agent clears before it drains the channel, so a note sent while it
//! drains wakes it again).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, OnceLock};

use sluice_live::{Up, UpSink};
use sluice_ofswitch::Note;

/// Packet-ins that may wait for the agent.
pub const NOTE_QUEUE: usize = 8192;

struct Wake {
    waker: OnceLock<mio::Waker>,
    pending: AtomicBool,
}

/// The agent's end of the channel.
pub struct Notes {
    rx: Receiver<Note>,
    wake: Arc<Wake>,
}

/// The workers' end (for `sluice_live::start`) and the agent's.
pub fn packet_in_channel() -> (UpSink<Note>, Notes) {
    let (tx, rx) = sync_channel::<Note>(NOTE_QUEUE);
    let wake = Arc::new(Wake { waker: OnceLock::new(), pending: AtomicBool::new(false) });
    let w = wake.clone();
    let sink: UpSink<Note> = Arc::new(move |u: Up<Note>| match u {
        Up::Notification(n) => {
            let taken = tx.try_send(n).is_ok();
            if taken && !w.pending.swap(true, Ordering::AcqRel) {
                if let Some(waker) = w.waker.get() {
                    let _ = waker.wake();
                }
            }
            taken
        }
        // The OpenFlow switch has no CPU port: its packet-ins are notes.
        Up::PacketIn(_) => true,
    });
    (sink, Notes { rx, wake })
}

impl Notes {
    /// Wakes `waker` when notes arrive (the agent's poll).
    pub(crate) fn wake_with(&self, waker: mio::Waker) {
        let _ = self.wake.waker.set(waker);
    }

    /// Re-arms the wake-up: a note sent from now on wakes the agent
    /// again. Called before draining.
    pub(crate) fn arm(&self) {
        self.wake.pending.store(false, Ordering::Release);
    }

    /// The next note waiting, if any.
    pub(crate) fn next(&self) -> Option<Note> {
        self.rx.try_recv().ok()
    }
}
