#!/usr/bin/env python3
"""500 connections held open on the P4Runtime port while p4runtime-shell works.

Proves, against a live server:
  * 500 TCP connections, each past the HTTP/2 connection preface and its
    SETTINGS frame (a gRPC client's first bytes), are accepted and held
    open: none is closed by the server while the others work;
  * beside them, p4runtime-shell pushes the router pipeline, inserts a
    route and reads it back;
  * after the 500 are closed, a new client is served again.
"""
import socket
import time

import common as c

HELD = 500
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])  # + empty SETTINGS


def still_open(s):
    """False when the server closed the connection (reads its end of stream)."""
    s.setblocking(False)
    try:
        while True:
            data = s.recv(65536)
            if not data:
                return False
    except BlockingIOError:
        return True
    except OSError:
        return False


def route(prefix, nexthop):
    te = sh.TableEntry("ipv4_lpm")(action="set_nexthop")
    te.match["hdr.ipv4.dst_addr"] = prefix
    te.action["id"] = str(nexthop)
    return te


def main(args):
    p4info, bmv2 = c.example(args, "router")
    host, _, port = args.addr.rpartition(":")
    c.step(f"open {HELD} connections past the HTTP/2 preface")
    held = []
    for _ in range(HELD):
        s = socket.create_connection((host, int(port)), timeout=5.0)
        s.sendall(PREFACE)
        held.append(s)
    c.at_exit(lambda: [s.close() for s in held])
    time.sleep(1.0)
    c.check(all(still_open(s) for s in held), "the server closed some of the held connections")

    c.step("p4runtime-shell beside them: pipeline, insert, read back")
    sh.setup(device_id=args.device_id, grpc_addr=args.addr, election_id=(0, c.election_base()),
             config=sh.FwdPipeConfig(p4info, bmv2), verbose=False)
    route("10.9.0.0/16", 7).insert()
    got = list(sh.TableEntry("ipv4_lpm").read())
    c.check(len(got) == 1 and got[0].msg().action.action.params[0].value == b"\x07",
            f"read back {len(got)} entries: {[str(e.msg()) for e in got]}")
    sh.teardown()
    open_now = sum(still_open(s) for s in held)
    c.check(open_now == HELD, f"{HELD - open_now} of the held connections were closed while the client worked")

    c.step("close them; a new client is served")
    for s in held:
        s.close()
    held.clear()
    sh.setup(device_id=args.device_id, grpc_addr=args.addr, election_id=(0, c.election_base() + 1),
             verbose=False)
    c.at_exit(sh.teardown)
    c.check(len(list(sh.TableEntry("ipv4_lpm").read())) == 1, "the route is gone after the connections closed")
    print(f"held {HELD} connections open while p4runtime-shell worked")


if __name__ == "__main__":
    _args = c.arg_parser(__doc__).parse_args()
    c.reexec_with("p4runtime_sh", "SLUICE_PY", ".venv")
    import p4runtime_sh.shell as sh  # noqa: E402 - after argparse so --help needs no clients
    c.run(main, _args)
