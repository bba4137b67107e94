//! libFuzzer entry of target `p4runtime_write`; the body and what it checks:
//! `sluice_fuzzing::control::p4runtime_write`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzzing::control::p4runtime_write(data));
