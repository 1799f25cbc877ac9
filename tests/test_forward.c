/* The backend layer: a continuous-batching simulation through the block pool (the test users
   will trust most), encoder-decoder, encoder-only, and metadata checks. */

enum { TF_H = 4, TF_HK = 2, TF_D = 32, TF_BS = 8, TF_BLOCKS = 400, TF_MAXB = 48, TF_REQS = 8 };
#define TF_KW (TF_HK * TF_D)
#define TF_QW (TF_H * TF_D)

typedef struct tf_req {
    int live, prompt_left;
    attn_seq seq;
    int32_t table[TF_MAXB];
    float *k, *v;              /* history [len][Hk*D], as the cache stores it (dequantized) */
} tf_req;

static float tf_round(attn_dtype dt, float x, float scale) {
    switch (dt) {
        case ATTN_BF16: return attn_bf16_to_f32(attn_f32_to_bf16(x));
        case ATTN_F16: return attn_f16_to_f32(attn_f32_to_f16(x));
        case ATTN_FP8_E4M3: return attn_fp8_e4m3_to_f32(attn_f32_to_fp8_e4m3(x / scale)) * scale;
        case ATTN_FP8_E5M2: return attn_fp8_e5m2_to_f32(attn_f32_to_fp8_e5m2(x / scale)) * scale;
        default: return x;
    }
}

/* A row of TF_D elements x as the cache stores it, dequantized, into y: the element dtypes
   element by element (tf_round), the integer ones quantised as one row (attn_convert) and read
   back from the documented layout (ref_row_element). */
static void tf_round_row(attn_dtype dt, const float *x, float *y, float scale) {
    if (attn__is_int(dt)) {
        unsigned char row[TF_D + 2 * ((TF_D + 31) / 32)];  /* int8's bytes, int4's fewer */
        if (attn_convert(row, dt, x, ATTN_F32, TF_D, 0.0f) != ATTN_OK) {
            printf("  tf_round_row: attn_convert to %s failed\n", attn_dtype_name(dt));
            exit(2);
        }
        for (int e = 0; e < TF_D; e++) y[e] = ref_row_element(row, dt, TF_D, (size_t)e);
        return;
    }
    for (int e = 0; e < TF_D; e++) y[e] = tf_round(dt, x[e], scale);
}

/* One simulation: random arrivals, chunked prefills, forks with copy-on-write, finishes and
   decodes, each step one attn_forward on the mixed batch. Returns the number of bad steps. */
static int tf_simulate(attn_dtype kv_dt, const attn_params *p, uint64_t seed, int steps) {
    uint64_t rng = seed;
    float scale = attn__is_fp8(kv_dt) ? 0.01f : 1.0f;
    size_t cbytes = attn_kv_cache_bytes(TF_BLOCKS, TF_BS, TF_HK, TF_D, kv_dt);
    size_t pbytes = attn_block_pool_bytes(TF_BLOCKS);
    void *cmem = tu_alloc(cbytes), *pmem = tu_alloc(pbytes);
    attn_kv_cache cache;
    attn_block_pool pool;
    attn_layer layers[2];  /* SDPA, and IPEX (oneDNN GEMMs) when the build has it */
    tf_req req[TF_REQS];
    int bad_steps = 0, r, n_layers = 1;
    if (attn_kv_cache_init(&cache, TF_BLOCKS, TF_BS, TF_HK, TF_D, kv_dt, scale, scale, cmem,
                           cbytes) != ATTN_OK ||
        attn_block_pool_init(&pool, TF_BLOCKS, TF_BS, pmem, pbytes) != ATTN_OK ||
        attn_layer_init(&layers[0], p, ATTN_DECODER, ATTN_BACKEND_SDPA) != ATTN_OK) {
        printf("  simulation setup failed\n");
        return 1;
    }
#ifdef ATTN_USE_ONEDNN
    if (attn_layer_init(&layers[1], p, ATTN_DECODER, ATTN_BACKEND_IPEX) != ATTN_OK) {
        printf("  IPEX layer setup failed\n");
        return 1;
    }
    n_layers = 2;
#endif
    memset(req, 0, sizeof req);
    for (int step = 0; step < steps; step++) {
        /* arrivals, forks and finishes */
        for (r = 0; r < TF_REQS; r++) {
            tf_req *q = &req[r];
            if (!q->live && attn_test_rand_int(&rng, 0, 2) == 0) {
                q->live = 1; q->prompt_left = attn_test_rand_int(&rng, 1, 70);
                attn_seq_init(&q->seq, q->table, TF_MAXB);
                q->k = (float *)tu_alloc(sizeof(float) * TF_KW * TF_MAXB * TF_BS);
                q->v = (float *)tu_alloc(sizeof(float) * TF_KW * TF_MAXB * TF_BS);
            } else if (q->live && !q->prompt_left && attn_test_rand_int(&rng, 0, 9) == 0) {
                attn_seq_release(&pool, &q->seq);  /* finished */
                free(q->k); free(q->v);
                q->live = 0;
            }
        }
        for (r = 0; r < TF_REQS; r++) {  /* parallel sampling: fork a decoding request */
            tf_req *src = &req[r], *dst = NULL;
            if (!src->live || src->prompt_left || attn_test_rand_int(&rng, 0, 5)) continue;
            for (int d = 0; d < TF_REQS; d++) if (!req[d].live) { dst = &req[d]; break; }
            if (!dst) break;
            attn_seq_init(&dst->seq, dst->table, TF_MAXB);
            if (attn_seq_fork(&pool, &src->seq, &dst->seq) != ATTN_OK) continue;
            dst->live = 1; dst->prompt_left = 0;
            dst->k = (float *)tu_alloc(sizeof(float) * TF_KW * TF_MAXB * TF_BS);
            dst->v = (float *)tu_alloc(sizeof(float) * TF_KW * TF_MAXB * TF_BS);
            memcpy(dst->k, src->k, sizeof(float) * TF_KW * (size_t)src->seq.len);
            memcpy(dst->v, src->v, sizeof(float) * TF_KW * (size_t)src->seq.len);
        }
        /* the batch: prefills (random chunks) first, then decodes */
        int order[TF_REQS], nq[TF_REQS], n = 0, prefills = 0;
        for (int pass = 0; pass < 2; pass++)
            for (r = 0; r < TF_REQS; r++) {
                if (!req[r].live || (pass == 0) != (req[r].prompt_left > 0)) continue;
                if (req[r].seq.len + 70 > TF_MAXB * TF_BS) continue;  /* keep within the table */
                nq[n] = pass == 0 ? attn_test_rand_int(&rng, 1, req[r].prompt_left) : 1;
                order[n++] = r;
                prefills += pass == 0;
            }
        if (n == 0) continue;
        int tokens = 0;
        for (int i = 0; i < n; i++) tokens += nq[i];
        float *qf = (float *)tu_alloc(sizeof(float) * (size_t)tokens * TF_QW);
        float *kf = (float *)tu_alloc(sizeof(float) * (size_t)tokens * TF_KW);
        float *vf = (float *)tu_alloc(sizeof(float) * (size_t)tokens * TF_KW);
        int64_t *slots = (int64_t *)tu_alloc(sizeof(int64_t) * (size_t)tokens);
        int32_t seq_lens[TF_REQS], qsl[TF_REQS + 1], ctx[TF_REQS], tables[TF_REQS * TF_MAXB];
        int ok = 1, t0 = 0;
        for (int i = 0; i < tokens * TF_QW; i++) qf[i] = attn_test_rand_uniform(&rng, -1, 1);
        for (int i = 0; i < tokens * TF_KW; i++) {
            kf[i] = attn_test_rand_uniform(&rng, -1, 1);
            vf[i] = attn_test_rand_uniform(&rng, -1, 1);
        }
        qsl[0] = 0;
        for (int i = 0; i < n; i++) {
            tf_req *q = &req[order[i]];
            int64_t cow[1][2];
            int n_cow = 0;
            if (i < prefills) ctx[i] = (int32_t)q->seq.len;
            if (attn_seq_append(&pool, &q->seq, nq[i], slots + t0, cow, &n_cow) != ATTN_OK) {
                ok = 0; break;
            }
            if (n_cow) {  /* copy-on-write: the shared last block is copied before we write */
                attn_kv_cache *layers[1] = {&cache};
                if (attn_copy_blocks(layers, 1, &cow[0][0], 1) != ATTN_OK) { ok = 0; break; }
            }
            for (int t = 0; t < nq[i]; t++)
                for (int g = 0; g < TF_HK; g++) {  /* row (token, KV head) */
                    size_t at = (size_t)(q->seq.len - nq[i] + t) * TF_KW + (size_t)g * TF_D;
                    size_t from = (size_t)(t0 + t) * TF_KW + (size_t)g * TF_D;
                    tf_round_row(kv_dt, kf + from, q->k + at, scale);
                    tf_round_row(kv_dt, vf + from, q->v + at, scale);
                }
            seq_lens[i] = (int32_t)q->seq.len;
            memcpy(tables + i * TF_MAXB, q->table, sizeof(q->table));
            if (i < prefills) qsl[i + 1] = qsl[i] + nq[i];
            t0 += nq[i];
            if (i < prefills) q->prompt_left -= nq[i];
        }
        if (!ok) { printf("  step %d: append failed (pool exhausted?)\n", step); bad_steps++; }
        attn_metadata md;
        memset(&md, 0, sizeof md);
        md.num_prefills = prefills; md.num_prefill_tokens = qsl[prefills];
        md.num_decode_tokens = n - prefills;
        md.slot_mapping = slots; md.seq_lens = seq_lens; md.query_start_loc = qsl;
        md.context_lens = ctx; md.block_tables = tables; md.max_blocks_per_seq = TF_MAXB;
        float *outs[4];  /* [layer * 2 + threads - 1] */
        attn_rows rq = {qf, ATTN_F32, 0}, rk = {kf, ATTN_F32, 0}, rv = {vf, ATTN_F32, 0};
        for (int run = 0; run < 2 * n_layers; run++) {
            attn_exec e = tu_exec(ATTN_ISA_AUTO, 1 + run % 2);
            outs[run] = (float *)tu_alloc(sizeof(float) * (size_t)tokens * TF_QW);
            attn_rows ro = {outs[run], ATTN_F32, 0};
            size_t bytes = attn_forward_workspace_size(&layers[run / 2], &md, &e);
            void *ws = tu_alloc(bytes);
            attn_status st =
                    attn_forward(&layers[run / 2], &e, rq, rk, rv, &cache, &md, ro, ws, bytes);
            if (st != ATTN_OK) {
                printf("  step %d: forward %s\n", step, attn_status_str(st)); ok = 0;
            }
            free(ws);
        }
        int bad = 0;
        t0 = 0;
        for (int i = 0; i < n && ok; i++) {  /* every row against the reference on the full K/V */
            tf_req *q = &req[order[i]];
            double want[70 * TF_QW];
            ref_attention(p, 1, nq[i], (int)q->seq.len, qf + (size_t)t0 * TF_QW, 0, q->k, 0, q->v,
                          0, want, NULL);
            for (int run = 0; run < 2 * n_layers; run += 2)
                for (int j = 0; j < nq[i] * TF_QW; j++)
                    bad += !(fabs(outs[run][(size_t)t0 * TF_QW + j] - want[j]) <= 3e-5 + 1e-4
                             * fabs(want[j]));
            t0 += nq[i];
        }
        for (int run = 0; run < 2 * n_layers && ok; run += 2)
            if (memcmp(outs[run], outs[run + 1], sizeof(float) * (size_t)tokens * TF_QW)) bad++;
        if (bad) { printf("  step %d (%d prefills, %d decodes, kv %s): %d bad values or thread "
                          "mismatch\n",
                          step, prefills, n - prefills, attn_dtype_name(kv_dt), bad); bad_steps++; }
        free(qf); free(kf); free(vf); free(slots);
        for (int run = 0; run < 2 * n_layers; run++) free(outs[run]);
    }
    for (r = 0; r < TF_REQS; r++)
        if (req[r].live) { attn_seq_release(&pool, &req[r].seq); free(req[r].k); free(req[r].v); }
    if (attn_block_pool_free_count(&pool) != TF_BLOCKS) {
        printf("  blocks leaked\n"); bad_steps++;
    }
    free(cmem); free(pmem);
    return bad_steps;
}

TEST(forward_continuous_batching_simulation) {
    attn_params p; memset(&p, 0, sizeof p);
    p.num_heads = TF_H; p.num_kv_heads = TF_HK; p.head_size = TF_D;
    CHECK_EQ_INT(tf_simulate(ATTN_F32, &p, 3000, 40), 0);
    CHECK_EQ_INT(tf_simulate(ATTN_BF16, &p, 3001, 30), 0);
    CHECK_EQ_INT(tf_simulate(ATTN_FP8_E4M3, &p, 3002, 30), 0);
    CHECK_EQ_INT(tf_simulate(ATTN_INT8, &p, 3004, 30), 0);
    float slopes[TF_H], sinks[TF_H] = {0.5f, -1.0f, 0.0f, 2.0f};
    attn_alibi_slopes(TF_H, slopes);
    p.alibi_slopes = slopes; p.sliding_window = 37; p.sinks = sinks; p.logits_soft_cap = 5.0f;
    CHECK_EQ_INT(tf_simulate(ATTN_F16, &p, 3003, 30), 0);
    CHECK_EQ_INT(tf_simulate(ATTN_INT4, &p, 3005, 30), 0);
}

/* Encoder pass, cross K/V written once, decoder prefill over given K/V, then decode steps that
   read the cross cache; and encoder-only (non-causal, no cache). */
static void tf_encoder_decoder(attn_backend backend) {
    enum { ENC = 23, DEC = 9 };
    attn_params p; memset(&p, 0, sizeof p);
    p.num_heads = TF_H; p.num_kv_heads = TF_HK; p.head_size = TF_D;
    uint64_t rng = 3100;
    float eq[ENC * TF_QW], ek[ENC * TF_KW], ev[ENC * TF_KW], dq[DEC * TF_QW], junk[ENC * TF_QW];
    tu_fill(&rng, ATTN_F32, eq, junk, ENC * TF_QW, -1, 1);
    tu_fill(&rng, ATTN_F32, ek, junk, ENC * TF_KW, -1, 1);
    tu_fill(&rng, ATTN_F32, ev, junk, ENC * TF_KW, -1, 1);
    tu_fill(&rng, ATTN_F32, dq, junk, DEC * TF_QW, -1, 1);
    double want[ENC * TF_QW];
    float out[ENC * TF_QW];
    /* encoder: non-causal over the encoder tokens, nothing written */
    attn_layer enc, cross, only;
    REQUIRE(attn_layer_init(&enc, &p, ATTN_ENCODER, backend) == ATTN_OK);
    REQUIRE(attn_layer_init(&cross, &p, ATTN_ENCODER_DECODER, backend) == ATTN_OK);
    REQUIRE(attn_layer_init(&only, &p, ATTN_ENCODER_ONLY, backend) == ATTN_OK);
    int32_t enc_lens[1] = {ENC}, enc_loc[2] = {0, ENC}, dec_loc[2] = {0, DEC}, dec_lens[1] = {DEC};
    attn_metadata md; memset(&md, 0, sizeof md);
    md.num_prefills = 1; md.encoder_seq_lens = enc_lens; md.encoder_start_loc = enc_loc;
    md.num_encoder_tokens = ENC; md.query_start_loc = enc_loc; md.num_prefill_tokens = ENC;
    attn_rows rq = {eq, ATTN_F32, 0}, rk = {ek, ATTN_F32, 0}, rv = {ev, ATTN_F32, 0},
              ro = {out, ATTN_F32, 0};
    size_t bytes = attn_forward_workspace_size(&enc, &md, NULL);
    void *ws = tu_alloc(bytes + 4096);
    CHECK_STATUS(attn_forward(&enc, NULL, rq, rk, rv, NULL, &md, ro, ws, bytes), ATTN_OK);
    ref_attention(&p, 0, ENC, ENC, eq, 0, ek, 0, ev, 0, want, NULL);
    CHECK_ALLCLOSE_D(out, want, ENC * TF_QW, 3e-5, 1e-4);
    /* encoder-only: the same, from seq_lens / query_start_loc; decode metadata is refused */
    attn_metadata mo; memset(&mo, 0, sizeof mo);
    mo.num_prefills = 1; mo.num_prefill_tokens = ENC; mo.query_start_loc = enc_loc;
    mo.seq_lens = enc_lens;
    memset(out, 0, sizeof out);
    CHECK_STATUS(attn_forward(&only, NULL, rq, rk, rv, NULL, &mo, ro, ws, bytes), ATTN_OK);
    CHECK_ALLCLOSE_D(out, want, ENC * TF_QW, 3e-5, 1e-4);
    mo.num_decode_tokens = 1;
    CHECK_STATUS(attn_forward(&only, NULL, rq, rk, rv, NULL, &mo, ro, ws, bytes),
                 ATTN_ERR_INVALID_ARG);
    /* cross attention: decoder prefill writes the cross K/V and attends all encoder tokens */
    size_t cbytes = attn_kv_cache_bytes(8, TF_BS, TF_HK, TF_D, ATTN_F32);
    void *cmem = tu_alloc(cbytes);
    attn_kv_cache cache;
    REQUIRE(attn_kv_cache_init(&cache, 8, TF_BS, TF_HK, TF_D, ATTN_F32, 1, 1, cmem,
                               cbytes) == ATTN_OK);
    int32_t cross_table[4] = {5, 2, 7, 0};
    int64_t cross_slots[ENC];
    for (int t = 0; t < ENC; t++) cross_slots[t] =
            (int64_t)cross_table[t / TF_BS] * TF_BS + t % TF_BS;
    attn_metadata mc; memset(&mc, 0, sizeof mc);
    mc.num_prefills = 1; mc.num_prefill_tokens = DEC; mc.query_start_loc = dec_loc;
    mc.seq_lens = dec_lens;
    mc.encoder_seq_lens = enc_lens; mc.encoder_start_loc = enc_loc; mc.num_encoder_tokens = ENC;
    mc.cross_slot_mapping = cross_slots; mc.cross_block_tables = cross_table;
    mc.max_cross_blocks_per_seq = 4;
    attn_rows rdq = {dq, ATTN_F32, 0};
    bytes = attn_forward_workspace_size(&cross, &mc, NULL);
    free(ws); ws = tu_alloc(bytes);
    CHECK_STATUS(attn_forward(&cross, NULL, rdq, rk, rv, &cache, &mc, ro, ws, bytes), ATTN_OK);
    ref_attention(&p, 0, DEC, ENC, dq, 0, ek, 0, ev, 0, want, NULL);
    CHECK_ALLCLOSE_D(out, want, DEC * TF_QW, 3e-5, 1e-4);
    /* decode steps: K/V not given, the decoder token reads the cross cache */
    attn_metadata md2; memset(&md2, 0, sizeof md2);
    md2.num_decode_tokens = 1; md2.seq_lens = dec_lens; md2.encoder_seq_lens = enc_lens;
    md2.cross_block_tables = cross_table; md2.max_cross_blocks_per_seq = 4;
    attn_rows none = {NULL, ATTN_F32, 0}, one = {dq + 3 * TF_QW, ATTN_F32, 0};
    bytes = attn_forward_workspace_size(&cross, &md2, NULL);
    free(ws); ws = tu_alloc(bytes);
    CHECK_STATUS(attn_forward(&cross, NULL, one, none, none, &cache, &md2, ro, ws, bytes), ATTN_OK);
    ref_attention(&p, 0, 1, ENC, dq + 3 * TF_QW, 0, ek, 0, ev, 0, want, NULL);
    CHECK_ALLCLOSE_D(out, want, TF_QW, 3e-5, 1e-4);
    /* missing cross metadata is refused */
    md2.cross_block_tables = NULL;
    CHECK_STATUS(attn_forward(&cross, NULL, one, none, none, &cache, &md2, ro, ws, bytes),
                 ATTN_ERR_INVALID_ARG);
    md.encoder_seq_lens = NULL;
    CHECK_STATUS(attn_forward(&enc, NULL, rq, rk, rv, NULL, &md, ro, ws, bytes),
                 ATTN_ERR_INVALID_ARG);
    free(ws); free(cmem);
}

/* Both backends: IPEX runs the prefill GEMMs on oneDNN (ATTN_USE_ONEDNN builds). */
TEST(forward_encoder_decoder_and_encoder_only) {
    tf_encoder_decoder(ATTN_BACKEND_SDPA);
#ifdef ATTN_USE_ONEDNN
    tf_encoder_decoder(ATTN_BACKEND_IPEX);
#endif
}

static void tf_rejects(attn_backend backend) {
    attn_params p; memset(&p, 0, sizeof p);
    p.num_heads = TF_H; p.num_kv_heads = TF_HK; p.head_size = TF_D;
    attn_layer layer;
    CHECK_STATUS(attn_layer_init(&layer, &p, (attn_type)9, ATTN_BACKEND_SDPA),
                 ATTN_ERR_INVALID_ARG);
#ifndef ATTN_USE_ONEDNN
    CHECK_STATUS(attn_layer_init(&layer, &p, ATTN_DECODER, ATTN_BACKEND_IPEX),
                 ATTN_ERR_UNSUPPORTED);
#endif
    CHECK(strcmp(attn_backend_name(ATTN_BACKEND_IPEX), "IPEX") == 0);
    REQUIRE(attn_layer_init(&layer, &p, ATTN_DECODER, backend) == ATTN_OK);
    size_t cbytes = attn_kv_cache_bytes(4, TF_BS, TF_HK, TF_D, ATTN_F32);
    char *cmem = (char *)tu_alloc(cbytes), *before = (char *)tu_alloc(cbytes);
    attn_kv_cache cache;
    REQUIRE(attn_kv_cache_init(&cache, 4, TF_BS, TF_HK, TF_D, ATTN_F32, 1, 1, cmem,
                               cbytes) == ATTN_OK);
    memset(cmem, 0x5a, cbytes);
    memcpy(before, cmem, cbytes);
    float q[3 * TF_QW] = {0}, k[3 * TF_KW] = {0}, out[3 * TF_QW];
    int64_t slots[3] = {0, 1, 2};
    int32_t qsl[2] = {0, 3}, lens[1] = {4}, ctx[1] = {0}, table[2] = {0, 1};
    attn_metadata md; memset(&md, 0, sizeof md);
    md.num_prefills = 1; md.num_prefill_tokens = 3; md.slot_mapping = slots; md.seq_lens = lens;
    md.query_start_loc = qsl; md.context_lens = ctx; md.block_tables = table;
    md.max_blocks_per_seq = 2;
    attn_rows rq = {q, ATTN_F32, 0}, rk = {k, ATTN_F32, 0}, ro = {out, ATTN_F32, 0};
    size_t bytes = attn_forward_workspace_size(&layer, &md, NULL);
    void *ws = tu_alloc(bytes);
    for (int i = 0; i < 3 * TF_QW; i++) out[i] = 7.0f;
    /* seq_len != context + query length */
    CHECK_STATUS(attn_forward(&layer, NULL, rq, rk, rk, &cache, &md, ro, ws, bytes),
                 ATTN_ERR_INVALID_ARG);
    lens[0] = 3; table[1] = 99;  /* a block outside the cache (table entry beyond the length is
                                    fine) */
    table[0] = 99;
    CHECK_STATUS(attn_forward(&layer, NULL, rq, rk, rk, &cache, &md, ro, ws, bytes),
                 ATTN_ERR_OUT_OF_RANGE);
    table[0] = 0; slots[2] = 4 * TF_BS;  /* a slot outside the cache */
    CHECK_STATUS(attn_forward(&layer, NULL, rq, rk, rk, &cache, &md, ro, ws, bytes),
                 ATTN_ERR_OUT_OF_RANGE);
    slots[2] = 2; qsl[1] = 2;  /* query_start_loc disagrees with num_prefill_tokens */
    CHECK_STATUS(attn_forward(&layer, NULL, rq, rk, rk, &cache, &md, ro, ws, bytes),
                 ATTN_ERR_INVALID_ARG);
    qsl[1] = 3;
    CHECK_STATUS(attn_forward(&layer, NULL, rq, rk, rk, &cache, &md, ro, ws, bytes - 1),
                 ATTN_ERR_WORKSPACE_TOO_SMALL);
    CHECK_BITEQ(cmem, before, cbytes);
    for (int i = 0; i < 3 * TF_QW; i++) CHECK_NEAR(out[i], 7.0, 0.0);
    CHECK_STATUS(attn_forward(&layer, NULL, rq, rk, rk, &cache, &md, ro, ws, bytes), ATTN_OK);
    /* the new tokens are counted in seq_lens: fewer keys than new tokens is refused, in a plain
       prefill and in a decode (whose token is one of its keys) */
    memcpy(before, cmem, cbytes);
    for (int i = 0; i < 3 * TF_QW; i++) out[i] = 7.0f;
    md.context_lens = NULL; lens[0] = 2;
    CHECK_STATUS(attn_forward(&layer, NULL, rq, rk, rk, &cache, &md, ro, ws, bytes),
                 ATTN_ERR_INVALID_ARG);
    attn_metadata mdec; memset(&mdec, 0, sizeof mdec);
    int32_t dec_lens[1] = {1};
    mdec.num_decode_tokens = 1; mdec.slot_mapping = slots; mdec.seq_lens = dec_lens;
    mdec.block_tables = table; mdec.max_blocks_per_seq = 2;
    size_t dbytes = attn_forward_workspace_size(&layer, &mdec, NULL);
    void *dws = tu_alloc(dbytes);
    dec_lens[0] = 0;
    CHECK_STATUS(attn_forward(&layer, NULL, rq, rk, rk, &cache, &mdec, ro, dws, dbytes),
                 ATTN_ERR_INVALID_ARG);
    CHECK_BITEQ(cmem, before, cbytes);
    for (int i = 0; i < 3 * TF_QW; i++) CHECK_NEAR(out[i], 7.0, 0.0);
    lens[0] = 3; dec_lens[0] = 1;
    CHECK_STATUS(attn_forward(&layer, NULL, rq, rk, rk, &cache, &md, ro, ws, bytes), ATTN_OK);
    CHECK_STATUS(attn_forward(&layer, NULL, rq, rk, rk, &cache, &mdec, ro, dws, dbytes), ATTN_OK);
    free(ws); free(dws); free(cmem); free(before);
}

TEST(forward_rejects_bad_metadata_and_writes_nothing) {
    tf_rejects(ATTN_BACKEND_SDPA);
#ifdef ATTN_USE_ONEDNN
    tf_rejects(ATTN_BACKEND_IPEX);
#endif
}

/* bf16 prefills through attn_forward keep packed value tiles per thread (see MEMORY in attn.h):
   a chunk over a cached prefix and a plain prefill give the bits of attn_paged_prefill and
   attn_sdpa, and a workspace reused with other values does not serve the old ones. */
enum { TV_H = 4, TV_D = 64, TV_BS = 16, TV_CTX = 150, TV_NEW = 100, TV_LEN = TV_CTX + TV_NEW,
      TV_NB = 20 };
#define TV_QW (TV_H * TV_D)

typedef struct tv_data {
    uint16_t q[TV_NEW * TV_QW], k[TV_LEN * TV_D], v[TV_LEN * TV_D], v2[TV_LEN * TV_D];
    int32_t table[TV_NB];
    int64_t slots[TV_LEN];
} tv_data;

/* attn_forward over the TV_NEW new rows (values v), after the prefix (ctx) or alone. */
static attn_status tv_forward(const attn_layer *L, const attn_exec *e, attn_kv_cache *cache,
                              tv_data *d, int ctx,
                              uint16_t *v, uint16_t *out, void *ws, size_t *bytes) {
    int32_t lens[1] = {ctx ? TV_LEN : TV_NEW}, qsl[2] = {0, TV_NEW}, ctxs[1] = {TV_CTX};
    attn_metadata md; memset(&md, 0, sizeof md);
    md.num_prefills = 1; md.num_prefill_tokens = TV_NEW; md.seq_lens = lens;
    md.query_start_loc = qsl;
    md.slot_mapping = ctx ? d->slots + TV_CTX : NULL; md.context_lens = ctx ? ctxs : NULL;
    md.block_tables = d->table; md.max_blocks_per_seq = TV_NB;
    size_t off = ctx ? (size_t)TV_CTX * TV_D : 0;
    attn_rows q = {d->q, ATTN_BF16, 0}, k = {d->k + off, ATTN_BF16, 0},
              vr = {v + off, ATTN_BF16, 0};
    attn_rows o = {out, ATTN_BF16, 0};
    *bytes = attn_forward_workspace_size(L, &md, e);
    return attn_forward(L, e, q, k, vr, ctx ? cache : NULL, &md, o, ws, *bytes);
}

TEST(forward_bf16_value_cache) {
    attn_params p; memset(&p, 0, sizeof p);
    p.num_heads = TV_H; p.num_kv_heads = 1; p.head_size = TV_D;
    uint64_t rng = 3200;
    tv_data *d = (tv_data *)tu_alloc(sizeof *d);
    float *junk = (float *)tu_alloc(sizeof(float) * TV_NEW * TV_QW);  /* the largest array */
    tu_fill(&rng, ATTN_BF16, d->q, junk, TV_NEW * TV_QW, -1, 1);
    tu_fill(&rng, ATTN_BF16, d->k, junk, TV_LEN * TV_D, -1, 1);
    tu_fill(&rng, ATTN_BF16, d->v, junk, TV_LEN * TV_D, -1, 1);
    tu_fill(&rng, ATTN_BF16, d->v2, junk, TV_LEN * TV_D, -1, 1);
    for (int i = 0; i < TV_NB; i++) d->table[i] = (i * 7 + 3) % TV_NB;  /* shuffled */
    for (int t = 0; t < TV_LEN; t++) d->slots[t] = (int64_t)d->table[t / TV_BS] * TV_BS + t % TV_BS;
    size_t cbytes = attn_kv_cache_bytes(TV_NB, TV_BS, 1, TV_D, ATTN_BF16),
           n_out = sizeof(uint16_t) * TV_NEW * TV_QW;
    void *cmem = tu_alloc(cbytes);
    attn_kv_cache cache;
    REQUIRE(attn_kv_cache_init(&cache, TV_NB, TV_BS, 1, TV_D, ATTN_BF16, 1, 1, cmem,
                               cbytes) == ATTN_OK);
    attn_layer L;
    REQUIRE(attn_layer_init(&L, &p, ATTN_DECODER, ATTN_BACKEND_SDPA) == ATTN_OK);
    attn_exec e = tu_exec(ATTN_ISA_AUTO, 2);
    uint16_t *fwd = (uint16_t *)tu_alloc(n_out), *want = (uint16_t *)tu_alloc(n_out);
    void *ws = tu_alloc(4u << 20);
    size_t bytes;
    for (int ctx = 0; ctx < 2; ctx++) {
        attn_rows k = {d->k, ATTN_BF16, 0}, v = {d->v, ATTN_BF16, 0}, v2 = {d->v2, ATTN_BF16, 0};
        attn_rows q = {d->q, ATTN_BF16, 0}, o = {want, ATTN_BF16, 0};
        int32_t qsl[2] = {0, TV_NEW}, lens[1] = {TV_LEN};
        REQUIRE(attn_write_kv(&cache, k, v, d->slots, TV_CTX, NULL) == ATTN_OK);  /* the prefix */
        CHECK_STATUS(tv_forward(&L, &e, &cache, d, ctx, d->v, fwd, ws, &bytes), ATTN_OK);
        REQUIRE(bytes <= 4u << 20);
        size_t ws2 = ctx ? attn_paged_prefill_workspace_size(&p, &e, &cache, qsl, lens, 1)
                         : attn_sdpa_workspace_size(&p, &e, qsl, qsl, 1);
        void *w2 = tu_alloc(ws2);
        if (ctx)
            CHECK_STATUS(attn_paged_prefill(&p, &e, q, o, &cache, d->table, TV_NB, qsl, lens, 1, 1,
                                            NULL, w2, ws2),
                         ATTN_OK);
        else
            CHECK_STATUS(attn_sdpa(&p, &e, q, k, v, o, qsl, qsl, 1, 1, NULL, w2, ws2), ATTN_OK);
        CHECK_BITEQ(fwd, want, n_out);
        /* other values through the same workspace, against a cleared one */
        REQUIRE(attn_write_kv(&cache, k, v2, d->slots, TV_CTX, NULL) == ATTN_OK);
        CHECK_STATUS(tv_forward(&L, &e, &cache, d, ctx, d->v2, fwd, ws, &bytes), ATTN_OK);
        memset(ws, 0, bytes);
        CHECK_STATUS(tv_forward(&L, &e, &cache, d, ctx, d->v2, want, ws, &bytes), ATTN_OK);
        CHECK_BITEQ(fwd, want, n_out);
        free(w2);
    }
    /* where the pair kernels can run, the tiles are in the size query; f32_probs leaves them out */
    int32_t qsl[2] = {0, TV_NEW}, lens[1] = {TV_NEW};
    attn_metadata md; memset(&md, 0, sizeof md);
    md.num_prefills = 1; md.num_prefill_tokens = TV_NEW; md.seq_lens = lens;
    md.query_start_loc = qsl;
    attn_exec e32 = e;
    e32.f32_probs = 1;
    attn__call call;
    attn__call_of(&e, 0, &call);
    if (attn__value_cache_tiles(&call, p.head_size, TV_NEW) > 0)
        CHECK(attn_forward_workspace_size(&L, &md, &e) > attn_forward_workspace_size(&L, &md,
                                                                                     &e32));
    else
        CHECK(attn_forward_workspace_size(&L, &md, &e) == attn_forward_workspace_size(&L, &md,
                                                                                      &e32));
    free(ws); free(fwd); free(want); free(cmem); free(junk); free(d);
}

/* The rows of a cache of dtype dt (rows of d elements) set to random values in [-1, 1): bf16
   element by element (tu_fill), the integer dtypes a row at a time (attn_convert). */
static void tf_fill_rows(uint64_t *rng, attn_dtype dt, void *base, size_t rows, int d) {
    float *x = (float *)tu_alloc(rows * (size_t)d * 4);
    if (!attn__is_int(dt)) {
        tu_fill(rng, dt, base, x, rows * (size_t)d, -1, 1);
    } else {
        size_t rb = attn_dtype_row_bytes(dt, d);
        for (size_t i = 0; i < rows * (size_t)d; i++) x[i] = attn_test_rand_uniform(rng, -1, 1);
        for (size_t r = 0; r < rows; r++)
            if (attn_convert((char *)base + r * rb, dt, x + r * (size_t)d, ATTN_F32, (size_t)d,
                             0.0f) != ATTN_OK) {
                printf("  tf_fill_rows: attn_convert to %s failed\n", attn_dtype_name(dt));
                exit(2);
            }
    }
    free(x);
}

/* attn_forward's decodes run as attn_paged_decode does on every ISA, ATTN_ISA_AMX with the
   logits on tiles included (G = 4 over a bf16 cache): the same bits, from a workspace of the size
   the forward's query gives for that ISA (the query tiles' scratch counted in); over bf16, int8
   and int4 caches. */
static void tf_decodes_equal_paged_decode(attn_dtype kv) {
    enum { H = 8, HK = 2, D = 32, BS = 16, NB = 16, SEQS = 3, MAXB = 8 };
    attn_params p; memset(&p, 0, sizeof p);
    p.num_heads = H; p.num_kv_heads = HK; p.head_size = D;
    int32_t lens[SEQS] = {40, 17, 100}, tables[SEQS * MAXB];
    int64_t slots[SEQS];
    float q[SEQS * H * D], k[SEQS * HK * D], v[SEQS * HK * D];
    float fwd[SEQS * H * D], want[SEQS * H * D];
    uint64_t rng = 3300;
    size_t cbytes = attn_kv_cache_bytes(NB, BS, HK, D, kv);
    void *cmem = tu_alloc(cbytes);
    attn_kv_cache cache;
    REQUIRE(attn_kv_cache_init(&cache, NB, BS, HK, D, kv, 1, 1, cmem, cbytes) == ATTN_OK);
    tf_fill_rows(&rng, kv, cache.key, (size_t)NB * BS * HK, D);
    tf_fill_rows(&rng, kv, cache.value, (size_t)NB * BS * HK, D);
    for (int i = 0; i < SEQS * H * D; i++) q[i] = attn_test_rand_uniform(&rng, -1, 1);
    for (int i = 0; i < SEQS * HK * D; i++) {
        k[i] = attn_test_rand_uniform(&rng, -1, 1);
        v[i] = attn_test_rand_uniform(&rng, -1, 1);
    }
    for (int i = 0; i < SEQS * MAXB; i++) tables[i] = (i * 5 + 1) % NB;  /* shuffled, shared */
    for (int s = 0; s < SEQS; s++)
        slots[s] = (int64_t)tables[s * MAXB + (lens[s] - 1) / BS] * BS + (lens[s] - 1) % BS;
    attn_metadata md; memset(&md, 0, sizeof md);
    md.num_decode_tokens = SEQS; md.slot_mapping = slots; md.seq_lens = lens;
    md.block_tables = tables; md.max_blocks_per_seq = MAXB;
    attn_layer L;
    REQUIRE(attn_layer_init(&L, &p, ATTN_DECODER, ATTN_BACKEND_SDPA) == ATTN_OK);
    attn_isa isas[ATTN_ISA_COUNT];
    int n_isa = tu_isas_tiles(isas);
    for (int i = 0; i < n_isa; i++) {
        attn_exec e = tu_exec(isas[i], 2);
        attn_rows rq = {q, ATTN_F32, 0}, rk = {k, ATTN_F32, 0}, rv = {v, ATTN_F32, 0};
        attn_rows ro = {fwd, ATTN_F32, 0}, rw = {want, ATTN_F32, 0};
        size_t bytes = attn_forward_workspace_size(&L, &md, &e);
        void *ws = tu_alloc(bytes);
        CHECK_STATUS(attn_forward(&L, &e, rq, rk, rv, &cache, &md, ro, ws, bytes), ATTN_OK);
        free(ws);
        bytes = attn_paged_decode_workspace_size(&p, &e, &cache, lens, SEQS, ATTN_PAGED_V1);
        ws = tu_alloc(bytes);
        CHECK_STATUS(attn_paged_decode(&p, &e, rq, rw, &cache, tables, MAXB, lens, SEQS,
                                       ATTN_PAGED_V1, NULL, ws, bytes), ATTN_OK);
        free(ws);
        CHECK_MSG(!memcmp(fwd, want, sizeof fwd), "kv %s isa %s: forward and paged decode "
                  "differ", attn_dtype_name(kv), attn_isa_name(isas[i]));
    }
    free(cmem);
}

TEST(forward_decodes_equal_paged_decode_on_every_isa) {
    tf_decodes_equal_paged_decode(ATTN_BF16);
    tf_decodes_equal_paged_decode(ATTN_INT8);
    tf_decodes_equal_paged_decode(ATTN_INT4);
}

#define TEST_FORWARD_LIST                                                                         \
    ATTN_TEST_ENTRY(forward_continuous_batching_simulation),                                      \
    ATTN_TEST_ENTRY(forward_encoder_decoder_and_encoder_only),                                    \
    ATTN_TEST_ENTRY(forward_rejects_bad_metadata_and_writes_nothing),                             \
    ATTN_TEST_ENTRY(forward_bf16_value_cache),                                                    \
    ATTN_TEST_ENTRY(forward_decodes_equal_paged_decode_on_every_isa)
