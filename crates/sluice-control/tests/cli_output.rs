//! The exact text of the built-in CLI's answers: `simple_switch_CLI`'s
//! layouts (bmv2 `tools/runtime_CLI.py`, `sswitch_CLI.py`) for dumps, lists
//! and reads, on a program with every match kind, an action with several
//! parameters, an indirect table with a selector and an idle timeout.

use sluice_control::cli;
use sluice_engine::runtime::Resource;
use sluice_engine::Switch;

const PROGRAM: &str = include_str!("data/cli_tables.json");

fn switch() -> Switch {
    sluice_engine::load_switch(PROGRAM).expect("the test program loads")
}

/// Runs each line; returns the answer of the last one.
fn run(sw: &mut Switch, lines: &[&str]) -> String {
    let mut last = String::new();
    for l in lines {
        last = cli::run(sw, l).unwrap_or_else(|e| panic!("`{l}` failed: {e}"));
    }
    last
}

fn lines(text: &[&str]) -> String {
    text.join("\n")
}

fn table(sw: &Switch, name: &str) -> usize {
    sw.index_of(Resource::Table, name).unwrap()
}

const ROUTES: [&str; 2] = [
    "table_add MyIngress.routes MyIngress.rewrite 0x0800 10.1.0.0/16 => 3 00:aa:bb:cc:dd:ee 02:00:00:00:00:01",
    "table_add MyIngress.routes MyIngress.set_port 0x86dd 192.168.1.0/24 => 511",
];

#[test]
fn table_dump_prints_exact_and_lpm_keys_in_hex_and_each_action_parameter_apart() {
    let mut sw = switch();
    run(&mut sw, &ROUTES);
    assert_eq!(
        run(&mut sw, &["table_dump MyIngress.routes"]),
        lines(&[
            "==========",
            "TABLE ENTRIES",
            "**********",
            "Dumping entry 0x0",
            "Match key:",
            "* ethernet.etherType  : EXACT     0800",
            "* ipv4.dstAddr        : LPM       0a010000/16",
            "Action entry: MyIngress.rewrite - 03, aabbccddee, 020000000001",
            "**********",
            "Dumping entry 0x1",
            "Match key:",
            "* ethernet.etherType  : EXACT     86dd",
            "* ipv4.dstAddr        : LPM       c0a80100/24",
            "Action entry: MyIngress.set_port - 01ff",
            "==========",
            "Dumping default entry",
            "Action entry: NoAction - ",
            "==========",
        ])
    );
}

#[test]
fn table_dump_of_an_empty_table_shows_the_default_set_by_the_control_plane() {
    let mut sw = switch();
    let out = run(
        &mut sw,
        &[
            "table_set_default MyIngress.routes MyIngress.rewrite 7 00:00:00:00:00:07 00:00:00:00:00:08",
            "table_dump MyIngress.routes",
        ],
    );
    assert_eq!(
        out,
        lines(&[
            "==========",
            "TABLE ENTRIES",
            "==========",
            "Dumping default entry",
            "Action entry: MyIngress.rewrite - 07, 07, 08",
            "==========",
        ])
    );
}

#[test]
fn ternary_range_validity_and_optional_keys_dump_with_their_priority() {
    let mut sw = switch();
    run(
        &mut sw,
        &[
            "table_add MyIngress.acl MyIngress.drop 10.0.0.0&&&255.0.0.0 80->443 1 6 => 10",
            "table_add MyIngress.acl MyIngress.set_port 0&&&0 0->0xffff 0 * => 2 20",
        ],
    );
    assert_eq!(
        run(&mut sw, &["table_dump MyIngress.acl"]),
        lines(&[
            "==========",
            "TABLE ENTRIES",
            "**********",
            "Dumping entry 0x0",
            "Match key:",
            "* ipv4.srcAddr        : TERNARY   0a000000 &&& ff000000",
            "* ipv4.dport          : RANGE     0050 -> 01bb",
            "* ipv4_valid          : EXACT     01",
            "* ipv4.protocol       : OPTIONAL  06 &&& ff",
            "Priority: 10",
            "Action entry: MyIngress.drop - ",
            "**********",
            "Dumping entry 0x1",
            "Match key:",
            "* ipv4.srcAddr        : TERNARY   00000000 &&& 00000000",
            "* ipv4.dport          : RANGE     0000 -> ffff",
            "* ipv4_valid          : EXACT     00",
            "* ipv4.protocol       : OPTIONAL  00 &&& 00",
            "Priority: 20",
            "Action entry: MyIngress.set_port - 02",
            "==========",
            "Dumping default entry",
            "Action entry: NoAction - ",
            "==========",
        ])
    );
}

#[test]
fn a_validity_match_key_is_named_after_its_header_and_dumps_as_one_byte() {
    let mut sw = switch();
    let out = run(&mut sw, &["table_add legacy MyIngress.drop 1 =>", "table_dump_entry legacy 0"]);
    assert_eq!(
        out,
        lines(&[
            "Dumping entry 0x0",
            "Match key:",
            "* ipv4_valid          : VALID     01",
            "Action entry: MyIngress.drop - ",
        ])
    );
}

#[test]
fn table_dump_entry_shows_one_entry_and_its_idle_timeout() {
    let mut sw = switch();
    run(&mut sw, &ROUTES);
    let t = table(&sw, "MyIngress.routes");
    sw.set_entry_ttl(t, 1, 500).unwrap();
    assert_eq!(
        run(&mut sw, &["table_dump_entry MyIngress.routes 1"]),
        lines(&[
            "Dumping entry 0x1",
            "Match key:",
            "* ethernet.etherType  : EXACT     86dd",
            "* ipv4.dstAddr        : LPM       c0a80100/24",
            "Action entry: MyIngress.set_port - 01ff",
            "Life: 0ms since hit, timeout is 500ms",
        ])
    );
    // A handle whose entry is gone, then reused by a newer entry.
    run(&mut sw, &["table_delete MyIngress.routes 0"]);
    assert_eq!(
        cli::run(&mut sw, "table_dump_entry MyIngress.routes 0").unwrap_err().to_string(),
        "Invalid table operation (INVALID_HANDLE)"
    );
    run(&mut sw, &[ROUTES[0]]);
    assert_eq!(
        cli::run(&mut sw, "table_dump_entry MyIngress.routes 0").unwrap_err().to_string(),
        "Invalid table operation (EXPIRED_HANDLE)"
    );
    assert!(run(&mut sw, &["table_dump_entry MyIngress.routes 16777216"]).starts_with("Dumping entry 0x1000000\n"));
}

#[test]
fn an_lpm_key_reads_back_as_it_was_added_and_matches_by_its_prefix() {
    let mut sw = switch();
    run(&mut sw, &["table_add MyIngress.routes MyIngress.set_port 0x0800 10.1.2.3/16 => 1"]);
    let dump = run(&mut sw, &["table_dump MyIngress.routes"]);
    assert!(dump.contains("* ipv4.dstAddr        : LPM       0a010203/16"), "{dump}");
    // Found by any value of the same prefix, shown as added.
    let found = run(&mut sw, &["table_dump_entry_from_key MyIngress.routes 0x0800 10.1.0.0/16"]);
    assert!(found.contains("0a010203/16"), "{found}");
    // The same prefix with other bits past it is the same key.
    let dup = cli::run(&mut sw, "table_add MyIngress.routes MyIngress.set_port 0x0800 10.1.9.9/16 => 2").unwrap_err();
    assert!(dup.to_string().contains("DUPLICATE_ENTRY") || dup.to_string().contains("duplicate"), "{dup}");
}

#[test]
fn table_dump_entry_from_key_finds_entries_by_key_and_priority() {
    let mut sw = switch();
    run(&mut sw, &ROUTES);
    run(&mut sw, &["table_add MyIngress.acl MyIngress.set_port 10.0.0.0&&&255.0.0.0 80->443 1 6 => 4 10"]);
    assert_eq!(
        run(&mut sw, &["table_dump_entry_from_key MyIngress.routes 0x0800 10.1.0.0/16"]),
        lines(&[
            "Dumping entry 0x0",
            "Match key:",
            "* ethernet.etherType  : EXACT     0800",
            "* ipv4.dstAddr        : LPM       0a010000/16",
            "Action entry: MyIngress.rewrite - 03, aabbccddee, 020000000001",
        ])
    );
    assert_eq!(
        run(&mut sw, &["table_dump_entry_from_key MyIngress.acl 10.0.0.0&&&255.0.0.0 80->443 1 6 10"]),
        lines(&[
            "Dumping entry 0x0",
            "Match key:",
            "* ipv4.srcAddr        : TERNARY   0a000000 &&& ff000000",
            "* ipv4.dport          : RANGE     0050 -> 01bb",
            "* ipv4_valid          : EXACT     01",
            "* ipv4.protocol       : OPTIONAL  06 &&& ff",
            "Priority: 10",
            "Action entry: MyIngress.set_port - 04",
        ])
    );
    for missing in [
        "table_dump_entry_from_key MyIngress.routes 0x0800 10.2.0.0/16",
        "table_dump_entry_from_key MyIngress.acl 10.0.0.0&&&255.0.0.0 80->443 1 6 11",
    ] {
        assert_eq!(
            cli::run(&mut sw, missing).unwrap_err().to_string(),
            "Invalid table operation (BAD_MATCH_KEY)",
            "{missing}"
        );
    }
}

const ECMP: [&str; 7] = [
    "act_prof_create_member MyIngress.ecmp_ap MyIngress.rewrite 1 00:00:00:00:00:01 00:00:00:00:00:02",
    "act_prof_create_member MyIngress.ecmp_ap MyIngress.set_port 2",
    "act_prof_create_group MyIngress.ecmp_ap",
    "act_prof_add_member_to_group MyIngress.ecmp_ap 1 0",
    "act_prof_add_member_to_group MyIngress.ecmp_ap 0 0",
    "table_indirect_add MyIngress.ecmp 5 => 0",
    "table_indirect_add_with_group MyIngress.ecmp 6 => 0",
];

#[test]
fn indirect_table_dump_lists_entries_then_members_and_groups() {
    let mut sw = switch();
    run(&mut sw, &ECMP);
    assert_eq!(
        run(&mut sw, &["table_dump MyIngress.ecmp"]),
        lines(&[
            "==========",
            "TABLE ENTRIES",
            "**********",
            "Dumping entry 0x0",
            "Match key:",
            "* scalars.userMetadata.nhop: EXACT     0005",
            "Index: member(0)",
            "**********",
            "Dumping entry 0x1",
            "Match key:",
            "* scalars.userMetadata.nhop: EXACT     0006",
            "Index: group(0)",
            "==========",
            "MEMBERS",
            "**********",
            "Dumping member 0",
            "Action entry: MyIngress.rewrite - 01, 01, 02",
            "**********",
            "Dumping member 1",
            "Action entry: MyIngress.set_port - 02",
            "==========",
            "GROUPS",
            "**********",
            "Dumping group 0",
            "Members: [0, 1]",
            "==========",
            "Dumping default entry",
            "EMPTY",
            "==========",
        ])
    );
}

#[test]
fn members_and_groups_dump_through_the_profile_or_its_table() {
    let mut sw = switch();
    run(&mut sw, &ECMP);
    let member = lines(&["Dumping member 1", "Action entry: MyIngress.set_port - 02"]);
    assert_eq!(run(&mut sw, &["act_prof_dump_member MyIngress.ecmp_ap 1"]), member);
    assert_eq!(run(&mut sw, &["table_dump_member MyIngress.ecmp 1"]), member);
    let group = lines(&["Dumping group 0", "Members: [0, 1]"]);
    assert_eq!(run(&mut sw, &["act_prof_dump_group ecmp_ap 0"]), group);
    assert_eq!(run(&mut sw, &["table_dump_group ecmp 0"]), group);
    run(&mut sw, &["act_prof_remove_member_from_group MyIngress.ecmp_ap 0 0"]);
    assert_eq!(
        run(&mut sw, &["act_prof_dump MyIngress.ecmp_ap"]),
        lines(&[
            "==========",
            "MEMBERS",
            "**********",
            "Dumping member 0",
            "Action entry: MyIngress.rewrite - 01, 01, 02",
            "**********",
            "Dumping member 1",
            "Action entry: MyIngress.set_port - 02",
            "==========",
            "GROUPS",
            "**********",
            "Dumping group 0",
            "Members: [1]",
        ])
    );
    let mut e = |c: &str| cli::run(&mut sw, c).unwrap_err().to_string();
    assert_eq!(e("act_prof_dump_member MyIngress.ecmp_ap 9"), "Invalid table operation (INVALID_MBR_HANDLE)");
    assert_eq!(e("act_prof_dump_group MyIngress.ecmp_ap 9"), "Invalid table operation (INVALID_GRP_HANDLE)");
    assert_eq!(e("table_dump_member MyIngress.routes 0"), "Cannot run this command on non-indirect table");
}

#[test]
fn show_tables_and_table_info_list_keys_with_cli_names_kinds_and_widths() {
    let mut sw = switch();
    assert_eq!(
        run(&mut sw, &["show_tables"]),
        lines(&[
            "MyIngress.acl                  [implementation=None, mk=ipv4.srcAddr(ternary, 32),\tipv4.dport(range, 16),\tipv4_valid(exact, 1),\tipv4.protocol(optional, 8)]",
            "MyIngress.ecmp                 [implementation=MyIngress.ecmp_ap, mk=scalars.userMetadata.nhop(exact, 16)]",
            "MyIngress.routes               [implementation=None, mk=ethernet.etherType(exact, 16),\tipv4.dstAddr(lpm, 32)]",
            "legacy                         [implementation=None, mk=ipv4_valid(valid, 1)]",
        ])
    );
    assert_eq!(
        run(&mut sw, &["table_info routes"]),
        lines(&[
            "MyIngress.routes               [implementation=None, mk=ethernet.etherType(exact, 16),\tipv4.dstAddr(lpm, 32)]",
            &"*".repeat(80),
            "MyIngress.rewrite              [port(9),\tdmac(48),\tsmac(48)]",
            "MyIngress.set_port             [port(9)]",
            "NoAction                       []",
        ])
    );
}

#[test]
fn show_actions_and_table_show_actions_sort_by_name_with_parameter_widths() {
    let mut sw = switch();
    assert_eq!(
        run(&mut sw, &["show_actions"]),
        lines(&[
            "MyIngress.drop                 []",
            "MyIngress.rewrite              [port(9),\tdmac(48),\tsmac(48)]",
            "MyIngress.set_port             [port(9)]",
            "NoAction                       []",
        ])
    );
    assert_eq!(
        run(&mut sw, &["table_show_actions legacy"]),
        lines(&["MyIngress.drop                 []", "NoAction                       []"])
    );
}

#[test]
fn counter_and_register_reads_name_the_object_as_the_command_does() {
    let mut sw = switch();
    run(&mut sw, &["counter_write MyIngress.port_pkts 3 2 120", "register_write MyIngress.last_seen 1 0x2a"]);
    assert_eq!(run(&mut sw, &["counter_read port_pkts 3"]), "port_pkts[3]= (120 bytes, 2 packets)");
    assert_eq!(run(&mut sw, &["counter_read MyIngress.port_pkts 3"]), "MyIngress.port_pkts[3]= (120 bytes, 2 packets)");
    assert_eq!(run(&mut sw, &["register_read last_seen 1"]), "last_seen[1]= 42");
    assert_eq!(run(&mut sw, &["register_read MyIngress.last_seen"]), "MyIngress.last_seen= 0, 42, 0, 0");
}

#[test]
fn mirroring_get_prints_the_session_struct_port_first() {
    let mut sw = switch();
    assert_eq!(run(&mut sw, &["mirroring_add 3 2", "mirroring_get 3"]), "MirroringSessionConfig(port=2, mgid=None)");
    assert_eq!(run(&mut sw, &["mirroring_add_mc 4 7", "mirroring_get 4"]), "MirroringSessionConfig(port=None, mgid=7)");
}

#[test]
fn mc_dump_lists_groups_with_their_nodes_ports_and_lags() {
    let mut sw = switch();
    run(&mut sw, &["mc_mgrp_create 1"]);
    assert_eq!(
        run(&mut sw, &["mc_node_create 5 1 2"]),
        "Creating node with rid 5 , port map 110 and lag map \nnode was created with handle 0"
    );
    assert_eq!(
        run(&mut sw, &["mc_node_create 6 0 3 | 2"]),
        "Creating node with rid 6 , port map 1001 and lag map 100\nnode was created with handle 1"
    );
    // The port map has a digit per port number: numbers are bounded.
    assert!(cli::run(&mut sw, "mc_node_create 7 4294967295").is_err());
    run(&mut sw, &["mc_node_associate 1 0", "mc_mgrp_create 2", "mc_node_associate 2 1", "mc_mgrp_create 3"]);
    assert_eq!(
        run(&mut sw, &["mc_dump"]),
        lines(&[
            "==========",
            "MC ENTRIES",
            "**********",
            "mgrp(1)",
            "  -> (L1h=0, rid=5) -> (ports=[1, 2], lags=[])",
            "**********",
            "mgrp(2)",
            "  -> (L1h=1, rid=6) -> (ports=[0, 3], lags=[2])",
            "**********",
            "mgrp(3)",
            "==========",
            "LAGS",
            "==========",
        ])
    );
}

#[test]
fn lags_are_set_updated_and_dumped_as_simple_pre_lag_shows_them() {
    let mut sw = switch();
    run(&mut sw, &["mc_mgrp_create 1", "mc_node_create 0 1 | 3", "mc_node_associate 1 0"]);
    assert_eq!(run(&mut sw, &["mc_set_lag_membership 3 4 6 5"]), "Setting lag membership: 3 <- 1110000");
    assert_eq!(run(&mut sw, &["mc_set_lag_membership 256 2"]), "Setting lag membership: 256 <- 100");
    assert_eq!(cli::run(&mut sw, "mc_set_lag_membership 257 2").unwrap_err().0, "Invalid PRE operation (ERROR)");
    assert_eq!(cli::run(&mut sw, "mc_set_lag_membership x 2").unwrap_err().0, "Bad format for lag index");
    assert_eq!(cli::run(&mut sw, "mc_set_lag_membership 3 2 2").unwrap_err().0, "Found duplicate lag number '2'");
    assert_eq!(cli::run(&mut sw, "mc_node_create 0 1 1").unwrap_err().0, "Found duplicate port number '1'");
    assert_eq!(cli::run(&mut sw, "mc_node_create 0 -1").unwrap_err().0, "'-1' is not a valid port number");
    let dump = run(&mut sw, &["mc_dump"]);
    assert!(dump.contains("  -> (L1h=0, rid=0) -> (ports=[1], lags=[3])"), "{dump}");
    assert!(dump.ends_with("LAGS\nlag(3) -> ports=[4, 5, 6]\nlag(256) -> ports=[2]\n=========="), "{dump}");
    // An update replaces both lists: without a LAG list the node has none.
    assert_eq!(run(&mut sw, &["mc_node_update 0 2"]), "Updating node 0 with port map 100 and lag map ");
    assert!(run(&mut sw, &["mc_dump"]).contains("(ports=[2], lags=[])"));
    run(&mut sw, &["mc_node_update 0 | 3 256"]);
    assert!(run(&mut sw, &["mc_dump"]).contains("(ports=[], lags=[3, 256])"));
}

#[test]
fn parser_value_sets_list_with_their_width_and_values_in_hex() {
    let mut sw = switch();
    assert_eq!(run(&mut sw, &["show_pvs"]), "MyParser.tpids                 [compressed bitwidth:16]");
    assert_eq!(run(&mut sw, &["pvs_add MyParser.tpids 0x8100", "pvs_add tpids 0x88a8", "pvs_get tpids"]), "8100\n88a8");
}

/// Every dump of the switch's state the CLI prints, for comparing two switches.
fn dumps(sw: &mut Switch) -> String {
    let tables: Vec<String> = sw.program().tables.iter().map(|t| t.name.clone()).collect();
    let mut out: Vec<String> = tables.iter().map(|t| run(sw, &[&format!("table_dump {t}")])).collect();
    out.push(run(sw, &["act_prof_dump MyIngress.ecmp_ap"]));
    out.join("\n")
}

/// `serialize_state`'s dump restores into a fresh switch of the same
/// program as the same state: every match kind (an LPM key as it was
/// added, ternary and range with priorities, validity, optional
/// wildcards), defaults set by the control plane (an indirect one too),
/// members and groups with the handles they had (gaps left by deletions
/// included); a dump of another program, or no dump at all, is refused.
#[test]
fn a_state_dump_restores_the_same_state_into_the_same_program() {
    use cli::state;
    let mut sw = switch();
    run(&mut sw, &ROUTES);
    run(
        &mut sw,
        &[
            "table_add MyIngress.routes MyIngress.set_port 0x0800 10.9.9.9/12 => 4",
            "table_add MyIngress.acl MyIngress.drop 10.0.0.0&&&255.0.0.0 80->443 1 6 => 10",
            "table_add MyIngress.acl MyIngress.set_port 0&&&0 0->0xffff 0 * => 2 20",
            "table_set_default MyIngress.acl MyIngress.set_port 7",
            "act_prof_create_member MyIngress.ecmp_ap MyIngress.set_port 9",
        ],
    );
    run(&mut sw, &ECMP);
    run(
        &mut sw,
        &[
            // Members 3 and 4, then 3 deleted: a gap before 4; groups 1 and 2, 1 deleted.
            "act_prof_create_member MyIngress.ecmp_ap MyIngress.set_port 3",
            "act_prof_create_member MyIngress.ecmp_ap MyIngress.set_port 4",
            "act_prof_delete_member MyIngress.ecmp_ap 3",
            "act_prof_create_group MyIngress.ecmp_ap",
            "act_prof_create_group MyIngress.ecmp_ap",
            "act_prof_delete_group MyIngress.ecmp_ap 1",
            "act_prof_add_member_to_group MyIngress.ecmp_ap 4 2",
            "table_indirect_add_with_group MyIngress.ecmp 7 => 2",
            "table_indirect_set_default MyIngress.ecmp 4",
        ],
    );
    let md5 = state::config_md5(PROGRAM);
    let text = state::serialize(&sw, &md5);
    assert!(text.starts_with(&format!("{}\n{md5}\n", state::FORMAT_LINE)), "{text}");
    let mut back = switch();
    let n = state::restore(&mut back, &md5, &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert!(n > 10, "{n} commands:\n{text}");
    assert_eq!(dumps(&mut back), dumps(&mut sw), "the restored state differs; the dump:\n{text}");
    // The handles free after a restore are the same too.
    let next = "act_prof_create_member MyIngress.ecmp_ap MyIngress.set_port 5";
    assert_eq!(run(&mut back, &[next]), run(&mut sw, &[next]));

    let mut other = switch();
    let wrong = state::restore(&mut other, &state::config_md5("{}"), &text).unwrap_err();
    assert!(wrong.contains("does not match the program"), "{wrong}");
    let none = state::restore(&mut other, &md5, "table_add x\n").unwrap_err();
    assert!(none.contains("not a Sluice state dump"), "{none}");
    let bad =
        state::restore(&mut other, &md5, &format!("{}\n{md5}\ntable_add nope\n", state::FORMAT_LINE)).unwrap_err();
    assert!(bad.starts_with("line 3: table_add nope:"), "{bad}");
}

/// Meter rates are in the dump (cells never configured are not), and
/// come back exactly.
#[test]
fn a_state_dump_carries_meter_rates() {
    use cli::state;
    let json =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/examples/edge.json")).unwrap();
    let mut sw = sluice_engine::load_switch(&json).unwrap();
    let meter = sw.program().meters[0].name.clone();
    run(&mut sw, &[&format!("meter_set_rates {meter} 3 0.0001:1500 0.0005:3000")]);
    let md5 = state::config_md5(&json);
    let text = state::serialize(&sw, &md5);
    assert_eq!(text.matches("meter_set_rates").count(), 1, "{text}");
    let mut back = sluice_engine::load_switch(&json).unwrap();
    state::restore(&mut back, &md5, &text).unwrap();
    let get = format!("meter_get_rates {meter} 3");
    assert_eq!(run(&mut back, &[&get]), run(&mut sw, &[&get]));
    assert!(run(&mut back, &[&get]).contains("0.0001"), "{}", run(&mut back, &[&get]));
}
