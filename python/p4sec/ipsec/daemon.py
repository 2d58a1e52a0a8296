"""`p4sec-controller run`: the controller process, one controller (SQLite) or one replica of a highly available
controller (PostgreSQL), with its REST API and agents' endpoint."""
import logging
import signal
import threading
import time
from http.server import ThreadingHTTPServer

from p4sec.ipsec.agent_endpoint import AgentEndpoint
from p4sec.ipsec.config import load_config
from p4sec.ipsec.rest import make_handler
from p4sec.ipsec.service import Service



def run_replica(cfg):
    """One replica of a highly available controller (state in PostgreSQL): REST at once (forwarding to the leader),
    the controller itself once this replica holds the lease, with the lease's term as its election id."""
    from p4sec.ipsec import ha
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
