//! Engine features checked end to end on the router example: calculation
//! inputs beyond plain fields (`payload` of update_checksum_with_payload, whole
//! `header`), checked against an independent csum16, the per-packet trace, and
//! register reads and writes (inline in generated code) against the interpreter.

use serde_json::Value;
use sluice_control::cli;

fn router_with_update_inputs(extra: Vec<Value>) -> sluice_engine::Switch {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/router.json")).unwrap();
    let mut v: Value = serde_json::from_str(&text).unwrap();
    let calcs = v["calculations"].as_array_mut().unwrap();
    let calc = calcs.iter_mut().find(|c| c["name"] == "calc").expect("update calculation");
    let input = calc["input"].as_array_mut().unwrap();
    for e in extra {
        input.push(e);
    }
    let mut sw = sluice_engine::load_switch(&v.to_string()).unwrap();
    for c in [
        "table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop 10.0.0.0/8 => 1",
        "table_add RouterIngress.nexthop RouterIngress.forward 1 => 2 00:00:00:00:00:02 00:00:00:00:00:01",
    ] {
        cli::run(&mut sw, c).unwrap();
    }
    sw
}

fn packet() -> Vec<u8> {
    let mut p = vec![0u8; 14 + 20 + 7];
    p[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut p[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&27u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[192, 168, 0, 1]);
    ip[16..20].copy_from_slice(&[10, 1, 2, 3]);
    let c = sluice_hash::Algorithm::from_name("csum16").unwrap().compute(ip) as u16;
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    p[34..].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7]);
    p
}

fn forward(sw: &mut sluice_engine::Switch, p: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    sw.process(1, p, &mut |_, b| out.push(b.to_vec()));
    assert_eq!(out.len(), 1, "the router forwards the packet");
    out.pop().unwrap()
}

/// csum16 of the IPv4 header with a zero checksum field, then `tail`.
fn expected(out: &[u8], tail: &[u8]) -> u16 {
    let mut data = out[14..34].to_vec();
    data[10] = 0;
    data[11] = 0;
    // The update calculation lists the fields without the checksum: drop its 2 bytes.
    data.drain(10..12);
    data.extend_from_slice(tail);
    sluice_hash::Algorithm::from_name("csum16").unwrap().compute(&data) as u16
}

#[test]
fn update_checksum_with_payload_covers_the_payload() {
    let mut sw = router_with_update_inputs(vec![serde_json::json!({"type": "payload", "value": null})]);
    let out = forward(&mut sw, &packet());
    let got = u16::from_be_bytes([out[24], out[25]]);
    assert_eq!(got, expected(&out, &out[34..]));
    assert_ne!(got, expected(&out, &[]), "the payload must change the checksum");
}

#[test]
fn whole_header_input_packs_all_its_fields() {
    let mut sw = router_with_update_inputs(vec![serde_json::json!({"type": "header", "value": "ethernet"})]);
    let out = forward(&mut sw, &packet());
    let got = u16::from_be_bytes([out[24], out[25]]);
    assert_eq!(got, expected(&out, &out[..14]));
}

#[test]
fn trace_shows_parser_tables_and_egress_decision() {
    let mut sw = router_with_update_inputs(vec![]);
    sw.set_trace(true);
    forward(&mut sw, &packet());
    let t = sw.drain_trace().unwrap();
    // bmv2's per-packet log lines, in order, for the first packet (id 0).
    let mut rest = t.as_str();
    for want in [
        "[0.0] [cxt 0] Processing packet received on port 1",
        "[0.0] [cxt 0] Parser 'parser': start",
        "Parser 'parser' entering state 'start'",
        "Extracting header 'ethernet'",
        "Extracting header 'ipv4'",
        "[0.0] [cxt 0] Parser 'parser': end",
        "Pipeline 'ingress': start",
        "Applying table 'RouterIngress.ipv4_lpm'",
        "Looking up key:\n* ",
        ": 0a010203\n",
        "Table 'RouterIngress.ipv4_lpm': hit with handle 0",
        "Action entry is RouterIngress.set_nexthop - 1,",
        "Action RouterIngress.set_nexthop",
        "Table 'RouterIngress.nexthop': hit with handle 0",
        "Action entry is RouterIngress.forward - 2,",
        "Pipeline 'ingress': end",
        "Egress port is 2",
        "Deparser 'deparser': start",
        "Deparsing header 'ethernet'",
        "Deparsing header 'ipv4'",
        "Deparser 'deparser': end",
        "[0.0] [cxt 0] Transmitting packet of size 41 out of port 2",
    ] {
        let at = rest.find(want).unwrap_or_else(|| panic!("trace lacks {want:?} (in order):\n{t}"));
        rest = &rest[at + want.len()..];
    }
    // A route miss drops the packet and the trace says where.
    sw.set_trace(true);
    let mut miss = packet();
    miss[30] = 11; // 11.1.2.3: no route; fix the header checksum
    miss[24] = 0;
    miss[25] = 0;
    let c = sluice_hash::Algorithm::from_name("csum16").unwrap().compute(&miss[14..34]) as u16;
    miss[24..26].copy_from_slice(&c.to_be_bytes());
    let mut out = 0;
    sw.process(1, &miss, &mut |_, _| out += 1);
    let t = sw.drain_trace().unwrap();
    assert_eq!(out, 0);
    assert!(t.contains("[1.0] [cxt 0] Table 'RouterIngress.ipv4_lpm': miss"), "the second packet is id 1:\n{t}");
    assert!(t.contains(": 0b010203\n"), "{t}");
    assert!(t.contains("Dropping packet at the end of ingress"), "{t}");
}

/// Direct meters are configured per entry handle (as with bmv2's CLI), the
/// packet path and the commands use the same cell, a new entry starts
/// unconfigured, and the cells are shared by every worker's replica.
#[test]
fn direct_meter_rates_follow_entry_handles_and_are_shared_by_replicas() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/conformance/p4c-bench/pins_wbb/pins_wbb.json");
    let mut sw = sluice_engine::load_switch(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let t = "ingress.acl_wbb_ingress.acl_wbb_ingress_table";
    let m = "ingress.acl_wbb_ingress.acl_wbb_ingress_meter";
    let add = format!("table_add {t} NoAction 1&&&1 0&&&0 0&&&0 0&&&0 0&&&0 => 10");
    let out = cli::run(&mut sw, &add).unwrap();
    let h: u32 = out.rsplit(' ').next().unwrap().parse().unwrap();
    cli::run(&mut sw, &format!("meter_set_rates {m} {h} 0.5:100 1.5:200")).unwrap();
    let rates = cli::run(&mut sw, &format!("meter_get_rates {m} {h}")).unwrap();
    assert!(rates.contains("burst size = 100") && rates.contains("burst size = 200"), "{rates}");
    let replica = sw.replica().unwrap();
    let mut replica = replica;
    assert_eq!(
        cli::run(&mut replica, &format!("meter_get_rates {m} {h}")).unwrap(),
        rates,
        "replicas share direct meters"
    );
    let bad = cli::run(&mut sw, &format!("meter_set_rates {m} {} 1:1 2:2", h + 1)).unwrap_err().to_string();
    assert!(bad.contains("INVALID_HANDLE"), "{bad}");
    // Delete and add again: the slot is reused, its meter starts unconfigured.
    cli::run(&mut sw, &format!("table_delete {t} {h}")).unwrap();
    let out = cli::run(&mut sw, &add).unwrap();
    let h2: u32 = out.rsplit(' ').next().unwrap().parse().unwrap();
    assert_eq!(h2 & 0xffffff, h & 0xffffff, "slot reused");
    let fresh = cli::run(&mut sw, &format!("meter_get_rates {m} {h2}")).unwrap();
    assert!(!fresh.contains("burst size = 100"), "a new entry inherited the old meter: {fresh}");
}

/// The router with a 16-cell, 16-bit register `r` used by the next-hop
/// action `forward`: `ipv4.identification = r[ingress_port]`, then
/// `r[ingress_port] = ipv4.total_len`. Reads and writes of this shape run
/// inline in generated code; out-of-range indices read 0 and write nothing.
fn router_with_register(mode: sluice_engine::ExecMode) -> sluice_engine::Switch {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/router.json")).unwrap();
    let mut v: Value = serde_json::from_str(&text).unwrap();
    v["register_arrays"] = serde_json::json!([{ "name": "r", "id": 0, "size": 16, "bitwidth": 16 }]);
    let forward =
        v["actions"].as_array_mut().unwrap().iter_mut().find(|a| a["name"] == "RouterIngress.forward").unwrap();
    let prims = forward["primitives"].as_array_mut().unwrap();
    let field = |h: &str, f: &str| serde_json::json!({ "type": "field", "value": [h, f] });
    prims.push(serde_json::json!({ "op": "register_read", "parameters": [
        field("ipv4", "identification"), { "type": "register_array", "value": "r" }, field("standard_metadata", "ingress_port")
    ]}));
    prims.push(serde_json::json!({ "op": "register_write", "parameters": [
        { "type": "register_array", "value": "r" }, field("standard_metadata", "ingress_port"), field("ipv4", "total_len")
    ]}));
    let mut sw = sluice_engine::load_switch(&v.to_string()).unwrap();
    sw.set_mode(mode).unwrap();
    for c in [
        "table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop 10.0.0.0/8 => 1",
        "table_add RouterIngress.nexthop RouterIngress.forward 1 => 2 00:00:00:00:00:02 00:00:00:00:00:01",
    ] {
        cli::run(&mut sw, c).unwrap();
    }
    sw
}

#[test]
fn register_reads_and_writes_give_the_same_results_compiled_and_interpreted() {
    let mut compiled = router_with_register(sluice_engine::ExecMode::Compiled);
    let mut interpreted = router_with_register(sluice_engine::ExecMode::Interpreted);
    // (ingress port, total length written, identification expected out)
    let steps = [(1u32, 27u16, 0u16), (1, 300, 27), (3, 41, 0), (1, 5, 300), (3, 7, 41), (40, 99, 0), (40, 98, 0)];
    for (port, total_len, want) in steps {
        let mut p = packet();
        p[16..18].copy_from_slice(&total_len.to_be_bytes());
        let ip = &mut p[14..34];
        ip[10..12].fill(0);
        let c = sluice_hash::Algorithm::from_name("csum16").unwrap().compute(ip) as u16;
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        let mut outs = Vec::new();
        for sw in [&mut compiled, &mut interpreted] {
            let mut out = Vec::new();
            sw.process(port, &p, &mut |_, b| out.push(b.to_vec()));
            assert_eq!(out.len(), 1, "forwarded");
            outs.push(out.pop().unwrap());
        }
        assert_eq!(outs[0], outs[1], "compiled and interpreted outputs, port {port}");
        assert_eq!(u16::from_be_bytes([outs[0][18], outs[0][19]]), want, "identification read from r[{port}]");
    }
    for i in 0..16 {
        assert_eq!(compiled.register_read(0, i), interpreted.register_read(0, i), "r[{i}]");
    }
    assert_eq!(compiled.register_read(0, 1), Ok(5));
    assert_eq!(compiled.register_read(0, 3), Ok(7));
}

/// Multicast replicas are traced apart, as bmv2 numbers them: the packet
/// is copy 0 of its id, and each replica takes the next copy id (1, 2...)
/// of that id; the next packet starts again at copy 0 of the next id.
#[test]
fn multicast_replicas_are_traced_under_their_own_copy_ids() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/conformance/bmv2/multicast");
    let json = std::fs::read_to_string(format!("{dir}/program.json")).unwrap();
    let mut sw = sluice_engine::load_switch(&json).unwrap();
    for c in std::fs::read_to_string(format!("{dir}/commands.txt")).unwrap().lines() {
        cli::run(&mut sw, c).unwrap();
    }
    sw.set_trace(true);
    // hdr.f1 = 2: group 2, four copies (rid 20 -> 2, 21 -> 3, 22 -> 2 and 3).
    let mut out = Vec::new();
    sw.process(1, &[0, 2, 0xaa], &mut |p, _| out.push(p));
    assert_eq!(out.len(), 4, "group 2 has four copies");
    sw.process(1, &[0, 0, 0xaa], &mut |p, _| out.push(p));
    let t = sw.drain_trace().unwrap();
    assert!(t.contains("[0.0] [cxt 0] Multicast requested for packet (group 2, 4 copies)"), "{t}");
    for copy in 1..=4 {
        let want = format!("[0.{copy}] [cxt 0] Transmitting packet of size");
        assert!(t.contains(&want), "no {want:?} in:\n{t}");
    }
    assert!(!t.contains("[0.5]") && !t.contains("[0.0] [cxt 0] Transmitting"), "{t}");
    assert!(t.contains("[1.0] [cxt 0] Transmitting packet of size 3 out of port 0"), "{t}");
}

/// `log_msg` with arguments, as p4c writes it (a `parameters_vector` of a
/// header field and an action parameter): the program loads and the trace
/// prints the line at info level with the values in decimal, as bmv2.
#[test]
fn log_msg_with_arguments_prints_their_values() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/router.json")).unwrap();
    let mut v: Value = serde_json::from_str(&text).unwrap();
    let action =
        v["actions"].as_array_mut().unwrap().iter_mut().find(|a| a["name"] == "RouterIngress.forward").unwrap();
    action["primitives"].as_array_mut().unwrap().push(serde_json::json!({
        "op": "log_msg",
        "parameters": [
            {"type": "string", "value": "ttl={} port={} \\{done\\}"},
            {"type": "parameters_vector", "value": [
                {"type": "field", "value": ["ipv4", "ttl"]},
                {"type": "runtime_data", "value": 0}
            ]}
        ]
    }));
    let mut sw = sluice_engine::load_switch(&v.to_string()).expect("log_msg with a parameters_vector loads");
    for c in [
        "table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop 10.0.0.0/8 => 1",
        "table_add RouterIngress.nexthop RouterIngress.forward 1 => 2 00:00:00:00:00:02 00:00:00:00:00:01",
    ] {
        cli::run(&mut sw, c).unwrap();
    }
    sw.set_trace(true);
    forward(&mut sw, &packet());
    let t = sw.drain_trace().unwrap();
    assert!(t.contains("ttl=63 port=2 {done}"), "{t}");
}
