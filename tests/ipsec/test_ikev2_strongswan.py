"""IKEv2 interop: a p4sec gateway whose tunnels strongSwan's charon negotiates (the p4sec kernel-ipsec plugin sends
the SAs and policies to the controller's IKE endpoint, which installs them on the switch) against stock strongSwan
with its own userspace ESP (kernel-libipsec) as the remote site. Site-to-site traffic both ways, the SAs in the
controller's store and status, rekeying under traffic, deletion."""
import json
import os
import shutil
import re
import subprocess
import time

import pytest

from bench.ikev2_rig import V4, V4_GW_NAT, V4_IN_V6, V6, V6_IN_V4, conn, missing, ping, psk, sites

pytestmark = pytest.mark.skipif(missing() is not None and os.environ.get("CI", "").lower() not in ("true", "1"),
                                reason=missing() or "")


@pytest.fixture(autouse=True)
def _installed():
    if missing() is not None:       # CI=true: what scripts/setup should have installed is a failure, not a skip
        pytest.fail(missing(), pytrace=False)

SECRET = "p4sec-interop-secret-0123456789"


def configure(s, esp="aes128gcm16", child_extra="", extra="", secret=SECRET, remote_secret=None):
    a = s["addrs"]
    s["p4sec_charon"].start().load(conn(a["gw"], a["peer"], "gw-a.p4sec", "site-b.example", a["lan"], a["rlan"], esp=esp,
                                        child_extra=child_extra, extra=extra) + psk("gw-a.p4sec", "site-b.example", secret))
    s["remote_charon"].start().load(conn(s["remote_addr"], a["gw"], "site-b.example", "gw-a.p4sec", a["rlan"], a["lan"], esp=esp,
                                         child_extra=child_extra, extra=extra)
                                    + psk("site-b.example", "gw-a.p4sec", remote_secret or secret))


def settle(fn, timeout=15):
    """fn()'s value once it is truthy (polled until `timeout` seconds), else its last value."""
    end = time.time() + timeout
    while True:
        v = fn()
        if v or time.time() > end:
            return v
        time.sleep(0.2)


def ike_tunnels(ctl):
    return [t for t in ctl.tunnels() if t["b"].startswith("ike:") and t["state"] == "up"]


def test_ikev2_strongswan_psk_site_to_site_and_rekey(p4sec_bin, tmp_path):
    with sites(p4sec_bin, tmp_path, V4) as s:
        configure(s)
        a, n = s["addrs"], s["ns"]
        r = s["remote_charon"].swanctl("--initiate", "--child", "net", "--timeout", "20")
        assert "initiate completed successfully" in r.stdout and "CHILD_SA net{1} established" in r.stdout, r.stdout
        # the controller holds the CHILD_SA as a tunnel with an inbound and an outbound SA
        tun = ike_tunnels(s["ctl"])
        assert len(tun) == 1 and tun[0]["a"] == "A" and tun[0]["b"] == f"ike:{a['peer']}", tun
        assert tun[0]["a_prefix"] == a["lan"] and tun[0]["suite"] == "AesGcm128"
        assert len(tun[0]["active_spis"]) == 2
        # site to site both ways through the gateway and strongSwan's userspace ESP
        r = ping(n["lan"], a["rhost"])
        assert r.returncode == 0, r.stdout + r.stderr + s["p4sec_charon"].logtext()[-2000:]
        r = ping(n["remote"], a["host"], src=a["rhost"])
        assert r.returncode == 0, r.stdout + r.stderr
        # charon's SA query is answered from the switch's per-SA counters
        sas = s["p4sec_charon"].swanctl("--list-sas").stdout
        counts = {d: int(p) for d, p in re.findall(r"(in|out) +[0-9a-f]{8}, +\d+ bytes, +(\d+) packets", sas)}
        assert counts.get("in", 0) >= 6 and counts.get("out", 0) >= 6, sas
        before = set(tun[0]["active_spis"])
        # rekey the CHILD_SA under traffic: no packet lost
        flood = subprocess.Popen(["ip", "netns", "exec", n["lan"], "ping", "-c", "60", "-i", "0.05", "-W", "2", a["rhost"]],
                                               stdout=subprocess.PIPE, text=True)
        time.sleep(1)
        s["remote_charon"].swanctl("--rekey", "--child", "net")
        time.sleep(1)
        s["p4sec_charon"].swanctl("--rekey", "--child", "net")
        out = flood.communicate(timeout=60)[0]
        assert " 0% packet loss" in out, out
        # charon deletes the inbound SAs of rekeyed CHILD_SAs after a delay (charon.delete_rekeyed_delay, 5 s)
        tun = settle(lambda: [t for t in ike_tunnels(s["ctl"]) if len(t["active_spis"]) == 2])
        assert len(tun) == 1 and not (set(tun[0]["active_spis"]) & before), (ike_tunnels(s["ctl"]), before)
        # deleting the CHILD_SA removes its SAs and policy from the gateway
        s["remote_charon"].swanctl("--terminate", "--ike", "site", "--timeout", "20")
        assert settle(lambda: ike_tunnels(s["ctl"]) == []), ike_tunnels(s["ctl"])
        assert ping(n["lan"], a["rhost"], count=1).returncode != 0


def establish(s, initiator="remote_charon"):
    r = s[initiator].swanctl("--initiate", "--child", "net", "--timeout", "20", check=False)
    assert "initiate completed successfully" in r.stdout, r.stdout + s["p4sec_charon"].logtext()[-3000:]


def both_ways(s, count=3):
    a, n = s["addrs"], s["ns"]
    r = ping(n["lan"], a["rhost"], count=count)
    assert r.returncode == 0, r.stdout + r.stderr
    r = ping(n["remote"], a["host"], src=a["rhost"], count=count)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("esp,suite", [("aes256gcm16", "AesGcm256"), ("aes128-sha256", "AesCbc128/HmacSha256_128"),
                                       ("aes256-sha256", "AesCbc256/HmacSha256_128")])
def test_ikev2_strongswan_proposals(p4sec_bin, tmp_path, esp, suite):
    with sites(p4sec_bin, tmp_path, V4) as s:
        configure(s, esp=esp)
        establish(s, "p4sec_charon")        # the p4sec side initiates this time
        tun = ike_tunnels(s["ctl"])
        assert [t["suite"] for t in tun] == [suite]
        both_ways(s)


def test_ikev2_strongswan_refusals(p4sec_bin, tmp_path):
    """Each refusal leaves no tunnel on the gateway and a log line that says why."""
    with sites(p4sec_bin, tmp_path, V4) as s:
        a = s["addrs"]
        mine, theirs = s["p4sec_charon"], s["remote_charon"]
        configure(s, remote_secret="not-the-shared-secret-at-all")
        r = theirs.swanctl("--initiate", "--child", "net", "--timeout", "20", check=False)
        assert r.returncode != 0
        assert settle(lambda: "MAC mismatched" in mine.logtext()), mine.logtext()[-3000:]
        assert ike_tunnels(s["ctl"]) == []

        # the proposal: the p4sec side offers AES-CBC/SHA-256 only, the peer AES-GCM only
        theirs.load(conn(a["peer"], a["gw"], "site-b.example", "gw-a.p4sec", a["rlan"], a["lan"], esp="aes128gcm16")
                     + psk("site-b.example", "gw-a.p4sec", SECRET))
        mine.load(conn(a["gw"], a["peer"], "gw-a.p4sec", "site-b.example", a["lan"], a["rlan"], esp="aes128-sha256")
                  + psk("gw-a.p4sec", "site-b.example", SECRET))
        r = theirs.swanctl("--initiate", "--child", "net", "--timeout", "20", check=False)
        assert r.returncode != 0 and "NO_PROPOSAL_CHOSEN" in r.stdout, r.stdout
        assert "no acceptable proposal found" in mine.logtext()
        assert ike_tunnels(s["ctl"]) == []
        theirs.swanctl("--terminate", "--ike", "site", "--timeout", "10", check=False)

        # traffic selectors outside what the p4sec side allows: refused by charon
        theirs.load(conn(a["peer"], a["gw"], "site-b.example", "gw-a.p4sec", a["rlan"], "10.9.0.0/16")
                    + psk("site-b.example", "gw-a.p4sec", SECRET))
        mine.load(conn(a["gw"], a["peer"], "gw-a.p4sec", "site-b.example", a["lan"], a["rlan"])
                  + psk("gw-a.p4sec", "site-b.example", SECRET))
        r = theirs.swanctl("--initiate", "--child", "net", "--timeout", "20", check=False)
        assert r.returncode != 0 and "TS_UNACCEPTABLE" in r.stdout, r.stdout
        assert "traffic selectors 10.9.0.0/16 === 10.2.0.0/16 unacceptable" in mine.logtext()
        assert ike_tunnels(s["ctl"]) == []
        theirs.swanctl("--terminate", "--ike", "site", "--timeout", "10", check=False)

        # selectors the gateway cannot enforce (a protocol): the controller refuses the SA, charon says why
        theirs.load(conn(a["peer"], a["gw"], "site-b.example", "gw-a.p4sec", a["rlan"] + "[tcp]", a["lan"] + "[tcp]")
                    + psk("site-b.example", "gw-a.p4sec", SECRET))
        mine.load(conn(a["gw"], a["peer"], "gw-a.p4sec", "site-b.example", a["lan"] + "[tcp]", a["rlan"] + "[tcp]")
                  + psk("gw-a.p4sec", "site-b.example", SECRET))
        r = theirs.swanctl("--initiate", "--child", "net", "--timeout", "20", check=False)
        assert "CHILD_SA net{" not in r.stdout or r.returncode != 0, r.stdout
        assert settle(lambda: "the p4sec controller refused" in mine.logtext() and "limits protocol 6" in mine.logtext()), \
            mine.logtext()[-3000:]
        assert ike_tunnels(s["ctl"]) == []


def test_ikev2_strongswan_narrowed_selectors(p4sec_bin, tmp_path):
    """The peer proposes a wider p4sec-side selector than configured: charon narrows it, and the gateway protects
    exactly the narrowed prefix."""
    with sites(p4sec_bin, tmp_path, V4) as s:
        a = s["addrs"]
        s["p4sec_charon"].start().load(conn(a["gw"], a["peer"], "gw-a.p4sec", "site-b.example", "10.1.0.0/24", a["rlan"])
                                       + psk("gw-a.p4sec", "site-b.example", SECRET))
        s["remote_charon"].start().load(conn(a["peer"], a["gw"], "site-b.example", "gw-a.p4sec", a["rlan"], "10.1.0.0/16")
                                        + psk("site-b.example", "gw-a.p4sec", SECRET))
        establish(s)
        tun = ike_tunnels(s["ctl"])
        assert [t["a_prefix"] for t in tun] == ["10.1.0.0/24"], tun
        both_ways(s)        # 10.1.0.1 is inside the narrowed selector


def test_ikev2_strongswan_reconciled_after_switch_restart(p4sec_bin, tmp_path):
    """The controller's store holds the IKE tunnel: reconciliation leaves it alone while it is in place, and a
    switch that restarted (all state lost) gets it back; its outbound SA cannot be written again with the old keys
    (nonces), so charon is told to rekey it, and traffic flows again."""
    with sites(p4sec_bin, tmp_path, V4) as s:
        configure(s)
        establish(s)
        both_ways(s)
        ctl = s["ctl"]
        assert ctl.reconcile(dry_run=True)["A"]["in_sync"], ctl.reconcile(dry_run=True)
        spis = set(ike_tunnels(ctl)[0]["active_spis"])
        s["restart_switch"]()
        assert settle(lambda: any("up again" in e[2] or "switch back" in e[2] for e in ctl.events())), ctl.events()[-10:]
        assert settle(lambda: ping(s["ns"]["lan"], s["addrs"]["rhost"], count=1).returncode == 0, timeout=30)
        both_ways(s)
        assert "p4sec: soft lifetime of SA" in s["p4sec_charon"].logtext()
        # the old inbound SA goes after charon's delete_rekeyed_delay
        assert settle(lambda: not set(ike_tunnels(ctl)[0]["active_spis"]) & spis), (ike_tunnels(ctl), spis)
        assert ctl.reconcile(dry_run=True)["A"]["in_sync"]


@pytest.mark.parametrize("addrs", [V6, V4_IN_V6, V6_IN_V4], ids=["v6", "v4-in-v6", "v6-in-v4"])
def test_ikev2_strongswan_ipv6(p4sec_bin, tmp_path, addrs):
    with sites(p4sec_bin, tmp_path, addrs) as s:
        configure(s)
        establish(s)
        tun = ike_tunnels(s["ctl"])
        assert [(t["a_prefix"], t["b"]) for t in tun] == [(addrs["lan"], f"ike:{addrs['peer']}")]
        both_ways(s)


def foreign_ca(d, leaf):
    """A CA that is not p4sec's (made with the openssl command) and a certificate for `leaf` from it: (ca.crt,
    leaf.crt, leaf.key)."""
    d.mkdir(parents=True, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    subprocess.run(["openssl", "req", "-x509", *ec, "-keyout", d / "ca.key", "-out", d / "ca.crt", "-days", "30",
                    "-subj", "/O=Example Corp/CN=Example Root CA", "-addext", "basicConstraints=critical,CA:TRUE",
                    "-addext", "keyUsage=critical,keyCertSign,cRLSign"], check=True, capture_output=True)
    subprocess.run(["openssl", "req", "-new", *ec, "-keyout", d / f"{leaf}.key", "-out", d / f"{leaf}.csr",
                    "-subj", f"/O=Example Corp/CN={leaf}"], check=True, capture_output=True)
    (d / "ext.cnf").write_text(f"subjectAltName=DNS:{leaf}\nbasicConstraints=CA:FALSE\n")
    subprocess.run(["openssl", "x509", "-req", "-in", d / f"{leaf}.csr", "-CA", d / "ca.crt", "-CAkey", d / "ca.key",
                    "-CAcreateserial", "-days", "30", "-out", d / f"{leaf}.crt", "-extfile", d / "ext.cnf"],
                   check=True, capture_output=True)
    return d / "ca.crt", d / f"{leaf}.crt", d / f"{leaf}.key"


def install(charon, cas=(), cert=None, key=None, crls=()):
    sw = charon.dir / "swanctl"
    for sub in ("x509ca", "x509", "private", "x509crl"):
        for f in (sw / sub).iterdir():
            f.unlink()
    for i, c in enumerate(cas):
        shutil.copy(c, sw / "x509ca" / f"ca{i}.crt")
    if cert:
        shutil.copy(cert, sw / "x509" / "me.crt")
        shutil.copy(key, sw / "private" / "me.key")
    for i, c in enumerate(crls):
        shutil.copy(c, sw / "x509crl" / f"crl{i}.pem")


def cert_conns(s, remote_cn):
    a = s["addrs"]
    rid = f'"O=Example Corp, CN={remote_cn}"' if remote_cn.startswith("site-b") else f'"CN={remote_cn}"'
    mine = conn(a["gw"], a["peer"], '"CN=gw-a.p4sec"', rid, a["lan"], a["rlan"], auth="pubkey", cert="me.crt")
    theirs = conn(a["peer"], a["gw"], rid, '"CN=gw-a.p4sec"', a["rlan"], a["lan"], auth="pubkey", cert="me.crt")
    return mine, theirs


def test_ikev2_strongswan_certificates(p4sec_bin, tmp_path):
    """X.509: the p4sec gateway's certificate from p4sec-ca, the strongSwan site's from a foreign CA; then the
    refusals: a certificate from a CA the gateway does not trust, and a p4sec-ca certificate revoked (CRL)."""
    from p4sec.ipsec import ca, ikeca
    cadir = tmp_path / "p4sec-ca"
    ca.init(cadir)
    ca.issue(cadir, "gw-a.p4sec", sans=["192.0.2.1"])
    fca, fcert, fkey = foreign_ca(tmp_path / "foreign", "site-b.example")
    with sites(p4sec_bin, tmp_path, V4) as s:
        mine, theirs = s["p4sec_charon"].start(), s["remote_charon"].start()
        install(mine, cas=[cadir / "ca.crt", fca], cert=cadir / "gw-a.p4sec.crt", key=cadir / "gw-a.p4sec.key")
        install(theirs, cas=[cadir / "ca.crt"], cert=fcert, key=fkey)
        m, t = cert_conns(s, "site-b.example")
        mine.load(m)
        theirs.load(t)
        establish(s)
        assert "authentication of 'O=Example Corp, CN=site-b.example' with ECDSA_WITH_SHA256_DER successful" in mine.logtext()
        both_ways(s)
        theirs.swanctl("--terminate", "--ike", "site", "--timeout", "20")
        assert settle(lambda: ike_tunnels(s["ctl"]) == [])

        # untrusted: the gateway no longer trusts the foreign CA
        install(mine, cas=[cadir / "ca.crt"], cert=cadir / "gw-a.p4sec.crt", key=cadir / "gw-a.p4sec.key")
        mine.swanctl("--load-creds", "--clear", "--noprompt")
        r = theirs.swanctl("--initiate", "--child", "net", "--timeout", "20", check=False)
        assert r.returncode != 0
        assert settle(lambda: "no trusted ECDSA public key found for 'O=Example Corp, CN=site-b.example'" in mine.logtext()), \
            mine.logtext()[-3000:]
        assert ike_tunnels(s["ctl"]) == []

        # revoked: a p4sec-ca certificate for the site, revoked, the CRL given to the gateway's charon
        ca.issue(cadir, "site-c.example")
        ca.revoke(cadir, "site-c.example")
        crl = ikeca.crl(cadir)
        install(mine, cas=[cadir / "ca.crt"], cert=cadir / "gw-a.p4sec.crt", key=cadir / "gw-a.p4sec.key", crls=[crl])
        m, t = cert_conns(s, "site-c.example")
        mine.load(m)
        theirs.load(t)
        mine.swanctl("--load-creds", "--clear", "--noprompt")
        install(theirs, cas=[cadir / "ca.crt"], cert=cadir / "site-c.example.crt", key=cadir / "site-c.example.key")
        theirs.swanctl("--load-creds", "--clear", "--noprompt")
        r = theirs.swanctl("--initiate", "--child", "net", "--timeout", "20", check=False)
        assert r.returncode != 0
        assert settle(lambda: "certificate was revoked" in mine.logtext()), mine.logtext()[-3000:]
        assert ike_tunnels(s["ctl"]) == []


def test_ikev2_strongswan_nat_traversal(p4sec_bin, tmp_path):
    """The strongSwan site behind a masquerading NAT that also rewrites UDP ports: IKE moves to 4500, ESP goes in
    UDP both ways between the gateway's port 4500 and the NAT's mapped port, and a rekey under traffic loses
    nothing."""
    with sites(p4sec_bin, tmp_path, V4, nat=True) as s:
        configure(s)
        establish(s)
        mine = s["p4sec_charon"]
        assert "remote host is behind NAT" in mine.logtext()
        m = re.search(r"received packet: from 198\.51\.100\.1\[(\d+)\] to 192\.0\.2\.1\[4500\]", mine.logtext())
        assert m and 31000 <= int(m.group(1)) <= 31999, mine.logtext()[-2000:]
        cfgs = [json.loads(r[0]) for r in s["ctl"].db.execute("select config from sa where state = 'active'")]
        assert sorted(c["udp_encap"][0] if c["tunnel"][0] != "192.0.2.1" else c["udp_encap"][1] for c in cfgs) == [int(m.group(1))] * 2
        both_ways(s)
        flood = subprocess.Popen(["ip", "netns", "exec", s["ns"]["lan"], "ping", "-c", "40", "-i", "0.05", "-W", "2", s["addrs"]["rhost"]],
                                 stdout=subprocess.PIPE, text=True)
        time.sleep(0.5)
        mine.swanctl("--rekey", "--child", "net")
        out = flood.communicate(timeout=60)[0]
        assert " 0% packet loss" in out, out


def test_ikev2_strongswan_dpd_notices_dead_peer(p4sec_bin, tmp_path):
    """Dead peer detection: the strongSwan site's charon dies; the p4sec side's charon notices it (DPD) and its
    SAs and policy leave the gateway."""
    with sites(p4sec_bin, tmp_path, V4) as s:
        configure(s, extra="dpd_delay = 2s")
        establish(s)
        both_ways(s)
        s["remote_charon"].proc.kill()        # ip netns exec, unshare and sh exec: this is charon itself
        assert settle(lambda: ike_tunnels(s["ctl"]) == [], timeout=40), ike_tunnels(s["ctl"])
        log = s["p4sec_charon"].logtext()
        assert "sending DPD request" in log and "giving up after 3 retransmits" in log, log[-3000:]
        assert ping(s["ns"]["lan"], s["addrs"]["rhost"], count=1).returncode != 0


def test_ikev2_strongswan_controller_service_and_restart(p4sec_bin, tmp_path):
    """`p4sec-controller run` with an `ike:` section: charon's plugin reaches it, the CLI lists the IKE tunnel
    beside the IKE-less ones and refuses to drive it; a controller killed and started again adopts the switch,
    keeps the IKE tunnel (traffic flows throughout) and serves charon's next rekey."""
    from ctlrig import start_controller, stop
    from conftest import console_script
    from p4sec.infra.netns import free_port
    with sites(p4sec_bin, tmp_path, V4, controller=False) as s:
        a = s["addrs"]
        rest = free_port()
        cfg = tmp_path / "ctl.yaml"
        cfg.write_text(f"""db: {tmp_path / 'ctl.db'}
program: {s['program']}
rest: 127.0.0.1:{rest}
reconcile_interval: 1
switch_tls: {{insecure: true}}     # a plaintext test switch
ike:
  socket: {tmp_path / 'ike.sock'}
  gateways:
    A: {{port: 3, mac: "02:00:00:00:0c:01"}}
gateways:
  - {{name: A, grpc: "{s['grpc']}", address: {a['gw']},
     lan: {{prefix: {a['lan']}, port: 1, mac: "02:00:00:00:0a:01"}}, wan: {{prefix: {a['wan']}, port: 2, mac: "02:00:00:00:0b:02"}}}}
""")
        ctl = start_controller(cfg, tmp_path / "controller.log")
        try:
            configure(s)
            establish(s)
            both_ways(s)
            cli = [console_script("p4sec-controller"), "--api", f"http://127.0.0.1:{rest}"]
            out = subprocess.run(cli + ["tunnels", "list"], capture_output=True, text=True, check=True).stdout
            assert "ike-A-1" in out and "ike:198.51.100.1" in out, out
            r = subprocess.run(cli + ["tunnels", "down", "ike-A-1"], capture_output=True, text=True)
            assert r.returncode != 0 and "negotiated by IKEv2" in r.stderr, r.stdout + r.stderr
            time.sleep(2.5)         # periodic reconciliations (every second) leave the IKE tunnel alone
            both_ways(s)

            flood = subprocess.Popen(["ip", "netns", "exec", s["ns"]["lan"], "ping", "-c", "60", "-i", "0.05", "-W", "2", a["rhost"]],
                                     stdout=subprocess.PIPE, text=True)
            time.sleep(0.5)
            ctl.kill()
            ctl.wait()
            ctl = start_controller(cfg, tmp_path / "controller.log")
            out = flood.communicate(timeout=60)[0]
            assert " 0% packet loss" in out, out + open(tmp_path / "controller.log").read()[-3000:]
            # the plugin reconnects: charon's rekey goes to the new controller process
            s["p4sec_charon"].swanctl("--rekey", "--child", "net")
            assert settle(lambda: "outbound SA" in open(tmp_path / "controller.log").read().split("adopted")[-1]), \
                open(tmp_path / "controller.log").read()[-3000:]
            both_ways(s)
        finally:
            stop([ctl])


def test_ikev2_p4sec_to_p4sec_two_charons(p4sec_bin, tmp_path):
    """A p4sec gateway to a p4sec gateway, each with its own controller and charon, negotiated by IKEv2: plain ESP
    (no NAT, neither side needs UDP encapsulation), extended sequence numbers and the replay window as negotiated,
    traffic both ways and a rekey under traffic."""
    from bench.ikev2_rig import p4sec_pair
    with p4sec_pair(p4sec_bin, tmp_path) as p:
        sa, sb = p["side"]["A"], p["side"]["B"]
        esp, kid = "aes256gcm16-esn", "replay_window = 128"
        p["A"]["charon"].start().load(conn(sa["gw"], sb["gw"], "gw-a.p4sec", "gw-b.p4sec", sa["lan"], sb["lan"], esp=esp,
                                           child_extra=kid) + psk("gw-a.p4sec", "gw-b.p4sec", SECRET))
        p["B"]["charon"].start().load(conn(sb["gw"], sa["gw"], "gw-b.p4sec", "gw-a.p4sec", sb["lan"], sa["lan"], esp=esp,
                                           child_extra=kid) + psk("gw-b.p4sec", "gw-a.p4sec", SECRET))
        r = p["A"]["charon"].swanctl("--initiate", "--child", "net", "--timeout", "20", check=False)
        assert "initiate completed successfully" in r.stdout, r.stdout + p["B"]["charon"].logtext()[-3000:]
        for g in ("A", "B"):
            tun = ike_tunnels(p[g]["ctl"])
            assert len(tun) == 1 and tun[0]["encap"] == "esp" and tun[0]["suite"] == "AesGcm256", tun
            cfgs = [json.loads(r[0]) for r in p[g]["ctl"].db.execute("select config from sa where state = 'active'")]
            assert [(c["esn"], c["replay_window"], "udp_encap" in c) for c in cfgs] == [(True, 128, False)] * 2
        n = p["ns"]
        r = ping(n["lanA"], sb["host"])
        assert r.returncode == 0, r.stdout + r.stderr
        r = ping(n["lanB"], sa["host"])
        assert r.returncode == 0, r.stdout + r.stderr
        flood = subprocess.Popen(["ip", "netns", "exec", n["lanA"], "ping", "-c", "40", "-i", "0.05", "-W", "2", sb["host"]],
                                 stdout=subprocess.PIPE, text=True)
        time.sleep(0.5)
        p["B"]["charon"].swanctl("--rekey", "--child", "net")
        out = flood.communicate(timeout=60)[0]
        assert " 0% packet loss" in out, out


@pytest.mark.parametrize("unit,soft,hard", [("packets", 60, 200), ("bytes", 3000, 1000000)])
def test_ikev2_strongswan_packet_lifetime_from_switch_counters(p4sec_bin, tmp_path, unit, soft, hard):
    """Lifetimes by packets or bytes: charon gives them to the gateway's SAs, the switch counts, its soft-limit
    event reaches charon (the plugin's event connection), which rekeys; nothing is lost meanwhile."""
    with sites(p4sec_bin, tmp_path, V4) as s:
        a = s["addrs"]
        life = f"rekey_{unit} = {soft}\n        life_{unit} = {hard}\n        rand_{unit} = 0"
        s["p4sec_charon"].start().load(conn(a["gw"], a["peer"], "gw-a.p4sec", "site-b.example", a["lan"], a["rlan"],
                                            child_extra=life) + psk("gw-a.p4sec", "site-b.example", SECRET))
        s["remote_charon"].start().load(conn(a["peer"], a["gw"], "site-b.example", "gw-a.p4sec", a["rlan"], a["lan"])
                                        + psk("site-b.example", "gw-a.p4sec", SECRET))
        establish(s)
        cfgs = [json.loads(r[0]) for r in s["ctl"].db.execute("select config from sa where state = 'active'")]
        assert [(c["soft"][unit], c["hard"][unit]) for c in cfgs] == [(soft, hard)] * 2
        spis = set(ike_tunnels(s["ctl"])[0]["active_spis"])
        r = subprocess.run(["ip", "netns", "exec", s["ns"]["lan"], "ping", "-c", "100", "-i", "0.02", "-W", "2", a["rhost"]],
                           capture_output=True, text=True, timeout=60)
        assert " 0% packet loss" in r.stdout, r.stdout
        log = s["p4sec_charon"].logtext()
        assert settle(lambda: "p4sec: soft lifetime of SA" in s["p4sec_charon"].logtext()), log[-3000:]
        assert settle(lambda: not set(ike_tunnels(s["ctl"])[0]["active_spis"]) & spis), ike_tunnels(s["ctl"])
        both_ways(s)


def test_ikev2_strongswan_several_child_sas_and_ike_rekey(p4sec_bin, tmp_path):
    """Two CHILD_SAs with one peer, one of them with two traffic selectors on each side (two tunnels on the
    gateway; every covered subnet pair goes through its CHILD_SA's SAs, an uncovered pair is not carried); an
    IKE_SA rekey keeps both CHILD_SAs."""
    with sites(p4sec_bin, tmp_path, V4) as s:
        a, n = s["addrs"], s["ns"]
        for addr in ("10.1.1.1/16", "10.1.2.1/16"):
            subprocess.run(["ip", "netns", "exec", n["lan"], "ip", "addr", "add", addr, "dev", n["h1"]], check=True)
        for addr in ("10.2.1.1/32", "10.2.2.1/32"):
            subprocess.run(["ip", "netns", "exec", n["remote"], "ip", "addr", "add", addr, "dev", "lo"], check=True)
        kids = {"net0": ("10.1.0.0/24", "10.2.0.0/24"), "net1": ("10.1.1.0/24,10.1.2.0/24", "10.2.1.0/24,10.2.2.0/24")}
        s["p4sec_charon"].start().load(conn(a["gw"], a["peer"], "gw-a.p4sec", "site-b.example", None, None, children=kids)
                                       + psk("gw-a.p4sec", "site-b.example", SECRET))
        s["remote_charon"].start().load(conn(a["peer"], a["gw"], "site-b.example", "gw-a.p4sec", None, None,
                                             children={k: (r, l) for k, (l, r) in kids.items()})
                                        + psk("site-b.example", "gw-a.p4sec", SECRET))
        for k in kids:
            r = s["remote_charon"].swanctl("--initiate", "--child", k, "--timeout", "20", check=False)
            assert "initiate completed successfully" in r.stdout, r.stdout
        tun = ike_tunnels(s["ctl"])
        assert sorted(t["a_prefix"] for t in tun) in (["10.1.0.0/24", "10.1.1.0/24"], ["10.1.0.0/24", "10.1.2.0/24"]), tun
        for src, dst in (("10.1.0.1", "10.2.0.1"), ("10.1.1.1", "10.2.1.1"), ("10.1.2.1", "10.2.2.1"), ("10.1.1.1", "10.2.2.1"),
                         ("10.1.2.1", "10.2.1.1")):
            assert ping(n["lan"], dst, src=src, count=2).returncode == 0, (src, dst)
            assert ping(n["remote"], src, src=dst, count=2).returncode == 0, (dst, src)
        # a pair no CHILD_SA covers is not carried
        assert ping(n["lan"], "10.2.1.1", src="10.1.0.1", count=1).returncode != 0
        assert s["ctl"].reconcile(dry_run=True)["A"]["in_sync"]     # the extra selectors are in the desired state
        spis = {t["name"]: set(t["active_spis"]) for t in tun}
        s["p4sec_charon"].swanctl("--rekey", "--ike", "site")
        assert settle(lambda: "IKE_SA site[2] rekeyed between" in s["p4sec_charon"].logtext()), s["p4sec_charon"].logtext()[-2000:]
        assert ping(n["lan"], "10.2.0.1", src="10.1.0.1").returncode == 0
        assert {t["name"]: set(t["active_spis"]) for t in ike_tunnels(s["ctl"])} == spis


def test_ikev2_strongswan_nat_traversal_gateway_behind_nat(p4sec_bin, tmp_path):
    """The p4sec gateway behind a masquerading NAT (its WAN address private, UDP ports rewritten): it initiates, both
    sides detect the NAT, IKE and ESP go in UDP through the mapping both ways, and a rekey under traffic loses
    nothing."""
    with sites(p4sec_bin, tmp_path, V4_GW_NAT, nat="gateway") as s:
        a = s["addrs"]
        s["p4sec_charon"].start().load(conn(a["gw"], a["peer"], "gw-a.p4sec", "site-b.example", a["lan"], a["rlan"])
                                       + psk("gw-a.p4sec", "site-b.example", SECRET))
        s["remote_charon"].start().load(conn(a["peer"], s["gw_public"], "site-b.example", "gw-a.p4sec", a["rlan"], a["lan"])
                                        + psk("site-b.example", "gw-a.p4sec", SECRET))
        establish(s, "p4sec_charon")
        mine, theirs = s["p4sec_charon"], s["remote_charon"]
        assert "local host is behind NAT" in mine.logtext()
        m = re.search(r"received packet: from 192\.0\.2\.1\[(\d+)\] to 198\.51\.100\.1\[4500\]", theirs.logtext())
        assert m and 32000 <= int(m.group(1)) <= 32999, theirs.logtext()[-2000:]
        tun = ike_tunnels(s["ctl"])
        assert len(tun) == 1 and tun[0]["encap"] == "udp", tun
        # charon's NAT keepalives (one byte 0xff to port 4500, every second here) cross the gateway and the NAT
        ka = subprocess.run(["ip", "netns", "exec", s["ns"]["nat"], "timeout", "8", "tcpdump", "-n", "-c", "2", "-i", s["ns"]["no"],
                             "udp dst port 4500 and udp[4:2] = 9 and udp[8] = 0xff"], capture_output=True, text=True)
        assert ka.stdout.count("192.0.2.1.") == 2, ka.stdout + ka.stderr
        both_ways(s)
        flood = subprocess.Popen(["ip", "netns", "exec", s["ns"]["lan"], "ping", "-c", "40", "-i", "0.05", "-W", "2", a["rhost"]],
                                 stdout=subprocess.PIPE, text=True)
        time.sleep(0.5)
        theirs.swanctl("--rekey", "--child", "net")
        out = flood.communicate(timeout=60)[0]
        assert " 0% packet loss" in out, out


def test_ikev2_strongswan_gateway_charon_restart(p4sec_bin, tmp_path):
    """The gateway's charon dies without deleting its SAs and starts again: the controller removes what the earlier
    charon left (its first request says it started), the tunnel is negotiated afresh and only its SAs remain."""
    with sites(p4sec_bin, tmp_path, V4) as s:
        configure(s)
        establish(s)
        both_ways(s)
        ctl, mine = s["ctl"], s["p4sec_charon"]
        old = set(ike_tunnels(ctl)[0]["active_spis"])
        mine.proc.kill()        # this is charon itself (ip netns exec, unshare and sh exec it)
        mine.proc.wait()
        (mine.dir / "charon.vici").unlink(missing_ok=True)
        mine.start()
        mine.swanctl("--load-all", "--noprompt")
        s["remote_charon"].swanctl("--terminate", "--ike", "site", "--timeout", "5", check=False)
        establish(s)
        assert any("charon started: 2 SAs" in e[2] for e in ctl.events()), ctl.events()[-10:]
        tun = ike_tunnels(ctl)
        assert len(tun) == 1 and len(tun[0]["active_spis"]) == 2 and not set(tun[0]["active_spis"]) & old, tun
        assert {r["state"] for r in ctl.sas() if r["spi"] in {int(x, 16) for x in old}} == {"deleted"}
        assert ctl.reconcile(dry_run=True)["A"]["in_sync"]       # the switch holds exactly what the store says
        both_ways(s)


def test_ikev2_strongswan_controller_failover(p4sec_bin, tmp_path):
    """Two replicas of a highly available controller (PostgreSQL store): the leader runs charon's endpoint; it is
    killed, the follower leads, adopts the switch with the IKE tunnel in place (no packet lost under a ping) and
    serves charon's next rekey on the same socket path."""
    from bench import store
    from ctlrig import start_controller, stop
    from p4sec.infra.netns import free_port
    from test_controller_ha import get, wait_leader
    if not store.pg_bin():
        pytest.fail("PostgreSQL is not installed (./scripts/setup installs it)")
    with store.postgres(fsync=False) as dsn, sites(p4sec_bin, tmp_path, V4, controller=False) as s:
        a = s["addrs"]
        rests = {"r1": free_port(), "r2": free_port()}
        procs = {}
        try:
            for name, rest in rests.items():
                cfg = tmp_path / f"{name}.yaml"
                cfg.write_text(f"""store: {{postgres: "{dsn}"}}
ha: {{name: {name}, lease: 1.5}}
program: {s['program']}
rest: 127.0.0.1:{rest}
reconcile_interval: 0
switch_tls: {{insecure: true}}
ike:
  socket: {tmp_path / 'ike.sock'}
  gateways:
    A: {{port: 3, mac: "02:00:00:00:0c:01"}}
gateways:
  - {{name: A, grpc: "{s['grpc']}", address: {a['gw']},
     lan: {{prefix: {a['lan']}, port: 1, mac: "02:00:00:00:0a:01"}}, wan: {{prefix: {a['wan']}, port: 2, mac: "02:00:00:00:0b:02"}}}}
""")
                procs[name] = start_controller(cfg, tmp_path / f"{name}.log")
                if name == "r1":
                    assert wait_leader({"r1": rest}, 20)[0] == "r1"
            configure(s)
            establish(s)
            both_ways(s)
            flood = subprocess.Popen(["ip", "netns", "exec", s["ns"]["lan"], "ping", "-c", "100", "-i", "0.05", "-W", "2", a["rhost"]],
                                     stdout=subprocess.PIPE, text=True)
            time.sleep(0.5)
            procs["r1"].kill()
            procs["r1"].wait()
            assert wait_leader({"r2": rests["r2"]}, 15)[0] == "r2"
            out = flood.communicate(timeout=60)[0]
            assert " 0% packet loss" in out, out
            assert [t["name"] for t in get(rests["r2"], "/tunnels") if t["b"].startswith("ike:")] == ["ike-A-1"]
            s["p4sec_charon"].swanctl("--rekey", "--child", "net")
            assert settle(lambda: "outbound SA" in (tmp_path / "r2.log").read_text()), (tmp_path / "r2.log").read_text()[-3000:]
            both_ways(s)
        finally:
            stop(list(procs.values()))


def test_ikev2_strongswan_hard_packet_lifetime(p4sec_bin, tmp_path):
    """A hard packet limit without a soft one: the switch's hard event reaches charon, which closes the expired
    CHILD_SA (its SAs leave the gateway) and, as charon does after a hard expiry, creates a new one that carries
    the traffic."""
    with sites(p4sec_bin, tmp_path, V4) as s:
        a = s["addrs"]
        s["p4sec_charon"].start().load(conn(a["gw"], a["peer"], "gw-a.p4sec", "site-b.example", a["lan"], a["rlan"],
                                            child_extra="rekey_packets = 0\n        life_packets = 30\n        rand_packets = 0")
                                       + psk("gw-a.p4sec", "site-b.example", SECRET))
        s["remote_charon"].start().load(conn(a["peer"], a["gw"], "site-b.example", "gw-a.p4sec", a["rlan"], a["lan"])
                                        + psk("site-b.example", "gw-a.p4sec", SECRET))
        establish(s)
        ctl, mine = s["ctl"], s["p4sec_charon"]
        cfgs = [json.loads(r[0]) for r in ctl.db.execute("select config from sa where state = 'active'")]
        assert [(c["soft"]["packets"], c["hard"]["packets"]) for c in cfgs] == [(None, 30)] * 2
        old = {int(x, 16) for x in ike_tunnels(ctl)[0]["active_spis"]}
        subprocess.run(["ip", "netns", "exec", s["ns"]["lan"], "ping", "-c", "40", "-i", "0.05", "-W", "1", a["rhost"]],
                       capture_output=True, text=True, timeout=60)
        assert settle(lambda: "p4sec: hard lifetime of SA" in mine.logtext()), mine.logtext()[-3000:]
        assert "closing expired CHILD_SA net{1}" in mine.logtext()
        assert settle(lambda: {r["state"] for r in ctl.sas() if r["spi"] in old} == {"deleted"}), ctl.sas()
        assert settle(lambda: "CHILD_SA net{2} established" in mine.logtext())
        both_ways(s)


def test_ikev2_strongswan_inactivity_from_switch_counters(p4sec_bin, tmp_path):
    """charon's inactivity timeout on the p4sec side works from the switch's counters (the peer has none): a
    CHILD_SA carrying traffic stays, one left idle is closed by the p4sec side's charon (its SAs leave the gateway)."""
    with sites(p4sec_bin, tmp_path, V4) as s:
        a, n = s["addrs"], s["ns"]
        s["p4sec_charon"].start().load(conn(a["gw"], a["peer"], "gw-a.p4sec", "site-b.example", a["lan"], a["rlan"],
                                            child_extra="inactivity = 3s") + psk("gw-a.p4sec", "site-b.example", SECRET))
        s["remote_charon"].start().load(conn(a["peer"], a["gw"], "site-b.example", "gw-a.p4sec", a["rlan"], a["lan"])
                                        + psk("site-b.example", "gw-a.p4sec", SECRET))
        establish(s)
        r = subprocess.run(["ip", "netns", "exec", n["lan"], "ping", "-c", "30", "-i", "0.2", "-W", "2", a["rhost"]],
                           capture_output=True, text=True, timeout=60)
        assert " 0% packet loss" in r.stdout, r.stdout         # 6 s of traffic: twice the inactivity period
        assert len(ike_tunnels(s["ctl"])) == 1
        assert settle(lambda: ike_tunnels(s["ctl"]) == [], timeout=20), ike_tunnels(s["ctl"])
        assert "deleting CHILD_SA after 3 seconds of inactivity" in s["p4sec_charon"].logtext()


def test_ikev2_strongswan_docs_worked_example(p4sec_bin, tmp_path):
    """docs/ikev2.md's worked swanctl.conf, as printed, on the p4sec gateway's charon (it starts the connection
    itself), against its mirror image on the strongSwan site: the tunnel comes up and carries traffic both ways."""
    from conftest import ROOT
    doc = (ROOT / "docs" / "ikev2.md").read_text()
    example = doc.split("## Connect a p4sec site to a strongSwan site", 1)[1].split("```", 2)[1].strip("\n")
    assert "connections {" in example and "secrets {" in example
    with sites(p4sec_bin, tmp_path, V4) as s:
        a = s["addrs"]
        s["remote_charon"].start().load(conn(a["peer"], a["gw"], "site-b.example.org", "gw-a.example.org", a["rlan"], a["lan"],
                                             esp="aes128gcm16") + psk("site-b.example.org", "gw-a.example.org",
                                                                      "a long random shared secret"))
        s["p4sec_charon"].start().load(example)
        assert settle(lambda: len(ike_tunnels(s["ctl"])) == 1, timeout=20), s["p4sec_charon"].logtext()[-3000:]
        assert ike_tunnels(s["ctl"])[0]["name"] == "ike-A-1"
        both_ways(s)


def test_ikev2_strongswan_nat_mapping_change(p4sec_bin, tmp_path):
    """The NAT in front of the strongSwan site forgets its mapping and makes a new one with another port: charon on
    the p4sec side sees the peer move (an IKE message from the new port), the controller refuses to move the SAs
    (update_sa: their sequence numbers would restart under the same keys), charon rekeys the CHILD_SA instead, and
    the new SAs send ESP in UDP to the new port."""
    with sites(p4sec_bin, tmp_path, V4, nat=True) as s:
        nat = ["ip", "netns", "exec", s["ns"]["nat"]]
        for k in ("nf_conntrack_udp_timeout", "nf_conntrack_udp_timeout_stream"):
            subprocess.run(nat + ["sysctl", "-qw", f"net.netfilter.{k}=2"], check=True)
        configure(s, extra="dpd_delay = 6s")
        establish(s)
        both_ways(s)
        mine = s["p4sec_charon"]
        first = int(re.search(r"received packet: from 198\.51\.100\.1\[(\d+)\]", mine.logtext()).group(1))
        subprocess.run(nat + ["iptables", "-t", "nat", "-R", "POSTROUTING", "1", "-o", s["ns"]["wb"], "-p", "udp", "-j",
                              "MASQUERADE", "--to-ports", "33000-33999"], check=True)
        # quiet until the mapping is gone (2 s); the next IKE message (DPD after 6 s) takes a new one
        assert settle(lambda: "moving an SA to other addresses or ports" in mine.logtext(), timeout=30), mine.logtext()[-3000:]
        assert settle(lambda: any(33000 <= json.loads(r[0]).get("udp_encap", [0, 0])[1] <= 33999 for r in
                                  s["ctl"].db.execute("select config from sa where state = 'active' and src = 'A'")), timeout=20), \
            mine.logtext()[-3000:]
        assert 31000 <= first <= 31999
        both_ways(s)
