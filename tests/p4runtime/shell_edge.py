#!/usr/bin/env python3
"""edge.p4 driven by p4runtime-shell: ternary/range ACL with priorities, action
selector members and groups, an indirect meter, packet-in and packet-out.

Proves, against a live server with ports 1 and 2 wired to --if1 / --if2:
  * Action profile members and a selector group (spec 'ActionProfileMember',
    'ActionProfileGroup') read back as written, and an LPM route pointing at
    the group forwards if1 -> if2 through one of the members (MACs, TTL - 1).
  * Ternary + range ACL entries with priorities (spec 'Match Format',
    priority: higher value wins) read back with their priorities; when two
    entries match, the higher-priority one decides (punt beats drop); MODIFY
    and DELETE change what happens to traffic.
  * punt sends the packet to the CPU port: the client gets a PacketIn whose
    payload is the frame and whose ingress_port metadata is 1, with the
    @controller_header bytes stripped (spec 'Packet I/O').
  * PacketOut with egress_port metadata leaves on that port, exactly the
    payload bytes (spec 'Packet I/O').
  * MeterEntry config is written (MODIFY) and read back (spec
    'MeterEntry'); a source policed by a meter whose burst is smaller than the
    frame is dropped (red), an unpoliced source is not.
"""
import common as c

SRC1, SRC2 = "02:00:00:00:02:01", "02:00:00:00:02:02"  # the two ECMP members' source MACs
ROUTER_MAC = c.mac("02:00:00:00:01:fe")
# Rates in bytes/s that are whole bytes per microsecond (no rounding if the server converts
# units, as bmv2 does); 64-byte bursts make any frame over 64 bytes red.
METER = dict(cir=1_000_000, cburst=64, pir=2_000_000, pburst=64)


def member(member_id, src, dst):
    m = sh.ActionProfileMember("ecmp")(action="set_nexthop", member_id=member_id)
    m.action.set(port="2", src=src, dst=dst)
    return m


def acl(action, priority, **match):
    te = sh.TableEntry("acl")(action=action)
    for field, value in match.items():
        te.match[field] = value
    te.priority = priority
    return te


PUNT_UDP_5000 = dict(action="punt", priority=100,
                     **{"hdr.ipv4.protocol": "17", "meta.l4_dst": "5000..5000"})
DROP_IPV4_FROM_1 = dict(priority=50,
                        **{"std.ingress_port": "1&&&0x1ff", "hdr.ethernet.ether_type": "0x0800&&&0xffff"})
DROP_10_9 = dict(action="drop", priority=10, **{"hdr.ipv4.dst_addr": "10.9.0.0&&&255.255.0.0"})


def canon(entry, canonical=False):
    msg = type(entry.msg())()
    msg.CopyFrom(entry.msg())
    if canonical:
        c.canonicalize(msg)
    if "match" in msg.DESCRIPTOR.fields_by_name:
        fields = sorted(msg.match, key=lambda f: f.field_id)
        del msg.match[:]
        msg.match.extend(fields)
    return msg.SerializeToString(deterministic=True)


def check_same(got, want, what):
    c.check(sorted(canon(e) for e in got) == sorted(canon(e, True) for e in want),
            f"{what}: read back differs from what was written:\n"
            + "\n".join(f"  got:  {e.msg()}".replace("\n", " ") for e in got) + "\n"
            + "\n".join(f"  want: {c.canonicalize(e.msg())}".replace("\n", " ") for e in want))


def route_to_group():
    te = sh.TableEntry("routes")
    te.match["hdr.ipv4.dst_addr"] = "10.0.2.0/24"
    te.group_id = 1
    return te


def police(src_ip, index):
    te = sh.TableEntry("sources")(action="police")
    te.match["hdr.ipv4.src_addr"] = src_ip
    te.action["index"] = str(index)
    return te


def meter(index, **config):
    me = sh.MeterEntry("policer")
    me.index = index
    for k, v in config.items():
        setattr(me, k, v)
    return me


def dry_run(args):
    from p4runtime_sh.global_options import global_options
    p4info, _ = c.example(args, "edge")
    sh.context.set_p4info(c.p4info_from_file(p4info))
    global_options["verbose"] = False
    g = sh.ActionProfileGroup("ecmp")(group_id=1).add(1).add(2)
    for e in (member(1, SRC1, "02:00:00:00:00:02"), g, route_to_group(), acl(**PUNT_UDP_5000),
              acl("drop", **DROP_IPV4_FROM_1), acl(**DROP_10_9), police("10.0.1.66", 7),
              meter(7, **METER)):
        print(e.msg())
    po = sh.PacketOut(payload=b"\x00" * 64, egress_port="2")
    po._update_msg()
    print(po._entry)


def main(args):
    if args.dry_run:
        return dry_run(args)
    p4info, bmv2 = c.example(args, "edge")
    h1, h2 = c.open_ports(args)
    c.step("connect and push the edge pipeline")
    sh.setup(device_id=args.device_id, grpc_addr=args.addr, election_id=(0, c.election_base()),
             config=sh.FwdPipeConfig(p4info, bmv2), verbose=False)
    c.at_exit(sh.teardown)
    packet_in = sh.PacketIn()  # starts collecting PacketIn messages from the stream
    info = c.p4info_from_file(p4info)
    ingress_port_id = next(m.id for cpm in info.controller_packet_metadata
                           if cpm.preamble.name == "packet_in" for m in cpm.metadata
                           if m.name == "ingress_port")

    def udp_frame(src_ip, dport, mark, dst_ip="10.0.2.2"):
        return c.udp_ipv4_frame(ROUTER_MAC, h1.mac, src_ip, dst_ip, 4321, dport, mark + b"#" * 40)

    def expect_routed(frame, mark, what):
        got = h2.receive(mark, args.timeout)
        want = [c.routed_ipv4(frame, h2.mac, c.mac(s)) for s in (SRC1, SRC2)]
        c.check(got is not None, f"{what}: nothing arrived on {h2.ifname} within {args.timeout:g} s")
        c.check(got in want, f"{what}: the frame on {h2.ifname} is neither member's rewrite: "
                             f"{c.diff_frames(want[0], got)}\n  got {got.hex()}")

    def packet_ins(mark):
        return [m.packet for m in packet_in.sniff(timeout=args.timeout) if mark in m.packet.payload]

    c.step("selector: two members, one group, an LPM route to the group")
    members = [member(1, SRC1, c.mac_str(h2.mac)), member(2, SRC2, c.mac_str(h2.mac))]
    for m in members:
        m.insert()
    sh.ActionProfileGroup("ecmp")(group_id=1).add(1).add(2).insert()
    route = route_to_group()
    route.insert()
    check_same(list(sh.ActionProfileMember("ecmp").read()), members, "wildcard read of ecmp members")
    groups = [(g.group_id, sorted(m.member_id for m in g.members))
              for g in sh.ActionProfileGroup("ecmp").read()]
    c.check(groups == [(1, [1, 2])], f"wildcard read of ecmp groups: {groups}, want [(1, [1, 2])]")
    check_same(list(sh.TableEntry("routes").read()), [route], "wildcard read of routes")
    mark = c.tag("ecmp")
    frame = udp_frame("10.0.1.1", 6000, mark)
    h2.drain()
    h1.send(frame)
    expect_routed(frame, mark, "frame routed through the selector group")

    c.step("ACL: three ternary/range entries with priorities, read back")
    a_punt = acl(**PUNT_UDP_5000)
    b_drop = acl("drop", **DROP_IPV4_FROM_1)
    c_drop = acl(**DROP_10_9)
    for e in (a_punt, b_drop, c_drop):
        e.insert()
    got = list(sh.TableEntry("acl").read())
    check_same(got, [a_punt, b_drop, c_drop], "wildcard read of acl")
    c.check(sorted(e.priority for e in got) == [10, 50, 100], f"acl priorities read back: "
            f"{sorted(e.priority for e in got)}")

    c.step("priority 100 punt beats priority 50 drop: PacketIn with ingress_port 1")
    mark = c.tag("punt")
    frame = udp_frame("10.0.1.1", 5000, mark)
    h1.send(frame)
    pins = packet_ins(mark)
    c.check(len(pins) == 1, f"{len(pins)} PacketIn messages carry the punted frame, want 1")
    c.check(pins[0].payload == frame, "PacketIn payload is not the frame sent on port 1 "
            f"(the packet_in header must be stripped): {c.diff_frames(frame, pins[0].payload)}")
    md = {m.metadata_id: int.from_bytes(m.value, "big") for m in pins[0].metadata}
    c.check(md.get(ingress_port_id) == 1, f"PacketIn metadata {md}: want ingress_port "
            f"(id {ingress_port_id}) = 1")
    h2.expect_nothing(mark, 0.2, "punted frame")

    c.step("only the drop entry matches UDP port 6000: dropped")
    mark = c.tag("drop")
    h1.send(udp_frame("10.0.1.1", 6000, mark))
    h2.expect_nothing(mark, 0.5, "frame matching the priority-50 drop entry")

    c.step("MODIFY the drop entry to permit: the frame is routed")
    b_permit = acl("permit", **DROP_IPV4_FROM_1)
    b_permit.modify()
    mark = c.tag("permit")
    frame = udp_frame("10.0.1.1", 6000, mark)
    h1.send(frame)
    expect_routed(frame, mark, "frame after MODIFY drop -> permit")

    c.step("DELETE the punt entry: UDP 5000 is routed, no PacketIn")
    a_punt.delete()
    check_same(list(sh.TableEntry("acl").read()), [b_permit, c_drop], "wildcard read of acl after DELETE")
    mark = c.tag("unpunt")
    frame = udp_frame("10.0.1.1", 5000, mark)
    h1.send(frame)
    expect_routed(frame, mark, "UDP 5000 frame after the punt entry was deleted")
    c.check(packet_ins(mark) == [], "a PacketIn arrived although the punt entry was deleted")

    c.step("meter: MODIFY policer[7], read it back, police 10.0.1.66 with it")
    meter(7, **METER).modify()
    got = [(e.index, e.cir, e.cburst, e.pir, e.pburst) for e in meter(7).read()]
    want = (7, METER["cir"], METER["cburst"], METER["pir"], METER["pburst"])
    c.check(got == [want], f"read of policer[7]: {got}, want [{want}]")
    police("10.0.1.66", 7).insert()
    mark = c.tag("red")
    h1.send(udp_frame("10.0.1.66", 6000, mark))
    h2.expect_nothing(mark, 0.5, "frame from the policed source (100 bytes > 64-byte bursts: red)")
    mark = c.tag("green")
    frame = udp_frame("10.0.1.1", 6000, mark)
    h1.send(frame)
    expect_routed(frame, mark, "frame from an unpoliced source")

    c.step("PacketOut: egress_port metadata picks the port, payload leaves unchanged")
    for port, dst in ((2, h2), (1, h1)):
        mark = c.tag(f"out{port}")
        payload = dst.mac + ROUTER_MAC + b"\x88\xb5" + mark + b"!" * 40
        dst.drain()
        sh.PacketOut(payload=payload, egress_port=str(port)).send()
        dst.expect(payload, mark, args.timeout, f"PacketOut to port {port}")
        other = h1 if dst is h2 else h2
        other.expect_nothing(mark, 0.2, f"PacketOut to port {port}, seen on the other port")


if __name__ == "__main__":
    _args = c.arg_parser(__doc__).parse_args()
    c.reexec_with("p4runtime_sh", "SLUICE_PY", ".venv")
    import p4runtime_sh.shell as sh  # noqa: E402 - after argparse so --help needs no clients
    c.run(main, _args)
