"""A thin P4Runtime client for p4sec switches (and any P4Runtime target): arbitration, pipeline push,
table writes by name, p4sec extern writes. Uses the official `p4runtime` package's stubs."""
import contextlib
import functools
import ipaddress
import json
import pathlib
import threading
import queue

import grpc
from google.protobuf import any_pb2, text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from p4sec.infra import wire


def ip(addr):
    return ipaddress.IPv4Address(addr).packed


def mac(s):
    return bytes(int(x, 16) for x in s.split(":"))


def prefix_mask(plen, width=32):
    full = (1 << width) - 1
    return ((full << (width - plen)) & full).to_bytes(width // 8, "big") if plen else b"\x00"


@functools.lru_cache(maxsize=1 << 16)
def addr(a):
    """The bytes of an IPv4 (4) or IPv6 (16) address."""
    return ipaddress.ip_address(a).packed


@functools.lru_cache(maxsize=1 << 16)
def is_v6(a):
    return ipaddress.ip_network(a, strict=False).version == 6 if "/" in a else ipaddress.ip_address(a).version == 6


def canonical(b):
    b = b.lstrip(b"\x00")
    return b or b"\x00"


class WriteError(Exception):
    """A P4Runtime Write failed; the message holds the switch's per-update errors, `applied` which updates of the
    request the switch did apply (a Write is not atomic), or None if it did not say, and `errors` each update's
    message (None for those applied), or None."""

    def __init__(self, message, applied=None, errors=None):
        super().__init__(message)
        self.applied, self.errors = applied, errors


def write_status(rpc_error):
    """(code, message) for every update of a failed Write, in order (google.rpc.Status details); [] if absent."""
    from google.rpc import status_pb2
    for key, value in rpc_error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            out = []
            for d in status_pb2.Status.FromString(value).details:
                e = p4runtime_pb2.Error()
                d.Unpack(e)
                out.append((e.canonical_code, e.message))
            return out
    return []


def write_errors(rpc_error):
    """The per-update error messages of a failed Write."""
    return [m or f"code {c}" for c, m in write_status(rpc_error) if c]


UPDATE_TYPES = {"insert": p4runtime_pb2.Update.INSERT, "modify": p4runtime_pb2.Update.MODIFY, "delete": p4runtime_pb2.Update.DELETE}


# Writes are collected as serialized one-update WriteRequests and sent as their concatenation after a
# serialized head (device id, election id): protobuf parses concatenated encodings of a message as one message
# whose repeated fields hold all the parts' elements, in order. The table and extern updates of the controller's
# hot paths are encoded by p4sec.wire from the official descriptors (the installed protobuf is the pure-Python
# implementation, where building and serializing an update's ten nested messages costs ~0.1 ms); the rarer
# writes use the p4runtime package's messages.
def one_update(kind):
    """A new WriteRequest with one Update of `kind` ("insert", "modify", "delete"): (request, update)."""
    req = p4runtime_pb2.WriteRequest()
    return req, req.updates.add(type=UPDATE_TYPES[kind])


class _PendingWrite:
    """A Write request in flight, or (deferred) one sent, waiting for its answer, when `result()` is called."""

    def __init__(self, future, call=None):
        self.future, self._call, self._error = future, call, None
        self.deferred = future is None

    def result(self):
        if self._call is not None:
            # a blocking call: gRPC's client runs it in this thread, without the hand-over from its polling
            # thread that a future's answer takes (~0.1 ms on 2 cores)
            call, self._call = self._call, None
            try:
                call()
            except Exception as e:      # kept: every later result() raises it too
                self._error = e
        try:
            if self._error is not None:
                raise self._error
            if self.future is not None:
                self.future.result()
        except grpc.RpcError as e:
            st = write_status(e)
            if any(c for c, _ in st):
                errors = [(m or f"code {c}") if c else None for c, m in st]
                raise WriteError("; ".join(m for m in errors if m), [not c for c, _ in st], errors) from e
            raise


class Tls:
    """Mutual TLS towards a switch: `ca` the PEM certificate of the CA that signed the switch's certificate,
    `cert` and `key` this client's PEM certificate and key (its identity for the switch's --tls-writers or
    --tls-readers), `server_name` the name the switch's certificate must carry (None: the host of the address)."""

    def __init__(self, ca, cert, key, server_name=None):
        self.ca, self.cert, self.key, self.server_name = ca, cert, key, server_name

    @classmethod
    def from_ca_dir(cls, ca_dir, name, server_name=None):
        """From a `p4sec-ca` directory: DIR/ca.crt, and the client certificate DIR/NAME.crt with its key DIR/NAME.key."""
        d = pathlib.Path(ca_dir)
        return cls((d / "ca.crt").read_bytes(), (d / f"{name}.crt").read_bytes(), (d / f"{name}.key").read_bytes(), server_name)

    def channel(self, address):
        creds = grpc.ssl_channel_credentials(root_certificates=self.ca, private_key=self.key, certificate_chain=self.cert)
        opts = [("grpc.ssl_target_name_override", self.server_name)] if self.server_name else []
        return grpc.secure_channel(address, creds, options=opts)


class Switch:
    """The P4Runtime client of one switch: arbitrates on connecting (`election_id`), then writes and reads.
    `tls`: a `Tls` for mutual TLS; None: plaintext."""

    def __init__(self, address, device_id=1, election_id=1, timeout=20, tls=None):
        self.address, self.tls = address, tls
        self.on_lost = None       # called (from the stream's thread) when the stream ends without close()
        self._closing = False
        self.channel = tls.channel(address) if tls is not None else grpc.insecure_channel(address)
        try:
            grpc.channel_ready_future(self.channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            self.channel.close()
            raise ConnectionError(f"{address}: no P4Runtime server answered within {timeout:g} s"
                                  + (" (over mutual TLS: is the switch started with --tls-cert/--tls-key/--tls-ca, and do "
                                     "its certificate and this client's come from the same CA?)" if tls is not None else "")) from None
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        # Write with the request already serialized (see write_async)
        self._write_raw = self.channel.unary_unary("/p4.v1.P4Runtime/Write", request_serializer=None,
                                                   response_deserializer=p4runtime_pb2.WriteResponse.FromString)
        self._write_head = None
        self.device_id, self.election_id = device_id, election_id
        self.p4info = None
        self._names, self._names_of = {}, None
        self._requests = queue.Queue()
        self.stream = self.stub.StreamChannel(iter(self._requests.get, None))
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = device_id
        req.arbitration.election_id.low = election_id
        self._requests.put(req)
        try:
            self.arbitration = next(self.stream).arbitration
        except grpc.RpcError as e:
            self.channel.close()
            raise ConnectionError(f"{address}: the switch refused this client's arbitration (election id {election_id}): "
                                  f"{e.code().name}: {e.details()}") from None
        self.on_digest = None
        self._batch = None
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        """Reads the stream: digest lists go to on_digest(name, [[member ints]]) and are acknowledged; when the
        stream ends (the switch went away) on_lost() is called."""
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
        except (grpc.RpcError, ValueError):  # (ValueError: the channel was closed under the reader)
            pass
        cb = self.on_lost
        if not self._closing and cb is not None:
            try:
                cb()
            except Exception as e:
                print(f"runtime: on_lost callback failed: {e!r}", flush=True)

    def digest_enable(self, name, max_list_size=1, max_timeout_ns=0, ack_timeout_ns=1000000000):
        """Ask the switch to stream this digest's lists (P4Runtime DigestEntry)."""
        d = self.named("digests", name)
        for kind in ("insert", "modify"):
            req, u = one_update(kind)
            u.entity.digest_entry.digest_id = d.preamble.id
            c = u.entity.digest_entry.config
            c.max_list_size, c.max_timeout_ns, c.ack_timeout_ns = max_list_size, max_timeout_ns, ack_timeout_ns
            try:
                self._write(req.SerializeToString())
                return
            except WriteError as e:
                if "already enabled" not in str(e):
                    raise

    def table_delete(self, table, match, priority=0):
        self._write(self._table_update("delete", table, match, None, {}, priority))

    def close(self):
        self._closing = True
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

    @contextlib.contextmanager
    def collect(self):
        """Collect the writes made inside the block into the yielded list without sending them (send it with
        `write_async`): to prepare one Write per switch and send several switches' at once."""
        if self._batch is not None:
            raise RuntimeError("collect() inside batch() or collect()")
        self._batch = []
        try:
            yield self._batch
        finally:
            self._batch = None

    def write_async(self, updates, deferred=False):
        """Send the updates (serialized one-update WriteRequests as collected, or Update messages) as one Write
        request without waiting for the answer; `.result()` of the returned object waits for it and raises
        WriteError with the switch's messages if it was refused. `deferred`: the request is prepared now and
        sent by `.result()`, which waits for it there (for the last of several switches' writes: the others are
        on the wire meanwhile)."""
        if self._write_head is None:
            head = p4runtime_pb2.WriteRequest(device_id=self.device_id)
            head.election_id.low = self.election_id
            self._write_head = head.SerializeToString()
        parts = [self._write_head]
        parts.extend(u if isinstance(u, bytes) else p4runtime_pb2.WriteRequest(updates=[u]).SerializeToString() for u in updates)
        req = b"".join(parts)
        if deferred:
            return _PendingWrite(None, functools.partial(self._write_raw, req))
        return _PendingWrite(self._write_raw.future(req))

    def _write(self, update):
        """Send (or, inside batch() or collect(), collect) one update: a serialized one-update WriteRequest, or an
        Update message."""
        if self._batch is not None:
            self._batch.append(update)
            return
        self._send([update])

    def _send(self, updates):
        self.write_async(updates, deferred=True).result()

    def named(self, kind, name):
        """The P4Info object of `kind` ("tables", "actions", "counters", "registers", "digests", "externs") called `name`; looked
        up once per P4Info (setup writes many entries). For "externs": (extern type, instance)."""
        info = self.p4info
        if info is None:
            raise ValueError("the switch has no pipeline here yet: push() or adopt() first")
        if self._names_of is not info:
            self._names, self._names_of = {}, info
        got = self._names.get((kind, name))
        if got is None:
            if kind == "externs":
                got = next(((t, i) for t in info.externs for i in t.instances if i.preamble.name == name), None)
            else:
                got = next((x for x in getattr(info, kind) if x.preamble.name == name), None)
            if got is None:
                raise ValueError(f"the P4 program has no {kind[:-1]} named {name!r}")
            if kind == "tables":
                got = (got, {f.name: f for f in got.match_fields})
            self._names[(kind, name)] = got
        return got

    def _entry_value(self, table, match, action, params, priority):
        """The TableEntry as a dict of fields (p4sec.wire)."""
        t, fields = self.named("tables", table)
        matches = []
        for name, spec in match.items():
            f = fields.get(name)
            if f is None:
                raise ValueError(f"table {table!r} has no key field {name!r}")
            kind = spec[0]
            if (kind == "lpm" and spec[2] == 0) or (kind == "ternary" and not any(spec[2])):
                continue  # matches everything: P4Runtime wants the field omitted (a don't-care)
            if kind == "exact":
                m = {"field_id": f.id, "exact": {"value": canonical(spec[1])}}
            elif kind == "lpm":
                m = {"field_id": f.id, "lpm": {"value": spec[1], "prefix_len": spec[2]}}
            elif kind == "ternary":
                value = bytes(x & y for x, y in zip(spec[1], spec[2].rjust(len(spec[1]), b"\0")))
                m = {"field_id": f.id, "ternary": {"value": canonical(value), "mask": canonical(spec[2])}}
            elif kind == "range":
                m = {"field_id": f.id, "range": {"low": canonical(spec[1]), "high": canonical(spec[2])}}
            else:
                raise ValueError(f"unknown match kind {kind!r} for {table}.{name} (exact, lpm, ternary, range)")
            matches.append(m)
        e = {"table_id": t.preamble.id, "match": matches}
        if action is None:
            e["priority"] = priority
            return e
        a = self.named("actions", action)
        ps = []
        for p in a.params:
            v = params[p.name]
            v = v if isinstance(v, bytes) else int(v).to_bytes((p.bitwidth + 7) // 8, "big")
            ps.append({"param_id": p.id, "value": canonical(v)})
        e["action"] = {"action": {"action_id": a.preamble.id, "params": ps}}
        e["priority"] = priority         # (in field-number order: nothing to sort)
        return e

    def _entry(self, table, match, action, params, priority, e=None):
        """The TableEntry message (merged into `e` when given)."""
        if e is None:
            e = p4runtime_pb2.TableEntry()
        e.MergeFromString(wire.encode(p4runtime_pb2.TableEntry, self._entry_value(table, match, action, params, priority)))
        return e

    def table_insert(self, table, match, action, params, priority=0):
        self._write(self._table_update("insert", table, match, action, params, priority))

    def table_modify(self, table, match, action, params, priority=0):
        self._write(self._table_update("modify", table, match, action, params, priority))

    def _table_update(self, kind, table, match, action, params, priority):
        """A one-update WriteRequest with this TableEntry, serialized."""
        return wire.encode(p4runtime_pb2.WriteRequest, {"updates": [
            {"type": UPDATE_TYPES[kind], "entity": {"table_entry": self._entry_value(table, match, action, params, priority)}}]})

    def extern_write(self, instance, op, obj, delete=False):
        """A p4sec extern control operation (e.g. esp_sad `add_sa`) as a P4Runtime ExternEntry: its entry an Any
        with type URL `p4sec/TYPE.OP` and the operation's JSON as its value."""
        ext, inst = self.named("externs", instance)
        x = {"extern_type_id": ext.extern_type_id, "extern_id": inst.preamble.id,
             "entry": {"type_url": f"p4sec/{ext.extern_type_name}.{op}", "value": json.dumps(obj).encode()}}
        self._write(wire.encode(p4runtime_pb2.WriteRequest, {"updates": [
            {"type": UPDATE_TYPES["delete" if delete else "insert"], "entity": {"extern_entry": x}}]}))

    def extern_read(self, instance, op, obj):
        """A p4sec extern query (e.g. esp_sad `sa_stats`) as a P4Runtime ExternEntry read; its JSON answer."""
        ext, inst = self.named("externs", instance)
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        x = req.entities.add().extern_entry
        x.extern_type_id, x.extern_id = ext.extern_type_id, inst.preamble.id
        x.entry.CopyFrom(any_pb2.Any(type_url=f"p4sec/{ext.extern_type_name}.{op}", value=json.dumps(obj).encode()))
        for resp in self.stub.Read(req):
            for ent in resp.entities:
                return json.loads(ent.extern_entry.entry.value)
        return None

    def table_read(self, table):
        """Every entry of a table as P4Runtime TableEntry messages (the switch's own view)."""
        t, _ = self.named("tables", table)
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        req.entities.add().table_entry.table_id = t.preamble.id
        return [ent.table_entry for resp in self.stub.Read(req) for ent in resp.entities]

    def table_get(self, table, match):
        """The entry of `table` with this match (exact fields, as for `table_insert`) as
        `(action name, {parameter: int})`, or None when the switch holds no such entry."""
        _, fields = self.named("tables", table)
        want = set()
        for name, spec in match.items():
            if name not in fields:
                raise ValueError(f"table {table!r} has no key field {name!r}")
            if spec[0] != "exact":
                raise ValueError(f"table_get matches exact fields only, not {spec[0]!r} ({table}.{name})")
            want.add((fields[name].id, canonical(spec[1])))
        for e in self.table_read(table):
            if {(m.field_id, canonical(m.exact.value)) for m in e.match} == want:
                a = next(x for x in self.p4info.actions if x.preamble.id == e.action.action.action_id)
                names = {p.id: p.name for p in a.params}
                return a.preamble.name, {names[p.param_id]: int.from_bytes(p.value, "big") for p in e.action.action.params}
        return None

    def register_write(self, register, index, value):
        """Set one cell of an indexed register (P4Runtime RegisterEntry, MODIFY) to the integer `value`."""
        r = self.named("registers", register)
        width = r.type_spec.bitstring.bit.bitwidth
        if not 0 <= value < (1 << width):
            raise ValueError(f"register {register!r} holds bit<{width}>: {value} does not fit")
        req, u = one_update("modify")
        e = u.entity.register_entry
        e.register_id, e.index.index = r.preamble.id, index
        e.data.bitstring = canonical(value.to_bytes((width + 7) // 8, "big"))
        self._write(req.SerializeToString())

    def _read_cell(self, kind, name, index):
        """The entity read back for one cell of an indexed register or counter (`kind` "registers"/"counters"),
        or None if the switch answered nothing."""
        obj = self.named(kind, name)
        field = kind[:-1] + "_entry"
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        e = getattr(req.entities.add(), field)
        setattr(e, kind[:-1] + "_id", obj.preamble.id)
        e.index.index = index
        for resp in self.stub.Read(req):
            for ent in resp.entities:
                return getattr(ent, field)
        return None

    def register_read(self, register, index):
        """One cell of an indexed register, as an integer."""
        e = self._read_cell("registers", register, index)
        if e is None:
            raise ValueError(f"register {register!r} has no cell {index}")
        return int.from_bytes(e.data.bitstring, "big")

    def counter_read(self, counter, index):
        """(packets, bytes) of one indexed counter cell."""
        e = self._read_cell("counters", counter, index)
        return (e.data.packet_count, e.data.byte_count) if e is not None else (0, 0)

    def counter_cells(self, counter, indexes):
        """{index: (packets, bytes)} of many cells of an indexed counter, in one Read."""
        cid = self.named("counters", counter).preamble.id
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        for i in indexes:
            e = req.entities.add().counter_entry
            e.counter_id = cid
            e.index.index = i
        out = {}
        for resp in self.stub.Read(req):
            for ent in resp.entities:
                c = ent.counter_entry
                out[c.index.index] = (c.data.packet_count, c.data.byte_count)
        return out
