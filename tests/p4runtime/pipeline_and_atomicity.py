#!/usr/bin/env python3
"""SetForwardingPipelineConfig actions, GetForwardingPipelineConfig response
types and the three Write atomicity modes (P4Runtime spec
'SetForwardingPipelineConfig RPC', 'GetForwardingPipelineConfig RPC',
'Batching and Ordering of Updates'), with plain `p4runtime` bindings on the
router example:

  * VERIFY checks without installing (a broken JSON is INVALID_ARGUMENT);
    VERIFY_AND_SAVE keeps the pipeline aside (Writes still fail), COMMIT
    installs it, a second COMMIT has nothing to install;
  * Get answers ALL, COOKIE_ONLY, P4INFO_AND_COOKIE, DEVICE_CONFIG_AND_COOKIE;
  * a batch [new route, duplicate route]: CONTINUE_ON_ERROR applies the new
    one; ROLLBACK_ON_ERROR and DATAPLANE_ATOMIC apply nothing; the error
    details name ALREADY_EXISTS for the duplicate;
  * RECONCILE_AND_COMMIT with the same program keeps the entries;
    VERIFY_AND_COMMIT starts afresh;
  * a table the P4Info marks const refuses entries (PERMISSION_DENIED) and
    takes a new default entry (its default action is not const).
"""
import argparse
import faulthandler
import os
import sys
import time

import grpc
from google.protobuf import text_format
from google.rpc import code_pb2, status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

import common

# A hung client must fail the test, not stall CI: dump every thread and exit after 120 s.
faulthandler.dump_traceback_later(120, exit=True)

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("--addr", default="127.0.0.1:9559")
p.add_argument("--examples", default="examples")
p.add_argument("--if1", default=None)
p.add_argument("--if2", default=None)
a = p.parse_args()
Req = p4runtime_pb2.SetForwardingPipelineConfigRequest
GetReq = p4runtime_pb2.GetForwardingPipelineConfigRequest
W = p4runtime_pb2.WriteRequest


def check(cond, msg):
    if not cond:
        print(f"FAIL pipeline_and_atomicity.py: {msg}", file=sys.stderr)
        sys.exit(1)


def step(msg):
    print(f"[pipeline_and_atomicity.py] {msg}", flush=True)


ch = grpc.insecure_channel(a.addr)
stub = p4runtime_pb2_grpc.P4RuntimeStub(ch)
election = p4runtime_pb2.Uint128(high=0, low=time.time_ns())
stream = common.Stream(stub, "primary")
stream.arbitrate(0, common.uint128(election))
check(stream.expect("arbitration", 10, "arbitration").arbitration.status.code == 0, "not primary")

info = p4info_pb2.P4Info()
with open(os.path.join(a.examples, "router.p4info.txtpb")) as f:
    text_format.Merge(f.read(), info)
with open(os.path.join(a.examples, "router.json"), "rb") as f:
    device_config = f.read()


def config(cookie, dev=device_config):
    return p4runtime_pb2.ForwardingPipelineConfig(p4info=info, p4_device_config=dev,
                                                  cookie=p4runtime_pb2.ForwardingPipelineConfig.Cookie(cookie=cookie))


def set_pipeline(action, cfg=None):
    r = Req(device_id=0, election_id=election, action=action)
    if cfg is not None:
        r.config.CopyFrom(cfg)
    stub.SetForwardingPipelineConfig(r)


def code_of(fn):
    try:
        fn()
    except grpc.RpcError as e:
        return e.code(), e
    return grpc.StatusCode.OK, None


def get(ty):
    return stub.GetForwardingPipelineConfig(GetReq(device_id=0, response_type=ty)).config


step("VERIFY: a broken JSON is refused, a good config passes and installs nothing")
c, _ = code_of(lambda: set_pipeline(Req.VERIFY, config(1, b'{"header_types": 5}')))
check(c == grpc.StatusCode.INVALID_ARGUMENT, f"broken JSON: {c}")
set_pipeline(Req.VERIFY, config(1))
check(not get(GetReq.ALL).HasField("p4info"), "VERIFY installed a pipeline")

step("VERIFY_AND_SAVE then COMMIT; a second COMMIT has nothing to install")
set_pipeline(Req.VERIFY_AND_SAVE, config(7))
check(not get(GetReq.ALL).HasField("p4info"), "VERIFY_AND_SAVE installed the pipeline")
tid = next(t.preamble.id for t in info.tables if t.preamble.name.endswith("ipv4_lpm"))
fid = next(t.match_fields[0].id for t in info.tables if t.preamble.id == tid)
aid = next(x.preamble.id for x in info.actions if x.preamble.name.endswith("set_nexthop"))


def route(prefix):
    te = p4runtime_pb2.TableEntry(table_id=tid)
    m = te.match.add(field_id=fid)
    m.lpm.value = bytes([10, prefix, 0, 0])
    m.lpm.prefix_len = 16
    te.action.action.action_id = aid
    te.action.action.params.add(param_id=1, value=b"\x01")
    return te


def write(entries, atomicity=W.CONTINUE_ON_ERROR):
    w = W(device_id=0, election_id=election, atomicity=atomicity)
    for te in entries:
        w.updates.add(type=p4runtime_pb2.Update.INSERT).entity.table_entry.CopyFrom(te)
    return code_of(lambda: stub.Write(w))


c, _ = write([route(1)])
check(c == grpc.StatusCode.FAILED_PRECONDITION, f"a Write before COMMIT: {c}")
set_pipeline(Req.COMMIT)
c, _ = code_of(lambda: set_pipeline(Req.COMMIT))
check(c == grpc.StatusCode.FAILED_PRECONDITION, f"second COMMIT: {c}")

step("GetForwardingPipelineConfig: the four response types")
full = get(GetReq.ALL)
check(full.p4info == info and full.p4_device_config == device_config and full.cookie.cookie == 7, "ALL")
only = get(GetReq.COOKIE_ONLY)
check(not only.HasField("p4info") and not only.p4_device_config and only.cookie.cookie == 7, "COOKIE_ONLY")
pc = get(GetReq.P4INFO_AND_COOKIE)
check(pc.p4info == info and not pc.p4_device_config and pc.cookie.cookie == 7, "P4INFO_AND_COOKIE")
dc = get(GetReq.DEVICE_CONFIG_AND_COOKIE)
check(not dc.HasField("p4info") and dc.p4_device_config == device_config and dc.cookie.cookie == 7, "DEVICE_CONFIG_AND_COOKIE")


def routes():
    r = p4runtime_pb2.ReadRequest(device_id=0)
    r.entities.add().table_entry.table_id = tid
    return sorted(e.table_entry.match[0].lpm.value[1] for resp in stub.Read(r) for e in resp.entities)


def details(err):
    for k, v in err.trailing_metadata() or ():
        if k == "grpc-status-details-bin":
            st = status_pb2.Status()
            st.ParseFromString(v)
            out = []
            for d in st.details:
                e = p4runtime_pb2.Error()
                d.Unpack(e)
                out.append(e.canonical_code)
            return out
    return None


step("atomicity: [new route, duplicate] under each mode")
check(write([route(1)])[0] == grpc.StatusCode.OK, "first route")
for mode, applied in [(W.ROLLBACK_ON_ERROR, False), (W.DATAPLANE_ATOMIC, False), (W.CONTINUE_ON_ERROR, True)]:
    c, err = write([route(2), route(1)], mode)
    check(c == grpc.StatusCode.UNKNOWN, f"mode {mode}: status {c}")
    d = details(err)
    check(d is not None and len(d) == 2 and d[1] == code_pb2.ALREADY_EXISTS, f"mode {mode}: details {d}")
    check(d[0] == (code_pb2.OK if applied else code_pb2.ABORTED), f"mode {mode}: first update {d[0]}")
    check(routes() == ([1, 2] if applied else [1]), f"mode {mode}: routes {routes()}")

step("RECONCILE_AND_COMMIT with the same program keeps entries; VERIFY_AND_COMMIT starts afresh")
set_pipeline(Req.RECONCILE_AND_COMMIT, config(8))
check(routes() == [1, 2] and get(GetReq.COOKIE_ONLY).cookie.cookie == 8, f"after reconcile: {routes()}")
set_pipeline(Req.VERIFY_AND_COMMIT, config(9))
check(routes() == [], f"after VERIFY_AND_COMMIT: {routes()}")

step("a const table (is_const_table): its entries are refused, its default entry may change")
const_info = p4info_pb2.P4Info()
const_info.CopyFrom(info)
next(t for t in const_info.tables if t.preamble.id == tid).is_const_table = True
set_pipeline(Req.VERIFY_AND_COMMIT, p4runtime_pb2.ForwardingPipelineConfig(p4info=const_info, p4_device_config=device_config))
c, _ = write([route(3)])
check(c == grpc.StatusCode.UNKNOWN or c == grpc.StatusCode.PERMISSION_DENIED, f"an entry into a const table: {c}")
w = W(device_id=0, election_id=election)
u = w.updates.add(type=p4runtime_pb2.Update.MODIFY)
u.entity.table_entry.table_id = tid
u.entity.table_entry.is_default_action = True
u.entity.table_entry.action.action.action_id = aid
u.entity.table_entry.action.action.params.add(param_id=1, value=b"\x02")
c, err = code_of(lambda: stub.Write(w))
check(c == grpc.StatusCode.OK, f"the default entry of a const table: {c} {err and err.details()}")
r = p4runtime_pb2.ReadRequest(device_id=0)
d = r.entities.add().table_entry
d.table_id, d.is_default_action = tid, True
got = [e.table_entry.action.action for resp in stub.Read(r) for e in resp.entities]
check(len(got) == 1 and got[0].action_id == aid and got[0].params[0].value == b"\x02", f"the default read back: {got}")
stream.close()
print("PASS pipeline_and_atomicity.py")
