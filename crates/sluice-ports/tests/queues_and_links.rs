//! Ports on real interfaces, in network namespaces this test creates (and
//! removes, also on failure): AF_XDP and TAP with two queues (frames of many
//! flows spread over both queues, none lost, each flow on one queue), and
//! what each backend reports when its interface goes down, comes back, is
//! deleted and is created again (the table in the crate's documentation),
//! and VLAN-tagged frames received by an AF_PACKET port with their tags.
//!
//! Needs root and iproute2 (`ip`); fails with a clear message without them.

use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sluice_ports::afpacket::AfPacketPort;
use sluice_ports::afxdp::{AfXdpInterface, AfXdpPort};
use sluice_ports::tap::TapPort;
use sluice_ports::{
    link_down, link_event, link_is_up, require_rx_queues, rx_queues, LinkError, LinkEvent, Port, RxBatch, VnetHdr,
};

fn require_root() {
    // SAFETY: plain system call.
    let uid = unsafe { libc::geteuid() };
    assert_eq!(uid, 0, "these tests create network namespaces and XDP programs: run them as root");
    let ip = Command::new("ip").arg("-V").output();
    assert!(
        matches!(ip, Ok(ref o) if o.status.success()),
        "`ip` (iproute2) is missing: install it (scripts/ensure-net-tools.sh or apt-get install iproute2)"
    );
}

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A network namespace, deleted when dropped (also when a test fails).
struct Netns {
    name: String,
}

impl Netns {
    fn new(tag: &str) -> Netns {
        require_root();
        let name = format!("spq{}-{}-{tag}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        run(&["ip", "netns", "add", &name]);
        let ns = Netns { name };
        ns.ip("link set lo up");
        // No IPv6 chatter (router solicitations, MLD) on the test's interfaces.
        let _ = Command::new("ip")
            .args(["netns", "exec", &ns.name, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"])
            .output();
        ns
    }

    /// Runs `ip -n NS ARGS...`; panics with its error output when it fails.
    fn ip(&self, args: &str) {
        let mut v = vec!["ip", "-n", &self.name];
        v.extend(args.split_whitespace());
        run(&v);
    }

    /// Runs `f` on a thread inside this namespace: sockets and devices it
    /// opens belong to the namespace, wherever they are used afterwards.
    fn enter<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let path = format!("/run/netns/{}", self.name);
        std::thread::scope(|s| {
            s.spawn(|| {
                let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
                // SAFETY: setns on a namespace file we hold open; it affects this thread only.
                let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
                assert_eq!(r, 0, "setns {path}: {}", std::io::Error::last_os_error());
                f()
            })
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).output();
    }
}

fn run(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap_or_else(|e| panic!("{}: {e}", args[0]));
    assert!(out.status.success(), "`{}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}

fn sh(args: &[&str]) -> String {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap_or_else(|e| panic!("{}: {e}", args[0]));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const MAGIC: &[u8; 4] = b"SLQ1";
const UDP_DST: u16 = 7777;

/// What a test frame carries: sequence number, flow, sender tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Mark {
    seq: u32,
    flow: u16,
    tag: u8,
}

/// Ethernet + IPv4 + UDP frame of flow `flow` (its UDP source port) with a mark.
fn frame(m: Mark) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 8 + 11 + 19];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip_len = (f.len() - 14) as u16;
    f[14] = 0x45;
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[10, 99, 0, 1]);
    f[30..34].copy_from_slice(&[10, 99, 0, 2]);
    let mut sum: u32 = f[14..34].chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c[1]]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    f[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f[34..36].copy_from_slice(&(10000 + m.flow).to_be_bytes());
    f[36..38].copy_from_slice(&UDP_DST.to_be_bytes());
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f[42..46].copy_from_slice(MAGIC);
    f[46..50].copy_from_slice(&m.seq.to_be_bytes());
    f[50..52].copy_from_slice(&m.flow.to_be_bytes());
    f[52] = m.tag;
    f
}

/// The mark of a test frame; `None` for anything else.
fn mark(f: &[u8]) -> Option<Mark> {
    if f.len() < 53 || f[12..14] != [0x08, 0x00] || f[23] != 17 || f[36..38] != UDP_DST.to_be_bytes() {
        return None;
    }
    if &f[42..46] != MAGIC {
        return None;
    }
    Some(Mark {
        seq: u32::from_be_bytes([f[46], f[47], f[48], f[49]]),
        flow: u16::from_be_bytes([f[50], f[51]]),
        tag: f[52],
    })
}

/// A plain AF_PACKET socket on the other side of the wire (not the crate's port).
struct Raw {
    fd: OwnedFd,
}

impl Raw {
    fn open(iface: &str) -> Raw {
        let c = std::ffi::CString::new(iface).expect("name");
        // SAFETY: plain calls; the descriptor is owned right away.
        let ifindex = unsafe { libc::if_nametoindex(c.as_ptr()) };
        assert!(ifindex != 0, "no interface {iface}");
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: as above.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK, i32::from(proto)) };
        assert!(raw >= 0, "AF_PACKET socket: {}", std::io::Error::last_os_error());
        // SAFETY: fresh descriptor.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let one: libc::c_int = 1;
        // SAFETY: an int option (PACKET_IGNORE_OUTGOING).
        unsafe { libc::setsockopt(raw, libc::SOL_PACKET, 23, (&one as *const libc::c_int).cast(), 4) };
        // SAFETY: a zeroed sockaddr_ll is valid.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: a live sockaddr_ll of the size passed.
        let r = unsafe {
            libc::bind(raw, (&sll as *const libc::sockaddr_ll).cast(), std::mem::size_of::<libc::sockaddr_ll>() as u32)
        };
        assert_eq!(r, 0, "bind {iface}: {}", std::io::Error::last_os_error());
        Raw { fd }
    }

    fn send(&self, f: &[u8]) {
        for _ in 0..1000 {
            // SAFETY: sends from a live buffer.
            let r = unsafe { libc::send(self.fd.as_raw_fd(), f.as_ptr().cast(), f.len(), 0) };
            if r >= 0 {
                return;
            }
            let e = std::io::Error::last_os_error();
            // ENETDOWN: the error of a past down event, given to the next send.
            assert!(matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::ENOBUFS | libc::ENETDOWN)), "send: {e}");
            std::thread::sleep(Duration::from_micros(200));
        }
        panic!("send: the socket stayed full");
    }

    /// Test frames with tag `tag` received until `want` arrived or `wait` passed.
    fn recv_marks(&self, tag: u8, want: usize, wait: Duration) -> Vec<Mark> {
        let t0 = Instant::now();
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while out.len() < want && t0.elapsed() < wait {
            // SAFETY: receives into a live buffer.
            let r = unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if r < 0 {
                std::thread::sleep(Duration::from_micros(500));
                continue;
            }
            out.extend(mark(&buf[..r as usize]).filter(|m| m.tag == tag));
        }
        out
    }
}

/// Receives from `ports` until `want` test frames arrived in all or `wait`
/// passed; appends each port's marks to its list. Panics on a port error.
fn collect(ports: &mut [&mut dyn Port], got: &mut [Vec<Mark>], want: usize, wait: Duration) {
    let mut batch = RxBatch::new(2048);
    let t0 = Instant::now();
    loop {
        for (k, p) in ports.iter_mut().enumerate() {
            loop {
                let n = p.recv(&mut batch).unwrap_or_else(|e| panic!("{} recv: {e}", p.name()));
                for i in 0..n {
                    got[k].extend(mark(batch.frame(i).0));
                }
                if n == 0 {
                    break;
                }
            }
        }
        if got.iter().map(Vec::len).sum::<usize>() >= want || t0.elapsed() > wait {
            return;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Sends `flows` x `per_flow` marked frames through `tx` in bursts, collecting
/// them from `ports` after each burst (so no ring overflows); returns what
/// each port received.
fn spread(tx: &Raw, ports: &mut [&mut dyn Port], flows: u16, per_flow: u32) -> Vec<Vec<Mark>> {
    let mut got = vec![Vec::new(); ports.len()];
    let mut seq = 0u32;
    let total = u32::from(flows) * per_flow;
    while seq < total {
        let burst = 32.min(total - seq);
        for _ in 0..burst {
            tx.send(&frame(Mark { seq, flow: (seq % u32::from(flows)) as u16, tag: 0 }));
            seq += 1;
        }
        collect(ports, &mut got, seq as usize, Duration::from_secs(2));
    }
    got
}

/// Every frame arrived exactly once, every queue got some, each flow stayed on one queue.
fn check_spread(got: &[Vec<Mark>], flows: u16, per_flow: u32, what: &str) {
    let counts: Vec<usize> = got.iter().map(Vec::len).collect();
    let all: Vec<u32> = got.iter().flatten().map(|m| m.seq).collect();
    let set: BTreeSet<u32> = all.iter().copied().collect();
    let total = u32::from(flows) * per_flow;
    assert_eq!(set.len(), all.len(), "{what}: a frame arrived twice (per queue {counts:?})");
    assert_eq!(all.len(), total as usize, "{what}: {} of {total} frames arrived (per queue {counts:?})", all.len());
    for (q, c) in counts.iter().enumerate() {
        assert!(*c > 0, "{what}: queue {q} received nothing of {flows} flows (per queue {counts:?})");
    }
    let mut queue_of: BTreeMap<u16, BTreeSet<usize>> = BTreeMap::new();
    for (q, marks) in got.iter().enumerate() {
        for m in marks {
            queue_of.entry(m.flow).or_default().insert(q);
        }
    }
    let split: Vec<_> = queue_of.iter().filter(|(_, qs)| qs.len() > 1).collect();
    assert!(split.is_empty(), "{what}: flows on several queues: {split:?}");
    eprintln!("{what}: {total} frames of {flows} flows, per queue {counts:?}");
}

/// A veth pair `a` (in `ns_a`) - `b` (in `ns_b`) with `queues` queues on both ends, up.
fn veth_pair(ns_a: &Netns, a: &str, ns_b: &Netns, b: &str, queues: usize) {
    ns_a.ip(&format!(
        "link add {a} numrxqueues {queues} numtxqueues {queues} type veth peer name {b} \
         numrxqueues {queues} numtxqueues {queues}"
    ));
    ns_a.ip(&format!("link set {b} netns {}", ns_b.name));
    ns_a.ip(&format!("link set {a} address 02:00:00:00:00:02 up"));
    ns_b.ip(&format!("link set {b} address 02:00:00:00:00:01 up"));
    // Operational (IFF_RUNNING) once the kernel's link watch got to it.
    ns_a.enter(|| wait_until(&format!("{a} is up"), || link_is_up(a)));
    ns_b.enter(|| wait_until(&format!("{b} is up"), || link_is_up(b)));
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(5), "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn af_xdp_two_queues_spread_flows_over_their_sockets() {
    let sw = Netns::new("xs");
    let host = Netns::new("xh");
    veth_pair(&sw, "xq0", &host, "xq1", 2);
    let (iface, mut ports) = sw.enter(|| {
        assert_eq!(rx_queues("xq0").expect("queues of xq0"), 2);
        let e = AfXdpInterface::attach("xq0", 3).err().expect("3 queues on a 2-queue veth");
        let msg = e.to_string();
        assert!(msg.contains("ethtool -L xq0") && msg.contains("numrxqueues 3"), "unhelpful error: {msg}");
        let iface = AfXdpInterface::attach("xq0", 2).expect("attach XDP to xq0");
        let ports: Vec<AfXdpPort> = (0..2).map(|q| AfXdpPort::open_queue(&iface, q).expect("open queue")).collect();
        assert!(AfXdpPort::open_queue(&iface, 2).is_err(), "a queue beyond the map opened");
        (iface, ports)
    });
    eprintln!("XDP program attached in {} mode", iface.mode());
    assert!(sh(&["ip", "-n", &sw.name, "link", "show", "xq0"]).contains("xdp"), "no XDP program on xq0");
    let tx = host.enter(|| Raw::open("xq1"));
    let (p0, p1) = ports.split_at_mut(1);
    let got = spread(&tx, &mut [&mut p0[0], &mut p1[0]], 64, 16);
    check_spread(&got, 64, 16, "AF_XDP, 2 queues");
    assert_eq!((ports[0].queue(), ports[1].queue()), (0, 1));
    // Each socket transmits (on its own queue); the peer receives all.
    for (k, p) in ports.iter_mut().enumerate() {
        for seq in 0..40 {
            p.send(&frame(Mark { seq, flow: seq as u16, tag: k as u8 + 1 }), &VnetHdr::default()).expect("send");
        }
        p.flush().expect("flush");
    }
    let mut back = tx.recv_marks(1, 40, Duration::from_secs(3));
    back.extend(tx.recv_marks(2, 40, Duration::from_secs(3)));
    let by_tag: BTreeMap<u8, usize> = back.iter().fold(BTreeMap::new(), |mut m, x| {
        *m.entry(x.tag).or_default() += 1;
        m
    });
    assert_eq!(by_tag, BTreeMap::from([(1, 40), (2, 40)]), "frames sent by the two sockets as the peer saw them");
    // The program stays while any socket of the interface lives, and goes with the last.
    drop(iface);
    ports.truncate(1);
    assert!(sh(&["ip", "-n", &sw.name, "link", "show", "xq0"]).contains("xdp"), "program detached too early");
    let mut p0 = ports.pop().expect("one port");
    // Queue 1 has no socket now: its flows go to the kernel stack, queue 0's still arrive.
    let q0_flows: BTreeSet<u16> = got[0].iter().map(|m| m.flow).collect();
    let mut again = vec![Vec::new()];
    let (mut want, mut seq) = (0, 0u32);
    for _ in 0..8 {
        for _ in 0..32 {
            let flow = (seq % 64) as u16;
            tx.send(&frame(Mark { seq, flow, tag: 0 }));
            want += usize::from(q0_flows.contains(&flow));
            seq += 1;
        }
        collect(&mut [&mut p0], &mut again, want, Duration::from_secs(2));
    }
    let flows_again: BTreeSet<u16> = again[0].iter().map(|m| m.flow).collect();
    assert_eq!(flows_again, q0_flows, "flows received by queue 0 alone");
    assert_eq!(again[0].len(), want, "frames of queue 0's flows received by queue 0 alone");
    drop(p0);
    // Soon: a child process that another test forks holds our descriptors
    // until it calls exec.
    wait_until("the XDP program is detached with the last socket", || {
        !sh(&["ip", "-n", &sw.name, "link", "show", "xq0"]).contains("xdp")
    });
}

#[test]
fn tap_two_queues_receive_flows_from_the_kernel() {
    let ns = Netns::new("tq");
    let (mut ports, tx) = ns.enter(|| {
        let ports = TapPort::open_queues("tq0", false, 2).expect("2-queue TAP");
        assert!(link_is_up("tq0"), "tq0 not up after open_queues");
        (ports, Raw::open("tq0"))
    });
    assert_eq!(ports.len(), 2);
    let detail = sh(&["ip", "-n", &ns.name, "-d", "link", "show", "tq0"]);
    assert!(detail.contains("multi_queue"), "tq0 is not a multi-queue TAP:\n{detail}");
    let (p0, p1) = ports.split_at_mut(1);
    let got = spread(&tx, &mut [&mut p0[0], &mut p1[0]], 64, 16);
    check_spread(&got, 64, 16, "TAP, 2 queues");
    // Frames written to either queue reach the kernel side.
    for (k, p) in ports.iter_mut().enumerate() {
        for seq in 0..20 {
            p.send(&frame(Mark { seq, flow: seq as u16, tag: k as u8 + 1 }), &VnetHdr::default()).expect("send");
        }
        p.flush().expect("flush");
        assert_eq!(p.stats().tx_packets, 20);
    }
    let back = tx.recv_marks(1, 20, Duration::from_secs(3));
    assert_eq!(back.len(), 20, "frames written to TAP queue 0 as the kernel saw them");
    let back = tx.recv_marks(2, 20, Duration::from_secs(3));
    assert_eq!(back.len(), 20, "frames written to TAP queue 1 as the kernel saw them");
    // The device lives while a queue is open.
    ports.truncate(1);
    assert!(ns.enter(|| link_is_up("tq0")), "tq0 went away with one of its queues");
    drop(ports);
    // Soon: a child process that another test forks holds our descriptors
    // until it calls exec.
    ns.enter(|| wait_until("tq0 goes away with its last queue", || !link_is_up("tq0")));
}

/// Sluice's XDP program on interface `name` of namespace `ns` (one
/// queue) and an AF_XDP port on its queue 0.
fn one_queue_af_xdp(ns: &Netns, name: &str) -> (std::sync::Arc<AfXdpInterface>, AfXdpPort) {
    ns.enter(|| {
        let iface = AfXdpInterface::attach(name, 1).unwrap_or_else(|e| panic!("attach XDP to {name}: {e}"));
        let port = AfXdpPort::open_queue(&iface, 0).unwrap_or_else(|e| panic!("open {name} queue 0: {e}"));
        (iface, port)
    })
}

/// The first link error `port` reports from `recv` within a few calls.
fn recv_link_error(port: &mut dyn Port, calls: usize) -> Option<std::io::Error> {
    let mut batch = RxBatch::new(2048);
    for _ in 0..calls {
        if let Err(e) = port.recv(&mut batch) {
            assert!(link_down(&e), "{}: recv failed, not with a link error: {e}", port.name());
            return Some(e);
        }
    }
    None
}

/// Sends one frame and flushes: the error of either.
fn send_one(port: &mut dyn Port, seq: u32) -> std::io::Result<()> {
    port.send(&frame(Mark { seq, flow: 1, tag: 9 }), &VnetHdr::default())?;
    port.flush()
}

/// Frames go both ways through `port`, whose peer socket is `peer`. Sent in
/// rounds until 5 arrive: right after a link comes up, the kernel may drop a
/// few frames until its link watch has restarted the sender's queue.
fn traffic_both_ways(port: &mut dyn Port, peer: &Raw, what: &str) {
    let mut got = vec![Vec::new()];
    // Leftovers from before.
    collect(&mut [&mut *port], &mut got, usize::MAX, Duration::ZERO);
    got[0].clear();
    let t0 = Instant::now();
    let mut seq = 0;
    while got[0].len() < 5 && t0.elapsed() < Duration::from_secs(3) {
        for _ in 0..5 {
            peer.send(&frame(Mark { seq, flow: seq as u16, tag: 0 }));
            seq += 1;
        }
        collect(&mut [&mut *port], &mut got, 5, Duration::from_millis(200));
    }
    assert!(got[0].len() >= 5, "{what}: {} of {seq} frames from the peer received by the port", got[0].len());
    let (mut back, mut seq) = (Vec::new(), 0);
    while back.len() < 5 && t0.elapsed() < Duration::from_secs(6) {
        for _ in 0..5 {
            port.send(&frame(Mark { seq, flow: seq as u16, tag: 7 }), &VnetHdr::default()).expect("send");
            seq += 1;
        }
        port.flush().unwrap_or_else(|e| panic!("{what}: flush: {e}"));
        back.extend(peer.recv_marks(7, 5 - back.len(), Duration::from_millis(200)));
    }
    assert!(back.len() >= 5, "{what}: {} of {seq} frames from the port received by the peer", back.len());
}

/// What `poll` reports for a port's descriptor right now (0: nothing).
fn poll_now(port: &dyn Port) -> i16 {
    let mut p = libc::pollfd { fd: port.fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one live pollfd.
    let r = unsafe { libc::poll(&mut p, 1, 0) };
    assert!(r >= 0, "poll: {}", std::io::Error::last_os_error());
    p.revents
}

/// The link event of a result and the system call error behind it.
fn cause(r: std::io::Result<()>) -> (Option<LinkEvent>, Option<i32>) {
    let os = r.as_ref().err().and_then(|e| e.get_ref()?.downcast_ref::<LinkError>()?.os_error);
    (event(r), os)
}

fn event(r: std::io::Result<()>) -> Option<LinkEvent> {
    match r {
        Ok(()) => None,
        Err(e) => {
            assert!(link_down(&e), "not a link error: {e}");
            assert_eq!(e.kind(), std::io::ErrorKind::NetworkDown);
            link_event(&e)
        }
    }
}

/// Renames interface `from` of `ns` to `to` (down, renamed, up) and waits until it is up.
fn rename_link(ns: &Netns, from: &str, to: &str) {
    ns.ip(&format!("link set {from} down"));
    ns.ip(&format!("link set {from} name {to}"));
    ns.ip(&format!("link set {to} up"));
    ns.enter(|| wait_until(&format!("{to} is up"), || link_is_up(to)));
}

/// `r` says that the port's interface `was` is gone, renamed `now`.
fn assert_renamed(r: std::io::Result<()>, was: &str, now: &str) {
    let e = r.expect_err("check_link on a renamed interface");
    assert_eq!(link_event(&e), Some(LinkEvent::Gone), "{e}");
    let renamed = e.get_ref().and_then(|l| l.downcast_ref::<LinkError>()).and_then(|l| l.renamed_to.clone());
    assert_eq!(renamed.as_deref(), Some(now), "{e}");
    assert_eq!(e.to_string(), format!("{was}: the interface is gone (renamed {now})"));
}

#[test]
fn af_packet_port_keeps_working_after_down_up_and_reports_deletion() {
    let ns = Netns::new("pl");
    ns.ip("link add pl0 type veth peer name pl1");
    ns.ip("link set pl0 up");
    ns.ip("link set pl1 up");
    let (mut port, peer) = ns.enter(|| {
        wait_until("pl0 is up", || link_is_up("pl0"));
        (AfPacketPort::open("pl0", false, None).expect("open pl0"), Raw::open("pl1"))
    });
    traffic_both_ways(&mut port, &peer, "before");
    assert!(port.check_link().is_ok());

    ns.ip("link set pl0 down");
    assert_eq!(poll_now(&port), libc::POLLERR, "poll on a socket whose interface went down");
    let e = recv_link_error(&mut port, 3).expect("recv reports the interface going down");
    assert_eq!(link_event(&e), Some(LinkEvent::Down), "{e}");
    assert!(recv_link_error(&mut port, 3).is_none(), "ENETDOWN is reported once");
    assert_eq!(poll_now(&port), 0, "POLLERR is cleared by the recv that reported it");
    let dropped = port.stats().tx_dropped;
    assert_eq!(cause(send_one(&mut port, 1)), (Some(LinkEvent::Down), Some(libc::ENETDOWN)));
    assert_eq!(port.stats().tx_dropped, dropped + 1, "the refused frame counts as dropped");
    assert_eq!(event(port.check_link()), Some(LinkEvent::Down));
    assert!(!ns.enter(|| link_is_up("pl0")));

    ns.ip("link set pl0 up");
    ns.enter(|| wait_until("pl0 is up again", || link_is_up("pl0")));
    assert!(port.check_link().is_ok(), "check_link after up");
    traffic_both_ways(&mut port, &peer, "after down and up, same socket");

    // Down and up with nothing received in between: the kernel hands the
    // down event's ENETDOWN to the next send, which the port retries.
    ns.ip("link set pl0 down");
    ns.ip("link set pl0 up");
    ns.enter(|| wait_until("pl0 is up again", || link_is_up("pl0")));
    send_one(&mut port, 4).expect("a send after down and up");
    assert_eq!(peer.recv_marks(9, 1, Duration::from_secs(2)).len(), 1, "the send after down and up got through");
    traffic_both_ways(&mut port, &peer, "after a bounce nobody received in");

    // No carrier: only check_link can tell.
    ns.ip("link set pl1 down");
    let e = port.check_link().expect_err("no carrier");
    assert_eq!(link_event(&e), Some(LinkEvent::Down), "no carrier: {e}");
    assert_eq!(e.to_string(), "pl0: the interface has no carrier (its peer is down or unplugged)");
    assert!(send_one(&mut port, 5).is_ok(), "sending without carrier is no error");
    assert!(!ns.enter(|| link_is_up("pl0")), "link_is_up without carrier");
    ns.ip("link set pl1 up");
    ns.enter(|| wait_until("pl0 has its carrier back", || link_is_up("pl0")));
    assert!(port.check_link().is_ok());

    // Renamed: the socket works on, but the port (pl0) is gone until the name is back.
    rename_link(&ns, "pl0", "pl9");
    let _ = recv_link_error(&mut port, 3);
    assert_renamed(port.check_link(), "pl0", "pl9");
    traffic_both_ways(&mut port, &peer, "renamed, same socket");
    rename_link(&ns, "pl9", "pl0");
    let _ = recv_link_error(&mut port, 3);
    assert!(port.check_link().is_ok(), "check_link once the name is back");

    ns.ip("link del pl0");
    assert_eq!(poll_now(&port), libc::POLLERR, "poll on a socket whose interface was deleted");
    let e = recv_link_error(&mut port, 3).expect("recv reports the deletion");
    assert_eq!(link_event(&e), Some(LinkEvent::Gone), "{e}");
    assert_eq!(cause(send_one(&mut port, 2)), (Some(LinkEvent::Gone), Some(libc::ENXIO)));
    assert_eq!(event(port.check_link()), Some(LinkEvent::Gone));

    // The same name again: the old socket stays dead, a new one works.
    ns.ip("link add pl0 type veth peer name pl1");
    ns.ip("link set pl0 up");
    ns.ip("link set pl1 up");
    let (mut fresh, peer) = ns.enter(|| {
        wait_until("the new pl0 is up", || link_is_up("pl0"));
        (AfPacketPort::open("pl0", false, None).expect("reopen pl0"), Raw::open("pl1"))
    });
    assert_eq!(event(port.check_link()), Some(LinkEvent::Gone), "the old port on the new pl0");
    assert_eq!(event(send_one(&mut port, 3)), Some(LinkEvent::Gone));
    peer.send(&frame(Mark { seq: 9, flow: 9, tag: 0 }));
    let mut got = vec![Vec::new()];
    collect(&mut [&mut port], &mut got, 1, Duration::from_millis(300));
    assert!(got[0].is_empty(), "the old socket received from the new interface");
    traffic_both_ways(&mut fresh, &peer, "reopened");
}

#[test]
fn af_xdp_port_keeps_working_after_down_up_and_reports_deletion() {
    let sw = Netns::new("xl");
    let host = Netns::new("xm");
    veth_pair(&sw, "xl0", &host, "xl1", 1);
    let (iface, mut port) = one_queue_af_xdp(&sw, "xl0");
    let peer = host.enter(|| Raw::open("xl1"));
    traffic_both_ways(&mut port, &peer, "before");
    assert!(port.check_link().is_ok());

    // No carrier: only check_link tells.
    host.ip("link set xl1 down");
    assert_eq!(event(port.check_link()), Some(LinkEvent::Down), "no carrier");
    assert!(send_one(&mut port, 0).is_ok(), "sending without carrier is no error");
    host.ip("link set xl1 up");
    sw.enter(|| wait_until("xl0 has its carrier back", || link_is_up("xl0")));
    assert!(port.check_link().is_ok());

    sw.ip("link set xl0 down");
    assert_eq!(poll_now(&port), 0, "poll says nothing for an XDP socket whose interface is down");
    assert_eq!(event(port.check_link()), Some(LinkEvent::Down));
    let e = recv_link_error(&mut port, 64).expect("recv reports the interface down within 64 empty calls");
    assert_eq!(link_event(&e), Some(LinkEvent::Down), "{e}");
    assert_eq!(cause(send_one(&mut port, 1)), (Some(LinkEvent::Down), Some(libc::ENETDOWN)));

    sw.ip("link set xl0 up");
    sw.enter(|| wait_until("xl0 is up again", || link_is_up("xl0")));
    assert!(port.check_link().is_ok(), "check_link after up");
    // The frame queued while down stayed in the ring: it goes out with the next flush.
    port.flush().expect("flush after up");
    let late = peer.recv_marks(9, 1, Duration::from_secs(1));
    assert_eq!(late.len(), 1, "the frame sent while down, after up");
    traffic_both_ways(&mut port, &peer, "after down and up, same socket");

    // Renamed: the socket works on, but the port (xl0) is gone until the name is back.
    rename_link(&sw, "xl0", "xl9");
    assert_renamed(port.check_link(), "xl0", "xl9");
    traffic_both_ways(&mut port, &peer, "renamed, same socket");
    rename_link(&sw, "xl9", "xl0");
    assert!(port.check_link().is_ok(), "check_link once the name is back");

    sw.ip("link del xl0");
    assert_eq!(poll_now(&port), 0, "poll says nothing for an XDP socket whose interface was deleted");
    assert_eq!(event(port.check_link()), Some(LinkEvent::Gone));
    let e = recv_link_error(&mut port, 64).expect("recv reports the deletion");
    assert_eq!(link_event(&e), Some(LinkEvent::Gone), "{e}");
    assert_eq!(cause(send_one(&mut port, 2)), (Some(LinkEvent::Gone), Some(libc::ENXIO)));

    veth_pair(&sw, "xl0", &host, "xl1", 1);
    assert_eq!(event(port.check_link()), Some(LinkEvent::Gone), "the old port on the new xl0");
    let link = sh(&["ip", "-n", &sw.name, "link", "show", "xl0"]);
    assert!(!link.contains("xdp"), "the old program is attached to the new xl0:\n{link}");
    drop(port);
    drop(iface);
    // A new interface attachment works.
    let (_iface, mut fresh) = one_queue_af_xdp(&sw, "xl0");
    let peer = host.enter(|| Raw::open("xl1"));
    traffic_both_ways(&mut fresh, &peer, "reattached");
}

#[test]
fn tap_port_keeps_working_after_down_up_and_reports_deletion() {
    let ns = Netns::new("tl");
    let (mut port, peer) = ns.enter(|| {
        let port = TapPort::open("tl0", false).expect("tap");
        wait_until("tl0 is up", || link_is_up("tl0"));
        (port, Raw::open("tl0"))
    });
    traffic_both_ways(&mut port, &peer, "before");

    ns.ip("link set tl0 down");
    assert_eq!(poll_now(&port), 0, "poll on a TAP that went down");
    assert!(recv_link_error(&mut port, 3).is_none(), "reading a down TAP is no error");
    assert_eq!(cause(send_one(&mut port, 1)), (Some(LinkEvent::Down), Some(libc::EIO)), "write to a down TAP");
    assert_eq!(event(port.check_link()), Some(LinkEvent::Down));
    ns.ip("link set tl0 up");
    ns.enter(|| wait_until("tl0 is up again", || link_is_up("tl0")));
    assert!(port.check_link().is_ok());
    traffic_both_ways(&mut port, &peer, "after down and up, same descriptor");

    ns.ip("link del tl0");
    assert_eq!(poll_now(&port), libc::POLLERR, "poll on a TAP that was deleted");
    let e = recv_link_error(&mut port, 3).expect("read reports the deletion");
    assert_eq!(link_event(&e), Some(LinkEvent::Gone), "{e}");
    assert_eq!(cause(send_one(&mut port, 2)), (Some(LinkEvent::Gone), Some(libc::EBADFD)));
    assert_eq!(event(port.check_link()), Some(LinkEvent::Gone));
    assert_eq!(poll_now(&port), libc::POLLERR, "POLLERR stays");
    // Re-created by someone else under the same name: the old descriptor stays detached.
    ns.ip("tuntap add tl0 mode tap");
    assert_eq!(event(port.check_link()), Some(LinkEvent::Gone));
    assert_eq!(event(send_one(&mut port, 3)), Some(LinkEvent::Gone));
    ns.ip("link del tl0");
    // Sluice's own TAP comes back when opened again.
    let mut fresh = ns.enter(|| TapPort::open("tl0", false).expect("reopen"));
    assert!(fresh.check_link().is_ok());
    let peer = ns.enter(|| Raw::open("tl0"));
    traffic_both_ways(&mut fresh, &peer, "reopened");
}

#[test]
fn queue_counts_and_link_state_of_interfaces() {
    let ns = Netns::new("qc");
    ns.ip("link add qc0 numrxqueues 4 numtxqueues 4 type veth peer name qc1 numrxqueues 1 numtxqueues 1");
    ns.enter(|| {
        assert_eq!(rx_queues("qc0").expect("qc0"), 4);
        assert_eq!(rx_queues("qc1").expect("qc1"), 1);
        assert!(require_rx_queues("qc0", 4).is_ok());
        let e = require_rx_queues("qc1", 2).expect_err("qc1 has one queue");
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("ethtool -L qc1"), "{e}");
        assert!(rx_queues("nosuch0").is_err());
        assert!(!link_is_up("nosuch0"));
        assert!(!link_is_up("qc0"), "qc0 is down");
    });
    ns.ip("link set qc0 up");
    ns.enter(|| assert!(!link_is_up("qc0"), "qc0 is up but its peer is down: no carrier"));
    ns.ip("link set qc1 up");
    ns.enter(|| wait_until("qc0 has a carrier", || link_is_up("qc0")));
}

/// VLAN-tagged test frames: 802.1Q, 802.1ad over 802.1Q, priority-tagged
/// (VID 0), untagged.
fn vlan_frames() -> Vec<Vec<u8>> {
    let tagged = |tags: &[(u16, u16)]| {
        let mut f = frame(Mark { seq: 1, flow: 1, tag: 0 });
        for &(tpid, tci) in tags.iter().rev() {
            let mut tag = tpid.to_be_bytes().to_vec();
            tag.extend(tci.to_be_bytes());
            f.splice(12..12, tag);
        }
        f
    };
    vec![
        tagged(&[(0x8100, (3 << 13) | 100)]),
        tagged(&[(0x88a8, 200), (0x8100, 100)]),
        tagged(&[(0x8100, 5 << 13)]),
        tagged(&[]),
    ]
}

/// `peer` sends the VLAN test frames; `port` must receive them as sent.
fn receives_vlan_frames_as_sent(port: &mut dyn Port, peer: &Raw, what: &str) {
    let frames = vlan_frames();
    for f in &frames {
        peer.send(f);
    }
    let mut got = Vec::new();
    let mut batch = RxBatch::new(4096);
    let t0 = Instant::now();
    while got.len() < frames.len() && t0.elapsed() < Duration::from_secs(3) {
        let n = port.recv(&mut batch).expect("recv");
        got.extend((0..n).map(|i| batch.frame(i).0.to_vec()));
        if n == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    assert_eq!(got, frames, "{what}: frames received with their tags where they were sent");
}

/// The kernel takes VLAN tags out of received frames before a packet
/// socket sees them; an AF_PACKET port puts them back. Every backend hands
/// the data plane frames as they were sent, with or without offload
/// headers.
#[test]
fn ports_receive_vlan_tagged_frames_as_sent() {
    let ns = Netns::new("vl");
    ns.ip("link add vl0 type veth peer name vl1");
    ns.ip("link set vl0 up");
    ns.ip("link set vl1 up");
    for offload in [false, true] {
        let (mut port, peer) = ns.enter(|| {
            wait_until("vl0 is up", || link_is_up("vl0"));
            (AfPacketPort::open("vl0", offload, None).expect("open vl0"), Raw::open("vl1"))
        });
        receives_vlan_frames_as_sent(&mut port, &peer, &format!("AF_PACKET, offload {offload}"));
    }

    let sw = Netns::new("vx");
    let host = Netns::new("vy");
    veth_pair(&sw, "vx0", &host, "vx1", 1);
    let (_iface, mut port) = one_queue_af_xdp(&sw, "vx0");
    let peer = host.enter(|| Raw::open("vx1"));
    receives_vlan_frames_as_sent(&mut port, &peer, "AF_XDP");

    let (mut port, peer) = ns.enter(|| {
        let port = TapPort::open("vt0", false).expect("tap");
        wait_until("vt0 is up", || link_is_up("vt0"));
        (port, Raw::open("vt0"))
    });
    receives_vlan_frames_as_sent(&mut port, &peer, "TAP");
}
