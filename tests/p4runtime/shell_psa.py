#!/usr/bin/env python3
"""A PSA program driven by p4runtime-shell: pipeline, table entries, PRE.

Proves, against a live server:
  * SetForwardingPipelineConfig takes the P4Info and the JSON p4c-bm2-psa
    emits (p4c's psa-metadata test program), and GetForwardingPipelineConfig
    gives the P4Info back.
  * INSERT, single-entry and wildcard Read, MODIFY and DELETE of an exact
    entry of the PSA program's table `ingress.match_meta`.
  * MulticastGroupEntry and CloneSessionEntry (PSA's clone sessions) insert,
    read and delete.
"""
import os

import common as c


def entry(field, port):
    te = sh.TableEntry("ingress.match_meta")(action="ingress.set_output")
    te.match["user_meta.field"] = str(field)
    te.action["port"] = str(port)
    return te


def key_and_port(te):
    """(the exact key, the action's port) of a TableEntry read back, as integers."""
    m = te.msg()
    return (int.from_bytes(m.match[0].exact.value, "big"),
            int.from_bytes(m.action.action.params[0].value, "big"))


def main(args):
    p4info = os.path.join(args.program, "psa-metadata-bmv2.p4info.txtpb")
    bmv2 = os.path.join(args.program, "psa-metadata-bmv2.json")
    for f in (p4info, bmv2):
        c.check(os.path.isfile(f), f"missing program file {f}")
    c.step("connect and push the PSA pipeline")
    sh.setup(device_id=args.device_id, grpc_addr=args.addr, election_id=(0, c.election_base()),
             config=sh.FwdPipeConfig(p4info, bmv2), verbose=False)
    c.at_exit(sh.teardown)
    c.check(sh.client.get_p4info() == c.p4info_from_file(p4info),
            "GetForwardingPipelineConfig returned a P4Info different from the one pushed")

    c.step("table entries: insert, read, modify, delete")
    entry(5, 2).insert()
    entry(6, 3).insert()
    got = sorted(key_and_port(e) for e in sh.TableEntry("ingress.match_meta").read())
    c.check(got == [(5, 2), (6, 3)], f"wildcard read of ingress.match_meta: {got}")
    entry(5, 4).modify()
    one = sh.TableEntry("ingress.match_meta")
    one.match["user_meta.field"] = "5"
    got = [key_and_port(e) for e in one.read()]
    c.check(got == [(5, 4)], f"read of field 5 after MODIFY: {got}")
    entry(5, 4).delete()
    got = [key_and_port(e) for e in sh.TableEntry("ingress.match_meta").read()]
    c.check(got == [(6, 3)], f"read after DELETE of field 5: {got}")

    c.step("multicast group and clone session: insert, read, delete")
    sh.MulticastGroupEntry(7).add(1, 0).add(2, 1).insert()
    got = [(g.group_id, len(g.replicas)) for g in sh.MulticastGroupEntry(7).read()]
    c.check(got == [(7, 2)], f"read of multicast group 7: {got}")
    sh.CloneSessionEntry(5).add(2, 0).insert()
    got = [(s.session_id, len(s.replicas)) for s in sh.CloneSessionEntry(5).read()]
    c.check(got == [(5, 1)], f"read of clone session 5: {got}")
    sh.CloneSessionEntry(5).delete()
    sh.MulticastGroupEntry(7).delete()
    c.check(not list(sh.CloneSessionEntry().read()), "clone session 5 read back after DELETE")


if __name__ == "__main__":
    _p = c.arg_parser(__doc__)
    _p.add_argument("--program", required=True, help="directory of p4c's psa-metadata-bmv2 test")
    _args = _p.parse_args()
    c.reexec_with("p4runtime_sh", "SLUICE_PY", ".venv")
    import p4runtime_sh.shell as sh  # noqa: E402 - after argparse so --help needs no clients
    c.run(main, _args)
