"""The IPsec application: the controller (`controller`, `ctlbase`, `sites`, `hosts`, `recovery`, `reconcile`,
`writes`, `tunnel_entries`, `failsafe`, `store`, `ha`), the controller as a service (`config`, `service`, `rest`,
`agent_endpoint`, `admission`, `daemon`, `cli`: `p4sec-controller`), the road-warrior agent (`agent`:
`p4sec-agent`, its backends `agent_userspace` and `agent_xfrm`, `agent_base`), the certificate authority (`ca`:
`p4sec-ca`) and the gateway program's names (`gateway`)."""
