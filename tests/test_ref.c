/* test_ref.c - tests of the oracle (ref.h) itself, on cases small enough to work out by hand
   public domain or MIT, see attn.h

   #included into tests/test_main.c after attn.h, attn_test.h and ref.h; register the tests with
   TEST_REF_LIST (end of file). Most cases use D = 1 and q = 0 (all logits 0, so the softmax is
   the plain mean of the visible values) or logits 0 and log 3 (weights 1/4 and 3/4). Inputs
   such as log 3 are rounded to float, hence the 1e-6 tolerances where they appear. */
#include <string.h>

static attn_params ref_test__params(int H, int Hk, int D, float scale) {
    attn_params p;
    memset(&p, 0, sizeof p);  /* no ALiBi, window, cap or sinks */
    p.num_heads = H;
    p.num_kv_heads = Hk;
    p.head_size = D;
    p.scale = scale;
    return p;
}

/* One key: its weight is 1, so out = v and lse = the logit itself. */
TEST(ref_single_key_returns_value) {
    /* D = 2, scale 0.5: <q, k> = 1*3 + 2*(-1) = 1, s = 0.5 */
    const float q[] = {1, 2}, k[] = {3, -1}, v[] = {0.25f, -7};
    attn_params p = ref_test__params(1, 1, 2, 0.5f);
    int causal;
    for (causal = 0; causal <= 1; causal++) {
        double out[2], lse;
        ref_attention(&p, causal, 1, 1, q, 0, k, 0, v, 0, out, &lse);
        CHECK_NEAR(out[0], 0.25, 1e-15);
        CHECK_NEAR(out[1], -7.0, 1e-15);
        CHECK_NEAR(lse, 0.5, 1e-15);
    }
}

/* Logits 0 and log 3: weights 1/(1+3) = 1/4 and 3/4; out = 10/4 + 2*3/4 = 4; lse = log 4. */
TEST(ref_two_keys_weights_quarter_three_quarters) {
    const float q[] = {1}, k[] = {0, (float)log(3.0)}, v[] = {10, 2};
    attn_params p = ref_test__params(1, 1, 1, 1.0f);
    double out, lse;
    ref_attention(&p, 0, 1, 2, q, 0, k, 0, v, 0, &out, &lse);
    CHECK_NEAR(out, 4.0, 1e-6);
    CHECK_NEAR(lse, log(4.0), 1e-6);
    ref_attention(&p, 0, 1, 2, q, 0, k, 0, v, 0, &out, NULL);  /* lse is optional */
    CHECK_NEAR(out, 4.0, 1e-6);
}

/* Lq = 2, Lk = 3: pos = 1, 2. Causal: row 0 sees keys 0,1 -> (1+2)/2, lse log 2;
   row 1 sees 0,1,2 -> (1+2+4)/3 = 7/3, lse log 3. Non-causal: both rows see all three. */
TEST(ref_causal_bottom_right_lq2_lk3) {
    const float q[] = {0, 0}, k[] = {1, 1, 1}, v[] = {1, 2, 4};
    attn_params p = ref_test__params(1, 1, 1, 1.0f);
    double out[2], lse[2];
    CHECK(ref_visible(&p, 1, 1, 1));
    CHECK(!ref_visible(&p, 1, 1, 2));
    CHECK(ref_visible(&p, 0, 1, 2));
    ref_attention(&p, 1, 2, 3, q, 0, k, 0, v, 0, out, lse);
    CHECK_NEAR(out[0], 1.5, 1e-15);
    CHECK_NEAR(lse[0], log(2.0), 1e-15);
    CHECK_NEAR(out[1], 7.0 / 3.0, 1e-15);
    CHECK_NEAR(lse[1], log(3.0), 1e-15);
    ref_attention(&p, 0, 2, 3, q, 0, k, 0, v, 0, out, lse);
    CHECK_NEAR(out[0], 7.0 / 3.0, 1e-15);
    CHECK_NEAR(out[1], 7.0 / 3.0, 1e-15);
    CHECK_NEAR(lse[0], log(3.0), 1e-15);
}

/* Lq = 3, Lk = 2: pos = -1, 0, 1. Row 0 sees no key: out 0, lse -inf, even with a sink.
   Row 1 sees key 0 (out 1, lse 0); row 2 sees keys 0,1 (out 1.5, lse log 2).
   With sink 0 (adds exp(0) = 1 to the denominator): row 1 out 1/2, lse log 2;
   row 2 out (1+2)/3 = 1, lse log 3. */
TEST(ref_causal_lq3_lk2_first_row_empty) {
    const float q[] = {0, 0, 0}, k[] = {1, 1}, v[] = {1, 2}, sink[] = {0};
    attn_params p = ref_test__params(1, 1, 1, 1.0f);
    double out[3], lse[3];
    ref_attention(&p, 1, 3, 2, q, 0, k, 0, v, 0, out, lse);
    CHECK_NEAR(out[0], 0.0, 0);
    CHECK_NEAR(lse[0], -INFINITY, 0);
    CHECK_NEAR(out[1], 1.0, 1e-15);
    CHECK_NEAR(lse[1], 0.0, 1e-15);
    CHECK_NEAR(out[2], 1.5, 1e-15);
    CHECK_NEAR(lse[2], log(2.0), 1e-15);
    p.sinks = sink;
    ref_attention(&p, 1, 3, 2, q, 0, k, 0, v, 0, out, lse);
    CHECK_NEAR(out[0], 0.0, 0);
    CHECK_NEAR(lse[0], -INFINITY, 0);
    CHECK_NEAR(out[1], 0.5, 1e-15);
    CHECK_NEAR(lse[1], log(2.0), 1e-15);
    CHECK_NEAR(out[2], 1.0, 1e-15);
    CHECK_NEAR(lse[2], log(3.0), 1e-15);
}

/* Lq = Lk = 3, v = 1, 2, 4, all logits 0.
   Causal W = 1: only the diagonal -> out = v_i, lse 0.
   Causal W = 2: rows see {0}, {0,1}, {1,2} -> 1, 1.5, 3; lse 0, log 2, log 2.
   Non-causal W = 1 limits only the past (pos_i - j < 1, i.e. j >= pos_i):
   rows see {0,1,2}, {1,2}, {2} -> 7/3, 3, 4. */
TEST(ref_window_diagonal_and_two) {
    const float q[] = {0, 0, 0}, k[] = {1, 1, 1}, v[] = {1, 2, 4};
    attn_params p = ref_test__params(1, 1, 1, 1.0f);
    double out[3], lse[3];
    p.sliding_window = 1;
    ref_attention(&p, 1, 3, 3, q, 0, k, 0, v, 0, out, lse);
    CHECK_NEAR(out[0], 1.0, 1e-15);
    CHECK_NEAR(out[1], 2.0, 1e-15);
    CHECK_NEAR(out[2], 4.0, 1e-15);
    CHECK_NEAR(lse[0], 0.0, 1e-15);
    CHECK_NEAR(lse[2], 0.0, 1e-15);
    CHECK(!ref_visible(&p, 1, 2, 1));
    ref_attention(&p, 0, 3, 3, q, 0, k, 0, v, 0, out, lse);
    CHECK_NEAR(out[0], 7.0 / 3.0, 1e-15);
    CHECK_NEAR(out[1], 3.0, 1e-15);
    CHECK_NEAR(out[2], 4.0, 1e-15);
    p.sliding_window = 2;
    CHECK(ref_visible(&p, 1, 2, 1));
    CHECK(!ref_visible(&p, 1, 2, 0));
    ref_attention(&p, 1, 3, 3, q, 0, k, 0, v, 0, out, lse);
    CHECK_NEAR(out[0], 1.0, 1e-15);
    CHECK_NEAR(out[1], 1.5, 1e-15);
    CHECK_NEAR(out[2], 3.0, 1e-15);
    CHECK_NEAR(lse[0], 0.0, 1e-15);
    CHECK_NEAR(lse[1], log(2.0), 1e-15);
    CHECK_NEAR(lse[2], log(2.0), 1e-15);
}

/* ALiBi adds slope_h * (j - pos_i). Decode-like: Lq = 1, Lk = 2, pos = 1, q = 0.
   Head 0, slope log 3: logits -log 3, 0 -> weights 1/4, 3/4 -> 10/4 + 2*3/4 = 4,
   lse = log(1/3 + 1) = log(4/3). Head 1, slope 0: mean 6, lse log 2. */
TEST(ref_alibi_term) {
    const float slopes[] = {(float)log(3.0), 0}, half[] = {0.5f};
    const float q[] = {0, 0}, k[] = {1, 1}, v[] = {10, 2};
    attn_params p = ref_test__params(2, 1, 1, 1.0f);
    double out[2], lse[2];
    attn_params one = ref_test__params(1, 1, 1, 1.0f);
    one.alibi_slopes = half;
    CHECK_NEAR(ref_logit(&one, 0, 0.0, 5, 2), -1.5, 1e-15);  /* 0.5 * (2 - 5) */
    CHECK_NEAR(ref_logit(&one, 0, 2.0, 5, 2), 0.5, 1e-15);   /* 2 + 0.5 * (2 - 5) */
    CHECK_NEAR(ref_logit(&one, 0, 0.0, 5, 7), 1.0, 1e-15);   /* a future key: +0.5 * 2 */
    p.alibi_slopes = slopes;
    ref_attention(&p, 1, 1, 2, q, 0, k, 0, v, 0, out, lse);
    CHECK_NEAR(out[0], 4.0, 1e-6);
    CHECK_NEAR(lse[0], log(4.0 / 3.0), 1e-6);
    CHECK_NEAR(out[1], 6.0, 1e-15);
    CHECK_NEAR(lse[1], log(2.0), 1e-15);
}

/* Soft cap: s = cap * tanh(s / cap), after the scale and before ALiBi. */
TEST(ref_soft_cap) {
    const float one_slope[] = {1};
    const float q[] = {10}, k[] = {10, 0}, v[] = {2, 10};
    attn_params p = ref_test__params(1, 1, 1, 1.0f);
    double out, lse;
    p.logits_soft_cap = 5;
    CHECK_NEAR(ref_logit(&p, 0, 100.0, 0, 0), 5.0, 1e-12);               /* 5 tanh(20) ~ 5 */
    CHECK_NEAR(ref_logit(&p, 0, 1.0, 0, 0), 0.98687660112452, 1e-13);    /* 5 tanh(0.2) */
    CHECK_NEAR(ref_logit(&p, 0, -100.0, 0, 0), -5.0, 1e-12);
    p.scale = 0.5f;
    CHECK_NEAR(ref_logit(&p, 0, 10.0, 0, 0), 3.8079707797788243, 1e-13); /* 5 tanh(5/5) */
    p.scale = 1.0f;
    p.logits_soft_cap = 1;
    p.alibi_slopes = one_slope;
    CHECK_NEAR(ref_logit(&p, 0, 100.0, 2, 0), -1.0, 1e-12);  /* tanh(100) + 1*(0 - 2) */
    /* <q,k> = 100 and 0, cap log 3: logits ~log 3 and 0 -> weights 3/4, 1/4 ->
       2*3/4 + 10/4 = 4, lse log 4 (uncapped, key 0 would take all the weight) */
    p.alibi_slopes = NULL;
    p.logits_soft_cap = (float)log(3.0);
    ref_attention(&p, 0, 1, 2, q, 0, k, 0, v, 0, &out, &lse);
    CHECK_NEAR(out, 4.0, 1e-6);
    CHECK_NEAR(lse, log(4.0), 1e-6);
}

/* Sinks add exp(sink_h) to the denominator and contribute no value.
   One key with logit 0, v = 6: sink 0 -> weight 1/2, out 3, lse log 2;
   sink log 3 -> weight 1/4, out 1.5, lse log 4.
   Two keys with logit 0 (v = 1, 4) and sink 1000: the sink dominates; out ~ 0, lse ~ 1000
   (the max includes the sink, so nothing overflows). Sink -1000: plain mean 2.5, lse log 2. */
TEST(ref_sinks) {
    const float sinks[] = {0, (float)log(3.0)}, big[] = {1000, -1000};
    const float q[] = {0, 0}, k1[] = {1}, v1[] = {6}, k2[] = {1, 1}, v2[] = {1, 4};
    attn_params p = ref_test__params(2, 1, 1, 1.0f);
    double out[2], lse[2];
    p.sinks = sinks;
    ref_attention(&p, 0, 1, 1, q, 0, k1, 0, v1, 0, out, lse);
    CHECK_NEAR(out[0], 3.0, 1e-15);
    CHECK_NEAR(lse[0], log(2.0), 1e-15);
    CHECK_NEAR(out[1], 1.5, 1e-6);
    CHECK_NEAR(lse[1], log(4.0), 1e-6);
    p.sinks = big;
    ref_attention(&p, 0, 1, 2, q, 0, k2, 0, v2, 0, out, lse);
    CHECK_NEAR(out[0], 0.0, 1e-300);
    CHECK_NEAR(lse[0], 1000.0, 1e-12);
    CHECK_NEAR(out[1], 2.5, 1e-15);
    CHECK_NEAR(lse[1], log(2.0), 1e-15);
}

/* GQA, H = 4, Hk = 2: heads 0,1 read KV head 0 and heads 2,3 read KV head 1.
   k and v are [Lk = 2][Hk = 2][D = 1]; q = 1 for every head, scale 1.
   KV head 0: logits 0, log 3 (weights 1/4, 3/4), v 10, 2  -> 10/4 + 2*3/4  = 4.
   KV head 1: logits log 3, 0 (weights 3/4, 1/4), v 20, 4  -> 20*3/4 + 4/4 = 16.
   Reading the wrong k or the wrong v for heads 2,3 gives 8; h % Hk would give 16 for head 1. */
TEST(ref_gqa_mapping) {
    const float l3 = (float)log(3.0);
    const float q[] = {1, 1, 1, 1};
    const float k[] = {0, l3, /* token 1 */ l3, 0};
    const float v[] = {10, 20, /* token 1 */ 2, 4};
    attn_params p = ref_test__params(4, 2, 1, 1.0f);
    double out[4], lse[4];
    int h;
    ref_attention(&p, 0, 1, 2, q, 0, k, 0, v, 0, out, lse);
    CHECK_NEAR(out[0], 4.0, 1e-6);
    CHECK_NEAR(out[1], 4.0, 1e-6);
    CHECK_NEAR(out[2], 16.0, 1e-5);
    CHECK_NEAR(out[3], 16.0, 1e-5);
    for (h = 0; h < 4; h++) CHECK_NEAR(lse[h], log(4.0), 1e-6);
    /* MQA, H = 3, Hk = 1: every head reads KV head 0 -> v of the single key */
    p = ref_test__params(3, 1, 1, 1.0f);
    ref_attention(&p, 0, 1, 1, q, 0, k, 0, v, 0, out, lse);
    for (h = 0; h < 3; h++) CHECK_NEAR(out[h], 10.0, 1e-15);
}

/* scale 0 means 1/sqrt(D): D = 4 -> 1/2, so <q,k> = 4 gives lse 2 (one key); scale 0.25 -> 1. */
TEST(ref_scale_default) {
    const float q[] = {1, 1, 1, 1}, k[] = {1, 1, 1, 1}, v[] = {1, 2, 3, 4};
    attn_params p = ref_test__params(1, 1, 4, 0.0f);
    double out[4], lse;
    CHECK_NEAR(ref_scale(&p), 0.5, 1e-15);
    ref_attention(&p, 1, 1, 1, q, 0, k, 0, v, 0, out, &lse);
    CHECK_NEAR(lse, 2.0, 1e-15);
    CHECK_NEAR(out[3], 4.0, 1e-15);
    p.scale = 0.25f;
    ref_attention(&p, 1, 1, 1, q, 0, k, 0, v, 0, out, &lse);
    CHECK_NEAR(lse, 1.0, 1e-15);
    p = ref_test__params(1, 1, 2, 0.0f);
    CHECK_NEAR(ref_scale(&p), 0.70710678118654752, 1e-15);  /* 1/sqrt(2) */
}

/* Strides larger than the row: the padding holds NaN and must never be read.
   q rows every 2 floats, k every 3, v every 2; all logits 0 -> out (1+3)/2 = 2, lse log 2. */
TEST(ref_strides_skip_padding) {
    const float q[] = {0, NAN, 0, NAN};
    const float k[] = {0, NAN, NAN, 0, NAN, NAN};
    const float v[] = {1, NAN, 3, NAN};
    attn_params p = ref_test__params(1, 1, 1, 1.0f);
    double out[2], lse[2];
    ref_attention(&p, 0, 2, 2, q, 2, k, 3, v, 2, out, lse);
    CHECK_NEAR(out[0], 2.0, 1e-15);
    CHECK_NEAR(out[1], 2.0, 1e-15);
    CHECK_NEAR(lse[0], log(2.0), 1e-15);
    CHECK_NEAR(lse[1], log(2.0), 1e-15);
}

/* The slopes straight from the definition (P = largest power of 2 <= n):
   n = 8:  P = 8, base 2^-1: 2^-1 .. 2^-8.
   n = 12: P = 8, then extra = 2^-0.5 to the powers 1,3,5,7: 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5.
   n = 6:  P = 4, base 2^-2: 1/4, 1/16, 1/64, 1/256; extra 2^-1 to the powers 1,3: 1/2, 1/8.
   n = 1:  P = 1, base 2^-8: 1/256. */
TEST(ref_alibi_slopes_formula) {
    const double want12[12] = {0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125,
                               0.00390625, 0.7071067811865476, 0.3535533905932738,
                               0.1767766952966369, 0.08838834764831845};
    const double want6[6] = {0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125};
    double s[13];
    int i;
    for (i = 0; i < 13; i++) s[i] = -1;
    ref_alibi_slopes(8, s);
    for (i = 0; i < 8; i++) CHECK_NEAR(s[i], want12[i], 1e-16);
    CHECK_NEAR(s[8], -1.0, 0);  /* nothing written past n */
    ref_alibi_slopes(12, s);
    for (i = 0; i < 12; i++) CHECK_NEAR(s[i], want12[i], 1e-16);
    CHECK_NEAR(s[12], -1.0, 0);
    ref_alibi_slopes(6, s);
    for (i = 0; i < 6; i++) CHECK_NEAR(s[i], want6[i], 1e-16);
    ref_alibi_slopes(1, s);
    CHECK_NEAR(s[0], 0.00390625, 0);
}

/* block_size 2, Hk 2, D 2, 4 blocks; cache value = 1000*block + 100*head + 10*offset + d.
   Block table {3, 0, 2}, 5 tokens: token t lives in block table[t/2] at offset t%2, so
   tokens 0..4 come from (3,0) (3,1) (0,0) (0,1) (2,0). */
TEST(ref_gather_paged_shuffled) {
    const int32_t table[] = {3, 0, 2};
    const float want[24] = {3000, 3001, 3100, 3101,  /* token 0: heads 0, 1 */
                            3010, 3011, 3110, 3111,  /* token 1 */
                            0, 1, 100, 101,          /* token 2 */
                            10, 11, 110, 111,        /* token 3 */
                            2000, 2001, 2100, 2101,  /* token 4 */
                            -1, -1, -1, -1};         /* past len: untouched */
    float cache[4 * 2 * 2 * 2], dst[24];
    int b, h, o, d, n = 0;
    for (b = 0; b < 4; b++)  /* [num_blocks][num_kv_heads][block_size][head_size] */
        for (h = 0; h < 2; h++)
            for (o = 0; o < 2; o++)
                for (d = 0; d < 2; d++) cache[n++] = (float)(1000 * b + 100 * h + 10 * o + d);
    for (n = 0; n < 24; n++) dst[n] = -1;
    ref_gather_paged(cache, 2, 2, 2, table, 5, dst);
    CHECK_ALLCLOSE(dst, want, 24, 0, 0);
}

/* The dense bias [H][Lq][Lk]: slope_h * (j - pos_i) where visible, -inf elsewhere.
   H = 2, slopes 0.5 and 0.25, Lq = 2, Lk = 3, causal: pos = 1, 2. */
TEST(ref_bias_causal_alibi_window) {
    const float slopes[] = {0.5f, 0.25f};
    const double inf = INFINITY;
    const double want[12] = {-0.5, 0, -inf, -1, -0.5, 0,        /* head 0: rows 0, 1 */
                             -0.25, 0, -inf, -0.5, -0.25, 0};   /* head 1 */
    const double want_w2[12] = {-0.5, 0, -inf, -inf, -0.5, 0,   /* W = 2: pos 2 loses key 0 */
                                -0.25, 0, -inf, -inf, -0.25, 0};
    const double want_plain[6] = {0, 0, -inf, 0, 0, 0};         /* no ALiBi, H = 1 */
    attn_params p = ref_test__params(2, 2, 1, 1.0f);
    double bias[12];
    int i;
    p.alibi_slopes = slopes;
    ref_bias(&p, 1, 2, 3, bias);
    for (i = 0; i < 12; i++) CHECK_NEAR(bias[i], want[i], 1e-15);
    p.sliding_window = 2;
    ref_bias(&p, 1, 2, 3, bias);
    for (i = 0; i < 12; i++) CHECK_NEAR(bias[i], want_w2[i], 1e-15);
    p = ref_test__params(1, 1, 1, 1.0f);
    ref_bias(&p, 1, 2, 3, bias);
    for (i = 0; i < 6; i++) CHECK_NEAR(bias[i], want_plain[i], 0);
}

/* Merging by LSE: hand case lse 0 and log 3 (weights 1/4, 3/4), outs 10 and 2 -> 4, log 4;
   one side -inf -> the other side; both -inf -> 0 and -inf. Then attention over keys 0..2 and
   3..4 merged equals attention over keys 0..4 (non-causal, no ALiBi: positions do not matter). */
TEST(ref_merge_split_equals_unsplit) {
    enum { H = 2, Hk = 1, D = 3, Lq = 2, Lk = 5 };
    const double oa[3] = {10, 10, 10}, ob[3] = {2, 2, 2};
    const double la[3] = {0, -INFINITY, -INFINITY}, lb[3] = {log(3.0), 0.5, -INFINITY};
    double o[3], l[3];
    float q[Lq * H * D], k[Lk * Hk * D], v[Lk * Hk * D];
    double full[Lq * H * D], full_lse[Lq * H], a[Lq * H * D], a_lse[Lq * H];
    double b[Lq * H * D], b_lse[Lq * H], merged[Lq * H * D], merged_lse[Lq * H];
    attn_params p = ref_test__params(H, Hk, D, 0.0f);
    uint64_t rng = attn_test_seed();
    int i;

    ref_merge(3, 1, 1, oa, la, ob, lb, o, l);  /* three (token, head) rows of D = 1 */
    CHECK_NEAR(o[0], 4.0, 1e-15);
    CHECK_NEAR(l[0], log(4.0), 1e-15);
    CHECK_NEAR(o[1], 2.0, 0);
    CHECK_NEAR(l[1], 0.5, 0);
    CHECK_NEAR(o[2], 0.0, 0);
    CHECK_NEAR(l[2], -INFINITY, 0);

    for (i = 0; i < Lq * H * D; i++) q[i] = attn_test_rand_uniform(&rng, -2, 2);
    for (i = 0; i < Lk * Hk * D; i++) k[i] = attn_test_rand_uniform(&rng, -2, 2);
    for (i = 0; i < Lk * Hk * D; i++) v[i] = attn_test_rand_uniform(&rng, -1, 1);
    ref_attention(&p, 0, Lq, Lk, q, 0, k, 0, v, 0, full, full_lse);
    ref_attention(&p, 0, Lq, 3, q, 0, k, 0, v, 0, a, a_lse);
    ref_attention(&p, 0, Lq, 2, q, 0, k + 3 * Hk * D, 0, v + 3 * Hk * D, 0, b, b_lse);
    ref_merge(Lq, H, D, a, a_lse, b, b_lse, merged, merged_lse);
    for (i = 0; i < Lq * H * D; i++) CHECK_NEAR(merged[i], full[i], 1e-13);
    for (i = 0; i < Lq * H; i++) CHECK_NEAR(merged_lse[i], full_lse[i], 1e-13);
}

#define TEST_REF_LIST \
    ATTN_TEST_ENTRY(ref_single_key_returns_value), \
    ATTN_TEST_ENTRY(ref_two_keys_weights_quarter_three_quarters), \
    ATTN_TEST_ENTRY(ref_causal_bottom_right_lq2_lk3), \
    ATTN_TEST_ENTRY(ref_causal_lq3_lk2_first_row_empty), \
    ATTN_TEST_ENTRY(ref_window_diagonal_and_two), \
    ATTN_TEST_ENTRY(ref_alibi_term), \
    ATTN_TEST_ENTRY(ref_soft_cap), \
    ATTN_TEST_ENTRY(ref_sinks), \
    ATTN_TEST_ENTRY(ref_gqa_mapping), \
    ATTN_TEST_ENTRY(ref_scale_default), \
    ATTN_TEST_ENTRY(ref_strides_skip_padding), \
    ATTN_TEST_ENTRY(ref_alibi_slopes_formula), \
    ATTN_TEST_ENTRY(ref_gather_paged_shuffled), \
    ATTN_TEST_ENTRY(ref_bias_causal_alibi_window), \
    ATTN_TEST_ENTRY(ref_merge_split_equals_unsplit)
