/* llama_ref.c - the oracle of tests/llama_check.sh: a plain llama forward pass written naively
   (contiguous KV cache per sequence, attention, norms and RoPE in double, no attn.h) that reads
   a llama2.c checkpoint and the --dump of examples/llama.c, replays every sample's tokens one
   position at a time, and compares the runner's logits with its own at every generated token.

   Usage: llama_ref model.bin dump.txt TOL [--first-ties] [--kv int8|int4]
   --kv: the runner's cache is integer; every key (after RoPE) and value row of a KV head is
   quantised here as attn.h documents its int8/int4 rows (attn_dtype_row_bytes), written anew from
   that text: groups of 32 elements of the row (as f32), scale = bf16(max |x| / 127, or / 7),
   rounded to nearest even (the smallest bf16 subnormal when a nonzero group's scale rounds to 0),
   element = RNE(x / scale) saturated to +-127 (+-7), times the scale. The reference then attends
   over those values in double, so the check compares the kernels on the same quantised cache,
   not the format with f32 (only roundings of the f32 and double projections that land on either
   side of a code's boundary differ, rarely, by one code).
   Checks, for every sample:
   - |runner logit - reference logit| <= TOL for every vocabulary entry of every generated token;
   - greedy dumps: each generated token is the runner's argmax, and the reference's argmax unless
     the reference's two best logits are within 2*TOL (a near tie: counted and reported, and the
     rest of the sample is still checked on the runner's tokens); the FIRST generated token of
     each sample must be the reference's argmax, near tie or not, unless --first-ties (fp8
     caches: their rounding moves logits by up to ~0.5, more than some first tokens' margins);
   - greedy dumps: samples of one prompt (forks) have the same tokens.
   Prints one summary line and "PASS" or "FAIL: ..."; exit status 0 on PASS. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int dim, hidden, layers, heads, kv_heads, vocab, seq_len, hs, kvd;
static int kv_int;  /* --kv: 0 (unquantised), 127 (int8) or 7 (int4): the largest code */
static const float *emb, *rms_att, *wq, *wk, *wv, *wo, *rms_ffn, *w1, *w2, *w3, *rms_final, *wcls;

static int load(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    int32_t h[7];
    if (fread(h, sizeof h, 1, f) != 1) { fclose(f); return 0; }
    dim = h[0]; hidden = h[1]; layers = h[2]; heads = h[3]; kv_heads = h[4];
    vocab = abs(h[5]); seq_len = h[6]; hs = dim / heads; kvd = kv_heads * hs;
    fseek(f, 0, SEEK_END);
    long n = (ftell(f) - 28) / 4;
    fseek(f, 28, SEEK_SET);
    float *w = (float *)malloc(sizeof(float) * (size_t)n);
    if (!w || fread(w, sizeof(float), (size_t)n, f) != (size_t)n) { fclose(f); return 0; }
    fclose(f);
    size_t D = (size_t)dim, L = (size_t)layers, F = (size_t)hidden, K = (size_t)kvd;
    const float *p = w;
    emb = p; p += (size_t)vocab * D;
    rms_att = p; p += L * D;
    wq = p; p += L * D * D;
    wk = p; p += L * K * D;
    wv = p; p += L * K * D;
    wo = p; p += L * D * D;
    rms_ffn = p; p += L * D;
    w1 = p; p += L * F * D;
    w2 = p; p += L * D * F;
    w3 = p; p += L * F * D;
    rms_final = p; p += D;
    p += (size_t)seq_len * (size_t)hs;
    wcls = h[5] > 0 ? emb : p;
    return 1;
}

static void mat(double *y, const double *x, const float *w, int K, int N) {
    for (int n = 0; n < N; n++) {
        double s = 0.0;
        for (int k = 0; k < K; k++) s += (double)w[(size_t)n * K + k] * x[k];
        y[n] = s;
    }
}

static void norm(double *o, const double *x, const float *w, int D) {
    double ss = 0.0;
    for (int i = 0; i < D; i++) ss += x[i] * x[i];
    double inv = 1.0 / sqrt(ss / D + 1e-5);
    for (int i = 0; i < D; i++) o[i] = (double)w[i] * x[i] * inv;
}

static void rot(double *v, int n_heads, int pos) {
    for (int h = 0; h < n_heads; h++)
        for (int i = 0; i < hs / 2; i++) {
            double a = pos * pow(10000.0, -2.0 * i / hs), c = cos(a), s = sin(a);
            double x = v[h * hs + 2 * i], y = v[h * hs + 2 * i + 1];
            v[h * hs + 2 * i] = x * c - y * s;
            v[h * hs + 2 * i + 1] = x * s + y * c;
        }
}

/* f to bfloat16 (round to nearest even; f is finite and >= 0), as a float. */
static float to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u = (u + 0x7fffu + (u >> 16 & 1u)) & 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}

/* Row r[0 .. hs) through the integer cache's rounding (--kv; see the top of this file). */
static void quantise_row(double *r) {
    for (int g = 0; g < hs; g += 32) {
        int m = hs - g < 32 ? hs - g : 32;
        float x[32], most = 0.0f;
        for (int i = 0; i < m; i++) {
            x[i] = (float)r[g + i];
            if (fabsf(x[i]) > most) most = fabsf(x[i]);
        }
        float scale = to_bf16(most / (float)kv_int);
        if (most > 0.0f && scale == 0.0f) scale = ldexpf(1.0f, -133);  /* bf16's least */
        for (int i = 0; i < m; i++) {
            float c = scale > 0.0f ? rintf(x[i] / scale) : 0.0f;  /* rint: nearest even */
            c = c > (float)kv_int ? (float)kv_int : c < (float)-kv_int ? (float)-kv_int : c;
            r[g + i] = (double)(c * scale);
        }
    }
}

/* Logits after each of tokens[0 .. n) (position p's row in logits[p * vocab]). */
static void run(const int *tokens, int n, double *logits) {
    double *K = (double *)malloc(sizeof(double) * (size_t)layers * n * kvd);
    double *V = (double *)malloc(sizeof(double) * (size_t)layers * n * kvd);
    double *x = (double *)malloc(sizeof(double) * dim),
            *xb = (double *)malloc(sizeof(double) * dim);
    double *q = (double *)malloc(sizeof(double) * dim), *o = (double *)malloc(sizeof(double) * dim);
    double *t = (double *)malloc(sizeof(double) * dim), *s = (double *)malloc(sizeof(double) * n);
    double *a = (double *)malloc(sizeof(double) * hidden),
            *b = (double *)malloc(sizeof(double) * hidden);
    for (int p = 0; p < n; p++) {
        for (int i = 0; i < dim; i++) x[i] = emb[(size_t)tokens[p] * dim + i];
        for (int l = 0; l < layers; l++) {
            double *kc = K + (size_t)l * n * kvd, *vc = V + (size_t)l * n * kvd;
            norm(xb, x, rms_att + (size_t)l * dim, dim);
            mat(q, xb, wq + (size_t)l * dim * dim, dim, dim);
            mat(kc + (size_t)p * kvd, xb, wk + (size_t)l * kvd * dim, dim, kvd);
            mat(vc + (size_t)p * kvd, xb, wv + (size_t)l * kvd * dim, dim, kvd);
            rot(q, heads, p);
            rot(kc + (size_t)p * kvd, kv_heads, p);
            for (int h = 0; kv_int && h < kv_heads; h++) {
                quantise_row(kc + (size_t)p * kvd + (size_t)h * hs);
                quantise_row(vc + (size_t)p * kvd + (size_t)h * hs);
            }
            for (int h = 0; h < heads; h++) {
                int kh = h / (heads / kv_heads);
                double mx = -1e300, sum = 0.0;
                for (int j = 0; j <= p; j++) {
                    double d = 0.0;
                    for (int e = 0; e < hs; e++) d +=
                            q[h * hs + e] * kc[(size_t)j * kvd + kh * hs + e];
                    s[j] = d / sqrt((double)hs);
                    if (s[j] > mx) mx = s[j];
                }
                for (int j = 0; j <= p; j++) sum += s[j] = exp(s[j] - mx);
                for (int e = 0; e < hs; e++) {
                    double acc = 0.0;
                    for (int j = 0; j <= p; j++) acc += s[j] * vc[(size_t)j * kvd + kh * hs + e];
                    o[h * hs + e] = acc / sum;
                }
            }
            mat(t, o, wo + (size_t)l * dim * dim, dim, dim);
            for (int i = 0; i < dim; i++) x[i] += t[i];
            norm(xb, x, rms_ffn + (size_t)l * dim, dim);
            mat(a, xb, w1 + (size_t)l * hidden * dim, dim, hidden);
            mat(b, xb, w3 + (size_t)l * hidden * dim, dim, hidden);
            for (int i = 0; i < hidden; i++) a[i] = a[i] / (1.0 + exp(-a[i])) * b[i];
            mat(t, a, w2 + (size_t)l * dim * hidden, hidden, dim);
            for (int i = 0; i < dim; i++) x[i] += t[i];
        }
        norm(xb, x, rms_final, dim);
        mat(logits + (size_t)p * vocab, xb, wcls, dim, vocab);
    }
    free(K); free(V); free(x); free(xb); free(q); free(o); free(t); free(s); free(a); free(b);
}

int main(int argc, char **argv) {
    int first_ties = 0, usage = argc < 4;
    for (int i = 4; i < argc && !usage; i++) {
        if (!strcmp(argv[i], "--first-ties")) first_ties = 1;
        else if (!strcmp(argv[i], "--kv") && i + 1 < argc && !strcmp(argv[i + 1], "int8"))
            kv_int = 127, i++;
        else if (!strcmp(argv[i], "--kv") && i + 1 < argc && !strcmp(argv[i + 1], "int4"))
            kv_int = 7, i++;
        else usage = 1;
    }
    if (usage) {
        fprintf(stderr, "usage: llama_ref model.bin dump.txt TOL [--first-ties] [--kv int8|int4]\n");
        return 2;
    }
    double tol = atof(argv[3]);
    if (!load(argv[1])) { printf("FAIL: cannot read %s\n", argv[1]); return 1; }
    FILE *f = fopen(argv[2], "r");
    int ns = 0, dv = 0, greedy = 0;
    if (!f || fscanf(f, "samples %d vocab %d greedy %d", &ns, &dv, &greedy) != 3 || dv != vocab) {
        printf("FAIL: cannot read %s\n", argv[2]);
        return 1;
    }
    int bad = 0, rows = 0, ties = 0, prev_prompt = -1, *prev_tok = NULL, prev_n = 0;
    double worst = 0.0;
    float *lg = (float *)malloc(sizeof(float) * (size_t)vocab);
    for (int i = 0; i < ns; i++) {
        int pr, idx, np, ng;
        if (fscanf(f, " sample %d %d %d %d", &pr, &idx, &np, &ng) != 4) {
            printf("FAIL: bad dump\n"); return 1;
        }
        int n = np + ng, *tok = (int *)malloc(sizeof(int) * (size_t)n);
        for (int j = 0; j < n; j++) if (fscanf(f, "%d", &tok[j]) != 1) {
            printf("FAIL: bad dump\n"); return 1;
        }
        double *ref = (double *)malloc(sizeof(double) * (size_t)n * vocab);
        run(tok, n > 1 ? n - 1 : 1, ref);
        for (int g = 0; g < ng; g++, rows++) {
            const double *r = ref + (size_t)(np - 1 + g) * vocab;
            int ra = 0, la = 0, r2 = -1;
            for (int v = 0; v < vocab; v++) {
                if (fscanf(f, "%f", &lg[v]) != 1) { printf("FAIL: bad dump\n"); return 1; }
                double d = fabs((double)lg[v] - r[v]);
                if (!(d <= worst)) worst = d;
                if (r[v] > r[ra]) ra = v;
                if (lg[v] > lg[la]) la = v;
            }
            for (int v = 0; v < vocab; v++) if (v != ra && (r2 < 0 || r[v] > r[r2])) r2 = v;
            int tie = r[ra] - r[r2] < 2 * tol, tk = tok[np + g];
            if (greedy && tk != la) {
                printf("FAIL: sample %d.%d token %d is %d, not the argmax %d of its logits\n", pr,
                       idx, g, tk, la);
                bad++;
            }
            if (greedy && tk != ra) {
                if (tie && (g > 0 || first_ties)) ties++;
                else {
                    printf("FAIL: sample %d.%d token %d is %d, the reference's argmax is %d "
                           "(margin %.4f)\n",
                           pr, idx, g, tk, ra, r[ra] - r[r2]);
                    bad++;
                }
            }
        }
        if (greedy && pr == prev_prompt &&
            (prev_n != n || memcmp(prev_tok, tok, sizeof(int) * (size_t)n))) {
            printf("FAIL: greedy samples %d.0 and %d.%d differ\n", pr, pr, idx);
            bad++;
        }
        free(prev_tok);
        prev_tok = tok; prev_n = n; prev_prompt = pr;
        free(ref);
    }
    free(prev_tok); free(lg);
    fclose(f);
    if (worst > tol) { printf("FAIL: max |logit - reference| = %.3g > %.3g\n", worst, tol); bad++; }
    printf("%d samples, %d generated tokens checked, max |logit - reference| %.3g (tol %.3g), "
           "near ties %d: %s\n", ns, rows, worst, tol, ties, bad ? "FAIL" : "PASS");
    return bad ? 1 : 0;
}
