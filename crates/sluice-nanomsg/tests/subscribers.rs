//! The publisher against subscribers written here from the SP wire
//! protocol (the module documentation of `sluice_nanomsg`): over IPC and
//! TCP, messages arrive whole and in order, a peer that is not a SUB is
//! closed, and a subscriber that goes away is forgotten.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use sluice_nanomsg::{header, Publisher};

/// Waits (generously: CI machines are busy) until `f` holds.
fn eventually(what: &str, f: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(60), "never: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn read_frame(s: &mut impl Read, ipc: bool) -> Vec<u8> {
    if ipc {
        let mut t = [0u8; 1];
        s.read_exact(&mut t).unwrap();
        assert_eq!(t[0], 1, "IPC message type");
    }
    let mut len = [0u8; 8];
    s.read_exact(&mut len).unwrap();
    let mut m = vec![0u8; u64::from_be_bytes(len) as usize];
    s.read_exact(&mut m).unwrap();
    m
}

fn subscribe(s: &mut (impl Read + Write)) {
    s.write_all(&header(0x21)).unwrap();
    let mut h = [0u8; 8];
    s.read_exact(&mut h).unwrap();
    assert_eq!(h, [0, b'S', b'P', 0, 0, 0x20, 0, 0], "a PUB's header");
}

#[test]
fn an_ipc_subscriber_gets_every_message_whole_and_in_order() {
    let dir = std::env::temp_dir().join(format!("sluice-nn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("events.ipc");
    let publisher = Publisher::bind(&format!("ipc://{}", path.display())).unwrap();
    assert!(!publisher.has_subscribers());
    // Nobody listens yet: dropped, counted as unheard.
    publisher.publish([&b"lost"[..]]);
    assert_eq!(publisher.stats().unheard, 1);

    let mut a = UnixStream::connect(&path).unwrap();
    subscribe(&mut a);
    eventually("the subscriber is counted", || publisher.has_subscribers());
    let msgs: Vec<Vec<u8>> = (0..1000u32).map(|i| i.to_le_bytes().repeat(1 + i as usize % 7)).collect();
    for pair in msgs.chunks(3) {
        publisher.publish(pair.iter().map(|m| m.as_slice()));
    }
    for m in &msgs {
        assert_eq!(&read_frame(&mut a, true), m);
    }
    let st = publisher.stats();
    assert_eq!((st.published, st.queue_dropped, st.backlog_dropped), (1001, 0, 0), "{st:?}");

    // Gone: forgotten.
    drop(a);
    publisher.publish([&b"x"[..]]);
    eventually("the subscriber is forgotten", || !publisher.has_subscribers());
    drop(publisher);
    assert!(!path.exists(), "the socket file is removed");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_tcp_subscriber_is_served_and_a_peer_of_another_type_is_closed() {
    let publisher = Publisher::bind("tcp://127.0.0.1:0").unwrap();
    let addr = publisher.address().strip_prefix("tcp://").unwrap().to_string();

    // A REQ socket (0x30) is no peer of a PUB.
    let mut req = std::net::TcpStream::connect(&addr).unwrap();
    req.write_all(&header(0x30)).unwrap();
    let mut h = [0u8; 8];
    req.read_exact(&mut h).unwrap();
    req.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut rest = Vec::new();
    assert_eq!(req.read_to_end(&mut rest).unwrap(), 0, "closed without a message");

    assert_eq!(publisher.stats().subscribers, 0, "a closed peer of another type is no subscriber");
    let mut sub = std::net::TcpStream::connect(&addr).unwrap();
    subscribe(&mut sub);
    eventually("the subscriber is counted", || publisher.has_subscribers());
    publisher.publish([&b"LEA|one"[..], &b"AGE|two"[..]]);
    assert_eq!(read_frame(&mut sub, false), b"LEA|one");
    assert_eq!(read_frame(&mut sub, false), b"AGE|two");
    assert_eq!(publisher.stats().subscribers, 1);
}

#[test]
fn bad_addresses_and_a_socket_in_use_are_refused_with_a_reason() {
    for (addr, says) in [
        ("inproc://x", "not a nanomsg address"),
        ("tcp://127.0.0.1", "tcp://HOST:PORT"),
        ("tcp://127.0.0.1:http", "not a port number"),
        ("ipc://", "no path"),
    ] {
        let e = Publisher::bind(addr).unwrap_err();
        assert!(e.contains(says), "{addr}: {e}");
    }
    let path = std::env::temp_dir().join(format!("sluice-nn-busy-{}.ipc", std::process::id()));
    let first = Publisher::bind(&format!("ipc://{}", path.display())).unwrap();
    let e = Publisher::bind(&format!("ipc://{}", path.display())).unwrap_err();
    assert!(e.contains("another process listens"), "{e}");
    drop(first);
    // A stale file (nobody listens) is replaced.
    std::fs::write(&path, b"").unwrap();
    let again = Publisher::bind(&format!("ipc://{}", path.display()));
    assert!(again.is_ok(), "{again:?}");
}
