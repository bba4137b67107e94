//! `sluice soak`: a data plane forwarding generated traffic on every
//! worker, from memory, as fast as they go, while a control thread
//! rewrites its entries at a fixed rate through the same pool changes the
//! control planes use; then checks that no packet was lost or
//! mis-forwarded and that memory did not grow.
//!
//! Each data plane has 16 keys (next hops, softwires) whose entries
//! alternate between two versions:
//! - the P4 router (`--data-plane router`): next hop `n`'s version `v`
//!   sends to port `n % 4 + 4v` with source MAC `02:00:00:00:v:n` and
//!   destination MAC `00:5e:00:00:v:n`; a port of one version with a MAC
//!   of the other is a torn update;
//! - the lwAFTR (`--data-plane lwaftr`): softwire `n` (198.18.0.n, the
//!   whole address) has B4 address `2001:db8:v::n` in version `v`; an
//!   update removes the softwire and adds it back with the other B4
//!   address, in one change;
//! - the OpenFlow switch (`--data-plane openflow`): route `n`'s flow (the
//!   router's first 16 /24s) rewrites the MACs and sends out as the
//!   router's next hop `n` does, version `v` on OpenFlow port
//!   `n % 4 + 4v + 1`; an update is a MODIFY_STRICT flow-mod.
//!
//! Every packet carries, at the end of its payload, the key its entry is
//! under and a sequence number (per worker, rewritten each time the packet
//! is sent again). A packet is mis-forwarded when it leaves other than as
//! one whole version of its key's entry, or out of sequence, or when two
//! packets of one batch under the same key leave with different versions
//! (an update must land between batches, never inside one). Every packet
//! handed to a worker must leave (neither data plane drops any of this
//! traffic).

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_control::{cli, run_command};
use sluice_dataplane::workers::{flow_hash, Pool, WorkerIo};
use sluice_dataplane::DataPlane;
use sluice_engine::Switch;
use sluice_lwaftr::conf::generate_configuration;
use sluice_lwaftr::{Lwaftr, Options, EXTERNAL, INTERNAL};
use sluice_node::{Control, Session};

use crate::p4::bench::{router_commands, router_traffic, RouteLayout, ROUTER_JSON};

/// The data planes `sluice soak` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SoakPlane {
    /// The P4 router example, its next hops rewritten.
    Router,
    /// The lwAFTR, its softwires' B4 addresses rewritten.
    Lwaftr,
    /// The OpenFlow switch, its route flows rewritten by flow-mods.
    Openflow,
}

/// What `sluice soak` runs.
#[derive(Debug, Clone)]
pub struct SoakArgs {
    pub plane: SoakPlane,
    pub duration: f64,
    pub workers: usize,
    pub updates_per_second: u32,
    /// The router's /24 routes over its 16 next hops.
    pub routes: u32,
    /// The router compiled to native code, or interpreted (`sluice --interpret`).
    pub mode: sluice_engine::ExecMode,
}

/// What a soak run saw.
#[derive(Debug, Clone, Default)]
pub struct SoakReport {
    pub seconds: f64,
    pub packets_in: u64,
    pub packets_out: u64,
    pub misforwarded: u64,
    pub updates: u64,
    /// Resident memory after the first tenth of the run, and at the end (KiB).
    pub rss_kib: (u64, u64),
}

impl SoakReport {
    /// Packets handed to the workers that did not leave.
    pub fn lost(&self) -> u64 {
        self.packets_in.saturating_sub(self.packets_out)
    }
}

/// Counters the workers share: packets in, out, mis-forwarded.
type Counts = Arc<[AtomicU64; 3]>;

/// Bytes at the end of each frame: the key its entry is under (1-16),
/// then the sequence number (8 bytes, big-endian).
const TRAILER: usize = 9;

/// The version (0 or 1) of key `want`'s entry that `(port, frame)` left
/// as whole, or `None`.
type VersionOf = fn(u32, &[u8], u8) -> Option<u8>;

struct SoakIo {
    traffic: Vec<Vec<u8>>,
    next: usize,
    /// The port the traffic arrives on.
    in_port: u32,
    version_of: VersionOf,
    /// The next sequence number this worker gives a packet.
    seq: u64,
    stop: Arc<AtomicBool>,
    counts: Counts,
}

/// The key and sequence number a frame carries.
fn trailer(frame: &[u8]) -> Option<(u8, u64)> {
    let t = frame.len().checked_sub(TRAILER).map(|at| &frame[at..])?;
    Some((t[0], u64::from_be_bytes(t[1..].try_into().ok()?)))
}

impl<D: DataPlane> WorkerIo<D> for SoakIo {
    fn run_batch(&mut self, dp: &mut D) -> bool {
        if self.stop.load(Ordering::Relaxed) {
            return false;
        }
        let end = (self.next + 32).min(self.traffic.len());
        let first = self.seq;
        for p in &mut self.traffic[self.next..end] {
            let at = p.len() - 8;
            p[at..].copy_from_slice(&self.seq.to_be_bytes());
            self.seq += 1;
        }
        let frames: Vec<&[u8]> = self.traffic[self.next..end].iter().map(|p| p.as_slice()).collect();
        self.next = if end == self.traffic.len() { 0 } else { end };
        let (mut out, mut bad) = (0u64, 0u64);
        // The version each key had for this batch, from its first packet.
        let mut seen = [None::<u8>; 17];
        let version_of = self.version_of;
        dp.process_batch(self.in_port, &frames, &mut |_, port, bytes: &[u8]| {
            let ok = match trailer(bytes) {
                Some((n, seq)) if seq == first + out && (1..=16).contains(&n) => match version_of(port, bytes, n) {
                    Some(v) => *seen[usize::from(n)].get_or_insert(v) == v,
                    None => false,
                },
                _ => false,
            };
            out += 1;
            bad += u64::from(!ok);
        });
        self.counts[0].fetch_add(frames.len() as u64, Ordering::Relaxed);
        self.counts[1].fetch_add(out, Ordering::Relaxed);
        self.counts[2].fetch_add(bad, Ordering::Relaxed);
        true
    }
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix("VmRSS:").and_then(|v| v.split_whitespace().next()?.parse().ok()))
        })
        .unwrap_or(0)
}

/// Runs `master` on the workers over `traffic` (frames with their key
/// written in the trailer), while `update(pool, key, version)` gives keys
/// their other version at the rate asked.
fn run_soak<D: DataPlane>(
    a: &SoakArgs,
    master: D,
    traffic: Vec<Vec<u8>>,
    in_port: u32,
    version_of: VersionOf,
    mut update: impl FnMut(&mut Session<'_, D>, u8, u8) -> Result<(), String>,
) -> Result<SoakReport, String> {
    let workers = a.workers.max(1);
    let mut shares = vec![Vec::new(); workers];
    for p in traffic {
        shares[flow_hash(&p) as usize % workers].push(p);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let counts: Counts = Arc::new(Default::default());
    let ios: Vec<Box<dyn WorkerIo<D>>> = shares
        .into_iter()
        .map(|t| {
            Box::new(SoakIo {
                traffic: t,
                next: 0,
                in_port,
                version_of,
                seq: 0,
                stop: stop.clone(),
                counts: counts.clone(),
            }) as Box<_>
        })
        .collect();
    let control = Control::new(Pool::start(master, ios)?, "soak", None);
    let started = Instant::now();
    let run = Duration::from_secs_f64(a.duration.max(0.1));
    let (mut updates, mut versions) = (0u64, [0u8; 17]);
    let mut rss_start = None;
    // Updates are paced by the clock: by time t, t x rate of them (as far as the pool keeps up).
    let rate = f64::from(a.updates_per_second);
    while started.elapsed() < run {
        let due = (started.elapsed().as_secs_f64() * rate) as u64;
        // Behind schedule, the run still ends on time.
        while updates < due && started.elapsed() < run {
            let n = (updates % 16) as u8 + 1;
            versions[usize::from(n)] ^= 1;
            update(&mut control.lock(), n, versions[usize::from(n)]).map_err(|e| format!("update {updates}: {e}"))?;
            updates += 1;
        }
        if rss_start.is_none() && started.elapsed() >= run / 10 {
            rss_start = Some(rss_kib());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    control.lock().flush();
    stop.store(true, Ordering::Relaxed);
    let seconds = started.elapsed().as_secs_f64();
    control.lock().stop_workers();
    let c: Vec<u64> = counts.iter().map(|x| x.load(Ordering::Relaxed)).collect();
    Ok(SoakReport {
        seconds,
        packets_in: c[0],
        packets_out: c[1],
        misforwarded: c[2],
        updates,
        rss_kib: (rss_start.unwrap_or_else(rss_kib), rss_kib()),
    })
}

// ---------------------------------------------------------------- the router

/// The version of next hop `want` that `(port, frame)` left as whole.
fn router_version(port: u32, frame: &[u8], want: u8) -> Option<u8> {
    if frame.len() < 12 {
        return None;
    }
    let (v, n) = (frame[4], frame[5]);
    let whole = v < 2
        && n == want
        && frame[..4] == [0, 0x5e, 0, 0]
        && frame[6..12] == [2, 0, 0, 0, v, n]
        && port == u32::from(n) % 4 + 4 * u32::from(v);
    whole.then_some(v)
}

/// The `table_modify` that gives next hop `n` (its entry handle `n - 1`) version `v`.
fn version_command(n: u8, v: u8) -> String {
    format!(
        "table_modify RouterIngress.nexthop RouterIngress.forward {} {} 02:00:00:00:{v:02x}:{n:02x} 00:5e:00:00:{v:02x}:{n:02x}",
        n - 1,
        u32::from(n) % 4 + 4 * u32::from(v)
    )
}

fn soak_router(a: &SoakArgs) -> Result<SoakReport, String> {
    let mut master = sluice_engine::load_switch(ROUTER_JSON).map_err(|e| e.to_string())?;
    master.set_mode(a.mode).map_err(|e| e.to_string())?;
    let layout = RouteLayout::Consecutive;
    if crate::apply_command_text(&mut master, &router_commands(a.routes, layout), "built-in routes", false) > 0 {
        return Err("the built-in routes failed to load".into());
    }
    for n in 1..=16 {
        cli::run(&mut master, &version_command(n, 0)).map_err(|e| format!("next hop {n}: {e}"))?;
    }
    // Each frame's route (its /24) and so its next hop (route r % 16 + 1).
    let next_hop: std::collections::HashMap<u32, u8> =
        (0..a.routes.max(1)).map(|r| (layout.network(r) & 0xffff_ff00, (r % 16 + 1) as u8)).collect();
    let mut traffic = Vec::new();
    for mut p in router_traffic(8192, a.routes, layout) {
        let dst = u32::from_be_bytes(p[30..34].try_into().expect("4 bytes"));
        let n = *next_hop.get(&(dst & 0xffff_ff00)).ok_or("a frame outside the built-in routes")?;
        let at = p.len() - TRAILER;
        p[at] = n;
        traffic.push(p);
    }
    run_soak(a, master, traffic, 0, router_version, |pool: &mut Session<'_, Switch>, n, v| {
        run_command(pool, &version_command(n, v)).map(|_| ()).map_err(|e| e.to_string())
    })
}

// ---------------------------------------------------------------- the lwAFTR

/// Softwire `n`'s IPv4 address.
fn softwire_ipv4(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, 0, n)
}

/// Softwire `n`'s B4 address in version `v`.
fn softwire_b4(n: u8, v: u8) -> Ipv6Addr {
    Ipv6Addr::new(0x2001, 0xdb8, u16::from(v), 0, 0, 0, 0, u16::from(n))
}

/// The version of softwire `want` that `(port, frame)` left encapsulated to.
fn lwaftr_version(port: u32, frame: &[u8], want: u8) -> Option<u8> {
    if port != INTERNAL || frame.len() < 54 || frame[12..14] != [0x86, 0xdd] {
        return None;
    }
    let dst: [u8; 16] = frame[38..54].try_into().ok()?;
    (0..2).find(|v| Ipv6Addr::from(dst) == softwire_b4(want, *v))
}

/// IPv4/UDP frames of 64 bytes on the wire (the IPv4 packet fills the
/// frame, so the trailer is inside it) from 203.0.113.9 to the 16
/// softwires' addresses, UDP source ports 1024-1279.
fn lwaftr_traffic(n: usize, mac: [u8; 6]) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let key = (i % 16) as u8 + 1;
            let addrs = ([203, 0, 113, 9], softwire_ipv4(key).octets());
            let sport = 1024 + (i / 16 % 256) as u16;
            let mut p = crate::p4::bench::ipv4_udp_frame((mac, [2, 0, 0, 0, 0, 9]), addrs, (sport, 4000), 60);
            p[60 - TRAILER] = key;
            p
        })
        .collect()
}

fn soak_lwaftr(a: &SoakArgs) -> Result<SoakReport, String> {
    let br: Ipv6Addr = "fc00::100".parse().expect("an address");
    let mut conf = generate_configuration(softwire_ipv4(1), 16, br, softwire_b4(1, 0), 0, None)?;
    for (i, s) in conf.binding_table.softwires.iter_mut().enumerate() {
        s.b4_ipv6 = softwire_b4(i as u8 + 1, 0);
    }
    let mac = conf.instances[0].queues[0].external.mac;
    let template = conf.binding_table.softwires[0];
    let opts = Options { on_a_stick: false, deterministic_ids: true, frozen_clock: None };
    let master = Lwaftr::new(&conf, opts)?;
    run_soak(
        a,
        master,
        lwaftr_traffic(8192, mac),
        EXTERNAL,
        lwaftr_version,
        move |pool: &mut Session<'_, Lwaftr>, n, v| {
            let mut s = template;
            (s.ipv4, s.b4_ipv6) = (softwire_ipv4(n), softwire_b4(n, v));
            pool.try_change(move |d: &mut Lwaftr, _| {
                let bt = d.binding_table_mut();
                bt.remove(s.ipv4, s.psid);
                bt.add(&s)
            })?;
            pool.send_pending();
            Ok(())
        },
    )
}

// ---------------------------------------------------------------- the OpenFlow switch

/// The flow that sends route `n`'s /24 (of the built-in router's first 16)
/// as next hop `n`'s version `v`: MACs rewritten, TTL decremented, out of
/// OpenFlow port `n % 4 + 4v + 1`.
fn openflow_route(n: u8, v: u8, command: u8) -> sluice_openflow::FlowMod {
    use sluice_openflow::{Action, Instruction, Match, Oxm, OxmField};
    let oxm =
        |field, value: &[u8], mask: Option<&[u8]>| Oxm { field, value: value.to_vec(), mask: mask.map(<[u8]>::to_vec) };
    let net = RouteLayout::Consecutive.network(u32::from(n) - 1).to_be_bytes();
    sluice_openflow::FlowMod {
        cookie: u64::from(n),
        cookie_mask: 0,
        table_id: 0,
        command,
        idle_timeout: 0,
        hard_timeout: 0,
        priority: 100,
        buffer_id: u32::MAX,
        out_port: sluice_openflow::port::ANY,
        out_group: sluice_openflow::group::ANY,
        flags: 0,
        matched: Match {
            fields: vec![
                oxm(OxmField::EthType, &[8, 0], None),
                oxm(OxmField::Ipv4Dst, &net, Some(&[255, 255, 255, 0])),
            ],
        },
        instructions: vec![Instruction::ApplyActions(vec![
            Action::SetField(oxm(OxmField::EthSrc, &[2, 0, 0, 0, v, n], None)),
            Action::SetField(oxm(OxmField::EthDst, &[0, 0x5e, 0, 0, v, n], None)),
            Action::DecNwTtl,
            Action::Output { port: u32::from(n) % 4 + 4 * u32::from(v) + 1, max_len: 0 },
        ])],
    }
}

/// The version of route `want` that `(port, frame)` left as whole (the
/// router's versions, on OpenFlow ports numbered from 1).
fn openflow_version(port: u32, frame: &[u8], want: u8) -> Option<u8> {
    router_version(port.checked_sub(1)?, frame, want)
}

fn soak_openflow(a: &SoakArgs) -> Result<SoakReport, String> {
    use sluice_ofswitch::{OfSwitch, PortInfo};
    use sluice_openflow::flow_mod_command as fmc;
    const IN_PORT: u32 = 9;
    let ports = (1..=IN_PORT)
        .map(|p| (p, PortInfo { name: format!("p{p}"), hw_addr: [2, 0, 0, 0, 1, p as u8], config: 0, live: true }))
        .collect();
    let mut master = OfSwitch::new(ports);
    for n in 1..=16 {
        master.flow_mod(&openflow_route(n, 0, fmc::ADD), u64::from(n), 0).map_err(|e| format!("route {n}: {e:?}"))?;
    }
    let mut traffic = Vec::new();
    for mut p in router_traffic(8192, 16, RouteLayout::Consecutive) {
        let dst = u32::from_be_bytes(p[30..34].try_into().expect("4 bytes"));
        let n = (1..=16u8)
            .find(|n| RouteLayout::Consecutive.network(u32::from(*n) - 1) == dst & 0xffff_ff00)
            .ok_or("a frame outside the first 16 routes")?;
        let at = p.len() - TRAILER;
        p[at] = n;
        traffic.push(p);
    }
    let mut uid = 16u64;
    run_soak(a, master, traffic, IN_PORT, openflow_version, move |pool: &mut Session<'_, OfSwitch>, n, v| {
        uid += 1;
        let (fm, id) = (openflow_route(n, v, fmc::MODIFY_STRICT), uid);
        // As the agent applies a flow-mod: on the master, then the workers.
        pool.try_change(move |d: &mut OfSwitch, _| d.flow_mod(&fm, id, 0)).map_err(|e| format!("{e:?}"))?;
        pool.send_pending();
        Ok(())
    })
}

/// Runs a soak (see the module's comment).
pub fn soak(a: &SoakArgs) -> Result<SoakReport, String> {
    match a.plane {
        SoakPlane::Router => soak_router(a),
        SoakPlane::Lwaftr => soak_lwaftr(a),
        SoakPlane::Openflow => soak_openflow(a),
    }
}

/// `sluice soak`: runs, prints the report and fails on a lost or mis-forwarded packet.
pub fn run(a: &SoakArgs) -> Result<(), String> {
    match a.plane {
        SoakPlane::Router => eprintln!(
            "sluice soak: the router example with {} routes, {} worker(s), {} next-hop updates/s for {} s",
            a.routes, a.workers, a.updates_per_second, a.duration
        ),
        SoakPlane::Lwaftr => eprintln!(
            "sluice soak: the lwAFTR with 16 softwires, {} worker(s), {} softwire updates/s for {} s",
            a.workers, a.updates_per_second, a.duration
        ),
        SoakPlane::Openflow => eprintln!(
            "sluice soak: the OpenFlow switch with 16 route flows, {} worker(s), {} flow-mods/s for {} s",
            a.workers, a.updates_per_second, a.duration
        ),
    }
    let r = soak(a)?;
    println!(
        "soak: {:.1} s, {} worker(s): {} packets in, {} out, {} lost, {} mis-forwarded; {} updates ({:.0}/s); \
         RSS {} -> {} KiB",
        r.seconds,
        a.workers,
        r.packets_in,
        r.packets_out,
        r.lost(),
        r.misforwarded,
        r.updates,
        r.updates as f64 / r.seconds,
        r.rss_kib.0,
        r.rss_kib.1
    );
    if r.lost() > 0 || r.misforwarded > 0 {
        return Err(format!("{} packets lost, {} mis-forwarded", r.lost(), r.misforwarded));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{lwaftr_version, router_version, softwire_b4, trailer};

    #[test]
    fn a_packet_must_leave_as_one_whole_version_of_its_next_hop() {
        let frame = |dst_v: u8, src_v: u8, n: u8| [0, 0x5e, 0, 0, dst_v, n, 2, 0, 0, 0, src_v, n, 8, 0];
        assert_eq!(router_version(3, &frame(0, 0, 3), 3), Some(0));
        assert_eq!(router_version(3 + 4, &frame(1, 1, 3), 3), Some(1));
        assert_eq!(router_version(3, &frame(0, 0, 3), 4), None, "another next hop than its route's");
        assert_eq!(router_version(3, &frame(1, 1, 3), 3), None, "the port of version 0, the MACs of version 1");
        assert_eq!(router_version(3, &frame(0, 1, 3), 3), None, "the MACs of two versions");
        assert_eq!(router_version(0, &frame(0, 0, 17), 17), None, "no such next hop");
        assert_eq!(router_version(3, &frame(0, 0, 3)[..8], 3), None, "too short");
    }

    #[test]
    fn an_encapsulated_packet_must_go_to_one_version_of_its_softwires_b4() {
        let frame = |b4: std::net::Ipv6Addr| {
            let mut f = vec![0u8; 100];
            f[12..14].copy_from_slice(&[0x86, 0xdd]);
            f[38..54].copy_from_slice(&b4.octets());
            f
        };
        assert_eq!(lwaftr_version(sluice_lwaftr::INTERNAL, &frame(softwire_b4(5, 1)), 5), Some(1));
        assert_eq!(lwaftr_version(sluice_lwaftr::INTERNAL, &frame(softwire_b4(5, 0)), 5), Some(0));
        assert_eq!(
            lwaftr_version(sluice_lwaftr::INTERNAL, &frame(softwire_b4(6, 0)), 5),
            None,
            "another softwire's B4"
        );
        assert_eq!(lwaftr_version(sluice_lwaftr::EXTERNAL, &frame(softwire_b4(5, 0)), 5), None, "the IPv4 side");
    }

    #[test]
    fn the_trailer_holds_the_next_hop_and_the_sequence_number() {
        let mut f = vec![0u8; 60];
        f[51] = 7;
        f[52..].copy_from_slice(&0x0102_0304_0506_0708u64.to_be_bytes());
        assert_eq!(trailer(&f), Some((7, 0x0102_0304_0506_0708)));
        assert_eq!(trailer(&f[..5]), None);
    }
}
