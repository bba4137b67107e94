//! The common paths allocate nothing per packet once warm: encapsulation,
//! decapsulation and hairpinning, tagged and untagged (a counting global
//! allocator around the plane's batches).

use std::alloc::{GlobalAlloc, Layout, System};
use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use sluice_dataplane::DataPlane;
use sluice_lwaftr::conf::Config;
use sluice_lwaftr::{Lwaftr, Options, EXTERNAL, INTERNAL};
use sluice_ports::pcapfile::frames_of as pcap_frames;

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/conformance/lwaftr");

#[test]
fn warm_encap_decap_and_hairpin_do_not_allocate() {
    for (case, port, file) in [
        ("inet-bound-encap", EXTERNAL, "in-v4.pcap"),
        ("b4-bound-decap", INTERNAL, "in-v6.pcap"),
        ("hairpin-64pkts", INTERNAL, "in-v6.pcap"),
        ("inet-bound-encap-vlan", EXTERNAL, "in-v4.pcap"),
        ("b4-bound-decap-vlan", INTERNAL, "in-v6.pcap"),
    ] {
        let dir = Path::new(CORPUS).join(case);
        let conf = Config::parse(&fs::read_to_string(dir.join("lwaftr.conf")).unwrap(), "lwaftr.conf").unwrap();
        let frames = pcap_frames(&fs::read(dir.join(file)).unwrap()).unwrap();
        let batch: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
        let mut lw = Lwaftr::new(&conf, Options { frozen_clock: Some(0), ..Options::default() }).unwrap();
        let mut sent = 0usize;
        for _ in 0..3 {
            lw.process_batch(port, &batch, &mut |_, _, _: &[u8]| sent += 1);
        }
        let before = ALLOCS.load(Ordering::Relaxed);
        for _ in 0..100 {
            lw.process_batch(port, &batch, &mut |_, _, _: &[u8]| sent += 1);
        }
        assert_eq!(ALLOCS.load(Ordering::Relaxed) - before, 0, "{case}: allocations on a warm path");
        assert_eq!(sent, 103 * frames.len(), "{case}");
    }
}
