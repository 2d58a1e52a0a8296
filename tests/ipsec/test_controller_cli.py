"""`p4sec-controller`'s commands against a running controller (two `p4sec switch` processes without ports, so no
root is needed): names URL-encoded (`x?y=1` is one name), unknown names exit 1 with one line naming them, the
--api forms (HOST:PORT, a host name, a URL; anything else named), --json for scripts and readable output
(ages, not epoch seconds) for people, help text on every command and option, each tunnel event logged once,
and Ctrl-C ending the controller cleanly, saying so."""
import json
import re
import signal
import subprocess
import sys

import pytest

from conftest import console_script
from ctlrig import compile_gateway, listening, start_controller, stop
from p4sec.infra.netns import free_port
from p4sec.ipsec import cli

CONTROLLER = console_script("p4sec-controller")
ODD = "x?y=1"          # a profile whose name holds URL syntax
PLAIN = "x"            # the name a missing encoding would look up instead
NON_ASCII = "tünnel-ü"


@pytest.fixture(scope="module")
def ctl(p4sec_bin, tmp_path_factory):
    """A controller with S1-S2 up (auto), and profiles `x?y=1`, `x` and a non-ASCII one down; its REST port and
    its log file."""
    d = tmp_path_factory.mktemp("cli")
    program = compile_gateway(p4sec_bin, d / "gw")
    pa, pb, rest = free_port(), free_port(), free_port()
    sws = [subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{p}"], stderr=subprocess.DEVNULL) for p in (pa, pb)]
    listening(pa)
    listening(pb)
    cfg = d / "ctl.yaml"
    cfg.write_text(f"""db: {d / 'ctl.db'}
program: {program}
rest: 127.0.0.1:{rest}
switch_tls: {{insecure: true}}      # plaintext test switches (a controller that speaks mutual TLS needs it said)
gateways:
  - {{name: S1, grpc: "localhost:{pa}", address: 192.0.2.1,
     lan: {{prefix: 10.1.0.0/16, port: 1, mac: "02:00:00:00:0a:01"}}, wan: {{prefix: 198.51.100.0/24, port: 2, mac: "02:00:00:00:0b:02"}}}}
  - {{name: S2, grpc: "127.0.0.1:{pb}", address: 198.51.100.1,
     lan: {{prefix: 10.2.0.0/16, port: 1, mac: "02:00:00:00:0b:01"}}, wan: {{prefix: 192.0.2.0/24, port: 2, mac: "02:00:00:00:0a:02"}}}}
tunnels:
  - {{name: S1-S2, a: S1, b: S2, auto: true}}
  - {{name: "{ODD}", a: S1, b: S2, a_prefix: 10.1.7.0/24, b_prefix: 10.2.7.0/24}}
  - {{name: "{PLAIN}", a: S1, b: S2, a_prefix: 10.1.8.0/24, b_prefix: 10.2.8.0/24}}
  - {{name: "{NON_ASCII}", a: S1, b: S2, a_prefix: 10.1.9.0/24, b_prefix: 10.2.9.0/24}}
""", encoding="utf-8")
    log = d / "controller.log"
    p = start_controller(cfg, log, [CONTROLLER])
    yield {"rest": rest, "log": log, "proc": p, "cfg": cfg}
    stop([p, *sws])


def run(*args, api=None, rest=None):
    cmd = [CONTROLLER] + (["--api", api if api is not None else f"127.0.0.1:{rest}"]) + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def one_line_error(r, *words):
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and r.stderr.startswith("p4sec-controller: ") and r.stderr.count("\n") == 1, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


def test_names_are_url_encoded(ctl):
    rest = ctl["rest"]
    r = run("tunnels", "show", ODD, "--json", rest=rest)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["name"] == ODD            # not `x`, which a raw `?` would have looked up
    r = run("tunnels", "up", ODD, rest=rest)
    assert r.returncode == 0 and f"up {ODD}" in r.stdout, r.stderr
    shown = json.loads(run("tunnels", "show", ODD, "--json", rest=rest).stdout)
    assert shown["state"] == "up" and shown["a_prefix"] == "10.1.7.0/24"
    assert json.loads(run("tunnels", "show", PLAIN, "--json", rest=rest).stdout)["state"] == "down"
    sas = json.loads(run("sas", "list", "--tunnel", ODD, "--json", rest=rest).stdout)
    assert len(sas) == 2 and {s["tunnel"] for s in sas} == {ODD}
    assert run("tunnels", "down", ODD, rest=rest).returncode == 0
    # a non-ASCII name is one name too
    r = run("tunnels", "show", NON_ASCII, "--json", rest=rest)
    assert r.returncode == 0 and json.loads(r.stdout)["name"] == NON_ASCII, r.stderr


def test_unknown_names_exit_1_with_one_line(ctl):
    rest = ctl["rest"]
    one_line_error(run("sas", "list", "--tunnel", "NOPE", rest=rest), "NOPE")
    one_line_error(run("tunnels", "show", "NOPE", rest=rest), "no tunnel profile 'NOPE'")
    one_line_error(run("tunnels", "up", "NOPE", rest=rest), "NOPE")
    one_line_error(run("tunnels", "show", "nö-such-tünnel", rest=rest), "nö-such-tünnel")
    one_line_error(run("tunnels", "rekey-pair", "S1", "S9", rest=rest), "S9")
    one_line_error(run("tunnels", "show", "y" * 100_000, rest=rest))
    one_line_error(run("tunnels", "down", PLAIN, rest=rest), "no tunnel x is up")


def test_api_forms(ctl):
    rest = ctl["rest"]
    for form in (f"127.0.0.1:{rest}", f"localhost:{rest}", f"http://127.0.0.1:{rest}", f"http://localhost:{rest}/"):
        r = run("tunnels", "list", api=form)
        assert r.returncode == 0 and "S1-S2" in r.stdout, (form, r.stderr)
    one_line_error(run("tunnels", "list", api="not a url"), "'not a url'", "HOST:PORT")
    one_line_error(run("tunnels", "list", api="https://127.0.0.1:8080"), "plain http")
    one_line_error(run("tunnels", "list", api="127.0.0.1:99999"), "127.0.0.1:99999")
    one_line_error(run("tunnels", "list", api=f"127.0.0.1:{free_port()}"), "cannot reach the controller")


def test_api_base_unit():
    assert cli.api_base("127.0.0.1:8080") == "http://127.0.0.1:8080"
    assert cli.api_base("localhost") == "http://localhost:8080"
    assert cli.api_base("http://[::1]:9000/") == "http://[::1]:9000"
    for bad in ("not a url", "http://", "ftp://x:1", "x:1/path", "x:port"):
        with pytest.raises(cli.ControllerError):
            cli.api_base(bad)


def test_readable_output_and_json(ctl):
    rest = ctl["rest"]
    rows = json.loads(run("tunnels", "list", "--json", rest=rest).stdout)
    s12 = next(t for t in rows if t["name"] == "S1-S2")
    assert s12["state"] == "up" and isinstance(s12["created"], float)
    text = run("tunnels", "list", rest=rest).stdout
    assert text.splitlines()[0].split()[:2] == ["NAME", "GATEWAYS"] and "S1 <-> S2" in text
    show = run("tunnels", "show", "S1-S2", rest=rest).stdout
    assert "tunnel S1-S2: up" in show and " ago)" in show and "events (" in show
    assert not re.search(r"\b1[0-9]{9}(\.[0-9]+)?\b", show), show      # no epoch seconds for people
    down = run("tunnels", "show", PLAIN, rest=rest)
    assert down.returncode == 0 and "tunnel x: down" in down.stdout and "SAs (0)" in down.stdout, down.stdout + down.stderr
    ev = json.loads(run("tunnels", "show", "S1-S2", "--json", rest=rest).stdout)["events"]
    assert ev and all(isinstance(e["t"], float) for e in ev)
    assert len(json.loads(run("sas", "list", "--json", rest=rest).stdout)) >= 2
    r = run("tunnels", "rekey", "S1-S2", rest=rest)
    assert r.returncode == 0 and r.stdout.startswith("renewed S1-S2: ") and "SPI 0x" in r.stdout


def test_the_state_file_is_its_owners_only(ctl):
    """The controller's SQLite file holds the SAs' keys: created readable by its owner only, its WAL too."""
    import stat
    files = sorted(ctl["cfg"].parent.glob("ctl.db*"))
    assert files and all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files), [(f.name, oct(f.stat().st_mode)) for f in files]


def test_age_unit():
    assert cli.age(100, now=142) == "42 s"
    assert cli.age(0, now=5 * 60) == "5 min"
    assert cli.age(0, now=3 * 3600 + 600) == "3 h 10 min"
    assert cli.age(0, now=2 * 86400 + 4 * 3600) == "2 d 4 h"


def test_every_command_and_option_has_help():
    ap = cli.parser()

    def walk(p, path):
        for act in p._actions:
            if isinstance(act, type(ap._subparsers._group_actions[0])):
                for choice in act._choices_actions:
                    assert choice.help, f"{path} {choice.dest}: no help"
                for name, sp in act.choices.items():
                    yield from walk(sp, f"{path} {name}")
            elif act.dest != "help":
                yield path, act

    for path, act in walk(ap, "p4sec-controller"):
        assert act.help, f"{path}: {act.option_strings or act.dest} has no help"
    r = subprocess.run([CONTROLLER, "run", "--help"], capture_output=True, text=True, timeout=30)
    assert "next hop's MAC" in r.stdout and "does no ARP" in r.stdout and "gateways:" in r.stdout
    r = subprocess.run([console_script("p4sec-agent"), "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "CA's certificate" in r.stdout and "private key" in r.stdout


def undocumented(help_text):
    """The entries (options, positionals, commands) of an argparse --help output that have no text."""
    lines = help_text.splitlines()
    out = []
    section = False
    for i, line in enumerate(lines):
        if line and not line[0].isspace():         # a heading: only the arguments' sections list entries
            section = line in ("positional arguments:", "options:", "optional arguments:")
            continue
        m = re.match(r"^  (\S.*?)(\s{2,}\S.*)?$", line)
        if not section or not m or m.group(1) in ("COMMAND", "ACTION"):
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if m.group(2) is None and not re.match(r"^ {6,}\S", nxt):
            out.append(m.group(1))
    return out


@pytest.mark.parametrize("cmd,subs", [("p4sec-agent", ["list", "up", "down"]), ("p4sec-ca", ["init", "issue", "revoke", "list"]),
                                      ("p4sec-controller", ["run", "tunnels", "tunnels show", "sas list", "reconcile"])])
def test_road_warrior_and_ca_commands_have_help(cmd, subs):
    for sub in [""] + subs:
        r = subprocess.run([console_script(cmd), *sub.split(), "--help"], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0 and not undocumented(r.stdout), (cmd, sub, undocumented(r.stdout), r.stdout)


def test_run_errors_name_the_field(ctl, tmp_path):
    """`run` with the REST address in use (by the running controller), a malformed `rest:`, and a gateway whose
    switch does not answer: one line each, naming the address and the configuration field, exit status 1."""
    text = ctl["cfg"].read_text(encoding="utf-8").replace(f"db: {ctl['cfg'].parent / 'ctl.db'}", f"db: {tmp_path / 'other.db'}")
    cfg = tmp_path / "ctl.yaml"

    def run_cfg(t, timeout=60):
        cfg.write_text(t, encoding="utf-8")
        return subprocess.run([CONTROLLER, "run", str(cfg)], capture_output=True, text=True, timeout=timeout)

    one_line_error(run_cfg(text), f"127.0.0.1:{ctl['rest']}", "rest", "in use")
    one_line_error(run_cfg(text.replace(f"rest: 127.0.0.1:{ctl['rest']}", "rest: localhost")), "rest", "HOST:PORT")
    # a second controller for the same switches: S1 is the running controller's
    other = text.replace(f"rest: 127.0.0.1:{ctl['rest']}", f"rest: 127.0.0.1:{free_port()}")
    one_line_error(run_cfg(other), "grpc", "localhost:", "election id")
    port = free_port()
    dead = re.sub(r'grpc: "localhost:\d+"', f'grpc: "127.0.0.1:{port}"', other)
    one_line_error(run_cfg(dead), "grpc", f"127.0.0.1:{port}", "no P4Runtime server answer")


def test_events_logged_once_and_ctrl_c_ends_cleanly(ctl, p4sec_bin):
    log = ctl["log"].read_text()
    assert "p4sec.controller: S1-S2: up (aes-gcm-128)" in log and "p4sec.controller: S1: pipeline pushed" in log, log[-2000:]
    # each event once: no message repeated after its time stamp and logger's name (by another logger either)
    texts = [line.split(" ", 2)[-1].split(": ", 1)[-1].removeprefix("gateway ") for line in log.splitlines()]
    assert len(texts) == len(set(texts)), log[-3000:]
    p = ctl["proc"]
    p.send_signal(signal.SIGINT)
    out = p.communicate(timeout=30)[0]
    assert p.returncode == 0 and "SIGINT received: stopping" in out and "p4sec-controller: stopped" in out, out
    assert "Traceback" not in ctl["log"].read_text()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
