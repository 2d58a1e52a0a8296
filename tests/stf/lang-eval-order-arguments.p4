// Arguments are evaluated left to right too: an argument read before a later argument's call with `inout` keeps
// its value, for a function (a struct argument and a scalar one), a register write's index, and a field list of
// hash, and an extern of the registry (p4sec_hash); a run-time expression (`c + bump(c)`) reads `c` before the call.
#include <core.p4>
#include <v1model.p4>
#include <p4sec.p4>
header h_t { bit<8> a; bit<8> b; bit<8> c; bit<8> d; bit<8> e; bit<8> f; bit<8> g; bit<8> h; bit<8> i; bit<8> j; }
struct pair_t { bit<8> x; bit<8> y; }
struct headers_t { h_t h; }
struct meta_t { }
bit<8> bump(inout bit<8> c) { c = c + 1; return c; }
bit<8> dbl(inout bit<8> c) { c = c * 2; return c; }
bit<8> two(in bit<8> a, in bit<8> b) { return a * 16 + b; }
bit<8> sum(in pair_t q, in bit<8> b) { return q.x + q.y + b; }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<8>>(4) r;
    apply {
        sm.egress_spec = 1;
        bit<8> c = 1;
        pair_t p = {1, 2};
        hdr.h.a = sum(p, bump(p.x));        // p copied in before bump: 1+2 + 2 = 5
        c = 1;
        r.write(0, c + bump(c));            // 1 + 2 = 3
        c = 1;
        r.write((bit<32>)c, bump(c));       // index 1, value 2
        r.read(hdr.h.b, 0); r.read(hdr.h.c, 1);
        c = 1;
        hdr.h.d = two(c, bump(c));          // 0x12
        c = 1;
        bit<32> hv;
        hash(hv, HashAlgorithm.identity, 32w0, { c, bump(c) }, 32w65536);   // 0x0102
        hdr.h.e = hv[15:8]; hdr.h.f = hv[7:0];
        // an extern of the registry: the key is read before the data's call (H(1, 2), not H(2, 2))
        c = 1;
        bit<64> k1;
        bit<64> k2;
        p4sec_hash(k1, p4sec_hash_alg_t.HALFSIPHASH_2_4, (bit<64>)c, bump(c));
        p4sec_hash(k2, p4sec_hash_alg_t.HALFSIPHASH_2_4, 64w1, 8w2);
        hdr.h.g = (k1 == k2) ? 8w1 : 8w0;
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
