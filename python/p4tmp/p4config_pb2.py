"""`p4.tmp.p4config_pb2`: the BMv2 device config message (`p4.tmp.P4DeviceConfig`), which a BMv2 machine
provides through PI and the P4 tutorials' and guides' Python clients import (`from p4.tmp import
p4config_pb2`) to wrap the program in `SetForwardingPipelineConfig`. The official `p4runtime` package does
not ship it; `scripts/setup` installs this module as `p4/tmp/p4config_pb2.py` beside that package's
`p4/v1` and `p4/config/v1` (nothing of the package is replaced).

The message, as PI defines it: `P4DeviceConfig { bool reassign = 1; Extras extras = 2; bytes device_data = 3;
message Extras { map<string, string> kv = 1; } }`. Its descriptor is built here and registered in the
default descriptor pool, as generated modules do, so it works with whichever protobuf runtime is installed.
"""
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.internal import builder as _builder

_F = descriptor_pb2.FieldDescriptorProto


def _file():
    fdp = descriptor_pb2.FileDescriptorProto(name="p4/tmp/p4config.proto", package="p4.tmp", syntax="proto3")
    msg = fdp.message_type.add(name="P4DeviceConfig")
    extras = msg.nested_type.add(name="Extras")
    entry = extras.nested_type.add(name="KvEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL, json_name="key")
    entry.field.add(name="value", number=2, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL, json_name="value")
    extras.field.add(name="kv", number=1, type=_F.TYPE_MESSAGE, label=_F.LABEL_REPEATED,
                     type_name=".p4.tmp.P4DeviceConfig.Extras.KvEntry", json_name="kv")
    msg.field.add(name="reassign", number=1, type=_F.TYPE_BOOL, label=_F.LABEL_OPTIONAL, json_name="reassign")
    msg.field.add(name="extras", number=2, type=_F.TYPE_MESSAGE, label=_F.LABEL_OPTIONAL,
                  type_name=".p4.tmp.P4DeviceConfig.Extras", json_name="extras")
    msg.field.add(name="device_data", number=3, type=_F.TYPE_BYTES, label=_F.LABEL_OPTIONAL, json_name="deviceData")
    return fdp.SerializeToString()


DESCRIPTOR = descriptor_pool.Default().AddSerializedFile(_file())
_builder.BuildMessageAndEnumDescriptors(DESCRIPTOR, globals())
_builder.BuildTopDescriptorsAndMessages(DESCRIPTOR, "p4.tmp.p4config_pb2", globals())
