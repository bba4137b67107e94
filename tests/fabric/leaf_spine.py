#!/usr/bin/env python3
"""A 2x2 leaf-spine fabric of Sluice switches under a controller written
on finsy's API: four IPv6 hosts, all-pairs ping6, a port taken down by
gNMI and the traffic moving to the other spine.

    leaf_spine.py --sluice PATH --program DIR [--timeout S]

Builds everything in network namespaces it makes and removes: one for the
four switches (each its own `sluice simple_switch_grpc` process on its own
P4Runtime port, on the namespace's loopback, where the controller talks
to them) and one per host. Runs in finsy's venv ($REPO/.venv/finsy).

The controller (class Fabric, below) knows only each switch's address,
role (leaf or spine), the leaves' subnets and a MAC per switch. It learns
the rest:
  * ports from gNMI (finsy's Switch reads them at connection; oper-status
    followed by a Subscribe ON_CHANGE of its own);
  * links by LLDP: it sends an LLDP frame (PacketOut) out of every port
    every second; a switch punts LLDP (an ACL entry) and the PacketIn
    says which port of which switch heard whom;
  * hosts by NDP: neighbour solicitations are punted; the controller
    learns the sender (switch, port, MAC, address) and answers with a
    neighbour advertisement carrying the switch's MAC (every address is
    reached through the switch, which routes);
  * routes: on a leaf, a /128 per local host, and per other leaf's subnet
    an action-profile group (ECMP) with one member per uplink to a spine
    that reaches that leaf; on a spine, each leaf's subnet through the
    port to that leaf. Recomputed on every change of links or ports.

Proves: all twelve host pairs ping, their echoes spread over both spines
by the leaves' ECMP groups; leaf1's port toward spine1 set down by
gNMI Set (config/enabled false) is reported DOWN to the controller's
Subscribe ON_CHANGE, the controller takes spine1 out of both leaves'
groups, all pairs ping again, and spine1 forwards none of that traffic
(its ports' out-unicast-pkts counters, read by gNMI, do not move while
spine2's do: LLDP frames are multicast).
"""
import argparse
import asyncio
import ctypes
import ipaddress
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

TAG = f"ls{os.getpid() % 100000}"
SW_NS = f"{TAG}-sw"
CPU_PORT = 255
LLDP_MAC = bytes.fromhex("0180c200000e")

# name: (role, P4Runtime port, subnet for leaves, MAC)
SWITCHES = {
    "leaf1": ("leaf", 50001, "2001:db8:1::/64", "02:aa:00:00:00:01"),
    "leaf2": ("leaf", 50002, "2001:db8:2::/64", "02:aa:00:00:00:02"),
    "spine1": ("spine", 50003, None, "02:aa:00:00:00:03"),
    "spine2": ("spine", 50004, None, "02:aa:00:00:00:04"),
}
# (switch, port, interface) <-> (switch, port, interface)
LINKS = [
    (("leaf1", 3, "l1s1"), ("spine1", 1, "s1l1")),
    (("leaf1", 4, "l1s2"), ("spine2", 1, "s2l1")),
    (("leaf2", 3, "l2s1"), ("spine1", 2, "s1l2")),
    (("leaf2", 4, "l2s2"), ("spine2", 2, "s2l2")),
]
# host: (leaf, leaf port, leaf-side interface, address)
HOSTS = {
    "h1": ("leaf1", 1, "l1h1", "2001:db8:1::1"),
    "h2": ("leaf1", 2, "l1h2", "2001:db8:1::2"),
    "h3": ("leaf2", 1, "l2h3", "2001:db8:2::3"),
    "h4": ("leaf2", 2, "l2h4", "2001:db8:2::4"),
}


def log(msg):
    print(f"[leaf_spine] {msg}", flush=True)


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def sh(*cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    check(r.returncode == 0, f"{' '.join(cmd)}: {r.stderr.strip()}")
    return r.stdout


def enter_netns(name):
    """Moves this process (its main thread, and every thread it starts
    after) into network namespace `name`, where the switches listen."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/var/run/netns/{name}", os.O_RDONLY)
    try:
        check(libc.setns(fd, 0x40000000) == 0, f"setns {name}: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)


def mac_bytes(text):
    return bytes.fromhex(text.replace(":", ""))


def checksum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


# ---------------------------------------------------------------------------
# The lab: namespaces, links, switches, hosts


class Lab:
    def __init__(self, sluice, program_dir):
        self.sluice = sluice
        self.program_dir = program_dir
        self.procs = []
        self.dir = Path(f"/tmp/{TAG}")
        self.namespaces = [SW_NS] + [f"{TAG}-{h}" for h in HOSTS]

    def up(self):
        self.dir.mkdir(exist_ok=True)
        for ns in self.namespaces:
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        for (a_sw, _, a_if), (b_sw, _, b_if) in LINKS:
            sh("ip", "-n", SW_NS, "link", "add", a_if, "type", "veth", "peer", "name", b_if)
        for h, (_, _, sw_if, addr) in HOSTS.items():
            ns = f"{TAG}-{h}"
            sh("ip", "-n", SW_NS, "link", "add", sw_if, "type", "veth", "peer", "name", "eth0", "netns", ns)
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.eth0.accept_ra=0")
            sh("ip", "-n", ns, "addr", "add", f"{addr}/64", "dev", "eth0", "nodad")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")
            gw = str(ipaddress.ip_network(SWITCHES[HOSTS[h][0]][2])[0xFF])
            sh("ip", "-n", ns, "-6", "route", "add", "default", "via", gw, "dev", "eth0")
        # The switches' interfaces send nothing of their own.
        sh("ip", "netns", "exec", SW_NS, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        sh("ip", "netns", "exec", SW_NS, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1")
        for line in sh("ip", "-n", SW_NS, "-o", "link", "show").splitlines():
            name = line.split(":")[1].strip().split("@")[0]
            if name != "lo":
                sh("ip", "-n", SW_NS, "link", "set", name, "up")
        for i, (name, (role, port, _, _)) in enumerate(SWITCHES.items()):
            ifs = [(p, i_) for (sw, p, i_), _ in LINKS if sw == name] + [(p, i_) for _, (sw, p, i_) in LINKS if sw == name]
            ifs += [(p, i_) for (sw, p, i_, _) in HOSTS.values() if sw == name]
            args = [a for p, i_ in sorted(ifs) for a in ("-i", f"{p}@{i_}")]
            logf = open(self.dir / f"{name}.log", "w")
            self.procs.append(subprocess.Popen(
                ["ip", "netns", "exec", SW_NS, self.sluice, "simple_switch_grpc", "--no-p4", *args,
                 "--thrift-port", str(9190 + i), "--", "--grpc-server-addr", f"127.0.0.1:{port}",
                 "--cpu-port", str(CPU_PORT)],
                stdout=subprocess.DEVNULL, stderr=logf))
        deadline = time.monotonic() + 60
        for name in SWITCHES:
            while "forwarding on" not in (self.dir / f"{name}.log").read_text():
                check(time.monotonic() < deadline, f"{name} did not start:\n{(self.dir / f'{name}.log').read_text()}")
                time.sleep(0.1)

    def down(self):
        for p in self.procs:
            p.kill()
            p.wait()
        for ns in self.namespaces:
            subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)
        shutil.rmtree(self.dir, ignore_errors=True)

    def ping(self, src, dst, tries):
        """True once one echo comes back (each try waits up to 5 s)."""
        ns = f"{TAG}-{src}"
        for _ in range(tries):
            r = subprocess.run(["ip", "netns", "exec", ns, "ping", "-6", "-c", "1", "-W", "5", HOSTS[dst][3]],
                               capture_output=True, text=True)
            if r.returncode == 0:
                return True
        return False


# ---------------------------------------------------------------------------
# Frames the controller builds and reads


def lldp_frame(src_mac, switch, port):
    def tlv(t, value):
        return ((t << 9) | len(value)).to_bytes(2, "big") + value
    body = tlv(1, b"\x07" + switch.encode()) + tlv(2, b"\x07" + str(port).encode()) + tlv(3, (120).to_bytes(2, "big"))
    return LLDP_MAC + src_mac + b"\x88\xcc" + body + b"\0\0"


def parse_lldp(frame):
    """(switch, port) an LLDP frame names, or None."""
    i, chassis, port = 14, None, None
    while i + 2 <= len(frame):
        head = int.from_bytes(frame[i:i + 2], "big")
        t, n = head >> 9, head & 0x1FF
        value = frame[i + 2:i + 2 + n]
        if t == 0:
            break
        if t == 1 and value[:1] == b"\x07":
            chassis = value[1:].decode(errors="replace")
        if t == 2 and value[:1] == b"\x07":
            port = int(value[1:])
        i += 2 + n
    return (chassis, port) if chassis is not None and port is not None else None


def neighbour_advert(router_mac, ns_frame):
    """The advertisement answering a neighbour solicitation, or None."""
    if len(ns_frame) < 14 + 40 + 24 or ns_frame[12:14] != b"\x86\xdd" or ns_frame[20] != 58 or ns_frame[54] != 135:
        return None
    host_mac = ns_frame[6:12]
    host_ip = ns_frame[22:38]
    target = ns_frame[62:78]
    if host_ip == bytes(16):
        return None  # duplicate address detection: nobody to answer
    icmp = bytearray(bytes([136, 0, 0, 0]) + (0x60000000).to_bytes(4, "big") + target + bytes([2, 1]) + router_mac)
    pseudo = target + host_ip + len(icmp).to_bytes(4, "big") + b"\0\0\0\x3a"
    icmp[2:4] = checksum(pseudo + bytes(icmp)).to_bytes(2, "big")
    ip6 = b"\x60\0\0\0" + len(icmp).to_bytes(2, "big") + bytes([58, 255]) + target + host_ip
    return (host_mac, host_ip), host_mac + router_mac + b"\x86\xdd" + ip6 + bytes(icmp)


# ---------------------------------------------------------------------------
# The controller


class Fabric:
    def __init__(self, fy, program_dir):
        self.fy = fy
        self.switches = {}
        self.links = {}  # (switch, port) -> (switch, port), as LLDP found them
        self.oper = {}  # (switch, port) -> "UP" / "DOWN", from gNMI
        self.hosts = {}  # address -> (switch, port, mac)
        self.down_reports = []  # (switch, port) reported DOWN by ON_CHANGE
        self.written = {}  # switch -> {key: entity} installed
        self.changed = asyncio.Event()
        # grpc's asyncio streams take one write at a time: packet-outs of
        # one switch (LLDP, NDP answers) go out one after the other.
        self.out_lock = {name: asyncio.Lock() for name in SWITCHES}
        opts = dict(p4info=program_dir / "fabric.p4info.txtpb", p4blob=program_dir / "fabric.json",
                    p4force=True, device_id=0)
        for name, (_, port, _, _) in SWITCHES.items():
            self.switches[name] = fy.Switch(
                name, f"127.0.0.1:{port}",
                fy.SwitchOptions(**opts, ready_handler=self.ready))

    async def ready(self, sw):
        fy = self.fy
        name = sw.name
        log(f"{name}: ready, ports from gNMI: {[(p.name, p.id) for p in sw.ports]}")
        self.written[name] = {}
        await sw.insert([
            fy.P4TableEntry("acl", match=fy.Match(ether_type=0x88CC), priority=100, action=fy.Action("punt")),
            fy.P4TableEntry("acl", match=fy.Match(ether_type=0x86DD, next_hdr=58, type=135),
                            priority=90, action=fy.Action("punt")),
        ])
        sw.create_task(self.listen(sw))
        sw.create_task(self.discover(sw))
        sw.create_task(self.follow_ports(sw))

    async def packet_out(self, sw, frame, port):
        async with self.out_lock[sw.name]:
            await sw.write([self.fy.P4PacketOut(frame, egress_port=port, _pad=0)])

    async def discover(self, sw):
        src = mac_bytes(SWITCHES[sw.name][3])
        while True:
            for p in sw.ports:
                if p.id != CPU_PORT:
                    await self.packet_out(sw, lldp_frame(src, sw.name, p.id), p.id)
            await asyncio.sleep(1)

    async def follow_ports(self, sw):
        fy = self.fy
        sub = sw.gnmi_client.subscribe()
        sub.on_change(*(fy.GNMIPath("interfaces/interface/state/oper-status").set("interface", name=p.name)
                        for p in sw.ports))
        ids = {p.name: p.id for p in sw.ports}
        async for u in sub.synchronize():
            self.oper[(sw.name, ids[u.path["name"]])] = u.value
        async for u in sub.updates():
            key = (sw.name, ids[u.path["name"]])
            log(f"gNMI ON_CHANGE: {sw.name} port {key[1]} ({u.path['name']}) {u.value}")
            if u.value == "DOWN":
                self.down_reports.append(key)
            self.oper[key] = u.value
            self.changed.set()

    async def listen(self, sw):
        router_mac = mac_bytes(SWITCHES[sw.name][3])
        async for pkt in sw.read_packets():
            port = pkt["ingress_port"]
            frame = pkt.payload
            if frame[12:14] == b"\x88\xcc":
                peer = parse_lldp(frame)
                if peer and self.links.get((sw.name, port)) != peer:
                    self.links[(sw.name, port)] = peer
                    log(f"link {sw.name}:{port} -> {peer[0]}:{peer[1]}")
                    self.changed.set()
                continue
            answer = neighbour_advert(router_mac, frame)
            if answer is None:
                continue
            (host_mac, host_ip), na = answer
            addr = str(ipaddress.IPv6Address(host_ip))
            if self.hosts.get(addr) != (sw.name, port, host_mac):
                self.hosts[addr] = (sw.name, port, host_mac)
                log(f"host {addr} at {sw.name}:{port}")
                self.changed.set()
            await self.packet_out(sw, na, port)

    def link_up(self, a, b):
        return self.links.get(a) == b and self.links.get(b) == a and \
            self.oper.get(a) == "UP" and self.oper.get(b) == "UP"

    def wanted(self, name):
        """The entities switch `name` should hold: {key: entity}, members first."""
        fy = self.fy
        role, _, subnet, mac = SWITCHES[name]
        out = {}

        def member(port, dmac):
            mid = port  # one member per port: the port's next hop is fixed
            out[("member", mid)] = fy.P4ActionProfileMember(
                "ecmp_selector", member_id=mid,
                action=fy.Action("route", port=port, smac=mac, dmac=dmac))
            return mid

        if role == "leaf":
            for addr, (sw, port, hmac) in self.hosts.items():
                if sw == name:
                    mid = 100 + port
                    out[("member", mid)] = fy.P4ActionProfileMember(
                        "ecmp_selector", member_id=mid,
                        action=fy.Action("route", port=port, smac=mac, dmac=":".join(f"{b:02x}" for b in hmac)))
                    out[("route", addr + "/128")] = fy.P4TableEntry(
                        "routing_v6", match=fy.Match(dst_addr=addr + "/128"),
                        action=fy.P4IndirectAction(member_id=mid))
            for other, (orole, _, osubnet, _) in SWITCHES.items():
                if orole != "leaf" or other == name:
                    continue
                members = []
                for (a, b) in self.links.items():
                    if a[0] != name or not self.link_up(a, b):
                        continue
                    spine = b[0]
                    reaches = any(x[0] == spine and y[0] == other and self.link_up(x, y) for x, y in self.links.items())
                    if reaches:
                        members.append(member(a[1], SWITCHES[spine][3]))
                gid = 1000 + int(other[-1])
                out[("group", gid)] = fy.P4ActionProfileGroup(
                    "ecmp_selector", group_id=gid, max_size=8,
                    members=[fy.P4Member(m, weight=1) for m in sorted(members)])
                out[("route", osubnet)] = fy.P4TableEntry(
                    "routing_v6", match=fy.Match(dst_addr=osubnet), action=fy.P4IndirectAction(group_id=gid))
        else:
            for (a, b) in self.links.items():
                if a[0] == name and self.link_up(a, b) and SWITCHES[b[0]][0] == "leaf":
                    mid = member(a[1], SWITCHES[b[0]][3])
                    out[("route", SWITCHES[b[0]][2])] = fy.P4TableEntry(
                        "routing_v6", match=fy.Match(dst_addr=SWITCHES[b[0]][2]),
                        action=fy.P4IndirectAction(member_id=mid))
        return out

    async def program(self, name):
        sw = self.switches[name]
        have = self.written.get(name)
        if have is None or not sw.is_primary:
            return
        want = self.wanted(name)
        order = {"member": 0, "group": 1, "route": 2}
        # What is new or changed first (members, then groups, then routes),
        # then what is gone (routes, then groups, then members): nothing is
        # ever referred to before it exists or after it is deleted.
        for k in sorted(want, key=lambda k: order[k[0]]):
            if k not in have:
                await sw.insert([want[k]])
            elif have[k] != want[k]:
                await sw.modify([want[k]])
            have[k] = want[k]
        for k in sorted([k for k in have if k not in want], key=lambda k: -order[k[0]]):
            await sw.delete([have.pop(k)])

    async def run(self, stop):
        async with self.fy.Controller(self.switches.values()):
            while not stop.is_set():
                try:
                    await asyncio.wait_for(self.changed.wait(), 0.5)
                except asyncio.TimeoutError:
                    continue
                self.changed.clear()
                for name in SWITCHES:
                    await self.program(name)


# ---------------------------------------------------------------------------
# The test


async def counters(fy, port, names):
    """out-unicast-pkts of the named interfaces of the switch on P4Runtime port `port` (gNMI Get):
    the hosts' traffic, not the controller's LLDP frames (multicast)."""
    async with fy.GNMIClient(f"127.0.0.1:{port}") as client:
        out = {}
        for u in await client.get(fy.GNMIPath("interfaces/interface[name=*]/state/counters")):
            if u.path["name"] in names and u.path.last in ("out-unicast-pkts", "out-pkts", "out-multicast-pkts"):
                out[(u.path["name"], u.path.last)] = u.value
        log(f"counters of 127.0.0.1:{port}: {out}")
        return {k[0]: v for k, v in out.items() if k[1] == "out-unicast-pkts"}


async def scenario(args, lab):
    import finsy as fy

    fabric = Fabric(fy, Path(args.program))
    stop = asyncio.Event()
    ctl = asyncio.create_task(fabric.run(stop))
    timeout = args.timeout

    async def until(what, cond):
        deadline = time.monotonic() + timeout
        while not cond():
            check(not ctl.done(), f"the controller stopped: {ctl.exception() if ctl.done() else ''}")
            check(time.monotonic() < deadline, f"{what}: not within {timeout:g} s")
            await asyncio.sleep(0.2)

    await until("8 link ends discovered by LLDP", lambda: len(fabric.links) == 8)
    log("topology discovered")
    # Each host asks for its gateway (a neighbour solicitation the
    # controller learns it from) until the controller knows all four.
    deadline = time.monotonic() + timeout
    while len(fabric.hosts) < len(HOSTS):
        check(time.monotonic() < deadline, f"hosts learned: {sorted(fabric.hosts)}")
        for h, (leaf, _, _, _) in HOSTS.items():
            gw = str(ipaddress.ip_network(SWITCHES[leaf][2])[0xFF])
            await asyncio.to_thread(subprocess.run, ["ip", "netns", "exec", f"{TAG}-{h}", "ping", "-6", "-c", "1",
                                                     "-W", "1", gw], capture_output=True)
    log("hosts learned")
    pairs = [(a, b) for a in HOSTS for b in HOSTS if a != b]

    async def all_pairs(what):
        bad = [p for p in pairs if not await asyncio.to_thread(lab.ping, *p, 6)]
        check(not bad, f"{what}: no ping6 between {bad}")
        log(f"{what}: all {len(pairs)} pairs ping6")

    spine_ports = {"spine1": (SWITCHES["spine1"][1], ["s1l1", "s1l2"]),
                   "spine2": (SWITCHES["spine2"][1], ["s2l1", "s2l2"])}

    async def spine_counts():
        return {s: sum((await counters(fy, p, n)).values()) for s, (p, n) in spine_ports.items()}

    first = await spine_counts()
    await all_pairs("before")
    second = await spine_counts()
    spread = {s: second[s] - first[s] for s in spine_ports}
    log(f"frames the spines sent during the first round: {spread}")
    # Each echo is its own flow (Linux gives each socket a flow label):
    # the groups spread them over both spines.
    check(all(n > 0 for n in spread.values()), f"ECMP used one spine only: {spread}")

    log("leaf1's port 3 (to spine1) set down by gNMI")
    async with fy.GNMIClient(f"127.0.0.1:{SWITCHES['leaf1'][1]}") as client:
        await client.set(update=[(fy.GNMIPath("interfaces/interface[name=l1s1]/config/enabled"), False)])
    await until("the DOWN reported by Subscribe ON_CHANGE", lambda: ("leaf1", 3) in fabric.down_reports)
    await until("spine1 out of leaf1's and leaf2's groups", lambda: all(
        [m.member_id for m in fabric.written.get(leaf, {}).get(("group", gid)).members] == [4]
        if fabric.written.get(leaf, {}).get(("group", gid)) else False
        for leaf, gid in (("leaf1", 1002), ("leaf2", 1001))))
    before = await spine_counts()
    await all_pairs("after")
    after = await spine_counts()
    moved = {s: after[s] - before[s] for s in spine_ports}
    log(f"frames the spines sent during the second round: {moved}")
    check(moved["spine1"] == 0, f"spine1 still forwards: {moved}")
    check(moved["spine2"] >= 2 * 8, f"spine2 did not carry the traffic between leaves: {moved}")

    stop.set()
    await ctl


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sluice", required=True)
    p.add_argument("--program", required=True, help="the folder holding fabric.json and fabric.p4info.txtpb")
    p.add_argument("--timeout", type=float, default=60.0)
    args = p.parse_args()
    logging.basicConfig(level=os.environ.get("LEAF_SPINE_LOG", "WARNING"))
    lab = Lab(args.sluice, args.program)
    try:
        lab.up()
        # The controller talks to the switches on their namespace's loopback.
        enter_netns(SW_NS)
        asyncio.run(scenario(args, lab))
        print("PASS leaf_spine.py", flush=True)
    except BaseException as e:
        for name in SWITCHES:
            f = lab.dir / f"{name}.log"
            if f.exists():
                print(f"--- {name} log (tail)\n" + "\n".join(f.read_text().splitlines()[-20:]), file=sys.stderr)
        print(f"FAIL leaf_spine.py: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        raise
    finally:
        lab.down()


if __name__ == "__main__":
    main()
