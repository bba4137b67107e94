//! Direct-indexed longest-prefix match for keys of up to 32 bits, in the
//! DIR-24-8 style (Gupta, Lin and McKeown, "Routing lookups in hardware at
//! memory access speeds", 1998), with the memory hints the packet path
//! uses around it ([`advise_huge_pages`], [`prefetch`], [`prefetch_ptr`],
//! [`prefetch_headers`]).
//!
//! Contract:
//! - stores: routes `key/plen` of a fixed key width (1 to 32 bits), each
//!   with an entry index (at most [`MAX_INDEX`]) and a record id (a second
//!   `u32` below [`GROUP_BIT`], the owner's: the engine's hot record). It
//!   does not remember its routes: a remove needs the route's own entry
//!   index and the next shorter route covering it, which the owner keeps
//!   in a control-plane index of its own (the engine: one exact map per
//!   prefix length);
//! - lookup cost: one array read (two for prefixes longer than 24 bits)
//!   whatever the number of routes or prefix lengths, at an address known
//!   from the key alone, so a batch can prefetch it. Memory: two top-level
//!   arrays of `4 << min(width, 24)` bytes (128 MiB of address space from
//!   width 24 on, touched only where routes are), moved into huge pages
//!   when the owner says the table is large ([`DirLpm::use_huge_pages`]),
//!   plus an extension group of `2^(width - 24)` slots in each array per
//!   top slot that longer prefixes split. Updates cost the slots a prefix
//!   covers: `2^(24 - plen)` top slots for a short prefix;
//! - concurrency: mutation takes `&mut self`. Readers through
//!   [`DirLpm::raw_parts`] (generated code) hold raw pointers that a
//!   change may invalidate (extension groups grow): the owner rebuilds
//!   them after every change and never changes the structure while such a
//!   reader runs. Clones are deep (the engine shares one behind an `Arc`
//!   copy-on-write between worker replicas).
//!
//! Why: probing one hash map per prefix length costs a hash and a probe per
//! length present, and with a million routes each probe is a cache miss.
//!
//! The top `min(width, 24)` bits of the key index `top`; a slot there holds
//! no route (0), a route (`entry index + 1` with its prefix length in bits
//! 24..30), or `GROUP | g`: the remaining (at most 8) bits index extension
//! group `g` in `ext`. Updates paint the slots a prefix covers, leaving alone
//! slots that a longer prefix already owns; a delete repaints its slots with
//! the next shorter covering route.
//!
//! A second pair of arrays of the same shape, `rtop` and `rext`, holds the
//! record id of the route in each slot instead of its entry index.
//! Generated code reads only those: slot, then record, with no load of the
//! entry's record id in between (route tables share a few dozen records,
//! so the record is in cache).

/// Marks a slot of `top` that points to an extension group.
const GROUP: u32 = 1 << 31;
/// The bit of a top-level slot that marks a pointer to an extension group,
/// for compiled lookups.
pub const GROUP_BIT: u32 = GROUP;
/// Entry indexes must fit in the low 24 bits of a slot (plus one).
pub const MAX_INDEX: u32 = (1 << 24) - 2;

/// The direct-indexed LPM structure of one table.
#[derive(Debug)]
pub struct DirLpm {
    width: u32,
    low_bits: u32,
    top: Vec<u32>,
    ext: Vec<u32>,
    /// `top` and `ext` with record ids where they hold entry values (0: none).
    rtop: Vec<u32>,
    rext: Vec<u32>,
    free_groups: Vec<u32>,
    /// The top level is advised into huge pages ([`DirLpm::use_huge_pages`]).
    huge: bool,
}

/// Advises a top-level array, before anything in it is written, into huge
/// pages (`huge`) or onto small ones.
fn advise_top(v: &[u32], huge: bool) {
    if huge {
        crate::mem::advise_huge_pages(v);
    } else {
        crate::mem::advise_small_pages(v);
    }
}

/// A copy of a top-level array, advised into huge pages (`huge`) or kept
/// on small ones before anything in it is written: the kernel backs a
/// 2 MiB stretch with a huge page only while nothing in it was written.
/// Only the stretches holding routes are written; the rest stay untouched
/// zero pages.
fn copy_top(from: &[u32], huge: bool) -> Vec<u32> {
    let mut v = vec![0; from.len()];
    advise_top(&v, huge);
    for (chunk, src) in v.chunks_mut(1024).zip(from.chunks(1024)) {
        if src.iter().any(|x| *x != 0) {
            chunk.copy_from_slice(src);
        }
    }
    v
}

impl Clone for DirLpm {
    /// A copy whose top level is advised into huge pages too.
    fn clone(&self) -> DirLpm {
        let copy = |from: &[u32]| copy_top(from, self.huge);
        DirLpm {
            width: self.width,
            low_bits: self.low_bits,
            top: copy(&self.top),
            ext: self.ext.clone(),
            rtop: copy(&self.rtop),
            rext: self.rext.clone(),
            free_groups: self.free_groups.clone(),
            huge: self.huge,
        }
    }
}

#[inline(always)]
fn depth(slot: u32) -> u32 {
    (slot >> 24) & 0x3f
}

/// Whether a route of prefix length `plen` may overwrite `slot`.
#[inline(always)]
fn yields(slot: u32, plen: u32) -> bool {
    slot == 0 || depth(slot) <= plen
}

impl DirLpm {
    /// An empty structure for keys of `width` bits (1..=32), its top level
    /// on small pages until [`DirLpm::use_huge_pages`].
    pub fn new(width: u32) -> DirLpm {
        Self::with_pages(width, false)
    }

    /// An empty structure whose top level is advised into huge pages from
    /// the start, for a table known to be large (see
    /// [`DirLpm::use_huge_pages`]).
    pub fn new_huge(width: u32) -> DirLpm {
        Self::with_pages(width, true)
    }

    fn with_pages(width: u32, huge: bool) -> DirLpm {
        assert!((1..=32).contains(&width), "DirLpm keys are 1 to 32 bits wide");
        let top_bits = width.min(24);
        let d = DirLpm {
            width,
            low_bits: width - top_bits,
            top: vec![0; 1 << top_bits],
            ext: Vec::new(),
            rtop: vec![0; 1 << top_bits],
            rext: Vec::new(),
            free_groups: Vec::new(),
            huge,
        };
        // Small pages unless the owner says the table is large (the
        // program's allocator may advise huge pages for every big block).
        advise_top(&d.top, huge);
        advise_top(&d.rtop, huge);
        d
    }

    /// Moves the top level into huge pages (a large table: fewer TLB
    /// misses). Not done for a small one: one route's slot would fault in
    /// 2 MiB. The kernel backs a 2 MiB stretch with a huge page only while
    /// nothing in it was written, and a table that grows large already
    /// holds routes in most stretches, so the top level is copied into
    /// arrays advised before anything is written (once, when the owner
    /// says the table is large; raw pointers from [`DirLpm::raw_parts`]
    /// taken before are stale after it). Copies keep the advice. Why: at
    /// 10 000 routes spread over the address space every lookup's slot
    /// is on a page of its own, and on 4 KiB pages the slot prefetches
    /// waited for page walks (router, 64 B, one worker, `bench/ab.sh`,
    /// three alternating 2 s turns: 1.13x at 10 000 and at a million
    /// routes).
    pub fn use_huge_pages(&mut self) {
        if !self.huge {
            self.top = copy_top(&self.top, true);
            self.rtop = copy_top(&self.rtop, true);
            self.huge = true;
        }
    }

    fn group_len(&self) -> usize {
        1 << self.low_bits
    }

    fn value(idx: u32, plen: u32) -> u32 {
        (idx + 1) | (plen << 24)
    }

    /// Adds route `key/plen` (key right-aligned, bits below the prefix zero)
    /// for entry `idx` with hot record `record`: it takes every covered
    /// slot no longer prefix owns.
    pub fn insert(&mut self, key: u32, plen: u32, idx: u32, record: u32) {
        debug_assert!(idx <= MAX_INDEX && plen <= self.width && record & GROUP == 0);
        let val = Self::value(idx, plen);
        self.for_covered(key, plen, true, |e, r| {
            if yields(*e, plen) {
                *e = val;
                *r = record;
            }
        });
    }

    /// Gives route `key/plen` of entry `idx` the hot record `record` in
    /// every slot it owns (after its action changed).
    pub fn set_record(&mut self, key: u32, plen: u32, idx: u32, record: u32) {
        let val = Self::value(idx, plen);
        self.for_covered(key, plen, false, |e, r| {
            if *e == val {
                *r = record;
            }
        });
    }

    /// Calls `f(slot, record slot)` on every slot route `key/plen` covers:
    /// top slots, or the slots of the extension groups under them, or for
    /// a prefix longer than the top bits its range in its group (made when
    /// `make_group`; without a group such a prefix covers nothing). Returns
    /// the top slot and group of a long prefix.
    fn for_covered(
        &mut self,
        key: u32,
        plen: u32,
        make_group: bool,
        mut f: impl FnMut(&mut u32, &mut u32),
    ) -> Option<(usize, usize)> {
        let top_bits = self.width - self.low_bits;
        let gl = self.group_len();
        if plen <= top_bits {
            let first = (key >> self.low_bits) as usize;
            for s in first..first + (1usize << (top_bits - plen)) {
                let cur = self.top[s];
                if cur & GROUP != 0 {
                    let g = (cur & !GROUP) as usize * gl;
                    self.ext[g..g + gl].iter_mut().zip(&mut self.rext[g..g + gl]).for_each(|(e, r)| f(e, r));
                } else {
                    f(&mut self.top[s], &mut self.rtop[s]);
                }
            }
            return None;
        }
        let s = (key >> self.low_bits) as usize;
        let g = if make_group {
            self.group_of(s)
        } else if self.top[s] & GROUP != 0 {
            (self.top[s] & !GROUP) as usize
        } else {
            return None;
        };
        let first = g * gl + (key as usize & (gl - 1));
        let range = first..first + (1usize << (self.width - plen));
        self.ext[range.clone()].iter_mut().zip(&mut self.rext[range]).for_each(|(e, r)| f(e, r));
        Some((s, g))
    }

    /// The extension group of top slot `s`, made from the slot's route if it has none.
    fn group_of(&mut self, s: usize) -> usize {
        let cur = self.top[s];
        if cur & GROUP != 0 {
            return (cur & !GROUP) as usize;
        }
        let rcur = self.rtop[s];
        let gl = self.group_len();
        let g = match self.free_groups.pop() {
            Some(g) => {
                self.ext[g as usize * gl..(g as usize + 1) * gl].fill(cur);
                self.rext[g as usize * gl..(g as usize + 1) * gl].fill(rcur);
                g as usize
            }
            None => {
                self.ext.extend(std::iter::repeat_n(cur, gl));
                self.rext.extend(std::iter::repeat_n(rcur, gl));
                self.ext.len() / gl - 1
            }
        };
        self.top[s] = GROUP | g as u32;
        self.rtop[s] = GROUP | g as u32;
        g
    }

    /// Removes route `key/plen` of entry `idx`; its slots go to `cover`, the
    /// longest shorter route that covers it (`(entry index, prefix length,
    /// hot record)`), if any.
    pub fn remove(&mut self, key: u32, plen: u32, idx: u32, cover: Option<(u32, u32, u32)>) {
        let val = Self::value(idx, plen);
        let (repl, rrepl) = cover.map_or((0, 0), |(i, l, r)| (Self::value(i, l), r));
        let long = self.for_covered(key, plen, false, |e, r| {
            if *e == val {
                *e = repl;
                *r = rrepl;
            }
        });
        // A group whose slots all agree again folds back into its top slot
        // (equal entry values have equal records).
        if let Some((s, g)) = long {
            let gl = self.group_len();
            let group = &self.ext[g * gl..(g + 1) * gl];
            if group.iter().all(|e| *e == group[0]) {
                self.top[s] = group[0];
                self.rtop[s] = self.rext[g * gl];
                self.free_groups.push(g as u32);
            }
        }
    }

    /// The entry index of the longest prefix matching `key`.
    #[inline(always)]
    pub fn lookup(&self, key: u32) -> Option<u32> {
        let v = self.slot(&self.top, &self.ext, key);
        (v != 0).then(|| (v & 0x00ff_ffff) - 1)
    }

    /// The slot `key` ends at in `top` (or its extension group in `ext`):
    /// the entry arrays or the record arrays.
    #[inline(always)]
    fn slot(&self, top: &[u32], ext: &[u32], key: u32) -> u32 {
        let v = top[(key >> self.low_bits) as usize];
        if v & GROUP == 0 {
            return v;
        }
        ext[((v & !GROUP) << self.low_bits | (key & ((1 << self.low_bits) - 1))) as usize]
    }

    /// The hot record id of the longest prefix matching `key` (0: none).
    #[inline(always)]
    pub fn record(&self, key: u32) -> u32 {
        self.slot(&self.rtop, &self.rext, key)
    }

    /// `(top level, extension groups, low bits)` of the record arrays for
    /// compiled lookups (the engine's `tables::TableView`); a slot with
    /// [`GROUP_BIT`] set points to a group, any other holds a record id.
    pub fn raw_parts(&self) -> (*const u32, *const u32, u32) {
        (self.rtop.as_ptr(), self.rext.as_ptr(), self.low_bits)
    }

    /// The top-level slots lookups read first: the record slots compiled
    /// lookups read when `records`, else the entry slots.
    #[inline]
    pub fn slots(&self, records: bool) -> SlotPrefetch<'_> {
        SlotPrefetch { slots: if records { &self.rtop } else { &self.top }, low_bits: self.low_bits }
    }

    /// Asks the CPU to start loading the slot `key` needs: the record slot
    /// compiled lookups read when `records`, else the entry slot (a hint; no
    /// effect on results).
    #[inline(always)]
    pub fn prefetch(&self, key: u32, records: bool) {
        self.slots(records).prefetch(key);
    }
}

/// A [`DirLpm`]'s top-level slots, for prefetching many keys' slots
/// without looking the table up per key.
#[derive(Clone, Copy)]
pub struct SlotPrefetch<'a> {
    slots: &'a [u32],
    low_bits: u32,
}

impl<'a> SlotPrefetch<'a> {
    /// The slots, and how many low bits of a key a slot covers.
    pub fn parts(&self) -> (&'a [u32], u32) {
        (self.slots, self.low_bits)
    }

    /// Prefetches the slot a lookup of `key` reads first.
    #[inline]
    pub fn prefetch(&self, key: u32) {
        if let Some(s) = self.slots.get((key >> self.low_bits) as usize) {
            prefetch(s);
        }
    }
}

/// Asks the CPU to start loading the cache line of `p` (a hint; no effect on results).
#[inline(always)]
pub fn prefetch<T>(p: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch never faults and has no architectural effect; the pointer comes from a reference.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const T as *const i8, std::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// [`prefetch`] of any address, even one past an allocation or dangling
/// (for an empty packet): prefetching never faults, so no check is needed.
#[inline(always)]
pub fn prefetch_ptr(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch never faults and has no architectural effect, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Starts loading the cache lines of a packet's first 64 bytes (where its
/// headers are): the first byte's line and the one holding byte 63 (or the
/// last); a prefetch never faults, so no branch for an empty packet.
#[inline(always)]
pub fn prefetch_headers(data: &[u8]) {
    let p = data.as_ptr();
    prefetch_ptr(p);
    prefetch_ptr(p.wrapping_add(data.len().min(64).saturating_sub(1)));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Longest match by brute force over `(key, plen, idx)` routes.
    fn brute(routes: &[(u32, u32, u32)], width: u32, k: u32) -> Option<u32> {
        routes
            .iter()
            .filter(|(key, plen, _)| *plen == 0 || (k >> (width - plen)) == (key >> (width - plen)))
            .max_by_key(|r| r.1)
            .map(|r| r.2)
    }

    fn prefix(width: u32, v: u32, plen: u32) -> u32 {
        if plen == 0 {
            0
        } else {
            v & (u32::MAX >> (32 - width)) & !((1u64 << (width - plen)) as u32).wrapping_sub(1)
        }
    }

    #[test]
    fn matches_brute_force_through_inserts_and_deletes() {
        for width in [12u32, 28, 32] {
            let mut rnd = crate::test_rng(0x9e37_79b9 ^ width);
            let mut d = DirLpm::new(width);
            let mut routes: Vec<(u32, u32, u32)> = Vec::new();
            // Keys concentrated on a few top slots so prefixes overlap and groups are shared.
            let base = rnd() & !0xfff;
            // Record ids: a few shared values, as route tables share next hops.
            let mut records: Vec<u32> = Vec::new();
            for idx in 0..300u32 {
                if idx == 150 {
                    // The top level moves into fresh (huge-page) arrays halfway.
                    d.use_huge_pages();
                }
                records.push(1 + rnd() % 5);
                let plen = rnd() % (width + 1);
                let key = prefix(width, (base ^ (rnd() & 0xfff)) >> (32 - width), plen);
                if routes.iter().any(|r| r.0 == key && r.1 == plen) {
                    continue;
                }
                d.insert(key, plen, idx, records[idx as usize]);
                routes.push((key, plen, idx));
                if rnd().is_multiple_of(3) {
                    let r = routes.remove(rnd() as usize % routes.len());
                    let cover = routes
                        .iter()
                        .filter(|c| c.1 < r.1 && (c.1 == 0 || (r.0 >> (width - c.1)) == (c.0 >> (width - c.1))))
                        .max_by_key(|c| c.1)
                        .map(|c| (c.2, c.1, records[c.2 as usize]));
                    d.remove(r.0, r.1, r.2, cover);
                }
                if rnd().is_multiple_of(4) {
                    // An action change: the route keeps its slots, its record changes.
                    let r = routes[rnd() as usize % routes.len()];
                    records[r.2 as usize] = 1 + rnd() % 5;
                    d.set_record(r.0, r.1, r.2, records[r.2 as usize]);
                }
                for _ in 0..20 {
                    let k = ((base ^ (rnd() & 0xfff)) >> (32 - width)) ^ (rnd() & 1);
                    let want = brute(&routes, width, k);
                    assert_eq!(d.lookup(k), want, "width {width}, key {k:#x}");
                    assert_eq!(d.record(k), want.map_or(0, |i| records[i as usize]), "record, key {k:#x}");
                }
            }
        }
    }
}
