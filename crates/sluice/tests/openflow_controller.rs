//! `sluice controller --app l2` driving real switches, each between two
//! hosts in network namespaces: Sluice's own OpenFlow 1.3 switch, and
//! Open vSwitch's user-space datapath (Debian's `openvswitch-switch`,
//! its daemons run from the test's own directory) in OpenFlow 1.0 and in
//! 1.3. Ping and iperf3 go through, and the learned flows are there.
//! `sluice ofbench` (cbench's workload) against the learning switch in
//! throughput and latency modes, both versions: every emulated switch
//! answered, the flows the right ones, no errors.
//!
//! Needs root, iproute2, iperf3, ethtool, ping, ovs-vswitchd and
//! ovs-ofctl (`scripts/test.sh` installs them all; a missing one fails
//! with its name).

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::lab::{certificates, sh, Kill, Lab, MAC_H1, MAC_H2, SLUICE};

fn require(tool: &str, package: &str) {
    let ok = Command::new("sh").args(["-c", &format!("command -v {tool}")]).stdout(Stdio::null()).status();
    assert!(
        ok.is_ok_and(|s| s.success()),
        "{tool} is not installed: run scripts/test.sh (it installs Debian's {package}) or apt-get install {package}"
    );
}

/// Two hosts (10.0.9.1 and .2, one subnet) on veths to `s1-eth1` and
/// `s1-eth2` in the switch namespace; host offloads off.
fn lab() -> Lab {
    let lab = Lab::new();
    lab.veth(&lab.h1, "h1-eth0", "s1-eth1");
    lab.veth(&lab.h2, "h2-eth0", "s1-eth2");
    for (ns, ip, mac) in [(&lab.h1, "10.0.9.1/24", MAC_H1), (&lab.h2, "10.0.9.2/24", MAC_H2)] {
        let ifc = if ns == &lab.h1 { "h1-eth0" } else { "h2-eth0" };
        sh(&["ip", "-n", ns, "link", "set", ifc, "address", mac]);
        sh(&["ip", "-n", ns, "addr", "add", ip, "dev", ifc]);
        sh(&["ip", "-n", ns, "link", "set", ifc, "up"]);
        let _ = Command::new("ip")
            .args(["netns", "exec", ns, "ethtool", "-K", ifc, "tx", "off", "tso", "off", "gso", "off", "sg", "off"])
            .output();
    }
    lab
}

/// `sluice controller` in the switch namespace on `port`; its log file.
fn controller(lab: &Lab, port: u16, args: &[&str]) -> (Kill, std::path::PathBuf) {
    let log_path = lab.dir.join(format!("controller-{port}.log"));
    let log = std::fs::File::create(&log_path).unwrap();
    let child = Command::new("ip")
        .args(["netns", "exec", &lab.sw, SLUICE, "controller", "--listen", &format!("tcp:127.0.0.1:{port}")])
        .args(args)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start sluice controller");
    let k = Kill(child);
    wait_for(&log_path, "listening on", 1);
    (k, log_path)
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// Waits (20 s at most) until `text` appears `times` times in file `p`.
fn wait_for(p: &Path, text: &str, times: usize) {
    let t0 = Instant::now();
    while read(p).matches(text).count() < times {
        assert!(t0.elapsed() < Duration::from_secs(20), "no {text:?} (x{times}) in {}:\n{}", p.display(), read(p));
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn ping(lab: &Lab, n: u32) -> u32 {
    common::lab::ping_from(&lab.h1, "10.0.9.2", n, "0.2")
}

/// A 2-second iperf3 TCP transfer h1 -> h2; the bytes received.
fn iperf(lab: &Lab) -> u64 {
    common::lab::iperf_between(&lab.h1, &lab.h2, "10.0.9.2", 5302, 5302).0
}

/// The learned flows in a dump: one toward each host's MAC.
fn assert_learned(dump: &str) {
    for mac in [MAC_H1, MAC_H2] {
        assert!(
            dump.lines().any(|l| l.contains(&format!("dl_dst={mac}")) && l.contains("n_packets=")),
            "no learned flow to {mac}:\n{dump}"
        );
    }
}

#[test]
fn learning_switch_app_drives_sluice_openflow() {
    require("ovs-ofctl", "openvswitch-common");
    let mut lab = lab();
    let (_ctl, ctl_log) = controller(&lab, 16710, &["--app", "l2", "--of", "1.3"]);
    let log = std::fs::File::create(lab.dir.join("sluice.log")).unwrap();
    let switch = Command::new("ip")
        .args(["netns", "exec", &lab.sw, SLUICE, "openflow", "-i", "1@s1-eth1", "-i", "2@s1-eth2"])
        .args(["--datapath-id", "0x5", "--controller", "tcp:127.0.0.1:16710", "--listen", "ptcp:16711:127.0.0.1"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start sluice openflow");
    lab.sluice = Some(switch);
    wait_for(&ctl_log, "switch 0x0000000000000005 up (OpenFlow 1.3", 1);
    let got = ping(&lab, 5);
    assert!(got >= 4, "ping through the learning switch: {got} of 5\n{}\n{}", read(&ctl_log), lab.log());
    let bytes = iperf(&lab);
    assert!(bytes > 1_000_000, "TCP through the learned flows moved {bytes} bytes\n{}", read(&ctl_log));
    let out = Command::new("ip")
        .args(["netns", "exec", &lab.sw, "ovs-ofctl", "-O", "OpenFlow13", "dump-flows", "tcp:127.0.0.1:16711"])
        .output()
        .unwrap();
    let dump = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_learned(&dump);
    assert!(dump.contains("priority=0 actions=CONTROLLER:65535"), "the table-miss flow:\n{dump}");
    lab.stop();
}

/// Open vSwitch's daemons in the switch namespace, every file in `dir`.
struct Ovs {
    dir: std::path::PathBuf,
    ns: String,
}

impl Ovs {
    fn start(lab: &Lab) -> Ovs {
        require("ovs-vswitchd", "openvswitch-switch");
        let dir = lab.dir.join("ovs");
        std::fs::create_dir_all(&dir).unwrap();
        let d = |f: &str| dir.join(f).to_str().unwrap().to_string();
        sh(&["ovsdb-tool", "create", &d("conf.db"), "/usr/share/openvswitch/vswitch.ovsschema"]);
        let ns = lab.sw.clone();
        // The daemons' sockets (a bridge's management socket too) go to OVS_RUNDIR.
        let rundir = format!("OVS_RUNDIR={}", dir.display());
        sh(&[
            "ip",
            "netns",
            "exec",
            &ns,
            "env",
            &rundir,
            "ovsdb-server",
            &d("conf.db"),
            &format!("--remote=punix:{}", d("db.sock")),
            &format!("--pidfile={}", d("ovsdb.pid")),
            &format!("--unixctl={}", d("ovsdb.ctl")),
            &format!("--log-file={}", d("ovsdb.log")),
            "--detach",
            "--no-chdir",
        ]);
        let (vswitchd_db, vswitchd_pid, vswitchd_ctl, vswitchd_log) =
            (d("db.sock"), d("vswitchd.pid"), d("vswitchd.ctl"), d("vswitchd.log"));
        let ovs = Ovs { dir, ns };
        ovs.vsctl(&["--no-wait", "init"]);
        sh(&[
            "ip",
            "netns",
            "exec",
            &ovs.ns,
            "env",
            &rundir,
            "ovs-vswitchd",
            &format!("unix:{vswitchd_db}"),
            &format!("--pidfile={vswitchd_pid}"),
            &format!("--unixctl={vswitchd_ctl}"),
            &format!("--log-file={vswitchd_log}"),
            "--detach",
            "--no-chdir",
        ]);
        ovs
    }

    fn vsctl(&self, args: &[&str]) -> String {
        let db = format!("--db=unix:{}", self.dir.join("db.sock").display());
        let mut a = vec!["ip", "netns", "exec", &self.ns, "ovs-vsctl", &db, "--timeout=20"];
        a.extend_from_slice(args);
        sh(&a)
    }

    /// `ovs-ofctl -O VERSION dump-flows` of bridge `br`.
    fn dump_flows(&self, br: &str, version: &str) -> String {
        let mgmt = self.dir.join(format!("{br}.mgmt"));
        sh(&["ip", "netns", "exec", &self.ns, "ovs-ofctl", "-O", version, "dump-flows", mgmt.to_str().unwrap()])
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        for p in ["vswitchd.pid", "ovsdb.pid"] {
            if let Ok(pid) = std::fs::read_to_string(self.dir.join(p)) {
                let _ = Command::new("kill").arg(pid.trim()).status();
            }
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn learning_switch_app_drives_open_vswitch_in_openflow_1_0_and_1_3() {
    let lab = lab();
    let ovs = Ovs::start(&lab);
    let (_ctl, ctl_log) = controller(&lab, 16712, &["--app", "l2", "--of", "1.0,1.3"]);
    for (n, (protocols, version, shown)) in
        [("OpenFlow10", "OpenFlow10", "1.0"), ("OpenFlow13", "OpenFlow13", "1.3")].into_iter().enumerate()
    {
        let br = format!("tb{n}");
        ovs.vsctl(&["add-br", &br, "--", "set", "bridge", &br, "datapath_type=netdev"]);
        ovs.vsctl(&["set", "bridge", &br, &format!("protocols={protocols}"), "fail-mode=secure"]);
        ovs.vsctl(&["set", "bridge", &br, "other-config:disable-in-band=true"]);
        ovs.vsctl(&["set", "bridge", &br, &format!("other-config:datapath-id=00000000000000a{n}")]);
        for (i, p) in ["s1-eth1", "s1-eth2"].into_iter().enumerate() {
            ovs.vsctl(&["add-port", &br, p, "--", "set", "interface", p, &format!("ofport_request={}", i + 1)]);
        }
        ovs.vsctl(&["set-controller", &br, "tcp:127.0.0.1:16712"]);
        wait_for(&ctl_log, &format!("switch 0x00000000000000a{n} up (OpenFlow {shown}"), 1);
        let got = ping(&lab, 5);
        assert!(
            got >= 4,
            "ping through Open vSwitch ({shown}) and the learning switch: {got} of 5\n{}",
            read(&ctl_log)
        );
        let bytes = iperf(&lab);
        assert!(bytes > 1_000_000, "TCP through Open vSwitch ({shown}) moved {bytes} bytes\n{}", read(&ctl_log));
        assert_learned(&ovs.dump_flows(&br, version));
        ovs.vsctl(&["del-br", &br]);
        wait_for(&ctl_log, &format!("switch 0x00000000000000a{n} down"), 1);
    }
}

/// Runs `sluice ofbench ARGS` against a controller on `port`; its output.
fn ofbench(port: u16, args: &[&str]) -> String {
    let out = Command::new(SLUICE)
        .args(["ofbench", "-c", "127.0.0.1", "-p", &port.to_string(), "-l", "3", "-m", "300", "-w", "1"])
        .args(args)
        .output()
        .expect("run sluice ofbench");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "sluice ofbench {args:?} failed:\n{text}");
    text
}

/// ofbench's line for its last test, and each emulated switch's count on it.
fn last_test_counts(out: &str) -> (&str, Vec<u64>) {
    let last = out.lines().rfind(|l| l.contains("switches: flows/sec:")).unwrap_or_else(|| panic!("{out}"));
    let counts = last
        .split("flows/sec:")
        .nth(1)
        .and_then(|s| s.split("total").next())
        .map(|s| s.split_whitespace().filter_map(|c| c.parse().ok()).collect())
        .unwrap_or_default();
    (last, counts)
}

/// `sluice controller` listening on loopback `port` with `args`, once it
/// says it listens: the process (killed when dropped) and its log file.
fn loopback_controller(port: u16, args: &[&str]) -> (Kill, std::path::PathBuf) {
    let log = std::env::temp_dir().join(format!("sluice-ctl-{}-{port}.log", std::process::id()));
    let child = Command::new(SLUICE)
        .args(["controller", "--listen", &format!("tcp:127.0.0.1:{port}")])
        .args(args)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start sluice controller");
    let ctl = Kill(child);
    wait_for(&log, "listening on", 1);
    (ctl, log)
}

#[test]
fn ofbench_against_the_learning_switch_in_both_modes_and_versions() {
    for (n, version) in ["1.0", "1.3"].into_iter().enumerate() {
        let port = 16720 + n as u16;
        let (_ctl, log) = loopback_controller(port, &["--threads", "2", "--app", "l2"]);
        for mode in [&["-t"][..], &[][..]] {
            let mut args = vec!["-s", "8", "-M", "1000", "-V", version];
            args.extend_from_slice(mode);
            let out = ofbench(port, &args);
            let result =
                out.lines().find(|l| l.starts_with("RESULT: 8 switches 2 tests")).unwrap_or_else(|| panic!("{out}"));
            let avg: f64 = result.split('/').nth(5).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("{result}"));
            assert!(avg > 100.0, "{version} {mode:?}: {avg} responses/s\n{out}");
            let check = out.lines().find(|l| l.starts_with("CHECK:")).unwrap_or_else(|| panic!("{out}"));
            assert!(
                check.contains(" 0 others not sending the learned destination")
                    && check.ends_with(" 0 errors, 0 switches never ready"),
                "{version} {mode:?}: {check}"
            );
            // Every emulated switch got answers in the last test.
            let (last, counts) = last_test_counts(&out);
            assert!(counts.len() == 8 && counts.iter().all(|c| *c > 0), "{version} {mode:?}: {last}");
        }
        let _ = std::fs::remove_file(&log);
    }
}

/// `--role slave`: the switch takes the role and refuses the learning
/// switch's flow-mods (no table-miss flow appears).
#[test]
fn a_slave_controller_cannot_change_sluice_openflow() {
    require("ovs-ofctl", "openvswitch-common");
    let mut lab = lab();
    let (_ctl, ctl_log) =
        controller(&lab, 16730, &["--app", "l2", "--of", "1.3", "--role", "slave", "--generation-id", "7"]);
    let log = std::fs::File::create(lab.dir.join("sluice.log")).unwrap();
    let switch = Command::new("ip")
        .args(["netns", "exec", &lab.sw, SLUICE, "openflow", "-i", "1@s1-eth1", "-i", "2@s1-eth2"])
        .args(["--datapath-id", "0x6", "--controller", "tcp:127.0.0.1:16730", "--listen", "ptcp:16731:127.0.0.1"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start sluice openflow");
    lab.sluice = Some(switch);
    wait_for(&ctl_log, "switch 0x0000000000000006 up (OpenFlow 1.3", 1);
    std::thread::sleep(Duration::from_millis(500));
    let dump =
        sh(&["ip", "netns", "exec", &lab.sw, "ovs-ofctl", "-O", "OpenFlow13", "dump-flows", "tcp:127.0.0.1:16731"]);
    assert!(!dump.contains("priority=0"), "a slave's flow-mod was taken:\n{dump}");
    assert_eq!(ping(&lab, 2), 0, "nothing forwards without flows");
    lab.stop();
}

/// `--app router`: the router example's two routes installed when the
/// switch connects; hosts in two subnets ping through them.
#[test]
fn the_proactive_router_app_routes_between_the_example_subnets() {
    require("ovs-ofctl", "openvswitch-common");
    let mut lab = Lab::with_veth_hosts(false);
    let (_ctl, ctl_log) = controller(&lab, 16740, &["--app", "router", "--of", "1.3"]);
    let log = std::fs::File::create(lab.dir.join("sluice.log")).unwrap();
    let switch = Command::new("ip")
        .args(["netns", "exec", &lab.sw, SLUICE, "openflow", "-i", "1@s1-eth1", "-i", "2@s1-eth2"])
        .args(["--datapath-id", "0x7", "--controller", "tcp:127.0.0.1:16740", "--listen", "ptcp:16741:127.0.0.1"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start sluice openflow");
    lab.sluice = Some(switch);
    wait_for(&ctl_log, "switch 0x0000000000000007 up (OpenFlow 1.3", 1);
    let got = lab.ping(5);
    assert!(got >= 4, "ping between the subnets through the router's flows: {got} of 5\n{}", read(&ctl_log));
    let dump =
        sh(&["ip", "netns", "exec", &lab.sw, "ovs-ofctl", "-O", "OpenFlow13", "dump-flows", "tcp:127.0.0.1:16741"]);
    for net in ["nw_dst=10.0.1.0/24", "nw_dst=10.0.2.0/24"] {
        let line = dump.lines().find(|l| l.contains(net)).unwrap_or_else(|| panic!("no route to {net}:\n{dump}"));
        assert!(line.contains("dec_ttl") && !line.contains("n_packets=0,"), "{line}");
    }
    lab.stop();
}

/// `--listen ssl:`: Open vSwitch connects over TLS (each side checks
/// the other's certificate against the test's CA); the learning switch
/// works through it; a plain TCP peer on the TLS port is closed.
#[test]
fn learning_switch_app_over_tls_drives_open_vswitch() {
    let lab = lab();
    certificates(&lab.dir);
    let d = |f: &str| lab.dir.join(f).to_str().unwrap().to_string();
    let ovs = Ovs::start(&lab);
    let log_path = lab.dir.join("controller-tls.log");
    let child = Command::new("ip")
        .args(["netns", "exec", &lab.sw, SLUICE, "controller", "--listen", "ssl:127.0.0.1:16750", "--app", "l2"])
        .args(["--private-key", &d("ctl.key"), "--certificate", &d("ctl.pem"), "--ca-cert", &d("ca.pem")])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .expect("start sluice controller");
    let _ctl = Kill(child);
    wait_for(&log_path, "listening on ssl:", 1);
    ovs.vsctl(&["set-ssl", &d("sw.key"), &d("sw.pem"), &d("ca.pem")]);
    ovs.vsctl(&["add-br", "tls0", "--", "set", "bridge", "tls0", "datapath_type=netdev", "protocols=OpenFlow13"]);
    ovs.vsctl(&["set", "bridge", "tls0", "fail-mode=secure", "other-config:disable-in-band=true"]);
    ovs.vsctl(&["set", "bridge", "tls0", "other-config:datapath-id=00000000000000c1"]);
    for (i, p) in ["s1-eth1", "s1-eth2"].into_iter().enumerate() {
        ovs.vsctl(&["add-port", "tls0", p, "--", "set", "interface", p, &format!("ofport_request={}", i + 1)]);
    }
    ovs.vsctl(&["set-controller", "tls0", "ssl:127.0.0.1:16750"]);
    wait_for(&log_path, "switch 0x00000000000000c1 up (OpenFlow 1.3", 1);
    let got = ping(&lab, 5);
    assert!(got >= 4, "ping through Open vSwitch and the learning switch over TLS: {got} of 5\n{}", read(&log_path));
    assert_learned(&ovs.dump_flows("tls0", "OpenFlow13"));

    // Plain OpenFlow on the TLS port: not a TLS handshake, closed.
    let plain = "import socket\n\
                 s = socket.create_connection(('127.0.0.1', 16750))\n\
                 s.sendall(bytes.fromhex('0400000800000001'))\n\
                 s.settimeout(5)\n\
                 try:\n    r = s.recv(100)\nexcept OSError:\n    r = b''\n\
                 print('closed' if r == b'' else 'an alert')\n";
    let out = sh(&["ip", "netns", "exec", &lab.sw, "python3", "-c", plain]);
    assert!(out.contains("closed") || out.contains("an alert"), "{out}");
    wait_for(&log_path, "closed: TLS", 1);
}

/// 500 switch connections held open on the controller's port at once
/// (ofbench's emulated switches, each through the handshake and served by
/// the learning switch); then, with `--max-connections 8`, a ninth
/// connection is closed at once and the refusal logged, and a closed
/// connection's slot serves a new one.
#[test]
fn the_controller_serves_500_switches_and_refuses_past_its_bound() {
    use std::io::{Read, Write};
    let port = 16740u16;
    let (ctl, _) = loopback_controller(port, &["--threads", "2", "--app", "l2"]);
    let out = ofbench(port, &["-s", "500", "-M", "100"]);
    let check = out.lines().find(|l| l.starts_with("CHECK:")).unwrap_or_else(|| panic!("{out}"));
    assert!(check.ends_with(" 0 errors, 0 switches never ready"), "{check}");
    let (last, counts) = last_test_counts(&out);
    assert!(counts.len() == 500 && counts.iter().all(|c| *c > 0), "every one of 500 switches served: {last}");
    drop(ctl);

    let port = 16741u16;
    let (_ctl, log) = loopback_controller(port, &["--max-connections", "8"]);
    let hello = [4u8, 0, 0, 8, 0, 0, 0, 1];
    let connect = || {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.write_all(&hello).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        c
    };
    // Open: the controller's HELLO arrives. Closed: end of stream first.
    let answered = |c: &mut std::net::TcpStream| matches!(c.read(&mut [0u8; 8]), Ok(n) if n > 0);
    let mut held: Vec<_> = (0..8).map(|_| connect()).collect();
    assert!(held.iter_mut().all(answered), "eight connections within the bound are greeted");
    let mut ninth = connect();
    let closed = match ninth.read(&mut [0u8; 8]) {
        Ok(0) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        Ok(_) => false,
    };
    assert!(closed, "the ninth connection is closed at once");
    wait_for(&log, "1 connection(s) refused so far (8 connections open, the bound)", 1);
    drop(held.pop());
    std::thread::sleep(Duration::from_millis(300));
    assert!(answered(&mut connect()), "a closed connection's slot serves a new one");
    let _ = std::fs::remove_file(&log);
}
