//! Network labs for the tests that need live interfaces: two host
//! namespaces and a switch namespace joined by veth pairs, removed on drop
//! (also when a test fails). Needs root and iproute2, iperf3, ethtool, ping
//! (`scripts/test.sh` installs them; a missing one fails with its name).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The sluice binary under test.
pub const SLUICE: &str = env!("CARGO_BIN_EXE_sluice");

/// The router example.
pub fn router_json() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/router.json")
}

/// Fails unless root and the network tools are there.
pub fn require_tools() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "the live-port tests need root (network namespaces); run them as root");
    for t in ["ip", "iperf3", "ethtool", "ping"] {
        let ok = Command::new("sh").args(["-c", &format!("command -v {t}")]).stdout(Stdio::null()).status();
        assert!(
            ok.is_ok_and(|s| s.success()),
            "{t} is not installed: run scripts/test.sh (it installs it) or apt-get install it"
        );
    }
}

/// Runs a command, failing the test with its output when it fails.
pub fn sh(args: &[&str]) -> String {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(
        out.status.success(),
        "{args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

static NEXT: AtomicU32 = AtomicU32::new(0);

pub const MAC_H1: &str = "02:00:00:00:01:01";
pub const MAC_H2: &str = "02:00:00:00:02:01";
pub const MAC_SW1: &str = "02:00:00:00:01:fe";
pub const MAC_SW2: &str = "02:00:00:00:02:fe";

/// Two hosts and a switch namespace; everything is removed on drop.
pub struct Lab {
    pub h1: String,
    pub h2: String,
    pub sw: String,
    pub dir: PathBuf,
    pub sluice: Option<Child>,
    /// More namespaces a test made (removed on drop too).
    pub extra: Vec<String>,
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Some(mut c) = self.sluice.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for n in [&self.h1, &self.h2, &self.sw].into_iter().chain(&self.extra) {
            let _ = Command::new("ip").args(["netns", "del", n]).stderr(Stdio::null()).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Lab {
    pub fn new() -> Lab {
        require_tools();
        let id = format!("{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let dir = std::env::temp_dir().join(format!("sluice-live-{id}"));
        std::fs::create_dir_all(&dir).unwrap();
        let lab = Lab {
            h1: format!("slt{id}-h1"),
            h2: format!("slt{id}-h2"),
            sw: format!("slt{id}-sw"),
            dir,
            sluice: None,
            extra: Vec::new(),
        };
        for n in [&lab.h1, &lab.h2, &lab.sw] {
            sh(&["ip", "netns", "add", n]);
            sh(&["ip", "-n", n, "link", "set", "lo", "up"]);
        }
        std::fs::write(
            lab.dir.join("commands.txt"),
            format!(
                "table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop 10.0.1.0/24 => 1\n\
                 table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop 10.0.2.0/24 => 2\n\
                 table_add RouterIngress.nexthop RouterIngress.forward 1 => 1 {MAC_SW1} {MAC_H1}\n\
                 table_add RouterIngress.nexthop RouterIngress.forward 2 => 2 {MAC_SW2} {MAC_H2}\n"
            ),
        )
        .unwrap();
        lab
    }

    /// Both hosts on veth pairs to the switch namespace (`s1-eth1`, `s1-eth2`), addressed.
    pub fn with_veth_hosts(offloads: bool) -> Lab {
        let lab = Lab::new();
        lab.veth(&lab.h1, "h1-eth0", "s1-eth1");
        lab.veth(&lab.h2, "h2-eth0", "s1-eth2");
        lab.host(1, "h1-eth0", offloads);
        lab.host(2, "h2-eth0", offloads);
        lab
    }

    /// A veth pair: `host_if` in host namespace `host`, `sw_if` in the switch namespace.
    pub fn veth(&self, host: &str, host_if: &str, sw_if: &str) {
        self.veth_queues(host, host_if, sw_if, 1);
    }

    /// [`Lab::veth`] with `queues` receive and transmit queues on each end.
    pub fn veth_queues(&self, host: &str, host_if: &str, sw_if: &str, queues: u32) {
        let q = queues.to_string();
        sh(&[
            "ip",
            "link",
            "add",
            host_if,
            "netns",
            host,
            "numrxqueues",
            &q,
            "numtxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            sw_if,
            "netns",
            &self.sw,
            "numrxqueues",
            &q,
            "numtxqueues",
            &q,
        ]);
        sh(&["ip", "-n", &self.sw, "link", "set", sw_if, "up"]);
    }

    /// Both hosts on veth pairs of `queues` queues to the switch namespace, addressed.
    pub fn with_veth_hosts_on_queues(offloads: bool, queues: u32) -> Lab {
        let lab = Lab::new();
        lab.veth_queues(&lab.h1, "h1-eth0", "s1-eth1", queues);
        lab.veth_queues(&lab.h2, "h2-eth0", "s1-eth2", queues);
        lab.host(1, "h1-eth0", offloads);
        lab.host(2, "h2-eth0", offloads);
        lab
    }

    /// A namespace of the test's own, removed with the lab.
    pub fn namespace(&mut self, suffix: &str) -> String {
        let n = format!("{}-{suffix}", self.sw.trim_end_matches("-sw"));
        sh(&["ip", "netns", "add", &n]);
        sh(&["ip", "-n", &n, "link", "set", "lo", "up"]);
        self.extra.push(n.clone());
        n
    }

    /// Addresses, gateway and static gateway MAC of host `n` (1 or 2) on `iface`.
    pub fn host(&self, n: u8, iface: &str, offloads: bool) {
        let (ns, mac, gw_mac) = if n == 1 { (&self.h1, MAC_H1, MAC_SW1) } else { (&self.h2, MAC_H2, MAC_SW2) };
        let other = if n == 1 { 2 } else { 1 };
        sh(&["ip", "-n", ns, "link", "set", iface, "address", mac]);
        sh(&["ip", "-n", ns, "addr", "add", &format!("10.0.{n}.1/24"), "dev", iface]);
        sh(&["ip", "-n", ns, "link", "set", iface, "up"]);
        sh(&["ip", "-n", ns, "route", "add", &format!("10.0.{other}.0/24"), "via", &format!("10.0.{n}.254")]);
        sh(&["ip", "-n", ns, "neigh", "add", &format!("10.0.{n}.254"), "lladdr", gw_mac, "dev", iface]);
        if !offloads {
            for o in ["tx", "tso", "gso", "sg"] {
                let _ = Command::new("ip").args(["netns", "exec", ns, "ethtool", "-K", iface, o, "off"]).output();
            }
        }
    }

    pub fn start(&mut self, args: &[&str]) {
        self.start_as("simple_switch", args)
    }

    /// Starts Sluice in the switch namespace as `form` (`simple_switch` or
    /// `simple_switch_grpc`) and waits until it forwards.
    pub fn start_as(&mut self, form: &str, args: &[&str]) {
        let log = std::fs::File::create(self.dir.join("sluice.log")).unwrap();
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.sw, SLUICE, form]).args(args);
        let child = cmd.stdout(Stdio::null()).stderr(log).spawn().expect("start sluice");
        self.sluice = Some(child);
        // Started when it says so (ports open); fail with its log otherwise.
        let t0 = Instant::now();
        while !self.log().contains("forwarding on") {
            if let Some(Ok(Some(st))) = self.sluice.as_mut().map(|c| c.try_wait()) {
                panic!("sluice exited ({st}) at start:\n{}", self.log());
            }
            assert!(t0.elapsed() < Duration::from_secs(20), "sluice did not start:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("sluice.log")).unwrap_or_default()
    }

    /// Stops Sluice with SIGTERM (it flushes its pcap files) and returns its log.
    pub fn stop(&mut self) -> String {
        if let Some(mut c) = self.sluice.take() {
            // SAFETY: kill on our own child's pid.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let t0 = Instant::now();
            while c.try_wait().unwrap().is_none() {
                if t0.elapsed() > Duration::from_secs(10) {
                    let _ = c.kill();
                    panic!("sluice did not stop on SIGTERM:\n{}", self.log());
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        self.log()
    }

    /// Pings h2 from h1; returns how many of `n` replies came back.
    pub fn ping(&self, n: u32) -> u32 {
        ping_from(&self.h1, "10.0.2.1", n, "0.1")
    }

    /// A 2-second iperf3 TCP transfer h1 -> h2; returns the bytes received.
    pub fn iperf(&self) -> u64 {
        let (bytes, j) = iperf_between(&self.h1, &self.h2, "10.0.2.1", 5301, 5301);
        assert!(j.is_object(), "iperf3 printed no JSON: {j}");
        bytes
    }
}

/// Pings `dst` from namespace `ns` `n` times every `interval` seconds;
/// returns how many replies came back.
///
/// ping stops waiting for replies the larger of twice the longest round
/// trip and the interval after its last request (a few milliseconds for
/// a fast series), so on a busy machine the last reply can come after it
/// has given up. The namespace's ICMP statistics count that reply
/// whenever it comes: when ping saw fewer than `n`, they are read until
/// all `n` are in or 3 s pass (at most `n` counted: a straggler of an
/// earlier series is not this one's).
pub fn ping_from(ns: &str, dst: &str, n: u32, interval: &str) -> u32 {
    let before = echo_replies(ns);
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "ping", "-c", &n.to_string(), "-i", interval, "-W", "2", dst])
        .output()
        .unwrap();
    let seen = received(&String::from_utf8_lossy(&out.stdout));
    if seen >= n {
        return seen;
    }
    let t0 = Instant::now();
    loop {
        let came = u32::try_from(echo_replies(ns) - before).unwrap_or(u32::MAX);
        if came >= n || t0.elapsed() > Duration::from_secs(3) {
            return came.min(n).max(seen);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Echo replies namespace `ns` has received so far, IPv4 and IPv6
/// (`InEchoReps` of `/proc/net/snmp`, `Icmp6InEchoReplies` of
/// `/proc/net/snmp6`, both per namespace).
pub fn echo_replies(ns: &str) -> u64 {
    let out =
        Command::new("ip").args(["netns", "exec", ns, "cat", "/proc/net/snmp", "/proc/net/snmp6"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    // /proc/net/snmp: per protocol, a line of names, then one of values.
    let v4 = lines
        .windows(2)
        .find(|w| w[0].starts_with("Icmp: ") && w[1].starts_with("Icmp: "))
        .and_then(|w| {
            let (names, values) = (w[0].split_whitespace(), w[1].split_whitespace());
            names.zip(values).find(|(name, _)| *name == "InEchoReps").and_then(|(_, v)| v.parse::<u64>().ok())
        })
        .unwrap_or_else(|| panic!("no InEchoReps in namespace {ns}'s /proc/net/snmp:\n{text}"));
    let v6 = lines
        .iter()
        .find_map(|l| l.strip_prefix("Icmp6InEchoReplies").and_then(|v| v.trim().parse::<u64>().ok()))
        .unwrap_or(0);
    v4 + v6
}

/// The count before `label` in the totals line of a live run's exit report
/// (`sluice: stopped after S s: N received, N sent, ...`).
pub fn report_count(log: &str, label: &str) -> u64 {
    let line = log
        .lines()
        .find(|l| l.starts_with("sluice: stopped after"))
        .unwrap_or_else(|| panic!("no exit report in:\n{log}"));
    line.split_once(&format!(" {label}"))
        .and_then(|(before, _)| before.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of {label} in the exit report: {line}"))
}

/// The "N received" count of ping's summary.
pub fn received(text: &str) -> u32 {
    text.lines()
        .find_map(|l| l.split(" received").next().filter(|_| l.contains(" received")))
        .and_then(|s| s.rsplit(", ").next())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// A 2-second iperf3 TCP transfer from namespace `from` to `addr`:`port`,
/// the server listening in namespace `to` on `server_port` (another port
/// when something between rewrites it); the bytes received and the
/// client's JSON (its error text as a string when it printed none).
pub fn iperf_between(from: &str, to: &str, addr: &str, port: u16, server_port: u16) -> (u64, serde_json::Value) {
    let mut server = Command::new("ip")
        .args(["netns", "exec", to, "iperf3", "-s", "-1", "-p", &server_port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run iperf3");
    std::thread::sleep(Duration::from_millis(300));
    let out = Command::new("ip")
        .args(["netns", "exec", from, "iperf3", "-c", addr, "-p", &port.to_string(), "-t", "2"])
        .args(["--connect-timeout", "5000", "-J"])
        .output()
        .expect("run iperf3");
    let _ = server.kill();
    let _ = server.wait();
    let j: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(&out.stderr).into_owned()));
    (j["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0), j)
}

/// A child process (a controller, a server) killed and reaped when
/// dropped, also when a test fails.
pub struct Kill(pub Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A CA, and certificates it signed for a controller and a switch (both
/// for 127.0.0.1, good for either end of a connection), made with openssl
/// in `dir`: ca.pem, ctl.key, ctl.pem, sw.key, sw.pem.
pub fn certificates(dir: &Path) {
    let ok = Command::new("sh").args(["-c", "command -v openssl"]).stdout(Stdio::null()).status();
    assert!(
        ok.is_ok_and(|s| s.success()),
        "openssl is not installed: run scripts/test.sh (it installs Debian's openssl) or apt-get install openssl"
    );
    let d = |f: &str| dir.join(f).to_str().unwrap().to_string();
    sh(&["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", &d("ca.key"), "-out", &d("ca.pem")]
        .into_iter()
        .chain(["-days", "2", "-subj", "/CN=sluice-test-ca"])
        .collect::<Vec<_>>());
    std::fs::write(
        dir.join("ext.cnf"),
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=IP:127.0.0.1\n",
    )
    .unwrap();
    for who in ["ctl", "sw"] {
        let (key, csr, pem) = (d(&format!("{who}.key")), d(&format!("{who}.csr")), d(&format!("{who}.pem")));
        sh(&[
            "openssl",
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &csr,
            "-subj",
            &format!("/CN={who}"),
        ]);
        sh(&[
            "openssl",
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &d("ca.pem"),
            "-CAkey",
            &d("ca.key"),
            "-CAcreateserial",
            "-out",
            &pem,
            "-days",
            "2",
            "-extfile",
            &d("ext.cnf"),
        ]);
    }
}
