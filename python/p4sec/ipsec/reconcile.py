"""Reconciliation of the IPsec controller's desired state (its store) with what the gateways hold.

The desired state of every gateway is derived from the store: its own address, its WAN port (port_side) and
routes, the policies (SPD) of the tunnels that are up, a SAD-dec entry and its selectors (sa_selectors: the
tunnel's inner prefixes, or a host's inner address to the site; ctlbase.sa_selectors) for every SA it receives
under (active, retiring, or installed inbound ahead of a renewal), and the SA of every slot (inbound slots: the
SAs it decrypts with; outbound slots: the active SA it encrypts with). The actual state is read over P4Runtime:
the gateway tables (Read of TableEntry) and the SA slots (the `esp_sad` extern's `get_sas` query: slot and SPI,
never keys).

`plan` compares the two per gateway and returns the writes that converge them, in three phases so that the
loss-free orders hold across both ends of a tunnel: phase 1 (receive) the inbound SAs, selectors and SAD-dec
entries, the local address, WAN port and routes; phase 2 (send) the outbound SAs and the policies; then the
removals: policies, other entries (selectors and WAN ports included), SAs nobody wants (phases 3-5; phase 0 frees
the SPI of a recorded SA found in another slot). Entries that are already there and identical are adopted
(nothing is written).

An outbound SA is written only if it was never sent (`fresh`: the new SA of an operation recorded as an intent
and interrupted before its outbound step). Writing an outbound SA again with its old keys would restart its
sequence numbers, reusing nonces: a gateway that lost an outbound SA the controller had sent before (a restarted
switch) gets it renewed instead (`Plan.renew`).

The switch's Read answer is decoded here (`decode_table_entries`, p4sec.wire with the field numbers of the
official descriptors) for the fields the comparison needs, not through the p4runtime package's messages: the
installed protobuf is the pure-Python implementation, which parses a 20,000-entry answer in seconds.
tests/ipsec/test_reconcile.py checks the decoder against the library.

`Reconciler` runs it for the controller (p4sec.ipsec.controller: its `reconcile`, after a restart, when a lost
switch is back, and every few seconds with `start_periodic`): it reads the reachable gateways, sends each phase
to all of them before the next, gives back the SA slots found empty, records what changed as events and renews
the SAs `Plan.renew` names. It does not see the controller: it is handed what it uses (SEAM), the store's records
(p4sec.ipsec.store.Records: the desired state is read through them), the controller's lock and gateways, its
intent journal, the live set of unreachable gateways, the event set when it closes, its functions `event` and
`renew`, and the hooks that add desired entries (`desired_hooks`: the IKEv2 tunnels', p4sec.ipsec.ike).
"""
import json
import logging
import threading

from p4.v1 import p4runtime_pb2

from p4sec.ipsec import gateway as gwp
from p4sec.infra import runtime, wire
from p4sec.ipsec.ctlbase import HOST, SWITCH_MAC, sa_selectors
from p4sec.ipsec.store import LIVE

log = logging.getLogger("p4sec.controller")


# ---------------------------------------------------------------------------------------------- the switch's entries

def _c(b):
    return runtime.canonical(bytes(b))


# field numbers from the official descriptors (p4sec.wire.numbers)
_RESP, _ENT, _TE, _FM = (wire.numbers(m) for m in (p4runtime_pb2.ReadResponse, p4runtime_pb2.Entity,
                                                   p4runtime_pb2.TableEntry, p4runtime_pb2.FieldMatch))
_TA, _ACT, _PARAM = (wire.numbers(m) for m in (p4runtime_pb2.TableAction, p4runtime_pb2.Action, p4runtime_pb2.Action.Param))
_KIND = {_FM[k]: k for k in ("exact", "ternary", "lpm", "range", "optional")}
# the value fields of each kind, in the order of the comparison key
_FMK = p4runtime_pb2.FieldMatch
_KIND_VALUES = {k: [wire.numbers(m)[f] for f in fs] for k, m, fs in (
    ("exact", _FMK.Exact, ("value",)), ("optional", _FMK.Optional, ("value",)), ("ternary", _FMK.Ternary, ("value", "mask")),
    ("lpm", _FMK.LPM, ("value", "prefix_len")), ("range", _FMK.Range, ("low", "high")))}


def _field_match(b):
    fid, kind, vals = 0, None, ()
    for f, v in wire.fields(b):
        if f == _FM["field_id"]:
            fid = v
        elif f in _KIND:
            kind = _KIND[f]
            sub = dict(wire.fields(v))
            if kind == "lpm":
                n_value, n_len = _KIND_VALUES[kind]
                vals = (_c(sub.get(n_value, b"")), sub.get(n_len, 0))
            else:
                vals = tuple(_c(sub.get(n, b"")) for n in _KIND_VALUES[kind])
    return (fid, kind) + vals


def decode_table_entries(read_response):
    """The TableEntries of an encoded ReadResponse as comparison keys: {(table_id, match, priority): (action_id,
    params)}, with match a sorted tuple of (field_id, kind, canonical values...) and params a sorted tuple of
    (param_id, canonical value)."""
    out = {}
    for f, entity in wire.fields(read_response):
        if f != _RESP["entities"]:
            continue
        for ef, te in wire.fields(entity):
            if ef != _ENT["table_entry"]:
                continue
            tid, prio, match, action = 0, 0, [], (0, ())
            for tf, v in wire.fields(te):
                if tf == _TE["table_id"]:
                    tid = v
                elif tf == _TE["match"]:
                    match.append(_field_match(v))
                elif tf == _TE["action"]:
                    for af, av in wire.fields(v):
                        if af == _TA["action"]:
                            aid, params = 0, []
                            for xf, xv in wire.fields(av):
                                if xf == _ACT["action_id"]:
                                    aid = xv
                                elif xf == _ACT["params"]:
                                    p = dict(wire.fields(xv))
                                    params.append((p.get(_PARAM["param_id"], 0), _c(p.get(_PARAM["value"], b""))))
                            action = (aid, tuple(sorted(params)))
                elif tf == _TE["priority"]:
                    prio = v if v < (1 << 31) else v - (1 << 64)      # int32
            out[(tid, tuple(sorted(match)), prio)] = action
    return out


def read_tables(switch, tables):
    """The entries of `tables` (names) on the switch, decoded (see decode_table_entries)."""
    req = p4runtime_pb2.ReadRequest(device_id=switch.device_id)
    for t in tables:
        req.entities.add().table_entry.table_id = switch.named("tables", t)[0].preamble.id
    raw = switch.channel.unary_stream("/p4.v1.P4Runtime/Read", request_serializer=p4runtime_pb2.ReadRequest.SerializeToString,
                                      response_deserializer=None)
    out = {}
    for chunk in raw(req, timeout=60):
        out.update(decode_table_entries(chunk))
    return out


def read_sas(switch):
    """{slot: spi} of every occupied SA slot."""
    got = switch.extern_read(gwp.SAD, "get_sas", {})
    return {int(i): int(spi) for i, spi in (got or {}).get("sas", [])}


# ---------------------------------------------------------------------------------------------- desired entries

class Entry:
    """A desired table entry by names (as for Switch.table_insert), and its comparison key on one switch."""
    __slots__ = ("table", "match", "action", "params", "priority", "phase")

    def __init__(self, table, match, action, params, priority=0, phase=1):
        self.table, self.match, self.action, self.params, self.priority, self.phase = table, match, action, params, priority, phase

    def key(self, ids):
        t, fields = ids.table(self.table)
        m = []
        for name, spec in self.match.items():
            fid = fields[name]
            if (spec[0] == "lpm" and spec[2] == 0) or (spec[0] == "ternary" and not any(spec[2])):
                continue    # a don't-care: the client leaves it out of the entry and the switch reads none back
            if spec[0] == "exact":
                m.append((fid, "exact", runtime.canonical(spec[1])))
            elif spec[0] == "lpm":
                m.append((fid, "lpm", runtime.canonical(spec[1]), spec[2]))
            elif spec[0] == "ternary":
                mask = spec[2].rjust(len(spec[1]), b"\0")
                m.append((fid, "ternary", runtime.canonical(bytes(x & y for x, y in zip(spec[1], mask))), runtime.canonical(spec[2])))
            else:
                m.append((fid, spec[0], runtime.canonical(spec[1]), runtime.canonical(spec[2])))
        return (t, tuple(sorted(m)), self.priority)

    def value(self, ids):
        aid, params = ids.action(self.action)
        out = []
        for pid, name, width in params:
            v = self.params[name]
            v = v if isinstance(v, bytes) else int(v).to_bytes(width, "big")
            out.append((pid, runtime.canonical(v)))
        return (aid, tuple(sorted(out)))


class Ids:
    """P4Info ids of a switch's program by name (cached)."""

    def __init__(self, switch):
        self.sw, self._t, self._a = switch, {}, {}

    def table(self, name):
        got = self._t.get(name)
        if got is None:
            t, fields = self.sw.named("tables", name)
            got = self._t[name] = (t.preamble.id, {n: f.id for n, f in fields.items()})
        return got

    def action(self, name):
        got = self._a.get(name)
        if got is None:
            a = self.sw.named("actions", name)
            got = self._a[name] = (a.preamble.id, [(p.id, p.name, (p.bitwidth + 7) // 8) for p in a.params])
        return got


class Desired:
    """What one gateway should hold: table entries by key, SAs by slot ({slot: (spi, config, direction)})."""

    def __init__(self, name):
        self.name, self.entries, self.sas = name, [], {}


def desired_state(gateways, records, switch_mac, hooks=()):
    """{gateway name: Desired} of `gateways` (name -> Gateway) from the store's `records` (p4sec.ipsec.store.Records;
    called under the controller's lock); each of `hooks` (fn(desired, switch_mac)) adds entries of its own."""
    gws = gateways
    out = {n: Desired(n) for n in gws}
    for n, gw in gws.items():
        d = out[n]
        v = gwp.version(gw.address)
        d.entries.append(Entry(gwp.local_addr(v), {gwp.dst_addr(v): ("exact", runtime.addr(gw.address))}, gwp.TO_ME, {}))
        d.entries.append(Entry(gwp.PORT_SIDE, gwp.wan_port_match(gw.wan_port), gwp.FROM_WAN, {}))
        for prefix, mac, port in ((gw.lan_prefix, gw.lan_mac, gw.lan_port), (gw.wan_prefix, gw.wan_mac, gw.wan_port)):
            d.entries.append(_route(prefix, mac, switch_mac, port))
    sites_of = records.all_sites()
    inner_of = records.all_inner()
    # SAs: inbound slots, selectors and SAD-dec entries on the receiver, the outbound slot on the sender
    active_out = {}
    for spi, tunnel, src, dst, out_slot, in_slot, cfg, _, state in records.sas(states=LIVE):
        if state == "active":
            active_out[(tunnel, src, dst)] = out_slot
        if dst in out and in_slot is not None and in_slot >= 0:
            src_addr = gws[src].address if src in gws else json.loads(cfg)["tunnel"][0]
            dgw = gws[dst]
            out[dst].sas[in_slot] = (spi, cfg, "in")
            sel = sa_selectors(src, dgw, gws, sites_of.get(tunnel), inner_of.get(tunnel))
            if sel:
                out[dst].entries.append(Entry(gwp.sa_selectors(gwp.version(sel[0])), gwp.selectors_match(in_slot, *sel), gwp.SELECTOR_OK, {},
                                              priority=gwp.SELECTOR_PRIORITY))
            out[dst].entries.append(Entry(gwp.sad_dec(gwp.version(dgw.address)), gwp.sad_dec_match(src_addr, dgw.address, spi),
                                          gwp.DEC_SA, {gwp.SA_INDEX: in_slot}))
        if state == "active" and src in out and out_slot is not None and out_slot >= 0:
            out[src].sas[out_slot] = (spi, cfg, "out")
    # policies of the tunnels that are up
    for name, a, b, suite, _, _, _, state in records.tunnels(states=("up", "pending")):
        if b.startswith(HOST):
            if a not in out:
                continue
            gw = gws[a]
            host = records.host_info(name)
            if host and host.get("address") and host.get("mac"):
                addr = host["address"]
                out[a].entries.append(_route(addr + ("/128" if ":" in addr else "/32"), host["mac"], switch_mac, gw.wan_port))
            if state == "up":
                slot = active_out.get((name, a, b))
                inner = inner_of.get(name)
                if slot is not None and inner:
                    out[a].entries.append(Entry(gwp.spd(gwp.version(inner)), gwp.spd_match(gw.lan_prefix, inner), gwp.PROTECT,
                                                {gwp.SA_INDEX: slot}, priority=20, phase=2))
            continue
        if state != "up" or a not in out or b not in out:
            continue
        sites = sites_of.get(name) or {a: gws[a].lan_prefix, b: gws[b].lan_prefix}
        for src, dst in ((a, b), (b, a)):
            table = gwp.spd(gwp.version(sites[src]))
            match = gwp.spd_match(sites[src], sites[dst])
            if suite == "bypass":
                out[src].entries.append(_route(sites[dst], gws[src].wan_mac, switch_mac, gws[src].wan_port))
                out[src].entries.append(Entry(table, match, gwp.BYPASS, {}, priority=10, phase=2))
                out[dst].entries.append(Entry(table, match, gwp.BYPASS, {}, priority=10, phase=2))
                continue
            slot = active_out.get((name, src, dst))
            if slot is not None:
                out[src].entries.append(Entry(table, match, gwp.PROTECT, {gwp.SA_INDEX: slot}, priority=10, phase=2))
    for hook in hooks:
        hook(out, switch_mac)
    return out


def _route(prefix, dst_mac, src_mac, port):
    net, plen = prefix.split("/")
    v = gwp.version(prefix)
    return Entry(gwp.lpm(v), {gwp.dst_addr(v): ("lpm", runtime.addr(net), int(plen))}, gwp.set_nhop(v),
                 {"dst_mac": runtime.mac(dst_mac), "src_mac": runtime.mac(src_mac), "port": port})


# ---------------------------------------------------------------------------------------------- the plan

class Plan:
    """The writes that converge one gateway (phases 1-3, see the module's description) and what they mean."""

    def __init__(self, name):
        self.name = name
        # 0: SAs in a slot other than the recorded one (their SPI must be free before it is written), 1: receive,
        # 2: send, 3: policy deletes, 4: other deletes, 5: SA deletes
        self.phases = {0: [], 1: [], 2: [], 3: [], 4: [], 5: []}
        self.renew = []          # SPIs of outbound SAs to renew (their slot lost what the controller had sent)
        self.adopted = 0
        self.counts = {"add": 0, "modify": 0, "delete": 0, "sa_write": 0, "sa_delete": 0}

    def empty(self):
        return not any(self.phases.values()) and not self.renew

    def summary(self):
        c = self.counts
        return (f"{self.adopted} adopted, {c['add']} added, {c['modify']} changed, {c['delete']} removed, "
                f"{c['sa_write']} SAs written, {c['sa_delete']} SAs removed, {len(self.renew)} to renew")


def plan(switch, desired, fresh=()):
    """Read the switch and compare it with `desired` (a Desired); the Plan. `fresh`: SPIs of outbound SAs never
    sent (safe to write)."""
    ids = Ids(switch)
    actual = read_tables(switch, gwp.tables())
    sas = read_sas(switch)
    p = Plan(desired.name)
    want = {}
    for e in desired.entries:
        want[e.key(ids)] = e
    for key, e in want.items():
        have = actual.get(key)
        if have is None:
            p.phases[e.phase].append(("insert", e))
            p.counts["add"] += 1
        elif have != e.value(ids):
            p.phases[e.phase].append(("modify", e))
            p.counts["modify"] += 1
        else:
            p.adopted += 1
    names = {ids.table(t)[0]: t for t in gwp.tables()}
    fields_of = {}
    spd_ids = {ids.table(gwp.spd(4))[0], ids.table(gwp.spd(6))[0]}
    for key in actual.keys() - want.keys():
        tid, match, prio = key
        table = names[tid]
        if table not in fields_of:
            fields_of[table] = {fid: n for n, fid in ids.table(table)[1].items()}
        m = {}
        for fm in match:
            fid, kind = fm[0], fm[1]
            if kind == "lpm":
                m[fields_of[table][fid]] = ("lpm", fm[2], fm[3])
            elif kind == "ternary":
                m[fields_of[table][fid]] = ("ternary", fm[2], fm[3])
            elif kind == "range":
                m[fields_of[table][fid]] = ("range", fm[2], fm[3])
            else:
                m[fields_of[table][fid]] = ("exact", fm[2])
        p.phases[3 if tid in spd_ids else 4].append(("delete", Entry(table, m, None, {}, prio)))
        p.counts["delete"] += 1
    where = {spi: slot for slot, spi in sas.items()}
    moved = set()
    for slot, (spi, cfg, direction) in desired.sas.items():
        have = sas.get(slot)
        if have == spi:
            p.adopted += 1
            continue
        other = where.get(spi)
        if other is not None and other not in desired.sas:
            p.phases[0].append(("sa_delete", other))
            p.counts["sa_delete"] += 1
            moved.add(other)
        if direction == "out" and spi not in fresh:
            p.renew.append(spi)
            continue
        p.phases[1 if direction == "in" else 2].append(("sa_write", (slot, cfg)))
        p.counts["sa_write"] += 1
    for slot in sas.keys() - desired.sas.keys() - moved:
        p.phases[5].append(("sa_delete", slot))
        p.counts["sa_delete"] += 1
    return p


def apply_phase(switch, ops):
    """Send one phase's writes to a switch as one Write; ALREADY_EXISTS and NOT_FOUND refusals are fine (the entry
    is, or is not, there as wanted); other refusals raise."""
    if not ops:
        return
    with switch.collect() as ups:
        for kind, x in ops:
            if kind == "sa_write":
                gwp.sa_write(switch, x[0], json.loads(x[1]))
            elif kind == "sa_delete":
                gwp.sa_delete(switch, x)
            elif kind == "insert":
                switch.table_insert(x.table, x.match, x.action, x.params, x.priority)
            elif kind == "modify":
                switch.table_modify(x.table, x.match, x.action, x.params, x.priority)
            else:
                switch.table_delete(x.table, x.match, x.priority)
    try:
        switch.write_async(ups).result()
    except runtime.WriteError as e:
        bad = [m for m in str(e).split("; ") if not _benign(m)]
        if bad:
            raise runtime.WriteError("; ".join(bad), e.applied) from e


def _benign(message):
    m = message.lower()
    return "already exists" in m or "no entry with this match" in m or "no sa in slot" in m or "not found" in m


# ---------------------------------------------------------------------------------------------- the runs

# what Reconciler is handed (its constructor's parameters, in order)
SEAM = ("records", "lock", "gateways", "journal", "away", "closed", "event", "renew", "desired_hooks")


class Reconciler:
    """The controller's reconciliation runs (see the module's description). `records`: the store's
    (p4sec.ipsec.store.Records); `lock`: the controller's; `gateways`: the controller's (name -> Gateway);
    `journal`: its intent journal (p4sec.ipsec.recovery.IntentLog: the SAs never sent outbound); `away`: the live
    set of gateways that are unreachable (p4sec.ipsec.recovery.Recovery.away: left out); `closed`: set when the
    controller closes (the periodic runs stop); `event(name, what)`: record an event; `renew(spi, reason)`: renew
    an SA; `desired_hooks`: the live list of fn(desired, switch_mac) that add desired entries."""

    def __init__(self, records, lock, gateways, journal, away, closed, event, renew, desired_hooks=()):
        self.records, self.lock, self.gateways, self.journal = records, lock, gateways, journal
        self.away, self.closed, self.event, self.renew, self.desired_hooks = away, closed, event, renew, desired_hooks
        self.periodic = None        # the thread of start_periodic

    def desired(self, switch_mac=SWITCH_MAC):
        """{gateway name: Desired} from the store (desired_state, with the hooks)."""
        return desired_state(self.gateways, self.records, switch_mac, self.desired_hooks)

    def plans(self, names=None):
        """{gateway: Plan} of the reachable gateways among `names` (default: all); a gateway that cannot be read is
        left out (its stream's end, if it went away, starts its reconnection)."""
        names = [n for n in (names or self.gateways) if n not in self.away]
        want = self.desired(SWITCH_MAC)
        fresh = self.journal.fresh()
        out = {}
        for n in names:
            try:
                out[n] = plan(self.gateways[n].switch, want[n], fresh)
            except Exception as e:
                log.warning("reconcile: cannot read %s: %s", n, e)
        return out

    def run(self, names=None, dry_run=False):
        """Converge the gateways (default: all that are reachable) to the recorded state; {gateway: summary}.
        With dry_run, only compare: {gateway: {in_sync, summary}}."""
        with self.lock:
            plans = self.plans(names)
            if dry_run:
                return {n: {"in_sync": p.empty(), "summary": p.summary()} for n, p in plans.items()}
            for phase in (0, 1, 2, 3, 4, 5):     # each phase on every gateway before the next (Plan)
                for n, p in plans.items():
                    apply_phase(self.gateways[n].switch, p.phases[phase])
            for n, p in plans.items():
                gw = self.gateways[n]
                for _, slot in p.phases[0] + p.phases[5]:
                    gw.release_slot(slot)
                if not p.empty():
                    self.event(n, f"reconciled: {p.summary()}")
            self.records.commit()
            for n, p in plans.items():
                for spi in p.renew:
                    try:
                        self.renew(spi, reason=f"its outbound SA was missing on {n}")
                    except Exception as e:
                        self.event(n, f"renewing SA {spi:#010x} failed: {e}")
            self.records.commit()
            return {n: p.summary() for n, p in plans.items()}

    def start_periodic(self, interval):
        """Reconcile every `interval` seconds (a switch that lost state without losing its stream, entries
        changed by someone else) until the controller closes."""
        def loop():
            while not self.closed.wait(interval):
                try:
                    self.run()
                except Exception as e:
                    log.warning("periodic reconciliation: %s", e)
        self.periodic = threading.Thread(target=loop, daemon=True, name="reconcile")
        self.periodic.start()
