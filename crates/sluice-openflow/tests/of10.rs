//! OpenFlow 1.0 codec tests against the public API: round trips of every
//! message type, byte-exact encodings worked out by hand from the
//! OpenFlow 1.0.0 structures (ofp_match, flow_mod, packet_in,
//! features_reply, error), the 1.0 error type and code for malformed
//! input, and a no-panic sweep over truncated, corrupted and random bytes.

use sluice_openflow::of10::*;
use sluice_openflow::{OfError, HEADER_LEN};

/// Bytes from hex digits, whitespace ignored.
fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    assert!(digits.len().is_multiple_of(2), "odd number of hex digits");
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).expect("ascii"), 16).expect("hex digit"))
        .collect()
}

fn sample_match() -> Match10 {
    Match10 {
        wildcards: wildcards::DL_VLAN | wildcards::DL_VLAN_PCP | wildcards::NW_TOS | (8 << wildcards::NW_SRC_SHIFT),
        in_port: 3,
        dl_src: [0x00, 0x11, 0x22, 0x33, 0x44, 0x55],
        dl_dst: [0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb],
        dl_vlan: 0x0123,
        dl_vlan_pcp: 5,
        dl_type: 0x0800,
        nw_tos: 0x10,
        nw_proto: 6,
        nw_src: 0x0a00_0001,
        nw_dst: 0xc0a8_0102,
        tp_src: 1234,
        tp_dst: 80,
    }
}

/// `sample_match()` as `ofp_match`.
const SAMPLE_MATCH_HEX: &str = "00300802 0003 001122334455 66778899aabb 0123 05 00 0800 10 06 0000 \
                                0a000001 c0a80102 04d2 0050";

fn sample_port(port_no: u16, name: &str) -> PhyPort10 {
    PhyPort10 {
        port_no,
        hw_addr: [0x0a, 0x0b, 0x0c, 0x0d, 0x0e, port_no as u8],
        name: name.to_string(),
        config: 1,
        state: 0x200,
        curr: 0x0a0,
        advertised: 0x2c0,
        supported: 0x2ff,
        peer: 0x40,
    }
}

fn all_actions() -> Vec<Action10> {
    vec![
        Action10::Output { port: 2, max_len: 0 },
        Action10::Output { port: port10::CONTROLLER, max_len: 128 },
        Action10::SetVlanVid(0x0abc),
        Action10::SetVlanPcp(6),
        Action10::StripVlan,
        Action10::SetDlSrc([2, 0, 0, 0, 0, 1]),
        Action10::SetDlDst([2, 0, 0, 0, 0, 2]),
        Action10::SetNwSrc(0x0a01_0203),
        Action10::SetNwDst(0xc0a8_0001),
        Action10::SetNwTos(0xb8),
        Action10::SetTpSrc(4321),
        Action10::SetTpDst(443),
        Action10::Enqueue { port: 7, queue_id: 0x0102_0304 },
        Action10::Vendor { vendor: 0x0000_2320, data: vec![0, 0x12, 1, 2, 3, 4, 5, 6] },
        Action10::Output { port: port10::FLOOD, max_len: 0 },
    ]
}

fn sample_flow_mod() -> FlowMod10 {
    FlowMod10 {
        matched: sample_match(),
        cookie: 0x0102_0304_0506_0708,
        command: flow_mod_command10::ADD,
        idle_timeout: 10,
        hard_timeout: 30,
        priority: 0x8000,
        buffer_id: NO_BUFFER10,
        out_port: port10::NONE,
        flags: flow_mod_flags10::SEND_FLOW_REM,
        actions: vec![Action10::Output { port: port10::CONTROLLER, max_len: 128 }],
    }
}

/// One message of every type, with non-trivial values.
fn messages() -> Vec<Message10> {
    vec![
        Message10::Hello(vec![]),
        Message10::Hello(vec![0, 1, 0, 8, 0, 0, 0, 0x12]),
        Message10::Error {
            typ: error_type10::BAD_REQUEST,
            code: bad_request10::BAD_TYPE,
            data: vec![1, 22, 0, 8, 0, 0, 0, 1],
        },
        Message10::EchoRequest(b"ping 42".to_vec()),
        Message10::EchoReply(b"pong 42".to_vec()),
        Message10::Vendor { vendor: 0x0000_2320, data: vec![0, 0, 0, 0x0c, 9, 8, 7] },
        Message10::FeaturesRequest,
        Message10::FeaturesReply(FeaturesReply10 {
            datapath_id: 0x0000_1122_3344_5566,
            n_buffers: 256,
            n_tables: 2,
            capabilities: 0xc7,
            actions: 0xfff,
            ports: vec![sample_port(1, "eth1"), sample_port(2, "a-port-name-15c"), sample_port(port10::LOCAL, "br0")],
        }),
        Message10::FeaturesReply(FeaturesReply10 {
            datapath_id: 1,
            n_buffers: 0,
            n_tables: 1,
            capabilities: 0,
            actions: 1,
            ports: vec![],
        }),
        Message10::GetConfigRequest,
        Message10::GetConfigReply { flags: 2, miss_send_len: 128 },
        Message10::SetConfig { flags: 1, miss_send_len: 0xffff },
        Message10::PacketIn(PacketIn10 {
            buffer_id: 0x100,
            total_len: 60,
            in_port: 5,
            reason: packet_in_reason10::ACTION,
            data: (0..60).collect(),
        }),
        Message10::FlowRemoved(FlowRemoved10 {
            matched: sample_match(),
            cookie: 0xfeed_face_dead_beef,
            priority: 100,
            reason: flow_removed_reason10::HARD_TIMEOUT,
            duration_sec: 3600,
            duration_nsec: 999_999_999,
            idle_timeout: 60,
            packet_count: 1 << 40,
            byte_count: (1 << 50) + 7,
        }),
        Message10::PortStatus(PortStatus10 { reason: port_reason10::MODIFY, desc: sample_port(9, "veth9") }),
        Message10::PacketOut(PacketOut10 {
            buffer_id: NO_BUFFER10,
            in_port: port10::CONTROLLER,
            actions: all_actions(),
            data: vec![0xff; 64],
        }),
        Message10::PacketOut(PacketOut10 { buffer_id: 77, in_port: 1, actions: vec![], data: vec![] }),
        Message10::FlowMod(FlowMod10 { actions: all_actions(), ..sample_flow_mod() }),
        Message10::FlowMod(FlowMod10 {
            matched: Match10::all(),
            command: flow_mod_command10::DELETE,
            out_port: 4,
            actions: vec![],
            ..sample_flow_mod()
        }),
        Message10::PortMod(PortMod10 {
            port_no: 4,
            hw_addr: [0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 4],
            config: 0x21,
            mask: 0x25,
            advertise: 0x0f,
        }),
        Message10::StatsRequest {
            typ: stats_type10::FLOW,
            flags: 0,
            body: {
                let mut b = hex(SAMPLE_MATCH_HEX);
                b.extend_from_slice(&[0xff, 0, 0xff, 0xff]);
                b
            },
        },
        Message10::StatsRequest { typ: stats_type10::DESC, flags: 0, body: vec![] },
        Message10::StatsReply { typ: stats_type10::TABLE, flags: 1, body: vec![7; 64] },
        Message10::BarrierRequest,
        Message10::BarrierReply,
        Message10::QueueGetConfigRequest { port: 3 },
        Message10::QueueGetConfigReply { port: 3, queues: vec![0, 0, 0, 1, 0, 0x18, 0, 0] },
    ]
}

#[test]
fn every_message_type_round_trips() {
    let mut seen = std::collections::BTreeSet::new();
    for (i, m) in messages().into_iter().enumerate() {
        let xid = 0x1000_0000 + i as u32;
        let bytes = encode10(&m, xid);
        assert_eq!(bytes[0], OFP10);
        assert_eq!(bytes[1], m.type_code());
        assert_eq!(usize::from(u16::from_be_bytes([bytes[2], bytes[3]])), bytes.len());
        assert_eq!(u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]), xid);
        let (got_xid, back) = decode10(&bytes).unwrap_or_else(|e| panic!("{m:?}: {e}"));
        assert_eq!(got_xid, xid);
        assert_eq!(back, m);
        seen.insert(m.type_code());
    }
    assert_eq!(seen.len(), 22, "every OpenFlow 1.0 message type");
    assert_eq!(seen.last(), Some(&msg_type10::QUEUE_GET_CONFIG_REPLY));
}

#[test]
fn encode_into_appends_after_existing_bytes() {
    let mut out = vec![0xaa, 0xbb];
    encode10_into(&Message10::BarrierRequest, 5, &mut out);
    encode10_into(&Message10::EchoRequest(vec![1, 2, 3]), 6, &mut out);
    assert_eq!(out, hex("aabb 01120008 00000005 0102000b 00000006 010203"));
    assert_eq!(decode10(&out[2..10]), Ok((5, Message10::BarrierRequest)));
    assert_eq!(decode10(&out[10..]), Ok((6, Message10::EchoRequest(vec![1, 2, 3]))));
}

#[test]
fn wire_sizes_of_fixed_messages() {
    let sizes = [
        (Message10::Hello(vec![]), 8),
        (Message10::FeaturesRequest, 8),
        (Message10::GetConfigRequest, 8),
        (Message10::BarrierRequest, 8),
        (Message10::BarrierReply, 8),
        (Message10::SetConfig { flags: 0, miss_send_len: 128 }, 12),
        (Message10::GetConfigReply { flags: 0, miss_send_len: 128 }, 12),
        (Message10::QueueGetConfigRequest { port: 1 }, 12),
        (Message10::QueueGetConfigReply { port: 1, queues: vec![] }, 16),
        (Message10::StatsRequest { typ: 0, flags: 0, body: vec![] }, 12),
        (
            Message10::FeaturesReply(FeaturesReply10 {
                datapath_id: 0,
                n_buffers: 0,
                n_tables: 0,
                capabilities: 0,
                actions: 0,
                ports: vec![sample_port(1, "p1"), sample_port(2, "p2")],
            }),
            32 + 2 * 48,
        ),
        (Message10::PacketIn(PacketIn10 { buffer_id: 0, total_len: 0, in_port: 0, reason: 0, data: vec![] }), 18),
        (Message10::PacketOut(PacketOut10 { buffer_id: 0, in_port: 0, actions: vec![], data: vec![] }), 16),
        (Message10::FlowMod(FlowMod10 { actions: vec![], ..sample_flow_mod() }), 72),
        (
            Message10::FlowRemoved(FlowRemoved10 {
                matched: Match10::all(),
                cookie: 0,
                priority: 0,
                reason: 0,
                duration_sec: 0,
                duration_nsec: 0,
                idle_timeout: 0,
                packet_count: 0,
                byte_count: 0,
            }),
            88,
        ),
        (Message10::PortStatus(PortStatus10 { reason: 0, desc: sample_port(1, "x") }), 64),
        (Message10::PortMod(PortMod10 { port_no: 1, hw_addr: [0; 6], config: 0, mask: 0, advertise: 0 }), 32),
    ];
    for (m, len) in sizes {
        assert_eq!(encode10(&m, 0).len(), len, "{m:?}");
    }
}

#[test]
fn action_wire_sizes() {
    for a in all_actions() {
        let m = Message10::PacketOut(PacketOut10 { buffer_id: 0, in_port: 0, actions: vec![a.clone()], data: vec![] });
        let b = encode10(&m, 0);
        let want = match a {
            Action10::SetDlSrc(_) | Action10::SetDlDst(_) | Action10::Enqueue { .. } | Action10::Vendor { .. } => 16,
            _ => 8,
        };
        assert_eq!(b.len(), 16 + want, "{a:?}");
        assert_eq!(u16::from_be_bytes([b[14], b[15]]), want as u16, "actions_len of {a:?}");
        assert_eq!(u16::from_be_bytes([b[16], b[17]]), a.type_code());
        assert_eq!(u16::from_be_bytes([b[18], b[19]]), want as u16, "action len of {a:?}");
    }
    // Vendor data is zero-padded to a multiple of 8.
    let m = Message10::PacketOut(PacketOut10 {
        buffer_id: 0,
        in_port: 0,
        actions: vec![Action10::Vendor { vendor: 0x2320, data: vec![1, 2, 3] }],
        data: vec![],
    });
    let b = encode10(&m, 0);
    assert_eq!(&b[16..], hex("ffff 0010 00002320 010203 0000000000"));
}

#[test]
fn match_layout_is_byte_exact() {
    assert_eq!(sample_match().wildcards, 0x0030_0802);
    let fm = FlowMod10 { actions: vec![], ..sample_flow_mod() };
    let b = encode10(&Message10::FlowMod(fm), 0);
    assert_eq!(&b[8..48], hex(SAMPLE_MATCH_HEX));
    // Match10::all(): every wildcard bit, zero values.
    assert_eq!(wildcards::ALL, 0x003f_ffff);
    let all = Message10::FlowMod(FlowMod10 { matched: Match10::all(), actions: vec![], ..sample_flow_mod() });
    let b = encode10(&all, 0);
    assert_eq!(&b[8..48], hex("003fffff").into_iter().chain([0; 36]).collect::<Vec<u8>>());
    // The wildcard bits as the spec numbers them.
    let bits = [
        wildcards::IN_PORT,
        wildcards::DL_VLAN,
        wildcards::DL_SRC,
        wildcards::DL_DST,
        wildcards::DL_TYPE,
        wildcards::NW_PROTO,
        wildcards::TP_SRC,
        wildcards::TP_DST,
    ];
    for (i, b) in bits.iter().enumerate() {
        assert_eq!(*b, 1 << i);
    }
    assert_eq!(wildcards::NW_SRC_MASK, 0x3f00);
    assert_eq!(wildcards::NW_DST_MASK, 0xf_c000);
    assert_eq!(wildcards::NW_SRC_ALL, 0x2000);
    assert_eq!(wildcards::NW_DST_ALL, 0x8_0000);
    assert_eq!(wildcards::DL_VLAN_PCP, 0x10_0000);
    assert_eq!(wildcards::NW_TOS, 0x20_0000);
    // Pad bytes are ignored on decoding.
    let mut b = encode10(&Message10::FlowMod(FlowMod10 { actions: vec![], ..sample_flow_mod() }), 0);
    b[8 + 21] = 0xee;
    b[8 + 26] = 0xee;
    b[8 + 27] = 0xee;
    let (_, m) = decode10(&b).expect("pads ignored");
    assert_eq!(m, Message10::FlowMod(FlowMod10 { actions: vec![], ..sample_flow_mod() }));
}

#[test]
fn flow_mod_layout_is_byte_exact() {
    let b = encode10(&Message10::FlowMod(sample_flow_mod()), 0x1234_5678);
    let want = hex(&format!(
        "01 0e 0050 12345678 {SAMPLE_MATCH_HEX} \
         0102030405060708 0000 000a 001e 8000 ffffffff ffff 0001 \
         0000 0008 fffd 0080"
    ));
    assert_eq!(b, want);
    assert_eq!(decode10(&want), Ok((0x1234_5678, Message10::FlowMod(sample_flow_mod()))));
    // Every action type as written.
    let fm = FlowMod10 { actions: all_actions(), ..sample_flow_mod() };
    let b = encode10(&Message10::FlowMod(fm), 0);
    let actions = hex("0000 0008 0002 0000 \
         0000 0008 fffd 0080 \
         0001 0008 0abc 0000 \
         0002 0008 06 000000 \
         0003 0008 00000000 \
         0004 0010 020000000001 000000000000 \
         0005 0010 020000000002 000000000000 \
         0006 0008 0a010203 \
         0007 0008 c0a80001 \
         0008 0008 b8 000000 \
         0009 0008 10e1 0000 \
         000a 0008 01bb 0000 \
         000b 0010 0007 000000000000 01020304 \
         ffff 0010 00002320 0012010203040506 \
         0000 0008 fffb 0000");
    assert_eq!(&b[72..], actions);
}

#[test]
fn packet_in_layout_is_byte_exact() {
    let p = PacketIn10 {
        buffer_id: 0x100,
        total_len: 60,
        in_port: 5,
        reason: packet_in_reason10::ACTION,
        data: vec![0xde, 0xad, 0xbe, 0xef, 1, 2],
    };
    let want = hex("01 0a 0018 00000042 00000100 003c 0005 01 00 deadbeef0102");
    assert_eq!(encode10(&Message10::PacketIn(p.clone()), 0x42), want);
    assert_eq!(decode10(&want), Ok((0x42, Message10::PacketIn(p))));
}

#[test]
fn packet_out_layout_is_byte_exact() {
    let p = PacketOut10 {
        buffer_id: NO_BUFFER10,
        in_port: port10::NONE,
        actions: vec![Action10::SetVlanVid(10), Action10::Output { port: 1, max_len: 0 }],
        data: vec![0xab; 4],
    };
    let want = hex("01 0d 0024 00000007 ffffffff ffff 0010 0001 0008 000a 0000 0000 0008 0001 0000 abababab");
    assert_eq!(encode10(&Message10::PacketOut(p.clone()), 7), want);
    assert_eq!(decode10(&want), Ok((7, Message10::PacketOut(p))));
}

#[test]
fn features_reply_layout_is_byte_exact() {
    let f = FeaturesReply10 {
        datapath_id: 0x0000_1122_3344_5566,
        n_buffers: 256,
        n_tables: 1,
        capabilities: 0xc7,
        actions: 0xfff,
        ports: vec![sample_port(1, "eth1")],
    };
    let want = hex("01 06 0050 00000003 \
         0000112233445566 00000100 01 000000 000000c7 00000fff \
         0001 0a0b0c0d0e01 65746831000000000000000000000000 \
         00000001 00000200 000000a0 000002c0 000002ff 00000040");
    assert_eq!(encode10(&Message10::FeaturesReply(f.clone()), 3), want);
    assert_eq!(decode10(&want), Ok((3, Message10::FeaturesReply(f))));
}

#[test]
fn other_layouts_are_byte_exact() {
    let flow_removed = FlowRemoved10 {
        matched: sample_match(),
        cookie: 9,
        priority: 0x100,
        reason: flow_removed_reason10::DELETE,
        duration_sec: 5,
        duration_nsec: 6,
        idle_timeout: 7,
        packet_count: 8,
        byte_count: 0x1_0000_0000,
    };
    let want = hex(&format!(
        "01 0b 0058 00000001 {SAMPLE_MATCH_HEX} 0000000000000009 0100 02 00 00000005 00000006 0007 0000 \
         0000000000000008 0000000100000000"
    ));
    assert_eq!(encode10(&Message10::FlowRemoved(flow_removed), 1), want);

    let port_mod = PortMod10 { port_no: 2, hw_addr: [1, 2, 3, 4, 5, 6], config: 1, mask: 1, advertise: 0x20 };
    let want = hex("01 0f 0020 00000001 0002 010203040506 00000001 00000001 00000020 00000000");
    assert_eq!(encode10(&Message10::PortMod(port_mod), 1), want);

    let want = hex("01 09 000c 00000001 0001 0080");
    assert_eq!(encode10(&Message10::SetConfig { flags: 1, miss_send_len: 128 }, 1), want);

    let want = hex("01 10 0010 00000001 0001 0000 abcdef01");
    assert_eq!(
        encode10(&Message10::StatsRequest { typ: stats_type10::FLOW, flags: 0, body: vec![0xab, 0xcd, 0xef, 1] }, 1),
        want
    );

    let want = hex("01 14 000c 00000001 0003 0000");
    assert_eq!(encode10(&Message10::QueueGetConfigRequest { port: 3 }, 1), want);
    let want = hex("01 15 0010 00000001 0003 000000000000");
    assert_eq!(encode10(&Message10::QueueGetConfigReply { port: 3, queues: vec![] }, 1), want);

    let want = hex("01 0c 0040 00000001 02 00000000000000 0001 0a0b0c0d0e01 78000000000000000000000000000000 \
                    00000001 00000200 000000a0 000002c0 000002ff 00000040");
    let ps = PortStatus10 { reason: port_reason10::MODIFY, desc: sample_port(1, "x") };
    assert_eq!(encode10(&Message10::PortStatus(ps), 1), want);
}

#[test]
fn port_names_are_nul_padded_and_cut_to_15_bytes() {
    let mut ps = PortStatus10 { reason: 0, desc: sample_port(1, "sixteen-chars-xy") };
    let b = encode10(&Message10::PortStatus(ps.clone()), 0);
    assert_eq!(&b[24..40], b"sixteen-chars-x\0");
    ps.desc.name = "sixteen-chars-x".into();
    assert_eq!(decode10(&b), Ok((0, Message10::PortStatus(ps))));
    // Bytes after the first NUL are not part of the name.
    let mut b = b;
    b[26] = 0;
    let (_, m) = decode10(&b).expect("decodes");
    let Message10::PortStatus(ps) = m else { panic!("{m:?}") };
    assert_eq!(ps.desc.name, "si");
}

#[test]
fn error10_quotes_the_first_64_bytes() {
    let request = encode10(&Message10::EchoRequest(vec![0x5a; 100]), 9);
    let e = OfError::new(error_type10::BAD_REQUEST, bad_request10::EPERM, "no");
    let b = error10(&e, &request, 9);
    assert_eq!(&b[..12], hex("01 01 004c 00000009 0001 0005"));
    assert_eq!(b.len(), 12 + 64);
    assert_eq!(&b[12..], &request[..64]);
    // A short request is quoted whole.
    let request = encode10(&Message10::BarrierRequest, 2);
    let b = error10(&e, &request, 2);
    assert_eq!(b, hex("01 01 0014 00000002 0001 0005 01120008 00000002"));
    // The decoder's own errors answer bad requests.
    let bad = hex("01 17 0008 00000003");
    let e = decode10(&bad).unwrap_err();
    assert_eq!(
        decode10(&error10(&e, &bad, 3)),
        Ok((3, Message10::Error { typ: error_type10::BAD_REQUEST, code: bad_request10::BAD_TYPE, data: bad }))
    );
}

#[test]
fn error_code_constants_follow_the_spec() {
    assert_eq!(
        [
            error_type10::HELLO_FAILED,
            error_type10::BAD_REQUEST,
            error_type10::BAD_ACTION,
            error_type10::FLOW_MOD_FAILED,
            error_type10::PORT_MOD_FAILED,
            error_type10::QUEUE_OP_FAILED
        ],
        [0, 1, 2, 3, 4, 5]
    );
    assert_eq!(error_type10::bad_request::BUFFER_UNKNOWN, 8);
    assert_eq!(error_type10::bad_action::BAD_QUEUE, 8);
    assert_eq!(bad_request10::BAD_STAT, 2);
    assert_eq!(bad_action10::BAD_OUT_PORT, 4);
    assert_eq!(port10::MAX, 0xff00);
    assert_eq!(port10::NONE, 0xffff);
    assert_eq!(msg_type10::QUEUE_GET_CONFIG_REPLY, 21);
}

fn err(b: &[u8]) -> (u16, u16) {
    match decode10(b) {
        Ok(m) => panic!("decoded {m:?} from {b:02x?}"),
        Err(e) => (e.typ, e.code),
    }
}

const BAD_LEN: (u16, u16) = (error_type10::BAD_REQUEST, bad_request10::BAD_LEN);
const ACTION_BAD_LEN: (u16, u16) = (error_type10::BAD_ACTION, bad_action10::BAD_LEN);

/// Sets the header's length to the buffer's.
fn set_len(b: &mut [u8]) {
    if b.len() >= 4 {
        let n = u16::try_from(b.len()).unwrap_or(u16::MAX);
        b[2..4].copy_from_slice(&n.to_be_bytes());
    }
}

#[test]
fn truncated_header_and_length_mismatch_are_bad_len() {
    for n in 0..8 {
        assert_eq!(err(&hex("01120008 00000001")[..n]), BAD_LEN, "{n} bytes");
    }
    // Length field larger, smaller, below the header's size.
    assert_eq!(err(&hex("01120009 00000001")), BAD_LEN);
    assert_eq!(err(&hex("0102000a 00000001 010203")), BAD_LEN);
    assert_eq!(err(&hex("01120004 00000001")), BAD_LEN);
    assert_eq!(err(&hex("01120000 00000001")), BAD_LEN);
    // A whole message followed by another's bytes.
    let mut b = encode10(&Message10::BarrierRequest, 1);
    b.extend(encode10(&Message10::BarrierRequest, 2));
    assert_eq!(err(&b), BAD_LEN);
}

#[test]
fn wrong_version_and_unknown_type() {
    let bad_version = (error_type10::BAD_REQUEST, bad_request10::BAD_VERSION);
    for v in [0u8, 2, 4, 6, 0xff] {
        assert_eq!(err(&[v, 0, 0, 8, 0, 0, 0, 1]), bad_version, "HELLO of version {v}");
        let mut b = encode10(&Message10::FlowMod(sample_flow_mod()), 1);
        b[0] = v;
        assert_eq!(err(&b), bad_version, "FLOW_MOD of version {v}");
    }
    let bad_type = (error_type10::BAD_REQUEST, bad_request10::BAD_TYPE);
    for t in [22u8, 23, 29, 100, 0xff] {
        assert_eq!(err(&[1, t, 0, 8, 0, 0, 0, 1]), bad_type, "type {t}");
        assert_eq!(err(&[1, t, 0, 12, 0, 0, 0, 1, 1, 2, 3, 4]), bad_type, "type {t}");
    }
}

#[test]
fn truncated_and_overlong_fixed_bodies_are_bad_len() {
    let minimal = [
        Message10::Error { typ: 1, code: 1, data: vec![] },
        Message10::Vendor { vendor: 0x2320, data: vec![] },
        Message10::FeaturesReply(FeaturesReply10 {
            datapath_id: 1,
            n_buffers: 2,
            n_tables: 3,
            capabilities: 4,
            actions: 5,
            ports: vec![],
        }),
        Message10::GetConfigReply { flags: 1, miss_send_len: 2 },
        Message10::SetConfig { flags: 1, miss_send_len: 2 },
        Message10::PacketIn(PacketIn10 { buffer_id: 1, total_len: 2, in_port: 3, reason: 0, data: vec![] }),
        Message10::FlowRemoved(FlowRemoved10 {
            matched: sample_match(),
            cookie: 1,
            priority: 2,
            reason: 0,
            duration_sec: 3,
            duration_nsec: 4,
            idle_timeout: 5,
            packet_count: 6,
            byte_count: 7,
        }),
        Message10::PortStatus(PortStatus10 { reason: 0, desc: sample_port(3, "eth3") }),
        Message10::PacketOut(PacketOut10 { buffer_id: 1, in_port: 2, actions: vec![], data: vec![] }),
        Message10::FlowMod(FlowMod10 { actions: vec![], ..sample_flow_mod() }),
        Message10::PortMod(PortMod10 { port_no: 1, hw_addr: [1; 6], config: 1, mask: 1, advertise: 1 }),
        Message10::StatsRequest { typ: 1, flags: 0, body: vec![] },
        Message10::StatsReply { typ: 1, flags: 0, body: vec![] },
        Message10::QueueGetConfigRequest { port: 1 },
        Message10::QueueGetConfigReply { port: 1, queues: vec![] },
    ];
    for m in &minimal {
        let full = encode10(m, 1);
        assert!(decode10(&full).is_ok(), "{m:?}");
        for cut in HEADER_LEN..full.len() {
            let mut b = full[..cut].to_vec();
            set_len(&mut b);
            assert_eq!(err(&b), BAD_LEN, "{m:?} cut to {cut}");
        }
    }
    // Bodies that have no variable part take no extra bytes.
    let exact = [
        Message10::FeaturesRequest,
        Message10::GetConfigRequest,
        Message10::BarrierRequest,
        Message10::BarrierReply,
        Message10::GetConfigReply { flags: 1, miss_send_len: 2 },
        Message10::SetConfig { flags: 1, miss_send_len: 2 },
        Message10::PortStatus(PortStatus10 { reason: 0, desc: sample_port(3, "eth3") }),
        Message10::FlowRemoved(FlowRemoved10 {
            matched: Match10::all(),
            cookie: 1,
            priority: 2,
            reason: 0,
            duration_sec: 3,
            duration_nsec: 4,
            idle_timeout: 5,
            packet_count: 6,
            byte_count: 7,
        }),
        Message10::PortMod(PortMod10 { port_no: 1, hw_addr: [1; 6], config: 1, mask: 1, advertise: 1 }),
        Message10::QueueGetConfigRequest { port: 1 },
    ];
    for m in &exact {
        for extra in [1usize, 4, 8] {
            let mut b = encode10(m, 1);
            b.extend(std::iter::repeat_n(0, extra));
            set_len(&mut b);
            assert_eq!(err(&b), BAD_LEN, "{m:?} with {extra} extra bytes");
        }
    }
    // A features reply's ports come in whole 48-byte structures.
    let f = Message10::FeaturesReply(FeaturesReply10 {
        datapath_id: 1,
        n_buffers: 2,
        n_tables: 3,
        capabilities: 4,
        actions: 5,
        ports: vec![sample_port(1, "a"), sample_port(2, "b")],
    });
    let full = encode10(&f, 1);
    for cut in 33..full.len() {
        if cut == 80 {
            continue;
        }
        let mut b = full[..cut].to_vec();
        set_len(&mut b);
        assert_eq!(err(&b), BAD_LEN, "features reply cut to {cut}");
    }
    let mut b = full.clone();
    b.push(0);
    set_len(&mut b);
    assert_eq!(err(&b), BAD_LEN);
}

/// A packet-out and a flow-mod carrying `action` (raw bytes) as their
/// whole action list.
fn with_raw_actions(actions: &[u8]) -> [Vec<u8>; 2] {
    let mut po = hex("01 0d 0000 00000001 ffffffff fffd");
    po.extend_from_slice(&(actions.len() as u16).to_be_bytes());
    po.extend_from_slice(actions);
    set_len(&mut po);
    let mut fm = encode10(&Message10::FlowMod(FlowMod10 { actions: vec![], ..sample_flow_mod() }), 1);
    fm.extend_from_slice(actions);
    set_len(&mut fm);
    [po, fm]
}

#[test]
fn malformed_actions_are_bad_action() {
    let bad_len = [
        "0000 0000 0001 0000",                  // length 0
        "0000 0004 0001 0000",                  // length below 8
        "0000 000c 0001 0000 00000000",         // not a multiple of 8
        "0000 0010 0001 0000",                  // overruns the list
        "0000 0008 0001 0000 0000 0010 0002",   // second action overruns
        "0000 0008 0001",                       // header only part there
        "0000 0010 0001 0000 0000000000000000", // OUTPUT is 8, not 16
        "0004 0008 0102030405060000",           // SET_DL_SRC is 16, not 8
        "000b 0008 0001 0000",                  // ENQUEUE is 16, not 8
        "0003 0010 00000000 0000000000000000",  // STRIP_VLAN is 8
        "ffff 0004 00002320",                   // VENDOR below 8
        "0006 0008 0a000001 00",                // trailing partial action
    ];
    for a in bad_len {
        for b in with_raw_actions(&hex(a)) {
            assert_eq!(err(&b), ACTION_BAD_LEN, "{a} in {b:02x?}");
        }
    }
    let bad_type = (error_type10::BAD_ACTION, bad_action10::BAD_TYPE);
    for t in ["000c", "0010", "0019", "fffe", "8000"] {
        let a = format!("{t} 0008 00000000");
        for b in with_raw_actions(&hex(&a)) {
            assert_eq!(err(&b), bad_type, "{a}");
        }
    }
    // A packet-out whose actions_len runs past the message.
    let mut po = hex("01 0d 0000 00000001 ffffffff fffd 0010 0000 0008 0001 0000");
    set_len(&mut po);
    assert_eq!(err(&po), BAD_LEN);
    // actions_len not a multiple of 8 cuts an action short.
    let mut po = hex("01 0d 0000 00000001 ffffffff fffd 0004 0000 0008 0001 0000");
    set_len(&mut po);
    assert_eq!(err(&po), ACTION_BAD_LEN);
    // The good ones: a vendor action of 8 bytes, and an empty list with data.
    for b in with_raw_actions(&hex("ffff 0008 00002320")) {
        let (_, m) = decode10(&b).expect("vendor action");
        let actions = match m {
            Message10::PacketOut(p) => p.actions,
            Message10::FlowMod(f) => f.actions,
            other => panic!("{other:?}"),
        };
        assert_eq!(actions, vec![Action10::Vendor { vendor: 0x2320, data: vec![] }]);
    }
}

/// A small deterministic xorshift generator.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Decodes `b`; on success, re-encoding must give a message that decodes
/// to the same value. Errors carry a 1.0 BAD_REQUEST or BAD_ACTION.
fn check(b: &[u8]) -> bool {
    match decode10(b) {
        Ok((xid, m)) => {
            let again = encode10(&m, xid);
            assert_eq!(decode10(&again), Ok((xid, m)));
            true
        }
        Err(e) => {
            assert!(e.typ == error_type10::BAD_REQUEST || e.typ == error_type10::BAD_ACTION, "{e}");
            assert!(e.code <= bad_request10::BUFFER_UNKNOWN, "{e}");
            false
        }
    }
}

#[test]
fn truncations_corruptions_and_noise_never_panic() {
    let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
    let mut ok = 0usize;
    let mut total = 0usize;
    for m in messages() {
        let full = encode10(&m, 1);
        for cut in 0..full.len() {
            let mut b = full[..cut].to_vec();
            check(&b);
            set_len(&mut b);
            ok += usize::from(check(&b));
            total += 2;
        }
        for _ in 0..300 {
            let mut b = full.clone();
            for _ in 0..1 + rng.next() % 3 {
                let i = (rng.next() as usize) % b.len();
                b[i] = rng.next() as u8;
            }
            if rng.next().is_multiple_of(2) {
                b[0] = OFP10;
                set_len(&mut b);
            }
            ok += usize::from(check(&b));
            total += 1;
        }
    }
    for _ in 0..30_000 {
        let n = (rng.next() % 200) as usize;
        let mut b: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
        if b.len() >= 2 && !rng.next().is_multiple_of(8) {
            b[0] = OFP10;
            b[1] %= 24;
        }
        if !rng.next().is_multiple_of(8) {
            set_len(&mut b);
        }
        ok += usize::from(check(&b));
        total += 1;
    }
    assert!(total > 30_000 && ok > 1_000, "{ok} of {total} decoded");
}
