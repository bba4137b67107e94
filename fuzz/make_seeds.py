"""Seed corpora of the P4, control-plane, lwAFTR and pcap fuzz targets.

Run by fuzz/make-seeds.sh with the test venv's Python (bmv2's Thrift
client modules and the P4Runtime protobuf bindings). Writes
fuzz/corpus/<target>/<sha1 of the input>, from:
- the conformance corpora beside the repository (frames, programs, CLI
  commands, lwAFTR configurations, pcap files);
- the stock clients' own encoders: the Thrift calls simple_switch_CLI
  makes, serialized by its generated client; P4Runtime requests as
  p4runtime-shell builds them, serialized by the p4runtime bindings.
Deterministic: the same corpora give the same seeds.
"""

import hashlib
import os
import struct
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("SLUICE_CONFORMANCE", os.path.join(REPO, "..", "shared", "conformance"))
OUT = os.path.join(REPO, "fuzz", "corpus")


def put(target, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)


def pcap_frames(path, limit=1 << 30):
    """The frames of a classic pcap file (either byte order)."""
    with open(path, "rb") as f:
        b = f.read()
    if len(b) < 24:
        return []
    magic = b[:4]
    endian = "<" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    out, at = [], 24
    while at + 16 <= len(b) and len(out) < limit:
        _, _, incl, _ = struct.unpack(endian + "IIII", b[at:at + 16])
        out.append(b[at + 16:at + 16 + incl])
        at += 16 + incl
    return out


def dirs(path):
    return sorted(os.path.join(path, d) for d in os.listdir(path) if os.path.isdir(os.path.join(path, d)))


def bmv2_inputs(case):
    """(port, frame) of a bmv2 case's in/<port>.pcap files."""
    out = []
    d = os.path.join(case, "in")
    if os.path.isdir(d):
        for f in sorted(os.listdir(d)):
            if f.endswith(".pcap") and f[:-5].isdigit():
                out += [(int(f[:-5]), fr) for fr in pcap_frames(os.path.join(d, f))]
    return out


def stf_packets(path):
    out = []
    with open(path) as f:
        for line in f:
            w = line.split("#")[0].split()
            if len(w) >= 3 and w[0].lower() == "packet":
                hexdata = "".join(w[2:]).replace("*", "0")
                try:
                    out.append((int(w[1]), bytes.fromhex(hexdata)))
                except ValueError:
                    pass
    return out


# ------------------------------------------------------------------ P4 packets and programs

def p4_seeds():
    programs = []  # (name, json path, packets) in the differential target's order
    for d in dirs(os.path.join(SHARED, "bmv2")):
        programs.append((os.path.basename(d), os.path.join(d, "program.json"), bmv2_inputs(d)))
    for corpus in ("p4c-stf", "p4c-stf-psa"):
        for d in dirs(os.path.join(SHARED, corpus)):
            n = os.path.basename(d)
            stf = os.path.join(d, n + ".stf")
            programs.append((n, os.path.join(d, n + ".json"), stf_packets(stf) if os.path.exists(stf) else []))
    pool = [p for _, _, pk in programs for p in pk[:1]]
    router = bmv2_inputs(os.path.join(SHARED, "bmv2", "sluice_router"))
    seen = set()
    for _, fr in router + [p for _, _, pk in programs for p in pk[:2]]:
        if fr not in seen and len(seen) < 200:
            seen.add(fr)
            put("packet", fr)
    for i, (name, _, pk) in enumerate(programs):
        pk = pk or pool[i % len(pool):i % len(pool) + 1]
        # Two seeds per program: its first packet alone, and its first packets together.
        for group in (pk[:1], pk[:4]):
            data = struct.pack(">H", i)
            for port, fr in group:
                data += struct.pack(">BH", port & 0xff, len(fr)) + fr
            put("p4_differential", data)
    small = sorted((os.path.getsize(j), j) for _, j, _ in programs if os.path.exists(j))
    for size, j in small[:30] + small[len(small) // 2:len(small) // 2 + 5]:
        if size <= 65536:
            with open(j, "rb") as f:
                put("load_json", f.read())
    for n in ("router", "edge", "l2_learning"):
        with open(os.path.join(REPO, "examples", n + ".json"), "rb") as f:
            put("load_json", f.read())
    # CLI sessions: the corpus cases' command files, 16 lines at a time.
    for d in dirs(os.path.join(SHARED, "bmv2")):
        c = os.path.join(d, "commands.txt")
        if not os.path.exists(c):
            continue
        with open(c) as f:
            lines = [l for l in f.read().splitlines() if l.strip()]
        for at in range(0, min(len(lines), 64), 16):
            put("cli_command", ("\n".join(lines[at:at + 16]) + "\n").encode())
    return len(programs)


# ------------------------------------------------------------------ Thrift (simple_switch_CLI's client)

def thrift_seeds():
    from thrift.transport import TTransport
    from thrift.protocol import TBinaryProtocol, TMultiplexedProtocol
    from bm_runtime.standard import Standard
    from bm_runtime.standard.ttypes import BmMatchParam, BmMatchParamType, BmMatchParamExact, BmMatchParamLPM, \
        BmAddEntryOptions, BmCounterValue
    from sswitch_runtime import SimpleSwitch

    def session(calls):
        buf = TTransport.TMemoryBuffer()
        proto = TBinaryProtocol.TBinaryProtocol(buf)
        std = Standard.Client(TMultiplexedProtocol.TMultiplexedProtocol(proto, "standard"))
        ss = SimpleSwitch.Client(TMultiplexedProtocol.TMultiplexedProtocol(proto, "simple_switch"))
        for c in calls:
            c(std, ss)
        put("thrift_call", buf.getvalue())

    lpm = lambda a, p: BmMatchParam(type=BmMatchParamType.LPM, lpm=BmMatchParamLPM(bytes(a), p))
    exact = lambda v: BmMatchParam(type=BmMatchParamType.EXACT, exact=BmMatchParamExact(bytes(v)))
    opts = BmAddEntryOptions()
    session([lambda s, _: s.send_bm_get_config()])
    session([lambda s, _: s.send_bm_get_config_md5()])
    session([lambda s, _: s.send_bm_mt_get_entries(0, "RouterIngress.ipv4_lpm")])
    session([lambda s, _: s.send_bm_mt_add_entry(0, "RouterIngress.ipv4_lpm", [lpm([10, 0, 0, 0], 8)],
                                                  "RouterIngress.set_nexthop", [b"\x00\x01"], opts)])
    session([lambda s, _: s.send_bm_mt_add_entry(0, "RouterIngress.nexthop", [exact([0, 1])], "RouterIngress.forward",
                                                  [b"\x00\x02", bytes(6), bytes([0, 0, 0, 0, 2, 2])], opts),
             lambda s, _: s.send_bm_mt_get_num_entries(0, "RouterIngress.nexthop")])
    session([lambda s, _: s.send_bm_mt_set_default_action(0, "RouterIngress.ipv4_lpm", "RouterIngress.drop", [])])
    session([lambda s, _: s.send_bm_mt_delete_entry(0, "RouterIngress.ipv4_lpm", 0)])
    session([lambda s, _: s.send_bm_mt_modify_entry(0, "RouterIngress.ipv4_lpm", 0, "RouterIngress.set_nexthop",
                                                     [b"\x00\x03"])])
    session([lambda s, _: s.send_bm_mt_clear_entries(0, "RouterIngress.ipv4_lpm", False)])
    session([lambda s, _: s.send_bm_counter_read(0, "RouterIngress.port_rx", 1)])
    session([lambda s, _: s.send_bm_counter_write(0, "RouterIngress.port_rx", 1, BmCounterValue(5, 500))])
    session([lambda s, _: s.send_bm_counter_reset_all(0, "RouterIngress.port_rx")])
    session([lambda s, _: s.send_bm_register_read_all(0, "RouterIngress.port_rx"),
             lambda s, _: s.send_bm_mt_read_counter(0, "RouterIngress.nexthop", 0)])
    session([lambda s, _: s.send_bm_mgmt_get_info(), lambda s, _: s.send_bm_get_id_from_name(0, 0, "RouterIngress.nexthop")])
    session([lambda s, _: s.send_bm_dev_mgr_show_ports()])
    session([lambda s, _: s.send_bm_swap_configs()])
    session([lambda s, _: s.send_bm_reset_state()])
    session([lambda s, _: s.send_bm_mt_get_default_entry(0, "RouterIngress.nexthop")])
    session([lambda _, ss: ss.send_mirroring_session_get(1)])
    session([lambda _, ss: ss.send_set_egress_queue_depth(1, 64), lambda _, ss: ss.send_set_all_egress_queue_rates(1000)])
    session([lambda _, ss: ss.send_get_time_elapsed_us(), lambda _, ss: ss.send_get_time_since_epoch_us()])


# ------------------------------------------------------------------ P4Runtime (p4runtime-shell's messages)

def p4runtime_seeds():
    from google.protobuf import text_format
    from p4.v1 import p4runtime_pb2 as p4
    from p4.config.v1 import p4info_pb2

    def record(kind, msg):
        b = msg.SerializeToString()
        return struct.pack(">BH", kind, len(b)) + b

    def arbitration(election, role=""):
        m = p4.StreamMessageRequest()
        m.arbitration.device_id = 0
        m.arbitration.election_id.low = election
        if role:
            m.arbitration.role.name = role
        return m

    def write(updates, atomicity=0, election=1):
        w = p4.WriteRequest(device_id=0, atomicity=atomicity)
        w.election_id.low = election
        for typ, ent in updates:
            u = w.updates.add()
            u.type = typ
            u.entity.CopyFrom(ent)
        return w

    for pick, name in enumerate(["edge", "l2_learning"]):
        info = p4info_pb2.P4Info()
        with open(os.path.join(REPO, "examples", name + ".p4info.txtpb")) as f:
            text_format.Parse(f.read(), info)
        actions = {a.preamble.id: a for a in info.actions}
        entries = []
        for t in info.tables:
            e = p4.Entity()
            te = e.table_entry
            te.table_id = t.preamble.id
            for mf in t.match_fields:
                nbytes = (mf.bitwidth + 7) // 8
                value = bytes([10] + [0] * (nbytes - 2) + [1]) if mf.bitwidth % 8 == 0 and nbytes > 1 else b"\x01"
                fm = te.match.add()
                fm.field_id = mf.id
                if mf.match_type == p4info_pb2.MatchField.EXACT:
                    fm.exact.value = value
                elif mf.match_type == p4info_pb2.MatchField.LPM:
                    fm.lpm.value = value
                    fm.lpm.prefix_len = mf.bitwidth
                elif mf.match_type == p4info_pb2.MatchField.TERNARY:
                    fm.ternary.value = value
                    fm.ternary.mask = b"\xff" * nbytes
                    te.priority = 10
                elif mf.match_type == p4info_pb2.MatchField.OPTIONAL:
                    fm.optional.value = value
                    te.priority = 10
                else:
                    fm.range.low = b"\x00"
                    fm.range.high = value
                    te.priority = 10
            refs = [r.id for r in t.action_refs if r.scope != p4info_pb2.ActionRef.DEFAULT_ONLY]
            if t.implementation_id:
                te.action.action_profile_member_id = 1
            elif refs:
                a = actions[refs[-1]]
                te.action.action.action_id = a.preamble.id
                for p in a.params:
                    pp = te.action.action.params.add()
                    pp.param_id = p.id
                    pp.value = b"\x01"
            entries.append((t, e))
        members = {}
        for ap in info.action_profiles:
            m = p4.Entity()
            m.action_profile_member.action_profile_id = ap.preamble.id
            m.action_profile_member.member_id = 1
            t = [t for t in info.tables if t.preamble.id == ap.table_ids[0]][0]
            a = actions[[r.id for r in t.action_refs][-1]]
            m.action_profile_member.action.action_id = a.preamble.id
            for p in a.params:
                pp = m.action_profile_member.action.params.add()
                pp.param_id = p.id
                pp.value = b"\x02"
            members[ap.preamble.id] = m
        base = [record(0, arbitration(1))]
        seed = lambda recs: put("p4runtime_write", bytes([pick]) + b"".join(base + recs))
        for t, e in entries:
            pre = [(p4.Update.INSERT, members[t.implementation_id])] if t.implementation_id in members else []
            seed([record(2, write(pre + [(p4.Update.INSERT, e)]))])
            if pre:
                seed([record(2, write(pre)), record(2, write([(p4.Update.INSERT, e)])),
                      record(3, p4.ReadRequest(device_id=0, entities=[e]))])
                continue
            seed([record(2, write([(p4.Update.INSERT, e)])), record(2, write([(p4.Update.MODIFY, e)])),
                  record(3, p4.ReadRequest(device_id=0, entities=[e])),
                  record(2, write([(p4.Update.DELETE, e)]))])
            seed([record(2, write([(p4.Update.INSERT, e), (p4.Update.INSERT, e)], atomicity=2))])
            # A default entry: no match, the table's default action.
            d = p4.Entity()
            d.table_entry.table_id = t.preamble.id
            d.table_entry.is_default_action = True
            seed([record(2, write([(p4.Update.MODIFY, d)])), record(3, p4.ReadRequest(device_id=0, entities=[d]))])
        for ap in info.action_profiles:
            m = members[ap.preamble.id]
            g = p4.Entity()
            g.action_profile_group.action_profile_id = ap.preamble.id
            g.action_profile_group.group_id = 1
            g.action_profile_group.max_size = 4
            g.action_profile_group.members.add(member_id=1, weight=1)
            seed([record(2, write([(p4.Update.INSERT, m), (p4.Update.INSERT, g)])),
                  record(3, p4.ReadRequest(device_id=0, entities=[g]))])
        for c in info.meters:
            e = p4.Entity()
            e.meter_entry.meter_id = c.preamble.id
            e.meter_entry.index.index = 1
            e.meter_entry.config.cir = 100
            e.meter_entry.config.cburst = 10
            e.meter_entry.config.pir = 200
            e.meter_entry.config.pburst = 20
            seed([record(2, write([(p4.Update.MODIFY, e)])), record(3, p4.ReadRequest(device_id=0, entities=[e]))])
        for c in info.registers:
            e = p4.Entity()
            e.register_entry.register_id = c.preamble.id
            e.register_entry.index.index = 1
            e.register_entry.data.bitstring = b"\x07"
            seed([record(2, write([(p4.Update.MODIFY, e)])), record(3, p4.ReadRequest(device_id=0, entities=[e]))])
        for c in info.direct_counters:
            e = p4.Entity()
            e.direct_counter_entry.table_entry.table_id = c.direct_table_id
            seed([record(3, p4.ReadRequest(device_id=0, entities=[e]))])
        for d in info.digests:
            e = p4.Entity()
            e.digest_entry.digest_id = d.preamble.id
            e.digest_entry.config.max_timeout_ns = 0
            e.digest_entry.config.max_list_size = 1
            e.digest_entry.config.ack_timeout_ns = 1000000
            ack = p4.StreamMessageRequest()
            ack.digest_ack.digest_id = d.preamble.id
            ack.digest_ack.list_id = 1
            seed([record(2, write([(p4.Update.INSERT, e)])), record(0, ack)])
        for cpm in info.controller_packet_metadata:
            if cpm.preamble.name == "packet_out":
                po = p4.StreamMessageRequest()
                po.packet.payload = bytes(range(64))
                for md in cpm.metadata:
                    m = po.packet.metadata.add()
                    m.metadata_id = md.id
                    m.value = b"\x01"
                seed([record(0, po)])
        mc = p4.Entity()
        mc.packet_replication_engine_entry.multicast_group_entry.multicast_group_id = 1
        mc.packet_replication_engine_entry.multicast_group_entry.replicas.add(egress_port=1, instance=1)
        cs = p4.Entity()
        cs.packet_replication_engine_entry.clone_session_entry.session_id = 5
        cs.packet_replication_engine_entry.clone_session_entry.replicas.add(egress_port=2, instance=0)
        seed([record(2, write([(p4.Update.INSERT, mc), (p4.Update.INSERT, cs)])),
              record(3, p4.ReadRequest(device_id=0, entities=[mc, cs]))])
        # Two clients: a backup, then a new primary; the first one's stream closes.
        put("p4runtime_write", bytes([pick]) + b"".join(
            [record(0, arbitration(1)), record(1, arbitration(2)), record(2, write([], election=1)), record(5, p4.ReadRequest()),
             record(2, write([(p4.Update.INSERT, entries[0][1])], election=2))]))
        get = p4.GetForwardingPipelineConfigRequest(device_id=0, response_type=1)
        put("p4runtime_write", bytes([pick]) + record(4, get))


# ------------------------------------------------------------------ lwAFTR and pcap

def lwaftr_seeds():
    confs = set()
    cases = [d for d in dirs(os.path.join(SHARED, "lwaftr")) if os.path.exists(os.path.join(d, "lwaftr.conf"))]
    for d in cases:
        with open(os.path.join(d, "lwaftr.conf"), "rb") as f:
            c = f.read()
        if len(c) <= 8192 and c not in confs:
            confs.add(c)
            put("lwaftr_conf", c)
        for side, port in (("in-v4.pcap", 0), ("in-v6.pcap", 1)):
            p = os.path.join(d, side)
            if not os.path.exists(p):
                continue
            frames = [f for f in pcap_frames(p, 4) if b"\xff" not in f[:0]]
            if frames:
                # The selector: port in bits 1-2, not on a stick; frames separated by 0xff.
                put("lwaftr_plane", bytes([port << 1]) + b"\xff".join(frames[:2]))
            with open(p, "rb") as f:
                b = f.read()
            if len(b) <= 65536:
                put("pcap_file", b)
    return len(cases)


def main():
    n = p4_seeds()
    thrift_seeds()
    p4runtime_seeds()
    lw = lwaftr_seeds()
    for d in sorted(os.listdir(OUT)):
        print(f"{d}: {len(os.listdir(os.path.join(OUT, d)))} seeds")
    print(f"({n} P4 programs, {lw} lwAFTR cases)", file=sys.stderr)


if __name__ == "__main__":
    main()
