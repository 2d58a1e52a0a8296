"""`p4sec-controller`: the IPsec controller as a service (`run CONFIG.yaml`) and the commands that talk to a
running one through its northbound REST API (`tunnels`, `sas`, `reconcile`).

Every command prints a table or a few lines for people, `--json` the REST API's answer for scripts. An error
is one line on stderr naming what is wrong, and the exit status is 1 (2 for a command line argparse refuses).
The configuration file is described by `p4sec-controller run --help` and docs/vpn-two-machines.md."""
import argparse
import json
import logging
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

from p4sec.ipsec.controller import ControllerError
from p4sec.ipsec.config import ConfigError

DEFAULT_API = "http://127.0.0.1:8080"

CONFIG_HELP = """\
CONFIG is a YAML file (an example in docs/vpn-two-machines.md):

  program: DIR          the compiled gateway program (p4sec compile programs/ipsec_gateway.p4 -o DIR)
  db: FILE              SQLite file of the controller's state (tunnels, SAs, keys); a restart with the same
                        file adopts what the switches hold [default: in memory, lost on exit]
  rest: HOST:PORT       the REST API the other commands use (--api) [default: 127.0.0.1:8080]
  grace: SECONDS        how long an old inbound SA stays after a renewal [default: 1.0]
  reconcile_interval: S seconds between comparisons of the switches with the state (0: on start only)
  gateways:             one per p4sec switch running the gateway program:
    name                  the gateway's name in tunnels and commands
    grpc: HOST:PORT       the switch's P4Runtime address (its --grpc)
    device_id             the switch's --device-id [default: 1]
    election_id           the P4Runtime election id to connect with [default: 1]
    address               the gateway's own WAN address: the outer source of the ESP it sends
    lan: {prefix, port, mac}
                          prefix: the site behind the gateway; port: the switch port towards it;
                          mac: the MAC address frames to the site are sent to (the site's one host, or
                          its router)
    wan: {prefix, port, mac}
                          prefix: addresses reached over the WAN (the peer gateway's address at least);
                          port: the switch port towards the WAN; mac: the next hop's MAC address on the WAN
                          (gateways connected directly: 02:00:00:00:00:01, a p4sec gateway's MAC; else the
                          router between them): the gateway does no ARP
  tunnels:              tunnel profiles: {name, a, b, suite, auto, a_prefix, b_prefix, encap, soft, hard}
    a, b                  the two gateways; a_prefix/b_prefix: the subnets protected [default: their lan]
    suite                 aes-gcm-128 (default), aes-gcm-256, chacha20-poly1305, aes-cbc-hmac-sha256,
                          aes-ctr-hmac-sha256, aes-ctr-hmac-md5, null, bypass
    auto: true            bring it up at start (else: p4sec-controller tunnels up NAME)
    encap: udp            ESP in UDP port 4500 (across a NAT) [default: esp]
    soft, hard            SA lifetimes {packets, bytes, seconds}: renewal at soft, refusal at hard

Also host_profiles, clients and agents (road warriors, docs/ipsec.md) and store/ha (replicas sharing
PostgreSQL). Every field is checked at start; an error names the field."""


def api_base(value):
    """The controller's REST address as a base URL: `http://HOST:PORT`, `HOST:PORT` or `HOST` (port 8080)."""
    v = value.strip()
    expected = "http://HOST:PORT or HOST:PORT (the `rest:` of the controller's config), e.g. 127.0.0.1:8080"
    if "://" not in v:
        v = "http://" + v
    try:
        u = urllib.parse.urlsplit(v)
        port = u.port
    except ValueError as e:
        raise ControllerError(f"--api {value!r}: {e}; expected {expected}") from None
    if u.scheme != "http":
        raise ControllerError(f"--api {value!r}: the REST API speaks plain http; expected {expected}")
    if not u.hostname or any(c.isspace() for c in v) or u.query or u.fragment or u.path not in ("", "/"):
        raise ControllerError(f"--api {value!r} is not an address; expected {expected}")
    host = f"[{u.hostname}]" if ":" in u.hostname else u.hostname
    return f"http://{host}:{port or 8080}"


def seg(name):
    """One path segment of the REST API: the name URL-encoded (`x?y=1` stays one name)."""
    return urllib.parse.quote(name, safe="")


def api(base, method, path):
    """One REST call; the answer's JSON, or ControllerError with the controller's own message."""
    req = urllib.request.Request(base + path, method=method, data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        body = e.read()
        try:
            msg = json.loads(body).get("error")
        except (ValueError, AttributeError):
            msg = None
        raise ControllerError(msg or f"the controller at {base} answered HTTP {e.code} {e.reason}") from None
    except urllib.error.URLError as e:
        raise ControllerError(f"cannot reach the controller at {base}: {e.reason} (is `p4sec-controller run` running "
                              f"there? --api names its `rest:` address)") from None
    except (OSError, ValueError) as e:
        raise ControllerError(f"the controller at {base}: {e}") from None


def age(t, now=None):
    """Seconds since epoch time `t` as a short age: `42 s`, `5 min`, `3 h 10 min`, `2 d 4 h`."""
    s = max(0, int((now or time.time()) - t))
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    if s < 172800:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


def when(t):
    """Epoch time `t` as local time with milliseconds and its age: `14:02:11.532 (3 min ago)`."""
    return time.strftime("%H:%M:%S", time.localtime(t)) + f".{int(t * 1000) % 1000:03d} ({age(t)} ago)"


def limits(lim):
    return ", ".join(f"{v} {k}" for k, v in (lim or {}).items()) or "none"


def print_tunnels(rows):
    print(f"{'NAME':<16} {'GATEWAYS':<17} {'SUITE':<20} {'ENCAP':<5} {'STATE':<9} {'SINCE':<10} ACTIVE SPIs")
    for x in rows:
        since = age(x["created"]) if x.get("created") and x["state"] != "down" else "-"
        print(f"{x['name']:<16} {x['a'] + ' <-> ' + x['b']:<17} {x['suite']:<20} {x.get('encap', 'esp'):<5} "
              f"{x['state']:<9} {since:<10} {' '.join(x['active_spis']) or '-'}")


def print_tunnel(t):
    print(f"tunnel {t['name']}: {t['state']}" + (f" (unreachable: {', '.join(t['unreachable'])})" if t.get("unreachable") else ""))
    sites = f" ({t['a_prefix']} <-> {t['b_prefix']})" if t.get("a_prefix") else ""
    print(f"  gateways  {t['a']} <-> {t['b']}{sites}")
    print(f"  suite     {t['suite']}, {'ESP in UDP (port 4500)' if t.get('encap') == 'udp' else 'ESP'}")
    if t.get("created"):
        print(f"  up since  {when(t['created'])}")
    if "soft" in t:
        print(f"  limits    soft: {limits(t['soft'])}; hard: {limits(t['hard'])}")
    print(f"  SAs ({len(t.get('sas', []))}):")
    if t.get("sas"):
        print(f"    {'SPI':<12} {'FROM':<8} {'TO':<8} {'STATE':<10} SLOTS (out/in)")
        for s in t["sas"]:
            print(f"    {s['spi']:<12} {s['src']:<8} {s['dst']:<8} {s['state']:<10} {s['out_slot']}/{s['in_slot']}")
    ev = t.get("events", [])
    print(f"  events ({len(ev)}):")
    for e in ev:
        print(f"    {when(e['t'])}  {e['what']}")


def print_spis(what, name, spis):
    print(f"{what} {name}" + (": " + ", ".join(f"{d} SPI {s}" for d, s in spis.items()) if spis else ""))


def print_sas(rows):
    print(f"{'SPI':<12} {'TUNNEL':<16} {'FROM':<8} {'TO':<8} {'OUT':>4} {'IN':>4} STATE")
    for x in rows:
        print(f"{x['spi']:<12} {x['tunnel']:<16} {x['src']:<8} {x['dst']:<8} {x['out_slot']:>4} {x['in_slot']:>4} {x['state']}")


def parser():
    ap = argparse.ArgumentParser(
        prog="p4sec-controller", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="The p4sec IPsec controller: sets up, renews and tears down the SAs of p4sec switches running "
                    "programs/ipsec_gateway.p4 over P4Runtime (no IKE). `run` starts it; the other commands talk to "
                    "the running controller through its REST API.",
        epilog="examples:\n  p4sec-controller run controller.yaml\n  p4sec-controller tunnels list\n"
               "  p4sec-controller tunnels show S1-S2\n  p4sec-controller --api 10.0.0.1:8080 tunnels rekey S1-S2\n\n"
               "guides: docs/vpn-two-machines.md (a two-site VPN), docs/ipsec.md (the gateway and the controller)")
    ap.add_argument("--api", default=DEFAULT_API, metavar="URL",
                    help="the running controller's REST address (its config's `rest:`): http://HOST:PORT or HOST:PORT "
                         f"[default: {DEFAULT_API}]")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    r = sub.add_parser("run", help="run the controller (gateways, tunnels, renewals, REST API) until Ctrl-C",
                       description="Run the controller: connect to every gateway's switch, push the program, bring "
                                   "`auto` tunnels up, renew SAs on their lifetime events and serve the REST API. "
                                   "Ctrl-C (or SIGTERM) stops it; the switches keep their SAs.",
                       epilog=CONFIG_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("config", metavar="CONFIG", help="the configuration file (YAML; fields below)")
    r.add_argument("--log", default="INFO", type=str.upper, choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                   help="how much to log on stderr [default: INFO: one line per tunnel event]")

    def leaf(sp, name, help_, *args):
        p = sp.add_parser(name, help=help_, description=help_[0].upper() + help_[1:] + ".")
        for a, h in args:
            p.add_argument(a, help=h)
        p.add_argument("--json", action="store_true", help="print the REST API's JSON answer (for scripts)")
        p.add_argument("--api", default=argparse.SUPPRESS, metavar="URL",
                       help="as p4sec-controller --api (accepted after the command too)")
        return p

    t = sub.add_parser("tunnels", help="list, show, bring up, tear down or renew tunnels",
                       description="Tunnels: the profiles of the configuration and their state.")
    ts = t.add_subparsers(dest="action", required=True, metavar="ACTION")
    leaf(ts, "list", "every tunnel profile with its state, age and active SPIs")
    leaf(ts, "show", "one tunnel: gateways, suite, SAs and its event log (each setup and renewal step)",
         ("name", "the tunnel's name"))
    leaf(ts, "up", "bring a tunnel profile up (SAs and policies on both gateways)", ("name", "the tunnel's name"))
    leaf(ts, "down", "tear a tunnel down (policies, then SAs)", ("name", "the tunnel's name"))
    leaf(ts, "rekey", "renew both directions of a tunnel now (new SPIs and keys)", ("name", "the tunnel's name"))
    leaf(ts, "rekey-pair", "renew every tunnel between two gateways now",
         ("a", "the first gateway's name"), ("b", "the second gateway's name"))
    c = leaf(sub, "reconcile", "compare the switches with the recorded state and converge them (--check: compare only)")
    c.add_argument("--check", action="store_true", help="only compare; exit status 1 if a switch differs")
    s = sub.add_parser("sas", help="list security associations (no keys)", description="Security associations.")
    ss = s.add_subparsers(dest="action", required=True, metavar="ACTION")
    sl = leaf(ss, "list", "the SAs of every tunnel, or of one")
    sl.add_argument("--tunnel", metavar="NAME", help="only this tunnel's SAs (an unknown name is an error)")
    return ap


def run_service(a):
    from p4sec.ipsec.daemon import run
    logging.basicConfig(level=getattr(logging, a.log), format="%(asctime)s %(name)s: %(message)s")
    run(a.config)
    return 0


def command(a):
    base = api_base(a.api)
    out = (lambda x: print(json.dumps(x, indent=1))) if a.json else None
    if a.cmd == "tunnels":
        if a.action == "list":
            rows = api(base, "GET", "/tunnels")
            (out or print_tunnels)(rows)
        elif a.action == "show":
            (out or print_tunnel)(api(base, "GET", f"/tunnels/{seg(a.name)}"))
        elif a.action == "rekey-pair":
            r = api(base, "POST", f"/pairs/{seg(a.a)}/{seg(a.b)}/rekey")
            if out:
                out(r)
            else:
                for name, spis in r.items():
                    print_spis("renewed", name, spis)
        else:
            r = api(base, "POST", f"/tunnels/{seg(a.name)}/{a.action}")
            if out:
                out(r)
            elif a.action == "down":
                print(f"tunnel {a.name} is down")
            else:
                print_spis({"up": "up", "rekey": "renewed"}[a.action], a.name, r)
        return 0
    if a.cmd == "reconcile":
        r = api(base, "GET" if a.check else "POST", "/reconcile")
        if out:
            out(r)
        else:
            for gw, x in sorted(r.items()):
                if isinstance(x, dict):
                    print(f"{gw:<8} {x['summary']}  {'in sync' if x['in_sync'] else 'DIFFERS'}")
                else:
                    print(f"{gw:<8} {x}")
        return 0 if not a.check or all(isinstance(x, dict) and x["in_sync"] for x in r.values()) else 1
    if a.cmd == "sas":
        rows = api(base, "GET", "/sas" + (f"?tunnel={seg(a.tunnel)}" if a.tunnel is not None else ""))
        if a.tunnel is not None and not rows:
            api(base, "GET", f"/tunnels/{seg(a.tunnel)}")   # an unknown name: the controller's 404 message
        (out or print_sas)(rows)
        return 0
    raise AssertionError(a.cmd)


def main(argv=None):
    a = parser().parse_args(argv)
    try:
        return run_service(a) if a.cmd == "run" else command(a)
    except (ConfigError, ControllerError, ConnectionError) as e:    # (ConnectionError: a switch unreachable or refusing)
        print(f"p4sec-controller: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("p4sec-controller: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
