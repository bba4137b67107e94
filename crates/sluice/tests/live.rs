//! Live ports end to end: Sluice runs the router example between two hosts
//! in network namespaces this test creates (and removes, also on failure),
//! on veth pairs through AF_PACKET and on a TAP interface, with host offloads
//! on (virtio-net headers carried through) and off. Ping and a short iperf3
//! TCP transfer must get through; `--pcap` must record what each port saw.
//! Also the `simple_switch` command line: a tutorial invocation starts, an
//! unknown option is refused; and `psa_switch` with a PSA program.
//!
//! Needs root and iproute2, iperf3, ethtool, ping: `scripts/test.sh`
//! installs the tools; a missing one fails the test with its name.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::lab::*;

/// Mininet names its switches' interfaces in the root namespace (s1-eth1...):
/// one topology at a time.
static MININET: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Ethernet frames of a pcap file.
fn pcap_frames(p: &Path) -> Vec<Vec<u8>> {
    sluice_ports::pcapfile::read_pcap(p).unwrap_or_else(|e| panic!("{e}")).into_iter().map(|(_, d)| d).collect()
}

fn is_echo_request(f: &[u8], dst: [u8; 4]) -> bool {
    f.len() >= 42 && f[12..14] == [0x08, 0x00] && f[23] == 1 && f[30..34] == dst && f[34] == 8
}

fn router_over_veth(offloads: bool) {
    let mut lab = Lab::with_veth_hosts(offloads);
    let cmds = lab.dir.join("commands.txt").display().to_string();
    let pcaps = lab.dir.join("pcaps").display().to_string();
    let json = router_json().display().to_string();
    let mut args = vec!["-i", "1@s1-eth1", "-i", "2@s1-eth2", "--commands", &cmds, "--pcap", &pcaps];
    if !offloads {
        args.push("--no-offload");
    }
    args.push(&json);
    lab.start(&args);
    assert!(lab.log().contains("port 1: s1-eth1 via af_packet"), "start-up report:\n{}", lab.log());
    assert_eq!(lab.ping(5), 5, "ping through Sluice lost packets:\n{}", lab.log());
    let bytes = lab.iperf();
    assert!(bytes > 1_000_000, "iperf3 TCP moved only {bytes} bytes through Sluice");
    // No route: the program drops them, and the report counts it.
    sh(&["ip", "-n", &lab.h1, "route", "add", "10.9.0.0/24", "via", "10.0.1.254"]);
    assert_eq!(ping_from(&lab.h1, "10.9.0.1", 3, "0.1"), 0, "a ping without a route got an answer");
    let log = lab.stop();
    let dropped = report_count(&log, "dropped by the data plane");
    assert!(dropped >= 3, "{dropped} frames counted as dropped by the router, 3 pings had no route:\n{log}");
    // The echo request as h1 sent it, and as Sluice forwarded it (MACs rewritten, TTL - 1).
    let dir = lab.dir.join("pcaps");
    let rx = pcap_frames(&dir.join("s1-eth1_in.pcap"));
    let tx = pcap_frames(&dir.join("s1-eth2_out.pcap"));
    let req_in = rx.iter().find(|f| is_echo_request(f, [10, 0, 2, 1])).expect("echo request in s1-eth1_in.pcap");
    let req_out = tx.iter().find(|f| is_echo_request(f, [10, 0, 2, 1])).expect("echo request in s1-eth2_out.pcap");
    assert_eq!(&req_out[0..6], &[2, 0, 0, 0, 2, 1], "destination MAC is h2's");
    assert_eq!(&req_out[6..12], &[2, 0, 0, 0, 2, 0xfe], "source MAC is the switch's");
    assert_eq!(req_out[22], req_in[22] - 1, "TTL decremented");
    assert_eq!(req_out[34..], req_in[34..], "ICMP part unchanged");
}

#[test]
fn router_over_af_packet_with_host_offloads_on() {
    router_over_veth(true);
}

#[test]
fn router_over_af_packet_with_host_offloads_off() {
    router_over_veth(false);
}

#[test]
fn router_with_two_workers_sharing_the_ports_by_fanout() {
    let mut lab = Lab::with_veth_hosts(true);
    let cmds = lab.dir.join("commands.txt").display().to_string();
    let json = router_json().display().to_string();
    lab.start(&["-i", "1@s1-eth1", "-i", "2@s1-eth2", "--workers", "2", "--commands", &cmds, &json]);
    assert!(lab.log().contains("fanout over 2 workers"), "start-up report:\n{}", lab.log());
    assert_eq!(lab.ping(5), 5, "ping through two workers lost packets:\n{}", lab.log());
    let bytes = lab.iperf();
    assert!(bytes > 1_000_000, "iperf3 TCP moved only {bytes} bytes through two workers");
    let log = lab.stop();
    assert!(log.contains("worker 1"), "per-worker port counters:\n{log}");
}

#[test]
fn without_a_program_every_packet_is_dropped() {
    let mut lab = Lab::with_veth_hosts(true);
    lab.start(&["-i", "1@s1-eth1", "-i", "2@s1-eth2", "--no-p4"]);
    assert_eq!(lab.ping(3), 0, "a switch with no program forwarded packets");
    let log = lab.stop();
    assert!(log.contains(" 0 sent"), "{log}");
}

#[test]
fn router_over_af_xdp() {
    // AF_XDP carries no offload metadata: the hosts send plain frames.
    let mut lab = Lab::with_veth_hosts(false);
    let cmds = lab.dir.join("commands.txt").display().to_string();
    let json = router_json().display().to_string();
    lab.start(&["-i", "1@af_xdp:s1-eth1", "-i", "2@af_xdp:s1-eth2", "--no-offload", "--commands", &cmds, &json]);
    let log = lab.log();
    assert!(
        log.contains("port 1: s1-eth1 via af_xdp") && log.contains("XDP program attached"),
        "start-up report:\n{log}"
    );
    assert_eq!(lab.ping(5), 5, "ping through AF_XDP ports lost packets:\n{}", lab.log());
    let bytes = lab.iperf();
    assert!(bytes > 1_000_000, "iperf3 TCP moved only {bytes} bytes through AF_XDP ports");
    lab.stop();
    // The program goes away with Sluice: nothing stays attached to the interface.
    let link = sh(&["ip", "-n", &lab.sw, "link", "show", "s1-eth1"]);
    assert!(!link.contains("xdp"), "an XDP program is still attached after Sluice stopped:\n{link}");
}

#[test]
fn router_with_a_tap_port() {
    let mut lab = Lab::new();
    lab.veth(&lab.h1, "h1-eth0", "s1-eth1");
    lab.host(1, "h1-eth0", true);
    let cmds = lab.dir.join("commands.txt").display().to_string();
    let json = router_json().display().to_string();
    lab.start(&["-i", "1@s1-eth1", "-i", "2@tap:s1-tap2", "--commands", &cmds, &json]);
    assert!(lab.log().contains("port 2: s1-tap2 via tap"), "start-up report:\n{}", lab.log());
    // The TAP interface Sluice created becomes h2's interface.
    sh(&["ip", "-n", &lab.sw, "link", "set", "s1-tap2", "netns", &lab.h2]);
    lab.host(2, "s1-tap2", true);
    assert_eq!(lab.ping(5), 5, "ping through the TAP port lost packets:\n{}", lab.log());
    let bytes = lab.iperf();
    assert!(bytes > 1_000_000, "iperf3 TCP moved only {bytes} bytes through the TAP port");
    lab.stop();
}

#[test]
fn a_tutorial_simple_switch_command_line_starts_and_an_unknown_option_is_refused() {
    let mut lab = Lab::new();
    lab.veth(&lab.h1, "veth0", "veth1");
    lab.veth(&lab.h2, "veth2", "veth3");
    let json = router_json().display().to_string();
    // Through a symlink named simple_switch, as scripts written for bmv2 call it.
    let link = lab.dir.join("simple_switch");
    std::os::unix::fs::symlink(SLUICE, &link).unwrap();
    let log = std::fs::File::create(lab.dir.join("sluice.log")).unwrap();
    let child = Command::new("ip")
        .args(["netns", "exec", &lab.sw])
        .arg(&link)
        .args(["-i", "1@veth1", "-i", "2@veth3", "--thrift-port", "9090", "--log-console", &json])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    lab.sluice = Some(child);
    let t0 = Instant::now();
    while !lab.log().contains("forwarding on 2 port(s)") {
        assert!(t0.elapsed() < Duration::from_secs(20), "simple_switch did not start:\n{}", lab.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = lab.stop();
    assert!(log.contains("port 1: veth1 via af_packet") && log.contains("port 2: veth3 via af_packet"), "{log}");
    assert!(log.contains("Thrift runtime server listening on port 9090"), "{log}");

    let out = Command::new(&link).args(["--frobnicate", &json]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown option --frobnicate"), "{err}");
}

/// `--use-files`: every interface is a pair of pcap files in the working
/// directory, as with bmv2; a corpus case gives bmv2's output files.
#[test]
fn use_files_replays_interface_pcaps_like_bmv2() {
    let case = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/bmv2/clone_i2e");
    assert!(case.is_dir(), "corpus case {} not found", case.display());
    let dir = std::env::temp_dir().join(format!("sluice-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ports: Vec<u32> = std::fs::read_to_string(case.join("ports.txt"))
        .unwrap()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    let mut args: Vec<String> = vec!["simple_switch".into(), "--use-files".into(), "0".into()];
    for p in &ports {
        let input = case.join(format!("in/{p}.pcap"));
        if input.exists() {
            std::fs::copy(&input, dir.join(format!("p{p}_in.pcap"))).unwrap();
        } else {
            // An interface with no traffic: an empty capture.
            sluice_ports::pcapfile::write_pcap(&dir.join(format!("p{p}_in.pcap")), &[]).unwrap();
        }
        args.extend(["-i".into(), format!("{p}@p{p}")]);
    }
    args.extend(["--commands".into(), case.join("commands.txt").display().to_string()]);
    args.push(case.join("program.json").display().to_string());
    let log_path = dir.join("log");
    let mut child = Command::new(SLUICE)
        .args(&args)
        .current_dir(&dir)
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    while !log().contains("every input file has been replayed") {
        assert!(t0.elapsed() < Duration::from_secs(30), "the files were not replayed:\n{}", log());
        assert!(child.try_wait().unwrap().is_none(), "sluice exited:\n{}", log());
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: kill on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success(), "{}", log());
    assert!(log().contains("via pcap files"), "{}", log());
    for p in &ports {
        let want = pcap_frames(&case.join(format!("out/{p}.pcap")));
        let got = pcap_frames(&dir.join(format!("p{p}_out.pcap")));
        assert_eq!(got, want, "port {p}: p{p}_out.pcap differs from bmv2's output");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A third host on port 3 (`s1-eth3`, 10.0.3.1 behind 10.0.3.254): its
/// namespace, its veth pair and addresses.
fn third_host(lab: &Lab, h3: &str) {
    lab.veth(h3, "h3-eth0", "s1-eth3");
    sh(&["ip", "-n", h3, "link", "set", "h3-eth0", "address", "02:00:00:00:03:01"]);
    sh(&["ip", "-n", h3, "addr", "add", "10.0.3.1/24", "dev", "h3-eth0"]);
    sh(&["ip", "-n", h3, "link", "set", "h3-eth0", "up"]);
    sh(&["ip", "-n", h3, "route", "add", "10.0.1.0/24", "via", "10.0.3.254"]);
    sh(&["ip", "-n", h3, "neigh", "add", "10.0.3.254", "lladdr", "02:00:00:00:03:fe", "dev", "h3-eth0"]);
}

/// One port's interface goes down, comes up, is deleted and created again
/// while two other hosts ping each other through the switch every 20 ms:
/// not one of their pings is lost, the switch reports the port down and
/// back, and the third host is reachable again. Then the third host's end
/// goes down (the port has no carrier, reported; back once it is up), and
/// the interface is renamed (the port is gone, reported) and renamed back
/// (the port is back).
#[test]
fn a_port_whose_interface_goes_down_and_away_comes_back_and_the_others_lose_nothing() {
    let mut lab = Lab::with_veth_hosts(true);
    let h3 = lab.namespace("h3");
    third_host(&lab, &h3);
    sh(&["ip", "-n", &lab.h1, "route", "add", "10.0.3.0/24", "via", "10.0.1.254"]);
    let cmds = lab.dir.join("commands.txt");
    let mut text = std::fs::read_to_string(&cmds).unwrap();
    text.push_str(
        "table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop 10.0.3.0/24 => 3\n\
         table_add RouterIngress.nexthop RouterIngress.forward 3 => 3 02:00:00:00:03:fe 02:00:00:00:03:01\n",
    );
    std::fs::write(&cmds, text).unwrap();
    let (cmds, json) = (cmds.display().to_string(), router_json().display().to_string());
    lab.start(&["-i", "1@s1-eth1", "-i", "2@s1-eth2", "-i", "3@s1-eth3", "--commands", &cmds, &json]);
    assert_eq!(ping_from(&lab.h1, "10.0.3.1", 3, "0.1"), 3, "h3 unreachable at start:\n{}", lab.log());
    // h1 <-> h2 pings run all along: 150 pings 20 ms apart, 3 s.
    let pinger = Command::new("ip")
        .args(["netns", "exec", &lab.h1, "ping", "-c", "150", "-i", "0.02", "-W", "1", "10.0.2.1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    sh(&["ip", "-n", &lab.sw, "link", "set", "s1-eth3", "down"]);
    std::thread::sleep(Duration::from_millis(400));
    sh(&["ip", "-n", &lab.sw, "link", "set", "s1-eth3", "up"]);
    std::thread::sleep(Duration::from_millis(400));
    sh(&["ip", "-n", &lab.sw, "link", "del", "s1-eth3"]);
    std::thread::sleep(Duration::from_millis(400));
    third_host(&lab, &h3);
    let out = pinger.wait_with_output().unwrap();
    let got = received(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(got, 150, "pings between the other two ports were lost while port 3 flapped:\n{}", lab.log());
    // The port comes back on the interface created again.
    let back = |what: &str| {
        let t0 = Instant::now();
        while ping_from(&lab.h1, "10.0.3.1", 1, "0.1") != 1 {
            assert!(t0.elapsed() < Duration::from_secs(10), "port 3 did not come back {what}:\n{}", lab.log());
        }
    };
    back("on the interface created again");
    // Without a carrier (h3's end down): only the once-a-second watch can
    // tell; the port is reported, frames to it are dropped and counted,
    // and it forwards again once h3's end is up.
    sh(&["ip", "-n", &h3, "link", "set", "h3-eth0", "down"]);
    let t0 = Instant::now();
    while !lab.log().contains("s1-eth3: the interface has no carrier (its peer is down or unplugged)") {
        assert!(t0.elapsed() < Duration::from_secs(5), "the lost carrier was not reported:\n{}", lab.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(ping_from(&lab.h1, "10.0.3.1", 2, "0.1"), 0, "port 3 forwarded without a carrier");
    sh(&["ip", "-n", &h3, "link", "set", "h3-eth0", "up"]);
    // (Taking the link down removed h3's route and gateway entry.)
    sh(&["ip", "-n", &h3, "route", "replace", "10.0.1.0/24", "via", "10.0.3.254"]);
    sh(&["ip", "-n", &h3, "neigh", "replace", "10.0.3.254", "lladdr", "02:00:00:00:03:fe", "dev", "h3-eth0"]);
    back("once its carrier is back");
    // Renamed: port 3 is s1-eth3, so it is gone while its interface has
    // another name, and back once the name is.
    let rename = |from: &str, to: &str| {
        sh(&["ip", "-n", &lab.sw, "link", "set", from, "down"]);
        sh(&["ip", "-n", &lab.sw, "link", "set", from, "name", to]);
        sh(&["ip", "-n", &lab.sw, "link", "set", to, "up"]);
    };
    rename("s1-eth3", "s1-renamed");
    let t0 = Instant::now();
    while !lab.log().contains("s1-eth3: the interface is gone (renamed s1-renamed)") {
        assert!(t0.elapsed() < Duration::from_secs(5), "the rename was not reported:\n{}", lab.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(ping_from(&lab.h1, "10.0.3.1", 2, "0.1"), 0, "port 3 forwarded on the renamed interface");
    rename("s1-renamed", "s1-eth3");
    back("once its interface has its name again");
    let log = lab.stop();
    assert!(log.contains("port 3 (s1-eth3)") && log.contains("the interface is back"), "{log}");
    assert!(
        log.matches("its frames are dropped until it is back").count() >= 4,
        "down, gone, without carrier and renamed:\n{log}"
    );
    // The 4 pings toward h3 while port 3 had no carrier or was renamed
    // were dropped at the port and counted.
    let link_dropped = report_count(&log, "to ports whose link was down");
    assert!(link_dropped >= 4, "{link_dropped} frames counted to ports whose link was down:\n{log}");
}

/// What a switch in namespace `ns` could leave behind: an XDP program on
/// its AF_XDP interfaces, its TAP device, a listening socket. Empty when
/// nothing is left.
fn left_behind(ns: &str, xdp_ifaces: &[&str], tap: &str) -> Vec<String> {
    let mut left = Vec::new();
    for i in xdp_ifaces {
        let link = sh(&["ip", "-n", ns, "link", "show", i]);
        if link.contains("xdp") {
            left.push(format!("an XDP program on {i}: {link}"));
        }
    }
    let taps = Command::new("ip").args(["-n", ns, "link", "show", tap]).output().unwrap();
    if taps.status.success() {
        left.push(format!("the TAP device {tap}"));
    }
    let listening = sh(&["ip", "netns", "exec", ns, "ss", "-Hltn"]);
    if !listening.trim().is_empty() {
        left.push(format!("listening sockets: {listening}"));
    }
    left
}

/// A switch with AF_XDP ports, a TAP port and the Thrift server, killed
/// with SIGKILL, leaves nothing behind (no XDP program attached, no TAP
/// device, no listening socket); it starts again on the same ports and
/// forwards, and after a clean stop nothing is left either.
#[test]
fn a_switch_killed_with_sigkill_leaves_nothing_behind_and_starts_again() {
    let mut lab = Lab::with_veth_hosts(false);
    let cmds = lab.dir.join("commands.txt").display().to_string();
    let json = router_json().display().to_string();
    let args = [
        "-i",
        "1@af_xdp:s1-eth1",
        "-i",
        "2@af_xdp:s1-eth2",
        "-i",
        "3@tap:s1-tap3",
        "--no-offload",
        "--thrift-port",
        "9090",
        "--commands",
        &cmds,
        &json,
    ];
    lab.start(&args);
    assert_eq!(lab.ping(3), 3, "ping before the kill:\n{}", lab.log());
    let running = left_behind(&lab.sw, &["s1-eth1", "s1-eth2"], "s1-tap3");
    assert_eq!(running.len(), 4, "the running switch has XDP programs, its TAP device and its socket: {running:?}");
    let mut c = lab.sluice.take().unwrap();
    c.kill().unwrap();
    c.wait().unwrap();
    let left = left_behind(&lab.sw, &["s1-eth1", "s1-eth2"], "s1-tap3");
    assert!(left.is_empty(), "after SIGKILL: {left:?}");
    lab.start(&args);
    assert_eq!(lab.ping(3), 3, "ping after the restart:\n{}", lab.log());
    lab.stop();
    let left = left_behind(&lab.sw, &["s1-eth1", "s1-eth2"], "s1-tap3");
    assert!(left.is_empty(), "after a clean stop: {left:?}");
}

/// Per-packet logs toward a standard output nobody reads (a full pipe):
/// the switch keeps forwarding, drops log chunks and says so on standard
/// error once the pipe is read again.
#[test]
fn a_stalled_reader_of_the_per_packet_log_never_stalls_forwarding() {
    use std::io::Read;
    let lab = Lab::with_veth_hosts(true);
    let cmds = lab.dir.join("commands.txt").display().to_string();
    let json = router_json().display().to_string();
    // The per-packet log goes to standard output (bmv2's --log-console),
    // reports to standard error.
    let mut child = Command::new("ip")
        .args(["netns", "exec", &lab.sw, SLUICE, "simple_switch", "-i", "1@s1-eth1", "-i", "2@s1-eth2"])
        .args(["--log-console", "--commands", &cmds, &json])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reports = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    });
    // Started once it forwards (its log is not read meanwhile).
    let t0 = Instant::now();
    while lab.ping(1) != 1 {
        assert!(t0.elapsed() < Duration::from_secs(20), "sluice did not start forwarding");
    }
    // Each batch logs its packets' lines (a few kB a packet): 6000
    // packets fill the pipe (64 KiB) and the logger's queue (1024 batches).
    let answered = ping_from(&lab.h1, "10.0.2.1", 3000, "0.001");
    let mut stdout = child.stdout.take().unwrap();
    // Reading again lets the logger go on and write its report.
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stdout.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    });
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(ping_from(&lab.h1, "10.0.2.1", 5, "0.1"), 5, "pings after the log is read again");
    std::thread::sleep(Duration::from_millis(1200));
    // SAFETY: kill on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    let log = reader.join().unwrap();
    let reports = reports.join().unwrap();
    assert_eq!(answered, 3000, "pings while nobody read the log (the log: {} bytes)", log.len());
    assert!(log.contains("] [bmv2] [D] [thread "), "bmv2's log lines on standard output");
    assert!(
        reports.contains("sluice: log: dropped so far"),
        "the dropped log chunks are reported on standard error:\n{reports}"
    );
}

/// A switch killed with SIGKILL leaves capture files that read whole: each
/// record was written as its packet passed.
#[test]
fn captures_of_a_switch_killed_with_sigkill_are_readable() {
    let mut lab = Lab::with_veth_hosts(true);
    let cmds = lab.dir.join("commands.txt").display().to_string();
    let pcaps = lab.dir.join("pcaps");
    let (p, json) = (pcaps.display().to_string(), router_json().display().to_string());
    lab.start(&["-i", "1@s1-eth1", "-i", "2@s1-eth2", "--commands", &cmds, "--pcap", &p, &json]);
    assert_eq!(lab.ping(5), 5, "ping through Sluice lost packets:\n{}", lab.log());
    let mut c = lab.sluice.take().unwrap();
    c.kill().unwrap();
    c.wait().unwrap();
    let requests = |f: &str, dst: [u8; 4]| {
        let path = pcaps.join(f);
        let frames = sluice_ports::pcapfile::read_pcap(&path).unwrap_or_else(|e| panic!("{f} unreadable: {e}"));
        frames.iter().filter(|(_, d)| is_echo_request(d, dst)).count()
    };
    // Five echo requests in and out, five replies back: at most the last record of a file may be lost.
    assert!(requests("s1-eth1_in.pcap", [10, 0, 2, 1]) >= 4, "s1-eth1_in.pcap");
    assert!(requests("s1-eth2_out.pcap", [10, 0, 2, 1]) >= 4, "s1-eth2_out.pcap");
    for f in ["s1-eth2_in.pcap", "s1-eth1_out.pcap"] {
        let n =
            sluice_ports::pcapfile::read_pcap(&pcaps.join(f)).unwrap_or_else(|e| panic!("{f} unreadable: {e}")).len();
        assert!(n >= 4, "{f} holds {n} frames: the replies are missing");
    }
}

/// AF_XDP ports on veths with two queues, two workers: one XDP socket per
/// queue, and traffic gets through.
#[test]
fn router_over_af_xdp_with_two_workers_on_two_queues() {
    let mut lab = Lab::with_veth_hosts_on_queues(false, 2);
    let cmds = lab.dir.join("commands.txt").display().to_string();
    let json = router_json().display().to_string();
    lab.start(&[
        "-i",
        "1@af_xdp:s1-eth1",
        "-i",
        "2@af_xdp:s1-eth2",
        "--no-offload",
        "--workers",
        "2",
        "--commands",
        &cmds,
        &json,
    ]);
    assert!(lab.log().contains("one queue per worker (2)"), "start-up report:\n{}", lab.log());
    assert_eq!(lab.ping(5), 5, "ping through two AF_XDP workers lost packets:\n{}", lab.log());
    let bytes = lab.iperf();
    assert!(bytes > 1_000_000, "iperf3 TCP moved only {bytes} bytes through two AF_XDP workers");
    let log = lab.stop();
    assert!(log.contains("worker 1"), "per-worker port counters:\n{log}");
}

/// A multi-queue TAP port with two workers, and where the time went.
#[test]
fn router_with_a_two_queue_tap_port_and_two_workers_reports_its_stages() {
    let mut lab = Lab::new();
    lab.veth(&lab.h1, "h1-eth0", "s1-eth1");
    lab.host(1, "h1-eth0", true);
    let cmds = lab.dir.join("commands.txt").display().to_string();
    let json = router_json().display().to_string();
    lab.start(&["-i", "1@s1-eth1", "-i", "2@tap:s1-tap2", "--workers", "2", "--profile", "--commands", &cmds, &json]);
    assert!(lab.log().contains("port 2: s1-tap2 via tap"), "start-up report:\n{}", lab.log());
    sh(&["ip", "-n", &lab.sw, "link", "set", "s1-tap2", "netns", &lab.h2]);
    lab.host(2, "s1-tap2", true);
    assert_eq!(lab.ping(5), 5, "ping through the two-queue TAP port lost packets:\n{}", lab.log());
    let bytes = lab.iperf();
    assert!(bytes > 1_000_000, "iperf3 TCP moved only {bytes} bytes through the two-queue TAP port");
    let log = lab.stop();
    assert!(log.contains("where the time went"), "{log}");
    for stage in ["receive", "send", "batch function"] {
        assert!(log.lines().any(|l| l.starts_with(stage)), "no {stage} stage in the profile:\n{log}");
    }
}

/// `sluice psa_switch` runs a PSA program between two hosts: p4c's
/// `psa-unicast-or-drop-corrected` sends each frame to the port its
/// destination MAC names (frames to MAC 0 are dropped), so the hosts get
/// MACs 00:..:01 and 00:..:02 and each other's as their gateway's. Ping
/// and iperf3 go through; a v1model program is refused, as psa_switch
/// refuses one.
#[test]
fn psa_switch_forwards_between_two_hosts() {
    let mut lab = Lab::with_veth_hosts(false);
    for (ns, iface, mac, gw, gw_mac) in [
        (&lab.h1, "h1-eth0", "00:00:00:00:00:01", "10.0.1.254", "00:00:00:00:00:02"),
        (&lab.h2, "h2-eth0", "00:00:00:00:00:02", "10.0.2.254", "00:00:00:00:00:01"),
    ] {
        sh(&["ip", "-n", ns, "link", "set", iface, "address", mac]);
        sh(&["ip", "-n", ns, "neigh", "replace", gw, "lladdr", gw_mac, "dev", iface]);
    }
    let program = common::shared()
        .join("p4c-stf-psa/psa-unicast-or-drop-corrected-bmv2/psa-unicast-or-drop-corrected-bmv2.json")
        .display()
        .to_string();
    lab.start_as("psa_switch", &["-i", "1@s1-eth1", "-i", "2@s1-eth2", "--no-offload", &program]);
    assert_eq!(lab.ping(5), 5, "ping through the PSA program lost packets:\n{}", lab.log());
    let bytes = lab.iperf();
    assert!(bytes > 1_000_000, "iperf3 TCP moved only {bytes} bytes through the PSA program");
    lab.stop();
    // Through a symlink named psa_switch, as bmv2's scripts call it.
    let link = lab.dir.join("psa_switch");
    std::os::unix::fs::symlink(SLUICE, &link).unwrap();
    let out = Command::new(&link).args(["-i", "1@lo", &router_json().display().to_string()]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("not a PSA program"), "a v1model program: {err}");
}

/// `--inject-faults` on live ports: pings through the router with every
/// fault injected on both ports and the links flapping. Each fault is
/// injected and reported per port; every frame a port received is
/// accounted for (delivered to the pipeline, less duplicates, plus drops
/// and frames discarded while the link was down, up to one held-back frame
/// per port); failed sends show in `tx dropped`; the flaps are reported as
/// link changes; some pings still get through.
#[test]
fn injected_faults_on_live_ports_are_counted_and_every_frame_is_accounted_for() {
    let mut lab = Lab::with_veth_hosts(true);
    let cmds = lab.dir.join("commands.txt").display().to_string();
    let json = router_json().display().to_string();
    let faults = "drop=0.1,dup=0.1,reorder=0.1,truncate=0.05,corrupt=0.05,send-fail=0.05,flap=900ms/150ms,seed=5";
    lab.start(&["-i", "1@s1-eth1", "-i", "2@s1-eth2", "--commands", &cmds, "--inject-faults", faults, &json]);
    // A deadline: ping slows down while replies go missing.
    let out = Command::new("ip")
        .args(["netns", "exec", &lab.h1, "ping", "-c", "300", "-i", "0.01", "-W", "1", "-w", "8", "10.0.2.1"])
        .output()
        .unwrap();
    let got = received(&String::from_utf8_lossy(&out.stdout));
    // (With a deadline, ping sends until 300 replies came or the time is up.)
    assert!(got > 0, "no ping came back through the faults:\n{}", lab.log());
    let log = lab.stop();
    let field = |line: &str, after: &str| -> u64 {
        let word = line.split(after).nth(1).and_then(|r| r.split_whitespace().next());
        word.and_then(|n| n.trim_end_matches(',').parse().ok()).unwrap()
    };
    let summary = log.lines().find(|l| l.starts_with("sluice: stopped after")).unwrap_or_else(|| panic!("{log}"));
    let received_total = field(summary, "s: ");
    let changes = report_count(&log, "link changes");
    assert!(changes >= 2, "the flaps are link changes: {summary}");
    let lines: Vec<&str> = log.lines().collect();
    let (mut rx, mut delivered_less_dups, mut ports) = (0u64, 0i64, 0u64);
    for (i, l) in lines.iter().enumerate() {
        if !l.starts_with("  s1-eth") {
            continue;
        }
        ports += 1;
        let inj =
            lines.get(i + 1).filter(|n| n.trim_start().starts_with("injected:")).unwrap_or_else(|| panic!("{log}"));
        let n = |what: &str| -> u64 {
            let at = inj.find(what).unwrap_or_else(|| panic!("{what} in {inj}"));
            inj[..at].trim_end().rsplit([' ', '(']).next().unwrap().parse().unwrap()
        };
        for what in [" dropped", " duplicated", " reordered", " truncated", " corrupted", " sends failed"] {
            assert!(n(what) > 0, "{l}: no frame{what}: {inj}");
        }
        assert!(n(" flaps") > 0, "{inj}");
        assert!(field(l, "tx dropped ") >= n(" sends failed"), "{l} / {inj}");
        rx += field(l, "rx ");
        delivered_less_dups -=
            (n(" duplicated") as i64) - (n(" dropped") as i64) - (n(" while the link was down") as i64);
    }
    assert_eq!(ports, 2, "{log}");
    let accounted = received_total as i64 + delivered_less_dups;
    assert!(
        rx as i64 >= accounted && rx as i64 <= accounted + ports as i64,
        "received by the ports {rx}, accounted {accounted} (delivered {received_total}):\n{log}"
    );
}

/// bmv2's event stream and per-packet log, with the options bmv2's Mininet
/// switch class passes (`--nanolog ipc://...`, `--device-id`, the program
/// before the log option): a pynng subscriber (`tests/nanolog/one_packet.py`)
/// decodes one ping's events in bmv2's layout, each naming the program's
/// elements by their JSON ids, and the log file reads as bmv2's, with the
/// frames' first bytes (`--dump-packet-data`).
#[test]
fn bmv2_event_stream_and_log_file_follow_one_packet() {
    use std::io::BufRead;
    let mut lab = Lab::with_veth_hosts(true);
    let cmds = lab.dir.join("commands.txt").display().to_string();
    let json = router_json();
    let addr = format!("ipc://{}", lab.dir.join("bm-7-log.ipc").display());
    let log_file = lab.dir.join("s1.log");
    let (j, lf) = (json.display().to_string(), log_file.display().to_string());
    // As bmv2's Mininet class: options after the program too.
    lab.start(&[
        "-i",
        "1@s1-eth1",
        "-i",
        "2@s1-eth2",
        "--nanolog",
        &addr,
        "--device-id",
        "7",
        "--commands",
        &cmds,
        &j,
        "--log-file",
        &lf,
        "--dump-packet-data",
        "14",
    ]);
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    assert!(python.exists(), "{} is missing: run scripts/test.sh (it builds the test venv)", python.display());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/nanolog/one_packet.py");
    let mut sub = Kill(
        Command::new(&python).arg(&script).arg(&addr).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap(),
    );
    let mut lines = std::io::BufReader::new(sub.0.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().and_then(|l| l.ok()).as_deref(), Some("subscribed"));
    // Tracing starts once the switch has seen the subscriber: ping until a packet went through.
    let t0 = Instant::now();
    while sub.0.try_wait().unwrap().is_none() {
        assert!(t0.elapsed() < Duration::from_secs(120), "no packet's events came:\n{}", lab.log());
        lab.ping(1);
    }
    let events: Vec<serde_json::Value> =
        lines.map_while(Result::ok).map(|l| serde_json::from_str(&l).expect("a JSON event")).collect();
    assert!(!events.is_empty(), "the subscriber printed no event");

    // The JSON ids of the router's elements.
    let prog: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let id_of = |list: &serde_json::Value, name: &str| -> i64 {
        list.as_array().unwrap().iter().find(|x| x["name"] == name).unwrap_or_else(|| panic!("{name}"))["id"]
            .as_i64()
            .unwrap()
    };
    let ingress = prog["pipelines"].as_array().unwrap().iter().find(|p| p["name"] == "ingress").unwrap().clone();
    let (eth, ipv4) = (id_of(&prog["headers"], "ethernet"), id_of(&prog["headers"], "ipv4"));
    let want: Vec<(&str, &str, i64)> = vec![
        ("PACKET_IN", "port_in", 1),
        ("PARSER_START", "parser_id", id_of(&prog["parsers"], "parser")),
        ("PARSER_EXTRACT", "header_id", eth),
        ("PARSER_EXTRACT", "header_id", ipv4),
        ("PARSER_DONE", "parser_id", id_of(&prog["parsers"], "parser")),
        ("PIPELINE_START", "pipeline_id", ingress["id"].as_i64().unwrap()),
        ("TABLE_HIT", "table_id", id_of(&ingress["tables"], "RouterIngress.ipv4_lpm")),
        ("ACTION_EXECUTE", "action_id", id_of(&prog["actions"], "RouterIngress.set_nexthop")),
        ("TABLE_HIT", "table_id", id_of(&ingress["tables"], "RouterIngress.nexthop")),
        ("ACTION_EXECUTE", "action_id", id_of(&prog["actions"], "RouterIngress.forward")),
        ("PIPELINE_DONE", "pipeline_id", ingress["id"].as_i64().unwrap()),
        ("DEPARSER_START", "deparser_id", id_of(&prog["deparsers"], "deparser")),
        ("DEPARSER_EMIT", "header_id", eth),
        ("DEPARSER_EMIT", "header_id", ipv4),
        ("DEPARSER_DONE", "deparser_id", id_of(&prog["deparsers"], "deparser")),
        ("PACKET_OUT", "port_out", 2),
    ];
    let mut at = 0;
    for (kind, field, value) in &want {
        let found = events[at..].iter().position(|e| e["type"] == *kind && e[*field] == *value);
        let Some(k) = found else { panic!("no {kind} with {field} {value} (in order) in:\n{events:#?}") };
        at += k + 1;
    }
    for e in &events {
        assert_eq!((e["switch_id"].as_i64(), e["copy_id"].as_i64()), (Some(7), Some(0)), "{e}");
        assert_eq!(e["id"], events[0]["id"], "one packet's events");
    }

    let log = lab.stop();
    let text = std::fs::read_to_string(&log_file).unwrap();
    for want in [
        "] [bmv2] [D] [thread ",
        "] [cxt 0] Processing packet received on port 1",
        "Table 'RouterIngress.ipv4_lpm': hit with handle 0",
        "Transmitting packet of size",
        // --dump-packet-data 14: the Ethernet header of the ping in and out.
        "] [I] [thread ",
        " on port 1: 0200000001fe0200000001010800\n",
        " on port 2: 0200000002010200000002fe0800\n",
    ] {
        assert!(text.contains(want), "the log file lacks {want:?}:\n{}\nswitch:\n{log}", &text[..text.len().min(3000)]);
    }
    assert!(text.contains("Received packet of length 98 on port 1: 0200000001fe"), "{}", &text[..text.len().min(3000)]);
    assert!(text.contains("Sending packet of length 98 on port 2: 020000000201"), "{}", &text[..text.len().min(3000)]);
}

/// Sluice in Mininet through its switch class with bmv2's P4Switch
/// arguments (`mininet/sluice_mininet.py`, installed by the test command
/// for Debian's python3): two hosts, the router's entries from the stock
/// `simple_switch_CLI`, ping and an iperf3 flow; the class passes
/// `--nanolog` and `--log-file` as bmv2's does, and a pynng subscriber
/// decodes one packet's events (`tests/mininet/p4_router.py`).
#[test]
fn a_mininet_topology_runs_sluice_through_its_p4switch_class() {
    require_tools();
    let _one = MININET.lock().unwrap_or_else(|e| e.into_inner());
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let venv = repo.join(".venv/bin");
    assert!(venv.join("simple_switch_CLI").exists(), "the test venv is missing: run scripts/test.sh");
    let dir = std::env::temp_dir().join(format!("sluice-mininet-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log_file = dir.join("s1.log");
    let device = (std::process::id() % 100_000 + 1000).to_string();
    let subscriber =
        format!("{} {}", venv.join("python").display(), repo.join("tests/nanolog/one_packet.py").display());
    let out = Command::new("/usr/bin/python3")
        .arg(repo.join("tests/mininet/p4_router.py"))
        .args(["--json", &router_json().display().to_string()])
        .args(["--cli", &venv.join("simple_switch_CLI").display().to_string()])
        .args(["--log-file", &log_file.display().to_string(), "--device-id", &device, "--thrift-port", "22090"])
        .args(["--subscriber", &subscriber])
        .env("SLUICE", SLUICE)
        .stdin(Stdio::null())
        .output()
        .expect("run tests/mininet/p4_router.py with /usr/bin/python3 (Debian's mininet)");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let switch_log = std::fs::read_to_string("/tmp/p4s.s1.log").unwrap_or_default();
    assert!(out.status.success(), "exit {:?}\n{stdout}\n{stderr}\nswitch:\n{switch_log}", out.status.code());
    let r: serde_json::Value =
        serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("the topology's result");
    assert_eq!(r["pings"], 5, "{r}\nswitch:\n{switch_log}");
    assert!(r["iperf_bps"].as_f64().unwrap_or(0.0) > 0.0, "{r}");
    assert!(!r["cli"].as_str().unwrap_or("").contains("Error"), "the CLI's commands: {}", r["cli"]);
    assert_eq!(r["subscribed"], "subscribed");
    let events = r["events"].as_array().expect("events");
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    for want in
        ["PACKET_IN", "PARSER_START", "PARSER_EXTRACT", "TABLE_HIT", "ACTION_EXECUTE", "DEPARSER_EMIT", "PACKET_OUT"]
    {
        assert!(kinds.contains(&want), "no {want} among one packet's events: {kinds:?}");
    }
    assert!(
        events.iter().all(|e| e["switch_id"].as_i64().map(|d| d.to_string()) == Some(device.clone())),
        "{events:?}"
    );
    assert!(
        switch_log.contains(&format!("ipc:///tmp/bm-{device}-log.ipc")),
        "the class passed --nanolog:\n{switch_log}"
    );
    let text = std::fs::read_to_string(&log_file).unwrap_or_default();
    assert!(
        text.contains("Processing packet received on port "),
        "the --log-file log:\n{}",
        &text[..text.len().min(2000)]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Voluntary context switches of each thread of process `pid` (name, count).
fn thread_wakeups(pid: u32) -> Vec<(String, String, u64)> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).expect("the switch's threads").flatten() {
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        let field = |k: &str| status.lines().find_map(|l| l.strip_prefix(k)).unwrap_or("").trim().to_string();
        let tid = t.file_name().to_string_lossy().into_owned();
        out.push((tid, field("Name:"), field("voluntary_ctxt_switches:").parse().unwrap_or(0)));
    }
    out
}

fn resident_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The ten mappings of a process with the most resident memory, one per
/// line (`kB range name`), for a failure message.
fn largest_mappings(pid: u32) -> String {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let mut maps: Vec<(u64, String)> = Vec::new();
    let mut current = String::new();
    for line in smaps.lines() {
        if let Some(kb) = line.strip_prefix("Rss:") {
            let kb = kb.split_whitespace().next().and_then(|v| v.parse().ok()).unwrap_or(0);
            maps.push((kb, current.clone()));
        } else if line.split_whitespace().next().is_some_and(|f| f.contains('-') && !f.ends_with(':')) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            current = format!("{} {}", fields[0], fields.get(5).unwrap_or(&""));
        }
    }
    maps.sort_by_key(|m| std::cmp::Reverse(m.0));
    maps.iter().take(10).map(|(kb, m)| format!("{kb:>8} kB {m}\n")).collect()
}

/// An idle switch sleeps: after traffic, with nothing due, no thread of a
/// `simple_switch_grpc` (workers, Thrift, P4Runtime and its event thread,
/// control socket, logger) wakes more than 10 times a second, and the
/// router example's switch stays within 10 MB resident. (Voluntary
/// context switches count a thread's own sleeps: a busy machine adds
/// none.)
#[test]
fn an_idle_switch_sleeps_and_stays_small() {
    let mut lab = Lab::with_veth_hosts(true);
    for ns in [&lab.h1, &lab.h2, &lab.sw] {
        // Quiet hosts and switch ends: no IPv6 neighbour discovery or
        // listener reports while idle.
        sh(&["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]);
    }
    let cmds = lab.dir.join("commands.txt").display().to_string();
    let json = router_json().display().to_string();
    let grpc = format!("127.0.0.1:{}", 23000 + std::process::id() % 1000);
    lab.start_as(
        "simple_switch_grpc",
        &[
            "-i",
            "1@s1-eth1",
            "-i",
            "2@s1-eth2",
            "--thrift-port",
            &(24000 + std::process::id() % 1000).to_string(),
            "--commands",
            &cmds,
            &json,
            "--",
            "--grpc-server-addr",
            &grpc,
        ],
    );
    assert_eq!(lab.ping(3), 3, "{}", lab.log());
    let _ = lab.iperf();
    let pid = lab.sluice.as_ref().unwrap().id();
    // Let the last frames and the worker's first idle wait pass.
    std::thread::sleep(Duration::from_secs(3));
    let before = thread_wakeups(pid);
    let secs = 4.0;
    std::thread::sleep(Duration::from_secs_f64(secs));
    let after = thread_wakeups(pid);
    let mut rates = Vec::new();
    for (tid, name, n) in &after {
        if let Some((_, _, m)) = before.iter().find(|(t, _, _)| t == tid) {
            rates.push((name.clone(), (n - m) as f64 / secs));
        }
    }
    assert!(rates.len() >= 5, "threads: {rates:?}");
    let busy: Vec<_> = rates.iter().filter(|(_, r)| *r > 10.0).collect();
    assert!(busy.is_empty(), "threads waking more than 10 times a second while idle: {busy:?} (all: {rates:?})");
    // Its buffers go back once its worker waited a whole second with
    // nothing to do; on a busy machine that may take a while: the
    // property is that it settles there, not how fast.
    let t0 = Instant::now();
    let mut rss = resident_kb(pid);
    while rss > 10 * 1024 && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(500));
        rss = resident_kb(pid);
    }
    assert!(
        rss > 0 && rss <= 10 * 1024,
        "an idle router switch holds {rss} kB resident (at most 10 MB); largest mappings:\n{}",
        largest_mappings(pid)
    );
    assert_eq!(lab.ping(2), 2, "the switch forwards again after its idle time:\n{}", lab.log());
    lab.stop();
}

/// Sixteen Sluice P4 switches in one Mininet topology
/// (`mininet/sluice_fabric.py`: a routed tree of the router example,
/// every switch through SluiceP4Switch with bmv2's arguments, routes from
/// the stock simple_switch_CLI): every host pings every other, one
/// iperf3 flow crosses the tree, and once idle every switch sleeps (no
/// thread above 10 wake-ups a second) within 10 MB resident.
#[test]
fn a_sixteen_switch_p4_fabric_in_mininet_passes_all_pairs_ping() {
    require_tools();
    let _one = MININET.lock().unwrap_or_else(|e| e.into_inner());
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cli = repo.join(".venv/bin/simple_switch_CLI");
    assert!(cli.exists(), "the test venv is missing: run scripts/test.sh");
    let out = Command::new("/usr/bin/python3")
        .arg(repo.join("mininet/sluice_fabric.py"))
        .args(["--switches", "16", "--ping-all", "--iperf", "--idle", "4", "--thrift-port", "25090"])
        .args(["--json", &router_json().display().to_string(), "--cli", &cli.display().to_string()])
        .env("SLUICE", SLUICE)
        .stdin(Stdio::null())
        .output()
        .expect("run mininet/sluice_fabric.py with /usr/bin/python3 (Debian's mininet)");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "exit {:?}\n{stdout}\n{stderr}", out.status.code());
    let r: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("the fabric's result");
    assert_eq!(r["switches"], 16, "{r}");
    assert_eq!(r["hosts"], 12, "{r}");
    assert_eq!(r["cli_errors"].as_array().map(Vec::len), Some(0), "{r}");
    assert_eq!(r["ping_loss_pct"].as_f64(), Some(0.0), "all-pairs ping: {r}\n{stderr}");
    assert!(r["iperf_bps"].as_f64().unwrap_or(0.0) > 0.0, "{r}");
    let idle = &r["idle"];
    assert_eq!(idle["switches"], 16, "{r}");
    let wakes = idle["busiest_thread_wakeups_per_s"].as_object().expect("wake-ups per thread");
    assert!(wakes.values().all(|v| v.as_f64().unwrap_or(99.0) <= 10.0), "idle wake-ups: {r}");
    assert!(idle["rss_kb_max"].as_u64().unwrap_or(u64::MAX) <= 10 * 1024, "resident memory: {r}");
}

/// bmv2's learning notifications (`--notifications-addr`, here bmv2's
/// default address for the device id): the l2 learning example's digests
/// reach a controller as bmv2's `LEA|` messages over nanomsg
/// (`tests/nanolog/learning.py`: the address from `bm_mgmt_get_info`, a
/// pynng subscriber, acknowledgements over Thrift); a fact is not sent
/// again until acknowledged, then comes with the next buffer id; an
/// acknowledgement for a list the program lacks gets INVALID_LIST_ID.
/// With the forwarding table marked for idle timeouts (as bmv2's learning
/// examples mark theirs), an entry given a TTL over Thrift and never hit
/// is reported once idle, in an `AGE|` message on the same socket.
#[test]
fn learning_notifications_reach_a_nanomsg_controller_and_wait_for_its_ack() {
    let mut lab = Lab::new();
    // Quiet hosts: only the traffic the controller script sends makes facts to learn.
    for ns in [&lab.h1, &lab.h2, &lab.sw] {
        sh(&["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]);
        sh(&["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"]);
    }
    lab.veth(&lab.h1, "h1-eth0", "s1-eth1");
    lab.veth(&lab.h2, "h2-eth0", "s1-eth2");
    sh(&["ip", "-n", &lab.h1, "addr", "add", "10.0.7.1/24", "dev", "h1-eth0"]);
    for (ns, i) in [(&lab.h1, "h1-eth0"), (&lab.h2, "h2-eth0")] {
        sh(&["ip", "-n", ns, "link", "set", i, "up"]);
    }
    let cmds = lab.dir.join("l2.txt");
    std::fs::write(&cmds, "mc_mgrp_create 1\nmc_node_create 0 1 2\nmc_node_associate 1 0\n").unwrap();
    let json =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/l2_learning.json")).unwrap();
    let at = json.find("\"name\" : \"L2Ingress.forwarding\"").expect("the forwarding table");
    let flag = "\"support_timeout\" : false";
    let at = at + json[at..].find(flag).expect("its support_timeout");
    let mut json = json;
    json.replace_range(at..at + flag.len(), "\"support_timeout\" : true");
    let json_path = lab.dir.join("l2_learning_ageing.json");
    std::fs::write(&json_path, json).unwrap();
    let json = json_path;
    let device = (std::process::id() % 100_000 + 3000).to_string();
    let thrift = (26000 + std::process::id() % 1000).to_string();
    lab.start(&[
        "-i",
        "1@s1-eth1",
        "-i",
        "2@s1-eth2",
        "--device-id",
        &device,
        "--thrift-port",
        &thrift,
        "--commands",
        &cmds.display().to_string(),
        &json.display().to_string(),
    ]);
    let addr = format!("ipc:///tmp/bmv2-{device}-notifications.ipc");
    assert!(lab.log().contains(&format!("learning and ageing notifications published on {addr}")), "{}", lab.log());
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    assert!(python.exists(), "{} is missing: run scripts/test.sh (it builds the test venv)", python.display());
    let traffic = format!("ip netns exec {} ping -c 2 -i 0.2 -W 1 10.0.7.2", lab.h1);
    let out = Command::new("ip")
        .args(["netns", "exec", &lab.sw])
        .arg(&python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/nanolog/learning.py"))
        .args([&thrift, &traffic, "L2Ingress.forwarding"])
        .output()
        .expect("run tests/nanolog/learning.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}\n{}", String::from_utf8_lossy(&out.stderr), lab.log());
    let r: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("the script's result");
    assert_eq!(r["address"], addr.as_str(), "{r}");
    let h1_mac = sh(&["ip", "-n", &lab.h1, "-br", "link", "show", "h1-eth0"]);
    let h1_mac = h1_mac.split_whitespace().nth(2).unwrap_or("").to_string();
    let first = &r["first"];
    assert_eq!(first["topic"], "LEA|", "{r}");
    assert_eq!(first["switch_id"].to_string(), device, "{r}");
    assert_eq!(first["list_id"], 1, "{r}");
    assert_eq!(first["samples"], serde_json::json!([{"mac": h1_mac, "port": 1}]), "{r}");
    assert_eq!(r["repeats_before_ack"], 0, "a fact was sent again before its acknowledgement: {r}");
    let again = &r["after_ack"];
    assert_eq!(again["samples"], first["samples"], "acknowledged, the fact is learned again: {r}");
    assert_eq!(again["buffer_id"].as_u64(), first["buffer_id"].as_u64().map(|b| b + 1), "{r}");
    assert_eq!(r["bad_list_error"], 4, "INVALID_LIST_ID: {r}");
    let age = &r["ageing"]["message"];
    assert_eq!(age["topic"], "AGE|", "no ageing notification: {r}");
    assert_eq!(age["switch_id"].to_string(), device, "{r}");
    assert_eq!(age["table_id"], 1, "the forwarding table's id: {r}");
    assert_eq!(age["handles"], serde_json::json!([r["ageing"]["handle"]]), "{r}");
    lab.stop();
}

/// bmv2's packet I/O over nanomsg (`--packet-in ADDR`), driven by PTF's own
/// `nn` platform as P4 developers drive bmv2 with it: the router example's
/// tests in `tests/ptf` send frames on ports 1 and 2 and expect them
/// routed, or dropped, over one PAIR socket; the switch's report counts
/// the frames both ways.
#[test]
fn ptf_drives_the_router_over_packet_in_as_it_drives_bmv2() {
    let mut lab = Lab::new();
    let cmds = lab.dir.join("commands.txt").display().to_string();
    let json = router_json().display().to_string();
    let addr = format!("ipc://{}", lab.dir.join("sw.ipc").display());
    lab.start(&["--packet-in", &addr, "--commands", &cmds, &json]);
    assert!(lab.log().contains(&format!("every port: {addr} via packet_in")), "start-up report:\n{}", lab.log());
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let ptf = repo.join(".venv/bin/ptf");
    assert!(ptf.exists(), "{} is missing: run scripts/test.sh (it builds the test venv)", ptf.display());
    let out = Command::new(&ptf)
        .current_dir(&lab.dir)
        .args(["--test-dir", &repo.join("tests/ptf").display().to_string()])
        .args(["--platform", "nn", "--device-socket", &format!("0-{{1,2}}@{addr}")])
        // Patience for a busy machine; the negative checks stay short.
        .args(["--default-timeout", "60", "--default-negative-timeout", "1"])
        .args(["--log-file", &lab.dir.join("ptf.log").display().to_string()])
        .arg("router_test")
        .output()
        .expect("run ptf");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "ptf failed:\n{text}\nptf.log:\n{}\nswitch:\n{}",
        std::fs::read_to_string(lab.dir.join("ptf.log")).unwrap_or_default(),
        lab.log()
    );
    assert!(text.contains("Ran 2 tests"), "{text}");
    let log = lab.stop();
    // Four frames in (two routed, two dropped), two out.
    let line = log.lines().find(|l| l.contains("(packet_in)")).unwrap_or_else(|| panic!("no port report:\n{log}"));
    assert!(line.contains("rx 4 pkts") && line.contains("tx 2 pkts"), "{line}");
}
