"""The `p4sec-controller run` configuration file: loaded and checked before anything starts.

CONFIG (YAML):

    db: controller.db                 # SQLite state; a restart with the same file adopts running switches
    # store: {postgres: "host=/run/postgresql dbname=p4sec"}   # instead of db: replicas share the state (HA)
    # ha: {name: r1, lease: 2.0}      # this replica's name; the leader lease in seconds
    switch_tls: {ca: ca/, cert: controller}   # P4Runtime to the switches over mutual TLS (switch_tls.py; required,
                                      # or {insecure: true} for plaintext test switches)
    # agents: {listen: "0.0.0.0:50051", ca: ca/, cert: controller, advertise: "10.0.0.11:50051"}
    #                                 # road warriors' endpoint (mutual TLS); with HA it answers on every replica,
    #                                 # a follower forwards to the leader at the address it advertises
    program: out/ipsec_gateway        # the compiled programs/ipsec_gateway.p4 (p4sec compile ... -o DIR)
    rest: 127.0.0.1:8080              # northbound REST API (OpenAPI description at /openapi.json)
    grace: 1.0                        # seconds an old SAD-dec entry stays after a renewal
    reconcile_interval: 10            # seconds between reconciliations of every switch (0: only on start/reconnect)
    switch_timeout: 20                # seconds to wait for each switch's P4Runtime server at start-up
    gateways:
      - {name: S1, grpc: 127.0.0.1:9559, device_id: 1, address: 192.0.2.1,
         lan: {prefix: 10.1.0.0/16, port: 1, mac: "02:00:00:00:0a:01"},
         wan: {prefix: 198.51.100.0/24, port: 2, mac: "02:00:00:00:0b:02"}}
    tunnels:                          # profiles
      - {name: S1-S2, a: S1, b: S2, suite: aes-gcm-128, auto: true,
         soft: {packets: 1000000, seconds: 3600}, hard: {packets: 2000000, seconds: 4000}}
      - {name: S1-S2-lab, a: S1, b: S2, a_prefix: 10.1.7.0/24, b_prefix: 10.2.7.0/24}   # one per subnet pair
      - {name: S1-S2-nat, a: S1, b: S2, a_prefix: 10.1.8.0/24, b_prefix: 10.2.8.0/24, encap: udp}   # ESP in UDP (RFC 3948, port 4500): across a NAT

Every field is described once, in the tables below (`TOP`, `GATEWAY`, ...: field -> its check and what it
expects). A malformed value is refused with one line naming the field, the value and what is expected; unknown
fields, duplicate names and references to unknown gateways or profiles are refused the same way. Adding a field
is adding one entry to its table.
"""
import ipaddress
import os
import pathlib
import re

from p4sec.ipsec import switch_tls
from p4sec.ipsec.ctlbase import SUITES


class ConfigError(Exception):
    pass


class _Bad(Exception):
    """A value a check refuses; its argument says what was wrong if more than "expected ..." is needed."""


class Field:
    """One configuration field: `check(value, path)` returns the value (possibly normalised) or raises _Bad;
    `expect` says what is expected; `required` fields must be present."""

    def __init__(self, check, expect, required=False):
        self.check, self.expect, self.required = check, expect, required


# ---------------------------------------------------------------------------------------------------- checks

def _text(v, _):
    if not isinstance(v, str) or not v.strip():
        raise _Bad()
    return v


def _number(lo, strict=False, integer=False, hi=None):
    def check(v, _):
        if isinstance(v, bool) or not isinstance(v, (int,) if integer else (int, float)):
            raise _Bad()
        if v < lo or (strict and v == lo) or (hi is not None and v > hi):
            raise _Bad()
        return v
    return check


def _boolean(v, _):
    if not isinstance(v, bool):
        raise _Bad()
    return v


def _choice(*options):
    def check(v, _):
        if v not in options:
            raise _Bad()
        return v
    return check


def _address(v, _):
    """HOST:PORT, [IPv6]:PORT or unix:PATH."""
    if not isinstance(v, str):
        raise _Bad()
    if v.startswith("unix:") and len(v) > 5:
        return v
    m = re.fullmatch(r"\[([0-9a-fA-F:.]+)\]:(\d+)|([^:\s\[\]]+):(\d+)", v)
    if not m:
        raise _Bad()
    host, port = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    if not 1 <= int(port) <= 65535:
        raise _Bad("port out of range")
    if m.group(1):
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise _Bad() from None
    elif not re.fullmatch(r"[A-Za-z0-9.-]+", host):
        raise _Bad()
    return v


def _ip(v, _):
    try:
        ipaddress.ip_address(v)
    except (TypeError, ValueError):
        raise _Bad() from None
    return v


def _prefix(v, _):
    try:
        ipaddress.ip_network(v, strict=False)
    except (TypeError, ValueError):
        raise _Bad() from None
    if not isinstance(v, str) or "/" not in v:
        raise _Bad()
    return v


def _mac(v, _):
    if not isinstance(v, str) or not re.fullmatch(r"[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}", v):
        raise _Bad()
    return v


def _limits(v, _):
    if v is None:
        return v
    if not isinstance(v, dict) or set(v) - {"packets", "bytes", "seconds"} or \
            not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in v.values()):
        raise _Bad()
    return v


def _names(v, _):
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise _Bad()
    return v


def _program(v, base):
    if not isinstance(v, str):
        raise _Bad()
    d = _resolve(base, v)
    if not d.is_dir():
        raise _Bad("no such directory")
    for f in ("program.json", "p4info.txtpb"):
        if not (d / f).is_file():
            raise _Bad(f"no {f} in it")
    return v


def _sqlite(v, base):
    if not isinstance(v, str) or not v:
        raise _Bad()
    if v == ":memory:":
        return v
    p = _resolve(base, v)
    if p.is_dir():
        raise _Bad("it is a directory")
    if not p.parent.is_dir():
        raise _Bad(f"no directory {p.parent}")
    if not os.access(p.parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise _Bad("not writable")
    if p.exists() and p.stat().st_size:
        with open(p, "rb") as f:
            if f.read(16) != b"SQLite format 3\x00":
                raise _Bad("not an SQLite database")
    return v


def _mapping(v, _):
    if not isinstance(v, dict):
        raise _Bad()
    return v


def _store(v, _):
    if not isinstance(v, dict) or set(v) != {"postgres"} or not isinstance(v["postgres"], str) or not v["postgres"].strip():
        raise _Bad()
    return v


def _resolve(base, v):
    p = pathlib.Path(v)
    return p if p.is_absolute() else pathlib.Path.cwd() / p


# ---------------------------------------------------------------------------------------------------- tables

SECONDS = "a number of seconds >= 0"
SIDE = {
    "prefix": Field(_prefix, "an IP prefix like 10.1.0.0/16", True),
    "port": Field(_number(0, integer=True, hi=511), "a switch port number 0..511", True),
    "mac": Field(_mac, "a MAC address like 02:00:00:00:0a:01", True),
}
GATEWAY = {
    "name": Field(_text, "a gateway name", True),
    "grpc": Field(_address, "HOST:PORT of the switch's P4Runtime server (port 1..65535)", True),
    "device_id": Field(_number(0, integer=True, hi=2**64 - 1), "a P4Runtime device id (integer >= 0)"),
    "election_id": Field(_number(1, integer=True, hi=2**64 - 1), "a P4Runtime election id (integer >= 1)"),
    "address": Field(_ip, "the gateway's IPv4 or IPv6 address", True),
    "lan": Field(SIDE, "{prefix, port, mac}", True),
    "wan": Field(SIDE, "{prefix, port, mac}", True),
    "switch_tls": Field(_mapping, "{ca, cert[, server_name]} or {insecure: true} (checked by switch_tls)"),
}
TUNNEL = {
    "name": Field(_text, "a tunnel name", True),
    "a": Field(_text, "a gateway's name", True),
    "b": Field(_text, "a gateway's name", True),
    "suite": Field(_choice("bypass", *SUITES), "one of bypass, " + ", ".join(SUITES)),
    "encap": Field(_choice("esp", "udp"), "esp or udp"),
    "auto": Field(_boolean, "true or false"),
    "a_prefix": Field(_prefix, "an IP prefix inside gateway a's site"),
    "b_prefix": Field(_prefix, "an IP prefix inside gateway b's site"),
    "soft": Field(_limits, "positive integers for packets, bytes, seconds"),
    "hard": Field(_limits, "positive integers for packets, bytes, seconds"),
}
HOST_PROFILE = {
    "name": Field(_text, "a host profile name", True),
    "gateway": Field(_text, "a gateway's name", True),
    "pool": Field(_prefix, "an IP prefix to give hosts their inner addresses from", True),
    "suite": Field(_choice(*SUITES), "one of " + ", ".join(SUITES)),
    "encap": Field(_choice("esp", "udp"), "esp or udp"),
    "soft": Field(_limits, "positive integers for packets, bytes, seconds"),
    "hard": Field(_limits, "positive integers for packets, bytes, seconds"),
}
CLIENT = {
    "name": Field(_text, "a client name (its certificate's common name)", True),
    "profiles": Field(_names, "a list of host profile names"),
}
AGENTS = {
    "listen": Field(_address, "HOST:PORT or unix:PATH to listen on", True),
    "ca": Field(_text, "the CA directory (p4sec-ca init)", True),
    "cert": Field(_text, "the name of the controller's certificate in the CA directory", True),
    "advertise": Field(_address, "HOST:PORT the other replicas reach this one's endpoint at"),
}
HA = {
    "name": Field(_text, "this replica's name", True),
    "lease": Field(_number(0, strict=True), "the leader lease in seconds (> 0)"),
}
TOP = {
    "program": Field(_program, "the directory of the compiled gateway program (p4sec compile ... -o DIR)", True),
    "db": Field(_sqlite, "an SQLite database file in a writable directory"),
    "store": Field(_store, "{postgres: DSN}"),
    "ha": Field(HA, "{name, lease}"),
    "agents": Field(AGENTS, "{listen, ca, cert, advertise}"),
    "rest": Field(_address, "HOST:PORT for the REST API (port 1..65535)"),
    "grace": Field(_number(0), SECONDS),
    "reconcile_interval": Field(_number(0), SECONDS + " (0: only at start and on reconnection)"),
    "switch_timeout": Field(_number(0, strict=True), "a number of seconds > 0"),
    "switch_tls": Field(_mapping, "{ca, cert[, server_name]} or {insecure: true} (checked by switch_tls)"),
    "status": Field(_mapping, "a mapping {token_file, interval} (the status page's own checks follow)"),
    "ike": Field(_mapping, "a mapping {socket, gateways} (p4sec.ipsec.ike's own checks follow)"),
    "gateways": Field([GATEWAY], "a list of gateways", True),
    "tunnels": Field([TUNNEL], "a list of tunnel profiles"),
    "host_profiles": Field([HOST_PROFILE], "a list of host profiles"),
    "clients": Field([CLIENT], "a list of clients"),
}
# the lists whose members' names must be unique
UNIQUE = ("gateways", "tunnels", "host_profiles", "clients")


# ---------------------------------------------------------------------------------------------------- checking

def _show(v):
    s = repr(v)
    return s if len(s) <= 200 else s[:197] + "..."


def _check(table, d, where, base):
    """Check mapping `d` (the field `where`; "" at the top) against `table`; ConfigError naming the first bad
    field."""
    if not isinstance(d, dict):
        raise ConfigError(f"{where}: {_show(d)}: expected a mapping")
    dot = f"{where}." if where else ""
    for key in d:
        if key not in table:
            raise ConfigError(f"{dot}{key}: unknown field; expected one of {', '.join(table)}")
    for key, f in table.items():
        field = f"{dot}{key}"
        if key not in d or d[key] is None:
            if f.required:
                raise ConfigError(f"{field} is missing: expected {f.expect}")
            continue
        v = d[key]
        if isinstance(f.check, dict):
            _check(f.check, v, field, base)
        elif isinstance(f.check, list):
            if not isinstance(v, list):
                raise ConfigError(f"{field}: {_show(v)}: expected {f.expect}")
            for i, item in enumerate(v):
                _check(f.check[0], item, f"{field}[{i}]", base)
        else:
            try:
                d[key] = f.check(v, base)
            except _Bad as e:
                why = f" ({e.args[0]})" if e.args else ""
                raise ConfigError(f"{field}: {_show(v)}{why}: expected {f.expect}") from None


def _ref(where, value, known, what):
    if value not in known:
        raise ConfigError(f"{where}: {_show(value)}: expected {what} ({', '.join(sorted(known)) or 'none defined'})")


def validate(cfg, path="config"):
    """Check a parsed configuration (every field against its table, then names and references); the
    configuration with `profiles`, `hosts` and `clients` maps added. Errors start with `path`."""
    try:
        cfg = _validate(cfg)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None
    # how the controller reaches each switch (mutual TLS, or plaintext said explicitly)
    try:
        switch_tls.check(cfg, path)
    except switch_tls.SwitchTlsError as e:
        raise ConfigError(str(e)) from None
    return cfg


def _validate(cfg):
    if not isinstance(cfg, dict):
        raise ConfigError(f"{_show(cfg)}: expected a mapping at the top")
    _check(TOP, cfg, "", None)
    for lst in UNIQUE:
        seen = set()
        for i, item in enumerate(cfg.get(lst) or []):
            if item["name"] in seen:
                raise ConfigError(f"{lst}[{i}].name: {_show(item['name'])}: expected a name not used before in {lst}")
            seen.add(item["name"])
    if cfg.get("db") is not None and cfg.get("store") is not None:
        raise ConfigError("store: expected either db (one controller) or store (replicas), not both")
    if cfg.get("store") is not None and cfg.get("ha") is None:
        raise ConfigError("ha is missing: expected {name, lease} with store")
    names = {g["name"] for g in cfg["gateways"]}
    profiles = {}
    for i, t in enumerate(cfg.get("tunnels") or []):
        w = f"tunnels[{i}]"
        for k in ("a", "b"):
            _ref(f"{w}.{k}", t[k], names, "a gateway's name")
        if t["a"] == t["b"]:
            raise ConfigError(f"{w}.b: {_show(t['b'])}: expected a gateway other than a")
        profiles[t["name"]] = t
    cfg["profiles"] = profiles
    hosts = {}
    for i, h in enumerate(cfg.get("host_profiles") or []):
        _ref(f"host_profiles[{i}].gateway", h["gateway"], names, "a gateway's name")
        hosts[h["name"]] = h
    cfg["hosts"] = hosts
    clients = {}
    for i, c in enumerate(cfg.get("clients") or []):
        for j, p in enumerate(c.get("profiles") or []):
            _ref(f"clients[{i}].profiles[{j}]", p, hosts, "a host profile's name")
        clients[c["name"]] = c.get("profiles") or []
    cfg["clients"] = clients
    if (hosts or clients) and not cfg.get("agents"):
        raise ConfigError(f"agents is missing: expected {TOP['agents'].expect} with host profiles or clients")
    if cfg.get("agents"):
        _check_agent_certs(cfg["agents"], "agents")
    return cfg


def _check_agent_certs(ag, where):
    """The CA directory, the CA's certificate and the controller's certificate and key: present and readable PEM."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    ca = pathlib.Path(ag["ca"])
    if not ca.is_dir():
        raise ConfigError(f"{where}.ca: {_show(ag['ca'])} (no such directory): expected {AGENTS['ca'].expect}")
    for fname, load, what in (("ca.crt", x509.load_pem_x509_certificate, "the CA's certificate"),
                              (f"{ag['cert']}.crt", x509.load_pem_x509_certificate, "a PEM certificate"),
                              (f"{ag['cert']}.key", lambda b: serialization.load_pem_private_key(b, None), "a PEM private key")):
        f = ca / fname
        field = f"{where}.ca" if fname == "ca.crt" else f"{where}.cert"
        try:
            load(f.read_bytes())
        except OSError as e:
            raise ConfigError(f"{field}: {str(f)!r} ({e.strerror}): expected {what}") from None
        except (ValueError, TypeError) as e:
            raise ConfigError(f"{field}: {str(f)!r} (unreadable: {str(e).splitlines()[0][:80]}): expected {what}") from None


def load_config(path):
    import yaml
    try:
        cfg = yaml.safe_load(pathlib.Path(path).read_text())
    except OSError as e:
        raise ConfigError(f"{path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {' '.join(str(e).split())}") from None
    return validate(cfg, path)
