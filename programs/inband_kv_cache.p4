/* inband_kv_cache.p4: an in-network key-value cache (NetCache / DySO style) whose entries are updated by
 * in-band control packets authenticated and encrypted with ASCON-AEAD (P4EAD).
 *
 * Queries (UDP to port 8888, header kv_t): a GET whose key is cached is answered by the switch (op REPLY,
 * status HIT, back out of its port); otherwise it goes on to the server (l2_fwd). A PUT invalidates the cached
 * copy of its key and goes on to the server. The cache is hash-indexed: slot = crc32(key) mod SLOTS, with
 * registers cache_key, cache_val, cache_valid and the per-slot hit counter cache_hits (the hot keys).
 *
 * In-band control (UDP to port 8889): the clear header ctl_t (version, op, count, sender, seq; the associated
 * data), 32 encrypted bytes holding up to two (key, value) updates, and the 16-byte tag. The nonce is
 * sender ++ 32w0 ++ seq. The sender's key and ASCON variant come from the table ctl_senders, written only over
 * P4Runtime. A packet touches the cache only after its tag verified and only if its seq is above the last one
 * accepted from that sender (register ctl_last_seq): forged, replayed, older and unauthenticated packets are
 * dropped. Control packets are consumed by the switch.
 *
 * Authentication, chosen at compile time:
 *   default               plain P4 (programs/lib/p4ead.p4), P4EAD_RPP rounds per pass (-D P4EAD_RPP=1..4),
 *                         recirculating with the ASCON state in a header in front of the Ethernet header;
 *   -D INBAND_EXTERN      one p4sec_ascon_open extern call;
 *   -D INBAND_NO_AUTH     none: the body is clear text and applied as it comes (the unprotected baseline).
 *
 * Counter kv_stats: 0 GET hits, 1 GET misses, 2 PUTs, 3 other packets forwarded.
 * Counter ctl_stats: 0 accepted, 1 bad tag, 2 replayed or older, 3 unknown sender, 4 malformed,
 * 5 recirculation passes. */
#include <core.p4>
#include <v1model.p4>
#include <p4sec.p4>
#include "lib/p4ead.p4"

#define SLOTS 65536
const bit<16> KV_PORT = 8888;
const bit<16> CTL_PORT = 8889;
const bit<8> KV_GET = 1;
const bit<8> KV_PUT = 2;
const bit<8> KV_REPLY = 3;
const bit<8> KV_HIT = 1;
const bit<8> CTL_VERSION = 1;
/* UDP length of a control packet: UDP header, 16 bytes of associated data, 32 of data, 16 of tag */
const bit<16> CTL_UDP_LEN = 8 + 16 + 32 + 16;
const bit<8> CTL_UPDATE = 1;

const bit<32> C_ACCEPTED = 0;
const bit<32> C_BAD_TAG = 1;
const bit<32> C_REPLAY = 2;
const bit<32> C_UNKNOWN = 3;
const bit<32> C_MALFORMED = 4;
const bit<32> C_PASSES = 5;

header ethernet_t { bit<48> dst_addr; bit<48> src_addr; bit<16> ether_type; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> total_len; bit<16> identification; bit<3> flags;
    bit<13> frag_offset; bit<8> ttl; bit<8> protocol; bit<16> hdr_checksum; bit<32> src_addr; bit<32> dst_addr;
}
header udp_t { bit<16> src_port; bit<16> dst_port; bit<16> length; bit<16> checksum; }
header kv_t { bit<8> op; bit<8> status; bit<16> reserved; bit<32> req_id; bit<64> key; bit<64> value; }
header ctl_t { bit<8> version; bit<8> op; bit<16> count; bit<32> sender; bit<64> seq; }
header ctl_body_t { bit<64> key0; bit<64> value0; bit<64> key1; bit<64> value1; }
header ctl_tag_t { bit<128> tag; }

struct headers_t {
    p4ead_t    st;
    ethernet_t ethernet;
    ipv4_t     ipv4;
    udp_t      udp;
    kv_t       kv;
    ctl_t      ctl;
    ctl_body_t body;
    ctl_tag_t  tag;
}
struct meta_t { bit<8> unused; }

parser KvParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        transition select(sm.instance_type) { 0: parse_ethernet; default: parse_state; }
    }
    state parse_state { pkt.extract(hdr.st); transition parse_ethernet; }
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) { 0x0800: parse_ipv4; default: accept; }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) { (5, 0, 17): parse_udp; default: accept; }
    }
    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(hdr.udp.dst_port, hdr.udp.src_port) {
            (KV_PORT, _): parse_kv;
            (_, KV_PORT): parse_kv;
            (CTL_PORT, _): parse_ctl;
            default: accept;
        }
    }
    state parse_kv { pkt.extract(hdr.kv); transition accept; }
    state parse_ctl { pkt.extract(hdr.ctl); pkt.extract(hdr.body); pkt.extract(hdr.tag); transition accept; }
}

control KvVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control KvIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<64>>(SLOTS) cache_key;
    register<bit<64>>(SLOTS) cache_val;
    register<bit<1>>(SLOTS) cache_valid;
    register<bit<32>>(SLOTS) cache_hits;
    register<bit<64>>(1024) ctl_last_seq;
    counter(4, CounterType.packets) kv_stats;
    counter(6, CounterType.packets) ctl_stats;
#if !defined(INBAND_EXTERN) && !defined(INBAND_NO_AUTH)
    P4eadPass() p4ead;
#endif

    bit<128> ckey;
    bit<8> cvariant;
    bit<32> cidx;
    bool known = false;

    action set_sender(bit<128> key, bit<8> variant, bit<32> index) {
        ckey = key;
        cvariant = variant;
        cidx = index;
        known = true;
    }
    table ctl_senders {
        key = { hdr.ctl.sender : exact; }
        actions = { set_sender; NoAction; }
        default_action = NoAction();
        size = 1024;
    }

    action forward(bit<9> port) { sm.egress_spec = port; }
    table l2_fwd {
        key = { hdr.ethernet.dst_addr : exact; }
        actions = { forward; NoAction; }
        default_action = NoAction();
        size = 1024;
    }

    action drop_ctl(bit<32> reason) {
        ctl_stats.count(reason);
        hdr.st.setInvalid();
        mark_to_drop(sm);
    }

    action slot_of(out bit<32> slot, in bit<64> key) {
        hash(slot, HashAlgorithm.crc32, 32w0, { key }, (bit<32>) SLOTS);
    }

    action install(in bit<64> key, in bit<64> value) {
        bit<32> slot;
        slot_of(slot, key);
        cache_key.write(slot, key);
        cache_val.write(slot, value);
        cache_valid.write(slot, 1);
        cache_hits.write(slot, 0);
    }

    /* an authenticated update: apply it if it is newer than the last one from this sender */
    action apply_updates() {
        bit<64> last;
        ctl_last_seq.read(last, cidx);
        if (hdr.ctl.seq > last) {
            ctl_last_seq.write(cidx, hdr.ctl.seq);
            if (hdr.ctl.count >= 1 && hdr.body.key0 != 0) { install(hdr.body.key0, hdr.body.value0); }
            if (hdr.ctl.count >= 2 && hdr.body.key1 != 0) { install(hdr.body.key1, hdr.body.value1); }
            ctl_stats.count(C_ACCEPTED);
        } else {
            ctl_stats.count(C_REPLAY);
        }
        hdr.st.setInvalid();
        mark_to_drop(sm);
    }

    apply {
        if (hdr.ctl.isValid()) {
            ctl_senders.apply();
            if (!known) {
                drop_ctl(C_UNKNOWN);
                return;
            }
            if (hdr.ctl.version != CTL_VERSION || hdr.ctl.op != CTL_UPDATE || hdr.ctl.count > 2 || cvariant > P4EAD_V12) {
                drop_ctl(C_MALFORMED);
                return;
            }
#ifndef INBAND_NO_AUTH
            /* exactly the bytes the tag covers: not a first fragment (MF set: the rest of the datagram would come
               unauthenticated), the whole tag present, no bytes after it in the UDP payload, the IP datagram or the
               frame as received */
            if (hdr.ipv4.flags[0:0] == 1 || !hdr.tag.isValid() || hdr.udp.length != CTL_UDP_LEN
                    || hdr.ipv4.total_len != 20 + CTL_UDP_LEN
                    || (sm.instance_type == 0 && sm.packet_length != 14 + 20 + (bit<32>) CTL_UDP_LEN)) {
                drop_ctl(C_MALFORMED);
                return;
            }
#endif
#ifdef INBAND_NO_AUTH
            apply_updates();
#else
            if (!hdr.st.isValid()) {
                /* a new control packet: cheap replay filter before any cryptography */
                bit<64> last;
                ctl_last_seq.read(last, cidx);
                if (hdr.ctl.seq <= last) {
                    drop_ctl(C_REPLAY);
                    return;
                }
                hdr.st.setValid();
                hdr.st.phase = P4EAD_START;
                hdr.st.variant = cvariant;
                hdr.st.dir = P4EAD_DECRYPT;
                hdr.st.passes = 0;
                hdr.st.port = (bit<16>) sm.ingress_port;
            }
            p4ead_io_t io;
            io.a0 = hdr.ctl.version ++ hdr.ctl.op ++ hdr.ctl.count ++ hdr.ctl.sender;
            io.a1 = hdr.ctl.seq;
            io.a2 = 0;
            io.a3 = 0;
            io.alen = 16;
            io.d0 = hdr.body.key0; io.d1 = hdr.body.value0; io.d2 = hdr.body.key1; io.d3 = hdr.body.value1;
            io.dlen = 32;
            io.tag = hdr.tag.tag;
            io.tag_ok = 0;
            bit<128> nonce = hdr.ctl.sender ++ 32w0 ++ hdr.ctl.seq;
#ifdef INBAND_EXTERN
            bit<8> status;
            p4sec_ascon_open((p4sec_ascon_t) cvariant, ckey, nonce, hdr.ctl, 8w16, hdr.body, 8w32, hdr.tag.tag, status);
            hdr.st.phase = P4EAD_DONE;
            io.tag_ok = (bit<1>) (status == 0);
#else
            p4ead.apply(hdr.st, io, ckey, nonce);
            ctl_stats.count(C_PASSES);
            hdr.body.key0 = io.d0; hdr.body.value0 = io.d1; hdr.body.key1 = io.d2; hdr.body.value1 = io.d3;
#endif
            if (hdr.st.phase == P4EAD_DONE) {
                if (io.tag_ok == 1) {
                    apply_updates();
                } else {
                    drop_ctl(C_BAD_TAG);
                }
            } else {
                /* more passes: any valid port, the egress recirculates */
                sm.egress_spec = (bit<9>) hdr.st.port;
            }
#endif
            return;
        }

        if (hdr.kv.isValid() && hdr.udp.dst_port == KV_PORT && (hdr.kv.op == KV_GET || hdr.kv.op == KV_PUT)) {
            bit<32> slot;
            slot_of(slot, hdr.kv.key);
            bit<64> k;
            bit<1> valid;
            cache_key.read(k, slot);
            cache_valid.read(valid, slot);
            if (hdr.kv.op == KV_GET && valid == 1 && k == hdr.kv.key) {
                /* a hit: answer from the cache */
                bit<32> hits;
                cache_hits.read(hits, slot);
                cache_hits.write(slot, hits + 1);
                cache_val.read(hdr.kv.value, slot);
                hdr.kv.op = KV_REPLY;
                hdr.kv.status = KV_HIT;
                bit<48> mac = hdr.ethernet.dst_addr;
                hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
                hdr.ethernet.src_addr = mac;
                bit<32> ip = hdr.ipv4.dst_addr;
                hdr.ipv4.dst_addr = hdr.ipv4.src_addr;
                hdr.ipv4.src_addr = ip;
                hdr.udp.dst_port = hdr.udp.src_port;
                hdr.udp.src_port = KV_PORT;
                hdr.udp.checksum = 0;
                sm.egress_spec = sm.ingress_port;
                kv_stats.count(0);
                return;
            }
            if (hdr.kv.op == KV_PUT) {
                if (k == hdr.kv.key) { cache_valid.write(slot, 0); }
                kv_stats.count(2);
            } else {
                kv_stats.count(1);
            }
        } else {
            kv_stats.count(3);
        }
        if (!l2_fwd.apply().hit) {
            mark_to_drop(sm);
        }
    }
}

control KvEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.st.isValid()) {
            recirculate_preserving_field_list(0);
        }
    }
}

control KvCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control KvDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.st);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.kv);
        pkt.emit(hdr.ctl);
        pkt.emit(hdr.body);
        pkt.emit(hdr.tag);
    }
}

V1Switch(KvParser(), KvVerify(), KvIngress(), KvEgress(), KvCompute(), KvDeparser()) main;
