"""Admission of road-warrior agents (host-to-site): certificate identity, revocation, client and profile
checks, and the replicas' own certificates."""
import logging



# ---------------------------------------------------------------------- the agents' endpoint (host-to-site)

FORWARDED_CLIENT, FORWARDED_SERIAL = "p4sec-forwarded-client", "p4sec-forwarded-serial"
AGENT_METHODS = ("List", "Up", "Ready", "Down", "Renew", "RenewReady")


def admit_client(cfg, ctx):
    """The agent calling (the common name of its certificate), once its certificate is known not to be revoked
    and it is a client of this controller; the call is aborted otherwise."""
    import grpc
    from p4sec.ipsec import ca
    pem = (ctx.auth_context().get("x509_pem_cert") or [b""])[0]
    if not pem:
        ctx.abort(grpc.StatusCode.UNAUTHENTICATED, "a client certificate is required")
    cn, serial = ca.identity(pem)
    return admit_identity(cfg, cn, serial, ctx)


def admit_identity(cfg, cn, serial, ctx):
    """`cn` (its certificate's serial `serial`) if it is not revoked and a client of this controller."""
    import grpc
    from p4sec.ipsec import ca
    try:
        revoked = ca.revoked_serials(cfg["agents"]["ca"])
    except ca.RevocationListError as e:
        # fail closed: without a usable list nobody is known not to be revoked
        logging.error("agent %s: refused, the revocation list is unusable: %s", cn, e)
        ctx.abort(grpc.StatusCode.UNAVAILABLE, "the controller cannot read its certificate revocation list; try again later")
    if serial in revoked:
        logging.warning("agent %s: refused, its certificate (serial %d) is revoked", cn, serial)
        ctx.abort(grpc.StatusCode.PERMISSION_DENIED, f"the certificate of {cn} is revoked")
    if cn not in cfg["clients"]:
        ctx.abort(grpc.StatusCode.PERMISSION_DENIED, f"{cn} is not a client of this controller")
    return cn


def allowed_profile(cfg, client, req, ctx):
    """The host profile the request names, if `client` may use it (the call is aborted otherwise)."""
    import grpc
    p = req.get("profile")
    if p not in cfg["clients"][client]:
        ctx.abort(grpc.StatusCode.PERMISSION_DENIED, f"{client} may not use profile {p!r}")
    return cfg["hosts"][p]


def is_replica_cert(pem, name):
    """Whether `pem` is the certificate of a controller replica: common name `name` (the agents' `cert`) and a
    server certificate (issued with `p4sec-ca issue --server`; an agent's certificate never is one)."""
    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    cert = x509.load_pem_x509_certificate(pem)
    cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    try:
        eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        return False
    return bool(cn) and cn[0].value == name and ExtendedKeyUsageOID.SERVER_AUTH in eku
