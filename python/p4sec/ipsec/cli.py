"""`p4sec-controller`: the IPsec controller as a service, its northbound REST API and its CLI.

    p4sec-controller run CONFIG.yaml                 run the controller (gateways, tunnels, renewals, REST API)
    p4sec-controller [--api URL] tunnels list        the tunnels and their state
    p4sec-controller [--api URL] tunnels show NAME   one tunnel: SAs and event log
    p4sec-controller [--api URL] tunnels up NAME     bring a tunnel profile up
    p4sec-controller [--api URL] tunnels down NAME   tear it down
    p4sec-controller [--api URL] tunnels rekey NAME  renew both directions of NAME now
    p4sec-controller [--api URL] tunnels rekey-pair A B   renew every tunnel between gateways A and B now
    p4sec-controller [--api URL] reconcile [--check] compare the switches with the recorded state (--check:
                                                     only compare; exit 1 if they differ), else converge them
    p4sec-controller [--api URL] sas list [--tunnel NAME]

The configuration file is described in p4sec.ipsec.config."""
import argparse
import json
import logging
import sys
import urllib.error
import urllib.request

from p4sec.ipsec.controller import ControllerError
from p4sec.ipsec.config import ConfigError
from p4sec.ipsec.daemon import run


def api(base, method, path):
    req = urllib.request.Request(base.rstrip("/") + path, method=method, data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        raise ControllerError(json.loads(e.read()).get("error", str(e))) from e
    except urllib.error.URLError as e:
        raise ControllerError(f"cannot reach the controller at {base}: {e.reason}") from e


def main(argv=None):
    ap = argparse.ArgumentParser(prog="p4sec-controller", description="the p4sec IPsec controller", epilog=__doc__.split("\n\n")[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--api", default="http://127.0.0.1:8080", help="the running controller's REST API")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the controller")
    r.add_argument("config")
    r.add_argument("--log", default="INFO")
    t = sub.add_parser("tunnels")
    t.add_argument("action", choices=["list", "show", "up", "down", "rekey", "rekey-pair"])
    t.add_argument("name", nargs="?", help="the tunnel (rekey-pair: the first gateway)")
    t.add_argument("other", nargs="?", help="rekey-pair: the second gateway")
    c = sub.add_parser("reconcile", help="compare the switches with the recorded state, and converge them")
    c.add_argument("--check", action="store_true", help="only compare; exit 1 if a switch differs")
    s = sub.add_parser("sas")
    s.add_argument("action", choices=["list"])
    s.add_argument("--tunnel")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "run":
            logging.basicConfig(level=getattr(logging, a.log.upper(), logging.INFO), format="%(asctime)s %(name)s: %(message)s")
            run(a.config)
            return 0
        if a.cmd == "tunnels":
            if a.action == "list":
                rows = api(a.api, "GET", "/tunnels")
                print(f"{'name':<16} {'a':<8} {'b':<8} {'suite':<20} {'encap':<5} {'state':<6} active SPIs")
                for x in rows:
                    print(f"{x['name']:<16} {x['a']:<8} {x['b']:<8} {x['suite']:<20} {x.get('encap', 'esp'):<5} {x['state']:<6} "
                          f"{' '.join(x['active_spis'])}")
                return 0
            if a.action == "rekey-pair":
                if not (a.name and a.other):
                    raise ControllerError("tunnels rekey-pair needs two gateway names")
                print(json.dumps(api(a.api, "POST", f"/pairs/{a.name}/{a.other}/rekey")))
                return 0
            if not a.name:
                raise ControllerError(f"tunnels {a.action} needs a tunnel name")
            if a.action == "show":
                print(json.dumps(api(a.api, "GET", f"/tunnels/{a.name}"), indent=1))
            else:
                print(json.dumps(api(a.api, "POST", f"/tunnels/{a.name}/{a.action}")))
            return 0
        if a.cmd == "reconcile":
            r = api(a.api, "GET" if a.check else "POST", "/reconcile")
            for gw, x in sorted(r.items()):
                print(f"{gw:<8} {x['summary'] if isinstance(x, dict) else x}" + ("" if not isinstance(x, dict) else "  in sync" if x["in_sync"] else "  DIFFERS"))
            return 0 if not a.check or all(x["in_sync"] for x in r.values()) else 1
        if a.cmd == "sas":
            rows = api(a.api, "GET", "/sas" + (f"?tunnel={a.tunnel}" if a.tunnel else ""))
            print(f"{'spi':<12} {'tunnel':<16} {'src':<8} {'dst':<8} {'out':>4} {'in':>4} state")
            for x in rows:
                print(f"{x['spi']:<12} {x['tunnel']:<16} {x['src']:<8} {x['dst']:<8} {x['out_slot']:>4} {x['in_slot']:>4} {x['state']}")
            return 0
    except (ConfigError, ControllerError, ConnectionError) as e:    # (ConnectionError: a switch unreachable or refusing)
        print(f"p4sec-controller: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
