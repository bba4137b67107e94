//! The OpenFlow 1.3 pipeline as a Sluice data plane ([`OfSwitch`]).
//!
//! Contract: reads frames from the live loop (or the bench), each with its
//! input port; walks the flow tables from table 0 (or runs a packet-out's
//! actions); writes frames out through `emit`, packet-ins into a bounded
//! notification queue (what does not fit is dropped and counted), and its
//! replica's counters (flows, tables, ports, groups). Packets leave by an
//! output action (apply-actions at once, or the action set when the
//! pipeline ends), a group, or not at all (no matching entry: dropped, as
//! OpenFlow 1.3 says when a table has no table-miss entry).
//!
//! Per packet, as OpenFlow 1.3.5 section 5 says: a table's best entry runs
//! its instructions in the specification's order (meter, apply-actions,
//! clear-actions, write-actions, write-metadata, goto-table); apply-actions
//! change the packet at once (later tables match the changed fields); the
//! action set runs when no goto-table follows, in the specification's
//! order (copy TTL in, pops, pushes, copy TTL out, TTL decrements, sets,
//! queue, then the group if any, else the output).
//!
//! A walk starts in a tight loop over the entries' fast steps (goto, a
//! next-hop group: [`Fast`]) and goes on in full from the first entry
//! that is not one. A batch runs as a software pipeline over groups of
//! packets (`OfSwitch::process_pipelined`): a group is parsed, its
//! route-table slots loaded, then read (the entry id and its fast step,
//! kept in the packet) and its entries' counters loaded, each a group
//! ahead of the walks.
//!
//! A packet whose fields look, to every table, like those of a packet
//! seen before replays that packet's recorded walk instead (the flow
//! cache, see [`crate::cache`], used when the batches' timing says it is
//! the cheaper way): same entries hit and counted, same actions run on
//! its own bytes.
//!
//! Concurrency: each worker runs its own replica; flow, group and port
//! changes reach every replica between two batches through the worker
//! pool (never a lock on the packet path). Counters are per replica and
//! summed for the control plane.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use sluice_dataplane::profile::stamp;
use sluice_dataplane::{DataPlane, Metrics, Stats};
use sluice_lookup::lpm::prefetch_headers;
use sluice_openflow::{port, Action, Bucket, Instruction, OxmField, SwitchConfig};

use crate::cache::{Count, FlowCache, Key, Op};
use crate::code::{LookupAhead, PipelineCode, TableCode, TableShape, PATH_MISS};
use crate::fields::{self, FullKey, Meta, Parsed, FULL_LEN};
use crate::normal::MacTable;
use crate::table::{Fast, FlowTable, Hit};

/// Flow tables of the switch (ids 0 to `N_TABLES - 1`).
pub const N_TABLES: usize = 64;

/// The input port of frames that are packet-outs: the frame starts with
/// the packet-out's header (see [`encode_packet_out`]).
pub const PACKET_OUT_PORT: u32 = 0xffff_ff10;

/// The live port number of the LOCAL port (OpenFlow's 0xfffffffe), the
/// bridge-local interface: live port 0, which no OpenFlow port uses.
pub const LOCAL_LIVE_PORT: u32 = 0;

/// Packet-ins a replica holds before the agent drains them; more are
/// dropped and counted.
pub const MAX_PENDING_PACKET_INS: usize = 4096;

/// `OFPC_INVALID_TTL_TO_CONTROLLER` in the switch config flags.
pub const INVALID_TTL_TO_CONTROLLER: u16 = 4;

/// Ports numbered below this keep their state and counters in arrays
/// indexed by number (others in maps).
const DENSE_PORTS: usize = 1024;
/// Bits of a port's state in [`OfSwitch::port_state`].
const PORT_EXISTS: u8 = 1;
/// PORT_DOWN or NO_FWD: what is sent there is dropped.
const PORT_CLOSED: u8 = 2;
/// PORT_DOWN or NO_RECV: what arrives there is dropped.
const PORT_NO_RECV: u8 = 4;

/// The `PORT_*` bits of a port that exists.
fn port_bits_of(p: &PortInfo) -> u8 {
    use sluice_openflow::port_config::{NO_FWD, NO_RECV, PORT_DOWN};
    PORT_EXISTS
        | if p.config & (PORT_DOWN | NO_FWD) != 0 { PORT_CLOSED } else { 0 }
        | if p.config & (PORT_DOWN | NO_RECV) != 0 { PORT_NO_RECV } else { 0 }
}

/// How many frames ahead of the one being parsed a batch starts loading.
const LOAD_AHEAD: usize = 12;

/// Packets of a group of a batch's pipeline (see
/// `OfSwitch::process_pipelined`): enough for what a stage starts loading
/// to arrive from memory before the next stage reads it (measured with
/// `sluice openflow-bench`: 4 leaves a million routes' loads waiting, 16
/// evicts what 10 000 routes' loads brought).
const STAGE: usize = 8;

/// Packets a batch's pipeline holds: its four stages' groups.
const RING: usize = 4 * STAGE;

/// How deep groups may chain (a group's bucket naming a group).
const MAX_GROUP_DEPTH: usize = 8;

/// A port of the switch.
#[derive(Debug, Clone, Default)]
pub struct PortInfo {
    pub name: String,
    pub hw_addr: [u8; 6],
    /// `ofp_port_config` bits (PORT_DOWN, NO_RECV, NO_FWD, NO_PACKET_IN).
    pub config: u32,
    /// Link up.
    pub live: bool,
}

/// A group entry. While a packet runs its buckets they are taken out of
/// it and put back after (no copy, no reference count per packet).
#[derive(Debug, Clone)]
pub struct Group {
    pub typ: u8,
    pub buckets: Vec<Bucket>,
    /// What its one bucket amounts to when that is a forwarding step
    /// (an indirect group or an all group of one bucket that sets MACs,
    /// decrements the TTL and outputs: a next hop), run without the
    /// bucket's action list at the end of a walk.
    pub forward: Option<crate::cache::Forward>,
    /// Packets and bytes `forward` ran for (this replica's; folded into
    /// the group's counters and its one bucket's by `DataPlane::counters`):
    /// counted here, the entry the walk already reads, rather than in
    /// `Counters::groups`.
    pub forwarded: (u64, u64),
}

impl Group {
    /// A group of type `typ` with these buckets.
    pub fn new(typ: u8, buckets: Vec<Bucket>) -> Group {
        let one = matches!(typ, sluice_openflow::group_type::INDIRECT | sluice_openflow::group_type::ALL)
            && buckets.len() == 1;
        let forward = buckets.first().filter(|_| one).and_then(|b| crate::cache::Forward::of_actions(&b.actions));
        Group { typ, buckets, forward, forwarded: (0, 0) }
    }
}

/// Group ids below this are kept in a vector indexed by id (what
/// controllers pick: small numbers), read with one load per packet;
/// others in a map.
const DENSE_GROUPS: u32 = 4096;

/// The group table, iterated in id order.
#[derive(Debug, Clone, Default)]
pub struct Groups {
    dense: Vec<Option<Group>>,
    sparse: BTreeMap<u32, Group>,
}

impl Groups {
    #[inline]
    pub fn get(&self, id: &u32) -> Option<&Group> {
        match self.dense.get(*id as usize) {
            Some(g) => g.as_ref(),
            None if *id < DENSE_GROUPS => None,
            None => self.sparse.get(id),
        }
    }

    #[inline]
    pub fn get_mut(&mut self, id: &u32) -> Option<&mut Group> {
        match self.dense.get_mut(*id as usize) {
            Some(g) => g.as_mut(),
            None if *id < DENSE_GROUPS => None,
            None => self.sparse.get_mut(id),
        }
    }

    pub fn contains_key(&self, id: &u32) -> bool {
        self.get(id).is_some()
    }

    /// How many groups there are.
    pub fn len(&self) -> usize {
        self.dense.iter().filter(|g| g.is_some()).count() + self.sparse.len()
    }

    /// Adds or replaces group `id`, giving back the one it replaces.
    pub fn insert(&mut self, id: u32, g: Group) -> Option<Group> {
        if id < DENSE_GROUPS {
            let at = id as usize;
            if self.dense.len() <= at {
                self.dense.resize_with(at + 1, || None);
            }
            self.dense[at].replace(g)
        } else {
            self.sparse.insert(id, g)
        }
    }

    pub fn remove(&mut self, id: &u32) -> Option<Group> {
        match self.dense.get_mut(*id as usize) {
            Some(g) => g.take(),
            None => self.sparse.remove(id),
        }
    }

    /// The groups in id order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &Group)> + '_ {
        let dense = self.dense.iter().enumerate().filter_map(|(i, g)| Some((i as u32, g.as_ref()?)));
        dense.chain(self.sparse.iter().map(|(id, g)| (*id, g)))
    }

    /// The group ids in order.
    pub fn keys(&self) -> impl Iterator<Item = u32> + '_ {
        self.iter().map(|(id, _)| id)
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut Group> + '_ {
        self.dense.iter_mut().flatten().chain(self.sparse.values_mut())
    }

    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }
}

/// Hashes the integer keys of the per-packet counters: one multiply
/// (flow uids and group ids are not chosen by an adversary who could
/// flood a bucket: the switch picks uids, the controller group ids).
#[derive(Debug, Clone, Copy, Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
}

/// A map keyed by flow uid or group id (see [`IdHasher`]).
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// What a replica reports to the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// A packet for the controller: `data` is the whole packet; the
    /// controller asked for `max_len` bytes of it (OFPCML_NO_BUFFER: all,
    /// unbuffered), which the agent sends, keeping the packet in a buffer
    /// when it sends less (see [`crate::buffers`]).
    PacketIn {
        in_port: u32,
        reason: u8,
        table_id: u8,
        cookie: u64,
        total_len: u16,
        data: Vec<u8>,
        max_len: u16,
        metadata: u64,
    },
}

/// A group's (packets, bytes, per bucket (packets, bytes)).
pub type GroupCounts = (u64, u64, Vec<(u64, u64)>);

/// Adds one replica's counts of a group or meter (totals, and per bucket
/// or band) to `into`.
fn add_counts(into: &mut GroupCounts, from: &GroupCounts) {
    into.0 += from.0;
    into.1 += from.1;
    if into.2.len() < from.2.len() {
        into.2.resize(from.2.len(), (0, 0));
    }
    for (i, b) in from.2.iter().enumerate() {
        into.2[i].0 += b.0;
        into.2[i].1 += b.1;
    }
}

/// Per-replica counters (summed over replicas for the agent).
#[derive(Debug, Clone, Default)]
pub struct Counters {
    /// Flow uid → (packets, bytes).
    pub flows: IdMap<u64, (u64, u64)>,
    /// Per table: (lookups, matches).
    pub tables: Vec<(u64, u64)>,
    /// Port → (rx packets, rx bytes, tx packets, tx bytes, tx dropped).
    pub ports: IdMap<u32, [u64; 5]>,
    /// Group → its counts.
    pub groups: IdMap<u32, GroupCounts>,
    /// Packet-ins dropped because the agent's queue was full.
    pub packet_ins_dropped: u64,
    /// Frames sent to a port the switch does not have (LOCAL without a
    /// local interface).
    pub unsupported_output: u64,
    /// Meter → (packets, bytes, per band (packets, bytes)).
    pub meters: BTreeMap<u32, GroupCounts>,
    /// Packets the flow cache served, and those that walked the tables.
    pub cache_hits: u64,
    pub cache_misses: u64,
}

/// Adds `p` packets and `b` bytes of what a recorded walk counts to the
/// table and group counters in `to` (not the flow entries').
fn add_counts_of(to: &mut Counters, counts: &[Count], p: u64, b: u64) {
    for c in counts {
        match c {
            Count::Hit { table, .. } => {
                let t = &mut to.tables[usize::from(*table)];
                t.0 += p;
                t.1 += p;
            }
            Count::Miss { table } => to.tables[usize::from(*table)].0 += p,
            Count::Group { id, n, buckets } => count_group(to, *id, *n, p, b, buckets.iter().copied()),
        }
    }
}

/// Counts `p` packets of `b` bytes through group `id` (of `n` buckets) and
/// its `buckets`.
fn count_group(to: &mut Counters, id: u32, n: usize, p: u64, b: u64, buckets: impl Iterator<Item = usize>) {
    let c = to.groups.entry(id).or_insert_with(|| (0, 0, Vec::new()));
    c.0 += p;
    c.1 += b;
    if c.2.len() < n {
        c.2.resize(n, (0, 0));
    }
    for i in buckets {
        c.2[i].0 += p;
        c.2[i].1 += b;
    }
}

/// Folds `p` packets and `b` bytes of what a recorded walk counts into the
/// counters and the flow entries it hit.
fn fold_counts(tables: &mut [FlowTable], to: &mut Counters, counts: &[Count], p: u64, b: u64) {
    add_counts_of(to, counts, p, b);
    for c in counts {
        if let Count::Hit { table, id } = c {
            tables[usize::from(*table)].count(*id, p, b);
        }
    }
}

/// What the walk's code and [`pipeline_lookup`] read: the lookup a batch
/// made ahead for the packet (first, as the code expects), the tables, the
/// lookup scratch buffer.
#[repr(C)]
struct LookupCtx {
    ahead: LookupAhead,
    tables: *mut FlowTable,
    scratch: *mut Vec<u8>,
}

/// A table's hit as the walk's code reads it (see [`crate::code::LookupFn`]):
/// 0 for a miss (or an id too large to carry).
#[inline]
fn walk_answer(t: &FlowTable, hit: Option<Hit>) -> u64 {
    match hit {
        Some((id, step)) if id != u32::MAX => {
            let goto = match step.unwrap_or_else(|| t.fast(id)) {
                Fast::Goto(g) => u64::from(g) + 1,
                _ => 0,
            };
            (goto << 32) | u64::from(id + 1)
        }
        _ => 0,
    }
}

/// Looks up a table through its structure for the walk's native code
/// (see [`crate::code::LookupFn`]).
extern "C" fn pipeline_lookup(ctx: *mut u8, table: u32, key: *const u8) -> u64 {
    // SAFETY: the caller (`OfSwitch::walk_fast`) passes a live `LookupCtx`
    // whose pointers are the switch's tables (64 of them: the code asks
    // only for table numbers below that) and scratch buffer, not borrowed
    // otherwise during the call, and the packet's 136-byte key.
    let (ctx, key) = unsafe { (&*(ctx as *const LookupCtx), &*(key as *const FullKey)) };
    // SAFETY: as above.
    let (t, scratch) = unsafe { (&mut *ctx.tables.add(table as usize), &mut *ctx.scratch) };
    let hit = t.lookup_id(key, scratch).map(|id| (id, None));
    walk_answer(t, hit)
}

/// The least frame on an Ethernet wire, without its FCS.
const MIN_FRAME: usize = 60;

/// A frame that was at least [`MIN_FRAME`] bytes long before a pop took
/// `popped` bytes out of it stays that long (zeros added at the end), as
/// the frame it was on the wire: a pop never makes a frame too short to
/// send.
fn keep_min_frame(buf: &mut Vec<u8>, popped: usize) {
    if buf.len() < MIN_FRAME && buf.len() + popped >= MIN_FRAME {
        buf.resize(MIN_FRAME, 0);
    }
}

/// A packet on its way through the pipeline.
#[derive(Debug, Clone)]
struct Pkt {
    buf: Vec<u8>,
    parsed: Parsed,
    meta: Meta,
    full: FullKey,
    /// `full` no longer reflects `buf` or `meta` (a field or the metadata
    /// changed).
    stale: bool,
    /// `parsed` no longer reflects `buf` (headers were pushed, popped or
    /// changed in a way that moves the ones after them); implies `stale`.
    reparse: bool,
    /// What table `.0`'s lookup of `full` found (the entry's classifier
    /// id, with its fast step when the lookup gave it), looked up ahead
    /// while the batch was prefetched; void once `full` is extracted
    /// again.
    found: Option<(u8, Option<Hit>)>,
}

impl Pkt {
    /// What table `table`'s lookup found, when it was made ahead (see
    /// the field `found`).
    #[inline]
    fn found_in(&self, table: usize) -> Option<Option<Hit>> {
        self.found.filter(|(t, _)| usize::from(*t) == table).map(|(_, hit)| hit)
    }

    fn new(buf: Vec<u8>, meta: Meta) -> Pkt {
        Pkt { buf, parsed: Parsed::default(), meta, full: [0; FULL_LEN], stale: true, reparse: true, found: None }
    }

    /// Becomes a copy of `frame` with `meta`, parsed and its key
    /// extracted from `frame` itself: reading the copy just written would
    /// wait for the copy's wide overlapping stores (store forwarding
    /// fails for reads that span two of them).
    #[inline]
    fn load(&mut self, frame: &[u8], meta: Meta) {
        self.buf.clear();
        self.buf.extend_from_slice(frame);
        self.meta = meta;
        fields::parse_extract(frame, &self.meta, &mut self.parsed, &mut self.full);
        self.reparse = false;
        self.stale = false;
        self.found = None;
    }

    /// Brings `parsed` up to date (what actions that change the frame need).
    #[inline]
    fn parsed(&mut self) {
        if self.reparse {
            fields::parse_into(&self.buf, &mut self.parsed);
            self.reparse = false;
        }
    }

    /// Brings `parsed` and `full` up to date (what lookups need).
    #[inline]
    fn refresh(&mut self) {
        self.parsed();
        if self.stale {
            fields::extract(&self.buf, &self.parsed, &self.meta, &mut self.full);
            self.stale = false;
            self.found = None;
        }
    }

    /// Decrements the IPv4 TTL or IPv6 hop limit (`parsed` up to date):
    /// `Some(false)`, changing nothing, when it would reach zero; `None`
    /// for a frame with neither.
    #[inline]
    fn dec_ttl(&mut self) -> Option<bool> {
        let at = match self.parsed.kind {
            fields::L3::Ipv4 => self.parsed.l3 + 8,
            fields::L3::Ipv6 => self.parsed.l3 + 7,
            _ => return None,
        };
        if self.buf[at] <= 1 {
            return Some(false);
        }
        if self.parsed.kind == fields::L3::Ipv4 {
            // The TTL is under the IPv4 header checksum only.
            fields::dec_ipv4_ttl(&mut self.buf, self.parsed.l3);
        } else {
            self.buf[at] -= 1;
        }
        Some(true)
    }

    /// A copy of the frame for a controller: with its checksums complete
    /// (a controller, or a packet-out of a buffered packet, cannot finish
    /// a partial one).
    fn for_controller(&mut self) -> Vec<u8> {
        let mut data = self.buf.clone();
        if self.meta.csum_partial {
            self.parsed();
            fields::fix_checksums(&mut data, &self.parsed, false);
        }
        data
    }

    /// The frame's headers changed place.
    fn moved(&mut self) {
        self.stale = true;
        self.reparse = true;
    }
}

/// Whether writing `f` may change how the frame parses: the ethertype,
/// the IP protocol (the transport header read) and the ICMP type (the
/// ND options read).
fn set_field_moves_headers(f: OxmField) -> bool {
    matches!(f, OxmField::EthType | OxmField::IpProto | OxmField::Icmpv4Type | OxmField::Icmpv6Type)
}

/// Whether `f` lies under a checksum (IPv4 header, TCP/UDP/ICMP with
/// their pseudo-headers): the layer-2 fields, VLAN, MPLS and PBB do not.
fn set_field_under_checksum(f: OxmField) -> bool {
    !matches!(
        f,
        OxmField::EthDst
            | OxmField::EthSrc
            | OxmField::EthType
            | OxmField::VlanVid
            | OxmField::VlanPcp
            | OxmField::MplsLabel
            | OxmField::MplsTc
            | OxmField::MplsBos
            | OxmField::PbbIsid
    )
}

/// The OpenFlow switch's data plane (see the module documentation).
///
/// Code that changes its public fields directly (`ports`, `config`)
/// calls `DataPlane::changed` before the next packet, as the worker pool
/// does after every change; its own methods (flow, group and meter mods,
/// expiry) do it themselves.
#[derive(Debug, Clone)]
pub struct OfSwitch {
    pub tables: Vec<FlowTable>,
    pub groups: Groups,
    pub meters: crate::meter::Meters,
    pub ports: BTreeMap<u32, PortInfo>,
    pub config: SwitchConfig,
    pub counters: Counters,
    /// Whether packets go through the flow cache (on by default; off, every
    /// packet walks the tables).
    pub flow_cache: bool,
    /// `PORT_*` bits of ports numbered below [`DENSE_PORTS`], from `ports`
    /// (rebuilt by `DataPlane::changed`).
    port_state: Vec<u8>,
    /// Counters of ports numbered below [`DENSE_PORTS`] (others in
    /// `counters.ports`), in the order of `Counters::ports`.
    port_counts: Vec<[u64; 5]>,
    stats: Stats,
    notes: Vec<Note>,
    scratch: Vec<u8>,
    /// Buffers of frames and group copies, reused from packet to packet.
    spare: Vec<Vec<u8>>,
    /// Tables that run on the route-table template, whose slots a batch
    /// prefetches (kept with the flow cache's layout).
    prefix_tables: Vec<u8>,
    /// The action set, emptied and reused from packet to packet (taken
    /// out while a walk runs).
    set: Option<Box<ActionSet>>,
    /// The meters' clock.
    clock: std::time::Instant,
    cache: FlowCache,
    /// The walk being recorded for the cache, if any.
    rec: Option<Recording>,
    /// Where the NORMAL port has seen each address (see [`crate::normal`]).
    pub macs: MacTable,
    /// Standing alone (fail mode standalone, no controller): every packet
    /// goes to the NORMAL port, the tables are not looked at.
    pub fail_open: bool,
    /// The walk's gotos as native code (see [`crate::code::PipelineCode`]),
    /// for the tables as they are: dropped before any table changes.
    pipeline: Option<Arc<PipelineCode>>,
    /// The packets of a batch and their cache keys, reused from batch to batch.
    batch: Vec<(Pkt, Option<Key>)>,
    /// Which frames of the next batch have a partial checksum (see
    /// [`DataPlane::partial_checksums`]).
    partial: u128,
}

/// A walk being recorded (see [`crate::cache`]).
#[derive(Debug, Clone)]
struct Recording {
    /// Steps of the walk, and of the group buckets being run (innermost last).
    stack: Vec<Vec<Op>>,
    /// What the walk counts.
    counts: Vec<Count>,
    /// Nothing happened that a replay could not repeat.
    cacheable: bool,
    /// The actions being run are apply-actions (a drop by one counts).
    apply: bool,
}

impl Recording {
    fn push(&mut self, op: Op) {
        if let Some(top) = self.stack.last_mut() {
            top.push(op);
        }
    }
}

impl Default for OfSwitch {
    fn default() -> Self {
        OfSwitch::new(BTreeMap::new())
    }
}

/// Order in which the action set runs (OpenFlow 1.3.5 section 5.10), by
/// action type number; set-field (25) runs where 25 stands.
const ACTION_SET_ORDER: [u16; 16] = [12, 18, 20, 27, 19, 26, 17, 11, 16, 24, 15, 23, 25, 21, 22, 0];

/// An action's type number (`OFPAT_*`).
pub fn action_type(a: &Action) -> u16 {
    match a {
        Action::Output { .. } => 0,
        Action::CopyTtlOut => 11,
        Action::CopyTtlIn => 12,
        Action::SetMplsTtl(_) => 15,
        Action::DecMplsTtl => 16,
        Action::PushVlan(_) => 17,
        Action::PopVlan => 18,
        Action::PushMpls(_) => 19,
        Action::PopMpls(_) => 20,
        Action::SetQueue(_) => 21,
        Action::Group(_) => 22,
        Action::SetNwTtl(_) => 23,
        Action::DecNwTtl => 24,
        Action::SetField(_) => 25,
        Action::PushPbb(_) => 26,
        Action::PopPbb => 27,
        Action::Experimenter { .. } => 0xffff,
    }
}

/// Where each action type (`OFPAT_*` below 28) stands in
/// [`ACTION_SET_ORDER`]; `u8::MAX` for types the set does not hold.
const ACTION_SET_SLOT: [u8; 28] = {
    let mut slots = [u8::MAX; 28];
    let mut i = 0;
    while i < ACTION_SET_ORDER.len() {
        slots[ACTION_SET_ORDER[i] as usize] = i as u8;
        i += 1;
    }
    slots
};

/// The field a set-field action writes.
fn set_field_of(a: &Action) -> OxmField {
    match a {
        Action::SetField(o) => o.field,
        _ => unreachable!("only set-fields are in the set-field list"),
    }
}

/// Slot of set-field (25) and of the group (22) in the set.
const SET_FIELD_SLOT: usize = 12;
const GROUP_SLOT: usize = 14;

/// The action set of a packet: at most one action per type, one set-field
/// per field. Fixed slots in execution order (no map, no allocation once
/// the set-field list has grown to its size).
#[derive(Debug, Clone, Default)]
struct ActionSet {
    /// One action per slot of [`ACTION_SET_ORDER`] (the set-field slot unused).
    by_slot: [Option<Action>; 16],
    /// Set-fields (`Action::SetField`), sorted by field.
    set_fields: Vec<Action>,
    /// Nothing written since the last clear.
    empty: bool,
}

impl ActionSet {
    fn write(&mut self, actions: &[Action]) {
        for a in actions {
            match a {
                Action::SetField(o) => match self.set_fields.binary_search_by_key(&o.field, set_field_of) {
                    Ok(i) => self.set_fields[i].clone_from(a),
                    Err(i) => self.set_fields.insert(i, a.clone()),
                },
                a => {
                    let t = usize::from(action_type(a));
                    // Experimenter actions are refused when flows are added.
                    let Some(&slot) = ACTION_SET_SLOT.get(t) else { continue };
                    if slot != u8::MAX {
                        self.by_slot[usize::from(slot)] = Some(a.clone());
                    }
                }
            }
            self.empty = false;
        }
    }

    fn clear(&mut self) {
        if !self.empty {
            self.by_slot.iter_mut().for_each(|a| *a = None);
            self.set_fields.clear();
            self.empty = true;
        }
    }

    /// The `n`th action of the set in execution order (the output only
    /// when no group is set), `None` past the last; `n` counts slots and
    /// set-fields, so callers walk `n` from 0 until `None`.
    fn nth(&self, n: usize) -> Option<Option<&Action>> {
        let fields = self.set_fields.len();
        let slot = if n < SET_FIELD_SLOT {
            n
        } else if n < SET_FIELD_SLOT + fields {
            return Some(Some(&self.set_fields[n - SET_FIELD_SLOT]));
        } else {
            n - fields + 1
        };
        if slot >= ACTION_SET_ORDER.len() {
            return None;
        }
        if slot == ACTION_SET_ORDER.len() - 1 && self.by_slot[GROUP_SLOT].is_some() {
            return Some(None);
        }
        Some(self.by_slot[slot].as_ref())
    }
}

/// Why an action list stopped early.
#[derive(Debug, PartialEq, Eq)]
enum Stop {
    /// The packet was dropped (invalid TTL, a frame too short to change).
    Dropped,
}

/// A packet-out's header before its frame: in_port (u32), actions length
/// (u16), the actions in OpenFlow encoding, then the frame.
pub fn encode_packet_out(in_port: u32, actions: &[u8], frame: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(6 + actions.len() + frame.len());
    v.extend_from_slice(&in_port.to_be_bytes());
    v.extend_from_slice(&(actions.len() as u16).to_be_bytes());
    v.extend_from_slice(actions);
    v.extend_from_slice(frame);
    v
}

impl OfSwitch {
    /// A switch with these ports and empty tables.
    pub fn new(ports: BTreeMap<u32, PortInfo>) -> OfSwitch {
        let mut sw = OfSwitch {
            tables: vec![FlowTable::default(); N_TABLES],
            groups: Groups::default(),
            meters: crate::meter::Meters { share: 1, ..Default::default() },
            ports,
            config: SwitchConfig { flags: 0, miss_send_len: 128 },
            counters: Counters { tables: vec![(0, 0); N_TABLES], ..Counters::default() },
            stats: Stats::default(),
            notes: Vec::new(),
            scratch: Vec::new(),
            spare: Vec::new(),
            prefix_tables: Vec::new(),
            set: Some(Box::default()),
            clock: std::time::Instant::now(),
            cache: FlowCache::new(),
            rec: None,
            macs: MacTable::default(),
            fail_open: false,
            pipeline: None,
            batch: Vec::new(),
            partial: 0,
            flow_cache: true,
            port_state: Vec::new(),
            port_counts: vec![[0; 5]; DENSE_PORTS],
        };
        sw.index_ports();
        sw
    }

    /// Rebuilds `port_state` from `ports`.
    fn index_ports(&mut self) {
        self.port_state.clear();
        self.port_state.resize(DENSE_PORTS, 0);
        for (&n, p) in &self.ports {
            if let Some(s) = self.port_state.get_mut(n as usize) {
                *s = port_bits_of(p);
            }
        }
    }

    /// Port `p`'s `PORT_*` bits.
    #[inline]
    fn port_bits(&self, p: u32) -> u8 {
        match self.port_state.get(p as usize) {
            Some(&s) => s,
            None => self.ports.get(&p).map_or(0, port_bits_of),
        }
    }

    /// Port `p`'s counters.
    #[inline]
    fn port_count(&mut self, p: u32) -> &mut [u64; 5] {
        match self.port_counts.get_mut(p as usize) {
            Some(c) => c,
            None => self.counters.ports.entry(p).or_default(),
        }
    }

    /// Records a step of the walk being recorded, if any.
    #[inline]
    fn rec(&mut self, op: impl FnOnce() -> Op) {
        if let Some(r) = &mut self.rec {
            r.push(op());
        }
    }

    /// Makes the walk being recorded, if any, one the cache must not keep.
    #[inline]
    fn uncacheable(&mut self) {
        if let Some(r) = &mut self.rec {
            r.cacheable = false;
        }
    }

    /// Empties the flow cache, its pending counts folded into the
    /// counters first: call it before the tables, groups or meters change
    /// (while the entries the counts name still exist).
    pub fn forget_walks(&mut self) {
        let (tables, counters) = (&mut self.tables, &mut self.counters);
        self.cache.drain(|c, p, b| fold_counts(tables, counters, c, p, b));
    }

    /// How each non-empty table is looked up, one line per table (what
    /// the entries made of it: the route-table template or the
    /// classifier, see [`FlowTable::describe`]).
    pub fn describe_tables(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .tables
            .iter()
            .enumerate()
            .filter(|(_, t)| !t.is_empty())
            .map(|(i, t)| format!("table {i}: {} entries, {}", t.len(), t.describe()))
            .collect();
        if let Some(p) = &self.pipeline {
            let (mut inline, mut called) = (Vec::new(), Vec::new());
            for (i, s) in p.shapes().iter().enumerate() {
                match s {
                    TableShape::Scanned { .. } => inline.push(i.to_string()),
                    TableShape::Structure => called.push(i.to_string()),
                    TableShape::Empty => {}
                }
            }
            let list = |v: &[String]| if v.is_empty() { "none".to_string() } else { v.join(" ") };
            out.push(format!(
                "the walk's gotos in native code ({} bytes): tables compared inline: {}; looked up through their structure: {}",
                p.code_bytes,
                list(&inline),
                list(&called)
            ));
        }
        out
    }

    /// Compiles every table that is scanned and has no native code for
    /// its current entries (see [`crate::code`]); gives each table's
    /// code, to install on every copy with [`OfSwitch::install_code`].
    /// Off the packet path: the agent calls it on the master copy.
    pub fn compile_tables(&self) -> Vec<(usize, Arc<TableCode>)> {
        let mut out = Vec::new();
        for (i, t) in self.tables.iter().enumerate() {
            let Some(scan) = t.wants_code() else { continue };
            match TableCode::compile(scan) {
                Ok(c) => out.push((i, Arc::new(c))),
                // The scan keeps answering; say why once per change.
                Err(e) => eprintln!("openflow: table {i} not compiled: {e}"),
            }
        }
        out
    }

    /// Installs `code` on table `table` if it was compiled from the
    /// table's current entries (see [`FlowTable::set_code`]); whether it was.
    pub fn install_code(&mut self, table: usize, code: Arc<TableCode>) -> bool {
        self.tables.get_mut(table).is_some_and(|t| t.set_code(code))
    }

    /// The native code of every compiled table and of the walk, as
    /// Cranelift IR, for users.
    pub fn code_listing(&self) -> String {
        let mut out = String::new();
        for (i, t) in self.tables.iter().enumerate() {
            if let Some(c) = t.code() {
                out.push_str(&format!("; table {i}: {} bytes of machine code\n{}\n", c.code_bytes, c.listing));
            }
        }
        if let Some(p) = &self.pipeline {
            out.push_str(&format!(
                "; the walk from table to table: {} bytes of machine code\n{}\n",
                p.code_bytes, p.listing
            ));
        }
        out
    }

    /// What the walk's native code would assume about each table now.
    /// (Native code for the walk fits a copy whose tables have these shapes.)
    pub fn table_shapes(&self) -> Vec<TableShape> {
        self.tables
            .iter()
            .map(|t| match t.scan() {
                _ if t.is_empty() => TableShape::Empty,
                Some(scan) => TableShape::Scanned {
                    scan: scan.into(),
                    gotos: crate::table::scan_entries(scan)
                        .map(|(id, _)| match t.fast(id) {
                            Fast::Goto(g) => Some(g),
                            _ => None,
                        })
                        .collect(),
                },
                None => TableShape::Structure,
            })
            .collect()
    }

    /// Compiles the walk from table to table for the tables as they are
    /// (see [`crate::code::PipelineCode`]), unless this copy runs such
    /// code already or the code would remove no work: it is compiled when
    /// some entry that is a goto alone links two tables compared inline
    /// (one lookup and one dispatch less per packet that takes it; a walk
    /// that leaves the first table for a route table or a classifier runs
    /// as fast interpreted, with that table's lookup made ahead). To
    /// install on every copy with [`OfSwitch::install_pipeline`]. Off the
    /// packet path.
    pub fn compile_pipeline(&self) -> Option<Result<Arc<PipelineCode>, String>> {
        if self.pipeline.is_some() {
            return None;
        }
        let shapes = self.table_shapes();
        let inline = |t: usize| matches!(shapes.get(t), Some(TableShape::Scanned { .. }));
        let links_inline = shapes.iter().enumerate().any(|(t, s)| match s {
            TableShape::Scanned { gotos, .. } => {
                gotos.iter().flatten().any(|g| usize::from(*g) > t && inline(usize::from(*g)))
            }
            _ => false,
        });
        links_inline.then(|| PipelineCode::compile(&shapes).map(Arc::new))
    }

    /// Walks on `code` from now on if it was compiled for the tables as
    /// they are on this copy; whether it was.
    pub fn install_pipeline(&mut self, code: Arc<PipelineCode>) -> bool {
        let fits = code.is_for(&self.table_shapes());
        if fits {
            self.pipeline = Some(code);
        }
        fits
    }

    /// Whether the walk runs on native code.
    pub fn pipeline_code(&self) -> Option<&PipelineCode> {
        self.pipeline.as_deref()
    }

    /// Call before any table changes: empties the flow cache (see
    /// [`OfSwitch::forget_walks`]) and drops the walk's native code,
    /// which answers only for the tables as they were.
    pub fn tables_will_change(&mut self) {
        self.forget_walks();
        self.pipeline = None;
    }

    /// Every flow entry's packets and bytes (settled counts of replaced
    /// entries, what this copy's tables matched, and what its flow cache
    /// replayed).
    pub fn flow_counts(&self) -> IdMap<u64, (u64, u64)> {
        let mut all = self.counters.flows.clone();
        for t in &self.tables {
            for (uid, (p, b)) in t.counts() {
                if p != 0 || b != 0 {
                    let c = all.entry(uid).or_insert((0, 0));
                    c.0 += p;
                    c.1 += b;
                }
            }
        }
        self.cache.pending(|counts, p, b| {
            for c in counts {
                if let Count::Hit { table, id } = c {
                    let e = all.entry(self.tables[usize::from(*table)].hot_ref(*id).uid).or_insert((0, 0));
                    e.0 += p;
                    e.1 += b;
                }
            }
        });
        all
    }

    /// Queues a packet-in, unless its input port is configured
    /// NO_PACKET_IN.
    fn note(&mut self, n: Note) {
        let Note::PacketIn { in_port, .. } = &n;
        if self.ports.get(in_port).is_some_and(|p| p.config & sluice_openflow::port_config::NO_PACKET_IN != 0) {
            return;
        }
        if self.notes.len() >= MAX_PENDING_PACKET_INS {
            self.counters.packet_ins_dropped += 1;
        } else {
            self.notes.push(n);
        }
    }

    fn port_live(&self, p: u32) -> bool {
        self.ports.get(&p).is_some_and(|i| i.live && i.config & sluice_openflow::port_config::PORT_DOWN == 0)
    }

    fn send<E: FnMut(usize, u32, &[u8]) + ?Sized>(&mut self, idx: usize, to: u32, f: &[u8], emit: &mut E) {
        // A port configured down or NO_FWD drops what is sent to it.
        let ok = self.port_bits(to) & (PORT_EXISTS | PORT_CLOSED) == PORT_EXISTS;
        let c = self.port_count(to);
        if ok {
            c[2] += 1;
            c[3] += f.len() as u64;
            self.stats.transmitted += 1;
            emit(idx, if to == port::LOCAL { LOCAL_LIVE_PORT } else { to }, f);
        } else {
            c[4] += 1;
        }
    }

    /// Sends `pkt` to `out` (a port number or a reserved port).
    #[allow(clippy::too_many_arguments)]
    fn output<E: FnMut(usize, u32, &[u8]) + ?Sized>(
        &mut self,
        idx: usize,
        pkt: &mut Pkt,
        out: u32,
        max_len: u16,
        reason: u8,
        table_id: u8,
        cookie: u64,
        emit: &mut E,
    ) {
        let in_port = pkt.meta.in_port;
        match out {
            port::IN_PORT => self.send(idx, in_port, &pkt.buf, emit),
            port::ALL | port::FLOOD => {
                let targets: Vec<u32> = self
                    .ports
                    .iter()
                    .filter(|(n, i)| {
                        **n != in_port && (out == port::ALL || i.config & sluice_openflow::port_config::NO_FWD == 0)
                    })
                    .map(|(n, _)| *n)
                    .collect();
                for t in targets {
                    self.send(idx, t, &pkt.buf, emit);
                }
            }
            port::CONTROLLER => {
                let n = Note::PacketIn {
                    in_port,
                    reason,
                    table_id,
                    cookie,
                    total_len: pkt.buf.len().min(usize::from(u16::MAX)) as u16,
                    data: pkt.for_controller(),
                    max_len,
                    metadata: pkt.meta.metadata,
                };
                self.note(n);
            }
            port::NORMAL => self.normal(idx, pkt, emit),
            port::LOCAL if self.ports.contains_key(&port::LOCAL) => {
                if in_port != port::LOCAL {
                    self.send(idx, port::LOCAL, &pkt.buf, emit)
                }
            }
            port::TABLE => {
                // Only meaningful in a packet-out (flows and buckets may not
                // name it): run the tables on a copy, later actions still
                // see the frame.
                let meta =
                    Meta { in_port, in_phy_port: in_port, csum_partial: pkt.meta.csum_partial, ..Meta::default() };
                let _ = self.pipeline(idx, meta, pkt.buf.clone(), emit);
            }
            // Output to the input port's own number sends nothing (the
            // specification asks for IN_PORT to send a packet back).
            p if p <= port::MAX => {
                if p != in_port {
                    self.send(idx, p, &pkt.buf, emit)
                }
            }
            _ => self.counters.unsupported_output += 1,
        }
    }

    /// Forwards `pkt` as an ordinary MAC-learning switch (see
    /// [`crate::normal`]).
    fn normal<E: FnMut(usize, u32, &[u8]) + ?Sized>(&mut self, idx: usize, pkt: &mut Pkt, emit: &mut E) {
        pkt.parsed();
        let f = &pkt.buf;
        if f.len() < 14 {
            self.stats.dropped += 1;
            return;
        }
        let vid =
            pkt.parsed.vlan.and_then(|v| f.get(v + 2..v + 4)).map_or(0, |t| u16::from_be_bytes([t[0], t[1]]) & 0x0fff);
        let mac = |at: usize| -> [u8; 6] { f[at..at + 6].try_into().expect("6 bytes") };
        let (dst, src) = (mac(0), mac(6));
        let in_port = pkt.meta.in_port;
        let now = self.clock.elapsed();
        self.macs.learn(vid, src, in_port, now);
        match self.macs.port_of(vid, dst, now) {
            Some(p) if p == in_port => self.stats.dropped += 1,
            Some(p) => self.send(idx, p, &pkt.buf, emit),
            None => self.output(idx, pkt, port::FLOOD, 0, 0, 0, 0, emit),
        }
    }

    /// Runs `actions` in order on `pkt`.
    #[allow(clippy::too_many_arguments)]
    fn run_actions<E: FnMut(usize, u32, &[u8]) + ?Sized>(
        &mut self,
        idx: usize,
        pkt: &mut Pkt,
        actions: &[Action],
        reason: u8,
        table_id: u8,
        cookie: u64,
        depth: usize,
        emit: &mut E,
    ) -> Result<(), Stop> {
        for a in actions {
            if let Some(r) = &mut self.rec {
                let counted = r.apply;
                match a {
                    // Recorded by `group` itself.
                    Action::Group(_) => {}
                    // What a replay could not repeat (see `crate::cache`).
                    Action::PushVlan(_)
                    | Action::PopVlan
                    | Action::PushMpls(_)
                    | Action::PopMpls(_)
                    | Action::PushPbb(_)
                    | Action::PopPbb
                    | Action::Experimenter { .. }
                    | Action::Output { port: port::TABLE, .. } => r.cacheable = false,
                    Action::SetField(o) if set_field_moves_headers(o.field) => r.cacheable = false,
                    Action::SetField(o)
                        if matches!(o.field, OxmField::EthDst | OxmField::EthSrc) && o.value.len() == 6 =>
                    {
                        let at = if o.field == OxmField::EthDst { 0 } else { 6 };
                        let mut mac = [0; 6];
                        mac.copy_from_slice(&o.value);
                        r.push(Op::SetEth { at, mac });
                    }
                    Action::Output { port, .. } if *port <= port::MAX => r.push(Op::Output { port: *port }),
                    Action::DecNwTtl => r.push(Op::DecTtl { table: table_id, cookie, counted }),
                    _ => r.push(Op::Act { action: a.clone(), reason, table: table_id, cookie, counted }),
                }
            }
            match a {
                Action::Output { port, max_len } => {
                    self.output(idx, pkt, *port, *max_len, reason, table_id, cookie, emit)
                }
                Action::Group(g) => self.group(idx, pkt, *g, (table_id, cookie), depth, emit),
                Action::SetField(o) => {
                    pkt.parsed();
                    match o.field {
                        OxmField::TunnelId if o.value.len() == 8 => {
                            pkt.meta.tunnel_id = u64::from_be_bytes(o.value[..].try_into().expect("8 bytes"))
                        }
                        f => {
                            if fields::write_field(&mut pkt.buf, &pkt.parsed, f, &o.value)
                                && set_field_under_checksum(f)
                            {
                                fields::fix_checksums(&mut pkt.buf, &pkt.parsed, pkt.meta.csum_partial);
                            }
                            if set_field_moves_headers(f) {
                                pkt.moved();
                            }
                        }
                    }
                    pkt.stale = true;
                }
                Action::PushVlan(tpid) => {
                    pkt.parsed();
                    let tci = pkt.parsed.vlan.and_then(|v| pkt.buf.get(v + 2..v + 4)).map_or([0, 0], |t| [t[0], t[1]]);
                    if pkt.buf.len() < 12 {
                        return Err(Stop::Dropped);
                    }
                    let tag = [(tpid >> 8) as u8, *tpid as u8, tci[0], tci[1]];
                    pkt.buf.splice(12..12, tag);
                    pkt.moved();
                }
                Action::PopVlan => {
                    pkt.parsed();
                    if let Some(v) = pkt.parsed.vlan {
                        pkt.buf.drain(v..v + 4);
                        keep_min_frame(&mut pkt.buf, 4);
                        pkt.moved();
                    }
                }
                Action::PushMpls(et) => {
                    pkt.parsed();
                    let at = pkt.parsed.eth_type_at;
                    if pkt.buf.len() < at + 2 {
                        return Err(Stop::Dropped);
                    }
                    let (bos, ttl) = match pkt.parsed.kind {
                        fields::L3::Mpls => (0u32, pkt.buf[pkt.parsed.l3 + 3]),
                        fields::L3::Ipv4 => (1, pkt.buf[pkt.parsed.l3 + 8]),
                        fields::L3::Ipv6 => (1, pkt.buf[pkt.parsed.l3 + 7]),
                        _ => (1, 0),
                    };
                    let label = match pkt.parsed.kind {
                        fields::L3::Mpls => {
                            let l3 = pkt.parsed.l3;
                            u32::from_be_bytes(pkt.buf[l3..l3 + 4].try_into().expect("4 bytes")) & 0xffff_fe00
                        }
                        _ => 0,
                    };
                    let entry = label | (bos << 8) | u32::from(ttl);
                    pkt.buf[at..at + 2].copy_from_slice(&et.to_be_bytes());
                    pkt.buf.splice(at + 2..at + 2, entry.to_be_bytes());
                    pkt.moved();
                }
                Action::PopMpls(et) => {
                    pkt.parsed();
                    if pkt.parsed.kind == fields::L3::Mpls {
                        let (at, l3) = (pkt.parsed.eth_type_at, pkt.parsed.l3);
                        pkt.buf[at..at + 2].copy_from_slice(&et.to_be_bytes());
                        pkt.buf.drain(l3..l3 + 4);
                        keep_min_frame(&mut pkt.buf, 4);
                        pkt.moved();
                    }
                }
                Action::SetMplsTtl(t) => {
                    pkt.parsed();
                    if pkt.parsed.kind == fields::L3::Mpls {
                        pkt.buf[pkt.parsed.l3 + 3] = *t;
                    }
                }
                Action::DecMplsTtl => {
                    pkt.parsed();
                    if pkt.parsed.kind == fields::L3::Mpls {
                        let at = pkt.parsed.l3 + 3;
                        if pkt.buf[at] <= 1 {
                            return self.invalid_ttl(pkt, table_id, cookie);
                        }
                        pkt.buf[at] -= 1;
                    }
                }
                Action::SetNwTtl(t) => {
                    pkt.parsed();
                    match pkt.parsed.kind {
                        fields::L3::Ipv4 => {
                            // The TTL is under the IPv4 header checksum only.
                            pkt.buf[pkt.parsed.l3 + 8] = *t;
                            fields::fix_ipv4_header_checksum(&mut pkt.buf, pkt.parsed.l3);
                        }
                        fields::L3::Ipv6 => pkt.buf[pkt.parsed.l3 + 7] = *t,
                        _ => {}
                    }
                }
                Action::DecNwTtl => self.dec_nw_ttl(pkt, table_id, cookie)?,
                Action::CopyTtlOut | Action::CopyTtlIn => {
                    pkt.parsed();
                    if pkt.parsed.kind == fields::L3::Mpls {
                        let l3 = pkt.parsed.l3;
                        let inner = l3 + 4;
                        let bos = pkt.buf[l3 + 2] & 1 == 1;
                        let ip_ttl_at = match pkt.buf.get(inner).map(|b| b >> 4) {
                            Some(4) if bos => Some(inner + 8),
                            Some(6) if bos => Some(inner + 7),
                            _ if !bos => Some(inner + 3),
                            _ => None,
                        };
                        if let Some(t) = ip_ttl_at.filter(|t| *t < pkt.buf.len()) {
                            if matches!(a, Action::CopyTtlOut) {
                                pkt.buf[l3 + 3] = pkt.buf[t];
                            } else {
                                pkt.buf[t] = pkt.buf[l3 + 3];
                                if t == inner + 8 {
                                    fields::fix_ipv4_header_checksum(&mut pkt.buf, inner);
                                }
                            }
                        }
                    }
                }
                Action::PushPbb(et) => {
                    // A backbone header in front of the frame as it is:
                    // the same MAC addresses, then the I-TAG (its I-SID
                    // from an I-TAG the frame has, its priority from the
                    // outer VLAN tag's, else zero), then the customer's
                    // addresses and the rest of the frame unchanged.
                    pkt.parsed();
                    if pkt.buf.len() < 12 {
                        return Err(Stop::Dropped);
                    }
                    let p = pkt.parsed;
                    let mut hdr = [0u8; 18];
                    hdr[0..2].copy_from_slice(&et.to_be_bytes());
                    if let Some(t) = p.vlan.and_then(|v| pkt.buf.get(v + 2)) {
                        hdr[2] = t & 0xe0;
                    }
                    if p.eth_type == fields::ET_PBB {
                        if let Some(sid) = pkt.buf.get(p.l3 + 1..p.l3 + 4) {
                            hdr[3..6].copy_from_slice(sid);
                        }
                    }
                    hdr[6..18].copy_from_slice(&pkt.buf[0..12]);
                    pkt.buf.splice(12..12, hdr);
                    pkt.moved();
                }
                Action::PopPbb => {
                    // The customer frame behind the outermost I-TAG is
                    // what remains.
                    pkt.parsed();
                    let l3 = pkt.parsed.l3;
                    if pkt.parsed.eth_type == fields::ET_PBB && pkt.buf.len() >= l3 + 4 + 14 {
                        pkt.buf.drain(0..l3 + 4);
                        keep_min_frame(&mut pkt.buf, l3 + 4);
                        pkt.moved();
                    }
                }
                Action::SetQueue(_) => {}
                Action::Experimenter { .. } => {
                    self.counters.unsupported_output += 1;
                }
            }
        }
        Ok(())
    }

    /// Decrements the IPv4 TTL or IPv6 hop limit; one that would reach
    /// zero drops the packet (and sends it to the controller if the
    /// switch's configuration asks).
    #[inline]
    fn dec_nw_ttl(&mut self, pkt: &mut Pkt, table_id: u8, cookie: u64) -> Result<(), Stop> {
        pkt.parsed();
        if pkt.dec_ttl() == Some(false) {
            return self.invalid_ttl(pkt, table_id, cookie);
        }
        Ok(())
    }

    fn invalid_ttl(&mut self, pkt: &mut Pkt, table_id: u8, cookie: u64) -> Result<(), Stop> {
        if self.config.flags & INVALID_TTL_TO_CONTROLLER != 0 {
            let n = Note::PacketIn {
                in_port: pkt.meta.in_port,
                reason: sluice_openflow::packet_in_reason::INVALID_TTL,
                table_id,
                cookie,
                total_len: pkt.buf.len().min(usize::from(u16::MAX)) as u16,
                data: pkt.for_controller(),
                // At least miss_send_len bytes, says the specification:
                // the whole packet, unbuffered.
                max_len: sluice_openflow::CONTROLLER_MAX_LEN_NO_BUFFER,
                metadata: pkt.meta.metadata,
            };
            self.note(n);
        }
        Err(Stop::Dropped)
    }

    /// Runs group `id` on `pkt`; `(table_id, cookie)` are the flow entry's
    /// that sent the packet there (for packet-ins from its buckets).
    fn group<E: FnMut(usize, u32, &[u8]) + ?Sized>(
        &mut self,
        idx: usize,
        pkt: &mut Pkt,
        id: u32,
        (table_id, cookie): (u8, u64),
        depth: usize,
        emit: &mut E,
    ) {
        if depth >= MAX_GROUP_DEPTH {
            return;
        }
        let Some(g) = self.groups.get_mut(&id) else { return };
        // Taken out while they run (groups change only between batches;
        // a group's buckets never lead back to it: refused as a loop).
        let (typ, buckets) = (g.typ, std::mem::take(&mut g.buckets));
        let n = buckets.len();
        // The buckets that run: always a range of them.
        let chosen = match typ {
            sluice_openflow::group_type::ALL => 0..n,
            sluice_openflow::group_type::INDIRECT => 0..n.min(1),
            sluice_openflow::group_type::FF => match buckets.iter().position(|b| self.bucket_live(b, depth)) {
                Some(i) => i..i + 1,
                None => 0..0,
            },
            _ => {
                // The bucket depends on fields outside the cache's key.
                self.uncacheable();
                pkt.refresh();
                let live = |i: usize| buckets[i].weight > 0 && self.bucket_live(&buckets[i], depth);
                let total: u64 = (0..n).filter(|&i| live(i)).map(|i| u64::from(buckets[i].weight)).sum();
                if total == 0 {
                    0..0
                } else {
                    // The flow's addresses and ports pick the bucket (one flow,
                    // one bucket): MACs, ethertype, VLAN; IP protocol, IPv4
                    // addresses, ports, ICMP type; IPv6 addresses. Not DSCP
                    // and ECN, which may change within a flow.
                    let f = &pkt.full;
                    let mut k = [0u8; 64];
                    k[..17].copy_from_slice(&f[16..33]);
                    k[17..32].copy_from_slice(&f[35..50]);
                    k[32..].copy_from_slice(&f[64..96]);
                    let h = sluice_hash::xxh64(&k, 0) % total;
                    let mut acc = 0;
                    match (0..n).filter(|&i| live(i)).find(|&i| {
                        acc += u64::from(buckets[i].weight);
                        h < acc
                    }) {
                        Some(i) => i..i + 1,
                        None => 0..0,
                    }
                }
            }
        };
        let len = pkt.buf.len() as u64;
        count_group(&mut self.counters, id, n, 1, len, chosen.clone());
        if let Some(r) = &mut self.rec {
            r.counts.push(Count::Group { id, n, buckets: chosen.clone().collect() });
        }
        let mut runs = Vec::new();
        for i in chosen {
            let saved = self.rec.as_mut().map(|r| {
                r.stack.push(Vec::new());
                std::mem::replace(&mut r.apply, false)
            });
            // Each bucket runs on its own copy of the packet.
            let mut copy = self.copy_of(pkt);
            let ran = self.run_actions(
                idx,
                &mut copy,
                &buckets[i].actions,
                sluice_openflow::packet_in_reason::ACTION,
                table_id,
                cookie,
                depth + 1,
                emit,
            );
            self.spare.push(copy.buf);
            if let (Some(r), Some(apply)) = (&mut self.rec, saved) {
                let body = r.stack.pop().unwrap_or_default();
                r.apply = apply;
                r.cacheable &= ran.is_ok();
                runs.push(body);
            }
        }
        if let Some(g) = self.groups.get_mut(&id) {
            g.buckets = buckets;
        }
        if self.rec.is_some() {
            self.rec(|| Op::Group { runs });
        }
    }

    /// A copy of `pkt` in a reused buffer.
    fn copy_of(&mut self, pkt: &Pkt) -> Pkt {
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(&pkt.buf);
        Pkt {
            buf,
            parsed: pkt.parsed,
            meta: pkt.meta,
            full: pkt.full,
            stale: pkt.stale,
            reparse: pkt.reparse,
            found: pkt.found,
        }
    }

    fn bucket_live(&self, b: &Bucket, depth: usize) -> bool {
        let port_ok = b.watch_port == port::ANY || self.port_live(b.watch_port);
        let group_ok = b.watch_group == sluice_openflow::group::ANY
            || (depth < MAX_GROUP_DEPTH
                && self
                    .groups
                    .get(&b.watch_group)
                    .is_some_and(|g| g.buckets.iter().any(|x| self.bucket_live(x, depth + 1))));
        port_ok && group_ok
    }

    /// Runs one frame through the tables from table 0, or replays the walk
    /// the flow cache holds for frames like it; gives its buffer back for
    /// reuse.
    fn pipeline<E: FnMut(usize, u32, &[u8]) + ?Sized>(
        &mut self,
        idx: usize,
        meta: Meta,
        frame: Vec<u8>,
        emit: &mut E,
    ) -> Vec<u8> {
        let mut pkt = Pkt::new(frame, meta);
        if self.rec.is_some() {
            // A walk started within a recorded one (an output to TABLE):
            // neither cached nor recorded into the outer walk.
            self.uncacheable();
            let outer = self.rec.take();
            self.walk(idx, &mut pkt, emit);
            self.rec = outer;
            return pkt.buf;
        }
        if !self.flow_cache {
            self.walk(idx, &mut pkt, emit);
            return pkt.buf;
        }
        pkt.refresh();
        self.cache_layout();
        let key = self.cache.key(&pkt.full);
        self.run_cached(idx, &mut pkt, key, emit);
        pkt.buf
    }

    /// Brings the flow cache's key layout, and the list of tables that
    /// run on the route-table template, up to date with the tables (both
    /// are recomputed after any change: every change empties the cache).
    #[inline]
    fn cache_layout(&mut self) {
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
    fn run_cached<E: FnMut(usize, u32, &[u8]) + ?Sized>(
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

    /// Runs a forwarding step (see [`crate::cache::Forward`]) on `pkt`;
    /// false, having done nothing, when the TTL would run out (the step
    /// list then runs instead).
    #[inline]
    fn forward<E: FnMut(usize, u32, &[u8]) + ?Sized>(
        &mut self,
        idx: usize,
        pkt: &mut Pkt,
        f: &crate::cache::Forward,
        emit: &mut E,
    ) -> bool {
        if f.dec_ttl && pkt.dec_ttl() == Some(false) {
            return false;
        }
        if let (Some(m), Some(b)) = (&f.dst, pkt.buf.get_mut(0..6)) {
            b.copy_from_slice(m);
        }
        if let (Some(m), Some(b)) = (&f.src, pkt.buf.get_mut(6..12)) {
            b.copy_from_slice(m);
        }
        if f.port != pkt.meta.in_port {
            self.send(idx, f.port, &pkt.buf, emit);
        }
        true
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
                        self.send(idx, *port, &pkt.buf, emit);
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

    /// Runs `frames` (a batch from `port`) as a software pipeline of four
    /// stages over groups of [`STAGE`] packets, each stage one group
    /// behind the one before: parse the frames into their packets;
    /// compute their cache keys and start loading their cache slots, or
    /// the route-table slots a walk would read; find their route-table
    /// entries and start loading them (entry and counters); run them. What
    /// a stage starts loading has a group's time to arrive, a group's
    /// loads are started together (they overlap), and only the packets in
    /// flight are touched between, so what was loaded is still in the
    /// first-level cache when it is read (whole-batch passes over 128
    /// packets' state evict it). Packets run in batch order, in a ring of
    /// [`RING`] reused from batch to batch.
    fn process_pipelined<E: FnMut(usize, u32, &[u8]) + ?Sized>(
        &mut self,
        port: u32,
        frames: &[&[u8]],
        partial: u128,
        emit: &mut E,
    ) {
        let mut ring = std::mem::take(&mut self.batch);
        while ring.len() < RING {
            ring.push((Pkt::new(Vec::new(), Meta::default()), None));
        }
        let meta = Meta { in_port: port, in_phy_port: port, ..Meta::default() };
        self.cache_layout();
        // Packets either go through the cache or walk the tables; only
        // those that walk are worth loading route-table slots for.
        let start = stamp();
        let cached = self.flow_cache && self.cache.in_use();
        let prefix_tables = std::mem::take(&mut self.prefix_tables);
        let ahead: &[u8] = if cached { &[] } else { &prefix_tables };
        let n = frames.len();
        let mut bytes = 0;
        // The packets of the group `back` groups before group `g`.
        let group = |g: usize, back: usize| match g.checked_sub(back) {
            Some(g) => (g * STAGE).min(n)..((g + 1) * STAGE).min(n),
            None => 0..0,
        };
        frames.iter().take(LOAD_AHEAD).for_each(|f| prefetch_headers(f));
        for g in 0..n.div_ceil(STAGE) + 3 {
            for i in group(g, 0) {
                if let Some(f) = frames.get(i + LOAD_AHEAD) {
                    prefetch_headers(f);
                }
                let (pkt, _) = &mut ring[i % RING];
                pkt.load(frames[i], Meta { csum_partial: partial >> i & 1 != 0, ..meta });
                bytes += frames[i].len() as u64;
            }
            for i in group(g, 1) {
                let (pkt, key) = &mut ring[i % RING];
                *key = None;
                if cached {
                    *key = self.cache.key(&pkt.full);
                    if let Some(k) = key {
                        self.cache.prefetch(k);
                    }
                }
                for &t in ahead {
                    self.tables[usize::from(t)].prefetch(&pkt.full);
                }
            }
            for i in group(g, 2) {
                // The route-table lookups are made here (their slots
                // loaded by now) and kept for the walk; the entries they
                // find start loading.
                let (pkt, _) = &mut ring[i % RING];
                for &t in ahead {
                    let found = self.tables[usize::from(t)].lookup_ahead(&pkt.full);
                    if pkt.found.is_none() {
                        pkt.found = Some((t, found));
                    }
                }
            }
            for i in group(g, 3) {
                let (pkt, key) = &mut ring[i % RING];
                if cached {
                    self.run_cached(i, pkt, *key, emit);
                } else {
                    self.walk(i, pkt, emit);
                }
            }
        }
        // Walking every packet (no cache, or the cache stepped aside):
        // counted as cache misses when the cache is on.
        if !cached && self.flow_cache {
            self.counters.cache_misses += n as u64;
        }
        self.prefix_tables = prefix_tables;
        if self.flow_cache {
            self.cache.account(n, stamp().wrapping_sub(start));
        }
        self.port_count(port)[1] += bytes;
        self.batch = ring;
    }

    /// Walks `pkt` through the tables from table 0 (recording the walk
    /// when a recording is on).
    #[inline]
    fn walk<E: FnMut(usize, u32, &[u8]) + ?Sized>(&mut self, idx: usize, pkt: &mut Pkt, emit: &mut E) {
        let from = if self.rec.is_none() {
            match self.walk_fast(idx, pkt, emit) {
                Some(table) => table,
                None => return,
            }
        } else {
            0
        };
        self.walk_from(idx, pkt, from, emit);
    }

    /// The start of a walk while it takes fast steps only (see [`Fast`]):
    /// `None` when the packet's walk ended with one; else the table where
    /// the walk goes on in full (its lookup not counted: the walk makes
    /// it again), having changed nothing but what the steps it took count.
    #[inline(always)]
    fn walk_fast<E: FnMut(usize, u32, &[u8]) + ?Sized>(
        &mut self,
        idx: usize,
        pkt: &mut Pkt,
        emit: &mut E,
    ) -> Option<usize> {
        pkt.refresh();
        if self.pipeline.is_some() {
            return self.walk_fast_native(idx, pkt, emit);
        }
        self.walk_fast_from(idx, pkt, 0, emit)
    }

    /// [`OfSwitch::walk_fast`] on the walk's native code: the gotos run
    /// there, the fast steps go on from the entry where it stopped.
    #[inline(never)]
    fn walk_fast_native<E: FnMut(usize, u32, &[u8]) + ?Sized>(
        &mut self,
        idx: usize,
        pkt: &mut Pkt,
        emit: &mut E,
    ) -> Option<usize> {
        let table = self.walk_native(pkt);
        self.walk_fast_from(idx, pkt, table, emit)
    }

    /// The loop of fast steps of [`OfSwitch::walk_fast`] from `table`.
    #[inline(always)]
    fn walk_fast_from<E: FnMut(usize, u32, &[u8]) + ?Sized>(
        &mut self,
        idx: usize,
        pkt: &mut Pkt,
        mut table: usize,
        emit: &mut E,
    ) -> Option<usize> {
        loop {
            let found = pkt
                .found_in(table)
                .unwrap_or_else(|| self.tables[table].lookup_id(&pkt.full, &mut self.scratch).map(|id| (id, None)));
            let step = found.and_then(|hit| self.fast_step(idx, pkt, table, hit, true, emit));
            match step {
                Some(Fast::Goto(t)) => {
                    self.counters.tables[table].0 += 1;
                    table = usize::from(t);
                }
                Some(_) => {
                    self.counters.tables[table].0 += 1;
                    return None;
                }
                None => return Some(table),
            }
        }
    }

    /// Runs the walk's native code on `pkt` (the switch has some): counts
    /// the entries it went through by their gotos and gives the table
    /// where it stopped, what that table's lookup found there being the
    /// packet's lookup made ahead.
    #[inline(always)]
    fn walk_native(&mut self, pkt: &mut Pkt) -> usize {
        let Some(code) = &self.pipeline else { return 0 };
        let ahead = match pkt.found {
            Some((t, hit)) => {
                LookupAhead { table: u32::from(t), answer: walk_answer(&self.tables[usize::from(t)], hit) }
            }
            None => LookupAhead::NONE,
        };
        let ahead_table = ahead.table;
        let mut ctx = LookupCtx { ahead, tables: self.tables.as_mut_ptr(), scratch: &mut self.scratch };
        let mut path = std::mem::MaybeUninit::uninit();
        // SAFETY: `pipeline_lookup` reads `ctx` as the `LookupCtx` it is,
        // and the code only asks it for tables it was compiled to find
        // through their structure, which exist (all 64 do).
        let path = unsafe { code.run(&pkt.full, (&mut ctx as *mut LookupCtx).cast(), pipeline_lookup, &mut path) };
        let len = pkt.buf.len() as u64;
        for &e in &path[..path.len().saturating_sub(1)] {
            let (t, id) = ((e >> 32) as usize, e as u32);
            self.counters.tables[t].0 += 1;
            self.counters.tables[t].1 += 1;
            self.tables[t].count(id, 1, len);
        }
        let Some(&last) = path.last() else { return 0 };
        let (table, id) = ((last >> 32) as usize, last as u32);
        // Stopped at the table looked up ahead: that lookup (it carries
        // the entry's fast step) stays the packet's.
        if table as u32 != ahead_table {
            pkt.found = Some((table as u8, (id != PATH_MISS).then_some((id, None))));
        }
        table
    }

    /// Walks `pkt` through the tables from `table` on, with an empty
    /// action set (recording the walk when a recording is on).
    fn walk_from<E: FnMut(usize, u32, &[u8]) + ?Sized>(
        &mut self,
        idx: usize,
        pkt: &mut Pkt,
        mut table: usize,
        emit: &mut E,
    ) {
        // Boxed: taking it out and back moves a pointer, not the set.
        let mut set = self.set.take().unwrap_or_default();
        set.clear();
        let mut scratch = std::mem::take(&mut self.scratch);
        loop {
            pkt.refresh();
            self.counters.tables[table].0 += 1;
            let found = match pkt.found_in(table) {
                Some(hit) => hit.map(|(id, _)| id),
                None => self.tables[table].lookup_id(&pkt.full, &mut scratch),
            };
            let Some(id) = found else {
                if let Some(r) = &mut self.rec {
                    r.counts.push(Count::Miss { table: table as u8 });
                    r.push(Op::Drop);
                }
                self.stats.dropped += 1;
                break;
            };
            if let Some(r) = &mut self.rec {
                r.counts.push(Count::Hit { table: table as u8, id });
            } else {
                match self.fast_step(idx, pkt, table, (id, None), set.empty, emit) {
                    Some(Fast::Goto(t)) => {
                        table = usize::from(t);
                        continue;
                    }
                    Some(_) => break,
                    None => {}
                }
            }
            let hot = self.tables[table].hot(id);
            // Taken out while they run (nothing else reads this entry's
            // list meanwhile: tables change only between batches), put
            // back below.
            let (cookie, miss_entry, taken) = (hot.cookie, hot.miss_entry, hot.instructions.take());
            let Some(instructions) = taken else {
                self.uncacheable();
                self.stats.dropped += 1;
                break;
            };
            self.counters.tables[table].1 += 1;
            let len = pkt.buf.len() as u64;
            self.tables[table].count(id, 1, len);
            let reason = if miss_entry {
                sluice_openflow::packet_in_reason::NO_MATCH
            } else {
                sluice_openflow::packet_in_reason::ACTION
            };
            let mut next = None;
            let mut dropped = false;
            // A meter runs first; a packet it drops runs nothing else (the
            // entry's instructions still go back to it below).
            if let Some(m) = instructions.iter().find_map(|i| match i {
                Instruction::Meter(m) => Some(*m),
                _ => None,
            }) {
                // Its verdict depends on time: not replayed.
                self.uncacheable();
                dropped = !self.run_meter(m, pkt);
            }
            if !dropped {
                if let Some(r) = &mut self.rec {
                    r.apply = true;
                }
                for ins in instructions.iter() {
                    if let Instruction::ApplyActions(a) = ins {
                        if self.run_actions(idx, pkt, a, reason, table as u8, cookie, 0, emit).is_err() {
                            // Cut short: a later packet may go further.
                            self.uncacheable();
                            dropped = true;
                            break;
                        }
                    }
                }
                if let Some(r) = &mut self.rec {
                    r.apply = false;
                }
            }
            if !dropped {
                if instructions.iter().any(|i| matches!(i, Instruction::ClearActions)) {
                    set.clear();
                }
                for ins in instructions.iter() {
                    match ins {
                        Instruction::WriteActions(a) => set.write(a),
                        Instruction::WriteMetadata { metadata, mask } => {
                            pkt.meta.metadata = (pkt.meta.metadata & !mask) | (metadata & mask);
                            pkt.stale = true;
                            self.rec(|| Op::Metadata { value: *metadata, mask: *mask });
                        }
                        Instruction::GotoTable(t) => next = Some(usize::from(*t)),
                        _ => {}
                    }
                }
            }
            self.tables[table].hot(id).instructions = Some(instructions);
            if dropped {
                self.stats.dropped += 1;
                break;
            }
            match next {
                Some(t) if t > table && t < N_TABLES => table = t,
                _ => {
                    // The action set, in its order; an action that drops
                    // the packet ends it.
                    let mut n = 0;
                    while let Some(a) = (!set.empty).then(|| set.nth(n)).flatten() {
                        n += 1;
                        let Some(a) = a else { continue };
                        let one = std::slice::from_ref(a);
                        if self.run_actions(idx, pkt, one, reason, table as u8, cookie, 0, emit).is_err() {
                            self.uncacheable();
                            break;
                        }
                    }
                    break;
                }
            }
        }
        self.scratch = scratch;
        self.set = Some(set);
    }

    /// Runs the entry `id` of `table` (whose fast step is `step`, when
    /// the lookup gave it) when its instructions are a fast step
    /// (see [`Fast`]) that applies here: a goto to a later table, or a
    /// next-hop group (see [`Group::forward`]) with an empty action set
    /// behind it and a TTL that does not run out. Counts what the generic
    /// path counts and returns the step it ran; `None`, having done
    /// nothing, when the generic path must run the entry.
    #[inline(always)]
    fn fast_step<E: FnMut(usize, u32, &[u8]) + ?Sized>(
        &mut self,
        idx: usize,
        pkt: &mut Pkt,
        table: usize,
        (id, step): Hit,
        set_empty: bool,
        emit: &mut E,
    ) -> Option<Fast> {
        let len = pkt.buf.len() as u64;
        let step = step.unwrap_or_else(|| self.tables[table].fast(id));
        match step {
            Fast::Goto(t) if usize::from(t) > table && usize::from(t) < N_TABLES => {}
            Fast::Group(g) if set_empty => {
                // Counted before it runs (one lookup of the group), taken
                // back in the rare case the generic path must run it.
                let group = self.groups.get_mut(&g)?;
                let f = group.forward?;
                group.forwarded.0 += 1;
                group.forwarded.1 += len;
                if !self.forward(idx, pkt, &f, emit) {
                    if let Some(group) = self.groups.get_mut(&g) {
                        group.forwarded.0 -= 1;
                        group.forwarded.1 -= len;
                    }
                    return None;
                }
            }
            _ => return None,
        }
        self.tables[table].count(id, 1, len);
        self.counters.tables[table].1 += 1;
        Some(step)
    }

    /// Sends `pkt` through meter `id`; false when the meter drops it (a
    /// DSCP-remark band rewrites the packet's DSCP instead).
    fn run_meter(&mut self, id: u32, pkt: &mut Pkt) -> bool {
        let now = self.clock.elapsed().as_nanos() as u64;
        match self.meters.meter(id, pkt.buf.len(), now) {
            crate::meter::Verdict::Pass => true,
            crate::meter::Verdict::Drop => false,
            crate::meter::Verdict::Remark(levels) => {
                pkt.refresh();
                let dscp = pkt.full[33];
                let v = [crate::meter::remark_dscp(dscp, levels)];
                if fields::write_field(&mut pkt.buf, &pkt.parsed, OxmField::IpDscp, &v) {
                    fields::fix_checksums(&mut pkt.buf, &pkt.parsed, pkt.meta.csum_partial);
                    pkt.stale = true;
                }
                true
            }
        }
    }

    /// Runs a packet-out frame (see [`encode_packet_out`]).
    fn packet_out<E: FnMut(usize, u32, &[u8]) + ?Sized>(&mut self, idx: usize, raw: &[u8], emit: &mut E) {
        if raw.len() < 6 {
            self.stats.dropped += 1;
            return;
        }
        let in_port = u32::from_be_bytes(raw[0..4].try_into().expect("4 bytes"));
        let alen = usize::from(u16::from_be_bytes([raw[4], raw[5]]));
        let Some(enc) = raw.get(6..6 + alen) else {
            self.stats.dropped += 1;
            return;
        };
        let Ok(actions) = sluice_openflow::decode_actions(enc) else {
            self.stats.dropped += 1;
            return;
        };
        let frame = raw[6 + alen..].to_vec();
        let meta = Meta { in_port, in_phy_port: in_port, ..Meta::default() };
        let mut pkt = Pkt::new(frame, meta);
        let _ = self.run_actions(idx, &mut pkt, &actions, sluice_openflow::packet_in_reason::ACTION, 0, 0, 0, emit);
    }
}

impl DataPlane for OfSwitch {
    type Notification = Note;
    type Counters = Counters;

    fn process_batch<E: FnMut(usize, u32, &[u8]) + ?Sized>(&mut self, port: u32, frames: &[&[u8]], emit: &mut E) {
        self.stats.received += frames.len() as u64;
        let partial = std::mem::take(&mut self.partial);
        let port = if port == LOCAL_LIVE_PORT { port::LOCAL } else { port };
        if port == PACKET_OUT_PORT {
            for (i, f) in frames.iter().enumerate() {
                self.packet_out(i, f, emit);
            }
            return;
        }
        let c = self.port_count(port);
        c[0] += frames.len() as u64;
        if frames.len() > 1 && !self.fail_open && self.port_bits(port) & PORT_NO_RECV == 0 {
            // Its bytes counted as its frames are read.
            self.process_pipelined(port, frames, partial, emit);
            return;
        }
        self.port_count(port)[1] += frames.iter().map(|f| f.len() as u64).sum::<u64>();
        if self.port_bits(port) & PORT_NO_RECV != 0 {
            self.stats.dropped += frames.len() as u64;
            return;
        }
        if self.fail_open {
            let meta = Meta { in_port: port, in_phy_port: port, ..Meta::default() };
            for (i, f) in frames.iter().enumerate() {
                let mut buf = self.spare.pop().unwrap_or_default();
                buf.clear();
                buf.extend_from_slice(f);
                let mut pkt = Pkt::new(buf, meta);
                self.normal(i, &mut pkt, emit);
                self.spare.push(pkt.buf);
            }
            return;
        }
        for (i, f) in frames.iter().enumerate() {
            let mut buf = self.spare.pop().unwrap_or_default();
            buf.clear();
            buf.extend_from_slice(f);
            let meta =
                Meta { in_port: port, in_phy_port: port, csum_partial: partial >> i & 1 != 0, ..Meta::default() };
            let buf = self.pipeline(i, meta, buf, emit);
            self.spare.push(buf);
        }
    }

    fn partial_checksums(&mut self, mask: u128) {
        self.partial = mask;
    }

    fn replica(&self, workers: usize) -> Result<Self, String> {
        let mut r = self.clone();
        r.tables.iter_mut().for_each(FlowTable::reset_counts);
        r.port_counts.iter_mut().for_each(|c| *c = [0; 5]);
        r.meters.share = workers.max(1) as u64;
        r.groups.values_mut().for_each(|g| g.forwarded = (0, 0));
        r.counters = Counters { tables: vec![(0, 0); N_TABLES], ..Counters::default() };
        r.stats = Stats::default();
        r.notes.clear();
        Ok(r)
    }

    fn stats(&self) -> Stats {
        self.stats
    }

    fn changed(&mut self) {
        self.forget_walks();
        self.index_ports();
    }

    fn drain_notifications(&mut self, to: &mut dyn FnMut(Note)) {
        for n in self.notes.drain(..) {
            to(n);
        }
    }

    fn counters(&self) -> Counters {
        let mut c = self.counters.clone();
        c.flows = self.flow_counts();
        // What the flow cache replayed and has not folded yet (flows above).
        self.cache.pending(|counts, p, b| add_counts_of(&mut c, counts, p, b));
        for (n, pc) in self.port_counts.iter().enumerate().filter(|(_, pc)| **pc != [0; 5]) {
            let e = c.ports.entry(n as u32).or_default();
            for i in 0..5 {
                e[i] += pc[i];
            }
        }
        for (id, g) in self.groups.iter().filter(|(_, g)| g.forwarded != (0, 0)) {
            let (p, b) = g.forwarded;
            count_group(&mut c, id, 1, p, b, 0..1);
        }
        c.meters =
            self.meters.meters.iter().map(|(id, m)| (*id, (m.packets, m.bytes, m.band_counts.clone()))).collect();
        c
    }

    fn merge_counters(&mut self, replicas: &[Counters]) {
        let mut sum = Counters { tables: vec![(0, 0); N_TABLES], ..Counters::default() };
        for r in replicas {
            for (k, v) in &r.flows {
                let e = sum.flows.entry(*k).or_insert((0, 0));
                e.0 += v.0;
                e.1 += v.1;
            }
            for (i, v) in r.tables.iter().enumerate() {
                sum.tables[i].0 += v.0;
                sum.tables[i].1 += v.1;
            }
            for (k, v) in &r.ports {
                let e = sum.ports.entry(*k).or_default();
                for i in 0..5 {
                    e[i] += v[i];
                }
            }
            for (k, v) in &r.groups {
                add_counts(sum.groups.entry(*k).or_default(), v);
            }
            sum.packet_ins_dropped += r.packet_ins_dropped;
            sum.cache_hits += r.cache_hits;
            sum.cache_misses += r.cache_misses;
            sum.unsupported_output += r.unsupported_output;
            for (k, v) in &r.meters {
                add_counts(sum.meters.entry(*k).or_default(), v);
            }
        }
        self.counters = sum;
    }

    /// Per table (those with flows or lookups): flows, lookups, matches;
    /// the groups and meters; the flow cache's hits and misses; the
    /// packet-ins dropped for want of room.
    fn metrics(&self, to: &mut Metrics) {
        for (i, t) in self.tables.iter().enumerate() {
            let (lookups, matches) = self.counters.tables.get(i).copied().unwrap_or_default();
            if t.is_empty() && lookups == 0 {
                continue;
            }
            let id = i.to_string();
            let l = [("table", id.as_str())];
            to.gauge("sluice_openflow_table_flows", "Flow entries in an OpenFlow table.", &l, t.len() as f64);
            to.counter("sluice_openflow_table_lookups_total", "Packets looked up in an OpenFlow table.", &l, lookups);
            to.counter(
                "sluice_openflow_table_matches_total",
                "Packets that matched a flow entry of an OpenFlow table.",
                &l,
                matches,
            );
        }
        to.gauge("sluice_openflow_groups", "Groups in the group table.", &[], self.groups.len() as f64);
        to.gauge("sluice_openflow_meters", "Meters in the meter table.", &[], self.meters.meters.len() as f64);
        let cache = "Packets the flow cache served (hit) or that walked the tables (miss).";
        to.counter("sluice_openflow_flow_cache_total", cache, &[("result", "hit")], self.counters.cache_hits);
        to.counter("sluice_openflow_flow_cache_total", cache, &[("result", "miss")], self.counters.cache_misses);
        to.counter(
            "sluice_openflow_packet_ins_dropped_total",
            "Packet-ins dropped because the agent's queue was full.",
            &[],
            self.counters.packet_ins_dropped,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_openflow::Oxm;

    fn set(field: OxmField, value: &[u8]) -> Action {
        Action::SetField(Oxm { field, value: value.to_vec(), mask: None })
    }

    fn order(s: &ActionSet) -> Vec<Action> {
        let mut out = Vec::new();
        let mut n = 0;
        while let Some(a) = s.nth(n) {
            n += 1;
            out.extend(a.cloned());
        }
        out
    }

    /// The fixed-slot action set runs in the specification's order, keeps
    /// one action per type and one set-field per field (the last written),
    /// leaves the output out when a group is set, and empties on clear.
    #[test]
    fn action_set_order_and_replacement() {
        let mut s = ActionSet::default();
        s.write(&[
            Action::Output { port: 1, max_len: 0 },
            set(OxmField::Ipv4Dst, &[1, 2, 3, 4]),
            Action::DecNwTtl,
            set(OxmField::EthDst, &[1; 6]),
            Action::PushVlan(0x8100),
            Action::PopVlan,
        ]);
        s.write(&[set(OxmField::EthDst, &[2; 6]), Action::Output { port: 2, max_len: 0 }]);
        assert_eq!(
            order(&s),
            vec![
                Action::PopVlan,
                Action::PushVlan(0x8100),
                Action::DecNwTtl,
                set(OxmField::EthDst, &[2; 6]),
                set(OxmField::Ipv4Dst, &[1, 2, 3, 4]),
                Action::Output { port: 2, max_len: 0 },
            ]
        );
        s.write(&[Action::Group(7)]);
        assert_eq!(order(&s).last(), Some(&Action::Group(7)), "a group replaces the output");
        s.clear();
        assert!(order(&s).is_empty());
        s.write(&[Action::SetQueue(3)]);
        assert_eq!(order(&s), vec![Action::SetQueue(3)]);
    }
}
