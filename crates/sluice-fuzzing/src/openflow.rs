//! OpenFlow targets: the 1.3 and 1.0 decoders, and the OpenFlow switch's
//! fast paths (flow cache, native table code, native walk) against its
//! plain table walk.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use sluice_dataplane::DataPlane;
use sluice_ofswitch::code::{PipelineCode, TableCode, TableShape};
use sluice_ofswitch::switch::{encode_packet_out, PACKET_OUT_PORT};
use sluice_ofswitch::{OfSwitch, PortInfo};
use sluice_openflow::Message;

/// Target `openflow_decode`: any bytes decode as one OpenFlow 1.3 message
/// or fail, never panic; what decodes encodes and decodes again to the
/// same value.
pub fn decode13(data: &[u8]) {
    if let Ok((header, msg)) = sluice_openflow::decode(data) {
        let bytes = sluice_openflow::encode(&msg, header.version, header.xid);
        let (_, again) = sluice_openflow::decode(&bytes).expect("re-encoded message decodes");
        assert_eq!(again, msg);
    }
    // A flow monitor request's body (the ONF extension) either decodes to
    // what encodes back to a request that decodes the same, or is refused.
    if let Ok(m) = sluice_openflow::monitor::decode_monitor_request(data) {
        let again =
            sluice_openflow::monitor::decode_monitor_request(&sluice_openflow::monitor::encode_monitor_request(&m));
        assert_eq!(again.expect("re-encoded monitor request decodes"), m);
    }
}

/// Target `openflow10_decode`: the same for OpenFlow 1.0.
pub fn decode10(data: &[u8]) {
    use sluice_openflow::of10::{decode10, encode10};
    if let Ok((xid, msg)) = decode10(data) {
        let bytes = encode10(&msg, xid);
        let (xid2, again) = decode10(&bytes).expect("re-encoded message decodes");
        assert_eq!((xid2, again), (xid, msg));
    }
    // What a switch makes of a 1.0 request: the 1.3 message it means (or
    // an error), and that message's answer said in 1.0 again, never a panic.
    if let Ok((_, msg)) = sluice_openflow::translate10::request_from_10(data) {
        let _ = sluice_openflow::translate10::message_to_10(&msg);
        if let sluice_openflow::Message::FlowMod(fm) = &msg {
            let _ = sluice_openflow::translate10::match_to_10(&fm.matched);
        }
    }
}

/// The OpenFlow messages of an input, framed as on the wire (by their
/// header's length); a length below 8 or past the end ends the input.
pub fn messages(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut at = data;
    std::iter::from_fn(move || {
        if at.len() < 8 {
            return None;
        }
        let len = usize::from(u16::from_be_bytes([at[2], at[3]]));
        if len < 8 || len > at.len() {
            return None;
        }
        let (m, rest) = at.split_at(len);
        at = rest;
        Some(m)
    })
}

/// Four ports, as the OpenFlow switch's tests give it.
fn switch() -> OfSwitch {
    let ports: BTreeMap<u32, PortInfo> = (1..=4)
        .map(|p| (p, PortInfo { name: format!("p{p}"), hw_addr: [2, 0, 0, 0, 1, p as u8], config: 0, live: true }))
        .collect();
    OfSwitch::new(ports)
}

fn run(sw: &mut OfSwitch, port: u32, frame: &[u8]) -> Vec<(u32, Vec<u8>)> {
    let mut outs = Vec::new();
    sw.process_batch(port, &[frame], &mut |_, p, b: &[u8]| outs.push((p, b.to_vec())));
    outs
}

/// Native code compiled for earlier inputs: table code by the scan it was
/// compiled from, walks by the table shapes they fit. Inputs repeat each
/// other's flow-mods, and code compiled from the same scan or shapes is
/// the same code: this saves Cranelift compiles on most inputs. Bounded:
/// a map is emptied when full.
#[derive(Default)]
struct CodeCache {
    tables: HashMap<Vec<u64>, Arc<TableCode>>,
    walks: HashMap<Vec<TableShape>, Arc<PipelineCode>>,
}

const CODE_CACHE_ENTRIES: usize = 1024;

thread_local! {
    // Thread-local: native code is not `Send`.
    static CODE: RefCell<CodeCache> = RefCell::default();
}

/// Gives `sw` native code for every table (and the walk) that has some to take.
fn compile(sw: &mut OfSwitch) {
    CODE.with_borrow_mut(|cache| {
        for t in 0..sw.tables().len() {
            let Some(scan) = sw.tables()[t].wants_code() else { continue };
            let code = match cache.tables.get(scan) {
                Some(c) => c.clone(),
                None => {
                    let Ok(c) = TableCode::compile(scan) else { continue };
                    if cache.tables.len() >= CODE_CACHE_ENTRIES {
                        cache.tables.clear();
                    }
                    let c = Arc::new(c);
                    cache.tables.insert(scan.to_vec(), c.clone());
                    c
                }
            };
            assert!(sw.install_code(t, code), "code compiled for table {t}'s scan is taken");
        }
        if sw.pipeline_code().is_some() {
            return;
        }
        let shapes = sw.table_shapes();
        if let Some(walk) = cache.walks.get(&shapes) {
            assert!(sw.install_pipeline(walk.clone()), "a walk compiled for the same shapes is taken");
        } else if let Some(Ok(walk)) = sw.compile_pipeline() {
            assert!(sw.install_pipeline(walk.clone()), "the walk just compiled is taken");
            if cache.walks.len() >= CODE_CACHE_ENTRIES {
                cache.walks.clear();
            }
            cache.walks.insert(shapes, walk);
        }
    });
}

/// Target `openflow_differential`: OpenFlow 1.3 messages (see
/// [`messages`]) to two switches: flow-mods and group-mods change both
/// (both must accept or refuse each the same way); a packet-out runs its
/// frame through both, entering the pipeline at its `in_port` when it has
/// no actions, as a packet-out otherwise. One switch walks its tables
/// plainly; the other has its flow cache on and native code compiled for
/// its tables and walk before each frame. They must emit the same frames
/// and count the same. (Meters are left out: their buckets follow each
/// switch's own clock.)
pub fn differential(data: &[u8]) {
    differential_frames(data);
}

/// [`differential`], returning the number of frames each switch emitted.
pub fn differential_frames(data: &[u8]) -> usize {
    let mut emitted = 0;
    let mut plain = switch();
    plain.set_flow_cache(false);
    let mut fast = switch();
    fast.set_flow_cache(true);
    let mut uid = 0u64;
    for raw in messages(data).take(64) {
        let Ok((_, msg)) = sluice_openflow::decode(raw) else { continue };
        match msg {
            Message::FlowMod(fm) => {
                uid += 1;
                let a = plain.flow_mod(&fm, uid, 0).map(|removed| removed.len());
                let b = fast.flow_mod(&fm, uid, 0).map(|removed| removed.len());
                assert_eq!(
                    a, b,
                    "flow-mod {fm:?}: the plain switch (left) and the fast one (right) answer differently"
                );
            }
            Message::GroupMod(gm) => {
                let a = plain.group_mod(&gm).map(|removed| removed.len());
                let b = fast.group_mod(&gm).map(|removed| removed.len());
                assert_eq!(
                    a, b,
                    "group-mod {gm:?}: the plain switch (left) and the fast one (right) answer differently"
                );
            }
            Message::PacketOut(po) => {
                compile(&mut fast);
                let (port, frame) = if po.actions.is_empty() {
                    (po.in_port, po.data.clone())
                } else {
                    let actions = sluice_openflow::encode_actions(&po.actions);
                    (PACKET_OUT_PORT, encode_packet_out(po.in_port, &actions, &po.data))
                };
                let a = run(&mut plain, port, &frame);
                let b = run(&mut fast, port, &frame);
                assert_eq!(a, b, "frame {frame:02x?} on port {port:#x}: the plain switch (left) and the fast one (right) emit differently");
                emitted += a.len();
            }
            _ => {}
        }
    }
    // What a controller reads (the flow cache's pending counts included).
    let (a, b) = (plain.counters(), fast.counters());
    assert_eq!(a.tables, b.tables, "table lookups and matches");
    assert_eq!(a.flows, b.flows, "flow entries' counts");
    assert_eq!(a.groups, b.groups, "group and bucket counts");
    assert_eq!(a.ports, b.ports, "port counts");
    emitted
}
