/* test_serve.c - the batch builder (attn_batch_build), copy-on-write carried by the metadata,
   and attn_forward's consistency checks with their messages (exec.error_msg). */

enum { TSV_H = 4, TSV_HK = 2, TSV_D = 16, TSV_BS = 4, TSV_BLOCKS = 24, TSV_MAXB = 8, TSV_REQS = 6,
       TSV_MAXT = TSV_MAXB * TSV_BS, TSV_STEP_TOKENS = 64 };
#define TSV_QW (TSV_H * TSV_D)
#define TSV_KW (TSV_HK * TSV_D)

/* A request: its sequence over the pool and its K/V history on the host (for the oracle). */
typedef struct tsv_req {
    attn_seq seq;
    int32_t table[TSV_MAXB];
    float k[TSV_MAXT * TSV_KW], v[TSV_MAXT * TSV_KW];
} tsv_req;

typedef struct tsv_world {
    attn_params p;
    attn_layer layer;
    attn_kv_cache cache;
    attn_block_pool pool;
    attn_batch batch;
    void *cmem, *pmem, *bmem;
    tsv_req req[TSV_REQS];
    uint64_t rng;
    /* the last step: rows in batch order */
    float q[TSV_STEP_TOKENS * TSV_QW], k[TSV_STEP_TOKENS * TSV_KW], v[TSV_STEP_TOKENS * TSV_KW];
    float out[TSV_STEP_TOKENS * TSV_QW];
    attn_metadata md;
    int n, who[TSV_REQS], num_new[TSV_REQS];
} tsv_world;

static int tsv_init(tsv_world *w) {
    memset(w, 0, sizeof *w);
    w->rng = 31;
    w->p.num_heads = TSV_H; w->p.num_kv_heads = TSV_HK; w->p.head_size = TSV_D;
    size_t cb = attn_kv_cache_bytes(TSV_BLOCKS, TSV_BS, TSV_HK, TSV_D, ATTN_F32);
    size_t pb = attn_block_pool_bytes(TSV_BLOCKS);
    size_t bb = attn_batch_bytes(TSV_REQS, TSV_STEP_TOKENS, TSV_MAXB);
    w->cmem = tu_alloc(cb); w->pmem = tu_alloc(pb); w->bmem = tu_alloc(bb);
    memset(w->cmem, 0x7f, cb);  /* stale blocks hold NaN-free junk that a missed copy exposes */
    if (attn_layer_init(&w->layer, &w->p, ATTN_DECODER, ATTN_BACKEND_SDPA) != ATTN_OK ||
        attn_kv_cache_init(&w->cache, TSV_BLOCKS, TSV_BS, TSV_HK, TSV_D, ATTN_F32, 1, 1, w->cmem,
                           cb) ||
        attn_block_pool_init(&w->pool, TSV_BLOCKS, TSV_BS, w->pmem, pb) ||
        attn_batch_init(&w->batch, TSV_REQS, TSV_STEP_TOKENS, TSV_MAXB, w->bmem, bb))
        return 0;
    for (int r = 0; r < TSV_REQS; r++) attn_seq_init(&w->req[r].seq, w->req[r].table, TSV_MAXB);
    return 1;
}

static void tsv_free(tsv_world *w) { free(w->cmem); free(w->pmem); free(w->bmem); }

/* Builds the step (requests who[i] with num_new[i] new tokens, in this batch order) and draws
   its rows; the host histories take the new K/V. Returns the builder's status. */
static attn_status tsv_build(tsv_world *w, const int *who, const int *num_new, int n) {
    attn_seq *seqs[TSV_REQS] = {NULL};
    int32_t nn[TSV_REQS] = {0};
    int64_t before[TSV_REQS];
    for (int i = 0; i < n; i++) {
        seqs[i] = &w->req[who[i]].seq; nn[i] = num_new[i]; before[i] = seqs[i]->len;
        w->who[i] = who[i]; w->num_new[i] = num_new[i];
    }
    w->n = n;
    attn_status st = attn_batch_build(&w->batch, &w->pool, seqs, nn, n, &w->md);
    if (st != ATTN_OK) return st;
    int t = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < num_new[i]; j++, t++) {
            tsv_req *r = &w->req[who[i]];
            for (int e = 0; e < TSV_QW; e++)
                w->q[t * TSV_QW + e] = attn_test_rand_uniform(&w->rng, -1, 1);
            for (int e = 0; e < TSV_KW; e++) {
                float kv = attn_test_rand_uniform(&w->rng, -1, 1);
                float vv = attn_test_rand_uniform(&w->rng, -1, 1);
                w->k[t * TSV_KW + e] = r->k[(before[i] + j) * TSV_KW + e] = kv;
                w->v[t * TSV_KW + e] = r->v[(before[i] + j) * TSV_KW + e] = vv;
            }
        }
    return ATTN_OK;
}

static attn_status tsv_forward(tsv_world *w, const attn_metadata *md, const attn_exec *e,
                              int64_t key_stride) {
    attn_rows rq = {w->q, ATTN_F32, 0}, rk = {w->k, ATTN_F32, key_stride};
    attn_rows rv = {w->v, ATTN_F32, 0}, ro = {w->out, ATTN_F32, 0};
    size_t bytes = attn_forward_workspace_size(&w->layer, &w->md, e);
    void *ws = tu_alloc(bytes ? bytes : 1);
    attn_status st = attn_forward(&w->layer, e, rq, rk, rv, &w->cache, md, ro, ws, bytes);
    free(ws);
    return st;
}

/* The step's output against the double-precision oracle over each request's history. */
static void tsv_check_output(tsv_world *w) {
    static double want[TSV_STEP_TOKENS * TSV_QW];
    int t = 0;
    for (int i = 0; i < w->n; i++) {
        tsv_req *r = &w->req[w->who[i]];
        int lq = w->num_new[i], lk = (int)r->seq.len;
        ref_attention(&w->p, 1, lq, lk, w->q + t * TSV_QW, TSV_QW, r->k, TSV_KW, r->v, TSV_KW,
                      want, NULL);
        CHECK_ALLCLOSE_D(w->out + t * TSV_QW, want, lq * TSV_QW, 2e-5, 2e-5);
        t += lq;
    }
}

/* One whole step through the builder; the output is checked. */
static void tsv_step(tsv_world *w, const int *who, const int *num_new, int n) {
    CHECK_STATUS(tsv_build(w, who, num_new, n), ATTN_OK);
    CHECK_STATUS(tsv_forward(w, &w->md, NULL, 0), ATTN_OK);
    tsv_check_output(w);
}

static int tsv_contains(const char *msg, const char *part) {
    if (!strstr(msg, part)) { printf("  message \"%s\" lacks \"%s\"\n", msg, part); return 0; }
    return 1;
}

/* Arrivals, chunked prefill, decodes, a fork whose copy-on-write is carried by the metadata,
   pool exhaustion reported before anything changes, preemption and release. */
TEST(serve_builder_steps_match_reference) {
    static tsv_world w;
    REQUIRE(tsv_init(&w));
    { int who[] = {0, 1}, nn[] = {6, 2}; tsv_step(&w, who, nn, 2); }   /* two prompts, 0 chunked */
    CHECK_EQ_INT(w.md.num_prefills, 2);
    CHECK_EQ_INT(w.md.num_decode_tokens, 0);
    { int who[] = {0, 1}, nn[] = {4, 1}; tsv_step(&w, who, nn, 2); }  /* last chunk; a decode */
    CHECK_EQ_INT(w.md.num_prefills, 1);
    CHECK_EQ_INT(w.md.num_decode_tokens, 1);
    CHECK_EQ_INT(w.md.context_lens[0], 6);
    /* fork 1 (3 tokens: a shared, partly filled block) into 2 */
    REQUIRE(attn_seq_fork(&w.pool, &w.req[1].seq, &w.req[2].seq) == ATTN_OK);
    memcpy(w.req[2].k, w.req[1].k, sizeof w.req[1].k);
    memcpy(w.req[2].v, w.req[1].v, sizeof w.req[1].v);
    { int who[] = {3, 1, 2}, nn[] = {5, 1, 1}; tsv_step(&w, who, nn, 3); }  /* new + 2 decodes */
    CHECK_EQ_INT(w.md.num_blocks_to_copy, 1);  /* 1 copied its block, then 2 wrote in place */
    CHECK_EQ_INT(w.md.num_prefills, 1);
    CHECK(w.req[1].seq.block_table[0] != w.req[2].seq.block_table[0]);
    /* the same step again and again: decodes only (a 1-token batch entry after them is none) */
    { int who[] = {0, 1, 2, 3}, nn[] = {1, 1, 1, 1}; tsv_step(&w, who, nn, 4); }
    CHECK_EQ_INT(w.md.num_prefills, 0);
    CHECK_EQ_INT(w.md.num_decode_tokens, 4);
    /* exhaustion: a long chunk for 4 needs more blocks than are free; nothing changes */
    int free_before = attn_block_pool_free_count(&w.pool);
    attn_seq s0 = w.req[0].seq, s4 = w.req[4].seq;
    int32_t t0[TSV_MAXB];
    memcpy(t0, w.req[0].table, sizeof t0);
    {
        int who[] = {4, 5, 0}, nn[] = {TSV_MAXT, TSV_MAXT - 2, 1};
        CHECK_STATUS(tsv_build(&w, who, nn, 3), ATTN_ERR_OUT_OF_BLOCKS);
        CHECK(tsv_contains(w.batch.error_msg,
                           "free blocks (copy-on-write included) but the pool has"));
    }
    CHECK_EQ_INT(attn_block_pool_free_count(&w.pool), free_before);
    CHECK(memcmp(&s0, &w.req[0].seq, sizeof s0) == 0 && memcmp(&s4, &w.req[4].seq, sizeof s4) == 0);
    CHECK(memcmp(t0, w.req[0].table, sizeof t0) == 0);
    /* preempt request 3 (recompute later), then the step fits */
    attn_seq_release(&w.pool, &w.req[3].seq);
    { int who[] = {4, 0}, nn[] = {TSV_MAXT - 2, 1}; tsv_step(&w, who, nn, 2); }
    /* 3 comes back: its prompt again (recomputed), then everything finishes */
    { int who[] = {3, 1, 2}, nn[] = {5, 1, 1}; tsv_step(&w, who, nn, 3); }
    for (int r = 0; r < TSV_REQS; r++) attn_seq_release(&w.pool, &w.req[r].seq);
    CHECK_EQ_INT(attn_block_pool_free_count(&w.pool), TSV_BLOCKS);
    tsv_free(&w);
}

/* The builder's own refusals carry messages and change nothing. */
TEST(serve_builder_rejects_with_messages) {
    static tsv_world w;
    REQUIRE(tsv_init(&w));
    attn_seq *seqs[2] = {&w.req[0].seq, &w.req[0].seq};
    int32_t nn[2] = {3, 2};
    attn_metadata md;
    CHECK_STATUS(attn_batch_build(&w.batch, &w.pool, seqs, nn, 2, &md), ATTN_ERR_INVALID_ARG);
    CHECK(tsv_contains(w.batch.error_msg, "seqs[0] and seqs[1] are the same sequence"));
    seqs[1] = &w.req[1].seq; nn[1] = 0;
    CHECK_STATUS(attn_batch_build(&w.batch, &w.pool, seqs, nn, 2, &md), ATTN_ERR_INVALID_ARG);
    CHECK(tsv_contains(w.batch.error_msg, "num_new[1] = 0"));
    nn[1] = TSV_MAXT + 1;
    CHECK_STATUS(attn_batch_build(&w.batch, &w.pool, seqs, nn, 2, &md), ATTN_ERR_OUT_OF_RANGE);
    CHECK(tsv_contains(w.batch.error_msg, "seqs[1] needs 9 blocks"));
    CHECK_EQ_INT(attn_block_pool_free_count(&w.pool), TSV_BLOCKS);
    CHECK(w.req[0].seq.len == 0 && w.req[1].seq.len == 0);
    nn[1] = 2;
    CHECK_STATUS(attn_batch_build(&w.batch, &w.pool, seqs, nn, 2, &md), ATTN_OK);
    CHECK(w.batch.error_msg[0] == '\0');
    CHECK_EQ_INT(md.num_seqs, 2);
    CHECK_EQ_INT(md.num_tokens, 5);
    CHECK(md.slot_mapping[3] == (int64_t)md.block_tables[TSV_MAXB] * TSV_BS);
    tsv_free(&w);
}

/* Thirteen mistakes of a hand-built (or hand-edited) step, each refused before anything is
   written, with the status and a message that names the field. The base step: a chunk over a
   cached prefix, a new prompt, then two decodes of a forked pair (one copy-on-write). */
TEST(serve_forward_mistakes_have_status_and_message) {
    static tsv_world w;
    static float cache_before[TSV_BLOCKS * TSV_BS * TSV_KW * 2];
    char msg[256];
    attn_exec ex; memset(&ex, 0, sizeof ex);
    ex.error_msg = msg; ex.error_msg_bytes = sizeof msg;
    REQUIRE(tsv_init(&w));
    { int who[] = {0, 2}, nn[] = {5, 6}; tsv_step(&w, who, nn, 2); }
    REQUIRE(attn_seq_fork(&w.pool, &w.req[2].seq, &w.req[3].seq) == ATTN_OK);
    memcpy(w.req[3].k, w.req[2].k, sizeof w.req[2].k);
    memcpy(w.req[3].v, w.req[2].v, sizeof w.req[2].v);
    {
        int who[] = {0, 1, 2, 3}, nn[] = {3, 4, 1, 1};
        REQUIRE(tsv_build(&w, who, nn, 4) == ATTN_OK);
    }
    REQUIRE(w.md.num_prefills == 2 && w.md.num_decode_tokens == 2 && w.md.num_blocks_to_copy == 1);
    size_t cbytes = sizeof cache_before;
    REQUIRE(cbytes == 2 * (size_t)TSV_BLOCKS * TSV_BS * TSV_KW * sizeof(float));
    memcpy(cache_before, w.cache.key, cbytes / 2);
    memcpy(cache_before + cbytes / 2 / sizeof(float), w.cache.value, cbytes / 2);
    int32_t lens[4], ctx[2], qsl[3], tables[4 * TSV_MAXB], swapped[4 * TSV_MAXB];
    memcpy(lens, w.md.seq_lens, sizeof lens); memcpy(ctx, w.md.context_lens, sizeof ctx);
    memcpy(qsl, w.md.query_start_loc, sizeof qsl); memcpy(tables, w.md.block_tables, sizeof tables);
    memcpy(swapped, tables + TSV_MAXB, TSV_MAXB * sizeof(int32_t));  /* rows 0 and 1 swapped */
    memcpy(swapped + TSV_MAXB, tables, TSV_MAXB * sizeof(int32_t));
    memcpy(swapped + 2 * TSV_MAXB, tables + 2 * TSV_MAXB, 2 * TSV_MAXB * sizeof(int32_t));
    attn_metadata base = w.md;
    base.seq_lens = lens; base.context_lens = ctx;
    base.query_start_loc = qsl; base.block_tables = tables;
    struct { const char *what; attn_status want; const char *part; } c[16];
    attn_metadata md[16];
    int64_t kstride[16];
    int nc = 0;
#define TSV_CASE(w_, st_, part_) (c[nc].what = (w_), c[nc].want = (st_), c[nc].part = (part_), \
                                 md[nc] = base, kstride[nc] = 0, nc++)
    /* the six that ran without a status; (c), attn_copy_blocks forgotten, is impossible with the
       builder (its md carries the copy: see the last call below and the steps test), and a
       hand-made copy list is checked (a pair twice here, missing pairs and a pair outside the
       cache below) */
    TSV_CASE("context_lens NULL with a cached prefix", ATTN_ERR_INVALID_ARG,
            "seq_lens[0] = 8 but its query length is 3 and context_lens is NULL");
    md[nc - 1].context_lens = NULL;
    TSV_CASE("a decode's seq_lens off by one", ATTN_ERR_INVALID_ARG,
            "slot_mapping[8] = ");
    md[nc - 1].seq_lens = NULL;  /* set below: lens with entry 3 lowered */
    TSV_CASE("a copy-on-write pair listed twice", ATTN_ERR_INVALID_ARG,
            "blocks_to_copy: a destination twice");
    md[nc - 1].num_blocks_to_copy = 2;  /* set below: the builder's pair twice */
    TSV_CASE("block_tables rows in request order", ATTN_ERR_INVALID_ARG,
             "but sequence 0's position 5 is at block_tables[0][1]");
    md[nc - 1].block_tables = swapped;
    TSV_CASE("max_blocks_per_seq != the row stride", ATTN_ERR_INVALID_ARG,
             "row stride max_blocks_per_seq = 7");
    md[nc - 1].max_blocks_per_seq = TSV_MAXB - 1;
    TSV_CASE("num_decode_tokens one too many", ATTN_ERR_INVALID_ARG,
            "num_seqs = 4 (declared) but num_prefills + num_decode_tokens = 2 + 3");
    md[nc - 1].num_decode_tokens = 3;
    /* the seven that were a bare "invalid argument" */
    TSV_CASE("wrong num_prefill_tokens", ATTN_ERR_INVALID_ARG,
            "query_start_loc[2] = 7 but num_prefill_tokens = 6");
    md[nc - 1].num_prefill_tokens = 6;
    TSV_CASE("NULL query_start_loc", ATTN_ERR_INVALID_ARG,
             "query_start_loc is NULL with num_prefills = 2");
    md[nc - 1].query_start_loc = NULL;
    TSV_CASE("NULL seq_lens", ATTN_ERR_INVALID_ARG, "seq_lens is NULL but context_lens is given");
    md[nc - 1].seq_lens = NULL;
    TSV_CASE("NULL block_tables", ATTN_ERR_INVALID_ARG,
             "block_tables is NULL but the step reads the cache");
    md[nc - 1].block_tables = NULL;
    TSV_CASE("key stride below Hk*D", ATTN_ERR_INVALID_ARG,
            "key.stride = 16 is below num_kv_heads * head_size = 2 * 16 = 32");
    kstride[nc - 1] = TSV_D;
    TSV_CASE("prefill seq_lens without the context", ATTN_ERR_INVALID_ARG,
            "seq_lens[0] = 3 but context_lens[0] + query length = 5 + 3");
    md[nc - 1].seq_lens = NULL;  /* set below */
    TSV_CASE("missing copy-on-write buffers (a count, no pairs)", ATTN_ERR_INVALID_ARG,
            "blocks_to_copy is NULL with num_blocks_to_copy = 1");
    md[nc - 1].blocks_to_copy = NULL;
    /* and a copy outside the cache */
    TSV_CASE("a copy-on-write pair outside the cache", ATTN_ERR_OUT_OF_RANGE,
            "blocks_to_copy[0] = (");
#undef TSV_CASE
    int32_t lens_dec[4], lens_pre[4];
    memcpy(lens_dec, lens, sizeof lens); lens_dec[3]--;
    memcpy(lens_pre, lens, sizeof lens); lens_pre[0] = 3;
    md[1].seq_lens = lens_dec;
    md[11].seq_lens = lens_pre;
    int64_t bad_pair[2] = {0, TSV_BLOCKS};
    md[13].blocks_to_copy = bad_pair;
    int64_t twice[4] = {base.blocks_to_copy[0], base.blocks_to_copy[1], base.blocks_to_copy[0],
                        base.blocks_to_copy[1]};
    md[2].blocks_to_copy = twice;
    for (int i = 0; i < TSV_STEP_TOKENS * TSV_QW; i++) w.out[i] = 7.0f;
    for (int i = 0; i < nc; i++) {
        msg[0] = 'x'; msg[1] = '\0';
        attn_status st = tsv_forward(&w, &md[i], &ex, kstride[i]);
        if (st != c[i].want) printf("  case \"%s\": %s\n", c[i].what, attn_status_str(st));
        CHECK_STATUS(st, c[i].want);
        CHECK(tsv_contains(msg, c[i].part));
    }
    /* nothing was written: cache and output as before */
    CHECK_BITEQ(w.cache.key, cache_before, cbytes / 2);
    CHECK_BITEQ(w.cache.value, cache_before + cbytes / 2 / sizeof(float), cbytes / 2);
    for (int i = 0; i < TSV_STEP_TOKENS * TSV_QW; i++) CHECK_NEAR(w.out[i], 7.0, 0.0);
    /* attn_seq_append without copy-on-write buffers on a shared block: the status alone (the
       builder always passes them) */
    {
        int64_t slots[1];
        REQUIRE(attn_seq_fork(&w.pool, &w.req[2].seq, &w.req[4].seq) == ATTN_OK);
        CHECK_STATUS(attn_seq_append(&w.pool, &w.req[4].seq, 1, slots, NULL, NULL),
                     ATTN_ERR_INVALID_ARG);
        attn_seq_release(&w.pool, &w.req[4].seq);
    }
    /* the step as built: right, with the copy done by attn_forward (no attn_copy_blocks) */
    msg[0] = 'x'; msg[1] = '\0';
    CHECK_STATUS(tsv_forward(&w, &w.md, &ex, 0), ATTN_OK);
    CHECK(msg[0] == '\0');
    tsv_check_output(&w);
    tsv_free(&w);
}

/* Cross-attention: the encoder's K/V rows are written through cross_slot_mapping, checked
   against cross_block_tables like the decoder's slots. */
TEST(serve_forward_cross_slots_checked) {
    static tsv_world w;
    char msg[256];
    attn_exec ex; memset(&ex, 0, sizeof ex);
    ex.error_msg = msg; ex.error_msg_bytes = sizeof msg;
    REQUIRE(tsv_init(&w));
    attn_layer cross;
    REQUIRE(attn_layer_init(&cross, &w.p, ATTN_ENCODER_DECODER, ATTN_BACKEND_SDPA) == ATTN_OK);
    for (int i = 0; i < 5 * TSV_KW; i++) w.k[i] = w.v[i] = 0.01f * (float)(i % 13);
    for (int i = 0; i < 3 * TSV_QW; i++) w.q[i] = 0.02f * (float)(i % 7);
    int32_t qsl[2] = {0, 3}, esl[2] = {0, 5}, enc_lens[1] = {5}, ctab[2] = {2, 0};
    int64_t cslots[5] = {8, 9, 10, 11, 1};  /* position 4 belongs at block 0, offset 0 */
    attn_metadata md; memset(&md, 0, sizeof md);
    md.num_prefills = 1; md.num_prefill_tokens = 3; md.query_start_loc = qsl;
    md.encoder_seq_lens = enc_lens; md.encoder_start_loc = esl; md.num_encoder_tokens = 5;
    md.cross_slot_mapping = cslots; md.cross_block_tables = ctab; md.max_cross_blocks_per_seq = 2;
    attn_rows rq = {w.q, ATTN_F32, 0}, rk = {w.k, ATTN_F32, 0}, rv = {w.v, ATTN_F32, 0};
    attn_rows ro = {w.out, ATTN_F32, 0};
    size_t bytes = attn_forward_workspace_size(&cross, &md, &ex);
    void *ws = tu_alloc(bytes ? bytes : 1);
    CHECK_STATUS(attn_forward(&cross, &ex, rq, rk, rv, &w.cache, &md, ro, ws, bytes),
                 ATTN_ERR_INVALID_ARG);
    CHECK(tsv_contains(msg, "cross_slot_mapping[4] = 1 but sequence 0's position 4 is at "
                            "cross_block_tables[0][1] * 4 + 0 = 0"));
    cslots[4] = 0;
    CHECK_STATUS(attn_forward(&cross, &ex, rq, rk, rv, &w.cache, &md, ro, ws, bytes), ATTN_OK);
    CHECK(msg[0] == '\0');
    free(ws);
    tsv_free(&w);
}

#define TEST_SERVE_LIST                                                                           \
    ATTN_TEST_ENTRY(serve_builder_steps_match_reference),                                        \
    ATTN_TEST_ENTRY(serve_builder_rejects_with_messages),                                        \
    ATTN_TEST_ENTRY(serve_forward_mistakes_have_status_and_message),                            \
    ATTN_TEST_ENTRY(serve_forward_cross_slots_checked)
