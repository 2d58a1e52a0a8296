// Annotations: free-form bodies hold any tokens (an apostrophe, `$`, a backtick, unbalanced brackets in
// prose), structured annotations `@a[k=v, ...]` and `@a[e, ...]` take compile-time constants; none of them
// changes what the program computes.
#include <core.p4>
#include <v1model.p4>

const bit<8> BASE = 6;

@scrabble(
    - What do you get if you multiply six by nine?
    - That's it. That's all there is. $5 `quoted` [ { 0xdeadbeef
)
header h_t { bit<8> op; bit<8> a; }
struct headers_t { h_t h; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    @note(it's the start state) state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    @comment(don't (nest) me ') action set(bit<8> v) { hdr.h.a = v; }
    @MixedExprList[1, "text", true, 1 == 2, 5 + BASE, -3]
    @MixedKV[label = "t", on = false, n = 2 * 3, k = BASE]
    table t {
        key = { hdr.h.op : exact @Field[x = 1]; }
        actions = { @Ref[1] set; NoAction; }
        const entries = { 1 : set(0x11); }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 1;
        t.apply();
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), Ing(), E(), CC(), D()) main;
