#!/usr/bin/env python3
"""gNMI beside P4Runtime on one gRPC port, driven by two independent
clients: finsy (its Switch reads the port list over gNMI and follows each
port's oper-status; its GNMIClient subscribes and sets) and pygnmi (Get,
Set, Subscribe ONCE and POLL).

Runs in finsy's venv ($REPO/.venv/finsy, which also holds pygnmi): the
script re-executes itself with $SLUICE_FINSY_PY when finsy is not
importable.

Proves:
  * finsy's Switch gets the ports and their P4Runtime ids from gNMI
    (`interfaces/interface[name=*]/state/ifindex`), as from Stratum.
  * Counters match the frames sent, by kind: in-pkts, in-octets,
    in-unicast/multicast/broadcast-pkts on the receiving port,
    out-pkts/out-octets/out-unicast-pkts on the port the router sends to
    (Get in JSON_IETF: one subtree per interface).
  * Set `config/enabled` false takes the port down (the host's end loses
    its carrier), a Subscribe ON_CHANGE on oper-status reports DOWN,
    Get shows admin-status DOWN; enabled again, UP is reported and routed
    frames reach the host again.
  * ONCE ends after its sync response; POLL answers each poll; SAMPLE
    keeps sending; a path outside the model is NOT_FOUND, an unsupported
    encoding UNIMPLEMENTED, a read-only leaf refused on Set.
"""
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import common as c

ROUTER_MAC = c.mac("02:00:00:00:01:fe")
NEXTHOP_MAC = "02:00:00:00:02:fe"
HERE = Path(__file__).resolve().parent


def carrier(ifname):
    try:
        with open(f"/sys/class/net/{ifname}/carrier") as f:
            return f.read().strip() == "1"
    except OSError:
        return False


def pygnmi(args, *op):
    """One operation of pygnmi_client.py (pygnmi in a process of its own), its JSON answer."""
    r = subprocess.run([sys.executable, str(HERE / "pygnmi_client.py"), "--addr", args.addr, *op],
                       capture_output=True, text=True, timeout=300)
    c.check(r.returncode == 0, f"pygnmi {' '.join(op)} failed:\n{r.stdout}{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def delta(after, before, iface):
    return {k: after[iface][k] - before[iface].get(k, 0) for k in after[iface]}


async def wait_until(what, cond, timeout):
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(cond):
        c.check(time.monotonic() < deadline, f"{what}: not within {timeout:g} s")
        await asyncio.sleep(0.1)


async def next_update(it, timeout, what):
    try:
        return await asyncio.wait_for(it.__anext__(), timeout)
    except asyncio.TimeoutError:
        c.check(False, f"{what}: no update within {timeout:g} s")


async def scenario(args):
    import finsy as fy
    # Waits for events, bounded far above any machine's pace.
    args.timeout = max(args.timeout, 30.0)
    p4info, bmv2 = c.example(args, "router")
    h1, h2 = c.open_ports(args)
    for s in ("s1", "s2"):
        c.quiet(s)
    opts = fy.SwitchOptions(p4info=Path(p4info), p4blob=Path(bmv2), device_id=args.device_id,
                            initial_election_id=c.election_base(), p4force=True)
    sw = fy.Switch("sluice", args.addr, opts)

    async with sw:
        c.step("finsy's Switch took its ports from gNMI")
        ports = {p.name: p.id for p in sw.ports}
        c.check(ports == {"s1": 1, "s2": 2}, f"finsy's port list: {ports}, want s1 -> 1, s2 -> 2")
        caps = pygnmi(args, "capabilities")
        encs = {e.lower() if isinstance(e, str) else e for e in caps["supported_encodings"]}
        c.check({"json", "json_ietf", "proto"} <= encs, f"capabilities: {caps}")

        c.step("routes to port 2")
        await sw.insert([
            fy.P4TableEntry("ipv4_lpm", match=fy.Match(dst_addr="10.0.2.0/24"), action=fy.Action("set_nexthop", id=2)),
            fy.P4TableEntry("nexthop", match=fy.Match(nexthop=2),
                            action=fy.Action("forward", port=2, src=NEXTHOP_MAC, dst=c.mac_str(h2.mac))),
        ])

        c.step("counters match the frames sent, by kind")
        before = await asyncio.to_thread(pygnmi, args, "counters")
        sent = {"unicast": [], "multicast": [], "broadcast": []}
        for i in range(5):
            mark = c.tag(f"gnmi-u{i}")
            f = c.udp_ipv4_frame(ROUTER_MAC, h1.mac, "10.0.1.1", "10.0.2.2", 1, 2, mark + b"." * (20 + i))
            h1.send(f)
            await asyncio.to_thread(h2.expect, c.routed_ipv4(f, h2.mac, c.mac(NEXTHOP_MAC)), mark,
                                    args.timeout, "routed unicast frame")
            sent["unicast"].append(f)
        local = (0x88b5).to_bytes(2, "big")
        for i in range(2):
            f = c.mac("01:00:5e:00:00:fb") + h1.mac + local + c.tag(f"gnmi-m{i}") + b"m" * 40
            h1.send(f)
            sent["multicast"].append(f)
        for i in range(3):
            f = b"\xff" * 6 + h1.mac + local + c.tag(f"gnmi-b{i}") + b"b" * 40
            h1.send(f)
            sent["broadcast"].append(f)
        total = sum(len(v) for v in sent.values())
        await wait_until("s1 counted every frame",
                         lambda: delta(pygnmi(args, "counters"), before, "s1")["in-pkts"] >= total, args.timeout)
        after = await asyncio.to_thread(pygnmi, args, "counters")
        d1, d2 = delta(after, before, "s1"), delta(after, before, "s2")
        want1 = {
            "in-pkts": total,
            "in-octets": sum(len(f) for v in sent.values() for f in v),
            "in-unicast-pkts": 5,
            "in-multicast-pkts": 2,
            "in-broadcast-pkts": 3,
        }
        c.check({k: d1[k] for k in want1} == want1, f"s1 counters grew by {d1}, want {want1}")
        want2 = {"out-pkts": 5, "out-octets": sum(len(f) for f in sent["unicast"]), "out-unicast-pkts": 5}
        c.check({k: d2[k] for k in want2} == want2, f"s2 counters grew by {d2}, want {want2}")
        c.step(f"s1 in +{d1['in-pkts']} ({d1['in-octets']} bytes), s2 out +{d2['out-pkts']}")

        c.step("Set enabled=false: ON_CHANGE reports DOWN, the link partner loses its carrier")
        client = fy.GNMIClient(args.addr)
        await client.open()
        sub = client.subscribe()
        sub.on_change(fy.GNMIPath("interfaces/interface[name=*]/state/oper-status"))
        initial = {u.path["name"]: u.value async for u in sub.synchronize()}
        c.check(initial == {"s1": "UP", "s2": "UP"}, f"initial oper-status: {initial}")
        changes = sub.updates()
        await asyncio.to_thread(pygnmi, args, "set-enabled", "s2", "false")
        u = await next_update(changes, args.timeout, "oper-status after disabling s2")
        c.check((u.path["name"], u.value) == ("s2", "DOWN"), f"update after disabling s2: {u}")
        c.check(not carrier("h2"), "h2 still has a carrier with s2 disabled")
        r = await asyncio.to_thread(pygnmi, args, "get", "/interfaces/interface[name=s2]/state/admin-status")
        c.check(r == [["interfaces/interface[name=s2]/state/admin-status", "DOWN"]], f"admin-status: {r}")
        await wait_until("finsy's own port list shows s2 down", lambda: not sw.ports["s2"].up, args.timeout)

        c.step("enabled again (finsy's Set): UP, and routed frames arrive again")
        await client.set(update=[(fy.GNMIPath("interfaces/interface[name=s2]/config/enabled"), True)])
        u = await next_update(changes, args.timeout, "oper-status after enabling s2")
        c.check((u.path["name"], u.value) == ("s2", "UP"), f"update after enabling s2: {u}")
        mark = c.tag("gnmi-back")
        f = c.udp_ipv4_frame(ROUTER_MAC, h1.mac, "10.0.1.1", "10.0.2.2", 1, 2, mark + b"." * 20)
        routed = c.routed_ipv4(f, h2.mac, c.mac(NEXTHOP_MAC))
        deadline = time.monotonic() + args.timeout
        while True:
            # The switch's loop takes the port back within a fraction of a second.
            h1.send(f)
            if await asyncio.to_thread(h2.receive, mark, 0.5) == routed:
                break
            c.check(time.monotonic() < deadline, "routed frames do not reach h2 after s2 was enabled")
        sub.cancel()

        c.step("SAMPLE keeps sending")
        sample = client.subscribe()
        sample.sample(fy.GNMIPath("interfaces/interface[name=s1]/state/counters/in-pkts"),
                      sample_interval=200_000_000)
        got = [u async for u in sample.synchronize()]
        c.check(len(got) == 1 and got[0].value >= total, f"first sample: {got}")
        more = sample.updates()
        for _ in range(2):
            u = await next_update(more, args.timeout, "a later sample")
            c.check(u.path.last == "in-pkts", f"sample: {u}")
        sample.cancel()

        # pygnmi refuses an encoding Capabilities does not list before
        # sending it: ask with finsy's generated stub.
        import grpc
        from finsy.proto import gnmi
        try:
            await client._stub.Get(gnmi.GetRequest(path=[fy.GNMIPath("interfaces").path], encoding=gnmi.ASCII))
            c.check(False, "a Get in ASCII was answered")
        except grpc.RpcError as e:
            c.check(e.code() == grpc.StatusCode.UNIMPLEMENTED, f"a Get in ASCII: {e.code()} {e.details()}")
        await client.close()

    c.step("ONCE ends after its sync response; POLL answers each poll")
    msgs = pygnmi(args, "once")
    c.check("sync_response" in msgs[-1], f"ONCE did not end with a sync response: {msgs}")
    ids = {u["path"]: u["val"] for m in msgs if "update" in m for u in m["update"]["update"]}
    c.check(ids == {"interfaces/interface[name=s1]/state/id": 1, "interfaces/interface[name=s2]/state/id": 2},
            f"ONCE ids: {ids}")
    for r in pygnmi(args, "poll", "2"):
        c.check(r.get("sync_response") and r["update"]["update"][0]["val"] == "UP", f"poll answer: {r}")

    c.step("errors: unknown path, unsupported encoding, read-only leaf, missing interface")
    for case, want in [("unknown-path", "NOT_FOUND"), ("state-leaf", "INVALID_ARGUMENT"),
                       ("missing-interface", "NOT_FOUND")]:
        got = pygnmi(args, "error", case)
        c.check(got == want, f"{case}: {got}, want {want}")


def main(args):
    asyncio.run(scenario(args))


if __name__ == "__main__":
    _args = c.arg_parser(__doc__).parse_args()
    c.reexec_with("finsy", "SLUICE_FINSY_PY", os.path.join(".venv", "finsy"))
    c.run(main, _args)
