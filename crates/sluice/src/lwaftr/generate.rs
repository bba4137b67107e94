//! `sluice lwaftr generate-configuration IPV4 NUM_IPV4S BR_ADDRESS B4 PSID_LEN [SHIFT]
//! [--output FILE] [--pcap-v4 FILE --pcap-v6 FILE] [--packets N] [--packet-size B]`.
//!
//! Contract: the configuration of `sluice_lwaftr::conf::generate_configuration`
//! (Snabb's argument order and layout) as text, to FILE or standard
//! output. With the pcaps: N frames each (default one per softwire, at
//! most 2^20), frame `i` for softwire `(i x STRIDE) mod S` (a stride prime
//! to S, so that consecutive frames hit distant softwires and N >= S covers
//! every one): on the IPv4 side, UDP from the internet host 8.8.8.8:12345
//! to the softwire's address and a port of its port set; on the IPv6 side
//! the matching traffic back from the softwire's B4 to the br-address,
//! IPv4-in-IPv6, UDP from that port to 8.8.8.8:12345. Both are B bytes
//! (default 550, Snabb's canonical bench size) from the next-hop MAC to
//! the lwAFTR's MAC; every IPv4 frame is encapsulated and every IPv6 frame
//! decapsulated by the generated configuration.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

use sluice_lwaftr::conf::{generate_configuration, Config, NextHop, Softwire};

/// The arguments of `lwaftr generate-configuration`.
#[derive(Debug, Clone)]
pub struct GenerateArgs {
    pub ipv4: Ipv4Addr,
    pub num_ipv4s: u32,
    pub br_address: Ipv6Addr,
    pub b4: Ipv6Addr,
    pub psid_len: u8,
    pub shift: Option<u8>,
    pub output: Option<PathBuf>,
    /// IPv4 and IPv6 traffic files.
    pub pcaps: Option<(PathBuf, PathBuf)>,
    pub packets: Option<u64>,
    pub packet_size: usize,
}

/// Frames of one side.
pub type Frames = Vec<Vec<u8>>;

/// Most frames written per pcap by default.
pub const DEFAULT_MAX_PACKETS: u64 = 1 << 20;

/// The internet host of the generated traffic.
pub const PEER: Ipv4Addr = Ipv4Addr::new(8, 8, 8, 8);
/// Its UDP port.
pub const PEER_PORT: u16 = 12345;

/// Runs `lwaftr generate-configuration` (see the module documentation).
pub fn run(a: &GenerateArgs) -> Result<(), String> {
    let conf = generate_configuration(a.ipv4, a.num_ipv4s, a.br_address, a.b4, a.psid_len, a.shift)?;
    let text = conf.to_text();
    match &a.output {
        Some(p) => std::fs::write(p, &text).map_err(|e| format!("cannot write {}: {e}", p.display()))?,
        None => {
            use std::io::Write;
            std::io::stdout().write_all(text.as_bytes()).map_err(|e| format!("cannot write the configuration: {e}"))?
        }
    }
    if let Some((p4, p6)) = &a.pcaps {
        let n = a.packets.unwrap_or_else(|| (conf.binding_table.softwires.len() as u64).min(DEFAULT_MAX_PACKETS));
        let (v4, v6) = traffic(&conf, n as usize, a.packet_size)?;
        sluice_ports::pcapfile::write_pcap(p4, &v4)?;
        sluice_ports::pcapfile::write_pcap(p6, &v6)?;
    }
    Ok(())
}

/// A stride prime to `n` near `n` x 0.618 (consecutive frames far apart in the table).
fn stride(n: usize) -> usize {
    if n <= 2 {
        return 1;
    }
    let gcd = |mut a: usize, mut b: usize| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let mut s = (n as f64 * 0.618_033_988_7) as usize | 1;
    while gcd(s, n) != 1 {
        s += 2;
    }
    s
}

/// A port of softwire `sw`'s port set (the `i`-th frame's: the low bits vary).
pub fn port_of(sw: &Softwire, i: usize) -> u16 {
    let k = u32::from(sw.port_set.psid_length);
    let shift = u32::from(sw.port_set.shift());
    let low = if shift == 0 { 0 } else { (1024 + i as u32) & ((1u32 << shift) - 1) };
    let mut port = (u32::from(sw.psid) << shift) | low;
    if sw.port_set.reserved_ports_bit_count > 0 {
        // The ports whose top bits are all zero are reserved (in no set).
        port |= 1 << 15;
    }
    if port == 0 {
        // Port 0 is no UDP port; with a whole address (k = 0) any other is.
        port = if k == 0 { 1024 } else { port | 1 };
    }
    port as u16
}

fn checksum(b: &[u8]) -> u16 {
    let mut s: u32 = b.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// An IPv4 header + UDP header (checksum 0) + zero payload, `len` bytes in all.
fn ipv4_udp(len: usize, src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16) -> Vec<u8> {
    let mut p = vec![0u8; len];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&src.octets());
    p[16..20].copy_from_slice(&dst.octets());
    let c = checksum(&p[..20]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p[20..22].copy_from_slice(&sport.to_be_bytes());
    p[22..24].copy_from_slice(&dport.to_be_bytes());
    p[24..26].copy_from_slice(&((len - 20) as u16).to_be_bytes());
    p
}

/// `n` IPv4 frames and `n` IPv6 frames of `size` bytes spread over the
/// softwires of `conf` (see the module documentation).
pub fn traffic(conf: &Config, n: usize, size: usize) -> Result<(Frames, Frames), String> {
    let sws = &conf.binding_table.softwires;
    if sws.is_empty() && n > 0 {
        return Err("no softwires to send traffic to".into());
    }
    if size < 14 + 40 + 28 {
        return Err(format!("frames of {size} bytes cannot hold IPv6 + IPv4 + UDP headers"));
    }
    let q = conf.queue_settings(None, None)?;
    // The frames come from the next hop (its MAC when configured).
    let from = |nh: Option<[u8; 6]>| nh.unwrap_or([0x02, 0x99, 0x99, 0x99, 0x99, 0x99]);
    let ext_hop = from(match q.external.queue.next_hop {
        NextHop::Mac(m) => Some(m),
        _ => None,
    });
    let int_hop = from(match q.internal.queue.next_hop {
        NextHop::Mac(m) => Some(m),
        _ => None,
    });
    let (ext_mac, int_mac) = (q.external.queue.mac, q.internal.queue.mac);
    let step = stride(sws.len());
    let (mut v4, mut v6) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        let sw = &sws[(i * step) % sws.len()];
        let port = port_of(sw, i);
        let mut f = Vec::with_capacity(size);
        f.extend_from_slice(&ext_mac);
        f.extend_from_slice(&ext_hop);
        f.extend_from_slice(&[0x08, 0x00]);
        f.extend_from_slice(&ipv4_udp(size - 14, PEER, sw.ipv4, PEER_PORT, port));
        v4.push(f);
        let mut f = Vec::with_capacity(size);
        f.extend_from_slice(&int_mac);
        f.extend_from_slice(&int_hop);
        f.extend_from_slice(&[0x86, 0xdd]);
        let inner = ipv4_udp(size - 54, sw.ipv4, PEER, port, PEER_PORT);
        f.extend_from_slice(&[0x60, 0, 0, 0]);
        f.extend_from_slice(&(inner.len() as u16).to_be_bytes());
        f.extend_from_slice(&[4, 64]);
        f.extend_from_slice(&sw.b4_ipv6.octets());
        f.extend_from_slice(&sw.br_address.octets());
        f.extend_from_slice(&inner);
        v6.push(f);
    }
    Ok((v4, v6))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every generated frame is encapsulated or decapsulated by the
    /// generated configuration (none dropped, no ICMP), and enough frames
    /// touch every softwire.
    #[test]
    fn generated_traffic_crosses_the_generated_table() {
        for (psid_len, shift) in [(6, None), (0, None), (4, Some(10))] {
            let conf = generate_configuration(
                "193.5.1.100".parse().unwrap(),
                7,
                "fc00::100".parse().unwrap(),
                "fc00:1:2:3:4:5:0:7e".parse().unwrap(),
                psid_len,
                shift,
            )
            .unwrap();
            let n = conf.binding_table.softwires.len();
            let (v4, v6) = traffic(&conf, n, 550).unwrap();
            assert!(v4.iter().chain(&v6).all(|f| f.len() == 550));
            let r = sluice_lwaftr::check::check(&conf, &v4, &v6, false).unwrap();
            assert_eq!((r.out_v4.len(), r.out_v6.len()), (n, n), "{psid_len}: {:?}", r.counters);
            assert_eq!(r.counters.get("out-ipv6-packets"), Some(&(n as u64)), "{:?}", r.counters);
            assert_eq!(r.counters.get("out-ipv4-packets"), Some(&(n as u64)), "{:?}", r.counters);
            let mut seen = vec![false; n];
            for i in 0..n {
                seen[(i * stride(n)) % n] = true;
            }
            assert!(seen.iter().all(|&s| s), "frames touch every softwire");
        }
    }
}
