#!/usr/bin/env python3
"""Idle timeouts (P4Runtime spec 'Idle-timeout'): an entry written with
idle_timeout_ns into a table whose P4Info says NOTIFY_CONTROL is reported in
an IdleTimeoutNotification on the primary's stream once it has not been hit
for that long; the server does not delete it (a Read still returns it, with
its idle_timeout_ns). An entry written without a timeout is never reported.
A notification that finds no primary is counted in the switch's drop report
and sent again once a primary is back.

Program: switch_p4_16 from ../shared/conformance/p4c-bench (its `dmac` table
supports idle timeouts). Plain `p4runtime` bindings over grpcio.
"""
import argparse
import faulthandler
import os
import sys
import time

import grpc
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

import common

# A hung client must fail the test, not stall CI: dump every thread and exit after 120 s.
faulthandler.dump_traceback_later(120, exit=True)

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("--addr", default="127.0.0.1:9559")
p.add_argument("--program", required=True, help="directory holding switch_p4_16.json and .p4info.txtpb")
p.add_argument("--examples", default=None, help="ignored (harness compatibility)")
p.add_argument("--if1", default=None)
p.add_argument("--if2", default=None)
p.add_argument("--switch-log", required=True, help="the switch's standard error, for its drop report")
a = p.parse_args()


def fail(msg):
    print(f"FAIL idle_timeout.py: {msg}", file=sys.stderr)
    sys.exit(1)


ch = grpc.insecure_channel(a.addr)
stub = p4runtime_pb2_grpc.P4RuntimeStub(ch)
election = p4runtime_pb2.Uint128(high=0, low=time.time_ns())
stream = common.Stream(stub, "primary")
stream.arbitrate(0, common.uint128(election))
first = stream.expect("arbitration", 10, "arbitration")
if first.arbitration.status.code != 0:
    fail(f"not primary: {first}")

info = p4info_pb2.P4Info()
with open(os.path.join(a.program, "switch_p4_16.p4info.txtpb")) as f:
    text_format.Merge(f.read(), info)
with open(os.path.join(a.program, "switch_p4_16.json"), "rb") as f:
    device_config = f.read()
stub.SetForwardingPipelineConfig(p4runtime_pb2.SetForwardingPipelineConfigRequest(
    device_id=0, election_id=election, action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
    config=p4runtime_pb2.ForwardingPipelineConfig(p4info=info, p4_device_config=device_config)))
print("[idle_timeout.py] switch_p4_16 pushed", flush=True)

dmac = next(t for t in info.tables if t.preamble.name.endswith("dmac"))
assert dmac.idle_timeout_behavior == p4info_pb2.Table.NOTIFY_CONTROL
actions = {x.preamble.id: x for x in info.actions}
act = next(actions[r.id] for r in dmac.action_refs if r.scope != p4info_pb2.ActionRef.DEFAULT_ONLY and not actions[r.id].params)


def entry(mac, timeout_ns):
    te = p4runtime_pb2.TableEntry(table_id=dmac.preamble.id, idle_timeout_ns=timeout_ns)
    te.match.add(field_id=dmac.match_fields[0].id).exact.value = b"\x00\x07"
    te.match.add(field_id=dmac.match_fields[1].id).exact.value = mac
    te.action.action.action_id = act.preamble.id
    return te


w = p4runtime_pb2.WriteRequest(device_id=0, election_id=election)
w.updates.add(type=p4runtime_pb2.Update.INSERT).entity.table_entry.CopyFrom(entry(b"\x02\x00\x00\x00\x00\x01", 300_000_000))
w.updates.add(type=p4runtime_pb2.Update.INSERT).entity.table_entry.CopyFrom(entry(b"\x02\x00\x00\x00\x00\x02", 0))
stub.Write(w)
print("[idle_timeout.py] two dmac entries, one with a 300 ms idle timeout", flush=True)

# Waits at most 10 s whether or not anything arrives (a blocking iteration over
# the stream would wait for ever when the switch sends nothing).
msg = stream.recv("idle_timeout_notification", 10)
seen = list(msg.idle_timeout_notification.table_entry) if msg is not None else []
if len(seen) != 1:
    fail(f"expected one idle entry, got {seen}")
mac = seen[0].match[1].exact.value if len(seen[0].match) > 1 else None
macs = [m.exact.value for m in seen[0].match]
if seen[0].table_id != dmac.preamble.id or b"\x02\x00\x00\x00\x00\x01" not in macs:
    fail(f"the notification names another entry: {seen[0]}")
print("[idle_timeout.py] IdleTimeoutNotification for the entry with the timeout", flush=True)

read = p4runtime_pb2.ReadRequest(device_id=0)
read.entities.add().table_entry.table_id = dmac.preamble.id
got = [e.table_entry for r in stub.Read(read) for e in r.entities]
timeouts = sorted(e.idle_timeout_ns for e in got)
if timeouts != [0, 300_000_000]:
    fail(f"both entries must still be there, with their timeouts: {got}")
print("[idle_timeout.py] the entry stays (the controller decides), its timeout reads back", flush=True)

# A third entry goes idle after the primary has gone: its notification is
# dropped and counted (then tried again at each check), and reaches the
# next primary.
w = p4runtime_pb2.WriteRequest(device_id=0, election_id=election)
w.updates.add(type=p4runtime_pb2.Update.INSERT).entity.table_entry.CopyFrom(entry(b"\x02\x00\x00\x00\x00\x03", 200_000_000))
stub.Write(w)
stream.close()
dropped = common.wait_for_drop_report(a.switch_log, "idle-timeout", lambda n: n > 0, tries=50)
if dropped == 0:
    fail("no idle-timeout notification counted as dropped while there was no primary")
print(f"[idle_timeout.py] with no primary: {dropped} idle-timeout notification(s) dropped and reported", flush=True)
stream = common.Stream(stub, "primary again")
stream.arbitrate(0, common.uint128(p4runtime_pb2.Uint128(high=0, low=election.low + 1)))
stream.expect("arbitration", 10, "arbitration")
msg = stream.recv("idle_timeout_notification", 10)
macs = [m.exact.value for e in (msg.idle_timeout_notification.table_entry if msg else []) for m in e.match]
if b"\x02\x00\x00\x00\x00\x03" not in macs or b"\x02\x00\x00\x00\x00\x01" in macs:
    fail(f"the new primary must be told of the third entry only: {msg}")
print("[idle_timeout.py] the new primary gets the notification that was dropped", flush=True)
stream.close()
print("PASS idle_timeout.py")
