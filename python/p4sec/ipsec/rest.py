"""The controller's northbound REST API (OpenAPI description at /openapi.json): the request handler of a
Service; a follower replica forwards every request to the leader's."""
import json
import logging
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler

from p4sec.ipsec import status_http
from p4sec.ipsec.controller import ControllerError
from p4sec.ipsec.store import StoreError


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
        "/health": {"get": {"summary": "this controller's health: the store, pending renewals, degraded tunnels (answered by every replica)",
                            "responses": {"200": {"description": "healthy"}, "503": {"description": "degraded, or the store fails"}}}},
        "/openapi.json": {"get": {"summary": "this description", "responses": {"200": {"description": "OpenAPI 3"}}}},
    },
}

def make_handler(svc, replica=None, status=None):
    """The REST handler of `svc` (a Service, or a callable giving the Service while this replica leads and None
    while it follows: a follower forwards every request to the leader's REST API). `status`: the status page's
    server (p4sec.ipsec.status_http.StatusServer), None when it is off; its paths are answered by every replica."""
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

        def _replica_health(self, svc):
            """A replica that does not lead (or does not run its controller yet): whether it reaches the store."""
            lease = replica["lease"] if replica else None
            store_ok, why = lease.health() if lease is not None else (False, "starting")
            holder = lease.leader()[0] if lease is not None and store_ok else None
            h = {"ok": store_ok, "replica": replica["name"] if replica else None, "leader": False, "store": why, "current_leader": holder}
            return self._send(200 if store_ok else 503, h)

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
            from urllib.parse import parse_qs, unquote, urlparse
            u = urlparse(self.path)
            # each segment URL-decoded after the split: a name may hold `/`, `?` or any character
            parts = [unquote(p) for p in u.path.split("/") if p]
            q = parse_qs(u.query)
            if status_http.owns(u.path):
                return status_http.handle(self, method, u.path, status)
            svc = current()
            if parts == ["replica"] and method == "GET":
                return self._send(200, {"name": replica["name"] if replica else None, "leader": svc is not None,
                                        "term": replica.get("term") if replica else None})
            if parts == ["health"] and method == "GET" and (svc is None or not hasattr(svc, "health")):
                return self._replica_health(svc)
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
                if method == "GET" and parts == ["health"]:
                    h = dict(svc.health(), **({"replica": replica["name"], "leader": True} if replica else {}))
                    return self._send(200 if h["ok"] else 503, h)
                if parts == ["reconcile"]:
                    return self._send(200, svc.reconcile(dry_run=method == "GET"))
                if method == "GET" and parts == ["sas"]:
                    return self._send(200, svc.sas((q.get("tunnel") or [None])[0]))
                return self._send(404, {"error": f"no such resource: {method} {u.path}"})
            except KeyError as e:
                return self._send(404, {"error": f"no tunnel profile {e.args[0]!r}"})
            except StoreError as e:
                return self._send(503, {"error": str(e)})
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
