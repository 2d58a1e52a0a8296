"""The IPsec application: the controller (`controller`, `ctlbase`, `hosts`, `recovery`, `reconcile`, `writes`,
`tunnel_entries`, `failsafe`, `store`, `ha`), the controller
as a service (`config`, `service`, `rest`, `agent_endpoint`, `admission`, `daemon`, `cli`: `p4sec-controller`),
the road-warrior agent (`agent`: `p4sec-agent`), the certificate authority (`ca`: `p4sec-ca`) and the gateway
program's names (`gateway`)."""
