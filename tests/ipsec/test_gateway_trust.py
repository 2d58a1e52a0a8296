"""Only the controller programs a gateway: two gateways set up as docs/ipsec.md says (certificates from p4sec-ca,
`p4sec switch --tls-ca ... --tls-writers controller --tls-readers monitor`, the controller over mutual TLS) with a
tunnel up, then clients without the controller's certificate try to take over: no certificate, plaintext, a
certificate from another CA, a road warrior's certificate from the same CA, the read-only monitor's, and a second
controller identity borrowing the primary's election id. Each is refused with its gRPC code, none reads a key,
and the switch's tables and SAs read afterwards with the controller's identity equal those before. No network
namespaces: the switches run without ports."""
import json
import subprocess
import sys
import threading

import grpc
import pytest
from google.protobuf import any_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from ctlrig import compile_gateway, controller_tls, listening, pki, stop
from p4sec.infra import runtime
from p4sec.infra.netns import free_port
from p4sec.ipsec import ca, gateway
from p4sec.ipsec.config import ConfigError, load_config
from p4sec.ipsec.controller import Gateway, IpsecController

WRITERS = "controller,standby"     # the controller and a second replica (HA) with its own certificate


def tls_switch(p4sec_bin, port, d, log, writers=WRITERS):
    return subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{port}", "--tls-cert", str(d / "switch.crt"),
                             "--tls-key", str(d / "switch.key"), "--tls-ca", str(d / "ca.crt"), "--tls-writers", writers,
                             "--tls-readers", "monitor", "--tls-revoked", str(d / "revoked.json")], stderr=log)


@pytest.fixture(scope="module")
def site(p4sec_bin, tmp_path_factory):
    """Gateways A and B with a tunnel A-B up; yields a dict: the controller, its switches, the CA dir, the ports,
    the SA keys the controller installed, the other CA's dir."""
    tmp = tmp_path_factory.mktemp("trust")
    d = pki(tmp / "ca")
    ca.issue(d, "standby", server=True)
    ca.issue(d, "alice")                       # a road warrior's certificate: same CA, no rights on the switch
    other = tmp / "other"
    ca.init(other)
    ca.issue(other, "controller", server=True)  # the controller's name, signed by a CA the switch does not trust
    out = compile_gateway(p4sec_bin, tmp / "gw")
    log = open(tmp / "switches.log", "w")
    ports = [free_port(), free_port()]
    procs = [tls_switch(p4sec_bin, p, d, log) for p in ports]
    switches, ctl = [], None
    try:
        for p in ports:
            listening(p)
        switches = [runtime.Switch(f"127.0.0.1:{p}", tls=controller_tls(d)) for p in ports]
        ctl = IpsecController()
        ctl.add_gateway(Gateway("A", switches[0], "192.0.2.1", "10.1.0.0/16", 1, "02:00:00:00:0a:01", 2, "02:00:00:00:0b:02",
                                "198.51.100.0/24"), out)
        ctl.add_gateway(Gateway("B", switches[1], "198.51.100.1", "10.2.0.0/16", 1, "02:00:00:00:0b:01", 2, "02:00:00:00:0a:02",
                                "192.0.2.0/24"), out)
        ctl.connect("A", "B", "aes-gcm-128", name="A-B")
        keys = []
        for (cfg,) in ctl.db.execute("select config from sa"):
            c = json.loads(cfg)
            keys += [bytes(c["enc_key"]), bytes(c["auth_key"])]
        keys = [k for k in keys if k]
        assert keys, "the tunnel has keyed SAs"
        yield {"ctl": ctl, "switch": switches[0], "d": d, "port": ports[0], "keys": keys, "other": other, "log": tmp / "switches.log",
               "program": out}
    finally:
        if ctl is not None:
            ctl.close()
        for s in switches:
            s.close()
        stop(procs)


def creds(d, name, ca_dir=None):
    """Channel credentials: trusting `ca_dir` (default `d`), with the client certificate `name` of `d` (None: none)."""
    root = ((ca_dir or d) / "ca.crt").read_bytes()
    if name is None:
        return grpc.ssl_channel_credentials(root_certificates=root)
    return grpc.ssl_channel_credentials(root_certificates=root, private_key=(d / f"{name}.key").read_bytes(),
                                        certificate_chain=(d / f"{name}.crt").read_bytes())


def stub(site, name=None, cert_dir=None, plaintext=False):
    addr = f"127.0.0.1:{site['port']}"
    if plaintext:
        ch = grpc.insecure_channel(addr)
    else:
        # a certificate from another CA: the client still trusts the switch's CA (it wants to talk to it)
        ch = grpc.secure_channel(addr, creds(cert_dir or site["d"], name, site["d"]))
    return p4runtime_pb2_grpc.P4RuntimeStub(ch), ch


def snapshot(sw):
    """Every table entry of the switch and its SA slots (with their counters), as the controller reads them."""
    req = p4runtime_pb2.ReadRequest(device_id=1)
    req.entities.add().table_entry.table_id = 0
    entries = sorted(e.SerializeToString(deterministic=True) for r in sw.stub.Read(req) for e in r.entities)
    slots = sw.extern_read(gateway.SAD, "get_sas", {})["sas"]
    return entries, slots, [sw.extern_read(gateway.SAD, gateway.SA_STATS, {"index": i}) for i, _ in slots]


def attacks(site, s, election_ids=(1, 2, 1 << 70)):
    """The writes and arbitrations an attacker tries with stub `s`: each raises grpc.RpcError; their codes."""
    sw = site["switch"]
    sad_dec = next(e for e in sw.table_read(gateway.sad_dec(4)))
    slot = sw.extern_read(gateway.SAD, "get_sas", {})["sas"][0][0]
    ext, inst = sw.named("externs", gateway.SAD)
    codes = []
    for eid in election_ids:
        hi, lo = eid >> 64, eid & ((1 << 64) - 1)
        # delete a SAD-dec entry; replace an SA's keys with the attacker's; empty the switch's pipeline
        w = p4runtime_pb2.WriteRequest(device_id=1)
        w.election_id.high, w.election_id.low = hi, lo
        u = w.updates.add(type=p4runtime_pb2.Update.DELETE)
        u.entity.table_entry.CopyFrom(sad_dec)
        u = w.updates.add(type=p4runtime_pb2.Update.INSERT)
        x = u.entity.extern_entry
        x.extern_type_id, x.extern_id = ext.extern_type_id, inst.preamble.id
        sa = {"spi": 0x666, "cipher": "aes-gcm-128", "integ": "none", "enc_key": [7] * 20, "auth_key": [], "esn": True,
              "replay_window": 64, "tunnel": None, "soft": {}, "hard": {}, "initial_seq": 0}
        x.entry.CopyFrom(any_pb2.Any(type_url=f"p4sec/{ext.extern_type_name}.add_sa",
                                     value=json.dumps({"index": slot, "sa": sa}).encode()))
        for call in (lambda: s.Write(w, timeout=5),
                     lambda: s.SetForwardingPipelineConfig(p4runtime_pb2.SetForwardingPipelineConfigRequest(
                         device_id=1, election_id=w.election_id, action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
                         config=p4runtime_pb2.ForwardingPipelineConfig()), timeout=5),
                     lambda: arbitrate(s, hi, lo)):
            with pytest.raises(grpc.RpcError) as e:
                call()
            codes.append(e.value.code())
    return codes


def arbitrate(s, hi, lo):
    """Open a stream and ask to be primary with this election id; the switch's first answer."""
    m = p4runtime_pb2.StreamMessageRequest()
    m.arbitration.device_id = 1
    m.arbitration.election_id.high, m.arbitration.election_id.low = hi, lo
    stream = s.StreamChannel(iter([m]), timeout=5)
    got = next(stream)
    stream.cancel()
    return got


def read_all(s, site):
    """Everything a client can ask to read that could hold SA material: every table, the SA slots and their
    state, the pipeline config; the answers' bytes."""
    sw = site["switch"]
    ext, inst = sw.named("externs", gateway.SAD)
    req = p4runtime_pb2.ReadRequest(device_id=1)
    req.entities.add().table_entry.table_id = 0
    for op, arg in [("get_sas", {})] + [(gateway.SA_STATS, {"index": i}) for i, _ in sw.extern_read(gateway.SAD, "get_sas", {})["sas"]]:
        x = req.entities.add().extern_entry
        x.extern_type_id, x.extern_id = ext.extern_type_id, inst.preamble.id
        x.entry.CopyFrom(any_pb2.Any(type_url=f"p4sec/{ext.extern_type_name}.{op}", value=json.dumps(arg).encode()))
    out = b"".join(r.SerializeToString() for r in s.Read(req, timeout=5))
    out += s.GetForwardingPipelineConfig(p4runtime_pb2.GetForwardingPipelineConfigRequest(
        device_id=1, response_type=p4runtime_pb2.GetForwardingPipelineConfigRequest.ALL), timeout=5).SerializeToString()
    return out


def no_key_in(blob, keys):
    for k in keys:
        for form in (k, k.hex().encode(), json.dumps(list(k)).encode(), json.dumps(list(k), separators=(",", ":")).encode()):
            assert form not in blob, f"key material {k.hex()} readable"


@pytest.mark.parametrize("who", ["no certificate", "plaintext", "another CA's controller certificate"])
def test_clients_without_a_certificate_of_the_ca_are_refused_at_tls(site, who):
    before = snapshot(site["switch"])
    s, ch = {"no certificate": lambda: stub(site, None), "plaintext": lambda: stub(site, plaintext=True),
             "another CA's controller certificate": lambda: stub(site, "controller", cert_dir=site["other"])}[who]()
    with pytest.raises(grpc.RpcError) as e:
        read_all(s, site)
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE, e.value
    assert set(attacks(site, s)) == {grpc.StatusCode.UNAVAILABLE}
    ch.close()
    assert snapshot(site["switch"]) == before


def test_a_certificate_no_list_names_can_do_nothing(site):
    """alice (a road warrior's certificate from the controller's own CA) may neither read nor write nor arbitrate."""
    before = snapshot(site["switch"])
    s, ch = stub(site, "alice")
    for call in (lambda: read_all(s, site), lambda: s.Capabilities(p4runtime_pb2.CapabilitiesRequest(), timeout=5)):
        with pytest.raises(grpc.RpcError) as e:
            call()
        assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED, e.value
        assert "not allowed" in e.value.details()
    assert set(attacks(site, s)) == {grpc.StatusCode.PERMISSION_DENIED}
    ch.close()
    assert snapshot(site["switch"]) == before
    assert "certificate alice" in site["log"].read_text()    # the switch logs who was refused


def test_the_monitor_reads_but_never_keys_and_cannot_write(site):
    before = snapshot(site["switch"])
    s, ch = stub(site, "monitor")
    blob = read_all(s, site)
    # it reads the same tables and SA state the controller does: only without any key
    assert all(e in blob for e in before[0]) and before[0]
    no_key_in(blob, site["keys"])
    assert set(attacks(site, s)) == {grpc.StatusCode.PERMISSION_DENIED}
    with pytest.raises(grpc.RpcError) as e:
        s.Write(p4runtime_pb2.WriteRequest(device_id=1), timeout=5)
    assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED and "may only read" in e.value.details()
    ch.close()
    assert snapshot(site["switch"]) == before


def test_the_controller_reads_no_keys_either(site):
    """Keys go into the switch and never come out over P4Runtime, to anyone."""
    s, ch = stub(site, "controller")
    no_key_in(read_all(s, site), site["keys"])
    ch.close()


def test_a_second_controller_cannot_borrow_the_primary_election_id(site):
    """standby may program the switch (an HA replica), but not with the primary's election id: neither on a stream
    of its own (INVALID_ARGUMENT, the id is taken) nor in a Write or pipeline change (PERMISSION_DENIED: the id is
    bound to the primary's certificate)."""
    before = snapshot(site["switch"])
    s, ch = stub(site, "standby")
    codes = attacks(site, s, election_ids=(1,))
    assert codes == [grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.INVALID_ARGUMENT]
    ch.close()
    assert snapshot(site["switch"]) == before
    # the controller, with the same election id on its own certificate, still may write
    sw = site["switch"]
    w = p4runtime_pb2.WriteRequest(device_id=1)
    w.election_id.low = sw.election_id
    sw.stub.Write(w, timeout=5)


def test_the_controller_checks_the_switch_name(site):
    """The controller verifies whom it talks to: the switch's certificate must carry the expected name (here it
    carries `switch` and 127.0.0.1), so a host presenting another name from the same CA is not taken for it."""
    d = site["d"]
    addr = f"127.0.0.1:{site['port']}"
    # (the monitor's certificate: the TLS handshake succeeds, then the switch refuses it the stream)
    with pytest.raises(ConnectionError) as e:
        runtime.Switch(addr, tls=runtime.Tls.from_ca_dir(d, "monitor", server_name="switch"))
    assert "refused this client's arbitration" in str(e.value)
    with pytest.raises(ConnectionError) as e:
        runtime.Switch(addr, timeout=3, tls=runtime.Tls.from_ca_dir(d, "monitor", server_name="s9"))
    assert "no P4Runtime server answered" in str(e.value) and "mutual TLS" in str(e.value)


def test_a_controller_with_a_read_only_certificate_says_so_and_stops(site, tmp_path):
    """p4sec-controller configured with the monitor's certificate: the switch refuses its arbitration, the
    controller exits 1 with the switch's answer (no traceback), and nothing changed."""
    before = snapshot(site["switch"])
    cfg = tmp_path / "ctl.yaml"
    cfg.write_text(f"db: {tmp_path / 'ctl.db'}\nprogram: {site['program']}\nrest: 127.0.0.1:{free_port()}\n"
                   f"switch_tls: {{ca: {site['d']}, cert: monitor}}\n"
                   f"gateways:\n  - {{name: S1, grpc: '127.0.0.1:{site['port']}', address: 192.0.2.1, "
                   "lan: {prefix: 10.1.0.0/16, port: 1, mac: '02:00:00:00:0a:01'}, wan: {prefix: 198.51.100.0/24, port: 2, mac: '02:00:00:00:0b:02'}}\n")
    r = subprocess.run([sys.executable, "-m", "p4sec.ipsec.cli", "run", str(cfg)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "refused this client's arbitration" in r.stderr and "PERMISSION_DENIED" in r.stderr and "may only read" in r.stderr, r.stderr
    assert snapshot(site["switch"]) == before


def test_a_revoked_certificate_is_refused_from_its_next_call(p4sec_bin, tmp_path):
    """p4sec-ca revoke takes effect on a running switch: the revoked controller's next Write is refused
    (UNAUTHENTICATED) and its stream is ended (it is primary no more), the monitor still reads; a broken revocation list refuses everyone (UNAVAILABLE) until it is
    fixed."""
    d = pki(tmp_path / "ca")
    port = free_port()
    proc = tls_switch(p4sec_bin, port, d, open(tmp_path / "switch.log", "w"), writers="controller")
    sw = None
    try:
        listening(port)
        sw = runtime.Switch(f"127.0.0.1:{port}", tls=controller_tls(d))    # primary, election id 1
        mon, ch = stub({"port": port, "d": d}, "monitor")
        caps = lambda s: s.Capabilities(p4runtime_pb2.CapabilitiesRequest(), timeout=5)
        empty = p4runtime_pb2.WriteRequest(device_id=1)
        empty.election_id.low = 1

        def write_code():
            # the switch has no pipeline: a Write that passes the checks of who may write gets FAILED_PRECONDITION
            with pytest.raises(grpc.RpcError) as e:
                sw.stub.Write(empty, timeout=5)
            return e.value.code(), e.value.details()
        assert write_code()[0] == grpc.StatusCode.FAILED_PRECONDITION
        caps(mon)
        lost = threading.Event()
        sw.on_lost = lost.set
        ca.revoke(d, "controller")
        code, details = write_code()
        assert code == grpc.StatusCode.UNAUTHENTICATED and "revoked" in details
        # its open stream is ended too: it is primary no more
        assert lost.wait(10), "the revoked controller's stream is still open"
        caps(mon)
        (d / "revoked.json").write_text('["12')          # truncated: nobody is admitted
        with pytest.raises(grpc.RpcError) as e:
            caps(mon)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE and "not JSON" in e.value.details()
        (d / "revoked.json").write_text("[]")
        caps(mon)
        code, details = write_code()
        assert code == grpc.StatusCode.PERMISSION_DENIED and "no controller has arbitrated" in details
        sw.close()
        sw = runtime.Switch(f"127.0.0.1:{port}", tls=controller_tls(d))    # arbitrates again
        assert write_code()[0] == grpc.StatusCode.FAILED_PRECONDITION
        ch.close()
    finally:
        if sw is not None:
            sw.close()
        stop([proc])
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    r = subprocess.run([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{free_port()}", "--tls-cert", str(d / "switch.crt"),
                        "--tls-key", str(d / "switch.key"), "--tls-ca", str(d / "ca.crt"), "--tls-writers", "controller",
                        "--tls-revoked", str(bad)], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "--tls-revoked" in r.stderr and "a JSON object, not a list of serials" in r.stderr, r.stderr


def test_switch_tls_settings_are_required_and_checked(tmp_path):
    d = pki(tmp_path / "ca")
    # a program directory as the configuration's own checks want one (they come before switch_tls's)
    (tmp_path / "gw").mkdir()
    (tmp_path / "gw" / "program.json").write_text("{}")
    (tmp_path / "gw" / "p4info.txtpb").write_text("")
    head = f"program: {tmp_path / 'gw'}\n" + "gateways:\n  - {name: S1, grpc: '127.0.0.1:1', address: 192.0.2.1, " \
           "lan: {prefix: 10.1.0.0/16, port: 1, mac: '02:00:00:00:0a:01'}, wan: {prefix: 198.51.100.0/24, port: 2, mac: '02:00:00:00:0b:02'}%s}\n"
    p = tmp_path / "ctl.yaml"

    def load(top="", gw=""):
        p.write_text(top + "\n" + head % gw)
        return load_config(p)

    for top, gw, msg in [
        ("", "", "gateways[0] (S1): no way to reach its switch securely: `switch_tls` needs ca and cert"),
        (f"switch_tls: {{ca: {d}}}", "", "needs cert"),
        (f"switch_tls: {{ca: {d}, cert: nobody}}", "", f"cannot read {d}/nobody.crt"),
        ("switch_tls: {insecure: yes please}", "", "`insecure` takes only `true`"),
        ("switch_tls: {insecure: false}", "", "`insecure` takes only `true`"),
        (f"switch_tls: {{ca: {d}, cert: controller, insecure: true}}", "", "together with ca/cert: choose one"),
        ("switch_tls: [ca]", "", "switch_tls: ['ca']: expected {ca, cert[, server_name]} or {insecure: true}"),
        (f"switch_tls: {{ca: {d}, cert: controller, verify: no}}", "", "unknown key(s) verify"),
        ("", ", switch_tls: {server_name: s1}", "needs ca and cert"),
    ]:
        with pytest.raises(ConfigError) as e:
            load(top, gw)
        assert msg in str(e.value), (top, gw, str(e.value))
    from p4sec.ipsec.switch_tls import tls_for
    cfg = load(f"switch_tls: {{ca: {d}, cert: controller}}", ", switch_tls: {server_name: switch}")
    t = tls_for(cfg, cfg["gateways"][0])
    assert t.cert == (d / "controller.crt").read_bytes() and t.server_name == "switch"
    cfg = load(f"switch_tls: {{ca: {d}, cert: controller}}", ", switch_tls: {insecure: true}")
    assert tls_for(cfg, cfg["gateways"][0]) is None      # this gateway explicitly plaintext
    cfg = load("switch_tls: {insecure: true}", f", switch_tls: {{ca: {d}, cert: controller}}")
    assert tls_for(cfg, cfg["gateways"][0]) is not None


def test_the_switch_refuses_mutual_tls_without_writers(p4sec_bin, tmp_path):
    d = pki(tmp_path / "ca")
    base = [str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{free_port()}", "--tls-cert", str(d / "switch.crt"),
            "--tls-key", str(d / "switch.key")]
    for extra, msg in [(["--tls-ca", str(d / "ca.crt")], "--tls-ca needs --tls-writers"),
                       (["--tls-ca", str(d / "ca.crt"), "--tls-writers", "a,,b"], "--tls-writers: empty name"),
                       (["--tls-ca", str(d / "ca.crt"), "--tls-writers", "a", "--tls-readers", "*,x"], "cannot be combined"),
                       (["--tls-writers", "controller"], "--tls-ca")]:
        r = subprocess.run(base + extra, capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and msg in r.stderr, (extra, r.stderr)
