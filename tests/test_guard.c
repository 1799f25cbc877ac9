/* Guard pages: every buffer a call reads or writes (activations, outputs, lse, offsets, lengths,
   block tables, slots, both cache arrays, the workspace) is copied next to an inaccessible page:
   its last byte right before one (placement 0), then its first byte right after one (placement
   1). A read or write past either end of any of them stops the run with SIGSEGV. The calls run
   on every ISA this machine has, every activation and cache dtype, and head sizes and lengths
   that are not multiples of the vector width or of the key tile, and must give the bits of the
   same call on malloc'd memory. Without mmap (not POSIX) the tests are skipped. */

#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#include <unistd.h>
#define TG_GUARD 1
#else
#define TG_GUARD 0
#endif

enum { TG_MAX_BUFS = 24 };

/* One call's buffers: the malloc'd originals and, per placement, guarded copies. */
typedef struct tg_set {
    int n, placement;
    void *orig[TG_MAX_BUFS], *guarded[TG_MAX_BUFS], *map[TG_MAX_BUFS];
    size_t bytes[TG_MAX_BUFS], map_bytes[TG_MAX_BUFS];
} tg_set;

static long tg_calls;  /* guarded calls made, for the report line */

/* Registers a malloc'd buffer of `bytes` (its contents are the call's input); returns its index. */
static int tg_add(tg_set *s, void *p, size_t bytes) {
    s->orig[s->n] = p;
    s->bytes[s->n] = bytes;
    return s->n++;
}

#if TG_GUARD
/* Copies buffer i between two inaccessible pages, flush against the one after (placement 0) or
   the one before (placement 1). */
static void *tg_place(tg_set *s, int i) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE), data = (s->bytes[i] + page - 1) / page * page;
    size_t total = data + 2 * page;
    char *m = (char *)mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == (char *)MAP_FAILED) { printf("  mmap failed\n"); exit(2); }
    if (mprotect(m, page, PROT_NONE) || mprotect(m + page + data, page, PROT_NONE)) {
        printf("  mprotect failed\n");
        exit(2);
    }
    char *p = s->placement == 0 ? m + page + data - s->bytes[i] : m + page;
    if (s->orig[i]) memcpy(p, s->orig[i], s->bytes[i]);
    s->map[i] = m;
    s->map_bytes[i] = total;
    s->guarded[i] = p;
    return p;
}
static void tg_unmap(tg_set *s) {
    for (int i = 0; i < s->n; i++) munmap(s->map[i], s->map_bytes[i]);
}
#else
static void *tg_place(tg_set *s, int i) { return s->guarded[i] = s->orig[i]; }
static void tg_unmap(tg_set *s) { (void)s; }
#endif

/* Places every buffer for `placement`. */
static void tg_place_all(tg_set *s, int placement) {
    s->placement = placement;
    for (int i = 0; i < s->n; i++) tg_place(s, i);
}
/* Frees the set's malloc'd originals (the guarded copies are unmapped by tg_unmap). */
static void tg_free(tg_set *s) {
    for (int i = 0; i < s->n; i++) free(s->orig[i]);
}
#define TG(s, i, type) ((type)(s)->guarded[i])

/* The bytes of buffer i after the guarded call equal `want` (the malloc'd call's result). */
static int tg_same(const tg_set *s, int i, const void *want, const char *what) {
    if (!memcmp(s->guarded[i], want, s->bytes[i])) return 1;
    printf("  guard placement %d: %s differs from the malloc'd call\n", s->placement, what);
    return 0;
}

static void tg_fill(uint64_t *rng, attn_dtype dt, void *raw, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) td_store(dt, raw, i, attn_test_rand_uniform(rng, lo, hi));
}
/* rows cache rows of D elements in dtype kv (integer rows too: their groups' scales inside), with
   values in [-1, 1] / sc. */
static void tg_fill_cache(uint64_t *rng, attn_dtype kv, int D, size_t rows, void *raw, float sc) {
    if (!attn__is_int(kv)) {
        for (size_t i = 0; i < rows * (size_t)D; i++)
            td_store(kv, raw, i, attn_test_rand_uniform(rng, -1, 1) / sc);
        return;
    }
    float x[ATTN_MAX_HEAD_SIZE];
    size_t rb = ref_row_bytes(kv, (size_t)D);
    for (size_t r = 0; r < rows; r++) {
        for (int d = 0; d < D; d++) x[d] = attn_test_rand_uniform(rng, -1, 1);
        ref_int_row_quantize((char *)raw + r * rb, kv, x, (size_t)D);
    }
}
static void *tg_dup(const void *p, size_t bytes) {
    void *q = tu_alloc(bytes); memcpy(q, p, bytes); return q;
}

/* ---- attn_sdpa --------------------------------------------------------------------------- */
static int tg_sdpa(attn_isa isa, attn_gemm gemm, attn_dtype act, attn_dtype out_dt, int H, int Hk,
                   int D,
                   int Lq0, int Lk0, uint64_t seed) {
    uint64_t rng = seed;
    int32_t cu_q[3] = {0, Lq0, Lq0 + 3}, cu_k[3] = {0, Lk0, Lk0 + 5};
    size_t Tq = (size_t)cu_q[2], Tk = (size_t)cu_k[2], esz = attn_dtype_size(act),
           osz = attn_dtype_size(out_dt);
    size_t nq = Tq * H * D, nk = Tk * Hk * D;
    attn_params p; memset(&p, 0, sizeof p);
    p.num_heads = H; p.num_kv_heads = Hk; p.head_size = D; p.sliding_window = Lk0 / 2 + 1;
    attn_exec e = tu_exec(isa, 2);
    e.gemm = gemm;
    tg_set s; memset(&s, 0, sizeof s);
    int iq = tg_add(&s, tu_alloc(nq * esz), nq * esz),
        ik = tg_add(&s, tu_alloc(nk * esz), nk * esz);
    int iv = tg_add(&s, tu_alloc(nk * esz), nk * esz),
        io = tg_add(&s, tu_alloc(nq * osz), nq * osz);
    int il = tg_add(&s, tu_alloc(Tq * H * 4), Tq * H * 4);
    int icq = tg_add(&s, tg_dup(cu_q, sizeof cu_q), sizeof cu_q),
        ick = tg_add(&s, tg_dup(cu_k, sizeof cu_k), sizeof cu_k);
    size_t wsb = attn_sdpa_workspace_size(&p, &e, cu_q, cu_k, 2);
    int iw = tg_add(&s, NULL, wsb);
    tg_fill(&rng, act, s.orig[iq], nq, -1, 1);
    tg_fill(&rng, act, s.orig[ik], nk, -1, 1);
    tg_fill(&rng, act, s.orig[iv], nk, -1, 1);
    memset(s.orig[io], 0x7f, nq * osz);
    void *ws = tu_alloc(wsb), *want = tu_alloc(nq * osz), *want_lse = tu_alloc(Tq * H * 4);
    attn_rows rq = {s.orig[iq], act, 0}, rk = {s.orig[ik], act, 0}, rv = {s.orig[iv], act, 0},
              ro = {want, out_dt, 0};
    int fails =
            attn_sdpa(&p, &e, rq, rk, rv, ro, cu_q, cu_k, 2, 1, (float *)want_lse, ws, wsb) !=
                    ATTN_OK;
    for (int pl = 0; pl < 2 && !fails; pl++) {
        tg_place_all(&s, pl);
        attn_rows gq = {s.guarded[iq], act, 0}, gk = {s.guarded[ik], act, 0},
                  gv = {s.guarded[iv], act, 0};
        attn_rows go = {s.guarded[io], out_dt, 0};
        fails +=
                attn_sdpa(&p, &e, gq, gk, gv, go, TG(&s, icq, int32_t *), TG(&s, ick, int32_t *), 2,
                          1,
                           TG(&s, il, float *), s.guarded[iw], wsb) != ATTN_OK;
        fails += !tg_same(&s, io, want, "sdpa out") + !tg_same(&s, il, want_lse, "sdpa lse");
        tg_calls++;
        tg_unmap(&s);
    }
    if (fails)
        printf("  sdpa isa=%s gemm=%s act=%s out=%s H=%d Hk=%d D=%d Lq=%d Lk=%d\n",
               attn_isa_name(isa), tu_gemm_name(gemm), attn_dtype_name(act),
               attn_dtype_name(out_dt), H, Hk, D, Lq0, Lk0);
    tg_free(&s);
    free(ws); free(want); free(want_lse);
    return fails;
}

TEST(guard_pages_sdpa) {
    if (!TG_GUARD) SKIP("no mmap");
    attn_isa isas[ATTN_ISA_COUNT];
    attn_gemm gemms[2];
    int n_isa = tu_isas_tiles(isas), n_gemm = tu_gemms(gemms), fails = 0;
    static const int Ds[] = {5, 24, 40, 64};
    for (int k = 0; k < n_isa; k++)
        for (int g = 0; g < n_gemm; g++)
            for (int a = ATTN_F32; a <= ATTN_BF16; a++)
                for (int d = 0; d < 4; d++) {
                    attn_dtype act = (attn_dtype)a, out = d == 1 ? ATTN_F32 : act;
                    fails +=
                            tg_sdpa(isas[k], gemms[g], act, out, d == 3 ? 8 : 4, d == 3 ? 1 : 2,
                                    Ds[d],
                                     11 + d, 70 + d,
                                     4000 + (uint64_t)(k * 64 + g * 16 + a * 4 + d));
                }
    CHECK_EQ_INT(fails, 0);
}

/* ---- the paged kernels ------------------------------------------------------------------- */
/* A cache whose sequences use the blocks at both ends of the arrays (the first and the last),
   read by attn_paged_prefill (op 0) or attn_paged_decode v1 / v2 (op 1 / 2). */
static int tg_paged(int op, attn_isa isa, attn_gemm gemm, attn_dtype kv, attn_dtype act, int H,
                    int Hk, int D,
                    int bs, const int *lens, int n, uint64_t seed) {
    uint64_t rng = seed;
    int max_blocks = 0, total = 0;
    for (int s = 0; s < n; s++) {
        int b = (lens[s] + bs - 1) / bs;
        max_blocks = b > max_blocks ? b : max_blocks;
        total += b;
    }
    int nb = total + 1;
    int32_t tables[8 * 64], seq_lens[8], qsl[9];
    memset(tables, 0, sizeof tables);
    int lo = 0, hi = nb - 1;  /* sequence s takes blocks alternately from the ends */
    for (int s = 0; s < n; s++)
        for (int b = 0; b < (lens[s] + bs - 1) / bs; b++) tables[s * max_blocks + b] = (s + b) % 2
            ? lo++ : hi--;
    qsl[0] = 0;
    for (int s = 0; s < n; s++) {
        seq_lens[s] = lens[s];
        qsl[s + 1] = qsl[s] + (op == 0 ? (lens[s] < 9 ? lens[s] : 9) : 1);
    }
    size_t rows = (size_t)nb * bs * Hk, cb = rows * ref_row_bytes(kv, (size_t)D),
           esz = attn_dtype_size(act);
    size_t Tq = (size_t)qsl[n], nq = Tq * H * D;
    float ks = attn__is_fp8(kv) ? 0.03f : 1.0f, vs = attn__is_fp8(kv) ? 0.01f : 1.0f;
    attn_params p; memset(&p, 0, sizeof p);
    p.num_heads = H; p.num_kv_heads = Hk; p.head_size = D; p.logits_soft_cap = 20.0f;
    attn_exec e = tu_exec(isa, 3);
    e.gemm = gemm;
    tg_set s; memset(&s, 0, sizeof s);
    int ikc = tg_add(&s, tu_alloc(cb), cb), ivc = tg_add(&s, tu_alloc(cb), cb);
    int iq = tg_add(&s, tu_alloc(nq * esz), nq * esz),
        io = tg_add(&s, tu_alloc(nq * esz), nq * esz);
    int il = tg_add(&s, tu_alloc(Tq * H * 4), Tq * H * 4);
    int it =
            tg_add(&s, tg_dup(tables, sizeof(int32_t) * (size_t)(n * max_blocks)),
                   sizeof(int32_t) * (size_t)(n * max_blocks));
    int isl =
            tg_add(&s, tg_dup(seq_lens, sizeof(int32_t) * (size_t)n), sizeof(int32_t) * (size_t)n);
    int iqs =
            tg_add(&s, tg_dup(qsl, sizeof(int32_t) * (size_t)(n + 1)),
                   sizeof(int32_t) * (size_t)(n + 1));
    attn_kv_cache cache;
    memset(&cache, 0, sizeof cache);
    cache.key = s.orig[ikc]; cache.value = s.orig[ivc];
    cache.num_blocks = nb; cache.block_size = bs; cache.num_kv_heads = Hk; cache.head_size = D;
    cache.dtype = kv; cache.k_scale = ks; cache.v_scale = vs;
    tg_fill_cache(&rng, kv, D, rows, cache.key, ks);
    tg_fill_cache(&rng, kv, D, rows, cache.value, vs);
    tg_fill(&rng, act, s.orig[iq], nq, -1, 1);
    memset(s.orig[io], 0x7f, nq * esz);
    attn_paged_version ver = op == 1 ? ATTN_PAGED_V1 : ATTN_PAGED_V2;
    size_t wsb = op == 0 ? attn_paged_prefill_workspace_size(&p, &e, &cache, qsl, seq_lens, n)
                         : attn_paged_decode_workspace_size(&p, &e, &cache, seq_lens, n, ver);
    int iw = tg_add(&s, NULL, wsb);
    void *ws = tu_alloc(wsb), *want = tu_alloc(nq * esz), *want_lse = tu_alloc(Tq * H * 4);
    attn_rows rq = {s.orig[iq], act, 0}, ro = {want, act, 0};
    int fails =
            (op == 0
             ? attn_paged_prefill(&p, &e, rq, ro, &cache, tables, max_blocks, qsl, seq_lens, n, 1,
                                              (float *)want_lse, ws, wsb)
                         : attn_paged_decode(&p, &e, rq, ro, &cache, tables, max_blocks, seq_lens,
                                             n, ver,
                                             (float *)want_lse, ws, wsb)) != ATTN_OK;
    for (int pl = 0; pl < 2 && !fails; pl++) {
        tg_place_all(&s, pl);
        attn_kv_cache gc = cache;
        gc.key = s.guarded[ikc]; gc.value = s.guarded[ivc];
        attn_rows gq = {s.guarded[iq], act, 0}, go = {s.guarded[io], act, 0};
        const int32_t *gt = TG(&s, it, const int32_t *), *gl = TG(&s, isl, const int32_t *);
        fails +=
                (op == 0
                 ? attn_paged_prefill(&p, &e, gq, go, &gc, gt, max_blocks, TG(&s, iqs, int32_t *),
                                      gl, n, 1,
                                               TG(&s, il, float *), s.guarded[iw], wsb)
                          : attn_paged_decode(&p, &e, gq, go, &gc, gt, max_blocks, gl, n, ver,
                                              TG(&s, il, float *),
                                              s.guarded[iw], wsb)) != ATTN_OK;
        fails += !tg_same(&s, io, want, "paged out") + !tg_same(&s, il, want_lse, "paged lse");
        tg_calls++;
        tg_unmap(&s);
    }
    if (fails)
        printf("  %s isa=%s gemm=%s kv=%s act=%s H=%d Hk=%d D=%d bs=%d\n",
               op == 0 ? "prefill" : op == 1 ? "decode v1" : "decode v2", attn_isa_name(isa),
               tu_gemm_name(gemm), attn_dtype_name(kv), attn_dtype_name(act), H, Hk, D, bs);
    tg_free(&s);
    free(ws); free(want); free(want_lse);
    return fails;
}

TEST(guard_pages_paged_prefill_and_decode) {
    if (!TG_GUARD) SKIP("no mmap");
    attn_isa isas[ATTN_ISA_COUNT];
    attn_gemm gemms[2];
    int n_isa = tu_isas(isas), n_gemm = tu_gemms(gemms), fails = 0;
    /* the integer caches: head sizes of one partial group, two groups (the second of one
       element) and three (the last partial), so scales sit at odd offsets of their rows */
    static const int lens[3] = {1, 37, 530}, Ds[3] = {5, 40, 64}, Ds_int[3] = {7, 33, 80};
    for (int k = 0; k < n_isa; k++)
        for (int kv = ATTN_F32; kv < ATTN_DTYPE_COUNT; kv++)
            for (int a = ATTN_F32; a <= ATTN_BF16; a++) {
                if (a != ATTN_F32 && a != kv) continue;  /* f32 activations, and each dtype with
                                                            itself */
                for (int d = 0; d < 3; d++) {
                    /* f32 takes every head size; the other dtypes one of the two with a tail (5,
                       40), in turn: the cost stays small in the slow configurations */
                    if (kv != ATTN_F32 && d != (kv + a) % 2 &&
                        !(attn__is_int((attn_dtype)kv) && d == 2))  /* and 80 for the integers */
                        continue;
                    int H = d == 2 ? 8 : 4, Hk = d == 2 ? 1 : 2, bs = d == 0 ? 16 : 7;
                    uint64_t seed = 4100 + (uint64_t)(k * 100 + kv * 10 + a * 3 + d);
                    for (int op = 0; op < 3; op++)
                        for (int g = 0; g < (op == 0 ? n_gemm : 1); g++)
                            fails +=
                                    tg_paged(op, isas[k], gemms[g], (attn_dtype)kv, (attn_dtype)a,
                                             H, Hk, attn__is_int((attn_dtype)kv) ? Ds_int[d] : Ds[d],
                                             bs, lens, 3, seed);
                }
            }
    CHECK_EQ_INT(fails, 0);
}

/* ---- writes, copies, conversions, merges, biases, the forward pass --------------------------- */
TEST(guard_pages_write_kv_swap_copy) {
    if (!TG_GUARD) SKIP("no mmap");
    enum { NB = 5, BS = 3, HK = 2, T = 6 };
    attn_isa isas[ATTN_ISA_COUNT];
    int n_isa = tu_isas(isas), fails = 0;
    uint64_t rng = 4200;
    int64_t slots[T] = {0, NB * BS - 1, 4, -1, 7, NB * BS - 1}, pairs[4] = {0, NB - 1, NB - 2, 1};
    for (int k = 0; k < n_isa; k++)
        for (int kv = ATTN_F32; kv < ATTN_DTYPE_COUNT; kv++)
            for (int a = ATTN_F32; a <= ATTN_BF16; a++) {
                /* integer rows of one partial group, or of two with a one-element second */
                int D = attn__is_int((attn_dtype)kv) && a == ATTN_F16 ? 33 : 7;
                size_t cb = (size_t)NB * BS * HK * ref_row_bytes((attn_dtype)kv, (size_t)D);
                size_t nr = (size_t)T * HK * D, esz = attn_dtype_size((attn_dtype)a);
                float sc = attn__is_fp8((attn_dtype)kv) ? 0.05f : 1.0f;
                tg_set s; memset(&s, 0, sizeof s);
                int ikc = tg_add(&s, tu_alloc(cb), cb), ivc = tg_add(&s, tu_alloc(cb), cb);
                int ik = tg_add(&s, tu_alloc(nr * esz), nr * esz),
                    iv = tg_add(&s, tu_alloc(nr * esz), nr * esz);
                int isl = tg_add(&s, tg_dup(slots, sizeof slots), sizeof slots),
                    ip = tg_add(&s, tg_dup(pairs, sizeof pairs), sizeof pairs);
                for (size_t i = 0; i < cb; i++) {
                    ((uint8_t *)s.orig[ikc])[i] = (uint8_t)attn_test_rand_u64(&rng);
                    ((uint8_t *)s.orig[ivc])[i] = (uint8_t)attn_test_rand_u64(&rng);
                }
                tg_fill(&rng, (attn_dtype)a, s.orig[ik], nr, -2, 2);
                tg_fill(&rng, (attn_dtype)a, s.orig[iv], nr, -2, 2);
                attn_kv_cache c; memset(&c, 0, sizeof c);
                c.num_blocks = NB; c.block_size = BS; c.num_kv_heads = HK; c.head_size = D;
                c.dtype = (attn_dtype)kv; c.k_scale = c.v_scale = sc;
                void *wk = tg_dup(s.orig[ikc], cb), *wv = tg_dup(s.orig[ivc], cb);
                attn_exec e = tu_exec(isas[k], 2);
                c.key = wk; c.value = wv;
                attn_rows rk = {s.orig[ik], (attn_dtype)a, 0}, rv = {s.orig[iv], (attn_dtype)a, 0};
                attn_kv_cache *layers[1] = {&c};
                fails += attn_write_kv(&c, rk, rv, slots, T, &e) != ATTN_OK;
                fails += attn_swap_blocks(&c, &c, pairs, 2) != ATTN_OK;
                fails += attn_copy_blocks(layers, 1, pairs + 2, 1) != ATTN_OK;
                for (int pl = 0; pl < 2; pl++) {
                    tg_place_all(&s, pl);
                    attn_kv_cache g = c;
                    g.key = s.guarded[ikc]; g.value = s.guarded[ivc];
                    attn_rows gk = {s.guarded[ik], (attn_dtype)a, 0},
                              gv = {s.guarded[iv], (attn_dtype)a, 0};
                    attn_kv_cache *gl[1] = {&g};
                    fails += attn_write_kv(&g, gk, gv, TG(&s, isl, int64_t *), T, &e) != ATTN_OK;
                    fails += attn_swap_blocks(&g, &g, TG(&s, ip, int64_t *), 2) != ATTN_OK;
                    fails += attn_copy_blocks(gl, 1, TG(&s, ip, int64_t *) + 2, 1) != ATTN_OK;
                    fails += !tg_same(&s, ikc, wk, "keys") + !tg_same(&s, ivc, wv, "values");
                    tg_calls += 3;
                    tg_unmap(&s);
                }
                tg_free(&s);
                free(wk); free(wv);
            }
    CHECK_EQ_INT(fails, 0);
}

TEST(guard_pages_convert_merge_bias) {
    if (!TG_GUARD) SKIP("no mmap");
    /* integer rows: one partial group, two, and a last group of one element */
    static const size_t ns[6] = {1, 7, 9, 31, 257, 33};
    uint64_t rng = 4300;
    int fails = 0;
    for (int sd = ATTN_F32; sd < ATTN_DTYPE_COUNT; sd++)
        for (int dd = ATTN_F32; dd < ATTN_DTYPE_COUNT; dd++)
            for (int k = 0; k < 6; k++) {
                size_t n = ns[k], sb = ref_row_bytes((attn_dtype)sd, n),
                       db = ref_row_bytes((attn_dtype)dd, n);
                float sc = attn__is_fp8((attn_dtype)sd) ||
                           attn__is_fp8((attn_dtype)dd) ? 0.5f : 1.0f;
                tg_set s; memset(&s, 0, sizeof s);
                int is = tg_add(&s, tu_alloc(sb), sb), id = tg_add(&s, tu_alloc(db), db);
                for (size_t i = 0; i < sb; i++) ((uint8_t *)s.orig[is])[i] =
                        (uint8_t)attn_test_rand_u64(&rng);
                void *want = tu_alloc(db);
                fails +=
                        attn_convert(want, (attn_dtype)dd, s.orig[is], (attn_dtype)sd, n, sc) !=
                                ATTN_OK;
                for (int pl = 0; pl < 2; pl++) {
                    tg_place_all(&s, pl);
                    fails +=
                            attn_convert(s.guarded[id], (attn_dtype)dd, s.guarded[is],
                                         (attn_dtype)sd, n, sc) != ATTN_OK;
                    fails += !tg_same(&s, id, want, "converted");
                    tg_calls++;
                    tg_unmap(&s);
                }
                tg_free(&s);
                free(want);
            }
    /* merge_states and the bias builder */
    enum { T = 3, H = 3, D = 9, LQ = 5, LK = 13 };
    float a[T * H * D], b[T * H * D], la[T * H], lb[T * H], slopes[H] = {0.5f, 0.25f, 0.125f};
    tu_fill(&rng, ATTN_F32, a, a, T * H * D, -1, 1);
    tu_fill(&rng, ATTN_F32, b, b, T * H * D, -1, 1);
    tu_fill(&rng, ATTN_F32, la, la, T * H, -3, 3);
    tu_fill(&rng, ATTN_F32, lb, lb, T * H, -3, 3);
    for (int od = ATTN_F32; od <= ATTN_BF16; od++) {
        size_t osz = attn_dtype_size((attn_dtype)od);
        tg_set s; memset(&s, 0, sizeof s);
        int ia = tg_add(&s, tg_dup(a, sizeof a), sizeof a),
            ib = tg_add(&s, tg_dup(b, sizeof b), sizeof b);
        int ila = tg_add(&s, tg_dup(la, sizeof la), sizeof la),
            ilb = tg_add(&s, tg_dup(lb, sizeof lb), sizeof lb);
        int io = tg_add(&s, tu_alloc(T * H * D * osz), T * H * D * osz),
            il = tg_add(&s, tu_alloc(sizeof la), sizeof la);
        void *want = tu_alloc(T * H * D * osz);
        float want_l[T * H];
        attn_rows ra = {a, ATTN_F32, 0}, rb = {b, ATTN_F32, 0}, ro = {want, (attn_dtype)od, 0};
        fails += attn_merge_states(T, H, D, ra, la, rb, lb, ro, want_l) != ATTN_OK;
        for (int pl = 0; pl < 2; pl++) {
            tg_place_all(&s, pl);
            attn_rows ga = {s.guarded[ia], ATTN_F32, 0}, gb = {s.guarded[ib], ATTN_F32, 0};
            attn_rows go = {s.guarded[io], (attn_dtype)od, 0};
            fails +=
                    attn_merge_states(T, H, D, ga, TG(&s, ila, float *), gb, TG(&s, ilb, float *),
                                      go,
                                       TG(&s, il, float *)) != ATTN_OK;
            fails += !tg_same(&s, io, want, "merged out") + !tg_same(&s, il, want_l, "merged lse");
            tg_calls++;
            tg_unmap(&s);
        }
        tg_free(&s);
        free(want);
    }
    {
        attn_params p; memset(&p, 0, sizeof p);
        p.num_heads = H; p.num_kv_heads = 1; p.head_size = 8; p.alibi_slopes = slopes;
        p.sliding_window = 4;
        tg_set s; memset(&s, 0, sizeof s);
        int ib = tg_add(&s, tu_alloc(sizeof(float) * H * LQ * LK), sizeof(float) * H * LQ * LK);
        float *want = (float *)tu_alloc(sizeof(float) * H * LQ * LK);
        fails += attn_make_bias(&p, LQ, LK, 1, want) != ATTN_OK;
        for (int pl = 0; pl < 2; pl++) {
            tg_place_all(&s, pl);
            fails += attn_make_bias(&p, LQ, LK, 1, TG(&s, ib, float *)) != ATTN_OK;
            fails += !tg_same(&s, ib, want, "bias");
            tg_calls++;
            tg_unmap(&s);
        }
        free(s.orig[ib]); free(want);
    }
    CHECK_EQ_INT(fails, 0);
}

/* attn_forward: a chunk over a cached prefix and a decode, writing their K/V first. */
TEST(guard_pages_forward) {
    if (!TG_GUARD) SKIP("no mmap");
    enum { H = 4, HK = 2, BS = 5, NB = 9, CTX = 13, NEW = 6, T = NEW + 1 };
    attn_isa isas[ATTN_ISA_COUNT];
    int n_isa = tu_isas(isas), fails = 0;
    uint64_t rng = 4400;
    int32_t qsl[2] = {0, NEW}, lens[2] = {CTX + NEW, 11}, ctx[1] = {CTX},
            tables[2 * 4] = {8, 0, 7, 1, 2, 6, 3, 5};
    int64_t slots[T];
    for (int t = 0; t < NEW; t++) slots[t] = (int64_t)tables[(CTX + t) / BS] * BS + (CTX + t) % BS;
    slots[NEW] = (int64_t)tables[4 + 10 / BS] * BS + 10 % BS;
    for (int k = 0; k < n_isa; k++)
        for (int kv = ATTN_F32; kv < ATTN_DTYPE_COUNT; kv++) {
            /* integer rows: two groups, the second of one element */
            int D = attn__is_int((attn_dtype)kv) ? 33 : 24;
            attn_params p; memset(&p, 0, sizeof p);
            p.num_heads = H; p.num_kv_heads = HK; p.head_size = D;
            attn_layer L;
            REQUIRE(attn_layer_init(&L, &p, ATTN_DECODER, ATTN_BACKEND_SDPA) == ATTN_OK);
            size_t rows = (size_t)NB * BS * HK, cb = rows * ref_row_bytes((attn_dtype)kv, (size_t)D);
            float sc = attn__is_fp8((attn_dtype)kv) ? 0.02f : 1.0f;
            tg_set s; memset(&s, 0, sizeof s);
            int ikc = tg_add(&s, tu_alloc(cb), cb), ivc = tg_add(&s, tu_alloc(cb), cb);
            int iq = tg_add(&s, tu_alloc(sizeof(float) * T * H * D), sizeof(float) * T * H * D);
            int ik = tg_add(&s, tu_alloc(sizeof(float) * T * HK * D), sizeof(float) * T * HK * D);
            int iv = tg_add(&s, tu_alloc(sizeof(float) * T * HK * D), sizeof(float) * T * HK * D);
            int io = tg_add(&s, tu_alloc(sizeof(float) * T * H * D), sizeof(float) * T * H * D);
            int iqs = tg_add(&s, tg_dup(qsl, sizeof qsl), sizeof qsl),
                il = tg_add(&s, tg_dup(lens, sizeof lens), sizeof lens);
            int ic = tg_add(&s, tg_dup(ctx, sizeof ctx), sizeof ctx),
                it = tg_add(&s, tg_dup(tables, sizeof tables), sizeof tables);
            int isl = tg_add(&s, tg_dup(slots, sizeof slots), sizeof slots);
            tg_fill_cache(&rng, (attn_dtype)kv, D, rows, s.orig[ikc], sc);
            tg_fill_cache(&rng, (attn_dtype)kv, D, rows, s.orig[ivc], sc);
            tg_fill(&rng, ATTN_F32, s.orig[iq], (size_t)T * H * D, -1, 1);
            tg_fill(&rng, ATTN_F32, s.orig[ik], (size_t)T * HK * D, -1, 1);
            tg_fill(&rng, ATTN_F32, s.orig[iv], (size_t)T * HK * D, -1, 1);
            attn_metadata md; memset(&md, 0, sizeof md);
            md.num_prefills = 1; md.num_prefill_tokens = NEW; md.num_decode_tokens = 1;
            md.slot_mapping = slots; md.seq_lens = lens; md.query_start_loc = qsl;
            md.context_lens = ctx;
            md.block_tables = tables; md.max_blocks_per_seq = 4;
            attn_kv_cache c; memset(&c, 0, sizeof c);
            c.num_blocks = NB; c.block_size = BS; c.num_kv_heads = HK; c.head_size = D;
            c.dtype = (attn_dtype)kv; c.k_scale = c.v_scale = sc;
            void *wk = tg_dup(s.orig[ikc], cb), *wv = tg_dup(s.orig[ivc], cb);
            float *want = (float *)tu_alloc(sizeof(float) * T * H * D);
            c.key = wk; c.value = wv;
            attn_exec e = tu_exec(isas[k], 2);
            size_t wsb = attn_forward_workspace_size(&L, &md, &e);
            int iw = tg_add(&s, NULL, wsb);
            void *ws = tu_alloc(wsb);
            attn_rows rq = {s.orig[iq], ATTN_F32, 0}, rk = {s.orig[ik], ATTN_F32, 0},
                      rv = {s.orig[iv], ATTN_F32, 0};
            attn_rows ro = {want, ATTN_F32, 0};
            fails += attn_forward(&L, &e, rq, rk, rv, &c, &md, ro, ws, wsb) != ATTN_OK;
            for (int pl = 0; pl < 2; pl++) {
                tg_place_all(&s, pl);
                attn_kv_cache g = c;
                g.key = s.guarded[ikc]; g.value = s.guarded[ivc];
                attn_metadata gm = md;
                gm.slot_mapping = TG(&s, isl, int64_t *); gm.seq_lens = TG(&s, il, int32_t *);
                gm.query_start_loc = TG(&s, iqs, int32_t *);
                gm.context_lens = TG(&s, ic, int32_t *);
                gm.block_tables = TG(&s, it, int32_t *);
                attn_rows gq = {s.guarded[iq], ATTN_F32, 0}, gk = {s.guarded[ik], ATTN_F32, 0};
                attn_rows gv = {s.guarded[iv], ATTN_F32, 0}, go = {s.guarded[io], ATTN_F32, 0};
                fails +=
                        attn_forward(&L, &e, gq, gk, gv, &g, &gm, go, s.guarded[iw], wsb) !=
                                ATTN_OK;
                fails +=
                        !tg_same(&s, io, want, "forward out") + !tg_same(&s, ikc, wk,
                                                                         "forward keys") +
                         !tg_same(&s, ivc, wv, "forward values");
                tg_calls++;
                tg_unmap(&s);
            }
            tg_free(&s);
            free(wk); free(wv); free(want); free(ws);
        }
    CHECK_EQ_INT(fails, 0);
    printf("  guard pages: %ld calls, each buffer flush against an inaccessible page after it, "
           "then before it\n",
           tg_calls);
}

#define TEST_GUARD_LIST                                                                           \
    ATTN_TEST_ENTRY(guard_pages_sdpa),                                                            \
    ATTN_TEST_ENTRY(guard_pages_paged_prefill_and_decode),                                        \
    ATTN_TEST_ENTRY(guard_pages_write_kv_swap_copy),                                              \
    ATTN_TEST_ENTRY(guard_pages_convert_merge_bias),                                              \
    ATTN_TEST_ENTRY(guard_pages_forward)
