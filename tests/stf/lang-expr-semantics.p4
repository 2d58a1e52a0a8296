// Expression semantics our own tests pin down (issue 21): a compound assignment evaluates its target's
// l-value once; an integer literal next to a bit<W> value is converted modulo 2^W; nested slices as
// assignment targets; signed saturating arithmetic and shifts on values wider than 64 bits; shift amounts
// wider than 64 bits; constant shifts by the width or more; `a < (b >> c)` is a comparison.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> op; bit<8> a; bit<8> b; bit<8> c; }
header s_t { bit<8> v; }
header w_t { int<72> x; int<72> y; bit<72> k; bit<8> n; }
struct headers_t { h_t h; s_t[4] s; w_t w; }
struct meta_t { }

bit<2> next_index(inout bit<8> x) {
    x = x + 1;
    return x[1:0];
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        pkt.extract(hdr.s[0]);
        pkt.extract(hdr.s[1]);
        pkt.extract(hdr.s[2]);
        pkt.extract(hdr.s[3]);
        pkt.extract(hdr.w);
        transition accept;
    }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (hdr.h.op == 1) {
            // the index is computed once: a is incremented once, s[1] is read and written
            hdr.s[next_index(hdr.h.a)].v |= 0x0f;
        } else if (hdr.h.op == 2) {
            hdr.h.b = (hdr.h.a == -1) ? 8w1 : 8w0;
            hdr.h.c = ((8w255 == -1) && (8w5 < -1) && (8w0 == 256)) ? 8w1 : 8w0;
        } else if (hdr.h.op == 3) {
            hdr.h.c[7:0][5:2] = 4w0xf;
            hdr.h.b[7:4] += 1;
        } else if (hdr.h.op == 4) {
            hdr.w.y = (-hdr.w.x) |-| hdr.w.y;
            hdr.w.x = hdr.w.x |+| 72s5;
        } else if (hdr.h.op == 5) {
            hdr.w.x = hdr.w.x >> hdr.w.n;
            hdr.h.c = hdr.h.a >> hdr.w.k;
            hdr.h.b = hdr.h.a << hdr.w.k;
        } else if (hdr.h.op == 6) {
            hdr.h.c = 8w1 << 72w0x10000000000000000;
            hdr.h.b = (bit<8>) ((-8s1) >> 100);
            hdr.h.a = ((hdr.h.a) < (8w200 >> (hdr.h.a))) ? 8w1 : 8w0;
        }
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); pkt.emit(hdr.s); pkt.emit(hdr.w); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
