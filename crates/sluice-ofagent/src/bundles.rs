//! Bundles: flow-mods a controller groups and commits all at once, as
//! OpenFlow 1.4 defines them and as OpenFlow 1.3 peers send them through
//! the ONF extension (experimenter 0x4f4e4600, BUNDLE_CONTROL 2300 and
//! BUNDLE_ADD_MESSAGE 2301, the bodies of 1.4's), which `ovs-ofctl -O
//! OpenFlow13 --bundle` uses.
//!
//! Contract: a bundle belongs to its connection (and goes with it). An
//! added message is checked when it is added (a flow-mod, decoded, its
//! xid the add's own) and kept; a commit first applies every kept
//! flow-mod, in order, to a copy of the master's switch: if one fails,
//! nothing changes, the failing message's error goes back under its own
//! xid, then BUNDLE_FAILED / MSG_FAILED for the commit; if all succeed,
//! they reach the master and every worker as one change (no packet sees
//! half a bundle) and the commit is answered. Bounds: 64 open bundles per
//! connection (OUT_OF_BUNDLES), 100 000 messages per bundle
//! (MSG_TOO_MANY). To a 1.4 peer, replies are BUNDLE_CONTROL messages and
//! errors BUNDLE_FAILED; to a 1.3 peer (the ONF extension) replies are
//! ONF experimenter messages and errors experimenter errors (type 0xffff,
//! code 2300 + the 1.4 code, experimenter 0x4f4e4600).

use std::collections::BTreeMap;
use std::sync::Arc;

use sluice_ofswitch::control::PreparedFlowMod;
use sluice_ofswitch::OfSwitch;
use sluice_openflow::errors::{bad_request, error_type};
use sluice_openflow::{BundleControl, Message, OfError};

use crate::agent::Agent;

/// The ONF experimenter id.
pub(crate) const ONF: u32 = 0x4f4e_4600;
/// ONF's BUNDLE_CONTROL and BUNDLE_ADD_MESSAGE for OpenFlow 1.3.
pub(crate) const ONF_BUNDLE_CONTROL: u32 = 2300;
pub(crate) const ONF_BUNDLE_ADD: u32 = 2301;

const MAX_BUNDLES: usize = 64;
const MAX_MESSAGES: usize = 100_000;

/// `ofp_bundle_ctrl_type`.
mod ctrl {
    pub const OPEN_REQUEST: u16 = 0;
    pub const OPEN_REPLY: u16 = 1;
    pub const CLOSE_REQUEST: u16 = 2;
    pub const CLOSE_REPLY: u16 = 3;
    pub const COMMIT_REQUEST: u16 = 4;
    pub const COMMIT_REPLY: u16 = 5;
    pub const DISCARD_REQUEST: u16 = 6;
    pub const DISCARD_REPLY: u16 = 7;
}

/// `ofp_bundle_failed_code`.
mod failed {
    pub const BAD_ID: u16 = 2;
    pub const BUNDLE_EXIST: u16 = 3;
    pub const BUNDLE_CLOSED: u16 = 4;
    pub const OUT_OF_BUNDLES: u16 = 5;
    pub const BAD_TYPE: u16 = 6;
    pub const BAD_FLAGS: u16 = 7;
    pub const MSG_BAD_LEN: u16 = 8;
    pub const MSG_BAD_XID: u16 = 9;
    pub const MSG_UNSUP: u16 = 10;
    pub const MSG_TOO_MANY: u16 = 12;
    pub const MSG_FAILED: u16 = 13;
}

/// ATOMIC and ORDERED: a commit here is always both.
const KNOWN_FLAGS: u16 = 0b11;

/// One bundle being filled.
#[derive(Default)]
pub(crate) struct Bundle {
    flags: u16,
    closed: bool,
    /// Each kept message: its xid, its bytes (quoted in an error) and its flow-mod.
    messages: Vec<(u32, Vec<u8>, PreparedFlowMod)>,
}

/// A connection's open bundles, by id.
pub(crate) type Bundles = BTreeMap<u32, Bundle>;

fn be16(b: &[u8], at: usize) -> Option<u16> {
    b.get(at..at + 2).map(|x| u16::from_be_bytes([x[0], x[1]]))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4).map(|x| u32::from_be_bytes([x[0], x[1], x[2], x[3]]))
}

impl Agent {
    /// An experimenter message of connection `ci`: the ONF bundle
    /// messages, or BAD_EXPERIMENTER.
    pub(crate) fn experimenter(
        &mut self,
        ci: usize,
        raw: &[u8],
        xid: u32,
        experimenter: u32,
        exp_type: u32,
        data: &[u8],
    ) {
        match (experimenter, exp_type) {
            (ONF, ONF_BUNDLE_CONTROL) => self.bundle_control(ci, raw, xid, data),
            (ONF, ONF_BUNDLE_ADD) => self.bundle_add(ci, raw, xid, data),
            _ => {
                let e =
                    OfError::new(error_type::BAD_REQUEST, bad_request::BAD_EXPERIMENTER, "no experimenter messages");
                self.error(ci, raw, &e, xid);
            }
        }
    }

    /// Whether connection `ci` speaks OpenFlow 1.4 or later.
    fn of14(&self, ci: usize) -> bool {
        self.conns
            .get(ci)
            .and_then(Option::as_ref)
            .and_then(|c| c.link.version())
            .is_some_and(|v| v >= sluice_openflow::OFP14)
    }

    /// A 1.4 BUNDLE_CONTROL (`body`: after the header) of connection `ci`.
    pub(crate) fn bundle_control14(&mut self, ci: usize, raw: &[u8], xid: u32) {
        self.bundle_control(ci, raw, xid, &raw[8.min(raw.len())..]);
    }

    /// A 1.4 BUNDLE_ADD_MESSAGE of connection `ci`.
    pub(crate) fn bundle_add14(&mut self, ci: usize, raw: &[u8], xid: u32) {
        self.bundle_add(ci, raw, xid, &raw[8.min(raw.len())..]);
    }

    /// Sends the bundle error `code`: BUNDLE_FAILED to a 1.4 peer, an
    /// ONF experimenter error to a 1.3 one.
    fn bundle_error(&mut self, ci: usize, raw: &[u8], xid: u32, code: u16, why: &str) {
        let quoted = &raw[..raw.len().min(64)];
        let (e, data) = if self.of14(ci) {
            (OfError::new(error_type::BUNDLE_FAILED, code, why.to_string()), quoted.to_vec())
        } else {
            let mut data = ONF.to_be_bytes().to_vec();
            data.extend_from_slice(quoted);
            (OfError::new(error_type::EXPERIMENTER, 2300 + code, why.to_string()), data)
        };
        self.stats.errors_sent += 1;
        let Some(c) = self.conns.get_mut(ci).and_then(Option::as_mut) else { return };
        eprintln!("openflow: {}: error to {}: bundle: {why}", self.cfg.datapath_id, c.peer);
        let v = c.link.version().unwrap_or(sluice_openflow::OFP13);
        if c.link.error(v, xid, e.typ, e.code, &data) {
            self.stats.messages_out += 1;
        }
    }

    fn bundle_reply(&mut self, ci: usize, xid: u32, id: u32, typ: u16, flags: u16) {
        if self.of14(ci) {
            let m = BundleControl { bundle_id: id, typ, flags, properties: Vec::new() };
            return self.reply(ci, &Message::BundleControl(m), xid);
        }
        let mut data = Vec::with_capacity(8);
        data.extend_from_slice(&id.to_be_bytes());
        data.extend_from_slice(&typ.to_be_bytes());
        data.extend_from_slice(&flags.to_be_bytes());
        let m = Message::Experimenter { experimenter: ONF, exp_type: ONF_BUNDLE_CONTROL, data };
        self.reply(ci, &m, xid);
    }

    fn bundles(&mut self, ci: usize) -> Option<&mut Bundles> {
        self.conns.get_mut(ci).and_then(Option::as_mut).map(|c| &mut c.bundles)
    }

    fn bundle_control(&mut self, ci: usize, raw: &[u8], xid: u32, body: &[u8]) {
        let (Some(id), Some(typ), Some(flags)) = (be32(body, 0), be16(body, 4), be16(body, 6)) else {
            let e = OfError::new(error_type::BAD_REQUEST, bad_request::BAD_LEN, "bundle control too short");
            return self.error(ci, raw, &e, xid);
        };
        if flags & !KNOWN_FLAGS != 0 {
            return self.bundle_error(ci, raw, xid, failed::BAD_FLAGS, "unknown bundle flags");
        }
        let Some(bundles) = self.bundles(ci) else { return };
        match typ {
            ctrl::OPEN_REQUEST => {
                if bundles.contains_key(&id) {
                    return self.bundle_error(ci, raw, xid, failed::BUNDLE_EXIST, "bundle id in use");
                }
                if bundles.len() >= MAX_BUNDLES {
                    return self.bundle_error(ci, raw, xid, failed::OUT_OF_BUNDLES, "64 bundles open");
                }
                bundles.insert(id, Bundle { flags, ..Bundle::default() });
                self.bundle_reply(ci, xid, id, ctrl::OPEN_REPLY, flags);
            }
            ctrl::CLOSE_REQUEST => match bundles.get_mut(&id) {
                None => self.bundle_error(ci, raw, xid, failed::BAD_ID, "no such bundle"),
                Some(b) if b.closed => self.bundle_error(ci, raw, xid, failed::BUNDLE_CLOSED, "bundle closed"),
                Some(b) if b.flags != flags => self.bundle_error(ci, raw, xid, failed::BAD_FLAGS, "flags differ"),
                Some(b) => {
                    b.closed = true;
                    self.bundle_reply(ci, xid, id, ctrl::CLOSE_REPLY, flags);
                }
            },
            ctrl::DISCARD_REQUEST => {
                if bundles.remove(&id).is_none() {
                    return self.bundle_error(ci, raw, xid, failed::BAD_ID, "no such bundle");
                }
                self.bundle_reply(ci, xid, id, ctrl::DISCARD_REPLY, flags);
            }
            ctrl::COMMIT_REQUEST => {
                let Some(b) = bundles.remove(&id) else {
                    return self.bundle_error(ci, raw, xid, failed::BAD_ID, "no such bundle");
                };
                if b.flags != flags {
                    return self.bundle_error(ci, raw, xid, failed::BAD_FLAGS, "flags differ from the open's");
                }
                if self.commit(ci, b) {
                    self.bundle_reply(ci, xid, id, ctrl::COMMIT_REPLY, flags);
                } else {
                    self.bundle_error(ci, raw, xid, failed::MSG_FAILED, "a message failed: nothing applied");
                }
            }
            _ => self.bundle_error(ci, raw, xid, failed::BAD_TYPE, "unknown bundle control type"),
        }
    }

    fn bundle_add(&mut self, ci: usize, raw: &[u8], xid: u32, body: &[u8]) {
        let (Some(id), Some(flags)) = (be32(body, 0), be16(body, 6)) else {
            let e = OfError::new(error_type::BAD_REQUEST, bad_request::BAD_LEN, "bundle add too short");
            return self.error(ci, raw, &e, xid);
        };
        let inner = &body[8.min(body.len())..];
        let Some(len) = be16(inner, 2).map(usize::from).filter(|n| *n >= 8 && *n <= inner.len()) else {
            return self.bundle_error(ci, raw, xid, failed::MSG_BAD_LEN, "the bundled message's length");
        };
        let inner = &inner[..len];
        if be32(inner, 4) != Some(xid) {
            return self.bundle_error(ci, raw, xid, failed::MSG_BAD_XID, "the bundled message's xid is not the add's");
        }
        if self
            .conns
            .get(ci)
            .and_then(Option::as_ref)
            .is_some_and(|c| c.role == sluice_openflow::controller_role::SLAVE)
        {
            let e = OfError::new(error_type::BAD_REQUEST, bad_request::IS_SLAVE, "this connection is a slave");
            return self.error(ci, raw, &e, xid);
        }
        let fm = match sluice_openflow::decode(inner) {
            Ok((_, Message::FlowMod(fm))) => fm,
            Ok(_) => return self.bundle_error(ci, raw, xid, failed::MSG_UNSUP, "only flow-mods are bundled"),
            Err(e) => return self.error(ci, inner, &e, xid),
        };
        let Some(bundles) = self.bundles(ci) else { return };
        if !bundles.contains_key(&id) && bundles.len() >= MAX_BUNDLES {
            return self.bundle_error(ci, raw, xid, failed::OUT_OF_BUNDLES, "64 bundles open");
        }
        let b = bundles.entry(id).or_insert_with(|| Bundle { flags, ..Bundle::default() });
        if b.closed {
            return self.bundle_error(ci, raw, xid, failed::BUNDLE_CLOSED, "bundle closed");
        }
        if b.flags != flags {
            return self.bundle_error(ci, raw, xid, failed::BAD_FLAGS, "flags differ from the open's");
        }
        if b.messages.len() >= MAX_MESSAGES {
            return self.bundle_error(ci, raw, xid, failed::MSG_TOO_MANY, "100 000 messages in the bundle");
        }
        b.messages.push((xid, inner.to_vec(), PreparedFlowMod::new(fm)));
    }

    /// Applies bundle `b` all or nothing (see the module documentation);
    /// whether it was applied.
    fn commit(&mut self, ci: usize, b: Bundle) -> bool {
        let now = self.now_ns();
        let first_uid = self.next_uid;
        self.next_uid += b.messages.len() as u64;
        let mut trial = self.pool().view().clone();
        for (i, (xid, inner, fm)) in b.messages.iter().enumerate() {
            if let Err(e) = trial.prepared_flow_mod(fm, first_uid + i as u64, now) {
                self.error(ci, inner, &e, *xid);
                return false;
            }
        }
        drop(trial);
        self.tables_changed();
        if self.monitors > 0 {
            for (xid, _, fm) in &b.messages {
                self.monitor_flow_mod(&fm.fm, Some((ci, *xid)));
            }
        }
        let mods: Arc<Vec<PreparedFlowMod>> = Arc::new(b.messages.into_iter().map(|m| m.2).collect());
        let removed = self.pool().change(move |d: &mut OfSwitch, _| {
            let mut removed = Vec::new();
            for (i, fm) in mods.iter().enumerate() {
                // Each succeeded on the copy of the master: it does here.
                if let Ok(r) = d.prepared_flow_mod(fm, first_uid + i as u64, now) {
                    removed.extend(r);
                }
            }
            removed
        });
        self.report_removed(removed);
        true
    }
}
