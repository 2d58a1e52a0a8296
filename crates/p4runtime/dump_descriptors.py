"""Write the FileDescriptorSet of the official `p4runtime` package (p4/v1/p4runtime.proto and everything it
imports) to stdout, for build.rs to generate the Rust messages and the gRPC service from."""
import os
import sys

os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")
try:
    from google.protobuf import descriptor_pb2
    from p4.v1 import p4runtime_pb2
except ImportError as e:  # pragma: no cover
    sys.stderr.write(f"cannot import the p4runtime package ({e}); install it: pip install -r python/requirements.txt\n")
    sys.exit(1)


def add(fd, seen, out):
    if fd.name in seen:
        return
    for dep in fd.dependencies:
        add(dep, seen, out)
    seen.add(fd.name)
    proto = descriptor_pb2.FileDescriptorProto()
    fd.CopyToProto(proto)
    out.file.append(proto)


fds = descriptor_pb2.FileDescriptorSet()
add(p4runtime_pb2.DESCRIPTOR, set(), fds)
sys.stdout.buffer.write(fds.SerializeToString())
