//! Any command lines against the edge example must answer or fail with a
//! non-empty error, never panic; then packets run over whatever got installed.
//! Each input is up to 16 lines (one command each) on the switch as freshly
//! loaded (its state is reset), so that a crash reproduces from its input alone.
#![no_main]

use std::sync::{Mutex, OnceLock};

use libfuzzer_sys::fuzz_target;
use sluice_control::cli;
use sluice_engine::Switch;

/// An IPv4/TCP packet that reaches the acl, sources and routes tables.
const PACKET: &[u8] = &[
    0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x08, 0x00, // ethernet
    0x45, 0x00, 0x00, 0x28, 0x00, 0x01, 0x00, 0x00, 0x40, 0x06, 0x00, 0x00, // ipv4 ...
    0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x01, 0x02, // ... src, dst
    0x04, 0xd2, 0x00, 0x50, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x50, 0x02, 0x20, 0x00, 0x00, 0x00, 0x00,
    0x00, // tcp
];

/// The edge example (compiled once; its state is reset for every input).
fn switch() -> &'static Mutex<Switch> {
    static SW: OnceLock<Mutex<Switch>> = OnceLock::new();
    SW.get_or_init(|| {
        let sw = sluice_engine::load_switch(include_str!("../../examples/edge.json")).expect("edge.json loads");
        Mutex::new(sw)
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut guard = switch().lock().unwrap_or_else(|e| e.into_inner());
    let sw = &mut *guard;
    sw.reset_state().expect("the state as loaded builds again");
    for line in text.lines().take(16) {
        if let Err(e) = cli::run(sw, line) {
            assert!(!e.to_string().is_empty(), "empty error for {line:?}");
        }
    }
    for port in [1, 255] {
        // Port 255 is the CPU port: a packet_out header comes first.
        let mut pkt = if port == 255 { vec![0x00, 0x80] } else { Vec::new() };
        pkt.extend_from_slice(PACKET);
        sw.process(port, &pkt, &mut |_, _| {});
    }
});
