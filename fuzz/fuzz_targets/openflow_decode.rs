//! libFuzzer entry of target `openflow_decode`; the body and what it checks:
//! `sluice_fuzzing::openflow::decode13`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzzing::openflow::decode13(data));
