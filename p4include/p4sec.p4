/* p4sec.p4: the security externs of p4sec (ESP, keyed and cryptographic hashes, ASCON-AEAD).
 * Include after v1model.p4. Failures are status values the program tests; nothing here drops a packet
 * by itself. */
#ifndef _P4SEC_P4_
#define _P4SEC_P4_

/* Status codes (out bit<8> status) */
const bit<8> P4SEC_OK              = 0;
const bit<8> P4SEC_NO_SA           = 1;
const bit<8> P4SEC_TRUNCATED       = 2;
const bit<8> P4SEC_WRONG_SPI       = 3;
const bit<8> P4SEC_ICV_FAIL        = 4;
const bit<8> P4SEC_BAD_PADDING     = 5;
const bit<8> P4SEC_BAD_NEXT_HEADER = 6;
const bit<8> P4SEC_REPLAY          = 7;
const bit<8> P4SEC_TOO_OLD         = 8;
const bit<8> P4SEC_SEQ_OVERFLOW    = 9;
const bit<8> P4SEC_SA_EXPIRED      = 10;
const bit<8> P4SEC_BAD_INNER       = 11;
/* 12 is left to programs (ipsec_gateway.p4: SELECTOR_MISMATCH) */
const bit<8> P4SEC_WRONG_ENCAP     = 13;   /* ESP in UDP (RFC 3948) for a plain ESP SA, or the other way round */

/* ESP security association database. The control plane installs SAs into slots 0..size-1 (extern
 * control operations `add_sa`, `del_sa`, `sa_stats`); keys never appear in P4 tables.
 *
 * encap: the packet's payload (everything after the headers the parser extracted and the deparser does
 *   not emit: the program parses the inner IP header only to classify, then invalidates it or never
 *   extracts it) is the inner IP packet. It is replaced by outer IP header (from the SA's tunnel
 *   endpoints) + ESP header + IV + ciphertext + ICV.
 * decap: the payload starts at the ESP header (the program extracted and invalidated the outer IP
 *   header). The SA is found by SPI; the ICV is checked before decryption; on success the payload is the
 *   inner IP packet and sa_index is the slot of the SA.
 * ESP in UDP (RFC 3948, NAT traversal): an SA configured with `udp_encap` [source port, destination port]
 *   puts a UDP header in front of the ESP header (the outer header's protocol is then 17), and expects the
 *   payload it decapsulates to start at such a UDP header (to its destination port); the program's parser
 *   recognises the datagrams (a destination port such as 4500, and not the four zero bytes of an IKE
 *   message after the UDP header) and leaves the UDP header in the payload. A packet whose encapsulation is
 *   not its SA's gets P4SEC_WRONG_ENCAP. */
extern esp_sad {
    esp_sad(bit<32> size);
    void encap(in bit<32> sa_index, out bit<8> status);
    /* The same, with the inner packet's IP header given as a parsed header: the packet protected is
     * inner_header's bytes followed by the payload (the program then invalidates the header). */
    void encap<H>(in bit<32> sa_index, in H inner_header, out bit<8> status);
    void decap(in bit<32> spi, out bit<32> sa_index, out bit<8> status);
    /* decap with the SA the program selected (e.g. a SAD-dec table on outer source, destination and SPI);
     * the packet's SPI must be that SA's (else P4SEC_WRONG_SPI). */
    void decap_sa(in bit<32> sa_index, out bit<8> status);
    /* Tunnel mode in one pass (no recirculation to parse the new packet): encap_split protects inner_header's
     * bytes followed by the payload and returns the outer IP header in outer4 (an ipv4_t, when outer_version
     * is 4) or outer6 (an ipv6_t, 6); the payload becomes ESP header, IV, ciphertext and ICV. The program
     * sets the outer header valid and the other one invalid. decap_split returns a plain inner IP header
     * (IPv4 without options, or IPv6) in inner4/inner6 by inner_version and leaves what follows it as the
     * payload; inner_version 0: the payload is the whole inner packet (recirculate it to parse it). */
    void encap_split<H, H4, H6>(in bit<32> sa_index, in H inner_header, out H4 outer4, out H6 outer6, out bit<8> outer_version, out bit<8> status);
    void decap_split<H4, H6>(in bit<32> sa_index, out H4 inner4, out H6 inner6, out bit<8> inner_version, out bit<8> status);
    /* the lifetime event the SA reached since the last call, reported once: 0 none, 1 soft limit (renew),
     * 2 hard limit (the SA refuses packets from now on). Cheap when there is none. */
    void lifetime_event(in bit<32> sa_index, out bit<8> event);
    /* the same, with the SA's SPI (to tell an SA from the next one in the same slot) */
    void lifetime_event(in bit<32> sa_index, out bit<8> event, out bit<32> spi);
}

/* Hash algorithms of p4sec_hash (the keyed ones take the key argument, the others ignore it). */
enum bit<8> p4sec_hash_alg_t {
    CRC16 = 0,
    CRC32 = 1,
    CRC32C = 2,
    CSUM16 = 3,
    SIPHASH_2_4 = 4,        /* key bit<128> */
    HALFSIPHASH_2_4 = 5,    /* key bit<64> */
    BLAKE2B = 6,            /* key of any width, all zeros = unkeyed; output 8..512 bits = width of result */
    POLY1305_AES = 7,       /* key bit<384> = AES key k | r | nonce */
    HMAC_SHA256 = 8,
    HMAC_SHA512 = 9,
    SHA3_512 = 10
}

/* result = H(key, data); data is the concatenation of the fields (most significant bit first).
 * Digests are truncated to the width of result (their first bytes); CRCs and checksums are numbers. */
extern void p4sec_hash<O, K, D>(out O result, in p4sec_hash_alg_t alg, in K key, in D data);
/* The same over data followed by the packet payload (the bytes after the parsed headers). */
extern void p4sec_hash_payload<O, K, D>(out O result, in p4sec_hash_alg_t alg, in K key, in D data);

/* A hash unit with its algorithm fixed at instantiation.
 *   get:        result = H(key, data), data = the listed fields (most significant bit first)
 *   get_packet: result = H(key, data ++ payload[offset..]), payload = the bytes after the parsed headers
 *               (offset past the end: an empty suffix). Listing every parsed header as data and offset 0
 *               hashes the whole frame.
 * The key is any expression of whole bytes: a field, an action parameter (set over P4Runtime) or a value
 * read from a register. SipHash-2-4 needs bit<128>, HalfSipHash-2-4 bit<64>, Poly1305-AES bit<384>;
 * a wrong width is an error when the program is loaded. Results as for p4sec_hash. */
extern crypto_hash {
    crypto_hash(p4sec_hash_alg_t alg);
    void get<O, K, D>(out O result, in K key, in D data);
    void get_packet<O, K, D>(out O result, in K key, in D data, in bit<32> offset);
}

/* A deterministic automaton over the payload (the bytes after the parsed headers), loaded and replaced by the
 * control plane at run time (operation `load`, JSON from `p4sec-dpi`). scan() maps the bytes from `offset`
 * through the class map of `mode` (0: text, e.g. HTTP and TLS; 1: DNS names in wire format), runs the
 * automaton and reports whether an accepting state was reached. Without a loaded automaton nothing matches. */
extern dfa_matcher {
    dfa_matcher();
    void scan(in bit<8> mode, in bit<32> offset, out bit<1> matched);
}

/* ASCON authenticated encryption of header fields (P4EAD). data must be a whole number of bytes. */
enum bit<8> p4sec_ascon_t {
    AEAD128 = 0,        /* NIST SP 800-232 Ascon-AEAD128 */
    ASCON128_V12 = 1    /* ASCON-128 v1.2, as in the P4EAD paper */
}
extern void p4sec_ascon_encrypt<A, D>(in p4sec_ascon_t variant, in bit<128> key, in bit<128> nonce,
                                      in A ad, inout D data, out bit<128> tag);
extern void p4sec_ascon_decrypt<A, D>(in p4sec_ascon_t variant, in bit<128> key, in bit<128> nonce,
                                      in A ad, inout D data, in bit<128> tag, out bit<8> status);
/* The same over the first ad_len bytes of ad and the first data_len bytes of data (the rest of data is left as
 * it is). status: 0 done, 4 tag mismatch (open; data unchanged), 5 a length beyond its argument. */
extern void p4sec_ascon_seal<A, D>(in p4sec_ascon_t variant, in bit<128> key, in bit<128> nonce,
                                   in A ad, in bit<8> ad_len, inout D data, in bit<8> data_len,
                                   out bit<128> tag, out bit<8> status);
extern void p4sec_ascon_open<A, D>(in p4sec_ascon_t variant, in bit<128> key, in bit<128> nonce,
                                   in A ad, in bit<8> ad_len, inout D data, in bit<8> data_len,
                                   in bit<128> tag, out bit<8> status);

#endif  /* _P4SEC_P4_ */
