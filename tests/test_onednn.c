/* The oneDNN GEMM engine (ATTN_GEMM_ONEDNN, ATTN_USE_ONEDNN builds) against the native one:
   the same results to f32 rounding on the shapes the bench runs, bitwise determinism across
   thread counts and caller pools, and the caller's OpenMP thread count left as it was. Without
   the macro: every prefill entry point refuses the engine and writes nothing. */

#ifdef ATTN_USE_ONEDNN
/* Max |a - b| over n outputs of dtype dt. */
static double to_max_diff(const void *a, const void *b, attn_dtype dt, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)ref_element(a, dt, i) - (double)ref_element(b, dt, i));
        if (!(d <= worst)) worst = d;
    }
    return worst;
}

TEST(onednn_matches_native_on_prefill_shapes) {
    static const int Ds[] = {64, 128, 80};
    static const int lq[3] = {300, 17, 129}, lk[3] = {300, 40, 257};
    int fails = 0;
    for (int i = 0; i < 3; i++)
        for (int G = 1; G <= 8; G *= 8)
            for (int dt = ATTN_F32; dt <= ATTN_BF16; dt += ATTN_BF16 - ATTN_F32) {
                ts_case c; memset(&c, 0, sizeof c);
                c.H = 8; c.Hk = 8 / G; c.D = Ds[i]; c.num_seqs = 3; c.lq = lq; c.lk = lk;
                c.causal = 1; c.dt = (attn_dtype)dt; c.alibi = i == 2; c.window = i == 2 ? 100 : 0;
                ts_data d;
                ts_make(&c, 700 + (uint64_t)(i * 16 + G * 2 + dt), &d);
                size_t n = (size_t)d.cu_q[3] * c.H * c.D, esz = attn_dtype_size(c.dt);
                void *native = tu_alloc(n * esz), *onednn = tu_alloc(n * esz);
                attn_exec en = tu_exec(ATTN_ISA_AUTO, 2), eo = en;
                eo.gemm = ATTN_GEMM_ONEDNN;
                int ok = ts_run(&c, &d, &en, native, NULL) == ATTN_OK &&
                         ts_run(&c, &d, &eo, onednn, NULL) == ATTN_OK;
                /* f32: both accumulate in f32 in a different order; bf16: one output rounding */
                double tol = c.dt == ATTN_F32 ? 2e-6 : 1.6e-2,
                       diff = ok ? to_max_diff(native, onednn, c.dt, n) : 1e9;
                if (!(diff <= tol)) {
                    fails++;
                    printf("  D=%d G=%d dt=%s: onednn vs native max diff %.3g (tol %.3g)\n", c.D, G,
                           attn_dtype_name(c.dt), diff, tol);
                }
                free(native); free(onednn);
                ts_free(&d);
            }
    CHECK_EQ_INT(fails, 0);
}

/* Outputs of dtype dt whose bits differ between a and b. */
static size_t to_count_diff(const void *a, const void *b, attn_dtype dt, size_t n) {
    size_t count = 0, esz = attn_dtype_size(dt);
    for (size_t i = 0; i < n; i++)
        count += memcmp((const char *)a + i * esz, (const char *)b + i * esz, esz) != 0;
    return count;
}

/* exec.f32_probs = 1 keeps bf16 inputs on f32 GEMMs: the bf16 outputs then match the native f32
   kernels' except where the two summation orders straddle a rounding boundary (rare), while
   probabilities rounded to bf16 move a large share of them. */
TEST(onednn_honours_f32_probs) {
    int lq[1] = {300}, lk[1] = {300};
    ts_case c; memset(&c, 0, sizeof c);
    c.H = 8; c.Hk = 2; c.D = 128; c.num_seqs = 1; c.lq = lq; c.lk = lk; c.causal = 1;
    c.dt = ATTN_BF16;
    ts_data d;
    ts_make(&c, 4242, &d);
    size_t n = (size_t)lq[0] * c.H * c.D;
    void *native = tu_alloc(n * 2), *exact = tu_alloc(n * 2), *rounded = tu_alloc(n * 2);
    attn_exec en = tu_exec(ATTN_ISA_AUTO, 2), eo = en;
    en.f32_probs = 1;
    eo.gemm = ATTN_GEMM_ONEDNN;
    CHECK(ts_run(&c, &d, &eo, rounded, NULL) == ATTN_OK);
    eo.f32_probs = 1;
    CHECK(ts_run(&c, &d, &en, native, NULL) == ATTN_OK &&
          ts_run(&c, &d, &eo, exact, NULL) == ATTN_OK);
    size_t off_exact = to_count_diff(native, exact, c.dt, n);
    size_t off_rounded = to_count_diff(native, rounded, c.dt, n);
    CHECK_MSG(off_exact * 1000 <= n,
              "f32_probs = 1: %zu of %zu outputs differ from the f32 kernels",
              off_exact, n);
    if (attn__cpu_flags() & ATTN__CPU_AVX512BF16)  /* oneDNN has bf16 kernels here: the test can
                                                      tell */
        CHECK_MSG(off_rounded > 10 * off_exact + 10, "bf16 P moved %zu outputs, f32 P %zu",
                  off_rounded,
                  off_exact);
    free(native); free(exact); free(rounded);
    ts_free(&d);
}

TEST(onednn_deterministic_and_leaves_openmp_threads_alone) {
    int lq[2] = {150, 33}, lk[2] = {150, 200};
    ts_case c; memset(&c, 0, sizeof c);
    c.H = 8; c.Hk = 2; c.D = 64; c.num_seqs = 2; c.lq = lq; c.lk = lk; c.causal = 1; c.sinks = 1;
    c.dt = ATTN_F32;
    ts_data d;
    ts_make(&c, 800, &d);
    size_t n = (size_t)d.cu_q[2] * c.H * c.D;
    float *base = (float *)tu_alloc(n * 4), *other = (float *)tu_alloc(n * 4);
    int before = omp_get_max_threads();
    attn_exec e = tu_exec(ATTN_ISA_AUTO, 1);
    e.gemm = ATTN_GEMM_ONEDNN;
    REQUIRE(ts_run(&c, &d, &e, base, NULL) == ATTN_OK);
    CHECK_EQ_INT(omp_get_max_threads(), before);
    for (int t = 0; t <= 3; t++) {  /* 0 = OpenMP default */
        e.num_threads = t;
        memset(other, 0, n * 4);
        REQUIRE(ts_run(&c, &d, &e, other, NULL) == ATTN_OK);
        CHECK_BITEQ(other, base, n * 4);
    }
    tu_pool pool = {0};
    e.num_threads = 2; e.parallel_for = tu_pool_for; e.pool = &pool;
    REQUIRE(ts_run(&c, &d, &e, other, NULL) == ATTN_OK);
    CHECK_BITEQ(other, base, n * 4);
    CHECK_EQ_INT(omp_get_max_threads(), before);
    int nested_ok = 1;
#pragma omp parallel num_threads(2) reduction(&& : nested_ok)
    {   /* a caller's own parallel region: each thread calls with its own workspace */
        float *mine = (float *)tu_alloc(n * 4);
        attn_exec ei = tu_exec(ATTN_ISA_AUTO, 2);
        ei.gemm = ATTN_GEMM_ONEDNN;
        nested_ok = ts_run(&c, &d, &ei, mine, NULL) == ATTN_OK && !memcmp(mine, base, n * 4);
        free(mine);
    }
    CHECK(nested_ok);
    free(base); free(other);
    ts_free(&d);
}
#else
TEST(onednn_engine_unsupported_without_the_macro) {
    float q[2 * 8] = {0}, o[2 * 8];
    int32_t cu[2] = {0, 2};
    attn_params p; memset(&p, 0, sizeof p);
    p.num_heads = 1; p.num_kv_heads = 1; p.head_size = 8;
    attn_rows r = {q, ATTN_F32, 0}, ro = {o, ATTN_F32, 0};
    static char ws[1 << 16];
    attn_exec e = tu_exec(ATTN_ISA_AUTO, 1);
    e.gemm = ATTN_GEMM_ONEDNN;
    for (int i = 0; i < 16; i++) o[i] = 3.0f;
    CHECK_STATUS(attn_sdpa(&p, &e, r, r, r, ro, cu, cu, 1, 1, NULL, ws, sizeof ws),
                 ATTN_ERR_UNSUPPORTED);
    for (int i = 0; i < 16; i++) CHECK_NEAR(o[i], 3.0, 0.0);
    attn_layer layer;
    CHECK_STATUS(attn_layer_init(&layer, &p, ATTN_DECODER, ATTN_BACKEND_IPEX),
                 ATTN_ERR_UNSUPPORTED);
}
#endif

#ifdef ATTN_USE_ONEDNN
#define TEST_ONEDNN_LIST                                                                          \
    ATTN_TEST_ENTRY(onednn_matches_native_on_prefill_shapes),                                     \
    ATTN_TEST_ENTRY(onednn_honours_f32_probs),                                                    \
    ATTN_TEST_ENTRY(onednn_deterministic_and_leaves_openmp_threads_alone)
#else
#define TEST_ONEDNN_LIST ATTN_TEST_ENTRY(onednn_engine_unsupported_without_the_macro)
#endif
