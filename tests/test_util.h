/* test_util.h - helpers shared by the attn.h tests (not part of the library).
   Included into the single test translation unit after attn.h, attn_test.h and ref.h. */
#ifndef ATTN_TEST_UTIL_H
#define ATTN_TEST_UTIL_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#define CHECK_STATUS(expr, want)                                                                  \
    do {                                                                                          \
        attn_status got_st_ = (expr), want_st_ = (want);                                          \
        CHECK_MSG(got_st_ == want_st_, "%s returned %s, want %s", #expr,                          \
                  attn_status_str(got_st_), attn_status_str(want_st_));                           \
    } while (0)

/* The reasons the ISA-specific tests give to SKIP where they cannot run. */
#define TU_NO_AVX2 "ATTN_ISA_AVX2 does not run here (not x86-64, no AVX2, or ATTN_NO_SIMD)"
#define TU_NO_AVX512 "ATTN_ISA_AVX512 does not run here (not x86-64, no AVX-512, or ATTN_NO_SIMD)"
#define TU_NO_TILES "ATTN_ISA_AMX does not run here: no tiles, real or emulated (not x86-64, " \
    "no AVX2, or ATTN_NO_SIMD)"
#define TU_NO_DECODE_TILES "this build has no decode tile kernels (not x86-64, ATTN_NO_SIMD " \
    "or ATTN_NO_AMX)"

/* The ISAs this machine can run but ATTN_ISA_AMX, scalar first; out needs room for
   ATTN_ISA_COUNT. */
static int tu_isas(attn_isa *out) {
    int n = 0;
    for (int i = ATTN_ISA_SCALAR; i < ATTN_ISA_COUNT; i++)
        if (i != ATTN_ISA_AMX && attn_isa_supported((attn_isa)i)) out[n++] = (attn_isa)i;
    return n;
}

/* The ISAs of tu_isas, then ATTN_ISA_AMX where it runs: the tile kernels of bf16 prefill on
   real tiles, or emulated ones (the suite is built with ATTN_TILES_EMULATE). For the prefill
   tests; out needs room for ATTN_ISA_COUNT. */
static int tu_isas_tiles(attn_isa *out) {
    int n = tu_isas(out);
    if (attn_isa_supported(ATTN_ISA_AMX)) out[n++] = ATTN_ISA_AMX;
    return n;
}

/* The GEMM engines this build has: native, and oneDNN under ATTN_USE_ONEDNN. */
static int tu_gemms(attn_gemm *out) {
    int n = 0;
    out[n++] = ATTN_GEMM_NATIVE;
#ifdef ATTN_USE_ONEDNN
    out[n++] = ATTN_GEMM_ONEDNN;
#endif
    return n;
}
static const char *tu_gemm_name(attn_gemm g) { return g == ATTN_GEMM_ONEDNN ? "onednn" : "native"; }

/* Whether the CPU has the bf16 pair kernels' instructions (AVX-512 BF16), paying or not. */
static int tu_dot2_cpu(void) {
    return attn_isa_supported(ATTN_ISA_AVX512) && (attn__cpu_flags() & ATTN__CPU_AVX512BF16);
}
/* Sets (on) or clears the flag the pair kernels follow, ATTN__CPU_BF16_DOT_FAST, where the CPU
   has AVX-512 BF16, and returns the flags before it: so the pair kernels run on a CPU whose dot
   products do not pay (Intel) and the f32 kernels on one whose do. The suite is one thread
   when it calls this; tu_cpu_flags_restore puts the detected flags back. */
static int tu_fast_dot(int on) {
    int old = attn__cpu_flags();
    if (old & ATTN__CPU_AVX512BF16)
        attn__cpu_flags_cache = on ? old | ATTN__CPU_BF16_DOT_FAST : old & ~ATTN__CPU_BF16_DOT_FAST;
    return old;
}
static void tu_cpu_flags_restore(int old) { attn__cpu_flags_cache = old; }

static attn_exec tu_exec(attn_isa isa, int threads) {
    attn_exec e;
    memset(&e, 0, sizeof e);
    e.isa = isa;
    e.num_threads = threads;
    return e;
}

/* A caller "pool" that runs items serially but in a scrambled order and with rotating thread
   indices, so tests can see that results never depend on who runs which item. */
typedef struct tu_pool { int calls; } tu_pool;
static void tu_pool_for(void *pool, int num_items, int num_threads, attn_task_fn *task, void *ctx) {
    tu_pool *p = (tu_pool *)pool;
    p->calls++;
    for (int k = 0; k < num_items; k++) {
        int item = (int)(((int64_t)k * 7919 + 13) % num_items);  /* 7919 is prime: a permutation
                                                                    when it does not divide n */
        if (num_items % 7919 == 0) item = num_items - 1 - k;
        task(ctx, item, k % num_threads);
    }
}

/* Random activations: fills `f` with values in [lo, hi) rounded to dtype and writes the dtype
   encoding to `raw` (the float copy is what the reference sees). */
static void tu_fill(uint64_t *rng, attn_dtype dt, void *raw, float *f, size_t n, float lo,
                    float hi) {
    for (size_t i = 0; i < n; i++) {
        float x = attn_test_rand_uniform(rng, lo, hi);
        switch (dt) {
            case ATTN_F16: ((uint16_t *)raw)[i] = attn_f32_to_f16(x);
            x = attn_f16_to_f32(((uint16_t *)raw)[i]); break;
            case ATTN_BF16: ((uint16_t *)raw)[i] = attn_f32_to_bf16(x);
            x = attn_bf16_to_f32(((uint16_t *)raw)[i]); break;
            default: ((float *)raw)[i] = x; break;
        }
        f[i] = x;
    }
}


/* Tolerances for comparing an output in dtype dt with the double reference. */
static double tu_atol(attn_dtype out_dt) {
    return out_dt == ATTN_F32 ? 2e-5 : out_dt == ATTN_F16 ? 2e-3 : 1.6e-2;
}

static void *tu_alloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) { fprintf(stderr, "out of memory\n"); exit(2); }
    return p;
}
#endif
