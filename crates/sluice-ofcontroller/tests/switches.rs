//! The controller library against emulated switches on loopback: many
//! at once, both versions, and hostile ones (garbage, a handshake never
//! finished, a switch that stops reading, malformed messages after the
//! handshake), with the good switches served throughout.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use sluice_ofcontroller::{app_by_name, Config, Controller};
use sluice_openflow::of10::{self, FeaturesReply10, Message10, PacketIn10};
use sluice_openflow::{Features, Message, MultipartReply, OFP13};

fn start(cfg: Config) -> Controller {
    let l2 = app_by_name("l2").expect("l2");
    Controller::start(Config { listen: "127.0.0.1:0".parse().unwrap(), ..cfg }, l2).expect("start")
}

/// Reads one whole message (blocking, 5 s at most).
fn read_msg(s: &mut TcpStream) -> Option<Vec<u8>> {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut h = [0u8; 8];
    s.read_exact(&mut h).ok()?;
    let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
    let mut m = h.to_vec();
    m.resize(len.max(8), 0);
    s.read_exact(&mut m[8..]).ok()?;
    Some(m)
}

/// Connects as a 1.0 switch with datapath id `dpid` and finishes the
/// handshake (the HELLO and FEATURES_REQUEST read back).
fn switch10(addr: std::net::SocketAddr, dpid: u64) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(&of10::encode10(&Message10::Hello(Vec::new()), 1)).unwrap();
    finish10(&mut s, dpid);
    s
}

fn finish10(s: &mut TcpStream, dpid: u64) {
    let hello = read_msg(s).expect("the controller's HELLO");
    assert_eq!(hello[1], 0);
    let req = read_msg(s).expect("FEATURES_REQUEST");
    assert_eq!((req[0], req[1]), (1, 5), "{req:02x?}");
    let xid = u32::from_be_bytes([req[4], req[5], req[6], req[7]]);
    let reply = FeaturesReply10 {
        datapath_id: dpid,
        n_buffers: 0,
        n_tables: 1,
        capabilities: 0,
        actions: 0,
        ports: Vec::new(),
    };
    s.write_all(&of10::encode10(&Message10::FeaturesReply(reply), xid)).unwrap();
}

/// A packet-in (no buffer) of a frame from `src` to `dst` on port `port`.
fn packet_in10(src: u8, dst: u8, port: u16) -> Vec<u8> {
    let mut frame = vec![2, 0, 0, 0, 0, dst, 2, 0, 0, 0, 0, src, 0x08, 0x00];
    frame.resize(60, 0);
    let pi = PacketIn10 { buffer_id: of10::NO_BUFFER10, total_len: 60, in_port: port, reason: 0, data: frame };
    of10::encode10(&Message10::PacketIn(pi), 7)
}

/// The learning switch answers: flood for an unknown destination, a
/// flow-mod to the learned port (and the packet sent on) for a known one.
fn learns(s: &mut TcpStream) {
    s.write_all(&packet_in10(1, 2, 1)).unwrap();
    let out = read_msg(s).expect("an answer to a packet-in");
    let (_, m) = of10::decode10(&out).unwrap();
    let Message10::PacketOut(po) = m else { panic!("expected a flood, got {m:?}") };
    assert_eq!(po.actions, vec![of10::Action10::Output { port: of10::port10::FLOOD, max_len: 0 }]);
    s.write_all(&packet_in10(2, 1, 2)).unwrap();
    let (_, m) = of10::decode10(&read_msg(s).unwrap()).unwrap();
    let Message10::FlowMod(fm) = m else { panic!("expected a flow-mod, got {m:?}") };
    assert_eq!((fm.matched.in_port, fm.matched.dl_dst), (2, [2, 0, 0, 0, 0, 1]));
    // The source too (a host is learned on every switch its frames cross),
    // and an idle timeout: the flow goes when its hosts stop talking.
    assert_eq!(fm.matched.dl_src, [2, 0, 0, 0, 0, 2]);
    assert_eq!(
        fm.matched.wildcards & (of10::wildcards::DL_SRC | of10::wildcards::DL_DST | of10::wildcards::IN_PORT),
        0
    );
    assert_eq!(fm.idle_timeout, sluice_ofcontroller::LEARNED_IDLE_TIMEOUT);
    assert!(fm.idle_timeout > 0);
    assert_eq!(fm.actions, vec![of10::Action10::Output { port: 1, max_len: 0 }]);
    // Not buffered by the switch: the packet itself goes on.
    let (_, m) = of10::decode10(&read_msg(s).unwrap()).unwrap();
    let Message10::PacketOut(po) = m else { panic!("expected the packet sent on, got {m:?}") };
    assert_eq!((po.in_port, po.data.len()), (2, 60));
}

#[test]
fn a_thousand_switches_connect_at_once_and_each_is_served() {
    // Two descriptors per connection in this process (ours and the controller's).
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain system calls on a local struct.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
    assert!(lim.rlim_cur >= 2200, "the descriptor limit ({}) is too low for this test", lim.rlim_cur);
    let ctl = start(Config { threads: 2, ..Config::default() });
    let addr = ctl.local_addr;
    let mut all: Vec<TcpStream> = (0..1000).map(|_| TcpStream::connect(addr).unwrap()).collect();
    for s in &mut all {
        s.write_all(&of10::encode10(&Message10::Hello(Vec::new()), 1)).unwrap();
    }
    for (i, s) in all.iter_mut().enumerate() {
        finish10(s, 1000 + i as u64);
    }
    for s in &mut all {
        learns(s);
    }
    let t0 = Instant::now();
    while ctl.counters.switches_up.load(Ordering::Relaxed) < 1000 {
        assert!(t0.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(all);
    let t0 = Instant::now();
    while ctl.counters.switches_down.load(Ordering::Relaxed) < 1000 {
        assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", ctl.counters);
        std::thread::sleep(Duration::from_millis(10));
    }
    ctl.stop();
}

#[test]
fn an_openflow_1_3_switch_gets_the_table_miss_flow_and_port_descriptions_are_asked() {
    let ctl = start(Config::default());
    let mut s = TcpStream::connect(ctl.local_addr).unwrap();
    let hello = sluice_openflow::encode(
        &Message::Hello(vec![sluice_openflow::HelloElement::VersionBitmap(vec![1 << OFP13])]),
        OFP13,
        1,
    );
    s.write_all(&hello).unwrap();
    assert_eq!(read_msg(&mut s).unwrap()[1], 0);
    let req = read_msg(&mut s).unwrap();
    assert_eq!((req[0], req[1]), (OFP13, 5));
    let f = Features { datapath_id: 9, n_buffers: 0, n_tables: 64, auxiliary_id: 0, capabilities: 0 };
    s.write_all(&sluice_openflow::encode(&Message::FeaturesReply(f), OFP13, 2)).unwrap();
    let (h, m) = sluice_openflow::decode(&read_msg(&mut s).unwrap()).unwrap();
    assert!(matches!(m, Message::MultipartRequest { .. }), "{m:?}");
    let reply = Message::MultipartReply { flags: 0, body: MultipartReply::PortDesc(Vec::new()) };
    s.write_all(&sluice_openflow::encode(&reply, OFP13, h.xid)).unwrap();
    let (_, m) = sluice_openflow::decode(&read_msg(&mut s).unwrap()).unwrap();
    let Message::FlowMod(fm) = m else { panic!("{m:?}") };
    assert_eq!((fm.priority, fm.matched.fields.len()), (0, 0), "the table-miss flow");
    ctl.stop();
}

#[test]
fn a_configured_role_is_asked_of_every_1_3_switch_once_it_is_up() {
    let role = (sluice_openflow::controller_role::MASTER, 42);
    let ctl = start(Config { role: Some(role), ..Config::default() });
    let mut s = TcpStream::connect(ctl.local_addr).unwrap();
    let hello = sluice_openflow::encode(
        &Message::Hello(vec![sluice_openflow::HelloElement::VersionBitmap(vec![1 << OFP13])]),
        OFP13,
        1,
    );
    s.write_all(&hello).unwrap();
    read_msg(&mut s).unwrap();
    read_msg(&mut s).unwrap();
    let f = Features { datapath_id: 10, n_buffers: 0, n_tables: 64, auxiliary_id: 0, capabilities: 0 };
    s.write_all(&sluice_openflow::encode(&Message::FeaturesReply(f), OFP13, 2)).unwrap();
    let (h, _) = sluice_openflow::decode(&read_msg(&mut s).unwrap()).unwrap();
    let reply = Message::MultipartReply { flags: 0, body: MultipartReply::PortDesc(Vec::new()) };
    s.write_all(&sluice_openflow::encode(&reply, OFP13, h.xid)).unwrap();
    let (_, m) = sluice_openflow::decode(&read_msg(&mut s).unwrap()).unwrap();
    assert_eq!(m, Message::RoleRequest(sluice_openflow::Role { role: role.0, generation_id: role.1 }));
    ctl.stop();
}

#[test]
fn hostile_switches_are_closed_or_answered_and_the_good_ones_are_served() {
    let ctl =
        start(Config { handshake_timeout: Duration::from_millis(500), max_pending: 64 << 10, ..Config::default() });
    let addr = ctl.local_addr;
    let mut good = switch10(addr, 1);
    learns(&mut good);

    // Garbage first: closed.
    let mut g = TcpStream::connect(addr).unwrap();
    g.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    let _ = read_msg(&mut g);
    assert!(read_msg(&mut g).is_none(), "a connection that does not start with HELLO is closed");

    // No common version (a bitmap of 1.5 only): an error, closed.
    let mut v = TcpStream::connect(addr).unwrap();
    let only_1_5 = sluice_openflow::HelloElement::VersionBitmap(vec![1 << 6]);
    v.write_all(&sluice_openflow::encode(&Message::Hello(vec![only_1_5]), 6, 1)).unwrap();
    let _ = read_msg(&mut v);
    let e = read_msg(&mut v).expect("HELLO_FAILED");
    assert_eq!(e[1], 1, "an ERROR: {e:02x?}");
    assert!(read_msg(&mut v).is_none());

    // A handshake never finished: closed after the timeout.
    let mut idle = TcpStream::connect(addr).unwrap();
    let _ = read_msg(&mut idle);
    assert!(read_msg(&mut idle).is_none(), "closed after the handshake timeout");

    // Malformed messages after the handshake: errors, the connection stays.
    let mut m = switch10(addr, 2);
    m.write_all(&[1, 0xee, 0, 8, 0, 0, 0, 5]).unwrap();
    let e = read_msg(&mut m).unwrap();
    assert_eq!(
        (e[1], u16::from_be_bytes([e[8], e[9]]), u16::from_be_bytes([e[10], e[11]])),
        (1, 1, 1),
        "BAD_REQUEST/BAD_TYPE"
    );
    let mut truncated_flow_mod = of10::encode10(&Message10::BarrierReply, 5);
    truncated_flow_mod[1] = of10::msg_type10::PACKET_IN;
    m.write_all(&truncated_flow_mod).unwrap();
    let e = read_msg(&mut m).unwrap();
    assert_eq!((e[1], u16::from_be_bytes([e[10], e[11]])), (1, 6), "BAD_REQUEST/BAD_LEN: {e:02x?}");
    learns(&mut m);

    // A switch that stops reading: what does not fit its buffer is dropped
    // and counted, and the good switch is still served meanwhile.
    let mut deaf = switch10(addr, 3);
    deaf.set_write_timeout(Some(Duration::from_millis(200))).unwrap();
    let burst: Vec<u8> = (0..2000).flat_map(|_| packet_in10(9, 8, 1)).collect();
    for _ in 0..200 {
        match deaf.write(&burst) {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::TimedOut => break,
            Err(e) => panic!("{e}"),
        }
        if ctl.counters.dropped_out.load(Ordering::Relaxed) > 0 {
            break;
        }
    }
    let t0 = Instant::now();
    while ctl.counters.dropped_out.load(Ordering::Relaxed) == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "nothing dropped toward a switch that stopped reading: {:?}",
            ctl.counters
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    good.write_all(&packet_in10(3, 1, 2)).unwrap();
    let (_, answer) = of10::decode10(&read_msg(&mut good).expect("the good switch is still answered")).unwrap();
    assert!(matches!(answer, Message10::FlowMod(_)), "{answer:?}");
    let (_, answer) = of10::decode10(&read_msg(&mut good).unwrap()).unwrap();
    assert!(matches!(answer, Message10::PacketOut(_)), "{answer:?}");
    assert!(ctl.counters.closed_bad.load(Ordering::Relaxed) >= 3, "{:?}", ctl.counters);
    assert!(ctl.counters.malformed.load(Ordering::Relaxed) >= 2, "{:?}", ctl.counters);
    ctl.stop();
}

#[test]
fn a_silent_switch_gets_echo_requests_and_is_closed_after_three() {
    let ctl = start(Config { echo_interval: Duration::from_millis(200), ..Config::default() });
    let mut s = switch10(ctl.local_addr, 4);
    let t0 = Instant::now();
    let mut echoes = 0;
    while let Some(m) = read_msg(&mut s) {
        assert_eq!(m[1], of10::msg_type10::ECHO_REQUEST, "{m:02x?}");
        echoes += 1;
    }
    assert_eq!(echoes, 3, "three echo requests, then closed");
    assert!(t0.elapsed() < Duration::from_secs(3), "closed after {:?}", t0.elapsed());
    // One that answers stays.
    let mut s = switch10(ctl.local_addr, 5);
    for _ in 0..5 {
        let m = read_msg(&mut s).expect("an echo request, the connection open");
        assert_eq!(m[1], of10::msg_type10::ECHO_REQUEST);
        let mut reply = m.clone();
        reply[1] = of10::msg_type10::ECHO_REPLY;
        s.write_all(&reply).unwrap();
    }
    assert_eq!(ctl.counters.switches_down.load(Ordering::Relaxed), 1);
    ctl.stop();
}

#[test]
fn a_datapath_id_that_connects_again_replaces_its_older_connection() {
    // Two threads: the second connection may land on either.
    let ctl = start(Config { threads: 2, ..Config::default() });
    let mut first = switch10(ctl.local_addr, 77);
    learns(&mut first);
    let mut second = switch10(ctl.local_addr, 77);
    learns(&mut second);
    assert!(read_msg(&mut first).is_none(), "the older connection of datapath 77 is closed");
    // The newer one is served on.
    second.write_all(&packet_in10(5, 1, 2)).unwrap();
    assert!(read_msg(&mut second).is_some());
    assert_eq!(ctl.counters.switches_up.load(Ordering::Relaxed), 2);
    ctl.stop();
}
