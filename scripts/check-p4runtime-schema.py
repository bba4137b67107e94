#!/usr/bin/env python3
"""Check Sluice's hand-written P4Runtime .proto files against the published schema.

Sluice carries its own P4Runtime v1 schema (crates/sluice-p4runtime/proto),
written from the specification rather than copied from upstream. Real clients
(p4runtime-shell, finsy, ...) only interoperate if every full message name,
field name/number/type/label, oneof, map, enum value and RPC signature is
identical, so this script compares our compiled descriptor set with the
descriptors embedded in the PyPI `p4runtime` package (plus google.rpc from
googleapis-common-protos, which it depends on).

Usage:
  python -m grpc_tools.protoc -I crates/sluice-p4runtime/proto --include_imports \
      --descriptor_set_out=/tmp/ours.pb <the .proto files>
  python3 scripts/check-p4runtime-schema.py /tmp/ours.pb

Exits 1 and lists differences if any; prints a one-line summary and exits 0
otherwise. Things only we define are reported as info, not errors.
"""
import ast
import importlib
import importlib.util
import os
import sys

# Some p4runtime wheels ship pre-3.19 generated code, which the default (upb)
# runtime refuses to load; the pure-Python runtime still accepts it. Speed is
# irrelevant here, so always use it.
os.environ["PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"] = "python"

from google.protobuf import descriptor_pb2  # noqa: E402

REFERENCE_MODULES = [
    "p4.v1.p4runtime_pb2",
    "p4.v1.p4data_pb2",
    "p4.config.v1.p4info_pb2",
    "p4.config.v1.p4types_pb2",
    "google.rpc.status_pb2",
    "google.rpc.code_pb2",
]
FDP = descriptor_pb2.FieldDescriptorProto


def reference_files():
    """FileDescriptorProtos of the installed package modules."""
    files = []
    for name in REFERENCE_MODULES:
        fdp = descriptor_pb2.FileDescriptorProto()
        try:
            importlib.import_module(name).DESCRIPTOR.CopyToProto(fdp)
        except Exception as exc:  # runtime rejects the gencode: read its bytes literal
            print(f"note: import {name} failed ({exc.__class__.__name__}); parsing its source")
            tree = ast.parse(open(importlib.util.find_spec(name).origin).read())
            blobs = [n.value for n in ast.walk(tree)
                     if isinstance(n, ast.Constant) and isinstance(n.value, bytes)
                     and n.value.startswith(b"\n")]
            fdp.ParseFromString(max(blobs, key=len))
        files.append(fdp)
    return files


def our_files(path):
    fds = descriptor_pb2.FileDescriptorSet()
    with open(path, "rb") as f:
        fds.ParseFromString(f.read())
    return list(fds.file)


def flatten(files):
    """Map of "kind full.name" -> comparable facts, for every definition."""
    out = {}
    maps = set()

    def walk_enum(prefix, e):
        out[f"enum {prefix}{e.name}"] = sorted((v.name, v.number) for v in e.value)

    def walk_msg(prefix, m, fname):
        full = prefix + m.name
        if m.options.map_entry:
            maps.add("." + full)
        out[f"message {full}"] = fname
        for e in m.enum_type:
            walk_enum(full + ".", e)
        for n in m.nested_type:
            walk_msg(full + ".", n, fname)
        for f in m.field:
            oneof = m.oneof_decl[f.oneof_index].name if f.HasField("oneof_index") else None
            out[f"field {full}.{f.name}"] = dict(
                number=f.number, type=FDP.Type.Name(f.type), label=FDP.Label.Name(f.label),
                type_name=f.type_name, oneof=oneof, proto3_optional=f.proto3_optional,
                deprecated=f.options.deprecated)

    for fd in files:
        if fd.package == "google.protobuf":  # well-known types come from protoc
            continue
        prefix = fd.package + "."
        for e in fd.enum_type:
            walk_enum(prefix, e)
        for m in fd.message_type:
            walk_msg(prefix, m, fd.name)
        for s in fd.service:
            for r in s.method:
                out[f"rpc {prefix}{s.name}/{r.name}"] = dict(
                    input=r.input_type, output=r.output_type,
                    client_streaming=r.client_streaming, server_streaming=r.server_streaming)
    for key, facts in out.items():
        if key.startswith("field "):
            facts["map"] = facts["type_name"] in maps
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    ref, ours = flatten(reference_files()), flatten(our_files(sys.argv[1]))
    errors = 0
    for key in sorted(ref.keys() | ours.keys()):
        if key not in ours:
            print(f"MISSING {key}")
            errors += 1
        elif key not in ref:
            # A new top-level definition is harmless; a new field in a shared message is not.
            parent = "message " + key.split(" ", 1)[1].rsplit(".", 1)[0]
            if key.startswith("field ") and parent in ref:
                print(f"EXTRA   {key}")
                errors += 1
            else:
                print(f"info: only ours: {key}")
        elif ref[key] != ours[key]:
            print(f"DIFFER  {key}\n  package: {ref[key]}\n  ours:    {ours[key]}")
            errors += 1
    if errors:
        print(f"{errors} difference(s)")
        return 1
    kinds = [k.split(" ", 1)[0] for k in ref]
    print("OK: schema matches p4runtime package ("
          + ", ".join(f"{kinds.count(k)} {k}s" for k in ("message", "field", "enum", "rpc"))
          + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
