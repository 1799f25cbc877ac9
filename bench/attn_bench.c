/* attn_bench - throughput of attn.h against this machine's measured limits.
   usage: attn_bench [peak|prefill|decode|all] [-t threads] [-r reps] [-S len,...] [-D dim,...]
                     [--dtype f32|bf16|f16] [--kv-dtype f32|f16|bf16|fp8_e4m3|fp8_e5m2]
                     [--seqs N] [--ctx N] [--isa auto|scalar|avx2|avx512]
   Prefill: useful GFLOP/s (causal counts visible pairs only, 4*D FLOPs per pair and head) as a
   % of the fp32 FMA peak. Decode: KV GB/s and time as a % of the roofline
   max(KV bytes / read bandwidth, FLOPs / FMA peak). Medians over -r repetitions. */
#define _POSIX_C_SOURCE 200809L
#define ATTN_IMPLEMENTATION
#include "attn.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#endif

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static int cmp_d(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }
static double median(double *v, int n) { qsort(v, (size_t)n, sizeof *v, cmp_d); return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]); }

static int g_threads = 2, g_reps = 5;
static attn_isa g_isa = ATTN_ISA_AUTO;
static double g_peak, g_bw;

/* ---- machine limits ---- */
#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) static float fma_loop(long n) {
    __m256 a0 = _mm256_set1_ps(1), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0, a9 = a0;
    const __m256 m = _mm256_set1_ps(0.99999f), c = _mm256_set1_ps(1e-6f);
    for (long k = 0; k < n; k++) {
        a0 = _mm256_fmadd_ps(a0, m, c); a1 = _mm256_fmadd_ps(a1, m, c); a2 = _mm256_fmadd_ps(a2, m, c);
        a3 = _mm256_fmadd_ps(a3, m, c); a4 = _mm256_fmadd_ps(a4, m, c); a5 = _mm256_fmadd_ps(a5, m, c);
        a6 = _mm256_fmadd_ps(a6, m, c); a7 = _mm256_fmadd_ps(a7, m, c); a8 = _mm256_fmadd_ps(a8, m, c);
        a9 = _mm256_fmadd_ps(a9, m, c);
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(_mm256_add_ps(a6, a7), _mm256_add_ps(a8, a9))));
    float o[8]; _mm256_storeu_ps(o, s); return o[0];
}
__attribute__((target("avx512f"))) static float fma_loop512(long n) {
    __m512 a0 = _mm512_set1_ps(1), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0, a9 = a0;
    const __m512 m = _mm512_set1_ps(0.99999f), c = _mm512_set1_ps(1e-6f);
    for (long k = 0; k < n; k++) {
        a0 = _mm512_fmadd_ps(a0, m, c); a1 = _mm512_fmadd_ps(a1, m, c); a2 = _mm512_fmadd_ps(a2, m, c);
        a3 = _mm512_fmadd_ps(a3, m, c); a4 = _mm512_fmadd_ps(a4, m, c); a5 = _mm512_fmadd_ps(a5, m, c);
        a6 = _mm512_fmadd_ps(a6, m, c); a7 = _mm512_fmadd_ps(a7, m, c); a8 = _mm512_fmadd_ps(a8, m, c);
        a9 = _mm512_fmadd_ps(a9, m, c);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
        _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(_mm512_add_ps(a6, a7), _mm512_add_ps(a8, a9)))));
}
__attribute__((target("avx2"))) static double read_sum(const float *p, size_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i + 32 <= n; i += 32) {
        s0 = _mm256_add_ps(s0, _mm256_loadu_ps(p + i)); s1 = _mm256_add_ps(s1, _mm256_loadu_ps(p + i + 8));
        s2 = _mm256_add_ps(s2, _mm256_loadu_ps(p + i + 16)); s3 = _mm256_add_ps(s3, _mm256_loadu_ps(p + i + 24));
    }
    float o[8]; _mm256_storeu_ps(o, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    return o[0];
}
#endif

static void measure_limits(void) {
    long n = 20000000;
    int wide = attn_best_isa() == ATTN_ISA_AVX512;
    double best = 0;
    for (int r = 0; r < 3; r++) {
        double t0 = now(), sink = 0;
#pragma omp parallel num_threads(g_threads) reduction(+ : sink)
        {
#if defined(__x86_64__)
            sink += wide ? fma_loop512(n) : fma_loop(n);
#endif
        }
        double t = now() - t0, gf = (double)g_threads * n * 10 * (wide ? 16 : 8) * 2 / t * 1e-9;
        if (gf > best) best = gf;
        if (sink == 12345.0) printf(" ");
    }
    g_peak = best;
    size_t bytes = (size_t)1 << 30, nf = bytes / 4;
    float *buf = (float *)malloc(bytes);
#pragma omp parallel for num_threads(g_threads) schedule(static)
    for (long i = 0; i < (long)nf; i++) buf[i] = (float)(i & 7);
    double times[5];
    for (int r = 0; r < 5; r++) {
        double t0 = now(), sink = 0;
#pragma omp parallel num_threads(g_threads) reduction(+ : sink)
        {
#ifdef _OPENMP
            int id = omp_get_thread_num(), nt = omp_get_num_threads();
#else
            int id = 0, nt = 1;
#endif
            size_t per = nf / (size_t)nt;
#if defined(__x86_64__)
            sink += read_sum(buf + per * (size_t)id, per);
#endif
        }
        times[r] = now() - t0;
        if (sink == 12345.0) printf(" ");
    }
    g_bw = bytes / median(times, 5) * 1e-9;
    free(buf);
    printf("| limits | threads %d | fp32 FMA peak %.1f GFLOP/s | read bandwidth %.1f GB/s |\n", g_threads, g_peak, g_bw);
}

static attn_exec make_exec(void) { attn_exec e; memset(&e, 0, sizeof e); e.num_threads = g_threads; e.isa = g_isa; return e; }

static void fill(void *p, attn_dtype dt, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) {
        float x = (float)((i * 2654435761u + seed) % 2001) / 1000.0f - 1.0f;
        if (dt == ATTN_F32) ((float *)p)[i] = x;
        else if (dt == ATTN_F16) ((uint16_t *)p)[i] = attn_f32_to_f16(x);
        else if (dt == ATTN_BF16) ((uint16_t *)p)[i] = attn_f32_to_bf16(x);
        else if (dt == ATTN_FP8_E4M3) ((uint8_t *)p)[i] = attn_f32_to_fp8_e4m3(x);
        else ((uint8_t *)p)[i] = attn_f32_to_fp8_e5m2(x);
    }
}

static void bench_prefill(int S, int D, attn_dtype dt) {
    int H = 32, Hk = 8;
    size_t esz = attn_dtype_size(dt), nq = (size_t)S * H * D, nk = (size_t)S * Hk * D;
    void *q = malloc(nq * esz), *k = malloc(nk * esz), *v = malloc(nk * esz), *o = malloc(nq * esz);
    fill(q, dt, nq, 1); fill(k, dt, nk, 2); fill(v, dt, nk, 3);
    attn_params p; memset(&p, 0, sizeof p); p.num_heads = H; p.num_kv_heads = Hk; p.head_size = D;
    attn_exec e = make_exec();
    int32_t cu[2] = {0, S};
    attn_rows rq = {q, dt, 0}, rk = {k, dt, 0}, rv = {v, dt, 0}, ro = {o, dt, 0};
    size_t wsb = attn_sdpa_workspace_size(&p, &e, cu, cu, 1);
    void *ws = malloc(wsb);
    int reps = S >= 8192 ? 3 : g_reps;
    double t[16];
    attn_status st = attn_sdpa(&p, &e, rq, rk, rv, ro, cu, cu, 1, 1, NULL, ws, wsb);  /* warm-up */
    for (int r = 0; r < reps && st == ATTN_OK; r++) {
        double t0 = now();
        st = attn_sdpa(&p, &e, rq, rk, rv, ro, cu, cu, 1, 1, NULL, ws, wsb);
        t[r] = now() - t0;
    }
    if (st != ATTN_OK) { printf("| prefill | S=%d D=%d | error: %s |\n", S, D, attn_status_str(st)); return; }
    double med = median(t, reps), gf = 4.0 * D * ((double)S * (S + 1) / 2) * H / med * 1e-9;
    printf("| prefill causal | %s | H=32 Hk=8 D=%d S=%d | %.2f ms | %.1f GFLOP/s | %.1f%% of FMA peak |\n",
           attn_dtype_name(dt), D, S, med * 1e3, gf, 100 * gf / g_peak);
    free(q); free(k); free(v); free(o); free(ws);
}

static void bench_decode(int seqs, int ctx, attn_dtype kv, attn_paged_version ver) {
    int H = 32, Hk = 8, D = 128, bs = 16, per = (ctx + bs - 1) / bs, nb = seqs * per;
    size_t cb = attn_kv_cache_bytes(nb, bs, Hk, D, kv);
    void *mem = malloc(cb);
    attn_kv_cache cache;
    float scale = (kv == ATTN_FP8_E4M3 || kv == ATTN_FP8_E5M2) ? 0.01f : 1.0f;
    if (!mem || attn_kv_cache_init(&cache, nb, bs, Hk, D, kv, scale, scale, mem, cb) != ATTN_OK) { printf("| decode | cache alloc failed |\n"); return; }
    size_t slots = (size_t)nb * bs * Hk * D;
    fill(cache.key, kv, slots, 4); fill(cache.value, kv, slots, 5);
    int32_t *tables = (int32_t *)malloc(sizeof(int32_t) * (size_t)nb), *lens = (int32_t *)malloc(sizeof(int32_t) * (size_t)seqs);
    for (int i = 0; i < nb; i++) tables[i] = (int32_t)(((int64_t)i * 7919) % nb);  /* shuffled */
    for (int s = 0; s < seqs; s++) lens[s] = ctx;
    float *q = (float *)malloc(sizeof(float) * (size_t)seqs * H * D), *o = (float *)malloc(sizeof(float) * (size_t)seqs * H * D);
    fill(q, ATTN_F32, (size_t)seqs * H * D, 6);
    attn_params p; memset(&p, 0, sizeof p); p.num_heads = H; p.num_kv_heads = Hk; p.head_size = D;
    attn_exec e = make_exec();
    attn_rows rq = {q, ATTN_F32, 0}, ro = {o, ATTN_F32, 0};
    size_t wsb = attn_paged_decode_workspace_size(&p, &e, &cache, lens, seqs, ver);
    void *ws = malloc(wsb);
    double t[16];
    attn_status st = attn_paged_decode(&p, &e, rq, ro, &cache, tables, per, lens, seqs, ver, NULL, ws, wsb);
    for (int r = 0; r < g_reps && st == ATTN_OK; r++) {
        double t0 = now();
        st = attn_paged_decode(&p, &e, rq, ro, &cache, tables, per, lens, seqs, ver, NULL, ws, wsb);
        t[r] = now() - t0;
    }
    if (st != ATTN_OK) { printf("| decode | error: %s |\n", attn_status_str(st)); return; }
    double med = median(t, g_reps);
    double bytes = (double)seqs * ctx * Hk * D * 2 * attn_dtype_size(kv), flops = 4.0 * H * D * (double)ctx * seqs;
    double roof = bytes / (g_bw * 1e9) > flops / (g_peak * 1e9) ? bytes / (g_bw * 1e9) : flops / (g_peak * 1e9);
    printf("| decode %s | kv %s | %d seqs x %d, H=32 Hk=8 D=128 bs=16 | %.2f ms | %.1f GB/s | %.1f%% of roofline |\n",
           attn_paged_decode_version(&p, lens, seqs, ver) == ATTN_PAGED_V1 ? "v1" : "v2",
           attn_dtype_name(kv), seqs, ctx, med * 1e3, bytes / med * 1e-9, 100 * roof / med);
    free(mem); free(tables); free(lens); free(q); free(o); free(ws);
}

int main(int argc, char **argv) {
    const char *mode = "all";
    int S[8] = {2048}, nS = 1, Ds[8] = {128}, nD = 1, seqs = 64, ctx = 4096;
    attn_dtype dt = ATTN_F32, kv = ATTN_F32;
#ifdef _OPENMP
    g_threads = omp_get_max_threads();
#endif
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "-t")) g_threads = atoi(v), i++;
        else if (!strcmp(a, "-r")) g_reps = atoi(v) > 15 ? 15 : atoi(v), i++;
        else if (!strcmp(a, "-S") || !strcmp(a, "-D")) {
            int *dst = a[1] == 'S' ? S : Ds, n = 0;
            for (char *tok = strtok(argv[++i], ","); tok && n < 8; tok = strtok(NULL, ",")) dst[n++] = atoi(tok);
            if (a[1] == 'S') nS = n; else nD = n;
        } else if (!strcmp(a, "--seqs")) seqs = atoi(v), i++;
        else if (!strcmp(a, "--ctx")) ctx = atoi(v), i++;
        else if (!strcmp(a, "--dtype") || !strcmp(a, "--kv-dtype")) {
            attn_dtype x = ATTN_F32;
            for (int d = 0; d < ATTN_DTYPE_COUNT; d++) if (!strcmp(v, attn_dtype_name((attn_dtype)d))) x = (attn_dtype)d;
            if (a[2] == 'd') dt = x; else kv = x;
            i++;
        } else if (!strcmp(a, "--isa")) {
            for (int d = 0; d < ATTN_ISA_COUNT; d++) if (!strcmp(v, attn_isa_name((attn_isa)d))) g_isa = (attn_isa)d;
            i++;
        } else mode = a;
    }
    printf("%s | %s | threads %d | isa %s | %s\n\n", attn_build_info(), attn_cpu_features(), g_threads,
           attn_isa_name(g_isa == ATTN_ISA_AUTO ? attn_best_isa() : g_isa), __VERSION__);
    measure_limits();
    if (!strcmp(mode, "prefill"))
        for (int i = 0; i < nS; i++) for (int j = 0; j < nD; j++) bench_prefill(S[i], Ds[j], dt);
    if (!strcmp(mode, "decode")) bench_decode(seqs, ctx, kv, ATTN_PAGED_AUTO);
    if (!strcmp(mode, "all")) {
        const int Sa[3] = {512, 2048, 8192}, Da[2] = {64, 128};
        for (int d = 0; d < 2; d++) for (int s = 0; s < 3; s++) { bench_prefill(Sa[s], Da[d], ATTN_F32); bench_prefill(Sa[s], Da[d], ATTN_BF16); }
        const attn_dtype kvs[5] = {ATTN_F32, ATTN_F16, ATTN_BF16, ATTN_FP8_E4M3, ATTN_FP8_E5M2};
        for (int k = 0; k < 5; k++) bench_decode(64, 4096, kvs[k], ATTN_PAGED_AUTO);
        bench_decode(1, 32768, ATTN_F32, ATTN_PAGED_AUTO);
        bench_decode(256, 512, ATTN_F32, ATTN_PAGED_AUTO);
    }
    return 0;
}
