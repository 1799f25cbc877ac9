/* fuzz.h - what the libFuzzer harnesses of attn.h share (not part of the library).
   public domain or MIT, see attn.h

   Each harness (tests/fuzz/fuzz_*.c) includes this file, which includes the declarations of
   attn.h and the reference (tests/ref.h), and defines LLVMFuzzerTestOneInput; it links with
   tests/fuzz/impl.c, the implementation built once with the same instrumentation. The input bytes
   are read as a stream of choices (fz_in): every choice
   has a default when the input runs out, so any input is a valid test case, and libFuzzer's
   mutations steer the choices. Values of activations and caches come from a splitmix64 stream
   seeded by the input, so the fuzzer explores shapes, lengths, tables, flags and hostile
   parameters rather than numbers.

   A harness checks properties, not only that nothing crashes:
   - a model written from the documentation in attn.h predicts the status (fz_expect);
   - a call that returns an error leaves every output, cache and pool byte for byte as it was
     (fz_snap: copies taken before the call, compared after);
   - an accepted call on small shapes matches tests/ref.h;
   - the outputs do not depend on the thread count (fz_exec: a caller pool that runs the items
     serially in a scrambled order with rotating thread indices, at 1 to 16 threads).
   A broken property prints what was seen and aborts, which libFuzzer reports as a crash and
   saves as an input that reproduces it. */
#ifndef ATTN_FUZZ_H
#define ATTN_FUZZ_H
#include "../../attn.h"
#include "../ref.h"
#define ATTN_TEST_IMPLEMENTATION  /* its random numbers (splitmix64); no test runner is used */
#define ATTN_TEST_NO_SHORT_NAMES
#include "../attn_test.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define FZ_FUNC static __attribute__((unused))
#else
#define FZ_FUNC static
#endif
#define FZ_MAX(a, b) ((a) > (b) ? (a) : (b))
#define FZ_MIN(a, b) ((a) < (b) ? (a) : (b))

/* ---- failures ------------------------------------------------------------------------------ */
#define FZ_REQUIRE(cond, ...)                                                                     \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            fprintf(stderr, "invariant failed at %s:%d: %s\n  ", __FILE__, __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                                         \
            fputc('\n', stderr);                                                                  \
            abort();                                                                              \
        }                                                                                         \
    } while (0)

/* ---- the input as a stream of choices ------------------------------------------------------ */
typedef struct fz_in { const uint8_t *p; size_t n, at; } fz_in;

FZ_FUNC unsigned fz_u8(fz_in *in) { return in->at < in->n ? in->p[in->at++] : 0u; }
FZ_FUNC uint32_t fz_u32(fz_in *in) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v = v << 8 | fz_u8(in);
    return v;
}
/* An int in [lo, hi] (inclusive), from as few bytes as the span needs. */
FZ_FUNC int fz_int(fz_in *in, int lo, int hi) {
    uint32_t span = (uint32_t)((int64_t)hi - lo), v = 0;
    if (hi <= lo) return lo;
    for (uint32_t s = span; s; s >>= 8) v = v << 8 | fz_u8(in);
    return (int)((int64_t)lo + (int64_t)(v % ((uint64_t)span + 1)));
}
/* 1 with probability about per256/256 (0 once the input is used up). */
FZ_FUNC int fz_chance(fz_in *in, int per256) { return in->at < in->n && (int)fz_u8(in) < per256; }

/* ---- values -------------------------------------------------------------------------------- */
FZ_FUNC uint64_t fz_rand(uint64_t *s) { return attn_test_rand_u64(s); }  /* splitmix64 */
FZ_FUNC float fz_uniform(uint64_t *s, float lo, float hi) {
    return lo + (hi - lo) * (float)((double)(fz_rand(s) >> 11) * (1.0 / 9007199254740992.0));
}
/* A float that a parameter check must refuse: NaN or an infinity. */
FZ_FUNC float fz_hostile_float(fz_in *in) {
    static const float v[] = {NAN, INFINITY, -INFINITY, -NAN};
    return v[fz_int(in, 0, 3)];
}

/* Stores x in dtype dt, rounded to nearest even (fp8 saturating). */
FZ_FUNC void fz_put(void *raw, attn_dtype dt, size_t i, float x) {
    switch (dt) {
        case ATTN_F16: ((uint16_t *)raw)[i] = attn_f32_to_f16(x); break;
        case ATTN_BF16: ((uint16_t *)raw)[i] = attn_f32_to_bf16(x); break;
        case ATTN_FP8_E4M3: ((uint8_t *)raw)[i] = attn_f32_to_fp8_e4m3(x); break;
        case ATTN_FP8_E5M2: ((uint8_t *)raw)[i] = attn_f32_to_fp8_e5m2(x); break;
        default: ((float *)raw)[i] = x; break;
    }
}
/* Bytes per element of a dtype the harness may pass (0 for one that is not an attn_dtype). */
FZ_FUNC size_t fz_esize(attn_dtype dt) {
    return dt == ATTN_F32 ? 4 : dt == ATTN_F16 || dt == ATTN_BF16 ? 2
         : dt == ATTN_FP8_E4M3 || dt == ATTN_FP8_E5M2 ? 1 : 0;
}
FZ_FUNC int fz_is_fp8(attn_dtype dt) { return dt == ATTN_FP8_E4M3 || dt == ATTN_FP8_E5M2; }
/* The integer caches: rows of groups of codes with a scale each (attn_dtype_row_bytes), cache
   dtypes only; fz_esize is 0 for them (no element of its own), ref_row_bytes counts their rows. */
FZ_FUNC int fz_is_int(attn_dtype dt) { return dt == ATTN_INT8 || dt == ATTN_INT4; }
FZ_FUNC int fz_is_act(attn_dtype dt) { return dt == ATTN_F32 || dt == ATTN_F16 || dt == ATTN_BF16; }

/* Fills n elements of dtype dt with values in [lo, hi) and returns them, as stored, in f
   (f may be NULL). */
FZ_FUNC void fz_fill(uint64_t *rng, attn_dtype dt, void *raw, float *f, size_t n, float lo,
                     float hi) {
    for (size_t i = 0; i < n; i++) {
        fz_put(raw, dt, i, fz_uniform(rng, lo, hi));
        if (f) f[i] = ref_element(raw, dt, i);
    }
}

FZ_FUNC void *fz_alloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    FZ_REQUIRE(p != NULL, "out of memory (%zu bytes)", bytes);
    return p;
}

/* ---- snapshots: an error must leave these bytes as they were --------------------------------- */
#define FZ_MAX_SNAPS 16
typedef struct fz_snaps {
    int n;
    const void *p[FZ_MAX_SNAPS];
    size_t bytes[FZ_MAX_SNAPS];
    void *copy[FZ_MAX_SNAPS];
    const char *name[FZ_MAX_SNAPS];
} fz_snaps;

/* Copies the region; returns its index, or -1 for an empty one (NULL or 0 bytes). */
FZ_FUNC int fz_snap(fz_snaps *s, const char *name, const void *p, size_t bytes) {
    if (!p || !bytes) return -1;
    FZ_REQUIRE(s->n < FZ_MAX_SNAPS, "too many snapshots");
    s->p[s->n] = p; s->bytes[s->n] = bytes; s->name[s->n] = name;
    s->copy[s->n] = fz_alloc(bytes);
    memcpy(s->copy[s->n], p, bytes);
    return s->n++;
}
/* Index of the first region whose bytes changed, or -1. */
FZ_FUNC int fz_snaps_changed(const fz_snaps *s) {
    for (int i = 0; i < s->n; i++)
        if (memcmp(s->p[i], s->copy[i], s->bytes[i])) return i;
    return -1;
}
FZ_FUNC void fz_snaps_restore(const fz_snaps *s) {
    for (int i = 0; i < s->n; i++) memcpy((void *)(uintptr_t)s->p[i], s->copy[i], s->bytes[i]);
}
FZ_FUNC void fz_snaps_free(fz_snaps *s) {
    for (int i = 0; i < s->n; i++) free(s->copy[i]);
    s->n = 0;
}
/* After a call that returned st (name): an error leaves every snapshot as it was. */
FZ_FUNC void fz_unchanged_on_error(const fz_snaps *s, attn_status st, const char *call) {
    int i = st == ATTN_OK ? -1 : fz_snaps_changed(s);
    FZ_REQUIRE(i < 0, "%s returned %s but changed %s", call, attn_status_str(st), s->name[i]);
}

/* ---- expected statuses ------------------------------------------------------------------- */
/* The set of statuses the documentation allows for a call: empty = ATTN_OK; otherwise the call
   must return one of them (several violations may be reported in any order). */
typedef struct fz_expect { unsigned bits; } fz_expect;
FZ_FUNC void fz_bad(fz_expect *e, attn_status st) { e->bits |= 1u << (unsigned)(-(int)st); }
FZ_FUNC void fz_bad_if(fz_expect *e, int cond, attn_status st) { if (cond) fz_bad(e, st); }
FZ_FUNC int fz_ok(const fz_expect *e) { return e->bits == 0; }
/* What attn_forward wrote into the exec's message buffer (fz_exec gives it one), for reports. */
static char fz_error_msg[200];
FZ_FUNC void fz_check_status(const fz_expect *e, attn_status st, const char *call) {
    if (e->bits == 0) {
        FZ_REQUIRE(st == ATTN_OK, "%s returned %s, the model says ok (%s)", call,
                   attn_status_str(st), fz_error_msg);
    } else {
        char want[256] = "";
        for (int c = 1; c < 8; c++)
            if (e->bits & (1u << c)) {
                strcat(want, " ");
                strcat(want, attn_status_str((attn_status)-c));
            }
        FZ_REQUIRE(st != ATTN_OK && (e->bits & (1u << (unsigned)(-(int)st))),
                   "%s returned %s (%s), the model expects one of:%s", call, attn_status_str(st),
                   fz_error_msg, want);
    }
}

/* ---- execution: a scrambled serial pool at a chosen thread count ----------------------------- */
/* Runs the items in a permuted order (stride by a prime, or reversed) with rotating thread
   indices: results must not depend on who runs which item, nor on how many threads there are
   (the thread count still shapes the plan: scratch per thread, decode spans). */
FZ_FUNC void fz_pool_for(void *pool, int num_items, int num_threads, attn_task_fn *task,
                         void *ctx) {
    int rev = pool != NULL;
    for (int k = 0; k < num_items; k++) {
        int item = (int)(((int64_t)k * 7919 + 13) % num_items);
        if (rev || num_items % 7919 == 0) item = num_items - 1 - k;
        task(ctx, item, k % num_threads);
    }
}

/* The ISAs this machine runs, scalar first. */
FZ_FUNC int fz_isas(attn_isa *out) {
    int n = 0;
    for (int i = ATTN_ISA_SCALAR; i < ATTN_ISA_COUNT; i++)
        if (attn_isa_supported((attn_isa)i)) out[n++] = (attn_isa)i;
    return n;
}

/* An exec chosen by the input, and whether the model expects it to be refused: mostly a valid
   one on the pool at 1..16 threads; sometimes NULL, a negative thread count, an ISA out of range
   or one this CPU lacks, an engine this build lacks. */
FZ_FUNC const attn_exec *fz_exec(fz_in *in, attn_exec *e, fz_expect *ex) {
    attn_isa isas[ATTN_ISA_COUNT];
    int n = fz_isas(isas), r = fz_int(in, 0, 31);
    memset(e, 0, sizeof *e);
    fz_error_msg[0] = 0;
    e->error_msg = fz_error_msg;
    e->error_msg_bytes = sizeof fz_error_msg;
    e->parallel_for = fz_pool_for;
    e->num_threads = fz_int(in, 1, 16);
    e->isa = r < 8 ? ATTN_ISA_AUTO : isas[r % n];
    e->f32_probs = fz_chance(in, 64);
    if (r == 0) return NULL;
    if (r == 1) { e->num_threads = -fz_int(in, 1, 3); fz_bad(ex, ATTN_ERR_INVALID_ARG); }
    if (r == 2) {
        e->isa = (attn_isa)fz_int(in, ATTN_ISA_COUNT, ATTN_ISA_COUNT + 3);
        fz_bad(ex, ATTN_ERR_INVALID_ARG);
    }
    if (r == 3) {
        e->isa = (attn_isa)fz_int(in, ATTN_ISA_SCALAR, ATTN_ISA_AMX);
        if (!attn_isa_supported(e->isa)) fz_bad(ex, ATTN_ERR_UNSUPPORTED);
    }
    if (r == 4) { e->gemm = (attn_gemm)fz_int(in, 2, 5); fz_bad(ex, ATTN_ERR_INVALID_ARG); }
    if (r == 5) {
        e->gemm = ATTN_GEMM_ONEDNN;
#ifndef ATTN_USE_ONEDNN
        fz_bad(ex, ATTN_ERR_UNSUPPORTED);
#endif
    }
    if (r == 6) e->num_threads = 0;  /* 0 with a pool: one thread */
    return e;
}
/* The same exec at another thread count, for the thread-independence check. */
static int fz_reverse_pool;  /* its address as exec.pool: run the items in reverse */
FZ_FUNC attn_exec fz_exec_threads(const attn_exec *e, int threads, int reverse) {
    attn_exec o;
    if (e) o = *e; else memset(&o, 0, sizeof o);
    o.parallel_for = fz_pool_for;
    o.pool = reverse ? (void *)&fz_reverse_pool : NULL;
    o.num_threads = threads;
    return o;
}

/* ---- comparing with the reference ------------------------------------------------------------ */
/* Tolerance of an output in dtype dt against the double reference (as tests/test_util.h). */
FZ_FUNC double fz_atol(attn_dtype dt) {
    return dt == ATTN_F32 ? 2e-5 : dt == ATTN_F16 ? 2e-3 : 1.6e-2;
}
/* The least absolute tolerance of a call's outputs, whatever their dtype: where the bf16 pair
   or tile kernels may run (bf16 queries, keys and values, f32_probs 0) the probabilities are
   rounded to bf16 for P.V, so each output moves by up to 2^-9 of the largest value it
   averages (|v| <= 1.5 here); else 0. */
FZ_FUNC double fz_probs_atol(const attn_exec *e, attn_dtype q, attn_dtype kv) {
    return q == ATTN_BF16 && kv == ATTN_BF16 && !(e && e->f32_probs) ? 4e-3 : 0.0;
}
/* The relative tolerance of an output in dtype dt: 1e-3 for the f32 arithmetic plus the output's
   own rounding, half an ulp (2^-8 of |want| for bf16: with the cache's scales an output may be
   large enough that the rounding exceeds the absolute tolerance, e.g. 8.2145 -> 8.1875). */
FZ_FUNC double fz_rtol(attn_dtype dt) {
    return 1e-3 + (dt == ATTN_BF16 ? 0x1p-8 : dt == ATTN_F16 ? 0x1p-11 : 0.0);
}
FZ_FUNC int fz_close(double got, double want, attn_dtype dt, double atol_floor) {
    double atol = fz_atol(dt) > atol_floor ? fz_atol(dt) : atol_floor;
    return fabs(got - want) <= atol + fz_rtol(dt) * fabs(want);
}
FZ_FUNC int fz_lse_close(float got, double want) {
    if (isinf(want)) return isinf(got) && (got < 0) == (want < 0);
    return fabs(got - want) <= 1e-4 * (1.0 + fabs(want));
}

/* ---- activation rows ------------------------------------------------------------------------ */
/* Rows of `tokens` tokens of `width` elements whose dtype, stride and data pointer the input
   chooses, allocated to the exact byte the layout needs (so AddressSanitizer sees a read or
   write past the last row's last element). Inputs hold random values (f: their f32 copy,
   packed [tokens][width]); outputs hold random bytes, to be compared with a copy. */
typedef struct fz_rows {
    attn_rows r;
    int64_t tokens, width, stride;  /* stride resolved: 0 -> width */
    size_t bytes;
    float *f;
    int valid;                      /* what the model says of this argument */
} fz_rows;

/* same: NULL, or rows whose dtype these take (mostly; keys and values must agree). */
FZ_FUNC void fz_rows_make(fz_in *in, uint64_t *rng, fz_rows *R, int64_t tokens, int64_t width,
                          int is_input, const fz_rows *same, fz_expect *ex) {
    static const attn_dtype act[3] = {ATTN_F32, ATTN_F16, ATTN_BF16};
    static const int bad_dt[6] = {ATTN_FP8_E4M3, ATTN_FP8_E5M2, ATTN_INT8, ATTN_INT4,
                                  ATTN_DTYPE_COUNT, 77};  /* cache dtypes and no dtype */
    int r = fz_int(in, 0, 63), rs = fz_int(in, 0, 31);
    memset(R, 0, sizeof *R);
    R->tokens = tokens; R->width = width; R->valid = 1;
    R->r.dtype = r == 63 ? (attn_dtype)bad_dt[fz_int(in, 0, 5)] : act[r % 3];
    if (same && r < 60) R->r.dtype = same->r.dtype;
    if (r == 63 || fz_esize(R->r.dtype) == 0) R->valid = 0;  /* also a bad dtype taken from same */
    if (rs < 24) R->r.stride = 0;
    else if (rs < 30) R->r.stride = width + fz_int(in, 1, 7);
    else if (rs == 30 && width > 1) { R->r.stride = fz_int(in, 1, (int)width - 1); R->valid = 0; }
    else { R->r.stride = -fz_int(in, 1, 3); R->valid = 0; }
    R->stride = R->r.stride ? R->r.stride : width;
    int null_data = fz_chance(in, 4);
    if (null_data && tokens > 0) R->valid = 0;
    if (!R->valid) fz_bad(ex, ATTN_ERR_INVALID_ARG);
    size_t esz = fz_esize(R->r.dtype);
    if (R->valid && tokens > 0) R->bytes = (size_t)((tokens - 1) * R->stride + width) * esz;
    else R->bytes = 16;
    R->r.data = null_data ? NULL : fz_alloc(R->bytes);
    R->f = (float *)fz_alloc(sizeof(float) * (size_t)(tokens > 0 &&
                                                      width > 0 ? tokens * width : 1));
    if (!R->r.data) return;
    if (!R->valid || !is_input) {
        for (size_t i = 0; i < R->bytes; i++) ((uint8_t *)R->r.data)[i] = (uint8_t)fz_rand(rng);
        return;
    }
    fz_fill(rng, R->r.dtype, R->r.data, NULL, R->bytes / esz, -1.5f, 1.5f);
    for (int64_t t = 0; t < tokens; t++)
        for (int64_t e = 0; e < width; e++)
            R->f[t * width + e] = ref_element(R->r.data, R->r.dtype, (size_t)(t * R->stride + e));
}
FZ_FUNC void fz_rows_free(fz_rows *R) { free(R->r.data); free(R->f); }

/* Output rows after an accepted call: every element within the tolerance of want [tokens][width]
   (its first `tokens` rows; atol_floor: fz_probs_atol), and every byte outside the rows as it
   was (before). */
FZ_FUNC void fz_rows_check(const fz_rows *R, const void *before, const double *want, int64_t tokens,
                           double atol_floor, const char *call) {
    size_t esz = fz_esize(R->r.dtype);
    uint8_t *expect = (uint8_t *)fz_alloc(R->bytes);
    memcpy(expect, before, R->bytes);
    for (int64_t t = 0; t < tokens; t++) {
        size_t at = (size_t)(t * R->stride);
        memcpy(expect + at * esz, (const uint8_t *)R->r.data + at * esz, (size_t)R->width * esz);
        for (int64_t e = 0; e < R->width; e++) {
            double got = ref_element(R->r.data, R->r.dtype, at + (size_t)e),
                   w = want[t * R->width + e];
            FZ_REQUIRE(fz_close(got, w, R->r.dtype, atol_floor),
                       "%s: output token %lld element %lld is %.9g, the "
                       "reference %.9g (%s)", call, (long long)t, (long long)e, got, w,
                       attn_dtype_name(R->r.dtype));
        }
    }
    FZ_REQUIRE(!memcmp(expect, R->r.data, R->bytes), "%s wrote outside its output rows", call);
    free(expect);
}

/* ---- a paged cache -------------------------------------------------------------------------- */
/* Key and value arrays allocated separately to the exact byte (the struct filled by hand, as a
   caller wrapping its own memory may), or one buffer for both; random contents within range
   after dequantization; kf / vf hold the dequantized values for the reference. c is the struct
   the calls get (a harness may break it); made is the struct as made, which describes the
   memory. Rows of head_size elements, row_bytes each (ref_row_bytes: an integer row holds its
   groups' scales). */
typedef struct fz_cache {
    attn_kv_cache c, made;
    void *k, *v;
    size_t elems;       /* elements of each array */
    size_t rows, row_bytes;
    float *kf, *vf;
} fz_cache;

/* Row r of an array of fc: its D elements drawn in [lo, hi) / scale, stored in the cache dtype
   (an integer row quantised by the reference: tests/ref.h's ref_int_row_quantize). */
FZ_FUNC void fz_cache_fill_row(fz_cache *fc, void *arr, size_t r, uint64_t *rng, float lo,
                               float hi, float scale) {
    int D = fc->made.head_size;
    attn_dtype dt = fc->made.dtype;
    if (!fz_is_int(dt)) {
        for (int d = 0; d < D; d++)
            fz_put(arr, dt, r * (size_t)D + (size_t)d, fz_uniform(rng, lo, hi) / scale);
        return;
    }
    float x[ATTN_MAX_HEAD_SIZE];
    for (int d = 0; d < D; d++) x[d] = fz_uniform(rng, lo, hi) / scale;
    ref_int_row_quantize((char *)arr + r * fc->row_bytes, dt, x, (size_t)D);
}

FZ_FUNC void fz_cache_make(fz_cache *fc, uint64_t *rng, int nb, int bs, int Hk, int D,
                           attn_dtype dt,
                           float k_scale, float v_scale, int shared) {
    memset(fc, 0, sizeof *fc);
    fc->rows = (size_t)nb * bs * Hk;
    fc->elems = fc->rows * (size_t)D;
    fc->row_bytes = ref_row_bytes(dt, (size_t)D);
    size_t bytes = fc->rows * fc->row_bytes;
    fc->k = fz_alloc(bytes);
    fc->v = shared ? fc->k : fz_alloc(bytes);
    fc->c.key = fc->k; fc->c.value = fc->v;
    fc->c.num_blocks = nb; fc->c.block_size = bs; fc->c.num_kv_heads = Hk; fc->c.head_size = D;
    fc->c.dtype = dt; fc->c.k_scale = k_scale; fc->c.v_scale = v_scale;
    fc->made = fc->c;
    fc->kf = (float *)fz_alloc(sizeof(float) * (fc->elems ? fc->elems : 1));
    /* shared: one byte array, read with each scale (fp8 caches have two) */
    fc->vf = (float *)fz_alloc(sizeof(float) * (fc->elems ? fc->elems : 1));
    for (size_t r = 0; r < fc->rows; r++) {
        fz_cache_fill_row(fc, fc->k, r, rng, -1.5f, 1.5f, k_scale);
        if (!shared) fz_cache_fill_row(fc, fc->v, r, rng, -1.0f, 1.0f, v_scale);
    }
}
/* Element index of (block, KV head, offset, dim) in the arrays as made. */
FZ_FUNC size_t fz_cache_at(const fz_cache *fc, int64_t block, int h, int64_t off, int d) {
    const attn_kv_cache *m = &fc->made;
    return (size_t)(((block * m->num_kv_heads + h) * m->block_size + off) * m->head_size + d);
}
/* Row index of (block, KV head, offset) in the arrays as made. */
FZ_FUNC size_t fz_cache_row(const fz_cache *fc, int64_t block, int h, int64_t off) {
    const attn_kv_cache *m = &fc->made;
    return (size_t)((block * m->num_kv_heads + h) * m->block_size + off);
}
/* Makes every element of the row of (block, KV head, offset) NaN in both arrays: each element,
   or each group's scale of an integer row (a NaN scale reads as NaN). */
FZ_FUNC void fz_cache_poison(fz_cache *fc, int64_t block, int h, int64_t off) {
    size_t r = fz_cache_row(fc, block, h, off);
    int D = fc->made.head_size;
    for (int d = 0; d < D; d++) {
        if (!fz_is_int(fc->made.dtype)) {
            fz_put(fc->k, fc->made.dtype, r * (size_t)D + (size_t)d, NAN);
            fz_put(fc->v, fc->made.dtype, r * (size_t)D + (size_t)d, NAN);
        } else if (d % 32 == 0) {
            size_t at = r * fc->row_bytes + (size_t)d / 32 * (fc->made.dtype == ATTN_INT8 ? 34 : 18);
            ((uint8_t *)fc->k)[at] = ((uint8_t *)fc->v)[at] = 0xc0;
            ((uint8_t *)fc->k)[at + 1] = ((uint8_t *)fc->v)[at + 1] = 0x7f;
        }
    }
}
/* The dequantized copies, from the arrays as they are now. */
FZ_FUNC void fz_cache_dequant(fz_cache *fc) {
    for (size_t i = 0; i < fc->elems; i++) {
        fc->kf[i] = ref_row_element(fc->k, fc->made.dtype, fc->made.head_size, i) *
                    fc->made.k_scale;
        fc->vf[i] = ref_row_element(fc->v, fc->made.dtype, fc->made.head_size, i) *
                    fc->made.v_scale;
    }
}
FZ_FUNC size_t fz_cache_bytes(const fz_cache *fc) { return fc->rows * fc->row_bytes; }
/* Bytes of one block of an array. */
FZ_FUNC size_t fz_cache_block_bytes(const fz_cache *fc) {
    return (size_t)fc->made.block_size * (size_t)fc->made.num_kv_heads * fc->row_bytes;
}
/* Whether two arrays of fc's geometry hold the same rows (ref_rows_same: any NaN scale of an
   integer row as any other, which the documentation leaves open). */
FZ_FUNC int fz_cache_same(const fz_cache *fc, const void *a, const void *b) {
    for (size_t r = 0; r < fc->rows; r++)
        if (!ref_rows_same((const char *)a + r * fc->row_bytes, (const char *)b + r * fc->row_bytes,
                           fc->made.dtype, (size_t)fc->made.head_size))
            return 0;
    return 1;
}
FZ_FUNC void fz_cache_free(fz_cache *fc) {
    if (fc->v != fc->k) free(fc->v);
    free(fc->k); free(fc->kf); free(fc->vf);
}
/* Row of the integer cache fc at row index r of arr, quantised (ref_int_row_quantize) from D
   elements of rows R from element at. */
FZ_FUNC void fz_model_int_row(const fz_cache *fc, void *arr, size_t r, const fz_rows *R,
                              size_t at) {
    float x[ATTN_MAX_HEAD_SIZE];
    for (int d = 0; d < fc->made.head_size; d++)
        x[d] = ref_element(R->r.data, R->r.dtype, at + (size_t)d);
    ref_int_row_quantize((char *)arr + r * fc->row_bytes, fc->made.dtype, x,
                         (size_t)fc->made.head_size);
}

/* The expected cache after the writes: rows of the cache dtype copied, others rounded once
   (fp8 after dividing by the scale; an integer row quantised as attn_dtype_row_bytes says);
   slot -1 skipped; the last of duplicate slots wins. */
FZ_FUNC void fz_model_writes(const fz_cache *fc, void *kbytes, void *vbytes, const fz_rows *k,
                             const fz_rows *v,
                         const int64_t *slots, int n) {
    const attn_kv_cache *m = &fc->made;
    int Hk = m->num_kv_heads, D = m->head_size;
    for (int t = 0; t < n; t++) {
        if (slots[t] < 0) continue;
        for (int h = 0; h < Hk; h++) {
            if (fz_is_int(m->dtype)) {
                size_t r = fz_cache_row(fc, slots[t] / m->block_size, h, slots[t] % m->block_size);
                fz_model_int_row(fc, kbytes, r, k, (size_t)(t * k->stride + h * D));
                fz_model_int_row(fc, vbytes, r, v, (size_t)(t * v->stride + h * D));
                continue;
            }
            for (int d = 0; d < D; d++) {
                size_t at =
                        fz_cache_at(fc, slots[t] / m->block_size, h, slots[t] % m->block_size, d);
                size_t ki = (size_t)(t * k->stride + h * D + d),
                       vi = (size_t)(t * v->stride + h * D + d);
                size_t esz = fz_esize(m->dtype);
                if (k->r.dtype == m->dtype) memcpy((char *)kbytes + at * esz,
                                                   (char *)k->r.data + ki * esz, esz);
                else fz_put(kbytes, m->dtype, at,
                            ref_element(k->r.data, k->r.dtype, ki) / m->k_scale);
                if (v->r.dtype == m->dtype) memcpy((char *)vbytes + at * esz,
                                                   (char *)v->r.data + vi * esz, esz);
                else fz_put(vbytes, m->dtype, at,
                            ref_element(v->r.data, v->r.dtype, vi) / m->v_scale);
            }
        }
    }
}

/* Is the struct a valid cache by the documentation (attn_kv_cache, attn_kv_cache_init)? Key and
   value non-NULL, every size >= 1, head size <= ATTN_MAX_HEAD_SIZE, a dtype of the list, arrays
   (rows of attn_dtype_row_bytes) whose size fits a size_t, scales finite and > 0, and exactly 1
   unless the dtype is fp8 (the integer caches' scales are in their rows). */
FZ_FUNC int fz_cache_struct_valid(const attn_kv_cache *c) {
    if (!c || !c->key || !c->value) return 0;
    if (c->num_blocks < 1 || c->block_size < 1 || c->num_kv_heads < 1 || c->head_size < 1) return 0;
    if (c->head_size > ATTN_MAX_HEAD_SIZE || ref_row_bytes(c->dtype, 1) == 0) return 0;
    uint64_t n = ref_row_bytes(c->dtype, (size_t)c->head_size),
             limit = ((uint64_t)(size_t)-1 - 256) / 2;
    int64_t f[3] = {c->num_blocks, c->block_size, c->num_kv_heads};
    for (int i = 0; i < 3; i++) {  /* two arrays and their alignment slack must fit a size_t */
        if (n > limit / (uint64_t)f[i]) return 0;
        n *= (uint64_t)f[i];
    }
    if (!(isfinite(c->k_scale) && c->k_scale > 0 && isfinite(c->v_scale) &&
          c->v_scale > 0)) return 0;
    return fz_is_fp8(c->dtype) || (c->k_scale == 1.0f && c->v_scale == 1.0f);
}

/* ---- arguments shared by the kernels ------------------------------------------------------- */
#define FZ_MAX_H 8
typedef struct fz_params {
    attn_params p;
    float slopes[FZ_MAX_H], sinks[FZ_MAX_H];
    int tame;  /* finite values of ordinary size: the kernels must match the reference */
} fz_params;

/* A value for a float parameter: 0 (the default) mostly, else a tame one in [lo, hi], a huge
   finite one (valid, not tame), or a NaN / inf / negative one (refused). */
FZ_FUNC float fz_gen_param(fz_in *in, uint64_t *rng, float lo, float hi, fz_params *k,
                           fz_expect *ex) {
    int r = fz_int(in, 0, 15);
    if (r < 8) return 0.0f;
    if (r < 14) return fz_uniform(rng, lo, hi);
    if (r == 14) { k->tame = 0; return 1e30f; }
    fz_bad(ex, ATTN_ERR_INVALID_ARG);
    return fz_chance(in, 128) ? -fz_uniform(rng, 0.5f, 2.0f) : fz_hostile_float(in);
}

/* A per-head array (ALiBi slopes, sinks): NULL mostly, else values in [lo, hi], one of them
   possibly huge (not tame) or not finite (refused). */
FZ_FUNC const float *fz_gen_heads(fz_in *in, uint64_t *rng, float *a, int H, float lo, float hi,
                              fz_params *k, fz_expect *ex) {
    int r = fz_int(in, 0, 15);
    if (r < 10 || H < 1) return NULL;
    for (int h = 0; h < H; h++) a[h] = fz_uniform(rng, lo, hi);
    if (r == 10 && lo >= 0) attn_alibi_slopes(H, a);
    if (r == 14) { a[fz_int(in, 0, H - 1)] = fz_chance(in, 128) ? 1e30f : -1e30f; k->tame = 0; }
    if (r == 15) {
        a[fz_int(in, 0, H - 1)] = fz_hostile_float(in); fz_bad(ex, ATTN_ERR_INVALID_ARG);
    }
    return a;
}

/* A layer's params: up to max_h heads (<= FZ_MAX_H), head sizes up to max_d (and now and then
   a common larger one, 48..136, where max_d allows), window, cap, scale, slopes, sinks; each
   perhaps invalid in a documented way. */
FZ_FUNC void fz_gen_params(fz_in *in, uint64_t *rng, fz_params *k, int max_h, int max_d,
                           fz_expect *ex) {
    attn_params *p = &k->p;
    memset(k, 0, sizeof *k);
    k->tame = 1;
    int H = fz_int(in, 1, max_h), r = fz_int(in, 0, 31);
    p->num_heads = H;
    if (r == 31) p->num_heads = fz_int(in, -2, 0);
    /* mostly a divisor of H, sometimes any count */
    int g = fz_int(in, 1, H);
    while (H % g) g--;
    p->num_kv_heads = r == 30 ? fz_int(in, -1, H + 1) : H / g;
    int rd = fz_int(in, 0, 31);
    p->head_size = rd < 24 || max_d < 136 ? fz_int(in, 1, max_d) : rd < 30 ? 8 * fz_int(in, 6, 17)
                 : rd == 30 ? fz_int(in, -3, 0) : ATTN_MAX_HEAD_SIZE + fz_int(in, 1, 100);
    if (rd == 31 && max_d < 136) p->head_size = fz_chance(in, 128) ? 0 : ATTN_MAX_HEAD_SIZE + 1;
    int bad_shape = p->num_heads < 1 || p->num_kv_heads < 1 || p->head_size < 1 ||
                    p->head_size > ATTN_MAX_HEAD_SIZE || p->num_heads % p->num_kv_heads;
    fz_bad_if(ex, bad_shape, ATTN_ERR_INVALID_ARG);
    p->scale = fz_gen_param(in, rng, 0.05f, 0.5f, k, ex);
    p->logits_soft_cap = fz_gen_param(in, rng, 1.0f, 30.0f, k, ex);
    int rw = fz_int(in, 0, 15);
    p->sliding_window = rw < 10 ? 0 : rw < 15 ? fz_int(in, 1, 45) : -fz_int(in, 1, 5);
    fz_bad_if(ex, p->sliding_window < 0, ATTN_ERR_INVALID_ARG);
    int Hn = p->num_heads >= 1 ? p->num_heads : 0;
    p->alibi_slopes = fz_gen_heads(in, rng, k->slopes, Hn, 0.0f, 1.0f, k, ex);
    p->sinks = fz_gen_heads(in, rng, k->sinks, Hn, -3.0f, 3.0f, k, ex);
}

/* Offsets [n+1] from lengths, then perhaps broken: a nonzero start or a decreasing step. */
FZ_FUNC void fz_gen_offsets(fz_in *in, int32_t *cu, const int *len, int n, fz_expect *ex) {
    cu[0] = 0;
    for (int s = 0; s < n; s++) cu[s + 1] = cu[s] + len[s];
    int r = fz_int(in, 0, 31);
    if (r == 31) { cu[0] = fz_chance(in, 128) ? -1 : 1; fz_bad(ex, ATTN_ERR_INVALID_ARG); }
    if (r == 30 && n > 0) {
        int s = fz_int(in, 0, n - 1);
        cu[s + 1] = cu[s] - fz_int(in, 1, 3);
        fz_bad(ex, ATTN_ERR_INVALID_ARG);
    }
}

/* A workspace for the call: the size query's bytes exactly, sometimes fewer (one byte short or
   more) or NULL, sometimes more; allocated to the exact byte. Adds the expected status. */
FZ_FUNC void *fz_gen_ws(fz_in *in, size_t need, size_t *bytes, fz_expect *ex) {
    int r = fz_int(in, 0, 15);
    *bytes = need;
    if (r == 15 || need == 0) fz_bad(ex, ATTN_ERR_WORKSPACE_TOO_SMALL);  /* 0: the query refused */
    if (r == 14 && need > 0) {
        *bytes = need - (size_t)fz_int(in, 1, need < 64 ? (int)need : 64);
        fz_bad(ex, ATTN_ERR_WORKSPACE_TOO_SMALL);
    }
    if (r == 13) *bytes = need + (size_t)fz_int(in, 1, 100);
    if (r == 15) return NULL;
    return fz_alloc(*bytes);
}

/* lse: [tokens][H] floats of random bytes, or NULL. */
FZ_FUNC float *fz_gen_lse(fz_in *in, uint64_t *rng, int64_t tokens, int H, size_t *bytes) {
    if (fz_chance(in, 64) || H < 1) { *bytes = 0; return NULL; }
    *bytes = sizeof(float) * (size_t)(tokens * H > 0 ? tokens * H : 1);
    float *l = (float *)fz_alloc(*bytes);
    for (size_t i = 0; i < *bytes / 4; i++) l[i] = fz_uniform(rng, -100, 100);
    return l;
}

FZ_FUNC void fz_check_lse(const float *lse, const double *want, int64_t n, const char *call) {
    for (int64_t i = 0; i < n; i++)
        FZ_REQUIRE(fz_lse_close(lse[i], want[i]), "%s: lse[%lld] is %.9g, the reference %.9g", call,
                   (long long)i, lse[i], want[i]);
}

#endif
