#!/usr/bin/env python3
"""Digests of l2_learning.p4 with the plain P4Runtime bindings.

Proves (spec 'DigestEntry', 'DigestList', 'DigestListAck'):
  * A DigestEntry (max_timeout_ns, max_list_size, ack_timeout_ns) is written
    and read back.
  * Five frames with new source MACs sent on --if1 produce DigestList messages
    on the primary's stream whose members are exactly the five (mac, port 1)
    structs, each list holding at most max_list_size = 3 digests, and the
    back-to-back burst batched (one list of 3); lists have distinct list_ids.
    The frames are flooded through multicast group 1 (written by this test)
    to port 2 and pruned from port 1.
  * Until a list is acknowledged, the same learned data does not produce a new
    digest (ack_timeout_ns); after the DigestListAck it does again.
  * The control plane closes the loop: with `learned` and `forwarding` entries
    installed, the known MAC raises no digest, a frame to it is forwarded to
    its port only, and the forwarding entry's direct counter counts it
    (spec 'DirectCounterEntry').
"""
import time

import common as c

MAX_TIMEOUT_NS = 500_000_000   # 0.5 s of buffering
MAX_LIST_SIZE = 3
ACK_TIMEOUT_NS = 30_000_000_000  # long: the dedup check must not race it
BROADCAST = b"\xff" * 6


def learner_mac(i):
    return bytes([0x02, 0x00, 0x00, 0xaa, 0x00, i])


def main(args):
    import grpc
    from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
    p4info_path, bmv2 = c.example(args, "l2_learning")
    p4info = c.p4info_from_file(p4info_path)
    dev, t = args.device_id, args.timeout
    election = c.election_base()
    digest_id = c.p4_id(p4info, "digests", "learn_t")
    INSERT = p4runtime_pb2.Update.INSERT

    def update(kind=INSERT):
        return p4runtime_pb2.Update(type=kind)

    digest_up = c.digest_insert(digest_id, MAX_TIMEOUT_NS, MAX_LIST_SIZE, ACK_TIMEOUT_NS)
    cfg = digest_up.entity.digest_entry
    flood_up = c.multicast_group_insert(1, (1, 2))

    def table_entry(up, table, *exact):
        te = up.entity.table_entry
        te.table_id = c.p4_id(p4info, "tables", table)
        for i, value in enumerate(exact, 1):
            te.match.add(field_id=i).exact.value = c.canonical_bytes(value)
        return te

    if args.dry_run:
        print(c.write_request(dev, election, [digest_up, flood_up]))
        return

    h1, h2 = c.open_ports(args)
    channel = grpc.insecure_channel(args.addr)
    c.at_exit(channel.close)
    stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
    stream = c.Stream(stub, "the primary's stream")
    stream.arbitrate(dev, election)
    upd = stream.expect("arbitration", t, "arbitration response").arbitration
    c.check(upd.status.code == 0, f"not primary: arbitration status {upd.status}")

    def write(*updates):
        stub.Write(c.write_request(dev, election, updates), timeout=t)

    def ack(dl):
        msg = p4runtime_pb2.StreamMessageRequest()
        msg.digest_ack.digest_id = dl.digest_id
        msg.digest_ack.list_id = dl.list_id
        stream.send(msg)

    def members(dl):
        """(mac, port) of each digest in a DigestList, after checking its shape."""
        c.check(dl.digest_id == digest_id, f"DigestList for digest id {dl.digest_id}, want {digest_id}")
        out = []
        for d in dl.data:
            c.check(d.WhichOneof("data") == "struct" and len(d.struct.members) == 2,
                    f"digest data is not a 2-member struct (learn_t): {d}")
            mac_d, port_d = d.struct.members
            out.append((mac_d.bitstring.rjust(6, b"\0"), int.from_bytes(port_d.bitstring, "big")))
        return out

    def frame(src, mark, dst=BROADCAST):
        return dst + src + b"\x88\xb5" + mark + b"~" * 40

    c.step("push l2_learning, configure the digest and the flood group")
    stub.SetForwardingPipelineConfig(c.pipeline_request(dev, election, p4info, bmv2), timeout=t)
    write(digest_up, flood_up)
    rd = p4runtime_pb2.ReadRequest(device_id=dev)
    rd.entities.add().digest_entry.digest_id = digest_id
    got = [e.digest_entry for r in stub.Read(rd, timeout=t) for e in r.entities]
    c.check(len(got) == 1 and got[0].config == cfg.config,
            f"DigestEntry read back: {got}, want config {cfg.config}")

    c.step("five new source MACs on port 1: digests batched by 3, frames flooded to port 2")
    macs = [learner_mac(i) for i in range(1, 6)]
    marks = [c.tag(f"learn{i}") for i in range(5)]
    h1.drain()
    h2.drain()
    for m, mk in zip(macs, marks):
        h1.send(frame(m, mk))
    for m, mk in zip(macs, marks):
        h2.expect(frame(m, mk), mk, t, "flooded frame on port 2")
    lists = []
    seen = []
    deadline_s = MAX_TIMEOUT_NS / 1e9 + t
    while len(seen) < len(macs):
        dl = stream.recv("digest", deadline_s)
        c.check(dl is not None, f"only {len(seen)} of {len(macs)} digests arrived: "
                                f"{[c.mac_str(x) for x, _ in seen]}")
        lists.append(dl.digest)
        seen += members(dl.digest)
        ack(dl.digest)
    for mk in marks:
        h1.expect_nothing(mk, 0.05, "flooded copy back out of the ingress port (egress prunes it)")
    sizes = [len(dl.data) for dl in lists]
    c.check(sorted(seen) == sorted((m, 1) for m in macs),
            f"digest members {[(c.mac_str(x), p) for x, p in seen]}, want the five MACs on port 1")
    c.check(max(sizes) <= MAX_LIST_SIZE, f"DigestList sizes {sizes} exceed max_list_size {MAX_LIST_SIZE}")
    c.check(MAX_LIST_SIZE in sizes, f"DigestList sizes {sizes}: five back-to-back digests with "
                                    f"max_list_size {MAX_LIST_SIZE} and a 0.5 s max_timeout were not batched")
    c.check(len({dl.list_id for dl in lists}) == len(lists), f"list ids repeat: {[dl.list_id for dl in lists]}")
    stream.expect_none("digest", MAX_TIMEOUT_NS / 1e9 + 0.3, "after all five digests")

    c.step("unacknowledged data is not digested again; after the ack it is")
    x = learner_mac(0x10)
    h1.send(frame(x, c.tag("x1")))
    dl = stream.expect("digest", deadline_s, "digest for a new MAC").digest
    c.check(members(dl) == [(x, 1)], f"digest {members(dl)}, want [({c.mac_str(x)}, 1)]")
    h1.send(frame(x, c.tag("x2")))
    stream.expect_none("digest", MAX_TIMEOUT_NS / 1e9 + 0.5,
                       "the same (mac, port) again before the DigestListAck (ack_timeout_ns 30 s)")
    ack(dl)
    time.sleep(0.3)  # acks are not acknowledged: give the server time to take it before the frame
    h1.send(frame(x, c.tag("x3")))
    dl = stream.expect("digest", deadline_s, "digest for the same MAC after the ack").digest
    c.check(members(dl) == [(x, 1)], f"digest after ack {members(dl)}, want [({c.mac_str(x)}, 1)]")
    ack(dl)

    c.step("learned MAC: no digest, unicast forwarding, direct counter")
    known = learner_mac(1)
    learned = update()
    te = table_entry(learned, "learned", known, b"\x01")
    te.action.action.action_id = c.p4_id(p4info, "actions", "known")
    fwd = update()
    te = table_entry(fwd, "forwarding", known)
    te.action.action.action_id = c.p4_id(p4info, "actions", "forward")
    te.action.action.params.add(param_id=1, value=b"\x01")
    write(learned, fwd)
    mk = c.tag("known")
    h1.send(frame(known, mk, dst=learner_mac(2)))  # source known on port 1, destination unknown
    h2.expect(frame(known, mk, dst=learner_mac(2)), mk, t, "flooded frame from the learned MAC")
    stream.expect_none("digest", MAX_TIMEOUT_NS / 1e9 + 0.3, "frame from a MAC already in `learned`")
    mk = c.tag("unicast")
    other = learner_mac(0x20)
    h2.send(frame(other, mk, dst=known))
    h1.expect(frame(other, mk, dst=known), mk, t, "frame to the learned MAC, forwarded to port 1")
    dl = stream.expect("digest", deadline_s, "digest for the new MAC on port 2").digest
    c.check(members(dl) == [(other, 2)], f"digest {members(dl)}, want [({c.mac_str(other)}, 2)]")
    ack(dl)
    rd = p4runtime_pb2.ReadRequest(device_id=dev)
    dce = rd.entities.add().direct_counter_entry
    dce.table_entry.CopyFrom(fwd.entity.table_entry)
    dce.table_entry.ClearField("action")
    got = [e.direct_counter_entry.data.packet_count for r in stub.Read(rd, timeout=t) for e in r.entities]
    c.check(got == [1], f"direct counter of the forwarding entry: {got}, want [1] (one frame forwarded)")


if __name__ == "__main__":
    _args = c.arg_parser(__doc__).parse_args()
    c.reexec_with("p4runtime_sh", "SLUICE_PY", ".venv")
    c.run(main, _args)
