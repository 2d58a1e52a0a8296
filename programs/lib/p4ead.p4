/* p4ead.p4: ASCON-AEAD computed in plain P4, round by round, as P4EAD does it.
 *
 * The 320-bit ASCON state travels in the header p4ead_t across recirculations. Every pipeline pass runs
 * P4EAD_RPP permutation rounds (1 to 4, a compile-time constant); the phases INIT, AD, DATA and FINAL follow
 * each other inside a pass when a permutation ends, so a request needs ceil(R / P4EAD_RPP) passes, with
 *   R = 12 + b * (ad_blocks) + b * floor(data_len / rate) + 12,   ad_blocks = floor(ad_len / rate) + 1 if ad_len > 0,
 * which for ASCON-128 v1.2 (rate 8, b = 6) and a non-empty AD is the paper's 30 + 6 (floor(p/8) + floor(q/8)).
 *
 * Both ASCON variants, chosen per request:
 *   P4EAD_AEAD128 (0): NIST SP 800-232 Ascon-AEAD128 (rate 16 bytes, 8-round intermediate permutation,
 *                      little-endian words);
 *   P4EAD_V12     (1): ASCON-128 v1.2 as in the P4EAD paper (rate 8 bytes, 6 rounds, big-endian words).
 *
 * Inputs and outputs go through p4ead_io_t: up to 32 bytes of associated data (a0..a3) and up to 32 bytes of
 * data (d0..d3), big-endian (the first byte is the most significant byte of a0 / d0); bytes beyond the lengths
 * are ignored on input and zero on output. Encryption replaces d0..d3 with the ciphertext and sets tag;
 * decryption replaces them with the plaintext and sets tag_ok when the computed tag equals tag.
 *
 * The including program provides P4EAD_RPP (default 1). Nothing here is specific to a target. */
#ifndef _P4EAD_P4_
#define _P4EAD_P4_

#ifndef P4EAD_RPP
#define P4EAD_RPP 1
#endif

const bit<8> P4EAD_AEAD128 = 0;
const bit<8> P4EAD_V12 = 1;
const bit<8> P4EAD_ENCRYPT = 0;
const bit<8> P4EAD_DECRYPT = 1;

const bit<8> P4EAD_START = 0;
const bit<8> P4EAD_INIT = 1;
const bit<8> P4EAD_AD = 2;
const bit<8> P4EAD_DATA = 3;
const bit<8> P4EAD_FINAL = 4;
const bit<8> P4EAD_DONE = 5;

const bit<8> P4EAD_MAX_LEN = 32;

/* the computation in flight: phase, position and the permutation state */
header p4ead_t {
    bit<8>  phase;
    bit<8>  rleft;      /* rounds left in the current permutation */
    bit<8>  blk;        /* current rate block of the AD or data */
    bit<8>  variant;
    bit<8>  dir;
    bit<16> passes;     /* pipeline passes so far */
    bit<16> port;       /* the request's ingress port */
    bit<8>  pad;
    bit<64> x0;
    bit<64> x1;
    bit<64> x2;
    bit<64> x3;
    bit<64> x4;
}

struct p4ead_io_t {
    bit<64>  a0; bit<64> a1; bit<64> a2; bit<64> a3;
    bit<8>   alen;
    bit<64>  d0; bit<64> d1; bit<64> d2; bit<64> d3;
    bit<8>   dlen;
    bit<128> tag;
    bit<1>   tag_ok;
}

/* ASCON v1.2 uses big-endian words; Ascon-AEAD128 little-endian ones: this swaps between the two views */
#define P4EAD_BSWAP(x) ((x)[7:0] ++ (x)[15:8] ++ (x)[23:16] ++ (x)[31:24] ++ (x)[39:32] ++ (x)[47:40] ++ (x)[55:48] ++ (x)[63:56])
#define P4EAD_ROR(x, n) (((x) >> (n)) | ((x) << (64 - (n))))

/* the first n (0..8) bytes of a big-endian word */
#define P4EAD_HEAD(n) (~(64w0xffffffffffffffff >> (n)))

/* byte mask of data/AD word k for a total length len */
bit<64> p4ead_word_mask(in bit<8> len, in bit<8> k) {
    bit<8> n = 0;
    if (len >= (k << 3) + 8) {
        n = 8;
    } else if (len > (k << 3)) {
        n = len - (k << 3);
    }
    return P4EAD_HEAD(n << 3);
}

bit<64> p4ead_get_a(in p4ead_io_t io, in bit<8> k) {
    bit<64> w = 0;
    if (k == 0) { w = io.a0; } else if (k == 1) { w = io.a1; } else if (k == 2) { w = io.a2; } else if (k == 3) { w = io.a3; }
    return w & p4ead_word_mask(io.alen, k);
}

/* a big-endian word in the state's view and back (the same operation both ways) */
bit<64> p4ead_view(in bool v128, in bit<64> w) {
    bit<64> r = w;
    if (v128) { r = P4EAD_BSWAP(w); }
    return r;
}

/* xor the padding into the rate block that holds byte position len */
void p4ead_pad(inout p4ead_t st, in bool v128, in bit<8> len) {
    if (v128) {
        bit<8> j = len & 15;
        if (j < 8) {
            st.x0 = st.x0 ^ (64w1 << (j << 3));
        } else {
            st.x1 = st.x1 ^ (64w1 << ((j - 8) << 3));
        }
    } else {
        st.x0 = st.x0 ^ (64w0x80 << (56 - ((len & 7) << 3)));
    }
}

void p4ead_absorb_ad(inout p4ead_t st, in p4ead_io_t io, in bool v128, in bit<8> rshift, in bit<8> b) {
    if (v128) {
        st.x0 = st.x0 ^ p4ead_view(v128, p4ead_get_a(io, b << 1));
        st.x1 = st.x1 ^ p4ead_view(v128, p4ead_get_a(io, (b << 1) + 1));
    } else {
        st.x0 = st.x0 ^ p4ead_get_a(io, b);
    }
    if (b == io.alen >> rshift) {
        p4ead_pad(st, v128, io.alen);
    }
}

/* absorb data word k into state word x (in the state's view); the output word replaces the input word */
void p4ead_absorb_word(inout bit<64> x, inout p4ead_io_t io, in bool v128, in bit<8> dir, in bit<8> k) {
    bit<64> m = p4ead_word_mask(io.dlen, k);
    bit<64> xs = p4ead_view(v128, x);
    bit<64> w = 0;
    if (k == 0) { w = io.d0; } else if (k == 1) { w = io.d1; } else if (k == 2) { w = io.d2; } else if (k == 3) { w = io.d3; }
    bit<64> p = w & m;
    bit<64> res;
    if (dir == P4EAD_DECRYPT) {
        p = (p ^ xs) & m;
        res = p;
    } else {
        res = (xs ^ p) & m;
    }
    if (k == 0) { io.d0 = res; } else if (k == 1) { io.d1 = res; } else if (k == 2) { io.d2 = res; } else if (k == 3) { io.d3 = res; }
    x = x ^ p4ead_view(v128, p);
}

void p4ead_absorb_data(inout p4ead_t st, inout p4ead_io_t io, in bool v128, in bit<8> rshift, in bit<8> b) {
    if (v128) {
        p4ead_absorb_word(st.x0, io, v128, st.dir, b << 1);
        p4ead_absorb_word(st.x1, io, v128, st.dir, (b << 1) + 1);
    } else {
        p4ead_absorb_word(st.x0, io, v128, st.dir, b);
    }
    if (b == io.dlen >> rshift) {
        p4ead_pad(st, v128, io.dlen);
    }
}

void p4ead_separate_domains(inout p4ead_t st, in bool v128) {
    if (v128) {
        st.x4 = st.x4 ^ 64w0x8000000000000000;
    } else {
        st.x4 = st.x4 ^ 1;
    }
}

/* one round of the ASCON permutation: constant addition, substitution layer, linear diffusion layer */
void p4ead_round(inout p4ead_t st, in bit<8> i) {
    bit<64> x0 = st.x0;
    bit<64> x1 = st.x1;
    bit<64> x2 = st.x2 ^ (bit<64>) (((15 - i) << 4) | i);
    bit<64> x3 = st.x3;
    bit<64> x4 = st.x4;
    x0 = x0 ^ x4; x4 = x4 ^ x3; x2 = x2 ^ x1;
    bit<64> t0 = ~x0 & x1;
    bit<64> t1 = ~x1 & x2;
    bit<64> t2 = ~x2 & x3;
    bit<64> t3 = ~x3 & x4;
    bit<64> t4 = ~x4 & x0;
    x0 = x0 ^ t1; x1 = x1 ^ t2; x2 = x2 ^ t3; x3 = x3 ^ t4; x4 = x4 ^ t0;
    x1 = x1 ^ x0; x0 = x0 ^ x4; x3 = x3 ^ x2; x2 = ~x2;
    st.x0 = x0 ^ P4EAD_ROR(x0, 19) ^ P4EAD_ROR(x0, 28);
    st.x1 = x1 ^ P4EAD_ROR(x1, 61) ^ P4EAD_ROR(x1, 39);
    st.x2 = x2 ^ P4EAD_ROR(x2, 1) ^ P4EAD_ROR(x2, 6);
    st.x3 = x3 ^ P4EAD_ROR(x3, 10) ^ P4EAD_ROR(x3, 17);
    st.x4 = x4 ^ P4EAD_ROR(x4, 7) ^ P4EAD_ROR(x4, 41);
}

/* One step (P-RND): one permutation round, then, if the permutation ended, the next phase's absorption. */
control P4eadStep(inout p4ead_t st, inout p4ead_io_t io, in bit<64> k0, in bit<64> k1) {
    apply {
        if (st.rleft != 0 && st.phase != P4EAD_DONE) {
            bool v128 = st.variant == P4EAD_AEAD128;
            bit<8> pb = v128 ? 8w8 : 8w6;
            bit<8> rshift = v128 ? 8w4 : 8w3;
            p4ead_round(st, 12 - st.rleft);
            st.rleft = st.rleft - 1;
            if (st.rleft == 0) {
                bool next_data = false;
                if (st.phase == P4EAD_INIT) {
                    st.x3 = st.x3 ^ k0;
                    st.x4 = st.x4 ^ k1;
                    st.blk = 0;
                    if (io.alen != 0) {
                        st.phase = P4EAD_AD;
                        p4ead_absorb_ad(st, io, v128, rshift, 0);
                        st.rleft = pb;
                    } else {
                        p4ead_separate_domains(st, v128);
                        st.phase = P4EAD_DATA;
                        next_data = true;
                    }
                } else if (st.phase == P4EAD_AD) {
                    st.blk = st.blk + 1;
                    if (st.blk <= io.alen >> rshift) {
                        p4ead_absorb_ad(st, io, v128, rshift, st.blk);
                        st.rleft = pb;
                    } else {
                        p4ead_separate_domains(st, v128);
                        st.phase = P4EAD_DATA;
                        st.blk = 0;
                        next_data = true;
                    }
                } else if (st.phase == P4EAD_DATA) {
                    st.blk = st.blk + 1;
                    next_data = true;
                } else if (st.phase == P4EAD_FINAL) {
                    bit<128> tag = p4ead_view(v128, st.x3 ^ k0) ++ p4ead_view(v128, st.x4 ^ k1);
                    if (st.dir == P4EAD_DECRYPT) {
                        io.tag_ok = (bit<1>) (tag == io.tag);
                    } else {
                        io.tag = tag;
                        io.tag_ok = 1;
                    }
                    st.phase = P4EAD_DONE;
                }
                if (next_data) {
                    p4ead_absorb_data(st, io, v128, rshift, st.blk);
                    if (st.blk == io.dlen >> rshift) {
                        if (v128) {
                            st.x2 = st.x2 ^ k0;
                            st.x3 = st.x3 ^ k1;
                        } else {
                            st.x1 = st.x1 ^ k0;
                            st.x2 = st.x2 ^ k1;
                        }
                        st.phase = P4EAD_FINAL;
                        st.rleft = 12;
                    } else {
                        st.rleft = pb;
                    }
                }
            }
        }
    }
}

/* One pipeline pass: loads the state on the first pass (phase START), then runs P4EAD_RPP steps.
 * The caller keeps st valid and recirculates while st.phase != P4EAD_DONE. */
control P4eadPass(inout p4ead_t st, inout p4ead_io_t io, in bit<128> key, in bit<128> nonce) {
    P4eadStep() s1;
    P4eadStep() s2;
    P4eadStep() s3;
    P4eadStep() s4;
    apply {
        bool v128 = st.variant == P4EAD_AEAD128;
        bit<64> k0 = key[127:64];
        bit<64> k1 = key[63:0];
        if (v128) {
            k0 = P4EAD_BSWAP(k0);
            k1 = P4EAD_BSWAP(k1);
        }
        if (st.phase == P4EAD_START) {
            bit<64> n0 = nonce[127:64];
            bit<64> n1 = nonce[63:0];
            if (v128) {
                st.x0 = 64w0x00001000808c0001;
                n0 = P4EAD_BSWAP(n0);
                n1 = P4EAD_BSWAP(n1);
            } else {
                st.x0 = 64w0x80400c0600000000;
            }
            st.x1 = k0;
            st.x2 = k1;
            st.x3 = n0;
            st.x4 = n1;
            st.phase = P4EAD_INIT;
            st.rleft = 12;
            st.blk = 0;
        }
        st.passes = st.passes + 1;
        s1.apply(st, io, k0, k1);
#if P4EAD_RPP >= 2
        s2.apply(st, io, k0, k1);
#endif
#if P4EAD_RPP >= 3
        s3.apply(st, io, k0, k1);
#endif
#if P4EAD_RPP >= 4
        s4.apply(st, io, k0, k1);
#endif
    }
}

#endif  /* _P4EAD_P4_ */
