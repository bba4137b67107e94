#!/usr/bin/env python3
"""A stalled P4Runtime primary under a flood of PacketIns (edge.p4's punt).

Proves, against a live server with ports 1 and 2 wired to --if1 / --if2:
  * A primary whose stream never reads is sent PacketIns for every UDP 5000
    frame punted to the CPU port, sent on port 1 as fast as this script can
    for --seconds (default 10): the server drops what does not fit the
    stream's bounded queue, counts it, and reports it in its log.
  * Meanwhile another client (a backup on its own stream) reads table
    entries, each answer within 2 s, and frames routed from port 1 to port 2
    keep arriving.
  * The switch's resident memory grows by less than 64 MiB over the flood.
"""
import os
import queue
import time

import common as c
import shell_edge as edge


def switch_pid():
    """Pid of the sluice process serving in this network namespace."""
    mine = os.readlink("/proc/self/ns/net")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
            if b"simple_switch_grpc" in cmd and os.readlink(f"/proc/{pid}/ns/net") == mine:
                return int(pid)
        except OSError:
            continue
    raise AssertionError("no simple_switch_grpc process in this namespace")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def main(args):
    import grpc
    from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
    edge.sh = sh
    p4info, bmv2 = c.example(args, "edge")
    h1, h2 = c.open_ports(args)
    base = c.election_base()

    c.step("push edge.p4: a route through the selector group, punt UDP 5000")
    sh.setup(device_id=args.device_id, grpc_addr=args.addr, election_id=(0, base + 20),
             config=sh.FwdPipeConfig(p4info, bmv2), verbose=False)
    for m in (edge.member(1, edge.SRC1, c.mac_str(h2.mac)), edge.member(2, edge.SRC2, c.mac_str(h2.mac))):
        m.insert()
    sh.ActionProfileGroup("ecmp")(group_id=1).add(1).add(2).insert()
    edge.route_to_group().insert()
    edge.acl(**edge.PUNT_UDP_5000).insert()
    sh.teardown()

    c.step("a primary that never reads its stream, and a backup that works")
    channel = grpc.insecure_channel(args.addr)
    c.at_exit(channel.close)
    stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
    requests = queue.Queue()
    stalled = stub.StreamChannel(iter(requests.get, None))  # never iterated: nothing is read
    c.at_exit(stalled.cancel)
    arb = p4runtime_pb2.StreamMessageRequest()
    arb.arbitration.device_id = args.device_id
    c.set_uint128(arb.arbitration.election_id, base + 30)
    requests.put(arb)
    backup = c.Stream(stub, "backup")
    backup.arbitrate(args.device_id, base + 1)
    backup.expect("arbitration", args.timeout, "the backup's arbitration answer")
    info = c.p4info_from_file(p4info)
    read_acl = p4runtime_pb2.ReadRequest(device_id=args.device_id)
    read_acl.entities.add().table_entry.table_id = c.p4_id(info, "tables", "acl")

    pid = switch_pid()
    rss0 = rss_kib(pid)
    punt = c.udp_ipv4_frame(edge.ROUTER_MAC, h1.mac, "10.0.1.1", "10.0.2.2", 4321, 5000, b"flood" + b"#" * 40)
    c.step(f"{args.seconds:g} s of punted frames on port 1 (switch pid {pid}, RSS {rss0} KiB)")
    sent = reads = routed = 0
    end = time.monotonic() + args.seconds
    next_check = time.monotonic()
    while time.monotonic() < end:
        for _ in range(500):
            h1.send(punt)
        sent += 500
        if time.monotonic() >= next_check:
            next_check = time.monotonic() + 0.5
            t0 = time.monotonic()
            got = [e for r in stub.Read(read_acl, timeout=2) for e in r.entities]
            c.check(len(got) == 1, f"the backup's read of acl during the flood: {len(got)} entries")
            c.check(time.monotonic() - t0 < 2, "the backup's read took over 2 s")
            reads += 1
            mark = c.tag("routed")
            frame = c.udp_ipv4_frame(edge.ROUTER_MAC, h1.mac, "10.0.1.1", "10.0.2.2", 4321, 6000,
                                     mark + b"#" * 40)
            h1.send(frame)
            c.check(h2.receive(mark, 2.0) is not None, "a routed frame did not arrive on port 2 during the flood")
            routed += 1
    rss1 = rss_kib(pid)
    c.step(f"sent {sent} punted frames; {reads} reads and {routed} routed frames on the way; RSS {rss1} KiB")
    c.check(rss1 - rss0 < 64 * 1024, f"the switch grew by {rss1 - rss0} KiB during the flood")
    dropped = c.wait_for_drop_report(args.switch_log, "PacketIn", lambda n: n > 0, tries=30)
    c.check(dropped > 0, "the switch's log reports no PacketIn dropped toward the stalled primary")
    c.step(f"the switch reports {dropped} PacketIns dropped toward the stalled primary")


if __name__ == "__main__":
    _p = c.arg_parser(__doc__)
    _p.add_argument("--seconds", type=float, default=10.0, help="length of the flood")
    _p.add_argument("--switch-log", required=True, help="the switch's standard error, as a file")
    _args = _p.parse_args()
    c.reexec_with("p4runtime_sh", "SLUICE_PY", ".venv")
    import p4runtime_sh.shell as sh  # noqa: E402 - after argparse so --help needs no clients
    c.run(main, _args)
