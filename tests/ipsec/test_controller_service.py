"""p4sec-controller as a service: YAML profiles, the CLI and REST API (with its OpenAPI description), and a
controller crash and restart in the middle of traffic that renews its SAs all along: the restarted controller
adopts the running switches from its SQLite state, tears nothing down, and the stream loses no packet."""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from conftest import console_script
from ctlrig import compile_gateway, pki, start_controller, start_switches, stop, write_config
from p4sec.ipsec.config import ConfigError, load_config
from p4sec.infra.netns import free_port
from test_site_to_site import net  # noqa: F401 (fixture)
from test_vpn_suites_and_renewal import STREAM

CONTROLLER = console_script("p4sec-controller")

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")


def config(tmp_path, pa, pb, rest, program, soft=None, hard=None, suite="aes-gcm-128", pki_dir=None):
    lim = lambda d: "{" + ", ".join(f"{k}: {v}" for k, v in (d or {}).items()) + "}"
    return write_config(tmp_path / "ctl.yaml", f"db: {tmp_path / 'ctl.db'}", pa, pb, rest, program,
                        f"name: S1-S2, a: S1, b: S2, suite: {suite}, auto: true, soft: {lim(soft)}, hard: {lim(hard)}", extra="grace: 0.5",
                        pki_dir=pki_dir)


def test_bad_configs_get_precise_errors(tmp_path):
    prog = tmp_path / "prog"
    prog.mkdir()
    (prog / "program.json").write_text("{}")
    (prog / "p4info.txtpb").write_text("")
    good = config(tmp_path, 1, 2, 3, prog).read_text()
    # (the full table of malformed configurations is in test_controller_config.py)
    for bad, msg in [(good.replace("suite: aes-gcm-128", "suite: rot13"), "tunnels[0].suite: 'rot13': expected one of bypass"),
                     (good.replace("b: S2", "b: S9"), "tunnels[0].b: 'S9': expected a gateway's name (S1, S2)"),
                     (good.replace("suite: aes-gcm-128", "suite: aes-gcm-128, encap: gre"), "tunnels[0].encap: 'gre': expected esp or udp"),
                     (good.replace("address: 192.0.2.1,", ""), "gateways[0].address is missing"),
                     (good.replace("soft: {}", "soft: {packets: -3}"), "positive integers"),
                     ("[1, 2", "ctl.yaml")]:
        p = tmp_path / "ctl.yaml"
        p.write_text(bad)
        with pytest.raises(ConfigError) as e:
            load_config(p)
        assert msg in str(e.value)
    # encap: udp is taken
    p.write_text(good.replace("suite: aes-gcm-128", "suite: aes-gcm-128, encap: udp"))
    assert load_config(p)["profiles"]["S1-S2"]["encap"] == "udp"
    p.write_text("[1, 2")
    r = subprocess.run([CONTROLLER, "run", str(p)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "p4sec-controller:" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run([CONTROLLER, "--api", "http://127.0.0.1:9", "tunnels", "list"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "cannot reach the controller" in r.stderr


def cli(rest, *args):
    r = subprocess.run([CONTROLLER, "--api", f"http://127.0.0.1:{rest}", *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


@root_only
def test_controller_restart_under_load_loses_no_tunnel_and_no_packet(p4sec_bin, net, tmp_path):
    program = compile_gateway(p4sec_bin, tmp_path / "gw")
    pa, pb, rest = free_port(), free_port(), free_port()
    d = pki(tmp_path / "ca")      # the switches take P4Runtime over mutual TLS, from the controller's certificate only
    switches = start_switches(p4sec_bin, net, pa, pb, None, pki_dir=d)
    # the soft limit comes every 0.4 s of traffic; the hard limit leaves 5.6 s, longer than the controller is away
    cfg = config(tmp_path, pa, pb, rest, program, soft={"packets": 400}, hard={"packets": 6000}, pki_dir=d)
    log = tmp_path / "controller.log"
    ctl = None
    try:
        ctl = start_controller(cfg, log, [CONTROLLER])
        assert "S1-S2" in cli(rest, "tunnels", "list") and " up " in cli(rest, "tunnels", "list")
        spec = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{rest}/openapi.json").read())
        assert spec["openapi"].startswith("3.") and "/tunnels/{name}/up" in spec["paths"]

        n, rate = 6000, 1000
        frame = bytes(Ether(dst="02:00:00:00:00:01") / IP(src="10.1.0.1", dst="10.2.0.2", ttl=64) / UDP(sport=4242, dport=4242) / (b"x" * 60))
        rx = subprocess.Popen(["ip", "netns", "exec", net["ns2"], sys.executable, "-c", STREAM, "recv", net["h2"], str(n)],
                              stdout=subprocess.PIPE, text=True)
        assert rx.stdout.readline().strip() == "ready"
        tx = subprocess.Popen(["ip", "netns", "exec", net["ns1"], sys.executable, "-c", STREAM, "send", net["h1"], frame.hex(), str(n), str(rate)],
                              stdout=subprocess.PIPE, text=True)
        time.sleep(2.0)
        ctl.send_signal(signal.SIGKILL)  # a crash, not a clean stop
        ctl.wait(timeout=10)
        time.sleep(0.3)
        ctl = start_controller(cfg, log, [CONTROLLER])
        assert tx.communicate(timeout=60)[0].strip() == str(n)
        got = {int(x) for x in rx.communicate(timeout=30)[0].split()}
        missing = sorted(set(range(n)) - got)

        show = json.loads(cli(rest, "tunnels", "show", "S1-S2", "--json"))
        events = [e["what"] for e in show["events"]]
        assert show["state"] == "up"
        log_text = open(tmp_path / "controller.log").read()
        assert "adopted" in log_text, log_text[-2000:]
        renewals = [e for e in events if e.startswith("renew S1->S2")]
        assert len(renewals) >= 8, events
        assert not missing, f"{len(missing)} of {n} lost: {missing[:20]}; events: {events}"
        assert sum(1 for e in events if e.startswith("up ")) == 1, "the restart did not set the tunnel up again"
        # the soft limit the SA reached while no controller listened was found in its statistics and acted on
        assert any("while the controller was away" in e for e in renewals), events
        sas = cli(rest, "sas", "list", "--tunnel", "S1-S2")
        assert sas.count(" active") == 2

        out = cli(rest, "tunnels", "down", "S1-S2")
        assert "down" in out
        assert " down " in cli(rest, "tunnels", "list")
        assert cli(rest, "sas", "list").count(" active") == 0
        r = subprocess.run([CONTROLLER, "--api", f"http://127.0.0.1:{rest}", "tunnels", "down", "S1-S2"], capture_output=True, text=True)
        assert r.returncode == 1 and "no tunnel S1-S2 is up" in r.stderr
        r = subprocess.run([CONTROLLER, "--api", f"http://127.0.0.1:{rest}", "tunnels", "up", "nope"], capture_output=True, text=True)
        assert r.returncode == 1 and "no tunnel profile 'nope'" in r.stderr
    finally:
        stop([ctl, *switches.values()])
