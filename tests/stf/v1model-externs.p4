// v1model externs: register, counter, hash (crc16, crc32, csum16, base + mod), random, truncate,
// log_msg, assert, digest.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> op; bit<8> a; bit<16> b; bit<16> r16; bit<32> r32; }
struct headers_t { h_t h; }
struct digest_t { bit<8> a; bit<16> b; }
struct meta_t { bit<16> tmp; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<16>>(4) acc;
    counter(4, CounterType.packets_and_bytes) per_slot;
    apply {
        sm.egress_spec = 1;
        if (hdr.h.op == 1) {
            acc.read(meta.tmp, (bit<32>) hdr.h.a);
            meta.tmp = meta.tmp + hdr.h.b;
            acc.write((bit<32>) hdr.h.a, meta.tmp);
            hdr.h.r16 = meta.tmp;
            per_slot.count((bit<32>) hdr.h.a);
        } else if (hdr.h.op == 2) {
            hash(hdr.h.r16, HashAlgorithm.crc16, (bit<16>) 0, { hdr.h.a, hdr.h.b }, (bit<32>) 65536);
            hash(hdr.h.r32, HashAlgorithm.crc32, (bit<32>) 0, { hdr.h.a, hdr.h.b }, (bit<64>) 4294967296);
        } else if (hdr.h.op == 3) {
            hash(hdr.h.r16, HashAlgorithm.csum16, (bit<16>) 0, { hdr.h.a, hdr.h.b }, (bit<32>) 65536);
            hash(hdr.h.r32, HashAlgorithm.crc16, (bit<32>) 100, { hdr.h.a, hdr.h.b }, (bit<32>) 10);
        } else if (hdr.h.op == 4) {
            random(hdr.h.a, 8w5, 8w5);
            truncate(4);
        } else if (hdr.h.op == 5) {
            log_msg("op 5 with a={} b={}", { hdr.h.a, hdr.h.b });
            digest<digest_t>(1, { hdr.h.a, hdr.h.b });
            assert(hdr.h.a == 0x12);
        }
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
