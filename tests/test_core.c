/* Foundation tests: status codes, version, dtypes and conversions, ISA dispatch, the threading
   driver, params validation and the bias builders. */

TEST(status_strings_cover_every_code) {
    attn_status all[] = {ATTN_OK, ATTN_ERR_INVALID_ARG, ATTN_ERR_UNSUPPORTED,
                         ATTN_ERR_WORKSPACE_TOO_SMALL, ATTN_ERR_OUT_OF_BLOCKS, ATTN_ERR_BACKEND,
                         ATTN_ERR_OUT_OF_RANGE};
    int n = (int)(sizeof all / sizeof all[0]);
    for (int i = 0; i < n; i++) {
        const char *s = attn_status_str(all[i]);
        REQUIRE(s != NULL);
        CHECK(strlen(s) > 0);
        CHECK(strcmp(s, "unknown attn_status") != 0);
        for (int j = 0; j < i; j++) CHECK(strcmp(s, attn_status_str(all[j])) != 0);
    }
    CHECK(strcmp(attn_status_str((attn_status)12345), "unknown attn_status") == 0);
    CHECK(strcmp(attn_status_str((attn_status)-99), "unknown attn_status") == 0);
    CHECK_EQ_INT(ATTN_OK, 0);
}

TEST(version_and_build_info) {
    CHECK_EQ_INT(attn_version(), ATTN_VERSION_NUMBER);
    CHECK(strstr(attn_build_info(), ATTN_VERSION_STRING) != NULL);
    CHECK(attn_cpu_features() != NULL);
#ifdef ATTN_USE_OPENMP
    CHECK(strstr(attn_build_info(), "openmp=yes") != NULL);
#else
    CHECK(strstr(attn_build_info(), "openmp=no") != NULL);
#endif
#ifdef ATTN_NO_FP8_KERNELS
    CHECK(strstr(attn_build_info(), "fp8_kernels=no") != NULL);
#else
    CHECK(strstr(attn_build_info(), "fp8_kernels") == NULL);
#endif
#if ATTN__HAVE_TILES
    CHECK(strstr(attn_build_info(), ",amx") != NULL);
#else
    CHECK(strstr(attn_build_info(), "amx") == NULL);
#endif
#if defined(ATTN__HAVE_DECODE_TILES) && defined(ATTN_DECODE_TILES)
    CHECK(strstr(attn_build_info(), " decode_tiles=all") != NULL);
#elif defined(ATTN__HAVE_DECODE_TILES)
    CHECK(strstr(attn_build_info(), " decode_tiles=bf16") != NULL);
#else
    CHECK(strstr(attn_build_info(), "decode_tiles") == NULL);
#endif
}

TEST(dtype_sizes_and_names) {
    CHECK_EQ_INT(attn_dtype_size(ATTN_F32), 4);
    CHECK_EQ_INT(attn_dtype_size(ATTN_F16), 2);
    CHECK_EQ_INT(attn_dtype_size(ATTN_BF16), 2);
    CHECK_EQ_INT(attn_dtype_size(ATTN_FP8_E4M3), 1);
    CHECK_EQ_INT(attn_dtype_size(ATTN_FP8_E5M2), 1);
    CHECK_EQ_INT(attn_dtype_size((attn_dtype)99), 0);
    CHECK(strcmp(attn_dtype_name(ATTN_BF16), "bf16") == 0);
    CHECK(strcmp(attn_dtype_name((attn_dtype)99), "unknown") == 0);
}

/* Independent decoder of a binary float format from its fields (double arithmetic). */
static double tc_decode(uint32_t code, int exp_bits, int mant_bits, int bias) {
    uint32_t sign = (code >> (exp_bits + mant_bits)) & 1;
    uint32_t e = (code >> mant_bits) & ((1u << exp_bits) - 1), m = code & ((1u << mant_bits) - 1);
    double v = e == 0 ? ldexp((double)m, 1 - bias - mant_bits)
                      : ldexp(1.0 + (double)m / (double)(1u << mant_bits), (int)e - bias);
    return sign ? -v : v;
}

TEST(f16_decode_all_65536_codes) {
    int bad = 0;
    for (uint32_t c = 0; c < 65536; c++) {
        float got = attn_f16_to_f32((uint16_t)c);
        uint32_t e = (c >> 10) & 31, m = c & 1023;
        if (e == 31) {
            if (m ? !isnan(got) : !(isinf(got) && (got < 0) == ((c >> 15) != 0))) bad++;
        } else if ((double)got != tc_decode(c, 5, 10, 15) ||
                   (signbit(got) != 0) != ((c >> 15) != 0)) {
            bad++;
        }
    }
    CHECK_EQ_INT(bad, 0);
}

TEST(bf16_decode_all_65536_codes) {
    int bad = 0;
    for (uint32_t c = 0; c < 65536; c++) {
        float got = attn_bf16_to_f32((uint16_t)c);
        uint32_t e = (c >> 7) & 255, m = c & 127;
        if (e == 255) {
            if (m ? !isnan(got) : !isinf(got)) bad++;
        } else if ((double)got != tc_decode(c, 8, 7, 127)) {
            bad++;
        }
    }
    CHECK_EQ_INT(bad, 0);
}

TEST(fp8_decode_all_256_codes_both_formats) {
    for (uint32_t c = 0; c < 256; c++) {
        float e4 = attn_fp8_e4m3_to_f32((uint8_t)c), e5 = attn_fp8_e5m2_to_f32((uint8_t)c);
        if ((c & 0x7f) == 0x7f) CHECK(isnan(e4));  /* e4m3fn: only S.1111.111 is NaN, no inf */
        else CHECK_NEAR(e4, tc_decode(c, 4, 3, 7), 0.0);
        uint32_t e = (c >> 2) & 31, m = c & 3;
        if (e == 31 && m) CHECK(isnan(e5));
        else if (e == 31) CHECK(isinf(e5) && (e5 < 0) == (c >= 128));
        else CHECK_NEAR(e5, tc_decode(c, 5, 2, 15), 0.0);
    }
    CHECK_NEAR(attn_fp8_e4m3_to_f32(0x7e), 448.0, 0.0);
    CHECK_NEAR(attn_fp8_e5m2_to_f32(0x7b), 57344.0, 0.0);
    CHECK_NEAR(attn_fp8_e4m3_to_f32(0x01), ldexp(1.0, -9), 0.0);
}

typedef struct tc_format {
    const char *name; int bits, exp_bits, mant_bits, bias;
    uint32_t (*encode)(float);
    float (*decode)(uint32_t);
    int saturates;  /* fp8: overflow clamps to max finite; f16/bf16: overflow gives inf */
} tc_format;
static uint32_t tc_enc_f16(float x) { return attn_f32_to_f16(x); }
static float tc_dec_f16(uint32_t c) { return attn_f16_to_f32((uint16_t)c); }
static uint32_t tc_enc_bf16(float x) { return attn_f32_to_bf16(x); }
static float tc_dec_bf16(uint32_t c) { return attn_bf16_to_f32((uint16_t)c); }
static uint32_t tc_enc_e4m3(float x) { return attn_f32_to_fp8_e4m3(x); }
static float tc_dec_e4m3(uint32_t c) { return attn_fp8_e4m3_to_f32((uint8_t)c); }
static uint32_t tc_enc_e5m2(float x) { return attn_f32_to_fp8_e5m2(x); }
static float tc_dec_e5m2(uint32_t c) { return attn_fp8_e5m2_to_f32((uint8_t)c); }
static const tc_format tc_formats[] = {
    {"f16", 16, 5, 10, 15, tc_enc_f16, tc_dec_f16, 0},
    {"bf16", 16, 8, 7, 127, tc_enc_bf16, tc_dec_bf16, 0},
    {"e4m3", 8, 4, 3, 7, tc_enc_e4m3, tc_dec_e4m3, 1},
    {"e5m2", 8, 5, 2, 15, tc_enc_e5m2, tc_dec_e5m2, 1}};

/* For every pair of adjacent positive finite codes: the exact midpoint rounds to the even code,
   a hair below goes down, a hair above goes up; and every code round-trips. */
TEST(encode_round_to_nearest_even_every_midpoint) {
    for (int f = 0; f < 4; f++) {
        const tc_format *F = &tc_formats[f];
        uint32_t sign_bit = 1u << (F->bits - 1), bad = 0, c;
        for (c = 0; c < (1u << F->bits); c++) {
            float x = F->decode(c);
            if (isnan(x) || (isinf(x) && F->saturates)) continue;  /* fp8 clamps inf */
            if (F->encode(x) != c) bad++;  /* round trip, -0 and +-inf included */
        }
        for (c = 0; c + 1 < sign_bit; c++) {
            float a = F->decode(c), b = F->decode(c + 1);
            if (isnan(b) || isinf(b)) break;
            float mid = (float)(((double)a + (double)b) / 2);  /* exact in f32 for these formats */
            uint32_t even = (c & 1) ? c + 1 : c;
            if (F->encode(mid) != even) bad++;
            if (F->encode(-mid) != (even | sign_bit)) bad++;
            if (F->encode(nextafterf(mid, 0.0f)) != c) bad++;
            if (F->encode(nextafterf(mid, INFINITY)) != c + 1) bad++;
        }
        CHECK_MSG(bad == 0, "%s: %u encode mismatches", F->name, bad);
    }
}

TEST(encode_saturation_nan_and_inf) {
    /* fp8 saturates (SATFINITE, as vLLM): overflow and inf clamp to +-max finite */
    CHECK_EQ_INT(attn_f32_to_fp8_e4m3(448.0f), 0x7e);
    CHECK_EQ_INT(attn_f32_to_fp8_e4m3(463.9f), 0x7e);
    CHECK_EQ_INT(attn_f32_to_fp8_e4m3(464.0f), 0x7e);
    CHECK_EQ_INT(attn_f32_to_fp8_e4m3(1e30f), 0x7e);
    CHECK_EQ_INT(attn_f32_to_fp8_e4m3(INFINITY), 0x7e);
    CHECK_EQ_INT(attn_f32_to_fp8_e4m3(-INFINITY), 0xfe);
    CHECK_EQ_INT(attn_f32_to_fp8_e4m3(NAN) & 0x7f, 0x7f);
    CHECK_EQ_INT(attn_f32_to_fp8_e5m2(57344.0f), 0x7b);
    CHECK_EQ_INT(attn_f32_to_fp8_e5m2(61440.0f), 0x7b);
    CHECK_EQ_INT(attn_f32_to_fp8_e5m2(INFINITY), 0x7b);
    CHECK_EQ_INT(attn_f32_to_fp8_e5m2(-1e30f), 0xfb);
    CHECK(isnan(attn_fp8_e5m2_to_f32(attn_f32_to_fp8_e5m2(NAN))));
    CHECK_EQ_INT(attn_f32_to_fp8_e4m3(ldexpf(1.0f, -11)), 0x00);  /* below half the min subnormal */
    CHECK_EQ_INT(attn_f32_to_fp8_e4m3(ldexpf(1.0f, -10) * 1.01f), 0x01);
    /* f16 / bf16 follow IEEE: overflow rounds to inf */
    CHECK_EQ_INT(attn_f32_to_f16(65504.0f), 0x7bff);
    CHECK_EQ_INT(attn_f32_to_f16(65519.0f), 0x7bff);
    CHECK_EQ_INT(attn_f32_to_f16(65520.0f), 0x7c00);
    CHECK_EQ_INT(attn_f32_to_f16(-INFINITY), 0xfc00);
    CHECK(isnan(attn_f16_to_f32(attn_f32_to_f16(NAN))));
    CHECK_EQ_INT(attn_f32_to_bf16(INFINITY), 0x7f80);
    CHECK_EQ_INT(attn_f32_to_bf16(FLT_MAX), 0x7f80);
    CHECK(isnan(attn_bf16_to_f32(attn_f32_to_bf16(NAN))));
    CHECK_EQ_INT(attn_f32_to_f16(ldexpf(1.0f, -25)), 0x0000);  /* tie to even: 0 */
    CHECK_EQ_INT(attn_f32_to_f16(ldexpf(1.5f, -25)), 0x0001);
}

/* Every ISA's bulk row conversions agree bit for bit with the scalar functions, on random bit
   patterns (NaN, inf and subnormals included) and on lengths that exercise the scalar tails. */
TEST(simd_bulk_conversions_match_scalar) {
    enum { N = 4099 };
    static float src[N], got[N];
    static uint16_t half[N], out16[N];
    uint64_t rng = 7;
    attn_isa isas[ATTN_ISA_COUNT];
    int n_isa = tu_isas(isas);
    for (int i = 0; i < N; i++) {
        src[i] = attn__bits_f32((uint32_t)attn_test_rand_u64(&rng));
        half[i] = (uint16_t)attn_test_rand_u64(&rng);
    }
    src[0] = NAN; src[1] = -INFINITY; src[2] = 65520.0f; src[3] = ldexpf(1.0f, -140);
    for (int k = 0; k < n_isa; k++) {
        const attn__kernels *K = attn__kernels_for(isas[k]);
        int bad = 0;
        for (int dt = ATTN_F16; dt <= ATTN_BF16; dt++) {
            K->from_f32(out16, (attn_dtype)dt, src, N);
            for (int i = 0; i < N; i++) {
                uint16_t want = dt == ATTN_F16 ? attn_f32_to_f16(src[i]) : attn_f32_to_bf16(src[i]);
                if (out16[i] != want) bad++;
            }
            K->to_f32(got, half, (attn_dtype)dt, N, 1.0f);
            for (int i = 0; i < N; i++) {
                float want = dt == ATTN_F16 ? attn_f16_to_f32(half[i]) : attn_bf16_to_f32(half[i]);
                if (attn__f32_bits(got[i]) != attn__f32_bits(want)) bad++;
            }
        }
        CHECK_MSG(bad == 0, "isa %s: %d mismatches", attn_isa_name(isas[k]), bad);
    }
}

/* Every fp8 code, at several offsets within a vector, decoded by each ISA's vector loops bit
   for bit as the scalar decoders - NaNs included. */
TEST(simd_fp8_decode_matches_scalar_for_every_code) {
    enum { N = 256 * 3 + 37 };
    static uint8_t codes[N];
    static float got[N];
    attn_isa isas[ATTN_ISA_COUNT];
    int n_isa = tu_isas(isas);
    /* every code, shifted each round */
    for (int i = 0; i < N; i++) codes[i] = (uint8_t)(i * 167 + i / 256);
    for (int k = 0; k < n_isa; k++) {
        const attn__kernels *K = attn__kernels_for(isas[k]);
        int bad = 0;
        for (int dt = ATTN_FP8_E4M3; dt <= ATTN_FP8_E5M2; dt++)
            for (int off = 0; off < 33; off += 11) {
                K->to_f32(got, codes + off, (attn_dtype)dt, N - off, 1.0f);
                for (int i = 0; i < N - off; i++) {
                    uint8_t c = codes[off + i];
                    float want = dt == ATTN_FP8_E4M3 ? attn_fp8_e4m3_to_f32(c)
                                 : attn_fp8_e5m2_to_f32(c);
                    if (attn__f32_bits(got[i]) != attn__f32_bits(want)) bad++;
                }
            }
        CHECK_MSG(bad == 0, "isa %s: %d mismatches", attn_isa_name(isas[k]), bad);
    }
}

TEST(convert_api_scales_fp8_and_rejects_bad_input) {
    float x[6] = {1.0f, -3.0f, 900.0f, 0.001f, -1e9f, 0.0f}, back[6];
    uint8_t q[6], q2[6];
    uint16_t h[6];
    CHECK_STATUS(attn_convert(q, ATTN_FP8_E4M3, x, ATTN_F32, 6, 2.0f), ATTN_OK);
    for (int i = 0; i < 6; i++) CHECK_EQ_INT(q[i], attn_f32_to_fp8_e4m3(x[i] / 2.0f));
    CHECK_STATUS(attn_convert(back, ATTN_F32, q, ATTN_FP8_E4M3, 6, 2.0f), ATTN_OK);
    for (int i = 0; i < 6; i++) CHECK_NEAR(back[i], attn_fp8_e4m3_to_f32(q[i]) * 2.0f, 0.0);
    CHECK_NEAR(back[2], 896.0, 0.0);   /* 450 rounds to 448, times 2 */
    CHECK_NEAR(back[4], -896.0, 0.0);  /* saturated */
    CHECK_STATUS(attn_convert(h, ATTN_F16, x, ATTN_F32, 6, 0.0f), ATTN_OK);
    for (int i = 0; i < 6; i++) CHECK_EQ_INT(h[i], attn_f32_to_f16(x[i]));
    /* bad input changes nothing */
    memset(q2, 0xAB, sizeof q2);
    CHECK_STATUS(attn_convert(q2, ATTN_FP8_E4M3, x, ATTN_F32, 6, -1.0f), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_convert(q2, ATTN_FP8_E4M3, x, ATTN_F32, 6, NAN), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_convert(h, ATTN_F16, x, ATTN_F32, 6, 2.0f), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_convert(q2, (attn_dtype)42, x, ATTN_F32, 6, 1.0f), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_convert(NULL, ATTN_F16, x, ATTN_F32, 6, 1.0f), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_convert(NULL, ATTN_F16, NULL, ATTN_F32, 0, 1.0f), ATTN_OK);
    for (int i = 0; i < 6; i++) CHECK_EQ_INT(q2[i], 0xAB);
}

TEST(convert_in_place_widening_and_narrowing) {
    enum { N = 1000 };
    static float buf[N];
    uint16_t *h = (uint16_t *)(void *)buf;
    uint64_t rng = 3;
    float want[N];
    for (int i = 0; i < N; i++) h[i] = attn_f32_to_bf16(attn_test_rand_uniform(&rng, -4, 4));
    for (int i = 0; i < N; i++) want[i] = attn_bf16_to_f32(h[i]);
    CHECK_STATUS(attn_convert(buf, ATTN_F32, buf, ATTN_BF16, N, 0.0f), ATTN_OK);
    CHECK_BITEQ(buf, want, sizeof want);
    CHECK_STATUS(attn_convert(buf, ATTN_BF16, buf, ATTN_F32, N, 0.0f), ATTN_OK);
    for (int i = 0; i < N; i++) CHECK_EQ_INT(h[i], attn_f32_to_bf16(want[i]));
}

TEST(isa_detection_and_forced_isa) {
    attn_isa best = attn_best_isa();
    CHECK(best != ATTN_ISA_AUTO);
    CHECK(attn_isa_supported(best));
    CHECK(attn_isa_supported(ATTN_ISA_SCALAR));
    CHECK(strcmp(attn_isa_name(ATTN_ISA_AVX512), "avx512") == 0);
    CHECK(strcmp(attn_isa_name(ATTN_ISA_AMX), "amx") == 0);
    CHECK(strcmp(attn_isa_name((attn_isa)77), "unknown") == 0);
    /* AUTO takes the tiles exactly when the CPU (and OS) gives them */
    int real_tiles = strstr(attn_cpu_features(), "amx=yes") != NULL;
    CHECK_EQ_INT(best == ATTN_ISA_AMX, real_tiles);
#ifndef __aarch64__
    CHECK(strstr(attn_cpu_features(), real_tiles ? "amx=yes" : "amx=no") != NULL);
    /* bf16dot=fast: the CPU's bf16 dot products outrun its FMAs (AMD with AVX-512 BF16) - the
       flag the bf16 pair kernels follow (attn__call.pairs) */
    int fast_dot = strstr(attn_cpu_features(), "bf16dot=fast") != NULL;
    CHECK_EQ_INT(fast_dot, (attn__cpu_flags() & ATTN__CPU_BF16_DOT_FAST) != 0);
    CHECK(!fast_dot || strstr(attn_cpu_features(), "avx512bf16=yes") != NULL);
    CHECK(!fast_dot || attn__cpu_is_amd());
    /* the whole text, each flag named once, in this order */
    int f = attn__cpu_flags();
    char want[160];
    snprintf(want, sizeof want, "avx2=%s avx512=%s avx512bf16=%s avx512vbmi=%s amx=%s bf16dot=%s",
             f & ATTN__CPU_AVX2 ? "yes" : "no", f & ATTN__CPU_AVX512 ? "yes" : "no",
             f & ATTN__CPU_AVX512BF16 ? "yes" : "no", f & ATTN__CPU_AVX512VBMI ? "yes" : "no",
             f & ATTN__CPU_AMX ? "yes" : "no", f & ATTN__CPU_BF16_DOT_FAST ? "fast" : "no");
    CHECK_MSG(strcmp(attn_cpu_features(), want) == 0, "attn_cpu_features() = \"%s\", want \"%s\"",
              attn_cpu_features(), want);
#endif
#if ATTN__HAVE_TILE_EMULATION
    /* this suite is built with ATTN_TILES_EMULATE: tiles run anywhere AVX2 does */
    CHECK_EQ_INT(attn_isa_supported(ATTN_ISA_AMX), attn_isa_supported(ATTN_ISA_AVX2));
#elif !ATTN__HAVE_AMX
    CHECK(!attn_isa_supported(ATTN_ISA_AMX));  /* ATTN_NO_AMX, no SIMD, or not x86 */
#endif
#ifdef ATTN_NO_SIMD
    CHECK_EQ_INT(best, ATTN_ISA_SCALAR);
#endif
    /* a forced ISA the CPU or build lacks is refused, and so is a value outside the enum */
    attn_params p; memset(&p, 0, sizeof p);
    p.num_heads = 1; p.num_kv_heads = 1; p.head_size = 4;
    float q[4] = {1, 2, 3, 4}, o[4] = {9, 9, 9, 9};
    int32_t cu[2] = {0, 1};
    attn_rows r = {q, ATTN_F32, 0}, ro = {o, ATTN_F32, 0};
    static char ws[1 << 16];
    for (int i = ATTN_ISA_SCALAR; i < ATTN_ISA_COUNT; i++) {
        attn_exec e = tu_exec((attn_isa)i, 1);
        o[0] = 9.0f;
        attn_status want = attn_isa_supported((attn_isa)i) ? ATTN_OK : ATTN_ERR_UNSUPPORTED;
        CHECK_STATUS(attn_sdpa(&p, &e, r, r, r, ro, cu, cu, 1, 1, NULL, ws, sizeof ws), want);
        if (want != ATTN_OK) CHECK_NEAR(o[0], 9.0, 0.0);
    }
    attn_exec bad = tu_exec((attn_isa)99, 1);
    CHECK_STATUS(attn_sdpa(&p, &bad, r, r, r, ro, cu, cu, 1, 1, NULL, ws, sizeof ws),
                 ATTN_ERR_INVALID_ARG);
    attn_exec dnnl = tu_exec(ATTN_ISA_AUTO, 1);
    dnnl.gemm = ATTN_GEMM_ONEDNN;
#ifndef ATTN_USE_ONEDNN
    CHECK_STATUS(attn_sdpa(&p, &dnnl, r, r, r, ro, cu, cu, 1, 1, NULL, ws, sizeof ws),
                 ATTN_ERR_UNSUPPORTED);
#else
    {   /* the oneDNN engine has its own tiles: the size query says how much it needs */
        size_t bytes = attn_sdpa_workspace_size(&p, &dnnl, cu, cu, 1);
        void *big = tu_alloc(bytes);
        CHECK_STATUS(attn_sdpa(&p, &dnnl, r, r, r, ro, cu, cu, 1, 1, NULL, big, bytes), ATTN_OK);
        CHECK_STATUS(attn_sdpa(&p, &dnnl, r, r, r, ro, cu, cu, 1, 1, NULL, big, bytes - 1),
                     ATTN_ERR_WORKSPACE_TOO_SMALL);
        free(big);
    }
#endif
}

typedef struct tc_visit { int *count; int threads; int bad_thread; } tc_visit;
static void tc_visit_task(void *ctx, int item, int thread) {
    tc_visit *v = (tc_visit *)ctx;
    if (thread < 0 || thread >= v->threads) v->bad_thread = 1;
#ifdef ATTN_USE_OPENMP
#pragma omp atomic
#endif
    v->count[item]++;
}

TEST(threading_driver_visits_every_item_once) {
    enum { N = 1001 };
    static int count[N];
    const int threads[] = {1, 2, 7};
    for (int t = 0; t < 4; t++) {
        tu_pool pool = {0};
        attn_exec e = tu_exec(ATTN_ISA_AUTO, t < 3 ? threads[t] : 3);
        if (t == 3) { e.parallel_for = tu_pool_for; e.pool = &pool; }
        for (int n = 0; n <= N; n += (n < 10 ? 1 : 197)) {
            tc_visit v;
            memset(count, 0, sizeof count);
            v.count = count; v.threads = attn_exec_threads(&e); v.bad_thread = 0;
            CHECK_STATUS(attn_parallel_run(&e, n, tc_visit_task, &v), ATTN_OK);
            int wrong = 0;
            for (int i = 0; i < N; i++) wrong += count[i] != (i < n ? 1 : 0);
            CHECK_MSG(wrong == 0, "threads=%d n=%d: %d items visited a wrong number of times",
                      e.num_threads, n, wrong);
            CHECK(!v.bad_thread);
        }
        if (t == 3) CHECK(pool.calls > 0);
    }
    CHECK_STATUS(attn_parallel_run(NULL, -1, tc_visit_task, NULL), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_parallel_run(NULL, 1, NULL, NULL), ATTN_ERR_INVALID_ARG);
    attn_exec neg = tu_exec(ATTN_ISA_AUTO, -2);
    CHECK_STATUS(attn_parallel_run(&neg, 1, tc_visit_task, NULL), ATTN_ERR_INVALID_ARG);
    CHECK(attn_exec_threads(NULL) >= 1);
}

TEST(params_check_rejects_each_bad_field) {
    float slopes[4] = {0.5f, 0.25f, 0.125f, 0.0625f}, bad_slopes[4] = {0.5f, NAN, 0, 0};
    attn_params ok; memset(&ok, 0, sizeof ok);
    ok.num_heads = 4; ok.num_kv_heads = 2; ok.head_size = 64;
    CHECK_STATUS(attn_params_check(&ok), ATTN_OK);
    CHECK_STATUS(attn_params_check(NULL), ATTN_ERR_INVALID_ARG);
    attn_params p = ok; p.num_kv_heads = 3;
    CHECK_STATUS(attn_params_check(&p), ATTN_ERR_INVALID_ARG);
    p = ok; p.num_heads = 0; CHECK_STATUS(attn_params_check(&p), ATTN_ERR_INVALID_ARG);
    p = ok; p.num_kv_heads = 0; CHECK_STATUS(attn_params_check(&p), ATTN_ERR_INVALID_ARG);
    p = ok; p.head_size = 0; CHECK_STATUS(attn_params_check(&p), ATTN_ERR_INVALID_ARG);
    p = ok; p.head_size = ATTN_MAX_HEAD_SIZE + 1;
    CHECK_STATUS(attn_params_check(&p), ATTN_ERR_INVALID_ARG);
    p = ok; p.head_size = ATTN_MAX_HEAD_SIZE; CHECK_STATUS(attn_params_check(&p), ATTN_OK);
    p = ok; p.scale = -1.0f; CHECK_STATUS(attn_params_check(&p), ATTN_ERR_INVALID_ARG);
    p = ok; p.scale = INFINITY; CHECK_STATUS(attn_params_check(&p), ATTN_ERR_INVALID_ARG);
    p = ok; p.logits_soft_cap = NAN; CHECK_STATUS(attn_params_check(&p), ATTN_ERR_INVALID_ARG);
    p = ok; p.logits_soft_cap = -5.0f; CHECK_STATUS(attn_params_check(&p), ATTN_ERR_INVALID_ARG);
    p = ok; p.sliding_window = -1; CHECK_STATUS(attn_params_check(&p), ATTN_ERR_INVALID_ARG);
    p = ok; p.alibi_slopes = slopes; CHECK_STATUS(attn_params_check(&p), ATTN_OK);
    p = ok; p.alibi_slopes = bad_slopes; CHECK_STATUS(attn_params_check(&p), ATTN_ERR_INVALID_ARG);
    p = ok; p.sinks = bad_slopes; CHECK_STATUS(attn_params_check(&p), ATTN_ERR_INVALID_ARG);
}

TEST(alibi_slopes_match_formula_for_1_to_64_heads) {
    float got[64];
    double want[64];
    for (int n = 1; n <= 64; n++) {
        attn_alibi_slopes(n, got);
        ref_alibi_slopes(n, want);
        for (int h = 0; h < n; h++) CHECK_NEAR(got[h], want[h], 1e-7 * want[h]);
    }
    attn_alibi_slopes(8, got);
    CHECK_NEAR(got[0], 0.5, 0.0);
    CHECK_NEAR(got[7], 1.0 / 256, 0.0);
    attn_alibi_slopes(12, got);
    CHECK_NEAR(got[8], pow(2.0, -0.5), 1e-7);
    CHECK_NEAR(got[11], pow(2.0, -3.5), 1e-7);
}

/* The builders against ref_bias over a sweep of shapes, masks and heads. */
TEST(bias_builders_match_reference) {
    const int Lqs[] = {0, 1, 3, 7}, Lks[] = {0, 1, 5, 7}, windows[] = {0, 1, 3, 16};
    float slopes[5];
    attn_alibi_slopes(5, slopes);
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int w = 0; w < 4; w++)
                for (int causal = 0; causal < 2; causal++)
                    for (int alibi = 0; alibi < 2; alibi++) {
                        int H = 5, Lq = Lqs[a], Lk = Lks[b], n = H * Lq * Lk;
                        attn_params p; memset(&p, 0, sizeof p);
                        p.num_heads = H; p.num_kv_heads = 1; p.head_size = 8;
                        p.sliding_window = windows[w];
                        p.alibi_slopes = alibi ? slopes : NULL;
                        float got[5 * 7 * 7 + 1];
                        double want[5 * 7 * 7 + 1];
                        CHECK_STATUS(attn_make_bias(&p, Lq, Lk, causal, got), ATTN_OK);
                        ref_bias(&p, causal, Lq, Lk, want);
                        int bad = 0;
                        for (int i = 0; i < n; i++)
                            bad += isinf(want[i]) ? !(isinf(got[i]) && got[i] < 0)
                                                  : fabs(got[i] - want[i]) > 1e-6
                                                      * (1 + fabs(want[i]));
                        CHECK_MSG(bad == 0, "Lq=%d Lk=%d W=%d causal=%d alibi=%d: %d wrong", Lq, Lk,
                                  windows[w], causal, alibi, bad);
                        if (windows[w] && !alibi) {  /* window-only builder = one head of
                                                        make_bias */
                            float only[7 * 7 + 1];
                            CHECK_STATUS(attn_make_sliding_window_bias(windows[w], Lq, Lk, causal,
                                                                       only), ATTN_OK);
                            CHECK_BITEQ(only, got, sizeof(float) * (size_t)Lq * Lk);
                        }
                        if (alibi && !windows[w]) {
                            float only[5 * 7 * 7 + 1];
                            CHECK_STATUS(attn_make_alibi_bias(H, slopes, Lq, Lk, causal, only),
                                         ATTN_OK);
                            CHECK_BITEQ(only, got, sizeof(float) * (size_t)n);
                        }
                    }
}

/* Each visible entry is the reference's exact product slope * (j - pos) rounded once, to the
   bit: a zero slope or a negative one on the diagonal gives -0 where the product is -0, and a
   bias without ALiBi is +0. */
TEST(bias_builders_exact_products) {
    float slopes[3] = {-0.5f, 0.0f, 0.375f}, got[3 * 4 * 6];
    double want[3 * 4 * 6];
    for (int causal = 0; causal < 2; causal++)
        for (int alibi = 0; alibi < 2; alibi++) {
            attn_params p;
            int bad = 0;
            memset(&p, 0, sizeof p);
            p.num_heads = 3; p.num_kv_heads = 1; p.head_size = 8; p.sliding_window = 3;
            p.alibi_slopes = alibi ? slopes : NULL;
            CHECK_STATUS(attn_make_bias(&p, 4, 6, causal, got), ATTN_OK);
            ref_bias(&p, causal, 4, 6, want);
            for (int i = 0; i < 3 * 4 * 6; i++) {
                float w = (float)want[i];
                bad += memcmp(&got[i], &w, sizeof w) != 0;
            }
            CHECK_MSG(bad == 0, "causal=%d alibi=%d: %d entries differ", causal, alibi, bad);
        }
}

TEST(bias_builders_reject_bad_input) {
    float slopes[2] = {0.5f, 0.25f}, buf[4] = {7, 7, 7, 7};
    CHECK_STATUS(attn_make_sliding_window_bias(0, 2, 2, 1, buf), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_make_sliding_window_bias(2, -1, 2, 1, buf), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_make_sliding_window_bias(2, 2, 2, 1, NULL), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_make_alibi_bias(2, NULL, 1, 2, 1, buf), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_make_alibi_bias(0, slopes, 1, 2, 1, buf), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_make_bias(NULL, 1, 2, 1, buf), ATTN_ERR_INVALID_ARG);
    for (int i = 0; i < 4; i++) CHECK_NEAR(buf[i], 7.0, 0.0);
}

/* A pool that records what the driver asked of it. */
typedef struct tc_rec_pool { int calls, last_threads; } tc_rec_pool;
static void tc_rec_pool_for(void *pool, int num_items, int num_threads, attn_task_fn *task,
                            void *ctx) {
    tc_rec_pool *p = (tc_rec_pool *)pool;
    p->calls++;
    p->last_threads = num_threads;
    for (int i = 0; i < num_items; i++) task(ctx, i, i % num_threads);
}

/* Below the call's serial work the items run on the calling thread (thread 0, no pool, no
   parallel region); from it on, on no more threads than items. */
TEST(threading_driver_runs_small_calls_serially) {
    static int count[64];
    tc_rec_pool pool = {0, 0};
    attn_exec e = tu_exec(ATTN_ISA_AUTO, 8);
    e.parallel_for = tc_rec_pool_for; e.pool = &pool;
    attn__call c;
    attn__call_of(&e, 0, &c);
    CHECK(c.work == ATTN__WORK_UNKNOWN && c.serial_work == ATTN_SERIAL_WORK);
    c.serial_work = 1000;
    tc_visit v;
    memset(count, 0, sizeof count);
    v.count = count; v.threads = 1; v.bad_thread = 0;   /* thread 0 only */
    c.work = 999;
    CHECK_EQ_INT(attn__run_threads(&c, 64), 1);
    attn__run_items(&c, 64, tc_visit_task, &v);
    CHECK_EQ_INT(pool.calls, 0);
    CHECK(!v.bad_thread);
    for (int i = 0; i < 64; i++) CHECK_EQ_INT(count[i], 1);
    c.work = 1000;
    CHECK_EQ_INT(attn__run_threads(&c, 64), 8);
    CHECK_EQ_INT(attn__run_threads(&c, 3), 3);   /* never more threads than items */
    v.threads = 3;
    attn__run_items(&c, 3, tc_visit_task, &v);
    CHECK_EQ_INT(pool.calls, 1);
    CHECK_EQ_INT(pool.last_threads, 3);
    CHECK(!v.bad_thread);
    attn__call_of(NULL, 0, &c);   /* the same rule on OpenMP threads */
    c.serial_work = 1000; c.work = 10; c.threads = 4;
    CHECK_EQ_INT(attn__run_threads(&c, 100), 1);
}

/* The work estimate the driver compares: Q.K and P.V multiply-adds of the pairs each query
   sees, counted here by hand. */
TEST(work_estimate_counts_visible_pairs) {
    CHECK_EQ_INT(attn__pairs_work(3, 5, 1, 0), 2 * (3 + 4 + 5));  /* causal, bottom-right */
    CHECK_EQ_INT(attn__pairs_work(3, 5, 0, 0), 2 * 15);          /* every key */
    CHECK_EQ_INT(attn__pairs_work(1, 700, 1, 0), 2 * 700);       /* a decode */
    CHECK_EQ_INT(attn__pairs_work(1, 700, 1, 64), 2 * 64);       /* a window caps it */
    attn_params p = {0};
    p.num_heads = 4; p.num_kv_heads = 2; p.head_size = 8;
    int32_t q_start[3] = {0, 2, 5}, lens[2] = {2, 10};
    attn__args a;
    memset(&a, 0, sizeof a);
    a.params = &p; a.q_start = q_start; a.k_start = q_start; a.num_seqs = 2; a.causal = 1;
    CHECK_EQ_INT(attn__args_work(&a), 2 * ((1 + 2) + (1 + 2 + 3)) * 4 * 8);
    attn_kv_cache cache;
    memset(&cache, 0, sizeof cache);
    a.q_start = NULL; a.cache = &cache; a.seq_lens = lens;  /* decodes, over a cache */
    CHECK_EQ_INT(attn__args_work(&a), 2 * (2 + 10) * 4 * 8);
}

#define TEST_CORE_LIST                                                                            \
    ATTN_TEST_ENTRY(status_strings_cover_every_code), ATTN_TEST_ENTRY(version_and_build_info),    \
    ATTN_TEST_ENTRY(dtype_sizes_and_names), ATTN_TEST_ENTRY(f16_decode_all_65536_codes),          \
    ATTN_TEST_ENTRY(bf16_decode_all_65536_codes),                                                 \
    ATTN_TEST_ENTRY(fp8_decode_all_256_codes_both_formats),                                       \
    ATTN_TEST_ENTRY(encode_round_to_nearest_even_every_midpoint),                                 \
    ATTN_TEST_ENTRY(encode_saturation_nan_and_inf),                                               \
    ATTN_TEST_ENTRY(simd_bulk_conversions_match_scalar),                                          \
    ATTN_TEST_ENTRY(simd_fp8_decode_matches_scalar_for_every_code),                               \
    ATTN_TEST_ENTRY(convert_api_scales_fp8_and_rejects_bad_input),                                \
    ATTN_TEST_ENTRY(convert_in_place_widening_and_narrowing),                                     \
    ATTN_TEST_ENTRY(isa_detection_and_forced_isa),                                                \
    ATTN_TEST_ENTRY(threading_driver_visits_every_item_once),                                     \
    ATTN_TEST_ENTRY(threading_driver_runs_small_calls_serially),                                  \
    ATTN_TEST_ENTRY(work_estimate_counts_visible_pairs),                                          \
    ATTN_TEST_ENTRY(params_check_rejects_each_bad_field),                                         \
    ATTN_TEST_ENTRY(alibi_slopes_match_formula_for_1_to_64_heads),                                \
    ATTN_TEST_ENTRY(bias_builders_match_reference),                                               \
    ATTN_TEST_ENTRY(bias_builders_exact_products),                                                \
    ATTN_TEST_ENTRY(bias_builders_reject_bad_input)
