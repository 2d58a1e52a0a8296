"""The controller's live status page in a real browser (Debian's headless Chromium driven by Selenium through
Debian's chromedriver, both installed by scripts/setup): the page shows the tunnel up with its traffic, new SPIs
after a renewal and, with replicas on PostgreSQL, the new leader after the leader is killed, all without a reload.
Also: the page and its data are off unless configured, the data need the token, and /metrics with the token."""
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import ThreadingHTTPServer

import pytest

from ctlrig import compile_gateway, start_controller, start_switches, stop, write_config
from p4sec.infra.netns import free_port
from p4sec.ipsec.config import ConfigError
from p4sec.ipsec.rest import make_handler
from p4sec.ipsec.status import StatusAccess
from p4sec.ipsec.status_http import StatusServer
from test_site_to_site import net  # noqa: F401 (fixture)
from test_vpn_suites_and_renewal import STREAM

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")
TOKEN = "status-token-0123456789abcdef"
WAIT = 30       # seconds a browser wait may take at most (a failure, not a measurement)


def http(port, path, token=None, method="GET"):
    """(status, body bytes, headers) of a request to 127.0.0.1:port."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method, data=b"" if method == "POST" else None,
                                 headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read(), r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers


# ------------------------------------------------------------------------------ configuration and access (no switches)

def test_status_settings_get_precise_errors(tmp_path):
    tf = tmp_path / "token"
    tf.write_text(TOKEN + "\n")
    assert StatusAccess.from_config({}) is None
    a = StatusAccess.from_config({"status": {"token_file": str(tf), "interval": 0.5}})
    assert a.token == TOKEN and a.interval == 0.5
    short = tmp_path / "short"
    short.write_text("abc\n")
    for st, msg in [({"token_file": str(tmp_path / "none")}, "token_file"),
                    ({}, "`token_file` is missing"),
                    ({"token_file": str(short)}, "at least 16 printable characters"),
                    ({"token_file": str(tf), "interval": 0}, "`interval` must be a number of seconds from 0.2 to 60, not 0"),
                    ({"token_file": str(tf), "interval": "fast"}, "not 'fast'"),
                    ({"token_file": str(tf), "tokn": 1}, "unknown setting(s) tokn"),
                    ("on", "expected a mapping"), (None, "expected a mapping")]:
        with pytest.raises(ConfigError) as e:
            StatusAccess.from_config({"status": st}, "ctl.yaml")
        assert msg in str(e.value) and str(e.value).startswith("ctl.yaml: status:"), str(e.value)


class NoLeaderLease:
    def leader(self, what=None):
        return None, 7, None


def serve(status):
    """A REST server (no Service: a follower with no leader) with `status`; its port and the server."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(lambda: None, {"name": "r9", "lease": NoLeaderLease(), "term": None}, status))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd.server_address[1], httpd


def test_status_is_off_unless_configured_and_needs_the_token():
    port, httpd = serve(None)
    try:
        for path in ("/status", "/status.json", "/status/events", "/metrics", "/status/app.js"):
            code, body, _ = http(port, path, TOKEN)
            assert code == 404 and "status: {token_file: FILE}" in json.loads(body)["error"], (path, body)
    finally:
        httpd.shutdown()
    replica = {"name": "r9", "lease": NoLeaderLease(), "term": None}
    port, httpd = serve(StatusServer(StatusAccess(TOKEN, 0.5), lambda: None, replica))
    try:
        code, body, headers = http(port, "/status")
        assert code == 200 and b"/status/app.js" in body and "default-src 'self'" in headers["Content-Security-Policy"]
        code, body, _ = http(port, "/status/app.js")
        assert code == 200 and b"/status/events" in body
        for path in ("/status.json", "/status/events", "/metrics"):
            for token in (None, TOKEN[:-1] + "x"):
                code, body, headers = http(port, path, token)
                assert code == 401 and "Bearer" in headers["WWW-Authenticate"] and b"token_file" in body, (path, token)
        code, body, _ = http(port, "/status.json", TOKEN)
        snap = json.loads(body)
        assert code == 200 and snap["controller"] == {"mode": "replicated", "leader": None, "term": 7, "served_by": "r9",
                                                      "serving_leads": False} and "no leader" in snap["error"]
        code, body, _ = http(port, "/metrics", TOKEN)
        assert code == 200 and 'p4sec_controller_leader{replica="r9"} 0' in body.decode()
        assert http(port, "/status.json", TOKEN, method="POST")[0] == 405
    finally:
        httpd.shutdown()


def test_a_bad_status_section_stops_the_controller_with_a_precise_error(tmp_path):
    prog = tmp_path / "prog"        # (the configuration's check wants a program directory that exists)
    prog.mkdir()
    (prog / "program.json").write_text("{}")
    (prog / "p4info.txtpb").write_text("")
    cfg = write_config(tmp_path / "ctl.yaml", f"db: {tmp_path / 'ctl.db'}", 1, 2, 3, prog, "name: S1-S2, a: S1, b: S2",
                       extra=f"status: {{token_file: {tmp_path / 'missing.token'}}}")
    r = subprocess.run([sys.executable, "-m", "p4sec.ipsec.cli", "run", str(cfg)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "status: token_file" in r.stderr and "missing.token" in r.stderr and "Traceback" not in r.stderr, r.stderr


# ------------------------------------------------------------------------------ the browser

@pytest.fixture
def browser():
    """Headless Chromium from Debian's packages, driven through Debian's chromedriver (Selenium downloads nothing)."""
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        webdriver = None
    if not (chromium and driver and webdriver):
        msg = "chromium, chromium-driver (apt) and selenium (pip) are needed: ./scripts/setup installs them"
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    opts = Options()
    opts.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1400,1000"):
        opts.add_argument(a)
    d = webdriver.Chrome(service=Service(executable_path=driver), options=opts)
    try:
        yield d
    finally:
        d.quit()


def wait_for(drv, what, cond, timeout=WAIT):
    """Wait until cond(drv) is truthy (its value), or fail naming `what` with the page's text."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait
    try:
        return WebDriverWait(drv, timeout, poll_frequency=0.1).until(lambda d: cond(d))
    except TimeoutException:
        raise AssertionError(f"the page never showed {what}:\n{drv.find_element('tag name', 'body').text[:3000]}") from None


def js(drv, script):
    return drv.execute_script(script)


TUNNEL = "return document.querySelector('[data-tunnel=\"S1-S2\"]')"
STATE = TUNNEL + "?.dataset.state"
ACTIVE_SPIS = ("return [...document.querySelectorAll('[data-tunnel=\"S1-S2\"] tr[data-sa-state=\"active\"] .spi')]"
               ".map(e => e.textContent).sort().join(' ')")
SENT = ("return [...document.querySelectorAll('[data-tunnel=\"S1-S2\"] tr[data-sa-state=\"active\"][data-src=\"S1\"] [data-role=\"sent\"]')]"
        ".map(e => e.textContent).join(' ')")
DROPPED = ("return [...document.querySelectorAll('[data-tunnel=\"S1-S2\"] tr[data-sa-state=\"active\"][data-src=\"S1\"] [data-role=\"dropped\"]')]"
           ".map(e => e.textContent).join(' ')")
LEADER = "return [document.getElementById('leader').dataset.leader, document.getElementById('term').dataset.term]"


def open_page(drv, rest, token=TOKEN):
    drv.get(f"http://127.0.0.1:{rest}/status#token={token}")
    # a mark in this document: still there later means the page was never reloaded
    js(drv, "window.__p4secMark = 'same-document'")


def test_page_asks_for_the_token_and_refuses_a_wrong_one(browser):
    replica = {"name": "r9", "lease": NoLeaderLease(), "term": None}
    port, httpd = serve(StatusServer(StatusAccess(TOKEN, 0.3), lambda: None, replica))
    try:
        browser.get(f"http://127.0.0.1:{port}/status")
        wait_for(browser, "the token form", lambda d: js(d, "return !document.getElementById('login').hidden"))
        form = lambda d: js(d, "return [document.getElementById('login').hidden, document.getElementById('login-error').textContent]")
        browser.find_element("id", "token").send_keys("not-the-token-at-all")
        browser.find_element("css selector", "#login-form button").click()
        wait_for(browser, "the refusal", lambda d: form(d) == [False, "the controller refused this token"])
        browser.find_element("id", "token").send_keys(TOKEN)
        browser.find_element("css selector", "#login-form button").click()
        wait_for(browser, "the follower's view with no leader", lambda d: js(d, "return document.getElementById('error').textContent")
                 .startswith("no leader right now"))
        assert js(browser, "return document.getElementById('served-by').textContent") == "r9 (a follower: the leader's view)"
        assert js(browser, "return document.body.textContent").count(TOKEN) == 0     # the token is never shown
    finally:
        httpd.shutdown()


def status_cfg(tmp_path, extra=""):
    tf = tmp_path / "status.token"
    tf.write_text(TOKEN + "\n")
    return f"status: {{token_file: {tf}, interval: 0.3}}\n{extra}"


# captures one ESP frame the switch sends out of the WAN interface, then sends it again n times on that interface
# (the peer receives it as a replay)
REPLAY = r"""
import socket, sys
iface, n = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind((iface, 0))
s.settimeout(20)
print("ready", flush=True)
while True:
    f, addr = s.recvfrom(4096)
    if addr[2] == socket.PACKET_OUTGOING and f[12:14] == b"\x08\x00" and f[23] == 50:
        break
for _ in range(n):
    s.send(f)
print("replayed", n, flush=True)
"""


def send(net, n, rate=500):
    """n UDP frames from site 1's host to site 2's through the tunnel; the receiver's count."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    frame = bytes(Ether(dst="02:00:00:00:00:01") / IP(src="10.1.0.1", dst="10.2.0.2", ttl=64) / UDP(sport=4242, dport=4242) / (b"x" * 60))
    rx = subprocess.Popen(["ip", "netns", "exec", net["ns2"], sys.executable, "-c", STREAM, "recv", net["h2"], str(n)], stdout=subprocess.PIPE, text=True)
    assert rx.stdout.readline().strip() == "ready"
    subprocess.run(["ip", "netns", "exec", net["ns1"], sys.executable, "-c", STREAM, "send", net["h1"], frame.hex(), str(n), str(rate)],
                   check=True, capture_output=True, timeout=60)
    return len(rx.communicate(timeout=30)[0].split())


@root_only
def test_page_shows_the_tunnel_up_its_traffic_and_a_renewal_live(p4sec_bin, net, tmp_path, browser):  # noqa: F811
    program = compile_gateway(p4sec_bin, tmp_path / "gw")
    pa, pb, rest = free_port(), free_port(), free_port()
    switches = start_switches(p4sec_bin, net, pa, pb, open(tmp_path / "switches.log", "w"))
    cfg = write_config(tmp_path / "ctl.yaml", f"db: {tmp_path / 'ctl.db'}", pa, pb, rest, program,
                       "name: S1-S2, a: S1, b: S2, suite: aes-gcm-128, soft: {packets: 100000, seconds: 3600}",
                       extra=status_cfg(tmp_path, "grace: 0.5"))
    ctl = None
    try:
        ctl = start_controller(cfg, tmp_path / "controller.log")
        open_page(browser, rest)
        # the tunnel going up, live
        wait_for(browser, "the tunnel S1-S2 down", lambda d: js(d, STATE) == "down")
        code, body, _ = http(rest, "/tunnels/S1-S2/up", method="POST")
        assert code == 200, body
        wait_for(browser, "the tunnel S1-S2 up", lambda d: js(d, STATE) == "up")
        assert js(browser, "return document.getElementById('leader').textContent").startswith("this controller")
        gws = js(browser, "return [...document.querySelectorAll('#gateways tr[data-gateway]')].map(r => r.dataset.gateway + '=' + r.dataset.connected)")
        assert gws == ["S1=true", "S2=true"]
        spis = wait_for(browser, "two active SAs", lambda d: (lambda s: s if len(s.split()) == 2 else None)(js(d, ACTIVE_SPIS)))
        assert sorted(spis.split()) == sorted(json.loads(body).values())
        # traffic: the sender's counter of the S1 -> S2 SA on the page counts what crossed; 5 of its ESP packets
        # sent again on the WAN are dropped by S2 as replays, counted on the SA
        replay = subprocess.Popen([sys.executable, "-c", REPLAY, net["wa"], "5"], stdout=subprocess.PIPE, text=True)
        assert replay.stdout.readline().strip() == "ready"
        got = send(net, 200)
        assert got == 200
        assert replay.communicate(timeout=30)[0].strip() == "replayed 5"
        wait_for(browser, "at least 200 packets sent on S1 -> S2", lambda d: int((js(d, SENT).split() or ["0"])[0]) >= 200)
        wait_for(browser, "5 replays dropped on S1 -> S2", lambda d: js(d, DROPPED) == "replay 5")
        assert js(browser, DROPPED.replace('"S1"', '"S2"')) == "0"
        # a renewal, live: the new SPIs replace the old ones, and the history shows the renewals
        code, body, _ = http(rest, "/tunnels/S1-S2/rekey", method="POST")
        assert code == 200, body
        new = sorted(json.loads(body).values())
        assert set(new).isdisjoint(spis.split())
        wait_for(browser, f"the new SPIs {new}", lambda d: js(d, ACTIVE_SPIS) == " ".join(new))
        kinds = js(browser, "return [...document.querySelectorAll('[data-tunnel=\"S1-S2\"] .history li')].map(e => e.dataset.kind)")
        assert kinds.count("renewal") == 2, kinds
        assert js(browser, "return window.__p4secMark") == "same-document"
        # the metrics with the token: the new SA's counters under the tunnel's series
        code, body, _ = http(rest, "/metrics", TOKEN)
        text = body.decode()
        assert code == 200 and 'p4sec_controller_tunnel_up{tunnel="S1-S2"} 1' in text
        assert 'p4sec_controller_tunnel_renewals_total{tunnel="S1-S2"} 2' in text
        assert 'p4sec_controller_sa_packets_total{tunnel="S1-S2",src="S1",dst="S2",side="out"} 0' in text
        from prometheus_client.parser import text_string_to_metric_families
        families = {f.name: f for f in text_string_to_metric_families(text)}     # valid text format
        assert families["p4sec_controller_sa_key_age_seconds"].type == "gauge" and len(families["p4sec_controller_sa_key_age_seconds"].samples) == 2
        assert http(rest, "/metrics")[0] == 401
        browser.save_screenshot(str(tmp_path / "status.png"))
        # a gateway lost: its switch unreachable, the tunnel degraded, the loss in the history as a failure
        switches["S2"].kill()
        switches["S2"].wait(timeout=10)
        wait_for(browser, "S2 unreachable and S1-S2 degraded", lambda d: js(d, STATE) == "degraded" and js(
            d, "return document.querySelector('#gateways tr[data-gateway=\"S2\"]').dataset.connected") == "false")
        failures = wait_for(browser, "the loss in the history", lambda d: js(
            d, "return [...document.querySelectorAll('[data-tunnel=\"S1-S2\"] .history li[data-kind=\"failure\"]')].map(e => e.textContent)"))
        assert any("gateway S2 is unreachable" in f for f in failures), failures
        assert js(browser, "return window.__p4secMark") == "same-document"
    finally:
        stop([ctl] + list(switches.values()))


try:
    import psycopg2  # noqa: F401
    from bench import store
    HAVE_PG = bool(store.pg_bin())
except ImportError:
    HAVE_PG = False


@root_only
@pytest.mark.skipif(not HAVE_PG, reason="PostgreSQL and psycopg2 are needed: ./scripts/setup installs them")
def test_page_on_a_follower_shows_the_new_leader_after_a_failover(p4sec_bin, net, tmp_path, browser):  # noqa: F811
    program = compile_gateway(p4sec_bin, tmp_path / "gw")
    pa, pb = free_port(), free_port()
    rests = {"r1": free_port(), "r2": free_port()}
    switches = start_switches(p4sec_bin, net, pa, pb, open(tmp_path / "switches.log", "w"))
    reps = {}
    with store.postgres(fsync=False) as dsn:
        try:
            for name, rest in rests.items():
                cfg = write_config(tmp_path / f"{name}.yaml", f'store: {{postgres: "{dsn}"}}\nha: {{name: {name}, lease: 1.5}}', pa, pb, rest,
                                   program, "name: S1-S2, a: S1, b: S2, suite: aes-gcm-128, auto: true",
                                   extra=status_cfg(tmp_path, "grace: 0.5\nreconcile_interval: 0"))
                reps[name] = start_controller(cfg, tmp_path / f"{name}.log")
                if name == "r1":
                    end = time.time() + 30
                    while not json.loads(http(rest, "/replica")[1])["leader"]:
                        assert time.time() < end, (tmp_path / "r1.log").read_text()[-3000:]
                        time.sleep(0.05)
            # the follower's page: the leader's view
            open_page(browser, rests["r2"])
            wait_for(browser, "the tunnel S1-S2 up", lambda d: js(d, STATE) == "up")
            leader, term = js(browser, LEADER)
            assert leader == "r1" and int(term) >= 1
            assert "r2 (a follower" in js(browser, "return document.getElementById('served-by').textContent")
            old = js(browser, ACTIVE_SPIS)
            # a follower's metrics: only that it does not lead (the tunnels' series come from the leader alone)
            text = http(rests["r2"], "/metrics", TOKEN)[1].decode()
            assert 'p4sec_controller_leader{replica="r2"} 0' in text and "p4sec_controller_tunnel_up{" not in text
            assert 'p4sec_controller_tunnel_up{tunnel="S1-S2"} 1' in http(rests["r1"], "/metrics", TOKEN)[1].decode()
            reps["r1"].send_signal(signal.SIGKILL)
            reps["r1"].wait(timeout=10)
            wait_for(browser, "r2 leading with a higher term",
                     lambda d: (lambda lt: lt[0] == "r2" and lt[1] and int(lt[1]) > int(term))(js(d, LEADER)))
            wait_for(browser, "the tunnel S1-S2 up under r2", lambda d: js(d, STATE) == "up" and "(the leader)" in
                     js(d, "return document.getElementById('served-by').textContent"))
            assert js(browser, ACTIVE_SPIS) == old      # the new leader adopted the tunnel: same SAs
            assert js(browser, "return window.__p4secMark") == "same-document"
            text = http(rests["r2"], "/metrics", TOKEN)[1].decode()
            assert 'p4sec_controller_leader{replica="r2"} 1' in text and 'p4sec_controller_tunnel_up{tunnel="S1-S2"} 1' in text
            browser.save_screenshot(str(tmp_path / "failover.png"))
        finally:
            stop(list(reps.values()) + list(switches.values()))
