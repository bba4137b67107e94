//! Codec tests against the public API: round trips of every message and
//! multipart body, byte-exact encodings worked out by hand from the
//! OpenFlow 1.3.5 and 1.4.1 structures, error types and codes for malformed input,
//! match validation, version negotiation, and a no-panic sweep over
//! truncated, corrupted and random bytes.

use sluice_openflow::errors::*;
use sluice_openflow::*;

fn m_in_port(p: u32) -> Match {
    Match { fields: vec![Oxm::exact(OxmField::InPort, p.to_be_bytes().to_vec())] }
}

fn rich_match() -> Match {
    Match {
        fields: vec![
            Oxm::exact(OxmField::InPort, vec![0, 0, 0, 3]),
            Oxm::masked(OxmField::EthDst, vec![1, 0, 0x5e, 0, 0, 0], vec![0xff, 0xff, 0xff, 0x80, 0, 0]),
            Oxm::exact(OxmField::EthType, vec![0x08, 0x00]),
            Oxm::exact(OxmField::IpProto, vec![6]),
            Oxm::masked(OxmField::Ipv4Src, vec![10, 0, 0, 0], vec![255, 0, 0, 0]),
            Oxm::exact(OxmField::TcpDst, vec![0, 80]),
            Oxm::exact(OxmField::Other { class: 0x0001, field: 5 }, vec![1, 2, 3, 4]),
        ],
    }
}

fn all_actions() -> Vec<Action> {
    vec![
        Action::Output { port: 2, max_len: 128 },
        Action::CopyTtlOut,
        Action::CopyTtlIn,
        Action::SetMplsTtl(9),
        Action::DecMplsTtl,
        Action::PushVlan(0x8100),
        Action::PopVlan,
        Action::PushMpls(0x8847),
        Action::PopMpls(0x0800),
        Action::SetQueue(7),
        Action::Group(11),
        Action::SetNwTtl(64),
        Action::DecNwTtl,
        Action::SetField(Oxm::exact(OxmField::VlanVid, (OFPVID_PRESENT | 10).to_be_bytes().to_vec())),
        Action::SetField(Oxm::exact(OxmField::Ipv6Src, vec![0xfe; 16])),
        Action::PushPbb(0x88e7),
        Action::PopPbb,
        Action::Experimenter { experimenter: 0x2320, data: vec![1, 2, 3, 4, 0, 0, 0, 0] },
    ]
}

fn all_instructions() -> Vec<Instruction> {
    vec![
        Instruction::Meter(5),
        Instruction::ApplyActions(all_actions()),
        Instruction::ClearActions,
        Instruction::WriteActions(vec![Action::Group(1), Action::Output { port: port::CONTROLLER, max_len: 0xffff }]),
        Instruction::WriteMetadata { metadata: 0x1234, mask: 0xffff },
        Instruction::GotoTable(3),
        Instruction::Experimenter { experimenter: 0xaabbccdd, data: vec![9; 8] },
    ]
}

fn port_desc(n: u32) -> PortDesc {
    PortDesc {
        port_no: n,
        hw_addr: [2, 0, 0, 0, 0, n as u8],
        name: format!("eth{n}"),
        config: port_config::NO_FWD,
        state: port_state::LIVE,
        curr: 0x2000,
        advertised: 1,
        supported: 2,
        peer: 3,
        curr_speed: 10_000_000,
        max_speed: 40_000_000,
    }
}

fn buckets() -> Vec<Bucket> {
    vec![
        Bucket {
            weight: 1,
            watch_port: port::ANY,
            watch_group: group::ANY,
            actions: vec![Action::Output { port: 1, max_len: 0 }],
        },
        Bucket { weight: 2, watch_port: 4, watch_group: 5, actions: vec![] },
    ]
}

fn bands() -> Vec<MeterBand> {
    vec![
        MeterBand::Drop { rate: 1000, burst_size: 10 },
        MeterBand::DscpRemark { rate: 500, burst_size: 5, prec_level: 1 },
        MeterBand::Experimenter { rate: 1, burst_size: 2, experimenter: 3, data: vec![4; 8] },
    ]
}

fn flow_stats_request() -> FlowStatsRequest {
    FlowStatsRequest {
        table_id: table::ALL,
        out_port: port::ANY,
        out_group: group::ANY,
        cookie: 1,
        cookie_mask: 0xff,
        matched: rich_match(),
    }
}

fn table_features() -> Vec<TableFeatures> {
    vec![
        TableFeatures {
            table_id: 0,
            name: "classifier".into(),
            metadata_match: u64::MAX,
            metadata_write: u64::MAX,
            config: 3,
            max_entries: 1_000_000,
            properties: vec![
                TableFeatureProp::Instructions(vec![(1, 0), (4, 0), (0xffff, 0x2320)]),
                TableFeatureProp::InstructionsMiss(vec![(5, 0)]),
                TableFeatureProp::NextTables(vec![1, 2, 3]),
                TableFeatureProp::NextTablesMiss(vec![]),
                TableFeatureProp::WriteActions(vec![(0, 0), (22, 0)]),
                TableFeatureProp::WriteActionsMiss(vec![(0xffff, 7)]),
                TableFeatureProp::ApplyActions(vec![(25, 0)]),
                TableFeatureProp::ApplyActionsMiss(vec![(17, 0), (18, 0)]),
                TableFeatureProp::Match(vec![Oxm::exact(OxmField::InPort, vec![0; 4]).header(), 0x8000_0606]),
                TableFeatureProp::Wildcards(vec![0x8000_0606]),
                TableFeatureProp::WriteSetfield(vec![0x8000_0a01]),
                TableFeatureProp::WriteSetfieldMiss(vec![]),
                TableFeatureProp::ApplySetfield(vec![0xffff_0104, 0x0000_2320]),
                TableFeatureProp::ApplySetfieldMiss(vec![0x8000_0a01]),
                TableFeatureProp::Experimenter { typ: 0xfffe, experimenter: 1, exp_type: 2, data: vec![1, 2, 3] },
                TableFeatureProp::Experimenter { typ: 0xffff, experimenter: 4, exp_type: 5, data: vec![] },
            ],
        },
        TableFeatures {
            table_id: 1,
            name: String::new(),
            metadata_match: 0,
            metadata_write: 0,
            config: 0,
            max_entries: 16,
            properties: vec![],
        },
    ]
}

fn requests() -> Vec<MultipartRequest> {
    vec![
        MultipartRequest::Desc,
        MultipartRequest::Flow(flow_stats_request()),
        MultipartRequest::Aggregate(FlowStatsRequest { matched: Match::default(), ..flow_stats_request() }),
        MultipartRequest::Table,
        MultipartRequest::PortStats { port_no: port::ANY },
        MultipartRequest::Queue { port_no: 1, queue_id: 0xffff_ffff },
        MultipartRequest::Group { group_id: group::ALL },
        MultipartRequest::GroupDesc,
        MultipartRequest::GroupFeatures,
        MultipartRequest::Meter { meter_id: meter::ALL },
        MultipartRequest::MeterConfig { meter_id: 3 },
        MultipartRequest::MeterFeatures,
        MultipartRequest::TableFeatures(vec![]),
        MultipartRequest::TableFeatures(table_features()),
        MultipartRequest::PortDesc,
        MultipartRequest::Experimenter { experimenter: 9, exp_type: 8, data: vec![7, 6, 5] },
    ]
}

fn replies() -> Vec<MultipartReply> {
    vec![
        MultipartReply::Desc(Desc {
            mfr_desc: "Sluice".into(),
            hw_desc: "software".into(),
            sw_desc: "0.1".into(),
            serial_num: "None".into(),
            dp_desc: "test switch".into(),
        }),
        MultipartReply::Flow(vec![
            FlowStats {
                table_id: 1,
                duration_sec: 2,
                duration_nsec: 3,
                priority: 4,
                idle_timeout: 5,
                hard_timeout: 6,
                flags: flow_mod_flags::SEND_FLOW_REM,
                cookie: 7,
                packet_count: 8,
                byte_count: 9,
                matched: rich_match(),
                instructions: all_instructions(),
            },
            FlowStats {
                table_id: 0,
                duration_sec: 0,
                duration_nsec: 0,
                priority: 0,
                idle_timeout: 0,
                hard_timeout: 0,
                flags: 0,
                cookie: 0,
                packet_count: 0,
                byte_count: 0,
                matched: Match::default(),
                instructions: vec![],
            },
        ]),
        MultipartReply::Aggregate(AggregateStats { packet_count: 1, byte_count: 2, flow_count: 3 }),
        MultipartReply::Table(vec![
            TableStats { table_id: 0, active_count: 1, lookup_count: 2, matched_count: 3 },
            TableStats { table_id: 1, active_count: 4, lookup_count: 5, matched_count: 6 },
        ]),
        MultipartReply::PortStats(vec![PortStats {
            port_no: 1,
            rx_packets: 2,
            collisions: 13,
            duration_sec: 14,
            duration_nsec: 15,
            ..Default::default()
        }]),
        MultipartReply::Queue(vec![QueueStats {
            port_no: 1,
            queue_id: 2,
            tx_bytes: 3,
            tx_packets: 4,
            tx_errors: 5,
            duration_sec: 6,
            duration_nsec: 7,
        }]),
        MultipartReply::Group(vec![
            GroupStats {
                group_id: 1,
                ref_count: 2,
                packet_count: 3,
                byte_count: 4,
                duration_sec: 5,
                duration_nsec: 6,
                buckets: vec![(7, 8), (9, 10)],
            },
            GroupStats {
                group_id: 2,
                ref_count: 0,
                packet_count: 0,
                byte_count: 0,
                duration_sec: 0,
                duration_nsec: 0,
                buckets: vec![],
            },
        ]),
        MultipartReply::GroupDesc(vec![GroupDesc { typ: group_type::SELECT, group_id: 1, buckets: buckets() }]),
        MultipartReply::GroupFeatures(GroupFeatures {
            types: 15,
            capabilities: 3,
            max_groups: [1, 2, 3, 4],
            actions: [5, 6, 7, 8],
        }),
        MultipartReply::Meter(vec![MeterStats {
            meter_id: 1,
            flow_count: 2,
            packet_in_count: 3,
            byte_in_count: 4,
            duration_sec: 5,
            duration_nsec: 6,
            bands: vec![(7, 8)],
        }]),
        MultipartReply::MeterConfig(vec![
            MeterConfig { flags: meter_flags::KBPS, meter_id: 1, bands: bands() },
            MeterConfig { flags: 0, meter_id: 2, bands: vec![] },
        ]),
        MultipartReply::MeterFeatures(MeterFeatures {
            max_meter: 100,
            band_types: 6,
            capabilities: 15,
            max_bands: 4,
            max_color: 2,
        }),
        MultipartReply::TableFeatures(table_features()),
        MultipartReply::PortDesc(vec![port_desc(1), port_desc(2)]),
        MultipartReply::Experimenter { experimenter: 1, exp_type: 2, data: vec![3] },
    ]
}

fn async_config() -> AsyncConfig {
    AsyncConfig { packet_in_mask: [7, 1], port_status_mask: [7, 7], flow_removed_mask: [15, 0], ..Default::default() }
}

/// One value of every message variant (multipart bodies separately).
fn messages() -> Vec<Message> {
    let mut v = vec![
        Message::Hello(vec![]),
        Message::Hello(vec![
            HelloElement::VersionBitmap(vec![0x12]),
            HelloElement::Unknown { typ: 9, data: vec![1, 2, 3] },
        ]),
        Message::Error(ErrorMsg {
            typ: error_type::BAD_REQUEST,
            code: bad_request::BAD_TYPE,
            data: vec![4, 0xff, 0, 8, 0, 0, 0, 1],
        }),
        Message::EchoRequest(vec![1, 2, 3]),
        Message::EchoReply(vec![]),
        Message::Experimenter { experimenter: 0x2320, exp_type: 1, data: vec![5; 5] },
        Message::FeaturesRequest,
        Message::FeaturesReply(Features {
            datapath_id: 0x0102_0304_0506_0708,
            n_buffers: 256,
            n_tables: 254,
            auxiliary_id: 0,
            capabilities: capabilities::FLOW_STATS | capabilities::PORT_STATS,
        }),
        Message::GetConfigRequest,
        Message::GetConfigReply(SwitchConfig { flags: 0, miss_send_len: 128 }),
        Message::SetConfig(SwitchConfig { flags: 1, miss_send_len: 0xffff }),
        Message::PacketIn(PacketIn {
            buffer_id: NO_BUFFER,
            total_len: 60,
            reason: packet_in_reason::ACTION,
            table_id: 2,
            cookie: 0xdead,
            matched: m_in_port(7),
            data: vec![0xab; 60],
        }),
        Message::FlowRemoved(FlowRemoved {
            cookie: 1,
            priority: 2,
            reason: flow_removed_reason::DELETE,
            table_id: 3,
            duration_sec: 4,
            duration_nsec: 5,
            idle_timeout: 6,
            hard_timeout: 7,
            packet_count: 8,
            byte_count: 9,
            matched: rich_match(),
        }),
        Message::PortStatus { reason: port_reason::MODIFY, desc: port_desc(5) },
        Message::PacketOut(PacketOut {
            buffer_id: NO_BUFFER,
            in_port: port::CONTROLLER,
            actions: all_actions(),
            data: vec![1, 2, 3, 4, 5],
        }),
        Message::FlowMod(FlowMod {
            cookie: 1,
            cookie_mask: 2,
            table_id: 3,
            command: flow_mod_command::MODIFY_STRICT,
            idle_timeout: 4,
            hard_timeout: 5,
            priority: 6,
            buffer_id: 7,
            out_port: 8,
            out_group: 9,
            flags: 10,
            matched: rich_match(),
            instructions: all_instructions(),
        }),
        Message::GroupMod(GroupMod {
            command: group_mod_command::ADD,
            typ: group_type::FF,
            group_id: 12,
            buckets: buckets(),
        }),
        Message::PortMod(PortMod { port_no: 3, hw_addr: [1, 2, 3, 4, 5, 6], config: 1, mask: 1, advertise: 0 }),
        Message::TableMod { table_id: 1, config: 3 },
        Message::BarrierRequest,
        Message::BarrierReply,
        Message::QueueGetConfigRequest { port: port::ANY },
        Message::QueueGetConfigReply {
            port: 1,
            queues: vec![
                PacketQueue {
                    queue_id: 1,
                    port: 1,
                    properties: vec![
                        QueueProp::MinRate(100),
                        QueueProp::MaxRate(900),
                        QueueProp::Experimenter { experimenter: 5, data: vec![1; 8] },
                    ],
                },
                PacketQueue { queue_id: 2, port: 1, properties: vec![] },
            ],
        },
        Message::RoleRequest(Role { role: controller_role::MASTER, generation_id: 42 }),
        Message::RoleReply(Role { role: controller_role::SLAVE, generation_id: u64::MAX }),
        Message::GetAsyncRequest,
        Message::GetAsyncReply(async_config()),
        Message::SetAsync(async_config()),
        Message::MeterMod(MeterMod {
            command: meter_mod_command::ADD,
            flags: meter_flags::KBPS | meter_flags::BURST,
            meter_id: 1,
            bands: bands(),
        }),
    ];
    v.extend(requests().into_iter().map(|body| Message::MultipartRequest { flags: 0, body }));
    v.extend(replies().into_iter().map(|body| Message::MultipartReply { flags: MULTIPART_MORE, body }));
    v
}

#[test]
fn every_message_round_trips() {
    for (i, m) in messages().iter().enumerate() {
        let bytes = encode(m, OFP13, i as u32);
        assert_eq!(peek_header(&bytes).unwrap().length as usize, bytes.len());
        let (h, back) = decode(&bytes).unwrap_or_else(|e| panic!("{m:?}: {e}"));
        assert_eq!((h.version, h.xid, h.typ), (OFP13, i as u32, bytes[1]));
        assert_eq!(&back, m);
    }
}

#[test]
fn every_multipart_type_is_covered() {
    let req: std::collections::BTreeSet<u16> = requests().iter().map(multipart::request_type).collect();
    let rep: std::collections::BTreeSet<u16> = replies().iter().map(multipart::reply_type).collect();
    let want: std::collections::BTreeSet<u16> = (0..=13).chain([0xffff]).collect();
    assert_eq!(req, want);
    assert_eq!(rep, want);
}

fn monitor_request() -> monitor::FlowMonitorRequest {
    monitor::FlowMonitorRequest {
        id: 3,
        flags: monitor::monitor_flags::INITIAL | monitor::monitor_flags::ADD | monitor::monitor_flags::OWN,
        out_port: 2,
        out_group: group::ANY,
        table_id: table::ALL,
        command: monitor::monitor_command::MODIFY,
        matched: rich_match(),
    }
}

/// The messages only OpenFlow 1.4 has.
fn messages14() -> Vec<Message> {
    let mut async14 = async_config();
    async14.role_status_mask = [7, 3];
    async14.requestforward_mask = [1, 0];
    vec![
        Message::GetAsyncReply(async14),
        Message::SetAsyncProps(vec![
            AsyncProp { typ: async_prop_type::PACKET_IN_MASTER, mask: 0x3f },
            AsyncProp { typ: async_prop_type::ROLE_STATUS_SLAVE, mask: 1 },
        ]),
        Message::RoleStatus { role: controller_role::SLAVE, reason: role_reason::MASTER_REQUEST, generation_id: 9 },
        Message::BundleControl(BundleControl {
            bundle_id: 7,
            typ: 4,
            flags: 3,
            properties: vec![0xff, 0xff, 0, 12, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0],
        }),
        Message::BundleAdd(BundleAdd {
            bundle_id: 7,
            flags: 1,
            message: encode(&Message::BarrierRequest, OFP14, 5),
            properties: vec![],
        }),
        Message::BundleAdd(BundleAdd {
            bundle_id: 7,
            flags: 1,
            message: encode(&Message::EchoRequest(vec![1, 2, 3]), OFP14, 5),
            properties: vec![0xff, 0xff, 0, 12, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0],
        }),
        Message::MultipartRequest { flags: 0, body: MultipartRequest::TableDesc },
        Message::MultipartRequest { flags: 0, body: MultipartRequest::QueueDesc { port_no: port::ANY, queue_id: 1 } },
        Message::MultipartRequest { flags: 0, body: MultipartRequest::FlowMonitor(vec![monitor_request(); 2]) },
        Message::MultipartReply {
            flags: 0,
            body: MultipartReply::TableDesc(vec![
                TableDesc { table_id: 0, config: 0 },
                TableDesc { table_id: 1, config: 8 },
            ]),
        },
        Message::MultipartReply {
            flags: 0,
            body: MultipartReply::QueueDesc(vec![QueueDesc {
                port_no: 1,
                queue_id: 2,
                properties: vec![
                    QueueProp::MinRate(100),
                    QueueProp::MaxRate(900),
                    QueueProp::Experimenter { experimenter: 5, data: vec![1; 4] },
                ],
            }]),
        },
        Message::MultipartReply { flags: 0, body: MultipartReply::FlowMonitor(vec![0, 8, 0, 4, 0, 0, 0, 1]) },
    ]
}

#[test]
fn openflow_1_4_round_trips_every_message_and_its_own() {
    for (i, m) in messages().iter().chain(&messages14()).enumerate() {
        let bytes = encode(m, OFP14, i as u32);
        assert_eq!(peek_header(&bytes).unwrap().length as usize, bytes.len(), "{m:?}");
        let (h, back) = decode(&bytes).unwrap_or_else(|e| panic!("{m:?}: {e}"));
        assert_eq!((h.version, h.xid, h.typ), (OFP14, i as u32, bytes[1]));
        match (m, &back) {
            // 1.4's SET_ASYNC is a list of properties: all twelve here.
            (Message::SetAsync(a), Message::SetAsyncProps(p)) => {
                let mut b = AsyncConfig::default();
                p.iter().for_each(|p| assert!(b.apply(*p)));
                assert_eq!((p.len(), &b), (12, a));
            }
            _ => assert_eq!(&back, m),
        }
    }
    // 1.4's messages are not 1.3's.
    for m in messages14().iter().skip(2) {
        let bytes = encode(m, OFP13, 1);
        assert!(decode(&bytes).is_err(), "{m:?} decoded in 1.3");
    }
}

#[test]
fn openflow_1_4_layouts() {
    // A port: 40 bytes and a 32-byte ethernet property with the speeds.
    let b = encode(&Message::MultipartReply { flags: 0, body: MultipartReply::PortDesc(vec![port_desc(1)]) }, OFP14, 0);
    let p = &b[16..];
    assert_eq!(p.len(), 72);
    assert_eq!(&p[4..6], &[0, 72]);
    assert_eq!(&p[40..44], &[0, 0, 0, 32]);
    assert_eq!(&p[64..68], &10_000_000u32.to_be_bytes());
    // Port statistics: a length, 80 bytes and a 40-byte ethernet property.
    let stats = PortStats { port_no: 3, rx_packets: 1, collisions: 9, duration_sec: 5, ..PortStats::default() };
    let b = encode(&Message::MultipartReply { flags: 0, body: MultipartReply::PortStats(vec![stats]) }, OFP14, 0);
    let p = &b[16..];
    assert_eq!(p.len(), 120);
    assert_eq!(&p[..8], &[0, 120, 0, 0, 0, 0, 0, 3]);
    assert_eq!(&p[8..12], &5u32.to_be_bytes());
    assert_eq!(&p[80..84], &[0, 0, 0, 40]);
    assert_eq!(&p[112..120], &9u64.to_be_bytes());
    // Queue statistics: a 48-byte record.
    let q = QueueStats {
        port_no: 1,
        queue_id: 2,
        tx_bytes: 3,
        tx_packets: 4,
        tx_errors: 0,
        duration_sec: 1,
        duration_nsec: 0,
    };
    let b = encode(&Message::MultipartReply { flags: 0, body: MultipartReply::Queue(vec![q]) }, OFP14, 0);
    assert_eq!(&b[16..18], &[0, 48]);
    assert_eq!(b.len(), 16 + 48);
    // A port mod: 32 bytes and an 8-byte ethernet property.
    let pm = PortMod { port_no: 1, hw_addr: [2, 0, 0, 0, 0, 1], config: 1, mask: 1, advertise: 0x20 };
    let b = encode(&Message::PortMod(pm), OFP14, 0);
    assert_eq!(b.len(), 40);
    assert_eq!(&b[32..40], &[0, 0, 0, 8, 0, 0, 0, 0x20]);
    // A port mod with an optical property is refused as a bad property.
    let mut optical = b.clone();
    optical[33] = 1;
    assert_eq!(err_of(&optical), (error_type::BAD_PROPERTY, bad_property::BAD_TYPE));
    // GET_ASYNC_REPLY: twelve 8-byte properties; an experimenter one in SET_ASYNC is refused.
    let b = encode(&Message::GetAsyncReply(async_config()), OFP14, 0);
    assert_eq!(b.len(), 8 + 12 * 8);
    assert_eq!(&b[8..16], &[0, 0, 0, 8, 0, 0, 0, 1]);
    let mut set = encode(&Message::SetAsyncProps(vec![AsyncProp { typ: 1, mask: 1 }]), OFP14, 0);
    set[8..10].copy_from_slice(&[0xff, 0xff]);
    assert_eq!(err_of(&set), (error_type::BAD_PROPERTY, bad_property::BAD_EXPERIMENTER));
    // A bundled message that runs past the end is a bad length.
    let mut add = encode(&messages14()[4], OFP14, 0);
    add[19] = 200;
    assert_eq!(err_of(&add), (error_type::BAD_REQUEST, bad_request::BAD_LEN));
    // A monitor request with unknown flags or command.
    let mut mon = encode(&messages14()[8], OFP14, 0);
    mon[16 + 12] = 0x80;
    assert_eq!(err_of(&mon), (error_type::FLOW_MONITOR_FAILED, flow_monitor_failed::BAD_FLAGS));
    let mut mon = encode(&messages14()[8], OFP14, 0);
    mon[16 + 15] = 3;
    assert_eq!(err_of(&mon), (error_type::FLOW_MONITOR_FAILED, flow_monitor_failed::BAD_COMMAND));
}

#[test]
fn padding_keeps_every_struct_aligned() {
    // Set-field actions and matches are padded to 8; the message as a
    // whole therefore stays a multiple of 8 here.
    let m = Message::PacketOut(PacketOut {
        buffer_id: NO_BUFFER,
        in_port: 1,
        actions: vec![Action::SetField(Oxm::exact(OxmField::IpDscp, vec![3]))],
        data: vec![],
    });
    let b = encode(&m, OFP13, 0);
    assert_eq!(b.len(), 24 + 16);
    assert_eq!(&b[16..18], &[0, 16]); // actions_len
    assert_eq!(&b[24..28], &[0, 25, 0, 16]);
    assert_eq!(&b[28..33], &[0x80, 0x00, 0x10, 0x01, 3]);
    assert_eq!(&b[33..40], &[0; 7]);
}

#[test]
fn hello_with_version_bitmap_bytes() {
    let m = Message::Hello(vec![HelloElement::VersionBitmap(vec![0x10])]);
    let b = encode(&m, OFP13, 0x0102_0304);
    assert_eq!(b, [4, 0, 0, 0x10, 1, 2, 3, 4, 0, 1, 0, 8, 0, 0, 0, 0x10]);
    assert_eq!(decode(&b).unwrap().1, m);
}

#[test]
fn features_request_bytes() {
    assert_eq!(encode(&Message::FeaturesRequest, OFP13, 7), [4, 5, 0, 8, 0, 0, 0, 7]);
}

#[test]
fn flow_mod_bytes() {
    let m = Message::FlowMod(FlowMod {
        cookie: 0,
        cookie_mask: 0,
        table_id: 0,
        command: flow_mod_command::ADD,
        idle_timeout: 0,
        hard_timeout: 0,
        priority: 0x8000,
        buffer_id: NO_BUFFER,
        out_port: port::ANY,
        out_group: group::ANY,
        flags: 0,
        matched: m_in_port(1),
        instructions: vec![Instruction::ApplyActions(vec![Action::Output { port: 2, max_len: 0 }])],
    });
    #[rustfmt::skip]
    let want: Vec<u8> = vec![
        4, 14, 0, 88, 0, 0, 0, 9,                     // header
        0, 0, 0, 0, 0, 0, 0, 0,                       // cookie
        0, 0, 0, 0, 0, 0, 0, 0,                       // cookie_mask
        0, 0, 0, 0, 0, 0, 0x80, 0,                    // table, command, idle, hard, priority
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // buffer_id, out_port
        0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0,           // out_group, flags, pad
        0, 1, 0, 12, 0x80, 0, 0, 4,                   // match OXM len 12; IN_PORT
        0, 0, 0, 1, 0, 0, 0, 0,                       // in_port 1, pad
        0, 4, 0, 24, 0, 0, 0, 0,                      // APPLY_ACTIONS len 24
        0, 0, 0, 16, 0, 0, 0, 2,                      // OUTPUT len 16 port 2
        0, 0, 0, 0, 0, 0, 0, 0,                       // max_len 0, pad
    ];
    let b = encode(&m, OFP13, 9);
    assert_eq!(b, want);
    assert_eq!(decode(&want).unwrap().1, m);
}

#[test]
fn encode_into_appends() {
    let mut out = vec![0xee];
    encode_into(&Message::BarrierRequest, OFP13, 1, &mut out);
    encode_into(&Message::EchoReply(vec![1]), OFP13, 2, &mut out);
    assert_eq!(out, [0xee, 4, 20, 0, 8, 0, 0, 0, 1, 4, 3, 0, 9, 0, 0, 0, 2, 1]);
}

fn err_of(b: &[u8]) -> (u16, u16) {
    let e = decode(b).expect_err("should fail");
    (e.typ, e.code)
}

#[test]
fn versions() {
    // A 1.0 HELLO (with stray body) decodes to no elements.
    let (h, m) = decode(&[1, 0, 0, 8, 0, 0, 0, 5]).unwrap();
    assert_eq!((h.version, m), (1, Message::Hello(vec![])));
    let (_, m) = decode(&[1, 0, 0, 12, 0, 0, 0, 5, 1, 2, 3, 4]).unwrap();
    assert_eq!(m, Message::Hello(vec![]));
    // A 1.0 ERROR decodes too; a 1.0 ECHO does not.
    let e = encode(&Message::Error(ErrorMsg { typ: 0, code: 0, data: b"no".to_vec() }), OFP10, 3);
    assert_eq!(e[0], 1);
    assert!(decode(&e).is_ok());
    assert_eq!(err_of(&[1, 2, 0, 8, 0, 0, 0, 0]), (error_type::BAD_REQUEST, bad_request::BAD_VERSION));
    // A 1.5 HELLO with a bitmap is read.
    let (_, m) = decode(&[6, 0, 0, 16, 0, 0, 0, 0, 0, 1, 0, 8, 0, 0, 0, 0x50]).unwrap();
    assert_eq!(m, Message::Hello(vec![HelloElement::VersionBitmap(vec![0x50])]));
}

#[test]
fn malformed_messages_get_the_spec_codes() {
    use error_type as t;
    assert_eq!(err_of(&[4, 5, 0]), (t::BAD_REQUEST, bad_request::BAD_LEN));
    assert_eq!(err_of(&[4, 5, 0, 9, 0, 0, 0, 0]), (t::BAD_REQUEST, bad_request::BAD_LEN));
    assert_eq!(err_of(&[4, 5, 0, 8, 0, 0, 0, 0, 0]), (t::BAD_REQUEST, bad_request::BAD_LEN));
    assert_eq!(err_of(&[4, 5, 0, 9, 0, 0, 0, 0, 0]), (t::BAD_REQUEST, bad_request::BAD_LEN));
    assert_eq!(err_of(&[4, 30, 0, 8, 0, 0, 0, 0]), (t::BAD_REQUEST, bad_request::BAD_TYPE));
    assert_eq!(err_of(&[4, 200, 0, 8, 0, 0, 0, 0]), (t::BAD_REQUEST, bad_request::BAD_TYPE));
    assert_eq!(
        err_of(&[4, 18, 0, 16, 0, 0, 0, 0, 0, 14, 0, 0, 0, 0, 0, 0]),
        (t::BAD_REQUEST, bad_request::BAD_MULTIPART)
    );
    assert_eq!(
        err_of(&[4, 19, 0, 16, 0, 0, 0, 0, 0x12, 0x34, 0, 0, 0, 0, 0, 0]),
        (t::BAD_REQUEST, bad_request::BAD_MULTIPART)
    );
    // A short FEATURES_REPLY.
    assert_eq!(err_of(&[4, 6, 0, 12, 0, 0, 0, 0, 0, 0, 0, 1]), (t::BAD_REQUEST, bad_request::BAD_LEN));

    let po = |actions: &[u8]| {
        let mut b = vec![4, 13, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1];
        b.extend_from_slice(&(actions.len() as u16).to_be_bytes());
        b.extend_from_slice(&[0; 6]);
        b.extend_from_slice(actions);
        let n = b.len() as u16;
        b[2..4].copy_from_slice(&n.to_be_bytes());
        b
    };
    assert!(decode(&po(&[0, 0, 0, 16, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0])).is_ok());
    assert_eq!(err_of(&po(&[0, 99, 0, 8, 0, 0, 0, 0])), (t::BAD_ACTION, bad_action::BAD_TYPE));
    assert_eq!(err_of(&po(&[0, 0, 0, 8, 0, 0, 0, 1])), (t::BAD_ACTION, bad_action::BAD_LEN));
    assert_eq!(err_of(&po(&[0, 18, 0, 12, 0, 0, 0, 0, 0, 0, 0, 0])), (t::BAD_ACTION, bad_action::BAD_LEN));
    assert_eq!(err_of(&po(&[0, 18, 0, 0, 0, 0, 0, 0])), (t::BAD_ACTION, bad_action::BAD_LEN));
    // Action length past the action list.
    assert_eq!(err_of(&po(&[0, 18, 0, 16, 0, 0, 0, 0])), (t::BAD_ACTION, bad_action::BAD_LEN));
    // actions_len past the message.
    let mut b = po(&[0, 18, 0, 8, 0, 0, 0, 0]);
    b[17] = 64;
    assert_eq!(err_of(&b), (t::BAD_REQUEST, bad_request::BAD_LEN));

    let fm = |tail: &[u8]| {
        let mut b = encode(
            &Message::FlowMod(FlowMod {
                cookie: 0,
                cookie_mask: 0,
                table_id: 0,
                command: 0,
                idle_timeout: 0,
                hard_timeout: 0,
                priority: 0,
                buffer_id: NO_BUFFER,
                out_port: port::ANY,
                out_group: group::ANY,
                flags: 0,
                matched: Match::default(),
                instructions: vec![],
            }),
            OFP13,
            0,
        );
        b.truncate(48);
        b.extend_from_slice(tail);
        let n = b.len() as u16;
        b[2..4].copy_from_slice(&n.to_be_bytes());
        b
    };
    assert!(decode(&fm(&[0, 1, 0, 4, 0, 0, 0, 0])).is_ok());
    assert_eq!(err_of(&fm(&[0, 0, 0, 4, 0, 0, 0, 0])), (t::BAD_MATCH, bad_match::BAD_TYPE));
    assert_eq!(err_of(&fm(&[0, 1, 0, 2, 0, 0, 0, 0])), (t::BAD_MATCH, bad_match::BAD_LEN));
    // Match length past the message, and an OXM past the match.
    assert_eq!(err_of(&fm(&[0, 1, 0, 40, 0, 0, 0, 0])), (t::BAD_MATCH, bad_match::BAD_LEN));
    assert_eq!(err_of(&fm(&[0, 1, 0, 8, 0x80, 0, 0, 4])), (t::BAD_MATCH, bad_match::BAD_LEN));
    assert_eq!(
        err_of(&fm(&[0, 1, 0, 4, 0, 0, 0, 0, 0, 9, 0, 8, 0, 0, 0, 0])),
        (t::BAD_INSTRUCTION, bad_instruction::UNKNOWN_INST)
    );
    assert_eq!(
        err_of(&fm(&[0, 1, 0, 4, 0, 0, 0, 0, 0, 1, 0, 16, 0, 0, 0, 0])),
        (t::BAD_INSTRUCTION, bad_instruction::BAD_LEN)
    );
    assert_eq!(
        err_of(&fm(&[0, 1, 0, 4, 0, 0, 0, 0, 0, 1, 0, 4, 0, 0, 0, 0])),
        (t::BAD_INSTRUCTION, bad_instruction::BAD_LEN)
    );
}

#[test]
fn match_validation() {
    let ok = |fields: Vec<Oxm>| prerequisite_ok(&Match { fields });
    let code = |fields: Vec<Oxm>| ok(fields).map_err(|e| (e.typ, e.code)).unwrap_err();
    let et = |v: u16| Oxm::exact(OxmField::EthType, v.to_be_bytes().to_vec());
    let proto = |p: u8| Oxm::exact(OxmField::IpProto, vec![p]);
    let bm = |c| (error_type::BAD_MATCH, c);

    assert!(ok(rich_match().fields).is_ok());
    assert!(ok(vec![]).is_ok());
    assert_eq!(code(vec![Oxm::exact(OxmField::Ipv4Src, vec![1, 2, 3, 4])]), bm(bad_match::BAD_PREREQ));
    assert_eq!(code(vec![et(0x86dd), Oxm::exact(OxmField::Ipv4Src, vec![1, 2, 3, 4])]), bm(bad_match::BAD_PREREQ));
    assert_eq!(code(vec![et(0x0800), proto(17), Oxm::exact(OxmField::TcpSrc, vec![0, 1])]), bm(bad_match::BAD_PREREQ));
    assert!(ok(vec![et(0x0800), proto(17), Oxm::exact(OxmField::UdpSrc, vec![0, 1])]).is_ok());
    // IP_PROTO itself needs an IP eth_type.
    assert_eq!(code(vec![proto(6)]), bm(bad_match::BAD_PREREQ));
    assert_eq!(code(vec![et(0x0806), proto(6)]), bm(bad_match::BAD_PREREQ));
    // The prerequisite must come first.
    assert_eq!(code(vec![Oxm::exact(OxmField::ArpOp, vec![0, 1]), et(0x0806)]), bm(bad_match::BAD_PREREQ));
    assert!(ok(vec![et(0x0806), Oxm::exact(OxmField::ArpOp, vec![0, 1])]).is_ok());
    let icmp6 = |t: u8| vec![et(0x86dd), proto(58), Oxm::exact(OxmField::Icmpv6Type, vec![t])];
    assert!(ok([icmp6(135), vec![Oxm::exact(OxmField::Ipv6NdSll, vec![1; 6])]].concat()).is_ok());
    assert_eq!(
        code([icmp6(136), vec![Oxm::exact(OxmField::Ipv6NdSll, vec![1; 6])]].concat()),
        bm(bad_match::BAD_PREREQ)
    );
    assert!(ok([icmp6(136), vec![Oxm::exact(OxmField::Ipv6NdTarget, vec![1; 16])]].concat()).is_ok());
    assert_eq!(code(vec![et(0x0800), proto(58), Oxm::exact(OxmField::Icmpv6Type, vec![1])]), bm(bad_match::BAD_PREREQ));
    assert!(ok(vec![et(0x8847), Oxm::exact(OxmField::MplsLabel, vec![0, 0, 0, 5])]).is_ok());
    assert_eq!(code(vec![Oxm::exact(OxmField::PbbIsid, vec![0, 0, 1])]), bm(bad_match::BAD_PREREQ));
    // VLAN_PCP needs a VLAN tag (VID != NONE).
    let vid = |v: u16| Oxm::exact(OxmField::VlanVid, v.to_be_bytes().to_vec());
    let pcp = Oxm::exact(OxmField::VlanPcp, vec![3]);
    assert!(ok(vec![vid(OFPVID_PRESENT | 5), pcp.clone()]).is_ok());
    assert!(ok(vec![Oxm::masked(OxmField::VlanVid, vec![0x10, 0], vec![0x10, 0]), pcp.clone()]).is_ok());
    assert_eq!(code(vec![vid(0), pcp.clone()]), bm(bad_match::BAD_PREREQ));
    assert_eq!(code(vec![pcp]), bm(bad_match::BAD_PREREQ));
    // Other checks.
    assert_eq!(code(vec![et(0x0800), et(0x0800)]), bm(bad_match::DUP_FIELD));
    assert_eq!(code(vec![Oxm::exact(OxmField::InPort, vec![0, 1])]), bm(bad_match::BAD_LEN));
    assert_eq!(code(vec![Oxm::masked(OxmField::InPort, vec![0; 4], vec![0xff; 4])]), bm(bad_match::BAD_MASK));
    assert_eq!(
        code(vec![Oxm::masked(OxmField::EthSrc, vec![0, 0, 0, 0, 0, 1], vec![0xff, 0xff, 0xff, 0, 0, 0])]),
        bm(bad_match::BAD_WILDCARDS)
    );
    assert_eq!(code(vec![Oxm::exact(OxmField::Other { class: 0x8000, field: 60 }, vec![1])]), bm(bad_match::BAD_FIELD));
}

#[test]
fn oxm_numbers_and_headers() {
    assert_eq!(OxmField::from_wire(0x8000, 0), OxmField::InPort);
    assert_eq!(OxmField::from_wire(0x8000, 39), OxmField::Ipv6Exthdr);
    assert_eq!(OxmField::from_wire(0x8000, 40), OxmField::Other { class: 0x8000, field: 40 });
    assert_eq!(OxmField::from_wire(1, 3), OxmField::Other { class: 1, field: 3 });
    for n in 0..40u8 {
        let f = OxmField::from_wire(0x8000, n);
        assert_eq!((f.class(), f.number()), (0x8000, n));
        assert!(f.value_len().is_some());
    }
    assert_eq!(OxmField::PbbIsid.value_len(), Some(3));
    assert_eq!(OxmField::Other { class: 1, field: 1 }.value_len(), None);
    assert!(OxmField::Ipv6Flabel.maskable() && !OxmField::TcpSrc.maskable());
    assert_eq!(Oxm::exact(OxmField::InPort, vec![0; 4]).header(), 0x8000_0004);
    assert_eq!(Oxm::masked(OxmField::VlanVid, vec![0; 2], vec![0; 2]).header(), 0x8000_0d04);
}

#[test]
fn error_reply_quotes_64_bytes() {
    let e = OfError::new(error_type::BAD_REQUEST, bad_request::BAD_TYPE, "nope");
    let long: Vec<u8> = (0..100).collect();
    let r = error_reply(&long, &e);
    assert_eq!((r.typ, r.code, r.data.as_slice()), (1, 1, &long[..64]));
    assert_eq!(error_reply(&long[..10], &e).data, &long[..10]);
    assert!(e.to_string().contains("BAD_REQUEST"));
}

#[test]
fn version_negotiation() {
    let bm = |w: u32| vec![HelloElement::VersionBitmap(vec![w])];
    assert!(version_bitmap_supports(&bm(0x10), 4));
    assert!(!version_bitmap_supports(&bm(0x10), 1));
    assert!(!version_bitmap_supports(&bm(0x10), 40));
    assert!(!version_bitmap_supports(&[], 4));
    assert_eq!(negotiate(6, &bm((1 << 6) | (1 << 4) | (1 << 1)), &[1, 4]), Some(4));
    assert_eq!(negotiate(6, &bm(1 << 6), &[1, 4]), None);
    assert_eq!(negotiate(6, &[], &[4]), Some(4));
    assert_eq!(negotiate(1, &[], &[4]), None);
    assert_eq!(negotiate(1, &[], &[1, 4]), Some(1));
    assert_eq!(negotiate(3, &[], &[1, 4]), None);
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

/// Decodes `b`; on success, re-encoding must decode to the same value.
fn check(b: &[u8]) -> bool {
    match decode(b) {
        Ok((h, m)) => {
            let again = encode(&m, h.version, h.xid);
            let (_, m2) = decode(&again).unwrap_or_else(|e| panic!("re-decode of {m:?}: {e}"));
            assert_eq!(m2, m);
            true
        }
        Err(e) => {
            assert!(OfError::is_spec_type(e.typ) && e.typ != error_type::EXPERIMENTER, "{e}");
            false
        }
    }
}

fn set_len(b: &mut [u8]) {
    if b.len() >= 4 {
        let n = b.len() as u16;
        b[2..4].copy_from_slice(&n.to_be_bytes());
    }
}

#[test]
fn truncations_corruptions_and_noise_never_panic() {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut ok = 0usize;
    let mut total = 0usize;
    let all = messages().into_iter().map(|m| (OFP13, m));
    let all = all.chain(messages().into_iter().chain(messages14()).map(|m| (OFP14, m)));
    for (v, m) in all {
        let full = encode(&m, v, 1);
        for cut in 0..full.len() {
            let mut b = full[..cut].to_vec();
            check(&b);
            set_len(&mut b);
            ok += usize::from(check(&b));
            total += 2;
        }
        for _ in 0..200 {
            let mut b = full.clone();
            let i = (rng.next() as usize) % b.len();
            b[i] = rng.next() as u8;
            ok += usize::from(check(&b));
            total += 1;
        }
    }
    for _ in 0..20_000 {
        let n = (rng.next() % 200) as usize;
        let mut b: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
        if b.len() >= 2 {
            b[0] = if b[0].is_multiple_of(2) { OFP13 } else { OFP14 };
            b[1] %= 35;
        }
        set_len(&mut b);
        check(&b);
        total += 1;
    }
    assert!(total > 20_000 && ok > 0);
}
