#!/usr/bin/env python3
"""P4Runtime 1.4 roles with role configurations in Stratum's format
(stratum.P4RoleConfig), edge.p4, plain bindings over grpc.

Proves (spec 'Role Config', Stratum's P4 role configuration):
  * each role has its own primary: the default role's client and the
    clients of roles "acl" and "mon" are all primaries at once;
  * a role's configuration limits its writes to its P4 ids (another
    table: PERMISSION_DENIED per update), an id exclusive to a role is
    refused to every other role, the default one included, and hidden
    from their wildcard reads; a role reads only its ids;
  * a role whose configuration says can_push_pipeline false cannot set
    the pipeline;
  * each PacketIn goes to the primary of every role that receives it: the
    default role all of them, "acl" only those its filter (metadata
    ingress_port = 1) matches, "mon" (receives_packet_ins false) none;
  * a configuration of another type, or claiming an id another role has
    exclusively, is refused with INVALID_ARGUMENT.
"""
import common as c

IPV4 = 0x0800


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(num, wire, payload):
    key = varint(num << 3 | wire)
    return key + (varint(payload) if wire == 0 else varint(len(payload)) + payload)


def role_config(exclusive=(), shared=(), filt=None, receives=False, push=False):
    """stratum.P4RoleConfig's wire form (fields 1-5), built by hand."""
    b = b""
    if exclusive:
        b += field(1, 2, b"".join(varint(i) for i in exclusive))
    if shared:
        b += field(2, 2, b"".join(varint(i) for i in shared))
    if filt is not None:
        b += field(3, 2, field(1, 0, filt[0]) + field(2, 2, filt[1]))
    if receives:
        b += field(4, 0, 1)
    if push:
        b += field(5, 0, 1)
    return b


def main(args):
    import grpc
    from google.rpc import code_pb2
    from p4.v1 import p4runtime_pb2_grpc as pg
    from p4.v1 import p4runtime_pb2 as pb

    t = 30.0
    dev = args.device_id
    p4info_path, bmv2 = c.example(args, "edge")
    p4info = c.p4info_from_file(p4info_path)
    acl = c.p4_id(p4info, "tables", "acl")
    routes = c.p4_id(p4info, "tables", "routes")
    punt = c.p4_id(p4info, "actions", "punt")
    channel = grpc.insecure_channel(args.addr)
    stub = pg.P4RuntimeStub(channel)
    h1, h2 = c.open_ports(args)
    base = c.election_base()

    def client(name, role=None, config=None, type_url="type.googleapis.com/stratum.P4RoleConfig", election=1):
        s = c.Stream(stub, name)
        req = pb.StreamMessageRequest()
        req.arbitration.device_id = dev
        c.set_uint128(req.arbitration.election_id, election)
        if role is not None:
            req.arbitration.role.name = role
            if config is not None:
                req.arbitration.role.config.type_url = type_url
                req.arbitration.role.config.value = config
        s.send(req)
        return s

    def acl_entry(port, priority):
        u = pb.Update(type=pb.Update.INSERT)
        te = u.entity.table_entry
        te.table_id = acl
        te.priority = priority
        m = te.match.add()
        m.field_id = 1
        m.ternary.value = bytes([port])
        m.ternary.mask = b"\x01\xff"
        te.action.action.action_id = punt
        return u

    def route_entry():
        u = pb.Update(type=pb.Update.INSERT)
        te = u.entity.table_entry
        te.table_id = routes
        m = te.match.add()
        m.field_id = 1
        m.lpm.value = bytes([10, 7, 0, 0])
        m.lpm.prefix_len = 16
        # routes is an action selector's table: a one-shot action set.
        te.action.action_profile_action_set.action_profile_actions.add(weight=1).action.action_id = \
            c.p4_id(p4info, "actions", "drop")
        return u

    def write(role, election, updates):
        req = c.write_request(dev, election, updates)
        req.role = role
        return stub.Write(req, timeout=t)

    def denied_per_update(role, election, updates, what):
        exc = c.expect_rpc_error(lambda: write(role, election, updates), (grpc.StatusCode.UNKNOWN,), what)
        st = c.status_details(exc)
        codes = []
        for d in st.details:
            e = pb.Error()
            d.Unpack(e)
            codes.append(e.canonical_code)
        c.check(codes == [code_pb2.PERMISSION_DENIED] * len(updates), f"{what}: per-update codes {codes}")
        return exc

    c.step("three roles, three primaries")
    main_role = client("default", election=base + 10)
    c.check(main_role.expect("arbitration", t, "default role").arbitration.status.code == code_pb2.OK,
            "the default role's client is not primary")
    stub.SetForwardingPipelineConfig(c.pipeline_request(dev, base + 10, p4info, bmv2), timeout=t)
    acl_role = client("acl", "acl", role_config(exclusive=[acl], filt=(1, b"\x01"), receives=True))
    mon_role = client("mon", "mon", role_config(shared=[routes]))
    for s in (acl_role, mon_role):
        a = s.expect("arbitration", t, s.name).arbitration
        c.check(a.status.code == code_pb2.OK and a.role.name == s.name, f"{s.name}: {a}")

    c.step("writes limited to each role's ids; an exclusive id refused to the others")
    write("acl", 1, [acl_entry(1, 10), acl_entry(2, 20)])
    denied_per_update("acl", 1, [route_entry()], "role acl writing routes")
    denied_per_update("", base + 10, [acl_entry(3, 30)], "the default role writing acl (exclusive to acl)")
    denied_per_update("mon", 1, [acl_entry(3, 30)], "role mon writing acl")
    write("mon", 1, [route_entry()])

    c.step("reads limited to each role's ids")

    def tables_read(role):
        rd = pb.ReadRequest(device_id=dev, role=role)
        rd.entities.add().table_entry.table_id = 0
        return sorted({e.table_entry.table_id for r in stub.Read(rd, timeout=t) for e in r.entities
                       if not e.table_entry.is_default_action})

    c.check(tables_read("acl") == [acl], f"role acl reads tables {tables_read('acl')}, want only acl")
    c.check(acl not in tables_read(""), "the default role reads the acl entries exclusive to role acl")
    c.check(tables_read("mon") == [routes], f"role mon reads tables {tables_read('mon')}, want only routes")

    c.step("can_push_pipeline false: no pipeline from role acl")
    req = c.pipeline_request(dev, 1, p4info, bmv2)
    req.role = "acl"
    c.expect_rpc_error(lambda: stub.SetForwardingPipelineConfig(req, timeout=t),
                       (grpc.StatusCode.PERMISSION_DENIED,), "SetForwardingPipelineConfig from role acl")

    c.step("PacketIns to each role's primary that receives them")
    marks = {}
    for port, h in ((1, h1), (2, h2)):
        marks[port] = c.tag(f"role-punt{port}")
        h.send(c.udp_ipv4_frame(c.mac("02:00:00:00:00:fe"), h.mac, "10.0.1.1", "10.0.2.2", 1, 5000,
                                marks[port] + b"." * 20))

    def punted(stream, n):
        got = []
        for _ in range(n):
            m = stream.recv("packet", t)
            if m is None:
                break
            got.append(next(p for p, mk in marks.items() if mk in m.packet.payload))
        return sorted(got)

    c.check(punted(main_role, 2) == [1, 2], "the default role's primary did not get both PacketIns")
    c.check(punted(acl_role, 1) == [1], "role acl's primary did not get the PacketIn from port 1")
    acl_role.expect_none("packet", 1.0, "role acl (filter ingress_port = 1)")
    mon_role.expect_none("packet", 0.5, "role mon (receives_packet_ins false)")

    c.step("configurations refused: another type, an id exclusive to another role")
    bad = client("bad-type", "x", b"", type_url="type.googleapis.com/p4.v1.Role")
    bad.ended.wait(t)
    c.check(bad.error is not None and bad.error.code() == grpc.StatusCode.INVALID_ARGUMENT,
            f"a role config of another type: {bad.error}")
    clash = client("clash", "y", role_config(exclusive=[acl]))
    clash.ended.wait(t)
    c.check(clash.error is not None and clash.error.code() == grpc.StatusCode.INVALID_ARGUMENT
            and "exclusive" in clash.error.details(), f"a clashing exclusive id: {clash.error}")


if __name__ == "__main__":
    _args = c.arg_parser(__doc__).parse_args()
    c.reexec_with("p4runtime_sh", "SLUICE_PY", ".venv")
    c.run(main, _args)
