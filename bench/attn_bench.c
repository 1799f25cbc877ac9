/* attn_bench - llama-bench style throughput benchmark of attn.h against this machine's limits.

   attn_bench [peak|prefill|decode|paged-prefill|forward|all ...] [options] (attn_bench -h: the
   list)

   In one run and on the same threads it measures the machine's limits (fp32 FMA peak, memory
   read bandwidth) and then the kernels: prefill = attn_sdpa, decode = attn_paged_decode over a
   shuffled paged cache, paged-prefill = attn_paged_prefill (a chunk over a cached prefix, next to
   attn_sdpa on the same work), forward = attn_forward on a mixed batch (prefill chunks, then
   decodes, in one call). Each row: median and stddev over -r timed runs after one warm-up,
   useful GFLOP/s (prefill) or KV GB/s (decode), and the % of the relevant limit. Each timed run
   follows a short sample of both limits, and the % is taken against the medians of those
   samples (the limits measured alongside the kernel), not the best-of figures of the header.
   Output: markdown table (default), CSV (-o csv, '#' comment lines first) or JSON (-o json).
   Build: make bench  (cc -std=c99 -O3 -fopenmp -I. bench/attn_bench.c -lm). See bench/README.md. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE  /* madvise */
#define ATTN_IMPLEMENTATION
#include "attn.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define BENCH_X86 1
#include <immintrin.h>
#else
#define BENCH_X86 0
#endif

#ifdef __clang__
#define COMPILER __VERSION__
#elif defined(__GNUC__)
#define COMPILER "gcc " __VERSION__
#else
#define COMPILER "unknown compiler"
#endif

#define MAXL 16       /* entries of a comma list */
#define MAXREPS 100

/* ---------------------------------------------------------------------------------------------
   Options */
typedef struct { int n; int v[MAXL]; } ilist;

enum { FMT_MD, FMT_CSV, FMT_JSON };
enum { M_PEAK = 1, M_PREFILL = 2, M_DECODE = 4, M_PPREFILL = 8, M_ALL = 16, M_FORWARD = 32 };

static struct {
    unsigned modes;
    ilist threads, S, D, seqs, ctx, bs, chunk, prefix, decodes, dtype, kv_dtype, version, gqa;
    int H, Hk, reps, causal, fmt, progress;
    attn_isa isa;
    attn_gemm gemm;
    double bw_mib, given_gflops, given_gbs;
    int cap_slow;     /* `all`: a case whose warm-up took > 2 s runs at most 3 reps */
    int huge_pages, huge_warned;
    int f32_probs;    /* exec.f32_probs: bf16 inputs keep f32 probabilities (the f32 kernels) */
    int hot;          /* decode: a decode-hot row after each decode row (decode_hot_tables) */
    int shared_prefix; /* decode: a decode-shared row after each decode row (its tokens) */
} g;

static ilist one(int v) { ilist l; l.n = 1; l.v[0] = v; return l; }
static ilist two(int a, int b) { ilist l; l.n = 2; l.v[0] = a; l.v[1] = b; return l; }

/* ---------------------------------------------------------------------------------------------
   Time and statistics */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
typedef struct { double median, stddev, best; } stats;
static stats stats_of(const double *t, int n) {
    double s[MAXREPS], mean = 0, var = 0;
    stats r;
    memcpy(s, t, sizeof(double) * (size_t)n);
    qsort(s, (size_t)n, sizeof(double), cmp_double);
    for (int i = 0; i < n; i++) mean += s[i] / n;
    for (int i = 0; i < n; i++) var += (s[i] - mean) * (s[i] - mean);
    r.median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    r.stddev = n > 1 ? sqrt(var / (n - 1)) : 0.0;
    r.best = s[0];
    return r;
}

static int thread_id(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

static void progress(const char *fmt, const char *what) {
    static double t0 = 0;
    if (!g.progress) return;
    if (t0 == 0) t0 = now_s();
    fprintf(stderr, "[%7.1fs] ", now_s() - t0);
    fprintf(stderr, fmt, what);
    fputc('\n', stderr);
}

/* --huge-pages: buffers of 4 MiB and more are 2 MiB aligned and advised as huge pages (Linux
   transparent huge pages, in madvise mode), as an engine may do for its KV cache. */
#define HUGE_MIN ((size_t)4 << 20)
#define HUGE_PAGE ((size_t)2 << 20)
static void *xalloc(size_t bytes) {
    void *p = NULL;
    int huge = g.huge_pages && bytes >= HUGE_MIN;
    if (bytes == 0) bytes = 64;
    if (posix_memalign(&p, huge ? HUGE_PAGE : 64, bytes) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    if (huge && madvise(p, bytes, MADV_HUGEPAGE) != 0 && !g.huge_warned++)
        fprintf(stderr, "attn_bench: madvise(MADV_HUGEPAGE) failed: running on normal pages\n");
#endif
    return p;
}

/* ---------------------------------------------------------------------------------------------
   Machine limits: fp32 FMA peak (independent FMA chains in registers) and read bandwidth. */
#define ACC12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
/* a <- a*m + c converges to c/(1-m): no overflow, no denormals. Read through volatiles: with
   them as constants clang 14 computed the whole FMA loop at compile time (peak "68 billion
   GFLOP/s"). */
static volatile float g_fma_m = 0.9999999f, g_fma_c = 1e-7f;

#if BENCH_X86
__attribute__((target("avx2,fma"))) static float fma_avx2(long iters) {
    const __m256 m = _mm256_set1_ps(g_fma_m), c = _mm256_set1_ps(g_fma_c);
    __m256 s = _mm256_setzero_ps();
#define D8(i) __m256 a##i = _mm256_set1_ps(1.0f + 0.01f * (i));
#define F8(i) a##i = _mm256_fmadd_ps(a##i, m, c);
#define S8(i) s = _mm256_add_ps(s, a##i);
    ACC12(D8)
    for (long k = 0; k < iters; k++) { ACC12(F8) }
    ACC12(S8)
    float o[8];
    _mm256_storeu_ps(o, s);
    return o[0] + o[7];
}
__attribute__((target("avx512f"))) static float fma_avx512(long iters) {
    const __m512 m = _mm512_set1_ps(g_fma_m), c = _mm512_set1_ps(g_fma_c);
    __m512 s = _mm512_setzero_ps();
#define D16(i) __m512 a##i = _mm512_set1_ps(1.0f + 0.01f * (i));
#define F16(i) a##i = _mm512_fmadd_ps(a##i, m, c);
#define S16(i) s = _mm512_add_ps(s, a##i);
    ACC12(D16)
    for (long k = 0; k < iters; k++) { ACC12(F16) }
    ACC12(S16)
    float o[16];
    _mm512_storeu_ps(o, s);
    return o[0] + o[15];
}
/* Sums n uint32 words (n % 64 == 0) with 4 independent 256-bit accumulators. */
__attribute__((target("avx2"))) static uint32_t read_avx2(const uint32_t *p, size_t n) {
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    const __m256i *v = (const __m256i *)p;
    for (size_t i = 0; i < n / 8; i += 8) {
        s0 = _mm256_add_epi32(s0,
                _mm256_add_epi32(_mm256_load_si256(v + i), _mm256_load_si256(v + i + 1)));
        s1 = _mm256_add_epi32(s1,
                _mm256_add_epi32(_mm256_load_si256(v + i + 2), _mm256_load_si256(v + i + 3)));
        s2 = _mm256_add_epi32(s2,
                _mm256_add_epi32(_mm256_load_si256(v + i + 4), _mm256_load_si256(v + i + 5)));
        s3 = _mm256_add_epi32(s3,
                _mm256_add_epi32(_mm256_load_si256(v + i + 6), _mm256_load_si256(v + i + 7)));
    }
    uint32_t o[8];
    _mm256_storeu_si256((__m256i *)o,
                        _mm256_add_epi32(_mm256_add_epi32(s0, s1), _mm256_add_epi32(s2, s3)));
    return o[0] ^ o[7];
}
/* The same with 512-bit loads, 4 cache lines per step into 4 accumulators (n % 64 == 0): the
   widest loads the machine has, so the measured bandwidth is not held back by the load ports. */
__attribute__((target("avx512f"))) static uint32_t read_avx512(const uint32_t *p, size_t n) {
    __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
    const __m512i *v = (const __m512i *)p;
    for (size_t i = 0; i < n / 16; i += 4) {
        s0 = _mm512_add_epi32(s0, _mm512_load_si512(v + i));
        s1 = _mm512_add_epi32(s1, _mm512_load_si512(v + i + 1));
        s2 = _mm512_add_epi32(s2, _mm512_load_si512(v + i + 2));
        s3 = _mm512_add_epi32(s3, _mm512_load_si512(v + i + 3));
    }
    uint32_t o[16];
    _mm512_storeu_si512(o, _mm512_add_epi32(_mm512_add_epi32(s0, s1), _mm512_add_epi32(s2, s3)));
    return o[0] ^ o[15];
}
#endif

/* AMX bf16 peak: tdpbf16ps into 4 independent accumulator tiles from 2 x 2 operand tiles that
   stay in registers (16 x 16 x 32 multiply-adds each). The tiles' OS permission is what the
   library asked for when it detected the CPU (attn_cpu_features says amx=yes). */
#if BENCH_X86 && defined(__x86_64__) &&                                                            \
    ((defined(__clang__) && __clang_major__ >= 12) ||                                             \
     (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 11))
#define BENCH_AMX 1
__attribute__((target("amx-tile,amx-bf16"))) static float amx_run(long iters) {
    static const uint16_t ops[16 * 32] __attribute__((aligned(64)));
    float out[16 * 16];
    unsigned char cfg[64];
    memset(cfg, 0, sizeof cfg);
    cfg[0] = 1;
    for (int t = 0; t < 8; t++) { cfg[16 + 2 * t] = 64; cfg[48 + t] = 16; }
    __asm__ volatile("" ::: "memory");  /* GCC's tile asm names no memory: keep cfg's stores */
    _tile_loadconfig(cfg);
    _tile_loadd(4, ops, 64); _tile_loadd(5, ops, 64); _tile_loadd(6, ops, 64);
    _tile_loadd(7, ops, 64);
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    for (long k = 0; k < iters; k++) {
        _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, out, 64);
    __asm__ volatile("" ::: "memory");
    _tile_release();
    return out[0];
}
#endif
static int amx_usable(void) {
#ifdef BENCH_AMX
    return strstr(attn_cpu_features(), "amx=yes") != NULL;
#else
    return 0;
#endif
}

/* Portable fallbacks: 48 independent chains (the compiler vectorizes them); integer sums. */
static float fma_generic(long iters) {
    float a[48], s = 0, m = g_fma_m, c = g_fma_c;
    for (int j = 0; j < 48; j++) a[j] = 1.0f + 0.01f * j;
    for (long k = 0; k < iters; k++)
        for (int j = 0; j < 48; j++)
#if defined(__aarch64__) || defined(FP_FAST_FMAF)
            a[j] = fmaf(a[j], m, c);
#else
            a[j] = a[j] * m + c;
#endif
    for (int j = 0; j < 48; j++) s += a[j];
    return s;
}
static uint32_t read_generic(const uint32_t *p, size_t n) {
    uint32_t s[16] = {0};
    for (size_t i = 0; i < n; i += 16)
        for (int j = 0; j < 16; j++) s[j] += p[i + j];
    for (int j = 1; j < 16; j++) s[0] ^= s[j];
    return s[0];
}

typedef enum { PEAK_GENERIC, PEAK_AVX2, PEAK_AVX512 } peak_kind;
/* The widest vectors: AVX-512 also where the best ISA is AVX-512 with tiles. */
static int best_is_avx512(void) {
    attn_isa b = attn_best_isa();
    return b == ATTN_ISA_AVX512 || b == ATTN_ISA_AMX;
}
static peak_kind peak_choice(void) {
#if BENCH_X86
    if (best_is_avx512()) return PEAK_AVX512;
    if (attn_best_isa() == ATTN_ISA_AVX2) return PEAK_AVX2;
#endif
    return PEAK_GENERIC;
}
/* GFLOP/s of T threads that each ran `iters` iterations of fma_run(k) in t seconds. */
static double fma_gflops(peak_kind k, int T, long iters, double t) {
    static const double flops_per_iter[3] = {48 * 2, 12 * 8 * 2, 12 * 16 * 2};
    return (double)T * (double)iters * flops_per_iter[k] / t * 1e-9;
}
static float fma_run(peak_kind k, long iters) {
#if BENCH_X86
    if (k == PEAK_AVX512) return fma_avx512(iters);
    if (k == PEAK_AVX2) return fma_avx2(iters);
#endif
    (void)k;
    return fma_generic(iters);
}
static uint32_t read_run(const uint32_t *p, size_t n) {
#if BENCH_X86
    if (best_is_avx512()) return read_avx512(p, n);
    if (attn_best_isa() == ATTN_ISA_AVX2) return read_avx2(p, n);
#endif
    return read_generic(p, n);
}

typedef struct {
    int threads;
    double gflops, gbs;                 /* the limits: best run of each */
    double amx_gflops;                  /* AMX bf16 peak (best run), 0 without usable tiles */
    stats fma_t, bw_t;                  /* seconds per run */
    int fma_reps, bw_reps, given;
    const char *fma_isa, *bw_isa;
    double bw_bytes;
    peak_kind pk;                       /* kept for the samples taken alongside the kernels: */
    long sample_iters;                  /* FMA iterations of a ~20 ms run */
    uint32_t *buf; size_t per;          /* the bandwidth buffer, per thread words */
} limits;
static limits g_lim[MAXL];
static volatile double g_sink;

static size_t default_bw_bytes(void) {
    size_t l3 = 0, bytes = (size_t)1 << 30;
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
    if (f) {
        unsigned long kb = 0;
        if (fscanf(f, "%luK", &kb) == 1) l3 = (size_t)kb << 10;
        fclose(f);
    }
    if (l3 * 8 > bytes) bytes = l3 * 8;
#ifdef _SC_PHYS_PAGES
    {
        long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
        if (pages > 0 && psz > 0 &&
            bytes > (size_t)pages * (size_t)psz / 4) bytes = (size_t)pages * (size_t)psz / 4;
    }
#endif
    return bytes;
}

static void measure_limits(limits *L, int T) {
    memset(L, 0, sizeof *L);
    L->threads = T;
    peak_kind pk = peak_choice();
    static const char *pk_name[3] = {"generic", "avx2", "avx512"};
    L->fma_isa = pk_name[pk];
#if BENCH_X86
    L->bw_isa = pk_name[pk];
#else
    L->bw_isa = "generic";
#endif
    if (g.given_gflops > 0 && g.given_gbs > 0) {
        L->gflops = g.given_gflops; L->gbs = g.given_gbs; L->given = 1;
        return;
    }
    /* FMA: calibrate one thread to ~0.2 s per run, then best of 5 runs on T threads. */
    long iters = 1L << 16;
    double t0 = now_s();
    g_sink += fma_run(pk, iters);
    double t1 = now_s() - t0;
    if (t1 > 0) iters = (long)((double)iters * 0.2 / t1);
    if (iters < (1L << 16)) iters = 1L << 16;
    double t[MAXREPS];
    L->fma_reps = 5;
    for (int r = 0; r < L->fma_reps; r++) {
        double sink = 0;
        t0 = now_s();
#ifdef _OPENMP
#pragma omp parallel num_threads(T) reduction(+ : sink)
#endif
        sink += fma_run(pk, iters);
        t[r] = now_s() - t0;
        g_sink += sink;
    }
    L->fma_t = stats_of(t, L->fma_reps);
    L->gflops = fma_gflops(pk, T, iters, L->fma_t.best);
#ifdef BENCH_AMX
    if (amx_usable()) {  /* best of 3 runs of ~0.1 s on T threads */
        long tiles_iters = 1L << 20;
        double best = 0;
        for (int r = 0; r < 3; r++) {
            double sink = 0;
            t0 = now_s();
#ifdef _OPENMP
#pragma omp parallel num_threads(T) reduction(+ : sink)
#endif
            sink += amx_run(tiles_iters);
            double secs = now_s() - t0;
            g_sink += sink;
            if (r == 0 || secs < best) best = secs;
        }
        L->amx_gflops = (double)T * (double)tiles_iters * 4 * 16 * 16 * 32 * 2 / best * 1e-9;
    }
#endif
    L->pk = pk;
    L->sample_iters = iters / 10 > 0 ? iters / 10 : 1;

    /* Read bandwidth: each thread first-touches, then sums, its own contiguous slice. */
    size_t bytes = g.bw_mib > 0 ? (size_t)(g.bw_mib * 1048576.0) : default_bw_bytes();
    size_t per = bytes / 4 / (size_t)T / 64 * 64, n = per * (size_t)T;
    uint32_t *buf = (uint32_t *)xalloc(n * 4);
    if (!buf || per == 0) { L->gbs = 0; free(buf); return; }
    L->bw_bytes = (double)n * 4;
#ifdef _OPENMP
#pragma omp parallel num_threads(T)
#endif
    {
        uint32_t *p = buf + per * (size_t)thread_id();
        for (size_t i = 0; i < per; i++) p[i] = (uint32_t)i;
    }
    L->bw_reps = 7;
    for (int r = -1; r < L->bw_reps; r++) {   /* r = -1: warm-up pass */
        double sink = 0;
        t0 = now_s();
#ifdef _OPENMP
#pragma omp parallel num_threads(T) reduction(+ : sink)
#endif
        sink += read_run(buf + per * (size_t)thread_id(), per);
        if (r >= 0) t[r] = now_s() - t0;
        g_sink += sink;
    }
    L->buf = buf; L->per = per;   /* kept for sample_limits */
    L->bw_t = stats_of(t, L->bw_reps);
    L->gbs = L->bw_bytes / L->bw_t.best * 1e-9;
}

/* One short FMA run and one bandwidth pass on T threads, now: the limits as they are right
   before a timed kernel call. A shared machine's bandwidth drifts (30-50 GB/s seen on the same
   VM within minutes), so each kernel is compared with the limits measured alongside it. */
typedef struct { double gflops, gbs; } limits_now;
static limits_now sample_limits(const limits *L) {
    limits_now n = {L->gflops, L->gbs};
    if (L->given || !L->buf) return n;
    double sink = 0, t0 = now_s();
    int T = L->threads;
#ifdef _OPENMP
#pragma omp parallel num_threads(T) reduction(+ : sink)
#endif
    sink += fma_run(L->pk, L->sample_iters);
    n.gflops = fma_gflops(L->pk, T, L->sample_iters, now_s() - t0);
    t0 = now_s();
#ifdef _OPENMP
#pragma omp parallel num_threads(T) reduction(+ : sink)
#endif
    sink += read_run(L->buf + L->per * (size_t)thread_id(), L->per);
    n.gbs = L->bw_bytes / (now_s() - t0) * 1e-9;
    g_sink += sink;
    return n;
}

static const limits *limits_for(int T) {
    for (int i = 0; i < g.threads.n; i++)
        if (g_lim[i].threads == T) return &g_lim[i];
    return &g_lim[0];
}

/* ---------------------------------------------------------------------------------------------
   Result rows and the three output formats */
typedef struct {
    const char *mode;
    const char *isa, *gemm, *dtype, *kv_dtype;   /* kv_dtype "" when there is no cache */
    char version[16];
    int threads, causal, H, Hk, D, bs, seqs, q_len, kv_len, reps;   /* 0 = not applicable */
    int decodes, ctx;                            /* forward: decode sequences after the prefills */
    double ms, sd_ms, value, pct;
    const char *unit, *limit;            /* limit: "fma", "roof:bw", "roof:fma", "roof" (forward) */
    char note[48];
    const char *status;                          /* NULL = ok */
    double peak_gflops, bw_gbs;
} row;

static int g_rows;

static const char *isa_used(void) {
    return attn_isa_name(g.isa == ATTN_ISA_AUTO ? attn_best_isa() : g.isa);
}
static const char *gemm_name(attn_gemm e) { return e == ATTN_GEMM_ONEDNN ? "onednn" : "native"; }

static row row_new(const char *mode, int T) {
    row r;
    const limits *L = limits_for(T);
    memset(&r, 0, sizeof r);
    r.mode = mode; r.threads = T; r.isa = isa_used(); r.gemm = gemm_name(g.gemm);
    r.dtype = ""; r.kv_dtype = ""; r.unit = ""; r.limit = "";
    r.peak_gflops = L->gflops; r.bw_gbs = L->gbs;
    return r;
}

static void json_str(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20) printf("\\u%04x", *s);
        else putchar(*s);
    }
    putchar('"');
}

static void cpu_model(char *out, size_t n) {
    char line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    snprintf(out, n, "unknown");
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        char *c = strchr(line, ':');
        if (c && (!strncmp(line, "model name", 10) || !strncmp(line, "Model", 5))) {
            c += 1 + (c[1] == ' ');
            c[strcspn(c, "\n")] = 0;
            snprintf(out, n, "%s", c);
            break;
        }
    }
    fclose(f);
}

static void print_header(void) {
    char cpu[256];
    cpu_model(cpu, sizeof cpu);
    if (g.fmt == FMT_JSON) {
        printf("{\n  \"build\": "); json_str(attn_build_info());
        printf(",\n  \"cpu_features\": "); json_str(attn_cpu_features());
        printf(",\n  \"cpu\": "); json_str(cpu);
        printf(",\n  \"compiler\": "); json_str(COMPILER);
        printf(",\n  \"limits\": [");
        for (int i = 0; i < g.threads.n; i++)
            printf("%s\n    {\"threads\": %d, \"fma_peak_gflops\": %.2f, \"fma_isa\": \"%s\", "
                   "\"read_bw_gbs\": %.2f, \"read_bytes\": %.0f, \"given\": %s}",
                   i ? "," : "", g_lim[i].threads, g_lim[i].gflops, g_lim[i].fma_isa, g_lim[i].gbs,
                   g_lim[i].bw_bytes, g_lim[i].given ? "true" : "false");
        printf("\n  ],\n  \"results\": [");
        return;
    }
    const char *c = g.fmt == FMT_CSV ? "# " : "";
    printf("%sattn_bench: %s\n", c, attn_build_info());
    printf("%scpu: %s | %s | compiler: %s\n", c, cpu, attn_cpu_features(), COMPILER);
    if (g.f32_probs) printf("%sexec.f32_probs = 1: bf16 inputs on the f32 kernels\n", c);
    for (int i = 0; i < g.threads.n; i++) {
        const limits *L = &g_lim[i];
        if (L->given)
            printf("%slimits on %d threads (given): fp32 FMA peak %.1f GFLOP/s, read bandwidth "
                   "%.1f GB/s\n",
                   c, L->threads, L->gflops, L->gbs);
        else
            printf("%slimits on %d threads: fp32 FMA peak %.1f GFLOP/s (%s), "
                   "read bandwidth %.1f GB/s (%.0f MiB%s)\n",
                   c, L->threads, L->gflops, L->fma_isa, L->gbs, L->bw_bytes / 1048576.0,
                   g.huge_pages ? ", huge pages" : "");
        if (L->amx_gflops > 0)
            printf("%slimits on %d threads: AMX bf16 peak %.0f GFLOP/s (tdpbf16ps, operands in "
                   "tiles)\n", c, L->threads, L->amx_gflops);
    }
    if (g.fmt == FMT_CSV) {
        printf("mode,isa,threads,gemm,dtype,kv_dtype,version,causal,H,Hk,D,block_size,seqs,q_len,"
               "kv_len,reps,median_ms,stddev_ms,value,unit,pct_of_limit,limit,fma_peak_gflops,"
               "read_bw_gbs,note,status\n");
    } else {
        printf("\n| %-17s | %-6s | %3s | %-6s | %-5s | %-8s | %-7s | %-38s | %4s | %10s | %8s | "
               "%15s | %-13s |\n",
               "mode", "isa", "t", "gemm", "dtype", "kv", "ver", "shape", "reps", "ms", "± ms",
               "throughput", "% of limit");
        printf("|-------------------|--------|----:|--------|-------|----------|---------|"
               "----------------------------------------|"
               "-----:|-----------:|---------:|----------------:|---------------|\n");
    }
}

static void shape_text(const row *r, char *s, size_t n) {
    char causal[8];
    snprintf(causal, sizeof causal, "%s", r->causal ? "causal" : "full");
    if (r->note[0] && !r->H) snprintf(s, n, "%s", r->note);
    else if (!strncmp(r->mode, "decode", 6) || !strcmp(r->mode, "kv-read"))
        snprintf(s, n, "H%d/%d D%d bs%d %dx%d", r->H, r->Hk, r->D, r->bs, r->seqs, r->kv_len);
    else if (!strcmp(r->mode, "forward"))
        snprintf(s, n, "H%d/%d D%d bs%d %dx(c%d p%d)+%dx%d", r->H, r->Hk, r->D, r->bs, r->seqs,
                 r->q_len,
                 r->kv_len - r->q_len, r->decodes, r->ctx);
    else if (!strcmp(r->mode, "paged-prefill"))
        snprintf(s, n, "H%d/%d D%d bs%d %dx(c%d p%d) %s", r->H, r->Hk, r->D, r->bs, r->seqs,
                 r->q_len,
                 r->kv_len - r->q_len, causal);
    else if (r->q_len == r->kv_len)
        snprintf(s, n, "H%d/%d D%d %dx%d %s", r->H, r->Hk, r->D, r->seqs, r->q_len, causal);
    else
        snprintf(s, n, "H%d/%d D%d %dx(q%d kv%d) %s", r->H, r->Hk, r->D, r->seqs, r->q_len,
                 r->kv_len, causal);
}

static void print_row(const row *r) {
    int ok = r->status == NULL;
    if (g.fmt == FMT_CSV) {
        printf("%s,%s,%d,%s,%s,%s,%s,%d,%d,%d,%d,%d,%d,%d,%d,%d,", r->mode, r->isa, r->threads,
               r->gemm,
               r->dtype, r->kv_dtype, r->version, r->causal, r->H, r->Hk, r->D, r->bs, r->seqs,
               r->q_len,
               r->kv_len, r->reps);
        if (ok) printf("%.4f,%.4f,%.3f,%s,%.2f,%s,", r->ms, r->sd_ms, r->value, r->unit, r->pct,
                       r->limit);
        else printf(",,,,,,");
        printf("%.2f,%.2f,\"%s\",\"%s\"\n", r->peak_gflops, r->bw_gbs, r->note, ok ? "ok"
               : r->status);
    } else if (g.fmt == FMT_JSON) {
        printf("%s\n    {\"mode\": \"%s\", \"isa\": \"%s\", \"threads\": %d, \"gemm\": \"%s\", "
               "\"dtype\": \"%s\", "
               "\"kv_dtype\": \"%s\", \"version\": \"%s\", \"causal\": %d, \"H\": %d, \"Hk\": %d, "
               "\"D\": %d, "
               "\"block_size\": %d, \"seqs\": %d, \"q_len\": %d, \"kv_len\": %d, \"reps\": %d, ",
               g_rows ? "," : "", r->mode, r->isa, r->threads, r->gemm, r->dtype, r->kv_dtype,
               r->version,
               r->causal, r->H, r->Hk, r->D, r->bs, r->seqs, r->q_len, r->kv_len, r->reps);
        if (ok)
            printf("\"median_ms\": %.4f, \"stddev_ms\": %.4f, \"value\": %.3f, \"unit\": \"%s\", "
                   "\"pct_of_limit\": %.2f, \"limit\": \"%s\", ", r->ms, r->sd_ms, r->value,
                   r->unit, r->pct, r->limit);
        printf("\"note\": ");
        json_str(r->note);
        printf(", \"status\": ");
        json_str(ok ? "ok" : r->status);
        printf("}");
    } else {
        char shape[96], ms[24], sd[24], val[48], pct[96];
        shape_text(r, shape, sizeof shape);
        if (ok) {
            snprintf(ms, sizeof ms, r->ms < 10 ? "%.3f" : "%.2f", r->ms);
            snprintf(sd, sizeof sd, r->sd_ms < 10 ? "%.3f" : "%.2f", r->sd_ms);
            snprintf(val, sizeof val, "%.1f %s", r->value, r->unit);
            if (r->limit[0] && !strcmp(r->limit, "amx") && r->note[0])
                snprintf(pct, sizeof pct, "%.1f%% amx, %s", r->pct, r->note);
            else if (r->limit[0]) snprintf(pct, sizeof pct, "%.1f%% %s", r->pct, r->limit);
            else snprintf(pct, sizeof pct, "-");
        } else {
            snprintf(ms, sizeof ms, "-"); snprintf(sd, sizeof sd, "-");
            snprintf(val, sizeof val, "ERROR"); snprintf(pct, sizeof pct, "%s", r->status);
        }
        printf("| %-17s | %-6s | %3d | %-6s | %-5s | %-8s | %-7s | %-38s | %4d | %10s | %8s | %15s "
               "| %-13s |\n",
               r->mode, r->isa, r->threads, r->gemm, r->dtype[0] ? r->dtype : "-",
               r->kv_dtype[0] ? r->kv_dtype : "-", r->version[0] ? r->version : "-", shape, r->reps,
               ms, sd,
               val, pct);
    }
    g_rows++;
    fflush(stdout);
}

static void print_footer(void) {
    if (g.fmt == FMT_JSON) printf("\n  ]\n}\n");
}

static void error_row(row *r, const char *status) {
    r->status = status;
    print_row(r);
}

static void peak_rows(void) {
    for (int i = 0; i < g.threads.n; i++) {
        const limits *L = &g_lim[i];
        row r = row_new("peak-fma", L->threads);
        r.isa = L->fma_isa; r.reps = L->fma_reps;
        r.ms = L->fma_t.median * 1e3; r.sd_ms = L->fma_t.stddev * 1e3;
        r.value = L->gflops; r.unit = "GFLOP/s";
        snprintf(r.note, sizeof r.note, "%s", L->given ? "given" : "fp32 FMA best run");
        print_row(&r);
        r = row_new("peak-bw", L->threads);
        r.isa = L->bw_isa; r.reps = L->bw_reps;
        r.ms = L->bw_t.median * 1e3; r.sd_ms = L->bw_t.stddev * 1e3;
        r.value = L->gbs; r.unit = "GB/s";
        if (L->given) snprintf(r.note, sizeof r.note, "given");
        else snprintf(r.note, sizeof r.note, "read %.0f MiB best pass", L->bw_bytes / 1048576.0);
        print_row(&r);
    }
}

/* ---------------------------------------------------------------------------------------------
   Data: deterministic pseudo-random values in [-1, 1), converted to any dtype. */
static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* n elements in rows of `row` (<= 4096; the integer dtypes' rows hold codes and scales,
   attn_dtype_row_bytes, and are converted one at a time); scale: fp8 storage scale (stored =
   x / scale), 1 for other dtypes. */
static void fill_rows(void *dst, attn_dtype dt, size_t n, int row, uint64_t seed, float scale) {
    const int whole = attn_dtype_size(dt) != 0;  /* element dtypes: a chunk is one conversion */
    const long chunk = 4096 / row * row, nchunks = (long)((n + (size_t)chunk - 1) / (size_t)chunk);
    const size_t step = whole ? (size_t)chunk : (size_t)row;
    const size_t step_bytes = whole ? (size_t)chunk * attn_dtype_size(dt)
                                    : attn_dtype_row_bytes(dt, row);
    long c;
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (c = 0; c < nchunks; c++) {
        float tmp[4096];
        uint64_t s = seed * 0x2545F4914F6CDD1Dull + (uint64_t)c;
        size_t begin = (size_t)c * (size_t)chunk,
               len = n - begin < (size_t)chunk ? n - begin : (size_t)chunk;
        for (size_t i = 0; i < len; i++) tmp[i] =
                (float)(splitmix(&s) >> 40) * (2.0f / 16777216.0f) - 1.0f;
        for (size_t at = 0; at < len; at += step)
            attn_convert((char *)dst + (begin + at) / step * step_bytes, dt, tmp + at, ATTN_F32,
                         len - at < step ? len - at : step, scale);
    }
}
static void fill_random(void *dst, attn_dtype dt, size_t n, uint64_t seed, float scale) {
    fill_rows(dst, dt, n, 4096, seed, scale);
}

static int is_fp8(attn_dtype d) { return d == ATTN_FP8_E4M3 || d == ATTN_FP8_E5M2; }

/* Fisher-Yates permutation of [0, n): block ids in a random order, so that no sequence's
   blocks are contiguous. */
static void shuffled_ids(int32_t *ids, int n, uint64_t seed) {
    for (int i = 0; i < n; i++) ids[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(splitmix(&seed) % (uint64_t)(i + 1));
        int32_t t = ids[i]; ids[i] = ids[j]; ids[j] = t;
    }
}

static attn_exec make_exec(int T) {
    attn_exec e;
    memset(&e, 0, sizeof e);
    e.num_threads = T; e.isa = g.isa; e.gemm = g.gemm; e.f32_probs = g.f32_probs;
    return e;
}

/* ---------------------------------------------------------------------------------------------
   Timing: one warm-up call, then reps timed calls. Returns the first status other than ATTN_OK. */
typedef attn_status (*bench_fn)(void *ctx);

/* Each timed call follows a sample of the limits (sample_limits); *near gets their medians,
   which the row's percentage is taken against. */
static attn_status time_calls(bench_fn fn, void *ctx, int T, int *reps, stats *st,
                              limits_now *near) {
    double t[MAXREPS], gf[MAXREPS], bw[MAXREPS], t0 = now_s();
    const limits *L = limits_for(T);
    attn_status s = fn(ctx);
    double warm = now_s() - t0;
    if (s != ATTN_OK) return s;
    if (g.cap_slow && warm > 2.0 && *reps > 3) *reps = 3;
    for (int r = 0; r < *reps; r++) {
        limits_now n = sample_limits(L);
        gf[r] = n.gflops; bw[r] = n.gbs;
        t0 = now_s();
        s = fn(ctx);
        t[r] = now_s() - t0;
        if (s != ATTN_OK) return s;
    }
    *st = stats_of(t, *reps);
    near->gflops = stats_of(gf, *reps).median;
    near->gbs = stats_of(bw, *reps).median;
    return ATTN_OK;
}

/* Times fn with a fresh workspace of ws_bytes (stored through *ws for the call) and fills the
   row's time and the limits measured alongside. 0 (the row printed as an error) on failure. */
static int timed_row(row *r, bench_fn fn, void *ctx, void **ws, size_t ws_bytes, stats *st) {
    int reps = r->reps;
    limits_now near;
    *ws = xalloc(ws_bytes);
    attn_status s = *ws ? time_calls(fn, ctx, r->threads, &reps, st, &near)
                    : ATTN_ERR_WORKSPACE_TOO_SMALL;
    free(*ws);
    *ws = NULL;
    r->reps = reps;
    if (s != ATTN_OK) { error_row(r, attn_status_str(s)); return 0; }
    r->peak_gflops = near.gflops; r->bw_gbs = near.gbs;
    r->ms = st->median * 1e3; r->sd_ms = st->stddev * 1e3;
    return 1;
}

/* Seconds that amount (bytes or FLOPs) takes at rate (GB/s or GFLOP/s); 0 when the rate is unknown.
   */
static double limit_secs(double amount, double rate) {
    return rate > 0 ? amount / (rate * 1e9) : 0;
}

/* A prefill row: useful GFLOP/s against the FMA peak measured alongside; bf16 rows on tiles
   against the AMX peak (the FMA share in the note). */
static void print_gflops_row(row *r, double flops, const stats *st) {
    double amx = limits_for(r->threads)->amx_gflops;
    r->value = flops / st->median * 1e-9; r->unit = "GFLOP/s";
    r->pct = r->peak_gflops > 0 ? 100.0 * r->value / r->peak_gflops : 0; r->limit = "fma";
    if (amx > 0 && strcmp(r->isa, "amx") == 0 && strcmp(r->dtype, "bf16") == 0) {
        if (!r->note[0]) snprintf(r->note, sizeof r->note, "%.0f%% fma", r->pct);
        r->pct = 100.0 * r->value / amx; r->limit = "amx";
    }
    print_row(r);
}

/* ---------------------------------------------------------------------------------------------
   prefill: attn_sdpa over seqs sequences of q_len queries and kv_len keys each. */
typedef struct {
    attn_params p; attn_exec e; attn_rows q, k, v, o;
    int32_t *cu_q, *cu_k; int seqs, causal; void *ws; size_t ws_bytes;
} sdpa_ctx;
static attn_status sdpa_call(void *c) {
    sdpa_ctx *x = (sdpa_ctx *)c;
    return attn_sdpa(&x->p, &x->e, x->q, x->k, x->v, x->o, x->cu_q, x->cu_k, x->seqs, x->causal,
                     NULL,
                     x->ws, x->ws_bytes);
}

/* Visible (query, key) pairs of one sequence, bottom-right causal. */
static double visible_pairs(int q_len, int kv_len, int causal) {
    if (!causal) return (double)q_len * kv_len;
    double ctx = (double)kv_len - q_len;   /* query m sees ctx + m + 1 keys */
    return (double)q_len * ctx + (double)q_len * (q_len + 1) / 2.0;
}

static void bench_prefill(int H, int Hk, int D, int seqs, int q_len, int kv_len, int causal,
                          const ilist *dtypes, int reps0) {
    for (int di = 0; di < dtypes->n; di++) {
        attn_dtype dt = (attn_dtype)dtypes->v[di];
        size_t esz = attn_dtype_size(dt), nq = (size_t)seqs * q_len * H * D,
               nk = (size_t)seqs * kv_len * Hk * D;
        sdpa_ctx x;
        memset(&x, 0, sizeof x);
        x.p.num_heads = H; x.p.num_kv_heads = Hk; x.p.head_size = D;
        x.seqs = seqs; x.causal = causal;
        void *q = xalloc(nq * esz), *k = xalloc(nk * esz), *v = xalloc(nk * esz),
              *o = xalloc(nq * esz);
        x.cu_q = (int32_t *)malloc(sizeof(int32_t) * (size_t)(seqs + 1));
        x.cu_k = (int32_t *)malloc(sizeof(int32_t) * (size_t)(seqs + 1));
        char what[96];
        snprintf(what, sizeof what, "prefill %s H%d/%d D%d %dx(q%d kv%d)", attn_dtype_name(dt), H,
                 Hk, D, seqs,
                 q_len, kv_len);
        progress("%s", what);
        if (q && k && v && o && x.cu_q && x.cu_k) {
            for (int s = 0; s <= seqs; s++) { x.cu_q[s] = s * q_len; x.cu_k[s] = s * kv_len; }
            fill_random(q, dt, nq, 1, 1.0f); fill_random(k, dt, nk, 2, 1.0f);
            fill_random(v, dt, nk, 3, 1.0f);
            x.q.data = q; x.k.data = k; x.v.data = v; x.o.data = o;
            x.q.dtype = x.k.dtype = x.v.dtype = x.o.dtype = dt;
        }
        for (int ti = 0; ti < g.threads.n; ti++) {
            int T = g.threads.v[ti], reps = reps0;
            row r = row_new("prefill", T);
            r.dtype = attn_dtype_name(dt); r.causal = causal; r.H = H; r.Hk = Hk; r.D = D;
            r.seqs = seqs; r.q_len = q_len; r.kv_len = kv_len; r.reps = reps;
            if (!(q && k && v && o && x.cu_q && x.cu_k)) {
                error_row(&r, "out of memory"); continue;
            }
            x.e = make_exec(T);
            x.ws_bytes = attn_sdpa_workspace_size(&x.p, &x.e, x.cu_q, x.cu_k, seqs);
            stats st;
            if (!timed_row(&r, sdpa_call, &x, &x.ws, x.ws_bytes, &st)) continue;
            print_gflops_row(&r, 4.0 * D * H * seqs * visible_pairs(q_len, kv_len, causal), &st);
        }
        free(q); free(k); free(v); free(o); free(x.cu_q); free(x.cu_k);
    }
}

/* ---------------------------------------------------------------------------------------------
   A paged cache of seqs sequences of len tokens each, random contents, shuffled block tables. */
typedef struct {
    attn_kv_cache cache; void *mem; int32_t *tables, *lens; int per_seq;
} paged;

static int paged_make(paged *P, int Hk, int D, int bs, int seqs, int len, attn_dtype kv) {
    memset(P, 0, sizeof *P);
    P->per_seq = (len + bs - 1) / bs;
    int64_t nb64 = (int64_t)P->per_seq * seqs;
    if (nb64 < 1 || nb64 > 0x7fffffff) return 0;
    int nb = (int)nb64;
    size_t bytes = attn_kv_cache_bytes(nb, bs, Hk, D, kv);
    float scale = is_fp8(kv) ? 1.0f / 64 : 1.0f;
    P->mem = bytes ? xalloc(bytes) : NULL;
    P->tables = (int32_t *)malloc(sizeof(int32_t) * (size_t)nb);
    P->lens = (int32_t *)malloc(sizeof(int32_t) * (size_t)seqs);
    if (!P->mem || !P->tables || !P->lens) return 0;
    if (attn_kv_cache_init(&P->cache, nb, bs, Hk, D, kv, scale, scale, P->mem,
                           bytes) != ATTN_OK) return 0;
    size_t elems = (size_t)nb * bs * Hk * D;
    fill_rows(P->cache.key, kv, elems, D, 4, scale);
    fill_rows(P->cache.value, kv, elems, D, 5, scale);
    shuffled_ids(P->tables, nb, 6);
    for (int s = 0; s < seqs; s++) P->lens[s] = len;
    return 1;
}
static void paged_free(paged *P) { free(P->mem); free(P->tables); free(P->lens); }

/* ---------------------------------------------------------------------------------------------
   decode: attn_paged_decode, one query token per sequence over ctx cached tokens. */
typedef struct {
    attn_params p; attn_exec e; attn_rows q, o; paged *P; int seqs; attn_paged_version ver;
    void *ws; size_t ws_bytes;
} decode_ctx;
static attn_status decode_call(void *c) {
    decode_ctx *x = (decode_ctx *)c;
    return attn_paged_decode(&x->p, &x->e, x->q, x->o, &x->P->cache, x->P->tables, x->P->per_seq,
                             x->P->lens, x->seqs, x->ver, NULL, x->ws, x->ws_bytes);
}

/* kv-read: a plain read of the cache in decode's order - per sequence and 512-token partition,
   each block's keys (all KV heads of a block are one contiguous run), then its values. The
   blocks are scattered, and on some machines reading them at all is well below the bandwidth
   of one contiguous array; this is the most a decode kernel that did nothing else could reach. */
typedef struct { const paged *P; size_t run; int seqs, ctx, bs, T; } kvread_ctx;
static attn_status kvread_call(void *c) {
    const kvread_ctx *x = (const kvread_ctx *)c;
    double sink = 0;
    int parts = (x->ctx + 511) / 512;
#ifdef _OPENMP
#pragma omp parallel for num_threads(x->T) schedule(dynamic, 1) reduction(+ : sink)
#endif
    for (int u = 0; u < x->seqs * parts; u++) {  /* units of (sequence, partition), as v2 */
        const int32_t *tab = x->P->tables + (size_t)(u / parts) * x->P->per_seq;
        int p0 = u % parts * 512;
        for (int kind = 0; kind < 2; kind++) {
            const char *base = (const char *)(kind ? x->P->cache.value : x->P->cache.key);
            for (int b = p0 / x->bs; b * x->bs < x->ctx && b * x->bs < p0 + 512; b++)
                sink += read_run((const uint32_t *)(const void *)(base + (size_t)tab[b] * x->run),
                                 x->run / 4);
        }
    }
    g_sink += sink;
    return ATTN_OK;
}

/* One kv-read row per thread count, after the decode rows of a cache (whole 256-byte runs only:
   the read kernel's step). */
static void kvread_rows(const paged *P, int H, int Hk, int D, int bs, int seqs, int ctx,
                        attn_dtype kv,
                        int reps) {
    kvread_ctx x;
    x.P = P; x.run = (size_t)Hk * bs * attn_dtype_row_bytes(kv, D); x.seqs = seqs; x.ctx = ctx;
    x.bs = bs;
    if (x.run % 256) return;
    for (int ti = 0; ti < g.threads.n; ti++) {
        row r = row_new("kv-read", g.threads.v[ti]);
        void *ws = NULL;
        stats st;
        x.T = g.threads.v[ti];
        r.kv_dtype = attn_dtype_name(kv); r.H = H; r.Hk = Hk; r.D = D; r.bs = bs;
        r.seqs = seqs; r.kv_len = ctx; r.reps = reps;
        snprintf(r.version, sizeof r.version, "-");
        if (!timed_row(&r, kvread_call, &x, &ws, 1, &st)) continue;
        r.value = (double)seqs * ctx * x.run / bs * 2 / st.median * 1e-9; r.unit = "GB/s";
        r.pct = r.bw_gbs > 0 ? 100.0 * r.value / r.bw_gbs : 0; r.limit = "bw";
        snprintf(r.note, sizeof r.note, "plain read of decode's blocks");
        print_row(&r);
    }
}

/* decode-hot (--hot): block tables whose entries name only the first few blocks of P's first
   sequence, in their shuffled places, so that all sequences read the same 512 KiB of keys and
   values (at least one block) - from L2 or L3 rather than DRAM, the prefetches included. Its time
   is the arithmetic's own, beside the kv-read row's reads alone. NULL: out of memory. */
static int32_t *decode_hot_tables(const paged *P, int Hk, int D, int bs, int seqs, attn_dtype kv) {
    size_t run = (size_t)Hk * bs * attn_dtype_row_bytes(kv, D), n = (size_t)P->per_seq * seqs;
    size_t few = run ? (256u << 10) / run : 1;
    int32_t *t = (int32_t *)malloc(sizeof(int32_t) * (n ? n : 1));
    if (!t) return NULL;
    few = few < 1 ? 1 : few > (size_t)P->per_seq ? (size_t)P->per_seq : few;
    for (size_t i = 0; i < n; i++) t[i] = P->tables[i % (size_t)P->per_seq % few];
    return t;
}

/* decode-shared (--shared-prefix P): block tables whose every sequence names P's first
   sequence's blocks for its first P tokens (whole blocks), its own after them: sharing as
   parallel samples of one prompt have it. NULL: out of memory. */
static int32_t *decode_shared_tables(const paged *P, int bs, int seqs, int prefix) {
    size_t n = (size_t)P->per_seq * seqs;
    int32_t *t = (int32_t *)malloc(sizeof(int32_t) * (n ? n : 1));
    if (!t) return NULL;
    for (size_t i = 0; i < n; i++)
        t[i] = (int)(i % (size_t)P->per_seq) < prefix / bs ? P->tables[i % (size_t)P->per_seq]
               : P->tables[i];
    return t;
}

static void bench_decode(int H, int Hk, int D, int bs, int seqs, int ctx, attn_dtype kv,
                         const ilist *dtypes, const ilist *versions, int reps0) {
    paged P;
    char what[96];
    snprintf(what, sizeof what, "decode: filling a %s cache H%d/%d D%d bs%d %dx%d",
             attn_dtype_name(kv), H, Hk,
             D, bs, seqs, ctx);
    progress("%s", what);
    int ok = paged_make(&P, Hk, D, bs, seqs, ctx, kv);
    int32_t *hot_tables = ok && g.hot ? decode_hot_tables(&P, Hk, D, bs, seqs, kv) : NULL;
    paged hot_cache = P;  /* decode-hot: P's cache through hot_tables */
    hot_cache.tables = hot_tables;
    int prefix = g.shared_prefix / bs * bs;  /* whole blocks */
    int32_t *shared_tables = ok && prefix > 0 ? decode_shared_tables(&P, bs, seqs, prefix) : NULL;
    paged shared_cache = P;  /* decode-shared: P's cache through shared_tables */
    shared_cache.tables = shared_tables;
    for (int di = 0; di < dtypes->n; di++) {
        attn_dtype dt = (attn_dtype)dtypes->v[di];
        size_t nq = (size_t)seqs * H * D, esz = attn_dtype_size(dt);
        void *q = xalloc(nq * esz), *o = xalloc(nq * esz);
        if (q) fill_random(q, dt, nq, 7, 1.0f);
        for (int vi = 0; vi < versions->n; vi++) {
            for (int ti = 0; ti < g.threads.n; ti++) {
                int T = g.threads.v[ti], reps = reps0;
                decode_ctx x;
                memset(&x, 0, sizeof x);
                x.p.num_heads = H; x.p.num_kv_heads = Hk; x.p.head_size = D;
                x.ver = (attn_paged_version)versions->v[vi];
                row r = row_new("decode", T);
                r.dtype = attn_dtype_name(dt); r.kv_dtype = attn_dtype_name(kv);
                r.causal = 1; r.H = H; r.Hk = Hk; r.D = D; r.bs = bs; r.seqs = seqs; r.q_len = 1;
                r.kv_len = ctx; r.reps = reps;
                if (!ok || !q || !o) { error_row(&r, "out of memory"); continue; }
                attn_paged_version eff = attn_paged_decode_version(&x.p, P.lens, seqs, x.ver);
                snprintf(r.version, sizeof r.version, "%s%s", x.ver == ATTN_PAGED_AUTO ? "auto:"
                         : "",
                         eff == ATTN_PAGED_V1 ? "v1" : "v2");
                snprintf(what, sizeof what, "decode %s/%s %s t%d", attn_dtype_name(dt),
                         attn_dtype_name(kv),
                         r.version, T);
                progress("%s", what);
                x.e = make_exec(T); x.P = &P; x.seqs = seqs;
                x.q.data = q; x.q.dtype = dt; x.o.data = o; x.o.dtype = dt;
                x.ws_bytes =
                        attn_paged_decode_workspace_size(&x.p, &x.e, &P.cache, P.lens, seqs, x.ver);
                stats st;
                const row shape = r;
                /* the same call over the cache's tables, then over a few blocks (--hot), then
                   shared (--shared-prefix), then a few blocks read once for all (both) */
                static const char *const kinds[4] = {"decode", "decode-hot", "decode-shared",
                                                     "decode-shared-hot"};
                for (int kind = 0; kind < 4; kind++) {
                    int hot = kind == 1 || kind == 3, shared = kind == 2;
                    if ((hot && !hot_tables) || (kind >= 2 && !shared_tables)) continue;
                    r = shape; r.mode = kinds[kind];
                    x.P = kind == 0 ? &P : hot ? &hot_cache : &shared_cache;
                    /* decode-hot's sequences name the same blocks: not read once for all (a
                       stacked pass would time other arithmetic than the decode row's).
                       decode-shared-hot reads them once for all: every whole partition is a
                       stacked pass, and its time is the stacks' arithmetic */
                    x.e.no_shared_prefixes = kind == 1;
                    if (!timed_row(&r, decode_call, &x, &x.ws, x.ws_bytes, &st)) continue;
                    double tokens = (double)seqs * ctx;
                    /* the bytes needed: a shared prefix's blocks once */
                    double read = shared ? prefix + (double)seqs * (ctx - prefix) : tokens;
                    double bytes = read * Hk * 2 * (double)attn_dtype_row_bytes(kv, D),
                           flops = 4.0 * H * D * tokens;
                    double t_bw = limit_secs(bytes, r.bw_gbs),
                           t_fma = limit_secs(flops, r.peak_gflops);
                    r.value = bytes / st.median * 1e-9; r.unit = "GB/s";
                    r.pct = 100.0 * (t_bw > t_fma ? t_bw : t_fma) / st.median;
                    r.limit = t_bw >= t_fma ? "roof:bw" : "roof:fma";
                    if (shared)
                        snprintf(r.note, sizeof r.note, "%.1f GFLOP/s; first %d tokens shared",
                                 flops / st.median * 1e-9, prefix);
                    else if (hot)
                        snprintf(r.note, sizeof r.note, "%.1f GFLOP/s, %.1f%% of the FMA peak",
                                 flops / st.median * 1e-9, 100.0 * t_fma / st.median);
                    else
                        snprintf(r.note, sizeof r.note, "%.1f GFLOP/s; bw alongside %.1f GB/s",
                                 flops / st.median * 1e-9, r.bw_gbs);
                    print_row(&r);
                }
            }
        }
        free(q); free(o);
    }
    if (ok) kvread_rows(&P, H, Hk, D, bs, seqs, ctx, kv, reps0);
    free(hot_tables);
    free(shared_tables);
    paged_free(&P);
}

/* ---------------------------------------------------------------------------------------------
   paged-prefill: attn_paged_prefill, a chunk of `chunk` new tokens per sequence over a cached
   prefix of `prefix` tokens (keys = prefix + chunk, all in the cache), then attn_sdpa on the same
   work (dense K/V rows of prefix + chunk tokens) for comparison. */
typedef struct {
    attn_params p; attn_exec e; attn_rows q, o; paged *P; int32_t *qsl; int seqs, causal;
    void *ws; size_t ws_bytes;
} pprefill_ctx;
static attn_status pprefill_call(void *c) {
    pprefill_ctx *x = (pprefill_ctx *)c;
    return attn_paged_prefill(&x->p, &x->e, x->q, x->o, &x->P->cache, x->P->tables, x->P->per_seq,
                              x->qsl,
                              x->P->lens, x->seqs, x->causal, NULL, x->ws, x->ws_bytes);
}

static void bench_paged_prefill(int H, int Hk, int D, int bs, int seqs, int chunk, int prefix,
                                int causal,
                                attn_dtype kv, const ilist *dtypes, int reps0) {
    paged P;
    int len = prefix + chunk;
    char what[96];
    snprintf(what, sizeof what, "paged-prefill: filling a %s cache H%d/%d D%d bs%d %dx%d",
             attn_dtype_name(kv),
             H, Hk, D, bs, seqs, len);
    progress("%s", what);
    int ok = paged_make(&P, Hk, D, bs, seqs, len, kv);
    int32_t *qsl = (int32_t *)malloc(sizeof(int32_t) * (size_t)(seqs + 1));
    for (int s = 0; qsl && s <= seqs; s++) qsl[s] = s * chunk;
    for (int di = 0; di < dtypes->n; di++) {
        attn_dtype dt = (attn_dtype)dtypes->v[di];
        size_t nq = (size_t)seqs * chunk * H * D, esz = attn_dtype_size(dt);
        void *q = xalloc(nq * esz), *o = xalloc(nq * esz);
        if (q) fill_random(q, dt, nq, 1, 1.0f);
        for (int ti = 0; ti < g.threads.n; ti++) {
            int T = g.threads.v[ti], reps = reps0;
            pprefill_ctx x;
            memset(&x, 0, sizeof x);
            x.p.num_heads = H; x.p.num_kv_heads = Hk; x.p.head_size = D;
            row r = row_new("paged-prefill", T);
            r.dtype = attn_dtype_name(dt); r.kv_dtype = attn_dtype_name(kv); r.causal = causal;
            r.H = H; r.Hk = Hk; r.D = D; r.bs = bs; r.seqs = seqs; r.q_len = chunk; r.kv_len = len;
            r.reps = reps;
            if (!ok || !q || !o || !qsl) { error_row(&r, "out of memory"); continue; }
            snprintf(what, sizeof what, "paged-prefill %s/%s t%d", attn_dtype_name(dt),
                     attn_dtype_name(kv), T);
            progress("%s", what);
            x.e = make_exec(T); x.P = &P; x.qsl = qsl; x.seqs = seqs; x.causal = causal;
            x.q.data = q; x.q.dtype = dt; x.o.data = o; x.o.dtype = dt;
            x.ws_bytes = attn_paged_prefill_workspace_size(&x.p, &x.e, &P.cache, qsl, P.lens, seqs);
            stats st;
            if (!timed_row(&r, pprefill_call, &x, &x.ws, x.ws_bytes, &st)) continue;
            print_gflops_row(&r, 4.0 * D * H * seqs * visible_pairs(chunk, len, causal), &st);
        }
        free(q); free(o);
    }
    free(qsl);
    paged_free(&P);
    bench_prefill(H, Hk, D, seqs, chunk, len, causal, dtypes, reps0);   /* the same work, dense */
}

/* ---------------------------------------------------------------------------------------------
   forward: attn_forward on one mixed batch, as a server step runs it: seqs prefill sequences of
   `chunk` new tokens over `prefix` cached ones (prefix 0: plain prefill), then `decodes` decode
   sequences of ctx tokens, in one call that also writes the new tokens' K/V. The roofline of
   the call is the sum of its parts': prefill FLOPs / FMA peak + decode's max(KV bytes /
   bandwidth, FLOPs / FMA peak). */
typedef struct {
    attn_layer L; attn_exec e; attn_kv_cache *cache; attn_metadata md; attn_rows q, k, v, o;
    void *ws; size_t ws_bytes;
} forward_ctx;
static attn_status forward_call(void *c) {
    forward_ctx *x = (forward_ctx *)c;
    return attn_forward(&x->L, &x->e, x->q, x->k, x->v, x->cache, &x->md, x->o, x->ws, x->ws_bytes);
}

/* The batch: a paged cache with room for the longest sequence in every table (paged_make),
   the real lengths, the prefills' offsets and cached lengths, and the new tokens' slots. */
typedef struct {
    paged P; int32_t *qsl, *ctxs; int64_t *slots; int tokens;
} forward_batch;
static int forward_batch_make(forward_batch *b, int Hk, int D, int bs, int seqs, int chunk,
                              int prefix, int decodes,
                              int ctx, attn_dtype kv) {
    int n = seqs + decodes, len = prefix + chunk, longest = len > ctx || !decodes ? len : ctx;
    b->tokens = seqs * chunk + decodes;
    b->qsl = (int32_t *)malloc(sizeof(int32_t) * (size_t)(seqs + 1));
    b->ctxs = (int32_t *)malloc(sizeof(int32_t) * (size_t)(seqs + 1));
    b->slots = (int64_t *)malloc(sizeof(int64_t) * (size_t)(b->tokens + 1));
    if (!paged_make(&b->P, Hk, D, bs, n, longest, kv) || !b->qsl || !b->ctxs || !b->slots) return 0;
    int t = 0;
    b->qsl[0] = 0;
    for (int s = 0; s < n; s++) {
        const int32_t *tab = b->P.tables + (size_t)s * b->P.per_seq;
        int first = s < seqs ? prefix : ctx - 1;   /* the new tokens: a chunk, or the last one */
        b->P.lens[s] = s < seqs ? len : ctx;
        if (s < seqs) { b->qsl[s + 1] = b->qsl[s] + chunk; b->ctxs[s] = prefix; }
        for (int p = first; p < b->P.lens[s]; p++) b->slots[t++] =
                (int64_t)tab[p / bs] * bs + p % bs;
    }
    return 1;
}
static void forward_batch_free(forward_batch *b) {
    paged_free(&b->P); free(b->qsl); free(b->ctxs); free(b->slots);
}

static void bench_forward(int H, int Hk, int D, int bs, int seqs, int chunk, int prefix,
                          int decodes, int ctx,
                          attn_dtype kv, const ilist *dtypes, int reps0) {
    forward_batch b;
    forward_ctx x;
    char what[128];
    memset(&x, 0, sizeof x);
    snprintf(what, sizeof what, "forward: filling a %s cache H%d/%d D%d bs%d %dx(c%d p%d)+%dx%d",
             attn_dtype_name(kv), H, Hk, D, bs, seqs, chunk, prefix, decodes, ctx);
    progress("%s", what);
    int ok = forward_batch_make(&b, Hk, D, bs, seqs, chunk, prefix, decodes, ctx, kv);
    attn_params p;
    memset(&p, 0, sizeof p);
    p.num_heads = H; p.num_kv_heads = Hk; p.head_size = D;
    ok = ok && attn_layer_init(&x.L, &p, ATTN_DECODER, ATTN_BACKEND_SDPA) == ATTN_OK;
    x.md.num_prefills = seqs; x.md.num_prefill_tokens = seqs * chunk;
    x.md.num_decode_tokens = decodes;
    x.cache = &b.P.cache;
    x.md.slot_mapping = b.slots; x.md.seq_lens = b.P.lens; x.md.query_start_loc = b.qsl;
    x.md.context_lens = prefix ? b.ctxs : NULL; x.md.block_tables = b.P.tables;
    x.md.max_blocks_per_seq = b.P.per_seq;
    double pre_flops = 4.0 * D * H * seqs * visible_pairs(chunk, prefix + chunk, 1);
    double dec_flops = 4.0 * H * D * (double)decodes * ctx;
    double dec_bytes = (double)decodes * ctx * Hk * 2 * (double)attn_dtype_row_bytes(kv, D);
    for (int di = 0; di < dtypes->n; di++) {
        attn_dtype dt = (attn_dtype)dtypes->v[di];
        size_t esz = attn_dtype_size(dt), nq = (size_t)b.tokens * H * D,
               nk = (size_t)b.tokens * Hk * D;
        void *q = xalloc(nq * esz), *k = xalloc(nk * esz), *v = xalloc(nk * esz),
              *o = xalloc(nq * esz);
        int have = ok && q && k && v && o;
        if (have) {
            fill_random(q, dt, nq, 1, 1.0f); fill_random(k, dt, nk, 2, 1.0f);
            fill_random(v, dt, nk, 3, 1.0f);
        }
        x.q.data = q; x.k.data = k; x.v.data = v; x.o.data = o;
        x.q.dtype = x.k.dtype = x.v.dtype = x.o.dtype = dt;
        for (int ti = 0; ti < g.threads.n; ti++) {
            int T = g.threads.v[ti];
            row r = row_new("forward", T);
            r.dtype = attn_dtype_name(dt); r.kv_dtype = attn_dtype_name(kv); r.causal = 1;
            r.H = H; r.Hk = Hk; r.D = D; r.bs = bs; r.seqs = seqs; r.q_len = chunk;
            r.kv_len = prefix + chunk;
            r.decodes = decodes; r.ctx = ctx; r.reps = reps0;
            snprintf(r.version, sizeof r.version, "-");
            if (!have) { error_row(&r, "out of memory"); continue; }
            snprintf(what, sizeof what, "forward %s/%s t%d", attn_dtype_name(dt),
                     attn_dtype_name(kv), T);
            progress("%s", what);
            x.e = make_exec(T);
            x.ws_bytes = attn_forward_workspace_size(&x.L, &x.md, &x.e);
            stats st;
            if (!timed_row(&r, forward_call, &x, &x.ws, x.ws_bytes, &st)) continue;
            double t_dec = limit_secs(dec_bytes, r.bw_gbs),
                   t_fma = limit_secs(dec_flops, r.peak_gflops);
            r.value = (pre_flops + dec_flops) / st.median * 1e-9; r.unit = "GFLOP/s";
            r.pct = 100.0
                    * (limit_secs(pre_flops, r.peak_gflops) + (t_dec > t_fma ? t_dec : t_fma))
                        / st.median;
            r.limit = "roof";
            snprintf(r.note, sizeof r.note, "+%d decodes x %d; bw alongside %.1f GB/s", decodes,
                     ctx, r.bw_gbs);
            print_row(&r);
        }
        free(q); free(k); free(v); free(o);
    }
    forward_batch_free(&b);
}

/* ---------------------------------------------------------------------------------------------
   Command line */
static void usage(FILE *f) {
    fprintf(f,
        "usage: attn_bench [mode ...] [options]\n"
        "modes: peak | prefill | decode | paged-prefill | forward | all (default: all = peak + "
        "standard shapes)\n"
        "options (L = comma list, e.g. -S 512,2048,8192; lists multiply out):\n"
        "  -t L            threads (default: omp_get_max_threads())\n"
        "  -r N            timed repetitions after 1 warm-up (default 5)\n"
        "  --isa X         auto or an ISA's attn_isa_name: scalar|avx2|avx512|neon|amx|... "
        "(default auto)\n"
        "  --gemm X        native|onednn (onednn needs -DATTN_USE_ONEDNN -ldnnl)\n"
        "  --dtype L       activations: f32|f16|bf16 (default f32)\n"
        "  --kv-dtype L    cache: f32|f16|bf16|fp8_e4m3|fp8_e5m2|int8|int4 (default f32)\n"
        "  -H N, --hk N    query heads, KV heads (default 32, 8)\n"
        "  --gqa L         decode: model shapes by query heads per KV head G, for each G\n"
        "                  H = G x Hk with Hk 32 (G = 1), 16 (G = 2) or 8, and --seqs default\n"
        "                  16 / 32 / 64 / 32 / 16 for G = 1 / 2 / 4 / 8 / 16 (-H, --hk unused)\n"
        "  -D L            head size (default 128)\n"
        "  -S L            prefill length (default 2048)\n"
        "  --seqs L        sequences (default 1 for prefill/paged-prefill/forward, 64 for decode)\n"
        "  --ctx L         decode context length, also forward's decodes (default 4096)\n"
        "  --bs L          KV block size (default 16)\n"
        "  --version L     decode: auto|v1|v2 (default auto)\n"
        "  --chunk L       paged-prefill, forward: new tokens per sequence (default 2048)\n"
        "  --prefix L      paged-prefill, forward: cached tokens before the chunk (default 2048; "
        "forward: 0 =\n"
        "                  plain prefill)\n"
        "  --decodes L     forward: decode sequences after the prefills, ctx tokens each (default "
        "0)\n"
        "  --noncausal     prefill / paged-prefill without the causal mask\n"
        "  --bw-mib N      bytes read by the bandwidth test (default max(1 GiB, 8 x L3))\n"
        "  --limits G,B    skip the measurement: FMA peak G GFLOP/s, bandwidth B GB/s\n"
        "  -o md|csv|json  output format (default md)\n"
        "  --progress      progress lines on stderr\n"
        "  --huge-pages    advise buffers >= 4 MiB (KV cache, bandwidth array) as huge pages\n"
        "  --hot           decode: after each decode row a decode-hot row, the same call over block\n"
        "                  tables that name a few blocks again and again (512 KiB of K and V): the\n"
        "                  cache read from L2/L3, the arithmetic's own time\n"
        "  --shared-prefix P  decode: after each decode row a decode-shared row, the same call\n"
        "                  over tables whose every sequence names the first one's blocks for its\n"
        "                  first P tokens (whole blocks); its bytes count those blocks once;\n"
        "                  with --hot also a decode-shared-hot row: decode-hot's tables read\n"
        "                  once for all sequences, the stacked passes' own arithmetic\n"
        "  --f32-probs     exec.f32_probs = 1: bf16 queries on the f32 kernels, not the bf16 pair\n"
        "                  or tile kernels (the header says so)\n"
        "`all` uses its fixed shapes (see bench/README.md); the shape options apply to the other "
        "modes.\n");
}

static int parse_name(const char *s, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (names[i] && !strcmp(s, names[i])) return i;
    return -1;
}

/* kind: 0 = int >= 1, 1 = activation/cache dtype, 2 = version, 3 = int >= 0 */
static int parse_list(const char *arg, ilist *l, int kind) {
    const char *dts[ATTN_DTYPE_COUNT];  /* attn_dtype_name of each, in enum order */
    for (int i = 0; i < ATTN_DTYPE_COUNT; i++) dts[i] = attn_dtype_name((attn_dtype)i);
    static const char *const vers[] = {"auto", "v1", "v2"};
    char buf[512], *save = NULL;
    snprintf(buf, sizeof buf, "%s", arg);
    l->n = 0;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int v;
        if (l->n == MAXL) return 0;
        if (kind == 1) v = parse_name(tok, dts, ATTN_DTYPE_COUNT);
        else if (kind == 2) v = parse_name(tok, vers, 3);
        else {
            char *end;
            long x = strtol(tok, &end, 10);
            v = (*end || x < (kind == 3 ? 0 : 1) || x > 0x7fffffff) ? -1 : (int)x;
        }
        if (v < 0) return 0;
        l->v[l->n++] = v;
    }
    return l->n > 0;
}

/* The attn_isa that attn_isa_name calls s, or -1. */
static int parse_isa(const char *s) {
    for (int i = ATTN_ISA_AUTO; i < ATTN_ISA_COUNT; i++)
        if (!strcmp(s, attn_isa_name((attn_isa)i))) return i;
    return -1;
}

static int parse_args(int argc, char **argv) {
    static const char *const gemms[] = {"native", "onednn"};
    static const char *const fmts[] = {"md", "csv", "json"};
    int T = 1;
#ifdef _OPENMP
    T = omp_get_max_threads();
#endif
    memset(&g, 0, sizeof g);
    g.threads = one(T); g.S = one(2048); g.D = one(128); g.ctx = one(4096); g.bs = one(16);
    g.chunk = one(2048); g.prefix = one(2048); g.decodes = one(0); g.dtype = one(ATTN_F32);
    g.kv_dtype = one(ATTN_F32);
    g.version = one(ATTN_PAGED_AUTO);
    g.H = 32; g.Hk = 8; g.reps = 5; g.causal = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1, takes = 1, e = 0;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); exit(0); }
        else if (!strcmp(a, "peak")) g.modes |= M_PEAK, takes = 0;
        else if (!strcmp(a, "prefill")) g.modes |= M_PREFILL, takes = 0;
        else if (!strcmp(a, "decode")) g.modes |= M_DECODE, takes = 0;
        else if (!strcmp(a, "paged-prefill")) g.modes |= M_PPREFILL, takes = 0;
        else if (!strcmp(a, "forward")) g.modes |= M_FORWARD, takes = 0;
        else if (!strcmp(a, "all")) g.modes |= M_ALL, takes = 0;
        else if (!strcmp(a, "--noncausal")) g.causal = 0, takes = 0;
        else if (!strcmp(a, "--progress")) g.progress = 1, takes = 0;
        else if (!strcmp(a, "--huge-pages")) g.huge_pages = 1, takes = 0;
        else if (!strcmp(a, "--f32-probs")) g.f32_probs = 1, takes = 0;
        else if (!strcmp(a, "--hot")) g.hot = 1, takes = 0;
        else if (!v) ok = 0;
        else if (!strcmp(a, "-t")) ok = parse_list(v, &g.threads, 0);
        else if (!strcmp(a, "-r")) ok = (g.reps = atoi(v)) >= 1 && g.reps <= MAXREPS;
        else if (!strcmp(a, "-H")) ok = (g.H = atoi(v)) >= 1;
        else if (!strcmp(a, "--hk")) ok = (g.Hk = atoi(v)) >= 1;
        else if (!strcmp(a, "--gqa")) ok = parse_list(v, &g.gqa, 0);
        else if (!strcmp(a, "-D")) ok = parse_list(v, &g.D, 0);
        else if (!strcmp(a, "--shared-prefix")) ok = (g.shared_prefix = atoi(v)) >= 1;
        else if (!strcmp(a, "-S")) ok = parse_list(v, &g.S, 0);
        else if (!strcmp(a, "--seqs")) ok = parse_list(v, &g.seqs, 0);
        else if (!strcmp(a, "--ctx")) ok = parse_list(v, &g.ctx, 0);
        else if (!strcmp(a, "--bs")) ok = parse_list(v, &g.bs, 0);
        else if (!strcmp(a, "--chunk")) ok = parse_list(v, &g.chunk, 0);
        else if (!strcmp(a, "--prefix")) ok = parse_list(v, &g.prefix, 3);
        else if (!strcmp(a, "--decodes")) ok = parse_list(v, &g.decodes, 3);
        else if (!strcmp(a, "--dtype")) ok = parse_list(v, &g.dtype, 1);
        else if (!strcmp(a, "--kv-dtype")) ok = parse_list(v, &g.kv_dtype, 1);
        else if (!strcmp(a, "--version")) ok = parse_list(v, &g.version, 2);
        else if (!strcmp(a, "--isa")) ok = (e = parse_isa(v)) >= 0,
        g.isa = (attn_isa)(ok ? e : 0);
        else if (!strcmp(a, "--gemm")) ok = (e = parse_name(v, gemms, 2)) >= 0,
        g.gemm = (attn_gemm)(ok ? e : 0);
        else if (!strcmp(a, "-o")) ok = (g.fmt = parse_name(v, fmts, 3)) >= 0;
        else if (!strcmp(a, "--bw-mib")) ok = (g.bw_mib = atof(v)) > 0;
        else if (!strcmp(a, "--limits")) ok =
                sscanf(v, "%lf,%lf", &g.given_gflops, &g.given_gbs) == 2 &&
                                             g.given_gflops > 0 && g.given_gbs > 0;
        else ok = 0;
        if (!ok) {
            fprintf(stderr, "attn_bench: bad argument '%s%s%s'\n", a, takes &&
                    v ? " " : "", takes && v ? v : "");
            usage(stderr);
            return 0;
        }
        i += takes;
    }
    for (int i = 0; i < g.dtype.n; i++)
        if (is_fp8((attn_dtype)g.dtype.v[i])) {
            fprintf(stderr, "attn_bench: --dtype takes f32, f16 or bf16 (fp8 is a cache dtype)\n");
            return 0;
        }
#ifndef _OPENMP
    if (g.threads.n != 1 || g.threads.v[0] != 1)
        fprintf(stderr, "attn_bench: built without OpenMP, running on 1 thread\n");
    g.threads = one(1);
#endif
    if (!g.modes) g.modes = M_ALL;
    return 1;
}

/* ---------------------------------------------------------------------------------------------
   The standard set (`all`): what the README's performance table reports. */
static void run_all(void) {
    static const int Ss[3] = {512, 2048, 8192}, Ds[2] = {64, 128};
    static const attn_dtype kvs[4] = {ATTN_F32, ATTN_F16, ATTN_BF16, ATTN_FP8_E4M3};
    ilist f32 = one(ATTN_F32), f32_bf16 = two(ATTN_F32, ATTN_BF16), autov = one(ATTN_PAGED_AUTO);
    int short_reps = g.reps < 3 ? g.reps : 3;
    g.cap_slow = 1;
    for (int d = 0; d < 2; d++)
        for (int s = 0; s < 3; s++)
            bench_prefill(32, 8, Ds[d], 1, Ss[s], Ss[s], 1, &f32_bf16, Ss[s] >= 8192 ? short_reps
                          : g.reps);
    for (int k = 0; k < 4; k++) bench_decode(32, 8, 128, 16, 64, 4096, kvs[k], &f32, &autov,
                                             g.reps);
    bench_decode(32, 8, 128, 16, 1, 32768, ATTN_F32, &f32, &autov, g.reps);
    bench_decode(32, 8, 128, 16, 256, 512, ATTN_F32, &f32, &autov, g.reps);
    bench_paged_prefill(32, 8, 128, 16, 1, 2048, 2048, 1, ATTN_F32, &f32, g.reps);
    g.cap_slow = 0;
}

/* ---------------------------------------------------------------------------------------------
   The modes' shapes: every combination of the option lists a mode uses (the last one varies
   fastest; --seqs not given: the mode's default). */
enum { DIM_KV, DIM_D, DIM_S, DIM_BS, DIM_SEQS, DIM_CHUNK, DIM_PREFIX, DIM_DECODES, DIM_CTX, NDIM };
typedef void (*shape_fn)(const int *v);   /* v[DIM_*]; 0 for a dimension the mode does not use */

static void for_each_shape(unsigned dims, int default_seqs, shape_fn fn) {
    ilist seqs = g.seqs.n ? g.seqs : one(default_seqs);
    const ilist *l[NDIM] =
            {&g.kv_dtype, &g.D, &g.S, &g.bs, &seqs, &g.chunk, &g.prefix, &g.decodes, &g.ctx};
    int at[NDIM] = {0}, v[NDIM], d;
    for (;;) {
        for (d = 0; d < NDIM; d++) v[d] = dims >> d & 1 ? l[d]->v[at[d]] : 0;
        fn(v);
        for (d = NDIM - 1; d >= 0; d--) {
            if (dims >> d & 1 && ++at[d] < l[d]->n) break;
            at[d] = 0;
        }
        if (d < 0) return;
    }
}

static void prefill_at(const int *v) {
    bench_prefill(g.H, g.Hk, v[DIM_D], v[DIM_SEQS], v[DIM_S], v[DIM_S], g.causal, &g.dtype, g.reps);
}
static void decode_at(const int *v) {
    bench_decode(g.H, g.Hk, v[DIM_D], v[DIM_BS], v[DIM_SEQS], v[DIM_CTX], (attn_dtype)v[DIM_KV],
                 &g.dtype,
                 &g.version, g.reps);
}
/* decode's shapes: -H and --hk, or with --gqa a model shape for each G (see usage): MHA as
   Llama 2 7B (H32/Hk32), G = 2 as Gemma 2 (H32/Hk16), G = 4 as Llama 3 8B (H32/Hk8), G = 8 as
   Llama 3 70B (H64/Hk8); the sequences keep the KV bytes of 64 x Hk8 up to G = 4, then halve
   with each doubling of G so the FLOPs stay those of G = 4. */
static void decode_shapes(void) {
    const unsigned dims =
            1u << DIM_KV | 1u << DIM_D | 1u << DIM_BS | 1u << DIM_SEQS | 1u << DIM_CTX;
    if (!g.gqa.n) { for_each_shape(dims, 64, decode_at); return; }
    for (int i = 0; i < g.gqa.n; i++) {
        int G = g.gqa.v[i];
        g.Hk = G == 1 ? 32 : G == 2 ? 16 : 8;
        g.H = G * g.Hk;
        for_each_shape(dims, G <= 4 ? 64 * 8 / g.Hk : (G < 256 ? 64 * 4 / G : 1), decode_at);
    }
}

static void paged_prefill_at(const int *v) {
    bench_paged_prefill(g.H, g.Hk, v[DIM_D], v[DIM_BS], v[DIM_SEQS], v[DIM_CHUNK], v[DIM_PREFIX],
                        g.causal,
                        (attn_dtype)v[DIM_KV], &g.dtype, g.reps);
}
static void forward_at(const int *v) {
    if (!v[DIM_DECODES] && v[DIM_CTX] != g.ctx.v[0]) return;  /* no decodes: ctx is not used */
    bench_forward(g.H, g.Hk, v[DIM_D], v[DIM_BS], v[DIM_SEQS], v[DIM_CHUNK], v[DIM_PREFIX],
                  v[DIM_DECODES],
                  v[DIM_CTX], (attn_dtype)v[DIM_KV], &g.dtype, g.reps);
}

int main(int argc, char **argv) {
    if (!parse_args(argc, argv)) return 2;
    double t_start = now_s();
    for (int i = 0; i < g.threads.n; i++) {
        char what[32];
        snprintf(what, sizeof what, "%d", g.threads.v[i]);
        progress("measuring machine limits on %s threads", what);
        measure_limits(&g_lim[i], g.threads.v[i]);
    }
    print_header();
    if (g.modes & (M_PEAK | M_ALL)) peak_rows();
    if (g.modes & M_ALL) run_all();
    if (g.modes & M_PREFILL) for_each_shape(1u << DIM_D | 1u << DIM_S | 1u << DIM_SEQS, 1,
                                            prefill_at);
    if (g.modes & M_DECODE) decode_shapes();
    if (g.modes & M_PPREFILL)
        for_each_shape(1u << DIM_KV | 1u << DIM_D | 1u << DIM_BS | 1u << DIM_SEQS |
                           1u << DIM_CHUNK | 1u << DIM_PREFIX,
                       1, paged_prefill_at);
    if (g.modes & M_FORWARD) for_each_shape(~(1u << DIM_S), 1, forward_at);
    print_footer();
    if (g.fmt == FMT_MD) printf("\n%d rows in %.1f s\n", g_rows, now_s() - t_start);
    else if (g.fmt == FMT_CSV) printf("# %d rows in %.1f s\n", g_rows, now_s() - t_start);
    return 0;
}
