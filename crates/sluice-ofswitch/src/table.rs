//! One OpenFlow flow table: its flow entries and the classifier that finds
//! the best one for a packet.
//!
//! Contract: reads flow-mods (already validated) and packets' full keys
//! ([`crate::fields::FullKey`]); writes its entries and classifier. The
//! classifier is keyed on this table's *layout*: only the key bytes of
//! the fields some entry of the table matches on, concatenated, so a table
//! matching on `in_port` and `eth_dst` looks up a 10-byte key, not the
//! whole packet. The layout grows when an entry brings a new field (the
//! classifier is then rebuilt from the entries) and never shrinks while
//! entries remain. Highest priority wins; entries of equal priority that
//! overlap are not ordered (the specification leaves them undefined).
//!
//! A table shaped like a route table (see [`crate::prefix`]) with at
//! least [`PREFIX_MIN`] prefix entries runs on a longest-prefix-match
//! template instead: its classifier is then emptied (it is rebuilt from
//! the entries if an added entry breaks the shape). A table of up to
//! 32 entries is scanned in the classifier's order on the words of the
//! full key the entries' masks cover, without projecting the key, and,
//! once the agent has compiled it ([`crate::code`]), by native code
//! comparing the key with the entries' constants; the code is dropped
//! when the entries change, and the scan answers until the new code is
//! in. [`FlowTable::describe`] says which one a table runs on.
//!
//! What every packet reads and writes of an entry (its fast step, its
//! packet and byte counts) lives in arrays by classifier id apart from
//! the rest; the route-table template gives an entry's fast step with its
//! id (a tag among the table's distinct steps).

use std::collections::BTreeMap;
use std::sync::Arc;

use sluice_lookup::classifier::{Classifier, Rule};
use sluice_openflow::{Instruction, Match};

use crate::code::TableCode;
use crate::fields::{slot, FullKey, FULL_LEN};
use crate::prefix::PrefixShape;

/// Prefix entries from which a table of the route-table shape runs on
/// its longest-prefix-match template. Below, the classifier (one hash
/// probe for a table of one mask) costs little and the template's
/// 2 × 64 MiB of address space per replica is not worth it.
pub const PREFIX_MIN: usize = 1024;

/// A match as value and mask over the full key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Pattern {
    pub value: Box<FullKey>,
    pub mask: Box<FullKey>,
}

impl Pattern {
    /// The pattern of an OXM match (validated: basic fields of the right
    /// lengths). VLAN_VID's mask covers the present bit and the 12-bit id.
    pub fn of(m: &Match) -> Pattern {
        let mut value = Box::new([0u8; FULL_LEN]);
        let mut mask = Box::new([0u8; FULL_LEN]);
        for o in &m.fields {
            let Some((off, len)) = slot(o.field) else { continue };
            if o.value.len() != len {
                continue;
            }
            for i in 0..len {
                let mk = o.mask.as_ref().map_or(0xff, |mm| mm.get(i).copied().unwrap_or(0));
                let mk = if o.field == sluice_openflow::OxmField::VlanVid && i == 0 { mk & 0x1f } else { mk };
                mask[off + i] |= mk;
                value[off + i] |= o.value[i] & mk;
            }
        }
        Pattern { value, mask }
    }

    /// Whether every packet this pattern matches, `filter` matches too
    /// (a non-strict modify or delete selects such entries).
    pub fn within(&self, filter: &Pattern) -> bool {
        (0..FULL_LEN).all(|i| {
            self.mask[i] & filter.mask[i] == filter.mask[i] && self.value[i] & filter.mask[i] == filter.value[i]
        })
    }

    /// Whether some packet matches both.
    pub fn overlaps(&self, other: &Pattern) -> bool {
        (0..FULL_LEN).all(|i| {
            let m = self.mask[i] & other.mask[i];
            self.value[i] & m == other.value[i] & m
        })
    }
}

/// A flow entry.
#[derive(Debug, Clone)]
pub struct Flow {
    /// Unique over the switch's life: keys its counters in every replica.
    pub uid: u64,
    pub priority: u16,
    /// Shared with the other replicas' copies (built once per flow-mod).
    pub pattern: Arc<Pattern>,
    pub matched: Arc<Match>,
    pub cookie: u64,
    pub flags: u16,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    /// Shared: the pipeline runs them without copying them.
    pub instructions: Arc<[Instruction]>,
    /// When it was added (the agent's clock, nanoseconds).
    pub added_ns: u64,
}

/// What the generic walk reads of the entry a lookup found, by
/// classifier id (next to each other, so one lookup does not walk the
/// entries' map). What every packet reads and writes (its fast step and
/// counts) lives apart, in arrays of their own (see [`FlowTable::fast`]):
/// a million routes' steps take 8 MiB, which stay in the processor's
/// caches, rather than a cache line each.
#[derive(Debug, Clone)]
pub struct Hot {
    pub uid: u64,
    pub cookie: u64,
    /// A table-miss entry (priority 0, no match field): its packet-ins
    /// give the reason NO_MATCH.
    pub miss_entry: bool,
    /// `None` only while the pipeline runs them (taken out and put back,
    /// so that running them touches no reference count).
    pub instructions: Option<Arc<[Instruction]>>,
}

/// An entry a lookup found: its classifier id, with its fast step when
/// the lookup gave it.
pub type Hit = (u32, Option<Fast>);

/// An entry's instructions when they are a single common step the
/// pipeline runs without interpreting them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fast {
    /// Anything else.
    None,
    /// `goto_table` alone.
    Goto(u8),
    /// `apply_actions(group)` alone.
    Group(u32),
}

impl Fast {
    /// The fast step of an instruction list.
    pub fn of(instructions: &[Instruction]) -> Fast {
        match instructions {
            [Instruction::GotoTable(t)] => Fast::Goto(*t),
            [Instruction::ApplyActions(a)] => match a.as_slice() {
                [sluice_openflow::Action::Group(g)] => Fast::Group(*g),
                _ => Fast::None,
            },
            _ => Fast::None,
        }
    }
}

/// Entries' parts by classifier id. Read at random on the packet path,
/// so big ones live in huge pages, copies included (a replica's).
#[derive(Debug)]
struct ById<T>(Vec<T>);

impl<T> Default for ById<T> {
    fn default() -> Self {
        ById(Vec::new())
    }
}

impl<T: Clone> Clone for ById<T> {
    fn clone(&self) -> Self {
        ById(sluice_lookup::mem::clone_advised(&self.0))
    }
}

impl<T> ById<T> {
    /// Puts `x` at `id`, a free id or the next one.
    fn put(&mut self, id: u32, x: T) {
        match self.0.get_mut(id as usize) {
            Some(at) => *at = x,
            None => sluice_lookup::mem::push_advised(&mut self.0, x),
        }
    }
}

impl<T> std::ops::Deref for ById<T> {
    type Target = Vec<T>;
    fn deref(&self) -> &Vec<T> {
        &self.0
    }
}

impl<T> std::ops::DerefMut for ById<T> {
    fn deref_mut(&mut self) -> &mut Vec<T> {
        &mut self.0
    }
}

/// Distinct instruction lists a table remembers to share between entries.
const INTERNED: usize = 64;

/// The table (see the module documentation).
#[derive(Debug, Clone)]
pub struct FlowTable {
    /// Entries by uid.
    pub flows: BTreeMap<u64, Flow>,
    /// `(offset, length)` runs of the full key this table looks up.
    layout: Vec<(usize, usize)>,
    /// Every bit some entry's mask covers (OR of the masks since the table
    /// was last empty): bits outside it cannot change a lookup's result.
    union_mask: Box<FullKey>,
    /// The layout as a byte mask (0xff on every byte it covers): what
    /// `layout` is made from, read by word to tell whether a pattern
    /// fits it.
    covered: Box<FullKey>,
    key_len: usize,
    classifier: Classifier,
    /// Classifier id → the entry's [`Hot`] part (a free id's is stale).
    ids: ById<Hot>,
    /// Classifier id → the entry's fast step (what its instructions
    /// amount to when they are one of the common single steps).
    steps: ById<Fast>,
    /// Classifier id → packets and bytes this replica matched to the
    /// entry (the switch's settled counts, of replaced entries, live in
    /// its counters).
    counts: ById<[u64; 2]>,
    /// Distinct fast steps of the entries, by tag (tag 0: none here, the
    /// entry's step is in `steps`): the route-table template keeps each
    /// entry's tag with its id, so that a lookup gives the step without
    /// reading `steps` (a route table has a few dozen next hops).
    tagged: Vec<Fast>,
    free_ids: Vec<u32>,
    by_uid: BTreeMap<u64, u32>,
    /// Recent distinct instruction lists: an entry whose list equals one
    /// shares it (many entries, few distinct lists: a route table's), so
    /// lookups read a few lists that stay in cache.
    interned: std::collections::VecDeque<Arc<[Instruction]>>,
    /// The entries as the route-table template sees them; while it runs,
    /// lookups go through it and `classifier` stays empty.
    prefix: PrefixShape,
    /// While the classifier scans its few entries (and the template does
    /// not run): the same entries in the same order, each as the words of
    /// the full key its mask covers, which lookups compare in place
    /// instead of projecting the key first. One run of words, read in
    /// order (see [`scan_find`]).
    scan: Option<Box<[u64]>>,
    /// `scan` compiled to native code, when the agent has compiled it
    /// (always for the current `scan`: a change that alters it drops it).
    code: Option<Arc<TableCode>>,
}

/// The entries of a table's `scan`, in order: each entry's classifier id
/// and its `(word index into the full key, mask, masked value)` triples.
/// An entry is a head word (its classifier id in the high half, its
/// number of triples `n` in the low byte) followed by its `n` triples;
/// the entries end at the first one cut short.
#[inline]
pub(crate) fn scan_entries(scan: &[u64]) -> impl Iterator<Item = (u32, &[u64])> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let head = *scan.get(at)?;
        let n = (head & 0xff) as usize;
        let words = scan.get(at + 1..at + 1 + 3 * n)?;
        at += 1 + 3 * n;
        Some(((head >> 32) as u32, words))
    })
}

/// The first entry of a table's `scan` that `full` matches (see
/// [`scan_entries`]).
#[inline]
pub(crate) fn scan_find(scan: &[u64], full: &FullKey) -> Option<u32> {
    scan_entries(scan)
        .find(|(_, words)| words.chunks_exact(3).all(|t| crate::fields::word(full, t[0] as usize) & t[1] == t[2]))
        .map(|(id, _)| id)
}

impl Default for FlowTable {
    fn default() -> Self {
        // The layout always holds in_port: a table whose only entry matches
        // everything (a table-miss entry) still looks up a non-empty key.
        FlowTable {
            flows: BTreeMap::new(),
            layout: vec![(0, 4)],
            union_mask: Box::new([0; FULL_LEN]),
            covered: Box::new(std::array::from_fn(|i| if i < 4 { 0xff } else { 0 })),
            key_len: 4,
            classifier: Classifier::new(4),
            ids: ById::default(),
            steps: ById::default(),
            counts: ById::default(),
            tagged: vec![Fast::None],
            free_ids: Vec::new(),
            by_uid: BTreeMap::new(),
            interned: std::collections::VecDeque::new(),
            prefix: PrefixShape::default(),
            scan: None,
            code: None,
        }
    }
}

/// The runs of nonzero bytes of `bytes`, as `(offset, length)`.
fn runs(bytes: &FullKey) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    let mut i = 0;
    while i < FULL_LEN {
        if bytes[i] == 0 {
            i += 1;
            continue;
        }
        let from = i;
        while i < FULL_LEN && bytes[i] != 0 {
            i += 1;
        }
        runs.push((from, i - from));
    }
    runs
}

impl FlowTable {
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.flows.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    fn project(&self, full: &FullKey, out: &mut Vec<u8>) {
        out.clear();
        for &(o, l) in &self.layout {
            out.extend_from_slice(&full[o..o + l]);
        }
    }

    fn rule_of(&self, p: &Pattern) -> Rule {
        let (mut v, mut m) = (Vec::with_capacity(self.key_len), Vec::with_capacity(self.key_len));
        for &(o, l) in &self.layout {
            v.extend_from_slice(&p.value[o..o + l]);
            m.extend_from_slice(&p.mask[o..o + l]);
        }
        Rule::new(v, m)
    }

    /// Whether every byte `p`'s mask covers is in the layout (the input
    /// port and every byte some entry's mask covers: the layout grows with
    /// the union mask, and both start over when the table empties).
    #[inline]
    fn fits(&self, p: &Pattern) -> bool {
        use crate::fields::word;
        (0..FULL_LEN / 8).all(|w| word(&p.mask, w) & !word(&self.covered, w) == 0)
    }

    /// Grows the layout to cover `p`'s fields; true when it changed.
    fn widen(&mut self, p: &Pattern) -> bool {
        if self.fits(p) {
            return false;
        }
        for (c, m) in self.covered.iter_mut().zip(p.mask.iter()) {
            if *m != 0 {
                *c = 0xff;
            }
        }
        self.layout = runs(&self.covered);
        self.key_len = self.layout.iter().map(|r| r.1).sum();
        true
    }

    /// Keeps `scan` in step with the entries (see the field).
    fn rescan(&mut self) {
        use crate::fields::word;
        if self.prefix.running() || !self.classifier.scans() || self.flows.is_empty() {
            self.scan = None;
            self.code = None;
            return;
        }
        let mut scan = Vec::new();
        for (id, _, _) in self.classifier.rules() {
            let p = &self.flows[&self.ids[id as usize].uid].pattern;
            let words: Vec<usize> = (0..FULL_LEN / 8).filter(|&w| word(&p.mask, w) != 0).collect();
            scan.push((u64::from(id) << 32) | words.len() as u64);
            for w in words {
                scan.extend([w as u64, word(&p.mask, w), word(&p.value, w) & word(&p.mask, w)]);
            }
        }
        // Code compiled from the same entries in the same order stays.
        self.code = self.code.take().filter(|c| c.is_for(&scan));
        self.scan = Some(scan.into());
    }

    /// The table's scan, when it is scanned (see the field).
    pub fn scan(&self) -> Option<&[u64]> {
        self.scan.as_deref()
    }

    /// The scan to compile, when the table is scanned and has no code
    /// for it yet (see [`FlowTable::set_code`]).
    pub fn wants_code(&self) -> Option<&[u64]> {
        self.scan.as_deref().filter(|_| self.code.is_none())
    }

    /// Runs lookups on `code` from now on, if it was compiled from the
    /// table's current scan (the entries may have changed since); whether
    /// it did.
    pub fn set_code(&mut self, code: Arc<TableCode>) -> bool {
        let fits = self.scan.as_deref().is_some_and(|s| code.is_for(s));
        if fits {
            self.code = Some(code);
        }
        fits
    }

    /// The table's native code, if it runs on some.
    pub fn code(&self) -> Option<&TableCode> {
        self.code.as_deref()
    }

    fn rebuild(&mut self) {
        self.classifier = Classifier::new(self.key_len);
        let entries: Vec<(u32, i32, Rule)> = self
            .by_uid
            .iter()
            .map(|(uid, id)| {
                let f = &self.flows[uid];
                (*id, -i32::from(f.priority), self.rule_of(&f.pattern))
            })
            .collect();
        for (id, prio, rule) in entries {
            self.classifier.insert(id, prio, rule);
        }
    }

    /// Adds `flow` (its uid must be new).
    pub fn insert(&mut self, mut flow: Flow) {
        flow.instructions = self.intern(flow.instructions);
        if self.widen(&flow.pattern) && !self.prefix.running() {
            self.rebuild();
        }
        let hot = Hot {
            uid: flow.uid,
            cookie: flow.cookie,
            miss_entry: flow.priority == 0 && flow.matched.fields.is_empty(),
            instructions: Some(Arc::clone(&flow.instructions)),
        };
        for (u, m) in self.union_mask.iter_mut().zip(flow.pattern.mask.iter()) {
            *u |= m;
        }
        let id = self.free_ids.pop().unwrap_or(self.ids.len() as u32);
        self.ids.put(id, hot);
        self.steps.put(id, Fast::of(&flow.instructions));
        self.counts.put(id, [0; 2]);
        let running = self.prefix.running();
        let tag = self.tag_of(self.steps[id as usize]);
        let shaped = self.prefix.add(id, flow.priority, &flow.pattern, tag);
        if !running {
            let rule = self.rule_of(&flow.pattern);
            self.classifier.insert(id, -i32::from(flow.priority), rule);
        }
        self.by_uid.insert(flow.uid, id);
        self.flows.insert(flow.uid, flow);
        if running && !shaped {
            // The template stopped (the shape broke): back to the classifier.
            self.rebuild();
        } else if !running && shaped && self.prefix.prefixes() >= PREFIX_MIN {
            self.prefix.start();
            self.classifier = Classifier::new(self.key_len);
        }
        self.rescan();
    }

    /// The shared list equal to `ins`, or `ins` (then remembered).
    fn intern(&mut self, ins: Arc<[Instruction]>) -> Arc<[Instruction]> {
        if let Some(i) = self.interned.iter().find(|i| **i == ins) {
            return Arc::clone(i);
        }
        if self.interned.len() >= INTERNED {
            self.interned.pop_front();
        }
        self.interned.push_back(Arc::clone(&ins));
        ins
    }

    /// Removes the entry `uid`, with the packets and bytes this replica
    /// matched to it.
    pub fn remove(&mut self, uid: u64) -> Option<(Flow, (u64, u64))> {
        let id = self.by_uid.remove(&uid)?;
        let [p, b] = self.counts[id as usize];
        let counts = (p, b);
        if !self.prefix.running() {
            self.classifier.remove(id);
        }
        self.free_ids.push(id);
        let f = self.flows.remove(&uid);
        if let Some(f) = &f {
            self.prefix.remove(id, &f.pattern);
        }
        if self.flows.is_empty() {
            *self = FlowTable::default();
        }
        self.rescan();
        f.map(|f| (f, counts))
    }

    /// Takes the packets and bytes this replica matched to entry `uid`
    /// (zero afterwards).
    pub fn take_counts(&mut self, uid: u64) -> (u64, u64) {
        match self.by_uid.get(&uid) {
            Some(&id) => {
                let [p, b] = std::mem::take(&mut self.counts[id as usize]);
                (p, b)
            }
            None => (0, 0),
        }
    }

    /// Every entry's uid with the packets and bytes this replica matched to it.
    pub fn counts(&self) -> impl Iterator<Item = (u64, (u64, u64))> + '_ {
        self.by_uid.iter().map(|(uid, id)| {
            let [p, b] = self.counts[*id as usize];
            (*uid, (p, b))
        })
    }

    /// Zeroes the packets and bytes of every entry (a new replica's).
    pub fn reset_counts(&mut self) {
        self.counts.iter_mut().for_each(|c| *c = [0; 2]);
    }

    /// See the field `union_mask`.
    pub fn union_mask(&self) -> &FullKey {
        &self.union_mask
    }

    /// The entries a modify or delete selects that `keep` accepts: with
    /// `strict`, the one of exactly this pattern and priority (found
    /// through the classifier, not a scan); else every entry within the
    /// pattern.
    pub fn select(&self, pattern: &Pattern, priority: u16, strict: bool, keep: impl Fn(&Flow) -> bool) -> Vec<u64> {
        if strict {
            self.find_strict(pattern, priority).filter(|u| self.flows.get(u).is_some_and(&keep)).into_iter().collect()
        } else {
            self.flows.values().filter(|f| f.pattern.within(pattern) && keep(f)).map(|f| f.uid).collect()
        }
    }

    /// The entry with exactly this pattern and priority.
    ///
    /// Through the classifier (no scan of the entries): a pattern with a
    /// byte outside the layout equals no entry (every entry's mask lies
    /// within it); one within it is told apart by its projection, since
    /// patterns are zero outside their masks.
    pub fn find_strict(&self, pattern: &Pattern, priority: u16) -> Option<u64> {
        if !self.fits(pattern) || self.flows.is_empty() {
            return None;
        }
        if self.prefix.running() {
            let id = self.prefix.find(pattern, priority)?;
            return Some(self.ids[id as usize].uid);
        }
        let id = self.classifier.find(-i32::from(priority), &self.rule_of(pattern))?;
        Some(self.ids[id as usize].uid)
    }

    /// The best entry for a packet whose fields are `full` (`scratch`
    /// holds the projected key).
    #[inline]
    pub fn lookup(&mut self, full: &FullKey, scratch: &mut Vec<u8>) -> Option<u64> {
        let id = self.lookup_id(full, scratch)?;
        Some(self.ids[id as usize].uid)
    }

    /// [`FlowTable::lookup`], giving the entry's classifier id (see
    /// [`FlowTable::hot`]).
    #[inline]
    pub fn lookup_id(&mut self, full: &FullKey, scratch: &mut Vec<u8>) -> Option<u32> {
        if self.flows.is_empty() {
            return None;
        }
        if self.prefix.running() {
            return self.prefix.lookup(full);
        }
        if let Some(code) = &self.code {
            return code.find(full);
        }
        if let Some(scan) = &self.scan {
            return scan_find(scan, full);
        }
        self.lookup_classifier(full, scratch)
    }

    /// [`FlowTable::lookup_id`] on the classifier (apart, so that the
    /// other lookups, inlined, do not carry its frame).
    #[inline(never)]
    fn lookup_classifier(&mut self, full: &FullKey, scratch: &mut Vec<u8>) -> Option<u32> {
        self.project(full, scratch);
        self.classifier.lookup_cached(scratch, None)
    }

    /// Whether lookups run on the route-table template (see
    /// [`FlowTable::prefetch`]).
    #[inline]
    pub fn runs_prefix(&self) -> bool {
        self.prefix.running()
    }

    /// Starts loading what a lookup of `full` reads, when the table runs
    /// on the route-table template (a hint: no effect on results).
    #[inline]
    pub fn prefetch(&self, full: &FullKey) {
        self.prefix.prefetch(full);
    }

    /// [`FlowTable::lookup_id`] of a table that runs on the route-table
    /// template (see [`FlowTable::runs_prefix`]), best after
    /// [`FlowTable::prefetch`] of the same key had time to land; starts
    /// loading the entry it finds.
    #[inline]
    pub fn lookup_ahead(&self, full: &FullKey) -> Option<Hit> {
        debug_assert!(self.prefix.running());
        let (id, tag) = self.prefix.lookup_tagged(full)?;
        if let Some(count) = self.counts.get(id as usize) {
            sluice_lookup::lpm::prefetch(count);
        }
        let step = self.tagged.get(usize::from(tag)).copied().filter(|_| tag != 0);
        if step.is_none() {
            if let Some(step) = self.steps.get(id as usize) {
                sluice_lookup::lpm::prefetch(step);
            }
        }
        Some((id, step))
    }

    /// What lookups run on, for users: the route-table template or the
    /// classifier, with its key and number of masks.
    pub fn describe(&self) -> String {
        if self.prefix.running() {
            return self.prefix.describe();
        }
        let fields: Vec<String> = self.layout.iter().flat_map(|(o, l)| crate::fields::names_in(*o, *l)).collect();
        format!(
            "classifier on a {}-byte key ({}), {}",
            self.key_len,
            fields.join(" "),
            if let Some(c) = &self.code {
                format!(
                    "{} entries compiled to native code ({} bytes) in priority order",
                    self.classifier.len(),
                    c.code_bytes
                )
            } else if self.classifier.scans() {
                format!("{} entries scanned in priority order", self.classifier.len())
            } else {
                format!("{} masks searched (tuple-space search)", self.classifier.tuple_count())
            }
        )
    }

    /// What the pipeline reads of the entry of classifier id `id`.
    #[inline]
    pub fn hot(&mut self, id: u32) -> &mut Hot {
        &mut self.ids[id as usize]
    }

    /// [`FlowTable::hot`], to read.
    #[inline]
    pub fn hot_ref(&self, id: u32) -> &Hot {
        &self.ids[id as usize]
    }

    /// The tag of fast step `step` (see the field `tagged`): 0 when it is
    /// none, or when there are too many distinct ones.
    fn tag_of(&mut self, step: Fast) -> u8 {
        if step == Fast::None {
            return 0;
        }
        if let Some(t) = self.tagged.iter().position(|s| *s == step) {
            return t as u8;
        }
        if self.tagged.len() < usize::from(crate::prefix::TAGS) {
            self.tagged.push(step);
            return (self.tagged.len() - 1) as u8;
        }
        0
    }

    /// The fast step of the entry of classifier id `id` (see [`Fast`]).
    #[inline]
    pub fn fast(&self, id: u32) -> Fast {
        self.steps[id as usize]
    }

    /// Counts `packets` packets of `bytes` bytes matched to the entry of
    /// classifier id `id`.
    #[inline]
    pub fn count(&mut self, id: u32, packets: u64, bytes: u64) {
        let c = &mut self.counts[id as usize];
        c[0] += packets;
        c[1] += bytes;
    }

    /// Replaces the instructions of entry `uid` (a modify); false when
    /// there is no such entry.
    pub fn set_instructions(&mut self, uid: u64, instructions: Arc<[Instruction]>) -> bool {
        let instructions = self.intern(instructions);
        let (Some(f), Some(&id)) = (self.flows.get_mut(&uid), self.by_uid.get(&uid)) else { return false };
        f.instructions = Arc::clone(&instructions);
        let step = Fast::of(&instructions);
        self.steps[id as usize] = step;
        let tag = self.tag_of(step);
        let f = &self.flows[&uid];
        self.prefix.retag(id, &f.pattern, tag);
        self.ids[id as usize].instructions = Some(instructions);
        true
    }

    /// Bytes of key this table looks up.
    pub fn key_len(&self) -> usize {
        self.key_len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_openflow::{Oxm, OxmField};

    /// An entry of these match fields, no instructions.
    pub(super) fn flow(uid: u64, priority: u16, fields: Vec<Oxm>) -> Flow {
        let matched = Match { fields };
        Flow {
            uid,
            priority,
            pattern: Arc::new(Pattern::of(&matched)),
            matched: Arc::new(matched),
            cookie: 0,
            flags: 0,
            idle_timeout: 0,
            hard_timeout: 0,
            instructions: Arc::from(vec![]),
            added_ns: 0,
        }
    }

    fn key(in_port: u32, ip: [u8; 4]) -> FullKey {
        let mut k = [0u8; FULL_LEN];
        k[0..4].copy_from_slice(&in_port.to_be_bytes());
        k[28..30].copy_from_slice(&[8, 0]);
        k[40..44].copy_from_slice(&ip);
        k
    }

    #[test]
    fn priorities_masks_and_layout_growth() {
        let mut t = FlowTable::default();
        let mut s = Vec::new();
        t.insert(flow(9, 0, vec![]));
        assert_eq!(t.lookup(&key(5, [1, 2, 3, 4]), &mut s), Some(9), "a lone table-miss entry matches all");
        t.remove(9);
        t.insert(flow(1, 10, vec![Oxm { field: OxmField::InPort, value: vec![0, 0, 0, 1], mask: None }]));
        assert_eq!(t.key_len(), 4);
        assert_eq!(t.lookup(&key(1, [10, 0, 0, 1]), &mut s), Some(1));
        assert_eq!(t.lookup(&key(2, [10, 0, 0, 1]), &mut s), None);
        t.insert(flow(
            2,
            20,
            vec![
                Oxm { field: OxmField::EthType, value: vec![8, 0], mask: None },
                Oxm { field: OxmField::Ipv4Dst, value: vec![10, 0, 0, 0], mask: Some(vec![255, 255, 255, 0]) },
            ],
        ));
        // in_port, eth_type and the three bytes the /24 mask covers.
        assert_eq!(t.key_len(), 9);
        assert_eq!(t.lookup(&key(1, [10, 0, 0, 1]), &mut s), Some(2), "higher priority");
        assert_eq!(t.lookup(&key(1, [10, 0, 1, 1]), &mut s), Some(1));
        t.insert(flow(3, 0, vec![]));
        assert_eq!(t.lookup(&key(9, [1, 1, 1, 1]), &mut s), Some(3), "table-miss entry");
        assert!(t.remove(2).is_some());
        assert_eq!(t.lookup(&key(1, [10, 0, 0, 1]), &mut s), Some(1));
        let p =
            Pattern::of(&Match { fields: vec![Oxm { field: OxmField::InPort, value: vec![0, 0, 0, 1], mask: None }] });
        assert_eq!(t.find_strict(&p, 10), Some(1));
        assert_eq!(t.find_strict(&p, 11), None);
        assert!(t.flows[&1].pattern.within(&Pattern::of(&Match::default())));
        assert!(!Pattern::of(&Match::default()).within(&p));
    }

    /// Exact-entry lookups go through the classifier: same pattern and
    /// priority only; a pattern with a field the table does not key on
    /// equals no entry; a modify's instructions reach what lookups return.
    #[test]
    fn find_strict_and_instructions_through_the_classifier() {
        let mut t = FlowTable::default();
        let route = |net: [u8; 4]| {
            vec![
                Oxm { field: OxmField::EthType, value: vec![8, 0], mask: None },
                Oxm { field: OxmField::Ipv4Dst, value: net.to_vec(), mask: Some(vec![255, 255, 255, 0]) },
            ]
        };
        for i in 0..100u8 {
            t.insert(flow(u64::from(i) + 1, 10, route([10, 0, i, 0])));
        }
        let p = |fields| Pattern::of(&Match { fields });
        assert_eq!(t.find_strict(&p(route([10, 0, 42, 0])), 10), Some(43));
        assert_eq!(t.find_strict(&p(route([10, 0, 42, 0])), 11), None, "another priority");
        assert_eq!(t.find_strict(&p(route([10, 0, 200, 0])), 10), None);
        let mut wider = route([10, 0, 42, 0]);
        wider.push(Oxm { field: OxmField::IpProto, value: vec![17], mask: None });
        assert_eq!(t.find_strict(&p(wider), 10), None, "a field outside the layout");
        let ins: Arc<[Instruction]> = Arc::from(vec![Instruction::GotoTable(3)]);
        assert!(t.set_instructions(43, Arc::clone(&ins)));
        assert!(!t.set_instructions(1000, Arc::clone(&ins)));
        let mut s = Vec::new();
        let id = t.lookup_id(&key(1, [10, 0, 42, 9]), &mut s).unwrap();
        let hot = t.hot(id);
        assert_eq!((hot.uid, hot.instructions.as_deref()), (43, Some(&*ins)));
        assert!(!hot.miss_entry);
        assert_eq!(&*t.flows[&43].instructions, &*ins);
        // Equal lists are shared.
        assert!(Arc::ptr_eq(&t.flows[&1].instructions, &t.flows[&2].instructions));
    }
}

#[cfg(test)]
mod hot_tests {
    #[test]
    fn what_every_packet_reads_of_an_entry_is_small() {
        assert_eq!(std::mem::size_of::<super::Fast>(), 8);
        assert!(std::mem::size_of::<super::Hot>() <= 40);
    }
}

#[cfg(test)]
mod prefix_template_tests {
    use super::tests::flow;
    use super::*;
    use sluice_openflow::{Oxm, OxmField};

    fn route(addr: u32, len: u32) -> Vec<Oxm> {
        let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
        vec![
            Oxm { field: OxmField::EthType, value: vec![8, 0], mask: None },
            Oxm {
                field: OxmField::Ipv4Dst,
                value: addr.to_be_bytes().to_vec(),
                mask: Some(mask.to_be_bytes().to_vec()),
            },
        ]
    }

    /// The entry the specification picks: the highest priority among
    /// those whose pattern matches (the generated tables have no two
    /// overlapping entries of one priority).
    fn best(t: &FlowTable, k: &FullKey) -> Option<u64> {
        t.flows
            .values()
            .filter(|f| (0..FULL_LEN).all(|i| k[i] & f.pattern.mask[i] == f.pattern.value[i]))
            .max_by_key(|f| f.priority)
            .map(|f| f.uid)
    }

    fn check(t: &mut FlowTable, keys: &[FullKey]) {
        let mut s = Vec::new();
        for k in keys {
            assert_eq!(t.lookup(k, &mut s), best(t, k), "key {:?}", &k[28..44]);
        }
    }

    /// A route-table lookup gives each entry's fast step with its id, and
    /// the new step once the entry's instructions change.
    #[test]
    fn route_lookups_give_the_entries_next_hop() {
        use sluice_openflow::Action;
        let group =
            |g: u32| -> Arc<[Instruction]> { Arc::from(vec![Instruction::ApplyActions(vec![Action::Group(g)])]) };
        let mut t = FlowTable::default();
        for r in 0..PREFIX_MIN as u32 + 8 {
            let mut f = flow(u64::from(r), 24, route((10 << 24) | (r << 8), 24));
            f.instructions = group(r % 4);
            t.insert(f);
        }
        assert!(t.runs_prefix());
        let key = |r: u32| {
            let mut k = [0u8; FULL_LEN];
            k[28..30].copy_from_slice(&[8, 0]);
            k[crate::prefix::PREFIX_AT..crate::prefix::PREFIX_AT + 4]
                .copy_from_slice(&((10 << 24) | (r << 8) | 1).to_be_bytes());
            k
        };
        for r in [0, 5, 1030] {
            let (id, step) = t.lookup_ahead(&key(r)).expect("a route");
            assert_eq!(t.hot_ref(id).uid, u64::from(r));
            assert_eq!(step, Some(Fast::Group(r % 4)));
        }
        assert!(t.set_instructions(5, group(7)));
        assert_eq!(t.lookup_ahead(&key(5)).map(|(_, step)| step), Some(Some(Fast::Group(7))));
        assert!(t.set_instructions(5, Arc::from(vec![Instruction::GotoTable(3), Instruction::ClearActions])));
        let (id, step) = t.lookup_ahead(&key(5)).expect("a route");
        assert_eq!((step, t.fast(id)), (None, Fast::None), "not a fast step: the walk interprets it");
    }

    /// A route table of mixed prefix lengths and a table-miss entry runs
    /// on the longest-prefix template once it is big enough and finds
    /// what a search by priority finds, across removals and after an
    /// entry of another shape sends it back to the classifier.
    #[test]
    fn the_route_table_template_finds_what_priorities_say() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut t = FlowTable::default();
        t.insert(flow(1, 0, vec![]));
        let mut routes = Vec::new();
        let mut seen = std::collections::HashSet::new();
        while routes.len() < PREFIX_MIN + 500 {
            let len = [0, 8, 16, 20, 24, 28, 32][(rnd() % 7) as usize];
            // Addresses from a few /8s, so that prefixes nest.
            let addr = ((rnd() as u32) & 0x03ff_ffff | 0x0a00_0000) & u32::MAX.checked_shl(32 - len).unwrap_or(0);
            if seen.insert((addr, len)) {
                let uid = routes.len() as u64 + 2;
                t.insert(flow(uid, len as u16 * 10 + 5, route(addr, len)));
                routes.push((uid, addr, len));
            }
            if routes.len() == PREFIX_MIN / 2 {
                assert!(!t.runs_prefix(), "small tables keep the classifier");
            }
        }
        assert!(t.runs_prefix() && t.describe().contains("longest-prefix"), "{}", t.describe());
        let mut keys: Vec<FullKey> = Vec::new();
        for i in 0..20_000 {
            let (_, addr, _) = routes[(rnd() as usize) % routes.len()];
            let mut k = [0u8; FULL_LEN];
            k[28..30].copy_from_slice(&(if i % 10 == 0 { 0x0806u16 } else { 0x0800 }).to_be_bytes());
            let host = if i % 3 == 0 { rnd() as u32 } else { addr | (rnd() as u32 & 0xff) };
            k[40..44].copy_from_slice(&host.to_be_bytes());
            keys.push(k);
        }
        check(&mut t, &keys);
        // A strict find goes through the template.
        let (uid, addr, len) = routes[7];
        let p = Pattern::of(&Match { fields: route(addr, len) });
        assert_eq!(t.find_strict(&p, len as u16 * 10 + 5), Some(uid));
        assert_eq!(t.find_strict(&p, len as u16 * 10 + 6), None);
        // Removals hand slots to the next shorter covering route.
        for (uid, _, _) in routes.iter().step_by(3) {
            assert!(t.remove(*uid).is_some());
        }
        assert!(t.runs_prefix());
        check(&mut t, &keys);
        assert_eq!(t.find_strict(&Pattern::of(&Match { fields: route(routes[0].1, routes[0].2) }), 5), None);
        // A copy (a worker's replica) answers the same.
        let mut copy = t.clone();
        check(&mut copy, &keys);
        // Another shape: back to the classifier, same answers.
        let udp = vec![
            Oxm { field: OxmField::EthType, value: vec![8, 0], mask: None },
            Oxm { field: OxmField::IpProto, value: vec![17], mask: None },
        ];
        t.insert(flow(100_000, 3, udp));
        assert!(!t.runs_prefix() && t.describe().starts_with("classifier"), "{}", t.describe());
        check(&mut t, &keys);
        assert_eq!(t.find_strict(&p, len as u16 * 10 + 5), Some(uid), "route 7 was kept (every third removed from 0)");
    }
}

#[cfg(test)]
mod vlan_tests {
    use super::*;
    use sluice_openflow::{Oxm, OxmField};

    #[test]
    fn untagged_match_on_vlan_none_with_mask() {
        let mut t = FlowTable::default();
        let mut s = Vec::new();
        let mk = |uid: u64, prio: u16, fields: Vec<Oxm>| {
            let matched = Match { fields };
            Flow {
                uid,
                priority: prio,
                pattern: Arc::new(Pattern::of(&matched)),
                matched: Arc::new(matched),
                cookie: 0,
                flags: 0,
                idle_timeout: 0,
                hard_timeout: 0,
                instructions: vec![].into(),
                added_ns: 0,
            }
        };
        t.insert(mk(4, 0, vec![]));
        for p in 1..=3u32 {
            t.insert(mk(
                u64::from(p),
                4096,
                vec![
                    Oxm { field: OxmField::InPort, value: p.to_be_bytes().to_vec(), mask: None },
                    Oxm { field: OxmField::VlanVid, value: vec![0, 0], mask: Some(vec![0x1f, 0xff]) },
                ],
            ));
        }
        let mut k = [0u8; FULL_LEN];
        k[0..4].copy_from_slice(&1u32.to_be_bytes());
        assert_eq!(t.lookup(&k, &mut s), Some(1));
        k[3] = 9;
        assert_eq!(t.lookup(&k, &mut s), Some(4));
    }
}
