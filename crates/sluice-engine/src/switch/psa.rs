//! A PSA program's packet path: ingress parser, control and deparser, the
//! packet buffer and replication engine, egress parser, control and
//! deparser, as the PSA specification's "Packet Path Details" and bmv2's
//! `psa_switch` do them.
//!
//! Contract. Reads: the frame, the PSA metadata the controls leave
//! (`psa_ingress_output_metadata`: drop, resubmit, clone and its session,
//! multicast group, egress port, class of service;
//! `psa_egress_output_metadata`: drop, clone and its session), the
//! multicast groups and clone sessions. Writes: the PSA input metadata of
//! each pass (ports, packet path, instance, class of service, timestamps,
//! parser errors), the output metadata's initial values (ingress: drop
//! true, the rest zero; egress: drop and clone false), new packets for
//! copies. Leaves, after ingress in this order: a clone (I2E, the packet as
//! it arrived) to its session's port or group even when the packet is
//! dropped; drop; resubmit (the packet as it arrived, back to ingress);
//! the ingress deparser's output to each copy of a multicast group, or to
//! the egress port. After egress: a clone (E2E, the egress deparser's
//! output); drop; back to ingress when the egress port is
//! `PSA_PORT_RECIRCULATE`; else `emit(port, bytes)`. A parser error never
//! drops: the controls see it in `parser_error`. Ingress metadata (user
//! structs) carries into egress; headers do not (egress parses the ingress
//! deparser's output again). Passes per input are bounded as for v1model.

use std::collections::VecDeque;

use crate::control::PktMeta;
use crate::phv::Phv;
use crate::psa::{path, PORT_RECIRCULATE};

use super::replication::{Arrival, EgressItem, IngressItem};
use super::{Switch, STAGE_DEPARSER, STAGE_EGRESS_DEPARSER, STAGE_EGRESS_PARSER, STAGE_PARSER, STAGE_REPLICATION};

impl Switch {
    fn psa_get(&self, phv: &Phv, f: Option<u32>) -> u128 {
        f.map_or(0, |f| self.plan.layout.read(phv, f))
    }

    /// One PSA ingress pass of a packet (`item.instance_type` is its
    /// packet path).
    /// Runs the ingress or egress parser on `data`: the bits consumed and
    /// the parser error, if one ended the parse. The compiled parser runs
    /// when there is one (and no trace is kept); the interpreter otherwise.
    fn psa_parse(&mut self, phv: &mut Phv, data: &[u8], egress: bool) -> (usize, Option<u64>) {
        if let (Some(c), None) = (&self.compiled, &self.trace) {
            let outcome = if egress { c.run_egress_parser(phv, data) } else { c.run_parser(phv, data) };
            if let Some(outcome) = outcome {
                let (bytes, error) = self.outcome_parts(outcome);
                return (bytes * 8, error);
            }
        }
        let init = if egress { self.plan.egress_init_state } else { self.plan.init_state };
        self.parse_states(phv, data, init)
    }

    pub(super) fn psa_ingress(
        &mut self,
        item: Arrival,
        data: &[u8],
        ingress: &mut VecDeque<IngressItem>,
        egress: &mut VecDeque<EgressItem>,
    ) {
        let Some(f) = self.plan.psa.clone() else { return };
        let timed = self.clock.start();
        let mut phv = self.take_phv();
        phv.reset();
        let packet_path = item.instance_type;
        if let Some(t) = self.trace.as_mut() {
            t.new_packet(item.port, data.len(), item.arrived, || {
                format!("Processing packet of packet_path {packet_path} (resubmitted or recirculated)")
            });
        }
        self.set_std(&mut phv, f.ig_parser_port, item.port as u128);
        self.set_std(&mut phv, f.ig_parser_path, packet_path);
        let (cursor, error) = self.psa_parse(&mut phv, data, false);
        let consumed = cursor.div_ceil(8).min(data.len());
        self.set_std(&mut phv, f.ig_port, item.port as u128);
        self.set_std(&mut phv, f.ig_path, packet_path);
        self.set_std(&mut phv, f.ig_timestamp, self.now_us() as u128);
        self.set_std(&mut phv, f.ig_parser_error, u128::from(error.unwrap_or(self.plan.no_error)));
        // The output metadata's initial values.
        for (field, v) in [
            (f.ig_cos, 0),
            (f.ig_clone, 0),
            (f.ig_clone_session, 0),
            (f.ig_drop, 1),
            (f.ig_resubmit, 0),
            (f.ig_multicast_group, 0),
            (f.ig_egress_port, 0),
        ] {
            self.set_std(&mut phv, field, v);
        }
        self.clock.record(STAGE_PARSER, timed, 1);
        let len = data.len() as u32;
        let mut meta = PktMeta { len_reg: len, ingress_len: len, ..Default::default() };
        self.run_pipeline(&mut phv, &mut meta, true);
        let timed = self.clock.start();
        let cos = self.psa_get(&phv, f.ig_cos);
        if self.psa_get(&phv, f.ig_clone) != 0 {
            let session = self.psa_get(&phv, f.ig_clone_session) as u32;
            let mut c = self.take_phv();
            c.reset();
            self.psa_to_session(session, c, data, path::CLONE_I2E, egress);
        }
        if self.psa_get(&phv, f.ig_drop) != 0 {
            self.trace_note(|| "Dropping packet at the end of ingress".to_string());
            self.stats.dropped += 1;
            self.phv_pool.push(phv);
            self.clock.record(STAGE_REPLICATION, timed, 1);
            return;
        }
        if self.psa_get(&phv, f.ig_resubmit) != 0 {
            self.trace_note(|| "Resubmitting packet".to_string());
            let mut b = self.take_buf();
            b.extend_from_slice(data);
            ingress.push_back(IngressItem::again(b, item.port, path::RESUBMIT));
            self.phv_pool.push(phv);
            self.clock.record(STAGE_REPLICATION, timed, 1);
            return;
        }
        let mut out = std::mem::take(&mut self.out_buf);
        let at_deparser = self.clock.record(STAGE_REPLICATION, timed, 1);
        self.deparse_with(&mut phv, &data[consumed..], &mut out, false);
        // The replication after the deparser is charged to the call counted above.
        let timed = self.clock.record(STAGE_DEPARSER, at_deparser, 1);
        let group = self.psa_get(&phv, f.ig_multicast_group) as u32;
        if group != 0 {
            let mut copies = std::mem::take(&mut self.mc_buf);
            self.state.pre.replicate(group, &mut copies);
            self.trace_note(|| format!("Multicast requested for packet (group {group}, {} copies)", copies.len()));
            if copies.is_empty() {
                self.stats.dropped += 1;
            }
            for &(rid, port) in copies.iter() {
                let mut c = self.take_phv();
                c.copy_from(&phv);
                let stamp = self.egress_stamp(true);
                self.psa_to_egress(c, &out, port, u128::from(rid), path::NORMAL_MULTICAST, cos, stamp, egress);
            }
            self.mc_buf = copies;
            self.phv_pool.push(phv);
        } else {
            let port = self.psa_get(&phv, f.ig_egress_port) as u32;
            self.trace_note(|| format!("Egress port is {port}"));
            let stamp = self.egress_stamp(false);
            self.psa_to_egress(phv, &out, port, 0, path::NORMAL_UNICAST, cos, stamp, egress);
        }
        self.out_buf = out;
        self.clock.extend(STAGE_REPLICATION, timed);
    }

    /// Queues `phv` (its headers to be parsed again from `bytes`) for
    /// egress on `port`, its egress input metadata set.
    #[allow(clippy::too_many_arguments)]
    fn psa_to_egress(
        &mut self,
        mut phv: Box<Phv>,
        bytes: &[u8],
        port: u32,
        instance: u128,
        packet_path: u128,
        cos: u128,
        stamp: (u64, u64),
        egress: &mut VecDeque<EgressItem>,
    ) {
        let Some(f) = self.plan.psa.clone() else { return };
        self.set_std(&mut phv, f.eg_port, port as u128);
        self.set_std(&mut phv, f.eg_instance, instance);
        self.set_std(&mut phv, f.eg_path, packet_path);
        self.set_std(&mut phv, f.eg_cos, cos);
        let mut payload = self.take_buf();
        payload.extend_from_slice(bytes);
        let len = bytes.len() as u32;
        egress.push_back(EgressItem::new(
            phv,
            payload,
            port,
            PktMeta { len_reg: len, ingress_len: len, ..Default::default() },
            stamp,
        ));
    }

    /// A clone of `bytes` to clone session `session` (its port, and each
    /// copy of its multicast group): none when the session is not set up.
    fn psa_to_session(
        &mut self,
        session: u32,
        phv: Box<Phv>,
        bytes: &[u8],
        packet_path: u128,
        egress: &mut VecDeque<EgressItem>,
    ) {
        let Some(sess) = self.state.mirror.get(&session).cloned() else {
            self.trace_note(|| format!("Cloning packet: session {session} is not configured"));
            self.phv_pool.push(phv);
            return;
        };
        self.trace_note(|| format!("Cloning packet (session {session})"));
        // The session's truncation and class of service, as the PSA specification's PRE applies them.
        let bytes = match sess.truncate {
            Some(t) => &bytes[..bytes.len().min(t as usize)],
            None => bytes,
        };
        let cos = u128::from(sess.cos);
        if let Some(group) = sess.mgid {
            let mut copies = std::mem::take(&mut self.mc_buf);
            self.state.pre.replicate(group, &mut copies);
            for &(rid, port) in copies.iter() {
                let mut c = self.take_phv();
                c.copy_from(&phv);
                let stamp = self.egress_stamp(true);
                self.psa_to_egress(c, bytes, port, u128::from(rid), packet_path, cos, stamp, egress);
            }
            self.mc_buf = copies;
        }
        match sess.port {
            Some(port) => {
                let stamp = self.egress_stamp(true);
                self.psa_to_egress(phv, bytes, port, 0, packet_path, cos, stamp, egress)
            }
            None => self.phv_pool.push(phv),
        }
    }

    /// One PSA egress pass of a queued packet.
    pub(super) fn psa_egress(
        &mut self,
        e: EgressItem,
        ingress: &mut VecDeque<IngressItem>,
        egress: &mut VecDeque<EgressItem>,
        emit: &mut dyn FnMut(u32, &[u8]),
    ) {
        let Some(f) = self.plan.psa.clone() else { return };
        self.resume_stamp(e.stamp());
        let (mut phv, bytes, port, mut meta) = e.into_parts();
        let timed = self.clock.start();
        phv.reset_headers();
        let packet_path = self.psa_get(&phv, f.eg_path);
        self.trace_note(|| format!("Egress of packet on port {port} (packet_path {packet_path})"));
        self.set_std(&mut phv, f.eg_parser_port, port as u128);
        self.set_std(&mut phv, f.eg_parser_path, packet_path);
        let (cursor, error) = self.psa_parse(&mut phv, &bytes, true);
        let consumed = cursor.div_ceil(8).min(bytes.len());
        self.set_std(&mut phv, f.eg_timestamp, self.now_us() as u128);
        self.set_std(&mut phv, f.eg_parser_error, u128::from(error.unwrap_or(self.plan.no_error)));
        for field in [f.eg_clone, f.eg_clone_session, f.eg_drop] {
            self.set_std(&mut phv, field, 0);
        }
        self.clock.record(STAGE_EGRESS_PARSER, timed, 1);
        self.run_pipeline(&mut phv, &mut meta, false);
        self.set_std(&mut phv, f.eg_deparser_port, port as u128);
        let mut out = std::mem::take(&mut self.out_buf);
        let timed = self.clock.start();
        self.deparse_with(&mut phv, &bytes[consumed..], &mut out, true);
        self.clock.record(STAGE_EGRESS_DEPARSER, timed, 1);
        self.buf_pool.push(bytes);
        if self.psa_get(&phv, f.eg_clone) != 0 {
            let session = self.psa_get(&phv, f.eg_clone_session) as u32;
            let mut c = self.take_phv();
            c.reset();
            self.psa_to_session(session, c, &out, path::CLONE_E2E, egress);
        }
        if self.psa_get(&phv, f.eg_drop) != 0 {
            self.trace_note(|| "Dropping packet at the end of egress".to_string());
            self.stats.dropped += 1;
        } else if port == PORT_RECIRCULATE {
            self.trace_note(|| "Recirculating packet".to_string());
            let mut b = self.take_buf();
            b.extend_from_slice(&out);
            ingress.push_back(IngressItem::again(b, PORT_RECIRCULATE, path::RECIRCULATE));
        } else {
            self.trace_event(|| crate::trace::Event::PacketOut { port, len: out.len() });
            self.stats.transmitted += 1;
            emit(port, &out);
        }
        self.out_buf = out;
        self.phv_pool.push(phv);
    }
}
