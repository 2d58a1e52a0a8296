/* frame_auth.p4: integrity of whole Ethernet frames between two switches (MACsec-like, without encryption).
 *
 * On a port configured to PROTECT, the switch numbers the frame with the next packet number (PN) of the
 * link it leaves on, computes a keyed hash over the whole frame (MAC addresses, EtherType, association
 * number, PN, everything after them), inserts a shim after the MAC addresses carrying the original EtherType,
 * the association number (AN), the PN and the first 64 bits of the digest, sets the EtherType to 0x88B5 and
 * forwards. On a port configured to VERIFY, the next switch looks up the key of the frame's AN on that port,
 * recomputes the hash over the frame without the shim; a match strips the shim and forwards the original
 * frame unchanged, anything else (no shim, no key for the AN, wrong tag, modified frame) is dropped and
 * counted.
 *
 * Keys change without losing frames, as MACsec's secure associations do (IEEE 802.1AE): a link has up to
 * four associations (AN 0..3), each with its own key, PNs and replay window. The controller installs the
 * next association at the receiver first (table fa_rx_sa), then switches the sender to it (the protect
 * entry names the AN it sends under); frames still in flight under the old AN keep verifying until the
 * controller retires the old association at the receiver.
 *
 * Replay protection, as IPsec's anti-replay window (RFC 4303, 3.4.3) with MACsec's packet numbers: each
 * verifying port keeps the highest PN it accepted and a 64-bit bitmap of the PNs just below it; an
 * authentic frame whose PN was already accepted, or is 64 or more below the highest, is dropped and counted
 * (a frame that fails the tag check never moves the window). PNs start at 1; a sender whose PN would wrap
 * stops sending (counted) until the controller moves it to a new association. PN and window registers are
 * per association: index port * 4 + AN (tx_pn at the sender, rx_top and rx_window at the receiver); the
 * controller resets an association's registers when it installs its key. Ports, keys and the algorithm of
 * each association are table entries written over P4Runtime; the registers are P4Runtime register entries.
 *
 * Algorithms (action parameter `alg`): 0 SipHash-2-4, 1 HMAC-SHA-256, 2 keyed BLAKE2b with a 64-bit output.
 * Counter fa_stats: 0 frames tagged, 1 frames verified, 2 wrong tag, 3 untagged frame on a verify port,
 * 4 tagged frame on a protect port, 5 unknown algorithm, 6 frames from an unconfigured port, 7 replayed or
 * too old frames (authentic), 8 frames not sent because the PN space of the association is used up, 9 frames
 * under an association the verifying port has no key for. */
#include <core.p4>
#include <v1model.p4>
#include <p4sec.p4>

const bit<16> ETHERTYPE_FA = 0x88B5;   /* IEEE 802 local experimental EtherType */

const bit<8> MODE_NONE = 0;
const bit<8> MODE_PASS = 1;
const bit<8> MODE_PROTECT = 2;
const bit<8> MODE_VERIFY = 3;

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

/* the shim: original EtherType, association number (0..3; the other bits zero), packet number and the
 * truncated tag */
header fa_tag_t {
    bit<16> ether_type;
    bit<8>  an;
    bit<32> pn;
    bit<64> tag;
}

struct headers_t {
    ethernet_t ethernet;
    fa_tag_t   fa;
}

struct meta_t {
    bit<8>   mode;
    bit<8>   alg;
    bit<128> key;
    bit<16>  ether_type;   /* the EtherType the tag covers */
    bit<8>   an;           /* the association number the tag covers */
    bit<32>  pn;           /* the packet number the tag covers */
    bit<64>  tag;
}

parser FaParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_FA: parse_fa;
            default: accept;
        }
    }
    state parse_fa {
        pkt.extract(hdr.fa);
        transition accept;
    }
}

control FaNoChecksum(inout headers_t hdr, inout meta_t meta) { apply { } }

control FaIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    crypto_hash(p4sec_hash_alg_t.SIPHASH_2_4) siphash;
    crypto_hash(p4sec_hash_alg_t.HMAC_SHA256) hmac_sha256;
    crypto_hash(p4sec_hash_alg_t.BLAKE2B) blake2b;
    counter(10, CounterType.packets) fa_stats;
    /* per association, index port * 4 + AN */
    register<bit<32>>(2048) tx_pn;       /* per egress link: the last PN sent */
    register<bit<32>>(2048) rx_top;      /* per ingress link: the highest PN accepted */
    register<bit<64>>(2048) rx_window;   /* per ingress link: bit i set = PN rx_top - i accepted */

    /* frames from this port leave on `port`, tagged under association `an` with `key` */
    action protect(bit<9> port, bit<8> alg, bit<128> key, bit<2> an) {
        sm.egress_spec = port;
        meta.mode = MODE_PROTECT;
        meta.alg = alg;
        meta.key = key;
        meta.an = (bit<8>)an;
    }
    /* frames from this port must be tagged under an association of fa_rx_sa; they leave on `port` */
    action verify(bit<9> port) {
        sm.egress_spec = port;
        meta.mode = MODE_VERIFY;
    }
    /* forward without protection (e.g. a trusted local port) */
    action pass(bit<9> port) {
        sm.egress_spec = port;
        meta.mode = MODE_PASS;
    }
    action unconfigured() {
        meta.mode = MODE_NONE;
    }
    table fa_port {
        key = { sm.ingress_port : exact; }
        actions = { protect; verify; pass; unconfigured; }
        default_action = unconfigured();
        size = 512;
    }

    /* the receive associations of a verifying port */
    action rx_sa(bit<8> alg, bit<128> key) {
        meta.alg = alg;
        meta.key = key;
    }
    action no_sa() {
        meta.mode = MODE_NONE;
    }
    table fa_rx_sa {
        key = { sm.ingress_port : exact; hdr.fa.an : exact; }
        actions = { rx_sa; no_sa; }
        default_action = no_sa();
        size = 2048;
    }

    apply {
        fa_port.apply();
        if (meta.mode == MODE_NONE) {
            fa_stats.count(6);
            mark_to_drop(sm);
            return;
        }
        if (meta.mode == MODE_PASS) {
            return;
        }
        if (meta.mode == MODE_PROTECT) {
            if (hdr.fa.isValid()) {
                fa_stats.count(4);
                mark_to_drop(sm);
                return;
            }
            if (meta.alg > 2) {
                fa_stats.count(5);
                mark_to_drop(sm);
                return;
            }
            meta.ether_type = hdr.ethernet.ether_type;
            /* the next PN of the association the frame leaves under; never wraps */
            bit<32> tx_idx = ((bit<32>)sm.egress_spec << 2) | (bit<32>)meta.an;
            bit<32> last;
            tx_pn.read(last, tx_idx);
            if (last == 0xFFFFFFFF) {
                fa_stats.count(8);
                mark_to_drop(sm);
                return;
            }
            meta.pn = last + 1;
            tx_pn.write(tx_idx, meta.pn);
        } else {
            if (!hdr.fa.isValid()) {
                fa_stats.count(3);
                mark_to_drop(sm);
                return;
            }
            /* the key of the frame's association */
            if (hdr.fa.an > 3) {
                meta.mode = MODE_NONE;
            } else {
                fa_rx_sa.apply();
            }
            if (meta.mode == MODE_NONE) {
                fa_stats.count(9);
                mark_to_drop(sm);
                return;
            }
            meta.ether_type = hdr.fa.ether_type;
            meta.an = hdr.fa.an;
            meta.pn = hdr.fa.pn;
        }
        /* the whole frame as it is without the shim: addresses, original EtherType, PN, the rest */
        if (meta.alg == 0) {
            siphash.get_packet(meta.tag, meta.key,
                { hdr.ethernet.dst_addr, hdr.ethernet.src_addr, meta.ether_type, meta.an, meta.pn }, 0);
        } else if (meta.alg == 1) {
            hmac_sha256.get_packet(meta.tag, meta.key,
                { hdr.ethernet.dst_addr, hdr.ethernet.src_addr, meta.ether_type, meta.an, meta.pn }, 0);
        } else if (meta.alg == 2) {
            blake2b.get_packet(meta.tag, meta.key,
                { hdr.ethernet.dst_addr, hdr.ethernet.src_addr, meta.ether_type, meta.an, meta.pn }, 0);
        } else {
            fa_stats.count(5);
            mark_to_drop(sm);
            return;
        }
        if (meta.mode == MODE_PROTECT) {
            hdr.fa.setValid();
            hdr.fa.ether_type = hdr.ethernet.ether_type;
            hdr.fa.an = meta.an;
            hdr.fa.pn = meta.pn;
            hdr.fa.tag = meta.tag;
            hdr.ethernet.ether_type = ETHERTYPE_FA;
            fa_stats.count(0);
            return;
        }
        if (meta.tag != hdr.fa.tag) {
            fa_stats.count(2);
            mark_to_drop(sm);
            return;
        }
        /* authentic: the anti-replay window of its association decides */
        bit<32> idx = ((bit<32>)sm.ingress_port << 2) | (bit<32>)hdr.fa.an;
        bit<32> top;
        bit<64> window;
        rx_top.read(top, idx);
        rx_window.read(window, idx);
        bit<1> fresh = 0;
        if (meta.pn > top) {
            bit<32> ahead = meta.pn - top;
            if (ahead >= 64) {
                window = 1;
            } else {
                window = (window << (bit<8>)ahead) | 1;
            }
            top = meta.pn;
            fresh = 1;
        } else if (meta.pn != 0) {
            bit<32> behind = top - meta.pn;
            if (behind < 64) {
                bit<64> seen = window & (64w1 << (bit<8>)behind);
                if (seen == 0) {
                    window = window | (64w1 << (bit<8>)behind);
                    fresh = 1;
                }
            }
        }
        if (fresh == 0) {
            fa_stats.count(7);
            mark_to_drop(sm);
            return;
        }
        rx_top.write(idx, top);
        rx_window.write(idx, window);
        hdr.ethernet.ether_type = hdr.fa.ether_type;
        hdr.fa.setInvalid();
        fa_stats.count(1);
    }
}

control FaEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }

control FaDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.fa);
    }
}

V1Switch(FaParser(), FaNoChecksum(), FaIngress(), FaEgress(), FaNoChecksum(), FaDeparser()) main;
