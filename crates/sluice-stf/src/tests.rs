//! Focused tests for each syntax feature and the value conversions.

use super::*;

fn one(text: &str) -> StfCommand {
    let lines = parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
    assert_eq!(lines.len(), 1, "{text:?}");
    lines.into_iter().next().unwrap().command
}

fn err(text: &str) -> StfError {
    match parse(text) {
        Ok(l) => panic!("{text:?} parsed unexpectedly: {l:?}"),
        Err(e) => e,
    }
}

fn pat(s: &str) -> ExpectPattern {
    ExpectPattern::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

fn kv(s: &str) -> KeyValue {
    KeyValue::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

fn hex(s: &str) -> Vec<u8> {
    assert!(s.len() & 1 == 0);
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

// ---------------------------------------------------------------- lines

#[test]
fn comments_blank_lines_and_line_numbers() {
    let text = "# header\n\n   \npacket 0 00 # trailing comment\n\t# indented comment\nexpect 1 01\n";
    let lines = parse(text).unwrap();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0].line, 4);
    assert_eq!(lines[0].command, StfCommand::Packet { port: 0, data: vec![0] });
    assert_eq!(lines[1].line, 6);
    assert!(parse("").unwrap().is_empty());
    assert!(parse("# only\n#comments\n").unwrap().is_empty());
}

#[test]
fn crlf_and_bom_are_tolerated() {
    let lines = parse("\u{feff}packet 0 0a0b\r\nexpect 0 0a0b $\r\n").unwrap();
    assert_eq!(lines[0].command, StfCommand::Packet { port: 0, data: vec![0x0a, 0x0b] });
    assert_eq!(lines[1].command, StfCommand::Expect { port: 0, pattern: Some(pat("0a0b$")) });
}

#[test]
fn keywords_are_case_insensitive() {
    assert_eq!(one("PACKET 3 ff"), StfCommand::Packet { port: 3, data: vec![0xff] });
    assert!(matches!(one("Expect 3 ff"), StfCommand::Expect { port: 3, .. }));
    assert!(matches!(one("ADD t k:1 a()"), StfCommand::Add { .. }));
    assert!(matches!(one("SetDefault t a()"), StfCommand::SetDefault { .. }));
    assert_eq!(one("WAIT"), StfCommand::Wait);
    assert_eq!(one("Remove ALL"), StfCommand::RemoveAll);
    assert_eq!(one("No_Packet"), StfCommand::NoPacket);
    assert_eq!(one("MC_MGRP_CREATE 1"), StfCommand::Passthrough { command: "mc_mgrp_create 1".into() });
}

#[test]
fn error_carries_line_number_and_message() {
    let e = err("packet 0 00\n\n# x\npacket 1 abc\n");
    assert_eq!(e.line, 4);
    assert!(e.message.contains("odd number"), "{}", e.message);
    assert!(e.to_string().starts_with("line 4: "), "{e}");
}

#[test]
fn unknown_command_is_an_error() {
    let e = err("frobnicate 1 2");
    assert_eq!(e.line, 1);
    assert!(e.message.contains("frobnicate"), "{}", e.message);
    // the keyword must be a word of its own
    assert!(parse("packet0 00").is_err());
}

// ---------------------------------------------------------------- packet

#[test]
fn packet_data_with_spaces_and_tabs() {
    assert_eq!(
        one("packet 12 000000000001\t000000000002 0800  45 0A"),
        StfCommand::Packet { port: 12, data: hex("0000000000010000000000020800450a") }
    );
    // grouping is irrelevant, even inside a byte
    assert_eq!(one("packet 0 0 1 2 3"), StfCommand::Packet { port: 0, data: vec![0x01, 0x23] });
}

#[test]
fn packet_errors() {
    assert!(err("packet 0 012").message.contains("odd"));
    assert!(err("packet 0 0g").message.contains("'g'"));
    assert!(err("packet 0 0*").message.contains("'*'"));
    assert!(err("packet 0").message.contains("no packet data"));
    assert!(err("packet").message.contains("missing port"));
    assert!(err("packet 0x1 00").message.contains("decimal"));
    assert!(err("packet 99999999999 00").message.contains("too large"));
}

// ---------------------------------------------------------------- expect

#[test]
fn expect_variants() {
    assert_eq!(one("expect 5"), StfCommand::Expect { port: 5, pattern: None });
    let StfCommand::Expect { port, pattern: Some(p) } = one("expect 1 01 **** ** ** ** $") else {
        panic!("not an expect with data")
    };
    assert_eq!(port, 1);
    assert!(p.exact_len);
    assert_eq!(p.nibbles.len(), 12);
    assert_eq!(&p.nibbles[..3], &[Some(0), Some(1), None]);
    // `$` glued to the data
    let StfCommand::Expect { pattern: Some(p), .. } = one("expect 0 00 AA$") else { panic!() };
    assert_eq!(p, pat("00aa $"));
    assert!(p.exact_len);
    // `$` alone: exactly the empty packet
    let StfCommand::Expect { port: 7, pattern: Some(p) } = one("expect 7$") else { panic!() };
    assert!(p.nibbles.is_empty() && p.exact_len);
    assert!(p.matches(&[]));
    assert!(!p.matches(&[0]));
}

#[test]
fn expect_errors() {
    assert!(err("expect 0 00 $ 00").message.contains("'$'"));
    assert!(err("expect 0 0$").message.contains("odd"));
    assert!(err("expect 0 0x").message.contains("'x'"));
    assert!(err("expect x 00").message.contains("port"));
}

#[test]
fn expect_prefix_semantics() {
    let p = pat("0102");
    assert!(p.matches(&[1, 2]));
    assert!(p.matches(&[1, 2, 3, 4]), "longer packet matches a prefix");
    assert!(!p.matches(&[1]), "shorter packet never matches");
    assert!(!p.matches(&[1, 3]));
    // odd digit count compares the high nibble of the last byte only
    let odd = pat("010");
    assert!(odd.matches(&[0x01, 0x0f]));
    assert!(!odd.matches(&[0x01, 0x1f]));
    assert!(!odd.matches(&[0x01]));
    // empty non-exact pattern matches anything
    assert!(pat("").matches(&[]) && pat("  ").matches(&[9, 9]));
}

#[test]
fn expect_exact_length() {
    let p = pat("0102 $");
    assert!(p.matches(&[1, 2]));
    assert!(!p.matches(&[1, 2, 3]));
    assert!(!p.matches(&[1]));
}

#[test]
fn expect_wildcards() {
    let nib = pat("0*");
    assert!(nib.matches(&[0x00]) && nib.matches(&[0x0f]));
    assert!(!nib.matches(&[0x10]));
    let byte = pat("aa ** cc$");
    assert!(byte.matches(&[0xaa, 0x00, 0xcc]));
    assert!(byte.matches(&[0xaa, 0xff, 0xcc]));
    assert!(!byte.matches(&[0xaa, 0xff, 0xcd]));
    assert!(!byte.matches(&[0xaa, 0xff]), "* does not match a missing byte");
    // hex digits are case-insensitive
    assert!(pat("AbCd").matches(&[0xab, 0xcd]));
}

#[test]
fn expect_describe_mismatch() {
    let p = pat("0a0b**0d");
    assert_eq!(p.describe_mismatch(&[0x0a, 0x0b, 0x77, 0x0d, 0x99]), None);
    let m = p.describe_mismatch(&[0x0a, 0x0c, 0, 0x0d]).unwrap();
    assert!(m.contains("nibble 3"), "{m}");
    assert!(m.contains("byte offset 1"), "{m}");
    assert!(m.contains("low nibble"), "{m}");
    assert!(m.contains("expected b, got c"), "{m}");
    let m = p.describe_mismatch(&[0x1a]).unwrap();
    assert!(m.contains("nibble 0") && m.contains("high nibble"), "{m}");
    assert!(m.contains("too short"), "{m}");
    let m = p.describe_mismatch(&[0x0a, 0x0b]).unwrap();
    assert!(!m.contains("difference"), "{m}");
    assert!(m.contains("too short") && m.contains("at least 4 bytes"), "{m}");
    let exact = pat("0a$");
    let m = exact.describe_mismatch(&[0x0a, 0]).unwrap();
    assert!(m.contains("too long") && m.contains("exactly 1 byte"), "{m}");
    assert!(exact.describe_mismatch(&[0x0a]).is_none());
}

#[test]
fn expect_display() {
    let p = pat("01 **** AB $");
    assert_eq!(p.to_string(), "01****ab$");
    assert_eq!(format!("{p:#}"), "01 ** ** ab $");
    assert_eq!(pat("0*1").to_string(), "0*1");
    assert_eq!(pat("0*1").to_string().parse::<ExpectPattern>().unwrap(), pat("0*1"));
}

// ---------------------------------------------------------------- add

#[test]
fn add_full_form() {
    let cmd = one("add test1 503 data.f1:0x****0202 ingress.setb1(val:7, port:0x3) = e1");
    let StfCommand::Add { table, priority, keys, action, params, id } = cmd else { panic!("not an add") };
    assert_eq!(table, "test1");
    assert_eq!(priority, Some(503));
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0].0, "data.f1");
    assert_eq!(keys[0].1.text(), "0x****0202");
    assert_eq!(keys[0].1.radix(), Radix::Hex);
    assert_eq!(action, "ingress.setb1");
    assert_eq!(params.len(), 2);
    assert_eq!(params[0].0, "val");
    assert_eq!(params[0].1.to_u64(), Some(7));
    assert_eq!(params[1].0, "port");
    assert_eq!(params[1].1.to_u64(), Some(3));
    assert_eq!(params[1].1.radix(), Radix::Hex);
    assert_eq!(id.as_deref(), Some("e1"));
}

#[test]
fn add_without_priority_several_keys_and_empty_args() {
    let StfCommand::Add { table, priority, keys, action, params, id } = one(
        "add t1 ethernet.srcAddr.slice:0x1f dstAddr_lsbs:0x010101010101 etherType_less_10:0xf00f ingressImpl.foo()",
    ) else {
        panic!()
    };
    assert_eq!(table, "t1");
    assert_eq!(priority, None);
    let names: Vec<_> = keys.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ["ethernet.srcAddr.slice", "dstAddr_lsbs", "etherType_less_10"]);
    assert_eq!(keys[1].1.to_exact(48).unwrap(), hex("010101010101"));
    assert_eq!(action, "ingressImpl.foo");
    assert!(params.is_empty());
    assert_eq!(id, None);
}

#[test]
fn add_tolerates_spacing_and_quotes() {
    let StfCommand::Add { table, keys, action, params, priority, .. } =
        one("add \"my table#1\" -5 \"hdr.h.f & 0xF\" : 0x0* \"act x\" ( a : 1 , b:0b11 )")
    else {
        panic!()
    };
    assert_eq!(table, "my table#1", "'#' inside quotes is not a comment");
    assert_eq!(priority, Some(-5));
    assert_eq!(keys[0].0, "hdr.h.f & 0xF");
    assert_eq!(keys[0].1.text(), "0x0*");
    assert_eq!(action, "act x");
    assert_eq!(params[1].1.to_u64(), Some(3));
}

#[test]
fn add_value_slash_len_and_stack_names() {
    let StfCommand::Add { keys, .. } = one("add lpm hdr.ipv4.dst:0x0a000000/8 stk[1].f:1 extra$0.h:0b1*1 a()") else {
        panic!()
    };
    assert_eq!(keys[0].1.prefix_len(), Some(8));
    assert_eq!(keys[0].1.text(), "0x0a000000/8");
    assert_eq!(keys[1].0, "stk[1].f");
    assert_eq!(keys[2].0, "extra$0.h");
    assert_eq!(keys[2].1.radix(), Radix::Binary);
    assert_eq!(keys[2].1.digits(), &[Some(1), None, Some(1)]);
    // spaces around '/' are fine too
    let StfCommand::Add { keys, .. } = one("add lpm k:0x0a000000 / 16 a()") else { panic!() };
    assert_eq!(keys[0].1.prefix_len(), Some(16));
}

#[test]
fn add_errors() {
    assert!(err("add t k:1").message.contains("end of line"));
    assert!(err("add t k:1 a(x:1").message.contains("',' or ')'"));
    assert!(err("add t k:1 a(x:1,)").message.contains("parameter name"));
    assert!(err("add t k:1 k:2 a()").message.contains("twice"));
    assert!(err("add t k:1 a(x:1, x:2)").message.contains("twice"));
    assert!(err("add t 0x10 k:1 a()").message.contains("priority"));
    assert!(err("add t k:1 a() extra").message.contains("unexpected"));
    assert!(err("add t k:").message.contains("value for key 'k'"));
    assert!(err("add t k: a()").message.contains("key 'k'"));
    assert!(err("add t k:12a a()").message.contains("invalid digit"));
    assert!(err("add t k:1** a()").message.contains("'*'"));
    assert!(err("add t 1bad:1 a()").message.contains("priority"));
    assert!(err("add t k.1x:1 a()").message.contains("invalid name"));
    assert!(err("add t k:1 a(x:0x1*)").message.contains("'*'"));
    assert!(err("add t k:0x1*/4 a()").message.contains("prefix length"));
    assert!(err("add \"t k:1 a()").message.contains("unterminated"));
    assert!(err("add").message.contains("table name"));
    assert!(err("add t k:1 a() =").message.contains("entry id"));
}

// ---------------------------------------------------------------- setdefault, others

#[test]
fn setdefault() {
    assert_eq!(
        one("setdefault ingress.t drop()"),
        StfCommand::SetDefault { table: "ingress.t".into(), action: "drop".into(), params: vec![] }
    );
    let StfCommand::SetDefault { params, .. } = one("setdefault t fwd(port:2, mac:0x0000000000aa)") else { panic!() };
    assert_eq!(params[1].0, "mac");
    assert_eq!(params[1].1.to_bytes(48).unwrap(), hex("0000000000aa"));
    assert!(err("setdefault t").message.contains("action name"));
    assert!(err("setdefault t a").message.contains("'('"));
    assert!(err("setdefault t k:1 a()").message.contains("'('"));
}

#[test]
fn passthrough_commands() {
    for text in [
        "mc_mgrp_create 1113",
        "mc_node_create 400 6",
        "mc_node_create 257 6 8",
        "mc_node_associate 1113 0",
        "mc_node_update 0 1 2",
        "mirroring_add 5 4",
        "mirroring_add_mc 8 3",
        "mirroring_delete 8",
        "mirroring_get 8",
        "counter_read c 1",
        "counter_write c 1 2 3",
        "register_read cIngress.regfile 5",
        "register_write cIngress.regfile 5 100",
        "register_reset cIngress.regfile",
        "meter_get_rates cIngress.meter0 2",
        "meter_set_rates cIngress.meter0 2 0.000005:4 0.00002:5",
        "meter_array_set_rates cIngress.meter0 0.000006:7 0.00008:9",
        "table_dump ingress.t",
    ] {
        assert_eq!(one(text), StfCommand::Passthrough { command: text.to_string() });
    }
    assert_eq!(
        one("  mirroring_add   5\t4   # clone to 4"),
        StfCommand::Passthrough { command: "mirroring_add 5\t4".into() }
    );
    assert_eq!(one("show_tables"), StfCommand::Passthrough { command: "show_tables".into() });
}

#[test]
fn wait_remove_no_packet() {
    assert_eq!(one("wait"), StfCommand::Wait);
    assert_eq!(one("remove all"), StfCommand::RemoveAll);
    assert_eq!(one("no_packet"), StfCommand::NoPacket);
    assert!(err("wait 5").message.contains("no arguments"));
    assert!(err("remove t 1").message.contains("remove all"));
    assert!(err("no_packet 0").message.contains("no arguments"));
}

#[test]
fn check_counter() {
    assert_eq!(
        one("check_counter cntDum(10) packets == 2"),
        StfCommand::CheckCounter {
            name: "cntDum".into(),
            entry: CounterEntry::Index(Number::parse("10").unwrap()),
            check: Some(CounterCheck {
                kind: CounterKind::Packets,
                op: CompareOp::Eq,
                value: Number::parse("2").unwrap(),
            }),
        }
    );
    assert_eq!(
        one("check_counter ingress.cnt($A)"),
        StfCommand::CheckCounter { name: "ingress.cnt".into(), entry: CounterEntry::Id("$A".into()), check: None }
    );
    for (op, want) in [
        ("!=", CompareOp::Ne),
        ("<", CompareOp::Lt),
        ("<=", CompareOp::Le),
        (">", CompareOp::Gt),
        (">=", CompareOp::Ge),
    ] {
        let StfCommand::CheckCounter { check: Some(c), .. } = one(&format!("check_counter c(e1) BYTES {op} 0x40"))
        else {
            panic!()
        };
        assert_eq!(c.kind, CounterKind::Bytes);
        assert_eq!(c.op, want);
        assert_eq!(c.value.to_u64(), Some(64));
    }
    assert!(CompareOp::Le.holds(3, 3) && !CompareOp::Lt.holds(3, 3));
    assert!(CompareOp::Ne.holds(1, 2) && !CompareOp::Eq.holds(1, 2));
    assert!(CompareOp::Gt.holds(3, 2) && CompareOp::Ge.holds(2, 2));
    assert!(err("check_counter c(1) packets = 2").message.contains("=="));
    assert!(err("check_counter c(1) frames == 2").message.contains("'frames'"));
    assert!(err("check_counter c 1").message.contains("'('"));
    assert!(err("check_counter c(1) packets == 2 3").message.contains("unexpected"));
}

#[test]
fn ports_collects_packet_and_expect_ports() {
    let lines =
        parse("packet 4 00\nexpect 3 00\nmc_node_create 0 9\nexpect 3 01\nexpect 24\nadd t k:7 a(port:8)\n").unwrap();
    assert_eq!(ports(&lines).into_iter().collect::<Vec<_>>(), vec![3, 4, 24]);
    assert!(ports(&[]).is_empty());
}

#[test]
fn stack_index_rewriting() {
    assert_eq!(stack_index_to_brackets("extra$0.h"), "extra[0].h");
    assert_eq!(stack_index_to_brackets("a$1.b$12.c"), "a[1].b[12].c");
    assert_eq!(stack_index_to_brackets("h.$valid$"), "h.$valid$");
    assert_eq!(stack_index_to_brackets("x$"), "x$");
    assert_eq!(stack_index_to_brackets("plain.name"), "plain.name");
}

// ---------------------------------------------------------------- numbers

#[test]
fn numbers() {
    let n = Number::parse("10").unwrap();
    assert_eq!((n.radix(), n.to_u64()), (Radix::Decimal, Some(10)));
    let n = Number::parse("0X0A").unwrap();
    assert_eq!((n.radix(), n.to_u64()), (Radix::Hex, Some(10)));
    let n = Number::parse("0b1010").unwrap();
    assert_eq!((n.radix(), n.to_u64()), (Radix::Binary, Some(10)));
    let n = Number::parse("-3").unwrap();
    assert!(n.is_negative());
    assert_eq!(n.to_i64(), Some(-3));
    assert_eq!(n.to_u64(), None);
    assert_eq!(n.to_bytes(8).unwrap(), vec![0xfd]);
    assert_eq!(n.to_bytes(12).unwrap(), vec![0x0f, 0xfd]);
    assert!(!Number::parse("-0").unwrap().is_negative());
    assert_eq!(Number::parse("0").unwrap().to_bytes(9).unwrap(), vec![0, 0]);
    assert_eq!(Number::parse("0x1ff").unwrap().to_bytes(9).unwrap(), vec![1, 0xff]);
    assert!(Number::parse("0x2ff").unwrap().to_bytes(9).is_err());
    assert_eq!(Number::parse("0x2ff").unwrap().to_bytes_wrapping(9), vec![0, 0xff]);
    assert_eq!(Number::parse("0x000001").unwrap().to_bytes(1).unwrap(), vec![1]);
    assert_eq!(Number::parse("-9223372036854775808").unwrap().to_i64(), Some(i64::MIN));
    assert_eq!(Number::parse("9223372036854775808").unwrap().to_i64(), None);
    let big = Number::parse("0x1_0000").err().unwrap();
    assert!(big.message().contains("invalid digit"), "{big}");
    assert!(Number::parse("0x").is_err());
    assert!(Number::parse("").is_err());
    assert!(Number::parse("0x1*").is_err());
    assert!(Number::parse("12ab").is_err());
    assert_eq!(Number::parse("0x0a").unwrap().to_string(), "0x0a");
}

#[test]
fn wide_numbers_use_byte_vectors() {
    let text = "123456789012345678901234567890123456789012345678901234567890";
    let want = hex("000000000000000000000000000000000013aaf504e4bc1e62173f87a4378c37b49c8ccff196ce3f0ad2");
    assert_eq!(Number::parse(text).unwrap().to_bytes(336).unwrap(), want);
    assert_eq!(kv(text).to_exact(336).unwrap(), want);
    let top = "69992023193056381579920071267763883691301421788582797965624659405118495974380029543152421664737722368"; // 2^335
    let v = kv(top).to_exact(336).unwrap();
    assert_eq!(v.len(), 42);
    assert_eq!(v[0], 0x80);
    assert!(v[1..].iter().all(|&b| b == 0));
    assert!(kv(top).to_exact(335).is_err());
    assert_eq!(Number::parse(top).unwrap().to_u128(), None);
}

// ---------------------------------------------------------------- key conversions

#[test]
fn ternary_examples_from_format_md() {
    let (v, m) = kv("0x****0101").to_ternary(32).unwrap();
    assert_eq!(v, hex("00000101"));
    assert_eq!(m, hex("0000ffff"));
    let (v, m) = kv("0x1").to_ternary(32).unwrap();
    assert_eq!(v, hex("00000001"));
    assert_eq!(m, hex("0000000f"));
}

#[test]
fn ternary_binary_and_odd_widths() {
    let (v, m) = kv("0b1*0").to_ternary(8).unwrap();
    assert_eq!((v, m), (vec![0b100], vec![0b101]));
    let (v, m) = kv("0x1*f").to_ternary(9).unwrap();
    assert_eq!((v, m), (vec![0x01, 0x0f], vec![0x01, 0x0f]));
    // digits beyond the width: '*' and zero bits are dropped...
    let (v, m) = kv("0x*ff").to_ternary(8).unwrap();
    assert_eq!((v, m), (vec![0xff], vec![0xff]));
    let (v, m) = kv("0x00ff").to_ternary(8).unwrap();
    assert_eq!((v, m), (vec![0xff], vec![0xff]));
    // ...but a one bit there can never match
    assert!(kv("0x1ff").to_ternary(8).is_err());
    let e = kv("10").to_ternary(8).unwrap_err();
    assert!(e.message().contains("decimal"), "{e}");
    assert!(kv("0x0a/8").to_ternary(8).is_err());
    // all wildcards: match anything
    let (v, m) = kv("0x****").to_ternary(16).unwrap();
    assert_eq!((v, m), (vec![0, 0], vec![0, 0]));
}

#[test]
fn lpm_examples_from_format_md() {
    assert_eq!(kv("0x0a0000**").to_lpm(32).unwrap(), (hex("0a000000"), 24));
    assert_eq!(kv("0x0a000001").to_lpm(32).unwrap(), (hex("0a000001"), 32));
    assert_eq!(kv("0x0a010065").to_lpm(32).unwrap(), (hex("0a010065"), 32));
    assert_eq!(kv("0x********").to_lpm(32).unwrap(), (hex("00000000"), 0));
    assert_eq!(kv("0b1010****").to_lpm(8).unwrap(), (vec![0xa0], 4));
}

#[test]
fn lpm_with_fewer_or_more_digits_than_the_field() {
    // fewer: missing leading digits are zeros inside the prefix
    assert_eq!(kv("0x0a**").to_lpm(32).unwrap(), (hex("00000a00"), 24));
    assert_eq!(kv("0xa0000**").to_lpm(32).unwrap(), (hex("0a000000"), 24));
    assert_eq!(kv("0x1").to_lpm(9).unwrap(), (vec![0, 1], 9));
    // more: extra leading digits must be zero (or '*')
    assert_eq!(kv("0x000a**").to_lpm(16).unwrap(), (hex("0a00"), 8));
    assert_eq!(kv("0x1**").to_lpm(9).unwrap(), (vec![0x01, 0x00], 1));
    assert_eq!(kv("0x***").to_lpm(8).unwrap(), (vec![0], 0));
    assert!(kv("0x1a**").to_lpm(8).is_err());
    // non-trailing '*' is not a prefix
    let e = kv("0x0a**01").to_lpm(24).unwrap_err();
    assert!(e.message().contains("end"), "{e}");
    // decimal: full-width prefix
    assert_eq!(kv("167772161").to_lpm(32).unwrap(), (hex("0a000001"), 32));
}

#[test]
fn lpm_p4c_runner_variant() {
    // identical to to_lpm when the digits cover the field
    for (text, width) in [("0x0a0000**", 32), ("0x0a000001", 32), ("0b1010****", 8)] {
        assert_eq!(kv(text).to_lpm_p4c(width).unwrap(), kv(text).to_lpm(width).unwrap(), "{text}");
    }
    // differs when fewer digits are written: prefix counts written digits only
    assert_eq!(kv("0x0a**").to_lpm_p4c(32).unwrap(), (hex("00000a00"), 8));
    assert_eq!(kv("0x**").to_lpm_p4c(32).unwrap(), (hex("00000000"), 0));
    assert_eq!(kv("0x**").to_lpm(32).unwrap(), (hex("00000000"), 24));
    // non-trailing '*' is counted, host bits are kept
    assert_eq!(kv("0x0a**01").to_lpm_p4c(24).unwrap(), (hex("0a0001"), 16));
    // where the runner fails
    assert!(kv("0x001").to_lpm_p4c(9).is_err(), "prefix 12 > 9");
    assert!(kv("10").to_lpm_p4c(32).is_err());
    assert!(kv("0x0a/8").to_lpm_p4c(32).is_err());
}

#[test]
fn lpm_value_slash_len() {
    assert_eq!(kv("0x0a0000ff/24").to_lpm(32).unwrap(), (hex("0a000000"), 24));
    assert_eq!(kv("10/4").to_lpm(8).unwrap(), (vec![0], 4));
    assert_eq!(kv("0xf0/4").to_lpm(8).unwrap(), (vec![0xf0], 4));
    assert_eq!(kv("0xff/0").to_lpm(8).unwrap(), (vec![0], 0));
    assert!(kv("0x0a/33").to_lpm(32).is_err());
    assert!(kv("0x1ff/8").to_lpm(8).is_err());
    assert!(KeyValue::parse("0x0a/x").is_err());
    assert!(kv("0x0a/8").to_exact(8).is_err());
}

#[test]
fn exact_conversions() {
    assert_eq!(kv("0x0a").to_exact(8).unwrap(), vec![0x0a]);
    assert_eq!(kv("10").to_exact(16).unwrap(), vec![0, 10]);
    assert_eq!(kv("0b1").to_exact(1).unwrap(), vec![1]);
    assert_eq!(kv("0x0001").to_exact(9).unwrap(), vec![0, 1], "leading zeros ok");
    assert_eq!(kv("-1").to_exact(9).unwrap(), vec![0x01, 0xff]);
    assert_eq!(kv("0").to_exact(0).unwrap(), Vec::<u8>::new());
    let e = kv("0x200").to_exact(9).unwrap_err();
    assert!(e.message().contains("9-bit"), "{e}");
    let e = kv("0x1*").to_exact(8).unwrap_err();
    assert!(e.message().contains("'*'"), "{e}");
    assert!(kv("-0x1").to_ternary(8).is_err());
    assert!(kv("-1").to_lpm(8).is_err());
    assert!(KeyValue::parse("-0x1*").is_err());
    assert!(KeyValue::parse("1*").is_err());
}

#[test]
fn key_value_accessors() {
    let k = kv("0x0a**");
    assert!(k.has_wildcards());
    assert_eq!(k.written_bits(), Some(16));
    assert_eq!(k.digits(), &[Some(0), Some(10), None, None]);
    assert!(!k.is_negative());
    assert_eq!(k.to_string(), "0x0a**");
    assert_eq!(kv("0b1*").written_bits(), Some(2));
    assert_eq!(kv("12").written_bits(), None);
    assert!(!kv("12").has_wildcards());
    assert_eq!(Radix::Hex.bits_per_digit(), Some(4));
    assert_eq!(Radix::Decimal.base(), 10);
}
