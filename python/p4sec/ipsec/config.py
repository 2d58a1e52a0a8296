"""The `p4sec-controller run` configuration file: loaded and checked before anything starts.

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
import ipaddress
import pathlib

from p4sec.ipsec.controller import SUITES


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
    rest = cfg.get("rest", "127.0.0.1:8080")
    host, _, port = str(rest).rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"{path}: rest: expected HOST:PORT (e.g. 127.0.0.1:8080), got {rest!r}")
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
