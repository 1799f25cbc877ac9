/* Determinism beyond two threads: every kernel's outputs (and attn_write_kv's cache) are bitwise
   equal at 1, 2, 3, 5, 8 and 16 threads, on OpenMP (where compiled in; elsewhere the same thread
   counts still shape the plans) and on a caller pool of real threads, more of them than the
   machine has cores; a batch and a random permutation of its sequences give each sequence the
   same bits; and one workspace, dirty from the start and never cleared, serves every call. */

#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#define TDT_THREADS 1
#else
#define TDT_THREADS 0
#endif

static const int tdt_counts[6] = {1, 2, 3, 5, 8, 16};

#if TDT_THREADS
/* The caller pool: num_threads workers take the next item from a shared counter; worker w is
   thread w, so no two concurrent tasks share a thread index. */
typedef struct tdt_job {
    pthread_mutex_t lock;
    int next, num_items;
    attn_task_fn *task;
    void *ctx;
} tdt_job;
typedef struct tdt_worker { tdt_job *job; int index; } tdt_worker;

static void *tdt_work(void *arg) {
    tdt_worker *w = (tdt_worker *)arg;
    for (;;) {
        pthread_mutex_lock(&w->job->lock);
        int item = w->job->next++;
        pthread_mutex_unlock(&w->job->lock);
        if (item >= w->job->num_items) return NULL;
        w->job->task(w->job->ctx, item, w->index);
    }
}

static void tdt_pool_for(void *pool, int num_items, int num_threads, attn_task_fn *task,
                         void *ctx) {
    pthread_t th[16];
    tdt_worker w[16];
    tdt_job job;
    (void)pool;
    if (num_threads > 16) num_threads = 16;
    pthread_mutex_init(&job.lock, NULL);
    job.next = 0; job.num_items = num_items; job.task = task; job.ctx = ctx;
    for (int i = 0; i < num_threads; i++) {
        w[i].job = &job; w[i].index = i;
        if (pthread_create(&th[i], NULL, tdt_work, &w[i])) {
            printf("  pthread_create failed\n"); exit(2);
        }
    }
    for (int i = 0; i < num_threads; i++) pthread_join(th[i], NULL);
    pthread_mutex_destroy(&job.lock);
}
#endif

/* The execs to compare with the serial baseline: each thread count on OpenMP (or the build's
   default driver) and on the caller pool. Returns how many. */
static int tdt_execs(attn_isa isa, attn_exec *out) {
    int n = 0;
    for (int i = 0; i < 6; i++) {
        out[n++] = tu_exec(isa, tdt_counts[i]);
#if TDT_THREADS
        out[n] = tu_exec(isa, tdt_counts[i]);
        out[n++].parallel_for = tdt_pool_for;
#endif
    }
    return n;
}

/* One workspace for every call of the file: dirty from the start, never cleared. */
static unsigned char *tdt_ws;
static size_t tdt_ws_bytes;
static void *tdt_dirty_ws(size_t bytes) {
    if (bytes > tdt_ws_bytes) {
        free(tdt_ws);
        tdt_ws = (unsigned char *)tu_alloc(bytes);
        memset(tdt_ws, 0xa5, bytes);
        tdt_ws_bytes = bytes;
    }
    return tdt_ws;
}

/* A random permutation of [0, n). */
static void tdt_perm(uint64_t *rng, int *p, int n) {
    for (int i = 0; i < n; i++) p[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = attn_test_rand_int(rng, 0, i), t = p[i];
        p[i] = p[j]; p[j] = t;
    }
}

enum { TDT_SEQS = 5 };

/* ---- attn_sdpa ------------------------------------------------------------------------------ */
static int tdt_sdpa(attn_isa isa, attn_dtype act, uint64_t seed) {
    enum { H = 6, HK = 2, D = 40 };
    static const int lq[TDT_SEQS] = {1, 33, 13, 0, 50}, lk[TDT_SEQS] = {1, 33, 140, 9, 50};
    uint64_t rng = seed;
    attn_params p; memset(&p, 0, sizeof p);
    p.num_heads = H; p.num_kv_heads = HK; p.head_size = D; p.sliding_window = 50;
    p.logits_soft_cap = 10;
    int32_t cq[TDT_SEQS + 1] = {0}, ck[TDT_SEQS + 1] = {0}, pq[TDT_SEQS + 1] = {0},
    pk[TDT_SEQS + 1] = {0};
    int perm[TDT_SEQS];
    tdt_perm(&rng, perm, TDT_SEQS);
    for (int s = 0; s < TDT_SEQS; s++) {
        cq[s + 1] = cq[s] + lq[s]; ck[s + 1] = ck[s] + lk[s];
        pq[s + 1] = pq[s] + lq[perm[s]]; pk[s + 1] = pk[s] + lk[perm[s]];
    }
    size_t esz = attn_dtype_size(act), qr = (size_t)H * D, kr = (size_t)HK * D;
    size_t nq = (size_t)cq[TDT_SEQS] * qr, nk = (size_t)ck[TDT_SEQS] * kr;
    char *q = (char *)tu_alloc(nq * esz), *k = (char *)tu_alloc(nk * esz),
          *v = (char *)tu_alloc(nk * esz);
    char *q2 = (char *)tu_alloc(nq * esz), *k2 = (char *)tu_alloc(nk * esz),
          *v2 = (char *)tu_alloc(nk * esz);
    char *base = (char *)tu_alloc(nq * esz), *out = (char *)tu_alloc(nq * esz);
    float *scratch = (float *)tu_alloc(sizeof(float) * (nq > nk ? nq : nk));
    tu_fill(&rng, act, q, scratch, nq, -1, 1);
    tu_fill(&rng, act, k, scratch, nk, -1, 1);
    tu_fill(&rng, act, v, scratch, nk, -1, 1);
    for (int s = 0; s < TDT_SEQS; s++) {  /* the permuted batch */
        int o = perm[s];
        memcpy(q2 + (size_t)pq[s] * qr * esz, q + (size_t)cq[o] * qr * esz,
               (size_t)lq[o] * qr * esz);
        memcpy(k2 + (size_t)pk[s] * kr * esz, k + (size_t)ck[o] * kr * esz,
               (size_t)lk[o] * kr * esz);
        memcpy(v2 + (size_t)pk[s] * kr * esz, v + (size_t)ck[o] * kr * esz,
               (size_t)lk[o] * kr * esz);
    }
    attn_exec e1 = tu_exec(isa, 1), execs[12];
    int n_exec = tdt_execs(isa, execs), fails = 0;
    attn_rows rq = {q, act, 0}, rk = {k, act, 0}, rv = {v, act, 0}, rb = {base, act, 0},
              ro = {out, act, 0};
    size_t bytes = attn_sdpa_workspace_size(&p, &e1, cq, ck, TDT_SEQS);
    void *fresh = calloc(1, bytes);
    fails += attn_sdpa(&p, &e1, rq, rk, rv, rb, cq, ck, TDT_SEQS, 1, NULL, fresh, bytes) != ATTN_OK;
    free(fresh);
    for (int x = 0; x < n_exec; x++) {
        bytes = attn_sdpa_workspace_size(&p, &execs[x], cq, ck, TDT_SEQS);
        fails +=
                attn_sdpa(&p, &execs[x], rq, rk, rv, ro, cq, ck, TDT_SEQS, 1, NULL,
                          tdt_dirty_ws(bytes), bytes) != ATTN_OK;
        fails += memcmp(out, base, nq * esz) != 0;
    }
    attn_rows pq_rows = {q2, act, 0}, pk_rows = {k2, act, 0}, pv_rows = {v2, act, 0};
    bytes = attn_sdpa_workspace_size(&p, &execs[n_exec - 1], pk, pk, TDT_SEQS);
    fails +=
            attn_sdpa(&p, &execs[n_exec - 1], pq_rows, pk_rows, pv_rows, ro, pq, pk, TDT_SEQS, 1,
                      NULL,
                       tdt_dirty_ws(bytes), bytes) != ATTN_OK;
    for (int s = 0; s < TDT_SEQS; s++)
        fails += memcmp(out + (size_t)pq[s] * qr * esz, base + (size_t)cq[perm[s]] * qr * esz,
                        (size_t)lq[perm[s]] * qr * esz) != 0;
    if (fails) printf("  sdpa isa=%s act=%s: %d differences\n", attn_isa_name(isa),
                      attn_dtype_name(act), fails);
    free(q); free(k); free(v); free(q2); free(k2); free(v2); free(base); free(out); free(scratch);
    return fails;
}

TEST(determinism_sdpa_threads_pools_permutations) {
    attn_isa isas[ATTN_ISA_COUNT];
    int n_isa = tu_isas_tiles(isas), fails = 0;
    for (int k = 0; k < n_isa; k++) {
        fails += tdt_sdpa(isas[k], ATTN_F32, 5000 + (uint64_t)k);
        fails += tdt_sdpa(isas[k], ATTN_BF16, 5010 + (uint64_t)k);
    }
    CHECK_EQ_INT(fails, 0);
}

/* ---- the paged kernels ---------------------------------------------------------------------- */
/* Prefill chunks (op 0) or decodes (op 1..3: v1, v2, auto) over td_make's cache (shuffled
   blocks, NaN in unused slots; rows of D elements), alone and with the sequences permuted. */
static int tdt_paged(int op, attn_isa isa, attn_dtype kv, attn_dtype act, int D, uint64_t seed) {
    static const int lens[TDT_SEQS] = {600, 1, 37, 1100, 64}, chunk[TDT_SEQS] = {5, 1, 9, 2, 7};
    td_case c = td_base();
    c.num_seqs = TDT_SEQS; c.lens = lens; c.kv_dt = kv; c.act_dt = act; c.H = 8; c.Hk = 2; c.D = D;
    c.alibi = 1; c.sinks = 1;
    if (attn__is_fp8(kv)) { c.k_scale = 0.02f; c.v_scale = 0.01f; }
    td_data d;
    td_make(&c, seed, &d);
    uint64_t rng = seed + 1;
    int perm[TDT_SEQS];
    tdt_perm(&rng, perm, TDT_SEQS);
    int32_t qsl[TDT_SEQS + 1] = {0}, pqsl[TDT_SEQS + 1] = {0}, plens[TDT_SEQS];
    for (int s = 0; s < TDT_SEQS; s++) {
        int m = op == 0 ? chunk[s] : 1, pm = op == 0 ? chunk[perm[s]] : 1;
        qsl[s + 1] = qsl[s] + m;
        pqsl[s + 1] = pqsl[s] + pm;
        plens[s] = lens[perm[s]];
    }
    int32_t *ptables = (int32_t *)tu_alloc(sizeof(int32_t) * (size_t)(TDT_SEQS * d.max_blocks));
    for (int s = 0; s < TDT_SEQS; s++)
        memcpy(ptables + s * d.max_blocks, d.tables + perm[s] * d.max_blocks,
               sizeof(int32_t) * (size_t)d.max_blocks);
    size_t esz = attn_dtype_size(act), row = (size_t)c.H * c.D, nq = (size_t)qsl[TDT_SEQS] * row;
    char *q = (char *)tu_alloc(nq * esz), *q2 = (char *)tu_alloc(nq * esz);
    char *base = (char *)tu_alloc(nq * esz), *out = (char *)tu_alloc(nq * esz);
    float *lb = (float *)tu_alloc(sizeof(float) * (size_t)qsl[TDT_SEQS] * c.H),
           *lo = (float *)tu_alloc(sizeof(float) * (size_t)qsl[TDT_SEQS] * c.H);
    float *scratch = (float *)tu_alloc(sizeof(float) * nq);
    tu_fill(&rng, act, q, scratch, nq, -1, 1);
    for (int s = 0; s < TDT_SEQS; s++)
        memcpy(q2 + (size_t)pqsl[s] * row * esz, q + (size_t)qsl[perm[s]] * row * esz,
               (size_t)(pqsl[s + 1] - pqsl[s]) * row * esz);
    attn_paged_version ver = op == 1 ? ATTN_PAGED_V1 : op == 2 ? ATTN_PAGED_V2 : ATTN_PAGED_AUTO;
    attn_exec e1 = tu_exec(isa, 1), execs[12];
    int n_exec = tdt_execs(isa, execs), fails = 0;
    for (int x = -1; x <= n_exec; x++) {  /* -1: the baseline; n_exec: the permuted batch */
        const attn_exec *e = x < 0 ? &e1 : &execs[x < n_exec ? x : n_exec - 1];
        int permuted = x == n_exec;
        attn_rows rq = {permuted ? q2 : q, act, 0}, ro = {x < 0 ? base : out, act, 0};
        const int32_t *ls = permuted ? plens : d.lens, *qs = permuted ? pqsl : qsl,
                       *tb = permuted ? ptables : d.tables;
        size_t bytes = op == 0
                       ? attn_paged_prefill_workspace_size(&d.p, e, &d.cache, qs, ls, TDT_SEQS)
                               : attn_paged_decode_workspace_size(&d.p, e, &d.cache, ls, TDT_SEQS,
                                                                  ver);
        void *ws = x < 0 ? calloc(1, bytes) : tdt_dirty_ws(bytes);
        attn_status st = op == 0
                         ? attn_paged_prefill(&d.p, e, rq, ro, &d.cache, tb, d.max_blocks, qs, ls,
                                                TDT_SEQS, 1,
                                                      x < 0 ? lb : lo, ws, bytes)
                                 : attn_paged_decode(&d.p, e, rq, ro, &d.cache, tb, d.max_blocks,
                                                     ls, TDT_SEQS, ver,
                                                     x < 0 ? lb : lo, ws, bytes);
        if (x < 0) free(ws);
        fails += st != ATTN_OK;
        if (x < 0) continue;
        if (!permuted) {
            fails += memcmp(out, base, nq * esz) != 0;
            fails += memcmp(lo, lb, sizeof(float) * (size_t)qsl[TDT_SEQS] * c.H) != 0;
        } else {
            for (int s = 0; s < TDT_SEQS; s++) {
                int o = perm[s], m = pqsl[s + 1] - pqsl[s];
                fails +=
                        memcmp(out + (size_t)pqsl[s] * row * esz, base + (size_t)qsl[o] * row * esz,
                                (size_t)m * row * esz) != 0;
                fails +=
                        memcmp(lo + (size_t)pqsl[s] * c.H, lb + (size_t)qsl[o] * c.H,
                               sizeof(float) * (size_t)m * c.H) != 0;
            }
        }
    }
    if (fails)
        printf("  %s isa=%s kv=%s act=%s: %d differences\n", op == 0 ? "prefill" : op == 1
               ? "decode v1" : op == 2
               ? "decode v2" : "decode auto", attn_isa_name(isa), attn_dtype_name(kv),
               attn_dtype_name(act), fails);
    free(ptables); free(q); free(q2); free(base); free(out); free(lb); free(lo); free(scratch);
    td_free(&d);
    return fails;
}

TEST(determinism_paged_threads_pools_permutations) {
    attn_isa isas[ATTN_ISA_COUNT];
    int n_isa = tu_isas_tiles(isas), fails = 0;  /* ATTN_ISA_AMX: prefill and decode on tiles */
    /* each ISA runs prefill, decode v1 and decode v2, each on another of the three cache /
       activation pairs (rotating with the ISA: every ISA meets every pair); AUTO only picks
       v1 or v2. And each over an int8 or an int4 cache (D = 40 and 80: a last group short; in
       turn, every ISA meets both) with f32, f16 or bf16 queries (rotating with ISA and op). */
    for (int k = 0; k < n_isa; k++)
        for (int op = 0; op < 3; op++) {
            uint64_t seed = 5100 + (uint64_t)(k * 10 + op);
            attn_dtype act = (attn_dtype)((op + k) % 3);
            switch ((op + k) % 3) {
                case 0: fails += tdt_paged(op, isas[k], ATTN_F32, ATTN_F32, 64, seed); break;
                case 1: fails += tdt_paged(op, isas[k], ATTN_BF16, ATTN_BF16, 64, seed); break;
                default: fails += tdt_paged(op, isas[k], ATTN_FP8_E4M3, ATTN_F16, 64, seed); break;
            }
            if ((op + k) % 2) fails += tdt_paged(op, isas[k], ATTN_INT8, act, 40, seed + 1000);
            else fails += tdt_paged(op, isas[k], ATTN_INT4, act, 80, seed + 2000);
        }
    CHECK_EQ_INT(fails, 0);
}

/* ---- attn_write_kv with duplicate slots, and attn_forward ------------------------------------ */
/* Over a cache of dtype kv, rows of D elements; the number of differences. */
static int tdt_write_kv_and_forward(attn_dtype kv, int D, uint64_t seed) {
    enum { H = 4, HK = 2, BS = 4, NB = 40, T = 300 };
    attn_isa isas[ATTN_ISA_COUNT];
    int n_isa = tu_isas(isas), fails = 0;
    uint64_t rng = seed;
    float *kf = (float *)tu_alloc(sizeof(float) * T * HK * D),
           *vf = (float *)tu_alloc(sizeof(float) * T * HK * D);
    int64_t slots[T];
    tu_fill(&rng, ATTN_F32, kf, kf, (size_t)T * HK * D, -1, 1);
    tu_fill(&rng, ATTN_F32, vf, vf, (size_t)T * HK * D, -1, 1);
    /* many duplicates */
    for (int t = 0; t < T; t++) slots[t] = attn_test_rand_int(&rng, -1, NB * BS / 3);
    size_t cbytes = attn_kv_cache_bytes(NB, BS, HK, D, kv);
    void *m1 = tu_alloc(cbytes), *m2 = tu_alloc(cbytes);
    attn_kv_cache c1, c2;
    if (attn_kv_cache_init(&c1, NB, BS, HK, D, kv, 1, 1, m1, cbytes) != ATTN_OK ||
        attn_kv_cache_init(&c2, NB, BS, HK, D, kv, 1, 1, m2, cbytes) != ATTN_OK) {
        printf("  kv cache init failed\n");
        exit(2);
    }
    size_t arr = (size_t)NB * BS * HK * attn_dtype_row_bytes(kv, D);
    attn_rows rk = {kf, ATTN_F32, 0}, rv = {vf, ATTN_F32, 0};
    for (int k = 0; k < n_isa; k++) {
        attn_exec e1 = tu_exec(isas[k], 1), execs[12];
        int n_exec = tdt_execs(isas[k], execs);
        memset(c1.key, 0, arr); memset(c1.value, 0, arr);
        fails += attn_write_kv(&c1, rk, rv, slots, T, &e1) != ATTN_OK;
        for (int x = 0; x < n_exec; x++) {
            memset(c2.key, 0, arr); memset(c2.value, 0, arr);
            fails += attn_write_kv(&c2, rk, rv, slots, T, &execs[x]) != ATTN_OK;
            fails += memcmp(c1.key, c2.key, arr) != 0 || memcmp(c1.value, c2.value, arr) != 0;
        }
    }
    if (fails) printf("  write_kv %s: %d differences\n", attn_dtype_name(kv), fails);
    /* forward: two chunks over prefixes in the cache just written, and three decodes */
    attn_params p; memset(&p, 0, sizeof p);
    p.num_heads = H; p.num_kv_heads = HK; p.head_size = D;
    attn_layer L;
    fails += attn_layer_init(&L, &p, ATTN_DECODER, ATTN_BACKEND_SDPA) != ATTN_OK;
    int32_t qsl[3] = {0, 7, 12}, ctx[2] = {20, 9}, lens[5] = {27, 14, 30, 1, 17}, tables[5 * 8];
    int64_t wslots[15];
    for (int i = 0; i < 5 * 8; i++) tables[i] = (i * 13 + 5) % NB;
    for (int s = 0, t = 0; s < 5; s++) {
        int first = s < 2 ? ctx[s] : lens[s] - 1, n = s < 2 ? qsl[s + 1] - qsl[s] : 1;
        for (int m = 0; m < n; m++, t++) wslots[t] =
                (int64_t)tables[s * 8 + (first + m) / BS] * BS + (first + m) % BS;
    }
    attn_metadata md; memset(&md, 0, sizeof md);
    md.num_prefills = 2; md.num_prefill_tokens = 12; md.num_decode_tokens = 3;
    md.slot_mapping = wslots; md.seq_lens = lens; md.query_start_loc = qsl; md.context_lens = ctx;
    md.block_tables = tables; md.max_blocks_per_seq = 8;
    float *q = (float *)tu_alloc(sizeof(float) * 15 * H * D),
           *base = (float *)tu_alloc(sizeof(float) * 15 * H * D);
    float *out = (float *)tu_alloc(sizeof(float) * 15 * H * D);
    tu_fill(&rng, ATTN_F32, q, q, (size_t)15 * H * D, -1, 1);
    void *snap_k = tu_alloc(arr), *snap_v = tu_alloc(arr), *base_k = tu_alloc(arr),
          *base_v = tu_alloc(arr);
    memcpy(snap_k, c1.key, arr); memcpy(snap_v, c1.value, arr);
    attn_rows rq = {q, ATTN_F32, 0};
    for (int k = 0; k < n_isa; k++) {
        attn_exec e1 = tu_exec(isas[k], 1), execs[12];
        int n_exec = tdt_execs(isas[k], execs);
        for (int x = -1; x < n_exec; x++) {
            const attn_exec *e = x < 0 ? &e1 : &execs[x];
            memcpy(c1.key, snap_k, arr); memcpy(c1.value, snap_v, arr);
            size_t bytes = attn_forward_workspace_size(&L, &md, e);
            void *ws = x < 0 ? calloc(1, bytes) : tdt_dirty_ws(bytes);
            attn_rows ro = {x < 0 ? base : out, ATTN_F32, 0};
            fails += attn_forward(&L, e, rq, rk, rv, &c1, &md, ro, ws, bytes) != ATTN_OK;
            if (x < 0) {
                free(ws);
                memcpy(base_k, c1.key, arr); memcpy(base_v, c1.value, arr);
                continue;
            }
            fails += memcmp(out, base, sizeof(float) * 15 * H * D) != 0;
            fails += memcmp(c1.key, base_k, arr) != 0 || memcmp(c1.value, base_v, arr) != 0;
        }
    }
    if (fails) printf("  %s: %d differences in all\n", attn_dtype_name(kv), fails);
    free(kf); free(vf); free(m1); free(m2); free(q); free(base); free(out);
    free(snap_k); free(snap_v); free(base_k); free(base_v);
    return fails;
}

/* bf16 rows of 24; int8 and int4 rows of 40 and 24 (a whole and a short group, a short one) */
TEST(determinism_write_kv_and_forward) {
    CHECK_EQ_INT(tdt_write_kv_and_forward(ATTN_BF16, 24, 5400), 0);
    CHECK_EQ_INT(tdt_write_kv_and_forward(ATTN_INT8, 40, 5401), 0);
    CHECK_EQ_INT(tdt_write_kv_and_forward(ATTN_INT4, 24, 5402), 0);
    free(tdt_ws); tdt_ws = NULL; tdt_ws_bytes = 0;
}

#define TEST_DETERMINISM_LIST                                                                     \
    ATTN_TEST_ENTRY(determinism_sdpa_threads_pools_permutations),                                 \
    ATTN_TEST_ENTRY(determinism_paged_threads_pools_permutations),                                \
    ATTN_TEST_ENTRY(determinism_write_kv_and_forward)
