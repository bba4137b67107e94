//! Lookup throughput of each lookup structure, alone (the engine's match
//! tables add key building, handles and hot records on top).
//!
//! - `exact48`: an `exact::OpenMap` of 48-bit keys (a MAC table): a
//!   multiplication and a linear probe of 16-byte slots.
//! - `lpm32`: an `lpm::DirLpm` of 32-bit keys (an IPv4 route table, mostly
//!   /24s): one array read, two for the few prefixes longer than 24 bits.
//! - `ternary3`: a `classifier::Classifier` of three ternary fields (IPv4
//!   src, IPv4 dst, protocol; 18 distinct masks): up to 32 rules a scan,
//!   above that tuple-space search, one hash probe per tuple until no
//!   remaining tuple can beat the best match, so the cost follows the
//!   number of distinct masks more than the number of rules.
//! - `range16`: a classifier of one 16-bit range field (an L4 port; narrow
//!   ranges): each range is hashed on the leading bits its bounds share, so
//!   rules spread over a few tuples and many buckets, and a bucket hit
//!   checks the bounds of its few rules.
//!
//! Ternary and range are measured at 1, 100 and 1k rules (plain lookups,
//! without the lookup cache: every key here is random); exact and lpm at
//! 1, 1k and 1M.
//!
//! Each case looks keys up one at a time from a precomputed array of random
//! keys (65536 of them, so that large tables are not served from a few hot
//! cache lines), separately for keys that hit and keys that miss, and reports
//! lookups per second (`Throughput::Elements(1)` per lookup).
//!
//! Entries are generated so that misses are certain: the top bit of the
//! key (its first byte) is 0 in every entry (and in its mask) and 1 in every
//! miss key.
//!
//! `insert` measures the control-plane side: 100k entries added to an empty
//! exact map or LPM structure, 10k rules to an empty classifier.
//!
//! Run: `cargo bench -p sluice-lookup` (add `-- --quick` for a fast pass).

use std::collections::HashSet;
use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use criterion::{measurement::WallTime, BenchmarkId};
use sluice_lookup::classifier::{Classifier, Rule};
use sluice_lookup::exact::OpenMap;
use sluice_lookup::lpm::DirLpm;

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

/// `KEYS` keys made by `gen`.
fn key_array<K>(mut gen: impl FnMut() -> K) -> Vec<K> {
    (0..KEYS).map(|_| gen()).collect()
}

/// Benchmarks hits then misses of one structure's `lookup`; checks first
/// that every key does what its name says.
fn bench_lookups<K>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    size: usize,
    hits: &[K],
    misses: &[K],
    lookup: impl Fn(&K) -> Option<u32>,
) {
    assert!(hits.iter().all(|k| lookup(k).is_some()), "a hit key missed");
    assert!(misses.iter().all(|k| lookup(k).is_none()), "a miss key hit");
    for (name, keys) in [("hit", hits), ("miss", misses)] {
        g.bench_with_input(BenchmarkId::new(name, size), keys, |b, keys| {
            let mut i = 0usize;
            b.iter(|| {
                let k = &keys[i];
                i = (i + 1) & (KEYS - 1);
                black_box(lookup(black_box(k)))
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
    let mut g = c.benchmark_group("exact48");
    g.throughput(Throughput::Elements(1));
    for size in [1usize, 1_000, 1_000_000] {
        configure(&mut g, size);
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ size as u64);
        let mut m = OpenMap::default();
        let mut keys: Vec<u64> = Vec::with_capacity(size);
        while m.len() < size {
            let k = rng.next() & 0x7fff_ffff_ffff;
            if m.insert(k, m.len() as u32).is_none() {
                keys.push(k);
            }
        }
        let mut rng = Rng(42);
        let hits = key_array(|| keys[rng.below(keys.len() as u64) as usize]);
        let misses = key_array(|| (rng.next() | 0x8000_0000_0000) & 0xffff_ffff_ffff);
        bench_lookups(&mut g, size, &hits, &misses, |k| m.get(*k));
    }
    g.finish();
}

fn lpm(c: &mut Criterion) {
    let mut g = c.benchmark_group("lpm32");
    g.throughput(Throughput::Elements(1));
    for size in [1usize, 1_000, 1_000_000] {
        configure(&mut g, size);
        let mut rng = Rng(0x51ed_270b_d3a1_99e5 ^ size as u64);
        let mut d = DirLpm::new(32);
        let mut prefixes: Vec<(u32, u32)> = Vec::with_capacity(size);
        let mut seen = HashSet::new();
        // A route-table-like mix of lengths: mostly /24, some shorter, a few host routes.
        while prefixes.len() < size {
            let plen = match rng.below(100) {
                0 => 16,
                1..=4 => 20,
                5..=14 => 22,
                15..=94 => 24,
                _ => 32,
            };
            let addr = (rng.next() as u32 & 0x7fff_ffff) & (u32::MAX << (32 - plen));
            if seen.insert((addr, plen)) {
                d.insert(addr, plen, prefixes.len() as u32, 1);
                prefixes.push((addr, plen));
            }
        }
        let mut rng = Rng(43);
        let hits = key_array(|| {
            let (addr, plen) = prefixes[rng.below(prefixes.len() as u64) as usize];
            let host = if plen == 32 { 0 } else { rng.next() as u32 & (u32::MAX >> plen) };
            addr | host
        });
        let misses = key_array(|| rng.next() as u32 | 0x8000_0000);
        bench_lookups(&mut g, size, &hits, &misses, |k| d.lookup(*k));
    }
    g.finish();
}

/// Adds generated rules until the classifier holds `n`, skipping generated duplicates.
fn fill(c: &mut Classifier, n: usize, mut gen: impl FnMut(u32) -> (i32, Rule)) {
    let mut id = 0;
    while c.len() < n {
        let (priority, rule) = gen(id);
        if c.find(priority, &rule).is_none() {
            c.insert(id, priority, rule);
        }
        id += 1;
    }
}

/// One of 18 masks over (IPv4 src, IPv4 dst, protocol) and a value under it
/// whose top bit is 0: `[src, src mask, dst, dst mask, proto, proto mask]`.
fn ternary_rule(rng: &mut Rng) -> [u32; 6] {
    // 3 x 3 x 2 = 18 distinct masks; no rule is broad enough to shadow most others.
    let sm = [0xffff_0000u32, 0xffff_ff00, 0xffff_ffff][rng.below(3) as usize];
    let dm = [0u32, 0xffff_ff00, 0xffff_ffff][rng.below(3) as usize];
    let pm = [0u32, 0xff][rng.below(2) as usize];
    let sv = rng.next() as u32 & 0x7fff_ffff & sm;
    let dv = rng.next() as u32 & dm;
    let pv = [6u32, 17][rng.below(2) as usize] & pm;
    [sv, sm, dv, dm, pv, pm]
}

/// The 9-byte key bytes of `(src, dst, proto)`.
fn ternary_bytes(s: u32, d: u32, p: u8) -> Vec<u8> {
    let mut k = Vec::with_capacity(9);
    k.extend_from_slice(&s.to_be_bytes());
    k.extend_from_slice(&d.to_be_bytes());
    k.push(p);
    k
}

fn ternary(c: &mut Criterion) {
    let mut g = c.benchmark_group("ternary3");
    g.throughput(Throughput::Elements(1));
    for size in [1usize, 100, 1_000] {
        configure(&mut g, size);
        let mut rng = Rng(0x2545_f491_4f6c_dd1d ^ size as u64);
        let mut cl = Classifier::new(9);
        let mut rules: Vec<[u32; 6]> = Vec::with_capacity(size);
        fill(&mut cl, size, |i| {
            let r = ternary_rule(&mut rng);
            let [sv, sm, dv, dm, pv, pm] = r;
            rules.push(r);
            (i as i32, Rule::new(ternary_bytes(sv, dv, pv as u8), ternary_bytes(sm, dm, pm as u8)))
        });
        let mut rng = Rng(44);
        let hits = key_array(|| {
            let [sv, sm, dv, dm, pv, pm] = rules[rng.below(rules.len() as u64) as usize];
            let r = rng.next();
            let p = (pv | (rng.next() as u32 & !pm)) as u8;
            ternary_bytes(sv | (r as u32 & !sm), dv | ((r >> 32) as u32 & !dm), p)
        });
        let misses = key_array(|| {
            let r = rng.next();
            ternary_bytes(r as u32 | 0x8000_0000, (r >> 32) as u32, [6u8, 17][rng.below(2) as usize])
        });
        bench_lookups(&mut g, size, &hits, &misses, |k| cl.lookup(k));
    }
    g.finish();
}

fn range(c: &mut Criterion) {
    let mut g = c.benchmark_group("range16");
    g.throughput(Throughput::Elements(1));
    for size in [1usize, 100, 1_000] {
        configure(&mut g, size);
        let mut rng = Rng(0x6a09_e667_f3bc_c908 ^ size as u64);
        let mut cl = Classifier::new(2);
        let mut ranges: Vec<(u16, u16)> = Vec::with_capacity(size);
        fill(&mut cl, size, |i| {
            let lo = rng.below(0x8000) as u16;
            // Narrow ranges (up to 32 values) overlap little.
            let hi = (lo as u64 + rng.below(32)).min(0x7fff) as u16;
            ranges.push((lo, hi));
            let mut rule = Rule::any(2);
            rule.add_range(0, lo.to_be_bytes().to_vec(), hi.to_be_bytes().to_vec());
            (i as i32, rule)
        });
        let mut rng = Rng(45);
        let hits = key_array(|| {
            let (lo, hi) = ranges[rng.below(ranges.len() as u64) as usize];
            (lo + rng.below((hi - lo) as u64 + 1) as u16).to_be_bytes()
        });
        let misses = key_array(|| (rng.next() as u16 | 0x8000).to_be_bytes());
        bench_lookups(&mut g, size, &hits, &misses, |k| cl.lookup(k));
    }
    g.finish();
}

/// Control-plane insert rate: 100k entries into an empty exact map or LPM
/// structure, 10k rules into an empty classifier.
fn inserts(c: &mut Criterion) {
    const N: usize = 100_000;
    const RULES: usize = 10_000;
    let mut g = c.benchmark_group("insert");
    g.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    let mut rng = Rng(7);
    let exact_keys: Vec<u64> = (0..N).map(|i| ((i as u64) << 8) | rng.below(256)).collect();
    g.throughput(Throughput::Elements(N as u64));
    g.bench_function(BenchmarkId::new("exact48", N), |b| {
        b.iter(|| {
            let mut m = OpenMap::default();
            for (i, k) in exact_keys.iter().enumerate() {
                m.insert(*k, i as u32);
            }
            black_box(m)
        })
    });
    g.bench_function(BenchmarkId::new("lpm32", N), |b| {
        b.iter_batched(
            || DirLpm::new(32),
            |mut d| {
                for i in 0..N as u32 {
                    d.insert((i << 8) | 0x0a00_0000, 24, i, 1);
                }
                black_box(d)
            },
            criterion::BatchSize::LargeInput,
        )
    });
    let mut rng = Rng(8);
    let rules: Vec<Rule> = (0..RULES)
        .map(|_| {
            let [sv, sm, dv, dm, pv, pm] = ternary_rule(&mut rng);
            Rule::new(ternary_bytes(sv, dv, pv as u8), ternary_bytes(sm, dm, pm as u8))
        })
        .collect();
    g.throughput(Throughput::Elements(RULES as u64));
    g.bench_function(BenchmarkId::new("ternary3", RULES), |b| {
        b.iter_batched(
            || rules.clone(),
            |rules| {
                let mut cl = Classifier::new(9);
                for (i, r) in rules.into_iter().enumerate() {
                    cl.insert(i as u32, i as i32, r);
                }
                black_box(cl)
            },
            criterion::BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, exact, lpm, ternary, range, inserts);
criterion_main!(benches);
