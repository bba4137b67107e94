//! v1model behaviours that the shared corpora do not reach (and PSA's class
//! of service on the same egress queues), each checked end
//! to end on a small hand-written BMv2 JSON program, interpreted and
//! compiled, against bytes computed here (the checksum, CRC-32 and bit
//! packing references are the test's own).

use serde_json::{json, Map, Value};
use sluice_engine::runtime::MirrorSession;
use sluice_engine::{ExecMode, Switch};

const MODES: [ExecMode; 2] = [ExecMode::Interpreted, ExecMode::Compiled];

fn field(h: &str, f: &str) -> Value {
    json!({"type": "field", "value": [h, f]})
}

fn hex(v: &str) -> Value {
    json!({"type": "hexstr", "value": v})
}

fn op(o: &str, left: Value, right: Value) -> Value {
    json!({"type": "expression", "value": {"op": o, "left": left, "right": right}})
}

fn prim(o: &str, params: Vec<Value>) -> Value {
    json!({"op": o, "parameters": params})
}

fn assign(dst: Value, src: Value) -> Value {
    prim("assign", vec![dst, src])
}

fn action(id: u64, name: &str, prims: Vec<Value>) -> Value {
    json!({"name": name, "id": id, "runtime_data": [], "primitives": prims})
}

/// A keyless table that runs action `aid` and goes on to `next`: how p4c
/// calls an action from a control's body.
fn call(id: u64, name: &str, aid: u64, aname: &str, next: Option<&str>) -> Value {
    let mut next_tables = Map::new();
    next_tables.insert(aname.to_string(), json!(next));
    json!({
        "name": name, "id": id, "key": [], "match_type": "exact", "type": "simple", "max_size": 1024,
        "with_counters": false, "support_timeout": false, "direct_meters": null,
        "action_ids": [aid], "actions": [aname], "base_default_next": next, "next_tables": next_tables,
        "default_entry": {"action_id": aid, "action_const": true, "action_data": [], "action_entry_const": true}
    })
}

fn cond(id: u64, name: &str, e: Value, t: Option<&str>, f: Option<&str>) -> Value {
    json!({"name": name, "id": id, "expression": e, "true_next": t, "false_next": f})
}

fn pipeline(id: u64, name: &str, init: Option<&str>, tables: Vec<Value>, conds: Vec<Value>) -> Value {
    json!({"name": name, "id": id, "init_table": init, "tables": tables, "action_profiles": [], "conditionals": conds})
}

/// A parser state: `ops`, then `key` selecting among `(value, next)`
/// transitions, else `default`.
fn state(
    id: u64,
    name: &str,
    ops: Vec<Value>,
    key: Vec<Value>,
    cases: &[(&str, &str)],
    default: Option<&str>,
) -> Value {
    let mut ts: Vec<Value> =
        cases.iter().map(|(v, n)| json!({"type": "hexstr", "value": v, "mask": null, "next_state": n})).collect();
    ts.push(json!({"type": "default", "value": null, "mask": null, "next_state": default}));
    json!({"name": name, "id": id, "parser_ops": ops, "transition_key": key, "transitions": ts})
}

fn extract(h: &str) -> Value {
    json!({"op": "extract", "parameters": [{"type": "regular", "value": h}]})
}

/// `standard_metadata` as p4c declares it for v1model.
fn std_meta_type(id: u64) -> Value {
    json!({"name": "standard_metadata", "id": id, "fields": [
        ["ingress_port", 9, false], ["egress_spec", 9, false], ["egress_port", 9, false],
        ["instance_type", 32, false], ["packet_length", 32, false], ["enq_timestamp", 32, false],
        ["enq_qdepth", 19, false], ["deq_timedelta", 32, false], ["deq_qdepth", 19, false],
        ["ingress_global_timestamp", 48, false], ["egress_global_timestamp", 48, false],
        ["mcast_grp", 16, false], ["egress_rid", 16, false], ["checksum_error", 1, false],
        ["parser_error", 32, false], ["priority", 3, false], ["_padding", 3, false]
    ]})
}

fn std_f(f: &str) -> Value {
    field("standard_metadata", f)
}

/// The program in every execution mode, with `mirrors` (session, port) set.
fn switches(program: &Value, mirrors: &[(u32, u32)]) -> Vec<(ExecMode, Switch)> {
    MODES
        .iter()
        .map(|mode| {
            let mut sw = sluice_engine::load_switch(&program.to_string()).unwrap_or_else(|e| panic!("loads: {e}"));
            sw.set_mode(*mode).expect("mode");
            for &(session, port) in mirrors {
                sw.mirror_set(session, MirrorSession { port: Some(port), ..Default::default() });
            }
            (*mode, sw)
        })
        .collect()
}

/// The packets `pkt` leaves as, ordered by port.
fn run(sw: &mut Switch, pkt: &[u8]) -> Vec<(u32, Vec<u8>)> {
    let mut out = Vec::new();
    sw.process(0, pkt, &mut |port, b| out.push((port, b.to_vec())));
    out.sort();
    out
}

// ------------------------------------------- instance type of preserved copies

/// A program parsing one `rec` header (passes: 8, itype: 32, plen: 32 bits)
/// whose field list 1 preserves `instance_type`, `packet_length` and the
/// pass counter `scalars.passes`.
fn preserving_program(actions: Vec<Value>, ingress: Value, egress: Value) -> Value {
    json!({
        "header_types": [
            {"name": "scalars_0", "id": 0, "fields": [["passes", 8, false]]},
            std_meta_type(1),
            {"name": "rec_t", "id": 2, "fields": [["passes", 8, false], ["itype", 32, false], ["plen", 32, false]]}
        ],
        "headers": [
            {"name": "scalars", "id": 0, "header_type": "scalars_0", "metadata": true},
            {"name": "standard_metadata", "id": 1, "header_type": "standard_metadata", "metadata": true},
            {"name": "rec", "id": 2, "header_type": "rec_t", "metadata": false}
        ],
        "field_lists": [{"id": 1, "name": "keep", "elements": [
            std_f("instance_type"), std_f("packet_length"), field("scalars", "passes")
        ]}],
        "parsers": [{"name": "parser", "id": 0, "init_state": "start",
            "parse_states": [state(0, "start", vec![extract("rec")], vec![], &[], None)]}],
        "deparsers": [{"name": "deparser", "id": 0, "order": ["rec"]}],
        "actions": actions,
        "pipelines": [ingress, egress]
    })
}

/// `rec` = the pass counter, instance type and packet length this pass sees.
fn record(id: u64) -> Value {
    action(
        id,
        "record",
        vec![
            assign(field("rec", "passes"), field("scalars", "passes")),
            assign(field("rec", "itype"), std_f("instance_type")),
            assign(field("rec", "plen"), std_f("packet_length")),
            assign(std_f("egress_spec"), hex("0x0001")),
        ],
    )
}

fn passes_plus_one() -> Value {
    assign(field("scalars", "passes"), op("+", field("scalars", "passes"), hex("0x01")))
}

fn is_normal() -> Value {
    op("==", std_f("instance_type"), hex("0x00000000"))
}

/// 9 bytes of `rec` (all ones: nothing recorded yet) and 3 of payload.
const REC_IN: [u8; 12] = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 2, 3];

fn rec_out(passes: u8, itype: u32, plen: u32) -> Vec<u8> {
    let mut v = vec![passes];
    v.extend_from_slice(&itype.to_be_bytes());
    v.extend_from_slice(&plen.to_be_bytes());
    v.extend_from_slice(&[1, 2, 3]);
    v
}

#[test]
fn a_resubmitted_packet_sees_the_resubmit_type_and_length_over_preserved_ones() {
    // if (instance_type == 0) { passes++; packet_length = 0x77; resubmit(keep) } else record
    let program = preserving_program(
        vec![
            action(
                0,
                "again",
                vec![
                    passes_plus_one(),
                    assign(std_f("packet_length"), hex("0x00000077")),
                    prim("resubmit", vec![hex("0x1")]),
                ],
            ),
            record(1),
        ],
        pipeline(
            0,
            "ingress",
            Some("node_1"),
            vec![call(0, "tbl_again", 0, "again", None), call(1, "tbl_record", 1, "record", None)],
            vec![cond(0, "node_1", is_normal(), Some("tbl_again"), Some("tbl_record"))],
        ),
        pipeline(1, "egress", None, vec![], vec![]),
    );
    for (mode, mut sw) in switches(&program, &[]) {
        // One resubmission: the second pass has instance type 6 (RESUBMIT)
        // and the packet's length, not the preserved 0 and 0x77.
        assert_eq!(run(&mut sw, &REC_IN), vec![(1, rec_out(1, 6, 12))], "{mode:?}");
    }
}

#[test]
fn a_recirculated_packet_sees_the_recirculate_type_and_length_over_preserved_ones() {
    // ingress: if (instance_type == 0) passes++ else record; to port 1
    // egress:  if (passes == 1) { passes++; packet_length = 0x77; recirculate(keep) }
    let program = preserving_program(
        vec![
            action(0, "first", vec![passes_plus_one(), assign(std_f("egress_spec"), hex("0x0001"))]),
            record(1),
            action(
                2,
                "recirc",
                vec![
                    passes_plus_one(),
                    assign(std_f("packet_length"), hex("0x00000077")),
                    prim("recirculate", vec![hex("0x1")]),
                ],
            ),
        ],
        pipeline(
            0,
            "ingress",
            Some("node_1"),
            vec![call(0, "tbl_first", 0, "first", None), call(1, "tbl_record", 1, "record", None)],
            vec![cond(0, "node_1", is_normal(), Some("tbl_first"), Some("tbl_record"))],
        ),
        pipeline(
            1,
            "egress",
            Some("node_2"),
            vec![call(2, "tbl_recirc", 2, "recirc", None)],
            vec![cond(1, "node_2", op("==", field("scalars", "passes"), hex("0x01")), Some("tbl_recirc"), None)],
        ),
    );
    for (mode, mut sw) in switches(&program, &[]) {
        // The second pass has instance type 4 (RECIRC) and the deparsed
        // length; a preserved 0 would count the pass as a first one.
        assert_eq!(run(&mut sw, &REC_IN), vec![(1, rec_out(2, 4, 12))], "{mode:?}");
    }
}

#[test]
fn clones_see_their_clone_type_over_a_preserved_instance_type() {
    // ingress: if (instance_type == 0) clone I2E (session 1, keep); to port 1
    // egress:  record; if (instance_type == 0) clone E2E (session 2, keep)
    let program = preserving_program(
        vec![
            action(
                0,
                "clone_i2e",
                vec![
                    prim("clone_ingress_pkt_to_egress", vec![hex("0x1"), hex("0x1")]),
                    assign(std_f("egress_spec"), hex("0x0001")),
                ],
            ),
            record(1),
            action(2, "clone_e2e", vec![prim("clone_egress_pkt_to_egress", vec![hex("0x2"), hex("0x1")])]),
        ],
        pipeline(
            0,
            "ingress",
            Some("node_1"),
            vec![call(0, "tbl_clone_i2e", 0, "clone_i2e", None)],
            vec![cond(0, "node_1", is_normal(), Some("tbl_clone_i2e"), None)],
        ),
        pipeline(
            1,
            "egress",
            Some("tbl_record"),
            vec![call(1, "tbl_record", 1, "record", Some("node_2")), call(2, "tbl_clone_e2e", 2, "clone_e2e", None)],
            vec![cond(1, "node_2", is_normal(), Some("tbl_clone_e2e"), None)],
        ),
    );
    for (mode, mut sw) in switches(&program, &[(1, 3), (2, 4)]) {
        // The original (port 1, type 0), its I2E clone (port 3, type 1) and
        // its E2E clone (port 4, type 2); egress sees the length 12 in each.
        let want = vec![(1, rec_out(0, 0, 12)), (3, rec_out(0, 1, 12)), (4, rec_out(0, 2, 12))];
        assert_eq!(run(&mut sw, &REC_IN), want, "{mode:?}");
    }
    // Sessions that truncate (P4Runtime's packet_length_bytes) cut their
    // clones as they leave, as `truncate` does; the original is whole.
    for (mode, mut sw) in switches(&program, &[]) {
        sw.mirror_set(1, MirrorSession { port: Some(3), truncate: Some(5), ..Default::default() });
        sw.mirror_set(2, MirrorSession { port: Some(4), truncate: Some(7), ..Default::default() });
        let want =
            vec![(1, rec_out(0, 0, 12)), (3, rec_out(0, 1, 12)[..5].to_vec()), (4, rec_out(0, 2, 12)[..7].to_vec())];
        assert_eq!(run(&mut sw, &REC_IN), want, "{mode:?}");
    }
}

// ------------------------------------------------- union stack transition keys

/// Options `a` (type, bos, x: 8 bits each) and `b` (type, bos: 8, data: 16)
/// in a three-deep union stack `opts`, parsed as bmv2's own union stack
/// test does: the option's type by lookahead, then on to the next option
/// while the last one's `bos` is 0. Ingress writes `opts[1].b.data` and
/// `opts[2].a.x` (seen only if those were parsed). `b_key` is the
/// transition key of the `b` state.
fn union_stack_program(b_key: Value, ingress_conds: Vec<Value>) -> Value {
    let union_stack_extract =
        |m: &str| json!({"op": "extract", "parameters": [{"type": "union_stack", "value": ["opts", m]}]});
    let mut headers =
        vec![json!({"name": "standard_metadata", "id": 0, "header_type": "standard_metadata", "metadata": true})];
    let mut unions = Vec::new();
    let mut order = Vec::new();
    for i in 0..3u64 {
        for (k, m) in ["a", "b"].iter().enumerate() {
            let name = format!("opts_{i}_{m}");
            headers.push(json!({"name": name, "id": 1 + 2 * i + k as u64, "header_type": format!("opt_{m}_t"), "metadata": false}));
            order.push(name);
        }
        unions.push(
            json!({"name": format!("opts[{i}]"), "id": i, "union_type": "opt_u", "header_ids": [1 + 2 * i, 2 + 2 * i]}),
        );
    }
    json!({
        "header_types": [
            std_meta_type(0),
            {"name": "opt_a_t", "id": 1, "fields": [["type", 8, false], ["bos", 8, false], ["x", 8, false]]},
            {"name": "opt_b_t", "id": 2, "fields": [["type", 8, false], ["bos", 8, false], ["data", 16, false]]}
        ],
        "headers": headers,
        "header_union_types": [{"name": "opt_u", "id": 0, "headers": [["a", "opt_a_t"], ["b", "opt_b_t"]]}],
        "header_unions": unions,
        "header_union_stacks": [{"name": "opts", "id": 0, "union_type": "opt_u", "header_union_ids": [0, 1, 2]}],
        "parsers": [{"name": "parser", "id": 0, "init_state": "start", "parse_states": [
            state(0, "start", vec![], vec![json!({"type": "lookahead", "value": [0, 8]})],
                &[("0x0a", "parse_a"), ("0x0b", "parse_b")], None),
            state(1, "parse_a", vec![union_stack_extract("a")],
                vec![json!({"type": "union_stack_field", "value": ["opts", "a", "bos"]})], &[("0x00", "start")], None),
            state(2, "parse_b", vec![union_stack_extract("b")], vec![b_key], &[("0x00", "start")], None)
        ]}],
        "deparsers": [{"name": "deparser", "id": 0, "order": order}],
        "actions": [action(0, "mark", vec![
            assign(field("opts_1_b", "data"), hex("0xbeef")),
            assign(field("opts_2_a", "x"), hex("0x55")),
            assign(std_f("egress_spec"), hex("0x0001")),
        ])],
        "pipelines": [
            pipeline(0, "ingress", Some(if ingress_conds.is_empty() { "tbl_mark" } else { "node_1" }),
                vec![call(0, "tbl_mark", 0, "mark", None)], ingress_conds),
            pipeline(1, "egress", None, vec![], vec![])
        ]
    })
}

#[test]
fn a_transition_key_reads_a_member_field_of_the_union_stacks_last_union() {
    let program = union_stack_program(json!({"type": "union_stack_field", "value": ["opts", "b", "bos"]}), vec![]);
    for (mode, mut sw) in switches(&program, &[]) {
        // a (bos 0), b (bos 1): parsing stops after opts[1]; the bytes that
        // follow look like another option but are payload. Reading bos from
        // any union but the last (opts[0].a's is 0) would parse them too.
        let pkt = [0x0a, 0x00, 0x11, 0x0b, 0x01, 0x22, 0x22, 0x0a, 0x00, 0x44, 0xde, 0xad];
        let want = [0x0a, 0x00, 0x11, 0x0b, 0x01, 0xbe, 0xef, 0x0a, 0x00, 0x44, 0xde, 0xad];
        assert_eq!(run(&mut sw, &pkt), vec![(1, want.to_vec())], "{mode:?}");
        // a (bos 0), b (bos 0), a (bos 1): all three unions parsed.
        let pkt = [0x0a, 0x00, 0x11, 0x0b, 0x00, 0x22, 0x22, 0x0a, 0x01, 0x44, 0xde, 0xad];
        let want = [0x0a, 0x00, 0x11, 0x0b, 0x00, 0xbe, 0xef, 0x0a, 0x01, 0x55, 0xde, 0xad];
        assert_eq!(run(&mut sw, &pkt), vec![(1, want.to_vec())], "{mode:?}");
    }
}

#[test]
fn a_union_stack_field_outside_a_transition_key_is_refused_with_its_path() {
    // bmv2 accepts `union_stack_field` only in transition keys.
    let in_cond = op("==", json!({"type": "union_stack_field", "value": ["opts", "a", "bos"]}), hex("0x00"));
    let program = union_stack_program(
        json!({"type": "union_stack_field", "value": ["opts", "b", "bos"]}),
        vec![cond(0, "node_1", in_cond, Some("tbl_mark"), None)],
    );
    let e = sluice_engine::load_switch(&program.to_string()).err().expect("refused").to_string();
    assert!(e.starts_with("pipelines[0].conditionals[0]") && e.contains("transition key"), "{e}");
    // An unknown member or field in a key names its parser state.
    for bad in [["opts", "c", "bos"], ["opts", "b", "nope"], ["nope", "b", "bos"]] {
        let program = union_stack_program(json!({"type": "union_stack_field", "value": bad}), vec![]);
        let e = sluice_engine::load_switch(&program.to_string()).err().expect("refused").to_string();
        assert!(e.starts_with("parsers[0].parse_states[2]"), "{bad:?}: {e}");
    }
}

// -------------------------------------------------- constants in calculations

/// The Internet checksum (RFC 1071) of `data`, an odd last byte padded with zero.
fn internet_checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data.chunks(2).map(|c| (u32::from(c[0]) << 8) | u32::from(*c.get(1).unwrap_or(&0))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// CRC-32 (IEEE, reflected), bit by bit.
fn crc32(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for b in data {
        c ^= u32::from(*b);
        for _ in 0..8 {
            c = if c & 1 != 0 { (c >> 1) ^ 0xedb8_8320 } else { c >> 1 };
        }
    }
    !c
}

/// Ethernet, IPv4 and UDP; the UDP checksum verified and updated over the
/// pseudo-header with its zero byte as an 8-bit constant, then the payload
/// (`verify_checksum_with_payload` / `update_checksum_with_payload`).
/// Ingress drops a packet whose checksum failed, else rewrites the source
/// port and sends it to port 1.
fn udp_program() -> Value {
    let l4 = || {
        json!([
            field("ipv4", "srcAddr"), field("ipv4", "dstAddr"),
            {"type": "hexstr", "value": "0x00", "bitwidth": 8},
            field("ipv4", "protocol"), field("udp", "length_"),
            field("udp", "srcPort"), field("udp", "dstPort"), field("udp", "length_"),
            {"type": "payload", "value": null}
        ])
    };
    let udp_valid = op("d2b", Value::Null, field("udp", "$valid$"));
    json!({
        "header_types": [
            std_meta_type(0),
            {"name": "ethernet_t", "id": 1, "fields": [["dstAddr", 48, false], ["srcAddr", 48, false], ["etherType", 16, false]]},
            {"name": "ipv4_t", "id": 2, "fields": [
                ["version", 4, false], ["ihl", 4, false], ["diffserv", 8, false], ["totalLen", 16, false],
                ["identification", 16, false], ["flags", 3, false], ["fragOffset", 13, false], ["ttl", 8, false],
                ["protocol", 8, false], ["hdrChecksum", 16, false], ["srcAddr", 32, false], ["dstAddr", 32, false]]},
            {"name": "udp_t", "id": 3, "fields": [["srcPort", 16, false], ["dstPort", 16, false], ["length_", 16, false], ["checksum", 16, false]]}
        ],
        "headers": [
            {"name": "standard_metadata", "id": 0, "header_type": "standard_metadata", "metadata": true},
            {"name": "ethernet", "id": 1, "header_type": "ethernet_t", "metadata": false},
            {"name": "ipv4", "id": 2, "header_type": "ipv4_t", "metadata": false},
            {"name": "udp", "id": 3, "header_type": "udp_t", "metadata": false}
        ],
        "parsers": [{"name": "parser", "id": 0, "init_state": "start", "parse_states": [
            state(0, "start", vec![extract("ethernet")], vec![field("ethernet", "etherType")], &[("0x0800", "parse_ipv4")], None),
            state(1, "parse_ipv4", vec![extract("ipv4")], vec![field("ipv4", "protocol")], &[("0x11", "parse_udp")], None),
            state(2, "parse_udp", vec![extract("udp")], vec![], &[], None)
        ]}],
        "deparsers": [{"name": "deparser", "id": 0, "order": ["ethernet", "ipv4", "udp"]}],
        "calculations": [
            {"name": "calc", "id": 0, "algo": "csum16", "input": l4()},
            {"name": "calc_0", "id": 1, "algo": "csum16", "input": l4()}
        ],
        "checksums": [
            {"name": "cksum", "id": 0, "target": ["udp", "checksum"], "type": "generic", "calculation": "calc_0",
             "verify": true, "update": false, "if_cond": udp_valid},
            {"name": "cksum_0", "id": 1, "target": ["udp", "checksum"], "type": "generic", "calculation": "calc",
             "verify": false, "update": true, "if_cond": udp_valid}
        ],
        "actions": [
            action(0, "drop", vec![assign(std_f("egress_spec"), hex("0x01ff"))]),
            action(1, "nat", vec![
                assign(field("udp", "srcPort"), hex("0x1234")),
                assign(std_f("egress_spec"), hex("0x0001")),
            ])
        ],
        "pipelines": [
            pipeline(0, "ingress", Some("node_1"),
                vec![call(0, "tbl_drop", 0, "drop", None), call(1, "tbl_nat", 1, "nat", None)],
                vec![cond(0, "node_1", op("==", std_f("checksum_error"), hex("0x01")), Some("tbl_drop"), Some("tbl_nat"))]),
            pipeline(1, "egress", None, vec![], vec![])
        ]
    })
}

/// The UDP checksum of a packet `udp_packet` built: pseudo-header, UDP
/// header with a zero checksum, payload.
fn udp_checksum(p: &[u8]) -> u16 {
    let (ip, udp) = (&p[14..34], &p[34..]);
    let mut data = Vec::new();
    data.extend_from_slice(&ip[12..20]);
    data.extend_from_slice(&[0, 17]);
    data.extend_from_slice(&(udp.len() as u16).to_be_bytes());
    data.extend_from_slice(&udp[..6]);
    data.extend_from_slice(&[0, 0]);
    data.extend_from_slice(&udp[8..]);
    internet_checksum(&data)
}

/// Ethernet + IPv4 + UDP from port 0x4000 to 53 with `payload`, its UDP
/// checksum correct.
fn udp_packet(payload: &[u8]) -> Vec<u8> {
    let mut p = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    let udp_len = 8 + payload.len() as u16;
    p.extend_from_slice(&[0x45, 0, 0, 0, 0, 7, 0, 0, 64, 17, 0, 0, 192, 168, 3, 4, 10, 9, 8, 7]);
    p[16..18].copy_from_slice(&(20 + udp_len).to_be_bytes());
    p.extend_from_slice(&[0x40, 0x00, 0x00, 53]);
    p.extend_from_slice(&udp_len.to_be_bytes());
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(payload);
    let c = udp_checksum(&p);
    p[40..42].copy_from_slice(&c.to_be_bytes());
    p
}

#[test]
fn a_udp_checksum_over_a_pseudo_header_with_a_constant_zero_byte_is_verified_and_updated() {
    let program = udp_program();
    for (mode, mut sw) in switches(&program, &[]) {
        for payload in [&b"hello, world"[..], &b"odd"[..], &[0xff; 33][..]] {
            let pkt = udp_packet(payload);
            let mut want = pkt.clone();
            want[34..36].copy_from_slice(&[0x12, 0x34]);
            want[40..42].copy_from_slice(&[0, 0]);
            let c = udp_checksum(&want);
            want[40..42].copy_from_slice(&c.to_be_bytes());
            assert_eq!(run(&mut sw, &pkt), vec![(1, want)], "{mode:?}, payload {payload:?}");
            // A wrong checksum fails verification: dropped.
            let mut bad = pkt.clone();
            bad[41] ^= 0x10;
            assert_eq!(run(&mut sw, &bad), vec![], "{mode:?}, bad checksum, payload {payload:?}");
        }
        let report = sw.stage_report();
        assert!(report.contains("cksum_0 (update): csum16 over packed fields"), "{report}");
    }
}

/// One header `h` (a: 8, b: 32, c: 16 bits). Ingress sets `b` to the CRC-32
/// of `a`, the 4-bit constant 5, the 12-bit constant 0xabc and `a` again;
/// the deparser updates `c` to the csum16 of `a`, a zero byte and `b`.
fn hash_program() -> Value {
    json!({
        "header_types": [
            std_meta_type(0),
            {"name": "h_t", "id": 1, "fields": [["a", 8, false], ["b", 32, false], ["c", 16, false]]}
        ],
        "headers": [
            {"name": "standard_metadata", "id": 0, "header_type": "standard_metadata", "metadata": true},
            {"name": "h", "id": 1, "header_type": "h_t", "metadata": false}
        ],
        "parsers": [{"name": "parser", "id": 0, "init_state": "start",
            "parse_states": [state(0, "start", vec![extract("h")], vec![], &[], None)]}],
        "deparsers": [{"name": "deparser", "id": 0, "order": ["h"]}],
        "calculations": [
            {"name": "mix", "id": 0, "algo": "crc32", "input": [
                field("h", "a"),
                {"type": "hexstr", "value": "0x5", "bitwidth": 4},
                {"type": "hexstr", "value": "0x0abc", "bitwidth": 12},
                field("h", "a")
            ]},
            {"name": "sum", "id": 1, "algo": "csum16", "input": [
                field("h", "a"), {"type": "hexstr", "value": "0x00", "bitwidth": 8}, field("h", "b")
            ]}
        ],
        "checksums": [{"name": "cksum", "id": 0, "target": ["h", "c"], "type": "generic", "calculation": "sum",
            "verify": false, "update": true, "if_cond": null}],
        "actions": [action(0, "mix", vec![
            prim("modify_field_with_hash_based_offset", vec![
                field("h", "b"), hex("0x00000000"), json!({"type": "calculation", "value": "mix"}), hex("0x0100000000")
            ]),
            assign(std_f("egress_spec"), hex("0x0001")),
        ])],
        "pipelines": [
            pipeline(0, "ingress", Some("tbl_mix"), vec![call(0, "tbl_mix", 0, "mix", None)], vec![]),
            pipeline(1, "egress", None, vec![], vec![])
        ]
    })
}

#[test]
fn constants_in_hash_and_checksum_inputs_pack_with_their_bitwidth() {
    let program = hash_program();
    for (mode, mut sw) in switches(&program, &[]) {
        for a in [0x00u8, 0x3c, 0xff] {
            let pkt = [a, 9, 9, 9, 9, 9, 9, 0xee];
            // a, then 0101 and 1010_1011_1100: the constants fill one byte and a half each.
            let b = crc32(&[a, 0x5a, 0xbc, a]).to_be_bytes();
            let c = internet_checksum(&[a, 0, b[0], b[1], b[2], b[3]]).to_be_bytes();
            let want = vec![a, b[0], b[1], b[2], b[3], c[0], c[1], 0xee];
            assert_eq!(run(&mut sw, &pkt), vec![(1, want)], "{mode:?}, a = {a:#x}");
        }
    }
}

#[test]
fn a_calculation_constant_needs_a_bitwidth_and_no_sign() {
    let mut program = hash_program();
    program["calculations"][1]["input"][1].as_object_mut().expect("an object").remove("bitwidth");
    let e = sluice_engine::load_switch(&program.to_string()).err().expect("refused").to_string();
    assert!(e.starts_with("calculations[1].input[1]") && e.contains("bitwidth"), "{e}");
    let mut program = hash_program();
    program["calculations"][1]["input"][1]["value"] = json!("-0x01");
    let e = sluice_engine::load_switch(&program.to_string()).err().expect("refused").to_string();
    assert!(e.starts_with("calculations[1].input[1]") && e.contains("negative"), "{e}");
}

// ------------------------------------------------------------ egress queues

/// A program whose `q` header carries a priority (3 bits, then 5 of
/// padding) that ingress copies to `standard_metadata.priority` (egress
/// port 1), and three 32-bit fields egress fills with `enq_qdepth`,
/// `deq_timedelta` and `deq_qdepth`, as p4c emits `hdr.q.x = (bit<32>)
/// standard_metadata.y`.
fn queue_program() -> Value {
    let widen =
        |f: &str| json!({"type": "expression", "value": {"op": "&", "left": std_f(f), "right": hex("0xffffffff")}});
    json!({
        "header_types": [
            {"name": "scalars_0", "id": 0, "fields": []},
            std_meta_type(1),
            {"name": "q_t", "id": 2, "fields": [["prio", 3, false], ["pad", 5, false], ["enq_qdepth", 32, false],
                ["deq_timedelta", 32, false], ["deq_qdepth", 32, false]]}
        ],
        "headers": [
            {"name": "scalars", "id": 0, "header_type": "scalars_0", "metadata": true},
            {"name": "standard_metadata", "id": 1, "header_type": "standard_metadata", "metadata": true},
            {"name": "q", "id": 2, "header_type": "q_t", "metadata": false}
        ],
        "parsers": [{"name": "parser", "id": 0, "init_state": "start",
            "parse_states": [state(0, "start", vec![extract("q")], vec![], &[], None)]}],
        "deparsers": [{"name": "deparser", "id": 0, "order": ["q"]}],
        "actions": [
            action(0, "to_port_1", vec![
                assign(std_f("egress_spec"), hex("0x0001")),
                assign(std_f("priority"), field("q", "prio")),
            ]),
            action(1, "report", vec![
                assign(field("q", "enq_qdepth"), widen("enq_qdepth")),
                assign(field("q", "deq_timedelta"), widen("deq_timedelta")),
                assign(field("q", "deq_qdepth"), widen("deq_qdepth")),
            ]),
        ],
        "pipelines": [
            pipeline(0, "ingress", Some("tbl_to_port_1"), vec![call(0, "tbl_to_port_1", 0, "to_port_1", None)], vec![]),
            pipeline(1, "egress", Some("tbl_report"), vec![call(1, "tbl_report", 1, "report", None)], vec![])
        ]
    })
}

/// A packet of priority `prio` whose payload byte is `tag`.
fn queued_packet(prio: u8, tag: u8) -> Vec<u8> {
    let mut p = vec![prio << 5];
    p.extend_from_slice(&[0xee; 12]);
    p.push(tag);
    p
}

/// `(tag, enq_qdepth, deq_timedelta, deq_qdepth)` of a packet that left.
fn queue_report(b: &[u8]) -> (u8, u32, u32, u32) {
    let word = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().unwrap());
    (b[13], word(1), word(5), word(9))
}

fn released(sw: &mut Switch, now_us: u64) -> Vec<(u8, u32, u32, u32)> {
    let mut out = Vec::new();
    sw.release_queued_at(now_us, &mut |port, b| {
        assert_eq!(port, 1);
        out.push(queue_report(b));
    });
    out
}

#[test]
fn a_paced_egress_queue_fills_drops_when_full_and_reports_depths_and_delay() {
    for (mode, mut sw) in switches(&queue_program(), &[]) {
        // One packet per second on port 1: bmv2's `set_queue_rate 1 1`.
        assert!(sw.set_queue_rate(Some(1), None, 1), "{mode:?}");
        let mut sent = Vec::new();
        for tag in 0..70u8 {
            sw.process_at(0, &queued_packet(0, tag), 0, &mut |_, b| sent.push(queue_report(b)));
        }
        // The idle port's rate lets the first go at once, unqueued; the
        // others wait: bmv2's default depth, 64, the other 5 dropped.
        assert_eq!(sent, [(0, 0, 0, 0)], "{mode:?}");
        assert_eq!(sw.queued_packets(), 64, "{mode:?}");
        assert_eq!(sw.queue_drops(1, 0), 5, "{mode:?}");
        assert_eq!(sw.stats.dropped, 5, "{mode:?}");
        // The next is due a second after the first.
        assert!(released(&mut sw, 0).is_empty(), "{mode:?}");
        assert_eq!(sw.next_queue_departure_us(), Some(1_000_000), "{mode:?}");
        assert!(released(&mut sw, 999_999).is_empty(), "{mode:?}");
        assert_eq!(released(&mut sw, 1_000_000), [(1, 0, 1_000_000, 63)], "{mode:?}");
        // Released late, what was due goes at once (bmv2 schedules each
        // packet 1/rate after the one before it); each reports the queue it
        // found: the depth grows with the queue.
        assert_eq!(released(&mut sw, 3_000_000), [(2, 1, 3_000_000, 62), (3, 2, 3_000_000, 61)], "{mode:?}");
    }
}

#[test]
fn a_high_priority_class_leaves_before_a_congested_low_one_untouched() {
    for (mode, mut sw) in switches(&queue_program(), &[]) {
        sw.set_priority_queues(2);
        // The low class (priority 0) paced at 1 packet/s, the high one not.
        assert!(sw.set_queue_rate(Some(1), Some(0), 1), "{mode:?}");
        let mut at_once = Vec::new();
        for tag in 0..20u8 {
            sw.process_at(0, &queued_packet(0, tag), 0, &mut |_, b| at_once.push(queue_report(b)));
        }
        // The one low packet the rate allows left at once; 19 wait.
        assert_eq!(at_once, [(0, 0, 0, 0)], "{mode:?}");
        // Strict priority: the high packet goes at once, without delay, its
        // own queue empty; the low ones wait for their rate.
        sw.process_at(0, &queued_packet(1, 100), 10, &mut |_, b| at_once.push(queue_report(b)));
        assert_eq!(at_once[1..], [(100, 0, 0, 0)], "{mode:?}");
        assert!(released(&mut sw, 10).is_empty(), "{mode:?}");
        assert_eq!(sw.queued_packets(), 19, "{mode:?}");
        // A priority beyond the queues is dropped, as bmv2 does.
        let before = sw.stats.dropped;
        sw.process_at(0, &queued_packet(5, 101), 20, &mut |_, _| {});
        assert_eq!(sw.stats.dropped, before + 1, "{mode:?}");
    }
}

#[test]
fn priority_queues_without_rates_send_in_the_same_batch() {
    for (mode, mut sw) in switches(&queue_program(), &[]) {
        sw.set_priority_queues(8);
        let out = run(&mut sw, &queued_packet(3, 7));
        assert_eq!(out.len(), 1, "{mode:?}");
        assert_eq!(queue_report(&out[0].1), (7, 0, 0, 0), "{mode:?}");
        assert_eq!(sw.queued_packets(), 0, "{mode:?}");
        assert_eq!(sw.next_queue_departure_us(), None, "{mode:?}");
    }
}

/// The P4 tutorials' explicit congestion notification program, written as
/// p4c emits it (there is no P4 compiler here): IPv4 with `diffserv` split
/// into a 6-bit `tos` and the 2-bit `ecn`; ingress sends IPv4 to port 1
/// with the TTL decremented; egress sets `ecn` to 3 (congestion
/// experienced) on an ECN-capable packet (`ecn` 1 or 2) whose
/// `enq_qdepth` reached `ECN_THRESHOLD` (10); the deparser recomputes the
/// header checksum.
fn ecn_program() -> Value {
    let ipv4 = ["version", "ihl", "tos", "ecn", "totalLen", "identification", "flags", "fragOffset", "ttl", "protocol"];
    let mut csum_input: Vec<Value> = ipv4.iter().map(|f| field("ipv4", f)).collect();
    csum_input.extend([field("ipv4", "srcAddr"), field("ipv4", "dstAddr")]);
    let ect = op("or", op("==", field("ipv4", "ecn"), hex("0x01")), op("==", field("ipv4", "ecn"), hex("0x02")));
    let ttl_minus_1 = op("&", op("+", field("ipv4", "ttl"), hex("0xff")), hex("0xff"));
    json!({
        "header_types": [
            {"name": "scalars_0", "id": 0, "fields": []},
            std_meta_type(1),
            {"name": "ethernet_t", "id": 2, "fields": [["dstAddr", 48, false], ["srcAddr", 48, false], ["etherType", 16, false]]},
            {"name": "ipv4_t", "id": 3, "fields": [
                ["version", 4, false], ["ihl", 4, false], ["tos", 6, false], ["ecn", 2, false], ["totalLen", 16, false],
                ["identification", 16, false], ["flags", 3, false], ["fragOffset", 13, false], ["ttl", 8, false],
                ["protocol", 8, false], ["hdrChecksum", 16, false], ["srcAddr", 32, false], ["dstAddr", 32, false]]}
        ],
        "headers": [
            {"name": "scalars", "id": 0, "header_type": "scalars_0", "metadata": true},
            {"name": "standard_metadata", "id": 1, "header_type": "standard_metadata", "metadata": true},
            {"name": "ethernet", "id": 2, "header_type": "ethernet_t", "metadata": false},
            {"name": "ipv4", "id": 3, "header_type": "ipv4_t", "metadata": false}
        ],
        "parsers": [{"name": "parser", "id": 0, "init_state": "start", "parse_states": [
            state(0, "start", vec![extract("ethernet")], vec![field("ethernet", "etherType")], &[("0x0800", "parse_ipv4")], None),
            state(1, "parse_ipv4", vec![extract("ipv4")], vec![], &[], None)
        ]}],
        "deparsers": [{"name": "deparser", "id": 0, "order": ["ethernet", "ipv4"]}],
        "calculations": [{"name": "calc", "id": 0, "algo": "csum16", "input": csum_input}],
        "checksums": [{"name": "cksum", "id": 0, "target": ["ipv4", "hdrChecksum"], "type": "generic", "calculation": "calc",
            "verify": false, "update": true, "if_cond": op("d2b", Value::Null, field("ipv4", "$valid$"))}],
        "actions": [
            action(0, "ipv4_forward", vec![
                assign(std_f("egress_spec"), hex("0x0001")),
                assign(field("ipv4", "ttl"), ttl_minus_1),
            ]),
            action(1, "mark_ecn", vec![assign(field("ipv4", "ecn"), hex("0x03"))]),
        ],
        "pipelines": [
            pipeline(0, "ingress", Some("node_2"), vec![call(0, "tbl_ipv4_forward", 0, "ipv4_forward", None)],
                vec![cond(0, "node_2", op("d2b", Value::Null, field("ipv4", "$valid$")), Some("tbl_ipv4_forward"), None)]),
            pipeline(1, "egress", Some("node_5"), vec![call(1, "tbl_mark_ecn", 1, "mark_ecn", None)], vec![
                cond(1, "node_5", ect, Some("node_6"), None),
                cond(2, "node_6", op(">=", std_f("enq_qdepth"), hex("0x00000a")), Some("tbl_mark_ecn"), None)
            ])
        ]
    })
}

/// Ethernet + IPv4 (TTL 64, a correct checksum) with `ecn` in the low two
/// bits of the traffic class and `seq` in the identification field.
fn ecn_packet(ecn: u8, seq: u16) -> Vec<u8> {
    let mut p = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    p.extend_from_slice(&[0x45, 0xb8 | ecn, 0, 46, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 1, 1]);
    p[18..20].copy_from_slice(&seq.to_be_bytes());
    let c = internet_checksum(&p[14..34]);
    p[24..26].copy_from_slice(&c.to_be_bytes());
    p.extend_from_slice(&[0x5a; 26]);
    p
}

#[test]
fn ecn_marks_packets_enqueued_above_the_threshold_on_a_port_paced_below_the_offered_load() {
    for (mode, mut sw) in switches(&ecn_program(), &[]) {
        // Port 1 paced at 1 000 packets/s (`set_queue_rate 1000 1`) while a
        // packet arrives every 500 µs: the queue grows by one every 1 ms.
        assert!(sw.set_queue_rate(Some(1), None, 1000), "{mode:?}");
        let mut departed: Vec<Vec<u8>> = Vec::new();
        // What the queue held when each packet arrived, counted from outside:
        // the packets before it that had not left yet.
        let mut depth_at_enqueue = Vec::new();
        for seq in 0..60u16 {
            let t = u64::from(seq) * 500;
            sw.release_queued_at(t, &mut |port, b| {
                assert_eq!(port, 1);
                departed.push(b.to_vec());
            });
            depth_at_enqueue.push(usize::from(seq) - departed.len());
            // Every third packet is not ECN-capable; the others alternate
            // ECT(1) and ECT(0).
            let ecn = [0, 1, 2][usize::from(seq) % 3];
            // (One that finds the port idle and its rate allowing it leaves at once.)
            sw.process_at(0, &ecn_packet(ecn, seq), t, &mut |_, b| departed.push(b.to_vec()));
        }
        // Then the queue drains at the port's rate.
        while let Some(t) = sw.next_queue_departure_us() {
            sw.release_queued_at(t, &mut |_, b| departed.push(b.to_vec()));
        }
        assert_eq!(departed.len(), 60, "{mode:?}: the queue never filled (64 deep)");
        let mut marked = 0;
        for b in &departed {
            let seq = u16::from_be_bytes([b[18], b[19]]);
            let sent_ecn = [0, 1, 2][usize::from(seq) % 3];
            let congested = depth_at_enqueue[usize::from(seq)] >= 10;
            let want = if sent_ecn != 0 && congested { 3 } else { sent_ecn };
            assert_eq!(
                b[15] & 3,
                want,
                "{mode:?}: packet {seq}, enqueued behind {}",
                depth_at_enqueue[usize::from(seq)]
            );
            assert_eq!(b[15] >> 2, 0xb8 >> 2, "{mode:?}: the traffic class is kept");
            assert_eq!(b[22], 63, "{mode:?}: TTL decremented");
            assert_eq!(internet_checksum(&b[14..34]), 0, "{mode:?}: packet {seq}'s header checksum");
            marked += usize::from(b[15] & 3 == 3);
        }
        // FIFO order, and the queue did build past the threshold.
        let seqs: Vec<u16> = departed.iter().map(|b| u16::from_be_bytes([b[18], b[19]])).collect();
        assert_eq!(seqs, (0..60).collect::<Vec<_>>(), "{mode:?}");
        assert!(depth_at_enqueue[59] >= 25, "{mode:?}: {depth_at_enqueue:?}");
        assert!(marked >= 20, "{mode:?}: {marked} marked");

        // The same load without a rate: no queue builds, nothing is marked.
        let mut sw = sluice_engine::load_switch(&ecn_program().to_string()).expect("loads");
        sw.set_mode(mode).expect("mode");
        for seq in 0..60u16 {
            let out = run(&mut sw, &ecn_packet(1, seq));
            assert_eq!(out.len(), 1, "{mode:?}");
            assert_eq!(out[0].1[15] & 3, 1, "{mode:?}: unmarked without congestion");
        }
    }
}

/// An in-band telemetry program in P4_14's style (the queueing fields in
/// their own `queueing_metadata` header, with `qid`), written as p4c emits
/// it: a `probe` header (priority: 3 bits, hops: 5) sends the packet to port
/// 1 at its priority; egress appends one `int_rec` per hop (qid: 8,
/// enq_qdepth: 32, deq_timedelta: 32) after the probe and counts the hop.
fn int_program() -> Value {
    let widen = |f: &str| op("&", field("queueing_metadata", f), hex("0xffffffff"));
    json!({
        "header_types": [
            {"name": "standard_metadata", "id": 0, "fields": [
                ["ingress_port", 9, false], ["egress_spec", 9, false], ["egress_port", 9, false],
                ["instance_type", 32, false], ["packet_length", 32, false], ["priority", 3, false], ["_padding", 5, false]]},
            {"name": "queueing_metadata_t", "id": 1, "fields": [
                ["enq_timestamp", 48, false], ["enq_qdepth", 19, false], ["deq_timedelta", 32, false],
                ["deq_qdepth", 19, false], ["qid", 8, false], ["_padding", 2, false]]},
            {"name": "probe_t", "id": 2, "fields": [["priority", 3, false], ["hops", 5, false]]},
            {"name": "int_rec_t", "id": 3, "fields": [["qid", 8, false], ["enq_qdepth", 32, false], ["deq_timedelta", 32, false]]}
        ],
        "headers": [
            {"name": "standard_metadata", "id": 0, "header_type": "standard_metadata", "metadata": true},
            {"name": "queueing_metadata", "id": 1, "header_type": "queueing_metadata_t", "metadata": true},
            {"name": "probe", "id": 2, "header_type": "probe_t", "metadata": false},
            {"name": "int_rec", "id": 3, "header_type": "int_rec_t", "metadata": false}
        ],
        "parsers": [{"name": "parser", "id": 0, "init_state": "start",
            "parse_states": [state(0, "start", vec![extract("probe")], vec![], &[], None)]}],
        "deparsers": [{"name": "deparser", "id": 0, "order": ["probe", "int_rec"]}],
        "actions": [
            action(0, "to_port_1", vec![
                assign(std_f("egress_spec"), hex("0x0001")),
                assign(std_f("priority"), field("probe", "priority")),
            ]),
            action(1, "add_int_rec", vec![
                prim("add_header", vec![json!({"type": "header", "value": "int_rec"})]),
                assign(field("int_rec", "qid"), field("queueing_metadata", "qid")),
                assign(field("int_rec", "enq_qdepth"), widen("enq_qdepth")),
                assign(field("int_rec", "deq_timedelta"), field("queueing_metadata", "deq_timedelta")),
                assign(field("probe", "hops"), op("&", op("+", field("probe", "hops"), hex("0x01")), hex("0x1f"))),
            ]),
        ],
        "pipelines": [
            pipeline(0, "ingress", Some("tbl_to_port_1"), vec![call(0, "tbl_to_port_1", 0, "to_port_1", None)], vec![]),
            pipeline(1, "egress", Some("tbl_add_int_rec"), vec![call(1, "tbl_add_int_rec", 1, "add_int_rec", None)], vec![])
        ]
    })
}

#[test]
fn telemetry_records_grow_with_a_congested_queue_and_name_the_queue() {
    for (mode, mut sw) in switches(&int_program(), &[]) {
        sw.set_priority_queues(2);
        // The low class paced at 1 000 packets/s, offered 2 000.
        assert!(sw.set_queue_rate(Some(1), Some(0), 1000), "{mode:?}");
        // (tag, qid, enq_qdepth, deq_timedelta) of each departure.
        let mut records: Vec<(u8, u8, u32, u32)> = Vec::new();
        let mut collect = |b: &[u8]| {
            assert_eq!(b.len(), 1 + 9 + 1, "one probe, one record, the payload");
            assert_eq!(b[0] & 0x1f, 1, "one hop counted");
            let word = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().unwrap());
            records.push((b[10], b[1], word(2), word(6)));
        };
        for i in 0..40u64 {
            let t = i * 500;
            sw.release_queued_at(t, &mut |_, b| collect(b));
            sw.process_at(0, &[0, i as u8], t, &mut |_, b| collect(b));
            if i % 10 == 5 {
                // A high-priority probe (priority 1) now and then.
                sw.process_at(0, &[1 << 5, 100 + i as u8], t, &mut |_, b| collect(b));
                sw.release_queued_at(t, &mut |_, b| collect(b));
            }
        }
        let (high, low): (Vec<(u8, u8, u32, u32)>, Vec<_>) = records.iter().partition(|r| r.0 >= 100);
        assert_eq!(high.len(), 4, "{mode:?}: {records:?}");
        for r in &high {
            assert_eq!((r.1, r.2, r.3), (1, 0, 0), "{mode:?}: the high class sees no queue: {r:?}");
        }
        assert!(low.len() >= 15, "{mode:?}: {records:?}");
        for w in low.windows(2) {
            assert_eq!(w[0].1, 0, "{mode:?}: qid of the low class");
            assert!(w[1].2 >= w[0].2 && w[1].3 >= w[0].3, "{mode:?}: depth and delay grow: {w:?}");
        }
        let last = low.last().unwrap();
        assert!(last.2 >= 8 && last.3 >= 8_000, "{mode:?}: a congested queue shows: {last:?}");
    }
}

/// PSA on the same queues: `class_of_service` chooses the queue. The
/// program is p4c's `psa-unicast-or-drop-bmv2` from the PSA corpus: ingress
/// sends a packet to the port its destination MAC address names with class
/// of service = the source address's last bit; egress writes the egress
/// port and the class it sees into `output_data` (word0, word3).
#[test]
fn psa_class_of_service_chooses_the_queue() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/conformance/p4c-stf-psa/psa-unicast-or-drop-bmv2/psa-unicast-or-drop-bmv2.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let program: Value = serde_json::from_str(&text).expect("JSON");
    // To port 1, class of service `cos`, `tag` in word1's place.
    let packet = |cos: u8, tag: u8| {
        let mut p = vec![0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, cos, 0xff, 0xff];
        p.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef, tag, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        p
    };
    for (mode, mut sw) in switches(&program, &[]) {
        sw.set_priority_queues(2);
        // Class 0 paced at one packet per second on port 1; class 1 not.
        assert!(sw.set_queue_rate(Some(1), Some(0), 1), "{mode:?}");
        let report = |port: u32, b: &[u8]| {
            let word = |i: usize| u32::from_be_bytes(b[14 + 4 * i..18 + 4 * i].try_into().unwrap());
            (port, word(0), word(3))
        };
        let mut at_once = Vec::new();
        for tag in 0..5 {
            sw.process_at(4, &packet(0, tag), 0, &mut |p, b| at_once.push(report(p, b)));
        }
        // The one class-0 packet the rate allows left at once; 4 wait.
        assert_eq!(at_once, [(1, 1, 0)], "{mode:?}");
        // Class 1 goes at once, before the waiting class 0.
        sw.process_at(4, &packet(1, 9), 5, &mut |p, b| at_once.push(report(p, b)));
        assert_eq!(at_once[1..], [(1, 1, 1)], "{mode:?}");
        sw.release_queued_at(5, &mut |_, _| panic!("{mode:?}: class 0 waits for its rate"));
        assert_eq!(sw.queued_packets(), 4, "{mode:?}");
        assert_eq!(sw.next_queue_departure_us(), Some(1_000_000), "{mode:?}: 1/rate after the first (queued at 0)");
    }
}
