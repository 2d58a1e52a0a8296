// Default parameter values (P4_16 spec, "Optional parameters and default values"): an extern object's
// constructor and method, a function and an action with defaults, called with the defaulted
// arguments left out, given positionally, or given by name in any order.
#include <core.p4>
#include <v1model.p4>

// the STF runner's test extern `extern_func` (copies `s` into `d`) as an object: its implementation ignores the
// constructor argument. (lang-default-params-fn.p4 has it as an extern function with a default.)
const bit<32> EXT_S = 9;
extern extern_func {
    extern_func(bit<8> seed = 3);
    void run(out bit<32> d, in bit<32> s = EXT_S);
}

header h_t { bit<8> op; bit<32> a; bit<32> b; bit<8> c; bit<8> d; }
struct headers_t { h_t h; }
struct meta_t { }

const bit<8> BASE = 0x40;

bit<8> add(in bit<8> x, in bit<8> y = BASE, in bit<8> z = 1) {
    return x + y + z;
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    extern_func() obj;
    extern_func(seed = 4) obj2;
    // a default value is evaluated where the callee is declared: these constants do not change the defaults
    const bit<8> BASE = 0x01;
    const bit<32> EXT_S = 0x77;
    action set_d(bit<8> v = 0x55, bit<8> w = 0x0A) { hdr.h.d = v + w; }
    apply {
        sm.egress_spec = 1;
        if (hdr.h.op == 1) {
            obj2.run(s = 7, d = hdr.h.a);
            obj2.run(s = hdr.h.b, d = hdr.h.b);
            hdr.h.c = add(hdr.h.c);
            set_d();
        } else if (hdr.h.op == 2) {
            obj.run(hdr.h.a);
            obj.run(s = 32w0x1234, d = hdr.h.b);
            hdr.h.c = add(hdr.h.c, z = 2);
            set_d(w = 1);
        } else {
            obj.run(hdr.h.a, 32w5);
            hdr.h.c = add(hdr.h.c, 0x10, 0);
            set_d(0x20);
        }
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
