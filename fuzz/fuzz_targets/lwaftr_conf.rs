//! Any text must read as an lwAFTR configuration or fail with a located,
//! non-empty error, never panic; a configuration that reads must write back
//! to a text that reads as the same configuration.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_lwaftr::conf::Config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match Config::parse(text, "fuzz.conf") {
        Err(e) => {
            assert!(!e.message.is_empty(), "empty error message");
            assert!(e.line >= 1 && e.col >= 1 && e.path.starts_with('/'), "unlocated error {e}");
        }
        Ok(c) => {
            let out = c.to_text();
            match Config::parse(&out, "written.conf") {
                Ok(back) => assert_eq!(back, c, "written back differently:\n{out}"),
                Err(e) => panic!("the written text does not read: {e}\n{out}"),
            }
        }
    }
});
