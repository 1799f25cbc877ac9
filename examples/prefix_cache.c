/* prefix_cache.c - a shared prefix computed once, forked, and chunked prefill over it.

   What it shows: prefix caching with the block manager. A 37-token system prompt is prefilled
   once into the paged cache. Three requests fork it (attn_seq_fork: they share its blocks,
   refcounted) and each appends its own text in chunks of 16 tokens, all three in one
   attn_paged_prefill call per step: each chunk's queries attend the shared prefix and the
   request's earlier chunks straight from the cache (vLLM's chunked prefill / forward_prefix).
   The prompt ends inside a block, so each request's first append copies that block on write:
   attn_seq_append reports the pair and attn_copy_blocks copies it before the new K/V are
   written. Every output row is checked against a double-precision attention over the request's
   whole history.

   Build: cc -O2 -fopenmp -I. examples/prefix_cache.c -o prefix_cache -lm */
#define ATTN_IMPLEMENTATION
#include "attn.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { H = 8, HK = 4, D = 48, BS = 16, BLOCKS = 32, MAX_BLOCKS = 8, REQS = 3, CHUNK = 16 };
enum { PREFIX = 37, MAX_LEN = MAX_BLOCKS * BS };
static const int own_tokens[REQS] = {20, 45, 33}; /* each request's text after the prefix */

/* Token `pos` of request r (r = -1: the shared prefix, the same for everyone): its query, key or
   value (kind 0, 1, 2) element i, deterministic in [-1, 1]. */
static float data_at(int r, int pos, int kind, int i) {
    unsigned who = pos < PREFIX ? 0u : (unsigned)(r + 1);
    unsigned x = who * 2246822519u + (unsigned)pos * 3266489917u + (unsigned)kind * 668265263u +
                 (unsigned)i * 374761393u;
    x ^= x >> 15; x *= 0x85ebca6bu; x ^= x >> 13;
    return (float)(x % 2001) / 1000.0f - 1.0f;
}

static void fill_rows(int r, int pos0, int n, float *q, float *k, float *v) {
    for (int t = 0; t < n; t++) {
        for (int i = 0; i < H * D; i++) q[t * H * D + i] = data_at(r, pos0 + t, 0, i);
        for (int i = 0; i < HK * D; i++) {
            k[t * HK * D + i] = data_at(r, pos0 + t, 1, i);
            v[t * HK * D + i] = data_at(r, pos0 + t, 2, i);
        }
    }
}

/* Causal attention of request r's query at pos over its tokens 0..pos, head h, in double. */
static double reference(int r, int pos, int h, int d) {
    int g = h / (H / HK);
    double m = -INFINITY, sum = 0, acc = 0, logit[MAX_LEN];
    for (int j = 0; j <= pos; j++) {
        double dot = 0;
        for (int e = 0; e < D; e++)
            dot += (double)data_at(r, pos, 0, h * D + e) * data_at(r, j, 1, g * D + e);
        logit[j] = dot / sqrt((double)D);
        m = fmax(m, logit[j]);
    }
    for (int j = 0; j <= pos; j++) {
        double w = exp(logit[j] - m);
        sum += w;
        acc += w * data_at(r, j, 2, g * D + d);
    }
    return acc / sum;
}

typedef struct model { /* everything one layer of the server holds */
    attn_params params;
    attn_kv_cache cache;
    attn_block_pool pool;
    void *ws;
    size_t ws_bytes;
} model;

/* Runs one paged prefill, growing the workspace to what the size query asks for this call. */
static attn_status prefill(model *m, const float *q, float *out, const int32_t *tables,
                           const int32_t *qsl, const int32_t *lens, int n) {
    size_t need = attn_paged_prefill_workspace_size(&m->params, NULL, &m->cache, qsl, lens, n);
    if (need > m->ws_bytes) {
        free(m->ws);
        m->ws = malloc(need);
        m->ws_bytes = m->ws ? need : 0;
    }
    attn_rows rq = {(void *)q, ATTN_F32, 0}, ro = {out, ATTN_F32, 0};
    return attn_paged_prefill(&m->params, NULL, rq, ro, &m->cache, tables, MAX_BLOCKS, qsl, lens,
                              n, 1, NULL, m->ws, m->ws_bytes);
}

/* Appends n tokens of request r (from position pos0) to seq, copying a shared block first when
   the append asks for it, and writes their K/V; q, k, v get the rows. */
static attn_status append_and_write(model *m, attn_seq *seq, int r, int pos0, int n, float *q,
                                    float *k, float *v, int *copies) {
    int64_t slots[MAX_LEN], cow[1][2];
    int n_cow = 0;
    attn_status st = attn_seq_append(&m->pool, seq, n, slots, cow, &n_cow);
    attn_kv_cache *layers[1] = {&m->cache};
    if (st == ATTN_OK && n_cow) {
        st = attn_copy_blocks(layers, 1, &cow[0][0], n_cow);
        (*copies)++;
    }
    fill_rows(r, pos0, n, q, k, v);
    attn_rows rk = {k, ATTN_F32, 0}, rv = {v, ATTN_F32, 0};
    return st ? st : attn_write_kv(&m->cache, rk, rv, slots, n, NULL);
}

int main(void) {
    static model m;  /* zeroed */
    m.params.num_heads = H; m.params.num_kv_heads = HK; m.params.head_size = D;
    size_t cache_bytes = attn_kv_cache_bytes(BLOCKS, BS, HK, D, ATTN_F32);
    void *cache_mem = malloc(cache_bytes), *pool_mem = malloc(attn_block_pool_bytes(BLOCKS));
    if (attn_kv_cache_init(&m.cache, BLOCKS, BS, HK, D, ATTN_F32, 1, 1, cache_mem, cache_bytes) ||
        attn_block_pool_init(&m.pool, BLOCKS, BS, pool_mem, attn_block_pool_bytes(BLOCKS)))
        return 1;
    static float q[MAX_LEN * H * D], k[MAX_LEN * HK * D], v[MAX_LEN * HK * D];
    static float out[MAX_LEN * H * D];
    int copies = 0;
    double worst = 0;

    /* 1. The system prompt, prefilled once. */
    int32_t prefix_table[MAX_BLOCKS], qsl[REQS + 1] = {0, PREFIX}, lens[REQS] = {PREFIX};
    attn_seq prefix;
    attn_seq_init(&prefix, prefix_table, MAX_BLOCKS);
    attn_status st = append_and_write(&m, &prefix, -1, 0, PREFIX, q, k, v, &copies);
    if (!st) st = prefill(&m, q, out, prefix_table, qsl, lens, 1);
    for (int t = 0; t < PREFIX && !st; t += 6)
        for (int h = 0; h < H; h++)
            worst = fmax(worst, fabs(out[t * H * D + h * D] - reference(0, t, h, 0)));
    int prefix_blocks = prefix.num_blocks;

    /* 2. The requests fork it; the prompt's own sequence is released (its blocks live on). */
    static int32_t tables[REQS][MAX_BLOCKS];
    attn_seq req[REQS];
    for (int r = 0; r < REQS && !st; r++) {
        attn_seq_init(&req[r], tables[r], MAX_BLOCKS);
        st = attn_seq_fork(&m.pool, &prefix, &req[r]);
    }
    attn_seq_release(&m.pool, &prefix);

    /* 3. Chunked prefill: each step, every request with text left runs its next chunk. */
    int steps = 0;
    for (;;) {
        int n = 0, rows = 0, who[REQS], pos0[REQS];
        int32_t block_tables[REQS][MAX_BLOCKS] = {{0}};
        for (int r = 0; r < REQS && !st; r++) {
            int done = (int)req[r].len - PREFIX, take = own_tokens[r] - done;
            if (take <= 0) continue;
            if (take > CHUNK) take = CHUNK;
            who[n] = r; pos0[n] = (int)req[r].len; qsl[n] = rows;
            st = append_and_write(&m, &req[r], r, pos0[n], take, q + (size_t)rows * H * D,
                                  k + (size_t)rows * HK * D, v + (size_t)rows * HK * D, &copies);
            lens[n] = (int32_t)req[r].len;
            for (int b = 0; b < req[r].num_blocks; b++) block_tables[n][b] = req[r].block_table[b];
            rows += take; n++;
        }
        if (st || n == 0) break;
        qsl[n] = rows;
        st = prefill(&m, q, out, &block_tables[0][0], qsl, lens, n);
        for (int i = 0; i < n && !st; i++)
            for (int t = qsl[i]; t < qsl[i + 1]; t++)
                for (int h = 0; h < H; h++)
                    for (int d = 0; d < D; d += 11)
                        worst = fmax(worst, fabs(out[(size_t)t * H * D + h * D + d] -
                                                 reference(who[i], pos0[i] + t - qsl[i], h, d)));
        steps++;
    }

    int used = attn_block_pool_used_count(&m.pool), alone = 0;
    for (int r = 0; r < REQS; r++) alone += (int)attn_kv_blocks_for_tokens(req[r].len, BS);
    printf("%s: prefix of %d tokens (%d blocks) computed once, %d requests forked from it, "
           "%d chunked steps, %d copy-on-write copies; %d blocks in use (%d without sharing); "
           "worst |out - reference| = %.2e\n", attn_status_str(st), PREFIX, prefix_blocks, REQS,
           steps, copies, used, alone, worst);
    for (int r = 0; r < REQS; r++) attn_seq_release(&m.pool, &req[r]);
    /* the prompt's last block is shared by all three: the first two appends copy it, the last
       request then holds it alone */
    int ok = st == ATTN_OK && worst < 1e-5 && copies == REQS - 1 &&
             attn_block_pool_used_count(&m.pool) == 0;
    free(m.ws); free(pool_mem); free(cache_mem);
    return ok ? 0 : 1;
}
