"""Certificate revocation for IKE peers: a CRL (X.509, signed by the p4sec CA) from the CA's revocation list
(DIR/revoked.json, kept by `p4sec-ca revoke`), for charon's revocation checks (swanctl's x509crl directory).

    python -m p4sec.ipsec.ikeca crl DIR [--out FILE] [--days N]     DIR/crl.pem (default), valid N days (7)
"""
import argparse
import datetime
import pathlib
import sys

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization

from p4sec.ipsec import ca


def crl(d, out=None, days=7):
    """Write the CRL of CA directory `d` (PEM) to `out` (default DIR/crl.pem); its path."""
    d = pathlib.Path(d)
    key, cert = ca.load(d)
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (x509.CertificateRevocationListBuilder().issuer_name(cert.subject).last_update(now - datetime.timedelta(minutes=5))
         .next_update(now + datetime.timedelta(days=days))
         .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(key.public_key()), critical=False)
         .add_extension(x509.CRLNumber(int(now.timestamp())), critical=False))
    for serial in sorted(ca.revoked_serials(d)) if (d / "revoked.json").exists() else []:
        b = b.add_revoked_certificate(x509.RevokedCertificateBuilder().serial_number(serial).revocation_date(now).build())
    path = pathlib.Path(out) if out else d / "crl.pem"
    path.write_bytes(b.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM))
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m p4sec.ipsec.ikeca", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("crl")
    c.add_argument("dir")
    c.add_argument("--out")
    c.add_argument("--days", type=int, default=7)
    a = ap.parse_args(argv)
    if a.days < 1:
        print("ikeca: --days must be at least 1", file=sys.stderr)
        return 2
    try:
        print(crl(a.dir, a.out, a.days))
    except ca.CaError as e:
        print(f"ikeca: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
