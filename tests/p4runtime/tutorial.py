#!/usr/bin/env python3
"""The README's tutorial flow with p4runtime-shell: push router.p4 to Sluice
running as simple_switch_grpc and install the routes between h1 (10.0.1.1,
port 1) and h2 (10.0.2.1, port 2). The harness then pings through it.

With --count-routes it only connects (no pipeline push) and prints how many
entries the IPv4 route table holds, as `routes: N`.
"""
import argparse
import faulthandler
import os

import p4runtime_sh.shell as sh

# A hung client must fail the test, not stall CI: dump every thread and exit after 120 s.
faulthandler.dump_traceback_later(120, exit=True)

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("--addr", default="127.0.0.1:9559")
p.add_argument("--examples", default="examples")
p.add_argument("--count-routes", action="store_true")
a = p.parse_args()

if a.count_routes:
    sh.setup(device_id=0, grpc_addr=a.addr, election_id=(0, 2))
    print("routes:", sum(1 for _ in sh.TableEntry("RouterIngress.ipv4_lpm").read()))
    sh.teardown()
    raise SystemExit(0)

sh.setup(
    device_id=0,
    grpc_addr=a.addr,
    election_id=(0, 1),
    config=sh.FwdPipeConfig(os.path.join(a.examples, "router.p4info.txtpb"),
                            os.path.join(a.examples, "router.json")),
)
for prefix, nh in [("10.0.1.0/24", 1), ("10.0.2.0/24", 2)]:
    te = sh.TableEntry("RouterIngress.ipv4_lpm")(action="RouterIngress.set_nexthop")
    te.match["hdr.ipv4.dst_addr"] = prefix
    te.action["id"] = str(nh)
    te.insert()
for nh, port, src, dst in [(1, 1, "02:00:00:00:01:fe", "02:00:00:00:01:01"),
                           (2, 2, "02:00:00:00:02:fe", "02:00:00:00:02:01")]:
    te = sh.TableEntry("RouterIngress.nexthop")(action="RouterIngress.forward")
    te.match["meta.nexthop"] = str(nh)
    te.action.set(port=str(port), src=src, dst=dst)
    te.insert()
print("routes:", sum(1 for _ in sh.TableEntry("RouterIngress.ipv4_lpm").read()))
sh.teardown()
