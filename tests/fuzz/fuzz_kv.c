/* fuzz_kv.c - the paged cache's own operations on fuzzed arguments:
   - attn_write_kv: slots negative, -1, duplicated, past the end; rows of any dtype and stride;
     the cache after the call equals a model of the serial loop (last duplicate wins) bit for bit
     (integer rows: quantised by tests/ref.h's reference, any NaN scale as any other);
   - attn_swap_blocks / attn_copy_blocks: pairs in and out of range, repeated destinations, a block
     both source and destination, one cache or two, mismatched geometry; the caches after the call
     equal the model's copies;
   - one cache struct, hand-filled and perhaps broken, given to every function that takes a cache:
     they all accept it or all refuse it, as the documentation's definition of a valid cache
     says (a split between two validators shows here).
   Every error leaves every cache byte as it was. */
#include "fuzz.h"

/* A cache of the input's geometry (small), dtype and scales. */
static void gen_cache(fz_in *in, uint64_t *rng, fz_cache *fc, int nb, int bs, int Hk, int D,
                      attn_dtype dt) {
    float ks = fz_is_fp8(dt) ? fz_uniform(rng, 0.01f, 2.0f) : 1.0f;
    float vs = fz_is_fp8(dt) ? fz_uniform(rng, 0.01f, 2.0f) : 1.0f;
    fz_cache_make(fc, rng, nb, bs, Hk, D, dt, ks, vs, fz_chance(in, 16));
}

/* Breaks the struct in one of the ways the documentation defines as invalid, or leaves it valid
   in a way a validator might still get wrong (an fp8 scale != 1, a huge geometry whose arrays do
   not fit a size_t). The memory stays as made: calls that accept the struct touch none of it. */
static void break_cache(fz_in *in, uint64_t *rng, attn_kv_cache *c) {
    static const int huge[4] = {0x7fffffff, 0x40000000, 65536, 600};
    static const float scales[8] = {0.0f, -1.0f, NAN, INFINITY, 2.0f, 0.5f, 1e-30f, 1.0f};
    int rounds = fz_int(in, 1, 2);
    for (int r = 0; r < rounds; r++)
        switch (fz_int(in, 0, 12)) {
            case 0: c->key = NULL; break;
            case 1: c->value = NULL; break;
            case 2: c->num_blocks = fz_chance(in, 128) ? fz_int(in, -2, 0) : huge[fz_int(in, 0, 3)];
            break;
            case 3: c->block_size = fz_chance(in, 128) ? fz_int(in, -2, 0) : huge[fz_int(in, 0, 3)];
            break;
            case 4: c->num_kv_heads = fz_chance(in, 128) ? fz_int(in, -2, 0)
                : huge[fz_int(in, 0, 3)]; break;
            case 5: c->head_size = fz_chance(in, 128) ? fz_int(in, -2, 0)
                : ATTN_MAX_HEAD_SIZE + fz_int(in, 0, 2); break;
            case 6: c->dtype = (attn_dtype)(fz_chance(in, 128) ? fz_int(in, 0, ATTN_DTYPE_COUNT - 1)
                                                   : fz_int(in, ATTN_DTYPE_COUNT, 99)); break;
            case 7: c->k_scale = scales[fz_int(in, 0, 7)]; break;
            case 8: c->v_scale = scales[fz_int(in, 0, 7)]; break;
            case 9: c->k_scale = c->v_scale = fz_uniform(rng, 0.01f, 4.0f); break;
            default: break;
        }
}

/* For calls that touch memory: a broken struct that the documentation still calls valid (one
   that lies about its memory) goes back to the struct as made. */
static void break_for_call(fz_in *in, uint64_t *rng, fz_cache *fc, attn_kv_cache *c) {
    break_cache(in, rng, c);
    if (fz_cache_struct_valid(c)) *c = fc->made;
}

static void op_write_kv(fz_in *in, uint64_t *rng) {
    fz_expect ex = {0};
    fz_cache fc;
    attn_exec exec;
    int nb = fz_int(in, 1, 12), bs = fz_int(in, 1, 8), Hk = fz_int(in, 1, 4), D = fz_int(in, 1, 40);
    attn_dtype dt = (attn_dtype)fz_int(in, 0, ATTN_DTYPE_COUNT - 1);
    gen_cache(in, rng, &fc, nb, bs, Hk, D, dt);
    int null_cache = fz_chance(in, 3);
    if (fz_chance(in, 16)) break_for_call(in, rng, &fc, &fc.c);
    fz_bad_if(&ex, null_cache || !fz_cache_struct_valid(&fc.c), ATTN_ERR_INVALID_ARG);
    const attn_exec *e = fz_exec(in, &exec, &ex);
    int n = fz_int(in, 0, 24), n_call = fz_chance(in, 4) ? -fz_int(in, 1, 3) : n;
    fz_bad_if(&ex, n_call < 0, ATTN_ERR_INVALID_ARG);
    int64_t num_slots = (int64_t)nb * bs;
    int64_t *slots = (int64_t *)fz_alloc(sizeof(int64_t) * (size_t)(n + 1));
    for (int t = 0; t < n; t++) {
        int r = fz_int(in, 0, 63);
        slots[t] = r < 48 ? (int64_t)(fz_rand(rng) % (uint64_t)num_slots)
                 : r < 56 ? -1 : r < 60 && t > 0 ? slots[fz_int(in, 0, t - 1)]
                 : r == 62 ? num_slots + fz_int(in, 0, 3) : r == 63 ? -fz_int(in, 2, 1000) : 0;
        fz_bad_if(&ex, slots[t] < -1 || slots[t] >= num_slots, ATTN_ERR_OUT_OF_RANGE);
    }
    const int64_t *sm = fz_chance(in, 3) ? NULL : slots;
    fz_bad_if(&ex, !sm && n_call > 0, ATTN_ERR_INVALID_ARG);
    fz_rows k, v;
    fz_rows_make(in, rng, &k, n, (int64_t)Hk * D, 1, NULL, &ex);
    fz_rows_make(in, rng, &v, n, (int64_t)Hk * D, 1, fz_chance(in, 128) ? &k : NULL, &ex);

    fz_snaps outs = {0};
    fz_snap(&outs, "key cache", fc.k, fz_cache_bytes(&fc));
    fz_snap(&outs, "value cache", fc.v, fz_cache_bytes(&fc));
    attn_status st = attn_write_kv(null_cache ? NULL : &fc.c, k.r, v.r, sm, n_call, e);
    fz_check_status(&ex, st, "attn_write_kv");
    fz_unchanged_on_error(&outs, st, "attn_write_kv");
    if (st == ATTN_OK) {
        size_t cb = fz_cache_bytes(&fc);
        void *kb = fz_alloc(cb), *vb = fz_alloc(cb);
        memcpy(kb, outs.copy[0], cb);
        memcpy(vb, outs.n > 1 ? outs.copy[1] : outs.copy[0], cb);
        if (fc.v == fc.k) {  /* one buffer: each slot ends with its value */
            fz_model_writes(&fc, kb, kb, &k, &v, slots, n);
            FZ_REQUIRE(fz_cache_same(&fc, kb, fc.k),
                       "attn_write_kv: the shared buffer differs from the model");
        } else {
            fz_model_writes(&fc, kb, vb, &k, &v, slots, n);
            FZ_REQUIRE(fz_cache_same(&fc, kb, fc.k),
                       "attn_write_kv: the keys differ from the model (%d tokens)", n);
            FZ_REQUIRE(fz_cache_same(&fc, vb, fc.v),
                       "attn_write_kv: the values differ from the model (%d tokens)", n);
        }
        free(kb); free(vb);
    }
    fz_snaps_free(&outs);
    free(slots);
    fz_rows_free(&k); fz_rows_free(&v);
    fz_cache_free(&fc);
}

/* n pairs [n][2] of block ids: mostly in range, perhaps out of it, repeated or crossing. */
static int64_t *gen_pairs(fz_in *in, uint64_t *rng, int n, int64_t src_blocks, int64_t dst_blocks) {
    int64_t *pr = (int64_t *)fz_alloc(sizeof(int64_t) * (size_t)(2 * n + 1));
    for (int i = 0; i < n; i++)
        for (int j = 0; j < 2; j++) {
            int64_t nb = j ? dst_blocks : src_blocks;
            int r = fz_int(in, 0, 31);
            pr[2 * i + j] = r < 26 ? (int64_t)(fz_rand(rng) % (uint64_t)nb) : r < 29 &&
                i > 0 ? pr[2 * fz_int(in, 0, i - 1) + fz_int(in, 0, 1)]
                          : r == 30 ? nb + fz_int(in, 0, 2) : r == 31 ? -fz_int(in, 1, 3) : 0;
        }
    return pr;
}

/* The documented pair rules: ids in range (else OUT_OF_RANGE); no destination twice and, in one
   cache, no id both a source and a destination (else INVALID_ARG). */
static void pairs_model(const int64_t *pr, int n, int64_t src_blocks, int64_t dst_blocks, int same,
                        fz_expect *ex) {
    for (int i = 0; i < n; i++)
        fz_bad_if(ex, pr[2 * i] < 0 || pr[2 * i] >= src_blocks || pr[2 * i + 1] < 0 ||
                  pr[2 * i + 1] >= dst_blocks,
                  ATTN_ERR_OUT_OF_RANGE);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            fz_bad_if(ex, i != j && pr[2 * i + 1] == pr[2 * j + 1], ATTN_ERR_INVALID_ARG);
            fz_bad_if(ex, same && pr[2 * i] == pr[2 * j + 1], ATTN_ERR_INVALID_ARG);
        }
}

/* Copies block a of src to block b of dst in the model's byte arrays. */
static void model_copy(const fz_cache *src, const void *sk, const void *sv, const fz_cache *dst,
                       void *dk,
                       void *dv, int64_t a, int64_t b) {
    size_t bb = fz_cache_block_bytes(src);
    memcpy((char *)dk + (size_t)b * bb, (const char *)sk + (size_t)a * bb, bb);
    memcpy((char *)dv + (size_t)b * bb, (const char *)sv + (size_t)a * bb, bb);
    (void)dst;
}

static void op_swap(fz_in *in, uint64_t *rng) {
    fz_expect ex = {0};
    fz_cache a, b;
    int nb = fz_int(in, 1, 10), bs = fz_int(in, 1, 6), Hk = fz_int(in, 1, 3), D = fz_int(in, 1, 24);
    attn_dtype dt = (attn_dtype)fz_int(in, 0, ATTN_DTYPE_COUNT - 1);
    int mode = fz_int(in, 0, 3);  /* 0 two caches, 1 the same struct, 2 a copy of the struct, 3
                                     mismatched */
    gen_cache(in, rng, &a, nb, bs, Hk, D, dt);
    if (mode == 0) {
        gen_cache(in, rng, &b, fz_int(in, 1, 10), bs, Hk, D, dt);
        b.c.k_scale = b.made.k_scale = a.c.k_scale;
        b.c.v_scale = b.made.v_scale = a.c.v_scale;
    } else if (mode == 3) {  /* another geometry, dtype or (fp8) scale */
        int which = fz_int(in, 0, 4);
        gen_cache(in, rng, &b, nb, bs + (which == 0), Hk + (which == 1), D + (which == 2),
                  which == 3 ? (attn_dtype)((dt + 1) % ATTN_DTYPE_COUNT) : dt);
        b.c.k_scale = b.made.k_scale = a.c.k_scale * (which == 4 && fz_is_fp8(dt) ? 2.0f : 1.0f);
        b.c.v_scale = b.made.v_scale = a.c.v_scale;
        fz_bad_if(&ex, which < 4 || fz_is_fp8(dt), ATTN_ERR_INVALID_ARG);
    }
    attn_kv_cache copy = a.c;
    attn_kv_cache *src = &a.c, *dst = mode == 0 || mode == 3 ? &b.c : mode == 1 ? &a.c : &copy;
    fz_cache *dfc = mode == 0 || mode == 3 ? &b : &a;
    if (fz_chance(in, 8)) {
        int on_src = fz_chance(in, 128);
        break_for_call(in, rng, on_src ? &a : dfc, on_src ? src : dst);
    }
    fz_bad_if(&ex, !fz_cache_struct_valid(src) ||
              !fz_cache_struct_valid(dst), ATTN_ERR_INVALID_ARG);
    int same = mode == 1 || mode == 2;
    int n = fz_int(in, 0, 8), n_call = fz_chance(in, 4) ? -1 : n;
    int64_t *pr =
            gen_pairs(in, rng, n, src->num_blocks > 0 ? src->num_blocks : 1, dst->num_blocks > 0
                      ? dst->num_blocks : 1);
    const int64_t *pcall = fz_chance(in, 3) ? NULL : pr;
    fz_bad_if(&ex, n_call < 0 || (n_call > 0 && !pcall), ATTN_ERR_INVALID_ARG);
    if (n_call > 0) pairs_model(pr, n, src->num_blocks, dst->num_blocks, same, &ex);

    fz_snaps all = {0};
    fz_snap(&all, "source keys", a.k, fz_cache_bytes(&a));
    fz_snap(&all, "source values", a.v, fz_cache_bytes(&a));
    if (dfc != &a) {
        fz_snap(&all, "destination keys", b.k, fz_cache_bytes(&b));
        fz_snap(&all, "destination values", b.v, fz_cache_bytes(&b));
    }
    attn_status st = attn_swap_blocks(src, dst, pcall, n_call);
    fz_check_status(&ex, st, "attn_swap_blocks");
    fz_unchanged_on_error(&all, st, "attn_swap_blocks");
    if (st == ATTN_OK) {
        size_t cb = fz_cache_bytes(dfc);
        void *dk = fz_alloc(cb), *dv = fz_alloc(cb);
        int di = dfc == &a ? 0 : 2;
        memcpy(dk, all.copy[di], cb);
        memcpy(dv, all.copy[di + 1], cb);
        /* a destination whose key and value arrays are one buffer: each pair's value lands on its
           key */
        void *dv_model = dfc->k == dfc->v ? dk : dv;
        for (int i = 0; i < n; i++) model_copy(&a, all.copy[0], all.copy[1], dfc, dk, dv_model,
                                               pr[2 * i],
                                pr[2 * i + 1]);
        FZ_REQUIRE(!memcmp(dk, dfc->k, cb) && (dfc->v == dfc->k || !memcmp(dv, dfc->v, cb)),
                   "attn_swap_blocks: the destination differs from the model's copies (%d pairs, "
                   "mode %d, "
                   "dtype %d, shared arrays %d %d, pair 0: %lld -> %lld)", n, mode, (int)dt,
                   a.k == a.v,
                   dfc->k == dfc->v, (long long)pr[0], (long long)pr[1]);
        if (dfc != &a)
            FZ_REQUIRE(!memcmp(all.copy[0], a.k, fz_cache_bytes(&a)) &&
                       !memcmp(all.copy[1], a.v, fz_cache_bytes(&a)),
                       "attn_swap_blocks changed its source");
        free(dk); free(dv);
    }
    fz_snaps_free(&all);
    free(pr);
    fz_cache_free(&a);
    if (dfc != &a) fz_cache_free(&b);
}

static void op_copy(fz_in *in, uint64_t *rng) {
    fz_expect ex = {0};
    fz_cache fc[3];
    attn_kv_cache *ptr[3];
    int L = fz_int(in, 0, 3), nb = fz_int(in, 1, 10), L_call = fz_chance(in, 4) ? -1 : L;
    for (int l = 0; l < L; l++) {
        gen_cache(in, rng, &fc[l], nb, fz_int(in, 1, 6), fz_int(in, 1, 3), fz_int(in, 1, 24),
                  (attn_dtype)fz_int(in, 0, ATTN_DTYPE_COUNT - 1));
        ptr[l] = &fc[l].c;
        if (l > 0 && fz_chance(in, 6)) fc[l].c.num_blocks = nb + (fz_chance(in, 128) ? 1 : -1);
        if (fz_chance(in, 6)) break_for_call(in, rng, &fc[l], &fc[l].c);
        if (fz_chance(in, 2)) ptr[l] = NULL;
        fz_bad_if(&ex, !ptr[l] || !ptr[0] || !fz_cache_struct_valid(ptr[l]) ||
                       ptr[l]->num_blocks != ptr[0]->num_blocks, ATTN_ERR_INVALID_ARG);
    }
    attn_kv_cache *const *caches = fz_chance(in, 3) ? NULL : ptr;
    fz_bad_if(&ex, L_call < 0 || (L_call > 0 && !caches), ATTN_ERR_INVALID_ARG);
    int64_t blocks = L > 0 && ptr[0] ? ptr[0]->num_blocks : L > 0 ? 1 : INT64_MAX;
    if (blocks < 1) blocks = 1;
    int n = fz_int(in, 0, 8), n_call = fz_chance(in, 4) ? -1 : n;
    int64_t *pr = gen_pairs(in, rng, n, L > 0 ? blocks : nb, L > 0 ? blocks : nb);
    const int64_t *pcall = fz_chance(in, 3) ? NULL : pr;
    fz_bad_if(&ex, n_call < 0 || (n_call > 0 && !pcall), ATTN_ERR_INVALID_ARG);
    if (n_call > 0) pairs_model(pr, n, blocks, blocks, 1, &ex);

    fz_snaps all = {0};
    for (int l = 0; l < L; l++) {
        fz_snap(&all, "keys", fc[l].k, fz_cache_bytes(&fc[l]));
        fz_snap(&all, "values", fc[l].v, fz_cache_bytes(&fc[l]));
    }
    attn_status st = attn_copy_blocks(caches, L_call, pcall, n_call);
    fz_check_status(&ex, st, "attn_copy_blocks");
    fz_unchanged_on_error(&all, st, "attn_copy_blocks");
    if (st == ATTN_OK)
        for (int l = 0; l < L; l++) {
            size_t cb = fz_cache_bytes(&fc[l]);
            void *dk = fz_alloc(cb), *dv = fz_alloc(cb);
            memcpy(dk, all.copy[2 * l], cb);
            memcpy(dv, all.copy[2 * l + 1], cb);
            for (int i = 0; i < n; i++) model_copy(&fc[l], dk, dv, &fc[l], dk, dv, pr[2 * i],
                                                   pr[2 * i + 1]);
            FZ_REQUIRE(!memcmp(dk, fc[l].k, cb) && (fc[l].v == fc[l].k || !memcmp(dv, fc[l].v, cb)),
                       "attn_copy_blocks: layer %d differs from the model's copies (%d pairs)", l,
                       n);
            free(dk); free(dv);
        }
    fz_snaps_free(&all);
    free(pr);
    for (int l = 0; l < L; l++) fz_cache_free(&fc[l]);
}

/* Every function that takes a cache, each with an empty workload (no token, no pair, no
   sequence), so the struct's own validity decides: 1 = accepted. */
static int accepts(const char *what, attn_status st, int *n, const char **names, int *verdicts) {
    names[*n] = what;
    verdicts[(*n)++] = st == ATTN_OK;
    return st == ATTN_OK;
}

static void op_validators(fz_in *in, uint64_t *rng) {
    /* the prefill query counts one thread's scratch even for no tokens: on ATTN_ISA_AMX four key
       tiles' keys, values and scores, 1.19 MB at D = 512 */
    static char ws[1 << 22];
    fz_cache fc;
    int Hk = fz_int(in, 1, 4), D = fz_int(in, 1, 64);
    gen_cache(in, rng, &fc, fz_int(in, 1, 4), fz_int(in, 1, 4), Hk, D,
              (attn_dtype)fz_int(in, 0, ATTN_DTYPE_COUNT - 1));
    attn_kv_cache c = fc.c;
    break_cache(in, rng, &c);
    int doc = fz_cache_struct_valid(&c);
    /* params that match the struct wherever params can */
    attn_params p;
    memset(&p, 0, sizeof p);
    p.num_heads = p.num_kv_heads = c.num_kv_heads >= 1 ? c.num_kv_heads : 1;
    p.head_size = c.head_size >= 1 && c.head_size <= ATTN_MAX_HEAD_SIZE ? c.head_size : 1;
    int matchable = p.num_kv_heads == c.num_kv_heads && p.head_size == c.head_size;
    const char *names[12];
    int verdicts[12], n = 0;
    int64_t none_slots[1] = {0};
    int32_t none_i32[2] = {0, 0};
    attn_rows rows = {NULL, ATTN_F32, 0};
    attn_kv_cache *layers[1] = {&c};
    accepts("attn_write_kv", attn_write_kv(&c, rows, rows, none_slots, 0, NULL), &n, names,
            verdicts);
    accepts("attn_swap_blocks", attn_swap_blocks(&c, &c, none_slots, 0), &n, names, verdicts);
    accepts("attn_copy_blocks", attn_copy_blocks(layers, 1, none_slots, 0), &n, names, verdicts);
    if (matchable) {
        attn_layer L;
        attn_metadata md;
        if (attn_layer_init(&L, &p, ATTN_DECODER, ATTN_BACKEND_SDPA) != ATTN_OK) abort();
        size_t dq = attn_paged_decode_workspace_size(&p, NULL, &c, none_i32, 0, ATTN_PAGED_AUTO);
        size_t pq = attn_paged_prefill_workspace_size(&p, NULL, &c, none_i32, none_i32, 0);
        accepts("attn_paged_decode_workspace_size", dq ? ATTN_OK : ATTN_ERR_INVALID_ARG, &n, names,
                verdicts);
        accepts("attn_paged_prefill_workspace_size", pq ? ATTN_OK : ATTN_ERR_INVALID_ARG, &n, names,
                verdicts);
        FZ_REQUIRE(dq <= sizeof ws &&
                   pq <= sizeof ws, "workspace for an empty batch: %zu / %zu bytes", dq, pq);
        accepts("attn_paged_decode",
                attn_paged_decode(&p, NULL, rows, rows, &c, none_i32, 0, none_i32, 0,
                                                       ATTN_PAGED_AUTO, NULL, ws, sizeof ws), &n,
                                                       names, verdicts);
        accepts("attn_paged_prefill",
                attn_paged_prefill(&p, NULL, rows, rows, &c, none_i32, 0, none_i32, none_i32,
                                                         0, 1, NULL, ws, sizeof ws), &n, names,
                                                         verdicts);
        memset(&md, 0, sizeof md);
        md.slot_mapping = none_slots;   /* nothing to write: the cache is still checked */
        md.seq_lens = none_i32;
        md.block_tables = none_i32;
        accepts("attn_forward (slot_mapping)",
                attn_forward(&L, NULL, rows, rows, rows, &c, &md, rows, ws, sizeof ws),
                &n, names, verdicts);
        md.slot_mapping = NULL;
        md.context_lens = none_i32;     /* a prefix: the paged prefill's checks */
        accepts("attn_forward (context_lens)",
                attn_forward(&L, NULL, rows, rows, rows, &c, &md, rows, ws, sizeof ws),
                &n, names, verdicts);
    }
    for (int i = 0; i < n; i++)
        FZ_REQUIRE(verdicts[i] == doc,
                   "the functions that take a cache disagree: %s %s the struct, %s "
                   "%s it, the documentation calls it %s [blocks %d, block size %d, kv heads %d, "
                   "head size %d, "
                   "dtype %d, scales %g %g, key %p, value %p]", names[0],
                   verdicts[0] ? "accepts" : "refuses",
                   names[i], verdicts[i] ? "accepts" : "refuses", doc ? "valid" : "invalid",
                   c.num_blocks,
                   c.block_size, c.num_kv_heads, c.head_size, (int)c.dtype, c.k_scale, c.v_scale,
                   c.key,
                   c.value);
    fz_cache_free(&fc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_in in = {data, size, 0};
    uint64_t rng = fz_u32(&in);
    switch (fz_int(&in, 0, 3)) {
        case 0: op_write_kv(&in, &rng); break;
        case 1: op_swap(&in, &rng); break;
        case 2: op_copy(&in, &rng); break;
        default: op_validators(&in, &rng); break;
    }
    return 0;
}
