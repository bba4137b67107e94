//! libFuzzer entry of target `lwaftr_plane`; the body and what it checks:
//! `sluice_fuzzing::lwaftr::plane`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzzing::lwaftr::plane(data));
