"""The running controller as a service: gateways from the config, auto tunnels up, the operations the REST API
and the agents' endpoint call."""
import ipaddress
import pathlib

from p4sec.infra import runtime
from p4sec.ipsec.ike_endpoint import start_from_config as start_ike
from p4sec.ipsec.controller import ControllerError, Gateway, IpsecController
from p4sec.ipsec.admission import admit_client, allowed_profile
from p4sec.ipsec.store import StoreError
from p4sec.ipsec.switch_tls import tls_for


class Service:
    """The running controller: gateways from the config, auto tunnels up, digests handled, REST served."""

    def __init__(self, cfg, db=None, election_id=None):
        self.cfg = cfg
        self.ctl = IpsecController(db or cfg.get("db", ":memory:"), grace=float(cfg.get("grace", 1.0)))
        self.switches = []
        program = pathlib.Path(cfg["program"])
        timeout = float(cfg.get("switch_timeout", 20))
        for i, g in enumerate(cfg["gateways"]):
            try:
                sw = runtime.Switch(g["grpc"], device_id=int(g.get("device_id", 1)), election_id=int(election_id or g.get("election_id", 1)),
                                    timeout=timeout, tls=tls_for(cfg, g))
            except ConnectionError as e:
                # the client's own account: no answer (and, over TLS, what to check) or arbitration refused
                self.close()
                why = str(e).removeprefix(f"{g['grpc']}: ")
                raise ControllerError(f"gateways[{i}].grpc: {g['grpc']!r}: {why}") from None
            except Exception as e:
                self.close()
                raise ControllerError(f"gateways[{i}].grpc: {g['grpc']!r}: no P4Runtime server answered within {timeout:g} s "
                                      f"({type(e).__name__}): expected a running switch") from None
            self.switches.append(sw)
            gw = Gateway(g["name"], sw, g["address"], g["lan"]["prefix"], int(g["lan"]["port"]), g["lan"]["mac"], int(g["wan"]["port"]),
                         g["wan"]["mac"], g["wan"]["prefix"])
            try:
                self.ctl.add_gateway(gw, program)
            except ControllerError:
                self.close()
                raise
            except Exception as e:
                self.close()
                raise ControllerError(f"gateways[{i}]: the switch at {g['grpc']} did not take the program {program}: "
                                      f"{' '.join(str(e).split())[:200]}") from None
            # (add_gateway logs "NAME: adopted" or "NAME: pipeline pushed")
        self.ctl.resume()
        interval = float(cfg.get("reconcile_interval", 10))
        if interval > 0:
            self.ctl.start_periodic(interval)
        up = {t["name"] for t in self.ctl.tunnels() if t["state"] in ("up", "degraded")}
        for name, p in cfg["profiles"].items():
            if p.get("auto") and name not in up:
                self.up(name)
        # charon's endpoint (the config's ike: section; docs/ikev2.md): here, so that only a leading replica has it
        self.ike = start_ike(cfg, self.ctl)

    def up(self, name):
        p = self.cfg["profiles"].get(name)
        if p is None:
            raise KeyError(name)
        spis = self.ctl.connect(p["a"], p["b"], p.get("suite", "aes-gcm-128"), p.get("soft"), p.get("hard"), name=name,
                                a_prefix=p.get("a_prefix"), b_prefix=p.get("b_prefix"), encap=p.get("encap"))
        return {f"{s}->{d}": f"{v[0]:#010x}" for (s, d), v in spis.items()}

    def down(self, name):
        self.ctl.disconnect(name)
        return {"down": name}

    def rekey(self, name):
        new = self.ctl.rekey(name)
        return {f"{s}->{d}": f"{v[0]:#010x}" for (s, d), v in new.items()}

    def rekey_pair(self, a, b):
        return {t: {f"{s}->{d}": f"{v[0]:#010x}" for (s, d), v in new.items()} for t, new in self.ctl.rekey_pair(a, b).items()}

    def reconcile(self, dry_run):
        return self.ctl.reconcile(dry_run=dry_run)

    def tunnel(self, name):
        t = next((t for t in self.ctl.tunnels() if t["name"] == name), None)
        if t is None:
            p = self.cfg["profiles"].get(name)
            if p is None:
                raise KeyError(name)
            t = {"name": name, "a": p["a"], "b": p["b"], "suite": p.get("suite", "aes-gcm-128"), "encap": p.get("encap", "esp"), "state": "down",
                 "active_spis": []}
        try:
            t["sas"] = [dict(s, spi=f"{s['spi']:#010x}") for s in self.ctl.sas(name)]
            t["events"] = [{"t": e[0], "what": e[2]} for e in self.ctl.events(name)]
        except StoreError as e:     # the state as last read, without its SAs and events
            t["store"] = str(e)
        return t

    def health(self):
        return self.ctl.health()

    def metrics(self):
        return self.ctl.metrics()

    def tunnels(self):
        known = {t["name"]: t for t in self.ctl.tunnels()}
        for name, p in self.cfg["profiles"].items():
            known.setdefault(name, {"name": name, "a": p["a"], "b": p["b"], "suite": p.get("suite", "aes-gcm-128"),
                                    "encap": p.get("encap", "esp"), "state": "down", "active_spis": []})
        return list(known.values())

    def sas(self, tunnel=None):
        return [dict(s, spi=f"{s['spi']:#010x}") for s in self.ctl.sas(tunnel)]

    # ---------------------------------------------------------------- the agents' endpoint (host-to-site)

    def _client(self, ctx):
        return admit_client(self.cfg, ctx)

    def _allowed(self, client, req, ctx):
        return allowed_profile(self.cfg, client, req, ctx)

    def _inner_address(self, client, profile):
        """The client's address inside the site: the same one every time (kept in the database)."""
        rec = self.ctl.records
        got = rec.host_address(profile, client)
        if got is not None:
            return got
        pool = ipaddress.ip_network(self.cfg["hosts"][profile]["pool"])
        used = rec.host_addresses(profile)
        for h in pool.hosts():
            if str(h) not in used:
                rec.add_host_address(profile, client, str(h))
                rec.commit()
                return str(h)
        raise ControllerError(f"the address pool of {profile} is exhausted")

    def _agent_up(self, client, req, ctx):
        import grpc
        h = self._allowed(client, req, ctx)
        try:
            ipaddress.ip_address(req.get("address", ""))
            runtime.mac(req.get("mac", ""))
        except (ValueError, AttributeError):
            ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, "address and mac of the host are required")
        try:
            with self.ctl.lock:
                inner = self._inner_address(client, h["name"])
                return self.ctl.host_up(client, h["name"], h["gateway"], req["address"], req["mac"], inner, h.get("suite", "aes-gcm-128"),
                                        h.get("soft"), h.get("hard"), encap=h.get("encap"))
        except StoreError as e:     # agents ask again on UNAVAILABLE
            ctx.abort(grpc.StatusCode.UNAVAILABLE, f"the controller's store fails; try again: {e}")
        except ControllerError as e:
            ctx.abort(grpc.StatusCode.FAILED_PRECONDITION, str(e))

    def _host_op(self, op, client, req, ctx):
        """A controller operation on the client's host tunnel; its refusals become FAILED_PRECONDITION."""
        import grpc
        h = self._allowed(client, req, ctx)
        try:
            return op(client, h["name"]), f"{h['name']}@{client}"
        except StoreError as e:     # agents ask again on UNAVAILABLE
            ctx.abort(grpc.StatusCode.UNAVAILABLE, f"the controller's store fails; try again: {e}")
        except ControllerError as e:
            ctx.abort(grpc.StatusCode.FAILED_PRECONDITION, str(e))

    def _agent_ready(self, client, req, ctx):
        return {"up": self._host_op(self.ctl.host_ready, client, req, ctx)[1]}

    def _agent_renew(self, client, req, ctx):
        return self._host_op(self.ctl.host_renew, client, req, ctx)[0]

    def _agent_renew_ready(self, client, req, ctx):
        return {"renewed": self._host_op(self.ctl.host_renew_ready, client, req, ctx)[1]}

    def _agent_down(self, client, req, ctx):
        return {"down": self._host_op(self.ctl.host_down, client, req, ctx)[1]}

    def close(self):
        if getattr(self, "ike", None) is not None:
            self.ike.close()
        self.ctl.close()
        for s in self.switches:
            s.close()
