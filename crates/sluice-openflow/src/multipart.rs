//! Multipart request and reply bodies (OpenFlow 1.3.5, section 7.3.5):
//! reading them by `ofp_multipart_type` from the bytes after the
//! multipart header, and writing them; also the structures only they
//! carry: flow/port/queue/group/meter statistics, group and meter
//! descriptions, meter bands, buckets and table features with all their
//! property types (each padded to 8).

use crate::action::{get_actions, get_instructions, put_actions, put_instructions};
use crate::codec::queue_prop_type;
use crate::errors::{bad_property, bad_request, error_type, meter_mod_failed, table_features_failed, OfError};
use crate::oxm::{get_match, put_match};
use crate::types::*;
use crate::wire::{round8, Put, Reader};

/// `ofp_multipart_type`.
pub mod multipart_type {
    pub const DESC: u16 = 0;
    pub const FLOW: u16 = 1;
    pub const AGGREGATE: u16 = 2;
    pub const TABLE: u16 = 3;
    pub const PORT_STATS: u16 = 4;
    pub const QUEUE: u16 = 5;
    pub const GROUP: u16 = 6;
    pub const GROUP_DESC: u16 = 7;
    pub const GROUP_FEATURES: u16 = 8;
    pub const METER: u16 = 9;
    pub const METER_CONFIG: u16 = 10;
    pub const METER_FEATURES: u16 = 11;
    pub const TABLE_FEATURES: u16 = 12;
    pub const PORT_DESC: u16 = 13;
    /// OpenFlow 1.4+.
    pub const TABLE_DESC: u16 = 14;
    pub const QUEUE_DESC: u16 = 15;
    pub const FLOW_MONITOR: u16 = 16;
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// `ofp_table_feature_prop_type`.
pub mod table_feature_prop_type {
    pub const INSTRUCTIONS: u16 = 0;
    pub const INSTRUCTIONS_MISS: u16 = 1;
    pub const NEXT_TABLES: u16 = 2;
    pub const NEXT_TABLES_MISS: u16 = 3;
    pub const WRITE_ACTIONS: u16 = 4;
    pub const WRITE_ACTIONS_MISS: u16 = 5;
    pub const APPLY_ACTIONS: u16 = 6;
    pub const APPLY_ACTIONS_MISS: u16 = 7;
    pub const MATCH: u16 = 8;
    pub const WILDCARDS: u16 = 10;
    pub const WRITE_SETFIELD: u16 = 12;
    pub const WRITE_SETFIELD_MISS: u16 = 13;
    pub const APPLY_SETFIELD: u16 = 14;
    pub const APPLY_SETFIELD_MISS: u16 = 15;
    pub const EXPERIMENTER: u16 = 0xfffe;
    pub const EXPERIMENTER_MISS: u16 = 0xffff;
}

/// `ofp_meter_band_type`.
pub mod meter_band_type {
    pub const DROP: u16 = 1;
    pub const DSCP_REMARK: u16 = 2;
    pub const EXPERIMENTER: u16 = 0xffff;
}

const LEN: (u16, u16) = (error_type::BAD_REQUEST, bad_request::BAD_LEN);

fn len_err(reason: String) -> OfError {
    OfError::new(LEN.0, LEN.1, reason)
}

/// Reads a length field that counts itself and `consumed` bytes already
/// read of the structure, checks it covers at least `min` bytes, and
/// returns a reader over the rest of the structure.
fn framed<'a>(r: &mut Reader<'a>, len: usize, consumed: usize, min: usize, what: &str) -> Result<Reader<'a>, OfError> {
    if len < min {
        return Err(r.len_err(&format!("{what}: length {len} below {min}")));
    }
    r.sub(len - consumed, what)
}

// ---- ofp_port --------------------------------------------------------

/// `ofp_port_desc_prop_type` / `ofp_port_stats_prop_type` ETHERNET (1.4).
const PROP_ETHERNET: u16 = 0;

/// Appends a port description: OpenFlow 1.3's 64-byte form, or 1.4's
/// 40 bytes and an ethernet property (the speeds and feature bits).
pub(crate) fn put_port(out: &mut Vec<u8>, p: &PortDesc, version: u8) {
    let start = out.len();
    out.u32(p.port_no);
    if version >= OFP14 {
        out.u16(0);
        out.zeros(2);
    } else {
        out.zeros(4);
    }
    out.extend_from_slice(&p.hw_addr);
    out.zeros(2);
    out.string(&p.name, 16);
    out.u32(p.config);
    out.u32(p.state);
    if version >= OFP14 {
        out.u16(PROP_ETHERNET);
        out.u16(32);
        out.zeros(4);
    }
    for v in [p.curr, p.advertised, p.supported, p.peer, p.curr_speed, p.max_speed] {
        out.u32(v);
    }
    if version >= OFP14 {
        out.patch_u16(start + 4, out.len() - start);
    }
}

/// Reads the properties of an OpenFlow 1.4 structure (all of `r`): each
/// `(type, reader over its body)`, their 8-byte padding skipped.
pub(crate) fn get_props<'a>(r: &mut Reader<'a>) -> Result<Vec<(u16, Reader<'a>)>, OfError> {
    let mut v = Vec::new();
    while !r.is_empty() {
        let typ = r.u16("property type")?;
        let len = usize::from(r.u16("property length")?);
        if len < 4 {
            return Err(prop_err(bad_property::BAD_LEN, format!("property length {len}")));
        }
        let b = r.sub(len - 4, "property")?;
        let pad = crate::wire::round8(len) - len;
        r.skip(pad.min(r.remaining()), "property padding")?;
        v.push((typ, b));
    }
    Ok(v)
}

fn prop_err(code: u16, reason: String) -> OfError {
    OfError::new(error_type::BAD_PROPERTY, code, reason)
}

pub(crate) fn get_port(r: &mut Reader<'_>, version: u8) -> Result<PortDesc, OfError> {
    let port_no = r.u32("port_no")?;
    let mut body;
    let r: &mut Reader<'_> = if version >= OFP14 {
        let len = usize::from(r.u16("port length")?);
        body = framed(r, len, 6, 40, "port")?;
        body.skip(2, "pad")?;
        &mut body
    } else {
        r.skip(4, "pad")?;
        r
    };
    let hw_addr = r.array("hw_addr")?;
    r.skip(2, "pad")?;
    let name = r.string(16, "name")?;
    let config = r.u32("config")?;
    let state = r.u32("state")?;
    let mut p = PortDesc { port_no, hw_addr, name, config, state, ..PortDesc::default() };
    let mut eth = |b: &mut Reader<'_>| -> Result<(), OfError> {
        p.curr = b.u32("curr")?;
        p.advertised = b.u32("advertised")?;
        p.supported = b.u32("supported")?;
        p.peer = b.u32("peer")?;
        p.curr_speed = b.u32("curr_speed")?;
        p.max_speed = b.u32("max_speed")?;
        Ok(())
    };
    if version >= OFP14 {
        for (typ, mut b) in get_props(r)? {
            if typ == PROP_ETHERNET {
                b.skip(4, "pad")?;
                eth(&mut b)?;
            }
        }
    } else {
        eth(r)?;
    }
    Ok(p)
}

// ---- buckets and meter bands -----------------------------------------

pub(crate) fn put_buckets(out: &mut Vec<u8>, buckets: &[Bucket]) {
    for b in buckets {
        let start = out.len();
        out.u16(0);
        out.u16(b.weight);
        out.u32(b.watch_port);
        out.u32(b.watch_group);
        out.zeros(4);
        put_actions(out, &b.actions);
        out.patch_u16(start, out.len() - start);
    }
}

pub(crate) fn get_buckets(r: &mut Reader<'_>) -> Result<Vec<Bucket>, OfError> {
    let mut v = Vec::new();
    while !r.is_empty() {
        let len = usize::from(r.u16("bucket length")?);
        let mut b = framed(r, len, 2, 16, "bucket")?;
        let weight = b.u16("weight")?;
        let watch_port = b.u32("watch_port")?;
        let watch_group = b.u32("watch_group")?;
        b.skip(4, "pad")?;
        let actions = get_actions(b.rest())?;
        v.push(Bucket { weight, watch_port, watch_group, actions });
    }
    Ok(v)
}

pub(crate) fn put_bands(out: &mut Vec<u8>, bands: &[MeterBand]) {
    for band in bands {
        let start = out.len();
        match band {
            MeterBand::Drop { rate, burst_size } => {
                out.u16(meter_band_type::DROP);
                out.u16(16);
                out.u32(*rate);
                out.u32(*burst_size);
                out.zeros(4);
            }
            MeterBand::DscpRemark { rate, burst_size, prec_level } => {
                out.u16(meter_band_type::DSCP_REMARK);
                out.u16(16);
                out.u32(*rate);
                out.u32(*burst_size);
                out.u8(*prec_level);
                out.zeros(3);
            }
            MeterBand::Experimenter { rate, burst_size, experimenter, data } => {
                out.u16(meter_band_type::EXPERIMENTER);
                out.u16(0);
                out.u32(*rate);
                out.u32(*burst_size);
                out.u32(*experimenter);
                out.extend_from_slice(data);
                out.pad8_from(start);
                out.patch_u16(start + 2, out.len() - start);
            }
        }
    }
}

/// Reads meter bands; unknown band types are `METER_MOD_FAILED /
/// BAD_BAND`.
pub(crate) fn get_bands(r: &mut Reader<'_>) -> Result<Vec<MeterBand>, OfError> {
    let mut v = Vec::new();
    while !r.is_empty() {
        let typ = r.u16("band type")?;
        let len = usize::from(r.u16("band length")?);
        if !len.is_multiple_of(8) {
            return Err(len_err(format!("meter band length {len}")));
        }
        let mut b = framed(r, len, 4, 16, "meter band")?;
        let rate = b.u32("rate")?;
        let burst_size = b.u32("burst_size")?;
        v.push(match typ {
            meter_band_type::DROP if len == 16 => MeterBand::Drop { rate, burst_size },
            meter_band_type::DSCP_REMARK if len == 16 => {
                MeterBand::DscpRemark { rate, burst_size, prec_level: b.u8("prec_level")? }
            }
            meter_band_type::DROP | meter_band_type::DSCP_REMARK => {
                return Err(len_err(format!("meter band {typ}: length {len}")))
            }
            meter_band_type::EXPERIMENTER => MeterBand::Experimenter {
                rate,
                burst_size,
                experimenter: b.u32("experimenter")?,
                data: b.rest().to_vec(),
            },
            _ => {
                return Err(OfError::new(
                    error_type::METER_MOD_FAILED,
                    meter_mod_failed::BAD_BAND,
                    format!("unknown meter band type {typ}"),
                ))
            }
        });
    }
    Ok(v)
}

// ---- table features ----------------------------------------------------

fn put_ids(out: &mut Vec<u8>, ids: &[(u16, u32)]) {
    for &(typ, exp) in ids {
        out.u16(typ);
        if typ == 0xffff {
            out.u16(8);
            out.u32(exp);
        } else {
            out.u16(4);
        }
    }
}

/// A table feature property's `ofp_table_feature_prop_type`.
pub fn prop_type(prop: &TableFeatureProp) -> u16 {
    use table_feature_prop_type as p;
    match prop {
        TableFeatureProp::Instructions(_) => p::INSTRUCTIONS,
        TableFeatureProp::InstructionsMiss(_) => p::INSTRUCTIONS_MISS,
        TableFeatureProp::NextTables(_) => p::NEXT_TABLES,
        TableFeatureProp::NextTablesMiss(_) => p::NEXT_TABLES_MISS,
        TableFeatureProp::WriteActions(_) => p::WRITE_ACTIONS,
        TableFeatureProp::WriteActionsMiss(_) => p::WRITE_ACTIONS_MISS,
        TableFeatureProp::ApplyActions(_) => p::APPLY_ACTIONS,
        TableFeatureProp::ApplyActionsMiss(_) => p::APPLY_ACTIONS_MISS,
        TableFeatureProp::Match(_) => p::MATCH,
        TableFeatureProp::Wildcards(_) => p::WILDCARDS,
        TableFeatureProp::WriteSetfield(_) => p::WRITE_SETFIELD,
        TableFeatureProp::WriteSetfieldMiss(_) => p::WRITE_SETFIELD_MISS,
        TableFeatureProp::ApplySetfield(_) => p::APPLY_SETFIELD,
        TableFeatureProp::ApplySetfieldMiss(_) => p::APPLY_SETFIELD_MISS,
        TableFeatureProp::Experimenter { typ, .. } => *typ,
    }
}

fn put_table_features(out: &mut Vec<u8>, t: &TableFeatures) {
    let start = out.len();
    out.u16(0);
    out.u8(t.table_id);
    out.zeros(5);
    out.string(&t.name, 32);
    out.u64(t.metadata_match);
    out.u64(t.metadata_write);
    out.u32(t.config);
    out.u32(t.max_entries);
    for prop in &t.properties {
        let ps = out.len();
        out.u16(prop_type(prop));
        out.u16(0);
        match prop {
            TableFeatureProp::Instructions(ids)
            | TableFeatureProp::InstructionsMiss(ids)
            | TableFeatureProp::WriteActions(ids)
            | TableFeatureProp::WriteActionsMiss(ids)
            | TableFeatureProp::ApplyActions(ids)
            | TableFeatureProp::ApplyActionsMiss(ids) => put_ids(out, ids),
            TableFeatureProp::NextTables(ts) | TableFeatureProp::NextTablesMiss(ts) => out.extend_from_slice(ts),
            TableFeatureProp::Match(hs)
            | TableFeatureProp::Wildcards(hs)
            | TableFeatureProp::WriteSetfield(hs)
            | TableFeatureProp::WriteSetfieldMiss(hs)
            | TableFeatureProp::ApplySetfield(hs)
            | TableFeatureProp::ApplySetfieldMiss(hs) => hs.iter().for_each(|h| out.u32(*h)),
            TableFeatureProp::Experimenter { experimenter, exp_type, data, .. } => {
                out.u32(*experimenter);
                out.u32(*exp_type);
                out.extend_from_slice(data);
            }
        }
        out.patch_u16(ps + 2, out.len() - ps);
        out.pad8_from(ps);
    }
    out.patch_u16(start, out.len() - start);
}

fn tf_err(code: u16, reason: String) -> OfError {
    OfError::new(error_type::TABLE_FEATURES_FAILED, code, reason)
}

fn get_ids(r: &mut Reader<'_>) -> Result<Vec<(u16, u32)>, OfError> {
    let mut v = Vec::new();
    while !r.is_empty() {
        let typ = r.u16("id type")?;
        let len = usize::from(r.u16("id length")?);
        let mut b = framed(r, len, 4, 4, "id")?;
        let exp = if typ == 0xffff { b.u32("experimenter")? } else { 0 };
        v.push((typ, exp));
    }
    Ok(v)
}

fn get_words(r: &mut Reader<'_>) -> Result<Vec<u32>, OfError> {
    if !r.remaining().is_multiple_of(4) {
        return Err(r.len_err("OXM id list not a multiple of 4 bytes"));
    }
    let mut v = Vec::with_capacity(r.remaining() / 4);
    while !r.is_empty() {
        v.push(r.u32("OXM id")?);
    }
    Ok(v)
}

fn get_table_features(r: &mut Reader<'_>) -> Result<TableFeatures, OfError> {
    use table_feature_prop_type as p;
    let len = usize::from(r.u16("table features length")?);
    if !len.is_multiple_of(8) {
        return Err(r.len_err(&format!("table features length {len}")));
    }
    let mut b = framed(r, len, 2, 64, "table features")?;
    let table_id = b.u8("table_id")?;
    b.skip(5, "pad")?;
    let name = b.string(32, "name")?;
    let metadata_match = b.u64("metadata_match")?;
    let metadata_write = b.u64("metadata_write")?;
    let config = b.u32("config")?;
    let max_entries = b.u32("max_entries")?;
    let mut properties = Vec::new();
    while !b.is_empty() {
        let typ = b.u16("property type")?;
        let plen = usize::from(b.u16("property length")?);
        let mut pb = framed(&mut b, plen, 4, 4, "table feature property")?;
        // The last property's padding may be cut by the structure's end.
        let pad = round8(plen) - plen;
        b.skip(pad.min(b.remaining()), "property padding")?;
        properties.push(match typ {
            p::INSTRUCTIONS => TableFeatureProp::Instructions(get_ids(&mut pb)?),
            p::INSTRUCTIONS_MISS => TableFeatureProp::InstructionsMiss(get_ids(&mut pb)?),
            p::NEXT_TABLES => TableFeatureProp::NextTables(pb.rest().to_vec()),
            p::NEXT_TABLES_MISS => TableFeatureProp::NextTablesMiss(pb.rest().to_vec()),
            p::WRITE_ACTIONS => TableFeatureProp::WriteActions(get_ids(&mut pb)?),
            p::WRITE_ACTIONS_MISS => TableFeatureProp::WriteActionsMiss(get_ids(&mut pb)?),
            p::APPLY_ACTIONS => TableFeatureProp::ApplyActions(get_ids(&mut pb)?),
            p::APPLY_ACTIONS_MISS => TableFeatureProp::ApplyActionsMiss(get_ids(&mut pb)?),
            p::MATCH => TableFeatureProp::Match(get_words(&mut pb)?),
            p::WILDCARDS => TableFeatureProp::Wildcards(get_words(&mut pb)?),
            p::WRITE_SETFIELD => TableFeatureProp::WriteSetfield(get_words(&mut pb)?),
            p::WRITE_SETFIELD_MISS => TableFeatureProp::WriteSetfieldMiss(get_words(&mut pb)?),
            p::APPLY_SETFIELD => TableFeatureProp::ApplySetfield(get_words(&mut pb)?),
            p::APPLY_SETFIELD_MISS => TableFeatureProp::ApplySetfieldMiss(get_words(&mut pb)?),
            p::EXPERIMENTER | p::EXPERIMENTER_MISS => TableFeatureProp::Experimenter {
                typ,
                experimenter: pb.u32("experimenter")?,
                exp_type: pb.u32("exp_type")?,
                data: pb.rest().to_vec(),
            },
            _ => return Err(tf_err(table_features_failed::BAD_TYPE, format!("unknown table feature property {typ}"))),
        });
    }
    Ok(TableFeatures { table_id, name, metadata_match, metadata_write, config, max_entries, properties })
}

fn get_table_features_list(r: &mut Reader<'_>) -> Result<Vec<TableFeatures>, OfError> {
    let mut t = Reader::new(r.rest(), (error_type::TABLE_FEATURES_FAILED, table_features_failed::BAD_LEN));
    let mut v = Vec::new();
    while !t.is_empty() {
        v.push(get_table_features(&mut t)?);
    }
    Ok(v)
}

// ---- requests ----------------------------------------------------------

fn put_flow_stats_request(out: &mut Vec<u8>, f: &FlowStatsRequest) {
    out.u8(f.table_id);
    out.zeros(3);
    out.u32(f.out_port);
    out.u32(f.out_group);
    out.zeros(4);
    out.u64(f.cookie);
    out.u64(f.cookie_mask);
    put_match(out, &f.matched);
}

fn get_flow_stats_request(r: &mut Reader<'_>) -> Result<FlowStatsRequest, OfError> {
    let table_id = r.u8("table_id")?;
    r.skip(3, "pad")?;
    let out_port = r.u32("out_port")?;
    let out_group = r.u32("out_group")?;
    r.skip(4, "pad")?;
    let cookie = r.u64("cookie")?;
    let cookie_mask = r.u64("cookie_mask")?;
    let matched = get_match(r)?;
    Ok(FlowStatsRequest { table_id, out_port, out_group, cookie, cookie_mask, matched })
}

/// A request body's `ofp_multipart_type`.
pub fn request_type(b: &MultipartRequest) -> u16 {
    use multipart_type as t;
    match b {
        MultipartRequest::Desc => t::DESC,
        MultipartRequest::Flow(_) => t::FLOW,
        MultipartRequest::Aggregate(_) => t::AGGREGATE,
        MultipartRequest::Table => t::TABLE,
        MultipartRequest::PortStats { .. } => t::PORT_STATS,
        MultipartRequest::Queue { .. } => t::QUEUE,
        MultipartRequest::Group { .. } => t::GROUP,
        MultipartRequest::GroupDesc => t::GROUP_DESC,
        MultipartRequest::GroupFeatures => t::GROUP_FEATURES,
        MultipartRequest::Meter { .. } => t::METER,
        MultipartRequest::MeterConfig { .. } => t::METER_CONFIG,
        MultipartRequest::MeterFeatures => t::METER_FEATURES,
        MultipartRequest::TableFeatures(_) => t::TABLE_FEATURES,
        MultipartRequest::PortDesc => t::PORT_DESC,
        MultipartRequest::TableDesc => t::TABLE_DESC,
        MultipartRequest::QueueDesc { .. } => t::QUEUE_DESC,
        MultipartRequest::FlowMonitor(_) => t::FLOW_MONITOR,
        MultipartRequest::Experimenter { .. } => t::EXPERIMENTER,
    }
}

/// A reply body's `ofp_multipart_type`.
pub fn reply_type(b: &MultipartReply) -> u16 {
    use multipart_type as t;
    match b {
        MultipartReply::Desc(_) => t::DESC,
        MultipartReply::Flow(_) => t::FLOW,
        MultipartReply::Aggregate(_) => t::AGGREGATE,
        MultipartReply::Table(_) => t::TABLE,
        MultipartReply::PortStats(_) => t::PORT_STATS,
        MultipartReply::Queue(_) => t::QUEUE,
        MultipartReply::Group(_) => t::GROUP,
        MultipartReply::GroupDesc(_) => t::GROUP_DESC,
        MultipartReply::GroupFeatures(_) => t::GROUP_FEATURES,
        MultipartReply::Meter(_) => t::METER,
        MultipartReply::MeterConfig(_) => t::METER_CONFIG,
        MultipartReply::MeterFeatures(_) => t::METER_FEATURES,
        MultipartReply::TableFeatures(_) => t::TABLE_FEATURES,
        MultipartReply::PortDesc(_) => t::PORT_DESC,
        MultipartReply::TableDesc(_) => t::TABLE_DESC,
        MultipartReply::QueueDesc(_) => t::QUEUE_DESC,
        MultipartReply::FlowMonitor(_) => t::FLOW_MONITOR,
        MultipartReply::Experimenter { .. } => t::EXPERIMENTER,
    }
}

/// Appends a request body (after the multipart header).
pub(crate) fn put_request(out: &mut Vec<u8>, b: &MultipartRequest) {
    match b {
        MultipartRequest::Desc
        | MultipartRequest::TableDesc
        | MultipartRequest::Table
        | MultipartRequest::GroupDesc
        | MultipartRequest::GroupFeatures
        | MultipartRequest::MeterFeatures
        | MultipartRequest::PortDesc => {}
        MultipartRequest::Flow(f) | MultipartRequest::Aggregate(f) => put_flow_stats_request(out, f),
        MultipartRequest::PortStats { port_no } => {
            out.u32(*port_no);
            out.zeros(4);
        }
        MultipartRequest::Queue { port_no, queue_id } | MultipartRequest::QueueDesc { port_no, queue_id } => {
            out.u32(*port_no);
            out.u32(*queue_id);
        }
        MultipartRequest::FlowMonitor(ms) => ms.iter().for_each(|m| crate::monitor::put_monitor_request14(out, m)),
        MultipartRequest::Group { group_id: id }
        | MultipartRequest::Meter { meter_id: id }
        | MultipartRequest::MeterConfig { meter_id: id } => {
            out.u32(*id);
            out.zeros(4);
        }
        MultipartRequest::TableFeatures(ts) => ts.iter().for_each(|t| put_table_features(out, t)),
        MultipartRequest::Experimenter { experimenter, exp_type, data } => {
            out.u32(*experimenter);
            out.u32(*exp_type);
            out.extend_from_slice(data);
        }
    }
}

fn empty(r: &Reader<'_>, what: &str) -> Result<(), OfError> {
    if r.is_empty() {
        Ok(())
    } else {
        Err(len_err(format!("{what}: {} trailing bytes", r.remaining())))
    }
}

/// Reads a request body of multipart type `typ` (all of `r`) in `version`.
pub(crate) fn get_request(typ: u16, r: &mut Reader<'_>, version: u8) -> Result<MultipartRequest, OfError> {
    use multipart_type as t;
    let body = match typ {
        t::TABLE_DESC if version >= OFP14 => MultipartRequest::TableDesc,
        t::QUEUE_DESC if version >= OFP14 => {
            MultipartRequest::QueueDesc { port_no: r.u32("port_no")?, queue_id: r.u32("queue_id")? }
        }
        t::FLOW_MONITOR if version >= OFP14 => {
            let mut v = Vec::new();
            while !r.is_empty() {
                v.push(crate::monitor::get_monitor_request14(r)?);
            }
            MultipartRequest::FlowMonitor(v)
        }
        t::DESC => MultipartRequest::Desc,
        t::TABLE => MultipartRequest::Table,
        t::GROUP_DESC => MultipartRequest::GroupDesc,
        t::GROUP_FEATURES => MultipartRequest::GroupFeatures,
        t::METER_FEATURES => MultipartRequest::MeterFeatures,
        t::PORT_DESC => MultipartRequest::PortDesc,
        t::FLOW => MultipartRequest::Flow(get_flow_stats_request(r)?),
        t::AGGREGATE => MultipartRequest::Aggregate(get_flow_stats_request(r)?),
        t::PORT_STATS => {
            let port_no = r.u32("port_no")?;
            r.skip(4, "pad")?;
            MultipartRequest::PortStats { port_no }
        }
        t::QUEUE => MultipartRequest::Queue { port_no: r.u32("port_no")?, queue_id: r.u32("queue_id")? },
        t::GROUP | t::METER | t::METER_CONFIG => {
            let id = r.u32("id")?;
            r.skip(4, "pad")?;
            match typ {
                t::GROUP => MultipartRequest::Group { group_id: id },
                t::METER => MultipartRequest::Meter { meter_id: id },
                _ => MultipartRequest::MeterConfig { meter_id: id },
            }
        }
        t::TABLE_FEATURES => MultipartRequest::TableFeatures(get_table_features_list(r)?),
        t::EXPERIMENTER => MultipartRequest::Experimenter {
            experimenter: r.u32("experimenter")?,
            exp_type: r.u32("exp_type")?,
            data: r.rest().to_vec(),
        },
        _ => return Err(bad_multipart(typ)),
    };
    empty(r, "multipart request")?;
    Ok(body)
}

fn bad_multipart(typ: u16) -> OfError {
    OfError::new(error_type::BAD_REQUEST, bad_request::BAD_MULTIPART, format!("unknown multipart type {typ}"))
}

// ---- replies -----------------------------------------------------------

/// Appends a reply body (after the multipart header) in `version`.
pub(crate) fn put_reply(out: &mut Vec<u8>, b: &MultipartReply, version: u8) {
    let of14 = version >= OFP14;
    match b {
        MultipartReply::Desc(d) => {
            out.string(&d.mfr_desc, 256);
            out.string(&d.hw_desc, 256);
            out.string(&d.sw_desc, 256);
            out.string(&d.serial_num, 32);
            out.string(&d.dp_desc, 256);
        }
        MultipartReply::Flow(fs) => {
            for f in fs {
                let start = out.len();
                out.u16(0);
                out.u8(f.table_id);
                out.zeros(1);
                out.u32(f.duration_sec);
                out.u32(f.duration_nsec);
                out.u16(f.priority);
                out.u16(f.idle_timeout);
                out.u16(f.hard_timeout);
                out.u16(f.flags);
                out.zeros(4);
                out.u64(f.cookie);
                out.u64(f.packet_count);
                out.u64(f.byte_count);
                put_match(out, &f.matched);
                put_instructions(out, &f.instructions);
                out.patch_u16(start, out.len() - start);
            }
        }
        MultipartReply::Aggregate(a) => {
            out.u64(a.packet_count);
            out.u64(a.byte_count);
            out.u32(a.flow_count);
            out.zeros(4);
        }
        MultipartReply::Table(ts) => {
            for t in ts {
                out.u8(t.table_id);
                out.zeros(3);
                out.u32(t.active_count);
                out.u64(t.lookup_count);
                out.u64(t.matched_count);
            }
        }
        MultipartReply::PortStats(ps) if of14 => {
            for p in ps {
                let c = p.counters();
                out.u16(120);
                out.zeros(2);
                out.u32(p.port_no);
                out.u32(p.duration_sec);
                out.u32(p.duration_nsec);
                c[..8].iter().for_each(|v| out.u64(*v));
                out.u16(PROP_ETHERNET);
                out.u16(40);
                out.zeros(4);
                c[8..].iter().for_each(|v| out.u64(*v));
            }
        }
        MultipartReply::PortStats(ps) => {
            for p in ps {
                out.u32(p.port_no);
                out.zeros(4);
                p.counters().iter().for_each(|v| out.u64(*v));
                out.u32(p.duration_sec);
                out.u32(p.duration_nsec);
            }
        }
        MultipartReply::Queue(qs) => {
            for q in qs {
                if of14 {
                    out.u16(48);
                    out.zeros(6);
                }
                out.u32(q.port_no);
                out.u32(q.queue_id);
                out.u64(q.tx_bytes);
                out.u64(q.tx_packets);
                out.u64(q.tx_errors);
                out.u32(q.duration_sec);
                out.u32(q.duration_nsec);
            }
        }
        MultipartReply::Group(gs) => {
            for g in gs {
                let start = out.len();
                out.u16(0);
                out.zeros(2);
                out.u32(g.group_id);
                out.u32(g.ref_count);
                out.zeros(4);
                out.u64(g.packet_count);
                out.u64(g.byte_count);
                out.u32(g.duration_sec);
                out.u32(g.duration_nsec);
                for &(p, b) in &g.buckets {
                    out.u64(p);
                    out.u64(b);
                }
                out.patch_u16(start, out.len() - start);
            }
        }
        MultipartReply::GroupDesc(gs) => {
            for g in gs {
                let start = out.len();
                out.u16(0);
                out.u8(g.typ);
                out.zeros(1);
                out.u32(g.group_id);
                put_buckets(out, &g.buckets);
                out.patch_u16(start, out.len() - start);
            }
        }
        MultipartReply::GroupFeatures(g) => {
            out.u32(g.types);
            out.u32(g.capabilities);
            g.max_groups.iter().for_each(|v| out.u32(*v));
            g.actions.iter().for_each(|v| out.u32(*v));
        }
        MultipartReply::Meter(ms) => {
            for m in ms {
                let start = out.len();
                out.u32(m.meter_id);
                out.u16(0);
                out.zeros(6);
                out.u32(m.flow_count);
                out.u64(m.packet_in_count);
                out.u64(m.byte_in_count);
                out.u32(m.duration_sec);
                out.u32(m.duration_nsec);
                for &(p, b) in &m.bands {
                    out.u64(p);
                    out.u64(b);
                }
                out.patch_u16(start + 4, out.len() - start);
            }
        }
        MultipartReply::MeterConfig(ms) => {
            for m in ms {
                let start = out.len();
                out.u16(0);
                out.u16(m.flags);
                out.u32(m.meter_id);
                put_bands(out, &m.bands);
                out.patch_u16(start, out.len() - start);
            }
        }
        MultipartReply::MeterFeatures(m) => {
            out.u32(m.max_meter);
            out.u32(m.band_types);
            out.u32(m.capabilities);
            out.u8(m.max_bands);
            out.u8(m.max_color);
            out.zeros(2);
        }
        MultipartReply::TableFeatures(ts) => ts.iter().for_each(|t| put_table_features(out, t)),
        MultipartReply::PortDesc(ps) => ps.iter().for_each(|p| put_port(out, p, version)),
        MultipartReply::TableDesc(ts) => {
            for t in ts {
                out.u16(8);
                out.u8(t.table_id);
                out.zeros(1);
                out.u32(t.config);
            }
        }
        MultipartReply::QueueDesc(qs) => {
            for q in qs {
                out.u32(q.port_no);
                out.u32(q.queue_id);
                let at = out.len();
                out.u16(0);
                out.zeros(6);
                for p in &q.properties {
                    let ps = out.len();
                    match p {
                        QueueProp::MinRate(rate) | QueueProp::MaxRate(rate) => {
                            let min = matches!(p, QueueProp::MinRate(_));
                            out.u16(if min { queue_prop_type::MIN_RATE } else { queue_prop_type::MAX_RATE });
                            out.u16(8);
                            out.u16(*rate);
                            out.zeros(2);
                        }
                        QueueProp::Experimenter { experimenter, data } => {
                            out.u16(queue_prop_type::EXPERIMENTER);
                            out.u16(0);
                            out.u32(*experimenter);
                            out.u32(0);
                            out.extend_from_slice(data);
                            out.patch_u16(ps + 2, out.len() - ps);
                            out.pad8_from(ps);
                        }
                    }
                }
                out.patch_u16(at, out.len() - at + 8);
            }
        }
        MultipartReply::FlowMonitor(data) => out.extend_from_slice(data),
        MultipartReply::Experimenter { experimenter, exp_type, data } => {
            out.u32(*experimenter);
            out.u32(*exp_type);
            out.extend_from_slice(data);
        }
    }
}

/// Reads fixed-size records of `size` bytes until `r` is empty.
fn records<T>(
    r: &mut Reader<'_>,
    size: usize,
    mut one: impl FnMut(&mut Reader<'_>) -> Result<T, OfError>,
) -> Result<Vec<T>, OfError> {
    if !r.remaining().is_multiple_of(size) {
        return Err(len_err(format!("{} bytes is not a whole number of {size}-byte records", r.remaining())));
    }
    let mut v = Vec::with_capacity(r.remaining() / size);
    while !r.is_empty() {
        let mut b = r.sub(size, "record")?;
        v.push(one(&mut b)?);
    }
    Ok(v)
}

/// Port statistics from their twelve counters in 1.3's order.
fn port_stats(port_no: u32, c: [u64; 12], duration_sec: u32, duration_nsec: u32) -> PortStats {
    PortStats {
        port_no,
        rx_packets: c[0],
        tx_packets: c[1],
        rx_bytes: c[2],
        tx_bytes: c[3],
        rx_dropped: c[4],
        tx_dropped: c[5],
        rx_errors: c[6],
        tx_errors: c[7],
        rx_frame_err: c[8],
        rx_over_err: c[9],
        rx_crc_err: c[10],
        collisions: c[11],
        duration_sec,
        duration_nsec,
    }
}

/// Per-bucket or per-band counter pairs filling `r`.
fn counter_pairs(r: &mut Reader<'_>) -> Result<Vec<(u64, u64)>, OfError> {
    records(r, 16, |b| Ok((b.u64("packets")?, b.u64("bytes")?)))
}

/// Reads a reply body of multipart type `typ` (all of `r`) in `version`.
pub(crate) fn get_reply(typ: u16, r: &mut Reader<'_>, version: u8) -> Result<MultipartReply, OfError> {
    use multipart_type as t;
    let of14 = version >= OFP14;
    let body = match typ {
        t::PORT_STATS if of14 => {
            let mut v = Vec::new();
            while !r.is_empty() {
                let len = usize::from(r.u16("port stats length")?);
                let mut b = framed(r, len, 2, 80, "port stats")?;
                b.skip(2, "pad")?;
                let port_no = b.u32("port_no")?;
                let duration_sec = b.u32("duration_sec")?;
                let duration_nsec = b.u32("duration_nsec")?;
                let mut c = [0u64; 12];
                for v in &mut c[..8] {
                    *v = b.u64("counter")?;
                }
                for (typ, mut p) in get_props(&mut b)? {
                    if typ == PROP_ETHERNET {
                        p.skip(4, "pad")?;
                        for v in &mut c[8..] {
                            *v = p.u64("counter")?;
                        }
                    }
                }
                v.push(port_stats(port_no, c, duration_sec, duration_nsec));
            }
            MultipartReply::PortStats(v)
        }
        t::QUEUE if of14 => {
            let mut v = Vec::new();
            while !r.is_empty() {
                let len = usize::from(r.u16("queue stats length")?);
                let mut b = framed(r, len, 2, 48, "queue stats")?;
                b.skip(6, "pad")?;
                v.push(QueueStats {
                    port_no: b.u32("port_no")?,
                    queue_id: b.u32("queue_id")?,
                    tx_bytes: b.u64("tx_bytes")?,
                    tx_packets: b.u64("tx_packets")?,
                    tx_errors: b.u64("tx_errors")?,
                    duration_sec: b.u32("duration_sec")?,
                    duration_nsec: b.u32("duration_nsec")?,
                });
                get_props(&mut b)?;
            }
            MultipartReply::Queue(v)
        }
        t::PORT_DESC if of14 => {
            let mut v = Vec::new();
            while !r.is_empty() {
                v.push(get_port(r, version)?);
            }
            MultipartReply::PortDesc(v)
        }
        t::TABLE_DESC if of14 => {
            let mut v = Vec::new();
            while !r.is_empty() {
                let len = usize::from(r.u16("table desc length")?);
                let mut b = framed(r, len, 2, 8, "table desc")?;
                let table_id = b.u8("table_id")?;
                b.skip(1, "pad")?;
                let config = b.u32("config")?;
                get_props(&mut b)?;
                v.push(TableDesc { table_id, config });
            }
            MultipartReply::TableDesc(v)
        }
        t::QUEUE_DESC if of14 => {
            let mut v = Vec::new();
            while !r.is_empty() {
                let port_no = r.u32("port_no")?;
                let queue_id = r.u32("queue_id")?;
                let len = usize::from(r.u16("queue desc length")?);
                let mut b = framed(r, len, 10, 16, "queue desc")?;
                b.skip(6, "pad")?;
                let mut properties = Vec::new();
                for (typ, mut p) in get_props(&mut b)? {
                    properties.push(match typ {
                        queue_prop_type::MIN_RATE => QueueProp::MinRate(p.u16("rate")?),
                        queue_prop_type::MAX_RATE => QueueProp::MaxRate(p.u16("rate")?),
                        queue_prop_type::EXPERIMENTER => {
                            let experimenter = p.u32("experimenter")?;
                            p.skip(4, "exp_type")?;
                            QueueProp::Experimenter { experimenter, data: p.rest().to_vec() }
                        }
                        other => return Err(prop_err(bad_property::BAD_TYPE, format!("queue property {other}"))),
                    });
                }
                v.push(QueueDesc { port_no, queue_id, properties });
            }
            MultipartReply::QueueDesc(v)
        }
        t::FLOW_MONITOR if of14 => MultipartReply::FlowMonitor(r.rest().to_vec()),
        t::DESC => MultipartReply::Desc(Desc {
            mfr_desc: r.string(256, "mfr_desc")?,
            hw_desc: r.string(256, "hw_desc")?,
            sw_desc: r.string(256, "sw_desc")?,
            serial_num: r.string(32, "serial_num")?,
            dp_desc: r.string(256, "dp_desc")?,
        }),
        t::FLOW => {
            let mut v = Vec::new();
            while !r.is_empty() {
                let len = usize::from(r.u16("flow stats length")?);
                let mut b = framed(r, len, 2, 56, "flow stats")?;
                let table_id = b.u8("table_id")?;
                b.skip(1, "pad")?;
                let duration_sec = b.u32("duration_sec")?;
                let duration_nsec = b.u32("duration_nsec")?;
                let priority = b.u16("priority")?;
                let idle_timeout = b.u16("idle_timeout")?;
                let hard_timeout = b.u16("hard_timeout")?;
                let flags = b.u16("flags")?;
                b.skip(4, "pad")?;
                let cookie = b.u64("cookie")?;
                let packet_count = b.u64("packet_count")?;
                let byte_count = b.u64("byte_count")?;
                let matched = get_match(&mut b)?;
                let instructions = get_instructions(b.rest())?;
                v.push(FlowStats {
                    table_id,
                    duration_sec,
                    duration_nsec,
                    priority,
                    idle_timeout,
                    hard_timeout,
                    flags,
                    cookie,
                    packet_count,
                    byte_count,
                    matched,
                    instructions,
                });
            }
            MultipartReply::Flow(v)
        }
        t::AGGREGATE => {
            let a = AggregateStats {
                packet_count: r.u64("packet_count")?,
                byte_count: r.u64("byte_count")?,
                flow_count: r.u32("flow_count")?,
            };
            r.skip(4, "pad")?;
            MultipartReply::Aggregate(a)
        }
        t::TABLE => MultipartReply::Table(records(r, 24, |b| {
            let table_id = b.u8("table_id")?;
            b.skip(3, "pad")?;
            Ok(TableStats {
                table_id,
                active_count: b.u32("active_count")?,
                lookup_count: b.u64("lookup_count")?,
                matched_count: b.u64("matched_count")?,
            })
        })?),
        t::PORT_STATS => MultipartReply::PortStats(records(r, 112, |b| {
            let port_no = b.u32("port_no")?;
            b.skip(4, "pad")?;
            let mut c = [0u64; 12];
            for v in &mut c {
                *v = b.u64("counter")?;
            }
            Ok(port_stats(port_no, c, b.u32("duration_sec")?, b.u32("duration_nsec")?))
        })?),
        t::QUEUE => MultipartReply::Queue(records(r, 40, |b| {
            Ok(QueueStats {
                port_no: b.u32("port_no")?,
                queue_id: b.u32("queue_id")?,
                tx_bytes: b.u64("tx_bytes")?,
                tx_packets: b.u64("tx_packets")?,
                tx_errors: b.u64("tx_errors")?,
                duration_sec: b.u32("duration_sec")?,
                duration_nsec: b.u32("duration_nsec")?,
            })
        })?),
        t::GROUP => {
            let mut v = Vec::new();
            while !r.is_empty() {
                let len = usize::from(r.u16("group stats length")?);
                let mut b = framed(r, len, 2, 40, "group stats")?;
                b.skip(2, "pad")?;
                let group_id = b.u32("group_id")?;
                let ref_count = b.u32("ref_count")?;
                b.skip(4, "pad")?;
                let packet_count = b.u64("packet_count")?;
                let byte_count = b.u64("byte_count")?;
                let duration_sec = b.u32("duration_sec")?;
                let duration_nsec = b.u32("duration_nsec")?;
                let buckets = counter_pairs(&mut b)?;
                v.push(GroupStats {
                    group_id,
                    ref_count,
                    packet_count,
                    byte_count,
                    duration_sec,
                    duration_nsec,
                    buckets,
                });
            }
            MultipartReply::Group(v)
        }
        t::GROUP_DESC => {
            let mut v = Vec::new();
            while !r.is_empty() {
                let len = usize::from(r.u16("group desc length")?);
                let mut b = framed(r, len, 2, 8, "group desc")?;
                let typ = b.u8("type")?;
                b.skip(1, "pad")?;
                let group_id = b.u32("group_id")?;
                let buckets = get_buckets(&mut b)?;
                v.push(GroupDesc { typ, group_id, buckets });
            }
            MultipartReply::GroupDesc(v)
        }
        t::GROUP_FEATURES => {
            let types = r.u32("types")?;
            let capabilities = r.u32("capabilities")?;
            let mut max_groups = [0u32; 4];
            for v in &mut max_groups {
                *v = r.u32("max_groups")?;
            }
            let mut actions = [0u32; 4];
            for v in &mut actions {
                *v = r.u32("actions")?;
            }
            MultipartReply::GroupFeatures(GroupFeatures { types, capabilities, max_groups, actions })
        }
        t::METER => {
            let mut v = Vec::new();
            while !r.is_empty() {
                let meter_id = r.u32("meter_id")?;
                let len = usize::from(r.u16("meter stats length")?);
                let mut b = framed(r, len, 6, 40, "meter stats")?;
                b.skip(6, "pad")?;
                let flow_count = b.u32("flow_count")?;
                let packet_in_count = b.u64("packet_in_count")?;
                let byte_in_count = b.u64("byte_in_count")?;
                let duration_sec = b.u32("duration_sec")?;
                let duration_nsec = b.u32("duration_nsec")?;
                let bands = counter_pairs(&mut b)?;
                v.push(MeterStats {
                    meter_id,
                    flow_count,
                    packet_in_count,
                    byte_in_count,
                    duration_sec,
                    duration_nsec,
                    bands,
                });
            }
            MultipartReply::Meter(v)
        }
        t::METER_CONFIG => {
            let mut v = Vec::new();
            while !r.is_empty() {
                let len = usize::from(r.u16("meter config length")?);
                let mut b = framed(r, len, 2, 8, "meter config")?;
                let flags = b.u16("flags")?;
                let meter_id = b.u32("meter_id")?;
                let bands = get_bands(&mut b)?;
                v.push(MeterConfig { flags, meter_id, bands });
            }
            MultipartReply::MeterConfig(v)
        }
        t::METER_FEATURES => {
            let m = MeterFeatures {
                max_meter: r.u32("max_meter")?,
                band_types: r.u32("band_types")?,
                capabilities: r.u32("capabilities")?,
                max_bands: r.u8("max_bands")?,
                max_color: r.u8("max_color")?,
            };
            r.skip(2, "pad")?;
            MultipartReply::MeterFeatures(m)
        }
        t::TABLE_FEATURES => MultipartReply::TableFeatures(get_table_features_list(r)?),
        t::PORT_DESC => MultipartReply::PortDesc(records(r, 64, |b| get_port(b, version))?),
        t::EXPERIMENTER => MultipartReply::Experimenter {
            experimenter: r.u32("experimenter")?,
            exp_type: r.u32("exp_type")?,
            data: r.rest().to_vec(),
        },
        _ => return Err(bad_multipart(typ)),
    };
    empty(r, "multipart reply")?;
    Ok(body)
}
