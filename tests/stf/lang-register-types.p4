// v1model registers whose element type is a typedef (of a typedef) of bit<W>, a new type (`type bit<8>`) or
// int<W>: read and written with values of that type, the register holding the underlying bit-string. (A struct
// element type is refused, as the reference compiler's BMv2 backend refuses registers of types other than bit<>
// or int<>; see crates/frontend/tests/lang_arrays_defaults.rs.)
#include <core.p4>
#include <v1model.p4>
typedef bit<16> val_t;
typedef val_t val2_t;
type bit<8> tval_t;
typedef int<8> sval_t;
struct pair_t { bit<8> a; bit<8> b; }
header h_t { bit<8> op; bit<16> a; bit<8> b; bit<8> c; }
struct headers_t { h_t h; }
struct meta_t { }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<val2_t>(4) r1;
    register<tval_t>(4) r2;
    register<sval_t>(4) r3;
    apply {
        sm.egress_spec = 1;
        val2_t x; r1.read(x, 1); x = x + hdr.h.a; r1.write(1, x); hdr.h.a = x;
        tval_t y; r2.read(y, 2); y = (tval_t)((bit<8>)y + hdr.h.b); r2.write(2, y); hdr.h.b = (bit<8>)y;
        sval_t z; r3.read(z, 3); z = z - 1; r3.write(3, z); hdr.h.c = (bit<8>)z;
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
