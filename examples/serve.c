/* serve.c - a model-free serving loop through the batch builder (attn_batch_build): requests
   arrive, prompts are prefilled in chunks under a token budget, a request forks (parallel
   sampling: copy-on-write of the shared last block), the pool runs out (the newest request is
   preempted and recomputed later), finished requests release their blocks. Every step runs two
   layers through attn_forward with the builder's metadata, and every output row is checked
   against a naive double-precision attention over the request's whole history; the exit status
   is 1 if any row differs by more than 1e-4 or a feature was not exercised.
   Build: cc -O2 -I. examples/serve.c -lm (add -fopenmp for threads). */
#define ATTN_IMPLEMENTATION
#include "attn.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { H = 4, HK = 2, D = 32, BS = 8, BLOCKS = 24, LAYERS = 2, REQS = 10, MAXB = 16,
       BUDGET = 40, MAX_SEQS = REQS };
#define QW (H * D)
#define KW (HK * D)

/* A token's query, key and value are a hash of (layer, kind, owner, position, element): the
   "model". A forked request owns its positions from the fork on; before, its parent does. */
static float feat(int layer, int kind, int owner, int pos, int e) {
    uint32_t x = (uint32_t)(layer * 7919 + kind * 104729 + owner * 1299709) ^
                 ((uint32_t)pos * 2654435761u) ^ ((uint32_t)e * 40503u);
    x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
    return (float)(x & 0xffff) / 32768.0f - 1.0f;
}

typedef enum { WAITING, RUNNING, DONE } state;
typedef struct request {
    state st;
    int arrival, prompt, target;   /* arrives at this step; done at target tokens */
    int known;                     /* tokens that exist (prompt + generated) */
    int parent, fork_len;          /* -1, 0 unless forked */
    int admitted;                  /* admission order, for preemption (newest first) */
    attn_seq seq;
    int32_t table[MAXB];
} request;
static request req[REQS];
static int num_reqs;

static int owner(int r, int pos) {
    while (pos < req[r].fork_len) r = req[r].parent;
    return r;
}

/* out_i for the new tokens of request r (Lq of them, ending at its length), naive, double. */
static double check_rows(int layer, int r, int lq, const float *out) {
    int lk = (int)req[r].seq.len;
    double worst = 0.0, *s = (double *)malloc(sizeof(double) * (size_t)lk);
    for (int i = 0; i < lq; i++) {
        int pos = lk - lq + i;
        for (int h = 0; h < H; h++) {
            int kh = h / (H / HK);
            double mx = -1e300, sum = 0.0;
            for (int j = 0; j <= pos; j++) {
                double dot = 0.0;
                for (int d = 0; d < D; d++)
                    dot += (double)feat(layer, 0, r, pos, h * D + d) *
                           (double)feat(layer, 1, owner(r, j), j, kh * D + d);
                s[j] = dot / sqrt((double)D);
                if (s[j] > mx) mx = s[j];
            }
            for (int j = 0; j <= pos; j++) sum += s[j] = exp(s[j] - mx);
            for (int d = 0; d < D; d++) {
                double o = 0.0;
                for (int j = 0; j <= pos; j++)
                    o += s[j] / sum * (double)feat(layer, 2, owner(r, j), j, kh * D + d);
                double err = fabs(o - (double)out[(size_t)i * QW + (size_t)h * D + d]);
                if (err > worst) worst = err;
            }
        }
    }
    free(s);
    return worst;
}

int main(void) {
    attn_params p = {0};
    p.num_heads = H; p.num_kv_heads = HK; p.head_size = D;
    attn_layer layer;
    attn_kv_cache cache[LAYERS];
    attn_block_pool pool;
    attn_batch batch;
    size_t cbytes = attn_kv_cache_bytes(BLOCKS, BS, HK, D, ATTN_F32);
    size_t pbytes = attn_block_pool_bytes(BLOCKS);
    size_t bbytes = attn_batch_bytes(MAX_SEQS, BUDGET, MAXB);
    void *cmem[LAYERS], *pmem = malloc(pbytes), *bmem = malloc(bbytes);
    int ok = attn_layer_init(&layer, &p, ATTN_DECODER, ATTN_BACKEND_SDPA) == ATTN_OK &&
             attn_block_pool_init(&pool, BLOCKS, BS, pmem, pbytes) == ATTN_OK &&
             attn_batch_init(&batch, MAX_SEQS, BUDGET, MAXB, bmem, bbytes) == ATTN_OK;
    for (int l = 0; l < LAYERS; l++) {
        cmem[l] = malloc(cbytes);
        ok = ok && attn_kv_cache_init(&cache[l], BLOCKS, BS, HK, D, ATTN_F32, 1, 1, cmem[l],
                                      cbytes) == ATTN_OK;
    }
    if (!ok) { printf("setup failed\n"); return 1; }
    static const int arrival[] = {0, 0, 1, 3, 4, 6, 9}, prompt[] = {45, 13, 30, 7, 52, 21, 38};
    static const int gen[] = {12, 10, 9, 16, 6, 11, 8};
    for (int r = 0; r < 7; r++) {
        request *q = &req[r];
        q->st = WAITING; q->arrival = arrival[r]; q->prompt = q->known = prompt[r];
        q->target = prompt[r] + gen[r]; q->parent = -1; q->admitted = -1;
        attn_seq_init(&q->seq, q->table, MAXB);
    }
    num_reqs = 7;
    float *qrows = (float *)malloc(sizeof(float) * BUDGET * QW);
    float *krows = (float *)malloc(sizeof(float) * BUDGET * KW);
    float *vrows = (float *)malloc(sizeof(float) * BUDGET * KW);
    float *out = (float *)malloc(sizeof(float) * BUDGET * QW);
    char msg[256];
    attn_exec ex = {0};
    ex.error_msg = msg; ex.error_msg_bytes = sizeof msg;
    int steps = 0, tokens = 0, forks = 0, copies = 0, preemptions = 0, admissions = 0;
    double worst = 0.0;
    for (int now = 0; steps < 500; now++) {
        int done = 1;
        for (int r = 0; r < num_reqs; r++) done &= req[r].st == DONE;
        if (done) break;
        /* 1. admit what has arrived (recomputing a preempted request's tokens from scratch) */
        for (int r = 0; r < num_reqs; r++)
            if (req[r].st == WAITING && req[r].arrival <= now) {
                req[r].st = RUNNING; req[r].admitted = admissions++;
            }
        /* 2. schedule: prefill chunks under the token budget first, then one decode each */
        attn_seq *seqs[MAX_SEQS];
        int32_t num_new[MAX_SEQS];
        int who[MAX_SEQS], n, used;
        for (;;) {
            n = 0; used = 0;
            for (int pass = 0; pass < 2; pass++)
                for (int r = 0; r < num_reqs; r++) {
                    request *q = &req[r];
                    int left = q->known - (int)q->seq.len;
                    if (q->st != RUNNING || (pass == 0) != (left > 0) || used >= BUDGET) continue;
                    int take = left > 0 ? (left < BUDGET - used ? left : BUDGET - used) : 1;
                    who[n] = r; seqs[n] = &q->seq; num_new[n] = take; n++; used += take;
                }
            /* 3. append everything (all or nothing) and fill the metadata */
            attn_metadata md;
            attn_status st = attn_batch_build(&batch, &pool, seqs, num_new, n, &md);
            if (st == ATTN_ERR_OUT_OF_BLOCKS) {  /* preempt the newest running request */
                int victim = -1;
                for (int r = 0; r < num_reqs; r++)
                    if (req[r].st == RUNNING &&
                        (victim < 0 || req[r].admitted > req[victim].admitted))
                        victim = r;
                attn_seq_release(&pool, &req[victim].seq);
                req[victim].st = WAITING; req[victim].arrival = now + 1;
                preemptions++;
                continue;
            }
            if (st != ATTN_OK) {
                printf("build: %s: %s\n", attn_status_str(st), batch.error_msg);
                return 1;
            }
            if (n == 0) break;  /* everything running was preempted: wait for blocks */
            /* 4. the rows of the step's tokens, in batch order, then every layer */
            copies += md.num_blocks_to_copy;
            for (int l = 0; l < LAYERS; l++) {
                int t = 0;
                for (int i = 0; i < n; i++)
                    for (int j = 0; j < num_new[i]; j++, t++) {
                        int r = who[i], pos = (int)req[r].seq.len - num_new[i] + j;
                        for (int e = 0; e < QW; e++) qrows[t * QW + e] = feat(l, 0, r, pos, e);
                        for (int e = 0; e < KW; e++) {
                            krows[t * KW + e] = feat(l, 1, owner(r, pos), pos, e);
                            vrows[t * KW + e] = feat(l, 2, owner(r, pos), pos, e);
                        }
                    }
                attn_rows rq = {qrows, ATTN_F32, 0}, rk = {krows, ATTN_F32, 0};
                attn_rows rv = {vrows, ATTN_F32, 0}, ro = {out, ATTN_F32, 0};
                size_t wsb = attn_forward_workspace_size(&layer, &md, &ex);
                void *ws = malloc(wsb);
                st = attn_forward(&layer, &ex, rq, rk, rv, &cache[l], &md, ro, ws, wsb);
                free(ws);
                if (st != ATTN_OK) {
                    printf("forward: %s: %s\n", attn_status_str(st), msg);
                    return 1;
                }
                t = 0;
                for (int i = 0; i < n; i++) {
                    double e = check_rows(l, who[i], num_new[i], out + (size_t)t * QW);
                    if (e > worst) worst = e;
                    t += num_new[i];
                }
            }
            break;
        }
        steps++; tokens += used;
        /* 5. sample (a decode's token now exists), fork, finish and release */
        for (int i = 0; i < n; i++) {
            request *q = &req[who[i]];
            if (q->seq.len == q->known && q->known < q->target) q->known++;
            if (q->seq.len >= q->target) { attn_seq_release(&pool, &q->seq); q->st = DONE; }
        }
        if (forks == 0 && req[1].st == RUNNING && req[1].seq.len == req[1].prompt &&
            req[1].seq.len % BS != 0 && num_reqs < REQS) {  /* a second sample of request 1 */
            request *c = &req[num_reqs];
            *c = req[1];
            attn_seq_init(&c->seq, c->table, MAXB);
            if (attn_seq_fork(&pool, &req[1].seq, &c->seq) != ATTN_OK) {
                printf("fork failed\n");
                return 1;
            }
            c->parent = 1; c->fork_len = (int)req[1].seq.len; c->admitted = admissions++;
            num_reqs++; forks++;
        }
    }
    printf("%d steps, %d tokens, %d requests (%d forked), %d copy-on-write copies, %d "
           "preemptions; blocks in use at the end: %d; worst |out - reference| = %.3g\n", steps,
           tokens, num_reqs, forks, copies, preemptions, attn_block_pool_used_count(&pool), worst);
    int fine = worst <= 1e-4 && forks > 0 && copies > 0 && preemptions > 0 &&
               attn_block_pool_used_count(&pool) == 0;
    for (int r = 0; r < num_reqs; r++) fine &= req[r].st == DONE;
    for (int l = 0; l < LAYERS; l++) free(cmem[l]);
    free(pmem); free(bmem); free(qrows); free(krows); free(vrows); free(out);
    printf("%s\n", fine ? "ok" : "FAILED");
    return fine ? 0 : 1;
}
