//! `sluice openflow-bench`: the OpenFlow switch in memory, doing the work
//! of the built-in v1model router, measured against that router on the
//! same routes and the same traffic, through the same harness.
//!
//! Contract: reads the bench options; builds an [`OfSwitch`] with the
//! router's routes as flows and its next hops as groups, and the v1model
//! router of `sluice bench` (same `router_commands`, same
//! `router_traffic`); checks that the two emit the same frames on the
//! same ports for a sample of the traffic, twice (the second time through
//! the OpenFlow switch's flow cache; an error otherwise); then runs
//! each through `sluice_bench` for `--rounds` alternating turns and
//! prints their lines (prefixed `p4:` and `openflow:`) and a final
//! `result:` line with both rates and the ratio OpenFlow / P4 (medians of
//! the turns).
//!
//! The OpenFlow pipeline:
//! - table 0 (the L2 step): `eth_type=0x0800, eth_dst=ROUTER_MAC` →
//!   goto table 1 (other frames miss and are dropped);
//! - table 1: one flow per route, `ipv4_dst=NET/24` → apply
//!   `group:NH`;
//! - group NH (indirect, one per next hop): `set_field eth_src`,
//!   `set_field eth_dst`, `dec_nw_ttl`, `output`.
//!
//! Ports: OpenFlow has no port 0, so the router's egress port `p` (0-3)
//! is OpenFlow port `p + 1`, and the traffic arrives on OpenFlow port
//! [`IN_PORT`] (not one of the outputs: OpenFlow sends nothing back out
//! of the input port unless told IN_PORT).

use std::collections::BTreeMap;
use std::io::Write;

use sluice_bench::Options;
use sluice_dataplane::DataPlane;
use sluice_ofswitch::{OfSwitch, PortInfo};
use sluice_openflow::{
    flow_mod_command, group_mod_command, group_type, Action, Bucket, FlowMod, GroupMod, Instruction, Match, Oxm,
    OxmField,
};

#[cfg(test)]
use crate::p4::bench::router_traffic;
use crate::p4::bench::{router_nexthop, RouteLayout};

/// The router's own MAC: the destination of the generated traffic.
pub const ROUTER_MAC: [u8; 6] = [0, 0x5e, 0, 0, 0, 0xfe];

/// The OpenFlow port the traffic arrives on.
pub const IN_PORT: u32 = 5;

/// What to run.
#[derive(Debug, Clone)]
pub struct OpenflowBenchArgs {
    pub entries: u32,
    pub layout: RouteLayout,
    pub duration: f64,
    pub workers: usize,
    pub rounds: usize,
    /// Packets of the traffic compared between the two before measuring.
    pub check: usize,
    /// Whether the OpenFlow switch uses its flow cache.
    pub flow_cache: bool,
    /// Whether small tables are compiled to native code (as the agent
    /// compiles them once the flows settle).
    pub table_code: bool,
    /// Print the compiled tables' code.
    pub show_code: bool,
}

fn oxm(field: OxmField, value: &[u8], mask: Option<&[u8]>) -> Oxm {
    Oxm { field, value: value.to_vec(), mask: mask.map(<[u8]>::to_vec) }
}

fn flow_add(table_id: u8, priority: u16, fields: Vec<Oxm>, instructions: Vec<Instruction>) -> FlowMod {
    FlowMod {
        cookie: 0,
        cookie_mask: 0,
        table_id,
        command: flow_mod_command::ADD,
        idle_timeout: 0,
        hard_timeout: 0,
        priority,
        buffer_id: u32::MAX,
        out_port: sluice_openflow::port::ANY,
        out_group: sluice_openflow::group::ANY,
        flags: 0,
        matched: Match { fields },
        instructions,
    }
}

/// The OpenFlow switch configured as the router with `routes` /24 routes
/// laid out as `layout` (see the module documentation).
pub fn openflow_router(routes: u32, layout: RouteLayout) -> Result<OfSwitch, String> {
    let mut ports = BTreeMap::new();
    for p in 1..=IN_PORT {
        ports.insert(p, PortInfo { name: format!("p{p}"), hw_addr: [2, 0, 0, 0, 1, p as u8], config: 0, live: true });
    }
    let mut sw = OfSwitch::new(ports);
    let e = |e: sluice_openflow::OfError| format!("{e:?}");
    for nh in 1..=16u16 {
        let (port, src, dst) = router_nexthop(nh);
        let gm = GroupMod {
            command: group_mod_command::ADD,
            typ: group_type::INDIRECT,
            group_id: u32::from(nh),
            buckets: vec![Bucket {
                weight: 0,
                watch_port: sluice_openflow::port::ANY,
                watch_group: sluice_openflow::group::ANY,
                actions: vec![
                    Action::SetField(oxm(OxmField::EthSrc, &src, None)),
                    Action::SetField(oxm(OxmField::EthDst, &dst, None)),
                    Action::DecNwTtl,
                    Action::Output { port: u32::from(port) + 1, max_len: 0 },
                ],
            }],
        };
        sw.group_mod(&gm).map_err(e)?;
    }
    let mut uid = 1u64;
    let l2 = flow_add(
        0,
        100,
        vec![oxm(OxmField::EthType, &[8, 0], None), oxm(OxmField::EthDst, &ROUTER_MAC, None)],
        vec![Instruction::GotoTable(1)],
    );
    sw.flow_mod(&l2, uid, 0).map_err(e)?;
    for r in 0..routes {
        uid += 1;
        let net = layout.network(r).to_be_bytes();
        let nh = r % 16 + 1;
        let fm = flow_add(
            1,
            100,
            vec![oxm(OxmField::EthType, &[8, 0], None), oxm(OxmField::Ipv4Dst, &net, Some(&[255, 255, 255, 0]))],
            vec![Instruction::ApplyActions(vec![Action::Group(nh)])],
        );
        sw.flow_mod(&fm, uid, 0).map_err(e)?;
    }
    Ok(sw)
}

/// The v1model router workload of `sluice bench` with the same routes
/// and traffic (without its hand-written reference).
fn p4_router(routes: u32, layout: RouteLayout) -> Result<crate::p4::bench::Workload, String> {
    let mut w = crate::p4::bench::example(
        crate::p4::bench::Example::Router,
        routes,
        64,
        0,
        layout,
        sluice_engine::ExecMode::Compiled,
    )?;
    w.reference = None;
    w.check = None;
    Ok(w)
}

/// Checks that `of` emits, for every frame of `traffic`, what `p4` emits
/// (same bytes, OpenFlow port = P4 port + 1): one frame at a time, then
/// in batches of 32 as the bench and live ports run it.
pub fn check_same_output(of: &mut OfSwitch, p4: &mut sluice_engine::Switch, traffic: &[Vec<u8>]) -> Result<(), String> {
    let mut want = Vec::with_capacity(traffic.len());
    for p in traffic {
        let mut b = Vec::new();
        p4.process(0, p, &mut |o, d| b.push((o + 1, d.to_vec())));
        want.push(b);
    }
    let differ = |i: usize, a: &[(u32, Vec<u8>)], how: &str| {
        (a != want[i].as_slice() || a.is_empty()).then(|| {
            format!(
                "packet {i} ({how}): the OpenFlow switch emitted {a:?} but the P4 router {:?} (P4 ports shown + 1)",
                want[i]
            )
        })
    };
    for (i, p) in traffic.iter().enumerate() {
        let mut a = Vec::new();
        of.process_batch(IN_PORT, &[p.as_slice()], &mut |_, o, d| a.push((o, d.to_vec())));
        if let Some(e) = differ(i, &a, "alone") {
            return Err(e);
        }
    }
    for (c, chunk) in traffic.chunks(32).enumerate() {
        let frames: Vec<&[u8]> = chunk.iter().map(Vec::as_slice).collect();
        let mut a = vec![Vec::new(); chunk.len()];
        of.process_batch(IN_PORT, &frames, &mut |j, o, d| a[j].push((o, d.to_vec())));
        for (j, a) in a.iter().enumerate() {
            if let Some(e) = differ(c * 32 + j, a, "in a batch") {
                return Err(e);
            }
        }
    }
    Ok(())
}

/// A writer that prefixes every line with a tag (the two runs' own
/// `result:` lines then do not read as the final one).
struct Prefixed<'a> {
    tag: &'a str,
    line: Vec<u8>,
}

impl Write for Prefixed<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        for &b in buf {
            self.line.push(b);
            if b == b'\n' {
                let mut out = std::io::stdout().lock();
                out.write_all(self.tag.as_bytes())?;
                out.write_all(&self.line)?;
                out.flush()?;
                self.line.clear();
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs the bench (see the module documentation).
pub fn run(a: &OpenflowBenchArgs) -> Result<(), String> {
    let t0 = std::time::Instant::now();
    let mut p4 = p4_router(a.entries, a.layout)?;
    let traffic = std::mem::take(&mut p4.traffic);
    let mut of = openflow_router(a.entries, a.layout)?;
    of.set_flow_cache(a.flow_cache);
    if a.table_code {
        for (t, code) in of.compile_tables() {
            of.install_code(t, code);
        }
        if let Some(walk) = of.compile_pipeline() {
            of.install_pipeline(walk?);
        }
    }
    println!(
        "openflow-bench: {} routes, {} packets of 64 B, set up in {:.1} s",
        a.entries,
        traffic.len(),
        t0.elapsed().as_secs_f64()
    );
    for t in of.describe_tables() {
        println!("openflow-bench: {t}");
    }
    if a.show_code {
        print!("{}", of.code_listing());
    }
    let sample = &traffic[..traffic.len().min(a.check)];
    check_same_output(&mut of, &mut p4.data_plane, sample)?;
    // Twice: the second pass replays what the first recorded in the flow cache.
    check_same_output(&mut of, &mut p4.data_plane, sample)?;
    println!("check: the OpenFlow switch and the P4 router emit the same {} frames on the same ports", sample.len());
    let options = Options { duration: a.duration, workers: a.workers, rounds: 1, ..Default::default() };
    let (mut of_rates, mut p4_rates, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let (mut p4_sw, mut of_sw) = (Some(p4.data_plane), Some(of));
    for round in 0..a.rounds.max(1) {
        if a.rounds > 1 {
            println!("round {} of {}", round + 1, a.rounds);
        }
        // A copy for the next round (a million routes make big copies: none after the last).
        let more = round + 1 < a.rounds;
        let sw = p4_sw.take().expect("kept across rounds");
        if more {
            p4_sw = Some(DataPlane::replica(&sw, 1).map_err(|e| e.to_string())?);
        }
        let mut w = sluice_bench::Workload::new(sw, traffic.clone(), 0, "router");
        w.entries = p4.entries;
        w.mode = p4.mode.clone();
        w.replica_report = p4.replica_report.clone();
        let p = sluice_bench::run_to(w, &options, &mut Prefixed { tag: "p4: ", line: Vec::new() }, false)?;
        let sw = of_sw.take().expect("kept across rounds");
        if more {
            of_sw = Some(sw.replica(1)?);
        }
        let mut w = sluice_bench::Workload::new(sw, traffic.clone(), IN_PORT, "openflow-router");
        w.entries = Some(u64::from(a.entries) + 1);
        let o = sluice_bench::run_to(w, &options, &mut Prefixed { tag: "openflow: ", line: Vec::new() }, false)?;
        p4_rates.push(p.mpps);
        of_rates.push(o.mpps);
        ratios.push(o.mpps / p.mpps);
    }
    let med = |v: &[f64]| sluice_bench::median(v).unwrap_or(0.0);
    println!(
        "result: program=openflow-router size=64 workers={} entries={} openflow_mpps={:.3} p4_mpps={:.3} ratio={:.3}{}",
        a.workers,
        a.entries,
        med(&of_rates),
        med(&p4_rates),
        med(&ratios),
        if a.rounds > 1 { format!(" rounds={}", a.rounds) } else { String::new() }
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The OpenFlow router and the P4 router agree on generated traffic,
    /// with both route layouts, on a route table small enough for the
    /// classifier and one that runs on the longest-prefix template.
    #[test]
    fn openflow_router_matches_the_p4_router() {
        let cases = [(RouteLayout::Spread, 300), (RouteLayout::Consecutive, 300), (RouteLayout::Spread, 3000)];
        for (layout, routes) in cases {
            let traffic = router_traffic(500, routes, layout);
            let mut of = openflow_router(routes, layout).unwrap();
            assert_eq!(of.tables()[1].runs_prefix(), routes as usize >= sluice_ofswitch::table::PREFIX_MIN);
            let mut p4 = p4_router(routes, layout).unwrap();
            check_same_output(&mut of, &mut p4.data_plane, &traffic).unwrap();
            // Again, now through the flow cache's replays.
            check_same_output(&mut of, &mut p4.data_plane, &traffic).unwrap();
            assert!(DataPlane::counters(&of).cache_hits >= traffic.len() as u64 / 2);
        }
    }
}
