//! The answers to controllers' reads: descriptions, features and
//! statistics (flows, aggregates, tables, ports, groups, meters; queues in
//! `queues.rs`), as
//! multipart replies.
//!
//! Contract: reads the master copy through the node's `Control`, after
//! every change made before (`Session::read` sums every worker's counters
//! in); writes multipart replies split into parts (MULTIPART_MORE on all
//! but the last); a request for something the switch does not have gets
//! the specification's error.

use sluice_ofswitch::control::flow_outputs_to;
use sluice_ofswitch::switch::N_TABLES;
use sluice_ofswitch::table::Pattern;
use sluice_openflow::errors::{bad_request, error_type};
use sluice_openflow::{
    port, AggregateStats, Desc, FlowStats, GroupDesc, GroupFeatures, GroupStats, Message, MeterConfig, MeterFeatures,
    MeterStats, MultipartReply, MultipartRequest, OfError, OxmField, PortDesc, PortStats, TableDesc, TableFeatureProp,
    TableFeatures, TableStats,
};

use sluice_ofswitch::features;

use crate::agent::Agent;

impl Agent {
    pub(crate) fn flow_counts(&mut self) -> sluice_ofswitch::switch::IdMap<u64, (u64, u64)> {
        self.pool().merge_counters();
        self.pool().view().flow_counts()
    }

    pub(crate) fn multipart(&mut self, ci: usize, raw: &[u8], xid: u32, body: MultipartRequest) {
        let more = sluice_openflow::MULTIPART_MORE;
        let now = self.now_ns();
        let replies: Vec<MultipartReply> = match body {
            MultipartRequest::Desc => vec![MultipartReply::Desc(Desc {
                mfr_desc: "Sluice".into(),
                hw_desc: "Sluice software data plane".into(),
                sw_desc: format!("sluice {}", env!("CARGO_PKG_VERSION")),
                serial_num: "None".into(),
                dp_desc: self.cfg.dp_desc.clone(),
            })],
            MultipartRequest::Flow(req) => {
                let counts = self.flow_counts();
                let filter = Pattern::of(&req.matched);
                let control = self.control.clone();
                let pool = control.lock();
                let sw = pool.view();
                let mut stats = Vec::new();
                for (tid, t) in sw.tables().iter().enumerate() {
                    if req.table_id != sluice_openflow::table::ALL && usize::from(req.table_id) != tid {
                        continue;
                    }
                    for f in t.flows.values() {
                        if !f.pattern.within(&filter)
                            || (f.cookie & req.cookie_mask) != (req.cookie & req.cookie_mask)
                            || !flow_outputs_to(f, req.out_port, req.out_group)
                        {
                            continue;
                        }
                        let (p, b) = counts.get(&f.uid).copied().unwrap_or((0, 0));
                        let age = now.saturating_sub(f.added_ns);
                        stats.push(FlowStats {
                            table_id: tid as u8,
                            duration_sec: (age / 1_000_000_000) as u32,
                            duration_nsec: (age % 1_000_000_000) as u32,
                            priority: f.priority,
                            idle_timeout: f.idle_timeout,
                            hard_timeout: f.hard_timeout,
                            flags: f.flags,
                            cookie: f.cookie,
                            packet_count: p,
                            byte_count: b,
                            matched: (*f.matched).clone(),
                            instructions: f.instructions.to_vec(),
                        });
                    }
                }
                chunk(stats, 100).into_iter().map(MultipartReply::Flow).collect()
            }
            MultipartRequest::Aggregate(req) => {
                let counts = self.flow_counts();
                let filter = Pattern::of(&req.matched);
                let control = self.control.clone();
                let pool = control.lock();
                let sw = pool.view();
                let mut agg = AggregateStats { packet_count: 0, byte_count: 0, flow_count: 0 };
                for (tid, t) in sw.tables().iter().enumerate() {
                    if req.table_id != sluice_openflow::table::ALL && usize::from(req.table_id) != tid {
                        continue;
                    }
                    for f in t.flows.values().filter(|f| {
                        f.pattern.within(&filter)
                            && (f.cookie & req.cookie_mask) == (req.cookie & req.cookie_mask)
                            && flow_outputs_to(f, req.out_port, req.out_group)
                    }) {
                        let (p, b) = counts.get(&f.uid).copied().unwrap_or((0, 0));
                        agg.packet_count += p;
                        agg.byte_count += b;
                        agg.flow_count += 1;
                    }
                }
                vec![MultipartReply::Aggregate(agg)]
            }
            MultipartRequest::Table => {
                self.pool().merge_counters();
                let control = self.control.clone();
                let pool = control.lock();
                let sw = pool.view();
                let t = (0..N_TABLES)
                    .map(|i| TableStats {
                        table_id: i as u8,
                        active_count: sw.tables()[i].len() as u32,
                        lookup_count: sw.counts().tables[i].0,
                        matched_count: sw.counts().tables[i].1,
                    })
                    .collect();
                vec![MultipartReply::Table(t)]
            }
            MultipartRequest::PortStats { port_no } => {
                self.pool().merge_counters();
                let control = self.control.clone();
                let pool = control.lock();
                let sw = pool.view();
                let age = now;
                let s = sw
                    .ports()
                    .keys()
                    .filter(|p| port_no == port::ANY || **p == port_no)
                    .map(|p| {
                        let c = sw.counts().ports.get(p).copied().unwrap_or_default();
                        PortStats {
                            port_no: *p,
                            rx_packets: c[0],
                            rx_bytes: c[1],
                            tx_packets: c[2],
                            tx_bytes: c[3],
                            tx_dropped: c[4],
                            duration_sec: (age / 1_000_000_000) as u32,
                            duration_nsec: (age % 1_000_000_000) as u32,
                            ..PortStats::default()
                        }
                    })
                    .collect::<Vec<_>>();
                if port_no != port::ANY && s.is_empty() {
                    let e = OfError::new(error_type::BAD_REQUEST, bad_request::BAD_PORT, format!("port {port_no}"));
                    return self.error(ci, raw, &e, xid);
                }
                vec![MultipartReply::PortStats(s)]
            }
            MultipartRequest::PortDesc => vec![MultipartReply::PortDesc(self.port_descs())],
            MultipartRequest::Queue { port_no, queue_id } => match self.queue_stats(port_no, queue_id) {
                Ok(s) => vec![MultipartReply::Queue(s)],
                Err(e) => return self.error(ci, raw, &e, xid),
            },
            MultipartRequest::Group { group_id } => {
                self.pool().merge_counters();
                let control = self.control.clone();
                let pool = control.lock();
                let sw = pool.view();
                let s = sw
                    .groups()
                    .iter()
                    .filter(|(id, _)| group_id == sluice_openflow::group::ALL || *id == group_id)
                    .map(|(id, g)| {
                        let c = sw.counts().groups.get(&id).cloned().unwrap_or_default();
                        let refs = sw
                            .tables()
                            .iter()
                            .flat_map(|t| t.flows.values())
                            .filter(|f| flow_outputs_to(f, port::ANY, id))
                            .count();
                        let mut buckets = c.2.clone();
                        buckets.resize(g.buckets.len(), (0, 0));
                        GroupStats {
                            group_id: id,
                            ref_count: refs as u32,
                            packet_count: c.0,
                            byte_count: c.1,
                            duration_sec: 0,
                            duration_nsec: 0,
                            buckets,
                        }
                    })
                    .collect();
                vec![MultipartReply::Group(s)]
            }
            MultipartRequest::GroupDesc => {
                let control = self.control.clone();
                let pool = control.lock();
                let sw = pool.view();
                let d = sw
                    .groups()
                    .iter()
                    .map(|(id, g)| GroupDesc { typ: g.typ, group_id: id, buckets: g.buckets.to_vec() })
                    .collect();
                vec![MultipartReply::GroupDesc(d)]
            }
            MultipartRequest::GroupFeatures => {
                // Every action type this switch runs, in the buckets of every group type.
                let actions = features::bitmap(features::ACTION_TYPES.iter().copied());
                let types = features::bitmap(features::GROUP_TYPES.iter().map(|t| u16::from(*t)));
                let per_type = |t: u8| if features::GROUP_TYPES.contains(&t) { actions } else { 0 };
                vec![MultipartReply::GroupFeatures(GroupFeatures {
                    types,
                    capabilities: features::GROUP_CAPABILITIES,
                    max_groups: [65535; 4],
                    actions: [per_type(0), per_type(1), per_type(2), per_type(3)],
                })]
            }
            MultipartRequest::Meter { meter_id } => {
                self.pool().merge_counters();
                let control = self.control.clone();
                let pool = control.lock();
                let sw = pool.view();
                let s = sw
                    .meters()
                    .meters
                    .iter()
                    .filter(|(id, _)| meter_id == sluice_openflow::meter::ALL || **id == meter_id)
                    .map(|(id, m)| {
                        let c = sw.counts().meters.get(id).cloned().unwrap_or_default();
                        let mut bands = c.2.clone();
                        bands.resize(m.bands.len(), (0, 0));
                        let age = now.saturating_sub(m.added_ns);
                        let flows = sw
                            .tables()
                            .iter()
                            .flat_map(|t| t.flows.values())
                            .filter(|f| {
                                f.instructions
                                    .iter()
                                    .any(|i| matches!(i, sluice_openflow::Instruction::Meter(x) if x == id))
                            })
                            .count();
                        MeterStats {
                            meter_id: *id,
                            flow_count: flows as u32,
                            packet_in_count: c.0,
                            byte_in_count: c.1,
                            duration_sec: (age / 1_000_000_000) as u32,
                            duration_nsec: (age % 1_000_000_000) as u32,
                            bands,
                        }
                    })
                    .collect();
                vec![MultipartReply::Meter(s)]
            }
            MultipartRequest::MeterConfig { meter_id } => {
                let control = self.control.clone();
                let pool = control.lock();
                let sw = pool.view();
                let s = sw
                    .meters()
                    .meters
                    .iter()
                    .filter(|(id, _)| meter_id == sluice_openflow::meter::ALL || **id == meter_id)
                    .map(|(id, m)| MeterConfig { flags: m.flags, meter_id: *id, bands: m.bands.clone() })
                    .collect();
                vec![MultipartReply::MeterConfig(s)]
            }
            MultipartRequest::MeterFeatures => vec![MultipartReply::MeterFeatures(MeterFeatures {
                max_meter: sluice_ofswitch::meter::MAX_METERS,
                // OFPMBT_DROP (1) and OFPMBT_DSCP_REMARK (2), as bits.
                band_types: (1 << 1) | (1 << 2),
                capabilities: u32::from(
                    sluice_openflow::meter_flags::KBPS
                        | sluice_openflow::meter_flags::PKTPS
                        | sluice_openflow::meter_flags::BURST
                        | sluice_openflow::meter_flags::STATS,
                ),
                max_bands: sluice_ofswitch::meter::MAX_BANDS as u8,
                max_color: 0,
            })],
            MultipartRequest::TableFeatures(set) if set.is_empty() => {
                let all: Vec<TableFeatures> = (0..N_TABLES).map(table_features).collect();
                chunk(all, 8).into_iter().map(MultipartReply::TableFeatures).collect()
            }
            MultipartRequest::TableFeatures(_) => {
                let e = OfError::new(
                    error_type::TABLE_FEATURES_FAILED,
                    sluice_openflow::errors::table_features_failed::EPERM,
                    "table features are fixed on this switch",
                );
                return self.error(ci, raw, &e, xid);
            }
            MultipartRequest::TableDesc => vec![MultipartReply::TableDesc(
                (0..N_TABLES).map(|t| TableDesc { table_id: t as u8, config: 0 }).collect(),
            )],
            MultipartRequest::QueueDesc { port_no, queue_id } => match self.queue_descs(port_no, queue_id) {
                Ok(d) => vec![MultipartReply::QueueDesc(d)],
                Err(e) => return self.error(ci, raw, &e, xid),
            },
            MultipartRequest::FlowMonitor(reqs) => return self.monitor_request14(ci, raw, xid, reqs),
            MultipartRequest::Experimenter { experimenter, exp_type, data }
                if experimenter == sluice_openflow::monitor::ONF_EXPERIMENTER
                    && exp_type == sluice_openflow::monitor::ONF_FLOW_MONITOR =>
            {
                return self.monitor_request(ci, raw, xid, &data);
            }
            MultipartRequest::Experimenter { .. } => {
                let e =
                    OfError::new(error_type::BAD_REQUEST, bad_request::BAD_EXPERIMENTER, "no experimenter multiparts");
                return self.error(ci, raw, &e, xid);
            }
        };
        let n = replies.len();
        for (i, r) in replies.into_iter().enumerate() {
            let flags = if i + 1 < n { more } else { 0 };
            self.reply(ci, &Message::MultipartReply { flags, body: r }, xid);
        }
    }

    pub(crate) fn port_descs(&self) -> Vec<PortDesc> {
        self.pool().view().ports().iter().map(|(n, p)| port_desc(*n, p)).collect()
    }
}

/// How port `n` is described to controllers.
pub(crate) fn port_desc(n: u32, p: &sluice_ofswitch::switch::PortInfo) -> PortDesc {
    // The link's speed as the kernel reports it now (none while it is down).
    let (curr, curr_speed) = features::link_features(sluice_ports::link_speed(&p.name));
    PortDesc {
        port_no: n,
        hw_addr: p.hw_addr,
        name: p.name.chars().take(15).collect(),
        config: p.config,
        state: if p.live { sluice_openflow::port_state::LIVE } else { sluice_openflow::port_state::LINK_DOWN },
        curr,
        advertised: 0,
        supported: 0,
        peer: 0,
        curr_speed,
        max_speed: curr_speed,
    }
}

/// The features this switch reports for table `id` (every table alike,
/// but the last has no table to go to).
fn table_features(id: usize) -> TableFeatures {
    let next: Vec<u8> = ((id + 1)..N_TABLES).map(|t| t as u8).collect();
    let instructions: Vec<(u16, u32)> = features::INSTRUCTION_TYPES
        .iter()
        .filter(|t| **t != sluice_openflow::action::instruction_type::GOTO_TABLE || !next.is_empty())
        .map(|t| (*t, 0))
        .collect();
    let actions: Vec<(u16, u32)> = features::ACTION_TYPES.iter().map(|t| (*t, 0)).collect();
    let header = |field: OxmField| {
        let (class, f) = (field.class(), field.number());
        let len = field.value_len().unwrap_or(0) as u32;
        (u32::from(class) << 16) | (u32::from(f) << 9) | len
    };
    let fields: Vec<u32> = features::match_fields().map(header).collect();
    let settable: Vec<u32> = features::match_fields().filter(|f| features::settable(*f)).map(header).collect();
    TableFeatures {
        table_id: id as u8,
        // Unnamed, as Open vSwitch's (ovs-ofctl then prints table numbers).
        name: String::new(),
        metadata_match: u64::MAX,
        metadata_write: u64::MAX,
        config: 0,
        max_entries: 1_000_000,
        properties: vec![
            TableFeatureProp::Instructions(instructions.clone()),
            TableFeatureProp::InstructionsMiss(instructions),
            TableFeatureProp::NextTables(next.clone()),
            TableFeatureProp::NextTablesMiss(next),
            TableFeatureProp::WriteActions(actions.clone()),
            TableFeatureProp::WriteActionsMiss(actions.clone()),
            TableFeatureProp::ApplyActions(actions.clone()),
            TableFeatureProp::ApplyActionsMiss(actions),
            TableFeatureProp::Match(fields.clone()),
            TableFeatureProp::Wildcards(fields),
            TableFeatureProp::WriteSetfield(settable.clone()),
            TableFeatureProp::WriteSetfieldMiss(settable.clone()),
            TableFeatureProp::ApplySetfield(settable.clone()),
            TableFeatureProp::ApplySetfieldMiss(settable),
        ],
    }
}

fn chunk<T>(v: Vec<T>, n: usize) -> Vec<Vec<T>> {
    if v.is_empty() {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    let mut cur = Vec::new();
    for x in v {
        cur.push(x);
        if cur.len() == n {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}
