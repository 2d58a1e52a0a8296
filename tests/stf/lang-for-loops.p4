// `for` loops (P4_16 1.2.5), which p4sec unrolls at compile time: the three-clause form with `break` and
// `continue` (also `break` chosen at run time), a run-time condition `i < hdr.h.n`, two loop variables, and the
// `for`-in form over a range `a .. b` (both ends included) and over a header stack (its variable a copy).
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> n; bit<8> r_break; bit<8> r_cnt; bit<8> r_range; bit<8> r_stack; bit<8> r_cont; bit<8> r_two; }
header s_t { bit<8> v; }
struct headers_t { h_t h; s_t[3] st; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.n) {
            0: accept;
            default: more;
        }
    }
    state more {
        pkt.extract(hdr.st.next);
        transition select(hdr.st.lastIndex) {
            0: more;
            default: accept;
        }
    }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        // sum of 0 .. 9 without 3, leaving at i == a (chosen by the packet) or at 7
        for (bit<8> i = 0; i < 10; i = i + 1) {
            if (i == 3) {
                continue;
            }
            if (i == hdr.h.a || i == 7) {
                break;
            }
            hdr.h.r_break = hdr.h.r_break + i;
        }
        // a run-time condition
        for (bit<8> i = 0; i < hdr.h.n; i = i + 1) {
            hdr.h.r_cnt = hdr.h.r_cnt + 2;
        }
        for (bit<8> k in 1 .. 4) {
            hdr.h.r_range = hdr.h.r_range + k;
        }
        // the loop variable is a copy of each element, taken as its iteration starts (as p4c declares it a local
        // assigned each element): writing it leaves the stack as it is, and a write to a later element shows in
        // that element's iteration
        for (s_t s in hdr.st) {
            if (s.isValid()) {
                hdr.h.r_stack = hdr.h.r_stack + s.v;
                s.v = 0xFF;
                hdr.st[1].v = hdr.st[1].v + 1;
            }
        }
        // the even numbers below 8
        for (bit<8> i = 0; i < 8; i += 1) {
            if (i[0:0] == 1) {
                continue;
            }
            hdr.h.r_cont = hdr.h.r_cont + i;
        }
        // two loop variables: 10 + 9 + 8
        for (bit<8> i = 0, bit<8> j = 10; i < 3; i = i + 1, j = j - 1) {
            hdr.h.r_two = hdr.h.r_two + j;
        }
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
