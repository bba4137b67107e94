//! `Filter` against libpcap's own interpreter (`pcap_offline_filter`) on the
//! frames of the lwAFTR conformance corpus and on random, truncated and
//! bit-flipped frames: the verdicts must be the same, for plain frames and
//! for tagged frames read through the untagged view.

use std::collections::HashSet;
use std::path::Path;

use sluice_lwaftr::filter::Filter;

const EXPRESSIONS: &[&str] = &[
    "ip",
    "ip6",
    "len < 0",
    "arp",
    "tcp",
    "udp port 53",
    // libpcap wants `net` before a prefix ("ip src 10.0.0.0/8" is an error).
    "ip src net 10.0.0.0/8",
    "icmp6",
    "vlan",
    "ip[8] > 10",
    "ip6 and udp",
    "not ip",
    "ip and len > 100",
    "tcp[tcpflags] & tcp-syn != 0",
    "ether dst ff:ff:ff:ff:ff:ff",
    "portrange 1000-2000",
    // More shapes: indirect loads past variable headers, fragments,
    // arithmetic, IPv6 addresses, the extension-header forms libpcap emits.
    "",
    "tcp dst port 80 or udp src port 53",
    "ip[6:2] & 0x1fff != 0",
    "ip[0] & 0xf > 5",
    "ip proto 4 or ip6 proto 4",
    "ip6 dst net 127::/16",
    "ip6 src host 8:9:a:b:c:d:e:f",
    "icmp[icmptype] = icmp-echo",
    "icmp6 and ip6[40] = 135",
    "ether[0] & 1 != 0",
    "ether[10:4] = 0x12120800",
    "udp[8:4] = 0 or tcp[13] = 2",
    "ip[2:2] * 2 - len > 4 and ip[2:2] / 3 % 7 != 1",
    "ip[1] ^ 0x89 = 0 or (ip[9] << 2) >> 1 = 12",
    "ip host 178.79.150.233 and not ip broadcast",
    "vlan and ip",
    "len <= 64 or greater 1400",
    "arp and arp[7] = 1",
    // Division and modulo by a frame byte (zero rejects), computed offsets.
    "ip[2:2] / ip[3] > 0 or ip[2:2] % ip[8] = 1",
    "ip[ip[0] & 0xf] = 1 or ether[ip[9] * 1000] = 0",
    "ip[ip[0] & 0xf:2] - ip6[ip6[6]:4] < 256",
];

fn corpus_frames() -> Vec<Vec<u8>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/lwaftr");
    let mut files = Vec::new();
    for case in std::fs::read_dir(&root).expect("the lwAFTR conformance corpus (../shared beside the repo)") {
        let case = case.unwrap().path();
        if !case.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&case).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|e| e == "pcap") {
                files.push(f);
            }
        }
    }
    files.sort();
    assert!(files.len() > 100, "only {} pcaps under {}", files.len(), root.display());
    let mut seen = HashSet::new();
    let mut frames = Vec::new();
    for f in files {
        let mut cap = pcap::Capture::from_file(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        while let Ok(p) = cap.next_packet() {
            if seen.insert(p.data.to_vec()) {
                frames.push(p.data.to_vec());
            }
        }
    }
    frames
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Random frames whose headers often look like what the filters test.
fn random_frames(rng: &mut Rng, count: usize) -> Vec<Vec<u8>> {
    const ETHERTYPES: [u16; 6] = [0x0800, 0x86dd, 0x0806, 0x8100, 0x88a8, 0x1234];
    const PROTOS: [u8; 9] = [6, 17, 1, 58, 44, 0, 60, 43, 4];
    (0..count)
        .map(|_| {
            let len = rng.below(200);
            let mut f: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            if len >= 14 && rng.below(4) != 0 {
                let et = ETHERTYPES[rng.below(ETHERTYPES.len())];
                f[12..14].copy_from_slice(&et.to_be_bytes());
                let at = match et {
                    0x0800 => 23,
                    0x86dd => 20,
                    _ => 0,
                };
                if at != 0 && len > at {
                    f[at] = PROTOS[rng.below(PROTOS.len())];
                    if et == 0x0800 && rng.below(2) == 0 {
                        f[14] = 0x45;
                        f[20] &= 0xa0;
                        f[21] = 0;
                    }
                    if et == 0x86dd && len > 54 && f[20] == 44 {
                        f[54] = PROTOS[rng.below(PROTOS.len())];
                    }
                    // Ports tests look for, where IHL 5 or a bare IPv6 header put them.
                    let l4 = if et == 0x0800 { 34 } else { 54 };
                    for at in [l4, l4 + 2] {
                        if len >= at + 2 && rng.below(2) == 0 {
                            let port = [53u16, 80, 1000, 1500, 2000, 2001][rng.below(6)];
                            f[at..at + 2].copy_from_slice(&port.to_be_bytes());
                        }
                    }
                    if et == 0x0800 && len > 26 && rng.below(3) == 0 {
                        f[26] = 10;
                    }
                }
            }
            f
        })
        .collect()
}

/// Truncations (every length up to 96, and one byte short) and bit flips in
/// the first 80 bytes of each frame.
fn mutations(rng: &mut Rng, frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for f in frames {
        for n in 0..f.len().min(97) {
            out.push(f[..n].to_vec());
        }
        if f.len() > 97 {
            out.push(f[..f.len() - 1].to_vec());
        }
        for _ in 0..4 {
            let mut g = f.clone();
            if g.is_empty() {
                continue;
            }
            for _ in 0..1 + rng.below(3) {
                let at = rng.below(g.len().min(80));
                g[at] ^= 1 << rng.below(8);
            }
            out.push(g);
        }
    }
    out
}

/// `frame` with `tag` bytes removed at offset 12 (what the untagged view
/// shows; a frame too short for the tag keeps its first 12 bytes at most).
fn strip(frame: &[u8], tag: usize) -> Vec<u8> {
    if frame.len() >= 12 + tag {
        let mut v = frame[..12].to_vec();
        v.extend_from_slice(&frame[12 + tag..]);
        v
    } else {
        frame[..frame.len().min(12)].to_vec()
    }
}

fn libpcap(expr: &str) -> pcap::BpfProgram {
    pcap::Capture::dead(pcap::Linktype::ETHERNET).unwrap().compile(expr, true).unwrap()
}

#[test]
fn same_verdicts_as_libpcap() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let corpus = corpus_frames();
    assert!(corpus.len() > 150, "{} frames", corpus.len());
    let mut frames = corpus.clone();
    frames.extend(random_frames(&mut rng, 4000));
    let mutated = mutations(&mut rng, &frames);
    frames.extend(mutated);
    let tagged: Vec<&Vec<u8>> = corpus.iter().filter(|f| f.len() >= 16 && f[12..14] == [0x81, 0x00]).collect();
    assert!(tagged.len() > 50, "{} tagged frames", tagged.len());

    for expr in EXPRESSIONS {
        let ours = Filter::compile(expr).unwrap_or_else(|e| panic!("{e}"));
        let theirs = libpcap(expr);
        let mut hits = 0;
        for f in &frames {
            let want = theirs.filter(f);
            assert_eq!(ours.matches(f), want, "{expr:?} on {f:02x?}");
            hits += usize::from(want);
        }
        // The 802.1Q frames of the corpus seen through the untagged view.
        for f in &tagged {
            let want = theirs.filter(&strip(f, 4));
            assert_eq!(ours.matches_untagged_view(f, 4), want, "{expr:?} untagged view of {f:02x?}");
        }
        // The view's mapping on every frame, with one and two tags.
        for f in frames.iter().step_by(3) {
            for tag in [4, 8] {
                let want = theirs.filter(&strip(f, tag));
                assert_eq!(ours.matches_untagged_view(f, tag), want, "{expr:?} view (tag {tag}) of {f:02x?}");
            }
            assert_eq!(ours.matches_untagged_view(f, 0), ours.matches(f));
        }
        eprintln!("{expr:?}: {hits} of {} frames match", frames.len());
    }
}

#[test]
fn bad_expressions_carry_libpcaps_message() {
    for expr in ["ip and", "ip src 10.0.0.0/8", "tcp port http2x", "ether host 1:2:3", "ip[100000000000]", "foo"] {
        let text = match pcap::Capture::dead(pcap::Linktype::ETHERNET).unwrap().compile(expr, true) {
            Err(pcap::Error::PcapError(text)) => text,
            other => panic!("{expr:?}: libpcap gave {:?}", other.map(|_| ())),
        };
        let err = Filter::compile(expr).unwrap_err();
        assert!(err.contains(&text) && err.contains(expr), "{expr:?}: {err} (libpcap: {text})");
    }
}

#[test]
fn clones_run_on_other_threads() {
    let filter = Filter::compile("ip6 and udp").unwrap();
    let frames = corpus_frames();
    let theirs = libpcap("ip6 and udp");
    let want: Vec<bool> = frames.iter().map(|f| theirs.filter(f)).collect();
    let frames = std::sync::Arc::new(frames);
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let (filter, frames) = (filter.clone(), frames.clone());
            std::thread::spawn(move || frames.iter().map(|f| filter.matches(f)).collect::<Vec<bool>>())
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), want);
    }
}
