//! Control-plane targets: bmv2's Thrift runtime API and P4Runtime, each
//! through the server's own request handlers (no socket).

use std::sync::{Arc, Mutex, OnceLock};

use prost::Message;
use sluice_control::device::Device;
use sluice_engine::runtime::SavedState;
use sluice_engine::Switch;
use sluice_p4runtime::pipeline::{Ids, Pipeline};
use sluice_p4runtime::proto::p4::config::v1 as info;
use sluice_p4runtime::proto::p4::v1 as p4;
use sluice_p4runtime::{stream, Server};

const ROUTER: &str = include_str!("../../../examples/router.json");

/// Target `thrift_call`: any bytes fed to the Thrift server's connection
/// loop get replies or a closed connection, never a panic, against the
/// router example as loaded (each input starts from it: a program an
/// earlier input swapped in is swapped out).
pub fn thrift_call(data: &[u8]) {
    static DEVICE: OnceLock<(Device, SavedState)> = OnceLock::new();
    let (dev, loaded) = DEVICE.get_or_init(|| {
        let sw = sluice_engine::load_switch(ROUTER).expect("the router example loads");
        let loaded = sw.save_state();
        (Device::standalone(sw, ROUTER.into()), loaded)
    });
    if &*dev.program().json == ROUTER {
        dev.pool().alone().expect("a standalone device").restore_state(&loaded.unshared_copy());
    } else {
        let sw = sluice_engine::load_switch(ROUTER).expect("the router example loads");
        dev.install(sw, ROUTER.into()).expect("the router example installs");
    }
    let mut out = Vec::new();
    let _ = sluice_thrift::serve_stream(dev, data, &mut out);
}

/// A program P4Runtime clients drive, compiled once.
struct P4rtProgram {
    json: Arc<str>,
    /// Not `Sync` (its native code): replicas are made under the lock.
    switch: Mutex<Switch>,
    pipeline: Arc<Pipeline>,
}

/// The edge example (packet-in and packet-out, an action profile, a
/// meter, a register) and the l2_learning example (a digest, a direct
/// counter), with the P4Infos p4c gave them (`fuzz/inputs/`).
fn p4rt_programs() -> &'static [P4rtProgram] {
    static P: OnceLock<Vec<P4rtProgram>> = OnceLock::new();
    P.get_or_init(|| {
        let programs: [(&str, &[u8]); 2] = [
            (include_str!("../../../examples/edge.json"), include_bytes!("../../../fuzz/inputs/edge.p4info.binpb")),
            (
                include_str!("../../../examples/l2_learning.json"),
                include_bytes!("../../../fuzz/inputs/l2_learning.p4info.binpb"),
            ),
        ];
        programs
            .into_iter()
            .map(|(json, p4info)| {
                let mut switch = sluice_engine::load_switch(json).expect("the example loads");
                // Interpreted: a replica then needs no native code generated
                // (the control plane's handlers are the same either way).
                switch.set_mode(sluice_engine::ExecMode::Interpreted).expect("interpreted");
                let p4info = info::P4Info::decode(p4info).expect("the P4Info decodes");
                let ids = Ids::build(&p4info, &switch).expect("the P4Info fits the program");
                let json: Arc<str> = json.into();
                let pipeline = Arc::new(Pipeline { p4info, json: json.clone(), cookie: None, ids });
                P4rtProgram { json, switch: Mutex::new(switch), pipeline }
            })
            .collect()
    })
}

/// An error a client reads must say something.
fn said(s: &tonic::Status) {
    assert!(!s.message().is_empty(), "a {:?} without a message", s.code());
}

/// The requests of a P4Runtime input: records of `[kind, length (2 bytes,
/// big-endian), protobuf bytes]`; the last takes what is left when its
/// length runs past the end. Kinds (modulo 6): 0 and 1 a
/// StreamMessageRequest of client 1 or 2, 2 a WriteRequest, 3 a
/// ReadRequest, 4 a GetForwardingPipelineConfigRequest, 5 client 1's
/// stream closes.
pub fn p4runtime_records(data: &[u8]) -> Vec<(u8, &[u8])> {
    let mut out = Vec::new();
    let mut at = data;
    while at.len() >= 3 && out.len() < 32 {
        let len = usize::from(u16::from_be_bytes([at[1], at[2]]));
        let end = (3 + len).min(at.len());
        out.push((at[0] % 6, &at[3..end]));
        at = &at[end..];
    }
    out
}

/// Target `p4runtime_write`: the first byte picks the program; the rest
/// is requests (see [`p4runtime_records`]) to a fresh server whose
/// pipeline is set, through its Write, Read, GetForwardingPipelineConfig
/// and StreamChannel handlers. Every request is answered, every refusal
/// has a message, no stream's queue grows past its bound, and a Read
/// after the requests answers.
pub fn p4runtime_write(data: &[u8]) {
    p4runtime_session(data);
}

/// [`p4runtime_write`], returning the number of table entries the final
/// Read found (what the requests left installed).
pub fn p4runtime_session(data: &[u8]) -> usize {
    let Some((&pick, rest)) = data.split_first() else { return 0 };
    let programs = p4rt_programs();
    let prog = &programs[usize::from(pick) % programs.len()];
    let sw = prog.switch.lock().unwrap_or_else(|e| e.into_inner()).replica().expect("a replica of a loaded program");
    let dev = Arc::new(Device::standalone(sw, prog.json.clone()));
    let server = Server::with_pipeline(dev, prog.pipeline.clone()).expect("the device runs the pipeline");
    let mut clients = Vec::new();
    for _ in 0..2 {
        let (tx, rx) = tokio::sync::mpsc::channel(stream::STREAM_QUEUE);
        clients.push((stream::new_stream(&server), tx, rx, true));
    }
    for (kind, bytes) in p4runtime_records(rest) {
        match kind {
            0 | 1 => {
                let Ok(m) = p4::StreamMessageRequest::decode(bytes) else { continue };
                let (id, tx, _, open) = &mut clients[usize::from(kind)];
                if *open && !stream::handle(&server, *id, tx, m) {
                    stream::close(&server, *id);
                    *open = false;
                }
            }
            2 => {
                let Ok(m) = p4::WriteRequest::decode(bytes) else { continue };
                if let Err(s) = server.write(m) {
                    said(&s);
                }
            }
            3 => {
                let Ok(m) = p4::ReadRequest::decode(bytes) else { continue };
                if let Err(s) = server.read(m) {
                    said(&s);
                }
            }
            4 => {
                let Ok(m) = p4::GetForwardingPipelineConfigRequest::decode(bytes) else { continue };
                if let Err(s) = server.get_pipeline(m) {
                    said(&s);
                }
            }
            _ => {
                let (id, _, _, open) = &mut clients[0];
                if *open {
                    stream::close(&server, *id);
                    *open = false;
                }
            }
        }
        for (_, _, rx, _) in &mut clients {
            let mut queued = 0;
            while let Ok(m) = rx.try_recv() {
                if let Err(s) = m {
                    said(&s);
                }
                queued += 1;
            }
            assert!(queued <= stream::STREAM_QUEUE, "{queued} messages queued toward one stream");
        }
    }
    let all = p4::ReadRequest {
        device_id: server.dev.info.device_id,
        entities: vec![p4::Entity { entity: Some(p4::entity::Entity::TableEntry(Default::default())) }],
        ..Default::default()
    };
    server.read(all).expect("reading every table entry after the requests").entities.len()
}
