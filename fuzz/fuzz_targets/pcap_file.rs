//! libFuzzer entry of target `pcap_file`; the body and what it checks:
//! `sluice_fuzzing::pcap::file`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzzing::pcap::file(data));
