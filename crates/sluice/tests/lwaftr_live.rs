//! `sluice lwaftr run` between real peers in network namespaces: an
//! "internet" host with plain IPv4, and a B4 that is the Linux kernel's own
//! ip6tnl tunnel (mode ipip6) with nftables SNAT of its traffic to the
//! shared IPv4 address and port set of its softwire. UDP and TCP both ways
//! (iperf3), ping to both lwAFTR addresses, and a flow from outside the
//! port set dropped and counted; counters read while running (`query`),
//! a softwire removed and added back while running (`config`), and
//! printed on SIGTERM.
//!
//! Needs root and iproute2, nftables, iperf3, ethtool, ping, python3
//! (`scripts/test.sh` installs them; a missing one fails with its name).

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::lab::{ping_from, sh, SLUICE};

const INET_IP: &str = "198.51.100.2";
const INET_MAC: &str = "02:00:00:00:44:02";
const AFTR_V4_IP: &str = "198.51.100.1";
const AFTR_V4_MAC: &str = "02:00:00:00:44:01";
const AFTR_V6_IP: &str = "2001:db8:66::1";
const AFTR_V6_MAC: &str = "02:00:00:00:66:01";
const B4_IP: &str = "2001:db8:66::2";
const B4_MAC: &str = "02:00:00:00:66:02";
/// The softwire: a shared address, PSID 1 of length 6 (ports 1024-2047).
const PUBLIC: &str = "203.0.113.7";
const PORTS: &str = "1024-2047";
/// The B4's private address behind its NAT.
const PRIVATE: &str = "10.77.0.2";

/// IPv4 in IPv6 (next header 4, no extension header) between TUN device
/// ARGV[1] and the lwAFTR at ARGV[3], from the local address ARGV[2].
const RELAY: &str = r#"
import fcntl, os, select, socket, struct, sys
name, local, remote = sys.argv[1:4]
tun = os.open("/dev/net/tun", os.O_RDWR)
fcntl.ioctl(tun, 0x400454CA, struct.pack("16sH", name.encode(), 0x0001 | 0x1000))  # TUNSETIFF, IFF_TUN|IFF_NO_PI
raw = socket.socket(socket.AF_INET6, socket.SOCK_RAW, 4)
raw.bind((local, 0))
# A burst must not overflow the default buffer while this loop is descheduled
# (SO_RCVBUFFORCE: root may exceed rmem_max).
raw.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)
peer = socket.inet_pton(socket.AF_INET6, remote)
print("ready", flush=True)
while True:
    ready, _, _ = select.select([tun, raw], [], [])
    if tun in ready:
        p = os.read(tun, 65535)
        if p and p[0] >> 4 == 4:
            try:
                raw.sendto(p, (remote, 0))
            except OSError:
                pass
    if raw in ready:
        p, a = raw.recvfrom(65535)
        if socket.inet_pton(socket.AF_INET6, a[0]) == peer and p and p[0] >> 4 == 4:
            os.write(tun, p)
"#;

fn require_tools() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "the lwAFTR live test needs root (network namespaces); run it as root");
    for t in ["ip", "nft", "iperf3", "ethtool", "ping", "python3"] {
        let ok = Command::new("sh").args(["-c", &format!("command -v {t}")]).stdout(Stdio::null()).status();
        assert!(
            ok.is_ok_and(|s| s.success()),
            "{t} is not installed: run scripts/test.sh (it installs it) or apt-get install it"
        );
    }
}

/// Three namespaces (internet, lwAFTR, B4) and the running lwAFTR; all
/// removed on drop, also when the test fails.
struct Net {
    inet: String,
    aftr: String,
    b4: String,
    name: String,
    dir: PathBuf,
    sluice: Option<Child>,
    /// On a stick: the lwAFTR's one interface and both hosts on a bridge in namespace `lan`.
    stick: bool,
    /// The lwAFTR's ports on AF_XDP (else AF_PACKET).
    xdp: bool,
    lan: String,
    workers: u32,
    /// The user-space ipip6 tunnel of a kernel without ip6tnl.
    relay: Option<Child>,
}

impl Drop for Net {
    fn drop(&mut self) {
        for mut c in [self.sluice.take(), self.relay.take()].into_iter().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for n in [&self.inet, &self.aftr, &self.b4, &self.lan] {
            let _ = Command::new("ip").args(["netns", "del", n]).stderr(Stdio::null()).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn offloads_off(ns: &str, dev: &str) {
    sh(&[
        "ip", "netns", "exec", ns, "ethtool", "-K", dev, "rx", "off", "tx", "off", "tso", "off", "gso", "off", "gro",
        "off",
    ]);
}

impl Net {
    /// `stick`: the lwAFTR on one interface, on a bridge with both hosts,
    /// with `workers` workers (else on one interface toward each host).
    fn new(stick: bool, workers: u32) -> Net {
        Net::with_backend(stick, workers, false)
    }

    /// [`Net::new`]; `xdp`: the lwAFTR's ports on AF_XDP.
    fn with_backend(stick: bool, workers: u32, xdp: bool) -> Net {
        require_tools();
        let id = format!("{}{}{}", std::process::id(), if stick { "s" } else { "" }, if xdp { "x" } else { "" });
        let net = Net {
            xdp,
            stick,
            workers,
            lan: format!("lwt{id}-lan"),
            relay: None,
            inet: format!("lwt{id}-inet"),
            aftr: format!("lwt{id}-aftr"),
            b4: format!("lwt{id}-b4"),
            name: format!("lwtest{id}"),
            dir: std::env::temp_dir().join(format!("sluice-lwaftr-live-{id}")),
            sluice: None,
        };
        std::fs::create_dir_all(&net.dir).unwrap();
        for n in [&net.inet, &net.aftr, &net.b4] {
            sh(&["ip", "netns", "add", n]);
            sh(&["ip", "-n", n, "link", "set", "lo", "up"]);
        }
        // The lwAFTR's namespace keeps its kernel out of the way: no IPv6 there.
        sh(&["ip", "netns", "exec", &net.aftr, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"]);
        sh(&["ip", "netns", "exec", &net.aftr, "sysctl", "-q", "-w", "net.ipv6.conf.default.disable_ipv6=1"]);
        if stick {
            // Both hosts and the lwAFTR's one interface on a bridge.
            let lan = &net.lan;
            sh(&["ip", "netns", "add", lan]);
            sh(&["ip", "netns", "exec", lan, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"]);
            sh(&["ip", "netns", "exec", lan, "sysctl", "-q", "-w", "net.ipv6.conf.default.disable_ipv6=1"]);
            sh(&["ip", "-n", lan, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0"]);
            sh(&["ip", "-n", lan, "link", "set", "br0", "up"]);
            for (ns, end, mac, port) in [
                (&net.inet, "inet0", INET_MAC, "l-inet"),
                (&net.b4, "b4-0", B4_MAC, "l-b4"),
                (&net.aftr, "aftr0", AFTR_V4_MAC, "l-aftr"),
            ] {
                sh(&[
                    "ip", "link", "add", end, "netns", ns, "address", mac, "type", "veth", "peer", "name", port,
                    "netns", lan,
                ]);
                offloads_off(ns, end);
                offloads_off(lan, port);
                sh(&["ip", "-n", lan, "link", "set", port, "master", "br0", "up"]);
                sh(&["ip", "-n", ns, "link", "set", end, "up"]);
            }
        } else {
            for (host, hif, hmac, aif, amac) in [
                (&net.inet, "inet0", INET_MAC, "aftr-v4", AFTR_V4_MAC),
                (&net.b4, "b4-0", B4_MAC, "aftr-v6", AFTR_V6_MAC),
            ] {
                sh(&[
                    "ip", "link", "add", hif, "netns", host, "address", hmac, "type", "veth", "peer", "name", aif,
                    "netns", &net.aftr, "address", amac,
                ]);
                offloads_off(host, hif);
                offloads_off(&net.aftr, aif);
                sh(&["ip", "-n", &net.aftr, "link", "set", aif, "up"]);
                sh(&["ip", "-n", host, "link", "set", hif, "up"]);
            }
        }
        // The internet host: the softwire's public address lies behind the lwAFTR.
        sh(&["ip", "-n", &net.inet, "addr", "add", &format!("{INET_IP}/24"), "dev", "inet0"]);
        sh(&["ip", "-n", &net.inet, "route", "add", &format!("{PUBLIC}/32"), "via", AFTR_V4_IP]);
        // The B4: IPv6 toward the lwAFTR, an ip6tnl tunnel to its address
        // (no encapsulation limit option: the lwAFTR drops extension
        // headers), IPv4 through the tunnel, SNAT to the port set.
        sh(&["ip", "-n", &net.b4, "addr", "add", &format!("{B4_IP}/64"), "dev", "b4-0", "nodad"]);
        let mut net = net;
        net.tunnel();
        sh(&["ip", "-n", &net.b4, "addr", "add", &format!("{PRIVATE}/32"), "dev", "tun0"]);
        // The public address too, for the probe from outside the port set (not NATed).
        sh(&["ip", "-n", &net.b4, "addr", "add", &format!("{PUBLIC}/32"), "dev", "tun0"]);
        sh(&["ip", "-n", &net.b4, "route", "add", "default", "dev", "tun0", "src", PRIVATE]);
        let rules = format!(
            "table ip nat {{\n chain post {{\n  type nat hook postrouting priority 100; policy accept;\n  \
             oifname \"tun0\" ip saddr {PRIVATE} meta l4proto {{ tcp, udp }} snat to {PUBLIC}:{PORTS}\n }}\n}}\n"
        );
        let nft = net.dir.join("nat.nft");
        std::fs::write(&nft, rules).unwrap();
        sh(&["ip", "netns", "exec", &net.b4, "nft", "-f", nft.to_str().unwrap()]);
        net
    }

    /// The B4's IPv4-in-IPv6 tunnel `tun0` to the lwAFTR: the kernel's
    /// ip6tnl (mode ipip6, no encapsulation limit option: the lwAFTR drops
    /// extension headers) or, on a kernel built without it
    /// (CONFIG_IPV6_TUNNEL unset), the same encapsulation done by a small
    /// relay between a TUN device and a raw IPv6 socket of next header 4.
    fn tunnel(&mut self) {
        let ip6tnl = Command::new("ip")
            .args([
                "-n", &self.b4, "-6", "tunnel", "add", "tun0", "mode", "ipip6", "local", B4_IP, "remote", AFTR_V6_IP,
            ])
            .args(["encaplimit", "none", "dev", "b4-0"])
            .output()
            .unwrap();
        if ip6tnl.status.success() {
            sh(&["ip", "-n", &self.b4, "link", "set", "tun0", "up"]);
            return;
        }
        eprintln!(
            "note: no ip6tnl in this kernel ({}): the B4's tunnel is a TUN device with a raw-socket ipip6 relay",
            String::from_utf8_lossy(&ip6tnl.stderr).trim()
        );
        let script = self.dir.join("ipip6-relay.py");
        std::fs::write(&script, RELAY).unwrap();
        let mut relay = Command::new("ip")
            .args(["netns", "exec", &self.b4, "python3", "-u"])
            .arg(&script)
            .args(["tun0", B4_IP, AFTR_V6_IP])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(relay.stdout.take().unwrap()), &mut line).unwrap();
        self.relay = Some(relay);
        assert_eq!(line.trim(), "ready", "the ipip6 relay did not start");
        sh(&["ip", "-n", &self.b4, "link", "set", "tun0", "mtu", "1460", "up"]);
    }

    /// On a stick the next hops are addresses the lwAFTR resolves (ARP,
    /// NDP); else the peers' MACs.
    fn conf(&self) -> PathBuf {
        let (nh4, nh6) = if self.stick {
            (format!("ip {INET_IP}"), format!("ip {B4_IP}"))
        } else {
            (format!("mac {INET_MAC}"), format!("mac {B4_MAC}"))
        };
        let c = format!(
            "softwire-config {{
  binding-table {{
    softwire {{ ipv4 {PUBLIC}; psid 1; b4-ipv6 {B4_IP}; br-address {AFTR_V6_IP}; port-set {{ psid-length 6; }} }}
  }}
  external-interface {{ mtu 1500; }}
  internal-interface {{ mtu 1500; }}
  instance {{
    device live;
    queue {{
      id 0;
      external-interface {{ ip {AFTR_V4_IP}; mac {AFTR_V4_MAC}; next-hop {{ {nh4}; }} }}
      internal-interface {{ ip {AFTR_V6_IP}; mac {AFTR_V6_MAC}; next-hop {{ {nh6}; }} }}
    }}
  }}
}}
"
        );
        let p = self.dir.join("lwaftr.conf");
        std::fs::write(&p, c).unwrap();
        p
    }

    fn start(&mut self) {
        let conf = self.conf();
        let out = std::fs::File::create(self.dir.join("stdout")).unwrap();
        let err = std::fs::File::create(self.dir.join("stderr")).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.aftr, SLUICE, "lwaftr", "run", "--conf"])
            .arg(&conf)
            .args(match (self.stick, self.xdp) {
                (true, _) => vec!["--on-a-stick", "aftr0"],
                (false, false) => vec!["--v4", "aftr-v4", "--v6", "aftr-v6"],
                (false, true) => vec!["--v4", "af_xdp:aftr-v4", "--v6", "af_xdp:aftr-v6"],
            })
            .args(["--workers", &self.workers.to_string(), "--name", &self.name])
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap();
        self.sluice = Some(child);
        let t = Instant::now();
        while !self.stderr().contains("running with") {
            if let Some(s) = self.sluice.as_mut().unwrap().try_wait().unwrap() {
                panic!("sluice lwaftr run exited ({s}): {}", self.stderr());
            }
            assert!(t.elapsed() < Duration::from_secs(20), "sluice lwaftr run did not start: {}", self.stderr());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.join("stderr")).unwrap_or_default()
    }

    /// `sluice lwaftr query NAME`: the counters as (name, value).
    fn query(&self) -> Vec<(String, u64)> {
        let out = Command::new(SLUICE).args(["lwaftr", "query", &self.name]).output().unwrap();
        assert!(out.status.success(), "query failed: {}", String::from_utf8_lossy(&out.stderr));
        parse_counters(&String::from_utf8_lossy(&out.stdout))
    }

    fn counter(&self, name: &str) -> u64 {
        self.query().into_iter().find(|(n, _)| n == name).map_or(0, |(_, v)| v)
    }

    /// `sluice lwaftr config VERB -s snabb-softwire-v3 NAME ARGS...` (Snabb's
    /// `snabb config`): what it printed.
    fn config(&self, verb: &str, args: &[&str]) -> String {
        let out = Command::new(SLUICE)
            .args(["lwaftr", "config", verb, "-s", "snabb-softwire-v3", &self.name])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "config {verb} {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A `config` request the instance refuses: its error message.
    fn config_refused(&self, verb: &str, args: &[&str]) -> String {
        let out = Command::new(SLUICE).args(["lwaftr", "config", verb, &self.name]).args(args).output().unwrap();
        assert!(!out.status.success(), "config {verb} {args:?} was accepted: {}", String::from_utf8_lossy(&out.stdout));
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// SIGTERM; returns what it printed on standard output.
    fn stop(&mut self) -> String {
        let mut c = self.sluice.take().unwrap();
        // SAFETY: signalling our own child.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let t = Instant::now();
        let status = loop {
            if let Some(s) = c.try_wait().unwrap() {
                break s;
            }
            if t.elapsed() > Duration::from_secs(10) {
                let _ = c.kill();
                panic!("sluice lwaftr run did not stop on SIGTERM: {}", self.stderr());
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(status.success(), "sluice lwaftr run failed ({status}): {}", self.stderr());
        std::fs::read_to_string(self.dir.join("stdout")).unwrap()
    }

    /// A short iperf3 run from the B4 to the internet host (`reverse`:
    /// the data flows the other way); returns the JSON report.
    ///
    /// iperf3 (3.12) starts a UDP test with one datagram each way and never
    /// sends it again: when that exchange is lost the client waits until
    /// `timeout` ends it with no interval measured. Only that case runs
    /// once more; every other result is returned as it is.
    fn iperf(&self, udp: bool, reverse: bool, port: &str) -> serde_json::Value {
        let j = self.iperf_once(udp, reverse, port);
        let never_started = !j["error"].is_null() && j["intervals"].as_array().is_none_or(|a| a.is_empty());
        if udp && never_started {
            eprintln!("note: iperf3 UDP on port {port}: the opening exchange was lost ({}); once more", j["error"]);
            return self.iperf_once(udp, reverse, port);
        }
        j
    }

    fn iperf_once(&self, udp: bool, reverse: bool, port: &str) -> serde_json::Value {
        let mut server = Command::new("ip")
            .args(["netns", "exec", &self.inet, "iperf3", "-s", "-1", "-p", port, "-B", INET_IP])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(400));
        // A client that hangs (its end-of-test exchange lost) fails the test
        // instead of stalling it: `timeout` ends it with no JSON.
        let mut args = vec![
            "netns", "exec", &self.b4, "timeout", "-k", "5", "30", "iperf3", "-c", INET_IP, "-p", port, "-t", "2", "-J",
        ];
        if udp {
            args.extend(["-u", "-b", "20M", "-l", "1200"]);
        }
        if reverse {
            args.push("-R");
        }
        let out = Command::new("ip").args(&args).output().unwrap();
        let _ = server.kill();
        let _ = server.wait();
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
            panic!(
                "iperf3 {args:?} printed no JSON: {}{}\nlwaftr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                self.stderr()
            )
        })
    }
}

/// `name: value` lines.
fn parse_counters(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .filter_map(|(n, v)| Some((n.trim().to_string(), v.trim().parse().ok()?)))
        .collect()
}

fn check_iperf(net: &Net, j: &serde_json::Value, what: &str) {
    // On failure: what each interval carried, and every nonzero counter.
    let detail = || {
        let intervals: Vec<String> = j["intervals"]
            .as_array()
            .map(|a| a.iter().map(|i| format!("{}B/{}rtx", i["sum"]["bytes"], i["sum"]["retransmits"])).collect())
            .unwrap_or_default();
        let counters: Vec<(String, u64)> = net.query().into_iter().filter(|(_, v)| *v != 0).collect();
        let run = |args: &[&str]| Command::new("ip").args(args).output().map(|o| o.stdout).unwrap_or_default();
        // The relay's raw socket: its drops column counts what did not fit its buffer.
        let raw6 = run(&["netns", "exec", &net.b4, "cat", "/proc/net/raw6"]);
        // Where else a packet may go missing on the B4: its links' drop
        // counts (the relay's TUN device included) and the kernel's
        // nonzero drop, discard and error counters.
        let links = run(&["-n", &net.b4, "-s", "link"]);
        let kernel = run(&["netns", "exec", &net.b4, "nstat", "-asz"]);
        let kernel: Vec<String> = String::from_utf8_lossy(&kernel)
            .lines()
            .filter(|l| {
                let lower = l.to_lowercase();
                ["drop", "discard", "err", "fail", "invalid", "retrans"].iter().any(|w| lower.contains(w))
                    && l.split_whitespace().nth(1).is_some_and(|v| v != "0")
            })
            .map(str::to_string)
            .collect();
        format!(
            "intervals {intervals:?}\ncounters {counters:?}\nB4's raw IPv6 sockets:\n{}\nB4's links:\n{}\nB4's kernel counters:\n{}\nlwaftr: {}",
            String::from_utf8_lossy(&raw6),
            String::from_utf8_lossy(&links),
            kernel.join("\n"),
            net.stderr()
        )
    };
    assert!(j["error"].is_null(), "iperf3 {what}: {}\n{}", j["error"], detail());
    let end = &j["end"];
    if end["sum"]["lost_percent"].is_number() && end["sum_received"].is_null() {
        // UDP (older layout): the receiver's view.
        let packets = end["sum"]["packets"].as_u64().unwrap_or(0);
        let lost = end["sum"]["lost_packets"].as_u64().unwrap_or(packets);
        assert!(packets > 100 && lost * 2 < packets, "iperf3 {what}: {lost} of {packets} datagrams lost\n{}", detail());
        return;
    }
    let bytes = end["sum_received"]["bytes"].as_u64().unwrap_or(0);
    assert!(bytes > 1_000_000, "iperf3 {what}: only {bytes} bytes arrived\n{}", detail());
    if let Some(lost) = end["sum_received"]["lost_packets"].as_u64() {
        let packets = end["sum_received"]["packets"].as_u64().unwrap_or(0);
        assert!(packets > 100 && lost * 2 < packets, "iperf3 {what}: {lost} of {packets} datagrams lost\n{}", detail());
    }
}

#[test]
fn lwaftr_between_a_kernel_b4_behind_nat_and_an_internet_host() {
    b4_and_internet_through(Net::new(false, 1));
}

#[test]
fn lwaftr_on_af_xdp_ports_between_a_b4_and_an_internet_host() {
    b4_and_internet_through(Net::with_backend(false, 1, true));
}

#[test]
fn lwaftr_on_a_stick_with_two_workers_between_a_b4_and_an_internet_host() {
    b4_and_internet_through(Net::new(true, 2));
}

fn b4_and_internet_through(mut net: Net) {
    net.start();

    // The lwAFTR's own addresses answer ping, from each side.
    assert_eq!(ping_from(&net.inet, AFTR_V4_IP, 3, "0.2"), 3, "ping to the lwAFTR's IPv4 address\n{}", net.stderr());
    assert_eq!(ping_from(&net.b4, AFTR_V6_IP, 3, "0.2"), 3, "ping6 to the lwAFTR's IPv6 address\n{}", net.stderr());

    // UDP and TCP, both ways, through the B4's NAT and the softwire.
    check_iperf(&net, &net.iperf(false, false, "5201"), "TCP B4 -> internet");
    check_iperf(&net, &net.iperf(false, true, "5202"), "TCP internet -> B4");
    check_iperf(&net, &net.iperf(true, false, "5203"), "UDP B4 -> internet");
    check_iperf(&net, &net.iperf(true, true, "5204"), "UDP internet -> B4");
    let c = net.query();
    let get = |n: &str| c.iter().find(|(k, _)| k == n).map_or(0, |(_, v)| *v);
    assert!(get("in-ipv6-packets") > 1000 && get("out-ipv4-packets") > 1000, "decapsulation counters: {c:?}");
    assert!(get("in-ipv4-packets") > 1000 && get("out-ipv6-packets") > 1000, "encapsulation counters: {c:?}");
    assert!(get("in-icmpv4-echo-packets") >= 3 && get("in-icmpv6-echo-packets") >= 3, "echo counters: {c:?}");

    // A flow from the shared address but outside the port set (source
    // port 5000: PSID 4) is dropped and counted.
    let before = net.counter("drop-no-source-softwire-ipv6-packets");
    let send = |sport: u16| {
        sh(&[
            "ip",
            "netns",
            "exec",
            &net.b4,
            "python3",
            "-c",
            &format!(
                "import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.bind(('{PUBLIC}',{sport}))\n\
                 for _ in range(5): s.sendto(b'outside the port set',('{INET_IP}',9))\n"
            ),
        ]);
    };
    send(5000);
    let t = Instant::now();
    while net.counter("drop-no-source-softwire-ipv6-packets") < before + 5 {
        assert!(t.elapsed() < Duration::from_secs(5), "the out-of-set flow was not counted: {:?}", net.query());
        std::thread::sleep(Duration::from_millis(100));
    }

    // query's substring filter and --list-all.
    let q = |extra: &[&str]| {
        let out = Command::new(SLUICE).args(["lwaftr", "query", &net.name]).args(extra).output().unwrap();
        assert!(out.status.success(), "query {extra:?}: {}", String::from_utf8_lossy(&out.stderr));
        parse_counters(&String::from_utf8_lossy(&out.stdout))
    };
    let only = q(&["no-source"]);
    assert!(!only.is_empty() && only.iter().all(|(n, _)| n.contains("no-source")), "query no-source: {only:?}");
    let all = q(&["--list-all"]);
    assert!(all.len() > 60 && all.iter().any(|(_, v)| *v == 0), "query --list-all: {all:?}");

    // The configuration and the state by Snabb's paths.
    let entry = format!("/softwire-config/binding-table/softwire[ipv4={PUBLIC}][psid=1]");
    assert_eq!(net.config("get", &[&format!("{entry}/b4-ipv6")]).trim(), B4_IP);
    let state = net.config("get-state", &["-f", "xpath", "/softwire-state"]);
    let in_v6 = state
        .lines()
        .find_map(|l| l.strip_prefix("/softwire-state/in-ipv6-packets "))
        .and_then(|v| v.trim().parse::<u64>().ok());
    assert!(in_v6.is_some_and(|n| n > 1000), "get-state: {state}");
    assert!(state.contains("/softwire-state/discontinuity-time "), "get-state: {state}");

    // Softwires change while running: without its softwire the B4's
    // traffic is dropped; added back, it flows again.
    net.config("remove", &[&entry]);
    let before = net.counter("drop-no-source-softwire-ipv6-packets");
    send(1500);
    let t = Instant::now();
    while net.counter("drop-no-source-softwire-ipv6-packets") < before + 5 {
        assert!(t.elapsed() < Duration::from_secs(5), "traffic of a removed softwire went on: {:?}", net.query());
        std::thread::sleep(Duration::from_millis(100));
    }
    let sw =
        format!("{{ ipv4 {PUBLIC}; psid 1; b4-ipv6 {B4_IP}; br-address {AFTR_V6_IP}; port-set {{ psid-length 6; }} }}");
    let table = "/softwire-config/binding-table/softwire";
    net.config("add", &[table, &sw]);
    // Updated in place: another B4 address drops the B4's traffic, its own lets it through again.
    net.config("set", &[&format!("{entry}/b4-ipv6"), "fc00:dead::1"]);
    let before = net.counter("drop-no-source-softwire-ipv6-packets");
    send(1500);
    let t = Instant::now();
    while net.counter("drop-no-source-softwire-ipv6-packets") < before + 5 {
        assert!(t.elapsed() < Duration::from_secs(5), "traffic from the old B4 address went on: {:?}", net.query());
        std::thread::sleep(Duration::from_millis(100));
    }
    net.config("set", &[&format!("{entry}/b4-ipv6"), B4_IP]);
    // Refused changes change nothing: a port set that differs from the
    // address's other softwires, a softwire that does not exist, bad text,
    // a schema not served.
    let other = sw.replace("psid 1;", "psid 2;").replace("psid-length 6", "psid-length 4");
    assert!(net.config_refused("add", &[table, &other]).contains("differs from that of softwire"));
    let absent = format!("/softwire-config/binding-table/softwire[ipv4={PUBLIC}][psid=2]");
    assert!(net.config_refused("remove", &[&absent]).contains("no entry matching the query"));
    assert!(net.config_refused("add", &[table, "{ ipv4 1.2.3; }"]).contains("1.2.3"));
    assert!(net.config_refused("get", &["-s", "ietf-softwire-br", "/"]).contains("unsupported schema"));
    assert_eq!(net.config("get", &[&format!("{entry}/b4-ipv6")]).trim(), B4_IP, "a refused change changed the table");
    check_iperf(&net, &net.iperf(false, false, "5205"), "TCP B4 -> internet after the softwire came back");

    // Every IPv4 header the lwAFTR passed on (its TTL decremented, the
    // checksum patched) reached the hosts with a valid checksum.
    for ns in [&net.b4, &net.inet] {
        let out = Command::new("ip").args(["netns", "exec", ns, "nstat", "-asz", "IpExtInCsumErrors"]).output();
        let text = out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
        let errors = text
            .lines()
            .find_map(|l| l.strip_prefix("IpExtInCsumErrors"))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok());
        assert_eq!(errors, Some(0), "IPv4 checksum errors in {ns}: {text}");
    }

    // SIGTERM prints the counters.
    let out = net.stop();
    eprintln!("counters on SIGTERM:\n{out}\n{}", net.stderr());
    let c = parse_counters(&out);
    assert!(
        c.iter().any(|(n, v)| n == "drop-no-source-softwire-ipv6-packets" && *v >= 10),
        "SIGTERM output lacks the drops: {out}"
    );
    assert!(c.iter().any(|(n, v)| n == "out-ipv6-packets" && *v > 1000), "SIGTERM output: {out}");
    if net.stick {
        // The next hops were addresses: resolved by the plane's own ARP and NDP requests.
        for n in ["out-arp-request-packets", "in-arp-reply-packets", "out-ndp-ns-packets", "in-ndp-na-packets"] {
            assert!(c.iter().any(|(k, v)| k == n && *v > 0), "{n} missing on SIGTERM: {out}");
        }
    }
}

/// `sluice lwaftr loadtest` against `sluice lwaftr run` on veth pairs, at a
/// low rate with the corpus's benchmark pcaps: every frame comes back
/// translated on the other side, and the figures are printed.
#[test]
fn loadtest_drives_a_running_lwaftr_both_ways() {
    require_tools();
    let bench = common::shared().join("lwaftr/bench");
    let id = std::process::id();
    let (gen, aftr) = (format!("lwt{id}-gen"), format!("lwt{id}-laftr"));
    let dir = std::env::temp_dir().join(format!("sluice-lwaftr-loadtest-{id}"));
    std::fs::create_dir_all(&dir).unwrap();
    struct Cleanup(Vec<String>, PathBuf, Option<Child>);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            if let Some(mut c) = self.2.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
            for n in &self.0 {
                let _ = Command::new("ip").args(["netns", "del", n]).stderr(Stdio::null()).status();
            }
            let _ = std::fs::remove_dir_all(&self.1);
        }
    }
    let mut guard = Cleanup(vec![gen.clone(), aftr.clone()], dir.clone(), None);
    for n in [&gen, &aftr] {
        sh(&["ip", "netns", "add", n]);
        sh(&["ip", "-n", n, "link", "set", "lo", "up"]);
        sh(&["ip", "netns", "exec", n, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"]);
        sh(&["ip", "netns", "exec", n, "sysctl", "-q", "-w", "net.ipv6.conf.default.disable_ipv6=1"]);
    }
    // The lwAFTR's ends carry the configuration's MACs: the pcaps are addressed to them.
    for (g, a, mac) in [("gen-v4", "aftr-v4", "12:12:12:12:12:12"), ("gen-v6", "aftr-v6", "22:22:22:22:22:22")] {
        sh(&["ip", "link", "add", g, "netns", &gen, "type", "veth", "peer", "name", a, "netns", &aftr, "address", mac]);
        offloads_off(&gen, g);
        offloads_off(&aftr, a);
        sh(&["ip", "-n", &gen, "link", "set", g, "up"]);
        sh(&["ip", "-n", &aftr, "link", "set", a, "up"]);
    }
    let err = dir.join("stderr");
    let child = Command::new("ip")
        .args(["netns", "exec", &aftr, SLUICE, "lwaftr", "run", "--conf"])
        .arg(bench.join("lwaftr.conf"))
        .args(["--v4", "aftr-v4", "--v6", "aftr-v6"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    guard.2 = Some(child);
    let t = Instant::now();
    while !std::fs::read_to_string(&err).unwrap_or_default().contains("running with") {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "lwaftr run did not start: {}",
            std::fs::read_to_string(&err).unwrap()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = Command::new("ip")
        .args(["netns", "exec", &gen, SLUICE, "lwaftr", "loadtest"])
        .arg(bench.join("ipv4-0550.pcap"))
        .arg(bench.join("ipv6-0550.pcap"))
        .args(["--v4", "gen-v4", "--v6", "gen-v6", "--rate", "0.02", "-D", "2"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "loadtest failed: {text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("Applying 0.020000 Gbps"), "{text}");
    assert_eq!(text.lines().filter(|l| l.starts_with("Time ")).count(), 2, "{text}");
    let totals: Vec<&str> = text.lines().skip_while(|l| !l.starts_with("Total")).skip(1).collect();
    assert_eq!(totals.len(), 2, "{text}");
    for l in totals {
        // "TX n packets ... RX m packets ...": about 4.5 kpps offered; what comes back is what went in.
        let num = |key: &str| -> u64 {
            l.split(key).nth(1).and_then(|r| r.split_whitespace().next()).and_then(|n| n.parse().ok()).unwrap()
        };
        let (tx, rx) = (num("TX "), num("RX "));
        assert!(tx > 5000, "{l}");
        assert!(rx * 100 >= tx * 95, "more than 5% lost at a low rate: {l}");
    }
}
