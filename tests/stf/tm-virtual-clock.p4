// The STF runner's deterministic time fields (docs/conformance.md): a virtual clock at 0 µs for the first
// packet of a test, 1,000 µs later for each next one; no queueing, so the queue fields are 0. Egress copies
// them into the packet's header `t`; ingress sends to port 1.
#include <core.p4>
#include <v1model.p4>

header t_h {
    bit<8>  tag;
    bit<48> ingress_ts;
    bit<48> egress_ts;
    bit<32> enq_ts;
    bit<8>  enq_qdepth;
    bit<8>  deq_qdepth;
    bit<32> deq_timedelta;
}

struct headers { t_h t; }
struct meta { }

parser P(packet_in pkt, out headers h, inout meta m, inout standard_metadata_t sm) {
    state start { pkt.extract(h.t); transition accept; }
}
control V(inout headers h, inout meta m) { apply { } }
control I(inout headers h, inout meta m, inout standard_metadata_t sm) { apply { sm.egress_spec = 1; } }
control E(inout headers h, inout meta m, inout standard_metadata_t sm) {
    apply {
        h.t.ingress_ts = sm.ingress_global_timestamp;
        h.t.egress_ts = sm.egress_global_timestamp;
        h.t.enq_ts = sm.enq_timestamp;
        h.t.enq_qdepth = (bit<8>)sm.enq_qdepth;
        h.t.deq_qdepth = (bit<8>)sm.deq_qdepth;
        h.t.deq_timedelta = sm.deq_timedelta;
    }
}
control C(inout headers h, inout meta m) { apply { } }
control D(packet_out pkt, in headers h) { apply { pkt.emit(h.t); } }

V1Switch(P(), V(), I(), E(), C(), D()) main;
