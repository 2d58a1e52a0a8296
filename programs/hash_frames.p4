/* hash_frames.p4: keyed hash over the whole frame (Ethernet header + everything after it), the workload of
 * Table III of the cryptographic hashing paper. Compile with -D HASH_ALG=<p4sec_hash_alg_t member> to hash;
 * without it the program only forwards (the baseline). The hash key comes from a table action parameter,
 * so the control plane sets it (-D KEY_BITS=64 for HalfSipHash-2-4, 128 otherwise); the first 48 bits of the digest replace the source MAC so that the result
 * is used and visible on the wire. */
#include <core.p4>
#include <v1model.p4>
#include <p4sec.p4>

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

#ifndef KEY_BITS
#define KEY_BITS 128
#endif

struct headers_t { ethernet_t ethernet; }
struct meta_t { bit<64> digest; }

parser HfParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition accept;
    }
}

control HfNoChecksum(inout headers_t hdr, inout meta_t meta) { apply { } }

control HfIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action forward(bit<9> port, bit<KEY_BITS> key) {
        sm.egress_spec = port;
#ifdef HASH_ALG
        p4sec_hash_payload(meta.digest, p4sec_hash_alg_t.HASH_ALG, key, hdr.ethernet);
        hdr.ethernet.src_addr = meta.digest[63:16];
#endif
    }
    table port_key {
        key = { sm.ingress_port : exact; }
        actions = { forward; }
        default_action = forward(1, 0);
    }
    apply { port_key.apply(); }
}

control HfEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }

control HfDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.ethernet); }
}

V1Switch(HfParser(), HfNoChecksum(), HfIngress(), HfEgress(), HfNoChecksum(), HfDeparser()) main;
