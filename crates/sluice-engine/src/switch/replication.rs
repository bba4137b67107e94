//! What follows a packet's ingress control, and its egress control: the
//! replication engine and queues of simple_switch (see
//! `docs/bmv2-semantics.md`).
//!
//! Contract. Reads: the PHV and metadata ingress or egress left (egress
//! spec, multicast group, clone, resubmit and recirculate requests, their
//! field lists), the multicast groups and mirroring sessions. Writes: new
//! PHVs for copies (clones, multicast replicas) with their instance types
//! and preserved fields, the ingress and egress queues, the statistics.
//! Leaves: a transmitted packet is deparsed and handed to `emit(port,
//! bytes)` (truncated if asked); a dropped one is counted; a resubmitted or
//! recirculated one goes back to ingress, at most `max_recirculations`
//! passes per input. Queues drain egress first, then the next ingress pass;
//! with a traffic manager (`queues.rs`), packets bound for egress wait in
//! their port's queue first and run egress when they leave it.

use std::collections::VecDeque;

use crate::control::PktMeta;
use crate::phv::{Loc, Phv};
use crate::plan::Plan;
use crate::value::nbytes;

use super::{Switch, STAGE_DEPARSER, STAGE_REPLICATION};
use crate::trace::Event;
use crate::v1model::{instance, DROP_PORT};

/// A field value carried into a resubmitted or recirculated packet:
/// `(field, value bytes, bytes of a field wider than 128 bits)`.
pub(super) type Preserved = (u32, [u8; 16], Option<Vec<u8>>);

pub(super) struct IngressItem {
    data: Vec<u8>,
    /// The port the packet arrived on (kept by resubmitted copies for re-parsing clones).
    port: u32,
    /// A packet from a port: bmv2 sets `ingress_port` and the ingress timestamp
    /// only on arrival, so resubmitted and recirculated packets see 0 there
    /// unless a preserved field list carries them.
    arrived: bool,
    instance_type: u128,
    /// `(field, value bytes)` preserved from the packet that caused this one.
    preserved: Vec<Preserved>,
}

impl IngressItem {
    /// A packet back to ingress (resubmitted or recirculated) from `port`
    /// with instance type (PSA: packet path) `instance_type`.
    pub(super) fn again(data: Vec<u8>, port: u32, instance_type: u128) -> IngressItem {
        IngressItem { data, port, arrived: false, instance_type, preserved: Vec::new() }
    }
}

/// How a packet entered ingress (the borrowed form of an [`IngressItem`]).
pub(super) struct Arrival<'a> {
    pub(super) port: u32,
    pub(super) arrived: bool,
    pub(super) instance_type: u128,
    pub(super) preserved: &'a [Preserved],
}

pub(super) struct EgressItem {
    /// Boxed so that queueing a packet moves a pointer, not the PHV's vectors.
    pub(super) phv: Box<Phv>,
    /// Payload bytes (unparsed remainder).
    pub(super) payload: Vec<u8>,
    pub(super) port: u32,
    pub(super) meta: PktMeta,
    /// The packet's (id, copy id) in the trace (0 when nothing is traced).
    stamp: (u64, u64),
}

impl EgressItem {
    pub(super) fn new(phv: Box<Phv>, payload: Vec<u8>, port: u32, meta: PktMeta, stamp: (u64, u64)) -> EgressItem {
        EgressItem { phv, payload, port, meta, stamp }
    }

    /// The packet's (id, copy id) in the trace.
    pub(super) fn stamp(&self) -> (u64, u64) {
        self.stamp
    }

    /// The PHV, payload, port and metadata.
    pub(super) fn into_parts(self) -> (Box<Phv>, Vec<u8>, u32, PktMeta) {
        (self.phv, self.payload, self.port, self.meta)
    }
}

/// A packet in egress (an [`EgressItem`] without its payload).
pub(super) struct EgressRun {
    pub(super) phv: Box<Phv>,
    pub(super) port: u32,
    pub(super) meta: PktMeta,
}

impl Switch {
    pub(super) fn with_queues(
        &mut self,
        emit: &mut dyn FnMut(u32, &[u8]),
        start: impl FnOnce(&mut Self, &mut VecDeque<IngressItem>, &mut VecDeque<EgressItem>, &mut dyn FnMut(u32, &[u8])),
    ) {
        let mut ingress = std::mem::take(&mut self.ingress_q);
        let mut egress = std::mem::take(&mut self.egress_q);
        start(self, &mut ingress, &mut egress, emit);
        let mut passes = 1;
        loop {
            // With a traffic manager, what ingress (or an egress clone) sent
            // toward egress waits in its port's queue; what may leave now
            // comes back, and only that runs egress in this round.
            if self.tm.is_some() {
                self.through_queues(&mut egress);
            }
            if egress.is_empty() && ingress.is_empty() {
                break;
            }
            // Without queues, egress drains in this round, new copies included.
            let round = if self.tm.is_some() { egress.len() } else { usize::MAX };
            let mut ran = 0;
            while ran < round {
                let Some(e) = egress.pop_front() else { break };
                ran += 1;
                if self.plan.psa.is_some() {
                    self.psa_egress(e, &mut ingress, &mut egress, emit);
                } else {
                    self.egress(e, &mut ingress, &mut egress, emit);
                }
            }
            let Some(item) = ingress.pop_front() else { continue };
            passes += 1;
            if passes > self.max_recirculations + 1 {
                self.stats.dropped += 1;
                self.buf_pool.push(item.data);
                continue;
            }
            let arrival = Arrival {
                port: item.port,
                arrived: item.arrived,
                instance_type: item.instance_type,
                preserved: &item.preserved,
            };
            if self.plan.psa.is_some() {
                self.psa_ingress(arrival, &item.data, &mut ingress, &mut egress);
            } else {
                self.ingress(arrival, &item.data, &mut ingress, &mut egress, emit);
            }
            self.buf_pool.push(item.data);
        }
        self.ingress_q = ingress;
        self.egress_q = egress;
    }

    /// The trace stamp of a packet queued for egress: the current packet's
    /// own, or (`copy`) a new copy id of it; (0, 0) when nothing is traced.
    pub(super) fn egress_stamp(&mut self, copy: bool) -> (u64, u64) {
        match self.trace.as_mut() {
            Some(t) if copy => t.new_copy(),
            Some(t) => t.current(),
            None => (0, 0),
        }
    }

    /// Stamps the trace's next events with a queued packet's stamp.
    pub(super) fn resume_stamp(&mut self, stamp: (u64, u64)) {
        if let Some(t) = self.trace.as_mut() {
            t.set_current(stamp);
        }
    }

    /// Adds a note (a debug log line) to the trace, when tracing.
    pub(super) fn trace_note(&mut self, s: impl FnOnce() -> String) {
        if let Some(t) = self.trace.as_mut() {
            t.note(s());
        }
    }

    /// Adds an event to the trace, when tracing.
    pub(super) fn trace_event(&mut self, e: impl FnOnce() -> Event) {
        if let Some(t) = self.trace.as_mut() {
            t.push(e());
        }
    }

    fn ingress(
        &mut self,
        item: Arrival,
        data: &[u8],
        ingress: &mut VecDeque<IngressItem>,
        egress: &mut VecDeque<EgressItem>,
        emit: &mut dyn FnMut(u32, &[u8]),
    ) {
        let (phv, consumed) = self.ingress_parse(&item, data);
        self.ingress_run(item, data, phv, consumed, ingress, egress, emit);
    }

    /// Ingress from the pipeline on, for a packet [`Switch::ingress_parse`] parsed.
    #[allow(clippy::too_many_arguments)]
    fn ingress_run(
        &mut self,
        item: Arrival,
        data: &[u8],
        mut phv: Box<Phv>,
        consumed: usize,
        ingress: &mut VecDeque<IngressItem>,
        egress: &mut VecDeque<EgressItem>,
        emit: &mut dyn FnMut(u32, &[u8]),
    ) {
        let len = data.len() as u32;
        let mut meta = PktMeta { len_reg: len, ingress_len: len, ..Default::default() };
        self.run_pipeline(&mut phv, &mut meta, true);
        self.after_ingress(item, data, phv, consumed, meta, ingress, egress, emit);
    }

    /// What follows the ingress pipeline: clone, resubmit, multicast, drop
    /// or the queue to egress.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn after_ingress(
        &mut self,
        item: Arrival,
        data: &[u8],
        mut phv: Box<Phv>,
        consumed: usize,
        mut meta: PktMeta,
        ingress: &mut VecDeque<IngressItem>,
        egress: &mut VecDeque<EgressItem>,
        emit: &mut dyn FnMut(u32, &[u8]),
    ) {
        let timed = self.clock.start();
        let len = data.len() as u128;
        if let Some((session, fl)) = meta.clone.take() {
            let sess = self.state.mirror.get(&(session & 0x7fff)).cloned();
            self.trace_note(|| match sess {
                Some(_) => format!("Cloning packet at ingress (session {session})"),
                None => format!("Cloning packet at ingress: session {session} is not configured"),
            });
            if let Some(sess) = sess {
                let mut cphv = self.take_phv();
                cphv.reset();
                self.set_std(&mut cphv, self.plan.std.ingress_port, item.port as u128);
                let cconsumed = self.parse(&mut cphv, data);
                // Keep the re-parsed headers, zero all metadata, then copy the field list.
                let parsed = cphv.clone();
                cphv.reset();
                copy_headers_only(&self.plan, &mut cphv, &parsed);
                self.copy_field_list(&mut cphv, &phv, fl);
                self.set_std(&mut cphv, self.plan.std.instance_type, instance::INGRESS_CLONE);
                self.set_std(&mut cphv, self.plan.std.packet_length, len);
                let payload = data[cconsumed.min(data.len())..].to_vec();
                let cmeta = PktMeta { len_reg: len as u32, ingress_len: len as u32, ..Default::default() };
                self.enqueue_session(&sess, cphv, payload, cmeta, egress);
            }
        }
        if let Some((r, l)) = meta.digest {
            self.trace_note(|| format!("Generating digest (learn list {l}, receiver {r})"));
        }
        if let Some(fl) = meta.resubmit {
            let preserved = self.preserved(&phv, fl);
            self.trace_note(|| "Resubmitting packet".to_string());
            let mut b = self.take_buf();
            b.extend_from_slice(data);
            ingress.push_back(IngressItem {
                data: b,
                port: item.port,
                arrived: false,
                instance_type: instance::RESUBMIT,
                preserved,
            });
            self.phv_pool.push(phv);
            self.clock.record(STAGE_REPLICATION, timed, 1);
            return;
        }
        let mgid = self.get_std(&phv, self.plan.std.mcast_grp) as u32;
        let payload_start = consumed.min(data.len());
        if mgid != 0 {
            self.set_std(&mut phv, self.plan.std.instance_type, instance::REPLICATION);
            let mut copies = std::mem::take(&mut self.mc_buf);
            self.state.pre.replicate(mgid, &mut copies);
            self.trace_note(|| format!("Multicast requested for packet (group {mgid}, {} copies)", copies.len()));
            for (rid, port) in copies.iter() {
                self.set_std(&mut phv, self.plan.std.egress_rid, *rid as u128);
                let mut c = self.take_phv();
                c.copy_from(&phv);
                let mut p = self.take_buf();
                p.extend_from_slice(&data[payload_start..]);
                let m = PktMeta {
                    len_reg: meta.len_reg,
                    ingress_len: meta.ingress_len,
                    truncate: meta.truncate,
                    ..Default::default()
                };
                let stamp = self.egress_stamp(true);
                egress.push_back(EgressItem { phv: c, payload: p, port: *port, meta: m, stamp });
            }
            self.mc_buf = copies;
            self.phv_pool.push(phv);
            self.clock.record(STAGE_REPLICATION, timed, 1);
            return;
        }
        let spec = self.get_std(&phv, self.plan.std.egress_spec);
        if spec == DROP_PORT {
            self.trace_note(|| "Dropping packet at the end of ingress".to_string());
            self.stats.dropped += 1;
            self.phv_pool.push(phv);
            self.clock.record(STAGE_REPLICATION, timed, 1);
            return;
        }
        self.set_std(&mut phv, self.plan.std.instance_type, instance::NORMAL);
        let m = PktMeta {
            len_reg: meta.len_reg,
            ingress_len: meta.ingress_len,
            truncate: meta.truncate,
            ..Default::default()
        };
        self.trace_note(|| format!("Egress port is {spec}"));
        self.clock.record(STAGE_REPLICATION, timed, 1);
        if egress.is_empty() && self.tm.is_none() {
            // Nothing queued ahead of it: egress runs on the borrowed payload.
            self.egress_body(phv, spec as u32, m, &data[payload_start..], ingress, egress, emit);
        } else {
            let mut p = self.take_buf();
            p.extend_from_slice(&data[payload_start..]);
            let stamp = self.egress_stamp(false);
            egress.push_back(EgressItem { phv, payload: p, port: spec as u32, meta: m, stamp });
        }
    }

    fn enqueue_session(
        &mut self,
        sess: &crate::state::MirrorSession,
        phv: Box<Phv>,
        payload: Vec<u8>,
        mut meta: PktMeta,
        egress: &mut VecDeque<EgressItem>,
    ) {
        // The session's truncation cuts each clone as it leaves, as `truncate` does.
        if let Some(t) = sess.truncate {
            meta.truncate = Some(meta.truncate.map_or(t, |m| m.min(t)));
        }
        if let Some(mgid) = sess.mgid {
            let mut copies = std::mem::take(&mut self.mc_buf);
            self.state.pre.replicate(mgid, &mut copies);
            let mut src = phv.clone();
            for (rid, port) in copies.iter() {
                self.set_std(&mut src, self.plan.std.egress_rid, *rid as u128);
                let mut c = self.take_phv();
                c.copy_from(&src);
                let m = PktMeta {
                    len_reg: meta.len_reg,
                    ingress_len: meta.ingress_len,
                    truncate: meta.truncate,
                    ..Default::default()
                };
                let stamp = self.egress_stamp(true);
                egress.push_back(EgressItem { phv: c, payload: payload.clone(), port: *port, meta: m, stamp });
            }
            self.mc_buf = copies;
        }
        if let Some(port) = sess.port {
            let stamp = self.egress_stamp(true);
            egress.push_back(EgressItem { phv, payload, port, meta, stamp });
        }
    }

    fn preserved(&self, phv: &Phv, fl: Option<u32>) -> Vec<Preserved> {
        let mut out = Vec::new();
        if let Some(list) = fl.and_then(|id| self.plan.field_lists.get(&(id as u64))) {
            for f in list {
                let fi = &self.plan.layout.fields[*f as usize];
                if fi.width > 128 {
                    let mut b = vec![0u8; nbytes(fi.width)];
                    phv.get_bytes(fi, &mut b);
                    out.push((*f, [0; 16], Some(b)));
                } else {
                    let mut b = [0u8; 16];
                    crate::value::u128_to_be(phv.get(fi), &mut b);
                    out.push((*f, b, None));
                }
            }
        }
        out
    }

    fn copy_field_list(&self, dst: &mut Phv, src: &Phv, fl: Option<u32>) {
        for (f, v, wide) in self.preserved(src, fl) {
            let fi = &self.plan.layout.fields[f as usize];
            match wide {
                Some(b) => dst.set_bytes(fi, &b),
                None => dst.set_bytes(fi, &v),
            }
        }
    }

    fn egress(
        &mut self,
        e: EgressItem,
        ingress: &mut VecDeque<IngressItem>,
        egress: &mut VecDeque<EgressItem>,
        emit: &mut dyn FnMut(u32, &[u8]),
    ) {
        self.resume_stamp(e.stamp);
        self.egress_body(e.phv, e.port, e.meta, &e.payload, ingress, egress, emit);
        self.buf_pool.push(e.payload);
    }

    /// Egress for one packet whose unparsed payload is `payload`.
    #[allow(clippy::too_many_arguments)]
    fn egress_body(
        &mut self,
        phv: Box<Phv>,
        port: u32,
        meta: PktMeta,
        payload: &[u8],
        ingress: &mut VecDeque<IngressItem>,
        egress: &mut VecDeque<EgressItem>,
        emit: &mut dyn FnMut(u32, &[u8]),
    ) {
        let (e, meta) = self.egress_pipeline(phv, port, meta);
        self.after_egress(e, meta, payload, ingress, egress, emit);
    }

    /// Sets the egress standard metadata and runs the egress pipeline;
    /// returns the packet and the pipeline's requests (clone, recirculate, truncate).
    fn egress_pipeline(&mut self, phv: Box<Phv>, port: u32, meta: PktMeta) -> (EgressRun, PktMeta) {
        let mut e = EgressRun { phv, port, meta };
        let now = self.now_us();
        self.set_std(&mut e.phv, self.plan.std.egress_global_timestamp, now as u128);
        self.set_std(&mut e.phv, self.plan.std.egress_port, e.port as u128);
        self.set_std(&mut e.phv, self.plan.std.egress_spec, 512);
        self.set_std(&mut e.phv, self.plan.std.packet_length, e.meta.len_reg as u128);
        self.trace_note(|| format!("Egress of packet on port {}", e.port));
        let mut meta = std::mem::take(&mut e.meta);
        self.run_pipeline(&mut e.phv, &mut meta, false);
        (e, meta)
    }

    /// What follows the egress pipeline: clone E2E, then drop, recirculate or transmit.
    pub(super) fn after_egress(
        &mut self,
        e: EgressRun,
        mut meta: PktMeta,
        payload: &[u8],
        ingress: &mut VecDeque<IngressItem>,
        egress: &mut VecDeque<EgressItem>,
        emit: &mut dyn FnMut(u32, &[u8]),
    ) {
        if let Some((session, fl)) = meta.clone.take() {
            if let Some(sess) = self.state.mirror.get(&(session & 0x7fff)).cloned() {
                self.trace_note(|| format!("Cloning packet at egress (session {session})"));
                let mut c = self.take_phv();
                c.reset();
                copy_headers_only(&self.plan, &mut c, &e.phv);
                self.copy_field_list(&mut c, &e.phv, fl);
                self.set_std(&mut c, self.plan.std.instance_type, instance::EGRESS_CLONE);
                let cm = PktMeta { len_reg: meta.len_reg, ingress_len: meta.ingress_len, ..Default::default() };
                self.enqueue_session(&sess, c, payload.to_vec(), cm, egress);
            }
        }
        if let Some(fl) = meta.recirculate {
            if self.get_std(&e.phv, self.plan.std.egress_spec) == DROP_PORT {
                self.egress_end(e, &meta, payload, emit);
                return;
            }
            let mut out = std::mem::take(&mut self.out_buf);
            let mut phv = e.phv;
            self.deparse(&mut phv, payload, &mut out);
            let preserved = self.preserved(&phv, fl);
            self.trace_note(|| "Recirculating packet".to_string());
            let mut b = self.take_buf();
            b.extend_from_slice(&out);
            ingress.push_back(IngressItem {
                data: b,
                port: 0,
                arrived: false,
                instance_type: instance::RECIRC,
                preserved,
            });
            self.out_buf = out;
            self.phv_pool.push(phv);
            return;
        }
        self.egress_end(e, &meta, payload, emit);
    }

    /// The end of egress for a packet that is not recirculated: drop, or
    /// deparse and transmit (truncated if the pipeline asked).
    fn egress_end(&mut self, mut e: EgressRun, meta: &PktMeta, payload: &[u8], emit: &mut dyn FnMut(u32, &[u8])) {
        if self.get_std(&e.phv, self.plan.std.egress_spec) == DROP_PORT {
            self.trace_note(|| "Dropping packet at the end of egress".to_string());
            self.stats.dropped += 1;
            self.phv_pool.push(e.phv);
            return;
        }
        let mut out = std::mem::take(&mut self.out_buf);
        let timed = self.clock.start();
        self.deparse(&mut e.phv, payload, &mut out);
        self.clock.record(STAGE_DEPARSER, timed, 1);
        let n = meta.truncate.map_or(out.len(), |t| (t as usize).min(out.len()));
        self.trace_event(|| Event::PacketOut { port: e.port, len: n });
        self.stats.transmitted += 1;
        emit(e.port, &out[..n]);
        self.out_buf = out;
        self.phv_pool.push(e.phv);
    }
}

fn copy_headers_only(plan: &Plan, dst: &mut Phv, src: &Phv) {
    for (h, hi) in plan.layout.headers.iter().enumerate() {
        if hi.metadata {
            continue;
        }
        if let Some((off, n)) = hi.wire {
            dst.wire_mut()[off as usize..(off + n) as usize]
                .copy_from_slice(&src.wire()[off as usize..(off + n) as usize]);
        }
        for f in &hi.fields {
            let fi = &plan.layout.fields[*f as usize];
            match fi.loc {
                Loc::Slot(s) => dst.slots[s as usize] = src.slots[s as usize],
                Loc::Wide { off, len } => dst.wide[off as usize..(off + len) as usize]
                    .copy_from_slice(&src.wide[off as usize..(off + len) as usize]),
                Loc::Wire { .. } => {}
            }
        }
        dst.valid_mut()[h] = src.valid()[h];
        dst.varbit_len[h] = src.varbit_len[h];
    }
    dst.stack_next.copy_from_slice(&src.stack_next);
    dst.union_stack_next.copy_from_slice(&src.union_stack_next);
}
