//! libFuzzer entry of target `packet`; the body and what it checks:
//! `sluice_fuzzing::p4::packet`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzzing::p4::packet(data));
