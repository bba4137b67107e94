#!/usr/bin/env python3
"""Client arbitration with the plain P4Runtime bindings (p4.v1.p4runtime_pb2 + grpc).

Proves (spec 5 'Client Arbitration and Controller Replication'; 5.3 'Rules for
Handling MasterArbitrationUpdate Messages'; 5.4 'Client Arbitration
Notifications'):
  * Client A (election id E+1) connects alone: its arbitration response has
    status OK. Client B (E+2) connects: B gets OK, A is told of the new
    primary with ALREADY_EXISTS and election_id E+2.
  * Only the primary may SetForwardingPipelineConfig and Write: A's requests,
    a Write carrying an election id nobody holds and one carrying none are
    refused with PERMISSION_DENIED; B's succeed; A may still Read.
  * A third client claiming B's election id is cut off with INVALID_ARGUMENT.
  * B disconnects: A is notified. Per the spec (default, --arbitration spec)
    the notification says NOT_FOUND (no primary; the primary is the highest id
    ever seen, E+2, and A holds less), A's Write is still refused, and A becomes
    primary (OK) by re-arbitrating with a higher id, after which its Write works.
    With --arbitration pi (older PI/bmv2 behaviour) A is told OK at once.
E is the clock (see common.election_base): the classic election ids (0,1) and
(0,2), shifted above anything an earlier script used against the same server.
"""
import common as c


def nexthop_update(p4info, update_type, nh, port):
    from p4.v1 import p4runtime_pb2
    up = p4runtime_pb2.Update(type=update_type)
    te = up.entity.table_entry
    te.table_id = c.p4_id(p4info, "tables", "nexthop")
    te.match.add(field_id=1).exact.value = nh.to_bytes(2, "big").lstrip(b"\0") or b"\0"
    act = te.action.action
    act.action_id = c.p4_id(p4info, "actions", "forward")
    act.params.add(param_id=1, value=bytes([port]))
    act.params.add(param_id=2, value=c.mac("02:00:00:00:00:01"))
    act.params.add(param_id=3, value=c.mac("02:00:00:00:00:02"))
    return up


def main(args):
    import re

    import grpc
    from google.rpc import code_pb2
    from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
    p4info_path, bmv2 = c.example(args, "router")
    p4info = c.p4info_from_file(p4info_path)
    dev = args.device_id
    base = c.election_base()
    e_a, e_b = base + 1, base + 2
    INSERT = p4runtime_pb2.Update.INSERT
    if args.dry_run:
        print(c.pipeline_request(dev, e_b, p4info, bmv2).config.p4info.pkg_info)
        print(c.write_request(dev, e_a, [nexthop_update(p4info, INSERT, 1, 2)]))
        return
    channel = grpc.insecure_channel(args.addr)
    c.at_exit(channel.close)
    stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
    t = args.timeout
    denied = (grpc.StatusCode.PERMISSION_DENIED,)

    def arbitration(stream, what):
        return stream.expect("arbitration", t, what).arbitration

    def check_update(upd, code, election, what):
        got = (code_pb2.Code.Name(upd.status.code), c.uint128(upd.election_id))
        c.check(got == (code_pb2.Code.Name(code), election) and upd.device_id == dev,
                f"{what}: arbitration update (status, election_id) = {got}, device {upd.device_id}; "
                f"want ({code_pb2.Code.Name(code)}, {election}), device {dev}")

    def write(election, nh):
        stub.Write(c.write_request(dev, election, [nexthop_update(p4info, INSERT, nh, 2)]), timeout=t)

    c.step("client A connects alone: primary")
    a = c.Stream(stub, "client A")
    a.arbitrate(dev, e_a)
    check_update(arbitration(a, "A's arbitration response"), code_pb2.OK, e_a, "A alone")

    c.step("client B with a higher election id: B primary, A told ALREADY_EXISTS")
    b = c.Stream(stub, "client B")
    b.arbitrate(dev, e_b)
    check_update(arbitration(b, "B's arbitration response"), code_pb2.OK, e_b, "B")
    check_update(arbitration(a, "notification to A of the new primary"), code_pb2.ALREADY_EXISTS,
                 e_b, "A after B took over")

    c.step("only the primary may set the pipeline and write")
    c.expect_rpc_error(lambda: stub.SetForwardingPipelineConfig(
        c.pipeline_request(dev, e_a, p4info, bmv2), timeout=t), denied,
        "SetForwardingPipelineConfig from backup A")
    stub.SetForwardingPipelineConfig(c.pipeline_request(dev, e_b, p4info, bmv2), timeout=t)
    write(e_b, 1)
    c.expect_rpc_error(lambda: write(e_a, 2), denied, "Write from backup A")
    c.expect_rpc_error(lambda: write(e_b + 100, 3), denied, "Write with an election id nobody holds")
    c.expect_rpc_error(lambda: stub.Write(p4runtime_pb2.WriteRequest(
        device_id=dev, updates=[nexthop_update(p4info, INSERT, 4, 2)]), timeout=t), denied,
        "Write without an election id")
    req = p4runtime_pb2.ReadRequest(device_id=dev)
    req.entities.add().table_entry.table_id = c.p4_id(p4info, "tables", "nexthop")
    got = [e.table_entry.match[0].exact.value for r in stub.Read(req, timeout=t) for e in r.entities]
    c.check(got == [b"\x01"], f"Read (any client may read) of nexthop: match values {got}, want "
                              "[b'\\x01'] (only the primary's write)")

    c.step("a third client claiming B's election id is refused")
    dup = c.Stream(stub, "client C (B's election id)")
    dup.arbitrate(dev, e_b)
    c.check(dup.ended.wait(t), "the server kept the stream of a client reusing a live election id")
    c.check(dup.error is not None and dup.error.code() == grpc.StatusCode.INVALID_ARGUMENT,
            f"stream with a duplicate election id ended with {dup.error and c.rpc_code_name(dup.error)}"
            ", want INVALID_ARGUMENT")
    # Controllers tell this refusal from others by its words, as bmv2 and
    # Stratum word it ("Election id already exists", "Election ID is already
    # used ..."): a backup that meets it picks another id.
    c.check(re.search(r"election id .*\b(?:used|exists)\b", dup.error.details() or "", re.IGNORECASE) is not None,
            f"the duplicate election id's refusal reads {dup.error.details()!r}, not as bmv2 or Stratum word it")

    c.step("primary B disconnects: A is notified")
    b.close()
    upd = arbitration(a, "notification to A after B disconnected")
    if args.arbitration == "pi":
        check_update(upd, code_pb2.OK, e_a, "A after B left (PI behaviour)")
        write(e_a, 5)
        return
    check_update(upd, code_pb2.NOT_FOUND, e_b, "A after B left (no primary; highest id seen is B's)")
    c.expect_rpc_error(lambda: write(e_a, 5), denied, "Write from A while there is no primary")

    c.step("A re-arbitrates above the highest id seen: primary, and its writes work")
    e_a2 = e_b + 1
    a.arbitrate(dev, e_a2)
    check_update(arbitration(a, "A's response to its new election id"), code_pb2.OK, e_a2, "A re-arbitrated")
    write(e_a2, 6)
    c.expect_rpc_error(lambda: write(e_a, 7), denied, "Write with A's old election id")


if __name__ == "__main__":
    _p = c.arg_parser(__doc__)
    _p.add_argument("--arbitration", choices=("spec", "pi"), default="spec",
                    help="what to expect when the primary leaves: 'spec' (P4Runtime 1.3+: backups "
                         "told NOT_FOUND) or 'pi' (older PI: next-highest live client becomes primary)")
    _args = _p.parse_args()
    c.reexec_with("p4runtime_sh", "SLUICE_PY", ".venv")
    c.run(main, _args)
