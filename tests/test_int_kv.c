/* The integer KV caches (ATTN_INT8, ATTN_INT4) outside the kernels: attn_dtype_row_bytes and the
   dtype queries, the quantiser through attn_convert and attn_write_kv against a reference
   written from attn_dtype_row_bytes' text (tests/ref.h: ref_int_row_quantize, ref_row_element),
   hand-computed groups, the cache sizes, attn_swap_blocks / attn_copy_blocks, and the rule that a
   refused call changes nothing. Uses test_kv.c's helpers (tk_*). */

static const attn_dtype tki_ints[2] = {ATTN_INT8, ATTN_INT4};

/* A value of magnitude class cls: 0 ordinary (|x| < 2), 1 wide (2^-30 .. 2^20), 2 f32 subnormal
   or near the least normal, 3 an infinity or NaN now and then, 4 zero (either sign). */
static float tki_value(uint64_t *rng, int cls) {
    float u = attn_test_rand_uniform(rng, -1.0f, 1.0f);
    switch (cls) {
        case 0: return 2.0f * u;
        case 1: return u * ldexpf(1.0f, attn_test_rand_int(rng, -30, 20));
        case 2: return u * ldexpf(1.0f, attn_test_rand_int(rng, -149, -120));
        case 3: {
            int k = attn_test_rand_int(rng, 0, 40);
            return k == 0 ? INFINITY : k == 1 ? -INFINITY : k == 2 ? NAN : u;
        }
        default: return attn_test_rand_int(rng, 0, 1) ? 0.0f : -0.0f;
    }
}

/* n values, each group of 32 of one class (so whole groups are zero, tiny or hold an inf). */
static void tki_values(uint64_t *rng, float *x, size_t n) {
    int cls = 0;
    for (size_t i = 0; i < n; i++) {
        if (i % 32 == 0) cls = attn_test_rand_int(rng, 0, 5) % 5;
        x[i] = tki_value(rng, cls);
    }
}

/* Element dtypes' n elements at a and b: the same bytes, or both NaN at that element. */
static int tki_same_elements(const void *a, const void *b, attn_dtype dt, size_t n) {
    size_t esz = attn_dtype_size(dt);
    for (size_t i = 0; i < n; i++)
        if (memcmp((const char *)a + i * esz, (const char *)b + i * esz, esz) &&
            !(isnan(ref_element(a, dt, i)) && isnan(ref_element(b, dt, i))))
            return 0;
    return 1;
}

/* Whether n elements in dt at a and b agree (ref_rows_same for the integer rows). */
static int tki_same(const void *a, const void *b, attn_dtype dt, size_t n) {
    return attn__is_int(dt) ? ref_rows_same(a, b, dt, n) : tki_same_elements(a, b, dt, n);
}

/* The scale of element e's group in an integer row. */
static float tki_scale(const uint8_t *row, attn_dtype dt, int e) {
    const uint8_t *g = row + (size_t)(e / 32) * (dt == ATTN_INT8 ? 34 : 18);
    return attn_bf16_to_f32((uint16_t)(g[0] | g[1] << 8));
}

/* ---- dtype queries ---- */

TEST(int_kv_dtype_queries_and_row_bytes) {
    static const size_t esz[5] = {4, 2, 2, 1, 1};
    for (int dt = 0; dt < 5; dt++) {
        CHECK_EQ_INT(attn_dtype_size((attn_dtype)dt), esz[dt]);
        CHECK_EQ_INT(attn_dtype_row_bytes((attn_dtype)dt, 1), esz[dt]);
        CHECK_EQ_INT(attn_dtype_row_bytes((attn_dtype)dt, 37), 37 * esz[dt]);
    }
    CHECK_EQ_INT(attn_dtype_size(ATTN_INT8), 0);  /* rows, not elements */
    CHECK_EQ_INT(attn_dtype_size(ATTN_INT4), 0);
    CHECK_EQ_INT(attn_dtype_size(ATTN_DTYPE_COUNT), 0);
    CHECK(strcmp(attn_dtype_name(ATTN_INT8), "int8") == 0);
    CHECK(strcmp(attn_dtype_name(ATTN_INT4), "int4") == 0);
    CHECK(strcmp(attn_dtype_name(ATTN_FP8_E5M2), "fp8_e5m2") == 0);
    CHECK(strcmp(attn_dtype_name(ATTN_DTYPE_COUNT), "unknown") == 0);
    CHECK_EQ_INT(ATTN_INT8, 5);
    CHECK_EQ_INT(ATTN_INT4, 6);
    CHECK_EQ_INT(ATTN_DTYPE_COUNT, 7);
    /* hand-computed: int8 n + 2 ceil(n/32), int4 18 ceil(n/32) */
    static const int64_t ns[9] = {1, 2, 16, 17, 31, 32, 33, 80, 512};
    static const size_t i8[9] = {3, 4, 18, 19, 33, 34, 37, 86, 544};
    static const size_t i4[9] = {18, 18, 18, 18, 18, 18, 36, 54, 288};
    for (int k = 0; k < 9; k++) {
        CHECK_EQ_INT(attn_dtype_row_bytes(ATTN_INT8, ns[k]), i8[k]);
        CHECK_EQ_INT(attn_dtype_row_bytes(ATTN_INT4, ns[k]), i4[k]);
        CHECK_EQ_INT(ref_row_bytes(ATTN_INT8, (size_t)ns[k]), i8[k]);
        CHECK_EQ_INT(ref_row_bytes(ATTN_INT4, (size_t)ns[k]), i4[k]);
    }
    for (int dt = 0; dt <= ATTN_DTYPE_COUNT; dt++) {
        CHECK_EQ_INT(attn_dtype_row_bytes((attn_dtype)dt, 0), 0);
        CHECK_EQ_INT(attn_dtype_row_bytes((attn_dtype)dt, -1), 0);
        CHECK_EQ_INT(attn_dtype_row_bytes((attn_dtype)dt, INT64_MIN), 0);
        CHECK_EQ_INT(attn_dtype_row_bytes((attn_dtype)dt, INT64_MAX), 0);  /* overflow */
    }
    CHECK_EQ_INT(attn_dtype_row_bytes(ATTN_DTYPE_COUNT, 1), 0);
    /* the largest rows: a count whose bytes do not fit a size_t is refused, not wrapped */
    size_t big = (size_t)-1 / 4 + 1;
    if ((uint64_t)big <= (uint64_t)INT64_MAX) {
        CHECK_EQ_INT(attn_dtype_row_bytes(ATTN_F32, (int64_t)big), 0);
        CHECK_EQ_INT(attn_dtype_row_bytes(ATTN_INT8, (int64_t)((size_t)-1 / 2)), 0);
    }
    if (sizeof(size_t) >= 8) {  /* a large row that fits: exact */
        int64_t n = (int64_t)1 << 40;
        CHECK_EQ_INT(attn_dtype_row_bytes(ATTN_INT8, n), (uint64_t)n + ((uint64_t)n >> 4));
        CHECK_EQ_INT(attn_dtype_row_bytes(ATTN_INT4, n + 1), 18 * (((uint64_t)n >> 5) + 1));
    }
}

/* ---- the quantiser ---- */

/* One group written by attn_convert from f32, with the bytes computed by hand. */
static void tki_hand_group(attn_dtype dt, const float *x, size_t n, const uint8_t *want,
                           const char *what) {
    uint8_t got[64];
    memset(got, 0xa5, sizeof got);
    size_t rb = ref_row_bytes(dt, n);
    CHECK_STATUS(attn_convert(got, dt, x, ATTN_F32, n, 0.0f), ATTN_OK);
    CHECK_MSG(memcmp(got, want, rb) == 0, "%s %s: bytes differ from the hand-computed ones",
              attn_dtype_name(dt), what);
    CHECK_MSG(got[rb] == 0xa5, "%s %s: wrote past its row", attn_dtype_name(dt), what);
}

TEST(int_kv_quantiser_hand_computed_groups) {
    /* int8, m = 127: scale bf16(1) = 0x3f80; codes are x, ties to even: 2.5 -> 2, -3.5 -> -4 */
    {
        float x[5] = {127.0f, -127.0f, 2.5f, -3.5f, -0.0f};
        const uint8_t want[7] = {0x80, 0x3f, 127, 0x81, 2, 0xfc, 0};
        tki_hand_group(ATTN_INT8, x, 5, want, "m = 127");
    }
    /* int4, m = 14: scale bf16(2) = 0x4000; x / 2 = 7, -7, 1.25 -> 1, 2.5 -> 2, -1.5 -> -2;
       elements 16 and 17 (high nibbles of bytes 0 and 1): 3 / 2 = 1.5 -> 2, -14 / 2 = -7 */
    {
        float x[18] = {14.0f, -14.0f, 2.5f, 5.0f, -3.0f};
        x[16] = 3.0f;
        x[17] = -14.0f;
        uint8_t want[18] = {0x00, 0x40, 0x27, 0x99, 0x01, 0x02, 0x0e};
        tki_hand_group(ATTN_INT4, x, 18, want, "m = 14");
    }
    /* int8, m = 100: 100 / 127 = 0.7874 -> bf16 0x3f4a (0.7890625): codes 100 / 0.7890625 =
       126.73 -> 127, 50 / 0.7890625 = 63.37 -> 63, -1 -> -1.27 -> -1 */
    {
        float x[3] = {100.0f, 50.0f, -1.0f};
        const uint8_t want[5] = {0x4a, 0x3f, 127, 63, 0xff};
        tki_hand_group(ATTN_INT8, x, 3, want, "m = 100");
    }
    /* zeros: scale 0, codes 0 (int4: 16 code bytes, all 0) */
    {
        float x[3] = {0.0f, -0.0f, 0.0f};
        const uint8_t w8[5] = {0}, w4[18] = {0};
        tki_hand_group(ATTN_INT8, x, 3, w8, "zeros");
        tki_hand_group(ATTN_INT4, x, 3, w4, "zeros");
    }
    /* a subnormal maximum whose scale rounds coarsely: m = 178 * 2^-133, m / 127 = 1.40 * 2^-133
       -> bf16 0x0001 (2^-133); codes saturate at 127; 50.5 -> 50, 51.5 -> 52 */
    {
        float s = ldexpf(1.0f, -133);
        float x[5] = {178.0f * s, -178.0f * s, 50.5f * s, 51.5f * s, 3.0f * s};
        const uint8_t want[7] = {0x01, 0x00, 127, 0x81, 50, 52, 3};
        tki_hand_group(ATTN_INT8, x, 5, want, "subnormal m");
    }
    /* a nonzero group whose scale rounds to 0 takes 2^-133: int4 m = 1.5 * 2^-133, m / 7 < 2^-134
       -> 0; codes 1.5 -> 2, 0.5 -> 0 */
    {
        float s = ldexpf(1.0f, -133);
        float x[2] = {1.5f * s, -0.5f * s};
        uint8_t want[18] = {0x01, 0x00, 0x02};
        tki_hand_group(ATTN_INT4, x, 2, want, "scale rounds to 0");
    }
    /* an inf or NaN anywhere in a group: scale NaN, codes 0; the other group is untouched */
    for (int k = 0; k < 3; k++) {
        float x[40];
        for (int i = 0; i < 40; i++) x[i] = (float)(i - 20);
        x[33] = k == 0 ? INFINITY : k == 1 ? -INFINITY : NAN;
        for (int d = 0; d < 2; d++) {
            attn_dtype dt = tki_ints[d];
            uint8_t got[80], want[80];
            CHECK_STATUS(attn_convert(got, dt, x, ATTN_F32, 40, 1.0f), ATTN_OK);
            ref_int_row_quantize(want, dt, x, 40);
            size_t g1 = dt == ATTN_INT8 ? 34 : 18;
            float scale1 = attn_bf16_to_f32((uint16_t)(got[g1] | got[g1 + 1] << 8));
            CHECK_MSG(isnan(scale1), "%s: the group with an inf/NaN has scale %g",
                      attn_dtype_name(dt), scale1);
            int zero = 1;
            for (size_t i = g1 + 2; i < ref_row_bytes(dt, 40); i++) zero &= got[i] == 0;
            CHECK(zero);
            CHECK(memcmp(got, want, g1) == 0);  /* group 0: finite, the rule's bytes */
            for (int i = 0; i < 40; i++) CHECK(i < 32 ? !isnan(ref_row_element(got, dt, 40, i))
                                                      : isnan(ref_row_element(got, dt, 40, i)));
        }
    }
}

/* attn_convert from f32, f16, bf16 and fp8 (with a scale) to the integer rows: the bytes of the
   rule for every n (one group, partial last groups, across the 256-element chunks), read back
   within half a scale of each finite input. */
TEST(int_kv_quantiser_matches_rule_through_convert) {
    static const size_t ns[] = {1, 2, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100,
                                255, 256, 257, 300, 513, 1000};
    uint64_t rng = attn_test_seed() ^ 0x1a7;
    int checked = 0, saturated_or_tiny = 0;
    for (int d = 0; d < 2; d++)
        for (int sd = ATTN_F32; sd <= ATTN_FP8_E5M2; sd++)
            for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
                for (int rep = 0; rep < 3; rep++) {
                    attn_dtype dt = tki_ints[d], sdt = (attn_dtype)sd;
                    size_t n = ns[k], rb = ref_row_bytes(dt, n);
                    float *x = (float *)tu_alloc(n * 4), *v = (float *)tu_alloc(n * 4);
                    uint8_t *src = (uint8_t *)tu_alloc(n * 4);
                    uint8_t *got = (uint8_t *)tu_alloc(rb + 1), *want = (uint8_t *)tu_alloc(rb);
                    float sc = attn__is_fp8(sdt) ? 0.375f : 1.0f;
                    tki_values(&rng, x, n);
                    for (size_t i = 0; i < n; i++) {
                        tk_encode(src, sdt, i, x[i], sc);  /* fp8: x / sc */
                        v[i] = ref_element(src, sdt, i) * (attn__is_fp8(sdt) ? sc : 1.0f);
                    }
                    ref_int_row_quantize(want, dt, v, n);
                    memset(got, 0x5c, rb + 1);
                    CHECK_STATUS(attn_convert(got, dt, src, sdt, n, sc), ATTN_OK);
                    CHECK_MSG(ref_rows_same(got, want, dt, n), "%s from %s, n %zu",
                              attn_dtype_name(dt), attn_dtype_name(sdt), n);
                    CHECK(got[rb] == 0x5c);
                    for (size_t i = 0; i < n; i++) {
                        float scale = tki_scale(got, dt, (int)i);
                        float back = ref_row_element(got, dt, (int)n, i);
                        if (!isfinite(scale)) continue;
                        if (scale <= ldexpf(1.0f, -126)) { saturated_or_tiny++; continue; }
                        CHECK_MSG(fabsf(back - v[i]) <= 0.5f * scale * 1.0001f,
                                  "%s n %zu element %zu: %g reads back %g, scale %g",
                                  attn_dtype_name(dt), n, i, v[i], back, scale);
                        checked++;
                    }
                    free(x); free(v); free(src); free(got); free(want);
                }
    CHECK(checked > 10000);
    CHECK(saturated_or_tiny > 100);
}

/* attn_convert from the integer rows (random bytes: any scale, NaN and inf included, and
   garbage past n) to every dtype, and between the integer dtypes. */
TEST(int_kv_convert_from_int_rows) {
    static const size_t ns[] = {1, 5, 32, 33, 95, 256, 257, 600};
    uint64_t rng = attn_test_seed() ^ 0x1b8;
    for (int d = 0; d < 2; d++)
        for (int dd = 0; dd < ATTN_DTYPE_COUNT; dd++)
            for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
                attn_dtype sdt = tki_ints[d], ddt = (attn_dtype)dd;
                size_t n = ns[k], sb = ref_row_bytes(sdt, n), db = ref_row_bytes(ddt, n);
                uint8_t *src = (uint8_t *)tu_alloc(sb), *got = (uint8_t *)tu_alloc(db + 1);
                uint8_t *want = (uint8_t *)tu_alloc(db);
                float *x = (float *)tu_alloc(n * 4);
                for (size_t i = 0; i < sb; i++) src[i] = (uint8_t)attn_test_rand_u64(&rng);
                /* half the groups with a scale of ordinary size */
                for (size_t g = 0; g * 32 < n; g++)
                    if (attn_test_rand_int(&rng, 0, 1)) {
                        size_t at = g * (sdt == ATTN_INT8 ? 34 : 18);
                        uint16_t b = attn_f32_to_bf16(attn_test_rand_uniform(&rng, -0.1f, 0.1f));
                        src[at] = (uint8_t)(b & 255);
                        src[at + 1] = (uint8_t)(b >> 8);
                    }
                float sc = attn__is_fp8(ddt) ? 0.25f : 1.0f;
                for (size_t i = 0; i < n; i++) x[i] = ref_row_element(src, sdt, (int)n, i);
                if (ddt == sdt) memcpy(want, src, sb);  /* its own dtype: the bytes */
                else if (attn__is_int(ddt)) ref_int_row_quantize(want, ddt, x, n);
                else
                    for (size_t i = 0; i < n; i++) tk_encode(want, ddt, i, x[i], sc);
                memset(got, 0x3c, db + 1);
                CHECK_STATUS(attn_convert(got, ddt, src, sdt, n, sc), ATTN_OK);
                CHECK_MSG(ddt == sdt ? memcmp(got, want, db) == 0 : tki_same(got, want, ddt, n),
                          "%s -> %s n %zu", attn_dtype_name(sdt), attn_dtype_name(ddt), n);
                CHECK(got[db] == 0x3c);
                /* in place to its own dtype: nothing changes */
                if (ddt == sdt) {
                    memcpy(got, src, sb);
                    CHECK_STATUS(attn_convert(got, sdt, got, sdt, n, 1.0f), ATTN_OK);
                    CHECK(memcmp(got, src, sb) == 0);
                }
                free(src); free(got); free(want); free(x);
            }
}

/* Calls attn_convert must refuse, each leaving the destination as it was. */
TEST(int_kv_convert_refuses_bad_input) {
    uint8_t buf[256], dst[256], before[256];
    float f[64];
    for (int i = 0; i < 64; i++) f[i] = (float)i - 30.0f;
    for (int i = 0; i < 256; i++) buf[i] = dst[i] = (uint8_t)(i * 37 + 11);
    memcpy(before, dst, sizeof dst);
#define TKI_BAD(call)                                                                              \
    do {                                                                                           \
        CHECK_STATUS(call, ATTN_ERR_INVALID_ARG);                                                  \
        CHECK(memcmp(dst, before, sizeof dst) == 0);                                               \
    } while (0)
    for (int d = 0; d < 2; d++) {
        attn_dtype dt = tki_ints[d], other = tki_ints[1 - d];
        /* a scale needs an fp8 side */
        TKI_BAD(attn_convert(dst, dt, f, ATTN_F32, 40, 2.0f));
        TKI_BAD(attn_convert(dst, ATTN_F16, buf, dt, 40, 0.5f));
        TKI_BAD(attn_convert(dst, other, buf, dt, 40, 2.0f));
        TKI_BAD(attn_convert(dst, dt, f, ATTN_F32, 40, -1.0f));
        TKI_BAD(attn_convert(dst, dt, f, ATTN_F32, 40, NAN));
        /* the same pointer to another dtype with an integer side */
        TKI_BAD(attn_convert(dst, dt, dst, other, 40, 1.0f));
        TKI_BAD(attn_convert(dst, dt, dst, ATTN_F32, 8, 1.0f));
        TKI_BAD(attn_convert(dst, ATTN_FP8_E4M3, dst, dt, 8, 1.0f));
        TKI_BAD(attn_convert(dst, dt, dst, ATTN_INT8 == dt ? ATTN_FP8_E5M2 : ATTN_F16, 8, 1.0f));
        /* NULL with n > 0; a bad dtype on the other side */
        TKI_BAD(attn_convert(NULL, dt, f, ATTN_F32, 1, 1.0f));
        TKI_BAD(attn_convert(dst, dt, NULL, ATTN_F32, 1, 1.0f));
        TKI_BAD(attn_convert(dst, dt, buf, ATTN_DTYPE_COUNT, 4, 1.0f));
        TKI_BAD(attn_convert(dst, ATTN_DTYPE_COUNT, buf, dt, 4, 1.0f));
        /* a row whose bytes do not fit a size_t (its buffers could not exist) */
        TKI_BAD(attn_convert(dst, dt, buf, ATTN_F32, (size_t)-1, 1.0f));
        TKI_BAD(attn_convert(dst, ATTN_F32, buf, dt, (size_t)-1 / 2, 1.0f));
        /* n = 0 is nothing to do, NULL allowed */
        CHECK_STATUS(attn_convert(NULL, dt, NULL, ATTN_F32, 0, 1.0f), ATTN_OK);
        CHECK_STATUS(attn_convert(dst, dt, dst, other, 0, 1.0f), ATTN_OK);
        CHECK(memcmp(dst, before, sizeof dst) == 0);
    }
#undef TKI_BAD
}

/* Each ISA's row reader (the kernels' to_f32 of a whole integer row, its whole groups a pair of
   vectors at a time) against ref_row_element times mul, bit for bit: random bytes (any scale,
   NaN and inf included; garbage past n), rows whole groups and not, at offsets within a vector. */
TEST(int_kv_simd_row_reader_matches_reference) {
    static const int ns[] = {1, 7, 16, 31, 32, 33, 48, 64, 80, 96, 128, 200, 256, 512};
    static uint8_t raw[600 + 64];
    static float got[512], want[512];
    attn_isa isas[ATTN_ISA_COUNT];
    int n_isa = tu_isas(isas);
    uint64_t rng = attn_test_seed() ^ 0x1ee;
    for (int k = 0; k < n_isa; k++) {
        const attn__kernels *K = attn__kernels_for(isas[k]);
        int bad = 0, rows = 0;
        for (int d = 0; d < 2; d++)
            for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++)
                for (int off = 0; off < 40; off += 13) {
                    attn_dtype dt = tki_ints[d];
                    int n = ns[j];
                    /* a multiplier only over scales of ordinary size, where code x scale x mul
                       is exact in either order */
                    float mul = off == 13 ? 0.375f : 1.0f;
                    for (size_t i = 0; i < sizeof raw; i++) raw[i] = (uint8_t)attn_test_rand_u64(&rng);
                    for (int g = 0; g * 32 < n; g++)  /* most scales of ordinary size */
                        if (mul != 1.0f || attn_test_rand_int(&rng, 0, 3)) {
                            uint8_t *at = raw + off + g * (dt == ATTN_INT8 ? 34 : 18);
                            uint16_t b = attn_f32_to_bf16(attn_test_rand_uniform(&rng, -2.0f, 2.0f));
                            at[0] = (uint8_t)(b & 255);
                            at[1] = (uint8_t)(b >> 8);
                        }
                    K->to_f32(got, raw + off, dt, n, mul);
                    for (int i = 0; i < n; i++) {
                        want[i] = ref_row_element(raw + off, dt, n, (size_t)i) * mul;
                        if (attn__f32_bits(got[i]) != attn__f32_bits(want[i]) &&
                            !(isnan(got[i]) && isnan(want[i])))
                            bad++;
                    }
                    rows++;
                }
        CHECK_MSG(bad == 0, "isa %s: %d of the elements of %d rows differ", attn_isa_name(isas[k]),
                  bad, rows);
    }
}

/* ---- attn_write_kv ---- */

TEST(int_kv_write_kv_rows_strides_padding_duplicates) {
    static const int Ds[5] = {1, 7, 32, 33, 80};
    enum { NB = 5, BS = 3, HK = 2, T = 12 };
    attn_isa isas[ATTN_ISA_COUNT];
    int n_isa = tu_isas(isas), runs = 0;
    uint64_t rng = attn_test_seed() ^ 0x1c9;
    for (int d = 0; d < 2; d++)
        for (int di = 0; di < 5; di++)
            for (int adt = 0; adt < 3; adt++) {
                attn_dtype cdt = tki_ints[d], kdt = (attn_dtype)adt,
                           vdt = (attn_dtype)((adt + di) % 3);
                int D = Ds[di], S = HK * D + (di % 2 ? 3 : 0);  /* odd cases: strided rows */
                attn_kv_cache c;
                void *mem;
                REQUIRE(tk_cache_new(&c, &mem, NB, BS, HK, D, cdt, 0.0f, 1.0f) == ATTN_OK);
                float *x = (float *)tu_alloc(sizeof(float) * T * S);
                unsigned char *kraw = (unsigned char *)tu_alloc((size_t)T * S * 4),
                              *vraw = (unsigned char *)tu_alloc((size_t)T * S * 4);
                tki_values(&rng, x, (size_t)T * S);
                for (int i = 0; i < T * S; i++) tk_put(kraw, kdt, (size_t)i, x[i]);
                tki_values(&rng, x, (size_t)T * S);
                for (int i = 0; i < T * S; i++) tk_put(vraw, vdt, (size_t)i, x[i]);
                /* slots: padding, the cache's first and last, one slot three times */
                int64_t slots[T] = {0, NB * BS - 1, -1, 4, 7, 4, -1, 9, 4, 10, 2, 13};
                attn_rows k = {kraw, kdt, S == HK * D ? 0 : S}, v = {vraw, vdt, S};
                char what[64];
                snprintf(what, sizeof what, "%s D %d rows %s/%s", attn_dtype_name(cdt), D,
                         attn_dtype_name(kdt), attn_dtype_name(vdt));
                runs += tk_check_write_kv(&c, k, v, slots, T, isas, n_isa, &rng, what);
                /* the last of the duplicates won: slot 4 (block 1, offset 1) reads back within
                   half a scale of token 8's key */
                const uint8_t *row = (const uint8_t *)c.key + (size_t)((1 * HK + 0) * BS + 1) *
                                                              ref_row_bytes(cdt, (size_t)D);
                for (int e = 0; e < D; e++) {
                    float in = ref_element(kraw, kdt, (size_t)(8 * S + e)),
                          got = ref_row_element(row, cdt, D, (size_t)e), scale = tki_scale(row, cdt, e);
                    if (isfinite(in) && isfinite(scale) && scale > ldexpf(1.0f, -126))
                        CHECK_MSG(fabsf(got - in) <= 0.5f * scale * 1.0001f,
                                  "slot 4 element %d: %g reads back %g", e, in, got);
                }
                free(x); free(kraw); free(vraw); free(mem);
            }
    CHECK(runs >= 60);
}

TEST(int_kv_write_kv_refuses_bad_input) {
    for (int d = 0; d < 2; d++) {
        attn_kv_cache c, snap;
        void *mem, *smem;
        uint64_t rng = attn_test_seed() ^ (0x1da + (uint64_t)d);
        REQUIRE(tk_cache_new(&c, &mem, 2, 2, 2, 33, tki_ints[d], 1.0f, 1.0f) == ATTN_OK);
        tk_fill_random_bytes(&c, &rng);
        tk_clone(&c, &snap, &smem);
        float k[2 * 2 * 33] = {0};
        uint8_t rows8[2 * 2 * 37] = {0};
        int64_t slots[2] = {0, 1}, bad_slots[2] = {0, 4};
        attn_rows rk = {k, ATTN_F32, 0}, ri = {rows8, ATTN_INT8, 0}, r4 = {rows8, ATTN_INT4, 0};
        /* integer rows are not activations; a slot past the end; scales other than 1 */
        CHECK_STATUS(attn_write_kv(&c, ri, rk, slots, 2, NULL), ATTN_ERR_INVALID_ARG);
        CHECK_STATUS(attn_write_kv(&c, rk, r4, slots, 2, NULL), ATTN_ERR_INVALID_ARG);
        CHECK_STATUS(attn_write_kv(&c, rk, rk, bad_slots, 2, NULL), ATTN_ERR_OUT_OF_RANGE);
        attn_kv_cache broken = c;
        broken.k_scale = 2.0f;
        CHECK_STATUS(attn_write_kv(&broken, rk, rk, slots, 2, NULL), ATTN_ERR_INVALID_ARG);
        broken = c; broken.v_scale = 0.5f;
        CHECK_STATUS(attn_write_kv(&broken, rk, rk, slots, 2, NULL), ATTN_ERR_INVALID_ARG);
        broken = c; broken.head_size = ATTN_MAX_HEAD_SIZE + 1;
        CHECK_STATUS(attn_write_kv(&broken, rk, rk, slots, 2, NULL), ATTN_ERR_INVALID_ARG);
        CHECK(tk_same_contents(&c, &snap));
        free(mem); free(smem);
    }
}

/* ---- sizes ---- */

TEST(int_kv_cache_sizes_exact) {
    /* rows: int8 D 7 -> 9 bytes, D 33 -> 37; int4 D 7 -> 18, D 33 -> 36, D 128 -> 72 */
    CHECK_EQ_INT(attn_kv_cache_bytes(3, 4, 2, 7, ATTN_INT8), 64 + 2 * 256);   /* 216 -> 256 */
    CHECK_EQ_INT(attn_kv_cache_bytes(3, 4, 2, 33, ATTN_INT8), 64 + 2 * 896);  /* 888 -> 896 */
    CHECK_EQ_INT(attn_kv_cache_bytes(3, 4, 2, 7, ATTN_INT4), 64 + 2 * 448);   /* 432 -> 448 */
    CHECK_EQ_INT(attn_kv_cache_bytes(1, 1, 1, 1, ATTN_INT4), 64 + 2 * 64);
    CHECK_EQ_INT(attn_kv_cache_bytes(2, 16, 8, 128, ATTN_INT4), 64 + 2 * 18432);
    CHECK_EQ_INT(attn_kv_block_bytes(32, 16, 8, 128, ATTN_INT8), 32 * 2 * 16 * 8 * 136);
    CHECK_EQ_INT(attn_kv_block_bytes(32, 16, 8, 128, ATTN_INT4), 32 * 2 * 16 * 8 * 72);
    CHECK_EQ_INT(attn_kv_block_bytes(3, 1, 1, 33, ATTN_INT8), 3 * 2 * 37);
    CHECK_EQ_INT(attn_kv_blocks_for_bytes(576, 1, 4, 2, 7, ATTN_INT8), 3);
    CHECK_EQ_INT(attn_kv_blocks_for_bytes(575, 1, 4, 2, 7, ATTN_INT8), 2);  /* 2: 64 + 2 * 192 */
    CHECK_EQ_INT(attn_kv_blocks_for_bytes(447, 1, 4, 2, 7, ATTN_INT8), 1);
    CHECK_EQ_INT(attn_kv_blocks_for_bytes(2 * 960, 2, 4, 2, 7, ATTN_INT4), 3);
    CHECK_EQ_INT(attn_kv_max_tokens(576, 1, 4, 2, 7, ATTN_INT8), 12);
    CHECK_EQ_INT(attn_kv_max_tokens(959, 1, 4, 2, 7, ATTN_INT4), 8);
    CHECK_EQ_INT(attn_kv_cache_bytes(0x7fffffff, 0x7fffffff, 0x7fffffff, 512, ATTN_INT8), 0);
    CHECK_EQ_INT(attn_kv_cache_bytes(1, 1, 1, ATTN_MAX_HEAD_SIZE + 1, ATTN_INT4), 0);
    for (int d = 0; d < 2; d++) {
        attn_dtype dt = tki_ints[d];
        unsigned char mem[2048];
        attn_kv_cache c, before;
        memset(&c, 0, sizeof c);  /* its padding too: compared whole below */
        size_t need = attn_kv_cache_bytes(3, 4, 2, 33, dt);
        REQUIRE(need > 0 && need <= sizeof mem);
        CHECK_STATUS(attn_kv_cache_init(&c, 3, 4, 2, 33, dt, 0.0f, 0.0f, mem, need), ATTN_OK);
        CHECK(c.k_scale == 1.0f && c.v_scale == 1.0f && c.dtype == dt);
        CHECK((unsigned char *)c.value >= (unsigned char *)c.key + 3 * 4 * 2 * ref_row_bytes(dt, 33));
        CHECK((unsigned char *)c.value + 3 * 4 * 2 * ref_row_bytes(dt, 33) <= mem + need);
        int64_t shape[3];
        attn_kv_cache_shape(&c, shape);  /* shape[2] counts bytes */
        CHECK(shape[0] == 2 && shape[1] == 3 && shape[2] == (int64_t)(4 * 2 * ref_row_bytes(dt, 33)));
        /* the integer caches' scales are in their rows: k_scale and v_scale must be 1 (or 0) */
        memcpy(&before, &c, sizeof c);
        CHECK_STATUS(attn_kv_cache_init(&c, 3, 4, 2, 33, dt, 2.0f, 1.0f, mem, need),
                     ATTN_ERR_INVALID_ARG);
        CHECK_STATUS(attn_kv_cache_init(&c, 3, 4, 2, 33, dt, 1.0f, 0.5f, mem, need),
                     ATTN_ERR_INVALID_ARG);
        CHECK_STATUS(attn_kv_cache_init(&c, 3, 4, 2, 33, dt, 1.0f, 1.0f, mem, need - 1),
                     ATTN_ERR_WORKSPACE_TOO_SMALL);
        CHECK(memcmp(&c, &before, sizeof c) == 0);
    }
}

/* ---- swap / copy ---- */

TEST(int_kv_swap_and_copy_move_whole_rows) {
    for (int d = 0; d < 2; d++) {
        attn_dtype dt = tki_ints[d];
        enum { BS = 3, HK = 2, D = 33 };
        attn_kv_cache src, dst, snap, snap_src;
        void *smem, *dmem, *pmem, *qmem;
        uint64_t rng = attn_test_seed() ^ (0x5ab + (uint64_t)d);
        REQUIRE(tk_cache_new(&src, &smem, 6, BS, HK, D, dt, 1, 1) == ATTN_OK);
        REQUIRE(tk_cache_new(&dst, &dmem, 9, BS, HK, D, dt, 1, 1) == ATTN_OK);
        tk_fill_random_bytes(&src, &rng);
        tk_fill_random_bytes(&dst, &rng);
        tk_clone(&dst, &snap, &pmem);
        tk_clone(&src, &snap_src, &qmem);
        size_t bb = (size_t)BS * HK * (dt == ATTN_INT8 ? 37 : 36);  /* by hand */
        int64_t pairs[3][2] = {{0, 3}, {5, 0}, {0, 8}};
        CHECK_STATUS(attn_swap_blocks(&src, &dst, &pairs[0][0], 3), ATTN_OK);
        tk_check_swap_038(&src, &dst, &snap, bb);
        CHECK(tk_same_contents(&src, &snap_src));
        /* copy within the cache, as copy-on-write does */
        memcpy(snap.key, dst.key, 9 * bb);
        memcpy(snap.value, dst.value, 9 * bb);
        attn_kv_cache *layers[1] = {&dst};
        int64_t cow[2][2] = {{1, 4}, {2, 7}};
        CHECK_STATUS(attn_copy_blocks(layers, 1, &cow[0][0], 2), ATTN_OK);
        for (int b = 0; b < 9; b++) {
            int from = b == 4 ? 1 : b == 7 ? 2 : b;
            CHECK_BITEQ((unsigned char *)dst.key + b * bb, (unsigned char *)snap.key + from * bb,
                        bb);
            CHECK_BITEQ((unsigned char *)dst.value + b * bb,
                        (unsigned char *)snap.value + from * bb, bb);
        }
        /* refused: the other integer dtype, another head size, a block past the end, a chain;
           nothing changes */
        memcpy(snap.key, dst.key, 9 * bb);
        memcpy(snap.value, dst.value, 9 * bb);
        attn_kv_cache other = src;
        other.dtype = tki_ints[1 - d];
        int64_t one[1][2] = {{0, 1}}, past[1][2] = {{0, 9}}, chain[2][2] = {{1, 2}, {2, 3}};
        CHECK_STATUS(attn_swap_blocks(&other, &dst, &one[0][0], 1), ATTN_ERR_INVALID_ARG);
        other = src; other.dtype = ATTN_F16;
        CHECK_STATUS(attn_swap_blocks(&other, &dst, &one[0][0], 1), ATTN_ERR_INVALID_ARG);
        other = src; other.head_size = 32;
        CHECK_STATUS(attn_swap_blocks(&other, &dst, &one[0][0], 1), ATTN_ERR_INVALID_ARG);
        other = src; other.k_scale = 2.0f;
        CHECK_STATUS(attn_swap_blocks(&other, &dst, &one[0][0], 1), ATTN_ERR_INVALID_ARG);
        CHECK_STATUS(attn_swap_blocks(&src, &dst, &past[0][0], 1), ATTN_ERR_OUT_OF_RANGE);
        CHECK_STATUS(attn_copy_blocks(layers, 1, &chain[0][0], 2), ATTN_ERR_INVALID_ARG);
        attn_kv_cache mixed = dst;
        mixed.dtype = tki_ints[1 - d];
        mixed.key = src.key; mixed.value = src.value; mixed.num_blocks = 9;  /* never read */
        attn_kv_cache *two[2] = {&dst, &mixed};
        mixed.k_scale = 3.0f;
        CHECK_STATUS(attn_copy_blocks(two, 2, &one[0][0], 1), ATTN_ERR_INVALID_ARG);
        CHECK(tk_same_contents(&dst, &snap));
        free(smem); free(dmem); free(pmem); free(qmem);
    }
}

#define TEST_INT_KV_LIST                                                                          \
    ATTN_TEST_ENTRY(int_kv_dtype_queries_and_row_bytes),                                          \
    ATTN_TEST_ENTRY(int_kv_quantiser_hand_computed_groups),                                       \
    ATTN_TEST_ENTRY(int_kv_quantiser_matches_rule_through_convert),                               \
    ATTN_TEST_ENTRY(int_kv_convert_from_int_rows),                                                \
    ATTN_TEST_ENTRY(int_kv_convert_refuses_bad_input),                                            \
    ATTN_TEST_ENTRY(int_kv_simd_row_reader_matches_reference),                                    \
    ATTN_TEST_ENTRY(int_kv_write_kv_rows_strides_padding_duplicates),                             \
    ATTN_TEST_ENTRY(int_kv_write_kv_refuses_bad_input),                                           \
    ATTN_TEST_ENTRY(int_kv_cache_sizes_exact),                                                    \
    ATTN_TEST_ENTRY(int_kv_swap_and_copy_move_whole_rows)
