//! Match tables: the P4 semantics of entries on top of the lookup
//! structures of `sluice-lookup`.
//!
//! A key is the concatenation of its fields, each right-aligned in
//! `ceil(width/8)` big-endian bytes (a `valid` key is one byte, 0 or 1).
//! An entry's index (the low 24 bits of its handle) is what every lookup
//! structure stores and returns. The structure is chosen from the key's
//! match kinds:
//! - all exact (and valid): an [`ExactMap`] of the key bytes: keys of up
//!   to 2 bytes index a direct array, up to 8 bytes go into open
//!   addressing ([`crate::exact::OpenMap`]), longer keys into a hash map;
//! - one lpm field plus exact ones: an [`ExactMap`] (without direct array)
//!   per prefix length, probed longest first; a lone lpm field of up to
//!   32 bits gets a DIR-24-8 structure ([`crate::lpm::DirLpm`]) on top
//!   from 8 entries on (`DIR_MIN_ENTRIES`; from 1024 while a route shorter
//!   than a /10 is present, `DIR_MIN_ENTRIES_WITH_SHORT`), which lookups then read
//!   instead (the per-length maps stay: they find the route a delete
//!   uncovers);
//! - anything with ternary, range or optional fields (or several lpm
//!   fields): a [`Classifier`] of the entries' value/mask/range rules,
//!   where lower priority numbers win, then lower entry indexes (a scan up
//!   to 32 entries, tuple-space search with a lookup cache above).
//!
//! On top of that, what makes them P4 tables: handles allocated as bmv2
//! does (the lowest free index, with a per-index version, bumped on
//! delete, in the top 8 bits), duplicate and size checks, the default
//! action, direct counters (an entry's packets and bytes), idle-timeout
//! hit times, and the hot records and [`TableView`]s through which
//! generated code reads a hit without calling the engine. (A direct
//! meter's cells are no table state: they live in `crate::meters`,
//! indexed by entry index.)

use std::collections::BTreeSet;

use sluice_lookup::classifier::{self, Classifier, Rule};
use sluice_lookup::exact::{ExactMap, Layout};
use sluice_lookup::mem::ZeroedArray;

/// Match kind of one key field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchKind {
    Exact,
    Lpm,
    Ternary,
    Range,
    Valid,
    Optional,
}

impl MatchKind {
    /// From the JSON `match_type` string.
    pub fn from_name(s: &str) -> Option<MatchKind> {
        Some(match s {
            "exact" => MatchKind::Exact,
            "lpm" => MatchKind::Lpm,
            "ternary" => MatchKind::Ternary,
            "range" => MatchKind::Range,
            "valid" => MatchKind::Valid,
            "optional" => MatchKind::Optional,
            _ => return None,
        })
    }
}

/// Shape of one key field inside the key bytes.
#[derive(Debug, Clone)]
pub struct KeyFieldSpec {
    pub kind: MatchKind,
    pub width: u32,
    pub off: usize,
    pub len: usize,
}

/// One field's match value in an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldMatch {
    Exact(Vec<u8>),
    Lpm(Vec<u8>, u32),
    Ternary(Vec<u8>, Vec<u8>),
    Range(Vec<u8>, Vec<u8>),
    Valid(bool),
    /// `None` is the wildcard.
    Optional(Option<Vec<u8>>),
}

/// What an entry does on a hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryAction {
    /// An action (plan index) with its data laid out as the action expects.
    Direct { action: u32, data: Box<[u8]> },
    /// An action profile member.
    Member(u32),
    /// An action selector group.
    Group(u32),
}

/// A table entry.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The key as it matches (LPM values cut to their prefix).
    pub matches: Vec<FieldMatch>,
    pub priority: i32,
    pub action: EntryAction,
    pub packets: u64,
    pub bytes: u64,
    pub timeout_ms: Option<u64>,
    /// The key as it was added, when the table changed it (an LPM value
    /// with bits set past its prefix, which bmv2 keeps and shows back);
    /// set by the table, `None` otherwise.
    pub added_key: Option<Box<[FieldMatch]>>,
}

impl Entry {
    /// The key as the control plane gave it (what bmv2's API reads back).
    pub fn key_as_added(&self) -> &[FieldMatch] {
        self.added_key.as_deref().unwrap_or(&self.matches)
    }
}

/// The prefix length of an entry's LPM field, if it has one.
fn prefix_len(matches: &[FieldMatch]) -> Option<u32> {
    matches.iter().find_map(|m| if let FieldMatch::Lpm(_, p) = m { Some(*p) } else { None })
}

#[derive(Debug, Clone)]
enum Index {
    Exact(ExactMap),
    /// `(lpm field offset, len, width)` and maps by prefix length, longest first.
    Lpm {
        off: usize,
        len: usize,
        width: u32,
        /// `(prefix length, mask of the whole key as u128 when it fits, map)`.
        by_len: Vec<(u32, u128, ExactMap)>,
        /// Direct-indexed lookups for a lone key field of at most 32 bits,
        /// built on the first insert; shared copy-on-write between a table
        /// and its copies (workers' replicas make their own on their first change).
        dir: Option<std::sync::Arc<crate::lpm::DirLpm>>,
    },
    /// Ternary, range and optional fields (or several lpm fields): a
    /// classifier of the entries' flat value/mask/range rules, by entry
    /// index and priority.
    Tuples(Classifier),
}

/// LPM tables with a lone key field of up to 32 bits get a direct-indexed
/// structure from this many entries on. Below, a table is probed per prefix
/// length (a helper call from compiled code), and a lone 0.0.0.0/0 does
/// not make a switch paint 64 MiB; from 8 routes on, the inline DIR-24-8
/// lookup measured faster (router example, 10 routes: 12.4 to 15.1 Mpps).
const DIR_MIN_ENTRIES: usize = 8;

/// A route that paints more than this many top-level slots of the
/// direct-indexed structure (`2^(24 - plen)` for 32-bit keys: shorter than
/// a /10) is a short one: a default route paints all 16 Mi slots, 64 MiB
/// per array and per copy. While a table has one, it gets the structure
/// only from [`DIR_MIN_ENTRIES_WITH_SHORT`] entries on, so a small routing
/// table with a default route (a fabric switch) stays a few hundred
/// kilobytes and a large one pays the painting once for its speed.
const SHORT_ROUTE_SLOTS: u64 = 1 << 14;
const DIR_MIN_ENTRIES_WITH_SHORT: usize = 1024;

/// From this many entries on, the structure's top level is moved into
/// huge pages (fewer TLB misses on a large table; below, one touched slot
/// would make the kernel fault in 2 MiB; see `DirLpm::use_huge_pages`).
const HUGE_MIN_ENTRIES: usize = 4096;

/// Whether a route of prefix length `plen` on a key of `width` bits is short (see [`SHORT_ROUTE_SLOTS`]).
fn short_route(width: u32, plen: u32) -> bool {
    let top = width.min(24);
    plen < top && (1u64 << (top - plen)) > SHORT_ROUTE_SLOTS
}

/// Why a table operation failed (names follow bmv2's runtime error codes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableError {
    DuplicateEntry(u32),
    InvalidHandle,
    /// The handle's index is in use by a newer entry (bmv2's EXPIRED_HANDLE).
    ExpiredHandle,
    TableFull,
    BadMatchKey(String),
}

impl std::fmt::Display for TableError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TableError::DuplicateEntry(h) => write!(f, "DUPLICATE_ENTRY (existing handle {h})"),
            TableError::InvalidHandle => write!(f, "INVALID_HANDLE"),
            TableError::ExpiredHandle => write!(f, "EXPIRED_HANDLE"),
            TableError::TableFull => write!(f, "TABLE_FULL"),
            TableError::BadMatchKey(m) => write!(f, "BAD_MATCH_KEY: {m}"),
        }
    }
}

/// [`HotEntry::len`] of an entry pointing to a profile member (id in `data[..4]`).
const HOT_MEMBER: u8 = 254;
/// [`HotEntry::len`] of an entry pointing to a selector group (id in `data[..4]`).
const HOT_GROUP: u8 = 255;

/// Byte offset of [`HotEntry::data`] (after the `u32` action and the `u8` length).
pub const HOT_DATA_OFFSET: i32 = 5;
/// log2 of a [`HotEntry`]'s size: compiled code finds record `r` at `r << HOT_RECORD_SHIFT`.
pub const HOT_RECORD_SHIFT: i64 = 6;
const _: () =
    assert!(std::mem::size_of::<HotEntry>() == 1 << HOT_RECORD_SHIFT && std::mem::align_of::<HotEntry>() == 64);

/// [`TableView::kind`]: compiled code calls the engine for the lookup.
pub const VIEW_ENGINE: u32 = 0;
/// [`TableView::kind`]: an exact key indexes `a`, hot record ids (`len`
/// slots, 0 for no entry), and `b`, the keys' own copies of their hot
/// records ([`DirectRows`]: generated code reads a hit's record with no
/// record id in between); both have one slot for every value of the
/// table's key bytes (`2^(8 * key_len)`), which compiled code relies on to
/// read a key of no more bits without a bounds check.
pub const VIEW_DIRECT: u32 = 1;
/// [`TableView::kind`]: DIR-24-8 of hot record ids (`a` = top level, `b` =
/// extension groups, `shift` = low bits; see [`crate::lpm::DirLpm::raw_parts`]).
pub const VIEW_DIR: u32 = 2;
/// [`TableView::kind`]: an exact key of at most 64 bits in a
/// [`crate::exact::OpenMap`] (`a` = its 16-byte slots, hot record id at
/// offset 12, `len` = slot count minus one, `shift` = its hash shift).
pub const VIEW_HASH: u32 = 3;

/// The hit records of a direct-array table, one row per key, where
/// generated code reads a key's record straight from the key (`b` of its
/// [`VIEW_DIRECT`] view) instead of its record id first and the record
/// then. Why: a link less in the chain of dependent loads a lookup is; the
/// router's next-hop table, whose key the route table's action has just
/// written, ran 2-3% faster with it at every route count (`bench/ab.sh`,
/// four alternating 2 s turns).
///
/// A row is the key's [`HotEntry`] with its action plus one, so that the
/// zero row of a key without entry reads as action `u32::MAX`, the cold
/// record's (to the engine), and the rows live in a [`ZeroedArray`]: a
/// table of a few entries takes a few pages of its 4 MiB (16-bit keys).
/// `written` marks the rows written, for copies.
struct DirectRows {
    rows: ZeroedArray<HotEntry>,
    written: Vec<u64>,
}

impl DirectRows {
    fn new(keys: usize) -> DirectRows {
        // SAFETY: all-zero bytes are a valid `HotEntry` (plain integers).
        let rows = unsafe { ZeroedArray::new(keys) };
        DirectRows { rows, written: vec![0; keys.div_ceil(64)] }
    }

    /// The row of exact key `key` (its bytes, as the direct array reads them).
    fn row_of(key: &[u8]) -> usize {
        crate::value::be_to_u128(key) as usize
    }

    /// Key `key`'s row for hot record `h` (the cold record: a zero row).
    fn set(&mut self, key: &[u8], h: &HotEntry) {
        if *h == HotEntry::COLD {
            return self.clear(key);
        }
        let k = Self::row_of(key);
        self.rows.set(k, HotEntry { action: h.action.wrapping_add(1), ..*h });
        self.written[k / 64] |= 1 << (k % 64);
    }

    fn clear(&mut self, key: &[u8]) {
        let k = Self::row_of(key);
        if self.written[k / 64] & 1 << (k % 64) != 0 {
            // SAFETY: zero bytes are a valid `HotEntry`.
            self.rows.set(k, unsafe { std::mem::zeroed() });
            self.written[k / 64] &= !(1 << (k % 64));
        }
    }

    /// Key `k`'s record as a lookup finds it (the row's action minus one).
    #[cfg(test)]
    fn record(&self, k: usize) -> HotEntry {
        let r = self.rows.get(k);
        HotEntry { action: r.action.wrapping_sub(1), ..r }
    }
}

impl Clone for DirectRows {
    /// Copies the rows written only (the rest stay unbacked zeros).
    fn clone(&self) -> DirectRows {
        let mut c = DirectRows::new(self.rows.len());
        for (w, bits) in self.written.iter().enumerate() {
            let mut b = *bits;
            while b != 0 {
                let k = w * 64 + b.trailing_zeros() as usize;
                c.rows.set(k, self.rows.get(k));
                b &= b - 1;
            }
        }
        c.written.clone_from(&self.written);
        c
    }
}

impl std::fmt::Debug for DirectRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n: u32 = self.written.iter().map(|w| w.count_ones()).sum();
        write!(f, "DirectRows({n} of {} written)", self.rows.len())
    }
}

/// One table's lookup structure as compiled code reads it: raw pointers into
/// the [`TableState`], so that generated code looks a direct array, a
/// DIR-24-8 or open addressing up and reads the hit's [`HotEntry`] without a
/// call. Every kind yields a hot record id straight away (0, the cold
/// record, for no entry), not an entry index: one dependent load less per
/// lookup.
///
/// Invariant: a view is valid until its table next changes; the switch
/// checks its views at the start of every packet or batch it processes
/// (rebuilding those whose table's [`TableState::view_stamp`] changed),
/// and tables only change between those (control-plane writes).
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct TableView {
    pub kind: u32,
    pub shift: u32,
    pub a: *const u32,
    pub b: *const u32,
    pub len: u64,
    /// The table's distinct hot records by id (see [`HotRecords`]).
    pub hot: *const HotEntry,
}

// SAFETY: a view is plain data; the pointers are only dereferenced by the
// compiled code of the switch that owns the tables, on that switch's thread.
unsafe impl Send for TableView {}

impl TableView {
    /// A view that sends every lookup to the engine.
    pub const ENGINE: TableView = TableView {
        kind: VIEW_ENGINE,
        shift: 0,
        a: std::ptr::null(),
        b: std::ptr::null(),
        len: 0,
        hot: std::ptr::null(),
    };
}

/// Up to this many distinct hot records (256 KiB) a table's records are
/// taken to stay in cache, and batches do not prefetch them.
const CACHED_RECORDS: usize = 4096;

/// Bytes of action data a [`HotEntry`] holds inline (the rest of its array is
/// zero padding, so parameter reads can load fixed 16-byte windows).
pub const HOT_DATA: usize = 27;

/// What a lookup hit needs of a direct-action entry, in one 64-byte record
/// kept apart from the control-plane fields: a hit then touches one cache
/// line instead of the entry, its match list and its heap-allocated data.
///
/// `#[repr(C)]`: compiled code reads `action` at offset 0 and the data at
/// offset 5 (see [`TableView`]). Aligned to 64 bytes: each record is one
/// whole cache line (48-byte records straddled two lines one time in
/// three), and compiled code finds record `r` with a shift rather than a
/// multiplication, one link shorter in the chain of dependent loads a
/// lookup is (router, 64 B, one worker, `bench/ab.sh`, two runs of
/// alternating 2 s turns: 1.02-1.03x at 10 routes, 0.99-1.03x at 10 000,
/// 1.01x at a million).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C, align(64))]
pub struct HotEntry {
    /// Plan index of the action, or `u32::MAX` when the entry must take the
    /// full path (profile member or group, or more than `HOT_DATA` bytes).
    pub action: u32,
    pub len: u8,
    /// Action data followed by zeros.
    pub data: [u8; HOT_DATA + 16],
}

impl HotEntry {
    /// The record of an entry that has none.
    pub const COLD: HotEntry = HotEntry { action: u32::MAX, len: 0, data: [0; HOT_DATA + 16] };

    fn of(action: &EntryAction) -> HotEntry {
        match action {
            EntryAction::Direct { action, data } if data.len() <= HOT_DATA => {
                let mut h = HotEntry { action: *action, len: data.len() as u8, data: [0; HOT_DATA + 16] };
                h.data[..data.len()].copy_from_slice(data);
                h
            }
            EntryAction::Member(id) | EntryAction::Group(id) => {
                let mut h = HotEntry::COLD;
                h.len = if matches!(action, EntryAction::Group(_)) { HOT_GROUP } else { HOT_MEMBER };
                h.data[..4].copy_from_slice(&id.to_le_bytes());
                h
            }
            _ => HotEntry::COLD,
        }
    }

    /// For an indirect entry: `(is a group, member or group id)`. Why: the
    /// packet path then reads the (prefetched) hot record, not the entry.
    pub fn indirect(&self) -> Option<(bool, u32)> {
        if self.action != u32::MAX || self.len < HOT_MEMBER {
            return None;
        }
        let id = u32::from_le_bytes(self.data[..4].try_into().expect("4 bytes"));
        Some((self.len == HOT_GROUP, id))
    }
}

/// A table's hot records, one per distinct (action, data) rather than one
/// per entry, with each entry index naming its record.
///
/// Why: route tables hold a million entries but a few dozen next hops. With
/// a record per entry, a hit read a random 64-byte record out of 64 MB (a
/// cache miss after the index's own); shared, the records stay in cache and
/// the per-entry part is a 4-byte id.
#[derive(Debug, Clone)]
struct HotRecords {
    /// Per entry index: its record's id (0: the cold record).
    of: Vec<u32>,
    /// Records by id; id 0 is [`HotEntry::COLD`].
    records: Vec<HotEntry>,
    /// Per record id: how many entry indexes name it.
    refs: Vec<u32>,
    ids: hashbrown::HashMap<HotEntry, u32>,
    free: Vec<u32>,
}

impl HotRecords {
    fn new() -> HotRecords {
        HotRecords {
            of: Vec::new(),
            records: vec![HotEntry::COLD],
            refs: vec![0],
            ids: hashbrown::HashMap::new(),
            free: Vec::new(),
        }
    }

    fn get(&self, idx: u32) -> &HotEntry {
        &self.records[self.of.get(idx as usize).copied().unwrap_or(0) as usize]
    }

    /// Gives entry index `idx` (already pushed to `of`) the record `h`.
    fn set(&mut self, idx: u32, h: HotEntry) {
        let old = std::mem::take(&mut self.of[idx as usize]);
        if old != 0 {
            self.refs[old as usize] -= 1;
            if self.refs[old as usize] == 0 {
                self.ids.remove(&self.records[old as usize]);
                self.free.push(old);
            }
        }
        if h == HotEntry::COLD {
            return;
        }
        let id = match self.ids.get(&h) {
            Some(id) => *id,
            None => {
                let id = match self.free.pop() {
                    Some(id) => {
                        self.records[id as usize] = h;
                        id
                    }
                    None => {
                        self.records.push(h);
                        self.refs.push(0);
                        (self.records.len() - 1) as u32
                    }
                };
                self.ids.insert(h, id);
                id
            }
        };
        self.refs[id as usize] += 1;
        self.of[idx as usize] = id;
    }
}

/// The run-time state of one match table.
#[derive(Debug, Clone)]
pub struct TableState {
    pub key: Vec<KeyFieldSpec>,
    pub key_len: usize,
    pub max_size: usize,
    /// Entries by index (the low 24 bits of a handle).
    pub entries: Vec<Option<Entry>>,
    /// Per-index hot record, parallel to `entries`.
    hot: HotRecords,
    /// Per index: when the entry was last hit, µs on its switch's clock
    /// (0: not since it was added). Kept only for tables with idle timeouts.
    last_hit: Vec<u64>,
    /// Per-index version, bumped on delete; bmv2 puts it in a handle's top 8 bits.
    versions: Vec<u8>,
    free: BTreeSet<u32>,
    count: usize,
    index: Index,
    /// The keys' hot records, for a direct-array exact index (see [`DirectRows`]).
    rows: Option<DirectRows>,
    /// The current default action.
    pub default: Option<(u32, Box<[u8]>)>,
    /// Packets/bytes counted on misses are not kept (bmv2 has no miss counter).
    pub needs_priority: bool,
    /// Whether lookup accelerators (the direct-indexed LPM, the
    /// classifier's lookup cache) are kept; off for throwaway copies that
    /// never look packets up.
    accelerate: bool,
    /// Changes whenever what [`TableState::view`] points at may move.
    stamp: ViewStamp,
}

/// A number no table state has had before: taken afresh by every change
/// that may move what a [`TableView`] points at, and by every clone. Why:
/// the switch rebuilds a table's view only when its stamp changed, instead
/// of every view at the start of every batch.
#[derive(Debug)]
struct ViewStamp(u64);

/// The next [`ViewStamp`] to issue, process-wide.
static NEXT_STAMP: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl ViewStamp {
    fn fresh() -> ViewStamp {
        ViewStamp(NEXT_STAMP.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }
}

/// How many view stamps were issued so far, process-wide: while it stays
/// the same, no table anywhere changed in a way that moves its view.
#[inline]
pub fn stamps_issued() -> u64 {
    NEXT_STAMP.load(std::sync::atomic::Ordering::Relaxed)
}

impl Clone for ViewStamp {
    /// A copy is another table: its views point elsewhere.
    fn clone(&self) -> ViewStamp {
        ViewStamp::fresh()
    }
}

impl TableState {
    /// An empty table for the given key shape.
    pub fn new(key: Vec<KeyFieldSpec>, max_size: usize) -> TableState {
        let key_len = key.iter().map(|k| k.len).sum();
        let needs_priority =
            key.iter().any(|k| matches!(k.kind, MatchKind::Ternary | MatchKind::Range | MatchKind::Optional));
        let lpm: Vec<&KeyFieldSpec> = key.iter().filter(|k| k.kind == MatchKind::Lpm).collect();
        let index = if needs_priority || lpm.len() > 1 {
            Index::Tuples(Classifier::new(key_len))
        } else if let Some(l) = lpm.first() {
            Index::Lpm { off: l.off, len: l.len, width: l.width, by_len: Vec::new(), dir: None }
        } else {
            Index::Exact(ExactMap::new(key.iter().map(|k| k.len).sum()))
        };
        let rows = match &index {
            Index::Exact(m) => match m.layout() {
                Layout::Direct { records } => Some(DirectRows::new(records.len())),
                _ => None,
            },
            _ => None,
        };
        TableState {
            key,
            key_len,
            max_size,
            entries: Vec::new(),
            hot: HotRecords::new(),
            last_hit: Vec::new(),
            versions: Vec::new(),
            free: BTreeSet::new(),
            count: 0,
            index,
            rows,
            default: None,
            needs_priority,
            accelerate: true,
            stamp: ViewStamp::fresh(),
        }
    }

    /// Drops lookup accelerators and stops keeping them: for copies that only
    /// try control-plane changes (lookups stay correct, through the maps).
    pub fn without_accelerators(&mut self) {
        self.stamp = ViewStamp::fresh();
        self.accelerate = false;
        self.rows = None;
        match &mut self.index {
            Index::Lpm { dir, .. } => *dir = None,
            Index::Tuples(c) => c.set_caching(false),
            Index::Exact(_) => {}
        }
    }

    /// Prefetches what a lookup of this integer key will read, when the
    /// table has a direct-indexed structure (a hint; no effect on results).
    /// `compiled`: for generated code, which reads the record slots.
    #[inline]
    pub fn prefetch_u128(&self, k: u128, compiled: bool) {
        if let Index::Lpm { dir: Some(d), .. } = &self.index {
            d.prefetch(k as u32, compiled);
        }
    }

    /// [`TableState::prefetch_u128`] for a batch's keys (every
    /// `stride`-th word of `keys`, from the first), then the hit records
    /// (see [`TableState::prefetch_hit_u128`]; for generated code only when
    /// they do not stay in cache). `compiled` as there. Why per batch: the
    /// table's index kind and record count are looked at once, not per packet.
    pub fn prefetch_words(&self, keys: &[u64], stride: usize, compiled: bool) {
        let Index::Lpm { dir: Some(d), .. } = &self.index else { return };
        for &k in keys.iter().step_by(stride) {
            d.prefetch(k as u32, compiled);
        }
        // Generated code's records mostly stay in cache: then nothing to do.
        if !compiled || self.hot.records.len() > CACHED_RECORDS {
            for &k in keys.iter().step_by(stride) {
                self.prefetch_hit_u128(u128::from(k), compiled);
            }
        }
    }

    /// The index slots to prefetch for generated code's lookups, when
    /// that is all [`TableState::prefetch_words`] would do for it (a
    /// direct-indexed table whose hit records stay in cache). Why: a batch
    /// then prefetches each key's slot without a table match per key.
    pub fn slot_prefetch(&self) -> Option<crate::lpm::SlotPrefetch<'_>> {
        match &self.index {
            Index::Lpm { dir: Some(d), .. } if self.hot.records.len() <= CACHED_RECORDS => Some(d.slots(true)),
            _ => None,
        }
    }

    /// Prefetches the hot record of the entry this integer key hits, when
    /// the table has a direct-indexed structure (call after
    /// [`TableState::prefetch_u128`] with the same `compiled`).
    #[inline]
    pub fn prefetch_hit_u128(&self, k: u128, compiled: bool) {
        if let Index::Lpm { dir: Some(d), .. } = &self.index {
            if compiled {
                // Few records stay in cache: reading the slot for its record
                // id would only wait for the slot.
                if self.hot.records.len() > CACHED_RECORDS {
                    crate::lpm::prefetch(&self.hot.records[d.record(k as u32) as usize]);
                }
            } else if let Some(h) = d.lookup(k as u32) {
                if let Some(r) = self.hot.of.get(h as usize) {
                    crate::lpm::prefetch(r);
                }
            }
        }
    }

    /// How lookups are done now, in words (for `sluice inspect`).
    pub fn index_kind(&self) -> String {
        match &self.index {
            Index::Exact(m) => match m.layout() {
                Layout::Direct { .. } => "exact: direct array".into(),
                Layout::Open(_) => "exact: open addressing (linear probing)".into(),
                Layout::Hashed => "exact: hash map".into(),
            },
            Index::Lpm { dir: Some(_), .. } => "lpm: direct-indexed (DIR-24-8), one or two reads".into(),
            Index::Lpm { by_len, .. } => format!(
                "lpm: a hash probe per prefix length ({} now){}",
                by_len.len(),
                if self.key.len() == 1 && self.key[0].width <= 32 {
                    format!("; direct-indexed from {DIR_MIN_ENTRIES} entries")
                } else {
                    String::new()
                }
            ),
            Index::Tuples(c) if c.scans() => {
                format!(
                    "ternary/range: priority-ordered scan ({} entries; tuple space above {})",
                    self.count,
                    classifier::SCAN_MAX
                )
            }
            Index::Tuples(c) => {
                format!(
                    "ternary/range: tuple-space search over {} masks (entries of more specific masks merged in), ranges hashed on their bounds' common prefix",
                    c.tuple_count()
                )
            }
        }
    }

    /// Number of installed entries.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when no entry is installed.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Looks up a key of at most 16 bytes given as an integer (the key bytes
    /// read big-endian). `None` when this table's index needs byte keys.
    #[inline]
    pub fn lookup_u128(&self, k: u128) -> Option<Option<u32>> {
        match &self.index {
            Index::Exact(m) => m.get_int(k),
            Index::Lpm { dir: Some(d), .. } => Some(d.lookup(k as u32)),
            Index::Lpm { by_len, .. } if self.key_len <= 16 => Some(lpm_probe(by_len, k)),
            _ => None,
        }
    }

    /// [`TableState::lookup`] through the table's lookup cache, for big
    /// ternary/range tables; other tables are looked up directly.
    /// `words`: the key as [`classifier::key_words`] reads it, when the caller built
    /// it on the way (else it is read from `key`).
    #[inline]
    pub fn lookup_cached(&mut self, key: &[u8], words: Option<&[u64; 4]>) -> Option<u32> {
        match &mut self.index {
            Index::Tuples(c) => c.lookup_cached(key, words),
            _ => self.lookup_words(key, words),
        }
    }

    /// [`TableState::lookup_cached`] of a key of `len` bytes (at most
    /// [`sluice_lookup::classifier::WORD_KEY_BYTES`]) given only as words:
    /// its bytes are written out only when the lookup needs them (not for
    /// a lookup cache hit).
    #[inline]
    pub fn lookup_cached_words(&mut self, len: usize, words: &[u64; 4]) -> Option<u32> {
        match &mut self.index {
            Index::Tuples(c) => c.lookup_cached_words(len, words),
            _ => {
                let b = classifier::word_bytes(words);
                self.lookup_words(&b[..len.min(b.len())], Some(words))
            }
        }
    }

    /// The lookup cache's `(hits, misses)`, when the table has one.
    pub fn cache_stats(&self) -> Option<(u64, u64)> {
        match &self.index {
            Index::Tuples(c) => c.cache_stats(),
            _ => None,
        }
    }

    /// Lookups that skipped the lookup cache while its hit rate was low.
    pub fn cache_bypassed(&self) -> u64 {
        match &self.index {
            Index::Tuples(c) => c.cache_bypassed(),
            _ => 0,
        }
    }

    /// Looks a key up; returns the hit entry index (see `handle_of`).
    #[inline]
    pub fn lookup(&self, key: &[u8]) -> Option<u32> {
        self.lookup_words(key, None)
    }

    /// [`TableState::lookup`] given the key's [`classifier::key_words`] when known.
    #[inline]
    fn lookup_words(&self, key: &[u8], known_words: Option<&[u64; 4]>) -> Option<u32> {
        match &self.index {
            Index::Exact(m) => m.get(key),
            Index::Lpm { dir: Some(d), .. } => d.lookup(crate::value::be_to_u128(key) as u32),
            Index::Lpm { off, len, width, by_len, .. } => {
                if by_len.is_empty() {
                    return None;
                }
                if key.len() <= 16 {
                    return lpm_probe(by_len, crate::value::be_to_u128(key));
                }
                let mut buf = [0u8; 64];
                let mut heap = Vec::new();
                let k: &mut [u8] = if key.len() <= buf.len() {
                    &mut buf[..key.len()]
                } else {
                    heap.resize(key.len(), 0);
                    &mut heap
                };
                for (plen, _, m) in by_len {
                    k.copy_from_slice(key);
                    apply_prefix(&mut k[*off..*off + *len], *width, *plen);
                    if let Some(h) = m.get(k) {
                        return Some(h);
                    }
                }
                None
            }
            Index::Tuples(c) => c.lookup_words(key, known_words),
        }
    }

    fn exact_key(&self, matches: &[FieldMatch]) -> Vec<u8> {
        let mut k = vec![0u8; self.key_len];
        for (spec, m) in self.key.iter().zip(matches) {
            let dst = &mut k[spec.off..spec.off + spec.len];
            match m {
                FieldMatch::Exact(v) | FieldMatch::Lpm(v, _) => copy_right(dst, v),
                FieldMatch::Valid(b) => dst[dst.len() - 1] = *b as u8,
                _ => {}
            }
        }
        if let Index::Lpm { off, len, width, .. } = &self.index {
            let plen = prefix_len(matches).unwrap_or(*width);
            apply_prefix(&mut k[*off..*off + *len], *width, plen);
        }
        k
    }

    /// The classifier rule of an entry's match: each field's value under
    /// its mask in the key bytes (exact, lpm and optional fields as the
    /// masks they amount to), range fields as bounds.
    fn rule_of(&self, matches: &[FieldMatch]) -> Rule {
        let mut value = vec![0u8; self.key_len];
        let mut mask = vec![0u8; self.key_len];
        let mut ranges = Vec::new();
        for (spec, m) in self.key.iter().zip(matches) {
            let (v, mk) = (&mut value[spec.off..spec.off + spec.len], &mut mask[spec.off..spec.off + spec.len]);
            match m {
                FieldMatch::Exact(x) | FieldMatch::Optional(Some(x)) => {
                    copy_right(v, x);
                    full_mask(mk, spec.width);
                }
                FieldMatch::Optional(None) => {}
                FieldMatch::Lpm(x, p) => {
                    copy_right(v, x);
                    full_mask(mk, spec.width);
                    apply_prefix(mk, spec.width, *p);
                }
                FieldMatch::Ternary(x, m) => {
                    copy_right(v, x);
                    copy_right(mk, m);
                }
                FieldMatch::Valid(b) => {
                    v[spec.len - 1] = *b as u8;
                    mk[spec.len - 1] = 1;
                }
                FieldMatch::Range(lo, hi) => {
                    let mut l = vec![0u8; spec.len];
                    let mut h = vec![0u8; spec.len];
                    copy_right(&mut l, lo);
                    copy_right(&mut h, hi);
                    ranges.push((spec.off, l, h));
                }
            }
        }
        let mut rule = Rule::new(value, mask);
        for (off, lo, hi) in ranges {
            rule.add_range(off, lo, hi);
        }
        rule
    }

    /// Finds an installed entry with the same match (and priority, where it matters).
    pub fn find(&self, matches: &[FieldMatch], priority: i32) -> Option<u32> {
        match &self.index {
            Index::Exact(m) => m.get(&self.exact_key(matches)),
            Index::Lpm { by_len, .. } => {
                let plen = prefix_len(matches)?;
                let k = self.exact_key(matches);
                by_len.iter().find(|(l, _, _)| *l == plen).and_then(|(_, _, m)| m.get(&k))
            }
            Index::Tuples(c) => c.find(priority, &self.rule_of(matches)),
        }
    }

    /// Adds an entry; returns its handle.
    pub fn add(&mut self, mut e: Entry) -> Result<u32, TableError> {
        self.stamp = ViewStamp::fresh();
        if e.matches.len() != self.key.len() {
            return Err(TableError::BadMatchKey(format!(
                "expected {} key fields, got {}",
                self.key.len(),
                e.matches.len()
            )));
        }
        // Canonicalize values to the field widths.
        // LPM values as given, where cutting them to their prefix changed them.
        let mut given_lpm: Vec<(usize, Vec<u8>)> = Vec::new();
        for (i, (spec, m)) in self.key.iter().zip(e.matches.iter_mut()).enumerate() {
            match m {
                FieldMatch::Exact(v) | FieldMatch::Optional(Some(v)) | FieldMatch::Lpm(v, _) => {
                    refit(v, spec.len, spec.width)
                }
                FieldMatch::Ternary(v, mk) => {
                    refit(mk, spec.len, spec.width);
                    refit(v, spec.len, spec.width);
                    for (a, b) in v.iter_mut().zip(mk.iter()) {
                        *a &= *b;
                    }
                }
                FieldMatch::Range(a, b) => {
                    refit(a, spec.len, spec.width);
                    refit(b, spec.len, spec.width);
                }
                _ => {}
            }
            if let FieldMatch::Lpm(v, p) = m {
                if *p > spec.width {
                    return Err(TableError::BadMatchKey(format!("prefix length {p} exceeds width {}", spec.width)));
                }
                let given = v.clone();
                apply_prefix(v, spec.width, *p);
                if *v != given {
                    given_lpm.push((i, given));
                }
            }
        }
        e.added_key = None;
        if !given_lpm.is_empty() {
            let mut key = e.matches.clone();
            for (i, given) in given_lpm {
                if let FieldMatch::Lpm(v, _) = &mut key[i] {
                    *v = given;
                }
            }
            e.added_key = Some(key.into_boxed_slice());
        }
        if let Some(h) = self.find(&e.matches, e.priority) {
            return Err(TableError::DuplicateEntry(self.handle_of(h)));
        }
        if self.count >= self.max_size {
            return Err(TableError::TableFull);
        }
        let handle = match self.free.pop_first() {
            Some(h) => h,
            None => {
                self.entries.push(None);
                self.hot.of.push(0);
                self.last_hit.push(0);
                (self.entries.len() - 1) as u32
            }
        };
        self.last_hit[handle as usize] = 0;
        // The hot record first: the indexes below write its id where
        // generated code reads it.
        self.hot.set(handle, HotEntry::of(&e.action));
        let record = self.hot.of[handle as usize];
        match &mut self.index {
            Index::Tuples(_) => {
                let rule = self.rule_of(&e.matches);
                if let Index::Tuples(c) = &mut self.index {
                    c.insert(handle, e.priority, rule);
                }
            }
            _ => {
                let k = self.exact_key(&e.matches);
                let key_len = self.key_len;
                let mask_of = |off: usize, len: usize, width: u32, plen: u32| -> u128 {
                    let mut m = vec![0xffu8; key_len];
                    apply_prefix(&mut m[off..off + len], width, plen);
                    if key_len <= 16 {
                        crate::value::be_to_u128(&m)
                    } else {
                        0
                    }
                };
                match &mut self.index {
                    Index::Exact(m) => {
                        m.insert(&k, handle);
                        m.set_record(&k, record);
                        if let Some(d) = &mut self.rows {
                            d.set(&k, &self.hot.records[record as usize]);
                        }
                    }
                    Index::Lpm { off, len, width, by_len, dir } => {
                        let plen = prefix_len(&e.matches).unwrap_or(*width);
                        let pos = match by_len.iter().position(|(l, _, _)| *l <= plen) {
                            Some(p) if by_len[p].0 == plen => p,
                            Some(p) => {
                                by_len.insert(p, (plen, mask_of(*off, *len, *width, plen), ExactMap::hashed(key_len)));
                                p
                            }
                            None => {
                                by_len.push((plen, mask_of(*off, *len, *width, plen), ExactMap::hashed(key_len)));
                                by_len.len() - 1
                            }
                        };
                        by_len[pos].2.insert(&k, handle);
                        let fits = self.key.len() == 1 && *width <= 32 && handle <= crate::lpm::MAX_INDEX;
                        let count = self.count + 1;
                        // Asked only when building: whether a short route is in the table.
                        let has_short = || by_len.iter().any(|(l, _, m)| short_route(*width, *l) && !m.is_empty());
                        let short_small = short_route(*width, plen) && count < DIR_MIN_ENTRIES_WITH_SHORT;
                        if !fits || !self.accelerate || (dir.is_some() && short_small) {
                            // An index past what the structure holds, or a short route
                            // in a table too small for what it would paint: the maps alone.
                            *dir = None;
                        } else {
                            if let Some(d) = dir {
                                let d = std::sync::Arc::make_mut(d);
                                d.insert(crate::value::be_to_u128(&k) as u32, plen, handle, record);
                                if count >= HUGE_MIN_ENTRIES {
                                    d.use_huge_pages();
                                }
                            } else if count >= DIR_MIN_ENTRIES && (count >= DIR_MIN_ENTRIES_WITH_SHORT || !has_short())
                            {
                                // Small tables probe the maps; from this size on, every
                                // entry (this one included) goes into the direct index.
                                let mut d = if count >= HUGE_MIN_ENTRIES {
                                    crate::lpm::DirLpm::new_huge(*width)
                                } else {
                                    crate::lpm::DirLpm::new(*width)
                                };
                                for (l, _, m) in by_len.iter().rev() {
                                    m.for_each_int(|key, h| d.insert(key as u32, *l, h, self.hot.of[h as usize]));
                                }
                                *dir = Some(std::sync::Arc::new(d));
                            }
                        }
                    }
                    Index::Tuples(_) => unreachable!(),
                }
            }
        }
        e.packets = 0;
        e.bytes = 0;
        self.entries[handle as usize] = Some(e);
        self.count += 1;
        if self.versions.len() <= handle as usize {
            self.versions.resize(handle as usize + 1, 0);
        }
        Ok(self.handle_of(handle))
    }

    /// The handle users see for entry index `idx`: `version << 24 | idx`, as bmv2.
    pub fn handle_of(&self, idx: u32) -> u32 {
        (u32::from(self.versions.get(idx as usize).copied().unwrap_or(0)) << 24) | idx
    }

    /// The entry index behind a handle, checking that the handle is current.
    pub fn index_of(&self, handle: u32) -> Result<u32, TableError> {
        let idx = handle & 0x00ff_ffff;
        match self.entries.get(idx as usize) {
            Some(Some(_)) if self.handle_of(idx) == handle => Ok(idx),
            Some(Some(_)) => Err(TableError::ExpiredHandle),
            _ => Err(TableError::InvalidHandle),
        }
    }

    /// Removes an entry by handle.
    pub fn delete(&mut self, handle: u32) -> Result<Entry, TableError> {
        let idx = self.index_of(handle)?;
        let e = self.delete_index(idx)?;
        self.versions[idx as usize] = self.versions[idx as usize].wrapping_add(1);
        Ok(e)
    }

    /// Removes the entry at an index.
    fn delete_index(&mut self, handle: u32) -> Result<Entry, TableError> {
        self.stamp = ViewStamp::fresh();
        let e = self.entries.get_mut(handle as usize).and_then(|e| e.take()).ok_or(TableError::InvalidHandle)?;
        self.hot.set(handle, HotEntry::COLD);
        let k = self.exact_key(&e.matches);
        match &mut self.index {
            Index::Exact(m) => {
                m.remove(&k);
                if let Some(d) = &mut self.rows {
                    d.clear(&k);
                }
            }
            Index::Lpm { by_len, dir, .. } => {
                let mut plen = None;
                for (l, _, m) in by_len.iter_mut() {
                    if m.get(&k) == Some(handle) {
                        m.remove(&k);
                        plen = Some(*l);
                    }
                }
                by_len.retain(|(_, _, m)| !m.is_empty());
                if let (Some(d), Some(plen)) = (dir.as_mut(), plen) {
                    let key = crate::value::be_to_u128(&k);
                    let cover = by_len
                        .iter()
                        .filter(|(l, _, _)| *l < plen)
                        .find_map(|(l, mask, m)| m.get_int(key & mask).flatten().map(|h| (h, *l)))
                        .map(|(h, l)| (h, l, self.hot.of[h as usize]));
                    std::sync::Arc::make_mut(d).remove(key as u32, plen, handle, cover);
                }
                if by_len.is_empty() {
                    *dir = None;
                }
            }
            Index::Tuples(c) => {
                c.remove(handle);
            }
        }
        self.free.insert(handle);
        self.count -= 1;
        Ok(e)
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.stamp = ViewStamp::fresh();
        let handles: Vec<u32> =
            self.entries.iter().enumerate().filter(|(_, e)| e.is_some()).map(|(h, _)| h as u32).collect();
        for h in handles {
            let _ = self.delete(self.handle_of(h));
        }
        self.entries.clear();
        self.hot = HotRecords::new();
        self.free.clear();
    }

    /// Every live entry with its current handle (for dumps and reads).
    pub fn entries(&self) -> impl Iterator<Item = (u32, &Entry)> + '_ {
        self.entries.iter().enumerate().filter_map(|(i, e)| e.as_ref().map(|e| (self.handle_of(i as u32), e)))
    }

    /// The entry behind a (current) handle.
    pub fn get(&self, handle: u32) -> Option<&Entry> {
        let idx = self.index_of(handle).ok()?;
        self.entries[idx as usize].as_ref()
    }

    /// Changes the action of the entry behind a (current) handle.
    pub fn set_action(&mut self, handle: u32, action: EntryAction) -> Result<(), TableError> {
        self.stamp = ViewStamp::fresh();
        let idx = self.index_of(handle)?;
        self.hot.set(idx, HotEntry::of(&action));
        if let Some(e) = self.entries[idx as usize].as_mut() {
            e.action = action;
        }
        self.paint_record(idx);
        Ok(())
    }

    /// Writes live entry `idx`'s hot record id where generated code reads
    /// it (direct array, open-addressing slot or DIR-24-8 record slots), after
    /// its record changed.
    fn paint_record(&mut self, idx: u32) {
        let Some(e) = self.entries.get(idx as usize).and_then(|e| e.as_ref()) else { return };
        let record = self.hot.of[idx as usize];
        let k = self.exact_key(&e.matches);
        let plen = prefix_len(&e.matches);
        match &mut self.index {
            Index::Exact(m) => {
                m.set_record(&k, record);
                if let Some(d) = &mut self.rows {
                    d.set(&k, &self.hot.records[record as usize]);
                }
            }
            Index::Lpm { dir: Some(d), width, .. } => std::sync::Arc::make_mut(d).set_record(
                crate::value::be_to_u128(&k) as u32,
                plen.unwrap_or(*width),
                idx,
                record,
            ),
            Index::Lpm { .. } | Index::Tuples(_) => {}
        }
    }

    /// Records a hit on entry `idx` at `now_us` (tables with idle timeouts).
    #[inline]
    pub fn touch(&mut self, idx: u32, now_us: u64) {
        if let Some(t) = self.last_hit.get_mut(idx as usize) {
            *t = now_us;
        }
    }

    /// When entry `idx` was last hit (µs on its switch's clock; 0: never since added).
    pub fn last_hit(&self, idx: u32) -> u64 {
        self.last_hit.get(idx as usize).copied().unwrap_or(0)
    }

    /// Identifies the current [`TableState::view`]: while it stays the same,
    /// a view built earlier is still valid (no stamp is ever reused).
    #[inline]
    pub fn view_stamp(&self) -> u64 {
        self.stamp.0
    }

    /// The table's lookup structure for compiled code (see [`TableView`]).
    pub fn view(&self) -> TableView {
        let hot = TableView { hot: self.hot.records.as_ptr(), ..TableView::ENGINE };
        match &self.index {
            Index::Exact(m) => match m.layout() {
                Layout::Direct { records } => {
                    assert_eq!(records.len(), 1 << (8 * self.key_len), "a direct array covers every key");
                    let Some(rows) = &self.rows else { return TableView::ENGINE };
                    assert_eq!(rows.rows.len(), records.len(), "a row for every key");
                    let b = rows.rows.as_ptr().cast();
                    TableView { kind: VIEW_DIRECT, a: records.as_ptr(), b, len: records.len() as u64, ..hot }
                }
                Layout::Open(m) => {
                    let (slots, mask, shift) = m.raw_parts();
                    TableView { kind: VIEW_HASH, shift, a: slots.cast(), len: mask, ..hot }
                }
                Layout::Hashed => TableView::ENGINE,
            },
            Index::Lpm { dir: Some(d), .. } => {
                let (top, ext, shift) = d.raw_parts();
                TableView { kind: VIEW_DIR, shift, a: top, b: ext, ..hot }
            }
            _ => TableView::ENGINE,
        }
    }

    /// The hot record of entry index `idx` (what `lookup` returns).
    #[inline]
    pub fn hot(&self, idx: u32) -> &HotEntry {
        self.hot.get(idx)
    }

    /// Mutable access to the entry behind a (current) handle. Change its
    /// action with [`TableState::set_action`], which keeps the hot record.
    pub fn get_mut(&mut self, handle: u32) -> Option<&mut Entry> {
        let idx = self.index_of(handle).ok()?;
        self.entries[idx as usize].as_mut()
    }

    /// The entry behind a lookup result (entry index), for the packet path.
    #[inline]
    pub fn entry(&self, idx: u32) -> Option<&Entry> {
        self.entries.get(idx as usize).and_then(|e| e.as_ref())
    }

    /// Mutable access by entry index (what `lookup` returns), for the packet path.
    #[inline]
    pub fn entry_mut(&mut self, idx: u32) -> Option<&mut Entry> {
        self.entries.get_mut(idx as usize).and_then(|e| e.as_mut())
    }

    /// Mutable access to the entry behind a (current) handle (counters, meter).
    pub fn entry_by_handle_mut(&mut self, handle: u32) -> Option<&mut Entry> {
        let idx = self.index_of(handle).ok()?;
        self.entry_mut(idx)
    }
}

/// Probes LPM maps (longest prefix first) with an integer key, each under its
/// prefix mask; the first hit is the longest match.
#[inline]
fn lpm_probe(by_len: &[(u32, u128, ExactMap)], k: u128) -> Option<u32> {
    by_len.iter().find_map(|(_, mask, m)| m.get_int(k & mask).flatten())
}

/// Right-aligns `src` into `dst` (truncating from the left when longer).
pub fn copy_right(dst: &mut [u8], src: &[u8]) {
    dst.fill(0);
    let n = src.len().min(dst.len());
    let dl = dst.len();
    dst[dl - n..].copy_from_slice(&src[src.len() - n..]);
}

/// Resizes a big-endian value to `len` bytes and clears bits above `width`.
pub fn fit(v: &[u8], len: usize, width: u32) -> Vec<u8> {
    let mut out = vec![0u8; len];
    fit_into(&mut out, v, width);
    out
}

/// Makes `v` a right-aligned `len`-byte value of `width` bits in place
/// (no allocation when it already has the length: the usual case for keys
/// a control plane has checked).
fn refit(v: &mut Vec<u8>, len: usize, width: u32) {
    if v.len() == len {
        crate::phv::mask_top(v, width);
    } else {
        *v = fit(v, len, width);
    }
}

fn fit_into(out: &mut [u8], v: &[u8], width: u32) {
    copy_right(out, v);
    crate::phv::mask_top(out, width);
}

fn full_mask(m: &mut [u8], width: u32) {
    m.fill(0xff);
    crate::phv::mask_top(m, width);
}

/// Keeps the top `plen` bits of a `width`-bit right-aligned field, clearing the rest.
pub fn apply_prefix(v: &mut [u8], width: u32, plen: u32) {
    let total = v.len() as u32 * 8;
    let keep_from = total - width; // first bit of the field
    let cut = keep_from + plen.min(width); // bits at or after `cut` are cleared
    for (i, b) in v.iter_mut().enumerate() {
        let start = i as u32 * 8;
        if start >= cut {
            *b = 0;
        } else if start + 8 > cut {
            let keep = cut - start;
            *b &= !(0xffu8 >> keep);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The entry index a lookup must return, found by brute force: the
    /// best (priority, index) among the entries `matches` accepts.
    fn best_by_scan(t: &TableState, matches: impl Fn(&Entry) -> bool) -> Option<u32> {
        t.entries
            .iter()
            .enumerate()
            .filter_map(|(h, e)| e.as_ref().map(|e| (h as u32, e)))
            .filter(|(_, e)| matches(e))
            .min_by_key(|(h, e)| (e.priority, *h))
            .map(|(h, _)| h)
    }

    fn entry(m: Vec<FieldMatch>, prio: i32, a: u32) -> Entry {
        Entry {
            matches: m,
            priority: prio,
            action: EntryAction::Direct { action: a, data: Box::new([]) },
            packets: 0,
            bytes: 0,
            timeout_ms: None,
            added_key: None,
        }
    }

    #[test]
    fn entries_with_the_same_action_and_data_share_one_hot_record() {
        // A 16-bit exact key: a direct array, which compiled code reads through its view.
        let mut t = TableState::new(vec![KeyFieldSpec { kind: MatchKind::Exact, width: 16, off: 0, len: 2 }], 100);
        let with = |k: u8, a: u32, d: &[u8]| Entry {
            action: EntryAction::Direct { action: a, data: d.into() },
            ..entry(vec![FieldMatch::Exact(vec![0, k])], 0, a)
        };
        let h: Vec<u32> = (0..6).map(|k| t.add(with(k, 1 + u32::from(k % 2), &[k % 2, 7])).unwrap()).collect();
        // Two distinct (action, data) pairs: two records plus the cold one.
        assert_eq!(t.hot.records.len(), 3);
        for (k, h) in h.iter().enumerate() {
            let rec = t.hot(*h);
            assert_eq!((rec.action, rec.len, &rec.data[..2]), (1 + k as u32 % 2, 2, &[k as u8 % 2, 7][..]));
        }
        // Changing one entry's action leaves the others' record alone.
        t.set_action(h[0], EntryAction::Direct { action: 9, data: Box::new([5]) }).unwrap();
        assert_eq!((t.hot(h[0]).action, t.hot(h[0]).data[0]), (9, 5));
        assert_eq!((t.hot(h[2]).action, t.hot(h[2]).data[0]), (1, 0));
        // A record nobody names any more is freed and its id reused.
        let ids_before = t.hot.records.len();
        t.set_action(h[0], EntryAction::Direct { action: 1, data: Box::new([0, 7]) }).unwrap();
        t.add(with(50, 3, &[3])).unwrap();
        assert_eq!(t.hot.records.len(), ids_before, "the freed id of action 9 was reused");
        assert_eq!(t.hot(h[0]).action, 1);
        // Deleting an entry makes its index cold; the shared record stays for the rest.
        t.delete(h[2]).unwrap();
        assert_eq!(t.hot(h[2]).action, u32::MAX);
        assert_eq!((t.hot(h[4]).action, t.hot(h[4]).data[..2].to_vec()), (1, vec![0, 7]));
        // The view generated code reads names the same records, by key
        // (key k is entry h[k]); a deleted key names the cold record.
        let v = t.view();
        assert_eq!(v.kind, VIEW_DIRECT);
        for k in [0usize, 1, 2, 4] {
            // SAFETY: `k` < `len` and the table is not changed while the view is read.
            let rec = unsafe { &*v.hot.add(*v.a.add(k) as usize) };
            let want = if k == 2 { &HotEntry::COLD } else { t.hot(h[k]) };
            assert_eq!(rec, want, "key {k}");
        }
        // Each key's own row (`b`) is the same record, the action plus one
        // (a zero row, read as the cold record's action, for no entry),
        // in the table and in a copy of it.
        let copy = t.clone();
        for t in [&t, &copy] {
            let v = t.view();
            for k in [0usize, 1, 2, 4, 300] {
                // SAFETY: as above; `b` has a row for every key.
                let row = unsafe { *v.b.cast::<HotEntry>().add(k) };
                let want = if k == 2 || k == 300 { HotEntry::COLD } else { *t.hot(h[k]) };
                assert_eq!(row.action.wrapping_sub(1), want.action, "key {k}");
                assert_eq!((row.len, row.data), (want.len, want.data), "key {k}");
                assert_eq!(t.rows.as_ref().unwrap().record(k), HotEntry { len: row.len, data: row.data, ..want });
            }
        }
        t.clear();
        assert_eq!(t.hot.records.len(), 1, "only the cold record is left");
        let rows = t.rows.as_ref().unwrap();
        assert!(rows.written.iter().all(|w| *w == 0), "no row written after clear");
        assert_eq!(rows.rows.get(1).action, 0, "key 1's row is zero again");
    }

    #[test]
    fn every_change_that_may_move_a_view_takes_a_new_stamp() {
        let mut t = TableState::new(vec![KeyFieldSpec { kind: MatchKind::Exact, width: 16, off: 0, len: 2 }], 100);
        let mut seen = std::collections::HashSet::new();
        let mut fresh = |t: &TableState| assert!(seen.insert(t.view_stamp()), "stamp {} reused", t.view_stamp());
        fresh(&t);
        let h = t.add(entry(vec![FieldMatch::Exact(vec![0, 1])], 0, 1)).unwrap();
        fresh(&t);
        let stamp = t.view_stamp();
        assert!(t.lookup(&[0, 1]).is_some());
        assert_eq!(t.view_stamp(), stamp, "a lookup keeps the stamp (and the views)");
        t.set_action(h, EntryAction::Direct { action: 2, data: Box::new([]) }).unwrap();
        fresh(&t);
        let copy = t.clone();
        fresh(&copy);
        t.delete(h).unwrap();
        fresh(&t);
        t.clear();
        fresh(&t);
    }

    #[test]
    fn lpm_longest_prefix_wins_and_handles_reuse() {
        let mut t = TableState::new(vec![KeyFieldSpec { kind: MatchKind::Lpm, width: 32, off: 0, len: 4 }], 10);
        let h0 = t.add(entry(vec![FieldMatch::Lpm(vec![10, 0, 0, 0], 8)], 0, 1)).unwrap();
        let h1 = t.add(entry(vec![FieldMatch::Lpm(vec![10, 1, 0, 0], 16)], 0, 2)).unwrap();
        assert_eq!((h0, h1), (0, 1));
        assert_eq!(t.lookup(&[10, 1, 2, 3]), Some(1));
        assert_eq!(t.lookup(&[10, 2, 2, 3]), Some(0));
        assert_eq!(t.lookup(&[11, 2, 2, 3]), None);
        assert!(matches!(
            t.add(entry(vec![FieldMatch::Lpm(vec![10, 1, 9, 9], 16)], 0, 3)),
            Err(TableError::DuplicateEntry(1))
        ));
        t.delete(0).unwrap();
        assert_eq!(t.lookup(&[10, 2, 2, 3]), None);
        // Index 0 is reused with a new version, as bmv2 does: handle 1 << 24.
        assert_eq!(t.add(entry(vec![FieldMatch::Lpm(vec![0, 0, 0, 0], 0)], 0, 4)).unwrap(), 1 << 24);
        assert_eq!(t.lookup(&[99, 2, 2, 3]), Some(0));
        assert!(matches!(t.delete(0), Err(TableError::ExpiredHandle)));
        assert!(t.delete(1 << 24).is_ok());
    }

    #[test]
    fn direct_indexed_lpm_agrees_with_the_per_length_maps() {
        for width in [32u32, 20] {
            let len = width.div_ceil(8) as usize;
            let spec = vec![KeyFieldSpec { kind: MatchKind::Lpm, width, off: 0, len }];
            let mut fast = TableState::new(spec.clone(), 8192);
            let mut maps = TableState::new(spec, 8192);
            maps.without_accelerators();
            let mut rnd = crate::test_rng(0x2545_f491 ^ width);
            let key = |v: u32| v.to_be_bytes()[4 - len..].to_vec();
            let mut handles = Vec::new();
            // Enough entries that the structure is built although short routes are present.
            for i in 0..6000u32 {
                // Nested prefixes under one /8 so that deletes must find covering routes.
                let v = (0x0a00_0000 | (rnd() & 0x00ff_f0ff)) >> (32 - width);
                let plen = [0, 8, 12, 16, 20, 24, 28, 32][rnd() as usize % 8].min(width);
                let e = entry(vec![FieldMatch::Lpm(key(v), plen)], 0, i);
                match (fast.add(e.clone()), maps.add(e)) {
                    (Ok(a), Ok(b)) => {
                        assert_eq!(a, b);
                        handles.push(a);
                    }
                    (Err(_), Err(_)) => {}
                    (a, b) => panic!("add disagrees: {a:?} vs {b:?}"),
                }
                if rnd().is_multiple_of(4) && !handles.is_empty() {
                    let h = handles.swap_remove(rnd() as usize % handles.len());
                    fast.delete(h).unwrap();
                    maps.delete(h).unwrap();
                }
                for _ in 0..8 {
                    let k = key((0x0a00_0000 | (rnd() & 0x00ff_ffff)) >> (32 - width));
                    assert_eq!(fast.lookup(&k), maps.lookup(&k), "width {width}, key {k:?}");
                    let ki = crate::value::be_to_u128(&k);
                    assert_eq!(fast.lookup_u128(ki), maps.lookup_u128(ki));
                }
            }
            assert!(
                matches!(&fast.index, Index::Lpm { dir: Some(_), .. }),
                "the direct index was never built (width {width}, {} entries)",
                fast.count
            );
        }
    }

    /// A default route would paint the whole top level (64 MiB per array
    /// and copy): a small table keeps to the maps while it has one, in
    /// either order, and gets the direct index back without it.
    #[test]
    fn a_small_routing_table_with_a_default_route_stays_on_the_maps() {
        let spec = vec![KeyFieldSpec { kind: MatchKind::Lpm, width: 32, off: 0, len: 4 }];
        let has_dir = |t: &TableState| matches!(&t.index, Index::Lpm { dir: Some(_), .. });
        let mut t = TableState::new(spec, 4096);
        for i in 0..20u8 {
            t.add(entry(vec![FieldMatch::Lpm(vec![10, 1, i, 0], 24)], 0, i.into())).unwrap();
        }
        assert!(has_dir(&t), "20 routes of /24: direct-indexed");
        let default = t.add(entry(vec![FieldMatch::Lpm(vec![0, 0, 0, 0], 0)], 0, 99)).unwrap();
        assert!(!has_dir(&t), "a default route in a table of 21: the maps alone");
        assert_eq!(t.lookup(&[10, 1, 3, 9]), Some(3));
        assert_eq!(t.lookup(&[192, 168, 0, 1]), Some(20), "the default route's entry");
        t.add(entry(vec![FieldMatch::Lpm(vec![10, 2, 0, 0], 16)], 0, 100)).unwrap();
        assert!(!has_dir(&t), "still a default route and a small table");
        t.delete(default).unwrap();
        t.add(entry(vec![FieldMatch::Lpm(vec![10, 3, 0, 0], 16)], 0, 101)).unwrap();
        let last = t.add(entry(vec![FieldMatch::Lpm(vec![10, 4, 0, 0], 16)], 0, 102)).unwrap();
        assert!(has_dir(&t), "no short route left: direct-indexed again");
        assert_eq!(t.lookup(&[192, 168, 0, 1]), None);
        assert_eq!(t.lookup(&[10, 4, 7, 7]), Some(last & 0x00ff_ffff));
    }

    #[test]
    fn cached_lookups_follow_every_change() {
        let spec = vec![
            KeyFieldSpec { kind: MatchKind::Ternary, width: 16, off: 0, len: 2 },
            KeyFieldSpec { kind: MatchKind::Range, width: 16, off: 2, len: 2 },
        ];
        let mut t = TableState::new(spec, 1000);
        let mut handles = Vec::new();
        let mut rnd = crate::test_rng(0x1357_9bdf);
        for i in 0..400u32 {
            let (v, m) = ((rnd() & 0x3f) as u16, [0xffffu16, 0xfff0, 0][rnd() as usize % 3]);
            let lo = (rnd() % 64) as u16;
            let hi = lo + (rnd() % 16) as u16;
            let e = entry(
                vec![
                    FieldMatch::Ternary(v.to_be_bytes().to_vec(), m.to_be_bytes().to_vec()),
                    FieldMatch::Range(lo.to_be_bytes().to_vec(), hi.to_be_bytes().to_vec()),
                ],
                (rnd() % 50) as i32,
                i,
            );
            if let Ok(h) = t.add(e) {
                handles.push(h);
            }
            if rnd().is_multiple_of(3) && !handles.is_empty() {
                t.delete(handles.swap_remove(rnd() as usize % handles.len())).unwrap();
            }
            // Few distinct keys, so most lookups after the first come from the cache.
            for _ in 0..16 {
                let k = [0, (rnd() % 64) as u8, 0, (rnd() % 80) as u8];
                assert_eq!(t.lookup_cached(&k, None), t.lookup(&k), "key {k:?} after {i} adds");
            }
        }
        let (hits, _) = t.cache_stats().expect("a big ternary table has a cache");
        assert!(hits > 0, "some lookups came from the cache");
        // A copy without accelerators looks up the same, without a cache.
        let mut copy = t.clone();
        copy.without_accelerators();
        for i in 0..64u8 {
            let k = [0, i, 0, i % 7];
            assert_eq!(copy.lookup_cached(&k, None), t.lookup(&k));
        }
        assert_eq!(copy.cache_stats(), None);
    }

    #[test]
    fn range_entries_are_found_by_their_match_and_duplicates_refused() {
        let spec = vec![
            KeyFieldSpec { kind: MatchKind::Ternary, width: 8, off: 0, len: 1 },
            KeyFieldSpec { kind: MatchKind::Range, width: 16, off: 1, len: 2 },
        ];
        let mut t = TableState::new(spec, 100);
        let m = |lo: u16, hi: u16| {
            vec![
                FieldMatch::Ternary(vec![6], vec![0xff]),
                FieldMatch::Range(lo.to_be_bytes().to_vec(), hi.to_be_bytes().to_vec()),
            ]
        };
        // Same start, different ends: their first prefix pieces coincide.
        let a = t.add(entry(m(1000, 1007), 5, 1)).unwrap();
        let b = t.add(entry(m(1000, 2000), 5, 2)).unwrap();
        let c = t.add(entry(m(1000, 2000), 7, 3)).unwrap();
        assert_eq!(t.find(&m(1000, 1007), 5), Some(a));
        assert_eq!(t.find(&m(1000, 2000), 5), Some(b));
        assert_eq!(t.find(&m(1000, 2000), 7), Some(c));
        assert_eq!(t.find(&m(1000, 2001), 5), None);
        assert!(matches!(t.add(entry(m(1000, 2000), 5, 4)), Err(TableError::DuplicateEntry(h)) if h == b));
        t.delete(b).unwrap();
        assert_eq!(t.find(&m(1000, 2000), 5), None);
        assert_eq!(t.lookup(&[6, 0x05, 0xdc]), Some(c)); // 1500: only c's range holds it now
    }

    #[test]
    fn ternary_lower_priority_number_wins() {
        let mut t = TableState::new(vec![KeyFieldSpec { kind: MatchKind::Ternary, width: 16, off: 0, len: 2 }], 10);
        t.add(entry(vec![FieldMatch::Ternary(vec![0x12, 0x00], vec![0xff, 0x00])], 20, 1)).unwrap();
        t.add(entry(vec![FieldMatch::Ternary(vec![0x12, 0x34], vec![0xff, 0xff])], 10, 2)).unwrap();
        assert_eq!(t.lookup(&[0x12, 0x34]), Some(1));
        assert_eq!(t.lookup(&[0x12, 0x35]), Some(0));
        assert_eq!(t.lookup(&[0x13, 0x35]), None);
    }

    #[test]
    fn tuple_space_matches_a_linear_scan() {
        // Two ternary fields and a range field; random entries and keys, the
        // result must equal the best (priority, handle) found by brute force.
        let key = vec![
            KeyFieldSpec { kind: MatchKind::Ternary, width: 8, off: 0, len: 1 },
            KeyFieldSpec { kind: MatchKind::Ternary, width: 16, off: 1, len: 2 },
            KeyFieldSpec { kind: MatchKind::Range, width: 8, off: 3, len: 1 },
        ];
        let mut t = TableState::new(key, 10_000);
        let mut rnd = crate::test_rng(12345);
        let masks = [0x00u8, 0xf0, 0xff];
        for _ in 0..300 {
            let m0 = masks[(rnd() % 3) as usize];
            let m1 = masks[(rnd() % 3) as usize];
            let lo = (rnd() % 200) as u8;
            let hi = lo.saturating_add((rnd() % 60) as u8);
            let e = entry(
                vec![
                    FieldMatch::Ternary(vec![rnd() as u8], vec![m0]),
                    FieldMatch::Ternary(vec![rnd() as u8, 0], vec![m1, 0]),
                    FieldMatch::Range(vec![lo], vec![hi]),
                ],
                (rnd() % 20) as i32,
                1,
            );
            let _ = t.add(e);
        }
        for h in [3u32, 10, 50, 51] {
            let _ = t.delete(h);
        }
        for _ in 0..2000 {
            let k = [rnd() as u8, rnd() as u8, 0, rnd() as u8];
            let brute = best_by_scan(&t, |e| {
                let FieldMatch::Ternary(v0, m0) = &e.matches[0] else { unreachable!() };
                let FieldMatch::Ternary(v1, m1) = &e.matches[1] else { unreachable!() };
                let FieldMatch::Range(lo, hi) = &e.matches[2] else { unreachable!() };
                k[0] & m0[0] == v0[0] && k[1] & m1[0] == v1[0] && k[3] >= lo[0] && k[3] <= hi[0]
            });
            assert_eq!(t.lookup(&k), brute, "key {k:?}");
        }
    }

    #[test]
    fn same_ternary_key_with_another_priority_is_not_a_duplicate() {
        let mut t = TableState::new(vec![KeyFieldSpec { kind: MatchKind::Ternary, width: 8, off: 0, len: 1 }], 10);
        t.add(entry(vec![FieldMatch::Ternary(vec![1], vec![0xff])], 5, 1)).unwrap();
        assert!(matches!(
            t.add(entry(vec![FieldMatch::Ternary(vec![1], vec![0xff])], 5, 2)),
            Err(TableError::DuplicateEntry(0))
        ));
        assert_eq!(t.add(entry(vec![FieldMatch::Ternary(vec![1], vec![0xff])], 3, 2)).unwrap(), 1);
        assert_eq!(t.lookup(&[1]), Some(1));
        t.delete(1).unwrap();
        assert_eq!(t.lookup(&[1]), Some(0));
    }

    #[test]
    fn range_bounds_are_inclusive() {
        let mut t = TableState::new(vec![KeyFieldSpec { kind: MatchKind::Range, width: 16, off: 0, len: 2 }], 10);
        t.add(entry(vec![FieldMatch::Range(vec![0, 10], vec![0, 20])], 1, 1)).unwrap();
        assert_eq!(t.lookup(&[0, 10]), Some(0));
        assert_eq!(t.lookup(&[0, 20]), Some(0));
        assert_eq!(t.lookup(&[0, 21]), None);
    }

    #[test]
    fn exact_table_full_and_invalid_handle() {
        let mut t = TableState::new(vec![KeyFieldSpec { kind: MatchKind::Exact, width: 9, off: 0, len: 2 }], 1);
        t.add(entry(vec![FieldMatch::Exact(vec![1, 1])], 0, 1)).unwrap();
        assert_eq!(t.lookup(&[1, 1]), Some(0));
        assert!(matches!(t.add(entry(vec![FieldMatch::Exact(vec![0, 2])], 0, 1)), Err(TableError::TableFull)));
        assert!(matches!(t.delete(5), Err(TableError::InvalidHandle)));
    }
}
