//! Lookup throughput of `TableState` for each lookup structure.
//!
//! - `exact`: one 48-bit exact field (a MAC table): one hash map.
//! - `lpm`: one 32-bit lpm field (an IPv4 route table): one hash map per prefix
//!   length, probed longest first, so a miss costs one probe per distinct length.
//! - `ternary`: three ternary fields (IPv4 src, IPv4 dst, protocol): tuple-space
//!   search (`Index::Tuples` in `tables.rs`, which replaced a priority-ordered
//!   linear scan): one hash probe per distinct mask until no remaining mask
//!   can beat the best match, so the cost follows the number of distinct masks
//!   (18 here) more than the number of entries.
//! - `range`: one 16-bit range field (an L4 port). Range fields carry no mask,
//!   so every entry lands in the same tuple and the same hash bucket: a lookup
//!   is still a linear scan over the entries in priority order (a miss checks
//!   all of them).
//!
//! Ternary and range are measured at 1, 100 and 1k entries (they were linear
//! scans when this benchmark was written); exact and lpm at 1, 1k and 1M.
//!
//! Each case looks keys up one at a time from a precomputed array of random
//! keys (65536 of them, so that large tables are not served from a few hot
//! cache lines), separately for keys that hit and keys that miss, and reports
//! lookups per second (`Throughput::Elements(1)` per lookup).
//!
//! Entries are generated so that misses are certain: the top bit of the first
//! key byte is 0 in every entry (and in its mask) and 1 in every miss key.
//!
//! `insert` measures the control-plane side: 100k entries added to an empty
//! exact or lpm table.
//!
//! Run: `cargo bench -p sluice-engine --bench tables` (add `-- --quick` for a fast pass).

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use criterion::{measurement::WallTime, BenchmarkId};
use sluice_engine::tables::{Entry, EntryAction, FieldMatch, KeyFieldSpec, MatchKind, TableError, TableState};

/// Number of precomputed lookup keys per case (a power of two).
const KEYS: usize = 1 << 16;

/// xorshift64*: deterministic, dependency-free randomness.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn entry(matches: Vec<FieldMatch>, priority: i32) -> Entry {
    Entry {
        matches,
        priority,
        action: EntryAction::Direct { action: 0, data: Box::new([]) },
        packets: 0,
        bytes: 0,
        timeout_ms: None,
    }
}

fn spec(kind: MatchKind, width: u32, off: usize, len: usize) -> KeyFieldSpec {
    KeyFieldSpec { kind, width, off, len }
}

/// Adds generated entries until the table holds `n`, skipping generated duplicates.
fn fill(t: &mut TableState, n: usize, mut gen: impl FnMut(usize) -> Entry) {
    let mut i = 0;
    while t.len() < n {
        match t.add(gen(i)) {
            Ok(_) | Err(TableError::DuplicateEntry(_)) => {}
            Err(e) => panic!("cannot fill table: {e}"),
        }
        i += 1;
    }
}

/// `KEYS` keys of `key_len` bytes laid out back to back.
fn key_array(key_len: usize, mut gen: impl FnMut(&mut [u8])) -> Vec<u8> {
    let mut out = vec![0u8; KEYS * key_len];
    for k in out.chunks_exact_mut(key_len) {
        gen(k);
    }
    out
}

/// Benchmarks hits then misses on one table; checks first that every key does what its name says.
fn bench_lookups(g: &mut BenchmarkGroup<'_, WallTime>, size: usize, t: &TableState, hits: &[u8], misses: &[u8]) {
    let len = t.key_len;
    assert!(hits.chunks_exact(len).all(|k| t.lookup(k).is_some()), "a hit key missed");
    assert!(misses.chunks_exact(len).all(|k| t.lookup(k).is_none()), "a miss key hit");
    for (name, keys) in [("hit", hits), ("miss", misses)] {
        g.bench_with_input(BenchmarkId::new(name, size), keys, |b, keys| {
            let mut i = 0usize;
            b.iter(|| {
                let k = &keys[i * len..(i + 1) * len];
                i = (i + 1) & (KEYS - 1);
                black_box(t.lookup(black_box(k)))
            })
        });
    }
}

/// Shorter runs for the big tables so the whole suite stays within a few minutes.
fn configure(g: &mut BenchmarkGroup<'_, WallTime>, size: usize) {
    if size >= 1_000_000 {
        g.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    } else {
        g.sample_size(50).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    }
}

fn exact(c: &mut Criterion) {
    let mut g = c.benchmark_group("table/exact48");
    g.throughput(Throughput::Elements(1));
    for size in [1usize, 1_000, 1_000_000] {
        configure(&mut g, size);
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ size as u64);
        let mut t = TableState::new(vec![spec(MatchKind::Exact, 48, 0, 6)], size);
        let mut keys: Vec<[u8; 6]> = Vec::with_capacity(size);
        fill(&mut t, size, |_| {
            let v = rng.next() & 0x7fff_ffff_ffff;
            let k: [u8; 6] = v.to_be_bytes()[2..].try_into().unwrap();
            keys.push(k);
            entry(vec![FieldMatch::Exact(k.to_vec())], 0)
        });
        let mut rng = Rng(42);
        let hits = key_array(6, |k| k.copy_from_slice(&keys[rng.below(keys.len() as u64) as usize]));
        let misses = key_array(6, |k| {
            let v = rng.next() | 0x8000_0000_0000;
            k.copy_from_slice(&v.to_be_bytes()[2..]);
        });
        bench_lookups(&mut g, size, &t, &hits, &misses);
    }
    g.finish();
}

fn lpm(c: &mut Criterion) {
    let mut g = c.benchmark_group("table/lpm32");
    g.throughput(Throughput::Elements(1));
    for size in [1usize, 1_000, 1_000_000] {
        configure(&mut g, size);
        let mut rng = Rng(0x51ed_270b_d3a1_99e5 ^ size as u64);
        let mut t = TableState::new(vec![spec(MatchKind::Lpm, 32, 0, 4)], size);
        let mut prefixes: Vec<(u32, u32)> = Vec::with_capacity(size);
        // A route-table-like mix of lengths: mostly /24, some shorter, a few host routes.
        fill(&mut t, size, |_| {
            let plen = match rng.below(100) {
                0 => 16,
                1..=4 => 20,
                5..=14 => 22,
                15..=94 => 24,
                _ => 32,
            };
            let addr = (rng.next() as u32 & 0x7fff_ffff) & (u32::MAX << (32 - plen));
            prefixes.push((addr, plen));
            entry(vec![FieldMatch::Lpm(addr.to_be_bytes().to_vec(), plen)], 0)
        });
        let mut rng = Rng(43);
        let hits = key_array(4, |k| {
            let (addr, plen) = prefixes[rng.below(prefixes.len() as u64) as usize];
            let host = if plen == 32 { 0 } else { rng.next() as u32 & (u32::MAX >> plen) };
            k.copy_from_slice(&(addr | host).to_be_bytes());
        });
        let misses = key_array(4, |k| k.copy_from_slice(&(rng.next() as u32 | 0x8000_0000).to_be_bytes()));
        bench_lookups(&mut g, size, &t, &hits, &misses);
    }
    g.finish();
}

fn ternary(c: &mut Criterion) {
    let mut g = c.benchmark_group("table/ternary3");
    g.throughput(Throughput::Elements(1));
    // Sizes kept from the linear-scan days: see the module comment.
    for size in [1usize, 100, 1_000] {
        configure(&mut g, size);
        let mut rng = Rng(0x2545_f491_4f6c_dd1d ^ size as u64);
        // IPv4 src, IPv4 dst, protocol: 9 key bytes.
        let key = vec![
            spec(MatchKind::Ternary, 32, 0, 4),
            spec(MatchKind::Ternary, 32, 4, 4),
            spec(MatchKind::Ternary, 8, 8, 1),
        ];
        let mut t = TableState::new(key, size);
        let mut rules: Vec<[u32; 6]> = Vec::with_capacity(size);
        fill(&mut t, size, |i| {
            // 3 x 3 x 2 = 18 distinct masks; no rule is broad enough to shadow most others.
            let sm = [0xffff_0000u32, 0xffff_ff00, 0xffff_ffff][rng.below(3) as usize];
            let dm = [0u32, 0xffff_ff00, 0xffff_ffff][rng.below(3) as usize];
            let pm = [0u32, 0xff][rng.below(2) as usize];
            let sv = rng.next() as u32 & 0x7fff_ffff & sm;
            let dv = rng.next() as u32 & dm;
            let pv = [6u32, 17][rng.below(2) as usize] & pm;
            rules.push([sv, sm, dv, dm, pv, pm]);
            entry(
                vec![
                    FieldMatch::Ternary(sv.to_be_bytes().to_vec(), sm.to_be_bytes().to_vec()),
                    FieldMatch::Ternary(dv.to_be_bytes().to_vec(), dm.to_be_bytes().to_vec()),
                    FieldMatch::Ternary(vec![pv as u8], vec![pm as u8]),
                ],
                i as i32,
            )
        });
        let mut rng = Rng(44);
        let hits = key_array(9, |k| {
            let [sv, sm, dv, dm, pv, pm] = rules[rng.below(rules.len() as u64) as usize];
            let r = rng.next();
            k[0..4].copy_from_slice(&(sv | (r as u32 & !sm)).to_be_bytes());
            k[4..8].copy_from_slice(&(dv | ((r >> 32) as u32 & !dm)).to_be_bytes());
            k[8] = (pv | (rng.next() as u32 & !pm)) as u8;
        });
        let misses = key_array(9, |k| {
            let r = rng.next();
            k[0..4].copy_from_slice(&(r as u32 | 0x8000_0000).to_be_bytes());
            k[4..8].copy_from_slice(&((r >> 32) as u32).to_be_bytes());
            k[8] = [6u8, 17][rng.below(2) as usize];
        });
        bench_lookups(&mut g, size, &t, &hits, &misses);
    }
    g.finish();
}

fn range(c: &mut Criterion) {
    let mut g = c.benchmark_group("table/range16");
    g.throughput(Throughput::Elements(1));
    // Linear scan (one tuple, one bucket): see the module comment.
    for size in [1usize, 100, 1_000] {
        configure(&mut g, size);
        let mut rng = Rng(0x6a09_e667_f3bc_c908 ^ size as u64);
        let mut t = TableState::new(vec![spec(MatchKind::Range, 16, 0, 2)], size);
        let mut ranges: Vec<(u16, u16)> = Vec::with_capacity(size);
        fill(&mut t, size, |i| {
            let lo = rng.below(0x8000) as u16;
            // Narrow ranges (up to 32 values) overlap little, so a hit scans about half the entries.
            let hi = (lo as u64 + rng.below(32)).min(0x7fff) as u16;
            ranges.push((lo, hi));
            entry(vec![FieldMatch::Range(lo.to_be_bytes().to_vec(), hi.to_be_bytes().to_vec())], i as i32)
        });
        let mut rng = Rng(45);
        let hits = key_array(2, |k| {
            let (lo, hi) = ranges[rng.below(ranges.len() as u64) as usize];
            let v = lo + rng.below((hi - lo) as u64 + 1) as u16;
            k.copy_from_slice(&v.to_be_bytes());
        });
        let misses = key_array(2, |k| k.copy_from_slice(&(rng.next() as u16 | 0x8000).to_be_bytes()));
        bench_lookups(&mut g, size, &t, &hits, &misses);
    }
    g.finish();
}

/// Control-plane insert rate: 100k entries into an empty table, through
/// `TableState::add` (what every control plane ends in; issue 4 asks for
/// >= 1M entries/s in process for exact and lpm tables).
fn inserts(c: &mut Criterion) {
    const N: usize = 100_000;
    let mut g = c.benchmark_group("table/insert");
    g.throughput(Throughput::Elements(N as u64));
    g.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    let mut rng = Rng(7);
    let exact_keys: Vec<Vec<u8>> =
        (0..N).map(|i| ((i as u64) << 8 | rng.below(256)).to_be_bytes()[2..].to_vec()).collect();
    let lpm_keys: Vec<Vec<u8>> = (0..N).map(|i| (((i as u32) << 8) | 0x0a00_0000).to_be_bytes().to_vec()).collect();
    for (name, kind, width, len, keys) in
        [("exact48", MatchKind::Exact, 48, 6, &exact_keys), ("lpm32", MatchKind::Lpm, 32, 4, &lpm_keys)]
    {
        g.bench_function(BenchmarkId::new(name, N), |b| {
            b.iter_batched(
                || {
                    let entries: Vec<Entry> = keys
                        .iter()
                        .map(|k| match kind {
                            MatchKind::Lpm => entry(vec![FieldMatch::Lpm(k.clone(), 24)], 0),
                            _ => entry(vec![FieldMatch::Exact(k.clone())], 0),
                        })
                        .collect();
                    (TableState::new(vec![spec(kind, width, 0, len)], N), entries)
                },
                |(mut t, entries)| {
                    for e in entries {
                        t.add(e).expect("distinct keys");
                    }
                    black_box(t)
                },
                criterion::BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, exact, lpm, ternary, range, inserts);
criterion_main!(benches);
