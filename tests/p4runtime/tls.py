#!/usr/bin/env python3
"""P4Runtime over TLS (simple_switch_grpc -- --grpc-server-ssl
--grpc-server-cert/--grpc-server-key, --grpc-server-with-client-auth
--grpc-server-cacert), with p4runtime-shell's own TLS options:

  * a client with the CA and a certificate it signed sets the router
    pipeline, writes a route and reads it back;
  * a client that trusts the CA but shows no certificate is refused, and so
    is a plaintext client.

  tls.py --addr 127.0.0.1:9559 --examples examples --certs DIR
DIR holds ca.pem and the client's ctl.pem and ctl.key.
"""
import argparse
import os
import sys

import grpc
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

import common as c

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("--addr", default="127.0.0.1:9559")
p.add_argument("--examples", default="examples")
p.add_argument("--certs", required=True)
p.add_argument("--if1", default=None)
p.add_argument("--if2", default=None)
a = p.parse_args()

from p4runtime_sh import shell as sh  # noqa: E402
from p4runtime_sh.p4runtime import SSLOptions  # noqa: E402


def cert(name):
    return os.path.join(a.certs, name)


c.step("p4runtime-shell over TLS with a client certificate: pipeline, a route, read back")
p4info, bmv2 = c.example(a, "router")
sh.setup(device_id=0, grpc_addr=a.addr, election_id=(0, 1),
         config=sh.FwdPipeConfig(p4info, bmv2),
         ssl_options=SSLOptions(False, cert("ca.pem"), cert("ctl.pem"), cert("ctl.key")))
te = sh.TableEntry("ipv4_lpm")(action="set_nexthop")
te.match["hdr.ipv4.dst_addr"] = "10.9.0.0/16"
te.action["id"] = "2"
te.insert()
got = list(sh.TableEntry("ipv4_lpm").read())
c.check(len(got) == 1, f"read back over TLS: {got}")
sh.teardown()


def capabilities(channel):
    stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
    try:
        stub.Capabilities(p4runtime_pb2.CapabilitiesRequest(), timeout=30)
    except grpc.RpcError as e:
        return e.code()
    return grpc.StatusCode.OK


c.step("a client without a certificate is refused")
with open(cert("ca.pem"), "rb") as f:
    ca = f.read()
code = capabilities(grpc.secure_channel(a.addr, grpc.ssl_channel_credentials(root_certificates=ca)))
c.check(code == grpc.StatusCode.UNAVAILABLE, f"no client certificate: {code}")

c.step("a plaintext client is refused")
code = capabilities(grpc.insecure_channel(a.addr))
c.check(code == grpc.StatusCode.UNAVAILABLE, f"plaintext: {code}")
print("PASS tls.py")
