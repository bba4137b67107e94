//! CLI mistakes get bmv2's error names and the CLI answers that scripts
//! parse keep bmv2's exact wording.
//!
//! Programs are `examples/router.json` (tables `RouterIngress.ipv4_lpm` (lpm),
//! `RouterIngress.nexthop` (exact `meta.nexthop` -> `forward(port, src, dst)`),
//! counter `RouterIngress.port_rx`) and `examples/edge.json` (ternary+range
//! `acl`, selector-backed `routes`, register `last_len`, meter `policer`).

use std::path::Path;

use serde_json::{json, Value};
use sluice_control::cli;
use sluice_engine::Switch;

fn example(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
}

fn router_json() -> Value {
    serde_json::from_str(&example("router.json")).unwrap()
}

fn router() -> Switch {
    sluice_engine::load_switch(&example("router.json")).expect("router.json loads")
}

fn edge() -> Switch {
    sluice_engine::load_switch(&example("edge.json")).expect("edge.json loads")
}

/// Index of the table called `name` in the first pipeline.
fn table_index(v: &Value, name: &str) -> usize {
    v["pipelines"][0]["tables"]
        .as_array()
        .unwrap()
        .iter()
        .position(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no table {name}"))
}

fn cmd_err(sw: &mut Switch, line: &str) -> String {
    match cli::run(sw, line) {
        Ok(out) => panic!("`{line}` succeeded with {out:?}"),
        Err(e) => e.to_string(),
    }
}

fn cmd_ok(sw: &mut Switch, line: &str) -> String {
    cli::run(sw, line).unwrap_or_else(|e| panic!("`{line}` failed: {e}"))
}

fn assert_contains(text: &str, want: &str) {
    assert!(text.contains(want), "expected {want:?} in {text:?}");
}

/// An Ethernet + IPv4 packet (checksum correct, TTL 64) to `dst`, 60 bytes.
fn ipv4_packet(dst: [u8; 4]) -> Vec<u8> {
    let mut p = vec![0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 2, 0x08, 0x00];
    let mut ip = vec![0x45, 0, 0, 46, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1];
    ip.extend_from_slice(&dst);
    let sum: u32 = ip.chunks(2).map(|c| u16::from_be_bytes([c[0], c[1]]) as u32).sum();
    let sum = !(((sum & 0xffff) + (sum >> 16)) as u16);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    p.extend_from_slice(&ip);
    p.resize(60, 0xab);
    p
}

fn run(sw: &mut Switch, port: u32, pkt: &[u8]) -> Vec<(u32, Vec<u8>)> {
    let mut out = Vec::new();
    sw.process(port, pkt, &mut |p, b| out.push((p, b.to_vec())));
    out
}

// ---------------------------------------------------------------- program files

#[test]
fn cli_unknown_table_and_action() {
    let mut sw = router();
    assert_eq!(cmd_err(&mut sw, "table_add NoSuch.table NoAction 1 =>"), "Invalid table name (NoSuch.table)");
    assert_eq!(
        cmd_err(&mut sw, "table_add RouterIngress.nexthop NoSuchAction 1 =>"),
        "Invalid action name (NoSuchAction) for table RouterIngress.nexthop"
    );
    // An action that exists, but not in this table.
    assert_contains(
        &cmd_err(&mut sw, "table_add RouterIngress.nexthop RouterIngress.set_nexthop 1 => 2"),
        "Invalid action name (RouterIngress.set_nexthop) for table RouterIngress.nexthop",
    );
    assert_eq!(cmd_err(&mut sw, "table_num_entries nope"), "Invalid table name (nope)");
    assert_eq!(cmd_err(&mut sw, "counter_read nope 0"), "Invalid counter name (nope)");
    assert_eq!(cmd_err(&mut sw, "register_read nope 0"), "Invalid register name (nope)");
    assert_eq!(cmd_err(&mut sw, "frobnicate 1 2"), "Unknown command \"frobnicate\"");
    // Short names resolve when unique.
    assert_eq!(cmd_ok(&mut sw, "table_num_entries nexthop"), "0");
}

#[test]
fn cli_wrong_number_of_action_params() {
    let mut sw = router();
    let e = cmd_err(&mut sw, "table_add RouterIngress.nexthop RouterIngress.forward 1 => 2");
    assert_contains(&e, "RouterIngress.forward needs 3 parameters, got 1");
    assert_contains(&e, "BAD_ACTION_DATA");
    let e = cmd_err(&mut sw, "table_add RouterIngress.nexthop RouterIngress.forward 1 => 2 0 0 0");
    assert_contains(&e, "needs 3 parameters, got 4");
    let e = cmd_err(&mut sw, "table_set_default RouterIngress.nexthop RouterIngress.forward 1");
    assert_contains(&e, "needs 3 parameters, got 1");
    // Match fields: one is needed.
    let e = cmd_err(&mut sw, "table_add RouterIngress.nexthop RouterIngress.drop =>");
    assert_contains(&e, "needs 1 match fields, got 0");
    assert_contains(&e, "BAD_MATCH_KEY");
    assert_contains(&cmd_err(&mut sw, "table_add RouterIngress.nexthop RouterIngress.drop 1"), "Missing \"=>\"");
    assert_eq!(cmd_ok(&mut sw, "table_num_entries RouterIngress.nexthop"), "0", "failed adds must not add");
}

#[test]
fn cli_bad_key_and_param_values() {
    let mut sw = router();
    let lpm = "table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop";
    assert_contains(&cmd_err(&mut sw, &format!("{lpm} 10.0.0.300/8 => 1")), "Invalid value \"10.0.0.300\"");
    assert_contains(&cmd_err(&mut sw, &format!("{lpm} 10.0.0.0 => 1")), "expected value/prefix_length");
    assert_contains(&cmd_err(&mut sw, &format!("{lpm} 10.0.0.0/33 => 1")), "Prefix length 33 is larger");
    assert_contains(&cmd_err(&mut sw, &format!("{lpm} 10.0.0.0/x => 1")), "Invalid prefix length \"x\"");
    assert_contains(&cmd_err(&mut sw, &format!("{lpm} 10.0.0.0/8 => 0x")), "Invalid value \"0x\"");
    // meta.nexthop is 16 bits.
    let nh = "table_add RouterIngress.nexthop RouterIngress.drop";
    assert_eq!(cmd_err(&mut sw, &format!("{nh} 65536 =>")), "Value \"65536\" is too large for a 16-bit field");
    assert_contains(&cmd_err(&mut sw, &format!("{nh} 1z =>")), "Invalid value \"1z\" for a 16-bit field");
    // port is 9 bits.
    assert_contains(
        &cmd_err(&mut sw, "table_add RouterIngress.nexthop RouterIngress.forward 1 => 512 0 0"),
        "too large for a 9-bit field",
    );
    assert_contains(
        &cmd_err(&mut sw, "table_add RouterIngress.nexthop RouterIngress.forward 1 => 1 00:11:22:33:44 0"),
        "Invalid value \"00:11:22:33:44\"",
    );
    // Ternary and range syntax (edge's acl).
    let mut sw = edge();
    let acl = "table_add EdgeIngress.acl EdgeIngress.permit";
    let e = cmd_err(&mut sw, &format!("{acl} 1 0&&&0 0&&&0 0&&&0 0&&&0 0->1 0->1 => 1"));
    assert_contains(&e, "Invalid ternary value \"1\": expected value&&&mask");
    let e = cmd_err(&mut sw, &format!("{acl} 0&&&0 0&&&0 0&&&0 0&&&0 0&&&0 5 0->1 => 1"));
    assert_contains(&e, "Invalid range value \"5\": expected start->end");
    let e = cmd_err(&mut sw, &format!("{acl} 0&&&0 0&&&0 0&&&0 0&&&0 0&&&0 0->1 0->1 =>"));
    assert_contains(&e, "a priority");
    let e = cmd_err(&mut sw, &format!("{acl} 0&&&0 0&&&0 0&&&0 0&&&0 0&&&0 0->1 0->1 => high"));
    assert_contains(&e, "Invalid priority \"high\"");
}

#[test]
fn cli_table_full_duplicate_and_invalid_handle() {
    // A nexthop table with room for two entries.
    let mut v = router_json();
    let t = table_index(&v, "RouterIngress.nexthop");
    v["pipelines"][0]["tables"][t]["max_size"] = json!(2);
    let mut sw = sluice_engine::load_switch(&v.to_string()).unwrap();
    let add = |n: u32| format!("table_add RouterIngress.nexthop RouterIngress.forward {n} => 2 00:00:00:00:00:01 0x2");
    assert_eq!(cmd_ok(&mut sw, &add(1)), "Entry has been added with handle 0");
    assert_eq!(cmd_ok(&mut sw, &add(2)), "Entry has been added with handle 1");
    assert_eq!(cmd_err(&mut sw, &add(3)), "Invalid table operation (TABLE_FULL)");
    let e = cmd_err(&mut sw, &add(2));
    assert!(e.starts_with("Invalid table operation (DUPLICATE_ENTRY"), "{e}");
    assert_eq!(cmd_ok(&mut sw, "table_num_entries RouterIngress.nexthop"), "2");

    assert_eq!(cmd_err(&mut sw, "table_delete RouterIngress.nexthop 7"), "Invalid table operation (INVALID_HANDLE)");
    assert_eq!(cmd_ok(&mut sw, "table_delete RouterIngress.nexthop 0"), "");
    assert_eq!(cmd_err(&mut sw, "table_delete RouterIngress.nexthop 0"), "Invalid table operation (INVALID_HANDLE)");
    assert_contains(&cmd_err(&mut sw, "table_delete RouterIngress.nexthop"), "Missing argument");
    assert_contains(&cmd_err(&mut sw, "table_delete RouterIngress.nexthop x"), "Invalid value \"x\"");
    // The freed index is reused with a new version in the top 8 bits, as bmv2
    // does (docs/bmv2-semantics.md §6.3); the table has room again.
    assert_eq!(cmd_ok(&mut sw, &add(3)), "Entry has been added with handle 16777216");
    assert_eq!(cmd_err(&mut sw, "table_delete RouterIngress.nexthop 0"), "Invalid table operation (EXPIRED_HANDLE)");
    assert_eq!(
        cmd_err(&mut sw, "table_modify RouterIngress.nexthop RouterIngress.drop 5"),
        "Invalid table operation (INVALID_HANDLE)"
    );
    // Duplicates are found in LPM tables by value and prefix length.
    let mut sw = router();
    let lpm = "table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop";
    assert_eq!(cmd_ok(&mut sw, &format!("{lpm} 10.0.0.0/8 => 1")), "Entry has been added with handle 0");
    assert_eq!(cmd_ok(&mut sw, &format!("{lpm} 10.0.0.0/16 => 1")), "Entry has been added with handle 1");
    // 10.1.2.3/8 is 10.0.0.0/8 once masked.
    let e = cmd_err(&mut sw, &format!("{lpm} 10.1.2.3/8 => 2"));
    assert!(e.starts_with("Invalid table operation (DUPLICATE_ENTRY"), "{e}");
}

#[test]
fn cli_action_profile_errors() {
    let mut sw = edge();
    // An action profile's table takes members and groups, not actions.
    assert_eq!(
        cmd_err(
            &mut sw,
            "table_add EdgeIngress.routes EdgeIngress.set_nexthop 10.0.0.0/8 => 2 00:00:00:00:00:01 00:00:00:00:00:02"
        ),
        "Invalid table operation (WRONG_TABLE_TYPE)"
    );
    assert_eq!(
        cmd_ok(
            &mut sw,
            "act_prof_create_member EdgeIngress.ecmp EdgeIngress.set_nexthop 2 00:00:00:00:00:01 00:00:00:00:00:02"
        ),
        "Member has been created with handle 0"
    );
    assert_eq!(cmd_ok(&mut sw, "act_prof_create_group EdgeIngress.ecmp"), "Group has been created with handle 0");
    assert_eq!(
        cmd_err(&mut sw, "table_indirect_add_with_group EdgeIngress.routes 10.0.0.0/8 => 0"),
        "Invalid table operation (EMPTY_GRP)"
    );
    assert_eq!(
        cmd_err(&mut sw, "table_indirect_add EdgeIngress.routes 10.0.0.0/8 => 5"),
        "Invalid table operation (INVALID_MBR_HANDLE)"
    );
    assert_eq!(
        cmd_err(&mut sw, "act_prof_add_member_to_group EdgeIngress.ecmp 0 9"),
        "Invalid action profile operation (INVALID_GRP_HANDLE)"
    );
    assert_eq!(cmd_ok(&mut sw, "act_prof_add_member_to_group EdgeIngress.ecmp 0 0"), "");
    assert_eq!(
        cmd_err(&mut sw, "act_prof_add_member_to_group EdgeIngress.ecmp 0 0"),
        "Invalid action profile operation (MBR_ALREADY_IN_GRP)"
    );
    assert_eq!(
        cmd_ok(&mut sw, "table_indirect_add_with_group EdgeIngress.routes 10.0.0.0/8 => 0"),
        "Entry has been added with handle 0"
    );
    assert_eq!(cmd_err(&mut sw, "act_prof_create_group nope"), "Invalid action profile name (nope)");
}

// ---------------------------------------------------------------- CLI answers

#[test]
fn cli_success_answers_keep_bmv2_wording() {
    let mut sw = router();
    assert_eq!(
        cmd_ok(&mut sw, "table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop 10.0.0.0/8 => 7"),
        "Entry has been added with handle 0"
    );
    assert_eq!(
        cmd_ok(&mut sw, "table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop 10.1.0.0/16 => 8"),
        "Entry has been added with handle 1"
    );
    assert_eq!(
        cmd_ok(
            &mut sw,
            "table_add RouterIngress.nexthop RouterIngress.forward 7 => 3 00:00:00:00:00:aa 00:00:00:00:00:bb"
        ),
        "Entry has been added with handle 0"
    );
    // Handles count per table.
    assert_eq!(cmd_ok(&mut sw, "table_num_entries RouterIngress.ipv4_lpm"), "2");
    assert_eq!(cmd_ok(&mut sw, "table_set_default RouterIngress.nexthop RouterIngress.drop"), "");

    // Two packets in on port 1 (60 bytes each), one routed out of port 3.
    let out = run(&mut sw, 1, &ipv4_packet([10, 2, 3, 4]));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, 3);
    assert_eq!(&out[0].1[..12], &[0, 0, 0, 0, 0, 0xbb, 0, 0, 0, 0, 0, 0xaa]);
    assert!(run(&mut sw, 1, &ipv4_packet([192, 168, 0, 1])).is_empty(), "a route miss drops");

    assert_eq!(
        cmd_ok(&mut sw, "counter_read RouterIngress.port_rx 1"),
        "RouterIngress.port_rx[1]= (120 bytes, 2 packets)"
    );
    assert_eq!(
        cmd_ok(&mut sw, "counter_read RouterIngress.port_rx 0"),
        "RouterIngress.port_rx[0]= (0 bytes, 0 packets)"
    );
    // The answer names the counter as the command does, as bmv2's CLI prints it.
    assert_eq!(cmd_ok(&mut sw, "counter_read port_rx 511"), "port_rx[511]= (0 bytes, 0 packets)");
    assert_eq!(cmd_err(&mut sw, "counter_read RouterIngress.port_rx 512"), "Invalid counter operation (INVALID_INDEX)");
    assert_eq!(cmd_ok(&mut sw, "counter_reset RouterIngress.port_rx"), "");
    assert_eq!(
        cmd_ok(&mut sw, "counter_read RouterIngress.port_rx 1"),
        "RouterIngress.port_rx[1]= (0 bytes, 0 packets)"
    );
}

#[test]
fn cli_register_and_meter_answers() {
    let mut sw = edge();
    // last_len[ingress_port] = packet length, for every packet.
    run(&mut sw, 2, &ipv4_packet([10, 0, 0, 1]));
    assert_eq!(cmd_ok(&mut sw, "register_read EdgeIngress.last_len 2"), "EdgeIngress.last_len[2]= 60");
    assert_eq!(cmd_ok(&mut sw, "register_read EdgeIngress.last_len 3"), "EdgeIngress.last_len[3]= 0");
    assert_eq!(cmd_ok(&mut sw, "register_write EdgeIngress.last_len 3 0xdead"), "");
    assert_eq!(cmd_ok(&mut sw, "register_read last_len 3"), "last_len[3]= 57005");
    assert_eq!(
        cmd_err(&mut sw, "register_read EdgeIngress.last_len 512"),
        "Invalid register operation (INVALID_INDEX)"
    );
    assert_eq!(
        cmd_err(&mut sw, "register_write EdgeIngress.last_len 512 1"),
        "Invalid register operation (INVALID_INDEX)"
    );
    assert_contains(
        &cmd_err(&mut sw, "register_write EdgeIngress.last_len 1 4294967296"),
        "too large for a 32-bit field",
    );
    let all = cmd_ok(&mut sw, "register_read EdgeIngress.last_len");
    assert!(all.starts_with("EdgeIngress.last_len= 0, 0, 60, 57005, 0"), "{all}");
    assert_eq!(all.matches(", ").count(), 511);

    assert_eq!(cmd_ok(&mut sw, "meter_set_rates EdgeIngress.policer 4 0.5:100 1:200"), "");
    assert_eq!(
        cmd_ok(&mut sw, "meter_get_rates EdgeIngress.policer 4"),
        "0: info rate = 0.5, burst size = 100\n1: info rate = 1.0, burst size = 200"
    );
    assert_contains(&cmd_err(&mut sw, "meter_set_rates EdgeIngress.policer 4 0.5:100"), "expected 2 but got 1");
    assert_eq!(
        cmd_err(&mut sw, "meter_set_rates EdgeIngress.policer 4 2:100 1:200"),
        "Invalid meter operation (INVALID_INFO_RATE_VALUE)"
    );
    assert_contains(
        &cmd_err(&mut sw, "meter_set_rates EdgeIngress.policer 4 fast:100 1:1"),
        "Error while parsing rates",
    );
    assert_eq!(cmd_err(&mut sw, "meter_get_rates EdgeIngress.policer 1024"), "Invalid meter operation (INVALID_INDEX)");
}

#[test]
fn cli_defaults_follow_bmv2s_const_and_table_kind_rules() {
    let mut sw = edge();
    // p4c marks a keyless table's default entry const (action and data): no default at all.
    assert_eq!(
        cmd_err(&mut sw, "table_set_default tbl_drop EdgeIngress.drop"),
        "Invalid table operation (DEFAULT_ENTRY_IS_CONST)"
    );
    assert_eq!(cmd_ok(&mut sw, "table_reset_default tbl_drop"), "");
    // An indirect table takes a member, not a direct default.
    assert_eq!(
        cmd_err(&mut sw, "table_set_default EdgeIngress.routes NoAction"),
        "Invalid table operation (WRONG_TABLE_TYPE)"
    );
    assert_eq!(
        cmd_err(&mut sw, "table_reset_default EdgeIngress.routes"),
        "Invalid table operation (WRONG_TABLE_TYPE)"
    );
    assert_eq!(cmd_ok(&mut sw, "table_indirect_reset_default EdgeIngress.routes"), "");
    assert_eq!(cmd_ok(&mut sw, "table_set_default EdgeIngress.sources EdgeIngress.permit"), "");
}

#[test]
fn cli_indirect_default_takes_a_member() {
    let mut sw = edge();
    assert_eq!(
        cmd_ok(
            &mut sw,
            "act_prof_create_member EdgeIngress.ecmp EdgeIngress.set_nexthop 1 00:5e:00:00:00:01 02:00:00:00:01:01"
        ),
        "Member has been created with handle 0"
    );
    assert_eq!(cmd_ok(&mut sw, "table_indirect_set_default EdgeIngress.routes 0"), "");
    assert_contains(&cmd_err(&mut sw, "table_indirect_set_default EdgeIngress.routes 7"), "INVALID_MBR_HANDLE");
    assert_contains(&cmd_err(&mut sw, "table_indirect_set_default EdgeIngress.acl 0"), "not indirect");
}
