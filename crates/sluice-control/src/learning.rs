//! bmv2's learning engine: digests as learning notifications for
//! controllers that read them over nanomsg (`--notifications-addr`) and
//! acknowledge them over Thrift.
//!
//! Contract. Takes: the samples `digest()` produced (one learn list id
//! and the field values of one call, big-endian, each field in
//! (width + 7) / 8 bytes); the Thrift learning calls (`bm_learning_ack`,
//! `bm_learning_ack_buffer`, `bm_learning_set_timeout`,
//! `bm_learning_set_buffer_size`). Gives: bmv2's `LEA|` messages to the
//! sink: a 32-byte header (`LEA|`, switch id u64, context id u32, list id
//! i32, buffer id u64, sample count u32, little-endian, packed) then the
//! samples' bytes back to back.
//!
//! Semantics, as bmv2's LearnEngine: per list a buffer of samples, sent
//! when it holds `buffer size` samples (16 by default) or when `timeout`
//! (1000 ms by default; 0: no timeout) has passed since its first sample;
//! each buffer sent gets the next buffer id of its list. A sample equal
//! to one sent or waiting and not acknowledged yet is dropped (the
//! filter), so a controller sees each new fact once; acknowledging a
//! buffer (or some samples of it, by their index in the buffer) lets
//! those samples through again. A program change forgets everything.
//!
//! Concurrency: one mutex around the lists; the data-plane side
//! ([`Learning::sample`]) and the Thrift side take it briefly. The sender
//! thread ([`Learning::run`]) feeds the samples in and waits on the event
//! channel until the next event or the earliest buffer deadline, without
//! a timeout when no buffer waits (a timeout changed meanwhile applies
//! from its next wake-up).

use std::collections::{HashMap, HashSet};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::device::Event;

/// bmv2's default buffer size (samples per message).
pub const DEFAULT_BUFFER_SIZE: usize = 16;
/// bmv2's default timeout: a buffer waits at most this long for more samples.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(1000);
/// Samples a list keeps in its filter (sent and not acknowledged) at most;
/// more are dropped and counted, so a controller that never acknowledges
/// cannot grow the switch's memory without bound.
pub const MAX_UNACKED: usize = 1 << 16;

/// bmv2's `LearnOperationErrorCode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LearnError {
    InvalidListId = 4,
}

/// Where `LEA|` and `AGE|` messages go: the notifications publisher, which
/// never blocks and bounds and counts what it drops itself.
pub type Sink = Box<dyn Fn(&[u8]) + Send + Sync>;

struct List {
    max_samples: usize,
    timeout: Duration,
    /// The buffer being filled, sample by sample.
    samples: Vec<Vec<u8>>,
    started: Instant,
    /// The id the buffer being filled will be sent with.
    buffer_id: u64,
    /// Samples waiting or sent and not acknowledged.
    filter: HashSet<Vec<u8>>,
    /// Buffer id -> its samples, until acknowledged.
    unacked: HashMap<u64, Vec<Option<Vec<u8>>>>,
}

impl List {
    fn new() -> List {
        List {
            max_samples: DEFAULT_BUFFER_SIZE,
            timeout: DEFAULT_TIMEOUT,
            samples: Vec::new(),
            started: Instant::now(),
            buffer_id: 0,
            filter: HashSet::new(),
            unacked: HashMap::new(),
        }
    }

    fn deadline(&self) -> Option<Instant> {
        (!self.samples.is_empty() && !self.timeout.is_zero()).then(|| self.started + self.timeout)
    }
}

#[derive(Default)]
struct Lists {
    /// Learn list id -> its state, for the lists of the program running.
    lists: HashMap<i32, List>,
}

/// Counters of the learning engine.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LearnStats {
    pub samples: u64,
    /// Dropped as repeats of samples not acknowledged yet.
    pub filtered: u64,
    pub messages: u64,
    /// Samples dropped because a list's filter was full.
    pub overflow: u64,
}

/// The learning engine of one switch (see the module documentation).
pub struct Learning {
    switch_id: u64,
    state: Mutex<(Lists, LearnStats)>,
    sink: Sink,
}

impl Learning {
    /// An engine for a program with learn lists `list_ids`, sending to `sink`.
    pub fn new(switch_id: u64, list_ids: &[u64], sink: Sink) -> Learning {
        let l = Learning { switch_id, state: Mutex::new(Default::default()), sink };
        l.set_program(list_ids);
        l
    }

    fn lock(&self) -> MutexGuard<'_, (Lists, LearnStats)> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new program: its learn lists, everything else forgotten.
    pub fn set_program(&self, list_ids: &[u64]) {
        let mut st = self.lock();
        st.0.lists = list_ids.iter().map(|id| (*id as i32, List::new())).collect();
    }

    /// One `digest()` call's values for list `list_id`.
    pub fn sample(&self, list_id: u64, values: &[Vec<u8>]) {
        let sample: Vec<u8> = values.concat();
        let mut guard = self.lock();
        let (lists, stats) = &mut *guard;
        let Some(list) = lists.lists.get_mut(&(list_id as i32)) else { return };
        stats.samples += 1;
        if list.filter.contains(&sample) {
            stats.filtered += 1;
            return;
        }
        if list.filter.len() >= MAX_UNACKED {
            stats.overflow += 1;
            return;
        }
        if list.samples.is_empty() {
            list.started = Instant::now();
        }
        list.filter.insert(sample.clone());
        list.samples.push(sample);
        if list.samples.len() >= list.max_samples {
            self.send(list_id as i32, list, stats);
        }
    }

    /// Sends list `id`'s buffer (not empty).
    fn send(&self, id: i32, list: &mut List, stats: &mut LearnStats) {
        let n = list.samples.len() as u32;
        let bytes: usize = list.samples.iter().map(Vec::len).sum();
        let mut msg = Vec::with_capacity(32 + bytes);
        msg.extend_from_slice(b"LEA|");
        msg.extend_from_slice(&self.switch_id.to_le_bytes());
        msg.extend_from_slice(&0u32.to_le_bytes());
        msg.extend_from_slice(&id.to_le_bytes());
        msg.extend_from_slice(&list.buffer_id.to_le_bytes());
        msg.extend_from_slice(&n.to_le_bytes());
        for s in &list.samples {
            msg.extend_from_slice(s);
        }
        let samples = std::mem::take(&mut list.samples).into_iter().map(Some).collect();
        list.unacked.insert(list.buffer_id, samples);
        list.buffer_id += 1;
        stats.messages += 1;
        (self.sink)(&msg);
    }

    /// Sends the buffers whose timeout has passed; returns the earliest
    /// deadline still ahead.
    fn send_due(&self, now: Instant) -> Option<Instant> {
        let mut guard = self.lock();
        let (lists, stats) = &mut *guard;
        let mut next: Option<Instant> = None;
        for (id, list) in lists.lists.iter_mut() {
            match list.deadline() {
                Some(d) if d <= now => self.send(*id, list, stats),
                Some(d) => next = Some(next.map_or(d, |n| n.min(d))),
                None => {}
            }
        }
        next
    }

    /// `bm_learning_ack_buffer`: every sample of buffer `buffer_id` may be learned again.
    pub fn ack_buffer(&self, list_id: i32, buffer_id: u64) -> Result<(), LearnError> {
        let mut st = self.lock();
        let list = st.0.lists.get_mut(&list_id).ok_or(LearnError::InvalidListId)?;
        if let Some(samples) = list.unacked.remove(&buffer_id) {
            for s in samples.into_iter().flatten() {
                list.filter.remove(&s);
            }
        }
        Ok(())
    }

    /// `bm_learning_ack`: the samples of buffer `buffer_id` at indices `sample_ids`.
    pub fn ack(&self, list_id: i32, buffer_id: u64, sample_ids: &[i32]) -> Result<(), LearnError> {
        let mut st = self.lock();
        let list = st.0.lists.get_mut(&list_id).ok_or(LearnError::InvalidListId)?;
        let Some(samples) = list.unacked.get_mut(&buffer_id) else { return Ok(()) };
        for i in sample_ids {
            if let Some(s) = usize::try_from(*i).ok().and_then(|i| samples.get_mut(i)).and_then(Option::take) {
                list.filter.remove(&s);
            }
        }
        if samples.iter().all(Option::is_none) {
            list.unacked.remove(&buffer_id);
        }
        Ok(())
    }

    /// `bm_learning_set_timeout` (milliseconds; 0: no timeout).
    pub fn set_timeout(&self, list_id: i32, ms: u32) -> Result<(), LearnError> {
        let mut st = self.lock();
        st.0.lists.get_mut(&list_id).ok_or(LearnError::InvalidListId)?.timeout = Duration::from_millis(ms.into());
        Ok(())
    }

    /// `bm_learning_set_buffer_size` (samples per message, at least 1).
    pub fn set_buffer_size(&self, list_id: i32, n: u32) -> Result<(), LearnError> {
        let mut guard = self.lock();
        let (lists, stats) = &mut *guard;
        let list = lists.lists.get_mut(&list_id).ok_or(LearnError::InvalidListId)?;
        list.max_samples = (n as usize).max(1);
        if list.samples.len() >= list.max_samples {
            self.send(list_id, list, stats);
        }
        Ok(())
    }

    /// Counters so far.
    pub fn stats(&self) -> LearnStats {
        self.lock().1
    }

    /// The sender: takes digests from `events` (other events are dropped:
    /// without a P4Runtime server nobody reads packet-ins) and sends the
    /// buffers as they fill or time out. Sleeps until the next event or
    /// deadline; ends when the data plane's side of `events` is gone.
    pub fn run(&self, events: Receiver<Event>) {
        let mut next: Option<Instant> = None;
        loop {
            let ev = match next {
                None => events.recv().map_err(|_| RecvTimeoutError::Disconnected),
                Some(d) => events.recv_timeout(d.saturating_duration_since(Instant::now())),
            };
            match ev {
                Ok(Event::Digest(d)) => self.sample(d.list_id, &d.values),
                Ok(Event::PacketIn(_)) => {}
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            next = self.send_due(Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn engine() -> (Learning, Arc<Mutex<Vec<Vec<u8>>>>) {
        let sent = Arc::new(Mutex::new(Vec::new()));
        let s = sent.clone();
        let l = Learning::new(7, &[1], Box::new(move |m| s.lock().unwrap().push(m.to_vec())));
        (l, sent)
    }

    fn header(m: &[u8]) -> (&[u8], u64, u32, i32, u64, u32) {
        (
            &m[0..4],
            u64::from_le_bytes(m[4..12].try_into().unwrap()),
            u32::from_le_bytes(m[12..16].try_into().unwrap()),
            i32::from_le_bytes(m[16..20].try_into().unwrap()),
            u64::from_le_bytes(m[20..28].try_into().unwrap()),
            u32::from_le_bytes(m[28..32].try_into().unwrap()),
        )
    }

    fn sample(mac: u8, port: u8) -> Vec<Vec<u8>> {
        vec![vec![0, 0, 0, 0, 0, mac], vec![0, port]]
    }

    #[test]
    fn a_full_buffer_goes_out_at_once_in_bmv2s_layout_and_repeats_wait_for_the_ack() {
        let (l, sent) = engine();
        l.set_buffer_size(1, 2).unwrap();
        l.sample(1, &sample(0xa, 1));
        l.sample(1, &sample(0xa, 1));
        assert!(sent.lock().unwrap().is_empty(), "one sample (and a repeat) of two");
        l.sample(1, &sample(0xb, 2));
        let m = sent.lock().unwrap()[0].clone();
        assert_eq!(header(&m), (&b"LEA|"[..], 7, 0, 1, 0, 2));
        assert_eq!(&m[32..], &[0, 0, 0, 0, 0, 0xa, 0, 1, 0, 0, 0, 0, 0, 0xb, 0, 2]);
        // Not acknowledged: the same facts are not sent again.
        l.sample(1, &sample(0xa, 1));
        l.sample(1, &sample(0xb, 2));
        assert_eq!(sent.lock().unwrap().len(), 1);
        assert_eq!(l.stats().filtered, 3);
        l.ack_buffer(1, 0).unwrap();
        l.sample(1, &sample(0xa, 1));
        l.sample(1, &sample(0xb, 2));
        let m = sent.lock().unwrap()[1].clone();
        assert_eq!(header(&m).4, 1, "the next buffer id");
        assert_eq!(l.ack_buffer(9, 0), Err(LearnError::InvalidListId));
        assert_eq!(l.set_timeout(9, 5), Err(LearnError::InvalidListId));
    }

    #[test]
    fn a_buffer_that_does_not_fill_goes_out_at_its_timeout_and_single_acks_free_single_samples() {
        let (l, sent) = engine();
        l.set_timeout(1, 20).unwrap();
        l.sample(1, &sample(1, 1));
        l.sample(1, &sample(2, 1));
        assert!(l.send_due(Instant::now()).is_some(), "a deadline ahead");
        assert!(sent.lock().unwrap().is_empty());
        std::thread::sleep(Duration::from_millis(25));
        assert!(l.send_due(Instant::now()).is_none());
        let m = sent.lock().unwrap()[0].clone();
        assert_eq!(header(&m).5, 2);
        l.ack(1, 0, &[1]).unwrap();
        l.sample(1, &sample(1, 1));
        l.sample(1, &sample(2, 1));
        assert_eq!(l.stats().filtered, 1, "sample 0 is still unacknowledged, sample 1 is free");
    }

    #[test]
    fn the_sender_thread_follows_the_events_and_ends_with_them() {
        let (l, sent) = engine();
        let l = Arc::new(l);
        l.set_timeout(1, 10).unwrap();
        let (tx, rx) = std::sync::mpsc::sync_channel(8);
        let t = {
            let l = l.clone();
            std::thread::spawn(move || l.run(rx))
        };
        let d = sluice_engine::runtime::Digest { list: "l".into(), list_id: 1, receiver: 1, values: sample(3, 4) };
        tx.send(Event::Digest(d)).unwrap();
        let t0 = Instant::now();
        while sent.lock().unwrap().is_empty() {
            assert!(t0.elapsed() < Duration::from_secs(60), "the timed-out buffer never went out");
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(tx);
        t.join().unwrap();
    }
}
