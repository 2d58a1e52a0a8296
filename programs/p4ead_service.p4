/* p4ead_service.p4: ASCON-AEAD encryption and decryption requests answered by the switch (P4EAD).
 *
 * A request is an Ethernet frame with EtherType 0x88B5: the header p4ead_req_t, then ceil(alen / 8) blocks of
 * associated data and ceil(dlen / 8) blocks of data (8 bytes each, zero-filled after the last byte). The key
 * is looked up by key_id in the table p4ead_keys, which only the control plane (P4Runtime) writes. The reply
 * goes back out of the request's port with the data replaced by the ciphertext (encrypt) or the plaintext
 * (decrypt), the tag set (encrypt), the status set and the number of pipeline passes it took.
 *
 * Two interchangeable implementations, chosen at compile time:
 *   default          plain P4 (programs/lib/p4ead.p4): P4EAD_RPP rounds per pass (-D P4EAD_RPP=1..4), the
 *                    state carried in a header in front of the Ethernet header across recirculations;
 *   -D P4EAD_EXTERN  one call of the p4sec_ascon_seal/p4sec_ascon_open externs (p4sec.p4) per request.
 *
 * Status: 1 done, 2 tag mismatch (data returned zeroed), 3 unknown key_id, 4 length above 32 bytes,
 * 5 unknown variant or operation. Counter p4ead_stats: index = status; index 0 counts pipeline passes. */
#include <core.p4>
#include <v1model.p4>
#include <p4sec.p4>
#include "lib/p4ead.p4"

const bit<16> ETHERTYPE_P4EAD = 0x88B5;
const bit<8> ST_DONE = 1;
const bit<8> ST_TAG = 2;
const bit<8> ST_NO_KEY = 3;
const bit<8> ST_LENGTH = 4;
const bit<8> ST_BAD = 5;

header ethernet_t { bit<48> dst_addr; bit<48> src_addr; bit<16> ether_type; }
header p4ead_req_t {
    bit<8>   op;
    bit<8>   variant;
    bit<8>   status;
    bit<8>   alen;
    bit<8>   dlen;
    bit<8>   rpp;        /* reply: rounds per pass of this build (0: extern) */
    bit<16>  passes;     /* reply: pipeline passes taken */
    bit<32>  key_id;
    bit<128> nonce;
    bit<128> tag;
}
header block_t { bit<64> w; }

struct headers_t {
    p4ead_t     st;
    ethernet_t  ethernet;
    p4ead_req_t req;
    block_t a0; block_t a1; block_t a2; block_t a3;
    block_t d0; block_t d1; block_t d2; block_t d3;
}
struct meta_t { bit<8> unused; }
struct words_t { bit<64> w0; bit<64> w1; bit<64> w2; bit<64> w3; }

parser SvcParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        transition select(sm.instance_type) { 0: parse_ethernet; default: parse_state; }
    }
    state parse_state { pkt.extract(hdr.st); transition parse_ethernet; }
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) { ETHERTYPE_P4EAD: parse_req; default: accept; }
    }
    state parse_req {
        pkt.extract(hdr.req);
        transition select(hdr.req.alen) { 0: data; 1 .. 8: a1; 9 .. 16: a2; 17 .. 24: a3; 25 .. 32: a4; default: accept; }
    }
    state a1 { pkt.extract(hdr.a0); transition data; }
    state a2 { pkt.extract(hdr.a0); pkt.extract(hdr.a1); transition data; }
    state a3 { pkt.extract(hdr.a0); pkt.extract(hdr.a1); pkt.extract(hdr.a2); transition data; }
    state a4 { pkt.extract(hdr.a0); pkt.extract(hdr.a1); pkt.extract(hdr.a2); pkt.extract(hdr.a3); transition data; }
    state data {
        transition select(hdr.req.dlen) { 0: accept; 1 .. 8: d1; 9 .. 16: d2; 17 .. 24: d3; 25 .. 32: d4; default: accept; }
    }
    state d1 { pkt.extract(hdr.d0); transition accept; }
    state d2 { pkt.extract(hdr.d0); pkt.extract(hdr.d1); transition accept; }
    state d3 { pkt.extract(hdr.d0); pkt.extract(hdr.d1); pkt.extract(hdr.d2); transition accept; }
    state d4 { pkt.extract(hdr.d0); pkt.extract(hdr.d1); pkt.extract(hdr.d2); pkt.extract(hdr.d3); transition accept; }
}

control SvcVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control SvcIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    counter(8, CounterType.packets) p4ead_stats;
#ifndef P4EAD_EXTERN
    P4eadPass() p4ead;
#endif
    bit<128> key;
    bool have_key = false;

    action set_key(bit<128> k) { key = k; have_key = true; }
    table p4ead_keys {
        key = { hdr.req.key_id : exact; }
        actions = { set_key; NoAction; }
        default_action = NoAction();
        size = 1024;
    }

    action reply(bit<8> status) {
        hdr.req.status = status;
        p4ead_stats.count((bit<32>) status);
    }

    apply {
        if (!hdr.req.isValid()) {
            mark_to_drop(sm);
            return;
        }
        p4ead_stats.count(0);
        if (!hdr.st.isValid()) {
            /* a new request */
            hdr.req.status = 0;
            hdr.req.passes = 0;
#ifdef P4EAD_EXTERN
            hdr.req.rpp = 0;
#else
            hdr.req.rpp = P4EAD_RPP;
#endif
            hdr.st.setValid();
            hdr.st.phase = P4EAD_START;
            hdr.st.variant = hdr.req.variant;
            hdr.st.dir = hdr.req.op;
            hdr.st.passes = 0;
            hdr.st.port = (bit<16>) sm.ingress_port;
        }
        sm.egress_spec = (bit<9>) hdr.st.port;
        p4ead_keys.apply();
        if (hdr.req.variant > P4EAD_V12 || hdr.req.op > P4EAD_DECRYPT) {
            reply(ST_BAD);
        } else if (hdr.req.alen > P4EAD_MAX_LEN || hdr.req.dlen > P4EAD_MAX_LEN) {
            reply(ST_LENGTH);
        } else if (!have_key) {
            reply(ST_NO_KEY);
        } else {
            p4ead_io_t io;
            io.a0 = hdr.a0.w; io.a1 = hdr.a1.w; io.a2 = hdr.a2.w; io.a3 = hdr.a3.w;
            io.d0 = hdr.d0.w; io.d1 = hdr.d1.w; io.d2 = hdr.d2.w; io.d3 = hdr.d3.w;
            if (!hdr.a0.isValid()) { io.a0 = 0; }
            if (!hdr.a1.isValid()) { io.a1 = 0; }
            if (!hdr.a2.isValid()) { io.a2 = 0; }
            if (!hdr.a3.isValid()) { io.a3 = 0; }
            if (!hdr.d0.isValid()) { io.d0 = 0; }
            if (!hdr.d1.isValid()) { io.d1 = 0; }
            if (!hdr.d2.isValid()) { io.d2 = 0; }
            if (!hdr.d3.isValid()) { io.d3 = 0; }
            io.alen = hdr.req.alen;
            io.dlen = hdr.req.dlen;
            io.tag = hdr.req.tag;
            io.tag_ok = 0;
#ifdef P4EAD_EXTERN
            bit<8> status;
            words_t d = { io.d0, io.d1, io.d2, io.d3 };
            hdr.st.passes = 1;
            if (hdr.req.op == P4EAD_ENCRYPT) {
                p4sec_ascon_seal((p4sec_ascon_t) hdr.req.variant, key, hdr.req.nonce, { io.a0, io.a1, io.a2, io.a3 }, io.alen,
                                 d, io.dlen, io.tag, status);
            } else {
                p4sec_ascon_open((p4sec_ascon_t) hdr.req.variant, key, hdr.req.nonce, { io.a0, io.a1, io.a2, io.a3 }, io.alen,
                                 d, io.dlen, io.tag, status);
            }
            io.tag_ok = (bit<1>) (status == 0);
            io.d0 = d.w0; io.d1 = d.w1; io.d2 = d.w2; io.d3 = d.w3;
            hdr.st.phase = P4EAD_DONE;
#else
            p4ead.apply(hdr.st, io, key, hdr.req.nonce);
#endif
            hdr.d0.w = io.d0; hdr.d1.w = io.d1; hdr.d2.w = io.d2; hdr.d3.w = io.d3;
            if (hdr.st.phase == P4EAD_DONE) {
                if (io.tag_ok == 1) {
                    hdr.req.tag = io.tag;
                    reply(ST_DONE);
                } else {
                    /* never release unauthenticated plaintext */
                    hdr.d0.w = 0; hdr.d1.w = 0; hdr.d2.w = 0; hdr.d3.w = 0;
                    reply(ST_TAG);
                }
            }
        }
        hdr.req.passes = hdr.st.passes;
        if (hdr.req.status != 0) {
            /* finished: answer the sender */
            hdr.st.setInvalid();
            bit<48> a = hdr.ethernet.dst_addr;
            hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
            hdr.ethernet.src_addr = a;
        }
    }
}

control SvcEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.st.isValid()) {
            /* still computing: another pass */
            recirculate_preserving_field_list(0);
        }
    }
}

control SvcCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control SvcDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.st);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.req);
        pkt.emit(hdr.a0); pkt.emit(hdr.a1); pkt.emit(hdr.a2); pkt.emit(hdr.a3);
        pkt.emit(hdr.d0); pkt.emit(hdr.d1); pkt.emit(hdr.d2); pkt.emit(hdr.d3);
    }
}

V1Switch(SvcParser(), SvcVerify(), SvcIngress(), SvcEgress(), SvcCompute(), SvcDeparser()) main;
