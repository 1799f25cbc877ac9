/* fuzz_kernels.c - attn_sdpa, attn_paged_prefill and attn_paged_decode on fuzzed arguments:
   lengths and offsets, strides, dtypes, params (window, soft cap, sinks, ALiBi slopes with NaN
   and inf, huge finite values), block tables, caches, exec settings, workspaces one byte short.
   Properties (see fuzz.h): the status is the documented one; inputs are never written; an error
   writes nothing; an accepted call on tame values matches tests/ref.h, writes nothing outside
   its output rows, and gives the same bits at another thread count with a dirty workspace (and,
   for decode, in the other version: v1 == v2). */
#include "fuzz.h"

enum { MAX_SEQS = 4 };

/* Sequence lengths: mostly short, sometimes crossing a 512-token decode partition. */
static int gen_len(fz_in *in, int most) {
    return fz_chance(in, 8) ? fz_int(in, 0, 1100) : fz_int(in, 0, most);
}

/* The paged cache of a call: from the input's geometry (mostly the params'), dtype and scales;
   then perhaps made invalid in one of the ways the documentation lists. */
typedef struct kcache { fz_cache fc; int null_cache; } kcache;

static void gen_cache(fz_in *in, uint64_t *rng, kcache *kc, const attn_params *p, fz_expect *ex) {
    int Hk = p->num_kv_heads >= 1 && p->num_kv_heads <= FZ_MAX_H ? p->num_kv_heads : 1;
    int D = p->head_size >= 1 && p->head_size <= 200 ? p->head_size : 8;
    int nb = fz_int(in, 1, 24), bs = fz_chance(in, 32) ? 16 * fz_int(in, 1, 8) : fz_int(in, 1, 9);
    while (nb > 1 && (int64_t)nb * bs * Hk * D > 100000) nb /= 2;  /* a small cache: fast runs */
    attn_dtype dt = (attn_dtype)fz_int(in, 0, ATTN_DTYPE_COUNT - 1);
    float ks = fz_is_fp8(dt) ? fz_uniform(rng, 0.01f, 2.0f) : 1.0f;
    float vs = fz_is_fp8(dt) ? fz_uniform(rng, 0.01f, 2.0f) : 1.0f;
    fz_cache_make(&kc->fc, rng, nb, bs, Hk, D, dt, ks, vs, fz_chance(in, 16));
    attn_kv_cache *c = &kc->fc.c;
    kc->null_cache = 0;
    switch (fz_int(in, 0, 47) - 37) {
        case 0: c->key = NULL; break;
        case 1: c->value = NULL; break;
        case 2: c->num_blocks = fz_int(in, -2, 0); break;
        case 3: c->block_size = fz_int(in, -2, 0); break;
        case 4: c->dtype = (attn_dtype)fz_int(in, ATTN_DTYPE_COUNT, ATTN_DTYPE_COUNT + 4); break;
        case 5: c->k_scale = fz_chance(in, 128) ? fz_hostile_float(in) : -fz_uniform(rng, 0, 2);
        break;
        case 6: c->v_scale = fz_chance(in, 128) ? fz_hostile_float(in) : -fz_uniform(rng, 0, 2);
        break;
        case 7: if (!fz_is_fp8(dt)) c->k_scale = 2.0f; break;  /* unscaled dtypes have scale 1 */
        case 8: c->num_kv_heads += fz_chance(in, 128) ? 1 : -1; break;
        case 9: c->head_size += fz_chance(in, 128) ? 1 : -1; break;
        case 10: kc->null_cache = 1; break;
        default: break;  /* the cache as made, mostly */
    }
    int matches = c->num_kv_heads == p->num_kv_heads && c->head_size == p->head_size;
    fz_bad_if(ex, kc->null_cache || !fz_cache_struct_valid(c) || !matches, ATTN_ERR_INVALID_ARG);
}

/* Block tables [n][max_blocks] for lengths len: ids in the cache mostly (shared blocks allowed),
   entries past a sequence's blocks random (never read); perhaps an id outside the cache, a table
   too narrow for a length, a negative width, or NULL. When the call can be valid, marks the
   slots no sequence covers NaN, so a kernel that reads one shows it in its outputs. */
static int32_t *gen_tables(fz_in *in, uint64_t *rng, kcache *kc, const int32_t *len, int n,
                           int *max_blocks, fz_expect *ex) {
    const attn_kv_cache *c = &kc->fc.c, *m = &kc->fc.made;
    int bs = c->block_size >= 1 ? c->block_size : 1, nb = c->num_blocks, need = 0;
    for (int s = 0; s < n; s++) need =
            FZ_MAX(need, (int)(((int64_t)FZ_MAX(len[s], 0) + bs - 1) / bs));
    int r = fz_int(in, 0, 31) - 28;  /* 0..3: broken in one way */
    *max_blocks = need + fz_int(in, 0, 2);
    if (r == 0 && need > 0) *max_blocks = fz_int(in, 0, need - 1);
    if (r == 1) *max_blocks = -fz_int(in, 1, 3);
    int32_t *t = (int32_t *)fz_alloc(sizeof(int32_t) * (size_t)(n * FZ_MAX(*max_blocks, 0) + 1));
    for (int s = 0; s < n; s++)
        for (int b = 0; b < *max_blocks; b++) {
            int used = (int64_t)b * bs < len[s];
            t[s * *max_blocks + b] = used && nb >= 1 ? (int32_t)(fz_rand(rng) % (uint64_t)nb)
                                                     : (int32_t)fz_rand(rng);
        }
    if (r == 2 && n > 0 && *max_blocks > 0) {
        int s = fz_int(in, 0, n - 1), b = fz_int(in, 0, *max_blocks - 1);
        t[s * *max_blocks + b] = fz_chance(in, 128) ? -1 : nb + fz_int(in, 0, 3);
    }
    /* the model: every block a sequence reads inside the table and the cache */
    int out_of_range = 0, any_blocks = 0;
    for (int s = 0; s < n; s++) {
        if (len[s] < 0) continue;
        int64_t blocks = ((int64_t)len[s] + bs - 1) / bs;
        any_blocks |= blocks > 0;
        if (blocks > *max_blocks) { out_of_range = 1; continue; }
        for (int64_t b = 0; b < blocks; b++) {
            int32_t id = t[s * *max_blocks + b];
            if (id < 0 || id >= nb) out_of_range = 1;
        }
    }
    fz_bad_if(ex, out_of_range, ATTN_ERR_OUT_OF_RANGE);
    if (*max_blocks < 0) { fz_bad(ex, ATTN_ERR_INVALID_ARG); fz_bad(ex, ATTN_ERR_OUT_OF_RANGE); }
    if (r == 3) {
        free(t);
        if (any_blocks) fz_bad(ex, ATTN_ERR_INVALID_ARG);
        return NULL;
    }
    if (fz_ok(ex)) {  /* NaN in every slot that no sequence covers */
        uint8_t *covered = (uint8_t *)calloc((size_t)m->num_blocks * m->block_size, 1);
        for (int s = 0; s < n; s++)
            for (int64_t pos = 0; pos < len[s]; pos++)
                covered[(size_t)t[s * *max_blocks + pos / bs] * bs + (size_t)(pos % bs)] = 1;
        for (int64_t slot = 0; slot < (int64_t)m->num_blocks * m->block_size; slot++) {
            if (covered[slot]) continue;
            for (int h = 0; h < m->num_kv_heads; h++) fz_cache_poison(&kc->fc, slot / bs, h, slot % bs);
        }
        free(covered);
    }
    fz_cache_dequant(&kc->fc);
    return t;
}

/* The reference of one sequence over keys gathered from the paged cache. */
static void ref_paged(const attn_params *p, const fz_cache *fc, const int32_t *table, int causal,
                      int Lq, int Lk, const float *q, double *out, double *lse) {
    size_t row = (size_t)p->num_kv_heads * p->head_size;
    float *k = (float *)fz_alloc(sizeof(float) * ((size_t)Lk * row + 1));
    float *v = (float *)fz_alloc(sizeof(float) * ((size_t)Lk * row + 1));
    ref_gather_paged(fc->kf, fc->made.block_size, p->num_kv_heads, p->head_size, table, Lk, k);
    ref_gather_paged(fc->vf, fc->made.block_size, p->num_kv_heads, p->head_size, table, Lk, v);
    ref_attention(p, causal, Lq, Lk, q, 0, k, 0, v, 0, out, lse);
    free(k); free(v);
}

enum { OP_SDPA, OP_PREFILL, OP_DECODE };

typedef struct kcall {
    int op, n, causal, max_blocks;
    attn_paged_version version;
    const attn_params *p;
    fz_rows q, k, v, out;
    const int32_t *cu_q, *cu_k, *lens, *tables;
    kcache *kc;
    float *lse;
} kcall;

static size_t ws_query(const kcall *c, const attn_exec *e) {
    const attn_kv_cache *cache = c->kc && !c->kc->null_cache ? &c->kc->fc.c : NULL;
    switch (c->op) {
        case OP_SDPA: return attn_sdpa_workspace_size(c->p, e, c->cu_q, c->cu_k, c->n);
        case OP_PREFILL: return attn_paged_prefill_workspace_size(c->p, e, cache, c->cu_q, c->lens,
                                                                  c->n);
        default: return attn_paged_decode_workspace_size(c->p, e, cache, c->lens, c->n, c->version);
    }
}

static attn_status run(const kcall *c, const attn_exec *e, void *out, float *lse, void *ws,
                       size_t bytes) {
    const attn_kv_cache *cache = c->kc && !c->kc->null_cache ? &c->kc->fc.c : NULL;
    attn_rows o = c->out.r;
    o.data = out;
    switch (c->op) {
        case OP_SDPA:
            return attn_sdpa(c->p, e, c->q.r, c->k.r, c->v.r, o, c->cu_q, c->cu_k, c->n, c->causal,
                             lse, ws, bytes);
        case OP_PREFILL:
            return attn_paged_prefill(c->p, e, c->q.r, o, cache, c->tables, c->max_blocks, c->cu_q,
                                      c->lens,
                                      c->n, c->causal, lse, ws, bytes);
        default:
            return attn_paged_decode(c->p, e, c->q.r, o, cache, c->tables, c->max_blocks, c->lens,
                                     c->n,
                                     c->version, lse, ws, bytes);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_in in = {data, size, 0};
    fz_expect ex = {0};
    fz_params kp;
    kcall c;
    kcache kc;
    attn_exec exec;
    uint64_t rng = fz_u32(&in);
    static const char *names[3] = {"attn_sdpa", "attn_paged_prefill", "attn_paged_decode"};
    memset(&c, 0, sizeof c);
    c.op = fz_int(&in, 0, 2);
    fz_gen_params(&in, &rng, &kp, FZ_MAX_H, 136, &ex);
    c.p = fz_chance(&in, 2) ? NULL : &kp.p;
    fz_bad_if(&ex, !c.p, ATTN_ERR_INVALID_ARG);
    const attn_exec *e = fz_exec(&in, &exec, &ex);
    int H = kp.p.num_heads, Hk = kp.p.num_kv_heads, D = kp.p.head_size;
    int64_t qw = H >= 1 && D >= 1 ? (int64_t)H * D : 1, kw = Hk >= 1 &&
                 D >= 1 ? (int64_t)Hk * D : 1;
    int n = fz_int(&in, 0, MAX_SEQS), lq[MAX_SEQS], lk[MAX_SEQS];
    int32_t cu_q[MAX_SEQS + 1], cu_k[MAX_SEQS + 1], lens[MAX_SEQS + 1];
    c.n = fz_chance(&in, 4) ? -fz_int(&in, 1, 3) : n;
    fz_bad_if(&ex, c.n < 0, ATTN_ERR_INVALID_ARG);
    c.causal = fz_int(&in, 0, 1);
    for (int s = 0; s < n; s++) {
        lk[s] = gen_len(&in, 40);
        lq[s] = c.op == OP_DECODE ? 1 : fz_int(&in, 0, c.op == OP_PREFILL ? FZ_MIN(lk[s], 40) : 40);
        if (c.op == OP_PREFILL && fz_chance(&in, 8)) {  /* more new tokens than keys: refused */
            lq[s] = lk[s] + fz_int(&in, 1, 3);
            fz_bad(&ex, ATTN_ERR_INVALID_ARG);
        }
        lens[s] = lk[s];
        if (c.op != OP_SDPA && fz_chance(&in, 4)) {
            lens[s] = -fz_int(&in, 1, 3); fz_bad(&ex, ATTN_ERR_INVALID_ARG);
        }
    }
    int64_t Tq = 0, Tk = 0;
    for (int s = 0; s < n; s++) { Tq += lq[s]; Tk += lk[s]; }
    if (c.op == OP_DECODE) {  /* one row per sequence; the offsets only index the reference */
        cu_q[0] = 0;
        for (int s = 0; s < n; s++) cu_q[s + 1] = s + 1;
    } else {
        fz_gen_offsets(&in, cu_q, lq, n, &ex);
    }
    c.cu_q = cu_q;
    if (c.op == OP_SDPA) {
        fz_gen_offsets(&in, cu_k, lk, n, &ex);
        c.cu_k = cu_k;
        if (fz_chance(&in, 2)) { c.cu_k = NULL; fz_bad(&ex, ATTN_ERR_INVALID_ARG); }
    }
    if (c.op != OP_DECODE && fz_chance(&in, 2)) {
        c.cu_q = NULL; fz_bad(&ex, ATTN_ERR_INVALID_ARG);
    }
    c.lens = lens;
    if (c.op != OP_SDPA && n > 0 && fz_chance(&in, 2)) {
        c.lens = NULL; fz_bad(&ex, ATTN_ERR_INVALID_ARG);
    }
    if (c.op == OP_DECODE) {
        int rv = fz_int(&in, 0, 15);
        c.version = rv < 5 ? (attn_paged_version)(rv % 3) : rv == 15
                    ? (attn_paged_version)fz_int(&in, 3, 5)
                  : (attn_paged_version)(rv % 3);
        fz_bad_if(&ex, rv == 15, ATTN_ERR_INVALID_ARG);
    }
    /* rows: q and out over the query tokens; k and v (sdpa) over the key tokens */
    fz_rows_make(&in, &rng, &c.q, Tq, qw, 1, NULL, &ex);
    fz_rows_make(&in, &rng, &c.out, Tq, qw, 0, NULL, &ex);
    if (c.op == OP_SDPA) {
        fz_rows_make(&in, &rng, &c.k, Tk, kw, 1, NULL, &ex);
        fz_rows_make(&in, &rng, &c.v, Tk, kw, 1, &c.k, &ex);
        fz_bad_if(&ex, c.k.r.dtype != c.v.r.dtype, ATTN_ERR_INVALID_ARG);
    } else {
        gen_cache(&in, &rng, &kc, &kp.p, &ex);
        c.kc = &kc;
        c.tables = gen_tables(&in, &rng, &kc, lens, n, &c.max_blocks, &ex);
    }
    size_t lse_bytes;
    c.lse = fz_gen_lse(&in, &rng, Tq, H, &lse_bytes);

    /* the call, with snapshots of everything it may not write */
    size_t need = ws_query(&c, e), ws_bytes;
    void *ws = fz_gen_ws(&in, need, &ws_bytes, &ex);
    fz_snaps keep = {0}, outs = {0};
    fz_snap(&keep, "q", c.q.r.data, c.q.bytes);
    fz_snap(&keep, "k", c.k.r.data, c.k.bytes);
    fz_snap(&keep, "v", c.v.r.data, c.v.bytes);
    if (c.kc) {
        fz_snap(&keep, "key cache", kc.fc.k, fz_cache_bytes(&kc.fc));
        if (kc.fc.v != kc.fc.k) fz_snap(&keep, "value cache", kc.fc.v, fz_cache_bytes(&kc.fc));
    }
    fz_snap(&keep, "block tables", c.tables,
            sizeof(int32_t) * (size_t)(n * FZ_MAX(c.max_blocks, 0)));
    int out_i = fz_snap(&outs, "out", c.out.r.data, c.out.bytes);
    int lse_i = fz_snap(&outs, "lse", c.lse, lse_bytes);
    attn_status st = run(&c, e, c.out.r.data, c.lse, ws, ws_bytes);
    const char *name = names[c.op];
    fz_check_status(&ex, st, name);
    int i = fz_snaps_changed(&keep);
    FZ_REQUIRE(i < 0, "%s wrote its input %s", name, keep.name[i]);
    fz_unchanged_on_error(&outs, st, name);
    FZ_REQUIRE(!fz_ok(&ex) || need > 0, "%s's size query gave 0 for a valid call", name);

    if (st == ATTN_OK) {
        /* the reference, on tame values */
        if (kp.tame) {
            double *want = (double *)fz_alloc(sizeof(double) * (size_t)(Tq * qw + 1));
            double *want_lse = (double *)fz_alloc(sizeof(double) * (size_t)(Tq * H + 1));
            for (int s = 0; s < n; s++) {
                const float *qs = c.q.f + (int64_t)cu_q[s] * qw;
                double *o = want + (int64_t)cu_q[s] * qw, *l = want_lse + (int64_t)cu_q[s] * H;
                if (c.op == OP_SDPA)
                    ref_attention(&kp.p, c.causal, lq[s], lk[s], qs, 0,
                                  c.k.f + (int64_t)cu_k[s] * kw, 0,
                                  c.v.f + (int64_t)cu_k[s] * kw, 0, o, l);
                else
                    ref_paged(&kp.p, &kc.fc, c.tables ? c.tables + s * c.max_blocks : NULL,
                              c.op == OP_DECODE ? 1 : c.causal, lq[s], lens[s], qs, o, l);
            }
            double atol_floor = fz_probs_atol(e, c.q.r.dtype,
                                         c.op == OP_SDPA ? c.k.r.dtype : kc.fc.made.dtype);
            if (out_i >= 0) fz_rows_check(&c.out, outs.copy[out_i], want, Tq, atol_floor, name);
            if (c.lse) fz_check_lse(c.lse, want_lse, Tq * H, name);
            free(want); free(want_lse);
        }
        /* the same bits at another thread count, items in reverse, a dirty workspace, and (decode)
           the other version */
        kcall c2 = c;
        if (c.op == OP_DECODE && c.version != ATTN_PAGED_AUTO)
            c2.version = c.version == ATTN_PAGED_V1 ? ATTN_PAGED_V2 : ATTN_PAGED_V1;
        attn_exec e2 = fz_exec_threads(e, fz_int(&in, 1, 16), 1);
        size_t bytes2 = ws_query(&c2, &e2);
        void *ws2 = fz_alloc(bytes2), *out2 = out_i >= 0 ? fz_alloc(c.out.bytes) : NULL;
        float *lse2 = c.lse ? (float *)fz_alloc(lse_bytes) : NULL;
        memset(ws2, 0xff, bytes2);
        if (lse2) memcpy(lse2, outs.copy[lse_i], lse_bytes);  /* the bytes the first call saw */
        if (out2) memcpy(out2, outs.copy[out_i], c.out.bytes);
        FZ_REQUIRE(run(&c2, &e2, out2 ? out2 : c.out.r.data, lse2, ws2, bytes2) == ATTN_OK,
                   "%s: refused at %d threads", name, e2.num_threads);
        FZ_REQUIRE(!out2 ||
                   !memcmp(out2, c.out.r.data, c.out.bytes), "%s: other bits at %d threads (first "
                   "run: %d)", name, e2.num_threads, e ? e->num_threads : 1);
        FZ_REQUIRE(!c.lse ||
                   !memcmp(lse2, c.lse, lse_bytes), "%s: other lse bits at %d threads", name,
                   e2.num_threads);
        free(ws2); free(out2); free(lse2);
    }
    fz_snaps_free(&keep); fz_snaps_free(&outs);
    free(ws); free(c.lse); free((void *)c.tables);
    fz_rows_free(&c.q); fz_rows_free(&c.out);
    if (c.op == OP_SDPA) { fz_rows_free(&c.k); fz_rows_free(&c.v); }
    else fz_cache_free(&kc.fc);
    return 0;
}
