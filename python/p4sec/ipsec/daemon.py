"""`p4sec-controller run`: the controller process, one controller (SQLite) or one replica of a highly available
controller (PostgreSQL), with its REST API and agents' endpoint."""
import logging
import signal
import threading
import time
from http.server import ThreadingHTTPServer

from p4sec.ipsec.agent_endpoint import AgentEndpoint
from p4sec.ipsec.config import load_config
from p4sec.ipsec.controller import ControllerError
from p4sec.ipsec.rest import make_handler
from p4sec.ipsec.service import Service
from p4sec.ipsec.status import StatusAccess
from p4sec.ipsec.status_http import StatusServer
from p4sec.ipsec.store import StoreError



def _stop_on_signals():
    """An Event set by SIGINT (Ctrl-C) or SIGTERM, saying so on stdout."""
    stop = threading.Event()

    def handler(sig, _frame):
        if not stop.is_set():
            print(f"p4sec-controller: {signal.Signals(sig).name} received: stopping (the switches keep their SAs and "
                  "forward; renewals resume when the controller runs again with the same state)", flush=True)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, handler)
    return stop


def _stopped():
    print("p4sec-controller: stopped", flush=True)


def run_replica(cfg, access=None):
    """One replica of a highly available controller (state in PostgreSQL): REST at once (forwarding to the leader;
    /health answers here), the controller itself once this replica holds the lease, with the lease's term as its
    election id. A replica that cannot reach the store stays up and says so; a leader that cannot renew its lease
    (on its data connection) within the lease steps down, and tries to lead again once the store answers."""
    from p4sec.ipsec import ha
    rcfg = cfg["ha"]
    ag = cfg.get("agents")
    replica = {"name": rcfg["name"], "lease": None, "svc": None, "term": None}
    status = StatusServer(access, lambda: replica["svc"], replica) if access else None
    httpd, host, port = _rest_server(cfg, make_handler(lambda: replica["svc"], replica, status))
    lease = replica["lease"] = ha.Lease(cfg["store"]["postgres"], rcfg["name"], float(rcfg.get("lease", 2.0)), rest=f"{host}:{port}",
                                        agents=(ag.get("advertise") or ag["listen"]) if ag else None)
    # the agents' endpoint answers on every replica: a follower forwards to the leader's
    try:
        agents = _agents(cfg, lambda: replica["svc"], lambda: lease.leader("agents")[2]) if ag else None
    except BaseException:
        httpd.server_close()
        raise
    stop = _stop_on_signals()
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    print(f"p4sec-controller: replica {rcfg['name']} ready, REST API on http://{host}:{port}", flush=True)
    while not stop.is_set():
        term, t0 = lease.wait(stop)
        if term is None:
            break
        _lead(cfg, lease, term, t0, replica, stop)
        if not stop.is_set():
            stop.wait(lease.seconds)    # stepped down: give the others a lease's time to take over
    httpd.shutdown()
    if agents is not None:
        agents.stop()
    _stopped()


def _lead(cfg, lease, term, t0, replica, stop):
    """Lead with `term` (acquired from monotonic time t0) until `stop`, or until the lease could not be renewed on
    the data connection for a whole lease (then step down: the controller stops, the REST API stays)."""
    from p4sec.ipsec import ha
    name, seconds = replica["name"], lease.seconds
    lost = threading.Event()
    why = []
    try:
        db = ha.PgDb(cfg["store"]["postgres"], name, term)
    except StoreError as e:
        logging.warning("replica %s: cannot open its data connection: %s", name, e)
        return

    def keep():
        """Renew the lease on the data connection every third of the lease (every 0.1 s while it fails); lost if
        a whole lease passes without a renewal."""
        deadline = t0 + seconds
        while not stop.is_set() and not lost.is_set():
            t = time.monotonic()
            try:
                ok = db.renew_lease(seconds)
                if ok is None:          # the controller is in the middle of a transaction: in a moment
                    if time.monotonic() >= deadline:
                        why.append("a transaction stayed open for the whole lease")
                        lost.set()
                        return
                    stop.wait(0.01)
                    continue
                if not ok:
                    ha.exit_deposed(f"{name} no longer holds the lease of term {term}")
                deadline = t + seconds
                stop.wait(seconds / 3)
            except StoreError as e:
                if time.monotonic() >= deadline:
                    why.append(str(e))
                    lost.set()
                    return
                stop.wait(0.1)
    threading.Thread(target=keep, daemon=True, name="lease").start()
    started = time.time()
    svc = None
    try:
        svc = Service(cfg, db=db, election_id=term)
    except Exception as e:      # the store or a switch failed while taking over: step down, try again later
        logging.warning("replica %s: taking over failed: %s", name, " ".join(str(e).split()))
        print(f"p4sec-controller: replica {name}: taking over failed ({type(e).__name__}: {' '.join(str(e).split())[:300]}); stepping down",
              flush=True)
        lost.set()
        db.close()
        return
    replica["svc"], replica["term"] = svc, term
    logging.info("p4sec-controller: replica %s leads (term %d, election id %d; took %.2f s)", name, term, term, time.time() - started)
    print(f"p4sec-controller: replica {name} leads (term {term})", flush=True)
    while not stop.wait(0.05):
        if lost.is_set():
            holder, current, _ = lease.leader()
            if holder is not None and (holder, current) != (name, term):
                ha.exit_deposed(f"{holder} holds the lease of term {current}")     # as a commit would have found
            print(f"p4sec-controller: replica {name}: the lease could not be renewed for {seconds:g} s ({why[0] if why else ''}); "
                  "stepping down", flush=True)
            logging.warning("replica %s steps down: lease not renewed (%s)", name, why[0] if why else "")
            break
    replica["svc"], replica["term"] = None, None
    lost.set()
    svc.close()
    db.close()


def _rest_server(cfg, handler):
    """The REST API's server, bound (not serving yet); a precise error if the address cannot be had."""
    addr = cfg.get("rest", "127.0.0.1:8080")
    host, port = addr.rsplit(":", 1)
    try:
        return ThreadingHTTPServer((host.strip("[]"), int(port)), handler), host, port
    except OSError as e:
        raise ControllerError(f"rest: {addr!r}: cannot listen there ({e.strerror or e}): expected a free local address") from None


def _agents(cfg, service, leader=None):
    """The agents' endpoint, started; a precise error if it cannot listen."""
    try:
        return AgentEndpoint(cfg, service, leader).start()
    except RuntimeError as e:
        raise ControllerError(f"agents.listen: {cfg['agents']['listen']!r}: cannot listen there ({e}): expected a free local address") from None


def run(config_path):
    cfg = load_config(config_path)
    access = StatusAccess.from_config(cfg, config_path)
    if cfg.get("store", {}).get("postgres"):
        return run_replica(cfg, access)
    holder = {"svc": None}
    status = StatusServer(access, lambda: holder["svc"]) if access else None
    httpd, host, port = _rest_server(cfg, make_handler(lambda: holder["svc"], status=status))
    agents = None
    try:
        if cfg.get("agents"):
            agents = _agents(cfg, lambda: holder["svc"])
        svc = holder["svc"] = Service(cfg)
    except BaseException:
        httpd.server_close()
        if agents is not None:
            agents.stop()
        raise
    if agents is not None:
        logging.info("p4sec-controller: agents' endpoint on %s (mutual TLS)", cfg["agents"]["listen"])
    stop = _stop_on_signals()
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    logging.info("p4sec-controller: REST API on http://%s:%s (OpenAPI: /openapi.json)", host, port)
    print(f"p4sec-controller: ready, REST API on http://{host}:{port}", flush=True)
    stop.wait()
    httpd.shutdown()
    if agents is not None:
        agents.stop()
    svc.close()
    _stopped()
