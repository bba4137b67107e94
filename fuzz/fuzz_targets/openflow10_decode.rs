//! libFuzzer entry of target `openflow10_decode`; the body and what it checks:
//! `sluice_fuzzing::openflow::decode10`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzzing::openflow::decode10(data));
