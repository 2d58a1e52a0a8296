"""How the controller reaches its gateways' switches: the `switch_tls` settings of the configuration, checked
when it is loaded.

    switch_tls: {ca: ca/, cert: controller}      # mutual TLS: the p4sec-ca directory, the controller's certificate
                                                 # name in it (ca/controller.crt, ca/controller.key); the switch's
                                                 # certificate must be signed by ca/ca.crt
    gateways:
      - {name: S1, grpc: 192.0.2.10:9559, switch_tls: {server_name: s1}, ...}   # per gateway, over the global ones
      - {name: LAB, grpc: 127.0.0.1:9560, switch_tls: {insecure: true}, ...}    # plaintext: test switches only

`server_name` is the name the switch's certificate must carry (default: the host of `grpc`). A gateway without
mutual TLS settings and without `insecure: true` is a configuration error: the controller never falls back to
plaintext by itself.
"""
import pathlib

KEYS = {"ca", "cert", "server_name", "insecure"}


class SwitchTlsError(Exception):
    pass


def _merged(cfg, g):
    """The gateway's settings over the global ones: its `insecure: true` drops the global ca/cert, its ca or cert
    the global `insecure`."""
    glob, own = dict(cfg.get("switch_tls") or {}), dict(g.get("switch_tls") or {})
    if own.get("insecure"):
        glob.pop("ca", None), glob.pop("cert", None)
    if "ca" in own or "cert" in own:
        glob.pop("insecure", None)
    glob.update(own)
    return glob


def _check_mapping(v, where):
    if v is None:
        return
    if not isinstance(v, dict):
        raise SwitchTlsError(f"{where}: expected a mapping {{ca: DIR, cert: NAME}} or {{insecure: true}}, got {v!r}")
    unknown = set(v) - KEYS
    if unknown:
        raise SwitchTlsError(f"{where}: unknown key(s) {', '.join(sorted(map(str, unknown)))} (ca, cert, server_name, insecure)")
    for k in ("ca", "cert", "server_name"):
        if k in v and (not isinstance(v[k], str) or not v[k]):
            raise SwitchTlsError(f"{where}: `{k}` must be a non-empty string, got {v[k]!r}")
    if "insecure" in v and v["insecure"] is not True:
        raise SwitchTlsError(f"{where}: `insecure` takes only `true` (leave it out for mutual TLS), got {v['insecure']!r}")


def check(cfg, path):
    """Check the global and per-gateway `switch_tls` settings: every gateway is reached over mutual TLS with
    readable files, or is marked `insecure: true`. Raises SwitchTlsError naming the setting."""
    _check_mapping(cfg.get("switch_tls"), f"{path}: switch_tls")
    for i, g in enumerate(cfg.get("gateways") or []):
        where = f"{path}: gateways[{i}]"
        _check_mapping(g.get("switch_tls"), f"{where}.switch_tls")
        s = _merged(cfg, g)
        if s.get("insecure"):
            if {"ca", "cert"} & set(s):
                raise SwitchTlsError(f"{where} ({g.get('name', '?')}): switch_tls: `insecure: true` together with "
                                     "ca/cert: choose one")
            continue
        missing = [k for k in ("ca", "cert") if k not in s]
        if missing:
            raise SwitchTlsError(
                f"{where} ({g.get('name', '?')}): no way to reach its switch securely: `switch_tls` needs "
                f"{' and '.join(missing)} (mutual TLS with certificates from p4sec-ca: switch_tls: {{ca: DIR, cert: NAME}}), "
                "or `insecure: true` for a plaintext test switch")
        d = pathlib.Path(s["ca"])
        for f in (d / "ca.crt", d / f"{s['cert']}.crt", d / f"{s['cert']}.key"):
            try:
                with open(f, "rb"):
                    pass
            except OSError as e:
                raise SwitchTlsError(f"{where} ({g.get('name', '?')}): switch_tls: cannot read {f}: {e.strerror}") from None


def tls_for(cfg, g):
    """The `runtime.Tls` to reach gateway `g`'s switch, or None for `insecure: true`; SwitchTlsError if it has
    neither (a configuration that did not go through `check`)."""
    from p4sec.infra import runtime
    s = _merged(cfg, g)
    if s.get("insecure") and not ({"ca", "cert"} & set(s)):
        return None
    if "ca" not in s or "cert" not in s:
        raise SwitchTlsError(f"gateway {g.get('name', '?')}: no switch_tls (mutual TLS) and not marked insecure: true")
    try:
        return runtime.Tls.from_ca_dir(s["ca"], s["cert"], s.get("server_name"))
    except OSError as e:
        raise SwitchTlsError(f"gateway {g.get('name', '?')}: switch_tls: {e}") from None
