/* attn_sdpa against the double-precision reference over sweeps of shapes and options, on every
   ISA this machine runs, at 1 and 2 threads (bitwise equal), alone and inside a batch. */

typedef struct ts_case {
    int H, Hk, D, num_seqs;
    const int *lq, *lk;        /* per-sequence query / key lengths */
    int causal, alibi, window, sinks, strided;
    float cap, scale;
    attn_dtype dt;             /* q, k, v and out dtype */
    int f32_probs;             /* exec.f32_probs: 1 keeps bf16 inputs off the bf16 pair kernels */
} ts_case;

typedef struct ts_data {
    int32_t cu_q[65], cu_k[65];
    int64_t q_stride, kv_stride;
    void *q, *k, *v;           /* raw, in dt */
    float *qf, *kf, *vf;       /* the same values as f32, for the reference */
    double *ref_out, *ref_lse;
    float slopes[64], sinks[64];
    attn_params p;
} ts_data;

static void ts_make(const ts_case *c, uint64_t seed, ts_data *d) {
    uint64_t rng = seed;
    int s;
    memset(d, 0, sizeof *d);
    d->cu_q[0] = d->cu_k[0] = 0;
    for (s = 0; s < c->num_seqs; s++) {
        d->cu_q[s + 1] = d->cu_q[s] + c->lq[s];
        d->cu_k[s + 1] = d->cu_k[s] + c->lk[s];
    }
    d->q_stride = (int64_t)c->H * c->D + (c->strided ? 5 : 0);
    d->kv_stride = (int64_t)c->Hk * c->D + (c->strided ? 3 : 0);
    size_t nq = (size_t)d->cu_q[c->num_seqs] * d->q_stride + 1;
    size_t nk = (size_t)d->cu_k[c->num_seqs] * d->kv_stride + 1;
    d->q = tu_alloc(nq * 4); d->qf = (float *)tu_alloc(nq * 4);
    d->k = tu_alloc(nk * 4); d->kf = (float *)tu_alloc(nk * 4);
    d->v = tu_alloc(nk * 4); d->vf = (float *)tu_alloc(nk * 4);
    tu_fill(&rng, c->dt, d->q, d->qf, nq, -1.5f, 1.5f);
    tu_fill(&rng, c->dt, d->k, d->kf, nk, -1.5f, 1.5f);
    tu_fill(&rng, c->dt, d->v, d->vf, nk, -1.0f, 1.0f);
    attn_alibi_slopes(c->H, d->slopes);
    for (int h = 0; h < c->H; h++) d->sinks[h] = attn_test_rand_uniform(&rng, -2.0f, 2.0f);
    d->p.num_heads = c->H; d->p.num_kv_heads = c->Hk; d->p.head_size = c->D;
    d->p.scale = c->scale; d->p.sliding_window = c->window; d->p.logits_soft_cap = c->cap;
    d->p.alibi_slopes = c->alibi ? d->slopes : NULL;
    d->p.sinks = c->sinks ? d->sinks : NULL;
    size_t no = (size_t)d->cu_q[c->num_seqs] * c->H * c->D + 1;
    d->ref_out = (double *)tu_alloc(no * sizeof(double));
    d->ref_lse = (double *)tu_alloc(((size_t)d->cu_q[c->num_seqs] * c->H + 1) * sizeof(double));
    for (s = 0; s < c->num_seqs; s++)
        ref_attention(&d->p, c->causal, c->lq[s], c->lk[s],
                      d->qf + (size_t)d->cu_q[s] * d->q_stride,
                      (long)d->q_stride, d->kf + (size_t)d->cu_k[s] * d->kv_stride,
                      (long)d->kv_stride,
                      d->vf + (size_t)d->cu_k[s] * d->kv_stride, (long)d->kv_stride,
                      d->ref_out + (size_t)d->cu_q[s] * c->H * c->D,
                      d->ref_lse + (size_t)d->cu_q[s] * c->H);
}

static void ts_free(ts_data *d) {
    free(d->q); free(d->k); free(d->v); free(d->qf); free(d->kf); free(d->vf);
    free(d->ref_out); free(d->ref_lse);
}

/* Runs attn_sdpa; out is packed [Tq][H][D] in c->dt, lse [Tq][H]. */
static attn_status ts_run(const ts_case *c, ts_data *d, const attn_exec *e, void *out, float *lse) {
    attn_rows q = {d->q, c->dt, d->q_stride}, k = {d->k, c->dt, d->kv_stride};
    attn_rows v = {d->v, c->dt, d->kv_stride}, o = {out, c->dt, 0};
    size_t ws_bytes = attn_sdpa_workspace_size(&d->p, e, d->cu_q, d->cu_k, c->num_seqs);
    void *ws = tu_alloc(ws_bytes);
    attn_status st = attn_sdpa(&d->p, e, q, k, v, o, d->cu_q, d->cu_k, c->num_seqs, c->causal, lse,
                               ws, ws_bytes);
    free(ws);
    return st;
}

/* Checks every ISA and thread count against the reference; returns the number of failures. */
static int ts_check(const ts_case *c, uint64_t seed) {
    ts_data d;
    attn_isa isas[ATTN_ISA_COUNT];
    int n_isa = tu_isas_tiles(isas), fails = 0;
    ts_make(c, seed, &d);
    int64_t Tq = d.cu_q[c->num_seqs];
    size_t n_out = (size_t)Tq * c->H * c->D, esz = attn_dtype_size(c->dt);
    char *out1 = (char *)tu_alloc(n_out * esz + 1), *out2 = (char *)tu_alloc(n_out * esz + 1);
    float *lse1 = (float *)tu_alloc((size_t)Tq * c->H * 4 + 4),
           *lse2 = (float *)tu_alloc((size_t)Tq * c->H * 4 + 4);
    float *got = (float *)tu_alloc(n_out * 4 + 4);
    attn_gemm gemms[2];
    int n_gemm = tu_gemms(gemms);
    for (int k = 0; k < n_isa * n_gemm; k++) {
        attn_exec e1 = tu_exec(isas[k % n_isa], 1), e2 = tu_exec(isas[k % n_isa], 2);
        e1.gemm = e2.gemm = gemms[k / n_isa];
        e1.f32_probs = e2.f32_probs = c->f32_probs;
        if (ts_run(c, &d, &e1, out1, lse1) != ATTN_OK) { fails++; continue; }
        for (size_t i = 0; i < n_out; i++) got[i] = ref_element(out1, c->dt, i);
        double atol = tu_atol(c->dt);
        size_t worst = 0; double worst_err = 0; int bad = 0;
        for (size_t i = 0; i < n_out; i++) {
            double err = fabs(got[i] - d.ref_out[i]);
            if (!(err <= atol + 1e-3 * fabs(d.ref_out[i]))) { bad++;
                    if (!(err <= worst_err)) { worst_err = err; worst = i; } }
        }
        int bad_lse = 0;
        for (int64_t i = 0; i < Tq * c->H; i++) {
            double w = d.ref_lse[i];
            bad_lse += isinf(w) ? !(isinf(lse1[i]) && lse1[i] < 0)
                : !(fabs(lse1[i] - w) <= 1e-4 * (1 + fabs(w)));
        }
        if (ts_run(c, &d, &e2, out2, lse2) != ATTN_OK) bad++;
        int same = memcmp(out1, out2, n_out * esz) == 0 &&
                   memcmp(lse1, lse2, (size_t)Tq * c->H * 4) == 0;
        if (bad || bad_lse || !same) {
            fails++;
            printf("  case H=%d Hk=%d D=%d seqs=%d causal=%d alibi=%d W=%d cap=%g sinks=%d dt=%s "
                   "strided=%d f32_probs=%d isa=%s gemm=%s: %d bad out (worst [%zu] got %.7g want "
                   "%.7g), %d bad lse, "
                   "threads 1 vs 2 %s\n", c->H, c->Hk, c->D, c->num_seqs, c->causal, c->alibi,
                   c->window, c->cap, c->sinks, attn_dtype_name(c->dt), c->strided, c->f32_probs,
                   attn_isa_name(e1.isa), tu_gemm_name(e1.gemm), bad, worst, bad ? got[worst] : 0.0,
                   bad ? d.ref_out[worst] : 0.0, bad_lse, same ? "equal" : "DIFFER");
        }
    }
    free(out1); free(out2); free(lse1); free(lse2); free(got);
    ts_free(&d);
    return fails;
}

TEST(sdpa_head_sizes_and_gqa_ratios) {
    const int Ds[] = {1, 8, 32, 64, 80, 96, 112, 128, 192, 256, 512};
    const int ratios[] = {1, 2, 4, 8};
    int lq[3] = {17, 1, 66}, lk[3] = {17, 1, 66}, fails = 0;
    for (int i = 0; i < 11; i++)
        for (int r = 0; r < 5; r++) {
            ts_case c; memset(&c, 0, sizeof c);
            c.H = 8; c.Hk = r < 4 ? 8 / ratios[r] : 1;  /* r == 4: MQA */
            c.D = Ds[i]; c.num_seqs = Ds[i] >= 256 ? 1 : 3; c.lq = lq; c.lk = lk;
            c.causal = 1; c.dt = ATTN_F32;
            if (Ds[i] >= 192 && r % 2) continue;  /* keep the big heads quick */
            fails += ts_check(&c, 100 + (uint64_t)i * 10 + (uint64_t)r);
        }
    CHECK_EQ_INT(fails, 0);
}

TEST(sdpa_lengths_around_tiles_and_varlen) {
    /* 0, 1, tile +-1 (64 keys, 16/32/64 query tokens per item), uneven batches, Lq < Lk */
    static const int lq_sets[][5] =
            {{0, 1, 63, 64, 65}, {15, 16, 17, 31, 33}, {0, 0, 5, 0, 129}, {3, 1, 40, 8, 64}};
    static const int lk_sets[][5] =
            {{0, 1, 63, 64, 65}, {15, 16, 17, 31, 33}, {0, 7, 5, 3, 129}, {70, 1, 127, 65, 64}};
    int fails = 0;
    for (int set = 0; set < 4; set++)
        for (int causal = 0; causal < 2; causal++)
            for (int G = 1; G <= 4; G *= 4) {
                ts_case c; memset(&c, 0, sizeof c);
                c.H = 4; c.Hk = 4 / G; c.D = 24; c.num_seqs = 5;
                c.lq = lq_sets[set]; c.lk = lk_sets[set]; c.causal = causal; c.dt = ATTN_F32;
                fails += ts_check(&c, 200 + (uint64_t)set * 4 + (uint64_t)causal * 2 + (uint64_t)G);
            }
    CHECK_EQ_INT(fails, 0);
}

TEST(sdpa_causal_with_more_queries_than_keys) {
    int lq[2] = {10, 70}, lk[2] = {4, 3}, fails = 0;
    ts_case c; memset(&c, 0, sizeof c);
    c.H = 2; c.Hk = 1; c.D = 16; c.num_seqs = 2; c.lq = lq; c.lk = lk; c.causal = 1;
    c.dt = ATTN_F32;
    fails += ts_check(&c, 300);
    c.sinks = 1;
    fails += ts_check(&c, 301);
    CHECK_EQ_INT(fails, 0);
}

TEST(sdpa_every_bias_option) {
    const int windows[] = {0, 1, 3, 16, 1000};
    int lq[2] = {90, 33}, lk[2] = {90, 77}, fails = 0;
    for (int w = 0; w < 5; w++)
        for (int alibi = 0; alibi < 2; alibi++)
            for (int capped = 0; capped < 2; capped++)
                for (int sinks = 0; sinks < 2; sinks++)
                    for (int causal = 0; causal < 2; causal++) {
                        ts_case c; memset(&c, 0, sizeof c);
                        c.H = 6; c.Hk = 2; c.D = 40; c.num_seqs = 2; c.lq = lq; c.lk = lk;
                        c.window = windows[w]; c.alibi = alibi; c.cap = capped ? 2.5f : 0.0f;
                        c.sinks = sinks; c.causal = causal; c.scale = capped ? 0.9f : 0.0f;
                        c.dt = ATTN_F32;
                        fails +=
                                ts_check(&c,
                                         400 + (uint64_t)(w * 16 + alibi * 8 + capped * 4 + sinks
                                                          * 2 + causal));
                    }
    CHECK_EQ_INT(fails, 0);
}

TEST(sdpa_activation_dtypes_and_strides) {
    int lq[2] = {45, 70}, lk[2] = {45, 70}, fails = 0;
    for (int dt = ATTN_F32; dt <= ATTN_BF16; dt++)
        for (int strided = 0; strided < 2; strided++)
            for (int D = 64; D <= 80; D += 16) {
                ts_case c; memset(&c, 0, sizeof c);
                c.H = 4; c.Hk = 2; c.D = D; c.num_seqs = 2; c.lq = lq; c.lk = lk; c.causal = 1;
                c.alibi = strided; c.window = strided ? 20 : 0; c.dt = (attn_dtype)dt;
                c.strided = strided;
                fails += ts_check(&c, 500 + (uint64_t)(dt * 4 + strided * 2 + (D == 80)));
            }
    CHECK_EQ_INT(fails, 0);
}

/* bf16 q/k/v: on a CPU with AVX-512 BF16 the avx512 runs take the bf16 pair kernels
   (f32_probs = 0; made to where its dot products do not pay, tu_fast_dot) and the f32 kernels
   (f32_probs = 1); both must meet the reference over head sizes (odd ones fall back to f32),
   GQA, lengths around the tiles and every bias option. */
TEST(sdpa_bf16_pair_kernels_sweep) {
    const int Ds[] = {1, 2, 6, 32, 64, 80, 128, 256};
    const int windows[] = {0, 1, 16};
    int lq[3] = {1, 65, 97}, lk[3] = {1, 64, 130}, fails = 0, cpu = tu_fast_dot(1);
    for (int i = 0; i < 8; i++)
        for (int opt = 0; opt < 6; opt++)
            for (int f32_probs = 0; f32_probs < 2; f32_probs++) {
                ts_case c; memset(&c, 0, sizeof c);
                c.H = 8; c.Hk = opt % 3 == 0 ? 8 : opt % 3 == 1 ? 2 : 1;
                c.D = Ds[i]; c.num_seqs = 3; c.lq = lq; c.lk = lk; c.dt = ATTN_BF16;
                c.causal = opt != 5; c.alibi = opt == 1 || opt == 4; c.window = windows[opt % 3];
                c.cap = opt == 2 ? 3.0f : 0.0f; c.sinks = opt >= 3; c.strided = opt == 4;
                c.f32_probs = f32_probs;
                if (Ds[i] >= 128 && opt % 2) continue;  /* keep the big heads quick */
                fails += ts_check(&c, 700 + (uint64_t)(i * 16 + opt * 2 + f32_probs));
            }
    tu_cpu_flags_restore(cpu);
    CHECK_EQ_INT(fails, 0);
}

/* bf16 prefill takes the pair kernels where the CPU's bf16 dot products outrun its FMAs (AMD)
   and the f32 kernels where they do not (Intel, whose f32 kernels are the faster there): the
   avx512 run with f32_probs = 0 gives other bits than with 1 exactly in the first case. Both
   cases on any CPU with AVX-512 BF16 (tu_fast_dot); elsewhere neither. */
TEST(sdpa_bf16_pair_kernels_follow_the_cpu) {
    int lq[2] = {40, 7}, lk[2] = {70, 7};
    ts_case c; memset(&c, 0, sizeof c);
    c.H = 4; c.Hk = 2; c.D = 64; c.num_seqs = 2; c.lq = lq; c.lk = lk; c.dt = ATTN_BF16;
    c.causal = 1;
    if (!attn_isa_supported(ATTN_ISA_AVX512)) SKIP(TU_NO_AVX512);
    ts_data d;
    ts_make(&c, 830, &d);
    size_t n = (size_t)d.cu_q[c.num_seqs] * c.H * c.D * 2;
    char *a = (char *)tu_alloc(n), *b = (char *)tu_alloc(n);
    attn_exec e = tu_exec(ATTN_ISA_AVX512, 1), e32 = e;
    e32.f32_probs = 1;
    for (int fast = 0; fast < 2; fast++) {
        int cpu = tu_fast_dot(fast);
        int ok = ts_run(&c, &d, &e, a, NULL) == ATTN_OK && ts_run(&c, &d, &e32, b, NULL) == ATTN_OK;
        tu_cpu_flags_restore(cpu);
        REQUIRE(ok);
        int differ = memcmp(a, b, n) != 0;
        CHECK_MSG(differ == (fast && tu_dot2_cpu()), "bf16dot=%s: f32_probs = 0 and 1 %s",
                  fast ? "fast" : "slow", differ ? "differ" : "gave the same bits");
    }
    free(a); free(b);
    ts_free(&d);
}

/* bf16 tiles packed once per (sequence, KV head) and thread, reused by its other query tiles
   (see MEMORY in attn.h): keys past the cache's limit (ATTN_VALUE_CACHE_BYTES: 32 tiles of
   D = 512, 16 on the AMX tiles), partial tiles, windows that start mid-tile, keys around a step
   of the tile kernels (256), several query tiles per KV head, and a workspace reused by a call
   with other keys and values (the cache must not serve the old ones). */
TEST(sdpa_bf16_value_cache) {
    int lq[2] = {50, 7}, lk[2] = {2117, 64}, fails = 0;
    for (int opt = 0; opt < 2; opt++) {  /* bottom-right causal: the last query sees every key */
        ts_case c; memset(&c, 0, sizeof c);
        c.H = 2; c.Hk = 1; c.D = 512; c.num_seqs = 2; c.lq = lq; c.lk = lk; c.dt = ATTN_BF16;
        c.causal = 1; c.window = opt ? 100 : 0;
        fails += ts_check(&c, 810 + (uint64_t)opt);
    }
    {   /* one key short of, at and past a step of the tile kernels */
        int lq3[3] = {40, 1, 33}, lk3[3] = {255, 256, 257};
        ts_case c; memset(&c, 0, sizeof c);
        c.H = 4; c.Hk = 2; c.D = 64; c.num_seqs = 3; c.lq = lq3; c.lk = lk3; c.dt = ATTN_BF16;
        c.causal = 1;
        fails += ts_check(&c, 815);
    }
    CHECK_EQ_INT(fails, 0);
    /* without cu_seqlens_k the size query gives the most any call can need */
    attn_params p; memset(&p, 0, sizeof p);
    p.num_heads = 2; p.num_kv_heads = 1; p.head_size = 512;
    int32_t cu_q[3] = {0, 50, 57}, cu_k[3] = {0, 2117, 2181};
    CHECK(attn_sdpa_workspace_size(&p, NULL, NULL, NULL, 2) >= attn_sdpa_workspace_size(&p, NULL,
            cu_q, cu_k, 2));

    /* a workspace that holds another call's packed tiles (other keys and values) gives the
       bits of a fresh one, on every ISA (the tile kernels keep the keys too) */
    ts_case c; memset(&c, 0, sizeof c);
    int lq1[1] = {60}, lk1[1] = {300};
    c.H = 4; c.Hk = 1; c.D = 64; c.num_seqs = 1; c.lq = lq1; c.lk = lk1; c.dt = ATTN_BF16;
    c.causal = 1;
    ts_data a;
    ts_make(&c, 820, &a);
    size_t nk = (size_t)a.cu_k[1] * a.kv_stride + 1;  /* other keys and values, as ts_make lays
                                                          them out */
    uint64_t rng = 821;
    void *k2 = tu_alloc(nk * 4), *v2 = tu_alloc(nk * 4);
    float *f2 = (float *)tu_alloc(nk * 4);
    tu_fill(&rng, ATTN_BF16, k2, f2, nk, -1.0f, 1.0f);
    tu_fill(&rng, ATTN_BF16, v2, f2, nk, -1.0f, 1.0f);
    size_t n_out = (size_t)60 * 4 * 64;
    uint16_t *reused = (uint16_t *)tu_alloc(n_out * 2), *fresh = (uint16_t *)tu_alloc(n_out * 2);
    attn_rows qa = {a.q, ATTN_BF16, a.q_stride}, ka = {a.k, ATTN_BF16, a.kv_stride},
              va = {a.v, ATTN_BF16, a.kv_stride};
    attn_rows kb = {k2, ATTN_BF16, a.kv_stride}, vb = {v2, ATTN_BF16, a.kv_stride};
    attn_isa isas[ATTN_ISA_COUNT];
    int n_isa = tu_isas_tiles(isas);
    for (int i = 0; i < n_isa; i++) {
        attn_exec e = tu_exec(isas[i], 1);
        size_t ws_bytes = attn_sdpa_workspace_size(&a.p, &e, a.cu_q, a.cu_k, 1);
        void *ws = tu_alloc(ws_bytes);
        attn_rows o = {reused, ATTN_BF16, 0};
        CHECK_STATUS(attn_sdpa(&a.p, &e, qa, ka, va, o, a.cu_q, a.cu_k, 1, 1, NULL, ws, ws_bytes),
                     ATTN_OK);
        CHECK_STATUS(attn_sdpa(&a.p, &e, qa, kb, vb, o, a.cu_q, a.cu_k, 1, 1, NULL, ws, ws_bytes),
                     ATTN_OK);
        memset(ws, 0, ws_bytes);
        o.data = fresh;
        CHECK_STATUS(attn_sdpa(&a.p, &e, qa, kb, vb, o, a.cu_q, a.cu_k, 1, 1, NULL, ws, ws_bytes),
                     ATTN_OK);
        CHECK_BITEQ(reused, fresh, n_out * 2);
        free(ws);
    }
    free(reused); free(fresh); free(k2); free(v2); free(f2);
    ts_free(&a);
}

/* A sequence's output does not depend on its neighbours in the batch (bitwise). */
TEST(sdpa_sequence_alone_equals_in_batch) {
    int lq_batch[4] = {30, 77, 5, 64}, lk_batch[4] = {30, 90, 5, 64};
    attn_isa isas[ATTN_ISA_COUNT];
    int n_isa = tu_isas_tiles(isas);
    ts_case c; memset(&c, 0, sizeof c);
    c.H = 8; c.Hk = 2; c.D = 32; c.num_seqs = 4; c.lq = lq_batch; c.lk = lk_batch; c.causal = 1;
    c.alibi = 1; c.sinks = 1; c.dt = ATTN_BF16;
    ts_data d;
    ts_make(&c, 600, &d);
    attn_gemm gemms[2];
    int n_gemm = tu_gemms(gemms);
    for (int k = 0; k < n_isa * n_gemm; k++) {
        attn_exec e = tu_exec(isas[k % n_isa], 2);
        e.gemm = gemms[k / n_isa];
        size_t n_out = (size_t)d.cu_q[4] * 8 * 32;
        uint16_t *batch = (uint16_t *)tu_alloc(n_out * 2), *alone = (uint16_t *)tu_alloc(n_out * 2);
        REQUIRE(ts_run(&c, &d, &e, batch, NULL) == ATTN_OK);
        /* sequence 1 alone: point q/k/v at its rows */
        int32_t cq[2] = {0, 77}, ck[2] = {0, 90};
        attn_rows q = {(uint16_t *)d.q + (size_t)d.cu_q[1] * d.q_stride, ATTN_BF16, d.q_stride};
        attn_rows kk = {(uint16_t *)d.k + (size_t)d.cu_k[1] * d.kv_stride, ATTN_BF16, d.kv_stride};
        attn_rows v = {(uint16_t *)d.v + (size_t)d.cu_k[1] * d.kv_stride, ATTN_BF16, d.kv_stride};
        attn_rows o = {alone, ATTN_BF16, 0};
        size_t ws_bytes = attn_sdpa_workspace_size(&d.p, &e, cq, ck, 1);
        void *ws = tu_alloc(ws_bytes);
        CHECK_STATUS(attn_sdpa(&d.p, &e, q, kk, v, o, cq, ck, 1, 1, NULL, ws, ws_bytes), ATTN_OK);
        CHECK_BITEQ(alone, batch + (size_t)d.cu_q[1] * 8 * 32, (size_t)77 * 8 * 32 * 2);
        /* and with a caller pool that runs items in a scrambled order */
        tu_pool pool = {0};
        attn_exec ep = tu_exec(e.isa, 3);
        ep.gemm = e.gemm; ep.parallel_for = tu_pool_for; ep.pool = &pool;
        uint16_t *pooled = (uint16_t *)tu_alloc(n_out * 2);
        REQUIRE(ts_run(&c, &d, &ep, pooled, NULL) == ATTN_OK);
        CHECK_BITEQ(pooled, batch, n_out * 2);
        free(ws); free(batch); free(alone); free(pooled);
    }
    ts_free(&d);
}

TEST(sdpa_rejects_bad_input_and_writes_nothing) {
    float q[2 * 8] = {0}, o[2 * 8];
    int32_t cu[2] = {0, 2}, bad_cu[3] = {0, 2, 1}, neg_cu[2] = {1, 2};
    attn_params p; memset(&p, 0, sizeof p);
    p.num_heads = 2; p.num_kv_heads = 2; p.head_size = 4;
    attn_rows r = {q, ATTN_F32, 0}, ro = {o, ATTN_F32, 0};
    size_t need = attn_sdpa_workspace_size(&p, NULL, cu, cu, 1);
    char *ws = (char *)tu_alloc(need);
    for (int i = 0; i < 16; i++) o[i] = 42.0f;
    CHECK(need > 0);
    CHECK_STATUS(attn_sdpa(NULL, NULL, r, r, r, ro, cu, cu, 1, 1, NULL, ws, need),
                 ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_sdpa(&p, NULL, r, r, r, ro, NULL, cu, 1, 1, NULL, ws, need),
                 ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_sdpa(&p, NULL, r, r, r, ro, bad_cu, bad_cu, 2, 1, NULL, ws, need),
                 ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_sdpa(&p, NULL, r, r, r, ro, neg_cu, neg_cu, 1, 1, NULL, ws, need),
                 ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_sdpa(&p, NULL, r, r, r, ro, cu, cu, -1, 1, NULL, ws, need),
                 ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_sdpa(&p, NULL, r, r, r, ro, cu, cu, 1, 1, NULL, ws, need - 1),
                 ATTN_ERR_WORKSPACE_TOO_SMALL);
    CHECK_STATUS(attn_sdpa(&p, NULL, r, r, r, ro, cu, cu, 1, 1, NULL, NULL, need),
                 ATTN_ERR_WORKSPACE_TOO_SMALL);
    attn_rows short_stride = {q, ATTN_F32, 7};
    CHECK_STATUS(attn_sdpa(&p, NULL, short_stride, r, r, ro, cu, cu, 1, 1, NULL, ws, need),
                 ATTN_ERR_INVALID_ARG);
    attn_rows null_rows = {NULL, ATTN_F32, 0};
    CHECK_STATUS(attn_sdpa(&p, NULL, r, null_rows, r, ro, cu, cu, 1, 1, NULL, ws, need),
                 ATTN_ERR_INVALID_ARG);
    attn_rows fp8_rows = {q, ATTN_FP8_E4M3, 0};
    CHECK_STATUS(attn_sdpa(&p, NULL, fp8_rows, r, r, ro, cu, cu, 1, 1, NULL, ws, need),
                 ATTN_ERR_INVALID_ARG);
    attn_rows mixed = {q, ATTN_BF16, 0};
    CHECK_STATUS(attn_sdpa(&p, NULL, r, mixed, r, ro, cu, cu, 1, 1, NULL, ws, need),
                 ATTN_ERR_INVALID_ARG);
    p.num_kv_heads = 3;
    CHECK_STATUS(attn_sdpa(&p, NULL, r, r, r, ro, cu, cu, 1, 1, NULL, ws, need),
                 ATTN_ERR_INVALID_ARG);
    p.num_kv_heads = 2; p.head_size = 513;
    CHECK_STATUS(attn_sdpa(&p, NULL, r, r, r, ro, cu, cu, 1, 1, NULL, ws, need),
                 ATTN_ERR_INVALID_ARG);
    CHECK_EQ_INT(attn_sdpa_workspace_size(&p, NULL, cu, cu, 1), 0);
    for (int i = 0; i < 16; i++) CHECK_NEAR(o[i], 42.0, 0.0);
    free(ws);
}

/* A NaN key is garbage in, but every ISA must still turn it into the same output: the vector
   layer's max and min return the second operand when unordered (the scalar rule, and SSE's), so
   a NaN score takes part in the running maximum and in exp() identically everywhere. AArch64's
   native fmax propagates NaN instead, which once made the NEON pass disagree here. */
TEST(sdpa_isas_agree_on_a_nan_key) {
    int lq[1] = {9}, lk[1] = {9};
    float caps[2] = {0.0f, 20.0f};
    attn_isa isas[ATTN_ISA_COUNT];
    int n_isa = tu_isas_tiles(isas);
    for (int ci = 0; ci < 2; ci++) {
        ts_case c; memset(&c, 0, sizeof c);
        c.H = 2; c.Hk = 1; c.D = 16; c.num_seqs = 1; c.lq = lq; c.lk = lk; c.cap = caps[ci];
        c.dt = ATTN_F32;
        ts_data d;
        ts_make(&c, 700, &d);
        ((float *)d.k)[2 * d.kv_stride + 3] = NAN;  /* key 2 of 9: not the last one a tile sees */
        size_t n_out = (size_t)9 * 2 * 16;
        float *want = (float *)tu_alloc(n_out * 4), *got = (float *)tu_alloc(n_out * 4);
        attn_exec es = tu_exec(ATTN_ISA_SCALAR, 1);
        REQUIRE(ts_run(&c, &d, &es, want, NULL) == ATTN_OK);
        for (int k = 1; k < n_isa; k++) {
            attn_exec e = tu_exec(isas[k], 1);
            REQUIRE(ts_run(&c, &d, &e, got, NULL) == ATTN_OK);
            int bad = 0;
            for (size_t i = 0; i < n_out; i++)
                bad += isnan(want[i]) ? !isnan(got[i])
                    : !(fabs(got[i] - want[i]) <= 1e-5 * (1 + fabs(want[i])));
            CHECK_MSG(bad == 0,
                      "cap %g isa %s: %d outputs differ from the scalar pass (first: got %g "
                         "want %g)",
                      c.cap, attn_isa_name(isas[k]), bad, got[0], want[0]);
        }
        free(want); free(got);
        ts_free(&d);
    }
}

#define TEST_SDPA_LIST                                                                            \
    ATTN_TEST_ENTRY(sdpa_head_sizes_and_gqa_ratios),                                              \
    ATTN_TEST_ENTRY(sdpa_lengths_around_tiles_and_varlen),                                        \
    ATTN_TEST_ENTRY(sdpa_causal_with_more_queries_than_keys),                                     \
    ATTN_TEST_ENTRY(sdpa_every_bias_option), ATTN_TEST_ENTRY(sdpa_activation_dtypes_and_strides), \
    ATTN_TEST_ENTRY(sdpa_bf16_pair_kernels_sweep),                                                \
    ATTN_TEST_ENTRY(sdpa_bf16_pair_kernels_follow_the_cpu),                                       \
    ATTN_TEST_ENTRY(sdpa_bf16_value_cache),                                                       \
    ATTN_TEST_ENTRY(sdpa_sequence_alone_equals_in_batch),                                         \
    ATTN_TEST_ENTRY(sdpa_isas_agree_on_a_nan_key),                                                \
    ATTN_TEST_ENTRY(sdpa_rejects_bad_input_and_writes_nothing)
