"""Mutual TLS on the P4Runtime server: a client with a certificate from the configured CA is served; a client
without one, or a plaintext client, is refused."""
import datetime
import ipaddress
import subprocess

import p4sec  # noqa: F401
import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from test_p4runtime import free_port


def cert(name, issuer=None, issuer_key=None, ca=False, san_ip=None):
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer.subject if issuer else subject)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if san_ip:
        b = b.add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(san_ip)), x509.DNSName("localhost")]), critical=False)
    c = b.sign(issuer_key or key, hashes.SHA256())
    pem = lambda: c.public_bytes(serialization.Encoding.PEM)
    kpem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return c, key, pem(), kpem


@pytest.fixture
def tls_switch(p4sec_bin, tmp_path):
    ca, ca_key, ca_pem, _ = cert("p4sec test CA", ca=True)
    _, _, srv_pem, srv_key = cert("switch", ca, ca_key, san_ip="127.0.0.1")
    _, _, cli_pem, cli_key = cert("controller", ca, ca_key)
    for name, data in [("ca.pem", ca_pem), ("srv.pem", srv_pem), ("srv.key", srv_key)]:
        (tmp_path / name).write_bytes(data)
    port = free_port()
    proc = subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{port}", "--tls-cert", str(tmp_path / "srv.pem"),
                             "--tls-key", str(tmp_path / "srv.key"), "--tls-ca", str(tmp_path / "ca.pem"),
                             "--tls-writers", "controller"], stderr=subprocess.PIPE)
    yield port, ca_pem, cli_pem, cli_key
    proc.terminate()
    proc.wait(timeout=10)


def capabilities(channel, timeout=10):
    grpc.channel_ready_future(channel).result(timeout=timeout)
    return p4runtime_pb2_grpc.P4RuntimeStub(channel).Capabilities(p4runtime_pb2.CapabilitiesRequest(), timeout=timeout)


def test_mutual_tls(tls_switch):
    port, ca_pem, cli_pem, cli_key = tls_switch
    good = grpc.ssl_channel_credentials(root_certificates=ca_pem, private_key=cli_key, certificate_chain=cli_pem)
    assert capabilities(grpc.secure_channel(f"127.0.0.1:{port}", good)).p4runtime_api_version.startswith("1.")
    no_client_cert = grpc.ssl_channel_credentials(root_certificates=ca_pem)
    with pytest.raises((grpc.RpcError, grpc.FutureTimeoutError)):
        capabilities(grpc.secure_channel(f"127.0.0.1:{port}", no_client_cert), timeout=2)
    with pytest.raises((grpc.RpcError, grpc.FutureTimeoutError)):
        capabilities(grpc.insecure_channel(f"127.0.0.1:{port}"), timeout=2)


def test_bmv2_target_options_turn_on_mutual_tls(p4sec_bin, tmp_path):
    """simple_switch_grpc's own TLS options after `--` (--grpc-server-ssl, -cert, -key, -cacert,
    --grpc-server-with-client-auth) do what --tls-cert/--tls-key/--tls-ca do."""
    ca, ca_key, ca_pem, _ = cert("p4sec test CA", ca=True)
    _, _, srv_pem, srv_key = cert("switch", ca, ca_key, san_ip="127.0.0.1")
    _, _, cli_pem, cli_key = cert("controller", ca, ca_key)
    for name, data in [("ca.pem", ca_pem), ("srv.pem", srv_pem), ("srv.key", srv_key)]:
        (tmp_path / name).write_bytes(data)
    port = free_port()
    proc = subprocess.Popen([str(p4sec_bin), "simple_switch_grpc", "--no-p4", "--thrift-port", str(free_port()), "--",
                             "--grpc-server-addr", f"127.0.0.1:{port}", "--grpc-server-ssl",
                             "--grpc-server-cert", str(tmp_path / "srv.pem"), "--grpc-server-key", str(tmp_path / "srv.key"),
                             "--grpc-server-cacert", str(tmp_path / "ca.pem"), "--grpc-server-with-client-auth"],
                            stderr=subprocess.PIPE)
    try:
        good = grpc.ssl_channel_credentials(root_certificates=ca_pem, private_key=cli_key, certificate_chain=cli_pem)
        assert capabilities(grpc.secure_channel(f"127.0.0.1:{port}", good)).p4runtime_api_version.startswith("1.")
        with pytest.raises((grpc.RpcError, grpc.FutureTimeoutError)):
            capabilities(grpc.secure_channel(f"127.0.0.1:{port}", grpc.ssl_channel_credentials(root_certificates=ca_pem)),
                         timeout=2)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
