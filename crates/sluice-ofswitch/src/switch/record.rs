//! Recording walks for the flow cache and replaying them (see
//! [`crate::cache`]).
//!
//! Contract: reads a packet's cache key and the flow cache; writes the
//! flow cache (a recorded walk's steps and counts), its hit and miss
//! counts, and, on a replay, the packet as the steps say. A replayed
//! packet leaves by its recorded outputs (`send`), a forwarding step, or
//! the actions replayed (`actions.rs`). Before anything a walk depends on
//! changes, `forget_walks` folds the cache's pending counts into the
//! counters and empties it.

use super::counters::fold_counts;
use super::pipeline::Pkt;
use super::OfSwitch;
use crate::cache::{Count, Key, Op};
use crate::fields::FULL_LEN;

/// A walk being recorded (see [`crate::cache`]).
#[derive(Debug, Clone)]
pub(super) struct Recording {
    /// Steps of the walk, and of the group buckets being run (innermost last).
    pub(super) stack: Vec<Vec<Op>>,
    /// What the walk counts.
    pub(super) counts: Vec<Count>,
    /// Nothing happened that a replay could not repeat.
    pub(super) cacheable: bool,
    /// The actions being run are apply-actions (a drop by one counts).
    pub(super) apply: bool,
}

impl Recording {
    pub(super) fn push(&mut self, op: Op) {
        if let Some(top) = self.stack.last_mut() {
            top.push(op);
        }
    }
}

impl OfSwitch {
    /// Records a step of the walk being recorded, if any.
    #[inline]
    pub(super) fn rec(&mut self, op: impl FnOnce() -> Op) {
        if let Some(r) = &mut self.rec {
            r.push(op());
        }
    }

    /// Makes the walk being recorded, if any, one the cache must not keep.
    #[inline]
    pub(super) fn uncacheable(&mut self) {
        if let Some(r) = &mut self.rec {
            r.cacheable = false;
        }
    }

    /// Empties the flow cache, its pending counts folded into the
    /// counters first: call it before the tables, groups or meters change
    /// (while the entries the counts name still exist).
    pub(crate) fn forget_walks(&mut self) {
        let (tables, counters) = (&mut self.tables, &mut self.counters);
        self.cache.drain(|c, p, b| fold_counts(tables, counters, c, p, b));
    }

    /// Brings the flow cache's key layout, and the list of tables that
    /// run on the route-table template, up to date with the tables (both
    /// are recomputed after any change: every change empties the cache).
    #[inline]
    pub(super) fn cache_layout(&mut self) {
        if self.cache.needs_layout() {
            let mut union = [0u8; FULL_LEN];
            for t in &self.tables {
                union.iter_mut().zip(t.union_mask()).for_each(|(u, m)| *u |= m);
            }
            self.cache.set_layout(&union);
            self.prefix_tables =
                self.tables.iter().enumerate().filter(|(_, t)| t.runs_prefix()).map(|(i, _)| i as u8).collect();
        }
    }

    /// Replays the cached walk of `pkt` (of cache key `key`), or walks the
    /// tables and records the walk.
    pub(super) fn run_cached<E: FnMut(usize, u32, &[u8]) + ?Sized>(
        &mut self,
        idx: usize,
        pkt: &mut Pkt,
        key: Option<Key>,
        emit: &mut E,
    ) {
        let Some(key) = key.filter(|_| self.cache.in_use()) else {
            // No key (too wide a layout), or the cache is stepped aside.
            self.counters.cache_misses += 1;
            self.walk(idx, pkt, emit);
            return;
        };
        if let Some((i, forward)) = self.cache.lookup(&key, pkt.buf.len()) {
            self.counters.cache_hits += 1;
            if let Some(f) = forward {
                if self.forward(idx, pkt, &f, emit) {
                    return;
                }
            }
            let ops = self.cache.take_list(i);
            self.replay(idx, pkt, &ops, emit);
            self.cache.put_list(i, ops);
            return;
        }
        self.counters.cache_misses += 1;
        if !self.cache.should_record() {
            self.walk(idx, pkt, emit);
            return;
        }
        self.rec = Some(Recording { stack: vec![Vec::new()], counts: Vec::new(), cacheable: true, apply: false });
        self.walk(idx, pkt, emit);
        if let Some(mut r) = self.rec.take() {
            if let Some(ops) = r.stack.pop().filter(|_| r.cacheable) {
                let (tables, counters) = (&mut self.tables, &mut self.counters);
                self.cache.insert(&key, ops, r.counts, |c, p, b| fold_counts(tables, counters, c, p, b));
            }
        }
    }

    /// Replays a recorded walk (see [`crate::cache`]) on `pkt`; false when
    /// an action dropped it.
    fn replay<E: FnMut(usize, u32, &[u8]) + ?Sized>(
        &mut self,
        idx: usize,
        pkt: &mut Pkt,
        ops: &[Op],
        emit: &mut E,
    ) -> bool {
        for op in ops {
            match op {
                Op::Drop => self.stats.dropped += 1,
                Op::Metadata { value, mask } => {
                    pkt.meta.metadata = (pkt.meta.metadata & !mask) | (value & mask);
                    pkt.stale = true;
                }
                Op::SetEth { at, mac } => {
                    if let Some(b) = pkt.buf.get_mut(usize::from(*at)..usize::from(*at) + 6) {
                        b.copy_from_slice(mac);
                    }
                    pkt.stale = true;
                }
                Op::Output { port } => {
                    if *port != pkt.meta.in_port {
                        self.send(idx, *port, &pkt.buf, pkt.queue, emit);
                    }
                }
                Op::DecTtl { table, cookie, counted } => {
                    if self.dec_nw_ttl(pkt, *table, *cookie).is_err() {
                        if *counted {
                            self.stats.dropped += 1;
                        }
                        return false;
                    }
                }
                Op::Act { action, reason, table, cookie, counted } => {
                    let one = std::slice::from_ref(action);
                    if self.run_actions(idx, pkt, one, *reason, *table, *cookie, 0, emit).is_err() {
                        if *counted {
                            self.stats.dropped += 1;
                        }
                        return false;
                    }
                }
                Op::Group { runs } => {
                    if let ([steps], true) = (runs.as_slice(), std::ptr::eq(op, ops.last().expect("in ops"))) {
                        // The walk's last step and one bucket: nothing reads
                        // the packet after it, no copy needed.
                        self.replay(idx, pkt, steps, emit);
                        return true;
                    }
                    for steps in runs {
                        let mut copy = self.copy_of(pkt);
                        self.replay(idx, &mut copy, steps, emit);
                        self.spare.push(copy.buf);
                    }
                }
            }
        }
        true
    }
}
