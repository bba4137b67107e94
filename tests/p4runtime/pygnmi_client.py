#!/usr/bin/env python3
"""One gNMI operation with pygnmi, its answer printed as JSON on stdout:
the other client of gnmi_ports.py (pygnmi and finsy register the same gNMI
schema under different file names, so they cannot share a process).

    pygnmi_client.py --addr HOST:PORT OPERATION [ARGS...]

Operations: capabilities; counters (every interface's counters, one Get in
JSON_IETF); get PATH; set-enabled INTERFACE true|false; once (the ports'
ids, Subscribe ONCE); poll N (N polls of s1's oper-status); error CASE
(the gRPC status code a refused request gets).
"""
import json
import re
import sys

import grpc
from pygnmi.client import gNMIclient

COUNTERS = "/interfaces/interface[name=*]/state/counters"

ERROR_CASES = {
    "unknown-path": lambda gc: gc.get(path=["/interfaces/interface/state/colour"]),
    "state-leaf": lambda gc: gc.set(update=[("/interfaces/interface[name=s1]/state/oper-status", "DOWN")]),
    "missing-interface": lambda gc: gc.set(update=[("/interfaces/interface[name=nope]/config/enabled", False)]),
}


def counters(gc):
    out = {}
    for n in gc.get(path=[COUNTERS], encoding="json_ietf")["notification"]:
        for u in n["update"]:
            m = re.search(r"interface\[name=([^\]]+)\]", u["path"])
            if m is None or not isinstance(u["val"], dict):
                raise SystemExit(f"unexpected update {u}")
            # JSON_IETF: 64-bit counters are strings.
            if not all(isinstance(v, str) for v in u["val"].values()):
                raise SystemExit(f"JSON_IETF counters not strings: {u['val']}")
            out[m.group(1)] = {k: int(v) for k, v in u["val"].items()}
    return out


def status_code(exc):
    e = exc
    while e is not None and not isinstance(e, grpc.RpcError):
        e = getattr(e, "orig_exc", None) or e.__cause__ or e.__context__
    return e.code().name if e is not None else repr(exc)


def main(argv):
    if len(argv) < 3 or argv[0] != "--addr":
        raise SystemExit(__doc__)
    host, port = argv[1].rsplit(":", 1)
    op, rest = argv[2], argv[3:]
    with gNMIclient(target=(host, int(port)), insecure=True) as gc:
        if op == "capabilities":
            out = gc.capabilities()
        elif op == "counters":
            out = counters(gc)
        elif op == "get":
            out = [(u["path"], u["val"]) for n in gc.get(path=[rest[0]])["notification"] for u in n["update"]]
        elif op == "set-enabled":
            out = gc.set(update=[(f"/interfaces/interface[name={rest[0]}]/config/enabled", rest[1] == "true")])
        elif op == "once":
            sub = gc.subscribe2(subscribe={"mode": "once", "encoding": "proto", "subscription": [
                {"path": "/interfaces/interface[name=*]/state/id", "mode": "target_defined"}]})
            out = list(sub)
        elif op == "poll":
            sub = gc.subscribe2(subscribe={"mode": "poll", "subscription": [
                {"path": "/interfaces/interface[name=s1]/state/oper-status"}]})
            out = [sub.get_update(60) for _ in range(int(rest[0]))]
            sub.close()
        elif op == "error":
            try:
                ERROR_CASES[rest[0]](gc)
                out = "accepted"
            except Exception as e:  # pygnmi wraps the gRPC error
                out = status_code(e)
        else:
            raise SystemExit(f"unknown operation {op}")
    # The answer is the last line (pygnmi prints errors on stdout too).
    print()
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main(sys.argv[1:])
