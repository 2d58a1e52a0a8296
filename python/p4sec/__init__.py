"""p4sec control plane: P4Runtime client helpers, controller, client agent and test harness."""
import os

# The p4runtime package's generated modules refuse to load with the C protobuf runtime
# ("Descriptors cannot be created directly"); the pure-Python runtime loads them. Set it once, here,
# before anything imports google.protobuf.
os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")
