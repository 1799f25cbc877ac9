/* ref.h - naive double-precision reference of attn.h's semantics: the test oracle
   public domain or MIT, see attn.h

   Every kernel of attn.h is tested against these functions, so they are written to be checked
   by reading: plain loops, double precision, no tiling, no online softmax, no SIMD. The formulas
   are those of DESIGN.md section 4. For query token i at absolute position pos_i and key j:

       s = scale * <q_i, k_j>             scale = 1/sqrt(D) when params->scale is 0
       s = cap * tanh(s / cap)            only when logits_soft_cap > 0
       s = s + slope_h * (j - pos_i)      only with alibi_slopes
       visible(i, j) = (not causal or j <= pos_i) and (W == 0 or pos_i - j < W)
       p_j   = exp(s_j) / (sum over visible j' of exp(s_j') [+ exp(sink_h)])
       out_i = sum over visible j of p_j v_j
       lse_i = log(sum over visible j of exp(s_j) [+ exp(sink_h)])
       a row with no visible key: out = 0 and lse = -inf, with or without sinks

   Positions: with Lq query and Lk key tokens the queries are the LAST Lq positions,
   pos_i = Lk - Lq + i, for causal and non-causal alike (causal masking is "bottom-right
   aligned"; for non-causal attention the position still matters to ALiBi and the window).
   With Lq > Lk some pos_i are negative: under causal masking those rows see no key.
   Non-causal with a window: only the past is limited (keys with j > pos_i stay visible).

   Sinks (vLLM/gpt-oss "attention sinks") are raw logits, already in scaled-logit units: not
   scaled, not capped, no ALiBi. A sink adds exp(sink_h) to the denominator and has no value.

   Head mapping (GQA/MQA): query head h reads KV head h / (H / Hk).

   Include this after "attn.h" (it needs the struct attn_params only) in one translation unit;
   every function is static.
*/
#ifndef ATTN_TEST_REF_H_INCLUDED
#define ATTN_TEST_REF_H_INCLUDED

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define REF_FUNC static __attribute__((unused))  /* no warning where a test file uses only some */
#else
#define REF_FUNC static
#endif

/* The softmax scale: params->scale, or 1/sqrt(D) when it is 0. */
/* Element i of raw rows or a cache in dtype dt, as f32 (exact): what the reference reads. */
REF_FUNC float ref_element(const void *raw, attn_dtype dt, size_t i) {
    switch (dt) {
        case ATTN_F16: return attn_f16_to_f32(((const uint16_t *)raw)[i]);
        case ATTN_BF16: return attn_bf16_to_f32(((const uint16_t *)raw)[i]);
        case ATTN_FP8_E4M3: return attn_fp8_e4m3_to_f32(((const uint8_t *)raw)[i]);
        case ATTN_FP8_E5M2: return attn_fp8_e5m2_to_f32(((const uint8_t *)raw)[i]);
        case ATTN_INT8: case ATTN_INT4: return NAN;  /* rows, not elements: ref_row_element */
        case ATTN_F32: case ATTN_DTYPE_COUNT: break;
    }
    return ((const float *)raw)[i];
}

/* Bytes of a row of n elements in dt (attn_dtype_row_bytes' text): int8 n + 2 ceil(n/32), int4
   18 ceil(n/32); an element dtype's size times n (0 for a dtype that is neither). */
REF_FUNC size_t ref_row_bytes(attn_dtype dt, size_t n) {
    size_t groups = (n + 31) / 32;
    switch (dt) {
        case ATTN_INT8: return n + 2 * groups;
        case ATTN_INT4: return 18 * groups;
        case ATTN_F32: return 4 * n;
        case ATTN_F16: case ATTN_BF16: return 2 * n;
        case ATTN_FP8_E4M3: case ATTN_FP8_E5M2: return n;
        case ATTN_DTYPE_COUNT: break;
    }
    return 0;
}

/* Element i of rows of D elements (a cache's, or attn_convert's one row) in dtype dt, as f32.
   The integer dtypes' rows as attn_dtype_row_bytes documents them, read from that text: groups
   of 32 elements one after the other, each a little-endian bf16 scale and then its codes (int8:
   a byte each; int4: 16 bytes, byte e holding element e of the group in its low nibble and
   element 16 + e in its high nibble, 4-bit two's complement); element = code x scale. */
REF_FUNC float ref_row_element(const void *raw, attn_dtype dt, int D, size_t i) {
    size_t row = i / (size_t)D;
    int d = (int)(i % (size_t)D), g = d / 32, e = d % 32, code;
    if (dt != ATTN_INT8 && dt != ATTN_INT4) return ref_element(raw, dt, i);
    const uint8_t *grp = (const uint8_t *)raw + row * ref_row_bytes(dt, (size_t)D) +
                         (size_t)g * (dt == ATTN_INT8 ? 34 : 18);
    float scale = attn_bf16_to_f32((uint16_t)(grp[0] | grp[1] << 8));
    if (dt == ATTN_INT8) {
        code = (int)(int8_t)grp[2 + e];
    } else {
        int nibble = e < 16 ? grp[2 + e] & 15 : grp[2 + e - 16] >> 4;
        code = nibble >= 8 ? nibble - 16 : nibble;
    }
    return (float)code * scale;
}

/* x (finite, >= 0) as bf16 bits, rounded to nearest even (overflow to inf). */
REF_FUNC uint16_t ref_bf16_rne(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return (uint16_t)((u + 0x7fffu + (u >> 16 & 1u)) >> 16);
}

/* Writes a row of n elements of x in dt = ATTN_INT8 or ATTN_INT4 as attn_dtype_row_bytes
   documents it, from that text: per group of 32 (the last may be shorter), m = max |x|;
   scale = bf16(m / 127 or m / 7 in f32, nearest even); a nonzero group whose scale rounds to 0
   takes the least subnormal 2^-133 (bits 0x0001); a group with an inf or NaN gets a NaN scale
   (0x7fc0 here: the text fixes only that it is a NaN) and codes 0; code = nearest-even integer of
   x / scale (in f32) saturated to +-127 or +-7; int4 packs element e < 16 into the low nibble of
   byte e and element 16 + e into the high nibble of byte e, elements past n as 0. */
REF_FUNC void ref_int_row_quantize(void *row, attn_dtype dt, const float *x, size_t n) {
    int top = dt == ATTN_INT8 ? 127 : 7;
    size_t gbytes = dt == ATTN_INT8 ? 34 : 18;
    for (size_t g = 0; g * 32 < n; g++) {
        size_t m = n - g * 32 < 32 ? n - g * 32 : 32;
        const float *v = x + g * 32;
        uint8_t *grp = (uint8_t *)row + g * gbytes, *codes = grp + 2;
        float most = 0.0f;
        int finite = 1;
        for (size_t e = 0; e < m; e++) {
            if (!isfinite(v[e])) finite = 0;
            else if (fabsf(v[e]) > most) most = fabsf(v[e]);
        }
        uint16_t bits = !finite ? 0x7fc0 : ref_bf16_rne(most / (float)top);
        if (finite && most > 0.0f && bits == 0) bits = 1;
        uint32_t wide = (uint32_t)bits << 16;
        float scale;
        memcpy(&scale, &wide, 4);
        memset(codes, 0, dt == ATTN_INT8 ? m : 16);
        for (size_t e = 0; e < m && finite && most > 0.0f; e++) {
            float q = rintf(v[e] / scale);
            int c = q > (float)top ? top : q < (float)-top ? -top : (int)q;
            if (dt == ATTN_INT8) codes[e] = (uint8_t)(int8_t)c;
            else codes[e % 16] |= (uint8_t)((c & 15) << (e < 16 ? 0 : 4));
        }
        grp[0] = (uint8_t)(bits & 255);
        grp[1] = (uint8_t)(bits >> 8);
    }
}

/* Whether two rows of n elements in dt hold the same bytes, reading any two NaN scales of an
   integer row as the same (the text does not fix a NaN's bits). */
REF_FUNC int ref_rows_same(const void *a, const void *b, attn_dtype dt, size_t n) {
    const uint8_t *x = (const uint8_t *)a, *y = (const uint8_t *)b;
    if (dt != ATTN_INT8 && dt != ATTN_INT4) return memcmp(a, b, ref_row_bytes(dt, n)) == 0;
    size_t gbytes = dt == ATTN_INT8 ? 34 : 18;
    for (size_t g = 0; g * 32 < n; g++) {
        const uint8_t *p = x + g * gbytes, *q = y + g * gbytes;
        size_t codes = dt == ATTN_INT8 ? (n - g * 32 < 32 ? n - g * 32 : 32) : 16;
        unsigned sp = (unsigned)(p[0] | p[1] << 8), sq = (unsigned)(q[0] | q[1] << 8);
        int both_nan = (sp & 0x7fff) > 0x7f80 && (sq & 0x7fff) > 0x7f80;
        if (!both_nan && sp != sq) return 0;
        if (memcmp(p + 2, q + 2, codes)) return 0;
    }
    return 1;
}

REF_FUNC double ref_scale(const attn_params *p) {
    if (p->scale != 0.0f) return (double)p->scale;
    return 1.0 / sqrt((double)p->head_size);
}

/* visible(i, j) = (not causal or j <= pos_i) and (W == 0 or pos_i - j < W) */
REF_FUNC int ref_visible(const attn_params *p, int causal, long pos_i, long j) {
    if (causal && j > pos_i) return 0;
    if (p->sliding_window > 0 && pos_i - j >= p->sliding_window) return 0;
    return 1;
}

/* The logit of query head h against key j, before masking; dot = <q_i, k_j> (unscaled). */
REF_FUNC double ref_logit(const attn_params *p, int h, double dot, long pos_i, long j) {
    double s = ref_scale(p) * dot;                         /* s = scale * <q, k> */
    if (p->logits_soft_cap > 0.0f) {
        double cap = (double)p->logits_soft_cap;
        s = cap * tanh(s / cap);                           /* s = cap * tanh(s / cap) */
    }
    if (p->alibi_slopes)
        s += (double)p->alibi_slopes[h] * (double)(j - pos_i);  /* s += slope_h * (j - pos_i) */
    return s;
}

/* One sequence of Lq queries against Lk keys.
   q element (t, h, d) is q[t*q_stride + h*D + d]; k and v element (j, kh, d) is
   k[j*k_stride + kh*D + d]. Strides are in elements; 0 means packed (H*D for q, Hk*D for k, v).
   out is dense [Lq][H][D]; lse is dense [Lq][H] and may be NULL. */
REF_FUNC void ref_attention(const attn_params *p, int causal, int Lq, int Lk,
                            const float *q, long q_stride, const float *k, long k_stride,
                            const float *v, long v_stride, double *out, double *lse) {
    const int H = p->num_heads, Hk = p->num_kv_heads, D = p->head_size;
    const int group = H / Hk;  /* query heads per KV head */
    int i, h, d;
    long j;
    if (q_stride == 0) q_stride = (long)H * D;
    if (k_stride == 0) k_stride = (long)Hk * D;
    if (v_stride == 0) v_stride = (long)Hk * D;
    for (i = 0; i < Lq; i++) {
        const long pos_i = (long)Lk - Lq + i;
        for (h = 0; h < H; h++) {
            const int kh = h / group;
            const float *qi = q + i * q_stride + (long)h * D;
            double *o = out + ((long)i * H + h) * D;
            double m = -INFINITY, denom = 0.0;
            int n_visible = 0;
            for (d = 0; d < D; d++) o[d] = 0.0;

            /* pass 1: m = max of the visible logits (and of the sink) */
            for (j = 0; j < Lk; j++) {
                const float *kj = k + j * k_stride + (long)kh * D;
                double dot = 0.0, s;
                if (!ref_visible(p, causal, pos_i, j)) continue;
                for (d = 0; d < D; d++) dot += (double)qi[d] * (double)kj[d];
                s = ref_logit(p, h, dot, pos_i, j);
                if (s > m) m = s;
                n_visible++;
            }
            if (n_visible == 0) {  /* nothing to attend to: out = 0, lse = -inf */
                if (lse) lse[(long)i * H + h] = -INFINITY;
                continue;
            }
            if (p->sinks && (double)p->sinks[h] > m) m = (double)p->sinks[h];

            /* pass 2: denom = sum exp(s_j - m) [+ exp(sink - m)], o = sum exp(s_j - m) v_j */
            for (j = 0; j < Lk; j++) {
                const float *kj = k + j * k_stride + (long)kh * D;
                const float *vj = v + j * v_stride + (long)kh * D;
                double dot = 0.0, w;
                if (!ref_visible(p, causal, pos_i, j)) continue;
                for (d = 0; d < D; d++) dot += (double)qi[d] * (double)kj[d];
                w = exp(ref_logit(p, h, dot, pos_i, j) - m);
                denom += w;
                for (d = 0; d < D; d++) o[d] += w * (double)vj[d];
            }
            if (p->sinks) denom += exp((double)p->sinks[h] - m);  /* the sink's value is 0 */

            /* p_j = exp(s_j - m) / denom;  lse = log(sum exp(s_j)) = m + log(denom) */
            for (d = 0; d < D; d++) o[d] /= denom;
            if (lse) lse[(long)i * H + h] = m + log(denom);
        }
    }
}

/* Copy the first len tokens of one sequence out of a paged cache array.
   cache is [num_blocks][num_kv_heads][block_size][head_size] (a float copy of one layer's key or
   value array); token t is in block block_table[t / block_size] at offset t % block_size.
   dst is dense [len][num_kv_heads][head_size]. */
REF_FUNC void ref_gather_paged(const float *cache, int block_size, int num_kv_heads,
                               int head_size, const int32_t *block_table, int len, float *dst) {
    int t, h, d;
    for (t = 0; t < len; t++) {
        const long block = block_table[t / block_size];
        const long offset = t % block_size;
        for (h = 0; h < num_kv_heads; h++) {
            for (d = 0; d < head_size; d++) {
                long src = ((block * num_kv_heads + h) * block_size + offset) * head_size + d;
                long dst_i = ((long)t * num_kv_heads + h) * head_size + d;
                dst[dst_i] = cache[src];
            }
        }
    }
}

/* The dense additive bias [H][Lq][Lk] equivalent to the params' ALiBi and masks:
   bias[h][i][j] = slope_h * (j - pos_i) (0 without ALiBi) where visible(i, j), else -inf.
   No soft cap here: a cap is applied to the scaled logits before any bias is added. */
REF_FUNC void ref_bias(const attn_params *p, int causal, int Lq, int Lk, double *bias) {
    int h, i;
    long j;
    for (h = 0; h < p->num_heads; h++) {
        for (i = 0; i < Lq; i++) {
            const long pos_i = (long)Lk - Lq + i;
            for (j = 0; j < Lk; j++) {
                double b = -INFINITY;
                if (ref_visible(p, causal, pos_i, j))
                    b = p->alibi_slopes ? (double)p->alibi_slopes[h] * (double)(j - pos_i) : 0.0;
                bias[((long)h * Lq + i) * Lk + j] = b;
            }
        }
    }
}

/* ALiBi slopes of n heads, the vLLM/BLOOM formula:
     P = 2^floor(log2 n),  base = 2^(-8/P),  slopes[k-1] = base^k  for k = 1..P;
     if P != n: extra = 2^(-4/P), r = min(P, n - P), then append extra^k for k = 1, 3, ..., 2r-1.
   e.g. n = 8: 2^-1 .. 2^-8;  n = 12: those, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5. */
REF_FUNC void ref_alibi_slopes(int n, double *slopes) {
    int P = 1, k, r;
    double base, extra;
    if (n <= 0) return;
    while (P * 2 <= n) P *= 2;  /* the largest power of two <= n, i.e. 2^floor(log2 n) */
    base = pow(2.0, -8.0 / P);
    for (k = 1; k <= P; k++) slopes[k - 1] = pow(base, (double)k);
    if (P == n) return;
    extra = pow(2.0, -4.0 / P);
    r = (P < n - P) ? P : n - P;
    for (k = 0; k < r; k++) slopes[P + k] = pow(extra, (double)(2 * k + 1));
}

/* Merge two partial attention results over disjoint key sets, given their LSEs:
     M   = max(lse_a, lse_b),  wa = exp(lse_a - M),  wb = exp(lse_b - M)
     out = (out_a * wa + out_b * wb) / (wa + wb),   lse = M + log(wa + wb)
   Both -inf (neither part saw a key): out = 0, lse = -inf.
   out_* are dense [num_tokens][num_heads][head_size], lse_* dense [num_tokens][num_heads];
   lse may be NULL. */
REF_FUNC void ref_merge(int num_tokens, int num_heads, int head_size,
                        const double *out_a, const double *lse_a,
                        const double *out_b, const double *lse_b, double *out, double *lse) {
    long r, d;
    for (r = 0; r < (long)num_tokens * num_heads; r++) {
        const double la = lse_a[r], lb = lse_b[r];
        const double M = la > lb ? la : lb;
        double wa, wb;
        if (isinf(M) && M < 0) {  /* both -inf */
            for (d = 0; d < head_size; d++) out[r * head_size + d] = 0.0;
            if (lse) lse[r] = -INFINITY;
            continue;
        }
        wa = exp(la - M);
        wb = exp(lb - M);
        for (d = 0; d < head_size; d++)
            out[r * head_size + d] =
                (out_a[r * head_size + d] * wa + out_b[r * head_size + d] * wb) / (wa + wb);
        if (lse) lse[r] = M + log(wa + wb);
    }
}

#endif /* ATTN_TEST_REF_H_INCLUDED */
