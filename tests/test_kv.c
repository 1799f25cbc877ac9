/* Paged KV cache tests: cache sizing and layout, attn_write_kv against an element-by-element
   reference built from the public scalar converters, swap/copy of blocks, the block pool and
   sequences against a simple model, and a content test that follows tokens through forks,
   copy-on-write and truncation. Invalid enum values used here stay within the enums' value
   range (0..7), since C++ UBSan rejects loading anything else. */

/* ---- helpers ---- */

/* A cache over freshly allocated memory, deliberately misaligned by 1 byte so the alignment slack
   is exercised. *mem receives the allocation to free. */
static attn_status tk_cache_new(attn_kv_cache *c, void **mem, int nb, int bs, int hk, int d,
                                attn_dtype dt, float ks, float vs) {
    size_t bytes = attn_kv_cache_bytes(nb, bs, hk, d, dt);
    *mem = tu_alloc(bytes + 1);
    return attn_kv_cache_init(c, nb, bs, hk, d, dt, ks, vs, (char *)*mem + 1, bytes);
}

/* Bytes of one key (or value) array, and of one block of it: rows of head_size elements
   (ref_row_bytes: the integer caches' rows hold their scales). */
static size_t tk_array_bytes(const attn_kv_cache *c) {
    return (size_t)c->num_blocks * c->block_size * c->num_kv_heads *
           ref_row_bytes(c->dtype, (size_t)c->head_size);
}

static size_t tk_block_bytes(const attn_kv_cache *c) {
    return (size_t)c->block_size * c->num_kv_heads * ref_row_bytes(c->dtype, (size_t)c->head_size);
}

/* Fills both arrays with random bytes. */
static void tk_fill_random_bytes(attn_kv_cache *c, uint64_t *rng) {
    size_t n = tk_array_bytes(c);
    for (size_t i = 0; i < n; i++) {
        ((unsigned char *)c->key)[i] = (unsigned char)attn_test_rand_u64(rng);
        ((unsigned char *)c->value)[i] = (unsigned char)attn_test_rand_u64(rng);
    }
}

/* The expected encoding of x in the cache dtype, from the public scalar converters only. */
static void tk_encode(void *dst, attn_dtype cdt, size_t i, float x, float scale) {
    switch (cdt) {
        case ATTN_F32: ((float *)dst)[i] = x; break;
        case ATTN_F16: ((uint16_t *)dst)[i] = attn_f32_to_f16(x); break;
        case ATTN_BF16: ((uint16_t *)dst)[i] = attn_f32_to_bf16(x); break;
        case ATTN_FP8_E4M3: ((uint8_t *)dst)[i] = attn_f32_to_fp8_e4m3(x / scale); break;
        default: ((uint8_t *)dst)[i] = attn_f32_to_fp8_e5m2(x / scale); break;
    }
}

/* Rows value i as raw dtype bits from x; returns the value the dtype holds. */
static float tk_put(void *raw, attn_dtype dt, size_t i, float x) {
    switch (dt) {
        case ATTN_F16: ((uint16_t *)raw)[i] = attn_f32_to_f16(x);
        return attn_f16_to_f32(((uint16_t *)raw)[i]);
        case ATTN_BF16: ((uint16_t *)raw)[i] = attn_f32_to_bf16(x);
        return attn_bf16_to_f32(((uint16_t *)raw)[i]);
        default: ((float *)raw)[i] = x; return x;
    }
}

/* Activations over a wide range of magnitudes (f16 subnormals to fp8/f16 overflow), with a few
   infinities and signed zeros. */
static void tk_fill_wide(uint64_t *rng, attn_dtype dt, void *raw, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int kind = attn_test_rand_int(rng, 0, 99);
        float x;
        if (kind == 0) x = INFINITY;
        else if (kind == 1) x = -INFINITY;
        else if (kind == 2) x = -0.0f;
        else if (kind < 6) x = attn_test_rand_uniform(rng, -1e6f, 1e6f);
        else x =
                attn_test_rand_uniform(rng, -1.0f, 1.0f) * ldexpf(1.0f,
                                                                  attn_test_rand_int(rng, -30, 11));
        tk_put(raw, dt, i, x);
    }
}

/* Row `row` of an integer cache array written from the d elements of rows r from element at
   (ref_int_row_quantize: what attn_dtype_row_bytes documents). */
static void tk_ref_int_row(void *arr, attn_dtype cdt, int64_t row, int d, attn_rows r,
                           int64_t at) {
    float x[ATTN_MAX_HEAD_SIZE];
    for (int e = 0; e < d; e++) x[e] = ref_element(r.data, r.dtype, (size_t)(at + e));
    ref_int_row_quantize((char *)arr + (size_t)row * ref_row_bytes(cdt, (size_t)d), cdt, x,
                         (size_t)d);
}

/* What attn_write_kv must leave: a serial loop over tokens (so the last duplicate wins). */
static void tk_ref_write(attn_kv_cache *want, attn_rows k, attn_rows v, const int64_t *slots,
                         int n) {
    int hk = want->num_kv_heads, d = want->head_size, bs = want->block_size;
    int64_t ks = k.stride ? k.stride : (int64_t)hk * d, vs = v.stride ? v.stride : (int64_t)hk * d;
    int ints = want->dtype == ATTN_INT8 || want->dtype == ATTN_INT4;
    for (int t = 0; t < n; t++) {
        if (slots[t] == -1) continue;
        int64_t b = slots[t] / bs, o = slots[t] % bs;
        for (int h = 0; h < hk; h++) {
            if (ints) {
                tk_ref_int_row(want->key, want->dtype, (b * hk + h) * bs + o, d, k, t * ks + h * d);
                tk_ref_int_row(want->value, want->dtype, (b * hk + h) * bs + o, d, v,
                               t * vs + h * d);
                continue;
            }
            for (int e = 0; e < d; e++) {
                size_t at = (size_t)(((b * hk + h) * bs + o) * d + e);
                tk_encode(want->key, want->dtype, at,
                          ref_element(k.data, k.dtype, (size_t)(t * ks + h * d + e)),
                          want->k_scale);
                tk_encode(want->value, want->dtype, at,
                          ref_element(v.data, v.dtype, (size_t)(t * vs + h * d + e)),
                          want->v_scale);
            }
        }
    }
}

/* A second cache struct with the same geometry over its own copy of c's contents. */
static void tk_clone(const attn_kv_cache *c, attn_kv_cache *out, void **mem) {
    size_t bytes =
            attn_kv_cache_bytes(c->num_blocks, c->block_size, c->num_kv_heads, c->head_size,
                                c->dtype);
    *mem = tu_alloc(bytes);
    attn_kv_cache_init(out, c->num_blocks, c->block_size, c->num_kv_heads, c->head_size, c->dtype,
                       c->k_scale, c->v_scale, *mem, bytes);
    memcpy(out->key, c->key, tk_array_bytes(c));
    memcpy(out->value, c->value, tk_array_bytes(c));
}

/* Whether two caches of one geometry hold the same bytes. */
static int tk_same_contents(const attn_kv_cache *a, const attn_kv_cache *b) {
    size_t n = tk_array_bytes(a);
    return memcmp(a->key, b->key, n) == 0 && memcmp(a->value, b->value, n) == 0;
}

/* dst's nine blocks of bb bytes after attn_swap_blocks of the pairs {0,3} {5,0} {0,8}: the
   named ones hold src's blocks, the others what snap (dst before) held. */
static void tk_check_swap_038(const attn_kv_cache *src, const attn_kv_cache *dst,
                              const attn_kv_cache *snap, size_t bb) {
    for (int b = 0; b < 9; b++) {
        int from = b == 3 ? 0 : b == 0 ? 5 : b == 8 ? 0 : -1;
        const unsigned char *wk = from >= 0 ? (unsigned char *)src->key + from * bb
                                            : (unsigned char *)snap->key + b * bb;
        const unsigned char *wv = from >= 0 ? (unsigned char *)src->value + from * bb
                                            : (unsigned char *)snap->value + b * bb;
        CHECK_BITEQ((unsigned char *)dst->key + b * bb, wk, bb);
        CHECK_BITEQ((unsigned char *)dst->value + b * bb, wv, bb);
    }
}

/* Whether a cache holds the rows of a model of it (ref_rows_same: any NaN scale of an integer
   row as any other, since the text fixes only that it is a NaN). */
static int tk_same_rows(const attn_kv_cache *a, const attn_kv_cache *b) {
    size_t rows = (size_t)a->num_blocks * a->block_size * a->num_kv_heads;
    size_t rb = ref_row_bytes(a->dtype, (size_t)a->head_size);
    for (size_t r = 0; r < rows; r++)
        if (!ref_rows_same((const char *)a->key + r * rb, (const char *)b->key + r * rb, a->dtype,
                           (size_t)a->head_size) ||
            !ref_rows_same((const char *)a->value + r * rb, (const char *)b->value + r * rb,
                           a->dtype, (size_t)a->head_size))
            return 0;
    return 1;
}

/* ---- cache layout and sizing ---- */

TEST(kv_cache_bytes_and_init_layout) {
    /* 3 blocks x 4 tokens x 2 heads x 8 dims x 2 bytes = 384 bytes per array */
    CHECK_EQ_INT(attn_kv_cache_bytes(3, 4, 2, 8, ATTN_F16), 64 + 2 * 384);
    /* 1 x 1 x 1 x 3 x 4 = 12 bytes, padded to 64 */
    CHECK_EQ_INT(attn_kv_cache_bytes(1, 1, 1, 3, ATTN_F32), 64 + 2 * 64);
    CHECK_EQ_INT(attn_kv_cache_bytes(1, 16, 8, 128, ATTN_FP8_E5M2), 64 + 2 * 16384);
    for (int off = 0; off < 64; off += 7) {
        unsigned char *mem = (unsigned char *)tu_alloc(832 + 64);
        attn_kv_cache c;
        CHECK_STATUS(attn_kv_cache_init(&c, 3, 4, 2, 8, ATTN_F16, 0.0f, 1.0f, mem + off, 832),
                     ATTN_OK);
        CHECK_EQ_INT((uintptr_t)c.key % 64, 0);
        CHECK_EQ_INT((uintptr_t)c.value % 64, 0);
        CHECK((unsigned char *)c.key >= mem + off);
        CHECK((unsigned char *)c.value >= (unsigned char *)c.key + 384);
        CHECK((unsigned char *)c.value + 384 <= mem + off + 832);
        CHECK(c.num_blocks == 3 && c.block_size == 4 && c.num_kv_heads == 2 && c.head_size == 8);
        CHECK(c.dtype == ATTN_F16 && c.k_scale == 1.0f && c.v_scale == 1.0f);
        int64_t shape[3];
        attn_kv_cache_shape(&c, shape);
        CHECK(shape[0] == 2 && shape[1] == 3 && shape[2] == 4 * 2 * 8);
        free(mem);
    }
    attn_kv_cache c;
    void *mem;
    CHECK_STATUS(tk_cache_new(&c, &mem, 2, 16, 1, 64, ATTN_FP8_E4M3, 0.25f, 0.0f), ATTN_OK);
    CHECK(c.k_scale == 0.25f && c.v_scale == 1.0f);
    free(mem);
    int64_t shape[3] = {7, 7, 7};
    attn_kv_cache_shape(NULL, shape);
    CHECK(shape[0] == 0 && shape[1] == 0 && shape[2] == 0);
    attn_kv_cache_shape(&c, NULL);  /* must not crash */
}

TEST(kv_cache_init_rejects_bad_input) {
    unsigned char mem[4096];
    attn_kv_cache c, before;
    memset(&c, 0x5a, sizeof c);
    before = c;
    size_t need = attn_kv_cache_bytes(2, 4, 2, 8, ATTN_BF16);
    REQUIRE(need > 0 && need <= sizeof mem);
#define TK_BAD(call, want)                                                                         \
    do { CHECK_STATUS(call, want); CHECK(memcmp(&c, &before, sizeof c) == 0); } while (0)
    TK_BAD(attn_kv_cache_init(NULL, 2, 4, 2, 8, ATTN_BF16, 1, 1, mem, need), ATTN_ERR_INVALID_ARG);
    TK_BAD(attn_kv_cache_init(&c, 2, 4, 2, 8, ATTN_BF16, 1, 1, NULL, need), ATTN_ERR_INVALID_ARG);
    TK_BAD(attn_kv_cache_init(&c, 0, 4, 2, 8, ATTN_BF16, 1, 1, mem, need), ATTN_ERR_INVALID_ARG);
    TK_BAD(attn_kv_cache_init(&c, 2, -4, 2, 8, ATTN_BF16, 1, 1, mem, need), ATTN_ERR_INVALID_ARG);
    TK_BAD(attn_kv_cache_init(&c, 2, 4, 0, 8, ATTN_BF16, 1, 1, mem, need), ATTN_ERR_INVALID_ARG);
    TK_BAD(attn_kv_cache_init(&c, 2, 4, 2, 0, ATTN_BF16, 1, 1, mem, need), ATTN_ERR_INVALID_ARG);
    TK_BAD(attn_kv_cache_init(&c, 1, 1, 1, ATTN_MAX_HEAD_SIZE + 1, ATTN_FP8_E4M3, 1, 1, mem,
                              sizeof mem), ATTN_ERR_INVALID_ARG);
    TK_BAD(attn_kv_cache_init(&c, 2, 4, 2, 8, (attn_dtype)7, 1, 1, mem, need),
           ATTN_ERR_INVALID_ARG);
    TK_BAD(attn_kv_cache_init(&c, 2, 4, 2, 8, ATTN_BF16, 2, 1, mem, need), ATTN_ERR_INVALID_ARG);
    TK_BAD(attn_kv_cache_init(&c, 2, 4, 2, 8, ATTN_F32, 1, 0.5f, mem, sizeof mem),
           ATTN_ERR_INVALID_ARG);
    TK_BAD(attn_kv_cache_init(&c, 2, 4, 2, 8, ATTN_FP8_E4M3, -1, 1, mem, need),
           ATTN_ERR_INVALID_ARG);
    TK_BAD(attn_kv_cache_init(&c, 2, 4, 2, 8, ATTN_FP8_E4M3, 1, NAN, mem, need),
           ATTN_ERR_INVALID_ARG);
    TK_BAD(attn_kv_cache_init(&c, 2, 4, 2, 8, ATTN_FP8_E5M2, INFINITY, 1, mem, need),
           ATTN_ERR_INVALID_ARG);
    TK_BAD(attn_kv_cache_init(&c, 2, 4, 2, 8, ATTN_BF16, 1, 1, mem, need - 1),
           ATTN_ERR_WORKSPACE_TOO_SMALL);
    TK_BAD(attn_kv_cache_init(&c, 2, 4, 2, 8, ATTN_BF16, 1, 1, mem, 0),
           ATTN_ERR_WORKSPACE_TOO_SMALL);
    /* sizes whose product overflows size_t are invalid, not wrapped */
    TK_BAD(attn_kv_cache_init(&c, 0x7fffffff, 0x7fffffff, 0x7fffffff, 512, ATTN_F32, 1, 1, mem,
                              sizeof mem),
           ATTN_ERR_INVALID_ARG);
#undef TK_BAD
    CHECK_EQ_INT(attn_kv_cache_bytes(0x7fffffff, 0x7fffffff, 0x7fffffff, 512, ATTN_F32), 0);
    CHECK_EQ_INT(attn_kv_cache_bytes(0, 4, 2, 8, ATTN_F16), 0);
    CHECK_EQ_INT(attn_kv_cache_bytes(2, 4, 2, -8, ATTN_F16), 0);
    CHECK_EQ_INT(attn_kv_cache_bytes(2, 4, 2, 8, (attn_dtype)7), 0);
    /* fp8 accepts any finite positive scale; non-fp8 accepts exactly 1 or 0 */
    CHECK_STATUS(attn_kv_cache_init(&c, 2, 4, 2, 8, ATTN_FP8_E5M2, 1e-3f, 7.5f, mem, sizeof mem),
                 ATTN_OK);
    CHECK(c.k_scale == 1e-3f && c.v_scale == 7.5f);
    CHECK_STATUS(attn_kv_cache_init(&c, 2, 4, 2, 8, ATTN_BF16, 0.0f, 1.0f, mem, need), ATTN_OK);
}

TEST(kv_sizing_helpers_exact_and_round_trip) {
    /* Llama-3-8B-like: 32 layers, bs 16, 8 KV heads, D 128, bf16: 2 MiB per block id */
    CHECK_EQ_INT(attn_kv_block_bytes(32, 16, 8, 128, ATTN_BF16), 2097152);
    CHECK_EQ_INT(attn_kv_block_bytes(1, 4, 2, 8, ATTN_F16), 256);
    CHECK_EQ_INT(attn_kv_block_bytes(3, 1, 1, 1, ATTN_FP8_E4M3), 6);
    CHECK_EQ_INT(attn_kv_block_bytes(0, 16, 8, 128, ATTN_BF16), 0);
    CHECK_EQ_INT(attn_kv_block_bytes(2, 16, 8, 128, (attn_dtype)7), 0);
    CHECK_EQ_INT(attn_kv_blocks_for_tokens(0, 16), 0);
    CHECK_EQ_INT(attn_kv_blocks_for_tokens(1, 16), 1);
    CHECK_EQ_INT(attn_kv_blocks_for_tokens(16, 16), 1);
    CHECK_EQ_INT(attn_kv_blocks_for_tokens(17, 16), 2);
    CHECK_EQ_INT(attn_kv_blocks_for_tokens(-5, 16), 0);
    CHECK_EQ_INT(attn_kv_blocks_for_tokens(5, 0), 0);
    CHECK_EQ_INT(attn_kv_blocks_for_tokens(INT64_MAX, 1), INT64_MAX);
    CHECK_EQ_INT(attn_kv_blocks_for_tokens(INT64_MAX, 2), INT64_MAX / 2 + 1);
    CHECK_EQ_INT(attn_kv_tokens_for_blocks(3, 16), 48);
    CHECK_EQ_INT(attn_kv_tokens_for_blocks(0, 16), 0);
    CHECK_EQ_INT(attn_kv_tokens_for_blocks(INT64_MAX / 2 + 1, 2), 0);  /* overflow */
    /* one layer of (3 blocks, bs 4, 2 heads, D 8, f16) is exactly 832 bytes */
    CHECK_EQ_INT(attn_kv_blocks_for_bytes(832, 1, 4, 2, 8, ATTN_F16), 3);
    CHECK_EQ_INT(attn_kv_blocks_for_bytes(831, 1, 4, 2, 8, ATTN_F16), 2);
    CHECK_EQ_INT(attn_kv_blocks_for_bytes(2 * 832, 2, 4, 2, 8, ATTN_F16), 3);
    CHECK_EQ_INT(attn_kv_blocks_for_bytes(63, 1, 4, 2, 8, ATTN_F16), 0);
    CHECK_EQ_INT(attn_kv_blocks_for_bytes(1000, 0, 4, 2, 8, ATTN_F16), 0);
    CHECK_EQ_INT(attn_kv_max_tokens(832, 1, 4, 2, 8, ATTN_F16), 12);
    CHECK_EQ_INT(attn_kv_max_tokens(10, 1, 4, 2, 8, ATTN_F16), 0);
    /* a huge budget caps at INT_MAX blocks instead of wrapping */
    CHECK_EQ_INT(attn_kv_blocks_for_bytes((size_t)-1, 1, 1, 1, 1, ATTN_FP8_E4M3), 0x7fffffff);

    uint64_t rng = attn_test_seed() ^ 0x51e;
    for (int it = 0; it < 2000; it++) {
        int layers = attn_test_rand_int(&rng, 1, 80), bs = attn_test_rand_int(&rng, 1, 64);
        int hk = attn_test_rand_int(&rng, 1, 16), d = attn_test_rand_int(&rng, 1, 256);
        attn_dtype dt = (attn_dtype)attn_test_rand_int(&rng, 0, ATTN_DTYPE_COUNT - 1);
        size_t budget =
                (size_t)attn_test_rand_int(&rng, 0, 1 << 30) * (size_t)attn_test_rand_int(&rng, 1,
                                                                                          64);
        int nb = attn_kv_blocks_for_bytes(budget, layers, bs, hk, d, dt);
        if (nb > 0) {
            size_t per = attn_kv_cache_bytes(nb, bs, hk, d, dt);
            CHECK(per != 0 && per * (size_t)layers <= budget);
        }
        if (nb < 0x7fffffff) CHECK(attn_kv_cache_bytes(nb + 1, bs, hk, d, dt)
                                   * (size_t)layers > budget);
        CHECK_EQ_INT(attn_kv_max_tokens(budget, layers, bs, hk, d, dt), (int64_t)nb * bs);
        /* the per-block payload times the blocks never exceeds the budget */
        CHECK(attn_kv_block_bytes(layers, bs, hk, d, dt) * (size_t)nb <= budget);
        int64_t tokens = attn_test_rand_int(&rng, 1, 1 << 30);
        int64_t blocks = attn_kv_blocks_for_tokens(tokens, bs);
        CHECK(attn_kv_tokens_for_blocks(blocks, bs) >= tokens);
        CHECK(attn_kv_tokens_for_blocks(blocks - 1, bs) < tokens);
        CHECK_EQ_INT(attn_kv_blocks_for_tokens(attn_kv_tokens_for_blocks(blocks, bs), bs), blocks);
    }
}

/* ---- attn_write_kv ---- */

/* attn_write_kv into c on each of the n_isa ISAs at 1 and 3 threads, each time over fresh random
   bytes, against tk_ref_write: the rows written equal the reference's, the others untouched
   (`what` names the case in a failure). Returns the runs made. */
static int tk_check_write_kv(attn_kv_cache *c, attn_rows k, attn_rows v, const int64_t *slots,
                             int T, const attn_isa *isas, int n_isa, uint64_t *rng,
                             const char *what) {
    int runs = 0;
    for (int i = 0; i < n_isa; i++)
        for (int th = 1; th <= 3; th += 2) {
            attn_kv_cache want;
            void *wmem;
            tk_fill_random_bytes(c, rng);
            tk_clone(c, &want, &wmem);
            tk_ref_write(&want, k, v, slots, T);
            attn_exec e = tu_exec(isas[i], th);
            CHECK_STATUS(attn_write_kv(c, k, v, slots, T, &e), ATTN_OK);
            CHECK_MSG(tk_same_rows(c, &want), "isa %s threads %d %s", attn_isa_name(isas[i]), th,
                      what);
            free(wmem);
            runs++;
        }
    return runs;
}

TEST(write_kv_matches_reference_all_dtype_pairs) {
    enum { NB = 7, BS = 5, HK = 2, D = 37, T = 24, S = HK * D + 5 };
    attn_isa isas[ATTN_ISA_COUNT];
    int n_isa = tu_isas(isas);
    uint64_t rng = attn_test_seed() ^ 0x77;
    int64_t slots[T];
    unsigned char *kraw = (unsigned char *)tu_alloc((size_t)T * S * 4);
    unsigned char *vraw = (unsigned char *)tu_alloc((size_t)T * S * 4);
    for (int adt = 0; adt < 3; adt++)
        for (int cdt = 0; cdt < ATTN_DTYPE_COUNT; cdt++) {
            attn_dtype kdt = (attn_dtype)adt, vdt = (attn_dtype)((adt + cdt) % 3);
            int fp8 = attn__is_fp8((attn_dtype)cdt);
            attn_kv_cache c;
            void *mem;
            REQUIRE(tk_cache_new(&c, &mem, NB, BS, HK, D, (attn_dtype)cdt, fp8 ? 0.5f : 1.0f,
                                 fp8 ? 3.0f : 0.0f) == ATTN_OK);
            /* distinct slots in random order, some tokens padding (-1) */
            int perm[NB * BS];
            for (int i = 0; i < NB * BS; i++) perm[i] = i;
            for (int i = NB * BS - 1; i > 0; i--) {
                int j = attn_test_rand_int(&rng, 0, i), x = perm[i];
                perm[i] = perm[j]; perm[j] = x;
            }
            for (int t = 0; t < T; t++) slots[t] = attn_test_rand_int(&rng, 0, 4) == 0 ? -1
                : perm[t];
            tk_fill_wide(&rng, kdt, kraw, (size_t)T * S);
            tk_fill_wide(&rng, vdt, vraw, (size_t)T * S);
            attn_rows k = {kraw, kdt, S}, v = {vraw, vdt, S};
            char what[64];
            snprintf(what, sizeof what, "rows %s/%s cache %s", attn_dtype_name(kdt),
                     attn_dtype_name(vdt), attn_dtype_name((attn_dtype)cdt));
            tk_check_write_kv(&c, k, v, slots, T, isas, n_isa, &rng, what);
            free(mem);
        }
    free(kraw);
    free(vraw);
}

TEST(write_kv_same_dtype_is_bit_exact_copy) {
    enum { HK = 2, D = 19, T = 3 };
    attn_isa isas[ATTN_ISA_COUNT];
    int n_isa = tu_isas(isas);
    static const uint32_t f32_specials[] = {0x7fc00001u, 0xffa00005u /* signalling NaN */,
                                            0x80000000u, 0x00000001u, 0x7f800000u, 0xff7fffffu};
    static const uint16_t h_specials[] = {0x7c01u, 0xfe37u, 0x8000u, 0x0001u, 0x7c00u, 0x7f81u};
    for (int dt = 0; dt < 3; dt++) {
        size_t esz = attn_dtype_size((attn_dtype)dt);
        unsigned char rows[T * HK * D * 4];
        uint64_t rng = attn_test_seed() ^ (uint64_t)dt;
        for (size_t i = 0; i < (size_t)T * HK * D; i++) {
            if (i % 7 < 6) {
                if (dt == ATTN_F32) memcpy(rows + i * 4, &f32_specials[i % 7], 4);
                else memcpy(rows + i * 2, &h_specials[i % 7], 2);
            } else {
                for (size_t b = 0; b < esz; b++) rows[i * esz + b] =
                        (unsigned char)attn_test_rand_u64(&rng);
            }
        }
        for (int i = 0; i < n_isa; i++) {
            attn_kv_cache c;
            void *mem;
            REQUIRE(tk_cache_new(&c, &mem, 2, 2, HK, D, (attn_dtype)dt, 1.0f, 1.0f) == ATTN_OK);
            int64_t slots[T] = {3, 0, 2};
            attn_rows r = {rows, (attn_dtype)dt, 0};
            attn_exec e = tu_exec(isas[i], 1);
            CHECK_STATUS(attn_write_kv(&c, r, r, slots, T, &e), ATTN_OK);
            for (int t = 0; t < T; t++)
                for (int h = 0; h < HK; h++) {
                    int64_t b = slots[t] / 2, o = slots[t] % 2;
                    size_t at = (size_t)(((b * HK + h) * 2 + o) * D) * esz;
                    CHECK_BITEQ((unsigned char *)c.key + at, rows + ((size_t)t * HK + h) * D * esz,
                                D * esz);
                    CHECK_BITEQ((unsigned char *)c.value + at,
                                rows + ((size_t)t * HK + h) * D * esz, D * esz);
                }
            free(mem);
        }
    }
}

TEST(write_kv_fp8_scaling_and_saturation) {
    /* Hand-computed codes, independent of the encoders: e4m3 with scale 2 stores x / 2. */
    float x[8] = {1.0f, 896.0f, 1e5f, -1e5f, INFINITY, 3.0f, 0.0f, -0.0f};
    uint8_t want_e4m3[8] = {0x30 /* 0.5 */, 0x7e /* 448 */, 0x7e, 0xfe, 0x7e, 0x3c /* 1.5 */,
                            0x00, 0x80};
    /* e5m2 with scale 0.25 stores 4x: 1 -> 4, 896 -> 3584, saturates at 57344 */
    uint8_t want_e5m2[8] = {0x44 /* 4 */, 0x6b /* 3584 */, 0x7b, 0xfb, 0x7b, 0x4a /* 12 */,
                            0x00, 0x80};
    for (int f = 0; f < 2; f++) {
        attn_kv_cache c;
        void *mem;
        attn_dtype dt = f ? ATTN_FP8_E5M2 : ATTN_FP8_E4M3;
        float sc = f ? 0.25f : 2.0f;
        REQUIRE(tk_cache_new(&c, &mem, 1, 1, 1, 8, dt, sc, sc) == ATTN_OK);
        int64_t slot = 0;
        attn_rows r = {x, ATTN_F32, 0};
        CHECK_STATUS(attn_write_kv(&c, r, r, &slot, 1, NULL), ATTN_OK);
        CHECK_BITEQ(c.key, f ? want_e5m2 : want_e4m3, 8);
        CHECK_BITEQ(c.value, f ? want_e5m2 : want_e4m3, 8);
        /* read back = stored * scale */
        float back =
                (f ? attn_fp8_e5m2_to_f32(((uint8_t *)c.key)[1])
                 : attn_fp8_e4m3_to_f32(((uint8_t *)c.key)[1])) * sc;
        CHECK_NEAR(back, 896.0f, 0.0f);
        free(mem);
    }
    /* values beyond 448 * k_scale clamp to 448 * k_scale on read-back */
    {
        attn_kv_cache c;
        void *mem;
        REQUIRE(tk_cache_new(&c, &mem, 1, 1, 1, 4, ATTN_FP8_E4M3, 0.125f, 4.0f) == ATTN_OK);
        float kx[4] = {56.0f, 57.0f, 1000.0f, -300.0f}, vx[4] = {1792.0f, 5000.0f, -1e30f, 0.5f};
        int64_t slot = 0;
        attn_rows rk = {kx, ATTN_F32, 0}, rv = {vx, ATTN_F32, 0};
        CHECK_STATUS(attn_write_kv(&c, rk, rv, &slot, 1, NULL), ATTN_OK);
        const float kwant[4] = {56.0f, 56.0f, 56.0f, -56.0f};  /* 448 * 0.125 is the largest */
        for (int i = 0; i < 4; i++)
            CHECK_NEAR(attn_fp8_e4m3_to_f32(((uint8_t *)c.key)[i]) * 0.125f, kwant[i], 0.0f);
        CHECK_NEAR(attn_fp8_e4m3_to_f32(((uint8_t *)c.value)[0]) * 4.0f, 1792.0f, 0.0f);
        CHECK_NEAR(attn_fp8_e4m3_to_f32(((uint8_t *)c.value)[1]) * 4.0f, 1792.0f, 0.0f);
        CHECK_NEAR(attn_fp8_e4m3_to_f32(((uint8_t *)c.value)[2]) * 4.0f, -1792.0f, 0.0f);
        CHECK_NEAR(attn_fp8_e4m3_to_f32(((uint8_t *)c.value)[3]) * 4.0f, 0.5f, 0.0f);
        free(mem);
    }
}

/* stored = enc(x / scale) exactly: values where dividing and multiplying by the reciprocal
   round to different fp8 codes tell the two apart. */
TEST(write_kv_fp8_divides_by_scale) {
    const float sc = 3.0f;
    float x[32];
    uint8_t want[32];
    int n = 0;
    for (int c = 0x08; c < 0x76 && n < 32; c++) {  /* near 3 x each e4m3 rounding midpoint */
        float mid = (attn_fp8_e4m3_to_f32((uint8_t)c) + attn_fp8_e4m3_to_f32((uint8_t)(c + 1))) / 2;
        float lo = nextafterf(nextafterf(nextafterf(mid * sc, 0.0f), 0.0f), 0.0f);
        for (int k = 0; k < 7 && n < 32; k++, lo = nextafterf(lo, INFINITY))
            if (attn_f32_to_fp8_e4m3(lo / sc) != attn_f32_to_fp8_e4m3(lo * (1.0f / sc))) {
                x[n] = lo;
                want[n++] = attn_f32_to_fp8_e4m3(lo / sc);
            }
    }
    REQUIRE(n >= 4);
    attn_isa isas[ATTN_ISA_COUNT];
    int n_isa = tu_isas(isas);
    for (int i = 0; i < n_isa; i++) {
        attn_kv_cache c;
        void *mem;
        REQUIRE(tk_cache_new(&c, &mem, 1, 1, 1, n, ATTN_FP8_E4M3, sc, sc) == ATTN_OK);
        int64_t slot = 0;
        attn_rows r = {x, ATTN_F32, 0};
        attn_exec e = tu_exec(isas[i], 1);
        CHECK_STATUS(attn_write_kv(&c, r, r, &slot, 1, &e), ATTN_OK);
        CHECK_BITEQ(c.key, want, n);
        CHECK_BITEQ(c.value, want, n);
        free(mem);
    }
}

TEST(write_kv_skips_padding_and_rejects_out_of_range) {
    enum { NB = 3, BS = 4, HK = 2, D = 6 };
    attn_kv_cache c, before;
    void *mem, *bmem;
    uint64_t rng = attn_test_seed() ^ 0x1d;
    REQUIRE(tk_cache_new(&c, &mem, NB, BS, HK, D, ATTN_BF16, 1.0f, 1.0f) == ATTN_OK);
    tk_fill_random_bytes(&c, &rng);
    tk_clone(&c, &before, &bmem);
    float k[4 * HK * D], v[4 * HK * D];
    for (int i = 0; i < 4 * HK * D; i++) { k[i] = (float)i; v[i] = (float)-i; }
    attn_rows rk = {k, ATTN_F32, 0}, rv = {v, ATTN_F32, 0};
    int64_t all_pad[4] = {-1, -1, -1, -1};
    CHECK_STATUS(attn_write_kv(&c, rk, rv, all_pad, 4, NULL), ATTN_OK);
    CHECK(tk_same_contents(&c, &before));
    /* a bad slot anywhere (even after good ones) rejects the whole call */
    const int64_t bad[][4] = {{0, 5, -1, -2}, {0, 5, -1, NB * BS}, {11, 0, INT64_MIN, 1},
                              {INT64_MAX, 0, 1, 2}, {1, 2, 3, (int64_t)NB * BS + 100}};
    for (int i = 0; i < 5; i++) {
        CHECK_STATUS(attn_write_kv(&c, rk, rv, bad[i], 4, NULL), ATTN_ERR_OUT_OF_RANGE);
        CHECK(tk_same_contents(&c, &before));
    }
    /* padding in the middle: only the real slots change */
    int64_t mixed[4] = {-1, 11, -1, 0};
    CHECK_STATUS(attn_write_kv(&c, rk, rv, mixed, 4, NULL), ATTN_OK);
    tk_ref_write(&before, rk, rv, mixed, 4);
    CHECK(tk_same_contents(&c, &before));
    /* the last slot of the cache is in range */
    int64_t last[1] = {NB * BS - 1};
    CHECK_STATUS(attn_write_kv(&c, rk, rv, last, 1, NULL), ATTN_OK);
    free(mem);
    free(bmem);
}

TEST(write_kv_duplicate_slots_last_wins) {
    enum { NB = 16, BS = 3, HK = 3, D = 20, T = 200 };
    attn_kv_cache c, want;
    void *mem, *wmem;
    uint64_t rng = attn_test_seed() ^ 0xd0;
    REQUIRE(tk_cache_new(&c, &mem, NB, BS, HK, D, ATTN_F16, 1.0f, 1.0f) == ATTN_OK);
    float *k = (float *)tu_alloc(sizeof(float) * T * HK * D),
           *v = (float *)tu_alloc(sizeof(float) * T * HK * D);
    for (int i = 0; i < T * HK * D; i++) { k[i] = (float)i; v[i] = (float)(i % 1000) * 0.5f; }
    int64_t slots[T];
    /* many tokens land on the same few slots */
    for (int t = 0; t < T; t++) slots[t] = attn_test_rand_int(&rng, -1, 9) * 4;
    for (int t = 0; t < T; t++) if (slots[t] < 0) slots[t] = -1;
    attn_rows rk = {k, ATTN_F32, 0}, rv = {v, ATTN_F32, 0};
    memset(c.key, 0, tk_array_bytes(&c));
    memset(c.value, 0, tk_array_bytes(&c));
    tk_clone(&c, &want, &wmem);
    tk_ref_write(&want, rk, rv, slots, T);
    /* and the winner really is the last token with that slot (not just what the reference does) */
    int last4 = -1;
    for (int t = 0; t < T; t++) if (slots[t] == 4) last4 = t;
    REQUIRE(last4 >= 0);
    CHECK_EQ_INT(((uint16_t *)want.key)[((1 * HK + 0) * BS + 1) * D],
                 attn_f32_to_f16(k[last4 * HK * D]));
    int threads[4] = {1, 2, 4, 7};
    for (int i = 0; i < 5; i++) {
        tu_pool pool = {0};
        attn_exec e = tu_exec(ATTN_ISA_AUTO, i < 4 ? threads[i] : 5);
        if (i == 4) { e.parallel_for = tu_pool_for; e.pool = &pool; }
        memset(c.key, 0, tk_array_bytes(&c));
        memset(c.value, 0, tk_array_bytes(&c));
        CHECK_STATUS(attn_write_kv(&c, rk, rv, slots, T, &e), ATTN_OK);
        CHECK_MSG(tk_same_rows(&c, &want), "run %d", i);
        if (i == 4) CHECK_EQ_INT(pool.calls, 1);
    }
    free(k); free(v); free(mem); free(wmem);
}

TEST(write_kv_rejects_bad_input) {
    enum { HK = 2, D = 4 };
    attn_kv_cache c, snap;
    void *mem, *smem;
    uint64_t rng = attn_test_seed() ^ 0xbad;
    REQUIRE(tk_cache_new(&c, &mem, 2, 2, HK, D, ATTN_F16, 1.0f, 1.0f) == ATTN_OK);
    tk_fill_random_bytes(&c, &rng);
    tk_clone(&c, &snap, &smem);
    float k[2 * HK * D] = {0}, v[2 * HK * D] = {0};
    uint8_t k8[2 * HK * D] = {0};
    int64_t slots[2] = {0, 1};
    attn_rows rk = {k, ATTN_F32, 0}, rv = {v, ATTN_F32, 0};
    attn_rows nul = {NULL, ATTN_F32, 0}, f8 = {k8, ATTN_FP8_E4M3, 0},
              narrow = {k, ATTN_F32, HK * D - 1};
    attn_rows neg = {k, ATTN_F32, -8};
    attn_exec bad_threads = tu_exec(ATTN_ISA_AUTO, -1), bad_isa = tu_exec((attn_isa)7, 1);
    CHECK_STATUS(attn_write_kv(NULL, rk, rv, slots, 2, NULL), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_write_kv(&c, rk, rv, NULL, 2, NULL), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_write_kv(&c, rk, rv, slots, -1, NULL), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_write_kv(&c, nul, rv, slots, 2, NULL), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_write_kv(&c, rk, nul, slots, 2, NULL), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_write_kv(&c, f8, rv, slots, 2, NULL), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_write_kv(&c, narrow, rv, slots, 2, NULL), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_write_kv(&c, rk, neg, slots, 2, NULL), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_write_kv(&c, rk, rv, slots, 2, &bad_threads), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_write_kv(&c, rk, rv, slots, 2, &bad_isa), ATTN_ERR_INVALID_ARG);
    for (int isa = ATTN_ISA_SCALAR; isa < ATTN_ISA_COUNT; isa++)
        if (!attn_isa_supported((attn_isa)isa)) {
            attn_exec e = tu_exec((attn_isa)isa, 1);
            CHECK_STATUS(attn_write_kv(&c, rk, rv, slots, 2, &e), ATTN_ERR_UNSUPPORTED);
        }
    /* hand-made structs that break the rules */
    attn_kv_cache broken = c;
    broken.key = NULL;
    CHECK_STATUS(attn_write_kv(&broken, rk, rv, slots, 2, NULL), ATTN_ERR_INVALID_ARG);
    broken = c; broken.k_scale = 2.0f;  /* f16 stores unscaled */
    CHECK_STATUS(attn_write_kv(&broken, rk, rv, slots, 2, NULL), ATTN_ERR_INVALID_ARG);
    broken = c; broken.v_scale = 0.0f;
    CHECK_STATUS(attn_write_kv(&broken, rk, rv, slots, 2, NULL), ATTN_ERR_INVALID_ARG);
    broken = c; broken.num_blocks = 0;
    CHECK_STATUS(attn_write_kv(&broken, rk, rv, slots, 2, NULL), ATTN_ERR_INVALID_ARG);
    broken = c; broken.head_size = ATTN_MAX_HEAD_SIZE + 1;
    CHECK_STATUS(attn_write_kv(&broken, rk, rv, slots, 2, NULL), ATTN_ERR_INVALID_ARG);
    broken = c; broken.dtype = (attn_dtype)7;
    CHECK_STATUS(attn_write_kv(&broken, rk, rv, slots, 2, NULL), ATTN_ERR_INVALID_ARG);
    CHECK(tk_same_contents(&c, &snap));
    /* zero tokens: nothing to do, NULL slots and data allowed */
    CHECK_STATUS(attn_write_kv(&c, nul, nul, NULL, 0, NULL), ATTN_OK);
    CHECK(tk_same_contents(&c, &snap));
    free(mem);
    free(smem);
}

/* ---- one rule for a cache struct ---- */

/* Every function that takes a cache: its status on `c` (the size queries answer 0 for a struct
   they refuse, reported here as ATTN_ERR_INVALID_ARG). `good` is a valid cache of the same
   geometry over other memory, the partner of the block copies. */
#define TKR_HK 2
#define TKR_D 8
#define TKR_BS 4
#define TKR_NB 3
static void tk_every_cache_call(attn_kv_cache *c, attn_kv_cache *good, attn_status want) {
    attn_params p;
    memset(&p, 0, sizeof p);
    p.num_heads = 2 * TKR_HK; p.num_kv_heads = TKR_HK; p.head_size = TKR_D;
    float q[2][2 * TKR_HK * TKR_D], out[2][2 * TKR_HK * TKR_D], kv[2][TKR_HK * TKR_D];
    for (int i = 0; i < 2 * TKR_HK * TKR_D; i++) q[0][i] = q[1][i] = 0.01f * (float)(i % 13);
    for (int i = 0; i < TKR_HK * TKR_D; i++) kv[0][i] = kv[1][i] = 0.02f * (float)(i % 7);
    memset(out, 0, sizeof out);
    attn_rows rq = {q, ATTN_F32, 0}, ro = {out, ATTN_F32, 0}, rkv = {kv, ATTN_F32, 0};
    int64_t slots[2] = {1, 6}, pairs[1][2] = {{0, 2}};  /* slots[0]: position 5 in table {1, 0} */
    int32_t tables[2] = {1, 0}, lens[1] = {6}, qs[2] = {0, 2};
    attn_kv_cache *layers[2] = {good, c};
    attn_layer L;
    attn_metadata md;
    REQUIRE(attn_layer_init(&L, &p, ATTN_DECODER, ATTN_BACKEND_SDPA) == ATTN_OK);
    memset(&md, 0, sizeof md);
    md.num_decode_tokens = 1;
    md.slot_mapping = slots;
    md.seq_lens = lens;
    md.block_tables = tables;
    md.max_blocks_per_seq = 2;
    /* sizes: as the good cache's, or 0 for a struct they refuse */
    size_t dsz = attn_paged_decode_workspace_size(&p, NULL, c, lens, 1, ATTN_PAGED_AUTO);
    size_t psz = attn_paged_prefill_workspace_size(&p, NULL, c, qs, lens, 1);
    size_t gd = attn_paged_decode_workspace_size(&p, NULL, good, lens, 1, ATTN_PAGED_AUTO);
    size_t gp = attn_paged_prefill_workspace_size(&p, NULL, good, qs, lens, 1);
    size_t bytes = ATTN__MAX(ATTN__MAX(gd, gp), attn_forward_workspace_size(&L, &md, NULL));
    CHECK(dsz == (want == ATTN_OK ? gd : 0));
    CHECK(psz == (want == ATTN_OK ? gp : 0));
    REQUIRE(gd > 0 && gp > 0);
    void *ws = tu_alloc(bytes);
    /* the calls (workspace large enough, so only the cache can be refused) */
    CHECK_STATUS(attn_write_kv(c, rkv, rkv, slots, 2, NULL), want);
    CHECK_STATUS(attn_swap_blocks(c, good, &pairs[0][0], 1), want);
    CHECK_STATUS(attn_swap_blocks(good, c, &pairs[0][0], 1), want);
    CHECK_STATUS(attn_copy_blocks(&layers[1], 1, &pairs[0][0], 1), want);
    CHECK_STATUS(attn_copy_blocks(layers, 2, &pairs[0][0], 1), want);
    CHECK_STATUS(attn_paged_decode(&p, NULL, rq, ro, c, tables, 2, lens, 1, ATTN_PAGED_AUTO, NULL,
                                   ws, bytes), want);
    CHECK_STATUS(attn_paged_prefill(&p, NULL, rq, ro, c, tables, 2, qs, lens, 1, 1, NULL, ws,
                                    bytes), want);
    CHECK_STATUS(attn_forward(&L, NULL, rq, rkv, rkv, c, &md, ro, ws, bytes), want);
    if (want != ATTN_OK) {  /* nothing written */
        int untouched = 1;
        for (int i = 0; i < 2 * TKR_HK * TKR_D; i++) untouched &= out[0][i] == 0.0f &&
            out[1][i] == 0.0f;
        CHECK(untouched);
    }
    free(ws);
}

/* The attn_kv_cache comment's rule (non-NULL arrays, sizes attn_kv_cache_bytes accepts, scales
   finite and > 0, exactly 1 unless fp8) is checked alike by every function that takes a cache:
   a struct that breaks it is refused by all of them with ATTN_ERR_INVALID_ARG and changes
   nothing, and a struct filled by hand that keeps it is accepted by all of them. */
TEST(kv_cache_struct_checked_alike_everywhere) {
    size_t n = (size_t)TKR_NB * TKR_BS * TKR_HK * TKR_D * 4;
    for (int dt = 0; dt < ATTN_DTYPE_COUNT; dt++) {
        int fp8 = attn__is_fp8((attn_dtype)dt);
        attn_kv_cache c, good, snap;
        void *gmem, *smem;
        uint64_t rng = attn_test_seed() ^ (0xca5e + (uint64_t)dt);
        REQUIRE(tk_cache_new(&good, &gmem, TKR_NB, TKR_BS, TKR_HK, TKR_D, (attn_dtype)dt,
                             fp8 ? 0.5f : 1.0f, fp8 ? 0.25f : 1.0f) == ATTN_OK);
        /* filled by hand over memory that attn_kv_cache_init never saw */
        memset(&c, 0, sizeof c);
        c.key = tu_alloc(n);
        c.value = tu_alloc(n);
        c.num_blocks = TKR_NB; c.block_size = TKR_BS; c.num_kv_heads = TKR_HK; c.head_size = TKR_D;
        c.dtype = (attn_dtype)dt;
        c.k_scale = fp8 ? 2.0f : 1.0f;
        c.v_scale = fp8 ? 0.125f : 1.0f;
        good.k_scale = c.k_scale; good.v_scale = c.v_scale;  /* block copies need equal scales */
        tk_fill_random_bytes(&c, &rng);
        tk_fill_random_bytes(&good, &rng);
        tk_every_cache_call(&c, &good, ATTN_OK);
        tk_clone(&c, &snap, &smem);
        attn_kv_cache bad[12];
        int nbad = 0;
        bad[nbad] = c; bad[nbad++].k_scale = fp8 ? -1.0f : 2.0f;  /* non-fp8 caches are unscaled */
        bad[nbad] = c; bad[nbad++].v_scale = fp8 ? 0.0f : 0.5f;
        bad[nbad] = c; bad[nbad++].k_scale = NAN;
        bad[nbad] = c; bad[nbad++].v_scale = INFINITY;
        bad[nbad] = c; bad[nbad++].key = NULL;
        bad[nbad] = c; bad[nbad++].value = NULL;
        bad[nbad] = c; bad[nbad++].num_blocks = 0;
        bad[nbad] = c; bad[nbad++].block_size = 0;
        bad[nbad] = c; bad[nbad++].dtype = (attn_dtype)7;
        for (int i = 0; i < nbad; i++) {
            tk_every_cache_call(&bad[i], &good, ATTN_ERR_INVALID_ARG);
            CHECK(tk_same_contents(&c, &snap));
        }
        free(c.key);
        free(c.value);
        free(gmem);
        free(smem);
    }
}

/* ---- swap / copy ---- */

TEST(swap_blocks_copies_exactly_and_validates) {
    attn_kv_cache src, dst, snap;
    void *smem, *dmem, *pmem;
    uint64_t rng = attn_test_seed() ^ 0x5a9;
    REQUIRE(tk_cache_new(&src, &smem, 6, 3, 2, 5, ATTN_BF16, 1, 1) == ATTN_OK);
    REQUIRE(tk_cache_new(&dst, &dmem, 9, 3, 2, 5, ATTN_BF16, 1, 1) == ATTN_OK);
    tk_fill_random_bytes(&src, &rng);
    tk_fill_random_bytes(&dst, &rng);
    tk_clone(&dst, &snap, &pmem);
    size_t bb = tk_block_bytes(&src);
    int64_t pairs[3][2] = {{0, 3}, {5, 0}, {0, 8}};
    CHECK_STATUS(attn_swap_blocks(&src, &dst, &pairs[0][0], 3), ATTN_OK);
    tk_check_swap_038(&src, &dst, &snap, bb);
    memcpy(snap.key, dst.key, tk_array_bytes(&dst));
    memcpy(snap.value, dst.value, tk_array_bytes(&dst));
    /* rejected calls leave dst untouched */
    int64_t out_src[2][2] = {{1, 1}, {6, 2}}, out_dst[2][2] = {{1, 1}, {2, 9}},
            neg[1][2] = {{-1, 0}};
    int64_t dup[3][2] = {{1, 4}, {2, 5}, {3, 4}};
    CHECK_STATUS(attn_swap_blocks(&src, &dst, &out_src[0][0], 2), ATTN_ERR_OUT_OF_RANGE);
    CHECK_STATUS(attn_swap_blocks(&src, &dst, &out_dst[0][0], 2), ATTN_ERR_OUT_OF_RANGE);
    CHECK_STATUS(attn_swap_blocks(&src, &dst, &neg[0][0], 1), ATTN_ERR_OUT_OF_RANGE);
    CHECK_STATUS(attn_swap_blocks(&src, &dst, &dup[0][0], 3), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_swap_blocks(&src, &dst, NULL, 1), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_swap_blocks(&src, &dst, &dup[0][0], -1), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_swap_blocks(NULL, &dst, &dup[0][0], 1), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_swap_blocks(&src, NULL, &dup[0][0], 1), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_swap_blocks(&src, &dst, NULL, 0), ATTN_OK);
    attn_kv_cache other = src;
    other.head_size = 4;
    CHECK_STATUS(attn_swap_blocks(&other, &dst, &dup[0][0], 1), ATTN_ERR_INVALID_ARG);
    other = src; other.dtype = ATTN_F16;
    CHECK_STATUS(attn_swap_blocks(&other, &dst, &dup[0][0], 1), ATTN_ERR_INVALID_ARG);
    other = src; other.block_size = 6; other.num_blocks = 3;
    CHECK_STATUS(attn_swap_blocks(&other, &dst, &dup[0][0], 1), ATTN_ERR_INVALID_ARG);
    other = src; other.num_kv_heads = 1; other.head_size = 10;
    CHECK_STATUS(attn_swap_blocks(&other, &dst, &dup[0][0], 1), ATTN_ERR_INVALID_ARG);
    /* within one cache: a chain or a self pair would depend on the copy order */
    int64_t chain[2][2] = {{1, 2}, {2, 3}}, self_pair[1][2] = {{4, 4}},
            fan[3][2] = {{1, 2}, {1, 3}, {7, 8}};
    CHECK_STATUS(attn_swap_blocks(&dst, &dst, &chain[0][0], 2), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_swap_blocks(&dst, &dst, &self_pair[0][0], 1), ATTN_ERR_INVALID_ARG);
    attn_kv_cache alias = dst;  /* another struct over the same memory is the same cache */
    CHECK_STATUS(attn_swap_blocks(&alias, &dst, &chain[0][0], 2), ATTN_ERR_INVALID_ARG);
    CHECK(tk_same_contents(&dst, &snap));
    /* a chain across two different caches is fine, and so is a fan-out within one */
    CHECK_STATUS(attn_swap_blocks(&src, &dst, &chain[0][0], 2), ATTN_OK);
    CHECK_BITEQ((unsigned char *)dst.key + 2 * bb, (unsigned char *)src.key + 1 * bb, bb);
    CHECK_BITEQ((unsigned char *)dst.value + 3 * bb, (unsigned char *)src.value + 2 * bb, bb);
    CHECK_STATUS(attn_swap_blocks(&dst, &dst, &fan[0][0], 3), ATTN_OK);
    CHECK_BITEQ((unsigned char *)dst.key + 3 * bb, (unsigned char *)dst.key + 1 * bb, bb);
    CHECK_BITEQ((unsigned char *)dst.value + 8 * bb, (unsigned char *)dst.value + 7 * bb, bb);
    /* fp8 caches with different scales: a byte copy would change the values */
    attn_kv_cache f1, f2;
    void *m1, *m2;
    REQUIRE(tk_cache_new(&f1, &m1, 2, 2, 1, 4, ATTN_FP8_E4M3, 1.0f, 2.0f) == ATTN_OK);
    REQUIRE(tk_cache_new(&f2, &m2, 2, 2, 1, 4, ATTN_FP8_E4M3, 1.0f, 0.5f) == ATTN_OK);
    int64_t one[1][2] = {{0, 1}};
    CHECK_STATUS(attn_swap_blocks(&f1, &f2, &one[0][0], 1), ATTN_ERR_INVALID_ARG);
    free(m1); free(m2); free(smem); free(dmem); free(pmem);
}

TEST(copy_blocks_all_layers_and_validates) {
    enum { L = 3, NB = 8 };
    attn_kv_cache c[L], snap[L];
    void *mem[L], *smem[L];
    attn_kv_cache *layers[L];
    uint64_t rng = attn_test_seed() ^ 0xc0b;
    /* layers may differ in geometry and dtype; they share the block count */
    REQUIRE(tk_cache_new(&c[0], &mem[0], NB, 4, 2, 8, ATTN_F32, 1, 1) == ATTN_OK);
    REQUIRE(tk_cache_new(&c[1], &mem[1], NB, 4, 1, 16, ATTN_FP8_E5M2, 0.5f, 2.0f) == ATTN_OK);
    REQUIRE(tk_cache_new(&c[2], &mem[2], NB, 4, 4, 3, ATTN_F16, 1, 1) == ATTN_OK);
    for (int l = 0; l < L; l++) {
        tk_fill_random_bytes(&c[l], &rng);
        tk_clone(&c[l], &snap[l], &smem[l]);
        layers[l] = &c[l];
    }
    int64_t pairs[3][2] = {{1, 4}, {1, 5}, {2, 6}};
    CHECK_STATUS(attn_copy_blocks(layers, L, &pairs[0][0], 3), ATTN_OK);
    for (int l = 0; l < L; l++) {
        size_t bb = tk_block_bytes(&c[l]);
        for (int b = 0; b < NB; b++) {
            int from = b == 4 || b == 5 ? 1 : b == 6 ? 2 : b;
            CHECK_BITEQ((unsigned char *)c[l].key + b * bb,
                        (unsigned char *)snap[l].key + from * bb, bb);
            CHECK_BITEQ((unsigned char *)c[l].value + b * bb,
                        (unsigned char *)snap[l].value + from * bb, bb);
        }
        memcpy(snap[l].key, c[l].key, tk_array_bytes(&c[l]));
        memcpy(snap[l].value, c[l].value, tk_array_bytes(&c[l]));
    }
    int64_t oor[2][2] = {{0, 1}, {2, NB}}, dup[2][2] = {{0, 7}, {3, 7}},
            chain[2][2] = {{0, 1}, {1, 2}};
    int64_t chain_rev[2][2] = {{1, 2}, {0, 1}}, self_pair[1][2] = {{3, 3}};
    CHECK_STATUS(attn_copy_blocks(layers, L, &oor[0][0], 2), ATTN_ERR_OUT_OF_RANGE);
    CHECK_STATUS(attn_copy_blocks(layers, L, &dup[0][0], 2), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_copy_blocks(layers, L, &chain[0][0], 2), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_copy_blocks(layers, L, &chain_rev[0][0], 2), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_copy_blocks(layers, L, &self_pair[0][0], 1), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_copy_blocks(layers, -1, &pairs[0][0], 1), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_copy_blocks(NULL, L, &pairs[0][0], 1), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_copy_blocks(layers, L, NULL, 1), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_copy_blocks(layers, L, &pairs[0][0], -2), ATTN_ERR_INVALID_ARG);
    attn_kv_cache *with_null[L] = {&c[0], NULL, &c[2]};
    CHECK_STATUS(attn_copy_blocks(with_null, L, &pairs[0][0], 1), ATTN_ERR_INVALID_ARG);
    attn_kv_cache smaller = c[2];
    smaller.num_blocks = NB - 1;
    attn_kv_cache *mixed[L] = {&c[0], &c[1], &smaller};
    CHECK_STATUS(attn_copy_blocks(mixed, L, &pairs[0][0], 1), ATTN_ERR_INVALID_ARG);
    for (int l = 0; l < L; l++) CHECK(tk_same_contents(&c[l], &snap[l]));
    CHECK_STATUS(attn_copy_blocks(NULL, 0, NULL, 0), ATTN_OK);
    CHECK_STATUS(attn_copy_blocks(layers, L, NULL, 0), ATTN_OK);
    for (int l = 0; l < L; l++) { free(mem[l]); free(smem[l]); }
}

TEST(pair_conflicts_found_across_bitmap_windows) {
    /* 100000 one-byte blocks: ids span four 32768-id windows of the conflict check */
    attn_kv_cache c;
    void *mem;
    REQUIRE(tk_cache_new(&c, &mem, 100000, 1, 1, 1, ATTN_FP8_E4M3, 1, 1) == ATTN_OK);
    for (int i = 0; i < 100000; i++) {
        ((uint8_t *)c.key)[i] = (uint8_t)(i * 7);
        ((uint8_t *)c.value)[i] = (uint8_t)(i * 13);
    }
    attn_kv_cache *layers[1] = {&c};
    int64_t ok[4][2] = {{10, 99999}, {20, 5}, {30, 5 + 32768}, {40, 70000}};
    CHECK_STATUS(attn_copy_blocks(layers, 1, &ok[0][0], 4), ATTN_OK);
    CHECK_EQ_INT(((uint8_t *)c.key)[99999], (uint8_t)70);
    CHECK_EQ_INT(((uint8_t *)c.key)[5 + 32768], (uint8_t)210);
    CHECK_EQ_INT(((uint8_t *)c.value)[70000], (uint8_t)(40 * 13));
    int64_t dup_far[4][2] = {{1, 70000}, {2, 3}, {4, 99000}, {6, 70000}};
    int64_t src_is_dst[3][2] = {{99990, 50}, {1, 99990}, {2, 60000}};
    int64_t edge[2][2] = {{0, 32767}, {32768, 1}};  /* window edges, no conflict */
    int64_t edge_bad[2][2] = {{32767, 32768}, {2, 32767}};
    CHECK_STATUS(attn_copy_blocks(layers, 1, &dup_far[0][0], 4), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_copy_blocks(layers, 1, &src_is_dst[0][0], 3), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_copy_blocks(layers, 1, &edge[0][0], 2), ATTN_OK);
    CHECK_STATUS(attn_copy_blocks(layers, 1, &edge_bad[0][0], 2), ATTN_ERR_INVALID_ARG);
    /* the private check directly, against an O(n^2) oracle on random pair lists */
    uint64_t rng = attn_test_seed() ^ 0xb175;
    int64_t pairs[40][2];
    for (int it = 0; it < 3000; it++) {
        int n = attn_test_rand_int(&rng, 0, 40),
            span = attn_test_rand_int(&rng, 0, 3) ? 200 : 150000;
        for (int i = 0; i < n; i++) {
            pairs[i][0] = attn_test_rand_int(&rng, 0, span);
            pairs[i][1] = attn_test_rand_int(&rng, 0, span);
        }
        for (int same = 0; same < 2; same++) {
            int want = 0;
            for (int i = 0; i < n; i++)
                for (int j = 0; j < n; j++) {
                    if (i != j && pairs[i][1] == pairs[j][1]) want = 1;
                    if (same && pairs[i][1] == pairs[j][0]) want = 1;
                }
            CHECK_EQ_INT(attn__pairs_conflict(&pairs[0][0], n, same), want);
        }
    }
    free(mem);
}

/* ---- block pool and sequences ---- */

TEST(block_pool_init_counts_and_bad_input) {
    CHECK_EQ_INT(attn_block_pool_bytes(10), 64 + 2 * 64);
    CHECK_EQ_INT(attn_block_pool_bytes(16), 64 + 2 * 64);
    CHECK_EQ_INT(attn_block_pool_bytes(17), 64 + 2 * 128);
    CHECK_EQ_INT(attn_block_pool_bytes(0), 0);
    CHECK_EQ_INT(attn_block_pool_bytes(-3), 0);
    size_t need = attn_block_pool_bytes(10);
    unsigned char *mem = (unsigned char *)tu_alloc(need + 3);
    attn_block_pool p, before;
    memset(&p, 0x33, sizeof p);
    before = p;
    CHECK_STATUS(attn_block_pool_init(NULL, 10, 4, mem, need), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_block_pool_init(&p, 0, 4, mem, need), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_block_pool_init(&p, 10, 0, mem, need), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_block_pool_init(&p, 10, 4, NULL, need), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_block_pool_init(&p, 10, 4, mem + 3, need - 1), ATTN_ERR_WORKSPACE_TOO_SMALL);
    CHECK(memcmp(&p, &before, sizeof p) == 0);
    CHECK_STATUS(attn_block_pool_init(&p, 10, 4, mem + 3, need), ATTN_OK);
    CHECK((unsigned char *)p.refcount >= mem + 3 &&
          (unsigned char *)(p.free_ids + 10) <= mem + 3 + need);
    CHECK_EQ_INT(attn_block_pool_free_count(&p), 10);
    CHECK_EQ_INT(attn_block_pool_used_count(&p), 0);
    CHECK_EQ_INT(attn_block_pool_free_count(NULL), 0);
    CHECK_EQ_INT(attn_block_pool_used_count(NULL), 0);
    /* first allocations come out as 0, 1, 2 */
    int32_t table[8];
    attn_seq s;
    int64_t slots[12];
    CHECK_STATUS(attn_seq_init(&s, table, 8), ATTN_OK);
    CHECK_STATUS(attn_seq_append(&p, &s, 12, slots, NULL, NULL), ATTN_OK);
    CHECK(table[0] == 0 && table[1] == 1 && table[2] == 2);
    for (int i = 0; i < 12; i++) CHECK_EQ_INT(slots[i], i);
    CHECK_EQ_INT(attn_block_pool_free_count(&p), 7);
    CHECK_EQ_INT(attn_block_pool_used_count(&p), 3);
    attn_seq_release(&p, &s);
    CHECK_EQ_INT(attn_block_pool_free_count(&p), 10);
    CHECK(s.len == 0 && s.num_blocks == 0);
    /* attn_seq_init */
    CHECK_STATUS(attn_seq_init(NULL, table, 8), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_seq_init(&s, NULL, 8), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_seq_init(&s, table, -1), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_seq_init(&s, NULL, 0), ATTN_OK);
    free(mem);
}

/* Snapshot of everything a failing pool call must leave alone. */
typedef struct tk_snap {
    attn_block_pool pool;
    unsigned char mem[512];
    attn_seq seq;
    int32_t table[64];
} tk_snap;

static void tk_take(tk_snap *s, const attn_block_pool *p, const void *mem, size_t bytes,
                    const attn_seq *seq) {
    memset(s, 0, sizeof *s);
    s->pool = *p;
    memcpy(s->mem, mem, bytes);
    s->seq = *seq;
    if (seq->max_blocks > 0) memcpy(s->table, seq->block_table,
                                    sizeof(int32_t) * (size_t)seq->max_blocks);
}

static int tk_unchanged(const tk_snap *s, const attn_block_pool *p, const void *mem, size_t bytes,
                        const attn_seq *seq) {
    return memcmp(&s->pool, p, sizeof *p) == 0 && memcmp(s->mem, mem, bytes) == 0 &&
           memcmp(&s->seq, seq, sizeof *seq) == 0 &&
           (seq->max_blocks == 0 ||
            memcmp(s->table, seq->block_table, sizeof(int32_t) * (size_t)seq->max_blocks) == 0);
}

TEST(seq_append_slots_cow_and_atomicity) {
    size_t bytes = attn_block_pool_bytes(6);
    unsigned char *mem = (unsigned char *)tu_alloc(bytes);
    attn_block_pool p;
    /* zeroed first: the snapshots compare whole structs (padding) and unused bytes (memcheck) */
    memset(mem, 0, bytes); memset(&p, 0, sizeof p);
    REQUIRE(attn_block_pool_init(&p, 6, 4, mem, bytes) == ATTN_OK);
    int32_t ta[8] = {0}, tb[8] = {0}, tc[2] = {0};
    attn_seq a, b, c;
    memset(&a, 0, sizeof a); memset(&b, 0, sizeof b); memset(&c, 0, sizeof c);
    attn_seq_init(&a, ta, 8);
    attn_seq_init(&b, tb, 8);
    attn_seq_init(&c, tc, 2);
    int64_t slots[32] = {0}, cow[1][2] = {{-7, -7}};
    int n_cow = -7;
    CHECK_STATUS(attn_seq_append(&p, &a, 6, slots, cow, &n_cow), ATTN_OK);
    CHECK_EQ_INT(n_cow, 0);
    for (int i = 0; i < 6; i++) CHECK_EQ_INT(slots[i], i);
    CHECK_STATUS(attn_seq_fork(&p, &a, &b), ATTN_OK);
    CHECK(b.len == 6 && b.num_blocks == 2 && tb[0] == 0 && tb[1] == 1);
    CHECK(p.refcount[0] == 2 && p.refcount[1] == 2);
    /* a's last block (1) is half full and shared: without cow buffers the append must fail */
    tk_snap snap;
    tk_take(&snap, &p, mem, bytes, &a);
    CHECK_STATUS(attn_seq_append(&p, &a, 1, slots, NULL, &n_cow), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_seq_append(&p, &a, 1, slots, cow, NULL), ATTN_ERR_INVALID_ARG);
    CHECK(tk_unchanged(&snap, &p, mem, bytes, &a));
    /* with them: block 2 replaces block 1, the token lands at offset 2 of block 2 */
    CHECK_STATUS(attn_seq_append(&p, &a, 1, slots, cow, &n_cow), ATTN_OK);
    CHECK_EQ_INT(n_cow, 1);
    CHECK(cow[0][0] == 1 && cow[0][1] == 2);
    CHECK(ta[0] == 0 && ta[1] == 2 && a.len == 7 && a.num_blocks == 2);
    CHECK_EQ_INT(slots[0], 2 * 4 + 2);
    CHECK(p.refcount[1] == 1 && p.refcount[2] == 1 && p.refcount[0] == 2);
    /* b now owns block 1 alone: it appends in place, no copy */
    CHECK_STATUS(attn_seq_append(&p, &b, 3, slots, NULL, NULL), ATTN_OK);
    CHECK(slots[0] == 6 && slots[1] == 7 && slots[2] == 3 * 4 + 0);
    CHECK(tb[2] == 3 && b.num_blocks == 3 && b.len == 9);
    /* a full shared last block needs no copy: c = fork of a truncated to 4 tokens */
    CHECK_STATUS(attn_seq_fork(&p, &a, &c), ATTN_OK);
    CHECK_STATUS(attn_seq_truncate(&p, &c, 4), ATTN_OK);
    CHECK(c.num_blocks == 1 && c.len == 4 && p.refcount[2] == 1 && p.refcount[0] == 3);
    n_cow = -1;
    CHECK_STATUS(attn_seq_append(&p, &c, 2, slots, cow, &n_cow), ATTN_OK);
    CHECK_EQ_INT(n_cow, 0);
    CHECK(tc[1] == 4 && slots[0] == 16 && slots[1] == 17);
    /* table full (c holds 2 blocks at most): OUT_OF_RANGE, even though blocks are free */
    CHECK_EQ_INT(attn_block_pool_free_count(&p), 1);
    tk_take(&snap, &p, mem, bytes, &c);
    CHECK_STATUS(attn_seq_append(&p, &c, 3, slots, cow, &n_cow), ATTN_ERR_OUT_OF_RANGE);
    CHECK(tk_unchanged(&snap, &p, mem, bytes, &c));
    CHECK_STATUS(attn_seq_append(&p, &c, 2, slots, cow, &n_cow), ATTN_OK);  /* fills block 4 */
    /* out of blocks: b needs 2 blocks (9 -> 17 tokens), 1 is free */
    tk_take(&snap, &p, mem, bytes, &b);
    int64_t slots_before[32];
    memcpy(slots_before, slots, sizeof slots);
    CHECK_STATUS(attn_seq_append(&p, &b, 8, slots, cow, &n_cow), ATTN_ERR_OUT_OF_BLOCKS);
    CHECK(tk_unchanged(&snap, &p, mem, bytes, &b));
    CHECK(memcmp(slots, slots_before, sizeof slots) == 0);
    CHECK_EQ_INT(n_cow, 0);
    /* fill the pool, then check that the CoW block is counted among the blocks needed */
    CHECK_STATUS(attn_seq_append(&p, &b, 7, slots, cow, &n_cow), ATTN_OK);  /* 16 tokens, full */
    CHECK_EQ_INT(attn_block_pool_free_count(&p), 0);
    CHECK_STATUS(attn_seq_truncate(&p, &b, 15), ATTN_OK);  /* last block of b now 3/4 full */
    attn_seq_release(&p, &c);
    CHECK_EQ_INT(attn_block_pool_free_count(&p), 1);       /* block 4 came back */
    int32_t td[8] = {0};
    attn_seq d;
    memset(&d, 0, sizeof d);
    attn_seq_init(&d, td, 8);
    CHECK_STATUS(attn_seq_fork(&p, &b, &d), ATTN_OK);
    CHECK_STATUS(attn_seq_truncate(&p, &a, 0), ATTN_OK);   /* frees block 2; block 0 stays shared */
    CHECK_EQ_INT(attn_block_pool_free_count(&p), 2);
    /* d appending 2 needs the CoW block of its shared 3/4-full last block + 1 new block: with
       one block free that must fail, and appending 1 (the CoW block only) must fit */
    int32_t te[2] = {0};
    attn_seq e;
    memset(&e, 0, sizeof e);
    attn_seq_init(&e, te, 2);
    CHECK_STATUS(attn_seq_append(&p, &e, 1, slots, NULL, NULL), ATTN_OK);
    CHECK_EQ_INT(attn_block_pool_free_count(&p), 1);
    tk_take(&snap, &p, mem, bytes, &d);
    CHECK_STATUS(attn_seq_append(&p, &d, 2, slots, cow, &n_cow), ATTN_ERR_OUT_OF_BLOCKS);
    CHECK(tk_unchanged(&snap, &p, mem, bytes, &d));
    CHECK_STATUS(attn_seq_append(&p, &d, 1, slots, cow, &n_cow), ATTN_OK);
    CHECK_EQ_INT(n_cow, 1);
    CHECK(cow[0][0] == 5 && td[3] == cow[0][1] && p.refcount[5] == 1);
    CHECK_EQ_INT(attn_block_pool_free_count(&p), 0);
    /* b appends 1 into its last block (3/4 full, now unshared): no block needed */
    CHECK_STATUS(attn_seq_append(&p, &b, 1, slots, cow, &n_cow), ATTN_OK);
    CHECK_EQ_INT(n_cow, 0);
    CHECK_EQ_INT(slots[0], 5 * 4 + 3);
    attn_seq_release(&p, &e);
    CHECK_STATUS(attn_seq_truncate(&p, &d, 15), ATTN_OK);  /* unshared now: appends in place */
    CHECK_STATUS(attn_seq_append(&p, &d, 2, slots, cow, &n_cow), ATTN_OK);
    CHECK_EQ_INT(n_cow, 0);
    CHECK_EQ_INT(attn_block_pool_free_count(&p), 0);
    /* zero tokens: fine, even with NULL slots */
    CHECK_STATUS(attn_seq_append(&p, &b, 0, NULL, NULL, NULL), ATTN_OK);
    attn_seq_release(&p, &a);
    attn_seq_release(&p, &b);
    attn_seq_release(&p, &d);
    CHECK_EQ_INT(attn_block_pool_free_count(&p), 6);
    for (int i = 0; i < 6; i++) CHECK_EQ_INT(p.refcount[i], 0);
    free(mem);
}

TEST(seq_fork_truncate_release_reject_bad_input) {
    size_t bytes = attn_block_pool_bytes(8);
    unsigned char *mem = (unsigned char *)tu_alloc(bytes);
    attn_block_pool p;
    memset(mem, 0, bytes); memset(&p, 0, sizeof p);  /* the snapshots compare every byte */
    REQUIRE(attn_block_pool_init(&p, 8, 2, mem, bytes) == ATTN_OK);
    int32_t ta[6] = {0}, tb[6] = {0}, tsmall[1] = {0};
    attn_seq a, b, small;
    memset(&a, 0, sizeof a); memset(&b, 0, sizeof b); memset(&small, 0, sizeof small);
    attn_seq_init(&a, ta, 6);
    attn_seq_init(&b, tb, 6);
    attn_seq_init(&small, tsmall, 1);
    int64_t slots[16];
    REQUIRE(attn_seq_append(&p, &a, 5, slots, NULL, NULL) == ATTN_OK);  /* blocks 0,1,2 */
    tk_snap snap;
    tk_take(&snap, &p, mem, bytes, &a);
    /* fork */
    CHECK_STATUS(attn_seq_fork(NULL, &a, &b), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_seq_fork(&p, NULL, &b), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_seq_fork(&p, &a, NULL), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_seq_fork(&p, &a, &a), ATTN_ERR_INVALID_ARG);
    attn_seq same_table;
    attn_seq_init(&same_table, ta, 6);
    CHECK_STATUS(attn_seq_fork(&p, &a, &same_table), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_seq_fork(&p, &a, &small), ATTN_ERR_OUT_OF_RANGE);
    CHECK(small.len == 0 && small.num_blocks == 0);
    CHECK(tk_unchanged(&snap, &p, mem, bytes, &a));
    REQUIRE(attn_seq_fork(&p, &a, &b) == ATTN_OK);
    tk_take(&snap, &p, mem, bytes, &a);
    CHECK_STATUS(attn_seq_fork(&p, &a, &b), ATTN_ERR_INVALID_ARG);  /* b is not empty */
    CHECK(tk_unchanged(&snap, &p, mem, bytes, &a));
    /* truncate */
    CHECK_STATUS(attn_seq_truncate(&p, &a, 6), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_seq_truncate(&p, &a, -1), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_seq_truncate(NULL, &a, 1), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_seq_truncate(&p, NULL, 1), ATTN_ERR_INVALID_ARG);
    CHECK(tk_unchanged(&snap, &p, mem, bytes, &a));
    CHECK_STATUS(attn_seq_truncate(&p, &a, 5), ATTN_OK);  /* no-op */
    CHECK(tk_unchanged(&snap, &p, mem, bytes, &a));
    /* append */
    CHECK_STATUS(attn_seq_append(&p, &a, -1, slots, NULL, NULL), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_seq_append(&p, &a, 1, NULL, NULL, NULL), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_seq_append(NULL, &a, 1, slots, NULL, NULL), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_seq_append(&p, NULL, 1, slots, NULL, NULL), ATTN_ERR_INVALID_ARG);
    /* a's half-full last block is shared with b: missing CoW buffers are reported first */
    int64_t cow[1][2];
    int n_cow;
    CHECK_STATUS(attn_seq_append(&p, &a, 0x7fffffff, slots, NULL, NULL), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_seq_append(&p, &a, 0x7fffffff, slots, cow, &n_cow), ATTN_ERR_OUT_OF_RANGE);
    CHECK_STATUS(attn_seq_append(&p, &a, 2 * 6 - 5 + 1, slots, cow, &n_cow), ATTN_ERR_OUT_OF_RANGE);
    CHECK(tk_unchanged(&snap, &p, mem, bytes, &a));
    /* sequences whose fields contradict each other, or tables naming dead blocks */
    attn_seq bad = a;
    bad.num_blocks = 2;  /* 5 tokens need 3 blocks of 2 */
    CHECK_STATUS(attn_seq_append(&p, &bad, 1, slots, NULL, NULL), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_seq_truncate(&p, &bad, 0), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_seq_fork(&p, &bad, &small), ATTN_ERR_INVALID_ARG);
    bad = a; bad.len = -1; bad.num_blocks = 0;
    CHECK_STATUS(attn_seq_truncate(&p, &bad, 0), ATTN_ERR_INVALID_ARG);
    bad = a; bad.max_blocks = 2;
    CHECK_STATUS(attn_seq_truncate(&p, &bad, 0), ATTN_ERR_INVALID_ARG);
    attn_seq_release(&p, &bad);
    CHECK(tk_unchanged(&snap, &p, mem, bytes, &a));
    int32_t tcorrupt[6] = {0, 7, 2};  /* block 7 is free */
    attn_seq corrupt = a;
    corrupt.block_table = tcorrupt;
    tk_take(&snap, &p, mem, bytes, &corrupt);
    CHECK_STATUS(attn_seq_truncate(&p, &corrupt, 1), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_seq_fork(&p, &corrupt, &small), ATTN_ERR_INVALID_ARG);
    tcorrupt[1] = 99;  /* out of range */
    tk_take(&snap, &p, mem, bytes, &corrupt);
    CHECK_STATUS(attn_seq_truncate(&p, &corrupt, 0), ATTN_ERR_INVALID_ARG);
    attn_seq_release(&p, &corrupt);
    CHECK(tk_unchanged(&snap, &p, mem, bytes, &corrupt));
    tcorrupt[1] = 1; tcorrupt[2] = -3;  /* the appended-into last block is bad */
    tk_take(&snap, &p, mem, bytes, &corrupt);
    CHECK_STATUS(attn_seq_append(&p, &corrupt, 1, slots, NULL, NULL), ATTN_ERR_INVALID_ARG);
    CHECK(tk_unchanged(&snap, &p, mem, bytes, &corrupt));
    /* a pool struct with broken fields */
    attn_block_pool badp = p;
    badp.num_free = 9;
    CHECK_STATUS(attn_seq_append(&badp, &a, 1, slots, NULL, NULL), ATTN_ERR_INVALID_ARG);
    badp = p; badp.refcount = NULL;
    CHECK_STATUS(attn_seq_truncate(&badp, &a, 0), ATTN_ERR_INVALID_ARG);
    /* release and truncate to 0 return every block */
    CHECK_STATUS(attn_seq_truncate(&p, &a, 0), ATTN_OK);
    CHECK(a.len == 0 && a.num_blocks == 0);
    attn_seq_release(&p, &b);
    attn_seq_release(&p, NULL);
    attn_seq_release(NULL, &b);
    CHECK_EQ_INT(attn_block_pool_free_count(&p), 8);
    free(mem);
}

/* The model of the randomized pool test: per sequence its block ids, per block its refcount. */
enum { TKM_SEQS = 8, TKM_BLOCKS = 48, TKM_BS = 4 };
typedef struct tk_model {
    int32_t ids[TKM_SEQS][64];
    int n[TKM_SEQS];
    int64_t len[TKM_SEQS];
    int rc[TKM_BLOCKS];
} tk_model;

/* Compares the pool and every sequence with the model; returns 1 when they agree. */
static int tk_model_agrees(const tk_model *m, const attn_block_pool *p, const attn_seq *s) {
    int free_expected = 0, seen[TKM_BLOCKS] = {0};
    for (int b = 0; b < TKM_BLOCKS; b++) {
        if (p->refcount[b] != m->rc[b]) return 0;
        free_expected += m->rc[b] == 0;
    }
    if (p->num_free != free_expected || attn_block_pool_free_count(p) != free_expected) return 0;
    if (attn_block_pool_used_count(p) != TKM_BLOCKS - free_expected) return 0;
    for (int i = 0; i < p->num_free; i++) {  /* no block twice on the free stack, none in use */
        int32_t b = p->free_ids[i];
        if (b < 0 || b >= TKM_BLOCKS || seen[b]++ || m->rc[b] != 0) return 0;
    }
    for (int q = 0; q < TKM_SEQS; q++) {
        if (s[q].len != m->len[q] || s[q].num_blocks != m->n[q]) return 0;
        if (memcmp(s[q].block_table, m->ids[q], sizeof(int32_t) * (size_t)m->n[q]) != 0) return 0;
    }
    return 1;
}

TEST(block_pool_randomized_against_model) {
    size_t bytes = attn_block_pool_bytes(TKM_BLOCKS);
    REQUIRE(bytes <= sizeof(((tk_snap *)0)->mem));
    unsigned char *mem = (unsigned char *)tu_alloc(bytes);
    attn_block_pool p;
    memset(mem, 0, bytes); memset(&p, 0, sizeof p);  /* the snapshots compare every byte */
    REQUIRE(attn_block_pool_init(&p, TKM_BLOCKS, TKM_BS, mem, bytes) == ATTN_OK);
    static int32_t tables[TKM_SEQS][64];
    attn_seq s[TKM_SEQS];
    memset(s, 0, sizeof s);
    tk_model m;
    memset(&m, 0, sizeof m);
    for (int q = 0; q < TKM_SEQS; q++) attn_seq_init(&s[q], tables[q], 6 + 3 * q);  /* 6 .. 27 */
    uint64_t rng = attn_test_seed() ^ 0x9001;
    int count[8] = {0};  /* ok appends, cow, table full, out of blocks, forks, truncates,
                            releases, missing cow buffer */
    int64_t slots[128], cow[1][2];
    for (int step = 0; step < 6000; step++) {
        int op = attn_test_rand_int(&rng, 0, 9), q = attn_test_rand_int(&rng, 0, TKM_SEQS - 1);
        tk_snap snap;
        tk_take(&snap, &p, mem, bytes, &s[q]);
        if (op <= 4) {  /* append; 1 in 8 is large enough to exhaust the table or the pool */
            int n = attn_test_rand_int(&rng, 0, 7) == 0 ? attn_test_rand_int(&rng, 20, 120)
                                                        : attn_test_rand_int(&rng, 0, 9);
            int64_t new_len = m.len[q] + n;
            int partial = n > 0 && m.len[q] % TKM_BS != 0;
            int cow_needed = partial && m.rc[m.ids[q][m.n[q] - 1]] > 1;
            int64_t new_blocks = (new_len + TKM_BS - 1) / TKM_BS;
            int free_now = 0;
            for (int b = 0; b < TKM_BLOCKS; b++) free_now += m.rc[b] == 0;
            /* sometimes "I know nothing is shared" */
            int give_cow = attn_test_rand_int(&rng, 0, 5) != 0;
            attn_status want = cow_needed && !give_cow ? ATTN_ERR_INVALID_ARG
                               : new_blocks > s[q].max_blocks ? ATTN_ERR_OUT_OF_RANGE
                               : new_blocks - m.n[q] + cow_needed > free_now
                                   ? ATTN_ERR_OUT_OF_BLOCKS
                               : ATTN_OK;
            int n_cow = -5;
            for (int i = 0; i < 128; i++) slots[i] = -77;
            attn_status got = attn_seq_append(&p, &s[q], n, slots, give_cow ? cow : NULL,
                                              give_cow ? &n_cow : NULL);
            REQUIRE_MSG(got == want, "step %d append %d to seq %d: got %s want %s", step, n, q,
                        attn_status_str(got), attn_status_str(want));
            if (got != ATTN_OK) {
                REQUIRE_MSG(tk_unchanged(&snap, &p, mem, bytes, &s[q]),
                            "step %d: failed append changed state", step);
                for (int i = 0; i < 128; i++) REQUIRE(slots[i] == -77);
                if (give_cow) REQUIRE(n_cow == -5);
                count[got == ATTN_ERR_OUT_OF_RANGE ? 2 : got == ATTN_ERR_OUT_OF_BLOCKS ? 3 : 7]++;
            } else {
                int keep = m.n[q] - cow_needed;
                /* blocks the model did not hold stay; new ones (and the CoW one) were free */
                for (int i = 0; i < keep; i++) REQUIRE(tables[q][i] == m.ids[q][i]);
                if (give_cow) REQUIRE(n_cow == cow_needed);
                if (cow_needed) {
                    int32_t old = m.ids[q][m.n[q] - 1];
                    REQUIRE(cow[0][0] == old && cow[0][1] == tables[q][m.n[q] - 1]);
                    m.rc[old]--;
                    count[1]++;
                }
                for (int i = keep; i < (int)new_blocks; i++) {
                    int32_t b = tables[q][i];
                    REQUIRE(b >= 0 && b < TKM_BLOCKS && m.rc[b] == 0);
                    m.rc[b] = 1;
                    m.ids[q][i] = b;
                }
                m.n[q] = (int)new_blocks;
                for (int i = 0; i < n; i++) {
                    int64_t pos = m.len[q] + i;
                    REQUIRE(slots[i] == (int64_t)m.ids[q][pos / TKM_BS] * TKM_BS + pos % TKM_BS);
                }
                m.len[q] = new_len;
                count[0]++;
            }
        } else if (op <= 6) {  /* fork some sequence into an empty one */
            int parent = attn_test_rand_int(&rng, 0, TKM_SEQS - 1);
            if (m.len[q] != 0 || parent == q) continue;
            attn_status want = m.n[parent] > s[q].max_blocks ? ATTN_ERR_OUT_OF_RANGE : ATTN_OK;
            tk_snap snap_parent;
            tk_take(&snap_parent, &p, mem, bytes, &s[parent]);
            attn_status got = attn_seq_fork(&p, &s[parent], &s[q]);
            REQUIRE_MSG(got == want, "step %d fork: got %s", step, attn_status_str(got));
            if (got != ATTN_OK) {
                REQUIRE(tk_unchanged(&snap, &p, mem, bytes, &s[q]));
                REQUIRE(tk_unchanged(&snap_parent, &p, mem, bytes, &s[parent]));
            } else {
                memcpy(m.ids[q], m.ids[parent], sizeof(int32_t) * (size_t)m.n[parent]);
                m.n[q] = m.n[parent];
                m.len[q] = m.len[parent];
                for (int i = 0; i < m.n[q]; i++) m.rc[m.ids[q][i]]++;
                count[4]++;
            }
        } else if (op <= 8) {  /* truncate, sometimes past the end (rejected) */
            int64_t new_len = attn_test_rand_int(&rng, 0, 9) == 0 ? m.len[q] + 1
                                                                  : attn_test_rand_int(&rng, 0,
                                                                          (int)m.len[q]);
            attn_status got = attn_seq_truncate(&p, &s[q], new_len);
            if (new_len > m.len[q]) {
                REQUIRE(got == ATTN_ERR_INVALID_ARG);
                REQUIRE(tk_unchanged(&snap, &p, mem, bytes, &s[q]));
            } else {
                REQUIRE(got == ATTN_OK);
                int keep = (int)((new_len + TKM_BS - 1) / TKM_BS);
                for (int i = keep; i < m.n[q]; i++) m.rc[m.ids[q][i]]--;
                m.n[q] = keep;
                m.len[q] = new_len;
                count[5]++;
            }
        } else {  /* release */
            attn_seq_release(&p, &s[q]);
            for (int i = 0; i < m.n[q]; i++) m.rc[m.ids[q][i]]--;
            m.n[q] = 0;
            m.len[q] = 0;
            count[6]++;
        }
        REQUIRE_MSG(tk_model_agrees(&m, &p, s),
                    "step %d (op %d, seq %d): pool disagrees with the model", step, op, q);
    }
    /* every path was exercised */
    for (int i = 0; i < 8; i++) CHECK_MSG(count[i] > 0, "path %d never taken", i);
    for (int q = 0; q < TKM_SEQS; q++) attn_seq_release(&p, &s[q]);
    CHECK_EQ_INT(attn_block_pool_free_count(&p), TKM_BLOCKS);
    for (int b = 0; b < TKM_BLOCKS; b++) CHECK_EQ_INT(p.refcount[b], 0);
    free(mem);
}

/* ---- content: tokens written through appended slots survive forks, CoW and truncation ---- */

enum { TKC_SEQS = 4, TKC_NB = 40, TKC_BS = 4, TKC_MAXB = 16, TKC_MAXT = TKC_MAXB * TKC_BS };

/* The value of element (h, d) of K (kv 0) or V (kv 1) of token u in layer l: small integers,
   exact in f16 (layer 1) and f32 (layer 0). */
static float tkc_val(int l, int u, int h, int d, int kv) {
    int x = l == 0 ? u * 64 + h * 16 + d * 2 + kv : (u * 31 + h * 7 + d * 3 + kv * 5) % 2039;
    return (float)x;
}

TEST(paged_contents_follow_tables_through_fork_and_cow) {
    static const int hk[2] = {2, 1}, dd[2] = {5, 3};
    static const attn_dtype dts[2] = {ATTN_F32, ATTN_F16};
    attn_kv_cache c[2];
    void *cmem[2];
    attn_kv_cache *layers[2] = {&c[0], &c[1]};
    for (int l = 0; l < 2; l++) {
        REQUIRE(tk_cache_new(&c[l], &cmem[l], TKC_NB, TKC_BS, hk[l], dd[l], dts[l], 1,
                             1) == ATTN_OK);
        memset(c[l].key, 0xff, tk_array_bytes(&c[l]));  /* NaN everywhere until written */
        memset(c[l].value, 0xff, tk_array_bytes(&c[l]));
    }
    size_t bytes = attn_block_pool_bytes(TKC_NB);
    void *pmem = tu_alloc(bytes);
    attn_block_pool p;
    REQUIRE(attn_block_pool_init(&p, TKC_NB, TKC_BS, pmem, bytes) == ATTN_OK);
    static int32_t tables[TKC_SEQS][TKC_MAXB];
    static int tokens[TKC_SEQS][TKC_MAXT];  /* the token id at each position of each sequence */
    attn_seq s[TKC_SEQS];
    for (int q = 0; q < TKC_SEQS; q++) attn_seq_init(&s[q], tables[q], TKC_MAXB);
    uint64_t rng = attn_test_seed() ^ 0xc0ffee;
    int next_token = 0, cows = 0, checks = 0;
    float rows[2][2][8 * 2 * 5];  /* [layer][k/v][tokens * hk * d] */
    for (int step = 0; step < 1500; step++) {
        int op = attn_test_rand_int(&rng, 0, 9), q = attn_test_rand_int(&rng, 0, TKC_SEQS - 1);
        if (op <= 5) {
            int n = attn_test_rand_int(&rng, 1, 8);
            int64_t slots[8], cow[1][2];
            int n_cow = 0;
            attn_status st = attn_seq_append(&p, &s[q], n, slots, cow, &n_cow);
            if (st != ATTN_OK) {
                REQUIRE(st == ATTN_ERR_OUT_OF_BLOCKS || st == ATTN_ERR_OUT_OF_RANGE);
                continue;
            }
            if (n_cow) {  /* copy first, then write the new tokens into the fresh block */
                REQUIRE(attn_copy_blocks(layers, 2, &cow[0][0], n_cow) == ATTN_OK);
                cows++;
            }
            for (int l = 0; l < 2; l++) {
                for (int t = 0; t < n; t++)
                    for (int h = 0; h < hk[l]; h++)
                        for (int d = 0; d < dd[l]; d++)
                            for (int kv = 0; kv < 2; kv++)
                                rows[l][kv][(t * hk[l] + h) * dd[l] + d] =
                                        tkc_val(l, next_token + t, h, d, kv);
                attn_rows rk = {rows[l][0], ATTN_F32, 0}, rv = {rows[l][1], ATTN_F32, 0};
                attn_exec e = tu_exec(ATTN_ISA_AUTO, 2);
                REQUIRE(attn_write_kv(&c[l], rk, rv, slots, n, &e) == ATTN_OK);
            }
            for (int t = 0; t < n; t++) tokens[q][s[q].len - n + t] = next_token + t;
            next_token += n;
        } else if (op <= 7) {
            int parent = attn_test_rand_int(&rng, 0, TKC_SEQS - 1);
            if (parent == q || s[q].len != 0) continue;
            REQUIRE(attn_seq_fork(&p, &s[parent], &s[q]) == ATTN_OK);
            memcpy(tokens[q], tokens[parent], sizeof(int) * (size_t)s[parent].len);
        } else if (op == 8) {
            REQUIRE(attn_seq_truncate(&p, &s[q],
                                      attn_test_rand_int(&rng, 0, (int)s[q].len)) == ATTN_OK);
        } else {
            attn_seq_release(&p, &s[q]);
        }
        /* every sequence reads back exactly its own tokens through its block table */
        for (int r = 0; r < TKC_SEQS; r++)
            for (int64_t pos = 0; pos < s[r].len; pos++) {
                int64_t blk = tables[r][pos / TKC_BS], off = pos % TKC_BS;
                for (int l = 0; l < 2; l++)
                    for (int h = 0; h < hk[l]; h++)
                        for (int d = 0; d < dd[l]; d++) {
                            size_t at = (size_t)(((blk * hk[l] + h) * TKC_BS + off) * dd[l] + d);
                            float gk = ref_element(c[l].key, dts[l], at),
                                  gv = ref_element(c[l].value, dts[l], at);
                            REQUIRE_MSG(gk == tkc_val(l, tokens[r][pos], h, d, 0) &&
                                            gv == tkc_val(l, tokens[r][pos], h, d, 1),
                                        "step %d seq %d pos %d layer %d: got %g/%g want %g/%g",
                                        step,
                                        r, (int)pos, l, gk, gv, tkc_val(l, tokens[r][pos], h, d, 0),
                                        tkc_val(l, tokens[r][pos], h, d, 1));
                            checks++;
                        }
            }
    }
    CHECK(cows > 10);
    CHECK(checks > 10000);
    for (int q = 0; q < TKC_SEQS; q++) attn_seq_release(&p, &s[q]);
    CHECK_EQ_INT(attn_block_pool_free_count(&p), TKC_NB);
    free(pmem);
    free(cmem[0]);
    free(cmem[1]);
}

#define TEST_KV_LIST                                                                              \
    ATTN_TEST_ENTRY(kv_cache_bytes_and_init_layout),                                              \
    ATTN_TEST_ENTRY(kv_cache_init_rejects_bad_input),                                             \
    ATTN_TEST_ENTRY(kv_sizing_helpers_exact_and_round_trip),                                      \
    ATTN_TEST_ENTRY(write_kv_matches_reference_all_dtype_pairs),                                  \
    ATTN_TEST_ENTRY(write_kv_same_dtype_is_bit_exact_copy),                                       \
    ATTN_TEST_ENTRY(write_kv_fp8_scaling_and_saturation),                                         \
    ATTN_TEST_ENTRY(write_kv_fp8_divides_by_scale),                                               \
    ATTN_TEST_ENTRY(write_kv_skips_padding_and_rejects_out_of_range),                             \
    ATTN_TEST_ENTRY(write_kv_duplicate_slots_last_wins),                                          \
    ATTN_TEST_ENTRY(write_kv_rejects_bad_input),                                                  \
    ATTN_TEST_ENTRY(kv_cache_struct_checked_alike_everywhere),                                    \
    ATTN_TEST_ENTRY(swap_blocks_copies_exactly_and_validates),                                    \
    ATTN_TEST_ENTRY(copy_blocks_all_layers_and_validates),                                        \
    ATTN_TEST_ENTRY(pair_conflicts_found_across_bitmap_windows),                                  \
    ATTN_TEST_ENTRY(block_pool_init_counts_and_bad_input),                                        \
    ATTN_TEST_ENTRY(seq_append_slots_cow_and_atomicity),                                          \
    ATTN_TEST_ENTRY(seq_fork_truncate_release_reject_bad_input),                                  \
    ATTN_TEST_ENTRY(block_pool_randomized_against_model),                                         \
    ATTN_TEST_ENTRY(paged_contents_follow_tables_through_fork_and_cow)
