/* kv_accuracy - the KV cache formats' own error: what storing keys and values in each cache
   dtype does to decode's attention logits and output, against the same keys and values kept in
   f32 (the kernels compute on the stored values exactly; this is the rounding of the format).

   kv_accuracy [-L tokens] [-s sequences] [-H heads] [-D head_size] [--seed N]

   Each sequence has one KV head of L tokens and H query heads over it (GQA as Llama 3 8B: G = 8
   by default), D = 128. Two distributions of keys and values:
   - outliers: keys Gaussian N(0, 1) with 4 outlier channels (fixed per sequence, as LLM keys
     have a few massive channels) scaled by 20; values N(0, 1);
   - uniform: keys and values uniform in [-1, 1].
   Queries are Gaussian, scaled so that the logits (q.k / sqrt(D)) have a standard deviation of 2
   (softmax over 2048 keys neither flat nor one-hot; with the outliers, most of it is theirs).
   Each dtype's cache is written by attn_write_kv (fp8 at scale 1, as the runner and attn_bench
   run it; the integer caches carry their own scales) and read by attn_paged_decode; its output
   is compared with that of the f32 cache. The logits are computed in double over the keys as the
   cache holds them (attn_convert to the dtype and back: the same rounding as attn_write_kv) and
   over the f32 keys. Errors, over every (sequence, head, token) or (sequence, head, dim):
   rel RMS = RMS(error) / RMS(f32 value), max = max |error| (logits, in logit units) or
   max |error| / RMS(f32 output) (output).
   Build: make bench-kv-accuracy (cc -std=c99 -O2 -fopenmp -I. bench/kv_accuracy.c -lm). */
#define ATTN_IMPLEMENTATION
#include "attn.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OUTLIER_CHANNELS = 4 };
static const float outlier_gain = 20.0f;

typedef struct setup { int L, S, H, D; unsigned long long seed; } setup;

static unsigned long long rng_state;
static double uniform01(void) {  /* splitmix64, 53 bits */
    unsigned long long z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) * (1.0 / 9007199254740992.0);
}
static double gaussian(void) {  /* Box-Muller */
    double u = uniform01(), v = uniform01();
    return sqrt(-2.0 * log(u > 0.0 ? u : 1e-300)) * cos(6.283185307179586 * v);
}

static void *xcalloc(size_t n) {
    void *p = calloc(1, n);
    if (!p) { fprintf(stderr, "kv_accuracy: out of memory (%zu bytes)\n", n); exit(1); }
    return p;
}

/* Keys and values [S][L][D] and queries [S][H][D] of one distribution. */
static void fill(const setup *u, int uniform, float *k, float *v, float *q) {
    size_t row = (size_t)u->D;
    double gain2 = (double)outlier_gain * outlier_gain;
    double key_var = uniform ? 1.0 / 3.0
                             : (u->D - OUTLIER_CHANNELS + OUTLIER_CHANNELS * gain2) / u->D;
    double q_sd = 2.0 / sqrt(key_var);  /* the logits' standard deviation 2 */
    for (int s = 0; s < u->S; s++) {
        int outlier[OUTLIER_CHANNELS];
        for (int c = 0; c < OUTLIER_CHANNELS; c++) {  /* distinct channels (D >= 4 of them) */
            int again = 1;
            while (again) {
                outlier[c] = (int)(uniform01() * u->D);
                again = 0;
                for (int e = 0; e < c; e++) again |= outlier[e] == outlier[c];
            }
        }
        for (int t = 0; t < u->L; t++) {
            float *kr = k + ((size_t)s * u->L + t) * row, *vr = v + ((size_t)s * u->L + t) * row;
            for (int d = 0; d < u->D; d++) {
                kr[d] = (float)(uniform ? 2.0 * uniform01() - 1.0 : gaussian());
                vr[d] = (float)(uniform ? 2.0 * uniform01() - 1.0 : gaussian());
            }
            for (int c = 0; c < OUTLIER_CHANNELS && !uniform; c++) kr[outlier[c]] *= outlier_gain;
        }
        for (size_t i = 0; i < (size_t)u->H * row; i++)
            q[(size_t)s * u->H * row + i] = (float)(q_sd * gaussian());
    }
}

/* Decode's output [S][H][D] over a cache of dtype holding k and v (sequence s in slots
   [s*L, (s+1)*L), its blocks in order). */
static void decode(const setup *u, attn_dtype dt, const float *k, const float *v, const float *q,
                   float *out) {
    const int bs = 16, blocks_per_seq = (u->L + bs - 1) / bs, nb = u->S * blocks_per_seq;
    size_t tokens = (size_t)u->S * u->L;
    size_t bytes = attn_kv_cache_bytes(nb, bs, 1, u->D, dt);
    void *mem = xcalloc(bytes);
    int64_t *slots = (int64_t *)xcalloc(sizeof(int64_t) * tokens);
    int32_t *tables = (int32_t *)xcalloc(sizeof(int32_t) * (size_t)nb);
    int32_t *lens = (int32_t *)xcalloc(sizeof(int32_t) * (size_t)u->S);
    for (int s = 0; s < u->S; s++) {
        lens[s] = u->L;
        for (int b = 0; b < blocks_per_seq; b++)
            tables[s * blocks_per_seq + b] = s * blocks_per_seq + b;
        for (int t = 0; t < u->L; t++)
            slots[(size_t)s * u->L + t] = (int64_t)s * blocks_per_seq * bs + t;
    }
    attn_kv_cache cache;
    attn_params p = {u->H, 1, u->D, 0.0f, NULL, 0, 0.0f, NULL};
    attn_rows kr = {(void *)k, ATTN_F32, 0}, vr = {(void *)v, ATTN_F32, 0};
    attn_rows qr = {(void *)q, ATTN_F32, 0}, outr = {out, ATTN_F32, 0};
    attn_status st = attn_kv_cache_init(&cache, nb, bs, 1, u->D, dt, 1.0f, 1.0f, mem, bytes);
    if (st == ATTN_OK) st = attn_write_kv(&cache, kr, vr, slots, (int)tokens, NULL);
    size_t wsb = attn_paged_decode_workspace_size(&p, NULL, &cache, lens, u->S, ATTN_PAGED_AUTO);
    void *ws = xcalloc(wsb ? wsb : 1);
    if (st == ATTN_OK)
        st = attn_paged_decode(&p, NULL, qr, outr, &cache, tables, blocks_per_seq, lens, u->S,
                               ATTN_PAGED_AUTO, NULL, ws, wsb);
    if (st != ATTN_OK) {
        fprintf(stderr, "kv_accuracy: %s cache: %s\n", attn_dtype_name(dt), attn_status_str(st));
        exit(1);
    }
    free(ws); free(mem); free(slots); free(tables); free(lens);
}

/* The keys k as a cache of dtype holds them (row by row through attn_convert, scale 1). */
static void as_stored(const setup *u, attn_dtype dt, const float *k, float *held) {
    size_t rows = (size_t)u->S * u->L, D = (size_t)u->D;
    unsigned char *raw = (unsigned char *)xcalloc(attn_dtype_row_bytes(dt, u->D));
    for (size_t r = 0; r < rows; r++)
        if (attn_convert(raw, dt, k + r * D, ATTN_F32, D, 1.0f) != ATTN_OK ||
            attn_convert(held + r * D, ATTN_F32, raw, dt, D, 1.0f) != ATTN_OK) {
            fprintf(stderr, "kv_accuracy: attn_convert to %s failed\n", attn_dtype_name(dt));
            exit(1);
        }
    free(raw);
}

typedef struct errors { double sq, ref_sq, max; long n; } errors;
static void add(errors *e, double got, double want) {
    double d = fabs(got - want);
    e->sq += d * d; e->ref_sq += want * want; e->n++;
    if (d > e->max) e->max = d;
}
static double rel_rms(const errors *e) { return sqrt(e->sq / e->ref_sq); }
static double ref_rms(const errors *e) { return sqrt(e->ref_sq / (double)e->n); }

/* Logit errors of the keys held against the f32 keys (double products). */
static errors logit_errors(const setup *u, const float *k, const float *held, const float *q) {
    errors e = {0, 0, 0, 0};
    size_t D = (size_t)u->D;
    double inv = 1.0 / sqrt((double)u->D);
    for (int s = 0; s < u->S; s++)
        for (int h = 0; h < u->H; h++) {
            const float *qh = q + ((size_t)s * u->H + h) * D;
            for (int t = 0; t < u->L; t++) {
                size_t at = ((size_t)s * u->L + t) * D;
                double x = 0.0, y = 0.0;
                for (size_t d = 0; d < D; d++) {
                    x += (double)qh[d] * k[at + d];
                    y += (double)qh[d] * held[at + d];
                }
                add(&e, y * inv, x * inv);
            }
        }
    return e;
}

int main(int argc, char **argv) {
    setup u = {2048, 8, 8, 128, 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) { fprintf(stderr, "kv_accuracy: %s needs a value\n", a); return 2; }
        if (!strcmp(a, "-L")) u.L = atoi(v);
        else if (!strcmp(a, "-s")) u.S = atoi(v);
        else if (!strcmp(a, "-H")) u.H = atoi(v);
        else if (!strcmp(a, "-D")) u.D = atoi(v);
        else if (!strcmp(a, "--seed")) u.seed = strtoull(v, NULL, 10);
        else {
            fprintf(stderr, "usage: kv_accuracy [-L tokens] [-s seqs] [-H heads] [-D head_size] "
                            "[--seed N]\n");
            return 2;
        }
        i++;
    }
    if (u.L < 1 || u.S < 1 || u.H < 1 || u.D < OUTLIER_CHANNELS || u.D > ATTN_MAX_HEAD_SIZE) {
        fprintf(stderr, "kv_accuracy: -L %d -s %d -H %d -D %d: each must be >= 1 (D in %d..%d)\n",
                u.L, u.S, u.H, u.D, OUTLIER_CHANNELS, ATTN_MAX_HEAD_SIZE);
        return 2;
    }
    static const attn_dtype dts[] = {ATTN_F16, ATTN_BF16, ATTN_FP8_E4M3, ATTN_FP8_E5M2, ATTN_INT8,
                                     ATTN_INT4};
    size_t kv = (size_t)u.S * u.L * u.D, qn = (size_t)u.S * u.H * u.D;
    float *k = (float *)xcalloc(sizeof(float) * kv), *v = (float *)xcalloc(sizeof(float) * kv);
    float *held = (float *)xcalloc(sizeof(float) * kv), *q = (float *)xcalloc(sizeof(float) * qn);
    float *ref = (float *)xcalloc(sizeof(float) * qn), *out = (float *)xcalloc(sizeof(float) * qn);
    printf("# %d sequences x %d tokens, one KV head, %d query heads, D %d, seed %llu; isa %s\n",
           u.S, u.L, u.H, u.D, u.seed, attn_cpu_features());
    printf("| keys | dtype | bits/elem | logit rel RMS | logit max | output rel RMS "
           "| output max/RMS |\n");
    printf("|---|---|---|---|---|---|---|\n");
    for (int uniform = 0; uniform < 2; uniform++) {
        rng_state = u.seed;
        fill(&u, uniform, k, v, q);
        decode(&u, ATTN_F32, k, v, q, ref);
        errors lf = logit_errors(&u, k, k, q), of = {0, 0, 0, 0};
        for (size_t j = 0; j < qn; j++) add(&of, ref[j], ref[j]);
        printf("| %s | f32 (logits RMS %.2f, output RMS %.3f) | 32 | - | - | - | - |\n",
               uniform ? "uniform" : "outliers", ref_rms(&lf), ref_rms(&of));
        for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
            as_stored(&u, dts[i], k, held);
            errors le = logit_errors(&u, k, held, q), oe = {0, 0, 0, 0};
            decode(&u, dts[i], k, v, q, out);
            for (size_t j = 0; j < qn; j++) add(&oe, out[j], ref[j]);
            printf("| %s | %s | %.4g | %.2e | %.3g | %.2e | %.3g |\n",
                   uniform ? "uniform" : "outliers", attn_dtype_name(dts[i]),
                   8.0 * (double)attn_dtype_row_bytes(dts[i], u.D) / u.D,
                   rel_rms(&le), le.max, rel_rms(&oe), oe.max / ref_rms(&oe));
        }
    }
    free(k); free(v); free(held); free(q); free(ref); free(out);
    return 0;
}
