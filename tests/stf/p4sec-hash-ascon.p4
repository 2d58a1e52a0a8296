// p4sec.p4 externs in a P4 program: keyed and cryptographic hashes over header fields, and ASCON-AEAD
// encryption and tag-checked decryption. Expected values come from Python's hashlib/hmac.
#include <core.p4>
#include <v1model.p4>
#include <p4sec.p4>

header h_t { bit<8> op; bit<8> status; bit<64> data; bit<256> result; }
struct headers_t { h_t h; }
struct meta_t { bit<128> tag; }

const bit<128> KEY = 0x000102030405060708090a0b0c0d0e0f;

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (hdr.h.op == 1) {
            p4sec_hash(hdr.h.result, p4sec_hash_alg_t.HMAC_SHA256, KEY, { hdr.h.data });
        } else if (hdr.h.op == 2) {
            p4sec_hash(hdr.h.result, p4sec_hash_alg_t.BLAKE2B, KEY, { hdr.h.data });
        } else if (hdr.h.op == 3) {
            p4sec_hash(hdr.h.result, p4sec_hash_alg_t.SHA3_512, 8w0, { hdr.h.data });
        } else if (hdr.h.op == 4) {
            bit<64> short;
            p4sec_hash(short, p4sec_hash_alg_t.BLAKE2B, 8w0, { hdr.h.data });
            hdr.h.result = (bit<256>) short;
        } else if (hdr.h.op == 5 || hdr.h.op == 6) {
            // encrypt, keep the ciphertext in result, then decrypt (op 6 corrupts the tag first)
            bit<64> d = hdr.h.data;
            p4sec_ascon_encrypt(p4sec_ascon_t.AEAD128, KEY, 128w7, { hdr.h.op }, d, meta.tag);
            hdr.h.result = (bit<256>) d;
            if (hdr.h.op == 6) { meta.tag = meta.tag ^ 1; }
            p4sec_ascon_decrypt(p4sec_ascon_t.AEAD128, KEY, 128w7, { hdr.h.op }, d, meta.tag, hdr.h.status);
            hdr.h.data = d;
        }
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
