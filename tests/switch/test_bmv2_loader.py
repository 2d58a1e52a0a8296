"""A controller written the way BMv2's P4 tutorials write theirs, run against `p4sec switch` unchanged.

The loader below follows the tutorials' structure (a switch connection with a queue-fed stream channel, a
P4Info helper that builds entries by name, entries read from a runtime JSON file) and sends the device config
as BMv2 clients do: the program wrapped in `p4.tmp.P4DeviceConfig` (reassign = true, device_data = the file's
bytes), imported as they import it (`p4.tmp.p4config_pb2`, which scripts/setup installs beside the official
`p4runtime` package).
"""
import ipaddress
import json
import queue
import subprocess

import p4sec  # noqa: F401  (sets the protobuf runtime the p4runtime package needs)
import grpc
import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from conftest import ROOT
from p4sec.infra.netns import free_port

from p4.tmp.p4config_pb2 import P4DeviceConfig  # (BMv2's device config message: scripts/setup installs it)


# ---------------------------------------------------------------- the loader, tutorial style

def encode(value, bitwidth):
    """A match or parameter value as the tutorials encode it: padded to the field's whole bytes."""
    n = (bitwidth + 7) // 8
    if isinstance(value, str) and value.count(".") == 3:
        return ipaddress.IPv4Address(value).packed
    if isinstance(value, str) and value.count(":") == 5:
        return bytes(int(x, 16) for x in value.split(":"))
    return int(value).to_bytes(n, "big")


class P4InfoHelper:
    def __init__(self, p4info_path):
        self.p4info = p4info_pb2.P4Info()
        text_format.Parse(open(p4info_path).read(), self.p4info)

    def table(self, name):
        return next(t for t in self.p4info.tables if t.preamble.name == name)

    def action(self, name):
        return next(a for a in self.p4info.actions if a.preamble.name == name)

    def build_table_entry(self, table_name, match_fields=None, default_action=False, action_name=None, action_params=None):
        t = self.table(table_name)
        entry = p4runtime_pb2.TableEntry(table_id=t.preamble.id, is_default_action=default_action)
        for name, value in (match_fields or {}).items():
            mf = next(m for m in t.match_fields if m.name == name)
            fm = entry.match.add(field_id=mf.id)
            if mf.match_type == p4info_pb2.MatchField.LPM:
                fm.lpm.value = encode(value[0], mf.bitwidth)
                fm.lpm.prefix_len = value[1]
            else:
                fm.exact.value = encode(value, mf.bitwidth)
        if action_name:
            a = self.action(action_name)
            entry.action.action.action_id = a.preamble.id
            for name, value in (action_params or {}).items():
                p = next(p for p in a.params if p.name == name)
                entry.action.action.params.add(param_id=p.id, value=encode(value, p.bitwidth))
        return entry


def build_device_config(program_path):
    """What the tutorials' `buildDeviceConfig` does with the BMv2 JSON, here with p4sec's program file."""
    config = P4DeviceConfig()
    config.reassign = True
    config.extras.kv["loader"] = "tutorial-style"
    with open(program_path) as f:
        config.device_data = f.read().encode("utf-8")
    return config


class SwitchConnection:
    def __init__(self, address, device_id=0):
        self.device_id = device_id
        self.channel = grpc.insecure_channel(address)
        grpc.channel_ready_future(self.channel).result(timeout=20)
        self.client_stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self.requests_stream = queue.Queue()
        self.stream_msg_resp = self.client_stub.StreamChannel(iter(self.requests_stream.get, None))

    def master_arbitration_update(self):
        request = p4runtime_pb2.StreamMessageRequest()
        request.arbitration.device_id = self.device_id
        request.arbitration.election_id.high = 0
        request.arbitration.election_id.low = 1
        self.requests_stream.put(request)
        return next(self.stream_msg_resp)

    def set_forwarding_pipeline_config(self, p4info, program_path=None, device_config_bytes=None, cookie=None):
        request = p4runtime_pb2.SetForwardingPipelineConfigRequest()
        request.election_id.low = 1
        request.device_id = self.device_id
        request.config.p4info.CopyFrom(p4info)
        if device_config_bytes is None:
            device_config_bytes = build_device_config(program_path).SerializeToString()
        request.config.p4_device_config = device_config_bytes
        if cookie is not None:
            request.config.cookie.cookie = cookie
        request.action = p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
        self.client_stub.SetForwardingPipelineConfig(request)
        return device_config_bytes

    def get_forwarding_pipeline_config(self, response_type):
        request = p4runtime_pb2.GetForwardingPipelineConfigRequest(device_id=self.device_id, response_type=response_type)
        return self.client_stub.GetForwardingPipelineConfig(request).config

    def write_table_entry(self, table_entry):
        request = p4runtime_pb2.WriteRequest(device_id=self.device_id)
        request.election_id.low = 1
        update = request.updates.add()
        update.type = p4runtime_pb2.Update.MODIFY if table_entry.is_default_action else p4runtime_pb2.Update.INSERT
        update.entity.table_entry.CopyFrom(table_entry)
        self.client_stub.Write(request)

    def read_table_entries(self, table_id):
        request = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        request.entities.add().table_entry.table_id = table_id
        for response in self.client_stub.Read(request):
            yield from (e.table_entry for e in response.entities)

    def shutdown(self):
        self.requests_stream.put(None)
        self.channel.close()


def program_switch(conn, helper, runtime_json_path):
    """The tutorials' `program_switch`: the pipeline, then every table entry of the runtime JSON file."""
    runtime = json.load(open(runtime_json_path))
    conn.master_arbitration_update()
    sent = conn.set_forwarding_pipeline_config(helper.p4info, program_path=runtime["p4sec_program"])
    for e in runtime["table_entries"]:
        conn.write_table_entry(helper.build_table_entry(
            e["table"], e.get("match"), e.get("default_action", False), e["action_name"], e.get("action_params")))
    return sent


# ---------------------------------------------------------------- the tests

@pytest.fixture(scope="module")
def compiled(p4sec_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("router")
    subprocess.run([str(p4sec_bin), "compile", str(ROOT / "programs" / "ipv4_router.p4"), "-o", str(out)], check=True)
    runtime = {
        "target": "bmv2",
        "p4info": str(out / "p4info.txtpb"),
        "p4sec_program": str(out / "program.json"),
        "table_entries": [
            {"table": "RouterIngress.ipv4_lpm", "default_action": True, "action_name": "RouterIngress.drop",
             "action_params": {}},
            {"table": "RouterIngress.ipv4_lpm", "match": {"hdr.ipv4.dst_addr": ["10.0.1.1", 32]},
             "action_name": "RouterIngress.set_nhop",
             "action_params": {"dst_mac": "08:00:00:00:01:11", "src_mac": "08:00:00:00:01:00", "port": 1}},
            {"table": "RouterIngress.ipv4_lpm", "match": {"hdr.ipv4.dst_addr": ["10.0.2.0", 24]},
             "action_name": "RouterIngress.set_nhop",
             "action_params": {"dst_mac": "08:00:00:00:02:22", "src_mac": "08:00:00:00:02:00", "port": 2}},
        ],
    }
    (out / "s1-runtime.json").write_text(json.dumps(runtime))
    return out


@pytest.fixture
def switch(p4sec_bin):
    port = free_port()
    proc = subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{port}", "--device-id", "0"],
                            stderr=subprocess.PIPE)
    conn = SwitchConnection(f"127.0.0.1:{port}", device_id=0)
    yield conn
    conn.shutdown()
    proc.terminate()
    proc.wait(timeout=10)


def test_a_tutorial_loader_programs_the_switch(switch, compiled):
    helper = P4InfoHelper(compiled / "p4info.txtpb")
    sent = program_switch(switch, helper, compiled / "s1-runtime.json")
    table = helper.table("RouterIngress.ipv4_lpm")
    got = sorted((e.match[0].lpm.prefix_len, e.match[0].lpm.value, e.action.action.params[2].value)
                 for e in switch.read_table_entries(table.preamble.id))
    assert got == [(24, bytes([10, 0, 2, 0]), b"\x02"), (32, bytes([10, 0, 1, 1]), b"\x01")]

    R = p4runtime_pb2.GetForwardingPipelineConfigRequest
    full = switch.get_forwarding_pipeline_config(R.ALL)
    assert full.p4info == helper.p4info
    assert full.p4_device_config == sent, "the device config comes back as the client sent it"
    assert P4DeviceConfig.FromString(full.p4_device_config).reassign
    assert full.HasField("cookie") and full.cookie.cookie == 0
    only = switch.get_forwarding_pipeline_config(R.COOKIE_ONLY)
    assert only.HasField("cookie") and not only.HasField("p4info") and only.p4_device_config == b""
    info = switch.get_forwarding_pipeline_config(R.P4INFO_AND_COOKIE)
    assert info.p4info == helper.p4info and info.p4_device_config == b"" and info.HasField("cookie")
    dev = switch.get_forwarding_pipeline_config(R.DEVICE_CONFIG_AND_COOKIE)
    assert not dev.HasField("p4info") and dev.p4_device_config == sent and dev.HasField("cookie")


def test_the_cookie_and_the_raw_program_file(switch, compiled):
    helper = P4InfoHelper(compiled / "p4info.txtpb")
    switch.master_arbitration_update()
    raw = (compiled / "program.json").read_bytes()
    switch.set_forwarding_pipeline_config(helper.p4info, device_config_bytes=raw, cookie=0x1234_5678_9abc)
    R = p4runtime_pb2.GetForwardingPipelineConfigRequest
    got = switch.get_forwarding_pipeline_config(R.COOKIE_ONLY)
    assert got.cookie.cookie == 0x1234_5678_9abc
    assert switch.get_forwarding_pipeline_config(R.ALL).p4_device_config == raw


def test_a_bmv2_json_gets_an_error_naming_p4sec_compile(switch, compiled, tmp_path):
    helper = P4InfoHelper(compiled / "p4info.txtpb")
    switch.master_arbitration_update()
    bmv2 = tmp_path / "basic.json"
    bmv2.write_text(json.dumps({"header_types": [{"name": "scalars_0", "id": 0, "fields": []}], "headers": [],
                                "parsers": [], "deparsers": [], "pipelines": [], "program": "basic.p4",
                                "__meta__": {"version": [2, 23], "compiler": "p4c"}}))
    with pytest.raises(grpc.RpcError) as e:
        switch.set_forwarding_pipeline_config(helper.p4info, program_path=bmv2)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "BMv2 JSON" in e.value.details() and "p4sec compile" in e.value.details()
    # an empty P4DeviceConfig is refused with its own reason
    with pytest.raises(grpc.RpcError) as e:
        switch.set_forwarding_pipeline_config(helper.p4info, device_config_bytes=P4DeviceConfig(reassign=True).SerializeToString())
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "empty device_data" in e.value.details()
