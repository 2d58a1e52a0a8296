// Nested slices as assignment targets: `x[15:0][11:4][3:0] = v` writes bits [7:4] of x; in compound
// assignments (the target read and written once) and as out/inout arguments.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> op; bit<16> w; bit<8> a; int<8> s; }
struct headers_t { h_t h; }
struct meta_t { }

void set_nibble(out bit<4> n) { n = 4w0xC; }
void bump(inout bit<4> n) { n = n + 1; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        bit<16> x = hdr.h.w;
        if (hdr.h.op == 1) {
            x[15:0][7:4] = 4w0xA;                 // bits 7..4
            x[15:8][3:0][1:0] = 2w3;              // bits 9..8
            hdr.h.w = x;
        } else if (hdr.h.op == 2) {
            hdr.h.w[15:8][3:0] = 4w0x5;           // a header field, directly
            hdr.h.a[7:0][7:4] = hdr.h.a[3:0];     // read and written parts of one field
        } else if (hdr.h.op == 3) {
            hdr.h.w[11:4][3:0] |= 4w0x9;          // compound: bits 7..4
            hdr.h.w[15:0][15:8] += 8w1;
            hdr.h.s[7:0][6:0] = 7w0x7F;           // a slice of an int<8> is a bit<7>
        } else if (hdr.h.op == 4) {
            set_nibble(hdr.h.w[15:8][7:4]);       // out argument: bits 15..12
            bump(hdr.h.w[7:0][3:0]);              // inout argument: bits 3..0
        }
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), Ing(), E(), CC(), D()) main;
