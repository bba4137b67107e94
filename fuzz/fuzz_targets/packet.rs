//! Any packet on port 1 of the router example (with routes) must be processed
//! without a panic, and grow by at most 512 bytes.
#![no_main]

use std::sync::{Mutex, OnceLock};

use libfuzzer_sys::fuzz_target;
use sluice_engine::Switch;

const ROUTES: &[&str] = &[
    "table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop 10.0.0.0/8 => 1",
    "table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop 10.1.0.0/16 => 2",
    "table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop 0.0.0.0/0 => 3",
    "table_add RouterIngress.ipv4_lpm RouterIngress.drop 192.168.0.0/16 =>",
    "table_add RouterIngress.ipv6_lpm RouterIngress.set_nexthop 2001:db8::/32 => 1",
    "table_add RouterIngress.ipv6_lpm RouterIngress.set_nexthop ::/0 => 2",
    "table_add RouterIngress.nexthop RouterIngress.forward 1 => 2 00:00:00:00:01:01 00:00:00:00:02:02",
    "table_add RouterIngress.nexthop RouterIngress.forward 2 => 3 00:00:00:00:01:01 00:00:00:00:03:03",
    "table_add RouterIngress.nexthop RouterIngress.forward 3 => 511 00:00:00:00:01:01 00:00:00:00:04:04",
];

fn switch() -> &'static Mutex<Switch> {
    static SW: OnceLock<Mutex<Switch>> = OnceLock::new();
    SW.get_or_init(|| {
        let mut sw = sluice_engine::load_switch(include_str!("../../examples/router.json")).expect("router.json loads");
        for r in ROUTES {
            sluice_control::cli::run(&mut sw, r).unwrap_or_else(|e| panic!("{r}: {e}"));
        }
        Mutex::new(sw)
    })
}

fuzz_target!(|data: &[u8]| {
    let mut sw = switch().lock().unwrap_or_else(|e| e.into_inner());
    sw.process(1, data, &mut |port, out| {
        assert!(out.len() <= data.len() + 512, "{} bytes out on port {port} for {} in", out.len(), data.len());
    });
});
