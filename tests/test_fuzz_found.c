/* What the fuzz harnesses (tests/fuzz/) found, kept as ordinary tests. Each was undefined
   behaviour that only UBSan reports (a signed overflow, which the sanitize configuration's gcc
   UBSan stops at; pointer arithmetic on NULL, which clang's UBSan reports); the tests also hold
   the documented results. */

/* A decode over heads counts as large as an int holds: the plan's KV-head spans were counted as
   Hk + span - 1 in int, which overflowed at Hk = INT_MAX. An empty batch is valid there (the
   cache struct is valid: one block of one token, head size 1, INT_MAX heads), so the call
   returns ATTN_OK and writes nothing. */
TEST(fuzz_found_decode_heads_int_max) {
    static float key[1], value[1];
    attn_kv_cache c;
    memset(&c, 0, sizeof c);
    c.key = key; c.value = value;
    c.num_blocks = 1; c.block_size = 1; c.num_kv_heads = 0x7fffffff; c.head_size = 1;
    c.dtype = ATTN_F32; c.k_scale = 1.0f; c.v_scale = 1.0f;
    attn_params p;
    memset(&p, 0, sizeof p);
    p.num_heads = p.num_kv_heads = 0x7fffffff; p.head_size = 1;
    int32_t none[2] = {0, 0};
    attn_rows rows = {NULL, ATTN_F32, 0};
    for (int v = ATTN_PAGED_AUTO; v <= ATTN_PAGED_V2; v++) {
        size_t need =  /* per thread: the default exec takes every thread OpenMP has */
                attn_paged_decode_workspace_size(&p, NULL, &c, none, 0, (attn_paged_version)v);
        CHECK(need > 0 && need <= ((size_t)1 << 26));
        void *ws = malloc(need);
        CHECK(ws != NULL);
        if (ws)
            CHECK_EQ_INT(attn_paged_decode(&p, NULL, rows, rows, &c, none, 0, none, 0,
                                           (attn_paged_version)v, NULL, ws, need), ATTN_OK);
        free(ws);
    }
}

/* The bias builders with no keys or no queries take a NULL bias (nothing to write); the rows
   were addressed from the NULL pointer before the empty loop (clang's UBSan reports that). */
TEST(fuzz_found_bias_no_keys_null) {
    static const float slopes[2] = {0.5f, 0.25f};
    attn_params p;
    memset(&p, 0, sizeof p);
    p.num_heads = 2; p.num_kv_heads = 1; p.head_size = 8;
    CHECK_EQ_INT(attn_make_bias(&p, 3, 0, 1, NULL), ATTN_OK);
    CHECK_EQ_INT(attn_make_alibi_bias(2, slopes, 3, 0, 0, NULL), ATTN_OK);
    CHECK_EQ_INT(attn_make_sliding_window_bias(4, 3, 0, 1, NULL), ATTN_OK);
    CHECK_EQ_INT(attn_make_sliding_window_bias(4, 0, 5, 1, NULL), ATTN_OK);
    CHECK_EQ_INT(attn_make_sliding_window_bias(4, 3, 5, 1, NULL), ATTN_ERR_INVALID_ARG);
}

/* An f32 cache of two blocks of bs tokens over key and value, and params of as many query
   heads as its hk KV heads, head size D: the set-up of the attn_forward cases below. */
static void tff_f32_cache(attn_kv_cache *c, attn_params *p, float *key, float *value, int bs,
                          int hk, int D) {
    memset(c, 0, sizeof *c);
    c->key = key; c->value = value;
    c->num_blocks = 2; c->block_size = bs; c->num_kv_heads = hk; c->head_size = D;
    c->dtype = ATTN_F32; c->k_scale = 1.0f; c->v_scale = 1.0f;
    memset(p, 0, sizeof *p);
    p->num_heads = p->num_kv_heads = hk; p->head_size = D;
}

/* attn_forward with decodes and no block tables: the decode rows' table pointer was computed
   from the NULL pointer before the check that refuses it. ATTN_ERR_INVALID_ARG, nothing written. */
TEST(fuzz_found_forward_decode_null_tables) {
    enum { H = 2, D = 4, BS = 4 };
    static float key[2 * BS * H * D], value[2 * BS * H * D];
    attn_kv_cache c;
    attn_params p;
    tff_f32_cache(&c, &p, key, value, BS, H, D);
    attn_layer L;
    REQUIRE(attn_layer_init(&L, &p, ATTN_DECODER, ATTN_BACKEND_SDPA) == ATTN_OK);
    float q[H * D] = {0}, out[H * D], before[H * D];
    for (int i = 0; i < H * D; i++) out[i] = before[i] = (float)i;
    int32_t seq_lens[1] = {3}, qsl[1] = {0};
    attn_metadata md;
    memset(&md, 0, sizeof md);
    md.num_decode_tokens = 1; md.seq_lens = seq_lens; md.query_start_loc = qsl;
    md.block_tables = NULL; md.max_blocks_per_seq = 1;
    attn_rows rq = {q, ATTN_F32, 0}, none = {NULL, ATTN_F32, 0}, ro = {out, ATTN_F32, 0};
    static char ws[1 << 20];
    CHECK_EQ_INT(attn_forward(&L, NULL, rq, none, none, &c, &md, ro, ws, sizeof ws),
                 ATTN_ERR_INVALID_ARG);
    CHECK(memcmp(out, before, sizeof out) == 0);
}

/* Decodes after a prefill with a negative max_blocks_per_seq: the decodes' rows of the block
   table were addressed at tables + num_prefills * max_blocks_per_seq in size_t, which wrapped
   (clang's UBSan: pointer overflow) before the decode check refused the stride. The call is
   refused and writes nothing, whatever the stride; the same metadata with stride 1 runs. */
TEST(fuzz_found_forward_negative_table_stride) {
    enum { D = 4, BS = 4 };
    static float key[2 * BS * D], value[2 * BS * D];
    attn_kv_cache c;
    attn_params p;
    tff_f32_cache(&c, &p, key, value, BS, 1, D);
    attn_layer L;
    REQUIRE(attn_layer_init(&L, &p, ATTN_DECODER, ATTN_BACKEND_SDPA) == ATTN_OK);
    float q[2 * D] = {0.5f, -1, 0.25f, 2, 1, 0, -0.5f, 0.75f}, k[D] = {1, 2, 3, 4}, out[2 * D];
    float before[2 * D];
    for (int i = 0; i < 2 * D; i++) out[i] = before[i] = (float)i;
    int32_t seq_lens[2] = {1, 3}, qsl[2] = {0, 1}, tables[2] = {0, 1};
    attn_metadata md;
    memset(&md, 0, sizeof md);
    md.num_prefills = 1; md.num_prefill_tokens = 1; md.num_decode_tokens = 1;
    md.seq_lens = seq_lens; md.query_start_loc = qsl; md.block_tables = tables;
    md.profile_run = 1;  /* no slot_mapping on a step with a decode */
    attn_rows rq = {q, ATTN_F32, 0}, rk = {k, ATTN_F32, 0}, ro = {out, ATTN_F32, 0};
    attn_exec e = tu_exec(ATTN_ISA_AUTO, 2);  /* the workspace below fits two threads */
    static char ws[1 << 20];
    for (int stride = -3; stride <= 0; stride++) {
        md.max_blocks_per_seq = stride;
        attn_status st = attn_forward(&L, &e, rq, rk, rk, &c, &md, ro, ws, sizeof ws);
        CHECK(st == ATTN_ERR_INVALID_ARG || st == ATTN_ERR_OUT_OF_RANGE);
        CHECK(memcmp(out, before, sizeof out) == 0);
    }
    md.max_blocks_per_seq = 1;
    size_t need = attn_forward_workspace_size(&L, &md, &e);
    CHECK(need > 0 && need <= sizeof ws);
    CHECK_EQ_INT(attn_forward(&L, &e, rq, rk, rk, &c, &md, ro, ws, sizeof ws), ATTN_OK);
}

/* Cross attention (ENCODER_DECODER) whose prefill gives key rows, no value rows and no encoder
   tokens: nothing is read from the rows, so the call runs (the check counted the decoder's query
   tokens instead of the encoder tokens the rows hold). The same call with two encoder tokens is
   refused with a message that names value.data, and writes nothing. */
TEST(fuzz_found_forward_cross_no_encoder_tokens) {
    enum { D = 4, BS = 4, DEC = 3 };
    static float key[2 * BS * D], value[2 * BS * D];
    attn_kv_cache c;
    attn_params p;
    tff_f32_cache(&c, &p, key, value, BS, 1, D);
    attn_layer L;
    REQUIRE(attn_layer_init(&L, &p, ATTN_ENCODER_DECODER, ATTN_BACKEND_SDPA) == ATTN_OK);
    float q[DEC * D], k[2 * D] = {1, 2, 3, 4, -1, 0.5f, 0, 2}, out[DEC * D], before[DEC * D];
    for (int i = 0; i < DEC * D; i++) {
        q[i] = 0.25f * (float)(i % 5) - 0.5f;
        out[i] = before[i] = 7;
    }
    int32_t dec_loc[2] = {0, DEC}, dec_lens[1] = {DEC}, enc_lens[1] = {0}, enc_loc[2] = {0, 0};
    int32_t table[1] = {1};
    int64_t slots[2] = {BS, BS + 1};
    attn_metadata md;
    memset(&md, 0, sizeof md);
    md.num_prefills = 1; md.num_prefill_tokens = DEC; md.query_start_loc = dec_loc;
    md.seq_lens = dec_lens; md.encoder_seq_lens = enc_lens; md.encoder_start_loc = enc_loc;
    md.cross_slot_mapping = slots; md.cross_block_tables = table; md.max_cross_blocks_per_seq = 1;
    attn_rows rq = {q, ATTN_F32, 0}, rk = {k, ATTN_F32, 0}, none = {NULL, ATTN_F32, 0},
              ro = {out, ATTN_F32, 0};
    char msg[256] = "";
    attn_exec e = tu_exec(ATTN_ISA_AUTO, 1);
    e.error_msg = msg; e.error_msg_bytes = sizeof msg;
    static char ws[1 << 20];
    CHECK_EQ_INT(attn_forward(&L, &e, rq, rk, none, &c, &md, ro, ws, sizeof ws), ATTN_OK);
    double want[DEC * D];
    ref_attention(&p, 0, DEC, 0, q, 0, k, 0, k, 0, want, NULL);
    CHECK_ALLCLOSE_D(out, want, DEC * D, 0, 0);
    enc_lens[0] = 2; enc_loc[1] = 2; md.num_encoder_tokens = 2;
    memcpy(out, before, sizeof out);
    CHECK_EQ_INT(attn_forward(&L, &e, rq, rk, none, &c, &md, ro, ws, sizeof ws),
                 ATTN_ERR_INVALID_ARG);
    CHECK(strstr(msg, "value.data is NULL") != NULL);
    CHECK(memcmp(out, before, sizeof out) == 0);
    for (int i = 0; i < 2 * BS * D; i++) CHECK(key[i] == 0 && value[i] == 0);
}

#define TEST_FUZZ_FOUND_LIST                                                                      \
    ATTN_TEST_ENTRY(fuzz_found_decode_heads_int_max),                                             \
    ATTN_TEST_ENTRY(fuzz_found_bias_no_keys_null),                                                \
    ATTN_TEST_ENTRY(fuzz_found_forward_decode_null_tables),                                       \
    ATTN_TEST_ENTRY(fuzz_found_forward_negative_table_stride),                                    \
    ATTN_TEST_ENTRY(fuzz_found_forward_cross_no_encoder_tokens)
