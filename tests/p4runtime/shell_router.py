#!/usr/bin/env python3
"""router.p4 driven by p4runtime-shell: table writes and reads, forwarding, counters, PRE.

Proves, against a live server with ports 1 and 2 wired to --if1 / --if2:
  * SetForwardingPipelineConfig with P4Info + BMv2 JSON, and the P4Info read
    back by GetForwardingPipelineConfig (spec 'SetForwardingPipelineConfig RPC').
  * INSERT of LPM (IPv4 and IPv6) and exact entries; single-entry and wildcard
    Read return exactly what was written (spec 'TableEntry', 'Read RPC';
    read-write symmetry with canonical bytestrings, spec 'Bytestrings').
  * The data plane uses them: an IPv4 frame sent on if1 leaves on if2 with the
    next hop's MACs, TTL - 1 and a correct header checksum; IPv6 likewise with
    hop limit - 1; TTL 1 is dropped.
  * MODIFY changes forwarding (new source MAC); DELETE removes the entry from
    reads and the route falls back to the default drop.
  * The indexed counter port_rx counts packets and bytes per ingress port
    (spec 'CounterEntry'), single-index and wildcard reads.
  * MulticastGroupEntry and CloneSessionEntry insert / read / modify / delete
    (spec 'PacketReplicationEngineEntry') even though router.p4 never
    replicates.
  * A batch of 1000 failing updates (MODIFY of entries that do not exist):
    p4runtime-shell's write raises its P4RuntimeWriteException and prints
    the errors, index by index, the last one listed telling how many of the
    rest failed and with which code (spec 'Error Reporting Messages'; the
    whole status stays under the trailer size gRPC clients accept).
"""
import common as c

NH_SRC = "02:00:00:00:02:fe"      # the router's MAC towards port 2
NH_SRC_NEW = "02:00:00:00:02:fd"  # after the MODIFY
ROUTER_MAC = c.mac("02:00:00:00:01:fe")


def route(prefix, nexthop, table="ipv4_lpm", field="hdr.ipv4.dst_addr"):
    te = sh.TableEntry(table)(action="set_nexthop")
    te.match[field] = prefix
    te.action["id"] = str(nexthop)
    return te


def route_drop(prefix):
    te = sh.TableEntry("ipv4_lpm")(action="drop")
    te.match["hdr.ipv4.dst_addr"] = prefix
    return te


def nexthop(nh, port, src, dst):
    te = sh.TableEntry("nexthop")(action="forward")
    te.match["meta.nexthop"] = str(nh)
    te.action.set(port=str(port), src=src, dst=dst)
    return te


def canon(entry, canonical=False):
    """Serialized TableEntry, match fields in field-id order (their order is not significant).

    canonical=True first shortens the bytestrings the shell wrote padded: a
    read must return exactly that (spec 'Bytestrings').
    """
    msg = type(entry.msg())()
    msg.CopyFrom(entry.msg())
    if canonical:
        c.canonicalize(msg)
    if "match" in msg.DESCRIPTOR.fields_by_name:
        fields = sorted(msg.match, key=lambda f: f.field_id)
        del msg.match[:]
        msg.match.extend(fields)
    return msg.SerializeToString(deterministic=True)


def read_table(name, **match):
    q = sh.TableEntry(name)
    for field, value in match.items():
        q.match[field] = value
    return list(q.read())


def check_entries(got, want, what):
    got_c = sorted(canon(e) for e in got)
    want_c = sorted(canon(e, canonical=True) for e in want)
    c.check(got_c == want_c,
            f"{what}: read returned {len(got)} entries that differ from the {len(want)} written:\n"
            + "\n".join(f"  got:  {e.msg()}".replace("\n", " ") for e in got) + "\n"
            + "\n".join(f"  want: {c.canonicalize(e.msg())}".replace("\n", " ") for e in want))


def port_rx(index):
    return c.counter_cell(sh, "port_rx", index)


def replicas(entry):
    return sorted((r.egress_port, r.instance) for r in entry.replicas)


def dry_run(args):
    from p4runtime_sh.global_options import global_options
    p4info, _ = c.example(args, "router")
    sh.context.set_p4info(c.p4info_from_file(p4info))
    global_options["verbose"] = False
    for e in (route("10.0.2.0/24", 2), route_drop("10.0.0.0/8"),
              route("2001:db8:2::/48", 2, "ipv6_lpm", "hdr.ipv6.dst_addr"),
              nexthop(2, 2, NH_SRC, "02:00:00:00:00:02"),
              sh.MulticastGroupEntry(7).add(1, 0).add(2, 1), sh.CloneSessionEntry(5).add(2, 0)):
        print(e.msg())
    ce = sh.CounterEntry("port_rx")
    ce.index = 1
    print(ce.msg())


def main(args):
    if args.dry_run:
        return dry_run(args)
    p4info, bmv2 = c.example(args, "router")
    h1, h2 = c.open_ports(args)
    c.step("connect and push the router pipeline")
    sh.setup(device_id=args.device_id, grpc_addr=args.addr, election_id=(0, c.election_base()),
             config=sh.FwdPipeConfig(p4info, bmv2), verbose=False)
    c.at_exit(sh.teardown)
    got_info = sh.client.get_p4info()
    c.check(got_info == c.p4info_from_file(p4info),
            "GetForwardingPipelineConfig returned a P4Info different from the one pushed")

    c.step("insert routes and next hops")
    r_v4 = route("10.0.2.0/24", 2)
    r_v4b = route("10.0.3.0/24", 3)
    r_drop = route_drop("10.0.0.0/8")
    r_v6 = route("2001:db8:2::/48", 2, "ipv6_lpm", "hdr.ipv6.dst_addr")
    nh2 = nexthop(2, 2, NH_SRC, c.mac_str(h2.mac))
    nh3 = nexthop(3, 1, "02:00:00:00:01:fe", c.mac_str(h1.mac))
    for e in (r_v4, r_v4b, r_drop, r_v6, nh2, nh3):
        e.insert()

    c.step("read back: single entry and wildcard")
    check_entries(read_table("ipv4_lpm", **{"hdr.ipv4.dst_addr": "10.0.2.0/24"}), [r_v4],
                  "single read of ipv4_lpm 10.0.2.0/24")
    check_entries(read_table("ipv4_lpm"), [r_v4, r_v4b, r_drop], "wildcard read of ipv4_lpm")
    check_entries(read_table("ipv6_lpm"), [r_v6], "wildcard read of ipv6_lpm")
    check_entries(read_table("nexthop"), [nh2, nh3], "wildcard read of nexthop")

    c.step("IPv4 forwarding if1 -> if2 with the next hop's MACs and TTL - 1")
    mark = c.tag("v4")
    frame = c.udp_ipv4_frame(ROUTER_MAC, h1.mac, "10.0.1.1", "10.0.2.2", 1234, 5678, mark + b"." * 32)
    h2.drain()
    h1.send(frame)
    h2.expect(c.routed_ipv4(frame, h2.mac, c.mac(NH_SRC)), mark, args.timeout, "routed IPv4 frame")

    c.step("IPv6 forwarding with hop limit - 1")
    mark6 = c.tag("v6")
    frame6 = c.udp_ipv6_frame(ROUTER_MAC, h1.mac, "2001:db8:1::1", "2001:db8:2::2", 1234, 5678, mark6)
    h1.send(frame6)
    h2.expect(c.routed_ipv6(frame6, h2.mac, c.mac(NH_SRC)), mark6, args.timeout, "routed IPv6 frame")

    c.step("TTL 1 is dropped; the more specific /24 beats the /8 drop route")
    mark_ttl = c.tag("ttl1")
    h1.send(c.udp_ipv4_frame(ROUTER_MAC, h1.mac, "10.0.1.1", "10.0.2.2", 1, 2, mark_ttl, ttl=1))
    h2.expect_nothing(mark_ttl, 0.5, "IPv4 frame with TTL 1")
    mark_d = c.tag("drop8")
    h1.send(c.udp_ipv4_frame(ROUTER_MAC, h1.mac, "10.0.1.1", "10.9.9.9", 1, 2, mark_d))
    h2.expect_nothing(mark_d, 0.5, "IPv4 frame to 10.9.9.9 (matches only the /8 drop route)")

    c.step("indexed counter port_rx counts what came in on port 1")
    pkts0, bytes0 = port_rx(1)
    c.check(pkts0 >= 4, f"port_rx[1] = {pkts0} packets after 4 frames were sent on port 1")
    n = 3
    marks = [c.tag(f"cnt{i}") for i in range(n)]
    frames = [c.udp_ipv4_frame(ROUTER_MAC, h1.mac, "10.0.1.1", "10.0.2.2", 1, 2, m + b"-" * 20)
              for m in marks]
    for f, m in zip(frames, marks):
        h1.send(f)
        h2.expect(c.routed_ipv4(f, h2.mac, c.mac(NH_SRC)), m, args.timeout, "counted frame")
    pkts1, bytes1 = port_rx(1)
    c.check((pkts1 - pkts0, bytes1 - bytes0) == (n, sum(map(len, frames))),
            f"port_rx[1] went from ({pkts0} packets, {bytes0} bytes) to ({pkts1}, {bytes1}) "
            f"after {n} frames of {len(frames[0])} bytes; want +{n} packets, "
            f"+{sum(map(len, frames))} bytes")
    every = list(sh.CounterEntry("port_rx").read())
    c.check(len(every) == 512, f"wildcard read of port_rx returned {len(every)} entries, want 512")
    one = [e for e in every if e.index == 1]
    c.check(len(one) == 1 and (one[0].packet_count, one[0].byte_count) == (pkts1, bytes1),
            f"wildcard read of port_rx disagrees with the single read of index 1: "
            f"{[(e.packet_count, e.byte_count) for e in one]} vs {(pkts1, bytes1)}")

    c.step("MODIFY the next hop: frames leave with the new source MAC")
    nh2_new = nexthop(2, 2, NH_SRC_NEW, c.mac_str(h2.mac))
    nh2_new.modify()
    check_entries(read_table("nexthop", **{"meta.nexthop": "2"}), [nh2_new], "read after MODIFY")
    mark = c.tag("mod")
    frame = c.udp_ipv4_frame(ROUTER_MAC, h1.mac, "10.0.1.1", "10.0.2.2", 1234, 5678, mark)
    h1.send(frame)
    h2.expect(c.routed_ipv4(frame, h2.mac, c.mac(NH_SRC_NEW)), mark, args.timeout,
              "frame routed after MODIFY")

    c.step("DELETE the /24 route: gone from reads, its traffic falls to the /8 drop route")
    r_v4.delete()
    check_entries(read_table("ipv4_lpm"), [r_v4b, r_drop], "wildcard read after DELETE")
    mark = c.tag("del")
    h1.send(c.udp_ipv4_frame(ROUTER_MAC, h1.mac, "10.0.1.1", "10.0.2.2", 1, 2, mark))
    h2.expect_nothing(mark, 0.5, "frame to a deleted route")

    c.step("multicast group: insert, read, modify, delete")
    sh.MulticastGroupEntry(7).add(1, 0).add(2, 1).insert()
    got = list(sh.MulticastGroupEntry(7).read())
    c.check([(g.group_id, replicas(g)) for g in got] == [(7, [(1, 0), (2, 1)])],
            f"read of multicast group 7: {[(g.group_id, replicas(g)) for g in got]}")
    sh.MulticastGroupEntry(7).add(2, 0).modify()
    got = [(g.group_id, replicas(g)) for g in sh.MulticastGroupEntry().read()]
    c.check((7, [(2, 0)]) in got, f"wildcard read after MODIFY of group 7: {got}")
    sh.MulticastGroupEntry(7).delete()
    got = [g.group_id for g in sh.MulticastGroupEntry().read()]
    c.check(7 not in got, f"multicast group 7 still read back after DELETE: {got}")

    c.step("clone session: insert, read, modify, delete")
    sh.CloneSessionEntry(5).add(2, 0).insert()
    got = [(s.session_id, replicas(s), s.cos, s.packet_length_bytes)
           for s in sh.CloneSessionEntry(5).read()]
    c.check(got == [(5, [(2, 0)], 0, 0)], f"read of clone session 5: {got}")
    cs = sh.CloneSessionEntry(5).add(1, 0)
    cs.cos = 1
    cs.modify()
    got = [(s.session_id, replicas(s), s.cos) for s in sh.CloneSessionEntry().read()]
    c.check((5, [(1, 0)], 1) in got, f"wildcard read after MODIFY of clone session 5: {got}")
    sh.CloneSessionEntry(5).delete()
    got = [s.session_id for s in sh.CloneSessionEntry().read()]
    c.check(5 not in got, f"clone session 5 still read back after DELETE: {got}")

    c.step("a batch of 1000 failing updates: p4runtime-shell prints their errors")
    from p4.v1 import p4runtime_pb2
    from p4runtime_sh.p4runtime import P4RuntimeWriteException
    req = p4runtime_pb2.WriteRequest()
    for i in range(1000):
        up = req.updates.add()
        up.type = p4runtime_pb2.Update.MODIFY
        up.entity.table_entry.CopyFrom(nexthop(5000 + i, 2, NH_SRC, "02:00:00:00:00:02").msg())
    try:
        sh.client.write(req)
        c.check(False, "a batch of 1000 MODIFYs of missing entries was accepted")
    except P4RuntimeWriteException as e:
        text = str(e)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("* At index")]
    c.check(len(lines) >= 20, f"p4runtime-shell printed {len(lines)} errors:\n{text}")
    for i, ln in enumerate(lines):
        c.check(ln.startswith(f"* At index {i}: NOT_FOUND"), f"error line {i}: {ln!r}")
    k = len(lines) - 1
    c.check(f"updates #{k + 1} to #999 are not listed" in lines[-1] and f"{999 - k} of them failed" in lines[-1]
            and "NOT_FOUND" in lines[-1].split("not listed", 1)[1], f"the last error line: {lines[-1]!r}")
    c.step(f"p4runtime-shell printed {len(lines)} errors, the last one summing up the other {999 - k}")


if __name__ == "__main__":
    _args = c.arg_parser(__doc__).parse_args()
    c.reexec_with("p4runtime_sh", "SLUICE_PY", ".venv")
    import p4runtime_sh.shell as sh  # noqa: E402 - after argparse so --help needs no clients
    c.run(main, _args)
