//! libFuzzer entry of target `load_json`; the body and what it checks:
//! `sluice_fuzzing::p4::load_json`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzzing::p4::load_json(data));
