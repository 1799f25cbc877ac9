/* attn_paged_decode against the reference (K/V gathered through shuffled block tables and
   dequantized), on every ISA, 1 vs 2 threads, v1 vs v2, alone vs in a batch: all bitwise. */

typedef struct td_case {
    int H, Hk, D, bs, num_seqs;
    const int *lens;
    attn_dtype kv_dt, act_dt;
    int alibi, window, sinks;
    float cap, k_scale, v_scale;
    int f32_out;                 /* 1: f32 output whatever act_dt is (sharper checks) */
    int f32_probs;               /* exec.f32_probs */
    int zero_q;                  /* 1: queries 0 (every path's logits the same) */
    int spread;                  /* 1: each group of 32 elements of a row its own magnitude (the
                                    values times 1/4, 1, 4 or 0, by row and group) */
    double atol;                 /* 0: tu_atol of the output dtype */
} td_case;

static attn_dtype td_out_dt(const td_case *c) { return c->f32_out ? ATTN_F32 : c->act_dt; }

typedef struct td_data {
    attn_kv_cache cache;
    void *mem;
    float *kf, *vf;              /* dequantized copies of the whole cache, for the reference */
    int32_t *tables, *lens;
    int max_blocks;
    void *q; float *qf;
    double *ref_out, *ref_lse;
    float slopes[64], sinks[64];
    attn_params p;
} td_data;

static void td_store(attn_dtype dt, void *base, size_t i, float x) {
    switch (dt) {
        case ATTN_F32: ((float *)base)[i] = x; break;
        case ATTN_F16: ((uint16_t *)base)[i] = attn_f32_to_f16(x); break;
        case ATTN_BF16: ((uint16_t *)base)[i] = attn_f32_to_bf16(x); break;
        case ATTN_FP8_E4M3: ((uint8_t *)base)[i] = attn_f32_to_fp8_e4m3(x); break;
        case ATTN_FP8_E5M2: ((uint8_t *)base)[i] = attn_f32_to_fp8_e5m2(x); break;
        default:
            printf("  td_store: no encoding for dtype %d\n", (int)dt);
            exit(2);
    }
}

/* Row r (of D elements) of a cache's keys or values set to x: the element dtypes element by
   element (td_store), the integer ones as a whole row, quantised (attn_convert: one row). */
static void td_store_row(attn_dtype dt, void *base, size_t r, int D, const float *x) {
    if (attn__is_int(dt)) {
        char *row = (char *)base + r * attn_dtype_row_bytes(dt, D);
        if (attn_convert(row, dt, x, ATTN_F32, (size_t)D, 0.0f) != ATTN_OK) {
            printf("  td_store_row: attn_convert to %s failed\n", attn_dtype_name(dt));
            exit(2);
        }
        return;
    }
    for (int e = 0; e < D; e++) td_store(dt, base, r * (size_t)D + (size_t)e, x[e]);
}

/* KV slots of the cache (each of keys and values). */
static size_t td_slots(const td_case *c, const td_data *d) {
    return (size_t)d->cache.num_blocks * c->bs * c->Hk * c->D;
}
/* Rows of D elements of the cache (each of keys and values), and their bytes. */
static size_t td_rows(const td_case *c, const td_data *d) {
    return (size_t)d->cache.num_blocks * c->bs * c->Hk;
}
static size_t td_cache_bytes(const td_case *c, const td_data *d) {
    return td_rows(c, d) * attn_dtype_row_bytes(c->kv_dt, c->D);
}

static void td_reference(const td_case *c, td_data *d);

/* Builds a cache whose every unused slot holds NaN, sequences on shuffled blocks, queries, and
   the reference outputs. */
static void td_make(const td_case *c, uint64_t seed, td_data *d) {
    uint64_t rng = seed;
    int s, b;
    memset(d, 0, sizeof *d);
    d->max_blocks = 1;
    int total_blocks = 1;
    for (s = 0; s < c->num_seqs; s++) {
        int nb = (c->lens[s] + c->bs - 1) / c->bs;
        d->max_blocks = nb > d->max_blocks ? nb : d->max_blocks;
        total_blocks += nb;
    }
    d->max_blocks += 2;  /* padding entries (0) past each sequence's blocks are never read */
    size_t bytes = attn_kv_cache_bytes(total_blocks, c->bs, c->Hk, c->D, c->kv_dt);
    d->mem = tu_alloc(bytes);
    if (attn_kv_cache_init(&d->cache, total_blocks, c->bs, c->Hk, c->D, c->kv_dt,
                           c->k_scale, c->v_scale, d->mem, bytes) != ATTN_OK) {
        printf("  kv cache init failed\n");
        exit(2);
    }
    size_t slots = td_slots(c, d), rows = td_rows(c, d);
    float *kx = (float *)tu_alloc((size_t)c->D * 4), *vx = (float *)tu_alloc((size_t)c->D * 4);
    d->kf = (float *)tu_alloc(slots * 4);
    d->vf = (float *)tu_alloc(slots * 4);
    for (int e = 0; e < c->D; e++) kx[e] = NAN;
    for (size_t r = 0; r < rows; r++) {  /* NaN everywhere first: only written slots are valid
                                            (an integer row of NaN has scale NaN: reads NaN) */
        td_store_row(c->kv_dt, d->cache.key, r, c->D, kx);
        td_store_row(c->kv_dt, d->cache.value, r, c->D, kx);
    }
    if (!isnan(ref_row_element(d->cache.key, c->kv_dt, c->D, slots - 1))) {
        printf("  td_make: a poisoned %s slot reads as a number\n", attn_dtype_name(c->kv_dt));
        exit(2);
    }
    int *perm = (int *)tu_alloc(sizeof(int) * (size_t)total_blocks);
    for (b = 0; b < total_blocks; b++) perm[b] = b;
    for (b = total_blocks - 1; b > 0; b--) {
        int j = attn_test_rand_int(&rng, 0, b), t = perm[b];
        perm[b] = perm[j]; perm[j] = t;
    }
    d->tables = (int32_t *)tu_alloc(sizeof(int32_t) * (size_t)(c->num_seqs * d->max_blocks + 1));
    d->lens = (int32_t *)tu_alloc(sizeof(int32_t) * (size_t)(c->num_seqs + 1));
    memset(d->tables, 0, sizeof(int32_t) * (size_t)(c->num_seqs * d->max_blocks + 1));
    int next = 0;
    for (s = 0; s < c->num_seqs; s++) {
        d->lens[s] = c->lens[s];
        for (int pos = 0; pos < c->lens[s]; pos++) {
            if (pos % c->bs == 0) d->tables[s * d->max_blocks + pos / c->bs] = perm[next++];
            int blk = d->tables[s * d->max_blocks + pos / c->bs];
            for (int g = 0; g < c->Hk; g++) {
                size_t r = ((size_t)blk * c->Hk + g) * c->bs + pos % c->bs;
                for (int e = 0; e < c->D; e++) {
                    kx[e] = attn_test_rand_uniform(&rng, -1.5f, 1.5f) / c->k_scale;
                    vx[e] = attn_test_rand_uniform(&rng, -1.0f, 1.0f) / c->v_scale;
                    if (c->spread) {
                        static const float mag[4] = {0.25f, 1.0f, 4.0f, 0.0f};
                        kx[e] *= mag[(r + (size_t)e / 32) % 4];
                        vx[e] *= mag[(r + (size_t)e / 32 + 1) % 4];
                    }
                }
                td_store_row(c->kv_dt, d->cache.key, r, c->D, kx);
                td_store_row(c->kv_dt, d->cache.value, r, c->D, vx);
            }
        }
    }
    for (size_t i = 0; i < slots; i++) {  /* what the cache holds, dequantized */
        d->kf[i] = ref_row_element(d->cache.key, c->kv_dt, c->D, i) * c->k_scale;
        d->vf[i] = ref_row_element(d->cache.value, c->kv_dt, c->D, i) * c->v_scale;
    }
    free(perm); free(kx); free(vx);
    size_t nq = (size_t)c->num_seqs * c->H * c->D + 1;
    d->q = tu_alloc(nq * 4); d->qf = (float *)tu_alloc(nq * 4);
    tu_fill(&rng, c->act_dt, d->q, d->qf, nq, -1.5f, 1.5f);
    if (c->zero_q) { memset(d->q, 0, nq * attn_dtype_size(c->act_dt)); memset(d->qf, 0, nq * 4); }
    attn_alibi_slopes(c->H, d->slopes);
    for (int h = 0; h < c->H; h++) d->sinks[h] = attn_test_rand_uniform(&rng, -2.0f, 2.0f);
    d->p.num_heads = c->H; d->p.num_kv_heads = c->Hk; d->p.head_size = c->D;
    d->p.sliding_window = c->window; d->p.logits_soft_cap = c->cap;
    d->p.alibi_slopes = c->alibi ? d->slopes : NULL; d->p.sinks = c->sinks ? d->sinks : NULL;
    d->ref_out = (double *)tu_alloc(nq * sizeof(double));
    d->ref_lse = (double *)tu_alloc(((size_t)c->num_seqs * c->H + 1) * sizeof(double));
    td_reference(c, d);
}

/* The reference outputs of the case's sequences over the cache as their tables read it. */
static void td_reference(const td_case *c, td_data *d) {
    for (int s = 0; s < c->num_seqs; s++) {
        int L = c->lens[s];
        size_t row = (size_t)c->Hk * c->D;
        float *k = (float *)tu_alloc(((size_t)L * row + 1) * 4),
               *v = (float *)tu_alloc(((size_t)L * row + 1) * 4);
        ref_gather_paged(d->kf, c->bs, c->Hk, c->D, d->tables + s * d->max_blocks, L, k);
        ref_gather_paged(d->vf, c->bs, c->Hk, c->D, d->tables + s * d->max_blocks, L, v);
        ref_attention(&d->p, 1, 1, L, d->qf + (size_t)s * c->H * c->D, 0, k, 0, v, 0,
                      d->ref_out + (size_t)s * c->H * c->D, d->ref_lse + (size_t)s * c->H);
        free(k); free(v);
    }
}

/* Values made a copy of the keys, for runs with the two as one buffer. */
static void td_values_equal_keys(const td_case *c, td_data *d) {
    memcpy(d->cache.value, d->cache.key, td_cache_bytes(c, d));
}

static void td_free(td_data *d) {
    free(d->mem); free(d->kf); free(d->vf); free(d->tables); free(d->lens);
    free(d->q); free(d->qf); free(d->ref_out); free(d->ref_lse);
}

static attn_status td_run(const td_case *c, td_data *d, const attn_exec *e, attn_paged_version ver,
                          void *out, float *lse) {
    attn_rows q = {d->q, c->act_dt, 0}, o = {out, td_out_dt(c), 0};
    size_t bytes = attn_paged_decode_workspace_size(&d->p, e, &d->cache, d->lens, c->num_seqs, ver);
    void *ws = tu_alloc(bytes);
    attn_status st = attn_paged_decode(&d->p, e, q, o, &d->cache, d->tables, d->max_blocks, d->lens,
                                       c->num_seqs, ver, lse, ws, bytes);
    free(ws);
    return st;
}

/* The case on each of the n_isa ISAs isas. */
static int td_check_on(const td_case *c, uint64_t seed, const attn_isa *isas, int n_isa) {
    td_data d;
    int fails = 0;
    td_make(c, seed, &d);
    attn_dtype out_dt = td_out_dt(c);
    size_t n_out = (size_t)c->num_seqs * c->H * c->D, esz = attn_dtype_size(out_dt);
    size_t n_lse = (size_t)c->num_seqs * c->H;
    char *o1 = (char *)tu_alloc(n_out * esz + 1), *o2 = (char *)tu_alloc(n_out * esz + 1);
    char *o3 = (char *)tu_alloc(n_out * esz + 1);
    float *l1 = (float *)tu_alloc(n_lse * 4 + 4), *l2 = (float *)tu_alloc(n_lse * 4 + 4);
    float *l3 = (float *)tu_alloc(n_lse * 4 + 4);
    double atol = c->atol > 0 ? c->atol : tu_atol(out_dt);
    for (int k = 0; k < n_isa; k++) {
        attn_exec e1 = tu_exec(isas[k], 1), e2 = tu_exec(isas[k], 2);
        int bad = 0, bad_lse = 0;
        e1.f32_probs = e2.f32_probs = c->f32_probs;
        if (td_run(c, &d, &e1, ATTN_PAGED_V1, o1, l1) != ATTN_OK ||
            td_run(c, &d, &e2, ATTN_PAGED_V2, o2, l2) != ATTN_OK ||
            td_run(c, &d, &e2, ATTN_PAGED_AUTO, o3, l3) != ATTN_OK) { fails++; continue; }
        size_t worst = 0; double worst_err = -1;
        for (size_t i = 0; i < n_out; i++) {
            double got = ref_element(o1, out_dt, i), err = fabs(got - d.ref_out[i]);
            if (!(err <= atol + 1e-3 * fabs(d.ref_out[i]))) { bad++;
                    if (!(err <= worst_err)) { worst_err = err; worst = i; } }
        }
        for (size_t i = 0; i < n_lse; i++) {
            double w = d.ref_lse[i];
            bad_lse += isinf(w) ? !(isinf(l1[i]) && l1[i] < 0)
                : !(fabs(l1[i] - w) <= 1e-4 * (1 + fabs(w)));
        }
        int same = !memcmp(o1, o2, n_out * esz) && !memcmp(l1, l2, n_lse * 4) &&
                   !memcmp(o1, o3, n_out * esz) && !memcmp(l1, l3, n_lse * 4);
        if (bad || bad_lse || !same) {
            fails++;
            printf("  case H=%d Hk=%d D=%d bs=%d seqs=%d kv=%s act=%s alibi=%d W=%d cap=%g "
                   "sinks=%d "
                   "isa=%s: %d bad (worst [%zu] got %.7g want %.7g), %d bad lse, v1/1t vs v2/2t vs "
                   "auto %s\n", c->H, c->Hk, c->D, c->bs, c->num_seqs, attn_dtype_name(c->kv_dt),
                   attn_dtype_name(c->act_dt), c->alibi, c->window, c->cap, c->sinks,
                   attn_isa_name(isas[k]), bad, worst,
                   worst_err >= 0 ? ref_element(o1, out_dt, worst) : 0.0,
                   worst_err >= 0 ? d.ref_out[worst] : 0.0, bad_lse, same ? "equal" : "DIFFER");
        }
    }
    free(o1); free(o2); free(o3); free(l1); free(l2); free(l3);
    td_free(&d);
    return fails;
}

/* The case on every ISA this machine runs (tu_isas). */
static int td_check(const td_case *c, uint64_t seed) {
    attn_isa isas[ATTN_ISA_COUNT];
    int n_isa = tu_isas(isas);
    return td_check_on(c, seed, isas, n_isa);
}

static td_case td_base(void) {
    td_case c; memset(&c, 0, sizeof c);
    c.H = 8; c.Hk = 2; c.D = 64; c.bs = 16; c.kv_dt = ATTN_F32; c.act_dt = ATTN_F32;
    c.k_scale = c.v_scale = 1.0f;
    return c;
}

/* Every block size against lengths around blocks and partitions; over an f32 cache, and over
   int8 and int4 caches with rows of a whole and a partial group (D = 40), their longest
   sequence 2100 (five partitions) instead of 9000. */
TEST(decode_lengths_and_block_sizes) {
    const int bss[] = {1, 8, 16, 32, 128};
    const attn_dtype kvs[] = {ATTN_F32, ATTN_INT8, ATTN_INT4};
    int fails = 0;
    for (int k = 0; k < 3; k++)
        for (int b = 0; b < 5; b++) {
            int bs = bss[b];
            int lens[10] = {0, 1, bs > 1 ? bs - 1 : 2, bs, bs + 1, 511, 512, 513, 1024 + 7,
                            k ? 2100 : 9000};
            td_case c = td_base();
            c.bs = bs; c.num_seqs = 10; c.lens = lens; c.H = 4; c.Hk = 2; c.D = k ? 40 : 32;
            c.kv_dt = kvs[k];
            fails += td_check(&c, 1000 + (uint64_t)(k * 16 + b));
        }
    CHECK_EQ_INT(fails, 0);
}

/* Head sizes and G = 1, 2, 4, 8 query heads a KV head; over f32 caches, and over int8 and
   int4 ones with head sizes of whole groups of 32 and not (1, 7, 40, 80: a last group short),
   each head size with two of the ratios (1 and 4, or 2 and 8, in turn; 192 and 512 over f32
   only). */
TEST(decode_head_sizes_and_gqa_ratios) {
    const int Ds[] = {1, 8, 32, 64, 80, 96, 112, 128, 192, 256, 512, 7, 40};
    int lens[3] = {700, 33, 1}, fails = 0;
    for (int kv = 0; kv < 3; kv++)
        for (int i = 0; i < 13; i++)
            for (int hk = 8; hk >= 1; hk /= 2) {
                td_case c = td_base();
                c.H = 8; c.Hk = hk; c.D = Ds[i]; c.num_seqs = 3; c.lens = lens;
                c.kv_dt = kv == 0 ? ATTN_F32 : kv == 1 ? ATTN_INT8 : ATTN_INT4;
                if (Ds[i] >= 192 && hk != 2) continue;
                if (kv == 0 && i >= 11) continue;  /* 7 and 40: the integer caches' */
                if (kv && (Ds[i] == 192 || Ds[i] == 512)) continue;  /* keep it quick */
                if (kv && (hk == 1 || hk == 4) != (i % 2 == 0)) continue;
                fails += td_check(&c, 1100 + (uint64_t)(kv * 200 + i * 10 + hk));
            }
    CHECK_EQ_INT(fails, 0);
}

/* Windows, ALiBi, soft cap and sinks in every combination over an f32 cache; over an int8 cache
   (windows 0, 3, 600) or an int4 one (1, 16, 100000), every other combination. */
TEST(decode_every_bias_option) {
    const int windows[] = {0, 1, 3, 16, 600, 100000};
    int lens[4] = {1100, 5, 513, 0}, fails = 0;
    for (int w = 0; w < 6; w++)
        for (int opt = 0; opt < 8; opt++)
            for (int q = 0; q < 2; q++) {
                td_case c = td_base();
                c.num_seqs = 4; c.lens = lens; c.window = windows[w];
                c.alibi = opt & 1; c.cap = (opt & 2) ? 3.0f : 0.0f; c.sinks = (opt >> 2) & 1;
                if (q && (w + opt) % 2) continue;
                if (q) c.kv_dt = w % 2 ? ATTN_INT4 : ATTN_INT8;
                fails += td_check(&c, 1200 + (uint64_t)(q * 100 + w * 8 + opt));
            }
    CHECK_EQ_INT(fails, 0);
}

TEST(decode_every_kv_and_activation_dtype) {
    int lens[3] = {600, 17, 64}, fails = 0;
    for (int kv = ATTN_F32; kv <= ATTN_INT4; kv++)
        for (int act = ATTN_F32; act <= ATTN_BF16; act++) {
            td_case c = td_base();
            c.num_seqs = 3; c.lens = lens; c.kv_dt = (attn_dtype)kv; c.act_dt = (attn_dtype)act;
            c.D = 80;
            if (attn__is_fp8(c.kv_dt)) { c.k_scale = 0.01f; c.v_scale = 0.004f; }
            fails += td_check(&c, 1300 + (uint64_t)(kv * 4 + act));
        }
    CHECK_EQ_INT(fails, 0);
}

/* One, two and three query heads a KV head (MHA; Gemma 2; Llama 3.2 3B): one head runs in a
   block of one, two in two blocks of one (over fp8 with AVX-512 and NEON in one block of two,
   decoded once for both), three padded to a block of four (zero queries, whose logits nothing
   reads). Every cache dtype, head sizes of whole segments of the P.V accumulators or not (16,
   40, 80: what is left of a row runs in pairs of vectors, or as f32 copies where D is not a
   multiple of two vectors), the bias options; the int8 and int4 caches on a head size of a group
   and a part (40, through the f32 copies) and of two groups (64, in place on AVX-512 at G = 1). */
TEST(decode_one_and_two_heads_per_kv_head) {
    const int Ds[] = {16, 40, 80, 128, 256, 4, 64, 8};
    const int HHk[][2] = {{4, 4}, {8, 4}, {6, 2}, {1, 1}};  /* G = 1, 2, 3, 1 */
    int lens[4] = {1100, 33, 1, 0}, fails = 0;
    for (int kv = ATTN_F32; kv <= ATTN_INT4; kv++)
        for (int i = 0; i < 8; i++)
            for (int h = 0; h < 4; h++) {
                td_case c = td_base();
                if (i >= 4 && h >= 2) continue;  /* the added widths: G = 1 and 2 */
                if (attn__is_int((attn_dtype)kv) && Ds[i] != 40 && Ds[i] != 64) continue;
                c.H = HHk[h][0]; c.Hk = HHk[h][1]; c.D = Ds[i]; c.num_seqs = 4; c.lens = lens;
                c.kv_dt = (attn_dtype)kv; c.act_dt = (attn_dtype)((i + h) % 3);
                c.alibi = (i + h) % 2; c.window = h == 2 ? 100 : 0; c.cap = i == 2 ? 3.0f : 0.0f;
                c.sinks = h == 1;
                c.bs = i == 1 ? 3 : 16;
                if (attn__is_fp8(c.kv_dt)) { c.k_scale = 0.01f; c.v_scale = 0.004f; }
                fails += td_check(&c, 2600 + (uint64_t)(kv * 64 + i * 8 + h));
            }
    CHECK_EQ_INT(fails, 0);
}

/* Five query heads or more a KV head, block after block: over fp8 rows in blocks of eight where
   the ISA has them (AVX-512, NEON), each key and value vector decoded once for the eight, and
   the rest in fours, twos and ones (five as 4 + 1, six as 4 + 2, seven padded to eight, twelve
   as 8 + 4); otherwise, and over the other dtypes, in fours and ones (three padded to four). Head sizes that are not whole pairs of vectors (40, 48 with AVX-512) go
   through the f32 copies: checked here all the same, with every ratio. The int8 and int4
   caches on head sizes of a group and a half (40) and two and a half (80), G = 8, 16, 5, 3. */
TEST(decode_wide_head_groups) {
    const int Ds[] = {16, 32, 48, 64, 80, 128, 256, 40};
    /* G = 8, 12, 16, 8, 5, 6, 3 */
    const int HHk[][2] = {{8, 1}, {24, 2}, {32, 2}, {64, 8}, {10, 2}, {48, 8}, {24, 8}};
    const attn_dtype kvs[] = {ATTN_F16, ATTN_FP8_E4M3, ATTN_FP8_E5M2, ATTN_F32, ATTN_BF16,
                              ATTN_INT8, ATTN_INT4};
    int lens[4] = {700, 33, 1, 0}, fails = 0;
    for (int k = 0; k < 7; k++)
        for (int i = 0; i < 8; i++)
            for (int h = 0; h < 7; h++) {
                td_case c = td_base();
                /* keep the big heads quick: 256 for G = 12, and for G = 3 with f32 queries */
                if (Ds[i] == 256 && h != 1 && h != 6) continue;
                if (attn__is_int(kvs[k]) && ((Ds[i] != 80 && Ds[i] != 40) || h % 2)) continue;
                c.H = HHk[h][0]; c.Hk = HHk[h][1]; c.D = Ds[i]; c.num_seqs = 4; c.lens = lens;
                c.kv_dt = kvs[k]; c.act_dt = (attn_dtype)((i + h) % 3);
                c.alibi = i % 2; c.window = h == 1 ? 100 : 0;
                c.cap = h == 2 || h == 6 ? 3.0f : 0.0f;
                c.sinks = i % 3 == 0;
                if (attn__is_fp8(c.kv_dt)) { c.k_scale = 0.01f; c.v_scale = 0.004f; }
                fails += td_check(&c, 2000 + (uint64_t)(k * 64 + i * 8 + h));
            }
    CHECK_EQ_INT(fails, 0);
}

/* Integer rows whose groups differ: each group of 32 elements its own magnitude, 1/4, 1 or 4
   times the others', or zeros (scale 0), by row and group, keys and values apart - so a kernel
   that took one group's scale for another's, or a row's for its groups', is off the reference.
   int8 and int4; head sizes of one group, a group and a part (40, 80: the part's scale its
   own), four (128) and less than one (7); G = 1, 4, 8; block sizes 16 and 3; the bias options
   in turn. */
TEST(decode_int_groups_of_their_own_magnitudes) {
    const int Ds[] = {32, 40, 80, 128, 7};
    const int HHk[][2] = {{4, 4}, {8, 2}, {16, 2}};
    int lens[4] = {700, 33, 1, 0}, fails = 0;
    for (int kv = 0; kv < 2; kv++)
        for (int i = 0; i < 5; i++)
            for (int h = 0; h < 3; h++) {
                td_case c = td_base();
                c.H = HHk[h][0]; c.Hk = HHk[h][1]; c.D = Ds[i]; c.num_seqs = 4; c.lens = lens;
                c.kv_dt = kv ? ATTN_INT4 : ATTN_INT8; c.act_dt = (attn_dtype)((i + h) % 3);
                c.spread = 1; c.f32_out = 1; c.bs = (i + h) % 2 ? 3 : 16;
                c.alibi = h == 1; c.sinks = i % 2; c.cap = h == 2 ? 20.0f : 0.0f;
                c.window = i == 2 ? 300 : 0;
                fails += td_check(&c, 2900 + (uint64_t)(kv * 64 + i * 8 + h));
            }
    CHECK_EQ_INT(fails, 0);
}

/* A head's output does not depend on how many query heads share its KV head: each G runs as its
   own sequence of blocks of one, two, four or eight heads (attn__decode_next_block), and each
   head's sums are the same whatever its block.
   G = 1..15 against the first G query heads of each KV head of a G = 16 run (same queries, same
   cache), bitwise, outputs and lse, on every ISA, every KV dtype, two head sizes (the integer
   caches: 40 beside 64 and 128, a row's last group short). */
TEST(decode_head_outputs_do_not_depend_on_the_group_size) {
    const attn_dtype kvs[] = {ATTN_F32, ATTN_F16, ATTN_BF16, ATTN_FP8_E4M3, ATTN_FP8_E5M2,
                              ATTN_INT8, ATTN_INT4};
    const int Ds[] = {64, 128, 40}, GB = 16;
    int lens[3] = {600, 17, 1}, fails = 0;
    attn_isa isas[ATTN_ISA_COUNT];
    int n_isa = tu_isas(isas);
    for (int k = 0; k < 7; k++)
        for (int i = 0; i < 3; i++) {
            td_case c = td_base();
            td_data d;
            if (i == 2 && !attn__is_int(kvs[k])) continue;
            c.H = GB * 2; c.Hk = 2; c.D = Ds[i]; c.num_seqs = 3; c.lens = lens;
            c.kv_dt = kvs[k]; c.f32_out = 1;
            if (attn__is_fp8(c.kv_dt)) { c.k_scale = 0.01f; c.v_scale = 0.004f; }
            td_make(&c, 7100 + (uint64_t)(i < 2 ? k * 2 + i : 50 + k), &d);
            size_t row = (size_t)c.D, n_lse = (size_t)c.num_seqs * c.H, n_big = n_lse * row;
            float *big = (float *)tu_alloc(n_big * 4), *out = (float *)tu_alloc(n_big * 4);
            float *q = (float *)tu_alloc(n_big * 4), *lse_big = (float *)tu_alloc(n_lse * 4);
            float *lse = (float *)tu_alloc(n_lse * 4);
            for (int a = 0; a < n_isa; a++) {
                attn_exec e = tu_exec(isas[a], 1);
                if (td_run(&c, &d, &e, ATTN_PAGED_V2, big, lse_big) != ATTN_OK) {
                    fails++;
                    continue;
                }
                for (int G = 1; G < GB; G++) {
                    td_data dg = d;  /* the same cache; G heads a KV head, their queries q */
                    int H = G * c.Hk, bad = 0;
                    dg.p.num_heads = H;
                    dg.q = q;
                    for (int s = 0; s < c.num_seqs; s++)  /* head j of KV head g: big's g*GB+j */
                        for (int h = 0; h < H; h++)
                            memcpy(q + ((size_t)s * H + h) * row,
                                   (const float *)d.q +
                                           ((size_t)s * c.H + h / G * GB + h % G) * row,
                                   row * 4);
                    if (td_run(&c, &dg, &e, ATTN_PAGED_V2, out, lse) != ATTN_OK) bad = 1;
                    for (int s = 0; s < c.num_seqs && !bad; s++)
                        for (int h = 0; h < H; h++) {
                            size_t at = (size_t)s * H + h;
                            size_t from = (size_t)s * c.H + h / G * GB + h % G;
                            bad += memcmp(out + at * row, big + from * row, row * 4) != 0 ||
                                   memcmp(lse + at, lse_big + from, 4) != 0;
                        }
                    if (bad) {
                        fails++;
                        printf("  kv=%s D=%d isa=%s G=%d: %d heads differ from G=%d's\n",
                               attn_dtype_name(c.kv_dt), c.D, attn_isa_name(isas[a]), G, bad, GB);
                    }
                }
            }
            free(big); free(out); free(q); free(lse_big); free(lse);
            td_free(&d);
        }
    CHECK_EQ_INT(fails, 0);
}

/* bf16 queries and cache with D a multiple of 32: on a CPU with AVX-512 BF16 the avx512 runs
   take the bf16 pair kernels (made to where its dot products do not pay, tu_fast_dot). The
   output is f32 so the check is sharp: every probability is rounded to bf16 (relative error
   <= 2^-9) and |v| <= 1, so |out - ref| <= 2^-9 plus f32 rounding; the lse must stay
   f32-exact. Block sizes 1 and 3 and an odd window start pairs of
   keys at odd positions and across blocks; f32_probs = 1 runs the f32 kernels on the same
   inputs, to the f32 tolerance. */
TEST(decode_bf16_pair_kernels) {
    const int Ds[] = {32, 64, 96, 128, 192, 256, 512}, bss[] = {16, 3, 1};
    int lens[5] = {1100, 2, 0, 17, 513}, fails = 0;
    /* f32_probs = 0 takes other kernels only where the CPU has AVX-512 BF16; elsewhere both
       values run the f32 kernels, checked once at the tight tolerance */
    int pairs = tu_dot2_cpu(), cpu = tu_fast_dot(1);
    for (int i = 0; i < 7; i++)
        for (int opt = 0; opt < 6; opt++)
            for (int f32_probs = pairs ? 0 : 1; f32_probs < 2; f32_probs++) {
                td_case c = td_base();
                c.H = 8; c.Hk = opt % 3 == 0 ? 2 : opt % 3 == 1 ? 8 : 1; c.D = Ds[i];
                c.bs = bss[opt % 3]; c.num_seqs = 5; c.lens = lens;
                c.kv_dt = c.act_dt = ATTN_BF16; c.f32_out = 1; c.f32_probs = f32_probs;
                c.alibi = opt == 1 || opt == 4; c.window = opt == 2 ? 7 : opt == 5 ? 600 : 0;
                c.cap = opt == 3 ? 3.0f : 0.0f; c.sinks = opt >= 3;
                c.atol = f32_probs ? 0.0 : ldexp(1.0, -9) + 2e-5;
                if (Ds[i] >= 192 && opt % 2) continue;  /* keep the big heads quick */
                fails += td_check(&c, 1500 + (uint64_t)(i * 16 + opt * 2 + f32_probs));
            }
    tu_cpu_flags_restore(cpu);
    CHECK_EQ_INT(fails, 0);
}

/* Whether execs e1 and e2 give case c (from seed, v1, f32 outputs) different bits: 1, or 0;
   -1 when a run fails. How the tests below tell that a kernel family was taken. */
static int td_execs_differ(const td_case *c, uint64_t seed, const attn_exec *e1,
                           const attn_exec *e2) {
    td_data d;
    td_make(c, seed, &d);
    size_t n = (size_t)c->num_seqs * c->H * c->D;
    float *a = (float *)tu_alloc(n * 4), *b = (float *)tu_alloc(n * 4);
    int differ = td_run(c, &d, e1, ATTN_PAGED_V1, a, NULL) != ATTN_OK ||
                 td_run(c, &d, e2, ATTN_PAGED_V1, b, NULL) != ATTN_OK ? -1
                 : memcmp(a, b, n * 4) != 0;
    free(a); free(b);
    td_free(&d);
    return differ;
}

/* The pair kernels do run where they should: their outputs differ from the f32 kernels' in the
   last bits (the checks above hold either way, so without this a path that silently fell back
   would pass) - where the CPU's bf16 dot products outrun its FMAs (AMD). Where they do not
   (Intel) the f32 kernels run: f32_probs = 0 and 1 give the same bits. Both, on any CPU with
   AVX-512 BF16, by setting and clearing the flag (tu_fast_dot); without it neither. */
TEST(decode_bf16_pair_kernels_are_taken) {
    if (!attn_isa_supported(ATTN_ISA_AVX512)) SKIP(TU_NO_AVX512);
    int lens[2] = {700, 65};
    td_case c = td_base();
    c.num_seqs = 2; c.lens = lens; c.D = 128; c.kv_dt = c.act_dt = ATTN_BF16; c.f32_out = 1;
    attn_exec e = tu_exec(ATTN_ISA_AVX512, 1), e32 = e;
    e32.f32_probs = 1;
    for (int fast = 0; fast < 2; fast++) {
        int cpu = tu_fast_dot(fast);
        int differ = td_execs_differ(&c, 1600, &e, &e32), want = fast && tu_dot2_cpu();
        tu_cpu_flags_restore(cpu);
        REQUIRE(differ >= 0);
        CHECK_MSG(differ == want, "bf16dot=%s: f32_probs = 0 and 1 %s", fast ? "fast" : "slow",
                  differ ? "differ (pair kernels)" : "gave the same bits (f32 kernels)");
    }
}

/* bf16 queries over an fp8 cache with three or more query heads a KV head: on a CPU with
   AVX-512 BF16 and VBMI the avx512 runs take the bf16 pair kernels, the fp8 rows made bf16
   (exactly) through byte tables. The same bound as the bf16 pair kernels: probabilities rounded
   to bf16, |v| <= 1, so |out - ref| <= 2^-9 plus f32 rounding; non-unit scales (the key scale
   onto the logits, the value scale onto the outputs); G = 3, 4, 5, 8, 16 (3 and 5 padded to
   four and eight), head sizes of one to eight pairs of vectors, block sizes that pair keys
   across blocks, every option; f32_probs = 1 runs the f32 kernels to the f32 tolerance. */
TEST(decode_fp8_pair_kernels) {
    const int Ds[] = {32, 64, 96, 128, 256}, bss[] = {16, 3, 1};
    const int Hs[][2] = {{6, 2}, {8, 2}, {10, 2}, {8, 1}, {16, 1}};
    int lens[5] = {1100, 2, 0, 17, 513}, fails = 0;
    int pairs = tu_dot2_cpu() && strstr(attn_cpu_features(), "avx512vbmi=yes") != NULL;
    int cpu = tu_fast_dot(1);  /* the pair kernels on every CPU with them */
    for (int f = 0; f < 2; f++)
        for (int i = 0; i < 5; i++)
            for (int opt = 0; opt < 6; opt++)
                for (int f32_probs = pairs ? 0 : 1; f32_probs < 2; f32_probs++) {
                    td_case c = td_base();
                    c.H = Hs[(i + opt) % 5][0]; c.Hk = Hs[(i + opt) % 5][1]; c.D = Ds[i];
                    c.bs = bss[opt % 3]; c.num_seqs = 5; c.lens = lens;
                    c.kv_dt = f ? ATTN_FP8_E5M2 : ATTN_FP8_E4M3; c.act_dt = ATTN_BF16;
                    c.k_scale = 0.5f; c.v_scale = 0.25f;
                    c.f32_out = 1; c.f32_probs = f32_probs;
                    c.alibi = opt == 1 || opt == 4; c.window = opt == 2 ? 7 : opt == 5 ? 600 : 0;
                    c.cap = opt == 3 ? 3.0f : 0.0f; c.sinks = opt >= 3;
                    c.atol = f32_probs ? 0.0 : ldexp(1.0, -9) + 2e-5;
                    if (Ds[i] == 256 && opt % 2) continue;  /* keep the big heads quick */
                    fails += td_check(&c, 1800 + (uint64_t)(f * 64 + i * 12 + opt * 2 + f32_probs));
                }
    tu_cpu_flags_restore(cpu);
    CHECK_EQ_INT(fails, 0);
}

/* The fp8 pair kernels run where they should: their bits differ from the f32 kernels' (by
   f32_probs) at G = 3, 4 and 8; with one or two query heads a KV head (which the pair kernels
   would pad to four), with f16 queries, in builds without fp8 kernels (ATTN_NO_FP8_KERNELS:
   fp8 rows as f32 copies) and on a CPU whose bf16 dot products do not pay (Intel; both ways
   here, tu_fast_dot) the f32 kernels run either way: the same bits. */
TEST(decode_fp8_pair_kernels_are_taken) {
#ifdef ATTN__HAVE_E4M3_LUT
    const int compiled = 1;
#else
    const int compiled = 0;
#endif
    if (!attn_isa_supported(ATTN_ISA_AVX512)) SKIP(TU_NO_AVX512);
    if (!strstr(attn_cpu_features(), "avx512bf16=yes") ||
        !strstr(attn_cpu_features(), "avx512vbmi=yes"))
        SKIP("the CPU lacks AVX-512 BF16 or VBMI: no fp8 pair kernels to tell apart");
    const int Hs[][2] = {{6, 2}, {8, 2}, {8, 1}, {4, 4}, {4, 2}, {8, 2}};
    int lens[2] = {700, 65};
    for (int f = 0; f < 2; f++)
        for (int k = 0; k < 6; k++) {
            td_case c = td_base();
            c.num_seqs = 2; c.lens = lens; c.D = 128; c.f32_out = 1;
            c.H = Hs[k][0]; c.Hk = Hs[k][1];
            c.kv_dt = f ? ATTN_FP8_E5M2 : ATTN_FP8_E4M3;
            c.act_dt = k == 5 ? ATTN_F16 : ATTN_BF16;
            attn_exec e = tu_exec(ATTN_ISA_AVX512, 1), e32 = e;
            e32.f32_probs = 1;
            for (int fast = 0; fast < 2; fast++) {
                int cpu = tu_fast_dot(fast);
                int differ = td_execs_differ(&c, 1900 + (uint64_t)k, &e, &e32);
                int want = compiled && k < 3 && fast;
                tu_cpu_flags_restore(cpu);
                REQUIRE(differ >= 0);
                CHECK_MSG(differ == want, "%s H=%d Hk=%d q=%s bf16dot=%s: f32_probs = 0 and 1 %s",
                          attn_dtype_name(c.kv_dt), c.H, c.Hk, attn_dtype_name(c.act_dt),
                          fast ? "fast" : "slow", differ ? "differ" : "gave the same bits");
            }
        }
}

/* Every code of both fp8 formats through the pair kernels' value path, exactly: two keys of
   equal logits (keys of zeros), so each probability is 1/2 (exact in bf16) and each output is
   the value itself times the value scale - attn_fp8_*_to_f32 times the scale (equal as
   floats: -0 sums to +0), NaN for the NaN codes and inf for e5m2's infinities; and one key
   alone (p = 1, paired with a zero row). D = 256: the 256 codes of a row in an odd order. On
   every ISA and with f32_probs, which take the f32 kernels, the same; the pair kernels (and
   their byte tables) run on every CPU with AVX-512 BF16 and VBMI (tu_fast_dot). */
TEST(decode_fp8_pairs_decode_every_code_exactly) {
    int lens[2] = {2, 1}, cpu = tu_fast_dot(1);
    for (int f = 0; f < 2; f++)
        for (int f32_probs = 0; f32_probs < 2; f32_probs++) {
            td_case c = td_base();
            c.num_seqs = 2; c.lens = lens; c.D = 256; c.H = 4; c.Hk = 1; c.f32_out = 1;
            c.kv_dt = f ? ATTN_FP8_E5M2 : ATTN_FP8_E4M3; c.act_dt = ATTN_BF16;
            c.v_scale = 0.375f; c.f32_probs = f32_probs;
            td_data d;
            td_make(&c, 1950 + (uint64_t)f, &d);
            for (int s = 0; s < 2; s++)
                for (int t = 0; t < lens[s]; t++) {
                    size_t at = ((size_t)d.tables[s * d.max_blocks] * c.bs + (size_t)t) * c.D;
                    for (int e = 0; e < c.D; e++) {
                        ((uint8_t *)d.cache.key)[at + (size_t)e] = 0;
                        ((uint8_t *)d.cache.value)[at + (size_t)e] = (uint8_t)(e * 37 + 11);
                    }
                }
            size_t n = (size_t)2 * c.H * c.D;
            float *o = (float *)tu_alloc(n * 4);
            attn_isa isas[ATTN_ISA_COUNT];
            int n_isa = tu_isas(isas), bad = 0;
            for (int k = 0; k < n_isa; k++) {
                attn_exec e = tu_exec(isas[k], 2);
                e.f32_probs = f32_probs;
                REQUIRE(td_run(&c, &d, &e, ATTN_PAGED_V1, o, NULL) == ATTN_OK);
                for (size_t i = 0; i < n; i++) {
                    uint8_t code = (uint8_t)((i % (size_t)c.D) * 37 + 11);
                    float want = (f ? attn_fp8_e5m2_to_f32(code) : attn_fp8_e4m3_to_f32(code)) *
                                 c.v_scale;
                    bad += isnan(want) ? !isnan(o[i]) : !(o[i] == want);  /* -0 sums to +0 */
                }
                if (bad) printf("  %s isa=%s f32_probs=%d: %d outputs differ\n",
                                attn_dtype_name(c.kv_dt), attn_isa_name(isas[k]), f32_probs, bad);
            }
            CHECK_EQ_INT(bad, 0);
            free(o);
            td_free(&d);
        }
    tu_cpu_flags_restore(cpu);
}

/* Decode's logits on tiles (ATTN_ISA_AMX on real tiles or emulated ones) over the caches bf16
   holds exactly (bf16, fp8): bf16 queries as they are from G = 8; with ATTN_DECODE_TILES (the
   openmp configuration) f32 and f16 queries too, split in three bf16 terms, and from G = 4; the
   other cases run the vector kernels. G = 4, 8, 12, 16, 24 (one to five column tiles of five
   heads, four at a time), 1 to 8 steps of 32 dims, block sizes that give whole
   chunks read in place (16, 32) and partial ones copied (3, 1), the bias options; f16, f32, int8
   and int4 caches and G = 3 beside them take the vector kernels. f32 outputs, the vector kernels'
   tolerance, but for bf16 queries over bf16 and fp8 caches: beside real tiles (an AVX-512 BF16
   table) they take the pair kernels' value pass, so half their cases run with f32_probs (the
   f32 value pass, the tight tolerance) and half with the probabilities rounded to bf16, to the
   pair kernels' bound (decode_bf16_pair_kernels; |v| <= 1.024 here, e4m3 rounding 250 up to 256).
   Beside emulated tiles (an AVX2 table) both run the f32 value pass, but from G = 16 (here
   16 / 2, 24 / 2), where P.V runs on the tiles with the probabilities rounded to bf16
   (attn__decode_tile_values; on real tiles too). */
TEST(decode_logits_on_tiles) {
    const int Ds[] = {32, 64, 96, 128, 256}, bss[] = {16, 3, 32, 1};
    const int HHk[][2] = {{8, 2}, {16, 2}, {24, 2}, {32, 2}, {48, 2}, {4, 1}, {6, 2}};
    const attn_dtype kvs[] = {ATTN_BF16, ATTN_FP8_E4M3, ATTN_FP8_E5M2, ATTN_F16, ATTN_F32,
                              ATTN_INT8, ATTN_INT4};
    attn_isa amx = ATTN_ISA_AMX;
    int lens[4] = {1100, 33, 1, 0}, fails = 0;
    if (!attn_isa_supported(ATTN_ISA_AMX)) SKIP(TU_NO_TILES);
    for (int k = 0; k < 7; k++)
        for (int i = 0; i < 5; i++)
            for (int h = 0; h < 7; h++) {
                td_case c = td_base();
                if (k >= 3 && (i != 3 || h > 1)) continue;  /* vector kernels: two cases */
                if (Ds[i] == 256 && h != 1) continue;       /* keep the big heads quick */
                c.H = HHk[h][0]; c.Hk = HHk[h][1]; c.D = Ds[i]; c.num_seqs = 4; c.lens = lens;
                c.bs = bss[(i + h) % 4]; c.kv_dt = kvs[k]; c.act_dt = (attn_dtype)((i + h + k) % 3);
                c.alibi = h % 2; c.window = i == 2 ? 100 : 0; c.cap = h == 2 ? 3.0f : 0.0f;
                c.sinks = i % 2; c.f32_out = 1;
                if (c.act_dt == ATTN_BF16 && k < 3) {  /* bf16 or fp8 cache: pair values */
                    c.f32_probs = i % 2;
                    c.atol = c.f32_probs ? 0.0 : ldexp(1.0, -9) * 1.024 + 2e-5;
                }
                if (attn__is_fp8(c.kv_dt)) { c.k_scale = 0.01f; c.v_scale = 0.004f; }
                fails += td_check_on(&c, 2700 + (uint64_t)(k * 64 + i * 8 + h), &amx, 1);
            }
    CHECK_EQ_INT(fails, 0);
}

#ifdef ATTN__HAVE_DECODE_TILES
/* Whether ATTN_ISA_AMX gives case c (its H, dtypes, f32_probs, ALiBi and queries; 2 KV heads,
   sequences of 700 and 65 keys, D = 128, f32 outputs) other bits than the vector ISA of the same
   table: AVX-512 beside real tiles, AVX2 beside emulated ones (callers check that ATTN_ISA_AMX
   runs). 1 or 0; -1 when a run fails. */
static int td_amx_differs(td_case *c, uint64_t seed) {
    static const int lens[2] = {700, 65};
    attn_isa vec = strstr(attn_cpu_features(), "amx=yes") ? ATTN_ISA_AVX512 : ATTN_ISA_AVX2;
    c->Hk = 2; c->num_seqs = 2; c->lens = lens; c->D = 128; c->f32_out = 1;
    if (attn__is_fp8(c->kv_dt)) { c->k_scale = 0.01f; c->v_scale = 0.004f; }
    attn_exec e = tu_exec(ATTN_ISA_AMX, 1), ev = tu_exec(vec, 1);
    e.f32_probs = ev.f32_probs = c->f32_probs;
    /* the pair kernels beside the tiles run wherever the CPU has them; the vector run takes them
       too (on Intel too: tu_fast_dot), so that only the tiles' sums can tell the runs apart */
    int cpu = tu_fast_dot(1), differ = td_execs_differ(c, seed, &e, &ev);
    tu_cpu_flags_restore(cpu);
    return differ;
}
#endif

/* The logits on tiles run where they should: their logits sum in another order than the
   vector kernels' of the same table (AVX-512 beside real tiles, AVX2 beside emulated ones), so
   the outputs differ in the last bits from a run of that ISA (the checks above hold either way:
   without this a path that silently fell back would pass), and where the tiles do not run they
   are the same bits. bf16 queries over bf16 and e4m3 caches at G = 8 take them; at G = 4, and
   f32 queries, only with ATTN_DECODE_TILES; f16 caches never. */
TEST(decode_logits_on_tiles_are_taken) {
#ifdef ATTN__HAVE_DECODE_TILES
    const struct { int G; attn_dtype q, kv; int taken; } cases[] = {
        {8, ATTN_BF16, ATTN_BF16, 1}, {8, ATTN_BF16, ATTN_FP8_E4M3, 1},
        {16, ATTN_BF16, ATTN_FP8_E5M2, 1}, {4, ATTN_BF16, ATTN_BF16, ATTN__DECODE_TILES_ALL},
        {8, ATTN_F32, ATTN_BF16, ATTN__DECODE_TILES_ALL}, {8, ATTN_BF16, ATTN_F16, 0}};
    if (!attn_isa_supported(ATTN_ISA_AMX)) SKIP(TU_NO_TILES);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        td_case c = td_base();
        c.H = 2 * cases[k].G; c.kv_dt = cases[k].kv; c.act_dt = cases[k].q;
        int differ = td_amx_differs(&c, 2690 + (uint64_t)k);
        REQUIRE(differ >= 0);
        CHECK_MSG(differ == cases[k].taken, "G = %d, %s queries over %s: ATTN_ISA_AMX and the "
                  "vector ISA gave %s bits", cases[k].G, attn_dtype_name(c.act_dt),
                  attn_dtype_name(c.kv_dt), differ ? "different" : "the same");
    }
#else
    SKIP(TU_NO_DECODE_TILES);
#endif
}

/* P.V on tiles runs where it should: bf16 queries with 16 or more query heads a KV head over bf16
   and fp8 caches (exec.f32_probs 0). The queries are 0 and ALiBi on, so every path's logits
   are the same (the slope times the distance) and so are its probabilities: only where P.V runs
   on tiles do the sums of the values run in another order than the vector kernels' of the same
   table, and the bits differ; at G = 8, f32_probs = 1 and over f16 they are the same bits.
   (Without ALiBi the probabilities would all be 1 and the sums of bf16 values exact in any
   order.) */
TEST(decode_values_on_tiles_are_taken) {
#ifdef ATTN__HAVE_DECODE_TILES
    const struct { int G; attn_dtype kv; int f32_probs, taken; } cases[] = {
        {16, ATTN_BF16, 0, 1}, {16, ATTN_FP8_E4M3, 0, 1}, {32, ATTN_FP8_E5M2, 0, 1},
        {24, ATTN_BF16, 0, 1}, {8, ATTN_BF16, 0, 0}, {16, ATTN_BF16, 1, 0},
        {16, ATTN_F16, 0, 0}};
    if (!attn_isa_supported(ATTN_ISA_AMX)) SKIP(TU_NO_TILES);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        td_case c = td_base();
        c.H = 2 * cases[k].G; c.kv_dt = cases[k].kv; c.act_dt = ATTN_BF16;
        c.f32_probs = cases[k].f32_probs; c.alibi = 1; c.zero_q = 1;
        int differ = td_amx_differs(&c, 2720 + (uint64_t)k);
        REQUIRE(differ >= 0);
        CHECK_MSG(differ == cases[k].taken, "G = %d over %s, f32_probs %d: ATTN_ISA_AMX and the "
                  "vector ISA gave %s bits", cases[k].G, attn_dtype_name(c.kv_dt), c.f32_probs,
                  differ ? "different" : "the same");
    }
#else
    SKIP(TU_NO_DECODE_TILES);
#endif
}

/* As accurate as the vector kernels: the queries whose logits run on the tiles over bf16 and
   fp8 caches - bf16 queries at G = 8, and with ATTN_DECODE_TILES (the openmp configuration) f32
   queries at G = 4 and 8 too - the largest and the mean error of the f32 outputs against the
   oracle on tiles at most 1.5x (plus 2^-23, an ulp of the outputs near 1: the largest error is
   one element's, about 1e-7, and moves by an ulp with the order of the sums; bf16 queries over
   bf16 on emulated tiles, 1.74e-7 against AVX2's 1.11e-7) and 1.25x those of the same table's
   vector kernels (the products are the same; only the order of the sums differs). Both runs
   keep the probabilities in f32 (f32_probs), so that the value passes are alike.
   ATTN_TEST_SHOW_ERRORS=1 in the environment prints both. */
TEST(decode_logits_on_tiles_as_accurate_as_the_vector_kernels) {
#ifdef ATTN__HAVE_DECODE_TILES
    const attn_dtype kvs[] = {ATTN_BF16, ATTN_FP8_E4M3, ATTN_FP8_E5M2};
    const struct { attn_dtype q; int G; } qs[] = {{ATTN_BF16, 8}, {ATTN_F32, 4}, {ATTN_F32, 8}};
    const int nq = ATTN__DECODE_TILES_ALL ? 3 : 1;
    int lens[3] = {2000, 517, 64};
    if (!attn_isa_supported(ATTN_ISA_AMX)) SKIP(TU_NO_TILES);
    attn_isa vec = strstr(attn_cpu_features(), "amx=yes") ? ATTN_ISA_AVX512 : ATTN_ISA_AVX2;
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < nq; j++) {
            const int G = qs[j].G;
            td_case c = td_base();
            c.H = 2 * G; c.Hk = 2; c.D = 128; c.num_seqs = 3; c.lens = lens; c.kv_dt = kvs[k];
            c.act_dt = qs[j].q; c.f32_out = 1; c.alibi = G == 8;
            if (attn__is_fp8(c.kv_dt)) { c.k_scale = 0.01f; c.v_scale = 0.004f; }
            td_data d;
            td_make(&c, 2800 + (uint64_t)(k * 8 + G + 100 * (c.act_dt == ATTN_BF16)), &d);
            size_t n = (size_t)c.num_seqs * c.H * c.D;
            float *out = (float *)tu_alloc(n * 4);
            double worst[2] = {0, 0}, mean[2] = {0, 0};
            for (int t = 0; t < 2; t++) {
                attn_exec e = tu_exec(t ? vec : ATTN_ISA_AMX, 2);
                e.f32_probs = 1;
                REQUIRE(td_run(&c, &d, &e, ATTN_PAGED_V2, out, NULL) == ATTN_OK);
                for (size_t i = 0; i < n; i++) {
                    double err = fabs(out[i] - d.ref_out[i]);
                    worst[t] = err > worst[t] ? err : worst[t];
                    mean[t] += err / (double)n;
                }
            }
            if (getenv("ATTN_TEST_SHOW_ERRORS"))
                printf("  q=%s kv=%s G=%d: tiles max %.3g mean %.3g, %s max %.3g mean %.3g\n",
                       attn_dtype_name(c.act_dt), attn_dtype_name(c.kv_dt), G, worst[0],
                       mean[0], attn_isa_name(vec), worst[1], mean[1]);
            CHECK_MSG(worst[0] <= 1.5 * worst[1] + ldexp(1.0, -23) && mean[0] <= 1.25 * mean[1],
                      "q=%s kv=%s G=%d: tiles max %.3g mean %.3g against %.3g %.3g",
                      attn_dtype_name(c.act_dt), attn_dtype_name(c.kv_dt), G, worst[0], mean[0],
                      worst[1], mean[1]);
            free(out);
            td_free(&d);
        }
#else
    SKIP(TU_NO_DECODE_TILES);
#endif
}

/* fp8 key rows as the tiles read them (attn__decode_tile_fp8): every code of both formats as
   the bf16 of value / fold (e4m3: 256), NaN codes as NaN - through f32 in the emulated tiles'
   pass, and in one pass (f16, then vcvtne2ps2bf16) in the AVX-512 pass of real tiles, run here
   wherever the CPU has AVX-512 BF16 (no tiles needed). */
TEST(decode_tile_fp8_rows_are_exact) {
#ifdef ATTN__HAVE_DECODE_TILES
    uint8_t codes[256];
    uint16_t got[256];
    float tmp[256];
    for (int i = 0; i < 256; i++) codes[i] = (uint8_t)i;
    int fast = strstr(attn_cpu_features(), "avx512bf16=yes") != NULL, ran = 0;
    for (int f = 0; f < 2; f++)
        for (int pass = 0; pass < 2; pass++) {
            attn_dtype dt = f ? ATTN_FP8_E5M2 : ATTN_FP8_E4M3;
            int bad = 0;
            if (pass == 0) {
#if ATTN__HAVE_TILE_EMULATION
                if (!attn_isa_supported(ATTN_ISA_AVX2)) continue;
                attn__decode_tile_fp8__avx2(got, codes, dt, 256, tmp);
#else
                continue;
#endif
            } else {
#if ATTN__HAVE_AMX
                if (!fast) continue;
                attn__decode_tile_fp8__avx512(got, codes, dt, 256, tmp);
#else
                continue;
#endif
            }
            for (int i = 0; i < 256; i++) {
                float x = (f ? attn_fp8_e5m2_to_f32(codes[i]) : attn_fp8_e4m3_to_f32(codes[i])) /
                          attn__decode_tile_fold(dt);
                float y = attn_bf16_to_f32(got[i]);
                bad += isnan(x) ? !isnan(y) : got[i] != attn_f32_to_bf16(x) || y != x;
            }
            CHECK_MSG(bad == 0, "%s, %s pass: %d codes wrong", attn_dtype_name(dt),
                      pass ? "avx512" : "avx2", bad);
            ran++;
        }
    (void)tmp; (void)fast;
    if (!ran) SKIP("neither pass runs here: no AVX2 for the emulated tiles' pass, no AVX-512 "
                   "BF16 for the real tiles'");
#else
    SKIP(TU_NO_DECODE_TILES);
#endif
}

/* The query tiles (attn__decode_tile_queries, in the pass the emulated tiles run in): the three
   bf16 terms of each f32 query element sum to it exactly, over magnitudes 2^-100 to 2^100,
   largest term first, each at most half an ulp of bf16 of the one before; a bf16 query is one
   term, its own bits; the unused columns are 0. G = 7: two column tiles of five heads. */
TEST(decode_tile_queries_sum_to_the_query) {
#if defined(ATTN__HAVE_DECODE_TILES) && ATTN__HAVE_TILE_EMULATION
    enum { G = 7, D = 64, S = D / 32 };
    float q[G * D];
    uint16_t qb[G * D];
    uint32_t qt[2 * S * 256];
    uint64_t rng = 77;
    const float mul = 0.1803368801f;  /* 1/sqrt(128) log2(e): not a power of two */
    if (!attn_isa_supported(ATTN_ISA_AVX2)) SKIP(TU_NO_AVX2);
    for (int i = 0; i < G * D; i++) {
        double m = attn_test_rand_uniform(&rng, -1.0f, 1.0f);
        q[i] = (float)ldexp(m, (int)attn_test_rand_uniform(&rng, -100.0f, 100.0f));
        qb[i] = attn_f32_to_bf16(q[i]);
    }
    for (int bf = 0; bf < 2; bf++) {
        attn__decode_plan P;
        memset(&P, 0, sizeof P);
        P.G = G; P.D = D; P.q_stride = G * D;
        P.q = bf ? (const char *)qb : (const char *)q; P.q_dtype = bf ? ATTN_BF16 : ATTN_F32;
        P.tile_terms = bf ? 1 : 3; P.tile_cols = attn__decode_tile_cols(G, P.tile_terms);
        memset(qt, 0xff, sizeof qt);
        attn__decode_tile_queries__avx2(&P, 0, 0, mul, qt);
        int per_tile = 16 / P.tile_terms, bad = 0;
        for (int h = 0; h < G; h++)
            for (int d = 0; d < D; d++) {
                const uint32_t *row = qt + ((size_t)(h / per_tile) * S + d / 32) * 256 +
                                      (size_t)(d % 32 / 2) * 16;
                double sum = 0.0, prev = INFINITY;
                for (int u = 0; u < P.tile_terms; u++) {
                    uint16_t t = (uint16_t)(row[u * per_tile + h % per_tile] >> (16 * (d & 1)));
                    double x = attn_bf16_to_f32(t);
                    bad += x != 0.0 && !(fabs(x) <= ldexp(fabs(prev), -8));
                    if (x != 0.0) prev = x;
                    sum += x;
                }
                double want = bf ? attn_bf16_to_f32(qb[h * D + d]) : (double)(q[h * D + d] * mul);
                bad += sum != want;
            }
        for (size_t w = 0; w < (size_t)P.tile_cols * S * 256; w++) {
            int col = (int)(w % 16), head = (int)(w / (S * 256)) * per_tile + col % per_tile;
            bad += (col >= per_tile * P.tile_terms || head >= G) && qt[w] != 0;
        }
        CHECK_MSG(bad == 0, "%s queries: %d elements or unused columns wrong", bf ? "bf16" : "f32",
                  bad);
    }
#else
    SKIP("this build has no emulated tiles' pass (not x86-64, ATTN_NO_SIMD, ATTN_NO_AMX, or "
         "no ATTN_TILES_EMULATE)");
#endif
}

/* A sequence decoded alone equals the same sequence inside a batch of 64 (bitwise), over a
   cache of dtype kv. */
static void td_alone_equals_in_batch(attn_dtype kv, uint64_t seed) {
    int lens[64];
    uint64_t rng = 77;
    for (int i = 0; i < 64; i++) lens[i] = attn_test_rand_int(&rng, 0, 1500);
    lens[20] = 1234;
    td_case c = td_base();
    c.num_seqs = 64; c.lens = lens; c.kv_dt = kv; c.alibi = 1; c.sinks = 1;
    td_data d;
    td_make(&c, seed, &d);
    attn_isa isas[ATTN_ISA_COUNT];
    int n_isa = tu_isas_tiles(isas);  /* with ATTN_ISA_AMX: decode's logits on tiles (G = 4) */
    size_t row = (size_t)c.H * c.D;
    for (int k = 0; k < n_isa; k++) {
        attn_exec e = tu_exec(isas[k], 2);
        float *batch = (float *)tu_alloc(64 * row * 4), alone[8 * 64];
        REQUIRE(td_run(&c, &d, &e, ATTN_PAGED_V2, batch, NULL) == ATTN_OK);
        attn_rows q = {(float *)d.q + 20 * row, ATTN_F32, 0}, o = {alone, ATTN_F32, 0};
        size_t bytes =
                attn_paged_decode_workspace_size(&d.p, &e, &d.cache, d.lens + 20, 1, ATTN_PAGED_V1);
        void *ws = tu_alloc(bytes);
        CHECK_STATUS(attn_paged_decode(&d.p, &e, q, o, &d.cache, d.tables + 20 * d.max_blocks,
                                       d.max_blocks, d.lens + 20, 1, ATTN_PAGED_V1, NULL, ws,
                                       bytes), ATTN_OK);
        CHECK_BITEQ(alone, batch + 20 * row, row * 4);
        free(ws); free(batch);
    }
    td_free(&d);
}

/* over bf16 and int4 (int8 in determinism_paged_threads_pools_permutations) */
TEST(decode_alone_equals_in_batch_of_64) {
    td_alone_equals_in_batch(ATTN_BF16, 1400);
    td_alone_equals_in_batch(ATTN_INT4, 1402);
}

/* Keys and values may be one buffer (attention with V = K): the same bits as two buffers
   holding the same data. (The passes once told keys from values by their buffers' addresses,
   and went round forever when the two were one.) */
TEST(decode_keys_and_values_may_share_a_buffer) {
    const attn_dtype kvs[] = {ATTN_F16, ATTN_INT8, ATTN_INT4};  /* int: rows of D = 40 */
    int lens[3] = {1, 700, 1300};
    for (int kv = 0; kv < 3; kv++) {
        td_case c = td_base();
        c.num_seqs = 3; c.lens = lens; c.kv_dt = kvs[kv]; c.H = 8; c.Hk = 4;
        if (kv) c.D = 40;
        td_data d;
        td_make(&c, 1500 + (uint64_t)(kv ? 10 + kv : 0), &d);
        td_values_equal_keys(&c, &d);
        void *separate = d.cache.value;
        attn_isa isas[ATTN_ISA_COUNT];
        int n_isa = tu_isas(isas);
        size_t n_out = (size_t)c.num_seqs * c.H * c.D;
        float *a = (float *)tu_alloc(n_out * 4), *b = (float *)tu_alloc(n_out * 4);
        for (int k = 0; k < n_isa; k++)
            for (int t = 1; t <= 2; t++) {
                attn_exec e = tu_exec(isas[k], t);
                attn_paged_version ver = t == 1 ? ATTN_PAGED_V1 : ATTN_PAGED_V2;
                d.cache.value = separate;
                REQUIRE(td_run(&c, &d, &e, ver, a, NULL) == ATTN_OK);
                d.cache.value = d.cache.key;
                CHECK_STATUS(td_run(&c, &d, &e, ver, b, NULL), ATTN_OK);
                CHECK_MSG(!memcmp(a, b, n_out * 4), "kv=%s isa=%s threads=%d: one buffer and "
                          "two differ", attn_dtype_name(c.kv_dt), attn_isa_name(isas[k]), t);
            }
        d.cache.value = separate;
        free(a); free(b);
        td_free(&d);
    }
}

TEST(decode_version_rule_matches_vllm) {
    attn_params p; memset(&p, 0, sizeof p);
    p.num_heads = 32; p.num_kv_heads = 8; p.head_size = 128;
    int32_t l512[1] = {512}, l513[1] = {513}, l8192[16], l8193[1] = {8193};
    for (int i = 0; i < 16; i++) l8192[i] = 8192;
    CHECK_EQ_INT(attn_paged_decode_version(&p, l512, 1, ATTN_PAGED_AUTO), ATTN_PAGED_V1);
    CHECK_EQ_INT(attn_paged_decode_version(&p, l513, 1, ATTN_PAGED_AUTO), ATTN_PAGED_V2);
    /* 16*32 = 512 */
    CHECK_EQ_INT(attn_paged_decode_version(&p, l8192, 16, ATTN_PAGED_AUTO), ATTN_PAGED_V2);
    p.num_heads = 64; p.num_kv_heads = 8;
    /* 1024 > 512 */
    CHECK_EQ_INT(attn_paged_decode_version(&p, l8192, 16, ATTN_PAGED_AUTO), ATTN_PAGED_V1);
    CHECK_EQ_INT(attn_paged_decode_version(&p, l8193, 1, ATTN_PAGED_AUTO), ATTN_PAGED_V2);
    CHECK_EQ_INT(attn_paged_decode_version(&p, l513, 1, ATTN_PAGED_V1), ATTN_PAGED_V1);
}

TEST(decode_rejects_bad_input_and_writes_nothing) {
    int lens[2] = {40, 3};
    td_case c = td_base();
    c.num_seqs = 2; c.lens = lens;
    td_data d;
    td_make(&c, 1500, &d);
    float out[2 * 8 * 64];
    attn_rows q = {d.q, ATTN_F32, 0}, o = {out, ATTN_F32, 0};
    size_t bytes =
            attn_paged_decode_workspace_size(&d.p, NULL, &d.cache, d.lens, 2, ATTN_PAGED_AUTO);
    void *ws = tu_alloc(bytes);
    for (int i = 0; i < 2 * 8 * 64; i++) out[i] = 5.0f;
    CHECK(bytes > 0);
    int32_t too_long[2] = {40, 16 * d.max_blocks + 1}, negative[2] = {40, -1};
    CHECK_STATUS(attn_paged_decode(&d.p, NULL, q, o, &d.cache, d.tables, d.max_blocks, too_long, 2,
                                   ATTN_PAGED_AUTO, NULL, ws, bytes), ATTN_ERR_OUT_OF_RANGE);
    CHECK_STATUS(attn_paged_decode(&d.p, NULL, q, o, &d.cache, d.tables, d.max_blocks, negative, 2,
                                   ATTN_PAGED_AUTO, NULL, ws, bytes), ATTN_ERR_INVALID_ARG);
    int32_t saved = d.tables[1];
    d.tables[1] = d.cache.num_blocks;
    CHECK_STATUS(attn_paged_decode(&d.p, NULL, q, o, &d.cache, d.tables, d.max_blocks, d.lens, 2,
                                   ATTN_PAGED_AUTO, NULL, ws, bytes), ATTN_ERR_OUT_OF_RANGE);
    d.tables[1] = -3;
    CHECK_STATUS(attn_paged_decode(&d.p, NULL, q, o, &d.cache, d.tables, d.max_blocks, d.lens, 2,
                                   ATTN_PAGED_AUTO, NULL, ws, bytes), ATTN_ERR_OUT_OF_RANGE);
    d.tables[1] = saved;
    CHECK_STATUS(attn_paged_decode(&d.p, NULL, q, o, &d.cache, d.tables, d.max_blocks, d.lens, 2,
            ATTN_PAGED_AUTO, NULL, ws, bytes - 1), ATTN_ERR_WORKSPACE_TOO_SMALL);
    CHECK_STATUS(attn_paged_decode(&d.p, NULL, q, o, NULL, d.tables, d.max_blocks, d.lens, 2,
                                   ATTN_PAGED_AUTO, NULL, ws, bytes), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_paged_decode(&d.p, NULL, q, o, &d.cache, NULL, d.max_blocks, d.lens, 2,
                                   ATTN_PAGED_AUTO, NULL, ws, bytes), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_paged_decode(&d.p, NULL, q, o, &d.cache, d.tables, d.max_blocks, d.lens, 2,
                                   (attn_paged_version)7, NULL, ws, bytes), ATTN_ERR_INVALID_ARG);
    attn_params wrong = d.p; wrong.head_size = 32;
    CHECK_STATUS(attn_paged_decode(&wrong, NULL, q, o, &d.cache, d.tables, d.max_blocks, d.lens, 2,
                                   ATTN_PAGED_AUTO, NULL, ws, bytes), ATTN_ERR_INVALID_ARG);
    wrong = d.p; wrong.num_kv_heads = 4;
    CHECK_STATUS(attn_paged_decode(&wrong, NULL, q, o, &d.cache, d.tables, d.max_blocks, d.lens, 2,
                                   ATTN_PAGED_AUTO, NULL, ws, bytes), ATTN_ERR_INVALID_ARG);
    for (int i = 0; i < 2 * 8 * 64; i++) CHECK_NEAR(out[i], 5.0, 0.0);
    free(ws);
    td_free(&d);
}

/* e4m3 NaN codes in the rows: a chunk with one is decoded with the NaN fix, the chunks without
   one skip it (AVX2). A NaN code (0xff) in a value row makes that output dimension NaN for the
   heads of its KV head and nothing else; a NaN code (0x7f) in a key row must give the same
   outputs on every ISA as on the scalar one, which never skips the fix (decoded as a finite
   code it would be 480 times the scale, a logit far above the others). The other heads of both
   sequences match the reference; every ISA, v1 and v2, 1 and 2 threads, G = 1 and 4. */
TEST(decode_e4m3_nan_codes_take_the_exact_decode) {
    int lens[2] = {100, 40}, fails = 0;
    for (int gi = 0; gi < 2; gi++) {
        td_case c = td_base();
        td_data d;
        attn_isa isas[ATTN_ISA_COUNT];
        int n_isa = tu_isas(isas), G = gi ? 4 : 1;
        c.H = 2 * G; c.Hk = 2; c.D = 64; c.num_seqs = 2; c.lens = lens;
        c.kv_dt = ATTN_FP8_E4M3; c.act_dt = ATTN_F32; c.k_scale = 0.01f; c.v_scale = 0.004f;
        td_make(&c, 4100 + (uint64_t)gi, &d);
        int32_t k_blk = d.tables[37 / c.bs], v_blk = d.tables[d.max_blocks + 3 / c.bs];
        ((uint8_t *)d.cache.key)[(((size_t)k_blk * 2 + 1) * c.bs + 37 % c.bs) * c.D + 5] = 0x7f;
        ((uint8_t *)d.cache.value)[(((size_t)v_blk * 2 + 0) * c.bs + 3 % c.bs) * c.D + 9] = 0xff;
        float out[2 * 8 * 64], first[2 * 8 * 64], lse[2 * 8];
        for (int k = 0; k < n_isa; k++)
            for (int run = 0; run < 2; run++) {
                attn_exec e = tu_exec(isas[k], run + 1);
                int bad = 0;
                attn_status st = td_run(&c, &d, &e, run ? ATTN_PAGED_V2 : ATTN_PAGED_V1, out, lse);
                if (st != ATTN_OK) { fails++; continue; }
                if (k == 0 && run == 0) memcpy(first, out, sizeof out);  /* scalar */
                for (int s = 0; s < 2; s++)
                    for (int h = 0; h < c.H; h++)
                        for (int e2 = 0; e2 < c.D; e2++) {
                            size_t i = ((size_t)s * c.H + h) * c.D + e2;
                            double want = d.ref_out[i];
                            if (s == 1 && h / G == 0 && e2 == 9) {
                                bad += !isnan(out[i]);
                                continue;
                            }
                            if (s == 0 && h / G == 1) want = first[i];
                            bad += !(fabs(out[i] - want) <= 2e-5 + 1e-3 * fabs(want));
                        }
                if (bad) printf("  G=%d isa=%s run %d: %d outputs wrong\n", G,
                                attn_isa_name(isas[k]), run, bad);
                fails += bad != 0;
            }
        td_free(&d);
    }
    CHECK_EQ_INT(fails, 0);
}

/* The vector fp8 decoders (used by the decode kernel in registers and by to_f32) give the bits
   of the scalar decoders for all 256 codes of both formats, NaNs and subnormals included, on
   every ISA; with a scale, each element is the scalar decode times the scale. */
TEST(decode_vector_fp8_matches_scalar_all_codes) {
    attn_isa isas[ATTN_ISA_COUNT];
    int n_isa = tu_isas(isas);
    uint8_t codes[256 + 3];
    float got[256 + 3];
    for (int c = 0; c < 256 + 3; c++) codes[c] = (uint8_t)(c * 37 + 11); /* every code, odd order */
    for (int k = 0; k < n_isa; k++)
        for (int dt = ATTN_FP8_E4M3; dt <= ATTN_FP8_E5M2; dt++)
            for (int sc = 0; sc < 2; sc++) {
                float scale = sc ? 0.375f : 1.0f;
                int bad = 0;
                attn__kernels_for(isas[k])->to_f32(got, codes, (attn_dtype)dt, 256 + 3, scale);
                for (int c = 0; c < 256 + 3; c++) {
                    float want = (dt == ATTN_FP8_E4M3 ? attn_fp8_e4m3_to_f32(codes[c])
                                                      : attn_fp8_e5m2_to_f32(codes[c])) * scale;
                    if (memcmp(&got[c], &want, 4) != 0) bad++;
                }
                if (bad) printf("  isa=%s %s scale %g: %d codes differ\n", attn_isa_name(isas[k]),
                                attn_dtype_name((attn_dtype)dt), scale, bad);
                CHECK_EQ_INT(bad, 0);
            }
}

#define TEST_DECODE_LIST                                                                          \
    ATTN_TEST_ENTRY(decode_vector_fp8_matches_scalar_all_codes),                                   \
    ATTN_TEST_ENTRY(decode_lengths_and_block_sizes),                                               \
    ATTN_TEST_ENTRY(decode_head_sizes_and_gqa_ratios),                                             \
    ATTN_TEST_ENTRY(decode_every_bias_option),                                                     \
    ATTN_TEST_ENTRY(decode_every_kv_and_activation_dtype),                                         \
    ATTN_TEST_ENTRY(decode_one_and_two_heads_per_kv_head),                                         \
    ATTN_TEST_ENTRY(decode_wide_head_groups),                                                      \
    ATTN_TEST_ENTRY(decode_int_groups_of_their_own_magnitudes),                                    \
    ATTN_TEST_ENTRY(decode_head_outputs_do_not_depend_on_the_group_size),                          \
    ATTN_TEST_ENTRY(decode_bf16_pair_kernels),                                                     \
    ATTN_TEST_ENTRY(decode_bf16_pair_kernels_are_taken),                                           \
    ATTN_TEST_ENTRY(decode_fp8_pair_kernels),                                                      \
    ATTN_TEST_ENTRY(decode_fp8_pair_kernels_are_taken),                                            \
    ATTN_TEST_ENTRY(decode_fp8_pairs_decode_every_code_exactly),                                   \
    ATTN_TEST_ENTRY(decode_logits_on_tiles),                                                       \
    ATTN_TEST_ENTRY(decode_logits_on_tiles_are_taken),                                             \
    ATTN_TEST_ENTRY(decode_values_on_tiles_are_taken),                                             \
    ATTN_TEST_ENTRY(decode_logits_on_tiles_as_accurate_as_the_vector_kernels),                     \
    ATTN_TEST_ENTRY(decode_tile_queries_sum_to_the_query),                                         \
    ATTN_TEST_ENTRY(decode_tile_fp8_rows_are_exact),                                               \
    ATTN_TEST_ENTRY(decode_e4m3_nan_codes_take_the_exact_decode),                                  \
    ATTN_TEST_ENTRY(decode_alone_equals_in_batch_of_64),                                           \
    ATTN_TEST_ENTRY(decode_keys_and_values_may_share_a_buffer),                                    \
    ATTN_TEST_ENTRY(decode_version_rule_matches_vllm),                                             \
    ATTN_TEST_ENTRY(decode_rejects_bad_input_and_writes_nothing)
