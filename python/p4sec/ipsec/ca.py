"""A small certificate authority for p4sec: the controller's agent endpoint and the road-warrior agents
authenticate each other with certificates it issues (mutual TLS); revoking a client's certificate locks it out.

    p4sec-ca init DIR                         CA key and certificate (DIR/ca.key, DIR/ca.crt)
    p4sec-ca issue DIR NAME [--server] [--san HOST]...   DIR/NAME.key, DIR/NAME.crt (CN = NAME)
    p4sec-ca revoke DIR NAME                  adds the certificate's serial to DIR/revoked.json
    p4sec-ca list DIR                         issued certificates and their state

Keys are ECDSA P-256; certificates are valid for a year; private keys are written with mode 0600.
"""
import argparse
import datetime
import ipaddress
import json
import os
import pathlib
import sys

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


class CaError(Exception):
    pass


class RevocationListError(CaError):
    """The revocation list cannot be read or is not a list of serials: nobody can be admitted until it is fixed."""


def _write_key(path, key):
    data = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def load(d):
    """(private key, certificate) of the CA in directory `d`; CaError naming the directory if it has none."""
    d = pathlib.Path(d)
    try:
        key = serialization.load_pem_private_key((d / "ca.key").read_bytes(), None)
        cert = x509.load_pem_x509_certificate((d / "ca.crt").read_bytes())
    except (OSError, ValueError) as e:
        raise CaError(f"{d}: no usable CA ({e}); run `p4sec-ca init {d}` first") from e
    return key, cert


def init(d):
    d = pathlib.Path(d)
    d.mkdir(parents=True, exist_ok=True)
    if (d / "ca.key").exists():
        raise CaError(f"{d}/ca.key exists already")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "p4sec CA")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .sign(key, hashes.SHA256()))
    _write_key(d / "ca.key", key)
    (d / "ca.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (d / "revoked.json").write_text("[]")
    return d / "ca.crt"


def issue(d, name, server=False, sans=()):
    d = pathlib.Path(d)
    if not name or "/" in name or name.startswith("."):
        raise CaError(f"bad certificate name {name!r}")
    ca_key, ca_cert = load(d)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
         .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=365))
         .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
         # a server certificate (the controller's) is also a replica's client certificate when it forwards an agent's call
         .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH] if server
                                              else [ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
    names = []
    for s in list(sans) + ([name] if server else []):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(s)))
        except ValueError:
            names.append(x509.DNSName(s))
    if names:
        b = b.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = b.sign(ca_key, hashes.SHA256())
    _write_key(d / f"{name}.key", key)
    (d / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return d / f"{name}.crt"


def revoked_serials(d):
    """The revoked certificates' serials from DIR/revoked.json: a JSON list of serials (integers or decimal
    strings); `[]` is a valid empty list. Fails closed: a missing, unreadable, empty, truncated or malformed file
    raises RevocationListError (a caller that admits clients must refuse them all while it does)."""
    p = pathlib.Path(d) / "revoked.json"
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise RevocationListError(f"revocation list {p} cannot be read: {e}") from None
    if not text.strip():
        raise RevocationListError(f"revocation list {p} is empty (an empty list is written [])")
    try:
        items = json.loads(text)
    except ValueError as e:
        raise RevocationListError(f"revocation list {p} is not JSON (truncated?): {e}") from None
    if not isinstance(items, list):
        raise RevocationListError(f"revocation list {p} is a JSON {type(items).__name__}, not a list of serials")
    serials = set()
    for x in items:
        if isinstance(x, int) and not isinstance(x, bool) and x >= 0:
            serials.add(x)
        elif isinstance(x, str) and x.isascii() and x.isdigit():
            serials.add(int(x))
        else:
            raise RevocationListError(f"revocation list {p}: {x!r} is not a certificate serial")
    return serials


def revoke(d, name):
    d = pathlib.Path(d)
    try:
        cert = x509.load_pem_x509_certificate((d / f"{name}.crt").read_bytes())
    except (OSError, ValueError) as e:
        raise CaError(f"no certificate {name} in {d}") from e
    serials = revoked_serials(d) | {cert.serial_number}
    tmp = d / "revoked.json.tmp"
    tmp.write_text(json.dumps(sorted(str(s) for s in serials)))
    tmp.replace(d / "revoked.json")
    return cert.serial_number


def identity(pem):
    """(common name, serial number) of a PEM certificate."""
    cert = x509.load_pem_x509_certificate(pem if isinstance(pem, bytes) else pem.encode())
    cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return (cn[0].value if cn else ""), cert.serial_number


def main(argv=None):
    ap = argparse.ArgumentParser(prog="p4sec-ca", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    d = "the CA's directory (ca.key, ca.crt, revoked.json and the issued NAME.key/NAME.crt)"
    sub.add_parser("init", help="create the CA's key and certificate in DIR").add_argument("dir", metavar="DIR", help=d)
    i = sub.add_parser("issue", help="issue a key and certificate NAME (DIR/NAME.key, DIR/NAME.crt; CN = NAME)")
    i.add_argument("dir", metavar="DIR", help=d)
    i.add_argument("name", metavar="NAME", help="the certificate's name: a client's name (controller config: clients) "
                                               "or the controller's (agents.cert)")
    i.add_argument("--server", action="store_true", help="a server certificate (the controller's agent endpoint)")
    i.add_argument("--san", action="append", default=[], help="extra subject alternative name (host or IP)")
    r = sub.add_parser("revoke", help="revoke NAME's certificate: refused from the controller's next call on")
    r.add_argument("dir", metavar="DIR", help=d)
    r.add_argument("name", metavar="NAME", help="the certificate to revoke")
    sub.add_parser("list", help="the issued certificates and whether each is revoked").add_argument("dir", metavar="DIR", help=d)
    a = ap.parse_args(argv)
    try:
        if a.cmd == "init":
            print(init(a.dir))
        elif a.cmd == "issue":
            print(issue(a.dir, a.name, a.server, a.san))
        elif a.cmd == "revoke":
            print(f"revoked {a.name} (serial {revoke(a.dir, a.name)})")
        elif a.cmd == "list":
            bad = revoked_serials(a.dir)
            for p in sorted(pathlib.Path(a.dir).glob("*.crt")):
                if p.name == "ca.crt":
                    continue
                cn, serial = identity(p.read_bytes())
                print(f"{cn:<20} {'revoked' if serial in bad else 'valid'}")
    except CaError as e:
        print(f"p4sec-ca: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
