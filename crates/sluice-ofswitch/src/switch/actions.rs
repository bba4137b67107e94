//! Actions: the action set (one action per type, run in the
//! specification's order) and running an action list on a packet.
//!
//! Contract: reads a packet (`Pkt`), an action list, the switch
//! configuration (invalid TTLs) and the ports; writes the packet's bytes
//! (set-field, pushes and pops, TTLs, checksums fixed), the walk being
//! recorded (each action's step, or that it cannot be replayed),
//! packet-ins into the notification queue (output to CONTROLLER, an
//! invalid TTL when the configuration asks), the NORMAL port's MAC table.
//! A packet leaves by an output: to a port (`send`), to a reserved port
//! (IN_PORT, ALL, FLOOD, LOCAL, NORMAL, CONTROLLER, TABLE: the tables
//! again), or through a group (`groups.rs`); an action that cannot apply
//! (a TTL that runs out, a frame too short) stops the list and drops the
//! packet ([`Stop`]).

use sluice_openflow::{port, Action, OxmField};

use super::pipeline::Pkt;
use super::{Note, OfSwitch, IMPLICIT_MISS, MAX_PENDING_PACKET_INS};
use crate::cache::Op;
use crate::fields::{self, Meta};

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
pub(super) struct ActionSet {
    /// One action per slot of [`ACTION_SET_ORDER`] (the set-field slot unused).
    by_slot: [Option<Action>; 16],
    /// Set-fields (`Action::SetField`), sorted by field.
    set_fields: Vec<Action>,
    /// Nothing written since the last clear.
    pub(super) empty: bool,
}

impl ActionSet {
    pub(super) fn write(&mut self, actions: &[Action]) {
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

    pub(super) fn clear(&mut self) {
        if !self.empty {
            self.by_slot.iter_mut().for_each(|a| *a = None);
            self.set_fields.clear();
            self.empty = true;
        }
    }

    /// The `n`th action of the set in execution order (the output only
    /// when no group is set), `None` past the last; `n` counts slots and
    /// set-fields, so callers walk `n` from 0 until `None`.
    pub(super) fn nth(&self, n: usize) -> Option<Option<&Action>> {
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
pub(super) enum Stop {
    /// The packet was dropped (invalid TTL, a frame too short to change).
    Dropped,
}

impl OfSwitch {
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
            port::IN_PORT => self.send(idx, in_port, &pkt.buf, pkt.queue, emit),
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
                    self.send(idx, t, &pkt.buf, pkt.queue, emit);
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
                    self.send(idx, port::LOCAL, &pkt.buf, pkt.queue, emit)
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
                    self.send(idx, p, &pkt.buf, pkt.queue, emit)
                }
            }
            _ => self.counters.unsupported_output += 1,
        }
    }

    /// Forwards `pkt` as an ordinary MAC-learning switch (see
    /// [`crate::normal`]).
    pub(super) fn normal<E: FnMut(usize, u32, &[u8]) + ?Sized>(&mut self, idx: usize, pkt: &mut Pkt, emit: &mut E) {
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
            Some(p) => self.send(idx, p, &pkt.buf, pkt.queue, emit),
            None => self.output(idx, pkt, port::FLOOD, 0, 0, 0, 0, emit),
        }
    }

    /// Runs `actions` in order on `pkt`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run_actions<E: FnMut(usize, u32, &[u8]) + ?Sized>(
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
                Action::SetQueue(q) => pkt.queue = Some(*q),
                Action::Experimenter { .. } => {
                    self.counters.unsupported_output += 1;
                }
            }
        }
        Ok(())
    }

    /// Decrements the IPv4 TTL or IPv6 hop limit; one that would reach
    /// zero drops the packet (and sends it to the controllers if one of
    /// them asked for INVALID_TTL packet-ins).
    #[inline]
    pub(super) fn dec_nw_ttl(&mut self, pkt: &mut Pkt, table_id: u8, cookie: u64) -> Result<(), Stop> {
        pkt.parsed();
        if pkt.dec_ttl() == Some(false) {
            return self.invalid_ttl(pkt, table_id, cookie);
        }
        Ok(())
    }

    /// Sends a packet that missed table `table_id` to the agent as an
    /// [`IMPLICIT_MISS`] packet-in of `miss_send_len` bytes.
    pub(super) fn implicit_miss(&mut self, pkt: &mut Pkt, table_id: u8) {
        let n = Note::PacketIn {
            in_port: pkt.meta.in_port,
            reason: IMPLICIT_MISS,
            table_id,
            cookie: u64::MAX,
            total_len: pkt.buf.len().min(usize::from(u16::MAX)) as u16,
            data: pkt.for_controller(),
            max_len: self.config.miss_send_len,
            metadata: pkt.meta.metadata,
        };
        self.note(n);
    }

    fn invalid_ttl(&mut self, pkt: &mut Pkt, table_id: u8, cookie: u64) -> Result<(), Stop> {
        if self.ttl_packet_ins {
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

    /// Runs a forwarding step (see [`crate::cache::Forward`]) on `pkt`;
    /// false, having done nothing, when the TTL would run out (the step
    /// list then runs instead).
    #[inline]
    pub(super) fn forward<E: FnMut(usize, u32, &[u8]) + ?Sized>(
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
            self.send(idx, f.port, &pkt.buf, pkt.queue, emit);
        }
        true
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
