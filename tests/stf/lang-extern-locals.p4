// Locals of extern type where the spec allows them: a register at top level, a register and a counter among
// a control's declarations; a value set of nested structs among a parser's declarations (empty here: the
// select takes its default branch; crates/engine/tests/value_set_nested.rs installs members).
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> op; bit<8> a; bit<8> last; bit<8> total; }
struct headers_t { h_t h; }
struct meta_t { }
struct inner_t { bit<8> a; }
struct outer_t { bit<8> op; inner_t inr; }

register<bit<8>>(1) total;

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    value_set<outer_t>(4) vs;
    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.op, hdr.h.a) { vs: reject; default: accept; }
    }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<8>>(1) last;
    counter(2, CounterType.packets) seen;
    apply {
        sm.egress_spec = 1;
        seen.count(0);
        last.read(hdr.h.last, 0);
        last.write(0, hdr.h.a);
        bit<8> t;
        total.read(t, 0);
        t = t + hdr.h.a;
        total.write(0, t);
        hdr.h.total = t;
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), Ing(), E(), CC(), D()) main;
