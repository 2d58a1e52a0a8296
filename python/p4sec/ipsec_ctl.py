"""`p4sec-controller`: the IPsec controller as a service, its northbound REST API and its CLI.

    p4sec-controller run CONFIG.yaml                 run the controller (gateways, tunnels, renewals, REST API)
    p4sec-controller [--api URL] tunnels list        the tunnels and their state
    p4sec-controller [--api URL] tunnels show NAME   one tunnel: SAs and event log
    p4sec-controller [--api URL] tunnels up NAME     bring a tunnel profile up
    p4sec-controller [--api URL] tunnels down NAME   tear it down
    p4sec-controller [--api URL] tunnels rekey NAME  renew both directions of NAME now
    p4sec-controller [--api URL] tunnels rekey-pair A B   renew every tunnel between gateways A and B now
    p4sec-controller [--api URL] reconcile [--check] compare the switches with the recorded state (--check:
                                                     only compare; exit 1 if they differ), else converge them
    p4sec-controller [--api URL] sas list [--tunnel NAME]

CONFIG (YAML):

    db: controller.db                 # SQLite state; a restart with the same file adopts running switches
    # store: {postgres: "host=/run/postgresql dbname=p4sec"}   # instead of db: replicas share the state (HA)
    # ha: {name: r1, lease: 2.0}      # this replica's name; the leader lease in seconds
    # agents: {listen: "0.0.0.0:50051", ca: ca/, cert: controller, advertise: "10.0.0.11:50051"}
    #                                 # road warriors' endpoint (mutual TLS); with HA it answers on every replica,
    #                                 # a follower forwards to the leader at the address it advertises
    program: out/ipsec_gateway        # the compiled programs/ipsec_gateway.p4 (p4sec compile ... -o DIR)
    rest: 127.0.0.1:8080              # northbound REST API (OpenAPI description at /openapi.json)
    grace: 1.0                        # seconds an old SAD-dec entry stays after a renewal
    reconcile_interval: 10            # seconds between reconciliations of every switch (0: only on start/reconnect)
    gateways:
      - {name: S1, grpc: 127.0.0.1:9559, device_id: 1, address: 192.0.2.1,
         lan: {prefix: 10.1.0.0/16, port: 1, mac: "02:00:00:00:0a:01"},
         wan: {prefix: 198.51.100.0/24, port: 2, mac: "02:00:00:00:0b:02"}}
    tunnels:                          # profiles
      - {name: S1-S2, a: S1, b: S2, suite: aes-gcm-128, auto: true,
         soft: {packets: 1000000, seconds: 3600}, hard: {packets: 2000000, seconds: 4000}}
      - {name: S1-S2-lab, a: S1, b: S2, a_prefix: 10.1.7.0/24, b_prefix: 10.2.7.0/24}   # one per subnet pair
      - {name: S1-S2-nat, a: S1, b: S2, a_prefix: 10.1.8.0/24, b_prefix: 10.2.8.0/24, encap: udp}   # ESP in UDP (RFC 3948, port 4500): across a NAT
"""
import argparse
import ipaddress
import json
import logging
import pathlib
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import runtime
from .controller import SUITES, ControllerError, Gateway, IpsecController

LIMIT_KEYS = {"packets", "bytes", "seconds"}


class ConfigError(Exception):
    pass


def _req(d, key, where, kind=None):
    if not isinstance(d, dict) or key not in d:
        raise ConfigError(f"{where}: `{key}` is missing")
    v = d[key]
    if kind is not None and not isinstance(v, kind):
        raise ConfigError(f"{where}: `{key}` must be {kind.__name__ if isinstance(kind, type) else kind}")
    return v


def load_config(path):
    import yaml
    try:
        cfg = yaml.safe_load(pathlib.Path(path).read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"{path}: {e}") from e
    if not isinstance(cfg, dict):
        raise ConfigError(f"{path}: expected a mapping at the top")
    _req(cfg, "program", path, str)
    names = set()
    for i, g in enumerate(_req(cfg, "gateways", path, list)):
        where = f"{path}: gateways[{i}]"
        for k, t in (("name", str), ("grpc", str), ("address", str), ("lan", dict), ("wan", dict)):
            _req(g, k, where, t)
        for side in ("lan", "wan"):
            for k in ("prefix", "port", "mac"):
                _req(g[side], k, f"{where}.{side}")
        names.add(g["name"])
    profiles = {}
    for i, t in enumerate(cfg.get("tunnels") or []):
        where = f"{path}: tunnels[{i}]"
        for k in ("name", "a", "b"):
            _req(t, k, where, str)
        for k in ("a", "b"):
            if t[k] not in names:
                raise ConfigError(f"{where}: unknown gateway {t[k]!r}")
        for k in ("a_prefix", "b_prefix"):
            if k in t:
                try:
                    ipaddress.ip_network(t[k])
                except (TypeError, ValueError) as e:
                    raise ConfigError(f"{where}: {k}: {e}") from e
        suite = t.get("suite", "aes-gcm-128")
        if suite not in SUITES and suite != "bypass":
            raise ConfigError(f"{where}: unknown suite {suite!r} (bypass, {', '.join(SUITES)})")
        if t.get("encap", "esp") not in ("esp", "udp"):
            raise ConfigError(f"{where}: unknown encap {t.get('encap')!r} (esp, udp)")
        for k in ("soft", "hard"):
            lim = t.get(k) or {}
            if not isinstance(lim, dict) or set(lim) - LIMIT_KEYS or not all(isinstance(v, int) and v > 0 for v in lim.values()):
                raise ConfigError(f"{where}: `{k}` takes positive integers for packets, bytes, seconds")
        profiles[t["name"]] = t
    cfg["profiles"] = profiles
    hosts = {}
    for i, h in enumerate(cfg.get("host_profiles") or []):
        where = f"{path}: host_profiles[{i}]"
        for k in ("name", "gateway", "pool"):
            _req(h, k, where, str)
        if h["gateway"] not in names:
            raise ConfigError(f"{where}: unknown gateway {h['gateway']!r}")
        try:
            ipaddress.ip_network(h["pool"])
        except ValueError as e:
            raise ConfigError(f"{where}: pool: {e}") from e
        if h.get("encap", "esp") not in ("esp", "udp"):
            raise ConfigError(f"{where}: unknown encap {h.get('encap')!r} (esp, udp)")
        for k in ("soft", "hard"):
            lim = h.get(k) or {}
            if not isinstance(lim, dict) or set(lim) - LIMIT_KEYS or not all(isinstance(v, int) and v > 0 for v in lim.values()):
                raise ConfigError(f"{where}: `{k}` takes positive integers for packets, bytes, seconds")
        hosts[h["name"]] = h
    cfg["hosts"] = hosts
    clients = {}
    for i, c in enumerate(cfg.get("clients") or []):
        where = f"{path}: clients[{i}]"
        _req(c, "name", where, str)
        for p in c.get("profiles") or []:
            if p not in hosts:
                raise ConfigError(f"{where}: unknown host profile {p!r}")
        clients[c["name"]] = c.get("profiles") or []
    cfg["clients"] = clients
    if hosts or cfg.get("agents"):
        ag = cfg.get("agents")
        for k in ("listen", "ca", "cert"):
            _req(ag, k, f"{path}: agents", str)
    if cfg.get("store") is not None:
        st = cfg["store"]
        if not isinstance(st, dict) or not isinstance(st.get("postgres"), str):
            raise ConfigError(f"{path}: store: expected {{postgres: DSN}}")
        _req(cfg.get("ha"), "name", f"{path}: ha", str)
    return cfg


OPENAPI = {
    "openapi": "3.0.3",
    "info": {"title": "p4sec IPsec controller", "version": "1.0"},
    "paths": {
        "/tunnels": {"get": {"summary": "list tunnels (profiles and their state)", "responses": {"200": {"description": "tunnels"}}}},
        "/tunnels/{name}": {"get": {"summary": "one tunnel with its SAs and event log", "parameters": [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}],
                                    "responses": {"200": {"description": "tunnel"}, "404": {"description": "no such tunnel"}}}},
        "/tunnels/{name}/up": {"post": {"summary": "bring the tunnel profile up", "responses": {"200": {"description": "SPIs"}, "409": {"description": "already up"}}}},
        "/tunnels/{name}/down": {"post": {"summary": "tear the tunnel down", "responses": {"200": {"description": "done"}, "409": {"description": "not up"}}}},
        "/tunnels/{name}/rekey": {"post": {"summary": "renew both directions of this tunnel now", "responses": {"200": {"description": "new SPIs"}}}},
        "/pairs/{a}/{b}/rekey": {"post": {"summary": "renew every tunnel between gateways a and b now",
                                          "responses": {"200": {"description": "new SPIs by tunnel"}, "409": {"description": "no tunnel up"}}}},
        "/reconcile": {"get": {"summary": "compare every reachable switch with the recorded state", "responses": {"200": {"description": "per gateway"}}},
                       "post": {"summary": "converge every reachable switch to the recorded state", "responses": {"200": {"description": "per gateway"}}}},
        "/sas": {"get": {"summary": "security associations", "parameters": [{"name": "tunnel", "in": "query", "schema": {"type": "string"}}],
                         "responses": {"200": {"description": "SAs (no keys)"}}}},
        "/openapi.json": {"get": {"summary": "this description", "responses": {"200": {"description": "OpenAPI 3"}}}},
    },
}


class Service:
    """The running controller: gateways from the config, auto tunnels up, digests handled, REST served."""

    def __init__(self, cfg, db=None, election_id=None):
        self.cfg = cfg
        self.ctl = IpsecController(db or cfg.get("db", ":memory:"), grace=float(cfg.get("grace", 1.0)))
        self.switches = []
        program = pathlib.Path(cfg["program"])
        for g in cfg["gateways"]:
            sw = runtime.Switch(g["grpc"], device_id=int(g.get("device_id", 1)), election_id=int(election_id or g.get("election_id", 1)))
            self.switches.append(sw)
            gw = Gateway(g["name"], sw, g["address"], g["lan"]["prefix"], int(g["lan"]["port"]), g["lan"]["mac"], int(g["wan"]["port"]),
                         g["wan"]["mac"], g["wan"]["prefix"])
            adopted = self.ctl.add_gateway(gw, program)
            logging.info("gateway %s: %s", g["name"], "adopted" if adopted else "pipeline pushed")
        self.ctl.resume()
        interval = float(cfg.get("reconcile_interval", 10))
        if interval > 0:
            self.ctl.start_periodic(interval)
        up = {t["name"] for t in self.ctl.tunnels() if t["state"] in ("up", "degraded")}
        for name, p in cfg["profiles"].items():
            if p.get("auto") and name not in up:
                self.up(name)

    def up(self, name):
        p = self.cfg["profiles"].get(name)
        if p is None:
            raise KeyError(name)
        spis = self.ctl.connect(p["a"], p["b"], p.get("suite", "aes-gcm-128"), p.get("soft"), p.get("hard"), name=name,
                                a_prefix=p.get("a_prefix"), b_prefix=p.get("b_prefix"), encap=p.get("encap"))
        return {f"{s}->{d}": f"{v[0]:#010x}" for (s, d), v in spis.items()}

    def down(self, name):
        self.ctl.disconnect(name)
        return {"down": name}

    def rekey(self, name):
        new = self.ctl.rekey(name)
        return {f"{s}->{d}": f"{v[0]:#010x}" for (s, d), v in new.items()}

    def rekey_pair(self, a, b):
        return {t: {f"{s}->{d}": f"{v[0]:#010x}" for (s, d), v in new.items()} for t, new in self.ctl.rekey_pair(a, b).items()}

    def reconcile(self, dry_run):
        return self.ctl.reconcile(dry_run=dry_run)

    def tunnel(self, name):
        t = next((t for t in self.ctl.tunnels() if t["name"] == name), None)
        if t is None:
            p = self.cfg["profiles"].get(name)
            if p is None:
                raise KeyError(name)
            t = {"name": name, "a": p["a"], "b": p["b"], "suite": p.get("suite", "aes-gcm-128"), "encap": p.get("encap", "esp"), "state": "down",
                 "active_spis": []}
        t["sas"] = [dict(s, spi=f"{s['spi']:#010x}") for s in self.ctl.sas(name)]
        t["events"] = [{"t": e[0], "what": e[2]} for e in self.ctl.events(name)]
        return t

    def tunnels(self):
        known = {t["name"]: t for t in self.ctl.tunnels()}
        for name, p in self.cfg["profiles"].items():
            known.setdefault(name, {"name": name, "a": p["a"], "b": p["b"], "suite": p.get("suite", "aes-gcm-128"),
                                    "encap": p.get("encap", "esp"), "state": "down", "active_spis": []})
        return list(known.values())

    def sas(self, tunnel=None):
        return [dict(s, spi=f"{s['spi']:#010x}") for s in self.ctl.sas(tunnel)]

    # ---------------------------------------------------------------- the agents' endpoint (host-to-site)

    def _client(self, ctx):
        return admit_client(self.cfg, ctx)

    def _allowed(self, client, req, ctx):
        return allowed_profile(self.cfg, client, req, ctx)

    def _inner_address(self, client, profile):
        """The client's address inside the site: the same one every time (kept in the database)."""
        key = f"addr:{profile}:{client}"
        row = self.ctl.db.execute("select value from kv where key = ?", (key,)).fetchone()
        if row:
            return row[0]
        pool = ipaddress.ip_network(self.cfg["hosts"][profile]["pool"])
        used = {r[0] for r in self.ctl.db.execute("select value from kv where key like ?", (f"addr:{profile}:%",))}
        for h in pool.hosts():
            if str(h) not in used:
                self.ctl.db.execute("insert into kv values (?, ?)", (key, str(h)))
                self.ctl.db.commit()
                return str(h)
        raise ControllerError(f"the address pool of {profile} is exhausted")

    def _agent_up(self, client, req, ctx):
        import grpc
        h = self._allowed(client, req, ctx)
        try:
            ipaddress.ip_address(req.get("address", ""))
            runtime.mac(req.get("mac", ""))
        except (ValueError, AttributeError):
            ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, "address and mac of the host are required")
        try:
            with self.ctl.lock:
                inner = self._inner_address(client, h["name"])
                return self.ctl.host_up(client, h["name"], h["gateway"], req["address"], req["mac"], inner, h.get("suite", "aes-gcm-128"),
                                        h.get("soft"), h.get("hard"), encap=h.get("encap"))
        except ControllerError as e:
            ctx.abort(grpc.StatusCode.FAILED_PRECONDITION, str(e))

    def _host_op(self, op, client, req, ctx):
        """A controller operation on the client's host tunnel; its refusals become FAILED_PRECONDITION."""
        import grpc
        h = self._allowed(client, req, ctx)
        try:
            return op(client, h["name"]), f"{h['name']}@{client}"
        except ControllerError as e:
            ctx.abort(grpc.StatusCode.FAILED_PRECONDITION, str(e))

    def _agent_ready(self, client, req, ctx):
        return {"up": self._host_op(self.ctl.host_ready, client, req, ctx)[1]}

    def _agent_renew(self, client, req, ctx):
        return self._host_op(self.ctl.host_renew, client, req, ctx)[0]

    def _agent_renew_ready(self, client, req, ctx):
        return {"renewed": self._host_op(self.ctl.host_renew_ready, client, req, ctx)[1]}

    def _agent_down(self, client, req, ctx):
        return {"down": self._host_op(self.ctl.host_down, client, req, ctx)[1]}

    def close(self):
        self.ctl.close()
        for s in self.switches:
            s.close()


# ---------------------------------------------------------------------- the agents' endpoint (host-to-site)

FORWARDED_CLIENT, FORWARDED_SERIAL = "p4sec-forwarded-client", "p4sec-forwarded-serial"
AGENT_METHODS = ("List", "Up", "Ready", "Down", "Renew", "RenewReady")


def admit_client(cfg, ctx):
    """The agent calling (the common name of its certificate), once its certificate is known not to be revoked
    and it is a client of this controller; the call is aborted otherwise."""
    import grpc
    from . import ca
    pem = (ctx.auth_context().get("x509_pem_cert") or [b""])[0]
    if not pem:
        ctx.abort(grpc.StatusCode.UNAUTHENTICATED, "a client certificate is required")
    cn, serial = ca.identity(pem)
    return admit_identity(cfg, cn, serial, ctx)


def admit_identity(cfg, cn, serial, ctx):
    """`cn` (its certificate's serial `serial`) if it is not revoked and a client of this controller."""
    import grpc
    from . import ca
    try:
        revoked = ca.revoked_serials(cfg["agents"]["ca"])
    except ca.RevocationListError as e:
        # fail closed: without a usable list nobody is known not to be revoked
        logging.error("agent %s: refused, the revocation list is unusable: %s", cn, e)
        ctx.abort(grpc.StatusCode.UNAVAILABLE, "the controller cannot read its certificate revocation list; try again later")
    if serial in revoked:
        logging.warning("agent %s: refused, its certificate (serial %d) is revoked", cn, serial)
        ctx.abort(grpc.StatusCode.PERMISSION_DENIED, f"the certificate of {cn} is revoked")
    if cn not in cfg["clients"]:
        ctx.abort(grpc.StatusCode.PERMISSION_DENIED, f"{cn} is not a client of this controller")
    return cn


def allowed_profile(cfg, client, req, ctx):
    """The host profile the request names, if `client` may use it (the call is aborted otherwise)."""
    import grpc
    p = req.get("profile")
    if p not in cfg["clients"][client]:
        ctx.abort(grpc.StatusCode.PERMISSION_DENIED, f"{client} may not use profile {p!r}")
    return cfg["hosts"][p]


def is_replica_cert(pem, name):
    """Whether `pem` is the certificate of a controller replica: common name `name` (the agents' `cert`) and a
    server certificate (issued with `p4sec-ca issue --server`; an agent's certificate never is one)."""
    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    cert = x509.load_pem_x509_certificate(pem)
    cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    try:
        eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        return False
    return bool(cn) and cn[0].value == name and ExtendedKeyUsageOID.SERVER_AUTH in eku


class AgentEndpoint:
    """The agents' gRPC endpoint (service p4sec.Agent, JSON messages, mutual TLS), on every replica.

    Every call is admitted here, on the replica that receives it: the agent's certificate (verified by TLS against
    the CA), its serial against the revocation list, its client name and profile. The replica that leads then
    runs it (`service()` gives its Service). A follower (`service()` is None) runs nothing itself: it forwards the
    admitted call to the leader's endpoint (`leader()` gives its address) over mutual TLS with its own certificate
    (the controller's, a server certificate), naming the client and its certificate's serial in the call's
    metadata, and returns the leader's answer or error. The leader trusts that metadata only from a replica's
    certificate, checks the client again, and runs a forwarded call only while it leads (otherwise UNAVAILABLE:
    no call travels further, and the agent asks again). Agents retry UNAVAILABLE, so a call made while the lease
    changes hands lands on the next leader."""

    def __init__(self, cfg, service, leader=None):
        self.cfg, self.service, self.leader = cfg, service, leader
        ag = cfg["agents"]
        self.ca_dir = pathlib.Path(ag["ca"])
        self.name = ag["cert"]
        self.key = (self.ca_dir / f"{ag['cert']}.key").read_bytes()
        self.crt = (self.ca_dir / f"{ag['cert']}.crt").read_bytes()
        self.root = (self.ca_dir / "ca.crt").read_bytes()
        self.channels = {}
        self.lock = threading.Lock()
        self.server = None

    def start(self):
        import grpc
        from concurrent.futures import ThreadPoolExecutor
        creds = grpc.ssl_server_credentials([(self.key, self.crt)], root_certificates=self.root, require_client_auth=True)
        self.server = grpc.server(ThreadPoolExecutor(max_workers=8))
        handlers = {m: grpc.unary_unary_rpc_method_handler(lambda req, ctx, m=m: self.call(m, req, ctx),
                                                           request_deserializer=lambda b: json.loads(b or b"{}"),
                                                           response_serializer=lambda o: json.dumps(o).encode())
                    for m in AGENT_METHODS}
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("p4sec.Agent", handlers),))
        self.server.add_secure_port(self.cfg["agents"]["listen"], creds)
        self.server.start()
        return self

    def _admit(self, ctx):
        """(client, forwarded): the agent calling, directly or through a replica."""
        import grpc
        from . import ca
        md = dict(ctx.invocation_metadata() or ())
        if FORWARDED_CLIENT not in md:
            return admit_client(self.cfg, ctx), False
        pem = (ctx.auth_context().get("x509_pem_cert") or [b""])[0]
        if not pem or not is_replica_cert(pem, self.name):
            ctx.abort(grpc.StatusCode.PERMISSION_DENIED, "only a controller replica may forward an agent's call")
        try:
            revoked = ca.revoked_serials(self.ca_dir)
        except ca.RevocationListError as e:
            logging.error("a call forwarded by a replica: refused, the revocation list is unusable: %s", e)
            ctx.abort(grpc.StatusCode.UNAVAILABLE, "the controller cannot read its certificate revocation list; try again later")
        if ca.identity(pem)[1] in revoked:
            ctx.abort(grpc.StatusCode.PERMISSION_DENIED, "the forwarding replica's certificate is revoked")
        try:
            serial = int(md.get(FORWARDED_SERIAL, ""))
        except ValueError:
            ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, "a forwarded call names its client's certificate serial")
        return admit_identity(self.cfg, md[FORWARDED_CLIENT], serial, ctx), True

    def call(self, method, req, ctx):
        import grpc
        from . import ca
        client, forwarded = self._admit(ctx)
        if method == "List":
            return {"client": client, "profiles": self.cfg["clients"][client]}
        allowed_profile(self.cfg, client, req, ctx)
        svc = self.service()
        if svc is not None:
            return getattr(svc, "_agent_" + {"Up": "up", "Ready": "ready", "Down": "down", "Renew": "renew",
                                             "RenewReady": "renew_ready"}[method])(client, req, ctx)
        if forwarded:
            ctx.abort(grpc.StatusCode.UNAVAILABLE, "this replica does not lead (the lease is changing hands); try again")
        address = self.leader() if self.leader else None
        if not address:
            ctx.abort(grpc.StatusCode.UNAVAILABLE, "no replica leads right now (one takes over within the lease); try again")
        pem = ctx.auth_context().get("x509_pem_cert")[0]
        rpc = self._channel(address).unary_unary(f"/p4sec.Agent/{method}", request_serializer=lambda o: json.dumps(o).encode(),
                                                 response_deserializer=json.loads)
        try:
            return rpc(req, timeout=30, metadata=((FORWARDED_CLIENT, client), (FORWARDED_SERIAL, str(ca.identity(pem)[1]))))
        except grpc.RpcError as e:
            ctx.abort(e.code(), e.details() or f"the leader at {address} did not answer")

    def _channel(self, address):
        import grpc
        with self.lock:
            ch = self.channels.get(address)
            if ch is None:
                creds = grpc.ssl_channel_credentials(self.root, self.key, self.crt)
                ch = self.channels[address] = grpc.secure_channel(address, creds, options=[("grpc.ssl_target_name_override", self.name)])
            return ch

    def stop(self):
        if self.server is not None:
            self.server.stop(0)
        for ch in self.channels.values():
            ch.close()


def make_handler(svc, replica=None):
    """The REST handler of `svc` (a Service, or a callable giving the Service while this replica leads and None
    while it follows: a follower forwards every request to the leader's REST API)."""
    current = svc if callable(svc) else (lambda: svc)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt, *args):
            logging.debug("rest: " + fmt, *args)

        def _send(self, code, obj):
            body = json.dumps(obj, indent=1).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _forward(self, method):
            holder, term, rest = replica["lease"].leader() if replica else (None, None, None)
            if not rest:
                return self._send(503, {"error": "no leader right now (a replica takes over within the lease)"})
            req = urllib.request.Request(f"http://{rest}{self.path}", method=method, data=b"" if method == "POST" else None)
            try:
                with urllib.request.urlopen(req, timeout=60) as r:
                    return self._send(r.status, json.loads(r.read()))
            except urllib.error.HTTPError as e:
                return self._send(e.code, json.loads(e.read() or b"{}"))
            except urllib.error.URLError as e:
                return self._send(503, {"error": f"the leader {holder} at {rest} does not answer: {e.reason}"})

        def _route(self, method):
            from urllib.parse import parse_qs, urlparse
            u = urlparse(self.path)
            parts = [p for p in u.path.split("/") if p]
            q = parse_qs(u.query)
            svc = current()
            if parts == ["replica"] and method == "GET":
                return self._send(200, {"name": replica["name"] if replica else None, "leader": svc is not None,
                                        "term": replica.get("term") if replica else None})
            if svc is None:
                return self._forward(method)
            try:
                if method == "GET" and parts == ["openapi.json"]:
                    return self._send(200, OPENAPI)
                if method == "GET" and parts == ["tunnels"]:
                    return self._send(200, svc.tunnels())
                if method == "GET" and len(parts) == 2 and parts[0] == "tunnels":
                    return self._send(200, svc.tunnel(parts[1]))
                if method == "POST" and len(parts) == 3 and parts[0] == "tunnels" and parts[2] in ("up", "down", "rekey"):
                    return self._send(200, getattr(svc, parts[2])(parts[1]))
                if method == "POST" and len(parts) == 4 and parts[0] == "pairs" and parts[3] == "rekey":
                    return self._send(200, svc.rekey_pair(parts[1], parts[2]))
                if parts == ["reconcile"]:
                    return self._send(200, svc.reconcile(dry_run=method == "GET"))
                if method == "GET" and parts == ["sas"]:
                    return self._send(200, svc.sas((q.get("tunnel") or [None])[0]))
                return self._send(404, {"error": f"no such resource: {method} {u.path}"})
            except KeyError as e:
                return self._send(404, {"error": f"no tunnel profile {e.args[0]!r}"})
            except ControllerError as e:
                return self._send(409, {"error": str(e)})
            except Exception as e:  # a switch refused something: report it, keep serving
                logging.exception("rest: %s %s", method, self.path)
                return self._send(500, {"error": f"{type(e).__name__}: {e}"})

        def do_GET(self):
            self._route("GET")

        def do_POST(self):
            self._route("POST")

    return Handler


def run_replica(cfg):
    """One replica of a highly available controller (state in PostgreSQL): REST at once (forwarding to the leader),
    the controller itself once this replica holds the lease, with the lease's term as its election id."""
    from . import ha
    rcfg = cfg["ha"]
    host, port = cfg.get("rest", "127.0.0.1:8080").rsplit(":", 1)
    ag = cfg.get("agents")
    lease = ha.Lease(cfg["store"]["postgres"], rcfg["name"], float(rcfg.get("lease", 2.0)), rest=f"{host}:{port}",
                     agents=(ag.get("advertise") or ag["listen"]) if ag else None)
    replica = {"name": rcfg["name"], "lease": lease, "svc": None, "term": None}
    httpd = ThreadingHTTPServer((host, int(port)), make_handler(lambda: replica["svc"], replica))
    # the agents' endpoint answers on every replica: a follower forwards to the leader's
    agents = AgentEndpoint(cfg, lambda: replica["svc"], lambda: lease.leader("agents")[2]).start() if ag else None
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    print(f"p4sec-controller: replica {rcfg['name']} ready, REST API on http://{host}:{port}", flush=True)
    term = lease.wait(stop)
    if term is None:
        httpd.shutdown()
        if agents is not None:
            agents.stop()
        return
    lease.keep(lambda: ha.exit_deposed("the lease could not be renewed"))
    t0 = time.time()
    svc = Service(cfg, db=ha.PgDb(cfg["store"]["postgres"], rcfg["name"], term), election_id=term)
    replica["svc"], replica["term"] = svc, term
    logging.info("p4sec-controller: replica %s leads (term %d, election id %d; took %.2f s)", rcfg["name"], term, term, time.time() - t0)
    print(f"p4sec-controller: replica {rcfg['name']} leads (term {term})", flush=True)
    stop.wait()
    httpd.shutdown()
    if agents is not None:
        agents.stop()
    svc.close()


def run(config_path):
    cfg = load_config(config_path)
    if cfg.get("store", {}).get("postgres"):
        return run_replica(cfg)
    svc = Service(cfg)
    agents = None
    if cfg.get("agents"):
        agents = AgentEndpoint(cfg, lambda: svc).start()
        logging.info("p4sec-controller: agents' endpoint on %s (mutual TLS)", cfg["agents"]["listen"])
    host, port = cfg.get("rest", "127.0.0.1:8080").rsplit(":", 1)
    httpd = ThreadingHTTPServer((host, int(port)), make_handler(svc))
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    logging.info("p4sec-controller: REST API on http://%s:%s (OpenAPI: /openapi.json)", host, port)
    print(f"p4sec-controller: ready, REST API on http://{host}:{port}", flush=True)
    stop.wait()
    httpd.shutdown()
    if agents is not None:
        agents.stop()
    svc.close()


def api(base, method, path):
    req = urllib.request.Request(base.rstrip("/") + path, method=method, data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        raise ControllerError(json.loads(e.read()).get("error", str(e))) from e
    except urllib.error.URLError as e:
        raise ControllerError(f"cannot reach the controller at {base}: {e.reason}") from e


def main(argv=None):
    ap = argparse.ArgumentParser(prog="p4sec-controller", description="the p4sec IPsec controller", epilog=__doc__.split("\n\n")[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--api", default="http://127.0.0.1:8080", help="the running controller's REST API")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the controller")
    r.add_argument("config")
    r.add_argument("--log", default="INFO")
    t = sub.add_parser("tunnels")
    t.add_argument("action", choices=["list", "show", "up", "down", "rekey", "rekey-pair"])
    t.add_argument("name", nargs="?", help="the tunnel (rekey-pair: the first gateway)")
    t.add_argument("other", nargs="?", help="rekey-pair: the second gateway")
    c = sub.add_parser("reconcile", help="compare the switches with the recorded state, and converge them")
    c.add_argument("--check", action="store_true", help="only compare; exit 1 if a switch differs")
    s = sub.add_parser("sas")
    s.add_argument("action", choices=["list"])
    s.add_argument("--tunnel")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "run":
            logging.basicConfig(level=getattr(logging, a.log.upper(), logging.INFO), format="%(asctime)s %(name)s: %(message)s")
            run(a.config)
            return 0
        if a.cmd == "tunnels":
            if a.action == "list":
                rows = api(a.api, "GET", "/tunnels")
                print(f"{'name':<16} {'a':<8} {'b':<8} {'suite':<20} {'encap':<5} {'state':<6} active SPIs")
                for x in rows:
                    print(f"{x['name']:<16} {x['a']:<8} {x['b']:<8} {x['suite']:<20} {x.get('encap', 'esp'):<5} {x['state']:<6} "
                          f"{' '.join(x['active_spis'])}")
                return 0
            if a.action == "rekey-pair":
                if not (a.name and a.other):
                    raise ControllerError("tunnels rekey-pair needs two gateway names")
                print(json.dumps(api(a.api, "POST", f"/pairs/{a.name}/{a.other}/rekey")))
                return 0
            if not a.name:
                raise ControllerError(f"tunnels {a.action} needs a tunnel name")
            if a.action == "show":
                print(json.dumps(api(a.api, "GET", f"/tunnels/{a.name}"), indent=1))
            else:
                print(json.dumps(api(a.api, "POST", f"/tunnels/{a.name}/{a.action}")))
            return 0
        if a.cmd == "reconcile":
            r = api(a.api, "GET" if a.check else "POST", "/reconcile")
            for gw, x in sorted(r.items()):
                print(f"{gw:<8} {x['summary'] if isinstance(x, dict) else x}" + ("" if not isinstance(x, dict) else "  in sync" if x["in_sync"] else "  DIFFERS"))
            return 0 if not a.check or all(x["in_sync"] for x in r.values()) else 1
        if a.cmd == "sas":
            rows = api(a.api, "GET", "/sas" + (f"?tunnel={a.tunnel}" if a.tunnel else ""))
            print(f"{'spi':<12} {'tunnel':<16} {'src':<8} {'dst':<8} {'out':>4} {'in':>4} state")
            for x in rows:
                print(f"{x['spi']:<12} {x['tunnel']:<16} {x['src']:<8} {x['dst']:<8} {x['out_slot']:>4} {x['in_slot']:>4} {x['state']}")
            return 0
    except (ConfigError, ControllerError) as e:
        print(f"p4sec-controller: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
