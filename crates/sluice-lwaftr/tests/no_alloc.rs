//! The common paths allocate nothing per packet once warm: encapsulation,
//! decapsulation and hairpinning, tagged and untagged (a counting global
//! allocator around the plane's batches, counting per thread: the other
//! tests of this file run beside it).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::fs;
use std::path::Path;

use sluice_dataplane::DataPlane;
use sluice_lwaftr::conf::Config;
use sluice_lwaftr::{Lwaftr, Options, EXTERNAL, INTERNAL};
use sluice_ports::pcapfile::frames_of as pcap_frames;

struct Counting;

thread_local! {
    /// Allocations made by this thread (const-initialized: counting
    /// allocates nothing).
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

fn allocs() -> usize {
    ALLOCS.with(Cell::get)
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.with(|a| a.set(a.get() + 1));
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.with(|a| a.set(a.get() + 1));
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
        let before = allocs();
        for _ in 0..100 {
            lw.process_batch(port, &batch, &mut |_, _, _: &[u8]| sent += 1);
        }
        assert_eq!(allocs() - before, 0, "{case}: allocations on a warm path");
        assert_eq!(sent, 103 * frames.len(), "{case}");
    }
}

/// Records what the plane sends: each frame whole, and for a frame sent in
/// two parts, where its tail lies in memory.
#[derive(Default)]
struct Recorder {
    frames: Vec<Vec<u8>>,
    tails: Vec<(usize, usize)>,
}

impl sluice_dataplane::Emit for Recorder {
    fn emit(&mut self, _: usize, _: u32, frame: &[u8]) {
        self.frames.push(frame.to_vec());
    }

    fn emit_parts(&mut self, _: usize, _: u32, head: &[u8], tail: &[u8]) {
        self.frames.push([head, tail].concat());
        self.tails.push((tail.as_ptr() as usize, tail.len()));
    }
}

#[test]
fn encapsulation_and_decapsulation_send_the_received_packet_uncopied() {
    for (case, port, input, output, head) in [
        ("inet-bound-encap", EXTERNAL, "in-v4.pcap", "out-v6.pcap", 14 + 40 + 20),
        ("b4-bound-decap", INTERNAL, "in-v6.pcap", "out-v4.pcap", 14),
    ] {
        let dir = Path::new(CORPUS).join(case);
        let conf = Config::parse(&fs::read_to_string(dir.join("lwaftr.conf")).unwrap(), "lwaftr.conf").unwrap();
        let frames = pcap_frames(&fs::read(dir.join(input)).unwrap()).unwrap();
        let want = pcap_frames(&fs::read(dir.join(output)).unwrap()).unwrap();
        let batch: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
        let mut lw = Lwaftr::new(&conf, Options { frozen_clock: Some(0), ..Options::default() }).unwrap();
        let mut rec = Recorder::default();
        lw.process_batch_to(port, &batch, &mut rec);
        assert_eq!(rec.frames, want, "{case}: the frames sent");
        assert_eq!(rec.tails.len(), frames.len(), "{case}: every frame sent in two parts");
        for ((f, &(at, len)), out) in frames.iter().zip(&rec.tails).zip(&want) {
            // The tail is the input frame's own bytes from the end of the
            // headers the plane rewrote or took off.
            let from = f.as_ptr() as usize;
            assert!(at >= from && at + len == from + f.len(), "{case}: the tail is not the received frame's bytes");
            assert_eq!(len + head, out.len(), "{case}: head of {head} bytes");
        }
    }
}
