// `for` loops beyond what can be unrolled (P4_16 1.2.5), run as run-time loops: a loop variable declared
// before the loop and read after it, a body that assigns the loop variable, bounds read from the packet, a
// loop without a condition left by `break`, updates that are calls and several assignments, a `bit<32>`
// counter to a run-time bound, `for`-in over a range with run-time ends (also `0 .. 255` of a `bit<8>`,
// which must not wrap around), over a list `{...}` of run-time values and of constants written in the body,
// annotations on the loop statement and on the `for`-in variable, nested loops with `continue`/`break`,
// and `return` from a loop inside a function.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a; bit<8> n;
    bit<8> r_before; bit<8> r_after; bit<8> r_assign; bit<8> r_bounds; bit<8> r_nocond; bit<8> r_calls;
    bit<32> r_wide; bit<8> r_range; bit<16> r_full; bit<8> r_list; bit<8> r_clist; bit<8> r_anno;
    bit<8> r_nested; bit<8> r_ret;
}
struct headers_t { h_t h; }
struct meta_t { }

// the first i in 1 .. n - 1 with i * i > x (8-bit product), 0 if none
bit<8> first_square_above(in bit<8> x, in bit<8> n) {
    for (bit<8> i = 1; i < n; i = i + 1) {
        if (i * i > x) {
            return i;
        }
    }
    return 0;
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    bit<8> calls = 0;
    action count() { calls = calls + 1; }
    apply {
        sm.egress_spec = 1;
        // declared before the loop, read after it: the first i with 3 * i >= a
        bit<8> i;
        for (i = 0; 3 * i < hdr.h.a; i = i + 1) {
            hdr.h.r_before = hdr.h.r_before + 1;
        }
        hdr.h.r_after = i;
        // the body assigns the loop variable: 0, then skips 1 and 2 after every even value
        for (bit<8> j = 0; j < 10; j = j + 1) {
            hdr.h.r_assign = hdr.h.r_assign + j;
            if (j % 2 == 0) {
                j = j + 2;
            }
        }
        // both bounds from the packet
        for (bit<8> k = hdr.h.a; k < hdr.h.n; k = k + 1) {
            hdr.h.r_bounds = hdr.h.r_bounds + 1;
        }
        // no condition: only `break` leaves
        for (bit<8> k = 0; ; k = k + 1) {
            if (k == hdr.h.n) {
                break;
            }
            hdr.h.r_nocond = hdr.h.r_nocond + 2;
        }
        // an update that is a call, and two updates
        for (bit<8> k = 0, bit<8> m = 0; k < 4; k = k + 1, count()) {
            m = m + k;
            hdr.h.r_calls = m;
        }
        hdr.h.r_calls = hdr.h.r_calls + (calls << 4);
        // a 32-bit counter to a run-time bound (far more iterations than unrolling allows)
        for (bit<32> w = 0; w < (bit<32>)hdr.h.n * 100; w = w + 1) {
            hdr.h.r_wide = hdr.h.r_wide + 1;
        }
        // a range with run-time ends, both included; its variable written in the body
        for (bit<8> x in hdr.h.a .. hdr.h.n) {
            hdr.h.r_range = hdr.h.r_range + x;
            x = 0;
        }
        // every value of a bit<8>: must end after 255
        for (bit<8> x in 0 .. 255) {
            hdr.h.r_full = hdr.h.r_full + (bit<16>)x;
        }
        // a list of run-time values
        for (bit<8> x in {hdr.h.a, hdr.h.n, 8w7}) {
            hdr.h.r_list = hdr.h.r_list + x;
        }
        // a list of constants, the variable written in the body
        for (bit<8> x in {1, 2, 3}) {
            x = x * 10;
            hdr.h.r_clist = hdr.h.r_clist + x;
        }
        // annotations on the statement and on the loop variable
        @unroll for (bit<8> k = 0; k < hdr.h.n; k = k + 1) {
            hdr.h.r_anno = hdr.h.r_anno + 1;
        }
        @name("annotated") for (@unused bit<8> k in 1 .. hdr.h.a) {
            hdr.h.r_anno = hdr.h.r_anno + 16;
        }
        // nested loops: pairs (p, q) with q < p < n, skipping q == 1, stopping the inner loop at q == 3
        for (bit<8> p = 0; p < hdr.h.n; p = p + 1) {
            for (bit<8> q = 0; q < p; q = q + 1) {
                if (q == 1) {
                    continue;
                }
                if (q == 3) {
                    break;
                }
                hdr.h.r_nested = hdr.h.r_nested + 1;
            }
        }
        hdr.h.r_ret = first_square_above(hdr.h.a, hdr.h.n);
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
