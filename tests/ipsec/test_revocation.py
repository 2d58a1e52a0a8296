"""Revocation fails closed (issue 23): a missing, unreadable, empty, truncated or malformed revocation list refuses
every agent at the controller's endpoint (logged) until the list is readable again; `[]` admits. A revoked client is
never admitted, whatever state the list is in."""
import logging
import os

import grpc
import pytest

from p4sec.ipsec import ca
from p4sec.ipsec.service import Service


class Aborted(Exception):
    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code


class Ctx:
    """The part of a gRPC servicer context the endpoint's admission check uses."""

    def __init__(self, pem):
        self.pem = pem

    def auth_context(self):
        return {"x509_pem_cert": [self.pem]}

    def abort(self, code, message):
        raise Aborted(code, message)


@pytest.fixture
def endpoint(tmp_path):
    d = tmp_path / "ca"
    ca.init(d)
    pems = {}
    for name in ("alice", "mallory"):
        pems[name] = ca.issue(d, name).read_bytes()
    ca.revoke(d, "mallory")
    svc = Service.__new__(Service)      # only the admission check: no switches, no servers
    svc.cfg = {"agents": {"ca": str(d)}, "clients": {"alice": ["office"], "mallory": ["office"]}}
    return svc, d / "revoked.json", pems


BROKEN = {
    "missing": None,
    "empty file": "",
    "whitespace": " \n",
    "truncated": '["12345", "6789',
    "not JSON": "revoked: all",
    "an object": '{"serials": []}',
    "a non-serial": '["12", "abc"]',
    "a negative": "[-5]",
    "a boolean": "[true]",
    "null": "null",
}


def write(path, text):
    if text is None:
        path.unlink(missing_ok=True)
    else:
        path.write_text(text)


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_list_raises(tmp_path, case):
    write(tmp_path / "revoked.json", BROKEN[case])
    with pytest.raises(ca.RevocationListError):
        ca.revoked_serials(tmp_path)


def test_an_unreadable_list_raises(tmp_path):
    (tmp_path / "revoked.json").mkdir()     # exists but cannot be read as a file (also when running as root)
    with pytest.raises(ca.RevocationListError, match="cannot be read"):
        ca.revoked_serials(tmp_path)


def test_valid_lists(tmp_path):
    write(tmp_path / "revoked.json", "[]")
    assert ca.revoked_serials(tmp_path) == set()
    write(tmp_path / "revoked.json", '["12", 34]')
    assert ca.revoked_serials(tmp_path) == {12, 34}


def test_revoke_does_not_overwrite_a_broken_list(tmp_path):
    d = tmp_path / "ca"
    ca.init(d)
    ca.issue(d, "alice")
    write(d / "revoked.json", '["1", "2"')
    with pytest.raises(ca.RevocationListError):
        ca.revoke(d, "alice")
    assert (d / "revoked.json").read_text() == '["1", "2"', "the broken list was replaced (its serials lost)"


@pytest.mark.parametrize("case", list(BROKEN) + ["unreadable"])
def test_the_endpoint_fails_closed_until_the_list_is_fixed(endpoint, case, caplog):
    svc, path, pems = endpoint
    good = path.read_text()
    # a valid list: alice is admitted, mallory (revoked) is not
    assert svc._client(Ctx(pems["alice"])) == "alice"
    with pytest.raises(Aborted) as e:
        svc._client(Ctx(pems["mallory"]))
    assert e.value.code == grpc.StatusCode.PERMISSION_DENIED
    # the list broken: everybody is refused, and it is logged
    if case == "unreadable":
        path.unlink()
        path.mkdir()
    else:
        write(path, BROKEN[case])
    with caplog.at_level(logging.ERROR):
        for who in ("alice", "mallory"):
            with pytest.raises(Aborted) as e:
                svc._client(Ctx(pems[who]))
            assert e.value.code == grpc.StatusCode.UNAVAILABLE, who
    assert "revocation list" in caplog.text
    # fixed again: alice is admitted again, mallory still not
    if case == "unreadable":
        os.rmdir(path)
    write(path, good)
    assert svc._client(Ctx(pems["alice"])) == "alice"
    with pytest.raises(Aborted):
        svc._client(Ctx(pems["mallory"]))


def test_an_empty_list_admits(endpoint):
    svc, path, pems = endpoint
    write(path, "[]")
    assert svc._client(Ctx(pems["alice"])) == "alice"
    assert svc._client(Ctx(pems["mallory"])) == "mallory", "[] revokes nobody"
