#!/usr/bin/env python3
"""Malformed and hostile requests with plain grpc: the server refuses them and keeps serving.

Proves:
  * A Write whose body is not a valid protobuf is refused with
    INVALID_ARGUMENT (a malformed request, not a server failure: gRPC
    libraries such as tonic answer INTERNAL by default).
  * A request bigger than the server's maximum receive size (default 65 MiB;
    --oversize-mib) is refused with RESOURCE_EXHAUSTED (gRPC's code for a
    message over the limit; tonic's default answer is OUT_OF_RANGE).
  * A failed batch of 60 updates carries one p4.v1.Error per update; one of
    300 (whose every detail would exceed the trailer size gRPC clients
    accept) carries the first updates' details up to a failure, that last
    one noting how many of the rest failed, and a message naming each
    failed update by index.
  * A Write batch [valid INSERT, INSERT into an unknown table id] fails with
    the batch error format of spec 'Error Reporting Messages': gRPC
    status UNKNOWN, google.rpc.Status details holding one p4.v1.Error per
    update, OK for the first and an error (NOT_FOUND / INVALID_ARGUMENT) for
    the second; the valid update was applied (default atomicity
    CONTINUE_ON_ERROR, spec 'Batching and Ordering of Updates').
  * A Read of an unknown table id is refused (NOT_FOUND / INVALID_ARGUMENT).
  * Afterwards Capabilities still answers with a version string and the
    primary's stream is still open.
"""
import re

import common as c

UNKNOWN_TABLE_ID = 0x02FFFFFF  # table prefix 0x02, not in router.p4's P4Info


def varint(n):
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def main(args):
    import grpc
    from google.rpc import code_pb2
    from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
    p4info_path, bmv2 = c.example(args, "router")
    p4info = c.p4info_from_file(p4info_path)
    dev, t = args.device_id, args.timeout
    election = c.election_base()
    INSERT = p4runtime_pb2.Update.INSERT

    def nexthop_insert(table_id, nh):
        up = p4runtime_pb2.Update(type=INSERT)
        te = up.entity.table_entry
        te.table_id = table_id
        te.match.add(field_id=1).exact.value = bytes([nh])
        te.action.action.action_id = c.p4_id(p4info, "actions", "drop")
        return up

    nexthop_id = c.p4_id(p4info, "tables", "nexthop")
    batch = c.write_request(dev, election, [nexthop_insert(nexthop_id, 9),
                                            nexthop_insert(UNKNOWN_TABLE_ID, 10)])
    garbage = [
        b"\x0a\xff\xff\xff\xff\x0f\x01",  # field 1, length-delimited, length far past the end
        b"\x07\x01\x02\x03",              # field 0 with wire type 7: no such thing
    ]
    if args.dry_run:
        print(batch)
        for g in garbage:
            try:
                p4runtime_pb2.WriteRequest.FromString(g)
                raise AssertionError(f"garbage {g.hex()} parses as a WriteRequest")
            except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError
                if isinstance(exc, AssertionError):
                    raise
                print(f"garbage {g.hex()}: {type(exc).__name__}: {exc}")
        return

    channel = grpc.insecure_channel(args.addr, options=[("grpc.max_send_message_length", -1),
                                                        ("grpc.max_receive_message_length", -1)])
    c.at_exit(channel.close)
    stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
    raw_write = channel.unary_unary("/p4.v1.P4Runtime/Write")  # bytes in, bytes out

    c.step("undecodable Write bodies")
    for g in garbage:
        c.expect_rpc_error(lambda: raw_write(g, timeout=t),
                           (grpc.StatusCode.INVALID_ARGUMENT,),
                           f"Write with body {g.hex()}")

    c.step(f"a {args.oversize_mib} MiB Write")
    n = args.oversize_mib << 20
    huge = b"\x22" + varint(n) + bytes(n)  # one 'updates' field of n zero bytes
    try:
        raw_write(huge, timeout=max(t, 30))
        raise AssertionError(f"a {args.oversize_mib} MiB Write succeeded; want RESOURCE_EXHAUSTED "
                             "(raise --oversize-mib above the server's limit if it is larger)")
    except grpc.RpcError as exc:
        hint = (" (tonic's default for a too-large message is OUT_OF_RANGE; gRPC's status code "
                "table names RESOURCE_EXHAUSTED for it)" if exc.code() == grpc.StatusCode.OUT_OF_RANGE else "")
        c.check(exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{args.oversize_mib} MiB Write: got {exc.code().name} ({exc.details()}), "
                f"want RESOURCE_EXHAUSTED{hint}")
    del huge

    c.step("become primary and push router.p4")
    stream = c.Stream(stub, "the primary's stream")
    stream.arbitrate(dev, election)
    upd = stream.expect("arbitration", t, "arbitration response").arbitration
    c.check(upd.status.code == code_pb2.OK, f"not primary: arbitration status {upd.status}")
    stub.SetForwardingPipelineConfig(c.pipeline_request(dev, election, p4info, bmv2), timeout=t)

    c.step("batch [valid insert, insert into unknown table]: UNKNOWN with per-update errors")
    exc = c.expect_rpc_error(lambda: stub.Write(batch, timeout=t), (grpc.StatusCode.UNKNOWN,),
                             "Write batch with an unknown table id")
    st = c.status_details(exc)
    c.check(st is not None, "the error carries no grpc-status-details-bin (google.rpc.Status)")
    c.check(st.code == code_pb2.UNKNOWN, f"google.rpc.Status code {st.code}, want UNKNOWN (2)")
    errors = []
    for detail in st.details:
        err = p4runtime_pb2.Error()
        c.check(detail.Unpack(err), f"a detail is not a p4.v1.Error: {detail.type_url}")
        errors.append(err)
    codes = [code_pb2.Code.Name(e.canonical_code) for e in errors]
    c.check(len(errors) == 2, f"{len(errors)} p4.v1.Error details ({codes}), want one per update (2)")
    c.check(codes[0] == "OK" and codes[1] in ("NOT_FOUND", "INVALID_ARGUMENT"),
            f"per-update codes {codes}, want [OK, NOT_FOUND or INVALID_ARGUMENT]")
    c.check(errors[1].message != "", "the failed update's p4.v1.Error has no message")
    rd = p4runtime_pb2.ReadRequest(device_id=dev)
    rd.entities.add().table_entry.table_id = nexthop_id
    got = [e.table_entry.match[0].exact.value for r in stub.Read(rd, timeout=t) for e in r.entities]
    c.check(got == [b"\x09"], f"nexthop entries after the batch: {got}, want the valid one ([b'\\x09'])")

    c.step("Read of an unknown table id")
    rd = p4runtime_pb2.ReadRequest(device_id=dev)
    rd.entities.add().table_entry.table_id = UNKNOWN_TABLE_ID
    c.expect_rpc_error(lambda: list(stub.Read(rd, timeout=t)),
                       (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT),
                       "Read of an unknown table id")

    def batch_of(n, failing):
        ups = []
        for i in range(n):
            up = nexthop_insert(UNKNOWN_TABLE_ID if i in failing else nexthop_id, 0)
            up.entity.table_entry.match[0].exact.value = c.canonical_bytes((n * 100 + i).to_bytes(2, "big"))
            ups.append(up)
        return c.write_request(dev, election, ups)

    c.step("a batch of 60 updates, 2 failing: one p4.v1.Error per update")
    exc = c.expect_rpc_error(lambda: stub.Write(batch_of(60, (5, 59)), timeout=t), (grpc.StatusCode.UNKNOWN,),
                             "Write batch of 60 with 2 failures")
    st = c.status_details(exc)
    c.check(st is not None, "the 60-update batch's error carries no google.rpc.Status details")
    codes = []
    for detail in st.details:
        err = p4runtime_pb2.Error()
        c.check(detail.Unpack(err), f"a detail is not a p4.v1.Error: {detail.type_url}")
        codes.append(err.canonical_code)
    c.check(len(codes) == 60 and [i for i, k in enumerate(codes) if k != code_pb2.OK] == [5, 59],
            f"per-update codes of the 60-update batch: {codes}")

    c.step("a batch of 300 updates, 3 failing: the first details up to a failure, a note on the rest")
    exc = c.expect_rpc_error(lambda: stub.Write(batch_of(300, (7, 150, 299)), timeout=t),
                             (grpc.StatusCode.UNKNOWN,), "Write batch of 300 with 3 failures")
    msg = exc.details()
    c.check("3 of 300 updates failed" in msg and all(f"#{i} " in msg for i in (7, 150, 299)),
            f"the 300-update batch's message: {msg!r}")
    st = c.status_details(exc)
    c.check(st is not None, "the 300-update batch's error carries no google.rpc.Status details")
    errs = []
    for detail in st.details:
        err = p4runtime_pb2.Error()
        c.check(detail.Unpack(err), f"a detail is not a p4.v1.Error: {detail.type_url}")
        errs.append(err)
    # The first updates in order, up to a failure that fits; its note counts the rest.
    failed_at = [i for i, e in enumerate(errs) if e.canonical_code != code_pb2.OK]
    k = len(errs) - 1
    listed = [i for i in (7, 150, 299) if i <= k]
    c.check(k in (7, 150) and failed_at == listed, f"details: {len(errs)}, failed at {failed_at}")
    rest = 3 - len(listed)
    c.check(f"updates #{k + 1} to #299 are not listed" in errs[k].message
            and f"{rest} of them failed" in errs[k].message, f"the last detail: {errs[k].message!r}")

    c.step("the server still serves")
    caps = stub.Capabilities(p4runtime_pb2.CapabilitiesRequest(), timeout=t)
    c.check(re.fullmatch(r"1\.\d+\.\d+.*", caps.p4runtime_api_version) is not None,
            f"Capabilities p4runtime_api_version {caps.p4runtime_api_version!r}, want 1.x.y")
    c.check(not stream.ended.is_set(), f"the primary's stream ended: {stream.error}")


if __name__ == "__main__":
    _p = c.arg_parser(__doc__)
    _p.add_argument("--oversize-mib", type=int, default=65,
                    help="size of the oversized Write in MiB; must exceed the server's maximum "
                         "receive message size (default %(default)s)")
    _args = _p.parse_args()
    c.reexec_with("p4runtime_sh", "SLUICE_PY", ".venv")
    c.run(main, _args)
