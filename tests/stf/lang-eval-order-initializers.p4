// Initializers are evaluated left to right (P4_16 1.2.5 "expression evaluation order"): an element that reads
// `c` before an element calling a function with `inout c` sees the old value, in every initializer form (list,
// named struct fields in source order, nested lists, header, tuple, `(T){...}`, `T {...}`, `{a, ...}`), and an
// assignment whose initializer reads its own target (`p = {p.y, p.x}`) reads every element before writing.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a; bit<8> b; bit<8> c; bit<8> d; bit<8> e; bit<8> f; bit<8> g; bit<8> h; bit<8> i; bit<8> j;
    bit<8> k; bit<8> l; bit<8> m; bit<8> n; bit<8> o; bit<8> p; bit<8> q; bit<8> r; bit<8> s; bit<8> t;
}
struct pair_t { bit<8> x; bit<8> y; }
struct three_t { bit<8> x; bit<8> y; bit<8> z; }
header hp_t { bit<8> x; bit<8> y; }
struct nest_t { pair_t p; bit<8> z; }
struct headers_t { h_t h; hp_t hp; }
struct meta_t { }

bit<8> bump(inout bit<8> c) { c = c + 1; return c; }
bit<8> dbl(inout bit<8> c) { c = c * 2; return c; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); pkt.extract(hdr.hp); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        bit<8> c = hdr.h.a;
        // a read, then a call writing what was read: {c0, c0 + 1}
        pair_t p = { c, bump(c) };
        hdr.h.b = p.x; hdr.h.c = p.y;
        // named fields run in source order, not field order: y = c0, x = c0 + 1
        c = hdr.h.a;
        pair_t q = { y = c, x = bump(c) };
        hdr.h.d = q.x; hdr.h.e = q.y;
        // nested: {{c0, c0 + 1}, c0 + 1} (the last element reads c after the call)
        c = hdr.h.a;
        nest_t n = { { c, bump(c) }, c };
        hdr.h.f = n.p.x; hdr.h.g = n.p.y; hdr.h.h = n.z;
        // a header: {c0, 2 c0}
        c = hdr.h.a;
        hp_t hh = { c, dbl(c) };
        hdr.h.i = hh.x; hdr.h.j = hh.y;
        // a tuple: {c0 + 3, c0 + 1}
        c = hdr.h.a;
        tuple<bit<8>, bit<8>> t = { c + 3, bump(c) };
        hdr.h.k = t[0]; hdr.h.l = t[1];
        // (T){...} of a list and of named fields: {c0, c0 + 1}, {x = c0, y = 2 c0}
        c = hdr.h.a;
        p = (pair_t){ c, bump(c) };
        hdr.h.m = p.x; hdr.h.n = p.y;
        c = hdr.h.a;
        p = (pair_t){ x = c, y = dbl(c) };
        hdr.h.o = p.x; hdr.h.p = p.y;
        // {a, ...}: the rest are defaults: {c0, c0 + 1, 0}
        c = hdr.h.a;
        three_t r = { c, bump(c), ... };
        hdr.h.q = r.x + r.y + r.z;
        // swaps: the whole initializer is read before its target is written
        p = { 3, 4 };
        p = { p.y, p.x };
        hdr.h.r = p.x * 16 + p.y;
        hdr.hp = { hdr.hp.y, hdr.hp.x };
        // two calls and reads between them: {c0, c0 + 1, 2 (c0 + 1)} summed with c (now 2 (c0 + 1))
        c = hdr.h.a;
        three_t u = { c, bump(c), dbl(c) };
        hdr.h.s = u.x + u.y + u.z;
        hdr.h.t = c;
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
