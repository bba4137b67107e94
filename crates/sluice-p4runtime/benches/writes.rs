//! Table inserts per second inside the switch process, without gRPC:
//! - `runtime`: the typed runtime API through the worker pool (check on the
//!   master, install on the master and on one worker replica);
//! - `p4runtime`: `Server::write` with 1000-update batches (P4Runtime
//!   translation plus the above), the cost a batched Write RPC adds to decoding.
//!
//! Run: `cargo bench -p sluice-p4runtime --bench writes -- --quick`.
//! Each iteration inserts 100 000 LPM /32 routes into the router example's
//! `ipv4_lpm` (or 65 535 exact entries into `nexthop`) and clears the table.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sluice_dataplane::workers::{Pool, WorkerIo};
use sluice_engine::runtime::{EntryAction, FieldMatch, Resource};
use sluice_engine::Switch;
use sluice_node::Control;
use sluice_p4runtime::entities::{self, Handles, Op};
use sluice_p4runtime::pipeline::{Ids, Pipeline};
use sluice_p4runtime::proto::p4::config::v1 as info;
use sluice_p4runtime::proto::p4::v1 as p4;

const ROUTER: &str = include_str!("../../../examples/router.json");

/// A worker with no ports: it only replays changes.
struct Idle;
impl WorkerIo<Switch> for Idle {
    fn run_batch(&mut self, _: &mut Switch) -> bool {
        std::thread::sleep(std::time::Duration::from_micros(200));
        true
    }
}

fn pool(workers: usize) -> Control<Switch> {
    let sw = sluice_engine::load_switch(ROUTER).unwrap();
    let pool = Pool::start(sw, (0..workers).map(|_| Box::new(Idle) as Box<dyn WorkerIo<Switch>>).collect()).unwrap();
    Control::new(pool, "p4", None)
}

/// The key and action data of entry `i` of a table: an LPM /32 route or an exact next hop.
fn entry(lpm: bool, i: u32) -> (Vec<FieldMatch>, Box<[u8]>) {
    if lpm {
        (vec![FieldMatch::Lpm((0x0a00_0000 + i).to_be_bytes().to_vec(), 32)], Box::new([0, 1]))
    } else {
        let mut data = [0u8; 14];
        data[1] = 1;
        data[8..].copy_from_slice(&(0x0200_0000_0000u64 + u64::from(i)).to_be_bytes()[2..]);
        (vec![FieldMatch::Exact((i as u16).to_be_bytes().to_vec())], Box::new(data))
    }
}

fn runtime_api(c: &mut Criterion) {
    let mut g = c.benchmark_group("inserts");
    g.sample_size(10);
    for (table, lpm, n) in [("RouterIngress.ipv4_lpm", true, 100_000u32), ("RouterIngress.nexthop", false, 65_535)] {
        g.throughput(Throughput::Elements(u64::from(n)));
        for workers in [0, 1] {
            let control = pool(workers);
            let mut p = control.lock();
            let t = p.view().index_of(Resource::Table, table).unwrap();
            let a = p.view().program().tables[t].actions[0];
            let name = format!("runtime_api_{}_{workers}_workers", if lpm { "lpm" } else { "exact" });
            g.bench_function(name.as_str(), |b| {
                b.iter(|| {
                    for i in 0..n {
                        let (key, data) = entry(lpm, i);
                        let e = p.view().prepare_entry(t, key, EntryAction::Direct { action: a, data }, 0).unwrap();
                        p.try_change(move |sw, _| sw.install_entry(t, e.clone())).unwrap();
                        if p.pending() >= 128 {
                            p.send_pending();
                        }
                    }
                    p.change(move |sw, _| sw.clear_entries(t));
                    p.flush();
                })
            });
        }
    }
    g.finish();
}

/// A P4Info with just the router's `ipv4_lpm` table and `set_nexthop` action (ids as p4c gives them).
fn router_p4info() -> info::P4Info {
    let pre = |id: u32, name: &str| Some(info::Preamble { id, name: name.into(), ..Default::default() });
    info::P4Info {
        tables: vec![info::Table {
            preamble: pre(1, "RouterIngress.ipv4_lpm"),
            match_fields: vec![info::MatchField {
                id: 1,
                name: "hdr.ipv4.dst_addr".into(),
                bitwidth: 32,
                r#match: Some(info::match_field::Match::MatchType(info::match_field::MatchType::Lpm as i32)),
                ..Default::default()
            }],
            action_refs: vec![info::ActionRef { id: 2, ..Default::default() }],
            size: 1 << 20,
            ..Default::default()
        }],
        actions: vec![info::Action {
            preamble: pre(2, "RouterIngress.set_nexthop"),
            params: vec![info::action::Param { id: 1, name: "id".into(), bitwidth: 16, ..Default::default() }],
        }],
        ..Default::default()
    }
}

fn p4runtime_translation(c: &mut Criterion) {
    let mut g = c.benchmark_group("inserts");
    g.sample_size(10);
    let n = 100_000u32;
    g.throughput(Throughput::Elements(u64::from(n)));
    let control = pool(1);
    let mut p = control.lock();
    let info = router_p4info();
    let ids = Ids::build(&info, p.view()).unwrap();
    let pl = Pipeline { p4info: info, json: ROUTER.into(), cookie: None, ids };
    let updates: Vec<p4::Entity> = (0..n)
        .map(|i| {
            let te = p4::TableEntry {
                table_id: 1,
                r#match: vec![p4::FieldMatch {
                    field_id: 1,
                    field_match_type: Some(p4::field_match::FieldMatchType::Lpm(p4::field_match::Lpm {
                        value: (0x0a00_0000 + i).to_be_bytes().to_vec(),
                        prefix_len: 32,
                    })),
                }],
                action: Some(p4::TableAction {
                    r#type: Some(p4::table_action::Type::Action(p4::Action {
                        action_id: 2,
                        params: vec![p4::action::Param { param_id: 1, value: vec![0, 1] }],
                    })),
                }),
                ..Default::default()
            };
            p4::Entity { entity: Some(p4::entity::Entity::TableEntry(te)) }
        })
        .collect();
    let t = p.view().index_of(Resource::Table, "RouterIngress.ipv4_lpm").unwrap();
    g.bench_function("p4runtime_translation_lpm_1_worker", |b| {
        b.iter(|| {
            let mut h = Handles::default();
            for u in &updates {
                entities::write(&pl, &mut h, &mut p, Op::Insert, u.entity.as_ref().unwrap()).unwrap();
                if p.pending() >= 128 {
                    p.send_pending();
                }
            }
            p.change(move |sw, _| sw.clear_entries(t));
            p.flush();
        })
    });
    g.finish();
}

criterion_group!(benches, runtime_api, p4runtime_translation);
criterion_main!(benches);
