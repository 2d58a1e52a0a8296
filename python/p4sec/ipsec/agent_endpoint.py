"""The agents' gRPC endpoint (service p4sec.Agent, JSON messages, mutual TLS), on every replica."""
import json
import logging
import pathlib
import threading

from p4sec.ipsec.admission import AGENT_METHODS, FORWARDED_CLIENT, FORWARDED_SERIAL, admit_client, admit_identity, allowed_profile, is_replica_cert



class _Malformed:
    """A request body that is not a JSON object (answered INVALID_ARGUMENT)."""

    def __init__(self, why):
        self.why = why


def _request(body):
    """An agent's request: a JSON object (an empty body is {}), or _Malformed."""
    try:
        req = json.loads(body or b"{}")
    except (ValueError, UnicodeDecodeError) as e:
        return _Malformed(str(e))
    return req if isinstance(req, dict) else _Malformed(f"a JSON {type(req).__name__}")


class AgentEndpoint:
    """The agents' gRPC endpoint (service p4sec.Agent, JSON messages, mutual TLS), on every replica.

    Every call is admitted here, on the replica that receives it: the agent's certificate (verified by TLS against
    the CA), its serial against the revocation list, its client name and profile. The replica that leads then
    runs it (`service()` gives its Service). A follower (`service()` is None) runs nothing itself: it forwards the
    admitted call to the leader's endpoint (`leader()` gives its address) over mutual TLS with its own certificate
    (the controller's, a server certificate), naming the client and its certificate's serial in the call's
    metadata, and returns the leader's answer or error. The leader trusts that metadata only from a replica's
    certificate, checks the client again, and runs a forwarded call only while it leads (otherwise UNAVAILABLE:
    no call travels further, and the agent asks again). Agents retry UNAVAILABLE, so a call made while the lease
    changes hands lands on the next leader."""

    def __init__(self, cfg, service, leader=None):
        self.cfg, self.service, self.leader = cfg, service, leader
        ag = cfg["agents"]
        self.ca_dir = pathlib.Path(ag["ca"])
        self.name = ag["cert"]
        self.key = (self.ca_dir / f"{ag['cert']}.key").read_bytes()
        self.crt = (self.ca_dir / f"{ag['cert']}.crt").read_bytes()
        self.root = (self.ca_dir / "ca.crt").read_bytes()
        self.channels = {}
        self.lock = threading.Lock()
        self.server = None

    def start(self):
        import grpc
        from concurrent.futures import ThreadPoolExecutor
        creds = grpc.ssl_server_credentials([(self.key, self.crt)], root_certificates=self.root, require_client_auth=True)
        self.server = grpc.server(ThreadPoolExecutor(max_workers=8))
        handlers = {m: grpc.unary_unary_rpc_method_handler(lambda req, ctx, m=m: self.call(m, req, ctx),
                                                           request_deserializer=_request,
                                                           response_serializer=lambda o: json.dumps(o).encode())
                    for m in AGENT_METHODS}
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("p4sec.Agent", handlers),))
        self.server.add_secure_port(self.cfg["agents"]["listen"], creds)
        self.server.start()
        return self

    def _admit(self, ctx):
        """(client, forwarded): the agent calling, directly or through a replica."""
        import grpc
        from p4sec.ipsec import ca
        md = dict(ctx.invocation_metadata() or ())
        if FORWARDED_CLIENT not in md:
            return admit_client(self.cfg, ctx), False
        pem = (ctx.auth_context().get("x509_pem_cert") or [b""])[0]
        if not pem or not is_replica_cert(pem, self.name):
            ctx.abort(grpc.StatusCode.PERMISSION_DENIED, "only a controller replica may forward an agent's call")
        try:
            revoked = ca.revoked_serials(self.ca_dir)
        except ca.RevocationListError as e:
            logging.error("a call forwarded by a replica: refused, the revocation list is unusable: %s", e)
            ctx.abort(grpc.StatusCode.UNAVAILABLE, "the controller cannot read its certificate revocation list; try again later")
        if ca.identity(pem)[1] in revoked:
            ctx.abort(grpc.StatusCode.PERMISSION_DENIED, "the forwarding replica's certificate is revoked")
        try:
            serial = int(md.get(FORWARDED_SERIAL, ""))
        except ValueError:
            ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, "a forwarded call names its client's certificate serial")
        return admit_identity(self.cfg, md[FORWARDED_CLIENT], serial, ctx), True

    def call(self, method, req, ctx):
        import grpc
        from p4sec.ipsec import ca
        if isinstance(req, _Malformed):
            ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, f"the request is not a JSON object: {req.why}")
        client, forwarded = self._admit(ctx)
        if method == "List":
            return {"client": client, "profiles": self.cfg["clients"][client]}
        allowed_profile(self.cfg, client, req, ctx)
        svc = self.service()
        if svc is not None:
            return getattr(svc, "_agent_" + {"Up": "up", "Ready": "ready", "Down": "down", "Renew": "renew",
                                             "RenewReady": "renew_ready"}[method])(client, req, ctx)
        if forwarded:
            ctx.abort(grpc.StatusCode.UNAVAILABLE, "this replica does not lead (the lease is changing hands); try again")
        address = self.leader() if self.leader else None
        if not address:
            ctx.abort(grpc.StatusCode.UNAVAILABLE, "no replica leads right now (one takes over within the lease); try again")
        pem = ctx.auth_context().get("x509_pem_cert")[0]
        rpc = self._channel(address).unary_unary(f"/p4sec.Agent/{method}", request_serializer=lambda o: json.dumps(o).encode(),
                                                 response_deserializer=json.loads)
        try:
            return rpc(req, timeout=30, metadata=((FORWARDED_CLIENT, client), (FORWARDED_SERIAL, str(ca.identity(pem)[1]))))
        except grpc.RpcError as e:
            ctx.abort(e.code(), e.details() or f"the leader at {address} did not answer")

    def _channel(self, address):
        import grpc
        with self.lock:
            ch = self.channels.get(address)
            if ch is None:
                creds = grpc.ssl_channel_credentials(self.root, self.key, self.crt)
                ch = self.channels[address] = grpc.secure_channel(address, creds, options=[("grpc.ssl_target_name_override", self.name)])
            return ch

    def stop(self):
        if self.server is not None:
            self.server.stop(0)
        for ch in self.channels.values():
            ch.close()
