/* stress.c - long and large runs against the reference (`make stress`; not part of `make test`):
   1. a 131072-token context on a bf16 paged cache (4 query heads over 1 KV head, head size
      128): written chunk by chunk and prefilled in 4096-token chunks over the growing cached
      prefix (three query rows of every chunk against tests/ref.h), then decoded with v2 (every
      head against the reference; v1 and one thread give the same bits);
   2. 1,024 sequences in one decode batch: every sequence against the reference; v1 == v2 and
      one thread == all threads, bitwise;
   3. 10,000 steps of continuous batching over a small pool: arrivals, chunked prefills, decodes,
      forks (parallel sampling, copy-on-write), truncations (rejected speculative tokens),
      finishes, and exhaustion with preemption (a request's blocks are released and it is
      prefilled again later), each step one attn_forward on the mixed batch; every output row
      against the reference over an independent model of each request's keys and values, the
      cache contents against the model every 1,000 steps and at the end, the pool's counts
      against the tables after every step, and no block leaked once everything is released.
      Run twice: with a prefix cache on the pool (prompts share a few system prompts; every
      admission and re-admission after preemption looks its prompt up, so most prefixes come
      from the cache; a token's K/V are a function of the token ids up to it, as in a model, so
      a wrong reuse shows in the outputs and the cache check) and without one. The pool's
      invariants (tests/pool_check.h) are checked after every step.
   Usage: stress [case ...] with case = context, batch, serving, serving_plain (default: all;
   serving has the prefix cache, serving_plain not). STRESS_CONTEXT
   sets the context length of case 1 (default 131072). Prints each case's result and time;
   exit status 0 only when every case passed. */
#define _POSIX_C_SOURCE 199309L
#define ATTN_IMPLEMENTATION
#include "../attn.h"
#include "ref.h"
#define ATTN_TEST_IMPLEMENTATION  /* its random numbers (splitmix64); no test runner is used */
#define ATTN_TEST_NO_SHORT_NAMES
#include "attn_test.h"
#include "pool_check.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- helpers ----------------------------------------------------------------------------- */
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static uint64_t rnd(uint64_t *s) { return attn_test_rand_u64(s); }  /* splitmix64 */
static float uni(uint64_t *s, float lo, float hi) {
    return lo + (hi - lo) * (float)((double)(rnd(s) >> 11) * (1.0 / 9007199254740992.0));
}
static int rint_in(uint64_t *s, int lo, int hi) {
    return lo + (int)(rnd(s) % (uint64_t)(hi - lo + 1));
}
static void *xalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) { fprintf(stderr, "out of memory (%zu bytes)\n", n); exit(2); }
    return p;
}
/* x as the cache stores it and reads it back: rounded to the dtype (fp8: through the scale). */
static float as_stored(attn_dtype dt, float x, float scale) {
    switch (dt) {
        case ATTN_F16: return attn_f16_to_f32(attn_f32_to_f16(x));
        case ATTN_BF16: return attn_bf16_to_f32(attn_f32_to_bf16(x));
        case ATTN_FP8_E4M3: return attn_fp8_e4m3_to_f32(attn_f32_to_fp8_e4m3(x / scale)) * scale;
        case ATTN_FP8_E5M2: return attn_fp8_e5m2_to_f32(attn_f32_to_fp8_e5m2(x / scale)) * scale;
        default: return x;
    }
}
static float cache_get(const attn_kv_cache *c, const void *arr, size_t i, float scale) {
    switch (c->dtype) {
        case ATTN_F16: return attn_f16_to_f32(((const uint16_t *)arr)[i]);
        case ATTN_BF16: return attn_bf16_to_f32(((const uint16_t *)arr)[i]);
        case ATTN_FP8_E4M3: return attn_fp8_e4m3_to_f32(((const uint8_t *)arr)[i]) * scale;
        case ATTN_FP8_E5M2: return attn_fp8_e5m2_to_f32(((const uint8_t *)arr)[i]) * scale;
        default: return ((const float *)arr)[i];
    }
}
static size_t cache_at(const attn_kv_cache *c, int64_t slot, int h, int d) {
    int64_t b = slot / c->block_size, o = slot % c->block_size;
    return (size_t)(((b * c->num_kv_heads + h) * c->block_size + o) * c->head_size + d);
}
/* |got - want| <= atol + rtol |want| for n outputs; returns the number outside, and the worst. */
static long compare(const float *got, const double *want, size_t n, double atol, double rtol,
                    double *worst) {
    long bad = 0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - want[i]);
        if (!(err <= atol + rtol * fabs(want[i]))) bad++;
        if (!(err <= *worst)) *worst = err;
    }
    return bad;
}
static attn_exec exec_threads(int threads) {
    attn_exec e;
    memset(&e, 0, sizeof e);
    e.num_threads = threads;
    return e;
}
/* A random permutation of n block ids. */
static int32_t *shuffled_blocks(uint64_t *rng, int n) {
    int32_t *p = (int32_t *)xalloc(sizeof(int32_t) * (size_t)n);
    for (int i = 0; i < n; i++) p[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = rint_in(rng, 0, i);
        int32_t t = p[i]; p[i] = p[j]; p[j] = t;
    }
    return p;
}

/* ---- 1. a 131072-token context --------------------------------------------------------------- */
static int case_context(void) {
    enum { H = 4, HK = 1, D = 128, BS = 16, CHUNK = 4096, SAMPLES = 3 };
    const char *env = getenv("STRESS_CONTEXT");
    int L = env ? atoi(env) : 131072;
    if (L < CHUNK) L = CHUNK;
    L = L / CHUNK * CHUNK;
    const attn_dtype dt = ATTN_BF16;
    const int qw = H * D, kw = HK * D, nb = L / BS + 1;
    uint64_t rng = 1;
    double t0 = now(), t_prefill = 0, t_ref = 0;
    attn_params p; memset(&p, 0, sizeof p);
    p.num_heads = H; p.num_kv_heads = HK; p.head_size = D;
    size_t cbytes = attn_kv_cache_bytes(nb, BS, HK, D, dt);
    void *cmem = xalloc(cbytes);
    attn_kv_cache cache;
    if (attn_kv_cache_init(&cache, nb, BS, HK, D, dt, 1, 1, cmem, cbytes) != ATTN_OK) return 1;
    int32_t *table = shuffled_blocks(&rng, nb);
    /* the model: every key and value as stored, token-major [L][Hk*D] */
    float *kf = (float *)xalloc(sizeof(float) * (size_t)L * kw),
           *vf = (float *)xalloc(sizeof(float) * (size_t)L * kw);
    float *kr = (float *)xalloc(sizeof(float) * (size_t)CHUNK * kw),
           *vr = (float *)xalloc(sizeof(float) * (size_t)CHUNK * kw);
    float *q = (float *)xalloc(sizeof(float) * (size_t)CHUNK * qw),
           *out = (float *)xalloc(sizeof(float) * (size_t)CHUNK * qw);
    int64_t *slots = (int64_t *)xalloc(sizeof(int64_t) * CHUNK);
    double want[H * D], worst = 0;
    long bad = 0, checked = 0;
    attn_exec e = exec_threads(0);
    int fails = 0;
    for (int c0 = 0; c0 < L; c0 += CHUNK) {
        for (size_t i = 0; i < (size_t)CHUNK * kw; i++) {
            kr[i] = uni(&rng, -1, 1); vr[i] = uni(&rng, -1, 1);
            kf[(size_t)c0 * kw + i] = as_stored(dt, kr[i], 1);
            vf[(size_t)c0 * kw + i] = as_stored(dt, vr[i], 1);
        }
        for (size_t i = 0; i < (size_t)CHUNK * qw; i++) q[i] = uni(&rng, -1, 1);
        for (int t = 0; t < CHUNK; t++) slots[t] =
                (int64_t)table[(c0 + t) / BS] * BS + (c0 + t) % BS;
        attn_rows rk = {kr, ATTN_F32, 0}, rv = {vr, ATTN_F32, 0}, rq = {q, ATTN_F32, 0},
                  ro = {out, ATTN_F32, 0};
        fails += attn_write_kv(&cache, rk, rv, slots, CHUNK, &e) != ATTN_OK;
        int32_t qsl[2] = {0, CHUNK}, len[1] = {c0 + CHUNK};
        size_t wsb = attn_paged_prefill_workspace_size(&p, &e, &cache, qsl, len, 1);
        void *ws = xalloc(wsb);
        double t1 = now();
        fails +=
                attn_paged_prefill(&p, &e, rq, ro, &cache, table, nb, qsl, len, 1, 1, NULL, ws,
                                   wsb) != ATTN_OK;
        t_prefill += now() - t1;
        free(ws);
        t1 = now();
        for (int smp = 0; smp < SAMPLES; smp++) {  /* the first row, the last, one between */
            int m = smp == 0 ? 0 : smp == 1 ? CHUNK - 1 : rint_in(&rng, 1, CHUNK - 2);
            int Lk = c0 + m + 1;
            ref_attention(&p, 1, 1, Lk, q + (size_t)m * qw, 0, kf, 0, vf, 0, want, NULL);
            bad += compare(out + (size_t)m * qw, want, (size_t)qw, 2e-5, 1e-3, &worst);
            checked += qw;
        }
        t_ref += now() - t1;
    }
    printf("context %d: chunked prefill (%d-token chunks) %.1f s, %ld sampled outputs, %ld outside "
           "tolerance (worst |error| %.2g), reference %.1f s\n", L, CHUNK, t_prefill, checked, bad,
           worst, t_ref);
    fails += bad != 0;
    /* decode: one more query at position L - 1 over all L keys, v2, then v1 and one thread */
    float *o1 = (float *)xalloc(sizeof(float) * qw), *o2 = (float *)xalloc(sizeof(float) * qw);
    for (int i = 0; i < qw; i++) q[i] = uni(&rng, -1, 1);
    int32_t len[1] = {L};
    attn_rows rq = {q, ATTN_F32, 0}, r2 = {out, ATTN_F32, 0}, r1 = {o1, ATTN_F32, 0},
              rs = {o2, ATTN_F32, 0};
    attn_exec e1 = exec_threads(1);
    size_t wsb = attn_paged_decode_workspace_size(&p, &e, &cache, len, 1, ATTN_PAGED_V2);
    size_t wsb1 = attn_paged_decode_workspace_size(&p, &e1, &cache, len, 1, ATTN_PAGED_V1);
    void *ws = xalloc(wsb > wsb1 ? wsb : wsb1);
    double t1 = now();
    fails +=
            attn_paged_decode(&p, &e, rq, r2, &cache, table, nb, len, 1, ATTN_PAGED_V2, NULL, ws,
                              wsb) != ATTN_OK;
    double t_dec = now() - t1;
    fails +=
            attn_paged_decode(&p, &e, rq, r1, &cache, table, nb, len, 1, ATTN_PAGED_V1, NULL, ws,
                              wsb) != ATTN_OK;
    fails +=
            attn_paged_decode(&p, &e1, rq, rs, &cache, table, nb, len, 1, ATTN_PAGED_V2, NULL, ws,
                              wsb1) != ATTN_OK;
    int same = !memcmp(out, o1, sizeof(float) * qw) && !memcmp(out, o2, sizeof(float) * qw);
    worst = 0;
    ref_attention(&p, 1, 1, L, q, 0, kf, 0, vf, 0, want, NULL);
    bad = compare(out, want, (size_t)qw, 2e-5, 1e-3, &worst);
    printf("context %d: decode v2 %.3f s, %d outputs, %ld outside tolerance (worst |error| %.2g), "
           "v1 and "
           "1 thread %s\n", L, t_dec, qw, bad, worst, same ? "bitwise equal" : "DIFFER");
    fails += bad != 0 || !same;
    free(ws); free(o1); free(o2);
    free(cmem); free(table); free(kf); free(vf); free(kr); free(vr); free(q); free(out);
    free(slots);
    printf("context: %s in %.1f s\n", fails ? "FAILED" : "passed", now() - t0);
    return fails != 0;
}

/* ---- 2. 1,024 sequences in one decode batch -------------------------------------------------- */
static int case_batch(void) {
    enum { N = 1024, H = 8, HK = 2, D = 128, BS = 16, MAXLEN = 1024 };  /* f16 cache, ~0.5 GB */
    const attn_dtype dt = ATTN_F16;
    const int qw = H * D, kw = HK * D;
    uint64_t rng = 2;
    double t0 = now();
    attn_params p; memset(&p, 0, sizeof p);
    p.num_heads = H; p.num_kv_heads = HK; p.head_size = D; p.sliding_window = 700;
    int32_t lens[N];
    int max_blocks = (MAXLEN + BS - 1) / BS, total = 0;
    for (int s = 0; s < N; s++) {
        lens[s] = rint_in(&rng, 1, MAXLEN);
        total += (lens[s] + BS - 1) / BS;
    }
    size_t cbytes = attn_kv_cache_bytes(total, BS, HK, D, dt);
    void *cmem = xalloc(cbytes);
    attn_kv_cache cache;
    if (attn_kv_cache_init(&cache, total, BS, HK, D, dt, 1, 1, cmem, cbytes) != ATTN_OK) return 1;
    int32_t *perm = shuffled_blocks(&rng, total),
             *tables = (int32_t *)calloc((size_t)N * max_blocks, sizeof(int32_t));
    for (int s = 0, next = 0; s < N; s++)
        for (int b = 0; b < (lens[s] + BS - 1) / BS; b++) tables[s * max_blocks + b] = perm[next++];
    /* every slot random, straight into the cache */
    size_t elems = (size_t)total * BS * kw;
    for (size_t i = 0; i < elems; i++) {
        ((uint16_t *)cache.key)[i] = attn_f32_to_f16(uni(&rng, -1, 1));
        ((uint16_t *)cache.value)[i] = attn_f32_to_f16(uni(&rng, -1, 1));
    }
    float *q = (float *)xalloc(sizeof(float) * N * qw), *o[4];
    for (size_t i = 0; i < (size_t)N * qw; i++) q[i] = uni(&rng, -1, 1);
    static const attn_paged_version vers[4] =
            {ATTN_PAGED_AUTO, ATTN_PAGED_V1, ATTN_PAGED_V2, ATTN_PAGED_V2};
    double t_call[4];
    int fails = 0;
    for (int k = 0; k < 4; k++) {  /* auto, v1, v2 on all threads; v2 on one */
        attn_exec e = exec_threads(k == 3 ? 1 : 0);
        size_t wsb = attn_paged_decode_workspace_size(&p, &e, &cache, lens, N, vers[k]);
        void *ws = xalloc(wsb);
        o[k] = (float *)xalloc(sizeof(float) * N * qw);
        attn_rows rq = {q, ATTN_F32, 0}, ro = {o[k], ATTN_F32, 0};
        double t1 = now();
        fails +=
                attn_paged_decode(&p, &e, rq, ro, &cache, tables, max_blocks, lens, N, vers[k],
                                  NULL, ws, wsb) != ATTN_OK;
        t_call[k] = now() - t1;
        free(ws);
    }
    int same = 1;
    for (int k = 1; k < 4; k++) same &= !memcmp(o[0], o[k], sizeof(float) * N * qw);
    /* the reference, sequence by sequence */
    float *k = (float *)xalloc(sizeof(float) * MAXLEN * kw),
           *v = (float *)xalloc(sizeof(float) * MAXLEN * kw);
    double want[H * D], worst = 0;
    long bad = 0;
    for (int s = 0; s < N; s++) {
        for (int t = 0; t < lens[s]; t++)
            for (int h = 0; h < HK; h++)
                for (int d = 0; d < D; d++) {
                    int64_t slot = (int64_t)tables[s * max_blocks + t / BS] * BS + t % BS;
                    k[(size_t)t * kw + h * D + d] =
                            cache_get(&cache, cache.key, cache_at(&cache, slot, h, d), 1);
                    v[(size_t)t * kw + h * D + d] =
                            cache_get(&cache, cache.value, cache_at(&cache, slot, h, d), 1);
                }
        ref_attention(&p, 1, 1, lens[s], q + (size_t)s * qw, 0, k, 0, v, 0, want, NULL);
        bad += compare(o[0] + (size_t)s * qw, want, (size_t)qw, 2e-5, 1e-3, &worst);
    }
    printf("batch %d sequences (%d tokens, lengths 1..%d): auto %.3f s, v1 %.3f s, v2 %.3f s, v2 "
           "on 1 thread "
           "%.3f s; %ld of %d outputs outside tolerance (worst |error| %.2g); v1, v2, auto, 1 "
           "thread %s\n",
           N, (int)(elems / kw), MAXLEN, t_call[0], t_call[1], t_call[2], t_call[3], bad, N * qw,
           worst,
           same ? "bitwise equal" : "DIFFER");
    fails += bad != 0 || !same;
    for (int i = 0; i < 4; i++) free(o[i]);
    free(k); free(v); free(q); free(perm); free(tables); free(cmem);
    printf("batch: %s in %.1f s\n", fails ? "FAILED" : "passed", now() - t0);
    return fails != 0;
}

/* ---- 3. continuous batching over a small pool ------------------------------------------------ */
enum { SV_H = 4, SV_HK = 2, SV_D = 32, SV_BS = 8, SV_BLOCKS = 96, SV_REQS = 16, SV_MAXLEN = 300,
       SV_MAXB = (SV_MAXLEN + SV_BS - 1) / SV_BS + 1, SV_CHUNK = 32, SV_STEPS = 10000 };
#define SV_QW (SV_H * SV_D)
#define SV_KW (SV_HK * SV_D)

typedef struct sv_req {
    int live, total, max_total;  /* tokens known (prompt + generated), and when it finishes */
    attn_seq seq;                 /* seq.len: tokens in the cache */
    int32_t table[SV_MAXB];
    int32_t tok[SV_MAXLEN];       /* token ids */
    float k[SV_MAXLEN * SV_KW], v[SV_MAXLEN * SV_KW];  /* every token's K/V rows, as given */
} sv_req;

typedef struct sv_stats { long steps, tokens, prefills, decodes, forks, cows, truncations, finishes,
                         preemptions,
                          exhausted, outputs, bad, lookups, hit_tokens; double worst, t_forward;
                          } sv_stats;

/* Token t's K/V rows from the ids of tokens 0..t (a hash of them seeds the values), as a
   model's depend on everything before them: equal prefixes give equal rows. */
static void sv_token_kv(sv_req *x, int t) {
    uint64_t h = 0x5a17ull;
    for (int i = 0; i <= t; i++) h = (h ^ (uint64_t)(uint32_t)x->tok[i]) * 0x100000001b3ull;
    for (int i = 0; i < SV_KW; i++) {
        x->k[t * SV_KW + i] = uni(&h, -1, 1);
        x->v[t * SV_KW + i] = uni(&h, -1, 1);
    }
}

/* The pool's counts against the tables: each refcount is the number of live table entries that
   name the block; used blocks are those. */
static int sv_pool_matches(const attn_block_pool *pool, const sv_req *req) {
    int count[SV_BLOCKS] = {0}, used = 0;
    for (int r = 0; r < SV_REQS; r++)
        if (req[r].live)
            for (int b = 0; b < req[r].seq.num_blocks; b++) count[req[r].seq.block_table[b]]++;
    for (int b = 0; b < SV_BLOCKS; b++) {
        if (pool->refcount[b] != count[b]) return 0;
        used += count[b] > 0;
    }
    return attn_block_pool_used_count(pool) == used;
}

/* The cache holds, for every live request, its tokens' K/V as stored (bit for bit after the
   model's rounding). */
static long sv_cache_matches(const attn_kv_cache *c, const sv_req *req) {
    long bad = 0;
    for (int r = 0; r < SV_REQS; r++) {
        const sv_req *q = &req[r];
        if (!q->live) continue;
        for (int t = 0; t < q->seq.len; t++) {
            int64_t slot = (int64_t)q->table[t / SV_BS] * SV_BS + t % SV_BS;
            for (int h = 0; h < SV_HK; h++)
                for (int d = 0; d < SV_D; d++) {
                    size_t at = cache_at(c, slot, h, d);
                    bad += cache_get(c, c->key, at, c->k_scale) != as_stored(c->dtype,
                            q->k[t * SV_KW + h * SV_D + d], c->k_scale);
                    bad += cache_get(c, c->value, at, c->v_scale) != as_stored(c->dtype,
                            q->v[t * SV_KW + h * SV_D + d], c->v_scale);
                }
        }
    }
    return bad;
}

static void sv_release(attn_block_pool *pool, sv_req *q) { attn_seq_release(pool, &q->seq); }

static int case_serving(int with_cache) {
    const attn_dtype dt = ATTN_BF16;
    uint64_t rng = 3;
    double t0 = now();
    attn_params p; memset(&p, 0, sizeof p);
    p.num_heads = SV_H; p.num_kv_heads = SV_HK; p.head_size = SV_D; p.sliding_window = 100;
    p.logits_soft_cap = 30;
    size_t cbytes = attn_kv_cache_bytes(SV_BLOCKS, SV_BS, SV_HK, SV_D, dt),
           pbytes = attn_block_pool_bytes(SV_BLOCKS);
    size_t xbytes = attn_prefix_cache_bytes(SV_BLOCKS, SV_BS);
    void *cmem = xalloc(cbytes), *pmem = xalloc(pbytes), *xmem = xalloc(xbytes);
    attn_kv_cache cache;
    attn_block_pool pool;
    attn_layer layer;
    if (attn_kv_cache_init(&cache, SV_BLOCKS, SV_BS, SV_HK, SV_D, dt, 1, 1, cmem,
                           cbytes) != ATTN_OK ||
        attn_block_pool_init(&pool, SV_BLOCKS, SV_BS, pmem, pbytes) != ATTN_OK ||
        (with_cache && attn_prefix_cache_init(&pool, xmem, xbytes) != ATTN_OK) ||
        attn_layer_init(&layer, &p, ATTN_DECODER, ATTN_BACKEND_SDPA) != ATTN_OK)
        return 1;
    const char *name = with_cache ? "serving" : "serving_plain";
    int32_t system[4][64];  /* the system prompts requests start with */
    for (int i = 0; i < 4 * 64; i++) system[i / 64][i % 64] = rint_in(&rng, 0, 999);
    memset(cmem, 0xff, cbytes);  /* NaN everywhere until written */
    sv_req *req = (sv_req *)calloc(SV_REQS, sizeof(sv_req));
    sv_stats st; memset(&st, 0, sizeof st);
    int order[SV_REQS], nq[SV_REQS], fails = 0;
    float *q = (float *)xalloc(sizeof(float) * SV_REQS * SV_CHUNK * SV_QW);
    float *kr = (float *)xalloc(sizeof(float) * SV_REQS * SV_CHUNK * SV_KW),
           *vr = (float *)xalloc(sizeof(float) * SV_REQS * SV_CHUNK * SV_KW);
    float *out = (float *)xalloc(sizeof(float) * SV_REQS * SV_CHUNK * SV_QW);
    float *kf = (float *)xalloc(sizeof(float) * SV_MAXLEN * SV_KW),
           *vf = (float *)xalloc(sizeof(float) * SV_MAXLEN * SV_KW);
    double *want = (double *)xalloc(sizeof(double) * SV_CHUNK * SV_QW);
    void *ws = NULL;
    size_t ws_bytes = 0;
    attn_exec e = exec_threads(0);
    for (int step = 0; step < SV_STEPS; step++) {
        /* arrivals, finishes, forks, truncations */
        for (int r = 0; r < SV_REQS; r++) {
            sv_req *x = &req[r];
            if (!x->live && rint_in(&rng, 0, 3) == 0) {
                /* admission as a scheduler does it: the prompt's blocks and a watermark of an
                   eighth of the pool must be free (else the request arrives later); growth
                   still exhausts the pool, and preemption recovers */
                int prompt = rint_in(&rng, 1, 120);
                if (attn_block_pool_free_count(&pool) < (prompt + SV_BS - 1) / SV_BS + SV_BLOCKS
                    / 8) continue;
                x->live = 1;
                x->total = prompt;
                x->max_total = x->total + rint_in(&rng, 1, SV_MAXLEN - x->total);
                int sys = rint_in(&rng, 0, 4), sys_len = sys < 4 ? rint_in(&rng, 8, 64) : 0;
                for (int i = 0; i < x->total; i++) {  /* a system prompt, then its own ids */
                    x->tok[i] = i < sys_len ? system[sys][i] : rint_in(&rng, 0, 999);
                    sv_token_kv(x, i);
                }
                attn_seq_init(&x->seq, x->table, SV_MAXB);
                attn_seq_set_tokens(&x->seq, x->tok, 0);
            } else if (x->live && x->seq.len == x->max_total) {
                sv_release(&pool, x);
                x->live = 0;
                st.finishes++;
            }
        }
        for (int r = 0; r < SV_REQS; r++) {
            sv_req *x = &req[r];
            if (!x->live || x->seq.len != x->total || x->seq.len == 0) continue;
            int u = rint_in(&rng, 0, 29);
            if (u == 0) {  /* parallel sampling: a free slot forks this request */
                for (int d = 0; d < SV_REQS; d++) {
                    sv_req *y = &req[d];
                    if (y->live) continue;
                    attn_seq_init(&y->seq, y->table, SV_MAXB);
                    attn_seq_set_tokens(&y->seq, y->tok, 0);
                    if (attn_seq_fork(&pool, &x->seq, &y->seq) != ATTN_OK) { fails++; break; }
                    y->live = 1; y->total = x->total; y->max_total = x->max_total;
                    memcpy(y->tok, x->tok, sizeof(int32_t) * (size_t)x->total);
                    memcpy(y->k, x->k, sizeof(float) * (size_t)x->total * SV_KW);
                    memcpy(y->v, x->v, sizeof(float) * (size_t)x->total * SV_KW);
                    st.forks++;
                    break;
                }
            } else if (u == 1 && x->seq.len > 1) {  /* speculative tokens rejected */
                int keep = x->seq.len - rint_in(&rng, 1, x->seq.len - 1 < 8 ? x->seq.len - 1 : 8);
                if (attn_seq_truncate(&pool, &x->seq, keep) != ATTN_OK) { fails++; continue; }
                x->total = keep;
                st.truncations++;
            }
        }
        /* the batch: prefill chunks first (tokens known but not cached), then decodes (a new
           token each); see below for who waits and who preempts */
        int n = 0, prefills = 0, tokens = 0, batched[SV_REQS] = {0};
        int64_t slots[SV_REQS * SV_CHUNK];
        for (int pass = 0; pass < 2; pass++)
            for (int r = 0; r < SV_REQS; r++) {
                sv_req *x = &req[r];
                /* once a step: a prefill that caught up in pass 0 decodes in the next step */
                if (!x->live || batched[r] || x->seq.len == x->max_total) continue;
                int prefill = x->seq.len < x->total;
                if (prefill != (pass == 0)) continue;
                if (with_cache && prefill && x->seq.len == 0) {  /* (re-)admitted: look it up */
                    if (attn_prefix_cache_lookup(&pool, &x->seq, x->total) != ATTN_OK) fails++;
                    st.lookups++;
                    st.hit_tokens += x->seq.len;
                }
                int m = prefill ? x->total - x->seq.len : 1;
                if (m > SV_CHUNK) m = SV_CHUNK;
                int64_t cow[1][2];
                int n_cow = 0;
                if (!prefill) x->tok[x->total] = rint_in(&rng, 0, 999);  /* known before append */
                attn_status s = attn_seq_append(&pool, &x->seq, m, slots + tokens, cow, &n_cow);
                /* a decode that finds no block preempts the longest request not in the batch; a
                   prefill (new or preempted) waits for blocks instead, as a scheduler's waiting
                   queue does (preempting for every prefill livelocks a small pool), unless the
                   batch is still empty (prefills holding part of their blocks would deadlock) */
                while (s == ATTN_ERR_OUT_OF_BLOCKS && (!prefill || n == 0)) {
                    int victim = -1;
                    for (int y = 0; y < SV_REQS; y++) {
                        int in_batch = 0;
                        for (int i = 0; i < n; i++) in_batch |= order[i] == y;
                        if (y != r && req[y].live && !in_batch && req[y].seq.num_blocks > 0 &&
                            (victim < 0 || req[y].seq.len > req[victim].seq.len))
                            victim = y;
                    }
                    st.exhausted++;
                    if (victim < 0) break;
                    sv_release(&pool, &req[victim]);  /* its tokens are known: prefilled again
                                                         later */
                    st.preemptions++;
                    s = attn_seq_append(&pool, &x->seq, m, slots + tokens, cow, &n_cow);
                }
                /* a later step */
                if (s == ATTN_ERR_OUT_OF_BLOCKS) { st.exhausted += prefill; continue; }
                if (s != ATTN_OK) { fails++; continue; }
                if (n_cow) {  /* copy-on-write before the new tokens are written */
                    attn_kv_cache *layers[1] = {&cache};
                    if (attn_copy_blocks(layers, 1, &cow[0][0], 1) != ATTN_OK) fails++;
                    st.cows++;
                }
                if (!prefill) {  /* a new token: its K/V join the request */
                    sv_token_kv(x, x->total);
                    x->total++;
                }
                int first = (int)x->seq.len - m;
                memcpy(kr + (size_t)tokens * SV_KW, x->k + (size_t)first * SV_KW,
                       sizeof(float) * (size_t)m * SV_KW);
                memcpy(vr + (size_t)tokens * SV_KW, x->v + (size_t)first * SV_KW,
                       sizeof(float) * (size_t)m * SV_KW);
                order[n] = r; nq[n] = m; n++;
                batched[r] = 1;
                prefills += prefill;
                tokens += m;
            }
        if (n == 0) continue;
        int32_t qsl[SV_REQS + 1], ctx[SV_REQS], lens[SV_REQS], tables[SV_REQS * SV_MAXB];
        qsl[0] = 0;
        for (int i = 0; i < n; i++) {
            sv_req *x = &req[order[i]];
            lens[i] = (int32_t)x->seq.len;
            if (i < prefills) { ctx[i] = lens[i] - nq[i]; qsl[i + 1] = qsl[i] + nq[i]; }
            memcpy(tables + i * SV_MAXB, x->table, sizeof x->table);
        }
        for (int i = 0; i < tokens * SV_QW; i++) q[i] = uni(&rng, -1, 1);
        attn_metadata md; memset(&md, 0, sizeof md);
        md.num_prefills = prefills; md.num_prefill_tokens = qsl[prefills];
        md.num_decode_tokens = n - prefills;
        md.slot_mapping = slots; md.seq_lens = lens; md.query_start_loc = qsl;
        md.context_lens = ctx;
        md.block_tables = tables; md.max_blocks_per_seq = SV_MAXB;
        size_t need = attn_forward_workspace_size(&layer, &md, &e);
        if (need > ws_bytes) { free(ws); ws = xalloc(need); ws_bytes = need; }
        attn_rows rq = {q, ATTN_F32, 0}, rk = {kr, ATTN_F32, 0}, rv = {vr, ATTN_F32, 0},
                  ro = {out, ATTN_F32, 0};
        double t1 = now();
        if (attn_forward(&layer, &e, rq, rk, rv, &cache, &md, ro, ws, ws_bytes) != ATTN_OK) {
            fails++; continue;
        }
        st.t_forward += now() - t1;
        /* every row against the reference over the model's keys and values */
        for (int i = 0, t0r = 0; i < n; i++) {
            sv_req *x = &req[order[i]];
            for (int t = 0; t < lens[i] * SV_KW; t++) {
                kf[t] = as_stored(dt, x->k[t], 1); vf[t] = as_stored(dt, x->v[t], 1);
            }
            ref_attention(&p, 1, nq[i], lens[i], q + (size_t)t0r * SV_QW, 0, kf, 0, vf, 0, want,
                          NULL);
            st.bad +=
                    compare(out + (size_t)t0r * SV_QW, want, (size_t)nq[i] * SV_QW, 2e-5, 1e-3,
                            &st.worst);
            st.outputs += nq[i] * SV_QW;
            t0r += nq[i];
        }
        if (!sv_pool_matches(&pool, req)) {
            fails++; printf("%s: step %d: pool counts differ from the tables\n", name, step);
        }
        {
            attn_seq *all[SV_REQS];
            char msg[256];
            for (int r = 0; r < SV_REQS; r++) all[r] = &req[r].seq;
            if (!pool_check(&pool, all, SV_REQS, msg, sizeof msg)) {
                fails++; printf("%s: step %d: %s\n", name, step, msg);
            }
        }
        if ((step + 1) % 1000 == 0 && sv_cache_matches(&cache, req)) {
            fails++;
            printf("%s: step %d: the cache differs from the model\n", name, step);
        }
        st.steps++; st.tokens += tokens; st.prefills += prefills; st.decodes += n - prefills;
    }
    long cache_bad = sv_cache_matches(&cache, req);
    for (int r = 0; r < SV_REQS; r++)
        if (req[r].live) sv_release(&pool, &req[r]);
    int leaked = SV_BLOCKS - attn_block_pool_free_count(&pool);
    if (with_cache)
        printf("%s: %ld lookups, %ld tokens found cached (%lld by the pool's count), %lld "
               "evictions, %d blocks still cached\n", name, st.lookups, st.hit_tokens,
               (long long)pool.cache.hit_tokens, (long long)pool.cache.evictions,
               pool.cache.num_cached);
    fails += with_cache && (st.hit_tokens == 0 || pool.cache.evictions == 0 ||
                            pool.cache.hit_tokens != st.hit_tokens);
    printf("%s: %ld steps with a batch, %ld tokens (%ld prefill chunks, %ld decodes), %ld "
           "forks, %ld "
           "copy-on-write, %ld truncations, %ld finishes, %ld exhaustions, %ld preemptions; "
           "attn_forward %.1f s\n", name,
           st.steps, st.tokens, st.prefills, st.decodes, st.forks, st.cows, st.truncations,
           st.finishes,
           st.exhausted, st.preemptions, st.t_forward);
    printf("%s: %ld outputs, %ld outside tolerance (worst |error| %.2g); final cache %s the "
           "model; %d blocks "
           "leaked\n", name, st.outputs, st.bad, st.worst, cache_bad ? "DIFFERS from" : "matches",
           leaked);
    fails += st.bad != 0 || cache_bad != 0 || leaked != 0;
    free(req); free(q); free(kr); free(vr); free(out); free(kf); free(vf); free(want); free(ws);
    free(cmem); free(pmem); free(xmem);
    printf("%s: %s in %.1f s\n", name, fails ? "FAILED" : "passed", now() - t0);
    return fails != 0;
}

int main(int argc, char **argv) {
    int fails = 0, any = 0;
    setvbuf(stdout, NULL, _IOLBF, 0);  /* each line as it is printed, also into a file */
    printf("%s\n%s\n", attn_build_info(), attn_cpu_features());
    for (int i = 1; i <= argc; i++) {
        const char *c = i < argc ? argv[i] : NULL;
        if (!c && any) break;
        if (!c || !strcmp(c, "context")) { fails += case_context(); any = 1; }
        if (!c || !strcmp(c, "batch")) { fails += case_batch(); any = 1; }
        if (!c || !strcmp(c, "serving")) { fails += case_serving(1); any = 1; }
        if (!c || !strcmp(c, "serving_plain")) { fails += case_serving(0); any = 1; }
        if (!c) break;
    }
    printf("stress: %s\n", fails ? "FAILED" : "all passed");
    return fails != 0;
}
