/* llama.c - a llama-family runner on attn.h with continuous batching over the paged KV cache.

   Reads a llama2.c checkpoint (7-int header dim, hidden_dim, n_layers, n_heads, n_kv_heads,
   vocab_size (< 0: unshared classifier), seq_len, then the weights in llama2.c's order; e.g.
   stories15M.bin, or one from examples/make_checkpoint.c) and serves several prompts at once:
   RMSNorm, RoPE (rotating pairs of dims), SwiGLU, grouped-query attention. Every attention call
   is attn_forward over one attn_kv_cache per layer, all layers sharing one attn_block_pool, with
   each step's attn_metadata filled by attn_batch_build:
   - continuous batching: prompts arrive at given steps; each step is one mixed batch of prefill
     chunks (--chunk N tokens of a prompt per step, over its cached prefix) and decodes under a
     token budget; finished sequences release their blocks and waiting ones join;
   - a full pool (ATTN_ERR_OUT_OF_BLOCKS from the builder) preempts the youngest sequence: its
     blocks are released and it is recomputed (prompt + tokens so far) when it is admitted again;
   - -n K samples per prompt fork the prompt's sequence once its prompt is cached
     (attn_seq_fork); the shared last block is copied on write through the builder's
     blocks_to_copy, which attn_forward applies;
   - prefix caching (on by default; --prefix-cache off): the pool has a prefix cache, every
     sequence gives it its token ids, and each admission (and re-admission after preemption)
     looks its tokens up, so only the part not already cached is prefilled; finished requests
     leave their full blocks cached until the pool needs them;
   - --system TEXT: a system prompt put before every prompt; with the prefix cache the first
     request computes it and the others find it; with --prefix-cache off it is computed once,
     before the first step, and every prompt's sequence starts as a fork of it;
   - greedy, or --temp / --top-p sampling with --seed; --kv-dtype, --block-size, --blocks (pool
     size), --threads, --backend sdpa|ipex (ipex needs -DATTN_USE_ONEDNN ... -ldnnl);
   - decode reads a prompt's blocks that its -n samples share once for all of them (attn.h's
     shared prefixes; --shared-prefixes off reads them once a sample, for the comparison);
   - text in and out with a llama2.c tokenizer.bin (-z), token ids otherwise;
   - at the end: prefill and decode tokens/s, time in attention vs the rest, peak KV blocks in use,
     preemptions, the prefix cache's hits (prefill tokens saved) and the mean time to first
     token (from the start of a prompt's arrival step to its first token).
   The matmuls are plain C (OpenMP over blocks of output rows, four tokens per pass over a
   weight row, on one thread while that is faster: see matmul_parallel); they are not the point
   of this example.

   Build: cc -O2 -fopenmp -I. examples/llama.c -o llama -lm
   Usage: llama model.bin [-z tokenizer.bin] [-p PROMPT]... [-f PROMPTS_FILE] [--arrive 0,0,3]
                [-n K] [-m MAX_NEW] [--temp T] [--top-p P] [--seed S] [--chunk N]
                [--batch-tokens N] [--max-seqs N]
                [--kv-dtype f32|f16|bf16|fp8_e4m3|fp8_e5m2|int8|int4]
                [--block-size N] [--blocks N] [--threads N] [--backend sdpa|ipex]
                [--system TEXT] [--prefix-cache on|off] [--shared-prefixes on|off]
                [--ignore-eos] [--dump FILE] [-q]
   Without a tokenizer a prompt of digits ("1 403 77") is token ids, other text its bytes. An id
   outside the vocabulary, a prompt (with --system) that leaves no room to generate in seq_len,
   or a line of -f longer than 4095 characters is refused with a message. Generation stops at
   -m tokens or at an end token (BOS/EOS, ids 1 and 2); --ignore-eos keeps going to -m.
   --dump writes every sample's tokens and the logits that chose each generated token (text),
   for tests/llama_ref.c to check against a naive double-precision forward pass.
   With no arguments it builds a tiny random model in memory and serves prompts with chunking,
   forking and preemption, then checks that every greedy output equals that prompt served alone
   (no chunking, a large pool, one thread); exit status 0 when they agree.

   Tensor-parallel over MPI: mpicc -O2 -fopenmp -DLLAMA_MPI -I. examples/llama.c -o llama_mpi -lm
   then mpirun -np N ./llama_mpi model.bin ... (N must divide the KV heads). Each rank keeps the
   rows of wq/wk/wv and the columns of wo of its num_heads/N query and num_kv_heads/N KV heads,
   and the rows of w1/w3 and columns of w2 of its part of the hidden dim (Megatron-style), with
   its own attn_layer, KV caches and block pool; the partial outputs of wo and w2 are summed with
   MPI_Allreduce. Embedding and norms are whole on every rank, the classifier on rank 0. Every rank
   runs the same scheduler on the same inputs; rank 0 samples and broadcasts each token, and each
   step's metadata (block tables, slot mapping, copies), tokens and hidden state are hashed and
   compared across ranks, so the pools provably stay identical. Only rank 0 writes to stdout. */
#define _POSIX_C_SOURCE 200809L
#define ATTN_IMPLEMENTATION
#include "attn.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef LLAMA_MPI
#include <mpi.h>
static int g_ranks = 1;  /* the MPI rank count */
#endif
static int g_rank = 0;   /* this process's MPI rank: 0 without MPI */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) { fprintf(stderr, "out of memory (%zu bytes)\n", n); exit(1); }
    return p;
}

/* ---- the model ------------------------------------------------------------------------------ */
typedef struct model {
    int dim, hidden, layers, heads, kv_heads, vocab, seq_len, shared, hs, kvd;
    int qd;                      /* heads * hs: dim, or this rank's share of it under MPI */
    const float *emb, *rms_att, *wq, *wk, *wv, *wo, *rms_ffn, *w1, *w2, *w3, *rms_final, *wcls;
    float *rope_cos, *rope_sin;  /* [seq_len][hs / 2] */
    void *file;                  /* the checkpoint's bytes (owned) */
} model;

/* Maps the weights of a checkpoint held in memory (header + floats). 0 when it is malformed. */
static int model_map(model *m, void *file, size_t bytes) {
    int32_t h[7];
    if (bytes < sizeof h) return 0;
    memcpy(h, file, sizeof h);
    memset(m, 0, sizeof *m);
    m->dim = h[0]; m->hidden = h[1]; m->layers = h[2]; m->heads = h[3]; m->kv_heads = h[4];
    m->shared = h[5] > 0; m->vocab = h[5] > 0 ? h[5] : -h[5]; m->seq_len = h[6];
    if (m->dim < 2 || m->hidden < 1 || m->layers < 1 || m->heads < 1 || m->kv_heads < 1 ||
        m->vocab < 3 || m->seq_len < 2 || m->dim % m->heads || m->heads % m->kv_heads ||
        (m->dim / m->heads) % 2)
        return 0;
    m->hs = m->dim / m->heads; m->kvd = m->kv_heads * m->hs; m->qd = m->dim;
    size_t D = (size_t)m->dim, L = (size_t)m->layers, F = (size_t)m->hidden, K = (size_t)m->kvd;
    size_t need = (size_t)m->vocab * D + L * (D + D * D + 2 * K * D + D * D + D + 3 * F * D) + D +
                  (size_t)m->seq_len * (size_t)m->hs + (m->shared ? 0 : (size_t)m->vocab * D);
    if ((bytes - sizeof h) / sizeof(float) < need) return 0;
    const float *p = (const float *)((const char *)file + sizeof h);
    m->emb = p; p += (size_t)m->vocab * D;
    m->rms_att = p; p += L * D;
    m->wq = p; p += L * D * D;
    m->wk = p; p += L * K * D;
    m->wv = p; p += L * K * D;
    m->wo = p; p += L * D * D;
    m->rms_ffn = p; p += L * D;
    m->w1 = p; p += L * F * D;
    m->w2 = p; p += L * D * F;
    m->w3 = p; p += L * F * D;
    m->rms_final = p; p += D;
    p += (size_t)m->seq_len * (size_t)m->hs;  /* legacy freq_cis_real and _imag: skipped */
    m->wcls = m->shared ? m->emb : p;
    size_t half = (size_t)m->hs / 2;
    m->rope_cos = (float *)xmalloc(sizeof(float) * (size_t)m->seq_len * half);
    m->rope_sin = (float *)xmalloc(sizeof(float) * (size_t)m->seq_len * half);
    for (int pos = 0; pos < m->seq_len; pos++)
        for (size_t i = 0; i < half; i++) {
            double a = pos * pow(10000.0, -2.0 * (double)i / m->hs);
            m->rope_cos[(size_t)pos * half + i] = (float)cos(a);
            m->rope_sin[(size_t)pos * half + i] = (float)sin(a);
        }
    m->file = file;
    return 1;
}

static int model_load(model *m, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "cannot open %s\n", path); return 0; }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = size > 0 ? xmalloc((size_t)size) : NULL;
    int ok = buf && fread(buf, 1, (size_t)size, f) == (size_t)size;
    fclose(f);
    if (ok && model_map(m, buf, (size_t)size)) return 1;
    fprintf(stderr, "%s: not a llama2.c checkpoint (or truncated)\n", path);
    free(buf);
    return 0;
}

static void model_free(model *m) { free(m->file); free(m->rope_cos); free(m->rope_sin); }

#ifdef LLAMA_MPI
/* ---- tensor parallelism over MPI ------------------------------------------------------------ */
/* Keeps rank r's slice of every layer (of n ranks): the rows of wq, wk, wv that compute its query
   and KV heads, the columns of wo that read them, the rows of w1, w3 and columns of w2 of its part
   of the hidden dim (the last rank takes the remainder); embedding and norms whole, the classifier
   on rank 0 only. The sliced copy replaces the checkpoint's bytes. 0 (a message from rank 0) when
   n does not divide the KV heads. */
static int model_shard(model *m, int r, int n) {
    if (m->kv_heads % n || m->hidden < n) {
        if (r == 0)
            fprintf(stderr, "llama_mpi: %d ranks do not divide the %d KV heads (run with -np N, N "
                    "a divisor of %d)\n", n, m->kv_heads, m->kv_heads);
        return 0;
    }
    size_t D = (size_t)m->dim, L = (size_t)m->layers, V = (size_t)m->vocab, FF = (size_t)m->hidden;
    size_t qd = (size_t)(m->heads / n * m->hs), kd = (size_t)(m->kv_heads / n * m->hs);
    size_t f0 = (size_t)r * (FF / n), F = r == n - 1 ? FF - f0 : FF / n;
    int own_cls = !m->shared && r == 0;
    float *w = (float *)xmalloc(sizeof(float) * (V * D + 2 * L * D + D + (own_cls ? V * D : 0) +
                                                 L * (2 * qd * D + 2 * kd * D + 3 * F * D)));
    float *emb = w, *ra = emb + V * D, *rf = ra + L * D, *rfin = rf + L * D, *wq = rfin + D;
    float *wk = wq + L * qd * D, *wv = wk + L * kd * D, *wo = wv + L * kd * D,
           *w1 = wo + L * D * qd;
    float *w2 = w1 + L * F * D, *w3 = w2 + L * D * F, *cls = w3 + L * F * D;
    memcpy(emb, m->emb, sizeof(float) * V * D);
    memcpy(ra, m->rms_att, sizeof(float) * L * D);
    memcpy(rf, m->rms_ffn, sizeof(float) * L * D);
    memcpy(rfin, m->rms_final, sizeof(float) * D);
    if (own_cls) memcpy(cls, m->wcls, sizeof(float) * V * D);
    for (size_t l = 0; l < L; l++) {
        size_t kvd = (size_t)m->kvd;
        memcpy(wq + l * qd * D, m->wq + (l * D + r * qd) * D, sizeof(float) * qd * D);
        memcpy(wk + l * kd * D, m->wk + (l * kvd + r * kd) * D, sizeof(float) * kd * D);
        memcpy(wv + l * kd * D, m->wv + (l * kvd + r * kd) * D, sizeof(float) * kd * D);
        memcpy(w1 + l * F * D, m->w1 + (l * FF + f0) * D, sizeof(float) * F * D);
        memcpy(w3 + l * F * D, m->w3 + (l * FF + f0) * D, sizeof(float) * F * D);
        for (size_t i = 0; i < D; i++) {
            memcpy(wo + (l * D + i) * qd, m->wo + (l * D + i) * D + r * qd, sizeof(float) * qd);
            memcpy(w2 + (l * D + i) * F, m->w2 + (l * D + i) * FF + f0, sizeof(float) * F);
        }
    }
    m->emb = emb; m->rms_att = ra; m->rms_ffn = rf; m->rms_final = rfin;
    m->wq = wq; m->wk = wk; m->wv = wv; m->wo = wo; m->w1 = w1; m->w2 = w2; m->w3 = w3;
    m->wcls = m->shared ? emb : own_cls ? cls : NULL;
    m->heads /= n; m->kv_heads /= n; m->qd = (int)qd; m->kvd = (int)kd; m->hidden = (int)F;
    free(m->file);
    m->file = w;
    return 1;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
    return h;
}
#endif

/* 1 on every rank when ok is nonzero on every rank (a failure on one host stops them all). */
static int all_ranks(int ok) {
#ifdef LLAMA_MPI
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
#endif
    return ok;
}

/* Sums x over the ranks (each holds a partial product of its heads or hidden slice). */
static void all_sum(float *x, size_t n) {
#ifdef LLAMA_MPI
    MPI_Allreduce(MPI_IN_PLACE, x, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
#else
    (void)x; (void)n;
#endif
}

/* A tiny random model in memory, for the no-argument self-check (the layout of a file from
   examples/make_checkpoint.c --tiny, other random values). */
static int model_tiny(model *m) {
    int32_t h[7] = {64, 192, 2, 4, 2, -512, 256};
    int hs = 16;
    size_t n = 512 * 64 + 2 * (64 + 64 * 64 + 2 * 32 * 64 + 64 * 64 + 64 + 3 * 192 * 64) + 64 +
               256 * (size_t)hs + 512 * 64;
    char *buf = (char *)xmalloc(sizeof h + n * sizeof(float));
    float *w = (float *)(buf + sizeof h);
    memcpy(buf, h, sizeof h);
    uint64_t s = 12345;
    /* {count, std, mean} in file order; std 1/sqrt(fan_in), residual branches halved */
    const double sd = 0.125, sh = 0.0722;
    struct { size_t n; double std, mean; } part[] = {
        {512 * 64, 1, 0}, {2 * 64, 0.05, 1}, {2 * 64 * 64, sd, 0}, {2 * 32 * 64, sd, 0},
        {2 * 32 * 64, sd, 0}, {2 * 64 * 64, sd / 2, 0}, {2 * 64, 0.05, 1}, {2 * 192 * 64, sd, 0},
        {2 * 64 * 192, sh / 2, 0}, {2 * 192 * 64, sd, 0}, {64, 0.05, 1}, {256 * 16, 0, 0},
        {512 * 64, 4 * sd, 0}};
    size_t k = 0;
    for (size_t j = 0; j < sizeof part / sizeof part[0]; j++)
        for (size_t i = 0; i < part[j].n; i++) {
            s ^= s >> 12; s ^= s << 25; s ^= s >> 27;
            double u = (double)((s * 2685821657736338717ull) >> 11) / 9007199254740992.0;
            w[k++] = (float)(part[j].mean + part[j].std * 1.7320508 * (2 * u - 1));
        }
    return k == n && model_map(m, buf, sizeof h + n * sizeof(float));
}

/* ---- kernels: matmul, RMSNorm, RoPE, SwiGLU ------------------------------------------------ */
/* y[t][n] = sum_k x[t][k] w[n][k] for T tokens. Threads own blocks of 16 output rows; each
   weight row is read once per four tokens. Every dot product sums the same 8 lanes in the same
   order whatever the batch holds, so a token's result does not depend on its neighbours. */
static void dot4(const float *w, const float *x, size_t stride, int nt, int K, float *out,
                 size_t ostride) {
    float acc[4][8] = {{0}};
    int k = 0;
    for (; k + 8 <= K; k += 8)
        for (int t = 0; t < nt; t++)
            for (int l = 0; l < 8; l++) acc[t][l] += w[k + l] * x[(size_t)t * stride + k + l];
    for (; k < K; k++)
        for (int t = 0; t < nt; t++) acc[t][k & 7] += w[k] * x[(size_t)t * stride + k];
    for (int t = 0; t < nt; t++)
        out[(size_t)t * ostride] = ((acc[t][0] + acc[t][1]) + (acc[t][2] + acc[t][3])) +
                                   ((acc[t][4] + acc[t][5]) + (acc[t][6] + acc[t][7]));
}

/* Whether a matmul of `work` multiply-adds runs on the threads: not under 2^18 (over before they
   start), else while the threads' seconds per multiply-add stay below one thread's. Both are
   running means, each mode retried once in 256 calls: where another process keeps a core busy, a
   parallel region waits for the thread that shares it (milliseconds) and one thread is faster,
   and a retry in every 32 calls cost make run 5-10% there (docs/PERF.md#serial-below).
   The result is the same either way (rows are split, not sums). */
static double g_mm_rate[2];  /* seconds per multiply-add: [0] one thread, [1] the threads */
static long g_mm_calls;
static int matmul_parallel(double work) {
#ifdef _OPENMP
    if (work < 262144.0 || omp_get_max_threads() < 2) return 0;
#else
    (void)work;
    return 0;
#endif
    long c = g_mm_calls++;
    if (c % 256 == 0 || c % 256 == 128) return c % 256 == 128;  /* the retries */
    return g_mm_rate[0] == 0.0 || g_mm_rate[1] == 0.0 || g_mm_rate[1] < g_mm_rate[0];
}

static void matmul(float *y, const float *x, const float *w, int T, int K, int N) {
    int nblocks = (N + 15) / 16;
    double work = (double)T * K * N, t0 = now_s();
    int par = matmul_parallel(work);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (par)
#endif
    for (int b = 0; b < nblocks; b++) {
        int n1 = b * 16 + 16 < N ? b * 16 + 16 : N;
        for (int t = 0; t < T; t += 4) {
            int nt = T - t < 4 ? T - t : 4;
            for (int n = b * 16; n < n1; n++)
                dot4(w + (size_t)n * (size_t)K, x + (size_t)t * (size_t)K, (size_t)K, nt, K,
                     y + (size_t)t * (size_t)N + (size_t)n, (size_t)N);
        }
    }
    if (work >= 262144.0) {
        double r = (now_s() - t0) / work;
        g_mm_rate[par] = g_mm_rate[par] == 0.0 ? r : 0.9 * g_mm_rate[par] + 0.1 * r;
    }
}

static void rmsnorm(float *out, const float *x, const float *w, int T, int D) {
    for (int t = 0; t < T; t++) {
        const float *r = x + (size_t)t * (size_t)D;
        float ss = 0.0f;
        for (int i = 0; i < D; i++) ss += r[i] * r[i];
        float inv = 1.0f / sqrtf(ss / (float)D + 1e-5f);
        for (int i = 0; i < D; i++) out[(size_t)t * (size_t)D + i] = w[i] * (r[i] * inv);
    }
}

/* Rotates dims (2i, 2i+1) of every head by pos * 10000^(-2i/hs) (llama2.c's convention). */
static void rope(const model *m, float *x, int T, const int *pos, int heads) {
    int half = m->hs / 2;
    for (int t = 0; t < T; t++) {
        const float *c = m->rope_cos + (size_t)pos[t] * (size_t)half;
        const float *s = m->rope_sin + (size_t)pos[t] * (size_t)half;
        for (int h = 0; h < heads; h++) {
            float *v = x + ((size_t)t * (size_t)heads + (size_t)h) * (size_t)m->hs;
            for (int i = 0; i < half; i++) {
                float a = v[2 * i], b = v[2 * i + 1];
                v[2 * i] = a * c[i] - b * s[i];
                v[2 * i + 1] = a * s[i] + b * c[i];
            }
        }
    }
}

/* ---- serving ----------------------------------------------------------------------------- */
typedef struct options {
    int threads, chunk, batch_tokens, max_seqs, block_size, blocks, n_samples, max_new;
    int ignore_eos, quiet;
    float temp, top_p;
    unsigned long long seed;
    attn_dtype kv;
    attn_backend backend;
    FILE *dump;
    const int *sys_tok;         /* --system: tokens before every prompt, computed once */
    int sys_len;
    int prefix_cache;           /* --prefix-cache on (1) | off (0) */
    int shared_prefixes;        /* --shared-prefixes on (1) | off (0): decode reads blocks that
                                   several samples share once for all (attn.h's default) */
} options;

typedef struct stats {
    double t_total, t_attn, t_prefill, t_decode;
    long prefill_tokens, decode_tokens, generated;
    int steps, peak_blocks, preemptions, forks, cow_copies, dropped, num_blocks;
    int system_tokens, system_shares;  /* the system prompt's length, and the forks of it */
    long cache_lookups, cache_tokens, cache_hits, cache_evictions;  /* the prefix cache's */
    double ttft_sum, ttft_max;  /* time to first token, summed over samples, and the longest */
    int ttft_count;
    double t_hit, t_miss, t_build;  /* in lookups that found blocks, in those that did not, and
                                       in attn_batch_build (which enters filled blocks) */
    long misses;
} stats;

enum { WAITING, RUNNING, FORKWAIT, DONE };
typedef struct sample {
    int prompt, index;          /* prompt number, sample number of that prompt */
    int *tok, n_tok, n_prompt;  /* prompt + generated tokens */
    int n_gen, max_gen, state, arrival, admitted, children, dropped;
    attn_seq seq;
    int32_t *table;
    unsigned long long rng;
    float *logit_log;           /* [max_gen][vocab] when dumping */
    double t_arrive;            /* when its arrival step began */
} sample;

typedef struct engine {
    const model *m;
    const options *o;
    attn_layer layer;
    attn_exec ex;
    attn_kv_cache *cache;
    void **cache_mem, *pool_mem, *batch_mem, *prefix_mem, *ws;
    size_t ws_bytes;
    attn_block_pool pool;
    attn_batch batch;
    float *x, *xb, *q, *k, *v, *att, *h1, *h3, *xl, *logits, *probs;
    int *ptok, *ppos;
    char msg[256];
} engine;

/* One step's forward pass over T tokens in batch order; logits for the nl rows lrows. */
static int forward(engine *e, const attn_metadata *md, int T, int nl, const int *lrows,
                   stats *st) {
    const model *m = e->m;
    int D = m->dim, F = m->hidden, KV = m->kvd, QD = m->qd;
    size_t wsb = attn_forward_workspace_size(&e->layer, md, &e->ex);
    if (wsb > e->ws_bytes) {
        free(e->ws);
        e->ws = xmalloc(wsb);
        e->ws_bytes = wsb;
    }
    for (int t = 0; t < T; t++)
        memcpy(e->x + (size_t)t * D, m->emb + (size_t)e->ptok[t] * D, sizeof(float) * (size_t)D);
    for (int l = 0; l < m->layers; l++) {
        size_t lo = (size_t)l;
        rmsnorm(e->xb, e->x, m->rms_att + lo * D, T, D);
        matmul(e->q, e->xb, m->wq + lo * QD * D, T, D, QD);
        matmul(e->k, e->xb, m->wk + lo * KV * D, T, D, KV);
        matmul(e->v, e->xb, m->wv + lo * KV * D, T, D, KV);
        rope(m, e->q, T, e->ppos, m->heads);
        rope(m, e->k, T, e->ppos, m->kv_heads);
        attn_rows rq = {e->q, ATTN_F32, 0}, rk = {e->k, ATTN_F32, 0};
        attn_rows rv = {e->v, ATTN_F32, 0}, ro = {e->att, ATTN_F32, 0};
        double t0 = now_s();
        attn_status s = attn_forward(&e->layer, &e->ex, rq, rk, rv, &e->cache[l], md, ro, e->ws,
                                     e->ws_bytes);
        st->t_attn += now_s() - t0;
        if (s != ATTN_OK) {
            fprintf(stderr, "attn_forward: %s: %s\n", attn_status_str(s), e->msg);
            return 0;
        }
        matmul(e->xb, e->att, m->wo + lo * D * QD, T, QD, D);
        all_sum(e->xb, (size_t)T * D);
        for (size_t i = 0; i < (size_t)T * D; i++) e->x[i] += e->xb[i];
        rmsnorm(e->xb, e->x, m->rms_ffn + lo * D, T, D);
        matmul(e->h1, e->xb, m->w1 + lo * F * D, T, D, F);
        matmul(e->h3, e->xb, m->w3 + lo * F * D, T, D, F);
        for (size_t i = 0; i < (size_t)T * F; i++)
            e->h1[i] = e->h1[i] / (1.0f + expf(-e->h1[i])) * e->h3[i];
        matmul(e->xb, e->h1, m->w2 + lo * D * F, T, F, D);
        all_sum(e->xb, (size_t)T * D);
        for (size_t i = 0; i < (size_t)T * D; i++) e->x[i] += e->xb[i];
    }
    for (int i = 0; i < nl; i++)
        memcpy(e->xb + (size_t)i * D, e->x + (size_t)lrows[i] * D, sizeof(float) * (size_t)D);
    if (g_rank != 0) return 1;  /* the logits: rank 0 samples */
    rmsnorm(e->xl, e->xb, m->rms_final, nl, D);
    matmul(e->logits, e->xl, m->wcls, nl, D, m->vocab);
    return 1;
}

/* After a step's forward pass: 1 when every rank built the same metadata (the block tables,
   slot mapping, copies, hence the same pool) for the same tokens and holds the same hidden state.
   A hash of each, compared with one MPI_Allreduce of (h, ~h) under MPI_MAX: both maxima are this
   rank's values only when no rank's h is larger or smaller. */
static int ranks_agree(const engine *e, const attn_metadata *md, int T) {
#ifdef LLAMA_MPI
    int ns = md->num_prefills + md->num_decode_tokens, bs = e->pool.block_size;
    int head[5] = {md->num_prefills, md->num_prefill_tokens, md->num_decode_tokens,
                   md->num_blocks_to_copy, attn_block_pool_free_count(&e->pool)};
    uint64_t h = fnv(14695981039346656037ull, head, sizeof head), v[2];
    h = fnv(h, md->slot_mapping, sizeof(int64_t) * (size_t)T);
    h = fnv(h, md->seq_lens, sizeof(int32_t) * (size_t)ns);
    h = fnv(h, md->query_start_loc, sizeof(int32_t) * (size_t)(md->num_prefills + 1));
    if (md->context_lens) h = fnv(h, md->context_lens, sizeof(int32_t) * (size_t)md->num_prefills);
    for (int i = 0; i < ns; i++)  /* the used part of each block table row */
        h = fnv(h, md->block_tables + (size_t)i * (size_t)md->max_blocks_per_seq,
                sizeof(int32_t) * (size_t)((md->seq_lens[i] + bs - 1) / bs));
    h = fnv(h, md->blocks_to_copy, sizeof(int64_t) * 2 * (size_t)md->num_blocks_to_copy);
    h = fnv(h, e->pool.free_ids, sizeof(int32_t) * (size_t)e->pool.num_free);  /* the pool */
    h = fnv(h, e->pool.refcount, sizeof(int32_t) * (size_t)e->pool.num_blocks);
    h = fnv(h, e->ptok, sizeof(int) * (size_t)T);
    h = fnv(h, e->ppos, sizeof(int) * (size_t)T);
    h = fnv(h, e->x, sizeof(float) * (size_t)T * (size_t)e->m->dim);
    v[0] = h; v[1] = ~h;
    MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (v[0] == h && v[1] == ~h) return 1;
    fprintf(stderr, "rank %d: this step's metadata, tokens or hidden state differ from another "
            "rank's\n", g_rank);
    return 0;
#else
    (void)e; (void)md; (void)T;
    return 1;
#endif
}

static float rng_uniform(unsigned long long *s) { /* [0, 1) */
    *s ^= *s >> 12; *s ^= *s << 25; *s ^= *s >> 27;
    return (float)((*s * 2685821657736338717ull) >> 40) / 16777216.0f;
}

typedef struct { float p; int i; } prob_index;
static int by_prob_desc(const void *a, const void *b) {
    float x = ((const prob_index *)a)->p, y = ((const prob_index *)b)->p;
    return x < y ? 1 : x > y ? -1 : ((const prob_index *)a)->i - ((const prob_index *)b)->i;
}

/* Greedy (temp 0), else softmax(logits / temp), truncated to the top-p nucleus when 0<p<1. */
static int pick(const float *lg, int n, const options *o, unsigned long long *rng, float *probs) {
    int best = 0;
    for (int i = 1; i < n; i++) if (lg[i] > lg[best]) best = i;
    if (o->temp <= 0.0f) return best;
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += probs[i] = expf((lg[i] - lg[best]) / o->temp);
    float r = rng_uniform(rng);
    if (o->top_p <= 0.0f || o->top_p >= 1.0f) {
        double c = 0.0;
        for (int i = 0; i < n; i++) if ((c += probs[i] / sum) > r) return i;
        return n - 1;
    }
    /* Only tokens of probability at least (1 - top_p) / (2 (n - 1)) can be in the nucleus
       (those below it sum to under half of the 1 - top_p left outside), and the argmax: sorting
       just them gives the nucleus the same order and sums as sorting all n, and takes a few
       hundred entries instead of the vocabulary (it was 7% of a 1-thread make run, serial). */
    prob_index *pi = (prob_index *)xmalloc(sizeof *pi * (size_t)n);
    float floor_p = (float)((1.0 - o->top_p) / (2.0 * (n - 1)));
    int m = 0;
    for (int i = 0; i < n; i++) {
        float p = (float)(probs[i] / sum);
        if (p >= floor_p || i == best) { pi[m].p = p; pi[m].i = i; m++; }
    }
    qsort(pi, (size_t)m, sizeof *pi, by_prob_desc);
    double mass = 0.0;
    int last = m - 1;
    for (int i = 0; i < m; i++) if ((mass += pi[i].p) > o->top_p) { last = i; break; }
    double c = 0.0;
    int tok = pi[last].i;
    for (int i = 0; i <= last; i++) if ((c += pi[i].p / mass) > r) { tok = pi[i].i; break; }
    free(pi);
    return tok;
}

static void finish(engine *e, sample *s) {
    attn_seq_release(&e->pool, &s->seq);
    s->state = DONE;
}

static void take_token(engine *e, sample *s, const float *lg, stats *st) {
    int V = e->m->vocab;
    if (s->n_gen == 0) {
        double ttft = now_s() - s->t_arrive;
        st->ttft_sum += ttft;
        st->ttft_count++;
        if (ttft > st->ttft_max) st->ttft_max = ttft;
    }
    if (s->logit_log) memcpy(s->logit_log + (size_t)s->n_gen * V, lg, sizeof(float) * (size_t)V);
    int t = g_rank == 0 ? pick(lg, V, e->o, &s->rng, e->probs) : 0;
#ifdef LLAMA_MPI
    MPI_Bcast(&t, 1, MPI_INT, 0, MPI_COMM_WORLD);  /* rank 0's choice, for every rank */
#endif
    s->tok[s->n_tok++] = t;
    s->n_gen++;
    st->generated++;
    if (s->n_gen >= s->max_gen || (!e->o->ignore_eos && (t == 1 || t == 2))) finish(e, s);
}

static int engine_init(engine *e, const model *m, const options *o, int max_seqs) {
    memset(e, 0, sizeof *e);
    e->m = m; e->o = o;
    attn_params p = {0};
    p.num_heads = m->heads; p.num_kv_heads = m->kv_heads; p.head_size = m->hs;
    attn_status s = attn_layer_init(&e->layer, &p, ATTN_DECODER, o->backend);
    if (s != ATTN_OK) {
        fprintf(stderr, "attn_layer_init (%s backend): %s%s\n", attn_backend_name(o->backend),
                attn_status_str(s), o->backend == ATTN_BACKEND_IPEX ?
                " (build with -DATTN_USE_ONEDNN ... -ldnnl)" : "");
        return 0;
    }
    e->ex.num_threads = o->threads;
    e->ex.no_shared_prefixes = !o->shared_prefixes;
    e->ex.error_msg = e->msg; e->ex.error_msg_bytes = sizeof e->msg;
    int bs = o->block_size, mb = (m->seq_len + bs - 1) / bs;
    size_t cb = attn_kv_cache_bytes(o->blocks, bs, m->kv_heads, m->hs, o->kv);
    size_t pb = attn_block_pool_bytes(o->blocks),
           bb = attn_batch_bytes(max_seqs, o->batch_tokens, mb);
    if (!cb || !pb || !bb) { fprintf(stderr, "bad cache, pool or batch sizes\n"); return 0; }
    e->cache = (attn_kv_cache *)xmalloc(sizeof *e->cache * (size_t)m->layers);
    e->cache_mem = (void **)xmalloc(sizeof(void *) * (size_t)m->layers);
    e->pool_mem = xmalloc(pb); e->batch_mem = xmalloc(bb);
    int ok = attn_block_pool_init(&e->pool, o->blocks, bs, e->pool_mem, pb) == ATTN_OK &&
             attn_batch_init(&e->batch, max_seqs, o->batch_tokens, mb, e->batch_mem, bb) == ATTN_OK;
    if (o->prefix_cache) {  /* the pool's prefix cache, in memory of its own size query */
        size_t xb = attn_prefix_cache_bytes(o->blocks, bs);
        e->prefix_mem = xmalloc(xb);
        ok = ok && attn_prefix_cache_init(&e->pool, e->prefix_mem, xb) == ATTN_OK;
    }
    for (int l = 0; l < m->layers; l++) {
        e->cache_mem[l] = xmalloc(cb);
        ok = ok && attn_kv_cache_init(&e->cache[l], o->blocks, bs, m->kv_heads, m->hs, o->kv, 1.0f,
                                      1.0f, e->cache_mem[l], cb) == ATTN_OK;
    }
    size_t T = (size_t)o->batch_tokens, D = (size_t)m->dim, F = (size_t)m->hidden;
    e->x = (float *)xmalloc(sizeof(float) * T * D); e->xb = (float *)xmalloc(sizeof(float) * T * D);
    e->q = (float *)xmalloc(sizeof(float) * T * D);
    e->att = (float *)xmalloc(sizeof(float) * T * D);
    e->k = (float *)xmalloc(sizeof(float) * T * (size_t)m->kvd);
    e->v = (float *)xmalloc(sizeof(float) * T * (size_t)m->kvd);
    e->h1 = (float *)xmalloc(sizeof(float) * T * F);
    e->h3 = (float *)xmalloc(sizeof(float) * T * F);
    e->xl = (float *)xmalloc(sizeof(float) * (size_t)max_seqs * D);
    e->logits = (float *)xmalloc(sizeof(float) * (size_t)max_seqs * (size_t)m->vocab);
    e->probs = (float *)xmalloc(sizeof(float) * (size_t)m->vocab);
    e->ptok = (int *)xmalloc(sizeof(int) * T); e->ppos = (int *)xmalloc(sizeof(int) * T);
    if (!ok) fprintf(stderr, "cannot set up the KV cache, pool or batch\n");
    return ok;
}

static void engine_free(engine *e) {
    for (int l = 0; l < e->m->layers; l++) free(e->cache_mem[l]);
    free(e->cache); free(e->cache_mem); free(e->pool_mem); free(e->batch_mem); free(e->ws);
    free(e->prefix_mem);
    free(e->x); free(e->xb); free(e->q); free(e->k); free(e->v); free(e->att); free(e->h1);
    free(e->h3); free(e->xl); free(e->logits); free(e->probs); free(e->ptok); free(e->ppos);
}

/* Serves np prompts (tokens ptok[i][0 .. plen[i]), arriving at step arrival[i]) with o->n_samples
   samples each; *out gets np * n_samples samples (prompt-major). 1 on success. */
/* Computes the system prompt once into root, in chunks like any prompt (no logits). */
static int prefill_system(engine *e, attn_seq *root, stats *st) {
    const options *o = e->o;
    while ((int)root->len < o->sys_len) {
        int start = (int)root->len, take = o->sys_len - start;
        if (o->chunk > 0 && take > o->chunk) take = o->chunk;
        if (take > o->batch_tokens) take = o->batch_tokens;
        attn_seq *seqs[1] = {root};
        int32_t num_new[1] = {take};
        attn_metadata md;
        attn_status bs = attn_batch_build(&e->batch, &e->pool, seqs, num_new, 1, &md);
        if (bs != ATTN_OK) {
            fprintf(stderr, "system prompt: attn_batch_build: %s: %s\n", attn_status_str(bs),
                    e->batch.error_msg);
            return 0;
        }
        for (int j = 0; j < take; j++) {
            e->ptok[j] = o->sys_tok[start + j]; e->ppos[j] = start + j;
        }
        double t0 = now_s();
        if (!forward(e, &md, take, 0, NULL, st) || !ranks_agree(e, &md, take)) return 0;
        st->t_prefill += now_s() - t0;
        st->prefill_tokens += take;
        st->steps++;
    }
    st->system_tokens = o->sys_len;
    return 1;
}

static int serve(const model *m, options *o, int np, int *const *ptok, const int *plen,
                 const int *arrival, sample **out, stats *st) {
    int ns = np * o->n_samples, bs = o->block_size, mb = (m->seq_len + bs - 1) / bs;
    sample *s = (sample *)xmalloc(sizeof *s * (size_t)ns);
    memset(st, 0, sizeof *st);
    int need_blocks = 0;
    for (int i = 0; i < ns; i++) {
        sample *c = &s[i];
        int p = i / o->n_samples, sys = o->sys_len, n = sys + plen[p];
        if (n > m->seq_len - 1) n = m->seq_len - 1;
        memset(c, 0, sizeof *c);
        c->prompt = p; c->index = i % o->n_samples;
        c->tok = (int *)xmalloc(sizeof(int) * (size_t)m->seq_len);
        memcpy(c->tok, o->sys_tok, sizeof(int) * (size_t)sys);
        memcpy(c->tok + sys, ptok[p], sizeof(int) * (size_t)(n - sys));
        c->n_tok = c->n_prompt = n;
        c->max_gen = o->max_new < m->seq_len - n ? o->max_new : m->seq_len - n;
        c->state = c->index == 0 ? WAITING : FORKWAIT;
        c->children = c->index == 0 ? o->n_samples - 1 : 0;
        c->arrival = arrival[p];
        c->admitted = -1;
        c->table = (int32_t *)xmalloc(sizeof(int32_t) * (size_t)mb);
        attn_seq_init(&c->seq, c->table, mb);
        attn_seq_set_tokens(&c->seq, (const int32_t *)c->tok, 0);  /* int is 32-bit here */
        c->rng =
                o->seed * 0x9e3779b97f4a7c15ull
                    + (unsigned long long)(p * 1000003 + c->index * 7919 + 1);
        c->logit_log = o->dump
                       ? (float *)xmalloc(sizeof(float) * (size_t)c->max_gen * (size_t)m->vocab)
                               : NULL;
        need_blocks += (c->n_prompt + c->max_gen + bs - 1) / bs + 1;
    }
    need_blocks += (o->sys_len + bs - 1) / bs;
    *out = s;
    options oo = *o;
    if (oo.blocks <= 0) oo.blocks = need_blocks;  /* default: everything fits */
    int max_seqs = ns < oo.max_seqs ? ns : oo.max_seqs;
    if (max_seqs > oo.batch_tokens) max_seqs = oo.batch_tokens;
    if (max_seqs > 512) max_seqs = 512;
    engine e;
    if (!engine_init(&e, m, &oo, max_seqs)) return 0;
    st->num_blocks = oo.blocks;
    attn_seq **seqs = (attn_seq **)xmalloc(sizeof(attn_seq *) * (size_t)max_seqs);
    int32_t *num_new = (int32_t *)xmalloc(sizeof(int32_t) * (size_t)max_seqs);
    int *who = (int *)xmalloc(sizeof(int) * (size_t)max_seqs);
    int *start = (int *)xmalloc(sizeof(int) * (size_t)max_seqs);
    int *lrows = (int *)xmalloc(sizeof(int) * (size_t)max_seqs);
    int *lwho = (int *)xmalloc(sizeof(int) * (size_t)max_seqs);
    int *order = (int *)xmalloc(sizeof(int) * (size_t)ns);
    int admissions = 0, ok = 1;
    double t_start = now_s();
    attn_seq root;  /* the system prompt's sequence: every prompt's first sample forks it */
    int32_t *root_table = (int32_t *)xmalloc(sizeof(int32_t) * (size_t)mb);
    attn_seq_init(&root, root_table, mb);
    if (oo.sys_len > 0 && !oo.prefix_cache) ok = prefill_system(&e, &root, st);
    for (int step = 0; ok; step++) {
        int all_done = 1, running = 0;
        double t_step = now_s();
        for (int i = 0; i < ns; i++) {
            all_done &= s[i].state == DONE || s[i].state == FORKWAIT;
            running += s[i].state == RUNNING;
            if (s[i].arrival == step && s[i].t_arrive == 0) s[i].t_arrive = t_step;  /* once */
        }
        if (all_done) break;
        /* 1. admit arrived requests while their blocks fit (one spare block per running one) */
        for (int i = 0; i < ns && running < max_seqs; i++) {
            sample *c = &s[i];
            int need = (c->n_tok + bs - 1) / bs;
            if (c->state != WAITING || c->arrival > step) continue;
            if (running > 0 && attn_block_pool_free_count(&e.pool) - need < running) break;
            if (root.len > 0 && c->seq.len == 0) {  /* start from the shared system prompt */
                if (attn_seq_fork(&e.pool, &root, &c->seq) != ATTN_OK) { ok = 0; break; }
                st->system_shares++;
            } else if (oo.prefix_cache && c->seq.len == 0) {  /* start from its cached prefix */
                double t0 = now_s();
                if (attn_prefix_cache_lookup(&e.pool, &c->seq, c->n_tok) != ATTN_OK) {
                    ok = 0;
                    break;
                }
                *(c->seq.len ? &st->t_hit : &st->t_miss) += now_s() - t0;
                st->misses += c->seq.len == 0;
            }
            c->state = RUNNING; c->admitted = admissions++; running++;
        }
        /* running samples, oldest admission first */
        int nr = 0;
        for (int i = 0; i < ns; i++) if (s[i].state == RUNNING) order[nr++] = i;
        for (int i = 1; i < nr; i++)
            for (int j = i; j > 0 && s[order[j]].admitted < s[order[j - 1]].admitted; j--) {
                int t = order[j]; order[j] = order[j - 1]; order[j - 1] = t;
            }
        /* 2. schedule and build: prefill chunks first, then the decodes (the builder's order);
              the decodes get the token budget first */
        attn_metadata md;
        int n = 0, used = 0;
        for (;;) {
            int nd = 0, npf = 0, dec[512];
            n = 0; used = 0;
            for (int j = 0; j < nr; j++) {
                sample *c = &s[order[j]];
                if (c->state == RUNNING && c->n_tok - (int)c->seq.len == 1 && nd < 512 &&
                    nd < max_seqs && used < oo.batch_tokens) { dec[nd++] = order[j]; used++; }
            }
            for (int j = 0; j < nr && nd + npf < max_seqs && used < oo.batch_tokens; j++) {
                sample *c = &s[order[j]];
                int left = c->n_tok - (int)c->seq.len;
                if (c->state != RUNNING || left <= 1) continue;
                int take = oo.chunk > 0 && left > oo.chunk ? oo.chunk : left;
                if (take > oo.batch_tokens - used) take = oo.batch_tokens - used;
                who[n] = order[j]; num_new[n] = take; n++; npf++; used += take;
            }
            for (int j = 0; j < nd; j++) { who[n] = dec[j]; num_new[n] = 1; n++; }
            for (int j = 0; j < n; j++) {
                seqs[j] = &s[who[j]].seq; start[j] = (int)s[who[j]].seq.len;
            }
            if (n == 0) break;
            double tb = now_s();
            attn_status bst = attn_batch_build(&e.batch, &e.pool, seqs, num_new, n, &md);
            st->t_build += now_s() - tb;
            if (bst == ATTN_OK) break;
            if (bst != ATTN_ERR_OUT_OF_BLOCKS) {
                fprintf(stderr, "attn_batch_build: %s: %s\n", attn_status_str(bst),
                        e.batch.error_msg);
                ok = 0;
                break;
            }
            int victim = -1, alive = 0;  /* the youngest running sample */
            for (int i = 0; i < ns; i++)
                if (s[i].state == RUNNING) {
                    alive++;
                    if (victim < 0 || s[i].admitted > s[victim].admitted) victim = i;
                }
            if (alive == 1) {  /* alone and still too big: the pool cannot hold it */
                fprintf(stderr, "prompt %d sample %d: dropped, the pool of %d blocks cannot hold "
                        "%d tokens\n", s[victim].prompt, s[victim].index, oo.blocks,
                        s[victim].n_tok);
                for (int i = 0; i < ns; i++)  /* with the samples it would have forked */
                    if (i == victim || (s[victim].children > 0 && s[i].prompt == s[victim].prompt &&
                                        s[i].state == FORKWAIT)) {
                        s[i].dropped = 1;
                        finish(&e, &s[i]);
                        st->dropped++;
                    }
            } else {
                attn_seq_release(&e.pool, &s[victim].seq);
                s[victim].state = WAITING; s[victim].arrival = step + 1;
                st->preemptions++;
            }
            nr = 0;
            for (int i = 0; i < ns; i++) if (s[i].state == RUNNING) order[nr++] = i;
            for (int i = 1; i < nr; i++)
                for (int j = i; j > 0 && s[order[j]].admitted < s[order[j - 1]].admitted; j--) {
                    int t = order[j]; order[j] = order[j - 1]; order[j - 1] = t;
                }
        }
        if (!ok) break;
        if (n == 0) continue;  /* nothing runnable yet: wait for arrivals */
        /* 3. the step's tokens in batch order; logits where a sample has all its tokens cached */
        int T = 0, nl = 0;
        for (int i = 0; i < n; i++) {
            sample *c = &s[who[i]];
            for (int j = 0; j < num_new[i]; j++, T++) {
                e.ptok[T] = c->tok[start[i] + j];
                e.ppos[T] = start[i] + j;
            }
            if (start[i] + num_new[i] == c->n_tok) { lrows[nl] = T - 1; lwho[nl] = who[i]; nl++; }
        }
        int used_blocks = attn_block_pool_used_count(&e.pool);
        if (used_blocks > st->peak_blocks) st->peak_blocks = used_blocks;
        st->cow_copies += md.num_blocks_to_copy;
        double t0 = now_s();
        if (!forward(&e, &md, T, nl, lrows, st) || !ranks_agree(&e, &md, T)) { ok = 0; break; }
        double dt = now_s() - t0;
        st->prefill_tokens += md.num_prefill_tokens;
        st->decode_tokens += md.num_decode_tokens;
        st->t_prefill += dt * md.num_prefill_tokens / T;
        st->t_decode += dt * md.num_decode_tokens / T;
        st->steps++;
        /* 4. sample; a prompt just cached forks its other samples first */
        for (int i = 0; i < nl; i++) {
            sample *c = &s[lwho[i]];
            const float *lg = e.logits + (size_t)i * (size_t)m->vocab;
            if (c->children > 0 && c->n_gen == 0) {
                for (int j = 0; j < ns; j++) {
                    sample *d = &s[j];
                    if (d->prompt != c->prompt || d->state != FORKWAIT) continue;
                    attn_status fs = attn_seq_fork(&e.pool, &c->seq, &d->seq);
                    if (fs != ATTN_OK) {
                        fprintf(stderr, "attn_seq_fork: %s\n", attn_status_str(fs));
                        ok = 0;
                        break;
                    }
                    d->state = RUNNING; d->admitted = admissions++;
                    st->forks++;
                    take_token(&e, d, lg, st);
                }
                c->children = 0;
            }
            take_token(&e, c, lg, st);
        }
    }
    st->t_total = now_s() - t_start;
    st->cache_lookups = (long)e.pool.cache.lookups;
    st->cache_tokens = (long)e.pool.cache.lookup_tokens;
    st->cache_hits = (long)e.pool.cache.hit_tokens;
    st->cache_evictions = (long)e.pool.cache.evictions;
    if (oo.prefix_cache) st->system_tokens = oo.sys_len;
    attn_seq_release(&e.pool, &root);
    free(root_table);
    if (ok && attn_block_pool_used_count(&e.pool) != 0) {
        fprintf(stderr, "blocks still in use at the end: %d\n",
                attn_block_pool_used_count(&e.pool));
        ok = 0;
    }
    free(seqs); free(num_new); free(who); free(start); free(lrows); free(lwho); free(order);
    engine_free(&e);
    return ok;
}

static void free_samples(sample *s, int ns) {
    for (int i = 0; i < ns; i++) { free(s[i].tok); free(s[i].table); free(s[i].logit_log); }
    free(s);
}

/* ---- tokenizer (llama2.c's tokenizer.bin: byte-pair merges by score, byte fallback) --------- */
typedef struct { const char *s; int id; } tok_entry;
typedef struct tokenizer {
    char **piece;
    float *score;
    int n, max_len;
    tok_entry *sorted;
} tokenizer;

static int by_str(const void *a, const void *b) {
    return strcmp(((const tok_entry *)a)->s, ((const tok_entry *)b)->s);
}

static int tok_load(tokenizer *t, const char *path, int vocab) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "cannot open %s\n", path); return 0; }
    int ok = fread(&t->max_len, sizeof(int), 1, f) == 1;
    t->n = vocab;
    t->piece = (char **)xmalloc(sizeof(char *) * (size_t)vocab);
    t->score = (float *)xmalloc(sizeof(float) * (size_t)vocab);
    t->sorted = (tok_entry *)xmalloc(sizeof(tok_entry) * (size_t)vocab);
    for (int i = 0; i < vocab; i++) {
        int len = 0;
        ok = ok && fread(&t->score[i], sizeof(float), 1, f) == 1 &&
             fread(&len, sizeof(int), 1, f) == 1 && len >= 0 && len < 4096;
        t->piece[i] = (char *)xmalloc((size_t)(ok ? len : 0) + 1);
        ok = ok && fread(t->piece[i], 1, (size_t)len, f) == (size_t)len;
        t->piece[i][ok ? len : 0] = '\0';
        t->sorted[i].s = t->piece[i]; t->sorted[i].id = i;
    }
    fclose(f);
    if (!ok) {
        fprintf(stderr, "%s: not a tokenizer for a vocabulary of %d\n", path, vocab); return 0;
    }
    qsort(t->sorted, (size_t)vocab, sizeof(tok_entry), by_str);
    return 1;
}

static void tok_free(tokenizer *t) {
    for (int i = 0; i < t->n; i++) free(t->piece[i]);
    free(t->piece); free(t->score); free(t->sorted);
}

static int tok_lookup(const tokenizer *t, const char *s) {
    tok_entry key = {s, 0};
    const tok_entry *r =
            (const tok_entry *)bsearch(&key, t->sorted, (size_t)t->n, sizeof key, by_str);
    return r ? r->id : -1;
}

/* BOS, a leading space token (sentencepiece's dummy prefix), one token per UTF-8 character (or
   its bytes, ids 3 + byte), then merges: the adjacent pair whose concatenation is a token of the
   highest score, until none is. Returns the token count (out has strlen(text) + 3 entries). */
static int tok_encode(const tokenizer *t, const char *text, int *out) {
    int n = 0;
    char *buf = (char *)xmalloc(2 * (size_t)t->max_len + 8);
    out[n++] = 1;
    if (*text) { int sp = tok_lookup(t, " "); if (sp >= 0) out[n++] = sp; }
    for (const char *c = text; *c;) {
        int len = 1;
        while (len < 4 && (c[len] & 0xC0) == 0x80) len++;
        memcpy(buf, c, (size_t)len); buf[len] = '\0';
        int id = tok_lookup(t, buf);
        if (id >= 0) out[n++] = id;
        else for (int i = 0; i < len; i++) out[n++] = (unsigned char)c[i] + 3;
        c += len;
    }
    for (;;) {
        float best = -1e30f;
        int at = -1, best_id = -1;
        for (int i = 0; i + 1 < n; i++) {
            size_t a = strlen(t->piece[out[i]]), b = strlen(t->piece[out[i + 1]]);
            if (a + b > (size_t)t->max_len) continue;
            memcpy(buf, t->piece[out[i]], a); memcpy(buf + a, t->piece[out[i + 1]], b);
            buf[a + b] = '\0';
            int id = tok_lookup(t, buf);
            if (id >= 0 && t->score[id] > best) { best = t->score[id]; at = i; best_id = id; }
        }
        if (at < 0) break;
        out[at] = best_id;
        memmove(out + at + 1, out + at + 2, sizeof(int) * (size_t)(n - at - 2));
        n--;
    }
    free(buf);
    return n;
}

/* Prints token id after prev: a byte token as its byte, no leading space right after BOS, and
   nothing for a byte that is not printable ASCII or whitespace (a lone piece of UTF-8). */
static void tok_print(const tokenizer *t, int prev, int id) {
    const char *p = t->piece[id];
    unsigned char byte;
    if (prev == 1 && p[0] == ' ') p++;
    if (sscanf(p, "<0x%02hhX>", &byte) == 1 && strlen(p) == 6) {
        if ((byte >= 32 && byte < 127) || byte == '\n' || byte == '\t') putchar(byte);
        return;
    }
    if (id < 3) return;
    fputs(p, stdout);
}

/* ---- command line and output ---------------------------------------------------------------- */
static void print_stats(const model *m, const options *o, const stats *st, int np) {
    double rest = st->t_total - st->t_attn;
    printf("served %d prompts x %d samples in %d steps, %.3f s (%d thread%s, KV %s, block size %d, "
           "chunk %d)\n", np, o->n_samples, st->steps, st->t_total, o->threads,
           o->threads == 1 ? "" : "s", attn_dtype_name(o->kv), o->block_size, o->chunk);
    printf("  tokens through the model: %ld in prefill chunks (%.1f tok/s%s) + %ld in one-token "
           "steps (decodes, %.1f tok/s) = %ld (step time split by tokens)\n", st->prefill_tokens,
           st->t_prefill > 0 ? st->prefill_tokens / st->t_prefill : 0.0,
           st->system_tokens ? ", the system prompt's included" : "", st->decode_tokens,
           st->t_decode > 0 ? st->decode_tokens / st->t_decode : 0.0,
           st->prefill_tokens + st->decode_tokens);
    printf("  tokens sampled: %ld for %d samples (at most -m %d each; an end token stops one "
           "sooner unless --ignore-eos)\n", st->generated, np * o->n_samples, o->max_new);
    printf("  attention %.3f s (%.1f%%), the rest %.3f s; peak KV blocks in use %d of %d "
           "(%d layers); preemptions %d; forks %d, copy-on-write copies %d%s\n", st->t_attn,
           st->t_total > 0 ? 100.0 * st->t_attn / st->t_total : 0.0, rest, st->peak_blocks,
           st->num_blocks, m->layers, st->preemptions, st->forks, st->cow_copies,
           st->dropped ? "; some prompts dropped (pool too small)" : "");
    if (st->system_tokens && !o->prefix_cache)
        printf("  system prompt of %d tokens computed once, forked by %d admissions\n",
               st->system_tokens, st->system_shares);
    if (o->prefix_cache)
        printf("  prefix cache: %ld lookups, %ld of %ld tokens found cached (%.1f%%), %ld prefill "
               "tokens saved%s; %ld evictions\n", st->cache_lookups, st->cache_hits,
               st->cache_tokens, st->cache_tokens ? 100.0 * st->cache_hits / st->cache_tokens : 0.0,
               st->cache_hits, st->system_tokens ? " (the system prompt's included)" : "",
               st->cache_evictions);
    if (o->prefix_cache && st->cache_lookups)
        printf("  prefix cache time: a lookup that found blocks %.2f us, a miss %.2f us; "
               "attn_batch_build (entering filled blocks) %.2f us a step\n",
               st->cache_lookups > st->misses ? 1e6 * st->t_hit / (st->cache_lookups - st->misses)
                                               : 0.0,
               st->misses ? 1e6 * st->t_miss / st->misses : 0.0,
               st->steps ? 1e6 * st->t_build / st->steps : 0.0);
    if (st->ttft_count)
        printf("  time to first token: mean %.4f s, longest %.4f s (%d samples)\n",
               st->ttft_sum / st->ttft_count, st->ttft_max, st->ttft_count);
}

static void dump(FILE *f, const model *m, const sample *s, int ns, const options *o) {
    fprintf(f, "samples %d vocab %d greedy %d\n", ns, m->vocab, o->temp <= 0.0f);
    for (int i = 0; i < ns; i++) {
        const sample *c = &s[i];
        fprintf(f, "sample %d %d %d %d\n", c->prompt, c->index, c->n_prompt, c->n_gen);
        for (int j = 0; j < c->n_tok; j++) fprintf(f, "%d%c", c->tok[j], j + 1 < c->n_tok ? ' '
                                                   : '\n');
        for (int g = 0; g < c->n_gen; g++)
            for (int v = 0; v < m->vocab; v++)
                fprintf(f, "%.7g%c", c->logit_log[(size_t)g * m->vocab + v], v + 1 < m->vocab ? ' '
                        : '\n');
    }
}

static int parse_dtype(const char *s, attn_dtype *d) {
    static const attn_dtype all[] = {ATTN_F32,      ATTN_F16,      ATTN_BF16, ATTN_FP8_E4M3,
                                     ATTN_FP8_E5M2, ATTN_INT8, ATTN_INT4};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (!strcmp(s, attn_dtype_name(all[i]))) { *d = all[i]; return 1; }
    return 0;
}

/* Token ids for a prompt: the tokenizer's, else a string of numbers as ids, else BOS + bytes. */
/* -1 (with a message) for an id outside the vocabulary. */
static int to_tokens(const tokenizer *t, const model *m, const char *p, int *out) {
    if (t) return tok_encode(t, p, out);
    int n = 0, numeric = strspn(p, "0123456789 ,") == strlen(p) && strpbrk(p, "0123456789");
    if (numeric) {
        for (const char *c = p; *c;) {
            if (*c >= '0' && *c <= '9') {
                long id = strtol(c, (char **)&c, 10);
                if (id >= m->vocab) {
                    fprintf(stderr, "prompt \"%s\": token id %ld is outside the vocabulary "
                            "(0 .. %d)\n", p, id, m->vocab - 1);
                    return -1;
                }
                out[n++] = (int)id;
            } else c++;
        }
        return n;
    }
    out[n++] = 1;
    for (const char *c = p; *c; c++) out[n++] = ((unsigned char)*c + 3) % m->vocab;
    return n;
}

static void options_default(options *o) {
    memset(o, 0, sizeof *o);
    o->threads = 1;
#ifdef _OPENMP
    o->threads = omp_get_max_threads();
#endif
    o->batch_tokens = 256; o->max_seqs = 16; o->block_size = 16; o->n_samples = 1;
    o->max_new = 32; o->top_p = 0.9f; o->seed = 42; o->kv = ATTN_F32;
    o->backend = ATTN_BACKEND_SDPA;
    o->prefix_cache = 1;
    o->shared_prefixes = 1;
}

static void set_threads(int n) {
#ifdef _OPENMP
    omp_set_num_threads(n);
#else
    (void)n;
#endif
}

/* No arguments: a tiny model, five prompts with staggered arrivals, chunked prefill, two samples
   of each prompt (fork + copy-on-write), a pool small enough to preempt; every greedy output
   must equal its prompt served alone on one thread (attn.h's results do not depend on the
   thread count or the batch, and neither do the matmuls here). */
static int self_check(void) {
    model m;
    if (!model_tiny(&m)) { printf("cannot build the tiny model\n"); return 1; }
#ifdef LLAMA_MPI
    if (!model_shard(&m, g_rank, g_ranks)) { model_free(&m); return 1; }
#endif
    static const int len[5] = {13, 5, 30, 9, 21}, arrive[5] = {0, 0, 1, 3, 4};
    int *ptok[5], all_ok = 1;
    for (int p = 0; p < 5; p++) {
        ptok[p] = (int *)xmalloc(sizeof(int) * 32);
        ptok[p][0] = 1;
        for (int i = 1; i < len[p]; i++) ptok[p][i] = 3 + (p * 131 + i * 37) % 509;
    }
    options o;
    options_default(&o);
    o.chunk = 8; o.batch_tokens = 32; o.block_size = 4; o.blocks = 24; o.n_samples = 2;
    o.max_new = 12; o.ignore_eos = 1;
    set_threads(o.threads);
    sample *s;
    stats st;
    if (!serve(&m, &o, 5, ptok, len, arrive, &s, &st)) { printf("FAILED: serving\n"); return 1; }
    printf("tiny model (dim 64, 2 layers, 4 heads / 2 KV heads, vocab 512), 5 prompts x 2 samples, "
           "chunk 8, pool of 24 blocks of 4:\n");
    for (int i = 0; i < 10; i++) {
        printf("  prompt %d.%d:", s[i].prompt, s[i].index);
        for (int j = s[i].n_prompt; j < s[i].n_tok; j++) printf(" %d", s[i].tok[j]);
        printf("\n");
    }
    print_stats(&m, &o, &st, 5);
    int distinct = 0;
    for (int i = 0; i < 10; i++) {  /* each alone: one sample, whole prompt, a big pool */
        options a = o;
        a.chunk = 0; a.blocks = 0; a.n_samples = 1; a.batch_tokens = 64; a.threads = 1;
        sample *r;
        stats rs;
        int p = s[i].prompt, same = serve(&m, &a, 1, &ptok[p], &len[p], arrive, &r, &rs) &&
                                    r[0].n_tok == s[i].n_tok &&
                                    !memcmp(r[0].tok, s[i].tok, sizeof(int) * (size_t)s[i].n_tok);
        if (!same) printf("FAILED: prompt %d sample %d differs from the prompt served alone\n", p,
                          s[i].index);
        all_ok &= same;
        for (int j = s[i].n_prompt + 1; j < s[i].n_tok; j++) distinct |=
                s[i].tok[j] != s[i].tok[j - 1];
        free_samples(r, 1);
    }
    if (!st.preemptions || !st.forks || !st.cow_copies || !distinct || !st.cache_hits) {
        printf("FAILED: preemptions %d, forks %d, copy-on-write copies %d, varied tokens %d, "
               "prefix cache hits %ld (each must be > 0)\n", st.preemptions, st.forks,
               st.cow_copies, distinct, st.cache_hits);
        all_ok = 0;
    }
    free_samples(s, 10);
    for (int p = 0; p < 5; p++) free(ptok[p]);
    model_free(&m);
    printf("%s\n", all_ok ? "ok: batched outputs equal each prompt served alone" : "FAILED");
    return all_ok ? 0 : 1;
}

static int run(int argc, char **argv) {
    if (argc == 1) return self_check();
    options o;
    options_default(&o);
    const char *ckpt = NULL, *tok_path = NULL, *file = NULL, *arrive = NULL, *dump_path = NULL;
    const char *system = NULL;
    const char **prompts = (const char **)xmalloc(sizeof(char *) * (size_t)argc);
    int np = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--ignore-eos")) { o.ignore_eos = 1; continue; }
        if (!strcmp(a, "-q")) { o.quiet = 1; continue; }
        if (a[0] != '-') { ckpt = a; continue; }
        if (!v) { fprintf(stderr, "%s needs a value\n", a); return 1; }
        i++;
        if (!strcmp(a, "-z")) tok_path = v;
        else if (!strcmp(a, "-p")) prompts[np++] = v;
        else if (!strcmp(a, "-f")) file = v;
        else if (!strcmp(a, "--arrive")) arrive = v;
        else if (!strcmp(a, "-n")) o.n_samples = atoi(v);
        else if (!strcmp(a, "-m")) o.max_new = atoi(v);
        else if (!strcmp(a, "--temp")) o.temp = (float)atof(v);
        else if (!strcmp(a, "--top-p")) o.top_p = (float)atof(v);
        else if (!strcmp(a, "--seed")) o.seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--chunk")) o.chunk = atoi(v);
        else if (!strcmp(a, "--batch-tokens")) o.batch_tokens = atoi(v);
        else if (!strcmp(a, "--max-seqs")) o.max_seqs = atoi(v);
        else if (!strcmp(a, "--block-size")) o.block_size = atoi(v);
        else if (!strcmp(a, "--blocks")) o.blocks = atoi(v);
        else if (!strcmp(a, "--threads")) o.threads = atoi(v);
        else if (!strcmp(a, "--dump")) dump_path = v;
        else if (!strcmp(a, "--system")) system = v;
        else if (!strcmp(a, "--prefix-cache")) {
            if (!strcmp(v, "on") || !strcmp(v, "off")) o.prefix_cache = !strcmp(v, "on");
            else { fprintf(stderr, "unknown --prefix-cache %s (on or off)\n", v); return 1; }
        }
        else if (!strcmp(a, "--shared-prefixes")) {
            if (!strcmp(v, "on") || !strcmp(v, "off")) o.shared_prefixes = !strcmp(v, "on");
            else { fprintf(stderr, "unknown --shared-prefixes %s (on or off)\n", v); return 1; }
        }
        else if (!strcmp(a, "--kv-dtype")) {
            if (!parse_dtype(v, &o.kv)) { fprintf(stderr, "unknown --kv-dtype %s\n", v); return 1; }
        } else if (!strcmp(a, "--backend")) {
            if (!strcmp(v, "sdpa")) o.backend = ATTN_BACKEND_SDPA;
            else if (!strcmp(v, "ipex")) o.backend = ATTN_BACKEND_IPEX;
            else { fprintf(stderr, "unknown --backend %s (sdpa or ipex)\n", v); return 1; }
        } else { fprintf(stderr, "unknown flag %s\n", a); return 1; }
    }
    if (!ckpt) {
        fprintf(stderr, "usage: llama model.bin [options]; see the top of llama.c\n"); return 1;
    }
    if (o.n_samples < 1 || o.max_new < 1 || o.chunk < 0 || o.batch_tokens < 1 || o.max_seqs < 1 ||
        o.block_size < 1 || o.blocks < 0 || o.threads < 1) {
        fprintf(stderr, "-n, -m, --batch-tokens, --max-seqs, --block-size, --threads must be >= 1; "
                "--chunk, --blocks >= 0\n");
        return 1;
    }
    set_threads(o.threads);
    model m;  /* under MPI every rank reads the files: the same paths on every host */
    if (!all_ranks(model_load(&m, ckpt))) return 1;
#ifdef LLAMA_MPI
    if (!model_shard(&m, g_rank, g_ranks)) { model_free(&m); return 1; }
#endif
    tokenizer tk, *t = NULL;
    if (tok_path) { if (!all_ranks(tok_load(&tk, tok_path, m.vocab))) return 1; t = &tk; }
    /* prompts: -p, then the lines of -f, else a few defaults */
    char **lines = NULL;
    int nlines = 0;
    if (file) {
        FILE *f = fopen(file, "r");
        if (!all_ranks(f != NULL)) {
            fprintf(stderr, "cannot open %s\n", file);
            if (f) fclose(f);
            return 1;
        }
        char line[4096];
        int line_no = 0;
        while (fgets(line, sizeof line, f)) {
            line_no++;
            if (!strchr(line, '\n') && !feof(f)) {
                fprintf(stderr, "%s: line %d is longer than %d characters\n", file, line_no,
                        (int)sizeof line - 1);
                fclose(f);
                return 1;
            }
            line[strcspn(line, "\r\n")] = '\0';
            if (!line[0]) continue;
            lines = (char **)realloc(lines, sizeof(char *) * (size_t)(nlines + 1));
            lines[nlines] = (char *)xmalloc(strlen(line) + 1);
            strcpy(lines[nlines++], line);
        }
        fclose(f);
    }
    static const char *defaults[] = {"Once upon a time", "The little dog", "In the morning the sun",
                                     "She said hello", "A tall tree"};
    const char **all = (const char **)xmalloc(sizeof(char *) * (size_t)(np + nlines + 5));
    int n_all = 0;
    for (int i = 0; i < np; i++) all[n_all++] = prompts[i];
    for (int i = 0; i < nlines; i++) all[n_all++] = lines[i];
    if (n_all == 0) for (int i = 0; i < 5; i++) all[n_all++] = defaults[i];
    int **ptok = (int **)xmalloc(sizeof(int *) * (size_t)n_all);
    int *plen = (int *)xmalloc(sizeof(int) * (size_t)n_all),
         *arr = (int *)xmalloc(sizeof(int) * (size_t)n_all);
    const char *ap = arrive;
    for (int i = 0; i < n_all; i++) {
        ptok[i] = (int *)xmalloc(sizeof(int) * (strlen(all[i]) + 3));
        plen[i] = to_tokens(t, &m, all[i], ptok[i]);
        if (plen[i] < 0) return 1;
        if (plen[i] < 1) { ptok[i][0] = 1; plen[i] = 1; }
        if (system && plen[i] > 1 && ptok[i][0] == 1) {  /* BOS comes once, before the system */
            memmove(ptok[i], ptok[i] + 1, sizeof(int) * (size_t)--plen[i]);
        }
        arr[i] = i;  /* default: one new prompt per step */
        if (ap && *ap) { arr[i] = atoi(ap); ap = strchr(ap, ','); ap = ap ? ap + 1 : ""; }
    }
    int *sys_tok = NULL;
    if (system) {  /* its tokens, without the BOS a prompt starts with (that comes first) */
        sys_tok = (int *)xmalloc(sizeof(int) * (strlen(system) + 3));
        o.sys_len = to_tokens(t, &m, system, sys_tok);
        if (o.sys_len < 0) return 1;
        if (o.sys_len > m.seq_len / 2) o.sys_len = m.seq_len / 2;
        o.sys_tok = sys_tok;
    }
    for (int i = 0; i < n_all; i++)
        if (o.sys_len + plen[i] >= m.seq_len) {
            fprintf(stderr, "prompt %d: %d tokens (+ %d of the system prompt) leave no room to "
                    "generate in the model's context (seq_len %d)\n", i, plen[i], o.sys_len,
                    m.seq_len);
            return 1;
        }
    printf("attn.h %s, ISA %s, %d thread%s, KV cache %s, %s\n", ATTN_VERSION_STRING,
           attn_isa_name(attn_best_isa()), o.threads, o.threads == 1 ? "" : "s",
           attn_dtype_name(o.kv), attn_cpu_features());
    if (dump_path && g_rank == 0) o.dump = fopen(dump_path, "w");  /* rank 0 has the logits */
    if (!all_ranks(!dump_path || g_rank != 0 || o.dump)) {
        fprintf(stderr, "cannot write %s\n", dump_path); return 1;
    }
    sample *s;
    stats st;
    int ok = serve(&m, &o, n_all, ptok, plen, arr, &s, &st);
    int ns = n_all * o.n_samples;
    if (ok && !o.quiet)
        for (int i = 0; i < ns; i++) {
            const sample *c = &s[i];
            printf("[%d.%d] ", c->prompt, c->index);
            if (t) {
                for (int j = 1; j < c->n_tok; j++) {
                    if (j == c->n_prompt) fputs(" |", stdout);
                    tok_print(t, c->tok[j - 1], c->tok[j]);
                }
            } else {
                for (int j = 0; j < c->n_tok; j++) printf("%s%d", j == c->n_prompt ? " | " : j
                                                          ? " " : "", c->tok[j]);
            }
            printf("%s\n", c->dropped ? " [dropped]" : "");
        }
    if (ok) print_stats(&m, &o, &st, n_all);
    if (ok && o.dump) dump(o.dump, &m, s, ns, &o);
    if (o.dump && fclose(o.dump) != 0) ok = 0;
    free_samples(s, ns);
    for (int i = 0; i < n_all; i++) free(ptok[i]);
    for (int i = 0; i < nlines; i++) free(lines[i]);
    free(lines); free(ptok); free(plen); free(arr); free(all); free(prompts); free(sys_tok);
    if (t) tok_free(t);
    model_free(&m);
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
#ifdef LLAMA_MPI
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_ranks);
    if (g_rank != 0 && !freopen("/dev/null", "w", stdout)) MPI_Abort(MPI_COMM_WORLD, 1);
    int rc = run(argc, argv);
    MPI_Finalize();
    return rc;
#else
    return run(argc, argv);
#endif
}
