//! Priority classification of fixed-length byte keys: rules of value/mask
//! bytes and inclusive ranges, each with a priority; a lookup returns the
//! best rule a key matches (ACLs, ternary and range tables, flow tables).
//!
//! Contract:
//! - stores: [`Rule`]s over keys of one length, each with the caller's id
//!   (a `u32`, distinct among the rules present) and a priority (an
//!   `i32`). The best rule is the one with the lowest priority number,
//!   then the lowest id (bmv2's order for ternary tables; a table where
//!   higher numbers win negates them);
//! - lookup cost: up to [`SCAN_MAX`] rules, a scan in priority order that
//!   stops at the first match. Above, tuple-space search: rules are
//!   grouped by mask (a range hashed on the leading bits its bounds share),
//!   each group a hash map from masked key to its rules in priority order;
//!   a lookup probes one map per group, best groups first, and stops at the
//!   first group that cannot beat the match found so far. Keys of up to
//!   [`WORD_KEY_BYTES`] are masked and hashed as four words. The cost
//!   follows the number of distinct masks more than the number of rules;
//!   rules whose mask is more specific than an existing group's join it
//!   (a few per bucket) instead of making a new group. [`Classifier::lookup_cached`]
//!   puts a bounded two-way cache of recent keys in front (for flow
//!   locality), which sets itself aside while it does not hit;
//! - insert and remove cost: a logarithm of the number of rules (they are
//!   kept by (priority, id), with a copy in order while there are at most
//!   [`SCAN_MAX`]) plus the tuples' bookkeeping; [`Classifier::find`]
//!   (is this rule present?) costs a lookup;
//! - concurrency: inserts, removes and cached lookups take `&mut self`
//!   (the cache lives in the classifier), plain lookups `&self`. Nothing is
//!   shared between copies: each thread that looks up through the cache
//!   keeps its own copy. Any change invalidates the cache at once (a
//!   generation number), so cached lookups always see the latest rules.

use std::collections::BTreeMap;

use hashbrown::HashMap;

/// Up to this many rules, a lookup scans them in priority order (faster
/// than hashing per mask for small ACLs); above, tuple-space search.
pub const SCAN_MAX: usize = 32;

/// Keys of up to this many bytes are read as four words ([`key_words`]):
/// the form tuples mask and hash fastest, and the only form the lookup
/// cache keeps.
pub const WORD_KEY_BYTES: usize = 32;

/// Slots of a [`LookupCache`] (a power of two).
const CACHE_SLOTS: usize = 8192;

/// A bucket of a merged tuple holds at most this many rules whose own
/// mask is more specific than the tuple's (see [`tuple_for`]).
const MERGE_BUCKET_LIMIT: usize = 8;

/// Inclusive bounds on key bytes `off..off + lo.len()`, compared as
/// big-endian numbers (`lo` and `hi` have the same length).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Bounds {
    pub off: usize,
    pub lo: Vec<u8>,
    pub hi: Vec<u8>,
}

/// What a key must be to match: each byte equal to `value` where `mask`
/// has bits set, and each range's bytes within its [`Bounds`]. A key byte
/// is decided by its mask or by one range, never both.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Rule {
    /// Zero wherever `mask` is.
    value: Vec<u8>,
    mask: Vec<u8>,
    ranges: Vec<Bounds>,
}

impl Rule {
    /// A rule requiring `key & mask == value & mask` (bits of `value`
    /// outside `mask` are dropped). Panics when the lengths differ.
    pub fn new(mut value: Vec<u8>, mask: Vec<u8>) -> Rule {
        assert_eq!(value.len(), mask.len(), "a rule's value and mask have the key's length");
        for (v, m) in value.iter_mut().zip(&mask) {
            *v &= m;
        }
        Rule { value, mask, ranges: Vec::new() }
    }

    /// The rule of `key_len`-byte keys that every key matches.
    pub fn any(key_len: usize) -> Rule {
        Rule { value: vec![0; key_len], mask: vec![0; key_len], ranges: Vec::new() }
    }

    /// Requires key bytes `off..off + value.len()` to equal `value` under
    /// `mask` (same length), replacing what the mask required of them.
    /// Panics when the bytes lie outside the key or in a range.
    pub fn set_masked(&mut self, off: usize, value: &[u8], mask: &[u8]) -> &mut Rule {
        assert_eq!(value.len(), mask.len(), "value and mask of the same length");
        let end = off + value.len();
        assert!(end <= self.value.len(), "bytes {off}..{end} outside a {}-byte key", self.value.len());
        assert!(self.ranges.iter().all(|b| end <= b.off || b.off + b.lo.len() <= off), "bytes {off}..{end} in a range");
        for (i, (v, m)) in value.iter().zip(mask).enumerate() {
            self.value[off + i] = v & m;
            self.mask[off + i] = *m;
        }
        self
    }

    /// Requires key bytes `off..off + lo.len()`, read big-endian, to lie in
    /// `lo..=hi` (an empty range when `lo > hi`: nothing matches). Panics
    /// when `lo` and `hi` differ in length, or the bytes lie outside the
    /// key, under the mask or in another range.
    pub fn add_range(&mut self, off: usize, lo: Vec<u8>, hi: Vec<u8>) -> &mut Rule {
        assert_eq!(lo.len(), hi.len(), "range bounds of the same length");
        let end = off + lo.len();
        assert!(end <= self.mask.len(), "bytes {off}..{end} outside a {}-byte key", self.mask.len());
        assert!(self.mask[off..end].iter().all(|m| *m == 0), "bytes {off}..{end} under the mask");
        assert!(
            self.ranges.iter().all(|b| end <= b.off || b.off + b.lo.len() <= off),
            "bytes {off}..{end} in another range"
        );
        self.ranges.push(Bounds { off, lo, hi });
        self
    }

    /// Length of the keys this rule matches.
    pub fn key_len(&self) -> usize {
        self.mask.len()
    }

    /// The value bytes (zero outside the mask).
    pub fn value(&self) -> &[u8] {
        &self.value
    }

    /// The mask bytes.
    pub fn mask(&self) -> &[u8] {
        &self.mask
    }

    /// The ranges, in the order they were added.
    pub fn ranges(&self) -> &[Bounds] {
        &self.ranges
    }

    /// Whether `key` matches.
    #[inline]
    pub fn matches(&self, key: &[u8]) -> bool {
        key.iter().zip(&self.mask).zip(&self.value).all(|((k, m), v)| k & m == *v) && self.ranges_hold(key)
    }

    #[inline]
    fn ranges_hold(&self, key: &[u8]) -> bool {
        self.ranges.iter().all(|b| {
            let k = &key[b.off..b.off + b.lo.len()];
            k >= b.lo.as_slice() && k <= b.hi.as_slice()
        })
    }

    /// The rule as tuple-space search stores it: each range hashed on the
    /// leading bits its bounds share ([`range_mask`]) and checked against
    /// the bounds only when the range is not exactly that prefix block. Why:
    /// expanding ranges into covering prefixes (the textbook way) makes one
    /// tuple per prefix length, and every tuple costs a hash probe per
    /// lookup; relaxing the mask (as TupleMerge does) keeps ACLs with port
    /// ranges to a handful of tuples, at the price of a range check on the
    /// few rules sharing a bucket. Worst case: many rules equal but for
    /// overlapping ranges share one bucket, scanned in priority order up to
    /// the first match.
    ///
    /// Two rules have the same piece only when they match the same keys
    /// (a range's bounds are kept unless they are its block), which is what
    /// [`Classifier::find`] relies on.
    fn piece(&self) -> Rule {
        let mut p = Rule { value: self.value.clone(), mask: self.mask.clone(), ranges: Vec::new() };
        for b in &self.ranges {
            let (mask, block) = range_mask(&b.lo, &b.hi);
            for (i, m) in mask.iter().enumerate() {
                p.mask[b.off + i] = *m;
                p.value[b.off + i] = b.lo[i] & m;
            }
            if !block {
                p.ranges.push(b.clone());
            }
        }
        p
    }
}

/// The hash mask of a range `[lo, hi]` over big-endian bytes: the leading
/// bits where `lo` and `hi` agree (every value in the range has them), and
/// whether the range is exactly that prefix block (then hashing alone
/// decides and no range check is needed). An empty range (`lo > hi`) is
/// never a block, so its check always fails.
fn range_mask(lo: &[u8], hi: &[u8]) -> (Vec<u8>, bool) {
    let mut mask = vec![0u8; lo.len()];
    let mut block = lo <= hi;
    let mut diverged = false;
    for ((m, l), h) in mask.iter_mut().zip(lo).zip(hi) {
        if !diverged {
            let d = l ^ h;
            *m = if d == 0 {
                0xff
            } else {
                diverged = true;
                (0xff00u16 >> d.leading_zeros()) as u8
            };
        }
        block &= l & !*m == 0 && (h | *m) == 0xff;
    }
    (mask, block)
}

/// A rule as the classifier keeps it: in the priority-ordered list (as
/// given) or in a tuple's bucket (its piece).
#[derive(Debug, Clone)]
struct Flat {
    id: u32,
    priority: i32,
    rule: Rule,
    /// In a tuple whose mask is less specific than the rule's own (merged
    /// there): a bucket hit must still check `key & mask == value`.
    check_mask: bool,
}

impl Flat {
    /// Whether `key` matches this piece in a tuple bucket: its own mask
    /// when it was merged into a less specific tuple, then its range checks.
    #[inline]
    fn bucket_matches(&self, key: &[u8]) -> bool {
        let r = &self.rule;
        (!self.check_mask || key.iter().zip(&r.mask).zip(&r.value).all(|((k, m), v)| k & m == *v)) && r.ranges_hold(key)
    }
}

/// Rules hashed under one mask: a map from masked key to the rules there
/// in (priority, id) order.
#[derive(Debug, Clone)]
struct Tuple {
    mask: Vec<u8>,
    /// A bound on the best (priority, id) in the tuple: never worse than
    /// its best rule (lookups skip a tuple whose bound cannot win, so a
    /// bound that is too good costs a probe, never a wrong answer). Exact
    /// after inserts; after removing the best rule it is recomputed only
    /// once such removals reach the tuple's size (amortized constant cost,
    /// where recomputing on every removal scans the tuple each time).
    best: (i32, u32),
    map: TupleKeys,
    count: usize,
    /// Removals of the best rule since `best` was last exact.
    stale: usize,
}

/// A tuple's rules by masked key.
///
/// Why three forms: an ACL key is often wider than 16 bytes (the edge
/// example's is 17), and a tuple is probed on every lookup, so masking and
/// hashing the key must cost little. Keys of up to 32 bytes are read once
/// per lookup as four words; each tuple then masks them with four ANDs,
/// hashes four words and compares four (`Words`). Longer keys keep the
/// mask's non-zero bytes gathered into an integer when there are at most
/// 16 (`Packed`), else the whole masked key as a byte string (`Bytes`).
#[derive(Debug, Clone)]
enum TupleKeys {
    /// `mask`: the tuple's mask as [`cache_words`] reads keys.
    Words {
        mask: [u64; 4],
        map: HashMap<WordKey, Vec<Flat>, rustc_hash::FxBuildHasher>,
    },
    /// `at`: the offsets of the mask's non-zero bytes (at most 16).
    Packed {
        at: Box<[u8]>,
        map: HashMap<u128, Vec<Flat>, rustc_hash::FxBuildHasher>,
    },
    Bytes(HashMap<Box<[u8]>, Vec<Flat>>),
}

/// A masked key of up to 32 bytes as four words (see [`TupleKeys::Words`]).
///
/// Why its own `Hash`: the four words are multiplied by different odd
/// constants independently and the products folded into one word, which
/// the map's hasher finishes; hashing an array word after word is a chain
/// of five dependent multiplications, paid once per tuple per lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct WordKey([u64; 4]);

impl std::hash::Hash for WordKey {
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let [a, b, c, d] = self.0;
        let x = a.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ b.wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
        let y = c.wrapping_mul(0x1656_67b1_9e37_79f9) ^ d.wrapping_mul(0xd6e8_feb8_6659_fd93);
        state.write_u64(x ^ y.rotate_left(29));
    }
}

impl TupleKeys {
    fn new(mask: &[u8]) -> TupleKeys {
        if mask.len() <= WORD_KEY_BYTES {
            return TupleKeys::Words { mask: cache_words(mask), map: HashMap::default() };
        }
        let at: Vec<u8> = (0..mask.len()).filter(|i| mask[*i] != 0).map(|i| i as u8).collect();
        if at.len() <= 16 && mask.len() <= 256 {
            TupleKeys::Packed { at: at.into(), map: HashMap::default() }
        } else {
            TupleKeys::Bytes(HashMap::new())
        }
    }

    /// The kept bytes of `key & mask`, as an integer.
    #[inline(always)]
    fn pack(at: &[u8], key: &[u8], mask: &[u8]) -> u128 {
        at.iter().fold(0u128, |acc, &o| (acc << 8) | u128::from(key[o as usize] & mask[o as usize]))
    }

    /// The rules whose masked key equals `key & mask`; `words` is `key`
    /// as [`cache_words`] reads it (when at most 32 bytes), `masked` scratch
    /// of the key's length.
    #[inline(always)]
    fn get(&self, key: &[u8], words: &[u64; 4], mask: &[u8], masked: &mut [u8]) -> Option<&Vec<Flat>> {
        match self {
            TupleKeys::Words { mask, map } => map.get(&WordKey(std::array::from_fn(|i| words[i] & mask[i]))),
            _ => self.get_long(key, mask, masked),
        }
    }

    /// [`TupleKeys::get`] for keys longer than 32 bytes (kept out of line:
    /// the word form is the one probed on every packet of a typical ACL).
    #[inline(never)]
    fn get_long(&self, key: &[u8], mask: &[u8], masked: &mut [u8]) -> Option<&Vec<Flat>> {
        match self {
            TupleKeys::Words { .. } => unreachable!("`get` probes the word form itself"),
            TupleKeys::Packed { at, map } => map.get(&Self::pack(at, key, mask)),
            TupleKeys::Bytes(map) => {
                for ((m, k), o) in mask.iter().zip(key).zip(masked.iter_mut()) {
                    *o = k & m;
                }
                map.get(&*masked)
            }
        }
    }

    /// The list for a masked value (`value == value & mask`), created empty when missing.
    fn list(&mut self, value: &[u8], mask: &[u8]) -> &mut Vec<Flat> {
        match self {
            TupleKeys::Words { map, .. } => map.entry(WordKey(cache_words(value))).or_default(),
            TupleKeys::Packed { at, map } => map.entry(Self::pack(at, value, mask)).or_default(),
            TupleKeys::Bytes(map) => map.entry(value.into()).or_default(),
        }
    }

    /// Removes rule `id` from the list of a masked value, and the list when it empties.
    fn remove(&mut self, value: &[u8], mask: &[u8], id: u32) {
        fn drop_from<K: std::hash::Hash + Eq, S: std::hash::BuildHasher>(
            map: &mut HashMap<K, Vec<Flat>, S>,
            k: K,
            id: u32,
        ) {
            if let Some(list) = map.get_mut(&k) {
                list.retain(|x| x.id != id);
                if list.is_empty() {
                    map.remove(&k);
                }
            }
        }
        match self {
            TupleKeys::Words { map, .. } => drop_from(map, WordKey(cache_words(value)), id),
            TupleKeys::Packed { at, map } => drop_from(map, Self::pack(at, value, mask), id),
            TupleKeys::Bytes(map) => drop_from(map, Box::<[u8]>::from(value), id),
        }
    }

    fn lists(&self) -> Box<dyn Iterator<Item = &Vec<Flat>> + '_> {
        match self {
            TupleKeys::Words { map, .. } => Box::new(map.values()),
            TupleKeys::Packed { map, .. } => Box::new(map.values()),
            TupleKeys::Bytes(map) => Box::new(map.values()),
        }
    }
}

impl Tuple {
    /// Whether pieces of mask `mask` can sit in this tuple: every bit of
    /// the tuple's mask is set in theirs, so they hash under it and a check
    /// of their own mask tells them apart.
    fn holds_mask(&self, mask: &[u8]) -> bool {
        self.mask.iter().zip(mask).all(|(g, s)| g & s == *g)
    }

    /// The bucket a piece's value (masked by its own mask) falls into in
    /// this tuple (control-plane use: insert, remove, find).
    fn bucket_of(&self, value: &[u8]) -> Option<&Vec<Flat>> {
        let v = and_mask(value, &self.mask);
        let mut scratch = vec![0u8; v.len()];
        self.map.get(&v, &key_words(&v), &self.mask, &mut scratch)
    }

    fn recompute_best(&mut self) {
        self.best = self
            .map
            .lists()
            .filter_map(|l| l.first())
            .map(|f| (f.priority, f.id))
            .min()
            .unwrap_or((i32::MAX, u32::MAX));
    }
}

/// `value & mask`.
fn and_mask(value: &[u8], mask: &[u8]) -> Vec<u8> {
    value.iter().zip(mask).map(|(v, m)| v & m).collect()
}

/// The tuple a piece `f` goes into, TupleMerge-style (Daly et al., 2019):
/// the tuple of its own mask when there is one, else the most specific
/// tuple whose mask it covers whose bucket for it holds fewer than
/// [`MERGE_BUCKET_LIMIT`] rules, else `None` (a new tuple). Why: every
/// tuple costs a hash probe on every lookup, and an ACL whose rules differ
/// only in a few more-specific bits (port range prefixes, /24 against /32)
/// would otherwise spread over many tuples.
fn tuple_for(tuples: &[Tuple], f: &Rule) -> Option<usize> {
    if let Some(p) = tuples.iter().position(|t| t.mask == f.mask) {
        return Some(p);
    }
    tuples
        .iter()
        .enumerate()
        .filter(|(_, t)| t.holds_mask(&f.mask))
        .filter(|(_, t)| t.bucket_of(&f.value).map_or(0, |l| l.len()) < MERGE_BUCKET_LIMIT)
        .max_by_key(|(_, t)| t.mask.iter().map(|m| m.count_ones()).sum::<u32>())
        .map(|(i, _)| i)
}

/// The tuple holding rule `id`'s piece `f`.
fn tuple_holding(tuples: &[Tuple], f: &Rule, id: u32) -> Option<usize> {
    tuples
        .iter()
        .position(|t| t.holds_mask(&f.mask) && t.bucket_of(&f.value).is_some_and(|l| l.iter().any(|x| x.id == id)))
}

/// A bounded, two-way set-associative cache in front of tuple-space
/// search: a key seen recently costs one hash and one compare instead of a
/// probe per mask. Why: ACLs are searched on every packet while the set of
/// flows in a short window is small. Each copy of a classifier has its
/// own; any change to the rules invalidates it at once through the
/// classifier's generation.
#[derive(Debug, Clone)]
struct LookupCache {
    slots: Vec<CacheSlot>,
    /// Lookups answered from the cache, and lookups that searched the rules.
    hits: u64,
    misses: u64,
    /// Lookups that went straight to the rules while the cache was set aside.
    bypassed: u64,
    /// Lookups and hits in the current sampling window.
    window: u32,
    window_hits: u32,
    /// Lookups left to send straight to the rules.
    bypass: u32,
}

/// Lookups per sampling window of a [`LookupCache`]'s hit rate.
const CACHE_WINDOW: u32 = 4096;
/// Lookups a cache is set aside for after a window with fewer than one hit
/// in eight: traffic without flow locality (every packet a new flow) would
/// otherwise pay a cache miss and an insert on top of every search. After
/// that the cache samples again for one window.
const CACHE_BYPASS: u32 = 15 * CACHE_WINDOW;

impl LookupCache {
    /// Whether this lookup skips the cache (and counts it).
    #[inline]
    fn skip(&mut self) -> bool {
        if self.bypass == 0 {
            return false;
        }
        self.bypass -= 1;
        self.bypassed += 1;
        true
    }

    /// Records a lookup through the cache; sets the cache aside when the
    /// window that just ended had fewer than one hit in eight.
    #[inline]
    fn note(&mut self, hit: bool) {
        self.window += 1;
        self.window_hits += u32::from(hit);
        if self.window == CACHE_WINDOW {
            if self.window_hits * 8 < CACHE_WINDOW {
                self.bypass = CACHE_BYPASS;
            }
            self.window = 0;
            self.window_hits = 0;
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct CacheSlot {
    key: [u64; 4],
    generation: u32,
    /// The id found, or `u32::MAX` for a miss.
    result: u32,
}

/// A key as tuple search reads it: four zero-padded little-endian words
/// when it has at most [`WORD_KEY_BYTES`], else unused zeros (longer keys
/// take the other forms). A caller that builds keys word by word passes
/// them to [`Classifier::lookup_words`] and saves this step.
#[inline(always)]
pub fn key_words(key: &[u8]) -> [u64; 4] {
    if key.len() <= WORD_KEY_BYTES {
        cache_words(key)
    } else {
        [0; 4]
    }
}

/// The bytes of a key [`key_words`] read (its first `len` bytes are the
/// key's): the inverse, for a caller that built the words.
#[inline(always)]
pub fn word_bytes(words: &[u64; 4]) -> [u8; WORD_KEY_BYTES] {
    let mut b = [0u8; WORD_KEY_BYTES];
    for (chunk, w) in b.chunks_exact_mut(8).zip(words) {
        chunk.copy_from_slice(&w.to_le_bytes());
    }
    b
}

/// A key as four zero-padded little-endian words (keys are at most `WORD_KEY_BYTES`).
#[inline(always)]
fn cache_words(key: &[u8]) -> [u64; 4] {
    let mut b = [0u8; WORD_KEY_BYTES];
    // Fixed moves, not a `memcpy` call: this runs on every ACL lookup.
    crate::mem::copy_short(&mut b[..key.len()], key);
    std::array::from_fn(|i| u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().expect("8 bytes")))
}

/// The classifier (see the module documentation).
#[derive(Debug, Clone)]
pub struct Classifier {
    key_len: usize,
    /// Every rule as given, by (priority, id): inserts and removes cost a
    /// logarithm of the rule count, whatever the order of ids.
    rules: BTreeMap<(i32, u32), Flat>,
    /// Each rule's priority by id (where a remove finds a rule).
    priority_of: HashMap<u32, i32>,
    /// While there are at most [`SCAN_MAX`] rules: a copy of them in
    /// (priority, id) order, what lookups scan (empty above).
    scan: Vec<Flat>,
    /// Tuple-space search: rules (their pieces) grouped by mask, the groups
    /// sorted by their best (priority, id), so a lookup stops at the first
    /// group that cannot beat the best match so far.
    tuples: Vec<Tuple>,
    /// Bumped by every insert and remove: cached results of an older
    /// generation are stale.
    generation: u32,
    /// Results of recent lookups (tuple-space search only).
    cache: Option<Box<LookupCache>>,
    /// Whether [`Classifier::lookup_cached`] may use a cache.
    caching: bool,
}

impl Classifier {
    /// An empty classifier of `key_len`-byte keys.
    pub fn new(key_len: usize) -> Classifier {
        Classifier {
            key_len,
            rules: BTreeMap::new(),
            priority_of: HashMap::new(),
            scan: Vec::new(),
            tuples: Vec::new(),
            generation: 1,
            cache: None,
            caching: true,
        }
    }

    /// Length of the keys.
    pub fn key_len(&self) -> usize {
        self.key_len
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether there is no rule.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Whether lookups scan the rules (at most [`SCAN_MAX`]) rather than
    /// search tuples.
    pub fn scans(&self) -> bool {
        self.rules.len() <= SCAN_MAX
    }

    /// Number of tuples (distinct hash masks) tuple-space search probes at most.
    pub fn tuple_count(&self) -> usize {
        self.tuples.len()
    }

    /// The rules in (priority, id) order, as `(id, priority, rule)`.
    pub fn rules(&self) -> impl Iterator<Item = (u32, i32, &Rule)> + '_ {
        self.rules.values().map(|f| (f.id, f.priority, &f.rule))
    }

    /// Keeps [`Classifier::scan`] in step with the rules: their copy in
    /// order while there are at most [`SCAN_MAX`], nothing above.
    fn rescan(&mut self) {
        if self.rules.len() <= SCAN_MAX {
            self.scan = self.rules.values().cloned().collect();
        } else if !self.scan.is_empty() {
            self.scan = Vec::new();
        }
    }

    /// Adds `rule` as rule `id` of priority `priority`. The caller keeps
    /// ids distinct (see [`Classifier::find`] to refuse duplicate rules).
    /// Panics when the rule's key length is not the classifier's.
    pub fn insert(&mut self, id: u32, priority: i32, rule: Rule) {
        assert_eq!(rule.key_len(), self.key_len, "a rule of another key length");
        let mut piece = Flat { id, priority, rule: rule.piece(), check_mask: false };
        let key = (priority, id);
        self.rules.insert(key, Flat { id, priority, rule, check_mask: false });
        self.priority_of.insert(id, priority);
        self.rescan();
        let pos = match tuple_for(&self.tuples, &piece.rule) {
            Some(p) => p,
            None => {
                self.tuples.push(Tuple {
                    mask: piece.rule.mask.clone(),
                    best: (i32::MAX, u32::MAX),
                    map: TupleKeys::new(&piece.rule.mask),
                    count: 0,
                    stale: 0,
                });
                self.tuples.len() - 1
            }
        };
        let t = &mut self.tuples[pos];
        piece.check_mask = t.mask != piece.rule.mask;
        let list = t.map.list(&and_mask(&piece.rule.value, &t.mask), &t.mask);
        let at = list.partition_point(|x| (x.priority, x.id) < key);
        list.insert(at, piece);
        t.count += 1;
        t.best = t.best.min(key);
        self.tuples.sort_by_key(|t| t.best);
        self.generation = self.generation.wrapping_add(1).max(1);
    }

    /// Removes rule `id`; returns its priority and rule, `None` when there
    /// is no such rule.
    pub fn remove(&mut self, id: u32) -> Option<(i32, Rule)> {
        let priority = self.priority_of.remove(&id)?;
        let f = self.rules.remove(&(priority, id)).expect("every indexed rule is stored");
        self.rescan();
        let piece = f.rule.piece();
        if let Some(pos) = tuple_holding(&self.tuples, &piece, id) {
            let t = &mut self.tuples[pos];
            t.map.remove(&and_mask(&piece.value, &t.mask), &t.mask, id);
            t.count -= 1;
            if t.count == 0 {
                self.tuples.remove(pos);
            } else if t.best == (priority, id) {
                // Only the best rule's removal changes the tuple's best;
                // the old bound stays valid (too good) until recomputed.
                t.stale += 1;
                if t.stale >= t.count {
                    t.recompute_best();
                    t.stale = 0;
                }
            }
        }
        self.tuples.sort_by_key(|t| t.best);
        self.generation = self.generation.wrapping_add(1).max(1);
        Some((f.priority, f.rule))
    }

    /// The id of a rule of priority `priority` that equals `rule`, if one
    /// is present (a range that is exactly a prefix block equals the same
    /// block written as value and mask: they match the same keys).
    pub fn find(&self, priority: i32, rule: &Rule) -> Option<u32> {
        let want = rule.piece();
        self.tuples.iter().filter(|t| t.holds_mask(&want.mask)).find_map(|t| {
            t.bucket_of(&want.value)?.iter().find(|x| x.priority == priority && x.rule == want).map(|x| x.id)
        })
    }

    /// The id of the best rule `key` matches.
    #[inline]
    pub fn lookup(&self, key: &[u8]) -> Option<u32> {
        self.lookup_words(key, None)
    }

    /// [`Classifier::lookup`] given the key's [`key_words`] when known
    /// (else they are read from `key` when needed).
    #[inline]
    pub fn lookup_words(&self, key: &[u8], known_words: Option<&[u64; 4]>) -> Option<u32> {
        if self.rules.len() <= SCAN_MAX {
            for f in &self.scan {
                if f.rule.matches(key) {
                    return Some(f.id);
                }
            }
            return None;
        }
        let mut best: Option<(i32, u32)> = None;
        let mut buf = [0u8; 64];
        let mut heap = Vec::new();
        let masked: &mut [u8] = if key.len() <= buf.len() {
            &mut buf[..key.len()]
        } else {
            heap.resize(key.len(), 0);
            &mut heap
        };
        let words = known_words.copied().unwrap_or_else(|| key_words(key));
        for t in &self.tuples {
            if best.is_some_and(|b| t.best >= b) {
                break;
            }
            if let Some(list) = t.map.get(key, &words, &t.mask, masked) {
                for f in list {
                    if best.is_some_and(|b| (f.priority, f.id) >= b) {
                        break;
                    }
                    if f.bucket_matches(key) {
                        best = Some((f.priority, f.id));
                        break;
                    }
                }
            }
        }
        best.map(|b| b.1)
    }

    /// [`Classifier::lookup_words`] through the lookup cache, when tuples
    /// are searched, the key has at most [`WORD_KEY_BYTES`] and caching is
    /// on; else a plain lookup.
    #[inline]
    pub fn lookup_cached(&mut self, key: &[u8], words: Option<&[u64; 4]>) -> Option<u32> {
        if !self.cacheable(key.len()) {
            return self.lookup_words(key, words);
        }
        let words = words.copied().unwrap_or_else(|| cache_words(key));
        self.through_cache(&words, |c| c.lookup_words(key, Some(&words)))
    }

    /// [`Classifier::lookup_cached`] of a key of `len` bytes (at most
    /// [`WORD_KEY_BYTES`]) that the caller built as [`key_words`] reads it:
    /// its bytes are written out (on the stack) only when the cache does
    /// not answer. Why: generated code builds ACL keys as words, and
    /// turning them into bytes for every packet cost more than a cache
    /// hit.
    #[inline]
    pub fn lookup_cached_words(&mut self, len: usize, words: &[u64; 4]) -> Option<u32> {
        debug_assert!(len <= WORD_KEY_BYTES, "a {len}-byte key is not read as words");
        let len = len.min(WORD_KEY_BYTES);
        let bytes = || word_bytes(words);
        if !self.cacheable(len) {
            return self.lookup_words(&bytes()[..len], Some(words));
        }
        self.through_cache(words, |c| c.lookup_words(&bytes()[..len], Some(words)))
    }

    /// Whether a lookup of a `len`-byte key goes through the cache now:
    /// tuples are searched, the key is short enough, caching is on and the
    /// cache is not set aside (a lookup that asks counts as bypassed).
    #[inline]
    fn cacheable(&mut self, len: usize) -> bool {
        self.rules.len() > SCAN_MAX
            && len <= WORD_KEY_BYTES
            && self.caching
            && !self.cache.as_mut().is_some_and(|c| c.skip())
    }

    /// The cache's answer for `words`, or `search`'s (the tuple search),
    /// which the cache then keeps.
    #[inline]
    fn through_cache(&mut self, words: &[u64; 4], search: impl FnOnce(&Self) -> Option<u32>) -> Option<u32> {
        let words = *words;
        let h = (words[0] ^ words[1].rotate_left(17) ^ words[2].rotate_left(31) ^ words[3].rotate_left(47))
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
        // Two-way sets: slots 2i and 2i+1; a miss replaces the older way.
        let set = 2 * (h >> (64 - (CACHE_SLOTS / 2).trailing_zeros())) as usize;
        let generation = self.generation;
        if let Some(c) = &mut self.cache {
            for way in set..set + 2 {
                let slot = c.slots[way];
                if slot.generation == generation && slot.key == words {
                    c.hits += 1;
                    c.note(true);
                    // Most recently used first.
                    c.slots.swap(set, way);
                    return (slot.result != u32::MAX).then_some(slot.result);
                }
            }
        }
        let found = search(self);
        let c = self.cache.get_or_insert_with(|| {
            Box::new(LookupCache {
                slots: vec![CacheSlot::default(); CACHE_SLOTS],
                hits: 0,
                misses: 0,
                bypassed: 0,
                window: 0,
                window_hits: 0,
                bypass: 0,
            })
        });
        c.misses += 1;
        c.note(false);
        c.slots[set + 1] = c.slots[set];
        c.slots[set] = CacheSlot { key: words, generation, result: found.unwrap_or(u32::MAX) };
        found
    }

    /// Turns the lookup cache on or off (off drops it: for copies that never
    /// look packets up). On by default.
    pub fn set_caching(&mut self, on: bool) {
        self.caching = on;
        if !on {
            self.cache = None;
        }
    }

    /// The lookup cache's `(hits, misses)`, once it exists.
    pub fn cache_stats(&self) -> Option<(u64, u64)> {
        self.cache.as_ref().map(|c| (c.hits, c.misses))
    }

    /// Lookups that skipped the lookup cache while its hit rate was low.
    pub fn cache_bypassed(&self) -> u64 {
        self.cache.as_ref().map_or(0, |c| c.bypassed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The id a lookup must return, by brute force over the rules.
    fn best_by_scan(c: &Classifier, key: &[u8]) -> Option<u32> {
        c.rules().filter(|(_, _, r)| r.matches(key)).min_by_key(|(id, p, _)| (*p, *id)).map(|(id, _, _)| id)
    }

    /// A rule of a ternary field per `(value, mask)` followed by ranges `(lo, hi)`, all big-endian.
    fn rule(masked: &[(&[u8], &[u8])], ranges: &[(&[u8], &[u8])]) -> Rule {
        let len: usize = masked.iter().map(|m| m.0.len()).chain(ranges.iter().map(|r| r.0.len())).sum();
        let mut r = Rule::any(len);
        let mut off = 0;
        for (v, m) in masked {
            r.set_masked(off, v, m);
            off += v.len();
        }
        for (lo, hi) in ranges {
            r.add_range(off, lo.to_vec(), hi.to_vec());
            off += lo.len();
        }
        r
    }

    #[test]
    fn range_masks_keep_every_value_of_the_range() {
        for (lo, hi) in [(0u16, 65535u16), (1000, 2000), (5000, 5000), (1, 254), (3, 2), (0, 0), (1024, 2047), (6, 7)] {
            let (lb, hb) = (lo.to_be_bytes(), hi.to_be_bytes());
            let (m, block) = range_mask(&lb, &hb);
            let m = u16::from_be_bytes([m[0], m[1]]);
            let mut outside_with_prefix = false;
            for x in 0..=u16::MAX {
                let inside = lo <= x && x <= hi;
                let prefix = x & m == lo & m;
                assert!(!inside || prefix, "[{lo}, {hi}]: {x} lost by mask {m:#06x}");
                outside_with_prefix |= prefix && !inside;
            }
            assert_eq!(block, !outside_with_prefix && lo <= hi, "[{lo}, {hi}] mask {m:#06x}");
        }
        assert_eq!(range_mask(&[0, 0], &[0xff, 0xff]), (vec![0, 0], true));
        assert_eq!(range_mask(&[0x13, 0x88], &[0x13, 0x88]), (vec![0xff, 0xff], true));
        assert_eq!(range_mask(&[0x04, 0x00], &[0x07, 0xff]), (vec![0xfc, 0x00], true));
    }

    #[test]
    fn rules_keep_their_value_under_the_mask_and_their_bytes_apart() {
        let r = Rule::new(vec![0xff, 0x12], vec![0xf0, 0xff]);
        assert_eq!(r.value(), [0xf0, 0x12]);
        assert!(r.matches(&[0xf7, 0x12]) && !r.matches(&[0xe0, 0x12]));
        let mut r = Rule::any(3);
        r.set_masked(0, &[6], &[0xff]).add_range(1, vec![0, 10], vec![0, 20]);
        assert!(r.matches(&[6, 0, 10]) && r.matches(&[6, 0, 20]) && !r.matches(&[6, 0, 21]));
        assert_eq!(r.ranges(), [Bounds { off: 1, lo: vec![0, 10], hi: vec![0, 20] }]);
        let overlaps = std::panic::catch_unwind(|| {
            Rule::any(3).set_masked(1, &[1], &[1]).add_range(0, vec![0; 2], vec![9; 2]).clone()
        });
        assert!(overlaps.is_err(), "a range over masked bytes is refused");
    }

    #[test]
    fn lower_priority_number_wins_then_lower_id() {
        let mut c = Classifier::new(2);
        c.insert(0, 20, Rule::new(vec![0x12, 0x00], vec![0xff, 0x00]));
        c.insert(1, 10, Rule::new(vec![0x12, 0x34], vec![0xff, 0xff]));
        c.insert(5, 20, Rule::new(vec![0x12, 0x35], vec![0xff, 0xff]));
        assert_eq!(c.lookup(&[0x12, 0x34]), Some(1));
        assert_eq!(c.lookup(&[0x12, 0x35]), Some(0));
        assert_eq!(c.lookup(&[0x13, 0x35]), None);
        assert_eq!(c.remove(0).map(|(p, _)| p), Some(20));
        assert_eq!(c.lookup(&[0x12, 0x35]), Some(5));
        assert_eq!(c.remove(0), None);
    }

    #[test]
    fn ranges_sharing_a_piece_are_found_by_their_bounds() {
        let r = |lo: u16, hi: u16| rule(&[(&[6], &[0xff])], &[(&lo.to_be_bytes(), &hi.to_be_bytes())]);
        let mut c = Classifier::new(3);
        // Same start, different ends: their pieces share a bucket.
        c.insert(0, 5, r(1000, 1007));
        c.insert(1, 5, r(1000, 2000));
        c.insert(2, 7, r(1000, 2000));
        assert_eq!(c.find(5, &r(1000, 1007)), Some(0));
        assert_eq!(c.find(5, &r(1000, 2000)), Some(1));
        assert_eq!(c.find(7, &r(1000, 2000)), Some(2));
        assert_eq!(c.find(5, &r(1000, 2001)), None);
        assert_eq!(c.find(6, &r(1000, 2000)), None);
        c.remove(1);
        assert_eq!(c.find(5, &r(1000, 2000)), None);
        assert_eq!(c.lookup(&[6, 0x05, 0xdc]), Some(2)); // 1500: only rule 2's range holds it now
                                                         // A range that is a prefix block is the same rule as the block under a mask.
        c.insert(3, 1, r(0x0400, 0x07ff));
        assert_eq!(c.find(1, &rule(&[(&[6], &[0xff]), (&[0x04, 0], &[0xfc, 0])], &[])), Some(3));
    }

    #[test]
    fn tuple_space_matches_a_linear_scan() {
        // Two ternary fields and a range field; random rules and keys.
        let mut c = Classifier::new(4);
        let mut rnd = crate::test_rng(12345);
        let masks = [0x00u8, 0xf0, 0xff];
        for id in 0..300 {
            let m0 = masks[(rnd() % 3) as usize];
            let m1 = masks[(rnd() % 3) as usize];
            let lo = (rnd() % 200) as u8;
            let hi = lo.saturating_add((rnd() % 60) as u8);
            let r = rule(&[(&[rnd() as u8], &[m0]), (&[rnd() as u8, 0], &[m1, 0])], &[(&[lo], &[hi])]);
            c.insert(id, (rnd() % 20) as i32, r);
        }
        for id in [3u32, 10, 50, 51] {
            assert!(c.remove(id).is_some());
        }
        assert!(!c.scans());
        for _ in 0..2000 {
            let k = [rnd() as u8, rnd() as u8, 0, rnd() as u8];
            assert_eq!(c.lookup(&k), best_by_scan(&c, &k), "key {k:?}");
        }
    }

    #[test]
    fn tuples_match_a_linear_scan_in_every_key_form() {
        // A 20-byte ternary field plus one byte: a 21-byte key, every tuple
        // in the word form of `TupleKeys`.
        tuples_of_a_wide_field_match_a_linear_scan(20, &["words"]);
        // A 40-byte field: masks keeping all 40 bytes take the byte-string
        // form, masks keeping 2 or 4 the packed one.
        tuples_of_a_wide_field_match_a_linear_scan(40, &["bytes", "packed"]);
    }

    /// Rules on a `wide`-byte ternary field (kept whole, or its first 4
    /// or 2 bytes) and a 1-byte field, against a linear scan; `forms`: the
    /// `TupleKeys` forms that must be in use.
    fn tuples_of_a_wide_field_match_a_linear_scan(wide: usize, forms: &[&str]) {
        let mut c = Classifier::new(wide + 1);
        let mut rnd = crate::test_rng(777);
        let mut values = Vec::new();
        for i in 0..200 {
            let keep = [wide, 4, 2][i % 3];
            let mask: Vec<u8> = (0..wide).map(|b| if b < keep { 0xff } else { 0 }).collect();
            // Few distinct byte values, so that keys built from them often match.
            let v: Vec<u8> = (0..wide).map(|b| if b < keep { (rnd() % 3) as u8 } else { 0 }).collect();
            let tail = (rnd() % 2) as u8;
            values.push(v.clone());
            let r = rule(&[(&v, &mask), (&[tail], &[0xff])], &[]);
            // Wide rules usually outrank narrow ones, so both kinds win lookups.
            let priority = (rnd() % 30) as i32 + if keep == wide { 0 } else { 20 };
            if c.find(priority, &r).is_none() {
                c.insert(i as u32, priority, r);
            }
        }
        assert!(c.len() > SCAN_MAX, "the tuple search, not the small-set scan, is under test");
        let mut kinds: Vec<&str> = c
            .tuples
            .iter()
            .map(|x| match x.map {
                TupleKeys::Words { .. } => "words",
                TupleKeys::Packed { .. } => "packed",
                TupleKeys::Bytes(_) => "bytes",
            })
            .collect();
        kinds.sort_unstable();
        kinds.dedup();
        assert_eq!(kinds, forms, "key forms in use");
        for id in [0u32, 7, 30] {
            c.remove(id);
        }
        let mut wins = [0usize; 2];
        for i in 0..3000 {
            let mut k: Vec<u8> = values[i % values.len()].clone();
            for b in k.iter_mut() {
                if rnd().is_multiple_of(32) {
                    *b = (rnd() % 3) as u8;
                }
            }
            k.push((rnd() % 2) as u8);
            let brute = best_by_scan(&c, &k);
            assert_eq!(c.lookup(&k), brute, "key {k:?}");
            // Which kind of mask won: one keeping the whole wide field, or fewer bytes.
            if let Some(id) = brute {
                let (_, _, r) = c.rules().find(|x| x.0 == id).unwrap();
                wins[usize::from(r.mask()[..wide].iter().all(|b| *b == 0xff))] += 1;
            }
        }
        assert!(wins[0] > 100 && wins[1] > 100, "rules of both kinds win: {wins:?}");
    }

    #[test]
    fn merged_tuples_match_a_linear_scan() {
        // An address (prefixes of 8 to 32 bits), a protocol (exact or any)
        // and a port range: most masks cover a less specific one, so
        // rules merge into fewer tuples, and a bucket hit has to check the
        // rule's own mask.
        let mut c = Classifier::new(7);
        let mut rnd = crate::test_rng(4242);
        for id in 0..400 {
            let plen = [8u32, 16, 24, 32][(rnd() % 4) as usize];
            let mask = (u32::MAX << (32 - plen)).to_be_bytes();
            // Few distinct addresses, so that lookups often hit a bucket.
            let addr = (0x0a00_0000u32 | ((rnd() % 4) << 16) | ((rnd() % 4) << 8) | (rnd() % 4)).to_be_bytes();
            let proto: (&[u8], &[u8]) = if rnd().is_multiple_of(2) { (&[6], &[0xff]) } else { (&[0], &[0]) };
            let lo = (rnd() % 64) as u16;
            let hi = lo + (rnd() % 64) as u16;
            let r = rule(&[(&addr, &mask), proto], &[(&lo.to_be_bytes(), &hi.to_be_bytes())]);
            let priority = (rnd() % 50) as i32;
            if c.find(priority, &r).is_none() {
                c.insert(id, priority, r);
            }
        }
        let ids: Vec<u32> = c.rules().map(|r| r.0).step_by(7).collect();
        for id in ids {
            c.remove(id).unwrap();
        }
        let masks: std::collections::HashSet<Vec<u8>> = c.rules().map(|(_, _, r)| r.piece().mask).collect();
        assert!(c.tuple_count() < masks.len(), "{} tuples for {} masks: rules merged", c.tuple_count(), masks.len());
        assert!(
            c.tuples.iter().any(|x| x.map.lists().any(|l| l.iter().any(|f| f.check_mask))),
            "some rule sits in a less specific tuple"
        );
        let mut hits = 0;
        for _ in 0..5000 {
            let addr = 0x0a00_0000u32 | ((rnd() % 4) << 16) | ((rnd() % 4) << 8) | (rnd() % 4);
            let mut k = addr.to_be_bytes().to_vec();
            k.push([6u8, 17][(rnd() % 2) as usize]);
            k.extend_from_slice(&((rnd() % 140) as u16).to_be_bytes());
            let brute = best_by_scan(&c, &k);
            assert_eq!(c.lookup(&k), brute, "key {k:?}");
            hits += usize::from(brute.is_some());
        }
        assert!(hits > 1000, "lookups hit rules often enough to test them: {hits}");
    }

    #[test]
    fn cached_lookups_follow_every_change() {
        // A ternary and a range field of 16 bits.
        let mut c = Classifier::new(4);
        let mut ids = Vec::new();
        let mut rnd = crate::test_rng(0x1357_9bdf);
        for i in 0..400u32 {
            let (v, m) = ((rnd() & 0x3f) as u16, [0xffffu16, 0xfff0, 0][rnd() as usize % 3]);
            let lo = (rnd() % 64) as u16;
            let hi = lo + (rnd() % 16) as u16;
            let r = rule(&[(&v.to_be_bytes(), &m.to_be_bytes())], &[(&lo.to_be_bytes(), &hi.to_be_bytes())]);
            let priority = (rnd() % 50) as i32;
            if c.find(priority, &r).is_none() {
                c.insert(i, priority, r);
                ids.push(i);
            }
            if rnd().is_multiple_of(3) && !ids.is_empty() {
                c.remove(ids.swap_remove(rnd() as usize % ids.len())).unwrap();
            }
            // Few distinct keys, so most lookups after the first come from the cache.
            for _ in 0..16 {
                let k = [0, (rnd() % 64) as u8, 0, (rnd() % 80) as u8];
                assert_eq!(c.lookup_cached(&k, None), c.lookup(&k), "key {k:?} after {i} inserts");
                // The same through the words-only form (ranges checked on the bytes it writes out).
                assert_eq!(c.lookup_cached_words(4, &key_words(&k)), c.lookup(&k), "words of {k:?}");
            }
        }
        // Without changes, repeated keys come from the cache (once a bypass
        // the low hit rate above may have caused is over).
        for i in 0..CACHE_BYPASS {
            let k = [0, (i % 16) as u8, 0, (i % 5) as u8];
            assert_eq!(c.lookup_cached(&k, None), c.lookup(&k));
        }
        let (hits0, misses0) = c.cache_stats().expect("a big classifier has a cache");
        for i in 0..1000u32 {
            let k = [0, (i % 16) as u8, 0, (i % 5) as u8];
            assert_eq!(c.lookup_cached(&k, Some(&key_words(&k))), c.lookup(&k));
            assert_eq!(c.lookup_cached_words(4, &key_words(&k)), c.lookup(&k));
        }
        let (hits, misses) = c.cache_stats().expect("cache");
        assert!(hits - hits0 >= 1900 && misses - misses0 <= 100, "{} hits, {} misses", hits - hits0, misses - misses0);
        // Without caching, lookups go straight to the rules.
        c.set_caching(false);
        assert_eq!(c.lookup_cached(&[0, 1, 0, 1], None), c.lookup(&[0, 1, 0, 1]));
        assert_eq!(c.cache_stats(), None);
    }

    #[test]
    fn a_cache_without_hits_is_set_aside_then_sampled_again() {
        let mut c = Classifier::new(4);
        for i in 0..100u32 {
            c.insert(i, 1, Rule::new(vec![0, i as u8, 0, 0], vec![0xff, 0xff, 0, 0]));
        }
        // Every key new: the first window misses throughout, then the cache is set aside.
        let key = |i: u32| [(i >> 8) as u8, i as u8, (i >> 16) as u8, (i >> 24) as u8];
        for i in 0..CACHE_WINDOW + 100 {
            assert_eq!(c.lookup_cached(&key(i), None), c.lookup(&key(i)));
        }
        assert_eq!(c.cache_stats(), Some((0, u64::from(CACHE_WINDOW))));
        assert_eq!(c.cache_bypassed(), 100);
        // After the bypass the cache samples again: repeated keys hit.
        for i in 0..CACHE_BYPASS - 100 + 1000 {
            let k = key(i % 4);
            assert_eq!(c.lookup_cached(&k, None), c.lookup(&k));
        }
        let (hits, _) = c.cache_stats().unwrap();
        assert!(hits >= 990, "{hits} hits after the bypass");
    }
}
