/* bench/peer_ggml.c - llama.cpp's CPU flash attention (ggml_flash_attn_ext on the CPU backend)
   on attn_bench's shapes, in attn_bench's units, for the ratio on the same machine.

   prefill: one sequence of S tokens, causal (an f16 mask of 0 and -inf, as llama.cpp passes it),
            f32 queries, K/V in --kv-dtype; useful GFLOP/s = 4 * D FLOPs per visible (query, key)
            pair and head, as attn_bench counts (whatever the kernel does with masked pairs).
   decode:  one query token for each of --seqs sequences over --ctx tokens of contiguous K/V
            ([D, ctx, Hk, seqs]: llama.cpp's own layout, no block tables), no mask; KV GB/s.
            A single sequence takes ggml's split-KV path (ctx >= 512), several its batched one.
            --gqa takes attn_bench decode's model shapes: for each G, H = G x Hk with Hk 32
            (G = 1), 16 (G = 2) or 8, and 16 / 32 / 64 / 32 / 16 sequences for G = 1 / 2 / 4 /
            8 / 16 (--seqs overrides).

   Before it is timed, one output row (the last query token of sequence 0, the last head) is
   compared with a float64 softmax of the same inputs: `err` is the largest difference. In its
   one-query path ggml rounds the queries to f16 where K is f16 and sums P.V over f16 values in
   an f16 accumulator, so expect decode errors near f16's precision there.

   Build: ggml from llama.cpp (e.g. the source that `pip download --no-binary :all:
   llama-cpp-python` fetches, vendor/llama.cpp/ggml), CPU backend, static:
     cmake -S ggml -B gbuild -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_OPENMP=ON \
           -DBUILD_SHARED_LIBS=OFF && cmake --build gbuild -j
     make bench-ggml GGML_INC=ggml/include GGML_LIB=gbuild/src
   then, e.g.: ./build/peer_ggml prefill -S 512,2048,8192 -t 2
               ./build/peer_ggml decode --seqs 1 --ctx 32768 -t 2 */
#include "ggml.h"
#include "ggml-cpu.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_LIST 16
#define MAX_REPS 100

typedef struct { int v[MAX_LIST], n; } list;
typedef struct {
    int prefill, H, Hk, D, seqs, reps, kv_f32, seqs_given;
    list S, threads, gqa;
} options;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static unsigned rng = 1;
static float uniform(void) {  /* in [-0.5, 0.5) */
    rng = rng * 1103515245u + 12345u;
    return (float)((rng >> 8) & 0xffff) / 65536.0f - 0.5f;
}
static int parse_list(const char *s, list *l) {
    l->n = 0;
    while (*s && l->n < MAX_LIST) {
        char *end;
        long x = strtol(s, &end, 10);
        if (end == s || x < 1 || x > 1 << 20) return 0;
        l->v[l->n++] = (int)x;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return 0;
    }
    return l->n > 0 && !*s;
}

static float element(const struct ggml_tensor *t, size_t i) {
    return t->type == GGML_TYPE_F16 ? ggml_fp16_to_fp32(((const ggml_fp16_t *)t->data)[i])
                                    : ((const float *)t->data)[i];
}
static void fill(struct ggml_tensor *t) {
    for (int64_t i = 0; i < ggml_nelements(t); i++) {
        float x = uniform();
        if (t->type == GGML_TYPE_F16) ((ggml_fp16_t *)t->data)[i] = ggml_fp32_to_fp16(x);
        else ((float *)t->data)[i] = x;
    }
}

/* The largest difference between output row (query i of sequence 0, head h) and a float64
   softmax over its visible keys. Layouts: q [D, nb, H, seqs], k/v [D, kv, Hk, seqs], o [D, H,
   nb, seqs]. */
static double row_error(const struct ggml_tensor *q, const struct ggml_tensor *k,
                        const struct ggml_tensor *v, const struct ggml_tensor *o, int h, int i,
                        int visible) {
    int D = (int)q->ne[0], nb = (int)q->ne[1], H = (int)q->ne[2], kv = (int)k->ne[1];
    int g = h / (H / (int)k->ne[2]);
    double *w = malloc(sizeof(double) * (size_t)visible), mx = -INFINITY, l = 0, err = 0;
    const float *qr = (const float *)q->data + ((size_t)h * nb + i) * D;
    if (!w) return INFINITY;
    for (int j = 0; j < visible; j++) {
        double x = 0;
        for (int d = 0; d < D; d++) x += (double)qr[d] * element(k, ((size_t)g * kv + j) * D + d);
        w[j] = x / sqrt((double)D);
        if (w[j] > mx) mx = w[j];
    }
    for (int j = 0; j < visible; j++) l += (w[j] = exp(w[j] - mx));
    for (int d = 0; d < D; d++) {
        double acc = 0;
        for (int j = 0; j < visible; j++) acc += w[j] * element(v, ((size_t)g * kv + j) * D + d);
        double got = ((const float *)o->data)[((size_t)i * H + h) * D + d];
        if (fabs(got - acc / l) > err) err = fabs(got - acc / l);
    }
    free(w);
    return err;
}

/* One row of the table: S is the prefill length or the decode context. */
static void run(const options *op, int S, int threads) {
    int nb = op->prefill ? S : 1, seqs = op->prefill ? 1 : op->seqs, D = op->D;
    enum ggml_type kt = op->kv_f32 ? GGML_TYPE_F32 : GGML_TYPE_F16;
    size_t esz = op->kv_f32 ? 4 : 2;
    size_t qo = (size_t)D * nb * op->H * 4 * 2, kv = (size_t)D * S * op->Hk * esz * 2;
    size_t bytes = (size_t)seqs * (qo + kv) + (op->prefill ? (size_t)S * nb * 2 : 0)
                   + ((size_t)64 << 20);
    struct ggml_init_params ip = {bytes, NULL, false};
    struct ggml_context *ctx = ggml_init(ip);  /* aborts with ggml's message when out of memory */
    struct ggml_tensor *q = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, D, nb, op->H, seqs);
    struct ggml_tensor *k = ggml_new_tensor_4d(ctx, kt, D, S, op->Hk, seqs);
    struct ggml_tensor *v = ggml_new_tensor_4d(ctx, kt, D, S, op->Hk, seqs);
    struct ggml_tensor *mask = NULL;
    fill(q); fill(k); fill(v);
    if (op->prefill) {
        ggml_fp16_t zero = ggml_fp32_to_fp16(0.0f), minus_inf = ggml_fp32_to_fp16(-INFINITY);
        mask = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, S, nb, 1, 1);
        for (int i = 0; i < nb; i++)
            for (int j = 0; j < S; j++)
                ((ggml_fp16_t *)mask->data)[(size_t)i * S + j] = j <= i ? zero : minus_inf;
    }
    struct ggml_tensor *o = ggml_flash_attn_ext(ctx, q, k, v, mask, 1.0f / sqrtf((float)D), 0.0f,
                                                0.0f);
    ggml_prec_set_acc(o, GGML_PREC_F32);  /* as llama.cpp asks for its attention */
    struct ggml_cgraph *graph = ggml_new_graph(ctx);
    ggml_build_forward_expand(graph, o);
    ggml_graph_compute_with_ctx(ctx, graph, threads);  /* the warm-up, and the checked call */
    double err = row_error(q, k, v, o, op->H - 1, nb - 1, op->prefill ? nb : S), t[MAX_REPS];
    for (int r = 0; r < op->reps; r++) {
        double t0 = now();
        ggml_graph_compute_with_ctx(ctx, graph, threads);
        t[r] = now() - t0;
    }
    qsort(t, (size_t)op->reps, sizeof(double), cmp_double);
    double med = t[op->reps / 2];
    char shape[64], value[32];
    snprintf(shape, sizeof shape, "H%d/%d D%d %dx%d%s", op->H, op->Hk, D, seqs, S,
             op->prefill ? " causal" : "");
    if (op->prefill)
        snprintf(value, sizeof value, "%.1f GFLOP/s",
                 4.0 * D * op->H * (double)S * (S + 1) / 2 / med * 1e-9);
    else
        snprintf(value, sizeof value, "%.1f GB/s",
                 (double)seqs * S * op->Hk * D * 2 * (double)esz / med * 1e-9);
    printf("| ggml | %-7s | %2d | f32/%s | %-28s | %4d | %10.3f | %16s | %.1e |\n",
           op->prefill ? "prefill" : "decode", threads, op->kv_f32 ? "f32" : "f16", shape,
           op->reps, med * 1e3, value, err);
    ggml_free(ctx);
}

static int usage(void) {
    fprintf(stderr,
            "usage: peer_ggml prefill|decode [-S L] [--ctx L] [--seqs N] [-H N] [--hk N] [-D N]\n"
            "                 [-t L] [-r N] [--kv-dtype f16|f32] [--gqa L]\n"
            "  L = comma list; defaults: -S 2048, --ctx 4096, --seqs 1, H32/Hk8, D 128, -t 2,\n"
            "  -r 5, f16 K/V (llama.cpp's default cache type; queries are f32); decode --gqa:\n"
            "  attn_bench decode's model shapes for each G (-H, --hk unused)\n");
    return 2;
}

int main(int argc, char **argv) {
    options op = {0, 32, 8, 128, 1, 5, 0, 0, {{2048}, 1}, {{2}, 1}, {{0}, 0}};
    list ctx = {{4096}, 1};
    if (argc < 2) return usage();
    if (!strcmp(argv[1], "prefill")) op.prefill = 1;
    else if (strcmp(argv[1], "decode")) return usage();
    for (int a = 2; a < argc; a += 2) {
        const char *k = argv[a], *v = a + 1 < argc ? argv[a + 1] : NULL;
        int ok = v != NULL;
        if (!ok) return usage();
        if (!strcmp(k, "-S")) ok = parse_list(v, &op.S);
        else if (!strcmp(k, "--ctx")) ok = parse_list(v, &ctx);
        else if (!strcmp(k, "-t")) ok = parse_list(v, &op.threads);
        else if (!strcmp(k, "--seqs")) ok = (op.seqs_given = op.seqs = atoi(v)) >= 1;
        else if (!strcmp(k, "--gqa")) ok = parse_list(v, &op.gqa);
        else if (!strcmp(k, "-H")) ok = (op.H = atoi(v)) >= 1;
        else if (!strcmp(k, "--hk")) ok = (op.Hk = atoi(v)) >= 1;
        else if (!strcmp(k, "-D")) ok = (op.D = atoi(v)) >= 1;
        else if (!strcmp(k, "-r")) ok = (op.reps = atoi(v)) >= 1 && op.reps <= MAX_REPS;
        else if (!strcmp(k, "--kv-dtype"))
            ok = (op.kv_f32 = !strcmp(v, "f32")) || !strcmp(v, "f16");
        else ok = 0;
        if (!ok) return usage();
    }
    if (op.H % op.Hk || (op.prefill && op.gqa.n)) return usage();
    printf("| peer | mode    |  t | q/kv    | shape                        | reps |         ms |"
           "       throughput | err |\n"
           "|------|---------|---:|---------|------------------------------|-----:|-----------:|"
           "-----------------:|-----|\n");
    const list *lengths = op.prefill ? &op.S : &ctx;
    for (int s = 0; s < (op.gqa.n ? op.gqa.n : 1); s++) {
        if (op.gqa.n) {  /* as attn_bench decode --gqa */
            int G = op.gqa.v[s];
            op.Hk = G == 1 ? 32 : G == 2 ? 16 : 8;
            op.H = G * op.Hk;
            if (!op.seqs_given) op.seqs = G <= 4 ? 64 * 8 / op.Hk : G < 256 ? 64 * 4 / G : 1;
        }
        for (int i = 0; i < lengths->n; i++)
            for (int t = 0; t < op.threads.n; t++) run(&op, lengths->v[i], op.threads.v[t]);
    }
    return 0;
}
