#!/usr/bin/env python3
"""Smoke test with finsy (asyncio P4Runtime client) against router.p4.

finsy needs protobuf>=6 and lives in its own venv ($REPO/.venv/finsy, made by
scripts/ensure-python.sh): run with any python, the script re-executes itself
with $SLUICE_FINSY_PY when finsy is not importable.

Proves, with a second, independently written client:
  * finsy's handshake works: Capabilities, arbitration (it becomes primary),
    GetForwardingPipelineConfig / SetForwardingPipelineConfig (p4force), and
    its port list read over gNMI on the same port (gnmi_ports.py tests gNMI).
  * Entries inserted with finsy read back equal (wildcard read per table),
    MODIFY and DELETE are reflected in reads (spec 'TableEntry', 'Read RPC').
  * A frame sent on --if1 leaves --if2 routed (MACs, TTL - 1) and the indexed
    counter port_rx[1] counts it.
  * A multicast group written by finsy reads back with its replicas (finsy
    uses Replica.port bytes when the server reports P4Runtime >= 1.5,
    Replica.egress_port otherwise).
"""
import asyncio
import os
from pathlib import Path

import common as c

ROUTER_MAC = c.mac("02:00:00:00:01:fe")


async def smoke(args):
    import finsy as fy
    p4info, bmv2 = c.example(args, "router")
    opts = fy.SwitchOptions(p4info=Path(p4info), p4blob=Path(bmv2), device_id=args.device_id,
                            initial_election_id=c.election_base(), p4force=True)

    def route(prefix, nh):
        return fy.P4TableEntry("ipv4_lpm", match=fy.Match(dst_addr=prefix),
                               action=fy.Action("set_nexthop", id=nh))

    def nexthop(nh, port, src, dst):
        return fy.P4TableEntry("nexthop", match=fy.Match(nexthop=nh),
                               action=fy.Action("forward", port=port, src=src, dst=dst))

    if args.dry_run:
        schema = fy.P4Schema(Path(p4info), Path(bmv2))
        for e in (route("10.0.2.0/24", 2), nexthop(2, 2, "02:00:00:00:02:fe", "02:00:00:00:00:02"),
                  fy.P4CounterEntry("port_rx", index=1), fy.P4MulticastGroupEntry(9, replicas=[1, 2])):
            print(e.encode(schema))
        return

    h1, h2 = c.open_ports(args)
    sw = fy.Switch("sluice", args.addr, opts)

    async def read(query):
        return [e async for e in sw.read(query)]

    def encoded(entries):
        return sorted(e.encode(sw.p4info).SerializeToString(deterministic=True) for e in entries)

    async with sw:
        c.step(f"connected: P4Runtime {sw.p4runtime_version}, primary {sw.is_primary}")
        c.check(sw.is_primary, "finsy did not become primary")
        routes = [route("10.0.2.0/24", 2), route("10.0.3.0/24", 3)]
        hops = [nexthop(2, 2, "02:00:00:00:02:fe", c.mac_str(h2.mac))]
        await sw.insert(routes + hops)
        c.check(encoded(await read(fy.P4TableEntry("ipv4_lpm"))) == encoded(routes),
                f"ipv4_lpm read back: {await read(fy.P4TableEntry('ipv4_lpm'))}")
        c.check(encoded(await read(fy.P4TableEntry("nexthop"))) == encoded(hops),
                f"nexthop read back: {await read(fy.P4TableEntry('nexthop'))}")

        c.step("a routed frame and the port_rx counter")
        [before] = await read(fy.P4CounterEntry("port_rx", index=1))
        mark = c.tag("finsy")
        frame = c.udp_ipv4_frame(ROUTER_MAC, h1.mac, "10.0.1.1", "10.0.2.2", 1, 2, mark + b"." * 30)
        h1.send(frame)
        await asyncio.to_thread(h2.expect, c.routed_ipv4(frame, h2.mac, c.mac("02:00:00:00:02:fe")),
                                mark, args.timeout, "frame routed by finsy's entries")
        [after] = await read(fy.P4CounterEntry("port_rx", index=1))
        got = (after.data.packet_count - before.data.packet_count,
               after.data.byte_count - before.data.byte_count)
        c.check(got == (1, len(frame)), f"port_rx[1] grew by {got}, want (1, {len(frame)})")

        c.step("modify, delete, multicast group")
        new_hop = nexthop(2, 2, "02:00:00:00:02:fd", c.mac_str(h2.mac))
        await sw.modify([new_hop])
        c.check(encoded(await read(fy.P4TableEntry("nexthop"))) == encoded([new_hop]),
                "nexthop after MODIFY")
        await sw.delete(routes)
        c.check(await read(fy.P4TableEntry("ipv4_lpm")) == [], "ipv4_lpm not empty after DELETE")
        await sw.insert([fy.P4MulticastGroupEntry(9, replicas=[1, 2])])
        groups = {g.multicast_group_id: sorted(g.replicas)
                  for g in await read(fy.P4MulticastGroupEntry())}
        c.check(groups.get(9) == [1, 2], f"multicast groups read back: {groups}, want group 9: [1, 2]")
        await sw.delete([fy.P4MulticastGroupEntry(9)])


def main(args):
    asyncio.run(smoke(args))


if __name__ == "__main__":
    _args = c.arg_parser(__doc__).parse_args()
    c.reexec_with("finsy", "SLUICE_FINSY_PY", os.path.join(".venv", "finsy"))
    c.run(main, _args)
