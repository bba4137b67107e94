#!/usr/bin/env python3
"""A primary and a backup controller, both finsy, on one switch.

finsy's arbitration starts every client at the same election id: the
second one hears that the id is taken ("Election id already exists", the
wording finsy matches), steps one below and settles as a backup. Runs in
finsy's venv (re-executes itself with $SLUICE_FINSY_PY).

Proves (spec 'Client Arbitration and Controller Replication'):
  * the first client is primary, the second settles as backup: told
    ALREADY_EXISTS with the primary's election id, its channel up once and
    kept (no reconnecting);
  * the backup cannot write (PERMISSION_DENIED);
  * when the primary leaves, the backup hears NOT_FOUND with the highest
    election id, asks for it and becomes primary (the time it took is
    printed), and writes.
"""
import asyncio
import os
import time
from pathlib import Path

import common as c


async def scenario(args):
    import finsy as fy

    p4info, bmv2 = c.example(args, "router")
    base = c.election_base()

    def options(**kw):
        return fy.SwitchOptions(p4info=Path(p4info), p4blob=Path(bmv2), device_id=args.device_id,
                                initial_election_id=base, **kw)

    def route(prefix):
        return fy.P4TableEntry("ipv4_lpm", match=fy.Match(dst_addr=prefix), action=fy.Action("set_nexthop", id=2))

    primary = fy.Switch("primary", args.addr, options(p4force=True))
    backup = fy.Switch("backup", args.addr, options())
    channel_ups = []
    backup.ee.on(fy.SwitchEvent.CHANNEL_UP, lambda sw: channel_ups.append(time.monotonic()))
    became = asyncio.get_running_loop().create_future()
    backup.ee.on(fy.SwitchEvent.BECOME_PRIMARY,
                 lambda sw: became.done() or became.set_result(time.monotonic()))

    c.step("the first client is primary, the second settles as backup")
    await primary.__aenter__()
    c.check(primary.is_primary, "the first client is not primary")
    await backup.__aenter__()
    c.check(not backup.is_primary and backup.primary_id == base and backup.election_id < base,
            f"backup: primary={backup.is_primary} primary_id={backup.primary_id} election_id={backup.election_id}")
    await asyncio.sleep(3)
    c.check(len(channel_ups) == 1 and not backup.is_primary,
            f"the backup did not settle: {len(channel_ups)} channel ups, primary={backup.is_primary}")

    c.step("the backup cannot write")
    try:
        await backup.insert([route("10.9.0.0/16")])
        c.check(False, "the backup's write was accepted")
    except fy.P4ClientError as e:
        c.check(e.code == fy.GRPCStatusCode.PERMISSION_DENIED, f"the backup's write: {e}")
    await primary.insert([route("10.8.0.0/16")])

    c.step("the primary leaves: the backup takes over")
    t0 = time.monotonic()
    await primary.__aexit__(None, None, None)
    t1 = await asyncio.wait_for(became, 60)
    c.check(backup.is_primary, "the backup did not become primary")
    await backup.insert([route("10.9.0.0/16")])
    got = sorted(e.match["dst_addr"] for e in [x async for x in backup.read(fy.P4TableEntry("ipv4_lpm"))])
    c.check(got == [(0x0A080000, 16), (0x0A090000, 16)], f"routes after the takeover: {got}")
    c.step(f"the backup was primary {1000 * (t1 - t0):.0f} ms after the primary left")
    c.check(t1 - t0 < 30, f"takeover took {t1 - t0:.1f} s")
    await backup.__aexit__(None, None, None)


def main(args):
    asyncio.run(scenario(args))


if __name__ == "__main__":
    _args = c.arg_parser(__doc__).parse_args()
    c.reexec_with("finsy", "SLUICE_FINSY_PY", os.path.join(".venv", "finsy"))
    c.run(main, _args)
