/* Shared-prefix decode: sequences whose tables name the same blocks over whole partitions get
   those partitions from one stacked pass (attn__decode_share). Each case is run twice over the
   same values: every sequence on blocks of its own (its leader's rows copied into them), then
   the members' tables naming the leader's blocks. The two runs must agree to the bit - on every
   ISA, v1 and v2, 1 and 2 threads - and with the reference; and the partitions the plan stacks
   are counted against the rule (whole 512-key partitions, all visible, the same blocks), so a
   case whose sharing goes unused fails. */

typedef struct tsp_case {
    td_case c;
    const int *leader;   /* [num_seqs] whose first shared[s] tokens s shares (itself: none) */
    const int *shared;
} tsp_case;

/* Sequence s's first n tokens made copies of the leader's rows (their bytes: codes and scales
   for the integer caches), in its own blocks. */
static void tsp_copy_rows(const td_case *c, td_data *d, int s, int leader, int n) {
    size_t rb = attn_dtype_row_bytes(c->kv_dt, c->D), row = (size_t)c->D;
    for (int pos = 0; pos < n; pos++)
        for (int g = 0; g < c->Hk; g++) {
            int bs = d->tables[s * d->max_blocks + pos / c->bs],
                bl = d->tables[leader * d->max_blocks + pos / c->bs];
            size_t to = ((size_t)bs * c->Hk + g) * c->bs + pos % c->bs,
                   from = ((size_t)bl * c->Hk + g) * c->bs + pos % c->bs;
            memcpy((char *)d->cache.key + to * rb, (char *)d->cache.key + from * rb, rb);
            memcpy((char *)d->cache.value + to * rb, (char *)d->cache.value + from * rb, rb);
            memcpy(d->kf + to * row, d->kf + from * row, row * 4);
            memcpy(d->vf + to * row, d->vf + from * row, row * 4);
        }
}

/* The tables with each member naming its leader's blocks for the whole blocks of its shared
   tokens; a block the fork split mid-way stays its own (copy-on-write). */
static int32_t *tsp_shared_tables(const tsp_case *t, const td_data *d) {
    const td_case *c = &t->c;
    size_t n = (size_t)c->num_seqs * d->max_blocks + 1;
    int32_t *tab = (int32_t *)tu_alloc(n * sizeof(int32_t));
    memcpy(tab, d->tables, n * sizeof(int32_t));
    for (int s = 0; s < c->num_seqs; s++)
        for (int b = 0; b < t->shared[s] / c->bs && t->leader[s] != s; b++)
            tab[s * d->max_blocks + b] = d->tables[t->leader[s] * d->max_blocks + b];
    return tab;
}

/* The rule, from the case: partition p of a sequence whose whole keys it sees (window), that
   two or more of a leader's group hold in the same blocks. */
static int tsp_sees_partition(const td_case *c, int L, int p) {
    int lo = c->window ? L - c->window : 0;
    return (p + 1) * ATTN_PARTITION_TOKENS <= L && lo <= p * ATTN_PARTITION_TOKENS;
}
static int tsp_expected_stacked(const tsp_case *t) {
    const td_case *c = &t->c;
    int total = 0;
    for (int l = 0; l < c->num_seqs; l++)
        for (int p = 0; t->leader[l] == l && p < c->lens[l] / ATTN_PARTITION_TOKENS; p++) {
            int n = tsp_sees_partition(c, c->lens[l], p);
            for (int s = 0; s < c->num_seqs; s++)
                n += s != l && t->leader[s] == l && tsp_sees_partition(c, c->lens[s], p) &&
                     (p + 1) * ATTN_PARTITION_TOKENS <= t->shared[s] / c->bs * c->bs;
            total += n > 1 && tsp_sees_partition(c, c->lens[l], p) ? n : 0;
        }
    return total;
}

/* The partitions the call's plan computes in stacks. */
static int tsp_stacked(const td_case *c, td_data *d, const int32_t *tables, const attn_exec *e,
                      attn_paged_version ver) {
    attn__call cc;
    attn__args a;
    attn__decode_plan P;
    int n = 0;
    if (attn__call_resolve(e, 0, &cc) != ATTN_OK) return -1;
    memset(&a, 0, sizeof a);
    memset(&P, 0, sizeof P);
    a.params = &d->p; a.cache = &d->cache; a.tables = tables; a.max_blocks = d->max_blocks;
    a.seq_lens = d->lens; a.num_seqs = c->num_seqs;
    a.q.data = d->q; a.q.dtype = c->act_dt;
    a.version = attn_paged_decode_version(&d->p, d->lens, c->num_seqs, ver);
    size_t bytes = attn__decode_ws_layout(&d->p, &cc, d->lens, c->num_seqs, NULL, NULL);
    char *ws = (char *)tu_alloc(bytes);
    attn__decode_ws_layout(&d->p, &cc, d->lens, c->num_seqs, ws, &P);
    if (attn__decode_plan_fill(&P, &cc, &a) != ATTN_OK) n = -1;
    for (int i = 0; i < P.n_stacks && n >= 0; i++) n += P.stacks[3 * i + 2];
    free(ws);
    return n;
}

static attn_status tsp_run(const td_case *c, td_data *d, const int32_t *tables, const attn_exec *e,
                          attn_paged_version ver, void *out, float *lse) {
    int32_t *own = d->tables;
    d->tables = (int32_t *)tables;
    attn_status st = td_run(c, d, e, ver, out, lse);
    d->tables = own;
    return st;
}

/* The case on the ISAs isas: 0 when every check holds. */
static int tsp_check_on(const tsp_case *t, uint64_t seed, const attn_isa *isas, int n_isa) {
    const td_case *c = &t->c;
    td_data d;
    int fails = 0;
    td_make(c, seed, &d);
    for (int s = 0; s < c->num_seqs; s++)
        if (t->leader[s] != s) tsp_copy_rows(c, &d, s, t->leader[s], t->shared[s]);
    td_reference(c, &d);
    int32_t *tab = tsp_shared_tables(t, &d);
    attn_dtype out_dt = td_out_dt(c);
    size_t n_out = (size_t)c->num_seqs * c->H * c->D, esz = attn_dtype_size(out_dt);
    size_t n_lse = (size_t)c->num_seqs * c->H;
    char *o_own = (char *)tu_alloc(n_out * esz + 1), *o_sh = (char *)tu_alloc(n_out * esz + 1);
    float *l_own = (float *)tu_alloc(n_lse * 4 + 4), *l_sh = (float *)tu_alloc(n_lse * 4 + 4);
    double atol = c->atol > 0 ? c->atol : tu_atol(out_dt);
    int want = tsp_expected_stacked(t);
    if (want == 0) {
        printf("  the case shares no partition: it tests nothing\n");
        fails++;
    }
    for (int k = 0; k < n_isa; k++)
        for (int run = 0; run < 4; run++) {
            attn_exec e = tu_exec(isas[k], 1 + run % 2);
            attn_paged_version ver = run < 2 ? ATTN_PAGED_V1 : ATTN_PAGED_V2;
            attn_exec off = e;  /* exec.no_shared_prefixes: nothing stacked, the same bits */
            off.no_shared_prefixes = 1;
            int bad = 0, got_stacked = tsp_stacked(c, &d, tab, &e, ver),
                no_stacks = tsp_stacked(c, &d, d.tables, &e, ver) +
                            tsp_stacked(c, &d, tab, &off, ver);
            e.f32_probs = off.f32_probs = c->f32_probs;
            if (tsp_run(c, &d, tab, &off, ver, o_sh, l_sh) != ATTN_OK ||
                tsp_run(c, &d, d.tables, &e, ver, o_own, l_own) != ATTN_OK) { fails++; continue; }
            int same_off = !memcmp(o_own, o_sh, n_out * esz) && !memcmp(l_own, l_sh, n_lse * 4);
            if (tsp_run(c, &d, tab, &e, ver, o_sh, l_sh) != ATTN_OK) { fails++; continue; }
            for (size_t i = 0; i < n_out; i++) {
                double err = fabs(ref_element(o_sh, out_dt, i) - d.ref_out[i]);
                bad += !(err <= atol + 1e-3 * fabs(d.ref_out[i]));
            }
            int same = same_off && !memcmp(o_own, o_sh, n_out * esz) &&
                       !memcmp(l_own, l_sh, n_lse * 4);
            if (bad || !same || got_stacked != want || no_stacks != 0) {
                fails++;
                printf("  H=%d Hk=%d D=%d seqs=%d kv=%s act=%s alibi=%d W=%d cap=%g sinks=%d "
                       "isa=%s v%d threads=%d: %d off the reference, shared vs own %s, "
                       "%d partitions stacked (want %d; own tables or sharing off: %d, want 0)\n", c->H, c->Hk,
                       c->D, c->num_seqs, attn_dtype_name(c->kv_dt), attn_dtype_name(c->act_dt),
                       c->alibi, c->window, c->cap, c->sinks, attn_isa_name(isas[k]),
                       ver == ATTN_PAGED_V1 ? 1 : 2, e.num_threads, bad,
                       same ? "equal" : "DIFFER", got_stacked, want, no_stacks);
            }
        }
    free(o_own); free(o_sh); free(l_own); free(l_sh); free(tab);
    td_free(&d);
    return fails;
}

static int tsp_check(const tsp_case *t, uint64_t seed) {
    attn_isa isas[ATTN_ISA_COUNT];
    int n_isa = tu_isas_tiles(isas);
    return tsp_check_on(t, seed, isas, n_isa);
}

/* Two groups and an unshared sequence: a fork that shares two partitions, one that diverged
   mid-block after 1,100 tokens (its block 68 split; partitions 0 and 1 still shared), one
   sharing a single partition; every cache dtype, f32 queries, bf16 ones over bf16, fp8 (the
   pair kernels where the CPU has them) and the integer caches. */
static tsp_case tsp_mixed(void) {
    static const int lens[6] = {1300, 1250, 1030, 1500, 600, 700};
    static const int leader[6] = {0, 0, 0, 3, 3, 5}, shared[6] = {0, 1100, 1024, 0, 520, 0};
    tsp_case t;
    t.c = td_base();
    t.c.num_seqs = 6; t.c.lens = lens; t.c.f32_out = 1;
    t.leader = leader; t.shared = shared;
    return t;
}

TEST(shared_prefix_every_cache_dtype) {
    const attn_dtype kvs[] = {ATTN_F32, ATTN_F16, ATTN_BF16, ATTN_FP8_E4M3, ATTN_FP8_E5M2,
                              ATTN_INT8, ATTN_INT4};
    int fails = 0;
    for (int k = 0; k < 7; k++)
        for (int bf16_q = 0; bf16_q < 2; bf16_q++) {
            tsp_case t = tsp_mixed();
            if (bf16_q && (kvs[k] == ATTN_F32 || kvs[k] == ATTN_F16)) continue;
            t.c.kv_dt = kvs[k];
            t.c.act_dt = bf16_q ? ATTN_BF16 : ATTN_F32;
            /* probabilities rounded to bf16 (pair kernels); the integer caches have none */
            if (bf16_q && !attn__is_int(kvs[k])) t.c.atol = 4e-3;
            if (attn__is_fp8(kvs[k])) { t.c.k_scale = 0.01f; t.c.v_scale = 0.004f; }
            fails += tsp_check(&t, 5900 + (uint64_t)(k * 2 + bf16_q));
        }
    CHECK_EQ_INT(fails, 0);
}

/* Groups of 2 to 32 sequences over three shared partitions, for G = 1, 4 and 8 query heads a
   KV head (a stacked pass holds 64 heads: 32 sequences of G = 4 take two, of G = 8 four); over
   f32 caches, and over an int8 one (2 sequences of G = 8) and an int4 one (5 sequences of
   G = 4), rows of D = 40. */
TEST(shared_prefix_group_sizes) {
    const int sizes[] = {2, 5, 17, 32}, Gs[] = {1, 4, 8};
    const attn_dtype kvs[] = {ATTN_F32, ATTN_INT8, ATTN_INT4};
    int fails = 0, lens[32], leader[32], shared[32];
    attn_isa isas[ATTN_ISA_COUNT];
    int n_isa = tu_isas(isas);
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 3; j++) {
                tsp_case t;
                if (k && (i != k - 1 || j != 3 - k)) continue;
                t.c = td_base();
                t.c.Hk = 2; t.c.H = 2 * Gs[j]; t.c.D = k ? 40 : 32; t.c.f32_out = 1;
                t.c.kv_dt = kvs[k];
                t.c.num_seqs = sizes[i]; t.c.lens = lens;
                for (int s = 0; s < sizes[i]; s++) {
                    lens[s] = 1536 + 1 + 13 * s;
                    leader[s] = 0; shared[s] = s ? 1536 : 0;
                }
                t.leader = leader; t.shared = shared;
                fails += tsp_check_on(&t, 6000 + (uint64_t)(k * 20 + i * 3 + j), isas, n_isa);
            }
    CHECK_EQ_INT(fails, 0);
}

/* Sixteen and thirty-two heads a KV head: decode's logits and values on tiles where ATTN_ISA_AMX
   runs (bf16 queries), the stacks of 4 and 2 sequences. */
TEST(shared_prefix_wide_groups) {
    static const int lens[5] = {1100, 1030, 1090, 1300, 1024};
    static const int leader[5] = {0, 0, 0, 0, 0}, shared[5] = {0, 1030, 1090, 1100, 1024};
    int fails = 0;
    for (int i = 0; i < 2; i++) {
        tsp_case t;
        t.c = td_base();
        t.c.Hk = 1; t.c.H = 16 << i; t.c.num_seqs = 5; t.c.lens = lens;
        t.c.kv_dt = t.c.act_dt = ATTN_BF16; t.c.f32_out = 1; t.c.atol = 4e-3;
        t.leader = leader; t.shared = shared;
        fails += tsp_check(&t, 6100 + (uint64_t)i);
    }
    CHECK_EQ_INT(fails, 0);
}

/* ALiBi (each member's distances its own), soft cap, sinks; a sliding window that leaves
   partition 0 out for every sequence and partition 1 whole for some (stacked) and in part for
   another (its own pass). Over f32 caches, and (v = 5, 6: ALiBi alone; all four) int8 and int4
   ones. */
TEST(shared_prefix_window_alibi_cap_sinks) {
    static const int lens[5] = {1400, 1450, 1405, 1410, 700};
    static const int leader[5] = {0, 0, 0, 0, 4}, shared[5] = {0, 1400, 1400, 1100, 0};
    int fails = 0;
    for (int u = 0; u < 7; u++) {
        int v = u == 5 ? 0 : u == 6 ? 4 : u;
        tsp_case t;
        t.c = td_base();
        if (u >= 5) t.c.kv_dt = u == 5 ? ATTN_INT8 : ATTN_INT4;
        t.c.num_seqs = 5; t.c.lens = lens; t.c.f32_out = 1;
        t.c.alibi = v == 0 || v == 4;
        t.c.cap = v == 1 || v == 4 ? 30.0f : 0.0f;
        t.c.sinks = v == 2 || v == 4;
        t.c.window = v >= 3 ? 900 : 0;
        t.leader = leader; t.shared = shared;
        fails += tsp_check(&t, 6200 + (uint64_t)u);
    }
    CHECK_EQ_INT(fails, 0);
}

/* attn_forward's decodes share too: a decode-only step over the shared tables gives the bits of
   attn_paged_decode over the sequences' own blocks, on 1 and 2 threads; over a cache of dtype
   kv, rows of D elements. */
static int tsp_forward(attn_dtype kv, int D, uint64_t seed) {
    static const int lens[4] = {1300, 1250, 1030, 700};
    static const int leader[4] = {0, 0, 0, 3}, shared[4] = {0, 1100, 1024, 0};
    tsp_case t;
    td_data d;
    attn_layer layer;
    attn_metadata md;
    int fails = 0;
    t.c = td_base();
    t.c.num_seqs = 4; t.c.lens = lens; t.c.f32_out = 1; t.c.kv_dt = kv; t.c.D = D;
    t.leader = leader; t.shared = shared;
    td_make(&t.c, seed, &d);
    for (int s = 0; s < 4; s++)
        if (leader[s] != s) tsp_copy_rows(&t.c, &d, s, leader[s], shared[s]);
    int32_t *tab = tsp_shared_tables(&t, &d);
    size_t n_out = (size_t)4 * t.c.H * t.c.D;
    float *own = (float *)tu_alloc(n_out * 4), *fwd = (float *)tu_alloc(n_out * 4);
    if (attn_layer_init(&layer, &d.p, ATTN_DECODER, ATTN_BACKEND_SDPA) != ATTN_OK) fails++;
    /* the new tokens' K/V rows: the values their slots hold already, dequantized (exact for
       an f32 cache; an integer cache may quantise them to other codes: the decode over the own
       blocks runs after the forward, and reads what it wrote - the new tokens' blocks are their
       own in both tables) */
    size_t kv_row = (size_t)t.c.Hk * t.c.D;
    float *k = (float *)tu_alloc(4 * kv_row * 4), *v = (float *)tu_alloc(4 * kv_row * 4);
    int64_t slots[4];
    for (int s = 0; s < 4; s++) {
        int pos = lens[s] - 1, blk = tab[s * d.max_blocks + pos / t.c.bs];
        slots[s] = (int64_t)blk * t.c.bs + pos % t.c.bs;
        for (int g = 0; g < t.c.Hk; g++) {
            size_t at = (((size_t)blk * t.c.Hk + g) * t.c.bs + pos % t.c.bs) * t.c.D;
            memcpy(k + s * kv_row + (size_t)g * t.c.D, d.kf + at, sizeof(float) * t.c.D);
            memcpy(v + s * kv_row + (size_t)g * t.c.D, d.vf + at, sizeof(float) * t.c.D);
        }
    }
    memset(&md, 0, sizeof md);
    md.num_decode_tokens = 4; md.seq_lens = d.lens; md.slot_mapping = slots;
    md.block_tables = tab; md.max_blocks_per_seq = d.max_blocks;
    for (int threads = 1; threads <= 2; threads++) {
        attn_exec e = tu_exec(ATTN_ISA_AUTO, threads);
        attn_rows q = {d.q, ATTN_F32, 0}, o = {fwd, ATTN_F32, 0}, rk = {k, ATTN_F32, 0},
                  rv = {v, ATTN_F32, 0};
        size_t bytes = attn_forward_workspace_size(&layer, &md, &e);
        void *ws = tu_alloc(bytes);
        int stacked = tsp_stacked(&t.c, &d, tab, &e, ATTN_PAGED_V1);
        if (attn_forward(&layer, &e, q, rk, rv, &d.cache, &md, o, ws, bytes) != ATTN_OK ||
            tsp_run(&t.c, &d, d.tables, &e, ATTN_PAGED_V1, own, NULL) != ATTN_OK ||
            memcmp(own, fwd, n_out * 4) != 0 || stacked != tsp_expected_stacked(&t) ||
            stacked == 0) {
            fails++;
            printf("  kv=%s threads=%d: forward over shared tables vs decode over own blocks "
                   "differ, or %d partitions stacked (want %d)\n", attn_dtype_name(kv), threads,
                   stacked, tsp_expected_stacked(&t));
        }
        free(ws);
    }
    free(own); free(fwd); free(tab); free(k); free(v);
    td_free(&d);
    return fails;
}

TEST(shared_prefix_in_attn_forward) {
    CHECK_EQ_INT(tsp_forward(ATTN_F32, 64, 6300), 0);
    CHECK_EQ_INT(tsp_forward(ATTN_INT8, 40, 6301), 0);
    CHECK_EQ_INT(tsp_forward(ATTN_INT4, 80, 6302), 0);
}

#define TEST_SHARED_LIST                                                                           \
    ATTN_TEST_ENTRY(shared_prefix_every_cache_dtype),                                              \
    ATTN_TEST_ENTRY(shared_prefix_group_sizes),                                                    \
    ATTN_TEST_ENTRY(shared_prefix_wide_groups),                                                    \
    ATTN_TEST_ENTRY(shared_prefix_window_alibi_cap_sinks),                                         \
    ATTN_TEST_ENTRY(shared_prefix_in_attn_forward)
