"""The controller's IKE endpoint (p4sec.ipsec.ike_endpoint) on its own, without a switch: what charon's plugin
may send that the p4sec gateway cannot do, or that is malformed, is answered with a precise reason (charon logs
it), never a traceback or a hang; the `ike:` configuration is checked with errors naming the field."""
import json
import socket

import pytest

from p4sec.ipsec.controller import ControllerError, Gateway, IpsecController
from p4sec.ipsec.ike import check_config, sa_config_from
from p4sec.ipsec.ike_endpoint import IkeEndpoint

TS = {"net": "10.1.0.0/16", "exact": True, "proto": 0, "from_port": 0, "to_port": 65535}
RTS = dict(TS, net="10.2.0.0/16")
SA = {"op": "add_sa", "gw": "A", "src": "198.51.100.1", "dst": "192.0.2.1", "src_port": 4500, "dst_port": 4500,
      "spi": 0xc1234567, "proto": 50, "reqid": 1, "mode": 2, "enc_alg": 20, "int_alg": 1024, "enc_key": "00" * 20,
      "int_key": "", "replay_window": 32, "ipcomp": 0, "encap": True, "esn": False, "inbound": True,
      "lifetime": {"time": [3000, 3600], "bytes": [0, 0], "packets": [1000, 2000]}, "src_ts": [RTS], "dst_ts": [TS]}


@pytest.fixture
def endpoint(tmp_path):
    ctl = IpsecController()
    ctl.gateways["A"] = Gateway("A", None, "192.0.2.1", "10.1.0.0/16", 1, "02:00:00:00:0a:01", 2, "02:00:00:00:0b:02",
                                "198.51.100.0/24")
    ep = IkeEndpoint(ctl, str(tmp_path / "ike.sock"))
    s = socket.socket(socket.AF_UNIX)
    s.connect(str(tmp_path / "ike.sock"))
    f = s.makefile("rwb")

    def ask(req):
        f.write((req if isinstance(req, str) else json.dumps(req)).encode() + b"\n")
        f.flush()
        return json.loads(f.readline())
    yield ask
    s.close()
    ep.close()
    ctl.close()


def test_ikev2_endpoint_refuses_precisely(endpoint):
    assert endpoint("not json")["ok"] is False
    assert "JSON object" in endpoint("[1, 2]")["error"]
    assert "unknown operation 'fly'" in endpoint({"op": "fly", "gw": "A"})["error"]
    assert "no gateway 'Z'" in endpoint({"op": "get_spi", "gw": "Z"})["error"]
    spi = endpoint({"op": "get_spi", "gw": "A"})
    assert spi["ok"] and 256 <= spi["spi"] < 2 ** 32
    cases = [
        ({"enc_alg": 18}, "encryption transform 18"),                       # AES-GCM with an 8-byte ICV
        ({"enc_alg": 12, "enc_key": "00" * 16, "int_alg": 5}, "integrity transform 5"),
        ({"mode": 1}, "tunnel mode only"),
        ({"ipcomp": 2}, "IPComp"),
        ({"dst_ts": [dict(TS, proto=6)]}, "limits protocol 6"),
        ({"dst_ts": [dict(TS, from_port=80, to_port=80)]}, "ports 80-80"),
        ({"dst_ts": [dict(TS, exact=False, net="10.1.0.5/32")]}, "address range"),
        ({"src_ts": [dict(RTS, net="2001:db8:2::/64")]}, "are of different IP versions"),
        ({"dst_ts": [TS, dict(TS, net="10.7.0.0/16")]}, "local traffic selector 10.7.0.0/16 is outside"),
        ({"dst_ts": [dict(TS, net="10.9.0.0/16")]}, "outside gateway A's site 10.1.0.0/16"),
        ({"dst": "192.0.2.9"}, "does not end at gateway A"),
    ]
    for change, why in cases:
        r = endpoint(dict(SA, **change))
        assert r["ok"] is False and why in r["error"], (change, r)
    r = endpoint({"op": "update_sa", "gw": "A", "spi": 5, "new_src": "198.51.100.7", "new_src_port": 4500,
                  "new_dst": "192.0.2.1", "new_dst_port": 4500})
    assert r["ok"] is False and "charon rekeys instead" in r["error"]
    r = endpoint({"op": "add_policy", "gw": "A", "dir": 1, "type": 2, "src_ts": TS, "dst_ts": RTS, "dst": "198.51.100.1"})
    assert r["ok"] is False and "pass shunts" in r["error"]
    assert endpoint({"op": "query_sa", "gw": "A", "spi": 77})["error"] == "no SA 0x0000004d on A"


def test_ikev2_sa_config_from_charon_parameters():
    cfg = sa_config_from(dict(SA, enc_alg=12, enc_key="11" * 32, int_alg=12, int_key="22" * 32, esn=True, replay_window=128))
    assert (cfg["cipher"], cfg["integ"], cfg["esn"], cfg["replay_window"]) == ("AesCbc256", "HmacSha256_128", True, 128)
    assert cfg["udp_encap"] == [4500, 4500] and cfg["tunnel"] == ["198.51.100.1", "192.0.2.1"]
    assert cfg["soft"] == {"packets": 1000, "bytes": None, "seconds": None}     # time: charon's own timers
    assert cfg["hard"] == {"packets": 2000, "bytes": None, "seconds": None}
    assert "udp_encap" not in sa_config_from(dict(SA, encap=False))


@pytest.mark.parametrize("ike,why", [
    ("no", "expected a mapping"),
    ({"gateways": {"A": {"port": 3, "mac": "02:00:00:00:0c:01"}}}, "ike.socket"),
    ({"socket": "/run/x.sock", "gateways": {}}, "ike.gateways: expected a mapping"),
    ({"socket": "/run/x.sock", "gateways": {"Q": {"port": 3, "mac": "02:00:00:00:0c:01"}}}, "unknown gateway 'Q'"),
    ({"socket": "/run/x.sock", "gateways": {"A": {"port": 0, "mac": "02:00:00:00:0c:01"}}}, "ike.gateways.A.port"),
    ({"socket": "/run/x.sock", "gateways": {"A": {"port": 3, "mac": "zz"}}}, "ike.gateways.A.mac: 'zz' is not a MAC"),
])
def test_ikev2_config_errors(ike, why):
    with pytest.raises(ControllerError, match=why.replace(".", r"\.").replace("(", r"\(")):
        check_config({"ike": ike, "gateways": [{"name": "A"}]}, "c.yaml")
    assert check_config({"gateways": [{"name": "A"}]}, "c.yaml") is None
