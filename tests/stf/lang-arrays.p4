// Generic arrays (P4_16 1.2.5): arrays of bit-strings and of structs as header fields, declared C-style
// (`bit<8> arr[4]`), in metadata, and as locals of type `bit<8>[2]`. Elements are laid out on the wire one after
// the other, element 0 first, each with its own (here sub-byte) width, as p4c/BMv2 lay them out. Indexed with
// constants and with run-time indices (reads and writes), iterated with `for (x in a)`, and sliced with `[L +: W]`.
#include <core.p4>
#include <v1model.p4>

struct pair_t { bit<4> a; bit<4> b; }
// 8 + 16 + 32 + 16 + 8 = 80 bits
header h_t { bit<8> idx; bit<4> nib[4]; bit<8> arr[4]; pair_t ps[2]; bit<8> sum; }
struct headers_t { h_t h; }
struct meta_t { bit<8> m[4]; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        meta.m[0] = hdr.h.arr[3];
        meta.m[1] = hdr.h.arr[2];
        meta.m[2] = hdr.h.arr[1];
        meta.m[3] = hdr.h.arr[0];
        hdr.h.arr[hdr.h.idx[1:0]] = 0xEE;
        hdr.h.sum = 0;
        if (meta.m.size == 4) {
            for (bit<8> x in meta.m) {
                hdr.h.sum = hdr.h.sum + x;
            }
        }
        hdr.h.sum = hdr.h.sum + meta.m[hdr.h.idx[0+:2]];
        hdr.h.nib[0] = hdr.h.nib[3];
        hdr.h.ps[hdr.h.idx[0:0]].a = 0xF;
        bit<8>[2] loc;
        loc[0] = 0x10;
        loc[1] = 0x20;
        hdr.h.sum = hdr.h.sum + loc[hdr.h.idx[0:0]];
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
