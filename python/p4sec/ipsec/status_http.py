"""The status page's HTTP side, answered by the REST server of every controller process (one controller, or each
replica: a follower shows the leader's view, fetched from the leader, with its own name as the one serving):

    GET /status            the page (static HTML and JavaScript from p4sec/ipsec/static; it holds no data)
    GET /status/app.js     its script; /status/style.css its style
    GET /status.json       one snapshot (p4sec.ipsec.status.snapshot)          - bearer token required
    GET /status/events     server-sent events: a snapshot every `interval`     - bearer token required
    GET /metrics           Prometheus text (p4sec.ipsec.status_metrics)        - bearer token required

Off unless the configuration has a `status:` section (p4sec.ipsec.status): every path above then answers 404 with
how to turn it on."""
import json
import logging
import pathlib
import threading
import time
import urllib.error
import urllib.request

from p4sec.ipsec import status as st
from p4sec.ipsec import status_metrics

STATIC = pathlib.Path(__file__).resolve().parent / "static"
FILES = {"/status": ("index.html", "text/html; charset=utf-8"), "/status/": ("index.html", "text/html; charset=utf-8"),
         "/status/app.js": ("app.js", "text/javascript; charset=utf-8"), "/status/style.css": ("style.css", "text/css; charset=utf-8")}
DATA = ("/status.json", "/status/events", "/metrics")
STREAM_SECONDS = 300        # a stream ends after this long; the page reconnects at once (a stopped server's threads end)
SECURITY_HEADERS = (("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'"), ("X-Content-Type-Options", "nosniff"),
                    ("Referrer-Policy", "no-referrer"), ("Cache-Control", "no-store"))
OFF = ("the status page is off: add `status: {token_file: FILE}` to the controller's configuration (FILE holds a bearer "
       "token of at least 16 characters, e.g. from `openssl rand -hex 24`) and restart it; see docs/ipsec.md")


def owns(path):
    """Whether `path` (without its query) is one of the status page's."""
    return path in FILES or path in DATA


class StatusServer:
    """The status of this controller process: who may see it and the latest snapshot, shared by every viewer
    (built at most once per half interval)."""

    def __init__(self, access, current, replica=None):
        self.access, self.current, self.replica = access, current, replica
        self._lock = threading.Lock()
        self._snap, self._at = None, 0.0
        self._source = None     # the status of the Service this process runs (p4sec.ipsec.status.Source)

    def snapshot(self, authorization):
        with self._lock:
            if self._snap is not None and time.monotonic() - self._at < self.access.interval / 2:
                return self._snap
            svc = self.current()
            if svc is None:
                snap = self._from_leader(authorization)
            else:
                if self._source is None or self._source.svc is not svc:
                    if self._source is not None:
                        self._source.close()
                    self._source = st.Source(svc)
                snap = self._source.snapshot(self.replica)
            self._snap, self._at = snap, time.monotonic()
            return snap

    def _from_leader(self, authorization):
        """A follower's view: the leader's snapshot, with this replica as the one serving (or, with no leader to
        ask, only who leads as far as the lease says, and why there is nothing else)."""
        name = self.replica["name"]
        try:
            holder, term, rest = self.replica["lease"].leader()
        except Exception as e:
            holder, term, rest = None, None, None
            logging.warning("status: reading the lease: %s", e)
        ctl = {"mode": "replicated", "leader": holder, "term": term, "served_by": name, "serving_leads": False}
        if not rest:
            return {"now": time.time(), "controller": ctl, "error": "no leader right now (a replica takes over within the lease)"}
        req = urllib.request.Request(f"http://{rest}/status.json", headers={"Authorization": authorization})
        try:
            with urllib.request.urlopen(req, timeout=max(2.0, self.access.interval * 2)) as r:
                snap = json.loads(r.read())
        except urllib.error.HTTPError as e:
            return {"now": time.time(), "controller": ctl, "error": f"the leader {holder} at {rest} answered {e.code}"}
        except (OSError, ValueError) as e:
            return {"now": time.time(), "controller": ctl, "error": f"the leader {holder} at {rest} does not answer: {e}"}
        snap["controller"] = dict(snap.get("controller") or {}, served_by=name, serving_leads=False)
        return snap


def _send(handler, code, body, ctype, extra=()):
    handler.send_response(code)
    handler.send_header("Content-Type", ctype)
    handler.send_header("Content-Length", str(len(body)))
    for k, v in SECURITY_HEADERS + tuple(extra):
        handler.send_header(k, v)
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(body)


def _json(handler, code, obj, extra=()):
    _send(handler, code, json.dumps(obj).encode(), "application/json", extra)


def handle(handler, method, path, server):
    """Answer a request for one of the status paths (`owns`); `server` a StatusServer, or None when it is off."""
    if server is None:
        return _json(handler, 404, {"error": OFF})
    if method not in ("GET", "HEAD"):
        return _json(handler, 405, {"error": f"{path} answers GET only"}, (("Allow", "GET"),))
    if path in FILES:
        name, ctype = FILES[path]
        return _send(handler, 200, (STATIC / name).read_bytes(), ctype)
    if not server.access.allows(handler):
        return _json(handler, 401, {"error": "the status needs `Authorization: Bearer TOKEN`, the token in the file that "
                                             "`status: {token_file: ...}` of the controller's configuration names"},
                     (("WWW-Authenticate", 'Bearer realm="p4sec-controller"'),))
    auth = handler.headers.get("Authorization", "")
    if path == "/status/events":
        return _stream(handler, server, auth)
    try:
        if path == "/status.json":
            return _json(handler, 200, server.snapshot(auth))
        body = status_metrics.render(server.snapshot(auth) if server.current() is not None else None, server.replica)
        return _send(handler, 200, body.encode(), "text/plain; version=0.0.4; charset=utf-8")
    except Exception as e:      # the store or a switch failed under us: report it, keep serving
        logging.exception("status: %s", path)
        return _json(handler, 500, {"error": f"{type(e).__name__}: {e}"})


def _stream(handler, server, auth):
    """Server-sent events: one `status` event with a snapshot every interval, until the client goes away."""
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    for k, v in SECURITY_HEADERS:
        handler.send_header(k, v)
    handler.end_headers()
    handler.close_connection = True
    end = time.monotonic() + STREAM_SECONDS
    try:
        handler.wfile.write(f"retry: {int(server.access.interval * 1000)}\n\n".encode())
        while time.monotonic() < end:
            try:
                snap = server.snapshot(auth)
            except Exception as e:      # the store or a switch failed under us: say so, keep the stream
                logging.exception("status: snapshot")
                snap = {"now": time.time(), "error": f"{type(e).__name__}: {e}"}
            handler.wfile.write(b"event: status\ndata: " + json.dumps(dict(snap, interval=server.access.interval)).encode() + b"\n\n")
            handler.wfile.flush()
            time.sleep(server.access.interval)
    except (BrokenPipeError, ConnectionResetError, OSError):
        pass
