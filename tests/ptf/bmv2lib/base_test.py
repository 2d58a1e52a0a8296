"""A P4Runtime base class for PTF tests written for BMv2's simple_switch_grpc, in the shape the P4 guides' and
PI's PTF suites use: the test parameters `grpcaddr`, `p4info` (text P4Info) and `config` (the compiled program)
come from `ptf --test-params`; `setUp` connects, becomes primary on the stream channel and pushes the pipeline
with the program wrapped in BMv2's device config (`p4.tmp.P4DeviceConfig`, reassign = true); helpers write
table entries by table, field, action and parameter names. Nothing in it knows about p4sec."""
import queue
import threading

import grpc
import ptf
import ptf.testutils as tu
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.tmp import p4config_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
from ptf.base_tests import BaseTest


class P4RuntimeTest(BaseTest):
    device_id = 0
    election = 1

    def setUp(self):
        BaseTest.setUp(self)
        self.dataplane = ptf.dataplane_instance
        self.dataplane.flush()
        addr = tu.test_param_get("grpcaddr") or "localhost:9559"
        self.channel = grpc.insecure_channel(addr)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self.requests = queue.Queue()
        self.stream = self.stub.StreamChannel(iter(self.requests.get, None))
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = self.device_id
        req.arbitration.election_id.low = self.election
        self.requests.put(req)
        reply = next(self.stream)
        assert reply.arbitration.status.code == 0, reply
        self.p4info = p4info_pb2.P4Info()
        with open(tu.test_param_get("p4info")) as f:
            text_format.Merge(f.read(), self.p4info)
        self.set_pipeline(tu.test_param_get("config"))

    def tearDown(self):
        self.requests.put(None)
        self.channel.close()
        BaseTest.tearDown(self)

    def set_pipeline(self, path):
        dev = p4config_pb2.P4DeviceConfig(reassign=True)
        with open(path, "rb") as f:
            dev.device_data = f.read()
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=self.device_id, action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        req.election_id.low = self.election
        req.config.p4info.CopyFrom(self.p4info)
        req.config.p4_device_config = dev.SerializeToString()
        self.stub.SetForwardingPipelineConfig(req)

    def _find(self, kind, name):
        for o in getattr(self.p4info, kind):
            if o.preamble.name == name:
                return o
        raise KeyError(f"no {kind[:-1]} named {name} in the P4Info")

    def table_add(self, table, matches, action, params):
        """matches: {field: ("exact", bytes) | ("lpm", bytes, plen) | ("ternary", bytes, mask)}."""
        t = self._find("tables", table)
        a = self._find("actions", action)
        req = p4runtime_pb2.WriteRequest(device_id=self.device_id)
        req.election_id.low = self.election
        u = req.updates.add(type=p4runtime_pb2.Update.INSERT)
        e = u.entity.table_entry
        e.table_id = t.preamble.id
        for mf in t.match_fields:
            if mf.name not in matches:
                continue
            kind, value, *rest = matches[mf.name]
            m = e.match.add(field_id=mf.id)
            if kind == "exact":
                m.exact.value = value
            elif kind == "lpm":
                m.lpm.value, m.lpm.prefix_len = value, rest[0]
            elif kind == "ternary":
                m.ternary.value, m.ternary.mask = value, rest[0]
        e.action.action.action_id = a.preamble.id
        for p in a.params:
            e.action.action.params.add(param_id=p.id, value=params[p.name])
        self.stub.Write(req)
