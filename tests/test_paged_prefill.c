/* attn_paged_prefill (chunked prefill over a cached prefix) and attn_merge_states. The cache
   comes from td_make (test_decode.c): shuffled blocks, NaN in every unused slot. */

/* Sequence s has context ctx[s] cached tokens and chunk[s] new ones: seq_len = ctx + chunk. */
static int tp_check(td_case c, const int *ctx, const int *chunk, int causal, uint64_t seed) {
    int lens[16], fails = 0, s;
    int32_t qsl[17];
    for (s = 0; s < c.num_seqs; s++) lens[s] = ctx[s] + chunk[s];
    c.lens = lens;
    td_data d;
    td_make(&c, seed, &d);
    qsl[0] = 0;
    for (s = 0; s < c.num_seqs; s++) qsl[s + 1] = qsl[s] + chunk[s];
    size_t row = (size_t)c.H * c.D, nq = (size_t)qsl[c.num_seqs] * row + 1;
    void *q = tu_alloc(nq * 4);
    float *qf = (float *)tu_alloc(nq * 4);
    uint64_t rng = seed * 3 + 1;
    tu_fill(&rng, c.act_dt, q, qf, nq, -1.5f, 1.5f);
    double *ref = (double *)tu_alloc(nq * sizeof(double)),
            *ref_lse = (double *)tu_alloc(nq * sizeof(double));
    for (s = 0; s < c.num_seqs; s++) {
        size_t kr = (size_t)c.Hk * c.D;
        float *k = (float *)tu_alloc(((size_t)lens[s] * kr + 1) * 4),
               *v = (float *)tu_alloc(((size_t)lens[s] * kr + 1) * 4);
        ref_gather_paged(d.kf, c.bs, c.Hk, c.D, d.tables + s * d.max_blocks, lens[s], k);
        ref_gather_paged(d.vf, c.bs, c.Hk, c.D, d.tables + s * d.max_blocks, lens[s], v);
        ref_attention(&d.p, causal, chunk[s], lens[s], qf + (size_t)qsl[s] * row, 0, k, 0, v, 0,
                      ref + (size_t)qsl[s] * row, ref_lse + (size_t)qsl[s] * c.H);
        free(k); free(v);
    }
    size_t n_out = (size_t)qsl[c.num_seqs] * row, esz = attn_dtype_size(c.act_dt);
    char *o1 = (char *)tu_alloc(n_out * esz + 1), *o2 = (char *)tu_alloc(n_out * esz + 1);
    float *l1 = (float *)tu_alloc(nq * 4), *l2 = (float *)tu_alloc(nq * 4);
    attn_isa isas[ATTN_ISA_COUNT];
    int n_isa = tu_isas_tiles(isas);
    attn_gemm gemms[2];
    int n_gemm = tu_gemms(gemms);
    for (int k = 0; k < n_isa * n_gemm; k++) {
        int bad = 0, bad_lse = 0;
        for (int t = 1; t <= 2; t++) {
            attn_exec e = tu_exec(isas[k % n_isa], t);
            e.gemm = gemms[k / n_isa];
            attn_rows rq = {q, c.act_dt, 0}, ro = {t == 1 ? o1 : o2, c.act_dt, 0};
            size_t bytes =
                    attn_paged_prefill_workspace_size(&d.p, &e, &d.cache, qsl, d.lens, c.num_seqs);
            void *ws = tu_alloc(bytes);
            if (attn_paged_prefill(&d.p, &e, rq, ro, &d.cache, d.tables, d.max_blocks, qsl, d.lens,
                                   c.num_seqs, causal, t == 1 ? l1 : l2, ws,
                                   bytes) != ATTN_OK) bad++;
            free(ws);
        }
        for (size_t i = 0; i < n_out; i++) {
            double err = fabs(ref_element(o1, c.act_dt, i) - ref[i]);
            bad += !(err <= tu_atol(c.act_dt) + 1e-3 * fabs(ref[i]));
        }
        for (size_t i = 0; i < (size_t)qsl[c.num_seqs] * c.H; i++) {
            double w = ref_lse[i];
            bad_lse += isinf(w) ? !(isinf(l1[i]) && l1[i] < 0)
                : !(fabs(l1[i] - w) <= 1e-4 * (1 + fabs(w)));
        }
        int same = !memcmp(o1, o2, n_out * esz);
        if (bad || bad_lse || !same) {
            fails++;
            printf("  paged prefill H=%d Hk=%d D=%d bs=%d kv=%s act=%s alibi=%d W=%d cap=%g "
                   "sinks=%d "
                   "causal=%d isa=%s gemm=%s: %d bad, %d bad lse, threads %s\n", c.H, c.Hk, c.D,
                   c.bs,
                   attn_dtype_name(c.kv_dt), attn_dtype_name(c.act_dt), c.alibi, c.window, c.cap,
                   c.sinks, causal, attn_isa_name(isas[k % n_isa]), tu_gemm_name(gemms[k / n_isa]),
                   bad, bad_lse, same ? "equal" : "DIFFER");
        }
    }
    free(q); free(qf); free(ref); free(ref_lse); free(o1); free(o2); free(l1); free(l2);
    td_free(&d);
    return fails;
}

/* Contexts and chunks of every size; over f32 caches, and over int8 and int4 ones with rows of a
   whole and a partial group (D = 40): half the pairs, every context and chunk size among them. */
TEST(paged_prefill_contexts_and_chunks) {
    const int ctxs[] = {0, 1, 15, 700}, chunks[] = {1, 17, 512};
    int fails = 0;
    for (int q = 0; q < 2; q++)
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 3; b++) {
                int ctx[2] = {ctxs[a], ctxs[3 - a]}, chunk[2] = {chunks[b], chunks[2 - b]};
                td_case c = td_base();
                if (q && (a + b) % 2 == 0) continue;
                c.num_seqs = 2; c.H = 4; c.Hk = 2; c.D = q ? 40 : 32;
                if (q) c.kv_dt = a < 2 ? ATTN_INT8 : ATTN_INT4;
                fails += tp_check(c, ctx, chunk, 1, 2000 + (uint64_t)(q * 50 + a * 3 + b));
            }
    CHECK_EQ_INT(fails, 0);
}

/* Every bias option and block sizes 7 and 16 (over f32 caches; over int8 and int4 ones half the
   combinations), every pair of cache and activation dtypes, long prefixes, non-causal. */
TEST(paged_prefill_every_option_and_dtype) {
    int ctx[3] = {100, 0, 33}, chunk[3] = {40, 70, 1}, fails = 0;
    for (int q = 0; q < 2; q++)
        for (int opt = 0; opt < 16; opt++) {
            td_case c = td_base();
            c.num_seqs = 3; c.D = 48; c.bs = (opt & 1) ? 7 : 16;
            c.alibi = (opt >> 1) & 1; c.window = (opt & 4) ? 50 : 0;
            c.cap = (opt & 8) ? 4.0f : 0.0f; c.sinks = opt == 15;
            /* the integer caches: the options of even parity (each option in four) */
            if (q && ((opt ^ (opt >> 1) ^ (opt >> 2) ^ (opt >> 3)) & 1)) continue;
            if (q) c.kv_dt = (opt >> 2) & 1 ? ATTN_INT4 : ATTN_INT8;
            fails += tp_check(c, ctx, chunk, 1, 2100 + (uint64_t)(q * 50 + opt));
        }
    for (int kv = ATTN_F32; kv <= ATTN_INT4; kv++)
        for (int act = ATTN_F32; act <= ATTN_BF16; act++) {
            td_case c = td_base();
            c.num_seqs = 3; c.kv_dt = (attn_dtype)kv; c.act_dt = (attn_dtype)act;
            if (attn__is_fp8(c.kv_dt)) { c.k_scale = 0.02f; c.v_scale = 0.005f; }
            fails += tp_check(c, ctx, chunk, 1, 2200 + (uint64_t)(kv * 4 + act));
        }
    {   /* bf16 cache and activations over a long prefix: packed value tiles reused by the
           chunk's query tiles (see attn_sdpa's sdpa_bf16_value_cache) */
        int lctx[2] = {700, 130}, lchunk[2] = {60, 3};
        td_case c = td_base();
        c.num_seqs = 2; c.kv_dt = c.act_dt = ATTN_BF16; c.bs = 16;
        fails += tp_check(c, lctx, lchunk, 1, 2250);
        for (int kv = ATTN_FP8_E4M3; kv <= ATTN_INT4; kv++) {  /* the tile kernels keep an
                                                                  fp8 cache's tiles too */
            int fp8 = attn__is_fp8((attn_dtype)kv);
            c.kv_dt = (attn_dtype)kv;
            c.k_scale = fp8 ? 0.02f : 1.0f; c.v_scale = fp8 ? 0.005f : 1.0f;
            fails += tp_check(c, lctx, lchunk, 1, 2260 + (uint64_t)kv);
        }
    }
    td_case nc = td_base();  /* non-causal (cross attention over a cached encoder) */
    nc.num_seqs = 3;
    fails += tp_check(nc, ctx, chunk, 0, 2300);
    nc.kv_dt = ATTN_INT4; nc.D = 80;
    fails += tp_check(nc, ctx, chunk, 0, 2301);
    CHECK_EQ_INT(fails, 0);
}

/* Keys and values in one buffer: the same bits as two buffers holding the same data (as
   decode_keys_and_values_may_share_a_buffer). */
static void tp_keys_and_values_share_a_buffer(attn_dtype kv, uint64_t seed) {
    int lens[2] = {300, 45};
    int32_t qsl[3] = {0, 40, 85};
    td_case c = td_base();
    c.num_seqs = 2; c.lens = lens; c.kv_dt = kv;
    td_data d;
    td_make(&c, seed, &d);
    td_values_equal_keys(&c, &d);
    void *separate = d.cache.value;
    size_t n_out = (size_t)qsl[2] * c.H * c.D;
    float *q = (float *)tu_alloc(n_out * 4), *a = (float *)tu_alloc(n_out * 4),
           *b = (float *)tu_alloc(n_out * 4);
    uint64_t rng = 5;
    for (size_t i = 0; i < n_out; i++) q[i] = attn_test_rand_uniform(&rng, -1.5f, 1.5f);
    attn_isa isas[ATTN_ISA_COUNT];
    int n_isa = tu_isas(isas);
    for (int k = 0; k < n_isa; k++) {
        attn_exec e = tu_exec(isas[k], 2);
        attn_rows rq = {q, ATTN_F32, 0}, ra = {a, ATTN_F32, 0}, rb = {b, ATTN_F32, 0};
        size_t bytes = attn_paged_prefill_workspace_size(&d.p, &e, &d.cache, qsl, d.lens, 2);
        void *ws = tu_alloc(bytes);
        d.cache.value = separate;
        REQUIRE(attn_paged_prefill(&d.p, &e, rq, ra, &d.cache, d.tables, d.max_blocks, qsl, d.lens,
                                   2, 1, NULL,
                                   ws, bytes) == ATTN_OK);
        d.cache.value = d.cache.key;
        CHECK_STATUS(attn_paged_prefill(&d.p, &e, rq, rb, &d.cache, d.tables, d.max_blocks, qsl,
                                        d.lens, 2, 1,
                                        NULL, ws, bytes), ATTN_OK);
        CHECK_BITEQ(a, b, n_out * 4);
        free(ws);
    }
    d.cache.value = separate;
    free(q); free(a); free(b);
    td_free(&d);
}

TEST(paged_prefill_keys_and_values_may_share_a_buffer) {
    tp_keys_and_values_share_a_buffer(ATTN_BF16, 2400);
    tp_keys_and_values_share_a_buffer(ATTN_INT8, 2401);
}

/* The new tokens are part of seq_lens, so a sequence with more query tokens than keys is
   inconsistent: ATTN_ERR_INVALID_ARG, nothing written (attn_sdpa, with separate cu_q and cu_k,
   keeps Lq > Lk legal: sdpa_causal_with_more_queries_than_keys). */
TEST(paged_prefill_rejects_more_queries_than_keys) {
    int lens[2] = {5, 9};
    int32_t bad[3] = {0, 6, 15}, good[3] = {0, 5, 14};
    td_case c = td_base();
    c.num_seqs = 2; c.lens = lens; c.H = 4; c.D = 16;
    td_data d;
    td_make(&c, 2500, &d);
    size_t n_out = (size_t)15 * c.H * c.D, n_lse = (size_t)15 * c.H;
    float *q = (float *)tu_alloc(n_out * 4), *o = (float *)tu_alloc(n_out * 4),
           *l = (float *)tu_alloc(n_lse * 4);
    uint64_t rng = 6;
    for (size_t i = 0; i < n_out; i++) { q[i] = attn_test_rand_uniform(&rng, -1, 1); o[i] = 7.0f; }
    for (size_t i = 0; i < n_lse; i++) l[i] = 7.0f;
    attn_rows rq = {q, ATTN_F32, 0}, ro = {o, ATTN_F32, 0};
    size_t bytes = attn_paged_prefill_workspace_size(&d.p, NULL, &d.cache, bad, d.lens, 2);
    void *ws = tu_alloc(bytes);
    CHECK_STATUS(attn_paged_prefill(&d.p, NULL, rq, ro, &d.cache, d.tables, d.max_blocks, bad,
                                    d.lens, 2, 1, l,
                                    ws, bytes), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_paged_prefill(&d.p, NULL, rq, ro, &d.cache, d.tables, d.max_blocks, bad,
                                    d.lens, 2, 0, l,
                                    ws, bytes), ATTN_ERR_INVALID_ARG);
    for (size_t i = 0; i < n_out; i++) CHECK(o[i] == 7.0f);
    for (size_t i = 0; i < n_lse; i++) CHECK(l[i] == 7.0f);
    CHECK_STATUS(attn_paged_prefill(&d.p, NULL, rq, ro, &d.cache, d.tables, d.max_blocks, good,
                                    d.lens, 2, 1, l,
                                    ws, bytes), ATTN_OK);
    free(q); free(o); free(l); free(ws);
    td_free(&d);
}

/* Splitting the keys in two (prefix in the cache, the rest as plain rows) and merging with
   attn_merge_states gives the unsplit result. */
TEST(merge_states_of_a_split_equals_unsplit) {
    enum { H = 4, Hk = 2, D = 32, LQ = 20, LK = 90, SPLIT = 37 };
    uint64_t rng = 2400;
    /* copy: unused f32 twin */
    float q[LQ * H * D], k[LK * Hk * D], v[LK * Hk * D], copy[LK * Hk * D];
    tu_fill(&rng, ATTN_F32, q, copy, LQ * H * D, -1, 1);
    tu_fill(&rng, ATTN_F32, k, copy, LK * Hk * D, -1, 1);
    tu_fill(&rng, ATTN_F32, v, copy, LK * Hk * D, -1, 1);
    attn_params p; memset(&p, 0, sizeof p);
    p.num_heads = H; p.num_kv_heads = Hk; p.head_size = D;
    float full[LQ * H * D], a[LQ * H * D], b[LQ * H * D], merged[LQ * H * D];
    float lf[LQ * H], la[LQ * H], lb[LQ * H], lm[LQ * H];
    int32_t cq[2] = {0, LQ}, cf[2] = {0, LK}, ca[2] = {0, SPLIT}, cb[2] = {0, LK - SPLIT};
    size_t bytes = attn_sdpa_workspace_size(&p, NULL, cq, cf, 1);
    void *ws = tu_alloc(bytes);
    attn_rows rq = {q, ATTN_F32, 0}, rk = {k, ATTN_F32, 0}, rv = {v, ATTN_F32, 0};
    attn_rows rk2 = {k + SPLIT * Hk * D, ATTN_F32, 0}, rv2 = {v + SPLIT * Hk * D, ATTN_F32, 0};
    attn_rows of = {full, ATTN_F32, 0}, oa = {a, ATTN_F32, 0}, ob = {b, ATTN_F32, 0},
              om = {merged, ATTN_F32, 0};
    CHECK_STATUS(attn_sdpa(&p, NULL, rq, rk, rv, of, cq, cf, 1, 0, lf, ws, bytes), ATTN_OK);
    CHECK_STATUS(attn_sdpa(&p, NULL, rq, rk, rv, oa, cq, ca, 1, 0, la, ws, bytes), ATTN_OK);
    CHECK_STATUS(attn_sdpa(&p, NULL, rq, rk2, rv2, ob, cq, cb, 1, 0, lb, ws, bytes), ATTN_OK);
    CHECK_STATUS(attn_merge_states(LQ, H, D, oa, la, ob, lb, om, lm), ATTN_OK);
    CHECK_ALLCLOSE(merged, full, LQ * H * D, 2e-6, 1e-5);
    CHECK_ALLCLOSE(lm, lf, LQ * H, 2e-6, 1e-6);
    /* -inf on one side passes the other through; both -inf give 0 / -inf; in place works */
    for (int i = 0; i < LQ * H; i++) lb[i] = -INFINITY;
    for (int i = 0; i < LQ * H * D; i++) b[i] = NAN;  /* must not leak through a zero weight */
    CHECK_STATUS(attn_merge_states(LQ, H, D, oa, la, ob, lb, oa, lm), ATTN_OK);
    CHECK_ALLCLOSE(lm, la, LQ * H, 0, 0);
    for (int i = 0; i < LQ * H; i++) la[i] = -INFINITY;
    CHECK_STATUS(attn_merge_states(LQ, H, D, oa, la, ob, lb, om, lm), ATTN_OK);
    for (int i = 0; i < LQ * H * D; i++) CHECK(merged[i] == 0.0f);
    for (int i = 0; i < LQ * H; i++) CHECK(isinf(lm[i]) && lm[i] < 0);
    double ra[4] = {1, 2, 3, 4}, rb[4] = {5, 6, 7, 8}, rla[2] = {0.5, -1}, rlb[2] = {0.1, 2}, ro[4],
           rl[2];
    ref_merge(1, 2, 2, ra, rla, rb, rlb, ro, rl);  /* the reference agrees with the library */
    float fa[4] = {1, 2, 3, 4}, fb[4] = {5, 6, 7, 8}, fla[2] = {0.5f, -1}, flb[2] = {0.1f, 2},
          fo[4], fl[2];
    attn_rows xa = {fa, ATTN_F32, 0}, xb = {fb, ATTN_F32, 0}, xo = {fo, ATTN_F32, 0};
    CHECK_STATUS(attn_merge_states(1, 2, 2, xa, fla, xb, flb, xo, fl), ATTN_OK);
    CHECK_ALLCLOSE_D(fo, ro, 4, 1e-6, 1e-6);
    CHECK_ALLCLOSE_D(fl, rl, 2, 1e-6, 1e-6);
    CHECK_STATUS(attn_merge_states(1, 2, 2, xa, NULL, xb, flb, xo, fl), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_merge_states(1, 2, 0, xa, fla, xb, flb, xo, fl), ATTN_ERR_INVALID_ARG);
    free(ws);
}

#define TEST_PAGED_PREFILL_LIST                                                                   \
    ATTN_TEST_ENTRY(paged_prefill_contexts_and_chunks),                                           \
    ATTN_TEST_ENTRY(paged_prefill_every_option_and_dtype),                                        \
    ATTN_TEST_ENTRY(paged_prefill_keys_and_values_may_share_a_buffer),                            \
    ATTN_TEST_ENTRY(paged_prefill_rejects_more_queries_than_keys),                                \
    ATTN_TEST_ENTRY(merge_states_of_a_split_equals_unsplit)
