//! Any text must load or fail with a non-empty error, never panic; a program
//! that loads must then run packets without a panic (unless it has jumps: a
//! mutated jump target is a legitimate endless loop).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match sluice_engine::load_switch(text) {
        Err(e) => assert!(!e.to_string().is_empty(), "empty error message"),
        Ok(mut sw) => {
            if text.contains("\"_jump") {
                return;
            }
            let mut pkt: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(37)).collect();
            pkt[12..14].copy_from_slice(&[0x08, 0x00]);
            for port in [0, 1] {
                sw.process(port, &pkt, &mut |_, _| {});
            }
        }
    }
});
