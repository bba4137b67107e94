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
//! One file per stage, each opening with its contract:
//! - this file: the [`OfSwitch`] (its fields private), construction, the
//!   typed read and change API, native code, the `DataPlane` impl;
//! - `ports.rs`: ports, their state bits and counts, sending to a port;
//! - `actions.rs`: the action set and its order, running actions, output
//!   to ports and reserved ports, NORMAL, TTLs, packet-ins;
//! - `groups.rs`: the group table and running a group's buckets;
//! - `counters.rs`: the counters, folding recorded counts, merging
//!   replicas' counters, metrics;
//! - `pipeline.rs`: the packet (`Pkt`), the walk from table to
//!   table, batches, meters on the path, packet-outs;
//! - `queues.rs`: port queues (`set_queue`), shaped to their maximum rates;
//! - `record.rs`: recording walks for the flow cache and replaying them.
//!
//! Changes: every change goes through a method of [`OfSwitch`]
//! (`flow_mod`, `group_mod`, `meter_mod`, `expire`, `port_mod`,
//! `set_port_live`, `set_config`...), and each keeps what is derived from
//! what it changes right itself (the port index, the flow cache emptied
//! after its counts are folded in, the walk's native code dropped when
//! tables change), so no caller has anything to remember.
//!
//! Concurrency: each worker runs its own replica; flow, group and port
//! changes reach every replica between two batches through the worker
//! pool (never a lock on the packet path). Counters are per replica and
//! summed for the control plane.

use std::collections::BTreeMap;
use std::sync::Arc;

use sluice_dataplane::{DataPlane, Metrics, Stats};
use sluice_openflow::errors::{error_type, port_mod_failed};
use sluice_openflow::{config_flags, port, OfError, PortMod, SwitchConfig};

use crate::cache::{FlowCache, Key};
use crate::code::{PipelineCode, TableCode, TableShape};
use crate::fields::Meta;
use crate::meter::Meters;
use crate::normal::MacTable;
use crate::table::{Fast, FlowTable};

mod actions;
mod counters;
mod groups;
mod pipeline;
mod ports;
mod queues;
mod record;

pub use actions::action_type;
pub use counters::{Counters, GroupCounts, IdHasher, IdMap};
pub use groups::{Group, Groups};
pub use pipeline::encode_packet_out;
pub use ports::PortInfo;
pub use queues::{PortQueues, QueueConfig, QueueCounts};

use actions::ActionSet;
use pipeline::Pkt;
use ports::{DENSE_PORTS, PORT_NO_RECV};
use record::Recording;

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

/// A packet-in reason of the switch's own: a packet that missed a table
/// without a table-miss entry, which an OpenFlow 1.0 switch sends to its
/// controllers (1.3 drops it). The agent sends it as NO_MATCH, to 1.0
/// connections only (see [`OfSwitch::set_miss_packet_ins`]).
pub const IMPLICIT_MISS: u8 = 0xff;

/// What a replica reports to the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// A packet for the controller: `data` is the whole packet; the
    /// controller asked for `max_len` bytes of it (OFPCML_NO_BUFFER: all,
    /// unbuffered), which the agent sends, keeping the packet in a buffer
    /// when it sends less (see `sluice_ofagent::buffers`).
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

/// The OpenFlow switch's data plane (see the module documentation).
///
/// Its fields are private: it is read through its read methods
/// (`config`, `ports`, `tables`, `counts`...) and changed only through
/// its change methods, each of which keeps the derived state (port
/// index, flow cache, the walk's native code) right itself.
#[derive(Debug, Clone)]
pub struct OfSwitch {
    /// The flow tables (`N_TABLES` of them).
    pub(crate) tables: Vec<FlowTable>,
    pub(crate) groups: Groups,
    pub(crate) meters: Meters,
    ports: BTreeMap<u32, PortInfo>,
    config: SwitchConfig,
    /// This replica's counters; on the master, after
    /// `DataPlane::merge_counters`, every replica's sum.
    pub(crate) counters: Counters,
    /// Whether packets go through the flow cache (on by default; off, every
    /// packet walks the tables).
    flow_cache: bool,
    /// `PORT_*` bits of ports numbered below [`DENSE_PORTS`], from `ports`
    /// (rebuilt by every change of a port).
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
    macs: MacTable,
    /// Whether a packet whose TTL runs out goes to the controllers (some
    /// connection's asynchronous configuration asks for INVALID_TTL
    /// packet-ins; see [`OfSwitch::set_invalid_ttl_packet_ins`]).
    ttl_packet_ins: bool,
    /// Whether a table miss goes to the controllers as an
    /// [`IMPLICIT_MISS`] packet-in (see [`OfSwitch::set_miss_packet_ins`]).
    miss_packet_ins: bool,
    /// Standing alone (fail mode standalone, no controller): every packet
    /// goes to the NORMAL port, the tables are not looked at.
    fail_open: bool,
    /// The walk's gotos as native code (see [`crate::code::PipelineCode`]),
    /// for the tables as they are: dropped before any table changes.
    pipeline: Option<Arc<PipelineCode>>,
    /// The packets of a batch and their cache keys, reused from batch to batch.
    batch: Vec<(Pkt, Option<Key>)>,
    /// Which frames of the next batch have a partial checksum (see
    /// [`DataPlane::partial_checksums`]).
    partial: u128,
    /// The port queues, when any are configured (see `queues.rs`).
    queues: Option<Box<PortQueues>>,
}

impl Default for OfSwitch {
    fn default() -> Self {
        OfSwitch::new(BTreeMap::new())
    }
}

impl OfSwitch {
    /// A switch with these ports and empty tables.
    pub fn new(ports: BTreeMap<u32, PortInfo>) -> OfSwitch {
        let mut sw = OfSwitch {
            tables: vec![FlowTable::default(); N_TABLES],
            groups: Groups::default(),
            meters: Meters { share: 1, ..Default::default() },
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
            ttl_packet_ins: false,
            miss_packet_ins: false,
            pipeline: None,
            batch: Vec::new(),
            partial: 0,
            queues: None,
            flow_cache: true,
            port_state: Vec::new(),
            port_counts: vec![[0; 5]; DENSE_PORTS],
        };
        sw.index_ports();
        sw
    }

    /// The switch configuration (`ofp_switch_config`), as the last
    /// SET_CONFIG left it.
    pub fn config(&self) -> SwitchConfig {
        self.config
    }

    /// The ports, by OpenFlow port number.
    pub fn ports(&self) -> &BTreeMap<u32, PortInfo> {
        &self.ports
    }

    /// Port `n`, if the switch has it.
    pub fn port(&self, n: u32) -> Option<&PortInfo> {
        self.ports.get(&n)
    }

    /// Whether the switch stands alone (see [`OfSwitch::set_fail_open`]).
    pub fn fail_open(&self) -> bool {
        self.fail_open
    }

    /// The flow tables, `N_TABLES` of them, read-only (they change through
    /// [`OfSwitch::flow_mod`] and the other modifications).
    pub fn tables(&self) -> &[FlowTable] {
        &self.tables
    }

    /// The group table.
    pub fn groups(&self) -> &Groups {
        &self.groups
    }

    /// The meter table.
    pub fn meters(&self) -> &Meters {
        &self.meters
    }

    /// The counters as they stand: on the master after
    /// `DataPlane::merge_counters`, every replica's sum (what the agent
    /// answers from). `DataPlane::counters` is this copy's own, with what
    /// its tables and flow cache have not settled yet.
    pub fn counts(&self) -> &Counters {
        &self.counters
    }

    /// Whether packets go through the flow cache.
    pub fn flow_cache(&self) -> bool {
        self.flow_cache
    }

    /// Sets the switch configuration (SET_CONFIG). Nothing is derived from
    /// it: the fragment handling is read per batch.
    pub fn set_config(&mut self, config: SwitchConfig) {
        self.config = config;
    }

    /// Whether packets whose TTL runs out are sent to the controllers as
    /// INVALID_TTL packet-ins (the agent sets it while any connection's
    /// asynchronous configuration asks for them). Nothing is derived from
    /// it: an invalid TTL reads it when it happens, replayed walks too.
    pub fn set_invalid_ttl_packet_ins(&mut self, on: bool) {
        self.ttl_packet_ins = on;
    }

    /// Whether a packet that misses a table without a table-miss entry
    /// goes to the controllers as an [`IMPLICIT_MISS`] packet-in of
    /// `miss_send_len` bytes (the agent sets it while an OpenFlow 1.0
    /// controller, whose switches do so, is connected); off, it is
    /// dropped, as OpenFlow 1.3 says. The flow cache is emptied: it
    /// recorded misses as drops.
    pub fn set_miss_packet_ins(&mut self, on: bool) {
        if self.miss_packet_ins != on {
            self.forget_walks();
            self.pipeline = None;
            self.miss_packet_ins = on;
        }
    }

    /// Whether INVALID_TTL packet-ins are sent (see
    /// [`OfSwitch::set_invalid_ttl_packet_ins`]).
    pub fn invalid_ttl_packet_ins(&self) -> bool {
        self.ttl_packet_ins
    }

    /// Sets port `n`'s link state; whether it changed (false for a port the
    /// switch does not have). A change empties the flow cache: recorded
    /// walks chose fast-failover buckets by the ports' liveness.
    pub fn set_port_live(&mut self, n: u32, live: bool) -> bool {
        let Some(p) = self.ports.get_mut(&n).filter(|p| p.live != live) else { return false };
        p.live = live;
        self.ports_changed();
        true
    }

    /// Sets port `n`'s hardware address (the LOCAL port's, once its
    /// interface exists); a port the switch does not have is left alone.
    /// Nothing is derived from it.
    pub fn set_port_address(&mut self, n: u32, hw_addr: [u8; 6]) {
        if let Some(p) = self.ports.get_mut(&n) {
            p.hw_addr = hw_addr;
        }
    }

    /// Applies a PORT_MOD: the `config` bits `mask` selects (PORT_DOWN,
    /// NO_RECV, NO_FWD, NO_PACKET_IN) take the message's values. Whether
    /// the port's configuration changed (then every controller hears of
    /// it); PORT_MOD_FAILED/BAD_PORT for a port the switch does not have.
    /// A change rebuilds the port index and empties the flow cache.
    pub fn port_mod(&mut self, pm: &PortMod) -> Result<bool, OfError> {
        let Some(p) = self.ports.get_mut(&pm.port_no) else {
            return Err(OfError::new(
                error_type::PORT_MOD_FAILED,
                port_mod_failed::BAD_PORT,
                format!("port {}", pm.port_no),
            ));
        };
        let config = (p.config & !pm.mask) | (pm.config & pm.mask);
        if config == p.config {
            return Ok(false);
        }
        p.config = config;
        self.ports_changed();
        Ok(true)
    }

    /// Enters (true) or leaves standalone forwarding: every packet goes to
    /// the NORMAL port, the tables are not looked at; the tables, the flow
    /// cache and the MAC table are kept for when it leaves.
    pub fn set_fail_open(&mut self, alone: bool) {
        self.fail_open = alone;
    }

    /// Turns the flow cache on or off (on by default); a change empties it,
    /// its counts folded in, so nothing waits in a cache that is not used.
    pub fn set_flow_cache(&mut self, on: bool) {
        if self.flow_cache != on {
            self.forget_walks();
            self.flow_cache = on;
        }
    }

    /// A port's state or configuration changed: rebuilds the port index
    /// and empties the flow cache (what `DataPlane::changed` does).
    fn ports_changed(&mut self) {
        self.forget_walks();
        self.index_ports();
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
    pub(crate) fn tables_will_change(&mut self) {
        self.forget_walks();
        self.pipeline = None;
    }
}

/// Whether `frame` is an IPv4 or IPv6 fragment (any of them, the first
/// too), behind up to two VLAN tags; an IPv6 fragment header is looked
/// for behind hop-by-hop, routing and destination options headers.
pub fn is_ip_fragment(frame: &[u8]) -> bool {
    let be16 = |at: usize| frame.get(at..at + 2).map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
    let mut at = 12;
    let mut ethertype = be16(at);
    for _ in 0..2 {
        if ethertype != 0x8100 && ethertype != 0x88a8 {
            break;
        }
        at += 4;
        ethertype = be16(at);
    }
    let ip = at + 2;
    match ethertype {
        // More fragments, or an offset.
        0x0800 => frame.get(ip).is_some_and(|b| b >> 4 == 4) && be16(ip + 6) & 0x3fff != 0,
        0x86dd => {
            let Some(mut next) = frame.get(ip + 6).copied() else { return false };
            let mut hdr = ip + 40;
            for _ in 0..8 {
                match next {
                    44 => return true,
                    0 | 43 | 60 => {
                        let (Some(&n), Some(&len)) = (frame.get(hdr), frame.get(hdr + 1)) else { return false };
                        next = n;
                        hdr += 8 + 8 * usize::from(len);
                    }
                    _ => return false,
                }
            }
            false
        }
        _ => false,
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
        // SET_CONFIG's FRAG_DROP: a batch holding fragments takes the
        // frame-by-frame path, which drops them (one flag test otherwise).
        let frag_drop = self.config.flags & config_flags::FRAG_MASK == config_flags::FRAG_DROP
            && frames.iter().any(|f| is_ip_fragment(f));
        if frames.len() > 1 && !self.fail_open && !frag_drop && self.port_bits(port) & PORT_NO_RECV == 0 {
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
            self.counters.standalone += frames.len() as u64;
            let meta = Meta { in_port: port, in_phy_port: port, ..Meta::default() };
            for (i, f) in frames.iter().enumerate() {
                if frag_drop && is_ip_fragment(f) {
                    self.stats.dropped += 1;
                    continue;
                }
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
            if frag_drop && is_ip_fragment(f) {
                self.stats.dropped += 1;
                continue;
            }
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
        r.share_queues(workers.max(1));
        r.groups.values_mut().for_each(|g| g.forwarded = (0, 0));
        r.counters = Counters { tables: vec![(0, 0); N_TABLES], ..Counters::default() };
        r.stats = Stats::default();
        r.notes.clear();
        Ok(r)
    }

    fn stats(&self) -> Stats {
        self.stats
    }

    /// Queued frames whose time has come leave (port queues with rates).
    fn tick<E: FnMut(u32, &[u8]) + ?Sized>(&mut self, _now_ns: u64, emit: &mut E) {
        self.release_queued(emit);
    }

    /// Until the next queued frame may leave, while queues hold some.
    fn tick_interval(&self) -> Option<std::time::Duration> {
        self.next_departure_in()
    }

    /// Rebuilds what every change method already keeps right itself (the
    /// port index; the flow cache emptied): the pool calls it after every
    /// batch of changes.
    fn changed(&mut self) {
        self.ports_changed();
    }

    fn drain_notifications(&mut self, to: &mut dyn FnMut(Note)) {
        for n in self.notes.drain(..) {
            to(n);
        }
    }

    fn counters(&self) -> Counters {
        self.replica_counts()
    }

    fn merge_counters(&mut self, replicas: &[Counters]) {
        self.merge_counts(replicas)
    }

    /// Per table (those with flows or lookups): flows, lookups, matches;
    /// the groups and meters; the flow cache's hits and misses; the
    /// packet-ins dropped for want of room.
    fn metrics(&self, to: &mut Metrics) {
        self.write_metrics(to)
    }
}
