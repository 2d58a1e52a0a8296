"""Benchmarks and demos of p4sec, run with `python -m bench.NAME` (most need root: network namespaces).

- `vpn_demo`: the IPsec VPN end to end (two switches, the controller, a tunnel, ESP on the wire decrypted);
- `ipsec`: IPsec goodput through two p4sec gateways per cipher suite;
- `tunnels`: many site-to-site tunnels set up and checked (controller and switch at scale);
- `veth`: the forwarding benchmark over veth pairs;
- `dpi`: the URL filter against netfilter (throughput and added latency);
- `kvcase`: the P4EAD key-value cache case study.
"""
