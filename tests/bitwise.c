/* bitwise.c - runs every public kernel of attn.h over a fixed sweep and prints, per case, one line
   "<case> <FNV-1a 64 hash of every output byte> <status>". Built against two revisions' attn.h
   (tests/bitwise.sh), the two listings must be identical line for line: a refactor that changes
   no behaviour changes no output bit. Uses only the public API so that it builds against any
   revision; the inputs come from a fixed-seed generator, so a listing depends only on the
   library, the compiler and the ISAs this CPU runs. Lines starting with '#' are information. */
#define ATTN_IMPLEMENTATION
#include "attn.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

/* ---- hashing, random inputs, allocation ---- */
#define FNV_START 14695981039346656037ull
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 1099511628211ull; }
    return h;
}
static uint64_t fnv_int(uint64_t h, int64_t v) { return fnv(h, &v, sizeof v); }
/* Bytes of a cache row of D elements: the element dtypes' size times D; the integer caches
   (dtypes 5 and 6 where the header has them; attn_dtype_row_bytes, which older headers lack):
   int8 D + 2 ceil(D/32), int4 18 ceil(D/32). */
static size_t row_bytes(attn_dtype dt, int D) {
    size_t groups = ((size_t)D + 31) / 32;
    if (attn_dtype_size(dt)) return attn_dtype_size(dt) * (size_t)D;
    return (int)dt == 5 ? (size_t)D + 2 * groups : (int)dt == 6 ? 18 * groups : 0;
}
/* A cache's key and value blocks (not the alignment slack around them, whose place in the
   caller's memory depends on where malloc put it). */
static uint64_t fnv_cache(uint64_t h, const attn_kv_cache *c) {
    size_t n = (size_t)c->num_blocks * c->block_size * c->num_kv_heads *
               row_bytes(c->dtype, c->head_size);
    return fnv(fnv(h, c->key, n), c->value, n);
}

static int g_cases;
static void emit(const char *name, uint64_t h, int status) {
    printf("%s %016llx %d\n", name, (unsigned long long)h, status);
    g_cases++;
}

static uint64_t rng_next(uint64_t *s) {  /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float rng_uniform(uint64_t *s, float lo, float hi) {
    return lo + (hi - lo) * (float)((double)(rng_next(s) >> 40) * (1.0 / 16777216.0));
}
static int rng_int(uint64_t *s, int n) { return (int)(rng_next(s) % (uint64_t)n); }

static void *xalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) { fprintf(stderr, "bitwise: out of memory\n"); exit(2); }
    return p;
}
/* n elements of dtype dt (f32, f16 or bf16) drawn from [lo, hi). */
static void *rand_rows(uint64_t *s, attn_dtype dt, size_t n, float lo, float hi) {
    void *p = xalloc(n * attn_dtype_size(dt));
    for (size_t i = 0; i < n; i++) {
        float x = rng_uniform(s, lo, hi);
        if (dt == ATTN_F16) ((uint16_t *)p)[i] = attn_f32_to_f16(x);
        else if (dt == ATTN_BF16) ((uint16_t *)p)[i] = attn_f32_to_bf16(x);
        else ((float *)p)[i] = x;
    }
    return p;
}
static void shuffle_i32(uint64_t *s, int32_t *a, int n) {
    for (int i = n - 1; i > 0; i--) {
        int j = rng_int(s, i + 1);
        int32_t t = a[i]; a[i] = a[j]; a[j] = t;
    }
}
static const char *dt_tag(attn_dtype dt) {
    static const char *t[] = {"f32", "f16", "bf16", "e4m3", "e5m2"};
    return (unsigned)dt < 5 ? t[dt] : attn_dtype_name(dt);  /* int8, int4 */
}

/* ---- execution variants: every ISA this CPU runs x {1 thread, 2 threads, a caller pool} x
   f32_probs {0, 1} (the pool with f32_probs 0 only) ---- */
typedef struct pool_state { int calls; } pool_state;
/* Runs the items serially in a scrambled order with rotating thread indices. */
static void scrambled_pool(void *pool, int num_items, int num_threads, attn_task_fn *task,
                           void *ctx) {
    ((pool_state *)pool)->calls++;
    for (int k = 0; k < num_items; k++) {
        int item = num_items % 7919 ? (int)(((int64_t)k * 7919 + 13) % num_items)
                                    : num_items - 1 - k;
        task(ctx, item, k % num_threads);
    }
}
static pool_state g_pool;

typedef struct variant { attn_exec e; char name[32]; } variant;
static variant g_var[64];
static int g_nvar;
static char g_isas[64];

static void make_variants(void) {
    for (int i = ATTN_ISA_SCALAR; i < ATTN_ISA_COUNT; i++) {
        if (i == ATTN_ISA_AMX || !attn_isa_supported((attn_isa)i)) continue;
        const char *in = attn_isa_name((attn_isa)i);
        if (g_isas[0]) strcat(g_isas, ",");
        strcat(g_isas, in);
        for (int k = 0; k < 5; k++) {
            variant *v = &g_var[g_nvar++];
            memset(v, 0, sizeof *v);
            v->e.isa = (attn_isa)i;
            v->e.num_threads = k == 4 ? 3 : 1 + k % 2;
            v->e.f32_probs = k >= 2 && k < 4;
            if (k == 4) { v->e.parallel_for = scrambled_pool; v->e.pool = &g_pool; }
            snprintf(v->name, sizeof v->name, "%s.%s%s", in,
                     k == 4 ? "pool" : k % 2 ? "t2" : "t1", v->e.f32_probs ? ".p32" : "");
        }
    }
}

/* A workspace of the queried size, filled with a pattern so that a kernel that read scratch it
   had not written would still give the same bits every run. */
static void *make_ws(size_t bytes) {
    void *ws = xalloc(bytes);
    memset(ws, 0xa5, bytes);
    return ws;
}

/* ALiBi slopes that are not powers of two: attn_alibi_slopes gives powers of two below 16
   heads, whose products with positions are exact and would hide a change of rounding. */
static const float g_slopes[16] = {0.37f, 0.11f, 0.053f, 0.0291f, 0.71f, 0.013f, 0.2f, 0.0077f,
                                   0.61f, 0.093f, 0.031f, 0.0043f, 0.17f, 0.45f, 0.067f, 0.0019f};
static const float g_sinks[16] = {0.5f, -1.0f, 0.0f, 2.0f, 1.5f, -0.25f, 3.0f, -2.0f,
                                  0.75f, 1.0f, -0.5f, 0.25f, 2.5f, -1.5f, 0.1f, 1.25f};

/* ---- attn_sdpa ---- */
typedef struct sd_shape {
    const char *tag;
    int H, Hk, D, n, lq[4], lk[4];
    int causal, alibi, window;  /* alibi: 1 attn_alibi_slopes, 2 g_slopes */
    float cap;
    int sinks, lse, strided;
} sd_shape;

static const sd_shape sd_shapes[] = {
    {"mha-d64-c", 4, 4, 64, 1, {100}, {100}, 1, 0, 0, 0, 0, 1, 0},
    {"gqa-d128-c-lse", 8, 2, 128, 2, {37, 70}, {37, 70}, 1, 0, 0, 0, 0, 1, 0},
    {"mqa-d80-nc-lq<lk", 4, 1, 80, 1, {65}, {130}, 0, 0, 0, 0, 0, 0, 0},
    {"gqa-d32-c-lq>lk", 4, 2, 32, 1, {90}, {40}, 1, 0, 0, 0, 0, 1, 0},
    {"d1-c", 2, 1, 1, 2, {17, 3}, {17, 9}, 1, 0, 0, 0, 0, 1, 0},
    {"d7-alibi-win", 6, 3, 7, 1, {50}, {50}, 1, 2, 13, 0, 0, 1, 0},
    {"d256-cap-sinks", 4, 2, 256, 1, {40}, {72}, 1, 0, 0, 30.0f, 1, 1, 0},
    {"d64-all-strided", 4, 4, 64, 4, {1, 0, 129, 20}, {1, 5, 129, 200}, 1, 2, 70, 20.0f, 1, 1, 1},
    {"mqa-d128-nc-win", 8, 1, 128, 1, {96}, {96}, 0, 0, 64, 0, 0, 0, 0},
    {"d48-strided-c", 3, 1, 48, 1, {33}, {97}, 1, 0, 0, 0, 0, 0, 1},
    {"h16-d96-nc-alibi-varlen", 16, 2, 96, 3, {10, 65, 7}, {10, 65, 3}, 0, 1, 0, 0, 1, 1, 0},
};
static const attn_dtype sd_dtypes[][3] = {  /* q, k/v, out */
    {ATTN_F32, ATTN_F32, ATTN_F32},   {ATTN_F16, ATTN_F16, ATTN_F16},
    {ATTN_BF16, ATTN_BF16, ATTN_BF16}, {ATTN_BF16, ATTN_BF16, ATTN_F32},
    {ATTN_F32, ATTN_BF16, ATTN_BF16}, {ATTN_F16, ATTN_F32, ATTN_BF16},
};

static void run_sdpa(void) {
    float slopes[16];
    for (size_t si = 0; si < sizeof sd_shapes / sizeof sd_shapes[0]; si++) {
        const sd_shape *s = &sd_shapes[si];
        attn_params p;
        memset(&p, 0, sizeof p);
        p.num_heads = s->H; p.num_kv_heads = s->Hk; p.head_size = s->D;
        attn_alibi_slopes(s->H, slopes);
        if (s->alibi) p.alibi_slopes = s->alibi == 1 ? slopes : g_slopes;
        p.sliding_window = s->window; p.logits_soft_cap = s->cap;
        if (s->sinks) p.sinks = g_sinks;
        int32_t cuq[5] = {0}, cuk[5] = {0};
        for (int i = 0; i < s->n; i++) {
            cuq[i + 1] = cuq[i] + s->lq[i];
            cuk[i + 1] = cuk[i] + s->lk[i];
        }
        int Tq = cuq[s->n], Tk = cuk[s->n];
        int64_t sq = s->strided ? s->H * s->D + 5 : 0, sk = s->strided ? s->Hk * s->D + 3 : 0;
        int64_t so = s->strided ? s->H * s->D + 2 : 0;
        size_t nq = (size_t)Tq * (sq ? sq : s->H * s->D);
        size_t nk = (size_t)Tk * (sk ? sk : s->Hk * s->D);
        size_t no = (size_t)Tq * (so ? so : s->H * s->D);
        for (size_t di = 0; di < sizeof sd_dtypes / sizeof sd_dtypes[0]; di++) {
            const attn_dtype *dt = sd_dtypes[di];
            uint64_t rng = 1000 + si * 16 + di;
            void *q = rand_rows(&rng, dt[0], nq, -2, 2), *k = rand_rows(&rng, dt[1], nk, -2, 2);
            void *v = rand_rows(&rng, dt[1], nk, -1, 1);
            size_t ob = no * attn_dtype_size(dt[2]);
            void *out = xalloc(ob);
            float *lse = (float *)xalloc(sizeof(float) * (size_t)(Tq ? Tq : 1) * s->H);
            attn_rows rq = {q, dt[0], sq}, rk = {k, dt[1], sk}, rv = {v, dt[1], sk};
            attn_rows ro = {out, dt[2], so};
            for (int vi = 0; vi < g_nvar; vi++) {
                const attn_exec *e = &g_var[vi].e;
                size_t wb = attn_sdpa_workspace_size(&p, e, cuq, cuk, s->n);
                void *ws = make_ws(wb);
                memset(out, 0x5a, ob);
                memset(lse, 0x5a, sizeof(float) * (size_t)Tq * s->H);
                int st = attn_sdpa(&p, e, rq, rk, rv, ro, cuq, cuk, s->n, s->causal,
                                   s->lse ? lse : NULL, ws, wb);
                uint64_t h = fnv(FNV_START, out, ob);
                if (s->lse) h = fnv(h, lse, sizeof(float) * (size_t)Tq * s->H);
                char name[160];
                snprintf(name, sizeof name, "sdpa/%s/%s-%s-%s/%s", s->tag, dt_tag(dt[0]),
                         dt_tag(dt[1]), dt_tag(dt[2]), g_var[vi].name);
                emit(name, h, st);
                free(ws);
            }
            free(q); free(k); free(v); free(out); free(lse);
        }
    }
}

/* ---- paged caches: a set of sequences written through attn_write_kv into shuffled blocks ---- */
typedef struct paged {
    attn_kv_cache cache;
    void *mem;
    size_t bytes;
    int nseq, maxb;
    int32_t lens[8], *tables;
} paged;

/* Fills a cache holding nseq sequences of lens[] tokens; keys in [-2, 2), values in [-1, 1)
   (fp8 caches: scaled up so that the stored values span the format), rows of dtype src. */
static void paged_make(paged *pg, uint64_t *rng, attn_dtype dt, int bs, int Hk, int D,
                       const int32_t *lens, int nseq, attn_dtype src, float ks, float vs) {
    int total = 0, maxb = 1, tokens = 0;
    for (int i = 0; i < nseq; i++) {
        int b = (lens[i] + bs - 1) / bs;
        total += b; maxb = b > maxb ? b : maxb; tokens += lens[i];
        pg->lens[i] = lens[i];
    }
    int nb = total + 3;
    pg->nseq = nseq; pg->maxb = maxb + 1;
    pg->bytes = attn_kv_cache_bytes(nb, bs, Hk, D, dt);
    pg->mem = xalloc(pg->bytes);
    memset(pg->mem, 0x3c, pg->bytes);
    if (attn_kv_cache_init(&pg->cache, nb, bs, Hk, D, dt, ks, vs, pg->mem, pg->bytes) != ATTN_OK) {
        fprintf(stderr, "bitwise: cache init failed\n");
        exit(2);
    }
    int32_t *perm = (int32_t *)xalloc(sizeof(int32_t) * (size_t)nb);
    for (int i = 0; i < nb; i++) perm[i] = i;
    shuffle_i32(rng, perm, nb);
    pg->tables = (int32_t *)xalloc(sizeof(int32_t) * (size_t)nseq * pg->maxb);
    int64_t *slots = (int64_t *)xalloc(sizeof(int64_t) * (size_t)(tokens ? tokens : 1));
    int used = 0, t = 0;
    for (int i = 0; i < nseq; i++) {
        for (int b = 0; b < pg->maxb; b++)  /* entries past the length point at a real block */
            pg->tables[i * pg->maxb + b] =
                b < (lens[i] + bs - 1) / bs ? perm[used + b] : perm[nb - 1];
        used += (lens[i] + bs - 1) / bs;
        for (int p = 0; p < lens[i]; p++)
            slots[t++] = (int64_t)pg->tables[i * pg->maxb + p / bs] * bs + p % bs;
    }
    float kr = dt == ATTN_FP8_E4M3 || dt == ATTN_FP8_E5M2 ? 2.0f * ks * 100 : 2.0f;
    float vr = dt == ATTN_FP8_E4M3 || dt == ATTN_FP8_E5M2 ? vs * 100 : 1.0f;
    size_t n = (size_t)tokens * Hk * D;
    void *k = rand_rows(rng, src, n, -kr, kr), *v = rand_rows(rng, src, n, -vr, vr);
    attn_rows rk = {k, src, 0}, rv = {v, src, 0};
    if (attn_write_kv(&pg->cache, rk, rv, slots, tokens, NULL) != ATTN_OK) {
        fprintf(stderr, "bitwise: cache write failed\n");
        exit(2);
    }
    free(perm); free(slots); free(k); free(v);
}
static void paged_free(paged *pg) { free(pg->mem); free(pg->tables); }

/* Every cache dtype the header has, in enum order (0 .. ATTN_DTYPE_COUNT - 1): the integer
   caches' cases appear only where the header has them (tests/bitwise.sh reads "# dtypes:"). */
#define N_DTYPES ((int)ATTN_DTYPE_COUNT)
static const attn_dtype all_dtypes[7] = {ATTN_F32, ATTN_F16, ATTN_BF16, ATTN_FP8_E4M3,
                                         ATTN_FP8_E5M2, (attn_dtype)5, (attn_dtype)6};
static int is_fp8(attn_dtype dt) { return dt == ATTN_FP8_E4M3 || dt == ATTN_FP8_E5M2; }
static float dt_kscale(attn_dtype dt) { return is_fp8(dt) ? 0.05f : 1.0f; }
static float dt_vscale(attn_dtype dt) { return is_fp8(dt) ? 0.03f : 1.0f; }

/* ---- attn_paged_prefill and attn_paged_decode ---- */
static void run_paged(void) {
    static const int bss[3] = {1, 16, 32};
    static const int Hs[3] = {4, 8, 4}, Hks[3] = {1, 2, 4}, Ds[3] = {80, 64, 128};
    static const attn_dtype qdts[3][2] = {{ATTN_F32, ATTN_F32}, {ATTN_BF16, ATTN_BF16},
                                         {ATTN_F16, ATTN_F32}};
    /* prefill: (cached prefix, new tokens) per sequence; decode: lengths (over 512: v2 splits) */
    static const int32_t pre_ctx[4] = {0, 90, 200, 17}, pre_new[4] = {37, 30, 1, 70};
    static const int32_t dec_lens[5] = {700, 1100, 33, 0, 1};
    for (int ci = 0; ci < N_DTYPES; ci++)
        for (int bi = 0; bi < 3; bi++) {
            attn_dtype cdt = all_dtypes[ci];
            int bs = bss[bi], H = Hs[bi], Hk = Hks[bi], D = Ds[bi];
            uint64_t rng = 2000 + ci * 8 + bi;
            int32_t lens[9];
            for (int i = 0; i < 4; i++) lens[i] = pre_ctx[i] + pre_new[i];
            for (int i = 0; i < 5; i++) lens[4 + i] = dec_lens[i];
            paged pre, dec;
            attn_dtype src = (attn_dtype)((ci + bi) % 3);
            paged_make(&pre, &rng, cdt, bs, Hk, D, lens, 4, src, dt_kscale(cdt), dt_vscale(cdt));
            paged_make(&dec, &rng, cdt, bs, Hk, D, lens + 4, 5, src, dt_kscale(cdt),
                       dt_vscale(cdt));
            char name[160];
            snprintf(name, sizeof name, "paged-cache/%s/bs%d/pre", dt_tag(cdt), bs);
            emit(name, fnv_cache(FNV_START, &pre.cache), 0);
            snprintf(name, sizeof name, "paged-cache/%s/bs%d/dec", dt_tag(cdt), bs);
            emit(name, fnv_cache(FNV_START, &dec.cache), 0);
            int32_t qsl[5] = {0};
            for (int i = 0; i < 4; i++) qsl[i + 1] = qsl[i] + pre_new[i];
            for (int qi = 0; qi < 3; qi++)
                for (int opt = 0; opt < 2; opt++) {
                    attn_params p;
                    memset(&p, 0, sizeof p);
                    p.num_heads = H; p.num_kv_heads = Hk; p.head_size = D;
                    if (opt) {
                        p.alibi_slopes = g_slopes; p.sliding_window = 100; p.scale = 0.1f;
                        p.logits_soft_cap = 20.0f; p.sinks = g_sinks;
                    }
                    attn_dtype qdt = qdts[qi][0], odt = qdts[qi][1];
                    int64_t sq = opt ? H * D + 3 : 0, so = opt ? H * D + 1 : 0;
                    size_t wq = (size_t)(sq ? sq : H * D), wo = (size_t)(so ? so : H * D);
                    int Tq = qsl[4];
                    void *q = rand_rows(&rng, qdt, (size_t)Tq * wq, -2, 2);
                    void *qd = rand_rows(&rng, qdt, 5 * wq, -2, 2);
                    size_t ob = (size_t)Tq * wo * attn_dtype_size(odt);
                    size_t obd = 5 * wo * attn_dtype_size(odt);
                    void *out = xalloc(ob), *outd = xalloc(obd);
                    float lse[200 * 16];
                    attn_rows rq = {q, qdt, sq}, ro = {out, odt, so};
                    attn_rows rqd = {qd, qdt, sq}, rod = {outd, odt, so};
                    char cfg[80];
                    snprintf(cfg, sizeof cfg, "%s/bs%d/h%d-%d-d%d/%s-%s/%s", dt_tag(cdt), bs, H,
                             Hk, D, dt_tag(qdt), dt_tag(odt), opt ? "all" : "plain");
                    for (int vi = 0; vi < g_nvar; vi++) {
                        const attn_exec *e = &g_var[vi].e;
                        /* prefill: causal in the plain set, not causal with the options */
                        size_t wb = attn_paged_prefill_workspace_size(&p, e, &pre.cache, qsl,
                                                                      pre.lens, 4);
                        void *ws = make_ws(wb);
                        memset(out, 0x5a, ob);
                        memset(lse, 0x5a, sizeof lse);
                        int st = attn_paged_prefill(&p, e, rq, ro, &pre.cache, pre.tables,
                                                    pre.maxb, qsl, pre.lens, 4, !opt,
                                                    opt ? lse : NULL, ws, wb);
                        uint64_t h = fnv(FNV_START, out, ob);
                        if (opt) h = fnv(h, lse, sizeof(float) * (size_t)Tq * H);
                        snprintf(name, sizeof name, "prefill/%s/%s", cfg, g_var[vi].name);
                        emit(name, h, st);
                        free(ws);
                        for (int ver = 0; ver < 3; ver++) {
                            attn_paged_version pv = ver == 0 ? ATTN_PAGED_AUTO
                                                  : ver == 1 ? ATTN_PAGED_V1 : ATTN_PAGED_V2;
                            wb = attn_paged_decode_workspace_size(&p, e, &dec.cache, dec.lens, 5,
                                                                  pv);
                            ws = make_ws(wb);
                            memset(outd, 0x5a, obd);
                            memset(lse, 0x5a, sizeof lse);
                            st = attn_paged_decode(&p, e, rqd, rod, &dec.cache, dec.tables,
                                                   dec.maxb, dec.lens, 5, pv, opt ? lse : NULL,
                                                   ws, wb);
                            h = fnv(FNV_START, outd, obd);
                            if (opt) h = fnv(h, lse, sizeof(float) * 5 * H);
                            h = fnv_int(h, attn_paged_decode_version(&p, dec.lens, 5, pv));
                            snprintf(name, sizeof name, "decode-%s/%s/%s",
                                     ver == 0 ? "auto" : ver == 1 ? "v1" : "v2", cfg,
                                     g_var[vi].name);
                            emit(name, h, st);
                            free(ws);
                        }
                    }
                    free(q); free(qd); free(out); free(outd);
                }
            paged_free(&pre); paged_free(&dec);
        }
}

/* ---- attn_forward: every attention type, every backend the build has ---- */
typedef struct fw_batch {
    int np, nd, ctx[4], nq[4], dec[4];  /* prefills: prefix and new tokens; decodes: lengths */
    int plain;                          /* 1: context_lens = NULL (no prefix anywhere) */
} fw_batch;

static void forward_decoder(const attn_layer *L, const char *tag, attn_dtype cdt, attn_dtype adt,
                            const fw_batch *b, uint64_t seed) {
    enum { BS = 16 };
    const attn_params *p = &L->params;
    int Hk = p->num_kv_heads, D = p->head_size, QW = p->num_heads * D, KW = Hk * D;
    int nseq = b->np + b->nd;
    int32_t lens[8], full[8], ctx[4], qsl[5] = {0};
    for (int i = 0; i < b->np; i++) {
        ctx[i] = b->ctx[i]; qsl[i + 1] = qsl[i] + b->nq[i];
        lens[i] = b->ctx[i];              /* cached before the call */
        full[i] = b->ctx[i] + b->nq[i];   /* after it */
    }
    for (int i = 0; i < b->nd; i++) {
        lens[b->np + i] = b->dec[i] - 1;
        full[b->np + i] = b->dec[i];
    }
    uint64_t rng = seed;
    paged pg;
    /* every token of the full lengths written; the call then writes the new ones again */
    paged_make(&pg, &rng, cdt, BS, Hk, D, full, nseq, adt, dt_kscale(cdt), dt_vscale(cdt));
    int tokens = qsl[b->np] + b->nd;
    int64_t *slots = (int64_t *)xalloc(sizeof(int64_t) * (size_t)tokens);
    int t = 0;
    for (int i = 0; i < nseq; i++) {
        int n = i < b->np ? b->nq[i] : 1;
        for (int j = 0; j < n; j++) {
            int pos = lens[i] + j;
            slots[t++] = (int64_t)pg.tables[i * pg.maxb + pos / BS] * BS + pos % BS;
        }
    }
    slots[tokens > 3 ? 3 : 0] = -1;  /* one token not written (its key is the old one) */
    void *q = rand_rows(&rng, adt, (size_t)tokens * QW, -2, 2);
    void *k = rand_rows(&rng, adt, (size_t)tokens * KW, -2, 2);
    void *v = rand_rows(&rng, adt, (size_t)tokens * KW, -1, 1);
    attn_metadata md;
    memset(&md, 0, sizeof md);
    md.num_prefills = b->np; md.num_prefill_tokens = qsl[b->np]; md.num_decode_tokens = b->nd;
    md.slot_mapping = slots; md.seq_lens = full; md.query_start_loc = qsl;
    md.context_lens = b->plain ? NULL : ctx; md.block_tables = pg.tables;
    md.max_blocks_per_seq = pg.maxb;
    size_t ob = (size_t)tokens * QW * attn_dtype_size(adt);
    void *out = xalloc(ob), *snap = xalloc(pg.bytes);
    memcpy(snap, pg.mem, pg.bytes);
    attn_rows rq = {q, adt, 0}, rk = {k, adt, 0}, rv = {v, adt, 0}, ro = {out, adt, 0};
    for (int vi = 0; vi < g_nvar; vi++) {
        const attn_exec *e = &g_var[vi].e;
        memcpy(pg.mem, snap, pg.bytes);
        size_t wb = attn_forward_workspace_size(L, &md, e);
        void *ws = make_ws(wb);
        memset(out, 0x5a, ob);
        int st = attn_forward(L, e, rq, rk, rv, &pg.cache, &md, ro, ws, wb);
        uint64_t h = fnv_cache(fnv(FNV_START, out, ob), &pg.cache);
        char name[160];
        snprintf(name, sizeof name, "forward/%s/%s/%s", tag, dt_tag(cdt), g_var[vi].name);
        emit(name, h, st);
        free(ws);
    }
    free(slots); free(q); free(k); free(v); free(out); free(snap); paged_free(&pg);
}

/* Encoder, encoder-only (with and without a cache) and cross attention (prefill writing the
   cross cache, then a decode step over it). */
static void forward_encoders(attn_backend be, const attn_params *p, const char *ptag,
                             attn_dtype cdt, attn_dtype adt, uint64_t seed) {
    enum { BS = 16, NB = 12 };
    int H = p->num_heads, Hk = p->num_kv_heads, D = p->head_size, QW = H * D, KW = Hk * D;
    static const int32_t enc_lens[2] = {23, 41}, dec_lens[2] = {9, 4};
    int32_t enc_loc[3] = {0, 23, 64}, dec_loc[3] = {0, 9, 13};
    uint64_t rng = seed;
    int ET = enc_loc[2], DT = dec_loc[2];
    void *eq = rand_rows(&rng, adt, (size_t)ET * QW, -2, 2);
    void *ek = rand_rows(&rng, adt, (size_t)ET * KW, -2, 2);
    void *ev = rand_rows(&rng, adt, (size_t)ET * KW, -1, 1);
    void *dq = rand_rows(&rng, adt, (size_t)DT * QW, -2, 2);
    size_t ob = (size_t)ET * QW * attn_dtype_size(adt);
    void *out = xalloc(ob);
    size_t cb = attn_kv_cache_bytes(NB, BS, Hk, D, cdt);
    void *cmem = xalloc(cb);
    attn_kv_cache cache;
    attn_kv_cache_init(&cache, NB, BS, Hk, D, cdt, dt_kscale(cdt), dt_vscale(cdt), cmem, cb);
    int32_t cross_tables[2 * 4] = {5, 2, 7, 0, 9, 11, 1, 3};
    int64_t cross_slots[64], self_slots[64];
    for (int s = 0; s < 2; s++)
        for (int t = 0; t < enc_lens[s]; t++) {
            cross_slots[enc_loc[s] + t] = (int64_t)cross_tables[s * 4 + t / BS] * BS + t % BS;
            self_slots[enc_loc[s] + t] = cross_slots[enc_loc[s] + t];
        }
    attn_rows rq = {eq, adt, 0}, rk = {ek, adt, 0}, rv = {ev, adt, 0}, ro = {out, adt, 0};
    attn_rows rdq = {dq, adt, 0}, none = {NULL, adt, 0};
    for (int kind = 0; kind < 5; kind++) {
        /* 0 encoder, 1 encoder-only without a cache, 2 encoder-only with one, 3 cross prefill,
           4 cross decode (after 3) */
        attn_type ty = kind == 0 ? ATTN_ENCODER : kind <= 2 ? ATTN_ENCODER_ONLY
                                                            : ATTN_ENCODER_DECODER;
        attn_layer L;
        if (attn_layer_init(&L, p, ty, be) != ATTN_OK) continue;
        if (kind <= 1 && cdt >= ATTN_FP8_E4M3) continue;  /* no cache: once per rows dtype */
        attn_metadata md;
        memset(&md, 0, sizeof md);
        attn_rows q = rq, k = rk, v = rv;
        attn_kv_cache *c = &cache;
        int rows = ET;
        if (kind <= 2) {
            md.num_prefills = 2; md.num_prefill_tokens = ET; md.query_start_loc = enc_loc;
            if (kind == 0) {
                md.encoder_seq_lens = enc_lens; md.encoder_start_loc = enc_loc;
                md.num_encoder_tokens = ET;
            } else {
                md.seq_lens = enc_lens;
            }
            if (kind == 2) {
                md.slot_mapping = self_slots; md.block_tables = cross_tables;
                md.max_blocks_per_seq = 4;
            } else {
                c = NULL;
            }
        } else if (kind == 3) {
            md.num_prefills = 2; md.num_prefill_tokens = DT; md.query_start_loc = dec_loc;
            md.seq_lens = dec_lens; md.encoder_seq_lens = enc_lens; md.encoder_start_loc = enc_loc;
            md.num_encoder_tokens = ET; md.cross_slot_mapping = cross_slots;
            md.cross_block_tables = cross_tables; md.max_cross_blocks_per_seq = 4;
            q = rdq; rows = DT;
        } else {
            md.num_decode_tokens = 2; md.seq_lens = dec_lens; md.encoder_seq_lens = enc_lens;
            md.cross_block_tables = cross_tables; md.max_cross_blocks_per_seq = 4;
            q = rdq; k = none; v = none; rows = 2;
        }
        size_t rb = (size_t)rows * QW * attn_dtype_size(adt);
        for (int vi = 0; vi < g_nvar; vi++) {
            const attn_exec *e = &g_var[vi].e;
            if (kind != 4) memset(cmem, 0x3c, cb);
            if (kind == 4) {  /* the cross cache as the prefill left it */
                attn_rows wk = {ek, adt, 0}, wv = {ev, adt, 0};
                memset(cmem, 0x3c, cb);
                attn_write_kv(&cache, wk, wv, cross_slots, ET, NULL);
            }
            size_t wb = attn_forward_workspace_size(&L, &md, e);
            void *ws = make_ws(wb);
            memset(out, 0x5a, ob);
            int st = attn_forward(&L, e, q, k, v, c, &md, ro, ws, wb);
            uint64_t h = fnv(FNV_START, out, rb);
            if (c) h = fnv_cache(h, c);
            static const char *kn[5] = {"encoder", "encoder-only-nocache", "encoder-only",
                                        "cross-prefill", "cross-decode"};
            char name[160];
            snprintf(name, sizeof name, "forward/%s/%s/%s/%s/%s", attn_backend_name(be), kn[kind],
                     ptag, kind <= 1 ? dt_tag(adt) : dt_tag(cdt), g_var[vi].name);
            emit(name, h, st);
            free(ws);
        }
    }
    free(eq); free(ek); free(ev); free(dq); free(out); free(cmem);
}

static void run_forward(void) {
    static const fw_batch mixed = {3, 3, {40, 0, 130}, {25, 33, 7}, {600, 57, 1}, 0};
    static const fw_batch plain = {2, 2, {0, 0}, {19, 66}, {80, 3}, 1};
    for (int be = 0; be < 2; be++)
        for (int opt = 0; opt < 2; opt++) {
            attn_params p;
            memset(&p, 0, sizeof p);
            p.num_heads = 4; p.num_kv_heads = 2; p.head_size = opt ? 32 : 64;
            if (opt) {
                p.alibi_slopes = g_slopes; p.sliding_window = 45; p.logits_soft_cap = 10.0f;
                p.sinks = g_sinks;
            }
            attn_layer L;
            if (attn_layer_init(&L, &p, ATTN_DECODER, (attn_backend)be) != ATTN_OK) continue;
            for (int ci = 0; ci < N_DTYPES; ci++) {
                attn_dtype cdt = all_dtypes[ci];
                attn_dtype adt = cdt == ATTN_BF16 ? ATTN_BF16
                                 : cdt == ATTN_F16  ? ATTN_F16 : ATTN_F32;
                char tag[64];
                snprintf(tag, sizeof tag, "%s/decoder-mixed/%s",
                         attn_backend_name((attn_backend)be), opt ? "all" : "plain");
                forward_decoder(&L, tag, cdt, adt, &mixed, 4000 + be * 100 + opt * 10 + ci);
                snprintf(tag, sizeof tag, "%s/decoder-noprefix/%s",
                         attn_backend_name((attn_backend)be), opt ? "all" : "plain");
                forward_decoder(&L, tag, cdt, adt, &plain, 4500 + be * 100 + opt * 10 + ci);
                forward_encoders((attn_backend)be, &p, opt ? "all" : "plain", cdt,
                                 ci == 0 ? ATTN_F32 : adt, 5000 + be * 100 + opt * 10 + ci);
            }
        }
}

/* ---- attn_write_kv, attn_swap_blocks, attn_copy_blocks ---- */
static void run_kv(void) {
    enum { T = 50, NB = 9, HK = 2, D = 24 };
    static const attn_dtype src[4][2] = {{ATTN_F32, ATTN_F32}, {ATTN_F16, ATTN_F16},
                                        {ATTN_BF16, ATTN_BF16}, {ATTN_F32, ATTN_BF16}};
    char name[160];
    for (int ci = 0; ci < N_DTYPES; ci++)
        for (int bi = 0; bi < 2; bi++) {
            attn_dtype cdt = all_dtypes[ci];
            int bs = bi ? 16 : 1, nb = bi ? NB : NB * 16;
            size_t cb = attn_kv_cache_bytes(nb, bs, HK, D, cdt);
            void *cmem = xalloc(cb);
            attn_kv_cache cache;
            attn_kv_cache_init(&cache, nb, bs, HK, D, cdt, dt_kscale(cdt), dt_vscale(cdt), cmem,
                               cb);
            uint64_t rng = 6000 + ci * 4 + bi;
            int64_t slots[T];
            for (int t = 0; t < T; t++) slots[t] = rng_int(&rng, nb * bs);
            slots[4] = -1; slots[17] = -1; slots[9] = slots[30]; slots[31] = slots[2];
            slots[40] = slots[41];
            for (int si = 0; si < 4; si++) {
                int64_t stride = HK * D + 4;
                float range = is_fp8(cdt) ? 30.0f : 3.0f;  /* fp8: past the largest finite value */
                void *k = rand_rows(&rng, src[si][0], (size_t)T * stride, -range, range);
                void *v = rand_rows(&rng, src[si][1], (size_t)T * stride, -range, range);
                attn_rows rk = {k, src[si][0], stride}, rv = {v, src[si][1], stride};
                for (int vi = 0; vi < g_nvar; vi++) {
                    if (g_var[vi].e.f32_probs) continue;
                    memset(cmem, 0x3c, cb);
                    int st = attn_write_kv(&cache, rk, rv, slots, T, &g_var[vi].e);
                    snprintf(name, sizeof name, "write_kv/%s/bs%d/%s-%s/%s", dt_tag(cdt), bs,
                             dt_tag(src[si][0]), dt_tag(src[si][1]), g_var[vi].name);
                    emit(name, fnv_cache(FNV_START, &cache), st);
                }
                free(k); free(v);
            }
            free(cmem);
        }
    /* swap between two caches, within one, and copy-on-write over layers of different dtypes */
    for (int ci = 0; ci < N_DTYPES; ci++) {
        attn_dtype cdt = all_dtypes[ci];
        paged a, b;
        uint64_t rng = 6500 + ci;
        int32_t la[2] = {70, 33}, lb[1] = {5};
        paged_make(&a, &rng, cdt, 16, HK, D, la, 2, ATTN_F32, dt_kscale(cdt), dt_vscale(cdt));
        paged_make(&b, &rng, cdt, 16, HK, D, lb, 1, ATTN_F32, dt_kscale(cdt), dt_vscale(cdt));
        int64_t pairs[3][2] = {{3, 0}, {0, 2}, {6, 1}};  /* b has 4 blocks */
        int st = attn_swap_blocks(&a.cache, &b.cache, &pairs[0][0], 3);
        snprintf(name, sizeof name, "swap_blocks/%s/across", dt_tag(cdt));
        emit(name, fnv_cache(FNV_START, &b.cache), st);
        int64_t self[2][2] = {{1, 4}, {7, 2}};
        st = attn_swap_blocks(&a.cache, &a.cache, &self[0][0], 2);
        snprintf(name, sizeof name, "swap_blocks/%s/self", dt_tag(cdt));
        emit(name, fnv_cache(FNV_START, &a.cache), st);
        int64_t bad[2][2] = {{1, 2}, {3, 2}};  /* a destination twice: nothing written */
        st = attn_swap_blocks(&a.cache, &b.cache, &bad[0][0], 2);
        snprintf(name, sizeof name, "swap_blocks/%s/rejected", dt_tag(cdt));
        emit(name, fnv_cache(FNV_START, &b.cache), st);
        paged_free(&a); paged_free(&b);
    }
    {
        paged l[3];
        int32_t lens[2] = {60, 41};
        uint64_t rng = 6600;
        for (int i = 0; i < 3; i++) {  /* 7 + 3 spare = 10 blocks each */
            attn_dtype cdt = all_dtypes[i * 2];
            paged_make(&l[i], &rng, cdt, 16, 1 + i, 8 + 8 * i, lens, 2, ATTN_BF16,
                       dt_kscale(cdt), dt_vscale(cdt));
        }
        attn_kv_cache *layers[3] = {&l[0].cache, &l[1].cache, &l[2].cache};
        int64_t pairs[3][2] = {{2, 7}, {5, 8}, {0, 9}};
        int st = attn_copy_blocks(layers, 3, &pairs[0][0], 3);
        uint64_t h = FNV_START;
        for (int i = 0; i < 3; i++) h = fnv_cache(h, &l[i].cache);
        emit("copy_blocks/3-layers", h, st);
        for (int i = 0; i < 3; i++) paged_free(&l[i]);
    }
}

/* ---- conversions: attn_convert over every dtype pair, the scalar conversions exhaustively ---- */
static void run_convert(void) {
    enum { N = 4099 };
    uint64_t rng = 7000;
    float *f = (float *)xalloc(sizeof(float) * N);
    static const float special[] = {0.0f, -0.0f, 1.0f, -1.0f, 448.0f, 449.0f, 464.0f, -480.0f,
                                    57344.0f, 61440.0f, 65504.0f, 65520.0f, 1e-8f, -3e-5f,
                                    1.5e-7f, 6e-8f, 2e-3f, 3.4e38f, 1e-40f, -1e-45f};
    int ns = (int)(sizeof special / sizeof special[0]);
    for (int i = 0; i < N; i++) {
        float m = rng_uniform(&rng, -1, 1), e = rng_uniform(&rng, -24, 17);
        f[i] = i < ns ? special[i] : m * (float)pow(2.0, (double)(int)e);
    }
    f[ns] = INFINITY; f[ns + 1] = -INFINITY; f[ns + 2] = NAN;
    unsigned char *srcb = (unsigned char *)xalloc(4 * N), *dstb = (unsigned char *)xalloc(4 * N);
    char name[96];
    for (int si = 0; si < N_DTYPES; si++)
        for (int di = 0; di < N_DTYPES; di++) {
            attn_dtype s = all_dtypes[si], d = all_dtypes[di];
            /* sources: f32 values above, other dtypes every bit pattern in turn; an integer
               row (N elements, one row) a byte pattern over the buffer */
            if (s == ATTN_F32) memcpy(srcb, f, sizeof(float) * N);
            else if (attn_dtype_size(s) == 0)
                for (int i = 0; i < 4 * N; i++) srcb[i] = (unsigned char)(i * 7 + (i >> 8));
            else if (attn_dtype_size(s) == 1)
                for (int i = 0; i < N; i++) srcb[i] = (unsigned char)i;
            else
                for (int i = 0; i < N; i++) {
                    uint16_t u = (uint16_t)(i * 16 + (i >> 8));
                    memcpy(srcb + 2 * i, &u, 2);
                }
            for (int sc = 0; sc < 2; sc++) {
                float scale = sc ? 0.0625f * 1.3f : 0.0f;
                if (sc && !is_fp8(s) && !is_fp8(d)) continue;
                memset(dstb, 0x5a, 4 * N);
                int st = attn_convert(dstb, d, srcb, s, N, scale);
                snprintf(name, sizeof name, "convert/%s-%s/%s", dt_tag(s), dt_tag(d),
                         sc ? "scaled" : "unit");
                emit(name, fnv(FNV_START, dstb, 4 * N), st);
            }
        }
    /* in place, same dtype size */
    memcpy(dstb, f, sizeof(float) * N);
    emit("convert/f32-f32/inplace", fnv(FNV_START, dstb, 4 * N),
         attn_convert(dstb, ATTN_F32, dstb, ATTN_F32, N, 0));
    uint64_t h16 = FNV_START, hb16 = FNV_START, h8 = FNV_START, h5 = FNV_START;
    for (uint32_t i = 0; i < 65536; i++) {
        float a = attn_f16_to_f32((uint16_t)i), b = attn_bf16_to_f32((uint16_t)i);
        h16 = fnv(h16, &a, 4); hb16 = fnv(hb16, &b, 4);
    }
    for (uint32_t i = 0; i < 256; i++) {
        float a = attn_fp8_e4m3_to_f32((uint8_t)i), b = attn_fp8_e5m2_to_f32((uint8_t)i);
        h8 = fnv(h8, &a, 4); h5 = fnv(h5, &b, 4);
    }
    emit("scalar/f16-to-f32/all", h16, 0);
    emit("scalar/bf16-to-f32/all", hb16, 0);
    emit("scalar/e4m3-to-f32/all", h8, 0);
    emit("scalar/e5m2-to-f32/all", h5, 0);
    h16 = hb16 = h8 = h5 = FNV_START;
    for (uint32_t i = 0; i < (1u << 20); i++) {  /* f32 bit patterns spread over the range */
        uint32_t u = i * 4093u + (i >> 7);
        float x;
        memcpy(&x, &u, 4);
        uint16_t a = attn_f32_to_f16(x), b = attn_f32_to_bf16(x);
        uint8_t c = attn_f32_to_fp8_e4m3(x), d = attn_f32_to_fp8_e5m2(x);
        h16 = fnv(h16, &a, 2); hb16 = fnv(hb16, &b, 2); h8 = fnv(h8, &c, 1); h5 = fnv(h5, &d, 1);
    }
    emit("scalar/f32-to-f16/grid", h16, 0);
    emit("scalar/f32-to-bf16/grid", hb16, 0);
    emit("scalar/f32-to-e4m3/grid", h8, 0);
    emit("scalar/f32-to-e5m2/grid", h5, 0);
    free(f); free(srcb); free(dstb);
}

/* ---- bias builders ---- */
static void run_bias(void) {
    static const int hs[] = {1, 2, 3, 5, 8, 12, 16, 24, 33, 64};
    float slopes[64], bias[8 * 40 * 40];
    char name[96];
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) {
        memset(slopes, 0x5a, sizeof slopes);
        attn_alibi_slopes(hs[i], slopes);
        snprintf(name, sizeof name, "alibi_slopes/h%d", hs[i]);
        emit(name, fnv(FNV_START, slopes, sizeof slopes), 0);
    }
    static const int shapes[4][2] = {{9, 20}, {20, 9}, {1, 37}, {40, 40}};
    memcpy(slopes, g_slopes, sizeof g_slopes);
    for (int si = 0; si < 4; si++)
        for (int c = 0; c < 2; c++) {
            int lq = shapes[si][0], lk = shapes[si][1], st;
            memset(bias, 0x5a, sizeof bias);
            st = attn_make_alibi_bias(8, slopes, lq, lk, c, bias);
            snprintf(name, sizeof name, "alibi_bias/%dx%d/c%d", lq, lk, c);
            emit(name, fnv(FNV_START, bias, sizeof bias), st);
            for (int w = 1; w < 40; w += 12) {
                memset(bias, 0x5a, sizeof bias);
                st = attn_make_sliding_window_bias(w, lq, lk, c, bias);
                snprintf(name, sizeof name, "window_bias/%dx%d/w%d/c%d", lq, lk, w, c);
                emit(name, fnv(FNV_START, bias, sizeof bias), st);
            }
            for (int o = 0; o < 4; o++) {
                attn_params p;
                memset(&p, 0, sizeof p);
                p.num_heads = 8; p.num_kv_heads = 2; p.head_size = 16;
                if (o & 1) p.alibi_slopes = slopes;
                if (o & 2) p.sliding_window = 7;
                memset(bias, 0x5a, sizeof bias);
                st = attn_make_bias(&p, lq, lk, c, bias);
                snprintf(name, sizeof name, "make_bias/%dx%d/o%d/c%d", lq, lk, o, c);
                emit(name, fnv(FNV_START, bias, sizeof bias), st);
            }
        }
}

/* ---- attn_merge_states ---- */
static void run_merge(void) {
    enum { T = 13, H = 4, D = 40 };
    static const attn_dtype dts[5][3] = {
        {ATTN_F32, ATTN_F32, ATTN_F32}, {ATTN_BF16, ATTN_F16, ATTN_F32},
        {ATTN_F16, ATTN_F16, ATTN_F16}, {ATTN_F32, ATTN_F32, ATTN_BF16},
        {ATTN_BF16, ATTN_BF16, ATTN_BF16}};
    uint64_t rng = 8000;
    float la[T * H], lb[T * H], lo[T * H];
    for (int i = 0; i < T * H; i++) {
        la[i] = rng_uniform(&rng, -5, 15);
        lb[i] = rng_uniform(&rng, -5, 15);
    }
    la[3] = -INFINITY; lb[7] = -INFINITY; la[9] = lb[9] = -INFINITY; la[11] = lb[11];
    char name[96];
    for (int di = 0; di < 5; di++)
        for (int alias = 0; alias < 2; alias++) {
            const attn_dtype *dt = dts[di];
            if (alias && dt[0] != dt[2]) continue;
            int64_t sa = H * D + 3, sb = 0;
            void *a = rand_rows(&rng, dt[0], (size_t)T * sa, -1, 1);
            void *b = rand_rows(&rng, dt[1], (size_t)T * H * D, -1, 1);
            size_t ob = (size_t)T * (alias ? sa : H * D) * attn_dtype_size(dt[2]);
            void *o = alias ? a : xalloc(ob);
            if (!alias) memset(o, 0x5a, ob);
            memset(lo, 0x5a, sizeof lo);
            attn_rows ra = {a, dt[0], sa}, rb = {b, dt[1], sb}, ro = {o, dt[2], alias ? sa : 0};
            int st = attn_merge_states(T, H, D, ra, la, rb, lb, ro, lo);
            snprintf(name, sizeof name, "merge_states/%s-%s-%s%s", dt_tag(dt[0]), dt_tag(dt[1]),
                     dt_tag(dt[2]), alias ? "/aliased" : "");
            emit(name, fnv(fnv(FNV_START, o, ob), lo, sizeof lo), st);
            free(a); free(b);
            if (!alias) free(o);
        }
}

/* ---- block pool and sequences: one fixed sequence of operations, hashed after each ---- */
static void run_pool(void) {
    enum { NB = 24, BS = 16, MAXB = 12 };
    size_t pb = attn_block_pool_bytes(NB);
    void *mem = xalloc(pb);
    memset(mem, 0x5a, pb);
    attn_block_pool pool;
    attn_seq s[3];
    int32_t tables[3][MAXB];
    int64_t slots[400], cow[1][2];
    int n_cow, step = 0;
    memset(tables, 0x5a, sizeof tables);
    int st = attn_block_pool_init(&pool, NB, BS, mem, pb);
    for (int i = 0; i < 3; i++) attn_seq_init(&s[i], tables[i], MAXB);
    char name[64];
    for (int op = 0; op < 16; op++) {
        memset(slots, 0x5a, sizeof slots);
        memset(cow, 0x5a, sizeof cow);
        n_cow = -7;
        switch (op) {
            case 0: break;  /* the pool as init left it */
            case 1: st = attn_seq_append(&pool, &s[0], 40, slots, cow, &n_cow); break;
            case 2: st = attn_seq_fork(&pool, &s[0], &s[1]); break;
            case 3: st = attn_seq_append(&pool, &s[1], 5, slots, cow, &n_cow); break;  /* CoW */
            case 4: st = attn_seq_append(&pool, &s[0], 3, slots, cow, &n_cow); break;
            case 5: st = attn_seq_truncate(&pool, &s[0], 20); break;
            case 6: st = attn_seq_fork(&pool, &s[1], &s[2]); break;
            case 7: st = attn_seq_append(&pool, &s[2], 100, slots, cow, &n_cow); break;
            case 8: attn_seq_release(&pool, &s[1]); st = 0; break;
            case 9: st = attn_seq_append(&pool, &s[0], 170, slots, cow, &n_cow); break;
            case 10: st = attn_seq_append(&pool, &s[0], 150, slots, cow, &n_cow); break;
            case 11: st = attn_seq_append(&pool, &s[1], 1, slots, NULL, NULL); break;
            case 12: st = attn_seq_truncate(&pool, &s[2], 0); break;
            case 13: st = attn_seq_append(&pool, &s[2], 33, slots, cow, &n_cow); break;
            case 14: attn_seq_release(&pool, &s[0]); st = 0; break;
            default: attn_seq_release(&pool, &s[2]); attn_seq_release(&pool, &s[1]); st = 0; break;
        }
        uint64_t h = fnv(FNV_START, pool.refcount, sizeof(int32_t) * NB);
        h = fnv(h, pool.free_ids, sizeof(int32_t) * NB);
        h = fnv(h, tables, sizeof tables);
        h = fnv(h, slots, sizeof slots);
        h = fnv(h, cow, sizeof cow);
        h = fnv_int(h, n_cow);
        h = fnv_int(h, pool.num_free);
        h = fnv_int(h, attn_block_pool_free_count(&pool));
        h = fnv_int(h, attn_block_pool_used_count(&pool));
        for (int i = 0; i < 3; i++) { h = fnv_int(h, s[i].num_blocks); h = fnv_int(h, s[i].len); }
        snprintf(name, sizeof name, "pool/op%02d", step++);
        emit(name, h, st);
    }
    free(mem);
    /* the sizing helpers: the element dtypes, then the integer caches where the header has them */
    for (int part = 0; part < 2 && (part == 0 || N_DTYPES > 5); part++) {
    uint64_t h = FNV_START;
    for (int ci = part ? 5 : 0; ci < (part ? N_DTYPES : 5); ci++)
        for (int bs = 1; bs <= 32; bs *= 4) {
            h = fnv_int(h, (int64_t)attn_kv_cache_bytes(37, bs, 3, 80, all_dtypes[ci]));
            h = fnv_int(h, (int64_t)attn_kv_block_bytes(5, bs, 3, 80, all_dtypes[ci]));
            h = fnv_int(h, attn_kv_blocks_for_bytes((size_t)1 << 26, 5, bs, 3, 80, all_dtypes[ci]));
            h = fnv_int(h, attn_kv_max_tokens((size_t)1 << 26, 5, bs, 3, 80, all_dtypes[ci]));
            h = fnv_int(h, attn_kv_blocks_for_tokens(1000 + ci, bs));
            h = fnv_int(h, attn_kv_tokens_for_blocks(77 + ci, bs));
            h = fnv_int(h, (int64_t)attn_block_pool_bytes(100 * bs + ci));
        }
    emit(part ? "kv_sizes/int8-int4" : "kv_sizes", h, 0);
    }
}

int main(int argc, char **argv) {
    /* an optional argument keeps only the cases whose group (the text before the first '/')
       it names, e.g. "sdpa" */
    const char *only = argc > 1 ? argv[1] : NULL;
    make_variants();
    printf("# isas: %s\n", g_isas);
    printf("# dtypes:");
    for (int ci = 0; ci < N_DTYPES; ci++) printf(" %s", dt_tag(all_dtypes[ci]));
    printf("\n");
#define GROUP(g, fn) if (!only || strcmp(only, g) == 0) fn()
    GROUP("sdpa", run_sdpa);
    GROUP("paged", run_paged);
    GROUP("forward", run_forward);
    GROUP("kv", run_kv);
    GROUP("convert", run_convert);
    GROUP("bias", run_bias);
    GROUP("merge", run_merge);
    GROUP("pool", run_pool);
#undef GROUP
    printf("# cases: %d\n", g_cases);
    return 0;
}
