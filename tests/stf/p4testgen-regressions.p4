// Constructs found by the p4testgen corpus (../shared/conformance/p4testgen), each once:
// - mark_to_drop on an action's `inout standard_metadata_t` parameter bound in the table (drop-bmv2, issue1544):
//   the drop survives the copy-out of the parameter;
// - V1Switch with named arguments in another order (basic_routing-bmv2);
// - a const entry whose keyset is a one-element list `{(a ++ b)}` (action-two-params);
// - a typedef of a specialised extern type, instantiated (issue2735-bmv2);
// - digest of a list expression, its type the tuple of the elements' types (issue430-1-bmv2).
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> op; bit<8> a; bit<8> b; }
struct hs { h_t h; }
struct m { }

typedef register<bit<8>> reg8_t;

parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control C(inout hs hdr, inout m meta) { apply { } }

action drop_it(inout standard_metadata_t smeta) { mark_to_drop(smeta); }

control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    reg8_t(4) r;
    action fwd(bit<9> port) { sm.egress_spec = port; }
    action set_b(bit<8> v) { hdr.h.b = v; }
    table t {
        key = { hdr.h.op : exact; }
        actions = { fwd; drop_it(sm); }
        default_action = drop_it(sm);
    }
    table k {
        key = { hdr.h.a : exact; }
        actions = { set_b; NoAction; }
        const entries = {
            {(4w0xa ++ 4w0x5)} : set_b(8w0x77);
        }
        default_action = NoAction;
    }
    apply {
        sm.egress_spec = 2;
        t.apply();
        k.apply();
        r.write(0, hdr.h.a);
        bit<8> x;
        r.read(x, 0);
        hdr.h.a = x + 1;
        digest(1, { hdr.h.op, x });
    }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); } }

V1Switch(p = P(), ig = I(), vr = C(), eg = E(), ck = C(), dep = D()) main;
