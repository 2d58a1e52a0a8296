// Two constructs the reference compiler accepts (p4testgen's issue2362-bmv2 and issue1958):
// - table keys with side effects (`inner.apply().hit`, a function that writes a counter): every key of such a
//   table is computed once per apply, in key order, before the lookup;
// - a directionless control parameter of extern type (`register<bit<8>> r`), passed the caller's instance.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> k; bit<8> v; bit<8> hits; bit<8> calls; bit<8> regval; }
struct headers_t { h_t h; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
bit<8> next_call(inout bit<8> c) {
    c = c + 1;
    return c;
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control Bump(inout headers_t hdr, register<bit<8>> r) {
    apply {
        bit<8> x;
        r.read(x, 0);
        x = x + 1;
        r.write(0, x);
        hdr.h.regval = x;
    }
}

control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<8>>(1) reg;
    Bump() bump;
    bit<8> calls = 0;
    action set_v(bit<8> v) { hdr.h.v = v; hdr.h.hits = hdr.h.hits + 1; }
    table inner {
        key = { hdr.h.k : exact; }
        actions = { NoAction; }
        default_action = NoAction();
    }
    table outer {
        key = {
            inner.apply().hit : exact @name("inner_hit");
            next_call(calls) : exact @name("call");
        }
        actions = { set_v; NoAction; }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 1;
        outer.apply();
        outer.apply();
        hdr.h.calls = calls;
        bump.apply(hdr, reg);
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
