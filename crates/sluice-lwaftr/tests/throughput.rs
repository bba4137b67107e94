//! A rough single-core figure of the plane on Snabb's bench inputs (550-byte
//! IPv4 and IPv6 frames, the bench configuration): ignored by default, run
//! with `cargo test --release -p sluice-lwaftr --test throughput -- --ignored --nocapture`.

use std::fs;
use std::path::Path;
use std::time::Instant;

use sluice_dataplane::{DataPlane, BATCH};
use sluice_lwaftr::conf::Config;
use sluice_lwaftr::{Lwaftr, Options, EXTERNAL, INTERNAL};
use sluice_ports::pcapfile::frames_of as pcap_frames;

const BENCH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/conformance/lwaftr/bench");

#[test]
#[ignore]
fn encap_and_decap_rates() {
    let dir = Path::new(BENCH);
    let conf = Config::parse(&fs::read_to_string(dir.join("lwaftr.conf")).unwrap(), "lwaftr.conf").unwrap();
    let mut lw = Lwaftr::new(&conf, Options::default()).unwrap();
    for (port, file, what) in [(EXTERNAL, "ipv4-0550.pcap", "encap"), (INTERNAL, "ipv6-0550.pcap", "decap")] {
        let one = pcap_frames(&fs::read(dir.join(file)).unwrap()).unwrap().remove(0);
        let batch: Vec<&[u8]> = (0..BATCH).map(|_| one.as_slice()).collect();
        let rounds = 40_000;
        let mut out = 0u64;
        let t = Instant::now();
        for _ in 0..rounds {
            lw.process_batch(port, &batch, &mut |_, _, f: &[u8]| out += f.len() as u64);
        }
        let s = t.elapsed().as_secs_f64();
        let pkts = (rounds * BATCH) as f64;
        println!(
            "{what}: {:.2} Mpps ({:.2} Gbps of output frames), one core",
            pkts / s / 1e6,
            out as f64 * 8.0 / s / 1e9
        );
        assert_eq!(out / (rounds * BATCH) as u64, if port == EXTERNAL { 590 } else { 510 });
    }
}
