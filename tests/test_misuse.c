/* test_misuse.c - mistakes a serving loop makes that the library can see (issue 56): a
   sequence whose length is not what the caller believes, a table that names a freed block or
   one block twice, a NULL slot_mapping outside a profiling run, a step past the batch's
   capacities; each refusal names its field and changes nothing. Also every refusal of
   attn_forward, the builder, attn_batch_init and the sequence functions carries a message, and
   attn_forward_workspace_bound covers every step within its capacities. Uses test_serve.c's
   world (tsv_*). */

/* Everything a refused call must leave as it was: pool, sequences, tables, cache. */
typedef struct tmu_snap {
    int32_t refcount[TSV_BLOCKS], free_ids[TSV_BLOCKS];
    attn_block_pool pool;
    tsv_req req[TSV_REQS];
    float key[TSV_BLOCKS * TSV_BS * TSV_KW], value[TSV_BLOCKS * TSV_BS * TSV_KW];
} tmu_snap;

/* Default settings that write the failing check's message into msg (msg_bytes). */
static attn_exec tmu_exec_with_msg(char *msg, size_t msg_bytes) {
    attn_exec ex;
    memset(&ex, 0, sizeof ex);
    ex.error_msg = msg; ex.error_msg_bytes = msg_bytes;
    return ex;
}

static void tmu_take(const tsv_world *w, tmu_snap *s) {
    memcpy(s->refcount, w->pool.refcount, sizeof s->refcount);
    memcpy(s->free_ids, w->pool.free_ids, sizeof s->free_ids);
    s->pool = w->pool;
    memcpy(s->req, w->req, sizeof s->req);
    memcpy(s->key, w->cache.key, sizeof s->key);
    memcpy(s->value, w->cache.value, sizeof s->value);
}

static int tmu_same(const tsv_world *w, const tmu_snap *s) {
    int same = !memcmp(s->refcount, w->pool.refcount, sizeof s->refcount) &&
               !memcmp(s->free_ids, w->pool.free_ids, sizeof s->free_ids) &&
               !memcmp(&s->pool, &w->pool, sizeof s->pool) &&
               !memcmp(s->key, w->cache.key, sizeof s->key) &&
               !memcmp(s->value, w->cache.value, sizeof s->value);
    for (int r = 0; r < TSV_REQS; r++)  /* the structs (their table pointers) and tables */
        same = same && !memcmp(&s->req[r].seq, &w->req[r].seq, sizeof s->req[r].seq) &&
               !memcmp(s->req[r].table, w->req[r].table, sizeof s->req[r].table);
    if (!same) printf("  a refused call changed the pool, a sequence or the cache\n");
    return same;
}

static attn_status tmu_build(tsv_world *w, const int *who, const int32_t *nn, const int64_t *expect,
                             int n) {
    attn_seq *seqs[TSV_REQS];
    for (int i = 0; i < n; i++) seqs[i] = &w->req[who[i]].seq;
    return attn_batch_build_checked(&w->batch, &w->pool, seqs, expect, nn, n, &w->md);
}

/* The three ways the caller's idea of a length drifts from the sequence's: used after release,
   one step built twice, a token appended by hand as well. */
TEST(misuse_builder_checks_expected_lengths) {
    static tsv_world w;
    static tmu_snap snap;
    REQUIRE(tsv_init(&w));
    int who[2] = {0, 1};
    int32_t nn[2] = {5, 3};
    int64_t expect[2] = {0, 0};
    REQUIRE(tmu_build(&w, who, nn, expect, 2) == ATTN_OK);
    expect[0] = 5; expect[1] = 3;
    nn[0] = nn[1] = 1;
    /* built twice for one step: the second build sees lengths 5 and 3 + 1 */
    REQUIRE(tmu_build(&w, who, nn, expect, 2) == ATTN_OK);
    tmu_take(&w, &snap);
    CHECK_STATUS(tmu_build(&w, who, nn, expect, 2), ATTN_ERR_INVALID_ARG);
    CHECK(tsv_contains(w.batch.error_msg, "seqs[0]->len = 6 but expect_len[0] = 5"));
    CHECK(tmu_same(&w, &snap));
    expect[0] = 6; expect[1] = 4;
    /* a token appended by hand as well */
    int64_t slot;
    REQUIRE(attn_seq_append(&w.pool, &w.req[1].seq, 1, &slot, NULL, NULL) == ATTN_OK);
    tmu_take(&w, &snap);
    CHECK_STATUS(tmu_build(&w, who, nn, expect, 2), ATTN_ERR_INVALID_ARG);
    CHECK(tsv_contains(w.batch.error_msg, "seqs[1]->len = 5 but expect_len[1] = 4"));
    CHECK(tmu_same(&w, &snap));
    /* used after release */
    attn_seq_release(&w.pool, &w.req[0].seq);
    expect[1] = 5;
    tmu_take(&w, &snap);
    CHECK_STATUS(tmu_build(&w, who, nn, expect, 2), ATTN_ERR_INVALID_ARG);
    CHECK(tsv_contains(w.batch.error_msg, "seqs[0]->len = 0 but expect_len[0] = 6"));
    CHECK(tmu_same(&w, &snap));
    expect[0] = 0;
    CHECK_STATUS(tmu_build(&w, who, nn, expect, 2), ATTN_OK);  /* what the caller now knows */
    CHECK(w.batch.error_msg[0] == '\0');
    tsv_free(&w);
}

/* A pool re-initialised under live sequences, and a table that names a block twice: the
   builder refuses both, naming the sequence, the entry and the block. */
TEST(misuse_builder_refuses_blocks_not_in_use_or_twice) {
    static tsv_world w;
    static tmu_snap snap;
    REQUIRE(tsv_init(&w));
    int who[2] = {0, 1};
    int32_t nn[2] = {9, 6};
    REQUIRE(tmu_build(&w, who, nn, NULL, 2) == ATTN_OK);  /* 0: blocks 0-2, 1: blocks 3-4 */
    nn[0] = nn[1] = 1;
    /* a block id written twice into one table by hand */
    int32_t saved = w.req[0].table[1];
    w.req[0].table[1] = w.req[0].table[0];
    attn_seq_release(&w.pool, &w.req[2].seq);  /* (empty: nothing) */
    tmu_take(&w, &snap);
    CHECK_STATUS(tmu_build(&w, who, nn, NULL, 2), ATTN_ERR_INVALID_ARG);
    char want[96];
    snprintf(want, sizeof want, "seqs[0]->block_table names block %d twice (entries 0 and 1)",
             (int)w.req[0].table[0]);
    CHECK(tsv_contains(w.batch.error_msg, want));
    CHECK(tmu_same(&w, &snap));
    w.req[0].table[1] = saved;
    /* the pool re-initialised while 0 and 1 hold blocks: every block is free again */
    REQUIRE(attn_block_pool_init(&w.pool, TSV_BLOCKS, TSV_BS, w.pmem,
                                 attn_block_pool_bytes(TSV_BLOCKS)) == ATTN_OK);
    tmu_take(&w, &snap);
    CHECK_STATUS(tmu_build(&w, who, nn, NULL, 2), ATTN_ERR_INVALID_ARG);
    snprintf(want, sizeof want, "seqs[0]->block_table[0] = %d is not a block in use",
             (int)w.req[0].table[0]);
    CHECK(tsv_contains(w.batch.error_msg, want));
    CHECK(tmu_same(&w, &snap));
    tsv_free(&w);
}

/* attn_forward on a step whose md.pool (the builder's) no longer holds a block a row reads, or
   whose row names a block twice: refused, cache and output untouched. */
TEST(misuse_forward_refuses_blocks_not_in_use_or_twice) {
    static tsv_world w;
    static tmu_snap snap;
    char msg[256];
    attn_exec ex = tmu_exec_with_msg(msg, sizeof msg);
    REQUIRE(tsv_init(&w));
    { int who[] = {0, 1}, nn[] = {9, 6}; tsv_step(&w, who, nn, 2); }
    { int who[] = {0, 1}, nn[] = {1, 1}; REQUIRE(tsv_build(&w, who, nn, 2) == ATTN_OK); }
    CHECK(w.md.pool == &w.pool);
    for (int i = 0; i < TSV_STEP_TOKENS * TSV_QW; i++) w.out[i] = 7.0f;
    int32_t tables[2 * TSV_MAXB];
    memcpy(tables, w.md.block_tables, sizeof tables);
    attn_metadata md = w.md;
    md.block_tables = tables;
    tables[TSV_MAXB + 1] = tables[TSV_MAXB];  /* sequence 1 reads its first block twice */
    md.slot_mapping = NULL; md.profile_run = 1;  /* (its slot would name the row's error first) */
    tmu_take(&w, &snap);
    CHECK_STATUS(tsv_forward(&w, &md, &ex, 0), ATTN_ERR_INVALID_ARG);
    CHECK(tsv_contains(msg, "block_tables[1] names block"));
    CHECK(tsv_contains(msg, "twice (entries 0 and 1)"));
    CHECK(tmu_same(&w, &snap));
    /* the same step after sequence 1 was released (its blocks freed): caught only with the pool */
    attn_seq_release(&w.pool, &w.req[1].seq);
    tmu_take(&w, &snap);
    CHECK_STATUS(tsv_forward(&w, &w.md, &ex, 0), ATTN_ERR_INVALID_ARG);
    CHECK(tsv_contains(msg, "is not a block in use in md->pool"));
    CHECK(tmu_same(&w, &snap));
    /* a pool whose block size is not the cache's */
    attn_block_pool other = w.pool;
    other.block_size = TSV_BS * 2;
    md = w.md; md.pool = &other;
    CHECK_STATUS(tsv_forward(&w, &md, &ex, 0), ATTN_ERR_INVALID_ARG);
    CHECK(tsv_contains(msg, "cache block_size 4 but the pool's block_size 8"));
    CHECK(tmu_same(&w, &snap));
    for (int i = 0; i < TSV_STEP_TOKENS * TSV_QW; i++) CHECK_NEAR(w.out[i], 7.0, 0.0);
    tsv_free(&w);
}

/* slot_mapping NULL on a step with decodes: refused unless md.profile_run says it is one; the
   profiling run writes nothing. */
TEST(misuse_null_slot_mapping_needs_profile_run) {
    static tsv_world w;
    static tmu_snap snap;
    char msg[256];
    attn_exec ex = tmu_exec_with_msg(msg, sizeof msg);
    REQUIRE(tsv_init(&w));
    { int who[] = {0}, nn[] = {6}; tsv_step(&w, who, nn, 1); }
    { int who[] = {0}, nn[] = {1}; REQUIRE(tsv_build(&w, who, nn, 1) == ATTN_OK); }
    attn_metadata md = w.md;
    md.slot_mapping = NULL;
    for (int i = 0; i < TSV_STEP_TOKENS * TSV_QW; i++) w.out[i] = 7.0f;
    tmu_take(&w, &snap);
    CHECK_STATUS(tsv_forward(&w, &md, &ex, 0), ATTN_ERR_INVALID_ARG);
    CHECK(tsv_contains(msg, "slot_mapping is NULL on a step that reads the cache"));
    CHECK(tsv_contains(msg, "md->profile_run = 1"));
    CHECK(tmu_same(&w, &snap));
    for (int i = 0; i < TSV_QW; i++) CHECK_NEAR(w.out[i], 7.0, 0.0);
    md.profile_run = 1;
    CHECK_STATUS(tsv_forward(&w, &md, &ex, 0), ATTN_OK);
    CHECK(tmu_same(&w, &snap));  /* nothing written */
    tsv_free(&w);
}

/* Steps past the batch's capacities: ATTN_ERR_CAPACITY, whose text says so. */
TEST(misuse_builder_capacity_status) {
    static tsv_world w;
    static tmu_snap snap;
    REQUIRE(tsv_init(&w));
    CHECK(strstr(attn_status_str(ATTN_ERR_CAPACITY), "capacity") != NULL);
    int who[TSV_REQS] = {0, 1, 2, 3, 4, 5};
    int32_t nn[TSV_REQS] = {20, 20, 20, 20, 1, 1};
    tmu_take(&w, &snap);
    CHECK_STATUS(tmu_build(&w, who, nn, NULL, 4), ATTN_ERR_CAPACITY);  /* 80 > max_tokens 64 */
    CHECK(tsv_contains(w.batch.error_msg, "max_tokens = 64"));
    CHECK(tmu_same(&w, &snap));
    attn_batch small;
    static char mem[1 << 14];
    REQUIRE(attn_batch_init(&small, 2, 64, 2, mem, sizeof mem) == ATTN_OK);
    attn_seq *seqs[3] = {&w.req[0].seq, &w.req[1].seq, &w.req[2].seq};
    attn_metadata md;
    CHECK_STATUS(attn_batch_build(&small, &w.pool, seqs, nn, 3, &md), ATTN_ERR_CAPACITY);
    CHECK(tsv_contains(small.error_msg, "max_seqs = 2"));
    CHECK_STATUS(attn_batch_build(&small, &w.pool, seqs, nn, 1, &md), ATTN_ERR_CAPACITY);
    CHECK(tsv_contains(small.error_msg, "max_blocks_per_seq = 2"));  /* 20 tokens: 5 blocks */
    CHECK(tmu_same(&w, &snap));
    tsv_free(&w);
}

/* Every refusal of attn_forward from one valid step, one field broken at a time: each returns
   an error and a message (the check that failed). */
TEST(misuse_every_forward_refusal_has_a_message) {
    static tsv_world w;
    static tmu_snap snap;
    static char ws[1 << 20];
    char msg[256];
    REQUIRE(tsv_init(&w));
    { int who[] = {0, 1}, nn[] = {9, 6}; tsv_step(&w, who, nn, 2); }
    REQUIRE(attn_seq_fork(&w.pool, &w.req[1].seq, &w.req[2].seq) == ATTN_OK);
    { int who[] = {3, 0, 1, 2}, nn[] = {5, 3, 1, 1}; REQUIRE(tsv_build(&w, who, nn, 4) == ATTN_OK); }
    REQUIRE(w.md.num_prefills == 2 && w.md.num_decode_tokens == 2 && w.md.num_blocks_to_copy == 1);
    int32_t lens[4], ctx[2], qsl[3], tab[4 * TSV_MAXB], lens_neg[4], ctx_neg[2];
    int64_t slots[10], cow[4];
    memcpy(lens, w.md.seq_lens, sizeof lens); memcpy(ctx, w.md.context_lens, sizeof ctx);
    memcpy(qsl, w.md.query_start_loc, sizeof qsl); memcpy(tab, w.md.block_tables, sizeof tab);
    memcpy(slots, w.md.slot_mapping, sizeof slots); memcpy(cow, w.md.blocks_to_copy, 2 * 8);
    int32_t lens_ctx[4];
    memcpy(lens_neg, lens, sizeof lens); lens_neg[3] = -1;
    memcpy(lens_ctx, lens, sizeof lens); lens_ctx[0]++;
    memcpy(ctx_neg, ctx, sizeof ctx); ctx_neg[1] = -1;
    attn_metadata base = w.md;
    base.seq_lens = lens; base.context_lens = ctx; base.query_start_loc = qsl;
    base.block_tables = tab; base.slot_mapping = slots; base.blocks_to_copy = cow;
    attn_layer layer = w.layer;
    attn_kv_cache cache = w.cache;
    attn_block_pool other_pool = w.pool;
    int32_t qsl_bad0[3] = {1, 5, 8}, qsl_down[3] = {0, 9, 8}, qsl_sum[3] = {0, 5, 7};
    int32_t tab_out[4 * TSV_MAXB], tab_twice[4 * TSV_MAXB], tab_free[4 * TSV_MAXB];
    memcpy(tab_out, tab, sizeof tab); tab_out[TSV_MAXB] = TSV_BLOCKS;       /* row 1 entry 0 */
    memcpy(tab_twice, tab, sizeof tab); tab_twice[TSV_MAXB + 1] = tab[TSV_MAXB];
    memcpy(tab_free, tab, sizeof tab);
    tab_free[3 * TSV_MAXB] = TSV_BLOCKS - 1;  /* the last block: never handed out here */
    REQUIRE(w.pool.refcount[TSV_BLOCKS - 1] == 0);
    int64_t slots_out[10], slots_wrong[10], cow_out[2] = {0, TSV_BLOCKS}, cow_twice[4];
    memcpy(slots_out, slots, sizeof slots); slots_out[0] = (int64_t)TSV_BLOCKS * TSV_BS;
    memcpy(slots_wrong, slots, sizeof slots); slots_wrong[0] ^= 1;
    memcpy(cow_twice, cow, 2 * 8); memcpy(cow_twice + 2, cow, 2 * 8);
    enum { F_NONE, F_LAYER_NULL, F_MD_NULL, F_PARAMS, F_TYPE, F_NEG_COUNT, F_QSL_NULL, F_QSL0,
           F_QSL_DOWN, F_QSL_SUM, F_NO_PREFILL_TOKENS, F_COPY_NULL, F_COPY_NO_CACHE,
           F_NUM_SEQS, F_NUM_TOKENS, F_CTX_NEG, F_SEQ_LEN_CTX, F_SEQ_LENS_NULL, F_DECODE_LEN0,
           F_NO_CACHE, F_TABLES_NULL, F_EXEC_THREADS, F_EXEC_ISA, F_EXEC_GEMM, F_EXEC_ISA_MISSING,
           F_Q_DTYPE, F_OUT_STRIDE, F_KEY_STRIDE, F_VALUE_DTYPE, F_WS_SMALL, F_WS_NULL,
           F_CACHE_BAD, F_CACHE_HEADS, F_CACHE_HEAD_SIZE, F_POOL_BAD, F_POOL_BS, F_POOL_BIG,
           F_MAXB_NEG, F_LEN_PAST_TABLE, F_BLOCK_OUT, F_BLOCK_TWICE, F_BLOCK_FREE,
           F_SLOTS_NULL, F_KEY_NULL, F_QUERY_NULL, F_OUT_NULL, F_SLOT_OUT, F_SLOT_WRONG,
           F_COPY_OUT, F_COPY_TWICE, F_DECODE_ENC_ONLY, F_COUNT };
    int refused = 0;
    for (int f = 0; f < F_COUNT; f++) {
        attn_metadata md = base;
        attn_layer L = layer;
        attn_kv_cache c = cache;
        attn_exec ex = tmu_exec_with_msg(msg, sizeof msg);
        attn_rows rq = {w.q, ATTN_F32, 0}, rk = {w.k, ATTN_F32, 0};
        attn_rows rv = {w.v, ATTN_F32, 0}, ro = {w.out, ATTN_F32, 0};
        const attn_layer *lp = &L;
        const attn_metadata *mp = &md;
        attn_kv_cache *cp = &c;
        void *wsp = ws;
        size_t wsb = sizeof ws;
        other_pool = w.pool;
        switch (f) {
            case F_NONE: break;
            case F_LAYER_NULL: lp = NULL; break;
            case F_MD_NULL: mp = NULL; break;
            case F_PARAMS: L.params.num_kv_heads = 3; break;
            case F_TYPE: L.type = (attn_type)9; break;
            case F_NEG_COUNT: md.num_decode_tokens = -1; break;
            case F_QSL_NULL: md.query_start_loc = NULL; break;
            case F_QSL0: md.query_start_loc = qsl_bad0; break;
            case F_QSL_DOWN: md.query_start_loc = qsl_down; break;
            case F_QSL_SUM: md.query_start_loc = qsl_sum; break;
            case F_NO_PREFILL_TOKENS: md.num_prefills = 0; md.num_seqs = 0; break;
            case F_COPY_NULL: md.blocks_to_copy = NULL; break;
            case F_COPY_NO_CACHE: cp = NULL; break;
            case F_NUM_SEQS: md.num_seqs = 5; break;
            case F_NUM_TOKENS: md.num_tokens = 11; break;
            case F_CTX_NEG: md.context_lens = ctx_neg; break;
            case F_SEQ_LEN_CTX: md.seq_lens = lens_ctx; break;
            case F_SEQ_LENS_NULL: md.seq_lens = NULL; break;
            case F_DECODE_LEN0: lens_neg[3] = 0; md.seq_lens = lens_neg; break;
            case F_NO_CACHE: md.num_blocks_to_copy = 0; md.blocks_to_copy = NULL; cp = NULL;
                break;
            case F_TABLES_NULL: md.block_tables = NULL; break;
            case F_EXEC_THREADS: ex.num_threads = -1; break;
            case F_EXEC_ISA: ex.isa = (attn_isa)77; break;
            case F_EXEC_GEMM: ex.gemm = (attn_gemm)5; break;
            case F_EXEC_ISA_MISSING:
                ex.isa = attn_isa_supported(ATTN_ISA_NEON) ? ATTN_ISA_AVX2 : ATTN_ISA_NEON; break;
            case F_Q_DTYPE: rq.dtype = ATTN_FP8_E4M3; break;
            case F_OUT_STRIDE: ro.stride = 5; break;
            case F_KEY_STRIDE: rk.stride = 5; break;
            case F_VALUE_DTYPE: rv.dtype = (attn_dtype)42; break;
            case F_WS_SMALL: wsb = 64; break;
            case F_WS_NULL: wsp = NULL; break;
            case F_CACHE_BAD: c.value = NULL; break;
            case F_CACHE_HEADS: c.num_kv_heads = 1; break;
            case F_CACHE_HEAD_SIZE: c.head_size = 8; break;
            case F_POOL_BAD: other_pool.refcount = NULL; md.pool = &other_pool; break;
            case F_POOL_BS: other_pool.block_size = 2; md.pool = &other_pool; break;
            case F_POOL_BIG: other_pool.num_blocks = TSV_BLOCKS + 1; md.pool = &other_pool; break;
            case F_MAXB_NEG: md.max_blocks_per_seq = -1; break;
            case F_LEN_PAST_TABLE: md.max_blocks_per_seq = 2; break;
            case F_BLOCK_OUT: md.block_tables = tab_out; break;
            case F_BLOCK_TWICE: md.block_tables = tab_twice; break;
            case F_BLOCK_FREE: md.block_tables = tab_free; md.slot_mapping = NULL;
                md.profile_run = 1; break;
            case F_SLOTS_NULL: md.slot_mapping = NULL; break;
            case F_KEY_NULL: rk.data = NULL; break;
            case F_QUERY_NULL: rq.data = NULL; break;
            case F_OUT_NULL: ro.data = NULL; break;
            case F_SLOT_OUT: md.slot_mapping = slots_out; break;
            case F_SLOT_WRONG: md.slot_mapping = slots_wrong; break;
            case F_COPY_OUT: md.blocks_to_copy = cow_out; break;
            case F_COPY_TWICE: md.blocks_to_copy = cow_twice; md.num_blocks_to_copy = 2; break;
            case F_DECODE_ENC_ONLY: L.type = ATTN_ENCODER_ONLY; md.context_lens = NULL; break;
        }
        tmu_take(&w, &snap);
        msg[0] = '\0';
        attn_status st = attn_forward(lp, &ex, rq, rk, rv, cp, mp, ro, wsp, wsb);
        if (f == F_NONE) { CHECK_STATUS(st, ATTN_OK); continue; }
        refused++;
        CHECK_MSG(st != ATTN_OK, "case %d was not refused", f);
        CHECK_MSG(msg[0] != '\0', "case %d (%s) has no message", f, attn_status_str(st));
        CHECK_MSG(strstr(msg, ": invalid argument") == NULL,
                  "case %d has only the status text: \"%s\"", f, msg);
        CHECK(tmu_same(&w, &snap));
        if (getenv("ATTN_TEST_PRINT_REFUSALS"))  /* the list in the closing note */
            printf("  %2d %-26s %s\n", f, attn_status_str(st), msg);
    }
    CHECK_EQ_INT(refused, F_COUNT - 1);
    tsv_free(&w);
}

/* Every refusal of the builder, attn_batch_init, attn_seq_append and attn_seq_fork carries a
   message (batch.error_msg, pool.error_msg) and changes nothing. */
TEST(misuse_every_builder_and_sequence_refusal_has_a_message) {
    static tsv_world w;
    static tmu_snap snap;
    char pmsg[200];
    REQUIRE(tsv_init(&w));
    { int who[] = {0, 1}, nn[] = {6, 5}; tsv_step(&w, who, nn, 2); }
    REQUIRE(attn_seq_fork(&w.pool, &w.req[1].seq, &w.req[2].seq) == ATTN_OK);
    w.pool.error_msg = pmsg; w.pool.error_msg_bytes = sizeof pmsg;
    attn_metadata md;
    int who[4] = {0, 1, 2, 3};
    int32_t nn[4] = {2, 1, 1, 1};
    int64_t expect[4] = {6, 5, 5, 1};  /* 3 is empty: len 0 */
    enum { B_BATCH_NULL, B_BATCH_RAW, B_MD_NULL, B_POOL_NULL, B_N_NEG, B_SEQS_NULL, B_N_CAP,
           B_SEQ_NULL, B_SEQ_BAD, B_NUM_NEW0, B_EXPECT, B_BLOCK_FREE, B_BLOCK_TWICE, B_SAME,
           B_INT32, B_TABLE_FULL, B_BATCH_BLOCKS, B_TOKENS, B_OUT_OF_BLOCKS, B_COUNT };
    attn_batch raw;
    memset(&raw, 0, sizeof raw);
    int64_t big_slots[TSV_MAXT];
    for (int b = 0; b < B_COUNT; b++) {
        attn_seq *seqs[4];
        attn_seq bad, *bp = &bad;
        for (int i = 0; i < 4; i++) seqs[i] = &w.req[who[i]].seq;
        int n = 4;
        int32_t nn2[4];
        memcpy(nn2, nn, sizeof nn2);
        attn_batch *batch = &w.batch;
        attn_block_pool *pool = &w.pool;
        attn_metadata *mdp = &md;
        attn_seq *const *sp = seqs;
        int32_t saved = w.req[1].table[1];
        int64_t saved_len = w.req[3].seq.len;
        switch (b) {
            case B_BATCH_NULL: batch = NULL; break;
            case B_BATCH_RAW: batch = &raw; break;
            case B_MD_NULL: mdp = NULL; break;
            case B_POOL_NULL: pool = NULL; break;
            case B_N_NEG: n = -1; break;
            case B_SEQS_NULL: sp = NULL; break;
            case B_N_CAP: n = TSV_REQS + 1; break;
            case B_SEQ_NULL: seqs[2] = NULL; break;
            case B_SEQ_BAD: bad = w.req[3].seq; bad.len = 99; seqs[3] = bp; break;
            case B_NUM_NEW0: nn2[1] = 0; break;
            case B_EXPECT: break;
            case B_BLOCK_FREE: w.req[1].table[1] = TSV_BLOCKS - 1; break;
            case B_BLOCK_TWICE: w.req[1].table[1] = w.req[1].table[0]; break;
            case B_SAME: seqs[3] = seqs[0]; break;
            case B_INT32: nn2[0] = 0x7fffffff; break;
            case B_TABLE_FULL: nn2[3] = TSV_MAXT + 1; break;
            case B_BATCH_BLOCKS: n = 1; nn2[0] = 2; break;  /* the small batch below */
            case B_TOKENS: nn2[0] = nn2[1] = nn2[2] = 20; nn2[3] = 5; break;
            case B_OUT_OF_BLOCKS:  /* 4 and 5 hold 16 of the 20 free blocks; the step needs 9 */
                REQUIRE(attn_seq_append(&w.pool, &w.req[4].seq, TSV_MAXT, big_slots, NULL,
                                        NULL) == ATTN_OK);
                REQUIRE(attn_seq_append(&w.pool, &w.req[5].seq, TSV_MAXT, big_slots, NULL,
                                        NULL) == ATTN_OK);
                nn2[3] = TSV_MAXT - 1; break;
        }
        static char small_mem[1 << 12];
        attn_batch small;
        if (b == B_BATCH_BLOCKS) {
            REQUIRE(attn_batch_init(&small, 4, 64, 1, small_mem, sizeof small_mem) == ATTN_OK);
            batch = &small;
        }
        tmu_take(&w, &snap);
        if (b == B_BATCH_RAW) raw.error_msg[0] = 'x';
        attn_status st = attn_batch_build_checked(batch, pool, sp, b == B_EXPECT ? expect : NULL,
                                                  nn2, n, mdp);
        CHECK_MSG(st != ATTN_OK, "builder case %d was not refused", b);
        const char *msg = batch ? batch->error_msg : "(no batch: the status alone)";
        CHECK_MSG(msg[0] != '\0', "builder case %d (%s) has no message", b, attn_status_str(st));
        CHECK(tmu_same(&w, &snap));
        w.req[1].table[1] = saved;
        w.req[3].seq.len = saved_len;
        if (b == B_OUT_OF_BLOCKS) {
            CHECK_STATUS(st, ATTN_ERR_OUT_OF_BLOCKS);
            attn_seq_release(&w.pool, &w.req[4].seq);
            attn_seq_release(&w.pool, &w.req[5].seq);
        }
        if (getenv("ATTN_TEST_PRINT_REFUSALS"))
            printf("  build %2d %-26s %s\n", b, attn_status_str(st), msg);
    }
    /* attn_batch_init: messages in the batch it was given */
    static char mem[1 << 12];
    attn_batch nb;
    CHECK_STATUS(attn_batch_init(&nb, 0, 4, 4, mem, sizeof mem), ATTN_ERR_INVALID_ARG);
    CHECK(tsv_contains(nb.error_msg, "max_seqs = 0"));
    CHECK_STATUS(attn_batch_init(&nb, 4, 4, 4, NULL, sizeof mem), ATTN_ERR_INVALID_ARG);
    CHECK(tsv_contains(nb.error_msg, "mem is NULL"));
    CHECK_STATUS(attn_batch_init(&nb, 4, 4, 4, mem, 8), ATTN_ERR_WORKSPACE_TOO_SMALL);
    CHECK(tsv_contains(nb.error_msg, "bytes = 8 but attn_batch_bytes gives"));
    CHECK_STATUS(attn_batch_init(&nb, 0x7fffffff, 4, 0x7fffffff, mem, sizeof mem),
                 ATTN_ERR_INVALID_ARG);
    CHECK(tsv_contains(nb.error_msg, "the size overflows"));
    /* attn_seq_append and attn_seq_fork: pool.error_msg */
    int64_t slots[64], pair[1][2];
    int ncow;
    attn_seq empty;
    int32_t small_table[1];
    REQUIRE(attn_seq_init(&empty, small_table, 1) == ATTN_OK);
    tmu_take(&w, &snap);
#define TMU_SEQ(call_, st_, part_) do { pmsg[0] = '\0'; CHECK_STATUS(call_, st_); \
        CHECK(tsv_contains(pmsg, part_)); CHECK(tmu_same(&w, &snap)); \
        if (getenv("ATTN_TEST_PRINT_REFUSALS")) printf("  seq %-26s %s\n", #st_, pmsg); } while (0)
    attn_seq bad = w.req[0].seq;
    bad.len = 1;
    attn_block_pool nopool; memset(&nopool, 0, sizeof nopool);
    TMU_SEQ(attn_seq_append(&nopool, &w.req[0].seq, 1, slots, pair, &ncow), ATTN_ERR_INVALID_ARG,
            "");  /* no pool: no buffer to write to */
    TMU_SEQ(attn_seq_append(&w.pool, NULL, 1, slots, pair, &ncow), ATTN_ERR_INVALID_ARG,
            "seq is NULL");
    TMU_SEQ(attn_seq_append(&w.pool, &bad, 1, slots, pair, &ncow), ATTN_ERR_INVALID_ARG,
            "seq is not a valid sequence of this pool (len = 1, num_blocks = 2");
    TMU_SEQ(attn_seq_append(&w.pool, &w.req[0].seq, -2, slots, pair, &ncow), ATTN_ERR_INVALID_ARG,
            "n_tokens = -2");
    TMU_SEQ(attn_seq_append(&w.pool, &w.req[0].seq, 2, NULL, pair, &ncow), ATTN_ERR_INVALID_ARG,
            "n_tokens = 2 with slots NULL");
    TMU_SEQ(attn_seq_append(&w.pool, &w.req[1].seq, 1, slots, NULL, NULL), ATTN_ERR_INVALID_ARG,
            "is shared (refcount 2) so it is copied on write, but cow_pairs is NULL");
    TMU_SEQ(attn_seq_append(&w.pool, &w.req[0].seq, TSV_MAXT, slots, pair, &ncow),
            ATTN_ERR_OUT_OF_RANGE, "tokens need 10 blocks but seq->max_blocks = 8");
    TMU_SEQ(attn_seq_append(&w.pool, &w.req[0].seq, 0x7fffffff, slots, pair, &ncow),
            ATTN_ERR_OUT_OF_RANGE, "blocks but seq->max_blocks = 8");
    TMU_SEQ(attn_seq_fork(&w.pool, &w.req[0].seq, NULL), ATTN_ERR_INVALID_ARG, "child is NULL");
    TMU_SEQ(attn_seq_fork(&w.pool, &w.req[0].seq, &w.req[1].seq), ATTN_ERR_INVALID_ARG,
            "child is not empty (len = 5, num_blocks = 2)");
    TMU_SEQ(attn_seq_fork(&w.pool, &w.req[0].seq, &empty), ATTN_ERR_OUT_OF_RANGE,
            "parent has 2 blocks but child->max_blocks = 1");
    int32_t keep = w.req[0].table[1];
    w.req[0].table[1] = TSV_BLOCKS - 1;
    tmu_take(&w, &snap);
    TMU_SEQ(attn_seq_fork(&w.pool, &w.req[0].seq, &w.req[4].seq), ATTN_ERR_INVALID_ARG,
            "parent->block_table[1] = 23 is not a block in use");
    w.req[0].table[1] = keep;
#undef TMU_SEQ
    pmsg[0] = 'x';
    CHECK_STATUS(attn_seq_append(&w.pool, &w.req[0].seq, 1, slots, pair, &ncow), ATTN_OK);
    CHECK(pmsg[0] == '\0');
    tsv_free(&w);
}

/* attn_forward_workspace_bound, from the batch's capacities, holds every step within them; the
   per-step query answers as its comment says for a zeroed and an invalid metadata. */
TEST(misuse_workspace_bound_covers_every_step) {
    attn_params p;
    memset(&p, 0, sizeof p);
    p.num_heads = 8; p.num_kv_heads = 2; p.head_size = 64;
    attn_layer L;
    REQUIRE(attn_layer_init(&L, &p, ATTN_DECODER, ATTN_BACKEND_SDPA) == ATTN_OK);
    enum { S = 6, T = 40, CTX = 1300 };
    attn_exec e = tu_exec(ATTN_ISA_AUTO, 3);
    size_t bound = attn_forward_workspace_bound(&L, S, T, CTX, &e);
    CHECK(bound > 0);
    uint64_t rng = 5;
    int32_t lens[S], ctx[S], qsl[S + 1];
    size_t worst = 0;
    for (int trial = 0; trial < 2000; trial++) {
        int n = 1 + (int)((uint32_t)attn_test_rand_u64(&rng) % S), tokens = 0, prefills = 0;
        attn_metadata md;
        memset(&md, 0, sizeof md);
        qsl[0] = 0;
        for (int i = 0; i < n && tokens < T; i++) {
            int left = T - tokens - (n - i - 1);
            int lq = left <= 1 ? 1 : 1 + (int)((uint32_t)attn_test_rand_u64(&rng) % (uint32_t)left);
            int decode = (uint32_t)attn_test_rand_u64(&rng) % 2 || lq == 1;
            if (decode && i >= prefills) lq = 1;
            else if (i == prefills) prefills++;
            else lq = 1;
            int c = (int)((uint32_t)attn_test_rand_u64(&rng) % (uint32_t)(CTX - lq + 1));
            if (trial % 3 == 0) c = CTX - lq;   /* the longest contexts */
            lens[i] = c + lq; ctx[i] = c;
            if (i < prefills) qsl[i + 1] = qsl[i] + lq;
            tokens += lq;
            md.num_decode_tokens = i + 1 - prefills;
        }
        md.num_prefills = prefills; md.num_prefill_tokens = qsl[prefills];
        md.seq_lens = lens; md.context_lens = ctx; md.query_start_loc = qsl;
        size_t need = attn_forward_workspace_size(&L, &md, &e);
        CHECK_MSG(need > 0 && need <= bound, "trial %d: %d prefills, %d decodes: need %zu > bound "
                  "%zu", trial, prefills, md.num_decode_tokens, need, bound);
        if (need > worst) worst = need;
    }
    CHECK(worst * 2 > bound);  /* a bound, not a gross over-estimate */
    CHECK_EQ_INT(attn_forward_workspace_bound(NULL, S, T, CTX, &e), 0);
    CHECK_EQ_INT(attn_forward_workspace_bound(&L, 0, T, CTX, &e), 0);
    CHECK_EQ_INT(attn_forward_workspace_bound(&L, S, T, 0, &e), 0);
    /* zeroed metadata: an empty step, valid, its own (small) scratch; invalid ones give 0 */
    attn_metadata zero;
    memset(&zero, 0, sizeof zero);
    size_t empty = attn_forward_workspace_size(&L, &zero, &e);
    CHECK(empty > 0 && empty <= bound);
    CHECK_EQ_INT(attn_forward_workspace_size(&L, NULL, &e), 0);
    zero.num_decode_tokens = 1;  /* decodes without seq_lens */
    CHECK_EQ_INT(attn_forward_workspace_size(&L, &zero, &e), 0);
    zero.num_decode_tokens = -1;
    CHECK_EQ_INT(attn_forward_workspace_size(&L, &zero, &e), 0);
}

/* attn_forward with out over the query rows themselves (the README says it may): the same bits
   as into a separate buffer, for a step of prefills and decodes, on 1 and 3 threads. */
TEST(misuse_forward_output_may_alias_query) {
    static tsv_world w;
    static float q_saved[TSV_STEP_TOKENS * TSV_QW], sep[TSV_STEP_TOKENS * TSV_QW];
    static char ws[1 << 20];
    REQUIRE(tsv_init(&w));
    { int who[] = {0, 1}, nn[] = {9, 6}; tsv_step(&w, who, nn, 2); }
    REQUIRE(attn_seq_fork(&w.pool, &w.req[1].seq, &w.req[2].seq) == ATTN_OK);
    { int who[] = {3, 0, 1, 2}, nn[] = {5, 3, 1, 1}; REQUIRE(tsv_build(&w, who, nn, 4) == ATTN_OK); }
    int rows = 10;
    memcpy(q_saved, w.q, sizeof q_saved);
    for (int threads = 1; threads <= 3; threads += 2) {
        attn_exec e = tu_exec(ATTN_ISA_AUTO, threads);
        attn_metadata md = w.md;
        md.blocks_to_copy = NULL; md.num_blocks_to_copy = 0;  /* copied by the first call */
        attn_rows rq = {w.q, ATTN_F32, 0}, rk = {w.k, ATTN_F32, 0}, rv = {w.v, ATTN_F32, 0};
        attn_rows ro = {sep, ATTN_F32, 0};
        memcpy(w.q, q_saved, sizeof q_saved);
        REQUIRE(attn_forward(&w.layer, &e, rq, rk, rv, &w.cache, threads == 1 ? &w.md : &md, ro,
                             ws, sizeof ws) == ATTN_OK);
        attn_rows alias = {w.q, ATTN_F32, 0};
        CHECK_STATUS(attn_forward(&w.layer, &e, rq, rk, rv, &w.cache, &md, alias, ws, sizeof ws),
                     ATTN_OK);
        CHECK_BITEQ(w.q, sep, (size_t)rows * TSV_QW * sizeof(float));
    }
    tsv_free(&w);
}

#define TEST_MISUSE_LIST                                                                          \
    ATTN_TEST_ENTRY(misuse_forward_output_may_alias_query),                                      \
    ATTN_TEST_ENTRY(misuse_builder_checks_expected_lengths),                                     \
    ATTN_TEST_ENTRY(misuse_builder_refuses_blocks_not_in_use_or_twice),                          \
    ATTN_TEST_ENTRY(misuse_forward_refuses_blocks_not_in_use_or_twice),                          \
    ATTN_TEST_ENTRY(misuse_null_slot_mapping_needs_profile_run),                                 \
    ATTN_TEST_ENTRY(misuse_builder_capacity_status),                                             \
    ATTN_TEST_ENTRY(misuse_every_forward_refusal_has_a_message),                                 \
    ATTN_TEST_ENTRY(misuse_every_builder_and_sequence_refusal_has_a_message),                    \
    ATTN_TEST_ENTRY(misuse_workspace_bound_covers_every_step)
