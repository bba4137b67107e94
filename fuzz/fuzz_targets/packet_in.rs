//! libFuzzer entry of target `packet_in`; the body and what it checks:
//! `sluice_fuzzing::nanomsg::packet_in`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzzing::nanomsg::packet_in(data));
