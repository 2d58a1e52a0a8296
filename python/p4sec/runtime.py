"""A thin P4Runtime client for p4sec switches (and any P4Runtime target): arbitration, pipeline push,
table writes by name, p4sec extern writes. Uses the official `p4runtime` package's stubs."""
import contextlib
import ipaddress
import json
import pathlib
import threading
import queue

import grpc
from google.protobuf import any_pb2, text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc


def ip(addr):
    return ipaddress.IPv4Address(addr).packed


def mac(s):
    return bytes(int(x, 16) for x in s.split(":"))


def prefix_mask(plen, width=32):
    full = (1 << width) - 1
    return ((full << (width - plen)) & full).to_bytes(width // 8, "big") if plen else b"\x00"


def addr(a):
    """The bytes of an IPv4 (4) or IPv6 (16) address."""
    return ipaddress.ip_address(a).packed


def is_v6(a):
    return ipaddress.ip_network(a, strict=False).version == 6 if "/" in a else ipaddress.ip_address(a).version == 6


def canonical(b):
    b = b.lstrip(b"\x00")
    return b or b"\x00"


class WriteError(Exception):
    """A P4Runtime Write failed; the message holds the switch's per-update errors."""


def write_errors(rpc_error):
    """The per-update error messages of a failed Write (google.rpc.Status details)."""
    from google.rpc import status_pb2
    for key, value in rpc_error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            out = []
            for d in status_pb2.Status.FromString(value).details:
                e = p4runtime_pb2.Error()
                d.Unpack(e)
                if e.canonical_code:
                    out.append(e.message or f"code {e.canonical_code}")
            return out
    return []


class Switch:
    def __init__(self, address, device_id=1, election_id=1, timeout=20):
        self.channel = grpc.insecure_channel(address)
        grpc.channel_ready_future(self.channel).result(timeout=timeout)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self.device_id, self.election_id = device_id, election_id
        self.p4info = None
        self._requests = queue.Queue()
        self.stream = self.stub.StreamChannel(iter(self._requests.get, None))
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = device_id
        req.arbitration.election_id.low = election_id
        self._requests.put(req)
        self.arbitration = next(self.stream).arbitration
        self.on_digest = None
        self._batch = None
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        """Reads the stream: digest lists go to on_digest(name, [[member ints]]) and are acknowledged."""
        try:
            for msg in self.stream:
                if msg.HasField("digest"):
                    d = msg.digest
                    ack = p4runtime_pb2.StreamMessageRequest()
                    ack.digest_ack.digest_id, ack.digest_ack.list_id = d.digest_id, d.list_id
                    self._requests.put(ack)
                    cb = self.on_digest
                    if cb is not None and self.p4info is not None:
                        name = next((x.preamble.name for x in self.p4info.digests if x.preamble.id == d.digest_id), str(d.digest_id))
                        items = [[int.from_bytes(m.bitstring, "big") for m in item.struct.members] for item in d.data]
                        try:
                            cb(name, items)
                        except Exception as e:  # a callback bug must not stop the stream
                            print(f"runtime: digest callback failed: {e!r}", flush=True)
        except grpc.RpcError:
            pass

    def digest_enable(self, name, max_list_size=1, max_timeout_ns=0, ack_timeout_ns=1000000000):
        """Ask the switch to stream this digest's lists (P4Runtime DigestEntry)."""
        d = next(x for x in self.p4info.digests if x.preamble.name == name)
        for kind in (p4runtime_pb2.Update.INSERT, p4runtime_pb2.Update.MODIFY):
            u = p4runtime_pb2.Update(type=kind)
            u.entity.digest_entry.digest_id = d.preamble.id
            c = u.entity.digest_entry.config
            c.max_list_size, c.max_timeout_ns, c.ack_timeout_ns = max_list_size, max_timeout_ns, ack_timeout_ns
            try:
                self._write(u)
                return
            except WriteError as e:
                if "already enabled" not in str(e):
                    raise

    def table_delete(self, table, match, priority=0):
        e = self._entry(table, match, None, {}, priority)
        u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.DELETE)
        u.entity.table_entry.CopyFrom(e)
        self._write(u)

    def close(self):
        self._requests.put(None)
        self.channel.close()

    @staticmethod
    def program_cookie(program_dir):
        """A cookie that identifies a compiled program (its device config and P4Info)."""
        import hashlib
        program_dir = pathlib.Path(program_dir)
        h = hashlib.sha256((program_dir / "program.json").read_bytes() + (program_dir / "p4info.txtpb").read_bytes())
        return int.from_bytes(h.digest()[:8], "big") >> 1

    def push(self, program_dir):
        program_dir = pathlib.Path(program_dir)
        info = p4info_pb2.P4Info()
        text_format.Parse((program_dir / "p4info.txtpb").read_text(), info)
        self.p4info = info
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=self.device_id, action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        req.election_id.low = self.election_id
        req.config.p4info.CopyFrom(info)
        req.config.p4_device_config = (program_dir / "program.json").read_bytes()
        req.config.cookie.cookie = self.program_cookie(program_dir)
        self.stub.SetForwardingPipelineConfig(req)

    def adopt(self, program_dir):
        """Use the pipeline the switch already runs if it is this program (same cookie): True, with the P4Info
        loaded and nothing written; False if the switch runs something else or nothing."""
        program_dir = pathlib.Path(program_dir)
        req = p4runtime_pb2.GetForwardingPipelineConfigRequest(
            device_id=self.device_id, response_type=p4runtime_pb2.GetForwardingPipelineConfigRequest.COOKIE_ONLY)
        try:
            got = self.stub.GetForwardingPipelineConfig(req).config.cookie.cookie
        except grpc.RpcError:
            return False
        if got != self.program_cookie(program_dir):
            return False
        info = p4info_pb2.P4Info()
        text_format.Parse((program_dir / "p4info.txtpb").read_text(), info)
        self.p4info = info
        return True

    @contextlib.contextmanager
    def batch(self):
        """Collect the writes made inside the block and send them as one Write request at its end (the switch
        applies extern updates in order, then table updates)."""
        outer = self._batch is not None
        if not outer:
            self._batch = []
        try:
            yield self
            updates = self._batch if not outer else None
        finally:
            if not outer:
                self._batch = None
        if updates:
            self._send(updates)

    def _write(self, update):
        if self._batch is not None:
            self._batch.append(update)
            return
        self._send([update])

    def _send(self, updates):
        req = p4runtime_pb2.WriteRequest(device_id=self.device_id)
        req.election_id.low = self.election_id
        req.updates.extend(updates)
        try:
            self.stub.Write(req)
        except grpc.RpcError as e:
            msgs = write_errors(e)
            if msgs:
                raise WriteError("; ".join(msgs)) from e
            raise

    def _entry(self, table, match, action, params, priority):
        t = next(x for x in self.p4info.tables if x.preamble.name == table)
        e = p4runtime_pb2.TableEntry(table_id=t.preamble.id, priority=priority)
        for name, spec in match.items():
            f = next(x for x in t.match_fields if x.name == name)
            m = e.match.add(field_id=f.id)
            kind = spec[0]
            if kind == "exact":
                m.exact.value = canonical(spec[1])
            elif kind == "lpm":
                m.lpm.value, m.lpm.prefix_len = spec[1], spec[2]
            elif kind == "ternary":
                m.ternary.value, m.ternary.mask = canonical(bytes(x & y for x, y in zip(spec[1], spec[2].rjust(len(spec[1]), b"\0")))), canonical(spec[2])
            elif kind == "range":
                m.range.low, m.range.high = canonical(spec[1]), canonical(spec[2])
        if action is None:
            return e
        a = next(x for x in self.p4info.actions if x.preamble.name == action)
        e.action.action.action_id = a.preamble.id
        for p in a.params:
            v = params[p.name]
            v = v if isinstance(v, bytes) else int(v).to_bytes((p.bitwidth + 7) // 8, "big")
            e.action.action.params.add(param_id=p.id, value=canonical(v))
        return e

    def table_insert(self, table, match, action, params, priority=0):
        u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
        u.entity.table_entry.CopyFrom(self._entry(table, match, action, params, priority))
        self._write(u)

    def table_modify(self, table, match, action, params, priority=0):
        u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
        u.entity.table_entry.CopyFrom(self._entry(table, match, action, params, priority))
        self._write(u)

    def extern_write(self, instance, op, obj, delete=False):
        """A p4sec extern control operation (e.g. esp_sad `add_sa`) as a P4Runtime ExternEntry."""
        ext = next(t for t in self.p4info.externs for i in t.instances if i.preamble.name == instance)
        inst = next(i for i in ext.instances if i.preamble.name == instance)
        u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.DELETE if delete else p4runtime_pb2.Update.INSERT)
        x = u.entity.extern_entry
        x.extern_type_id, x.extern_id = ext.extern_type_id, inst.preamble.id
        x.entry.CopyFrom(any_pb2.Any(type_url=f"p4sec/{ext.extern_type_name}.{op}", value=json.dumps(obj).encode()))
        self._write(u)

    def extern_read(self, instance, op, obj):
        """A p4sec extern query (e.g. esp_sad `sa_stats`) as a P4Runtime ExternEntry read; its JSON answer."""
        ext = next(t for t in self.p4info.externs for i in t.instances if i.preamble.name == instance)
        inst = next(i for i in ext.instances if i.preamble.name == instance)
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        x = req.entities.add().extern_entry
        x.extern_type_id, x.extern_id = ext.extern_type_id, inst.preamble.id
        x.entry.CopyFrom(any_pb2.Any(type_url=f"p4sec/{ext.extern_type_name}.{op}", value=json.dumps(obj).encode()))
        for resp in self.stub.Read(req):
            for ent in resp.entities:
                return json.loads(ent.extern_entry.entry.value)
        return None

    def counter_read(self, counter, index):
        """(packets, bytes) of one indexed counter cell."""
        c = next(x for x in self.p4info.counters if x.preamble.name == counter)
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        e = req.entities.add().counter_entry
        e.counter_id, e.index.index = c.preamble.id, index
        for resp in self.stub.Read(req):
            for ent in resp.entities:
                d = ent.counter_entry.data
                return d.packet_count, d.byte_count
        return 0, 0
