/* fuzz_convert.c - attn_convert over every dtype pair on raw input bytes (every NaN, infinity,
   subnormal and fp8 code), with scales valid and not, in place and across its 256-element
   chunks; and the bias builders (attn_make_alibi_bias, attn_make_sliding_window_bias,
   attn_make_bias, attn_alibi_slopes) against tests/ref.h.
   attn_convert's model: each element is decoded exactly (attn_*_to_f32; an integer source's n
   elements as one row, tests/ref.h's ref_row_element), times the scale when the source is fp8,
   divided by it when the destination is fp8, and encoded once (attn_f32_to_*; an integer row by
   ref_int_row_quantize, or its own bytes when source and destination are that dtype): the bulk
   path must give those bits (a NaN may carry another payload). An error changes nothing in the
   destination. */
#include "fuzz.h"

static int is_nan_code(const void *p, attn_dtype dt, size_t i) {
    return isnan(ref_element(p, dt, i));
}
static int dtype_valid(attn_dtype dt) { return ref_row_bytes(dt, 1) != 0; }
/* Bytes of n elements of dt (an integer dtype's n elements are one row); 1 a element for a
   dtype that is not one. */
static size_t dtype_bytes(attn_dtype dt, size_t n) {
    return dtype_valid(dt) ? ref_row_bytes(dt, n) : n;
}
/* Element i of n in dt at p (an integer dtype: element i of one row of n). */
static float element_of(const void *p, attn_dtype dt, size_t n, size_t i) {
    return fz_is_int(dt) ? ref_row_element(p, dt, (int)n, i) : ref_element(p, dt, i);
}

static void op_convert(fz_in *in, uint64_t *rng) {
    fz_expect ex = {0};
    int sd = fz_int(&*in, 0, 15), dd = fz_int(in, 0, 15);
    attn_dtype src_dt = (attn_dtype)(sd < 14 ? sd % ATTN_DTYPE_COUNT
                                             : fz_int(in, ATTN_DTYPE_COUNT, 40));
    attn_dtype dst_dt = (attn_dtype)(dd < 14 ? dd % ATTN_DTYPE_COUNT : -fz_int(in, 1, 3));
    fz_bad_if(&ex, !dtype_valid(src_dt) || !dtype_valid(dst_dt), ATTN_ERR_INVALID_ARG);
    int rs = fz_int(in, 0, 15);
    float scale = rs < 6 ? 0.0f : rs < 9 ? 1.0f : rs < 14 ? fz_uniform(rng, 0.001f, 100.0f)
                : rs == 14 ? -fz_uniform(rng, 0.0f, 2.0f) : fz_hostile_float(in);
    if (rs == 14 && scale == 0.0f) scale = -1.0f;
    fz_bad_if(&ex, !isfinite(scale) || scale < 0, ATTN_ERR_INVALID_ARG);
    float s = scale == 0.0f ? 1.0f : scale;
    fz_bad_if(&ex, s != 1.0f && !fz_is_fp8(src_dt) && !fz_is_fp8(dst_dt), ATTN_ERR_INVALID_ARG);
    size_t n = (size_t)(fz_chance(in, 32) ? fz_int(in, 0, 700) : fz_int(in, 0, 40));
    size_t sb = dtype_bytes(src_dt, n), db = dtype_bytes(dst_dt, n);
    /* in place: element dtypes of one size; an integer side with any dtype (only its own is
       allowed, and only with n > 0 is there a row to be in place) */
    int ints = fz_is_int(src_dt) || fz_is_int(dst_dt);
    int in_place = (ints || fz_esize(src_dt) == fz_esize(dst_dt)) && fz_chance(in, 48);
    fz_bad_if(&ex, in_place && ints && n > 0 && src_dt != dst_dt, ATTN_ERR_INVALID_ARG);
    int null_src = fz_chance(in, 4), null_dst = fz_chance(in, 4);
    fz_bad_if(&ex, n > 0 && (null_src || null_dst), ATTN_ERR_INVALID_ARG);
    /* the source: the input's own bytes, then random ones */
    uint8_t *src = (uint8_t *)fz_alloc(in_place ? FZ_MAX(sb, db) : sb),
             *dst = in_place ? src : (uint8_t *)fz_alloc(db);
    for (size_t i = 0; i < (in_place ? FZ_MAX(sb, db) : sb); i++)
        src[i] = in->at < in->n ? (uint8_t)fz_u8(in) : (uint8_t)fz_rand(rng);
    if (!in_place)
        for (size_t i = 0; i < db; i++) dst[i] = (uint8_t)fz_rand(rng);
    uint8_t *orig = (uint8_t *)fz_alloc(sb);
    memcpy(orig, src, sb);
    fz_snaps sn = {0};
    fz_snap(&sn, "destination", dst, db);
    attn_status st =
            attn_convert(null_dst ? NULL : dst, dst_dt, null_src ? NULL : src, src_dt, n, scale);
    fz_check_status(&ex, st, "attn_convert");
    fz_unchanged_on_error(&sn, st, "attn_convert");
    if (st == ATTN_OK && n > 0) {
        uint8_t *want = (uint8_t *)fz_alloc(db);
        float *x = (float *)fz_alloc(sizeof(float) * n);
        for (size_t i = 0; i < n; i++) {
            x[i] = element_of(orig, src_dt, n, i);
            if (fz_is_fp8(src_dt)) x[i] *= s;
            if (fz_is_fp8(dst_dt)) x[i] /= s;
        }
        if (fz_is_int(dst_dt)) {  /* a row: its own dtype's bytes, or the reference's */
            if (dst_dt == src_dt) memcpy(want, orig, db);
            else ref_int_row_quantize(want, dst_dt, x, n);
            FZ_REQUIRE(dst_dt == src_dt ? !memcmp(want, dst, db) : ref_rows_same(want, dst, dst_dt, n),
                       "attn_convert %s -> %s scale %g, n %zu: the row differs from the model's",
                       attn_dtype_name(src_dt), attn_dtype_name(dst_dt), scale, n);
        }
        for (size_t i = 0; i < n && !fz_is_int(dst_dt); i++) {
            size_t dsz = fz_esize(dst_dt);
            fz_put(want, dst_dt, i, x[i]);
            int both_nan = isnan(x[i]) && is_nan_code(dst, dst_dt, i);
            FZ_REQUIRE(both_nan || !memcmp(want + i * dsz, dst + i * dsz, dsz),
                       "attn_convert %s -> %s scale %g, element %zu of %zu: got %.9g, the model "
                       "%.9g",
                       attn_dtype_name(src_dt), attn_dtype_name(dst_dt), scale, i, n,
                       ref_element(dst, dst_dt, i),
                       ref_element(want, dst_dt, i));
        }
        free(want); free(x);
    }
    fz_snaps_free(&sn);
    if (!in_place) free(dst);
    free(src); free(orig);
}

/* A bias call's output against ref_bias: -inf exactly where masked, else within float rounding
   of slope * (j - pos). */
static void check_bias(const float *got, const double *want, size_t n, const char *call) {
    for (size_t i = 0; i < n; i++) {
        int ok = isinf(want[i]) ? isinf(got[i]) &&
                 got[i] < 0 : fabs(got[i] - want[i]) <= 1e-6 * (1 + fabs(want[i]));
        FZ_REQUIRE(ok, "%s: element %zu is %.9g, the reference %.9g", call, i, got[i], want[i]);
    }
}

static void op_bias(fz_in *in, uint64_t *rng) {
    fz_expect ex = {0};
    fz_params kp;
    int which = fz_int(in, 0, 2), causal = fz_int(in, 0, 1);
    int Lq = fz_chance(in, 8) ? -fz_int(in, 1, 3) : fz_int(in, 0, 24);
    int Lk = fz_chance(in, 8) ? -fz_int(in, 1, 3) : fz_int(in, 0, 24);
    fz_bad_if(&ex, Lq < 0 || Lk < 0, ATTN_ERR_INVALID_ARG);
    attn_params p;
    memset(&p, 0, sizeof p);
    float slopes[FZ_MAX_H];
    const char *name;
    if (which == 0) {
        name = "attn_make_alibi_bias";
        p.num_heads = fz_chance(in, 8) ? fz_int(in, -2, 0) : fz_int(in, 1, FZ_MAX_H);
        for (int h = 0; h < FZ_MAX_H; h++) slopes[h] = fz_uniform(rng, -1.0f, 1.0f);
        if (fz_chance(in, 16)) slopes[fz_int(in, 0, FZ_MAX_H - 1)] = fz_hostile_float(in);
        p.alibi_slopes = fz_chance(in, 8) ? NULL : slopes;
        int bad_slopes = !p.alibi_slopes;
        for (int h = 0; h < p.num_heads; h++) bad_slopes |= !isfinite(slopes[h]);
        fz_bad_if(&ex, p.num_heads < 1 || bad_slopes, ATTN_ERR_INVALID_ARG);
    } else if (which == 1) {
        name = "attn_make_sliding_window_bias";
        p.num_heads = 1;
        p.sliding_window = fz_chance(in, 8) ? fz_int(in, -2, 0) : fz_int(in, 1, 30);
        fz_bad_if(&ex, p.sliding_window < 1, ATTN_ERR_INVALID_ARG);
    } else {
        name = "attn_make_bias";
        fz_gen_params(in, rng, &kp, FZ_MAX_H, 8, &ex);
        p = kp.p;
    }
    size_t n = p.num_heads >= 1 && Lq > 0 &&
               Lk > 0 ? (size_t)p.num_heads * (size_t)Lq * (size_t)Lk : 0;
    int null_bias = fz_chance(in, 4);
    fz_bad_if(&ex, null_bias && n > 0, ATTN_ERR_INVALID_ARG);
    float *bias = (float *)fz_alloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) bias[i] = fz_uniform(rng, -5, 5);
    fz_snaps sn = {0};
    fz_snap(&sn, "bias", bias, sizeof(float) * n);
    float *b = null_bias ? NULL : bias;
    attn_status st = which == 0
                     ? attn_make_alibi_bias(p.num_heads, p.alibi_slopes, Lq, Lk, causal, b)
                   : which == 1 ? attn_make_sliding_window_bias(p.sliding_window, Lq, Lk, causal, b)
                                : attn_make_bias(&p, Lq, Lk, causal, b);
    fz_check_status(&ex, st, name);
    fz_unchanged_on_error(&sn, st, name);
    if (st == ATTN_OK && n > 0) {
        double *want = (double *)fz_alloc(sizeof(double) * n);
        ref_bias(&p, causal, Lq, Lk, want);
        check_bias(bias, want, n, name);
        free(want);
    }
    fz_snaps_free(&sn);
    free(bias);
    /* the slopes themselves */
    int H = fz_int(in, 1, 64);
    float got[64];
    double want[64];
    attn_alibi_slopes(H, got);
    ref_alibi_slopes(H, want);
    for (int h = 0; h < H; h++)
        FZ_REQUIRE(fabs(got[h] - want[h]) <= 1e-6 * want[h],
                   "attn_alibi_slopes(%d)[%d] = %.9g, the reference %.9g",
                   H, h, got[h], want[h]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_in in = {data, size, 0};
    uint64_t rng = fz_u32(&in);
    if (fz_int(&in, 0, 3) < 3) op_convert(&in, &rng);
    else op_bias(&in, &rng);
    return 0;
}
