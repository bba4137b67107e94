//! Thrift runtime API calls from untrusted bytes: any byte string fed to the
//! server's connection loop gets replies or a closed connection, never a
//! panic, against the router example.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sluice_control::device::Device;

static DEVICE: OnceLock<Device> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let dev = DEVICE.get_or_init(|| {
        let json = include_str!("../../examples/router.json");
        Device::standalone(sluice_engine::load_switch(json).unwrap(), json.into())
    });
    let mut out = Vec::new();
    let _ = sluice_thrift::serve_stream(dev, data, &mut out);
});
