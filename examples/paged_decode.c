/* paged_decode.c - one decode step of a batch over a paged KV cache, by hand.

   What it shows: the pieces under attn_forward. A block pool hands out KV blocks; each sequence
   keeps its block table (attn_seq); attn_seq_append gives the new token's slot; attn_write_kv
   stores its key and value there (vLLM's reshape_and_cache); attn_paged_decode attends each
   sequence's query over its cached keys through the block tables (vLLM's paged_attention).
   Four sequences of different lengths share a bf16 cache; every output is checked against a
   naive double-precision attention over the same bf16-rounded keys and values.

   Build: cc -O2 -fopenmp -I. examples/paged_decode.c -o paged_decode -lm */
#define ATTN_IMPLEMENTATION
#include "attn.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { H = 8, HK = 2, D = 64, BS = 16, SEQS = 4, MAX_LEN = 300, MAX_BLOCKS = 32, BLOCKS = 96 };

static float value_at(int seq, int pos, int kind, int i) { /* deterministic test data in [-1, 1] */
    unsigned x = (unsigned)seq * 7919u + (unsigned)pos * 104729u + (unsigned)kind * 1299709u +
                 (unsigned)i * 15485863u;
    x ^= x >> 13; x *= 0x5bd1e995u; x ^= x >> 15;
    return (float)(x % 20001) / 10000.0f - 1.0f;
}

static float bf16_round(float f) { /* what the bf16 cache stores: round to nearest even */
    return attn_bf16_to_f32(attn_f32_to_bf16(f));
}

/* Attention of one query row (all heads) over keys/values 0..len-1 of sequence s, in double. */
static void reference(int s, int len, const float *q, double *out) {
    for (int h = 0; h < H; h++) {
        int g = h / (H / HK);
        double m = -INFINITY, sum = 0, acc[D] = {0};
        double *logit = malloc(sizeof(double) * (size_t)len);
        for (int p = 0; p < len; p++) {
            double dot = 0;
            for (int d = 0; d < D; d++)
                dot += (double)q[h * D + d] * bf16_round(value_at(s, p, 0, g * D + d));
            logit[p] = dot / sqrt((double)D);
            if (logit[p] > m) m = logit[p];
        }
        for (int p = 0; p < len; p++) {
            double w = exp(logit[p] - m);
            sum += w;
            for (int d = 0; d < D; d++) acc[d] += w * bf16_round(value_at(s, p, 1, g * D + d));
        }
        for (int d = 0; d < D; d++) out[h * D + d] = acc[d] / sum;
        free(logit);
    }
}

int main(void) {
    /* The cache (one layer, bf16) and the block pool, on caller memory. */
    attn_kv_cache cache;
    size_t cache_bytes = attn_kv_cache_bytes(BLOCKS, BS, HK, D, ATTN_BF16);
    void *cache_mem = malloc(cache_bytes);
    attn_block_pool pool;
    void *pool_mem = malloc(attn_block_pool_bytes(BLOCKS));
    if (attn_kv_cache_init(&cache, BLOCKS, BS, HK, D, ATTN_BF16, 1, 1, cache_mem, cache_bytes) ||
        attn_block_pool_init(&pool, BLOCKS, BS, pool_mem, attn_block_pool_bytes(BLOCKS)))
        return 1;

    /* Four sequences whose prompts (lengths 1, 17, 150, 299) are already cached: append their
       positions and write their keys and values. */
    static int32_t tables[SEQS][MAX_BLOCKS];
    attn_seq seq[SEQS];
    const int prompt[SEQS] = {1, 17, 150, 299};
    static float k_rows[MAX_LEN][HK * D], v_rows[MAX_LEN][HK * D];
    static int64_t slots[MAX_LEN];
    for (int s = 0; s < SEQS; s++) {
        attn_seq_init(&seq[s], tables[s], MAX_BLOCKS);
        for (int p = 0; p < prompt[s]; p++)
            for (int i = 0; i < HK * D; i++) {
                k_rows[p][i] = value_at(s, p, 0, i);
                v_rows[p][i] = value_at(s, p, 1, i);
            }
        attn_rows k = {k_rows, ATTN_F32, 0}, v = {v_rows, ATTN_F32, 0};
        if (attn_seq_append(&pool, &seq[s], prompt[s], slots, NULL, NULL) ||
            attn_write_kv(&cache, k, v, slots, prompt[s], NULL))
            return 1;
    }

    /* The decode step: each sequence appends its new token (slot in new_slots), writes its K/V,
       and its query attends all seq_lens[s] = prompt + 1 keys. */
    static float q[SEQS][H * D], out[SEQS][H * D], new_k[SEQS][HK * D], new_v[SEQS][HK * D];
    int64_t new_slots[SEQS];
    int32_t seq_lens[SEQS], block_tables[SEQS][MAX_BLOCKS] = {{0}};
    for (int s = 0; s < SEQS; s++) {
        int pos = prompt[s];
        if (attn_seq_append(&pool, &seq[s], 1, &new_slots[s], NULL, NULL)) return 1;
        for (int i = 0; i < HK * D; i++) {
            new_k[s][i] = value_at(s, pos, 0, i);
            new_v[s][i] = value_at(s, pos, 1, i);
        }
        for (int i = 0; i < H * D; i++) q[s][i] = value_at(s, pos, 2, i);
        seq_lens[s] = (int32_t)seq[s].len;
        for (int b = 0; b < seq[s].num_blocks; b++) block_tables[s][b] = seq[s].block_table[b];
    }
    attn_rows k = {new_k, ATTN_F32, 0}, v = {new_v, ATTN_F32, 0};
    if (attn_write_kv(&cache, k, v, new_slots, SEQS, NULL)) return 1;

    attn_params params = {0};
    params.num_heads = H; params.num_kv_heads = HK; params.head_size = D;
    size_t ws_bytes = attn_paged_decode_workspace_size(&params, NULL, &cache, seq_lens, SEQS,
                                                       ATTN_PAGED_AUTO);
    void *ws = malloc(ws_bytes);
    attn_rows rq = {q, ATTN_F32, 0}, ro = {out, ATTN_F32, 0};
    attn_status st = attn_paged_decode(&params, NULL, rq, ro, &cache, &block_tables[0][0],
                                       MAX_BLOCKS, seq_lens, SEQS, ATTN_PAGED_AUTO, NULL, ws,
                                       ws_bytes);
    if (st != ATTN_OK) {
        printf("attn_paged_decode: %s\n", attn_status_str(st));
        return 1;
    }

    double worst = 0, want[H * D];
    for (int s = 0; s < SEQS; s++) {
        reference(s, seq_lens[s], q[s], want);
        for (int i = 0; i < H * D; i++) worst = fmax(worst, fabs(out[s][i] - want[i]));
        printf("sequence %d: %3d keys in %2d blocks, out[0] = %+.6f (reference %+.6f)\n", s,
               seq_lens[s], seq[s].num_blocks, out[s][0], want[0]);
    }
    printf("blocks in use %d of %d; worst |out - reference| = %.2e\n",
           attn_block_pool_used_count(&pool), BLOCKS, worst);
    for (int s = 0; s < SEQS; s++) attn_seq_release(&pool, &seq[s]);
    free(ws); free(pool_mem); free(cache_mem);
    return worst < 1e-5 && attn_block_pool_used_count(&pool) == 0 ? 0 : 1;
}
