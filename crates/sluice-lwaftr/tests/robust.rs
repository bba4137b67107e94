//! Bad frames never panic: every corpus input, truncated at every length
//! and with bytes flipped, goes through every corpus configuration's
//! plane on both ports, in both modes.

use std::fs;
use std::path::Path;

use sluice_dataplane::DataPlane;
use sluice_lwaftr::conf::Config;
use sluice_lwaftr::{Lwaftr, Options};
use sluice_ports::pcapfile::frames_of as pcap_frames;

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/conformance/lwaftr");

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn mangled_frames_are_dropped_without_panic() {
    let root = Path::new(CORPUS);
    assert!(root.join("FORMAT.md").exists(), "the lwAFTR corpus is missing at {}", root.display());
    let mut inputs = Vec::new();
    let mut confs = Vec::new();
    for e in fs::read_dir(root).unwrap().filter_map(|e| e.ok()) {
        let d = e.path();
        if let Ok(text) = fs::read_to_string(d.join("lwaftr.conf")) {
            let name = e.file_name().to_string_lossy().into_owned();
            // One configuration per distinct conf text is enough.
            if !confs.iter().any(|(t, _): &(String, Config)| *t == text) {
                if let Ok(c) = Config::parse(&text, "lwaftr.conf") {
                    confs.push((text, c));
                }
            }
            for f in ["in-v4.pcap", "in-v6.pcap", "out-v4.pcap", "out-v6.pcap"] {
                if let Ok(b) = fs::read(d.join(f)) {
                    inputs.extend(pcap_frames(&b).unwrap_or_else(|e| panic!("{name}/{f}: {e}")));
                }
            }
        }
    }
    inputs.sort();
    inputs.dedup();
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let mut mangled: Vec<Vec<u8>> = Vec::new();
    for f in &inputs {
        for cut in (0..f.len()).step_by(3) {
            mangled.push(f[..cut].to_vec());
        }
        for _ in 0..24 {
            let mut g = f.clone();
            for _ in 0..1 + rng.next() % 4 {
                let at = (rng.next() as usize) % g.len().max(1);
                if let Some(b) = g.get_mut(at) {
                    *b = rng.next() as u8;
                }
            }
            mangled.push(g);
        }
    }
    for (_, conf) in &confs {
        for on_a_stick in [false, true] {
            let opts = Options { on_a_stick, deterministic_ids: true, frozen_clock: Some(0) };
            let mut lw = Lwaftr::new(conf, opts).unwrap();
            lw.tick(0, &mut |_: u32, _: &[u8]| {});
            for port in [0u32, 1, 2] {
                for chunk in mangled.chunks(128) {
                    let refs: Vec<&[u8]> = chunk.iter().map(|f| f.as_slice()).collect();
                    lw.process_batch(port, &refs, &mut |_, _, f: &[u8]| assert!(f.len() >= 14));
                }
            }
            assert!(lw.stats().received > 0);
        }
    }
}
