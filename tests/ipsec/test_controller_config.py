"""`p4sec-controller run` refuses a malformed configuration before anything starts, with one line naming the field,
the value and what is expected (issue 36): a table of malformed configurations, each with its expected message,
checked through p4sec.ipsec.config; and the command itself on a few of them and on what only start-up can find
(a switch that does not answer, a REST address in use): exit status 1, one line, no traceback."""
import copy
import socket
import subprocess
import sys

import pytest
import yaml

from p4sec.ipsec import ca
from p4sec.ipsec.config import ConfigError, load_config
from p4sec.infra.netns import free_port


def base(tmp_path):
    """A valid configuration (as a dict) with everything the checks look at: a program directory, an SQLite file,
    agents with a CA, two gateways, a tunnel, a host profile and a client."""
    prog = tmp_path / "prog"
    prog.mkdir(exist_ok=True)
    (prog / "program.json").write_text("{}")
    (prog / "p4info.txtpb").write_text("")
    cadir = tmp_path / "ca"
    if not cadir.exists():
        ca.init(cadir)
        ca.issue(cadir, "controller", server=True)
    side = lambda p, port, mac: {"prefix": p, "port": port, "mac": mac}
    return {
        "db": str(tmp_path / "ctl.db"), "program": str(prog), "rest": "127.0.0.1:8080", "grace": 0.5, "reconcile_interval": 10,
        "agents": {"listen": "127.0.0.1:50051", "ca": str(cadir), "cert": "controller"},
        "switch_tls": {"insecure": True},
        "gateways": [
            {"name": "S1", "grpc": "127.0.0.1:9559", "address": "192.0.2.1", "lan": side("10.1.0.0/16", 1, "02:00:00:00:0a:01"),
             "wan": side("198.51.100.0/24", 2, "02:00:00:00:0b:02")},
            {"name": "S2", "grpc": "127.0.0.1:9560", "address": "198.51.100.1", "lan": side("10.2.0.0/16", 1, "02:00:00:00:0b:01"),
             "wan": side("192.0.2.0/24", 2, "02:00:00:00:0a:02")}],
        "tunnels": [{"name": "S1-S2", "a": "S1", "b": "S2", "suite": "aes-gcm-128", "auto": True, "soft": {"packets": 100}, "hard": {"packets": 200}}],
        "host_profiles": [{"name": "office", "gateway": "S1", "pool": "10.9.0.0/24"}],
        "clients": [{"name": "alice", "profiles": ["office"]}],
    }


def setp(d, path, value):
    """Set (or with value DEL, delete) the item at a path like "gateways.0.lan.mac"."""
    keys = [int(k) if k.isdigit() else k for k in path.split(".")]
    for k in keys[:-1]:
        d = d[k]
    if value is DEL:
        del d[keys[-1]]
    else:
        d[keys[-1]] = value


DEL = object()
G0 = "gateways.0"

# (path, value, the expected message after "CONFIG: ")
CASES = [
    ("program", DEL, "program is missing: expected the directory of the compiled gateway program"),
    ("program", "/nonexistent/prog", "program: '/nonexistent/prog' (no such directory): expected the directory of the compiled gateway program"),
    ("program", 7, "program: 7: expected the directory of the compiled gateway program"),
    ("rest", "127.0.0.1", "rest: '127.0.0.1': expected HOST:PORT for the REST API (port 1..65535)"),
    ("rest", "127.0.0.1:99999", "rest: '127.0.0.1:99999' (port out of range): expected HOST:PORT for the REST API (port 1..65535)"),
    ("rest", "127.0.0.1:http", "rest: '127.0.0.1:http': expected HOST:PORT"),
    ("grace", -5, "grace: -5: expected a number of seconds >= 0"),
    ("grace", "soon", "grace: 'soon': expected a number of seconds >= 0"),
    ("reconcile_interval", -1, "reconcile_interval: -1: expected a number of seconds >= 0"),
    ("reconcile_interval", "10s", "reconcile_interval: '10s': expected a number of seconds >= 0"),
    ("switch_timeout", 0, "switch_timeout: 0: expected a number of seconds > 0"),
    ("db", "/nonexistent/dir/ctl.db", "db: '/nonexistent/dir/ctl.db' (no directory /nonexistent/dir): expected an SQLite database file"),
    ("db", "/", "db: '/' (it is a directory): expected an SQLite database file"),
    ("gatewayz", [], "gatewayz: unknown field; expected one of program, db, store"),
    ("gateways", {"name": "S1"}, "gateways: {'name': 'S1'}: expected a list of gateways"),
    (f"{G0}.address", DEL, "gateways[0].address is missing: expected the gateway's IPv4 or IPv6 address"),
    (f"{G0}.address", "192.0.2.300", "gateways[0].address: '192.0.2.300': expected the gateway's IPv4 or IPv6 address"),
    (f"{G0}.grpc", "127.0.0.1:0", "gateways[0].grpc: '127.0.0.1:0' (port out of range): expected HOST:PORT of the switch's P4Runtime server"),
    (f"{G0}.grpc", "nowhere", "gateways[0].grpc: 'nowhere': expected HOST:PORT of the switch's P4Runtime server"),
    (f"{G0}.device_id", -1, "gateways[0].device_id: -1: expected a P4Runtime device id (integer >= 0)"),
    (f"{G0}.lan.port", "one", "gateways[0].lan.port: 'one': expected a switch port number 0..511"),
    (f"{G0}.lan.port", 600, "gateways[0].lan.port: 600: expected a switch port number 0..511"),
    (f"{G0}.lan.prefix", "10.1.0.0/33", "gateways[0].lan.prefix: '10.1.0.0/33': expected an IP prefix like 10.1.0.0/16"),
    (f"{G0}.wan.prefix", "198.51.100.1", "gateways[0].wan.prefix: '198.51.100.1': expected an IP prefix"),
    (f"{G0}.lan.mac", "02:00:00:00:0a", "gateways[0].lan.mac: '02:00:00:00:0a': expected a MAC address like 02:00:00:00:0a:01"),
    (f"{G0}.wan.mac", DEL, "gateways[0].wan.mac is missing: expected a MAC address"),
    ("gateways.1.name", "S1", "gateways[1].name: 'S1': expected a name not used before in gateways"),
    ("tunnels.0.suite", "rot13", "tunnels[0].suite: 'rot13': expected one of bypass, null, aes-ctr-hmac-sha256"),
    ("tunnels.0.encap", "gre", "tunnels[0].encap: 'gre': expected esp or udp"),
    ("tunnels.0.b", "S9", "tunnels[0].b: 'S9': expected a gateway's name (S1, S2)"),
    ("tunnels.0.b", "S1", "tunnels[0].b: 'S1': expected a gateway other than a"),
    ("tunnels.0.soft", {"packets": -3}, "tunnels[0].soft: {'packets': -3}: expected positive integers for packets, bytes, seconds"),
    ("tunnels.0.hard", {"pakets": 3}, "tunnels[0].hard: {'pakets': 3}: expected positive integers for packets, bytes, seconds"),
    ("tunnels.0.auto", "yes please", "tunnels[0].auto: 'yes please': expected true or false"),
    ("tunnels.0.a_prefix", "10.1.7.0/40", "tunnels[0].a_prefix: '10.1.7.0/40': expected an IP prefix inside gateway a's site"),
    ("host_profiles.0.pool", "10.9.0.0/99", "host_profiles[0].pool: '10.9.0.0/99': expected an IP prefix"),
    ("host_profiles.0.gateway", "S7", "host_profiles[0].gateway: 'S7': expected a gateway's name (S1, S2)"),
    ("clients.0.profiles", ["home"], "clients[0].profiles[0]: 'home': expected a host profile's name (office)"),
    ("agents", DEL, "agents is missing: expected {listen, ca, cert, advertise} with host profiles or clients"),
    ("agents.listen", "0.0.0.0", "agents.listen: '0.0.0.0': expected HOST:PORT or unix:PATH to listen on"),
    ("agents.ca", "/nonexistent/ca", "agents.ca: '/nonexistent/ca' (no such directory): expected the CA directory"),
    ("agents.cert", "nobody", "agents.cert: '{ca}/nobody.crt' (No such file or directory): expected a PEM certificate"),
    ("store", {"postgres": ""}, "store: {'postgres': ''}: expected {postgres: DSN}"),
    ("ha", {"name": "r1", "lease": -2}, "ha.lease: -2: expected the leader lease in seconds (> 0)"),
    ("switch_tls", DEL, "gateways[0] (S1): no way to reach its switch securely: `switch_tls` needs ca and cert"),
    ("switch_tls", {"insecure": True, "cert": "controller"},
     "gateways[0] (S1): switch_tls: `insecure: true` together with ca/cert: choose one"),
    ("switch_tls", {"ca": "/nonexistent/ca", "cert": "controller"},
     "gateways[0] (S1): switch_tls: cannot read /nonexistent/ca/ca.crt: No such file or directory"),
    ("switch_tls", "yes", "switch_tls: 'yes': expected {ca, cert[, server_name]} or {insecure: true}"),
]


@pytest.mark.parametrize("path,value,msg", CASES, ids=[f"{c[0]}={c[1] if c[1] is not DEL else 'missing'}" for c in CASES])
def test_malformed_config_one_precise_line(tmp_path, path, value, msg):
    cfg = base(tmp_path)
    assert load_config(write(tmp_path, cfg))["profiles"]["S1-S2"]["a"] == "S1"    # the base is valid
    setp(cfg, path, value if value is DEL else copy.deepcopy(value))
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, cfg))
    text = str(e.value)
    assert "\n" not in text
    assert text.startswith(f"{tmp_path / 'c.yaml'}: " + msg.replace("{ca}", str(tmp_path / "ca"))), text


def write(tmp_path, cfg, name="c.yaml"):
    p = tmp_path / name
    p.write_text(yaml.safe_dump(cfg))
    return p


def test_store_and_db_together_and_store_without_ha(tmp_path):
    cfg = base(tmp_path)
    cfg["store"] = {"postgres": "dbname=p4sec"}
    with pytest.raises(ConfigError, match=r"store: expected either db \(one controller\) or store \(replicas\), not both"):
        load_config(write(tmp_path, cfg))
    del cfg["db"]
    with pytest.raises(ConfigError, match=r"ha is missing: expected \{name, lease\} with store"):
        load_config(write(tmp_path, cfg))


def test_truncated_agent_certificate_and_not_a_database(tmp_path):
    cfg = base(tmp_path)
    crt = tmp_path / "ca" / "controller.crt"
    crt.write_bytes(crt.read_bytes()[:200])
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, cfg))
    assert f"agents.cert: '{crt}' (unreadable: " in str(e.value) and "expected a PEM certificate" in str(e.value)
    cfg = base(tmp_path)
    del cfg["agents"], cfg["host_profiles"], cfg["clients"]
    (tmp_path / "ctl.db").write_text("not a database at all, really")
    with pytest.raises(ConfigError, match=r"db: '.*ctl.db' \(not an SQLite database\): expected an SQLite database file"):
        load_config(write(tmp_path, cfg))


@pytest.mark.parametrize("text,msg", [("[1, 2", "not valid YAML"), ("- 1\n- 2\n", "[1, 2]: expected a mapping at the top"),
                                      ("", "None: expected a mapping at the top")])
def test_not_yaml_or_not_a_mapping(tmp_path, text, msg):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert str(e.value).startswith(f"{p}: {msg}") and "\n" not in str(e.value)


def run_cli(cfg_path, timeout=60):
    return subprocess.run([sys.executable, "-m", "p4sec.ipsec.cli", "run", str(cfg_path)], capture_output=True, text=True, timeout=timeout)


def one_line_error(r):
    assert r.returncode == 1, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    lines = [x for x in r.stderr.splitlines() if x.startswith("p4sec-controller:")]
    assert len(lines) == 1, r.stderr[-2000:]
    return lines[0]


def test_command_refuses_bad_values_with_one_line(tmp_path):
    cfg = base(tmp_path)
    cfg["grace"] = -5
    line = one_line_error(run_cli(write(tmp_path, cfg)))
    assert line == f"p4sec-controller: {tmp_path / 'c.yaml'}: grace: -5: expected a number of seconds >= 0"
    cfg["grace"] = 1
    cfg["gateways"][1]["name"] = "S1"
    assert "gateways[1].name: 'S1': expected a name not used before" in one_line_error(run_cli(write(tmp_path, cfg)))


def test_command_start_up_faults_are_one_line(tmp_path):
    """What only start-up can find: a REST address in use, a switch that does not answer."""
    cfg = base(tmp_path)
    del cfg["agents"], cfg["host_profiles"], cfg["clients"]
    cfg["switch_timeout"] = 0.5
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        cfg["rest"] = f"127.0.0.1:{busy.getsockname()[1]}"
        line = one_line_error(run_cli(write(tmp_path, cfg)))
        assert line == f"p4sec-controller: rest: '{cfg['rest']}': cannot listen there (Address already in use): expected a free local address"
    cfg["rest"] = f"127.0.0.1:{free_port()}"
    port = free_port()
    cfg["gateways"][0]["grpc"] = f"127.0.0.1:{port}"
    line = one_line_error(run_cli(write(tmp_path, cfg)))
    assert line.startswith(f"p4sec-controller: gateways[0].grpc: '127.0.0.1:{port}': no P4Runtime server answered within 0.5 s"), line


@pytest.mark.parametrize("body,why", [(b"{not json", "Expecting property name"), (b"[1, 2]", "a JSON list"), (b"\xff\xfe", "Expecting value")])
def test_agent_endpoint_malformed_json_is_invalid_argument(tmp_path, body, why):
    """The agents' endpoint answers a body that is not a JSON object with INVALID_ARGUMENT (not INTERNAL/UNKNOWN)."""
    import grpc
    from p4sec.ipsec.agent_endpoint import AgentEndpoint
    cfg = base(tmp_path)
    ca.issue(tmp_path / "ca", "alice")
    sock = tmp_path / "agents.sock"
    cfg["agents"]["listen"] = f"unix:{sock}"
    cfg = load_config(write(tmp_path, cfg))
    ep = AgentEndpoint(cfg, lambda: None).start()
    try:
        d = tmp_path / "ca"
        creds = grpc.ssl_channel_credentials((d / "ca.crt").read_bytes(), (d / "alice.key").read_bytes(), (d / "alice.crt").read_bytes())
        with grpc.secure_channel(f"unix:{sock}", creds, options=[("grpc.ssl_target_name_override", "controller")]) as ch:
            rpc = ch.unary_unary("/p4sec.Agent/Up", request_serializer=None, response_deserializer=None)
            with pytest.raises(grpc.RpcError) as e:
                rpc(body, timeout=10)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (e.value.code(), e.value.details())
        assert e.value.details().startswith("the request is not a JSON object: ") and why in e.value.details(), e.value.details()
    finally:
        ep.stop()
