//! bmv2's ageing monitor: idle-timeout notifications (`AGE|`) for
//! controllers that read them over nanomsg (`--notifications-addr`).
//!
//! Contract. Takes: the tables whose program asks for idle timeouts
//! (`support_timeout`), each entry's TTL (`bm_mt_set_entry_ttl`, the CLI's
//! `table_set_timeout`) and when the workers last saw it hit. Gives, at
//! every sweep (1 s apart, bmv2's default), per table, one `AGE|` message
//! listing the entries whose TTL has run out since their last hit (or,
//! never hit, since the monitor first saw them with that TTL) and that the
//! previous sweep did not list: a 32-byte header (`AGE|`, switch id u64,
//! context id i32 (0), buffer id u64 counting the messages from 0, table
//! id i32 (the program's), entry count u32; little-endian, packed), then
//! each entry handle as a u32. An entry listed stays quiet while it stays
//! idle; hit again, it may be listed once more when it next ages.
//!
//! Concurrency: one thread ([`Ageing::run`]) owns the monitor's state and
//! reads the switch through a pool session once per sweep (1 wake-up a
//! second); it holds the device weakly and ends once the device is gone.

use std::collections::{HashMap, HashSet};
use std::sync::Weak;
use std::time::{Duration, Instant};

use sluice_engine::Switch;

use crate::device::Device;
use crate::learning::Sink;

/// bmv2's default time between two sweeps.
pub const SWEEP_INTERVAL: Duration = Duration::from_millis(1000);

/// The monitor's state between sweeps.
pub struct Ageing {
    switch_id: u64,
    sink: Sink,
    buffer_id: u64,
    /// When each `(table, handle)` with a TTL was first seen, with that TTL
    /// (a new TTL starts the count again).
    seen: HashMap<(usize, u32), (Instant, u64)>,
    /// Per table, the handles the previous sweep listed.
    listed: HashMap<usize, HashSet<u32>>,
}

impl Ageing {
    pub fn new(switch_id: u64, sink: Sink) -> Ageing {
        Ageing { switch_id, sink, buffer_id: 0, seen: HashMap::new(), listed: HashMap::new() }
    }

    /// One sweep over `sw` at `now`, with `hits` the entries' last hits
    /// over all workers: sends the messages due; returns how many.
    pub fn sweep(&mut self, sw: &Switch, hits: &HashMap<(usize, u32), Instant>, now: Instant) -> usize {
        let mut sent = 0;
        let mut alive = HashSet::new();
        for (t, tp) in sw.program().tables.iter().enumerate() {
            if !tp.support_timeout {
                continue;
            }
            let mut aged = Vec::new();
            for (h, e) in sw.entries(t) {
                let Some(ttl) = e.timeout_ms else { continue };
                alive.insert((t, h));
                let since = self.seen.entry((t, h)).or_insert((now, ttl));
                if since.1 != ttl {
                    *since = (now, ttl);
                }
                let last = hits.get(&(t, h)).map_or(since.0, |hit| (*hit).max(since.0));
                if now.duration_since(last) >= Duration::from_millis(ttl) {
                    aged.push(h);
                }
            }
            let before = self.listed.remove(&t).unwrap_or_default();
            let new: Vec<u32> = aged.iter().copied().filter(|h| !before.contains(h)).collect();
            if !aged.is_empty() {
                self.listed.insert(t, aged.into_iter().collect());
            }
            if new.is_empty() {
                continue;
            }
            let msg = self.message(tp.id as i32, &new);
            self.buffer_id += 1;
            (self.sink)(&msg);
            sent += 1;
        }
        // Entries deleted (or whose TTL was taken away) are forgotten.
        self.seen.retain(|k, _| alive.contains(k));
        sent
    }

    fn message(&self, table_id: i32, handles: &[u32]) -> Vec<u8> {
        let mut m = Vec::with_capacity(32 + 4 * handles.len());
        m.extend_from_slice(b"AGE|");
        m.extend_from_slice(&self.switch_id.to_le_bytes());
        m.extend_from_slice(&0i32.to_le_bytes());
        m.extend_from_slice(&self.buffer_id.to_le_bytes());
        m.extend_from_slice(&table_id.to_le_bytes());
        m.extend_from_slice(&(handles.len() as u32).to_le_bytes());
        for h in handles {
            m.extend_from_slice(&h.to_le_bytes());
        }
        m
    }

    /// The sweeping thread's body: a sweep every [`SWEEP_INTERVAL`] while
    /// the program has a table with idle timeouts; ends with the device.
    pub fn run(mut self, device: Weak<Device>) {
        let mut next = Instant::now() + SWEEP_INTERVAL;
        loop {
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
            next += SWEEP_INTERVAL;
            let Some(device) = device.upgrade() else { return };
            let mut pool = device.pool();
            if !pool.view().program().tables.iter().any(|t| t.support_timeout) {
                continue;
            }
            let hits = crate::last_hits(&mut pool);
            self.sweep(pool.view(), &hits, Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_engine::runtime::{EntryAction, FieldMatch};
    use std::sync::{Arc, Mutex};

    /// The router example with its next-hop table asking for idle timeouts.
    fn switch() -> (Switch, usize) {
        let mut json = include_str!("../../../examples/router.json").to_string();
        let at = json.find("\"name\" : \"RouterIngress.nexthop\"").unwrap();
        let flag = "\"support_timeout\" : false";
        let at = at + json[at..].find(flag).unwrap();
        json.replace_range(at..at + flag.len(), "\"support_timeout\" : true");
        let mut sw = sluice_engine::load_switch(&json).unwrap();
        let t = sw.index_of(sluice_engine::runtime::Resource::Table, "RouterIngress.nexthop").unwrap();
        assert!(sw.program().tables[t].support_timeout);
        let drop = sw.program().tables[t].actions[1];
        for n in 1u16..=3 {
            let key = vec![FieldMatch::Exact(n.to_be_bytes().to_vec())];
            let h = sw.add_entry(t, key, EntryAction::Direct { action: drop, data: Box::new([]) }, 0).unwrap();
            if n != 3 {
                sw.set_entry_ttl(t, h, 500).unwrap();
            }
        }
        (sw, t)
    }

    #[test]
    fn aged_entries_are_listed_once_in_bmv2s_layout_until_hit_again() {
        let (sw, t) = switch();
        let got = Arc::new(Mutex::new(Vec::<Vec<u8>>::new()));
        let g = got.clone();
        let mut a = Ageing::new(7, Box::new(move |m| g.lock().unwrap().push(m.to_vec())));
        let t0 = Instant::now();
        let mut hits = HashMap::new();
        // First sight starts the count: nothing aged yet.
        assert_eq!(a.sweep(&sw, &hits, t0), 0);
        assert_eq!(a.sweep(&sw, &hits, t0 + Duration::from_millis(400)), 0);
        // Entry 1 was hit at 300 ms; entry 0 has been idle for its TTL.
        hits.insert((t, 1), t0 + Duration::from_millis(300));
        assert_eq!(a.sweep(&sw, &hits, t0 + Duration::from_millis(600)), 1);
        {
            let m = &got.lock().unwrap()[0];
            assert_eq!(m.len(), 32 + 4);
            assert_eq!(&m[..4], b"AGE|");
            assert_eq!(u64::from_le_bytes(m[4..12].try_into().unwrap()), 7);
            assert_eq!(i32::from_le_bytes(m[12..16].try_into().unwrap()), 0);
            assert_eq!(u64::from_le_bytes(m[16..24].try_into().unwrap()), 0);
            assert_eq!(i32::from_le_bytes(m[24..28].try_into().unwrap()), sw.program().tables[t].id as i32);
            assert_eq!(u32::from_le_bytes(m[28..32].try_into().unwrap()), 1);
            assert_eq!(u32::from_le_bytes(m[32..36].try_into().unwrap()), 0);
        }
        // Entry 0 stays idle: not listed again; entry 1 ages now (its TTL
        // after its hit), alone, in the next buffer. Entry 2 has no TTL.
        assert_eq!(a.sweep(&sw, &hits, t0 + Duration::from_millis(900)), 1);
        let m = got.lock().unwrap()[1].clone();
        assert_eq!(u64::from_le_bytes(m[16..24].try_into().unwrap()), 1);
        assert_eq!(&m[28..], &[1, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(a.sweep(&sw, &hits, t0 + Duration::from_millis(1200)), 0);
        // Hit again, then idle again: listed once more.
        hits.insert((t, 0), t0 + Duration::from_millis(1300));
        assert_eq!(a.sweep(&sw, &hits, t0 + Duration::from_millis(1400)), 0);
        assert_eq!(a.sweep(&sw, &hits, t0 + Duration::from_millis(1900)), 1);
        assert_eq!(&got.lock().unwrap()[2][28..], &[1, 0, 0, 0, 0, 0, 0, 0]);
    }
}
