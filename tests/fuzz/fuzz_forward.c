/* fuzz_forward.c - attn_forward's metadata over a small real cache: counts, lengths, start
   locations, context lengths, block tables, slot mappings (negative, duplicate, past the end,
   another position's), layer types, encoder and cross fields, declared counts, the step's block
   copies, NULLs, rows and workspaces.
   The model (below, from the documentation of attn_forward and attn_metadata) predicts the
   status and, for an accepted call, everything it does: the cache after the block copies and
   the writes (bit for bit: rows of the cache dtype are copied, others rounded once, integer rows
   quantised by the reference of tests/ref.h), then every
   output row against tests/ref.h over the keys the model's cache holds. An error changes no
   output and no cache byte; the same call at another thread count gives the same bits (outputs
   and cache). */
#include "fuzz.h"

enum { MAX_PRE = 3, MAX_DEC = 3, MAX_SEQ = MAX_PRE + MAX_DEC, MAX_Q = 12, MAX_CTX = 24 };

typedef struct fcase {
    attn_layer layer;
    fz_params kp;
    attn_metadata md;
    int32_t qsl[MAX_PRE + 1], seq_lens[MAX_SEQ], ctx[MAX_PRE], enc_lens[MAX_SEQ],
    enc_loc[MAX_PRE + 1];
    int32_t *tables, *cross_tables;
    int64_t *slots, *cross_slots;
    int64_t copies[6];
    int lq[MAX_PRE], lenc[MAX_PRE], write_tokens, query_tokens;
    fz_rows q, k, v, out;
    fz_cache fc;
    int has_cache;
} fcase;

/* A block table [n][mb] whose first blocks (covering lens) are distinct cache ids (while the
   cache has enough; one row in eight names its first block twice), the rest random. */
static int32_t *gen_table(fz_in *in, uint64_t *rng, const int32_t *lens, int n, int bs, int nb,
                          int *mb,
                          fz_expect *ex) {
    int need = 0;
    for (int s = 0; s < n; s++) need = FZ_MAX(need, (FZ_MAX(lens[s], 0) + bs - 1) / bs);
    *mb = need + fz_int(in, 0, 2);
    if (fz_chance(in, 6) && need > 0) *mb = need - 1;
    /* room for n rows of up to 40 entries past the table: a broken cross_block_tables is this
       table read with the other table's row stride */
    size_t entries = (size_t)(n * *mb + n * 40 + 1);
    int32_t *t = (int32_t *)fz_alloc(sizeof(int32_t) * entries);
    for (size_t i = (size_t)(n * *mb); i < entries; i++) t[i] = (int32_t)fz_rand(rng);
    for (int s = 0; s < n; s++) {
        int32_t first = (int32_t)(fz_rand(rng) % (uint64_t)nb);
        for (int b = 0; b < *mb; b++)
            t[s * *mb + b] = b * bs < lens[s] ? (first + b) % nb : (int32_t)fz_rand(rng);
        if (*mb >= 2 && fz_rand(rng) % 8 == 0) t[s * *mb + 1] = t[s * *mb];
    }
    if (fz_chance(in, 6) && n > 0 && *mb > 0)
        t[fz_int(in, 0, n - 1) * *mb + fz_int(in, 0, *mb - 1)] = fz_chance(in, 128) ? -1 : nb;
    (void)ex;
    return t;
}

/* The slot of position pos of sequence s through table t (the slot a scheduler would give). */
static int64_t slot_of(const int32_t *t, int mb, int s, int pos, int bs) {
    return (int64_t)t[s * mb + pos / bs] * bs + pos % bs;
}

/* Slots for tokens [0, n): mostly the scheduler's, sometimes -1 (skip), a duplicate, one past
   the cache or below -1. */
static void mutate_slots(fz_in *in, int64_t *slots, int n, int64_t num_slots) {
    if (n == 0 || !fz_chance(in, 64)) return;
    int i = fz_int(in, 0, n - 1);
    switch (fz_int(in, 0, 3)) {
        case 0: slots[i] = -1; break;
        case 1: slots[i] = slots[fz_int(in, 0, n - 1)]; break;
        case 2: slots[i] = num_slots + fz_int(in, 0, 2); break;
        default: slots[i] = -fz_int(in, 2, 5); break;
    }
}

/* Offsets valid by the documentation: non-NULL, from 0, non-decreasing. */
static int offsets_ok(const int32_t *cu, int n) {
    if (!cu || cu[0] != 0) return 0;
    for (int i = 0; i < n; i++)
        if (cu[i + 1] < cu[i]) return 0;
    return 1;
}

/* Every block a sequence reads inside the table and the cache: the expected status. */
static void tables_model(const int32_t *t, int mb, const int32_t *lens, int n, int bs, int nb,
                         fz_expect *ex) {
    if (n > 0 && !lens) { fz_bad(ex, ATTN_ERR_INVALID_ARG); return; }
    if (mb < 0) { fz_bad(ex, ATTN_ERR_INVALID_ARG); fz_bad(ex, ATTN_ERR_OUT_OF_RANGE); }
    for (int s = 0; s < n; s++) {
        if (lens[s] < 0) { fz_bad(ex, ATTN_ERR_INVALID_ARG); continue; }
        int blocks = (lens[s] + bs - 1) / bs;
        if (blocks > mb) { fz_bad(ex, ATTN_ERR_OUT_OF_RANGE); continue; }
        if (blocks > 0 && !t) { fz_bad(ex, ATTN_ERR_INVALID_ARG); continue; }
        for (int b = 0; b < blocks; b++) {
            if (t[s * mb + b] < 0 || t[s * mb + b] >= nb) fz_bad(ex, ATTN_ERR_OUT_OF_RANGE);
            for (int e = 0; e < b; e++)  /* a block named twice in the row it reads */
                fz_bad_if(ex, t[s * mb + e] == t[s * mb + b], ATTN_ERR_INVALID_ARG);
        }
    }
}

/* Rows valid by the documentation (attn_rows): an activation dtype, stride 0 or >= width, data
   unless there are no tokens. */
static int rows_ok(const fz_rows *R, int64_t tokens) {
    return fz_is_act(R->r.dtype) && (R->r.stride == 0 || R->r.stride >= R->width) &&
           (tokens == 0 || R->r.data != NULL);
}

/* Rows attn_forward checks whenever they are given (data non-NULL), read or not: an activation
   dtype and stride 0 or >= width. */
static int rows_given_ok(const fz_rows *R) {
    return !R->r.data || (fz_is_act(R->r.dtype) && (R->r.stride == 0 || R->r.stride >= R->width));
}

/* Declared counts (num_seqs, num_tokens): mostly undeclared (0), sometimes right or one off. */
static void gen_declared(fz_in *in, attn_metadata *md, attn_type type) {
    int seqs = md->num_prefills + md->num_decode_tokens;
    int toks = (type == ATTN_ENCODER ? md->num_encoder_tokens : md->num_prefill_tokens) +
               md->num_decode_tokens;
    switch (fz_int(in, 0, 7)) {
        case 1: md->num_seqs = seqs + fz_int(in, -1, 1); break;
        case 2: md->num_tokens = toks + fz_int(in, -1, 1); break;
        case 3: md->num_seqs = seqs; md->num_tokens = toks; break;
        default: break;
    }
}

/* The step's block copies: mostly none; else up to 3 pairs with distinct destinations that are
   no pair's source, sometimes broken (a destination twice, a block copied onto itself, an id
   outside the cache, NULL pairs, a negative count). */
static void gen_copies(fz_in *in, uint64_t *rng, attn_metadata *md, int64_t *pairs, int nb) {
    if (!fz_chance(in, 64) || nb < 2) return;
    int n = FZ_MIN(fz_int(in, 1, 3), nb / 2), perm[16];
    for (int b = 0; b < nb; b++) perm[b] = b;
    for (int b = nb - 1; b > 0; b--) {
        int j = (int)(fz_rand(rng) % (uint64_t)(b + 1)), t = perm[b];
        perm[b] = perm[j]; perm[j] = t;
    }
    for (int i = 0; i < n; i++) {
        pairs[2 * i] = perm[n + (int)(fz_rand(rng) % (uint64_t)(nb - n))];
        pairs[2 * i + 1] = perm[i];
    }
    md->blocks_to_copy = pairs; md->num_blocks_to_copy = n;
    switch (fz_int(in, 0, 11)) {
        case 0: if (n > 1) pairs[3] = pairs[1]; break;
        case 1: pairs[0] = pairs[1]; break;
        case 2: pairs[2 * fz_int(in, 0, n - 1) + fz_int(in, 0, 1)] = fz_chance(in, 128) ? -1 : nb;
        break;
        case 3: md->blocks_to_copy = NULL; break;
        case 4: md->num_blocks_to_copy = -1; break;
        default: break;
    }
}

/* The expected status of the step's block copies (attn_copy_blocks' pair rules in one cache). */
static void copies_model(const attn_metadata *md, int has_cache, int nb, fz_expect *ex) {
    int n = md->num_blocks_to_copy;
    const int64_t *pr = md->blocks_to_copy;
    fz_bad_if(ex, n < 0 || (n > 0 && (!pr || !has_cache)), ATTN_ERR_INVALID_ARG);
    if (n <= 0 || !pr) return;
    for (int i = 0; i < 2 * n; i++) fz_bad_if(ex, pr[i] < 0 || pr[i] >= nb, ATTN_ERR_OUT_OF_RANGE);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            fz_bad_if(ex, (i != j && pr[2 * i + 1] == pr[2 * j + 1]) ||
                          pr[2 * j] == pr[2 * i + 1], ATTN_ERR_INVALID_ARG);
}

/* Every written slot is -1 or its position's entry in the block tables (rows in batch order):
   token i of sequence s at pos = lens[s] - Lq + i; cross: the encoder tokens of the prefills.
   Run only on metadata the model found consistent so far. */
static void slots_model(const attn_metadata *md, attn_type type, const int64_t *slots, int bs,
                        fz_expect *ex) {
    int cross = type == ATTN_ENCODER_DECODER;
    const int32_t *tables = cross ? md->cross_block_tables : md->block_tables;
    const int32_t *lens = cross ? md->encoder_seq_lens : md->seq_lens;
    const int32_t *st = cross ? md->encoder_start_loc : md->query_start_loc;
    int mb = cross ? md->max_cross_blocks_per_seq : md->max_blocks_per_seq;
    int nP = md->num_prefills, n = nP + (cross ? 0 : md->num_decode_tokens);
    if (!tables || !lens || mb <= 0) return;
    for (int s = 0; s < n; s++) {
        int pre = s < nP, t0 = pre ? st[s] : md->num_prefill_tokens + s - nP;
        int lq = pre ? st[s + 1] - st[s] : 1;
        for (int i = 0; i < lq; i++) {
            int pos = lens[s] - lq + i;
            if (slots[t0 + i] == -1 || pos < 0) continue;
            fz_bad_if(ex, pos / bs >= mb ||
                          slots[t0 + i] != slot_of(tables, mb, s, pos, bs), ATTN_ERR_INVALID_ARG);
        }
    }
}

static void ref_rows_seq(const attn_params *p, int causal, int Lq, int Lk, const float *q,
                         const float *k,
                         const float *v, double *out) {
    ref_attention(p, causal, Lq, Lk, q, 0, k, 0, v, 0, out, NULL);
}

static void ref_paged_seq(const attn_params *p, const fz_cache *fc, const float *kf,
                          const float *vf,
                          const int32_t *table, int causal, int Lq, int Lk, const float *q,
                          double *out) {
    size_t row = (size_t)p->num_kv_heads * p->head_size;
    float *k = (float *)fz_alloc(sizeof(float) * ((size_t)Lk * row + 1));
    float *v = (float *)fz_alloc(sizeof(float) * ((size_t)Lk * row + 1));
    ref_gather_paged(kf, fc->made.block_size, p->num_kv_heads, p->head_size, table, Lk, k);
    ref_gather_paged(vf, fc->made.block_size, p->num_kv_heads, p->head_size, table, Lk, v);
    ref_attention(p, causal, Lq, Lk, q, 0, k, 0, v, 0, out, NULL);
    free(k); free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* NaN in every cache slot that no paged read of the batch covers: a kernel that reads a slot at
   or past a sequence's length shows it in its outputs. */
static void mark_unread(fcase *c, attn_type type) {
    const attn_metadata *md = &c->md;
    const attn_kv_cache *m = &c->fc.made;
    int bs = m->block_size, nP = md->num_prefills, cross = type == ATTN_ENCODER_DECODER;
    const int32_t *lens = cross ? md->encoder_seq_lens : md->seq_lens;
    const int32_t *t = cross ? md->cross_block_tables : md->block_tables;
    int mb = cross ? md->max_cross_blocks_per_seq : md->max_blocks_per_seq;
    int paged_prefill = cross ? c->k.r.data == NULL : md->context_lens != NULL;
    uint8_t *read = (uint8_t *)calloc((size_t)m->num_blocks * bs, 1);
    for (int i = 0; i < md->num_blocks_to_copy; i++)  /* a copied block lands in a read one */
        for (int o = 0; o < bs; o++) read[md->blocks_to_copy[2 * i] * bs + o] = 1;
    for (int s = 0; s < nP + md->num_decode_tokens; s++) {
        if (s < nP && !paged_prefill) continue;
        for (int pos = 0; pos < lens[s]; pos++) read[slot_of(t, mb, s, pos, bs)] = 1;
    }
    for (int64_t slot = 0; slot < (int64_t)m->num_blocks * bs; slot++)
        if (!read[slot])
            for (int h = 0; h < m->num_kv_heads; h++) fz_cache_poison(&c->fc, slot / bs, h, slot % bs);
    free(read);
}

/* FZ_DEBUG=1: the case on stderr, to read a failing input. */
static void dump_ints(const char *name, const int32_t *a, int n) {
    fprintf(stderr, "%s:", name);
    for (int i = 0; a && i < n; i++) fprintf(stderr, " %d", a[i]);
    fprintf(stderr, a ? "\n" : " NULL\n");
}
static void dump_case(const fcase *c, attn_type type, const attn_exec *e) {
    const attn_metadata *md = &c->md;
    const attn_params *p = &c->kp.p;
    int n = md->num_prefills + md->num_decode_tokens;
    fprintf(stderr, "type %d H %d Hk %d D %d scale %g softcap %g window %d alibi %d sinks %d "
            "threads %d isa %d f32_probs %d\n", (int)type, p->num_heads, p->num_kv_heads,
            p->head_size, p->scale, p->logits_soft_cap, p->sliding_window,
            p->alibi_slopes != NULL, p->sinks != NULL, e ? e->num_threads : -1,
            e ? (int)e->isa : -1, e ? e->f32_probs : -1);
    fprintf(stderr, "cache dtype %d blocks %d bs %d; prefills %d tokens %d decodes %d\n",
            (int)c->fc.made.dtype, c->fc.made.num_blocks, c->fc.made.block_size,
            md->num_prefills, md->num_prefill_tokens, md->num_decode_tokens);
    dump_ints("query_start_loc", md->query_start_loc, md->num_prefills + 1);
    dump_ints("seq_lens", md->seq_lens, n);
    dump_ints("context_lens", md->context_lens, md->num_prefills);
    dump_ints("block_tables", md->block_tables, n * md->max_blocks_per_seq);
    fprintf(stderr, "slots:");
    for (int t = 0; md->slot_mapping && t < md->num_prefill_tokens + md->num_decode_tokens; t++)
        fprintf(stderr, " %lld", (long long)md->slot_mapping[t]);
    dump_ints("\nencoder_seq_lens", md->encoder_seq_lens, n);
    dump_ints("encoder_start_loc", md->encoder_start_loc, md->num_prefills + 1);
    dump_ints("cross_block_tables", md->cross_block_tables, n * md->max_cross_blocks_per_seq);
    fprintf(stderr, "num_encoder_tokens %d, cross slots:", md->num_encoder_tokens);
    for (int t = 0; md->cross_slot_mapping && t < md->num_encoder_tokens; t++)
        fprintf(stderr, " %lld", (long long)md->cross_slot_mapping[t]);
    fprintf(stderr, "\ncopies:");
    for (int i = 0; md->blocks_to_copy && i < md->num_blocks_to_copy; i++)
        fprintf(stderr, " %lld->%lld", (long long)md->blocks_to_copy[2 * i],
                (long long)md->blocks_to_copy[2 * i + 1]);
    fprintf(stderr, "\nq dtype %d stride %lld, k dtype %d stride %lld data %d, out dtype %d\n",
            (int)c->q.r.dtype, (long long)c->q.r.stride, (int)c->k.r.dtype,
            (long long)c->k.r.stride, c->k.r.data != NULL, (int)c->out.r.dtype);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_in in = {data, size, 0};
    fz_expect ex = {0}, pex = {0};
    fcase c;
    attn_exec exec;
    uint64_t rng = fz_u32(&in);
    memset(&c, 0, sizeof c);
    attn_metadata *md = &c.md;

    /* the layer: valid params (a refused layer never reaches attn_forward) */
    fz_gen_params(&in, &rng, &c.kp, 4, 24, &pex);
    if (!fz_ok(&pex)) {
        memset(&c.kp, 0, sizeof c.kp);
        c.kp.p.num_heads = c.kp.p.num_kv_heads = c.kp.p.head_size = 1;
        c.kp.tame = 1;
    }
    attn_type type = (attn_type)fz_int(&in, 0, 3);
    if (attn_layer_init(&c.layer, &c.kp.p, type, ATTN_BACKEND_SDPA) != ATTN_OK) abort();
    const attn_params *p = &c.kp.p;
    int H = p->num_heads, Hk = p->num_kv_heads, D = p->head_size, qw = H * D, kw = Hk * D;
    const attn_exec *e = fz_exec(&in, &exec, &ex);

    /* the cache */
    int bs = fz_int(&in, 1, 8), nb = fz_int(&in, 1, 16);
    attn_dtype cdt = (attn_dtype)fz_int(&in, 0, ATTN_DTYPE_COUNT - 1);
    float ks = fz_is_fp8(cdt) ? fz_uniform(&rng, 0.01f, 2.0f) : 1.0f,
          vs = fz_is_fp8(cdt) ? fz_uniform(&rng, 0.01f, 2.0f) : 1.0f;
    fz_cache_make(&c.fc, &rng, nb, bs, Hk, D, cdt, ks, vs, 0);
    c.has_cache = !fz_chance(&in, type == ATTN_ENCODER || type == ATTN_ENCODER_ONLY ? 128 : 8);
    int64_t num_slots = (int64_t)nb * bs;

    /* the batch */
    int P = fz_int(&in, 0, MAX_PRE), Dn = fz_int(&in, 0, MAX_DEC);
    if ((type == ATTN_ENCODER || type == ATTN_ENCODER_ONLY) && !fz_chance(&in, 16)) Dn = 0;
    int paged = type == ATTN_DECODER && fz_chance(&in, 160);            /* context_lens given */
    int cross_rows = type == ATTN_ENCODER_DECODER && fz_chance(&in, 160); /* encoder K/V given */
    md->num_prefills = P; md->num_decode_tokens = Dn;
    c.qsl[0] = c.enc_loc[0] = 0;
    for (int s = 0; s < P; s++) {
        c.ctx[s] = paged ? fz_int(&in, 0, MAX_CTX) : 0;
        c.lq[s] = fz_int(&in, 0, MAX_Q);
        c.lenc[s] = fz_int(&in, 0, MAX_Q);
        c.qsl[s + 1] = c.qsl[s] + c.lq[s];
        c.seq_lens[s] = c.ctx[s] + c.lq[s];
        c.enc_lens[s] = c.lenc[s];
        c.enc_loc[s + 1] = c.enc_loc[s] + c.lenc[s];
    }
    for (int i = 0; i < Dn; i++) {
        c.seq_lens[P + i] = fz_int(&in, 1, MAX_CTX);
        c.enc_lens[P + i] = fz_int(&in, 0, MAX_Q);
    }
    md->num_prefill_tokens = c.qsl[P];
    md->query_start_loc = c.qsl;
    md->seq_lens = c.seq_lens;
    md->context_lens = paged ? c.ctx : NULL;
    int enc = type == ATTN_ENCODER || type == ATTN_ENCODER_DECODER;
    if (enc) {
        md->encoder_seq_lens = c.enc_lens;
        md->encoder_start_loc = c.enc_loc;
        md->num_encoder_tokens = c.enc_loc[P];
    }
    c.tables = gen_table(&in, &rng, c.seq_lens, P + Dn, bs, nb, &md->max_blocks_per_seq, &ex);
    md->block_tables = c.tables;
    if (type == ATTN_ENCODER_DECODER) {
        c.cross_tables =
                gen_table(&in, &rng, c.enc_lens, P + Dn, bs, nb, &md->max_cross_blocks_per_seq,
                          &ex);
        md->cross_block_tables = c.cross_tables;
    }
    /* slots: the new tokens' (self) or the encoder tokens' (cross) */
    int self_tokens = c.qsl[P] + Dn;
    c.slots = (int64_t *)fz_alloc(sizeof(int64_t) * (size_t)(self_tokens + 1));
    for (int s = 0, t = 0; s < P + Dn; s++)
        for (int m = 0; m < (s < P ? c.lq[s] : 1); m++, t++) {
            int pos = s < P ? c.ctx[s] + m : c.seq_lens[s] - 1, mb = md->max_blocks_per_seq;
            c.slots[t] = pos / bs < mb ? slot_of(c.tables, mb, s, pos, bs) : -1;
            if (c.slots[t] >= num_slots || c.slots[t] < -1) c.slots[t] = -1;
        }
    mutate_slots(&in, c.slots, self_tokens, num_slots);
    md->slot_mapping = fz_chance(&in, 24) ? NULL : c.slots;
    int enc_tokens = c.enc_loc[P];
    /* room past the encoder tokens: a broken num_encoder_tokens counts up to 2 more */
    c.cross_slots = (int64_t *)fz_alloc(sizeof(int64_t) * (size_t)(enc_tokens + 3));
    for (int t = 0; t < enc_tokens + 3; t++) c.cross_slots[t] = -1;
    if (type == ATTN_ENCODER_DECODER) {
        for (int s = 0, t = 0; s < P; s++)
            for (int m = 0; m < c.lenc[s]; m++, t++) {
                int mb = md->max_cross_blocks_per_seq;
                c.cross_slots[t] = m / bs < mb ? slot_of(c.cross_tables, mb, s, m, bs) : -1;
                if (c.cross_slots[t] >= num_slots || c.cross_slots[t] < -1) c.cross_slots[t] = -1;
            }
        mutate_slots(&in, c.cross_slots, enc_tokens, num_slots);
        md->cross_slot_mapping = fz_chance(&in, 24) ? NULL : c.cross_slots;
    }

    /* hostile metadata: one field broken (or a field another type does not take) */
    switch (fz_int(&in, 0, 39) - 22) {  /* 0..17: broken */
        case 0: md->num_prefills = -1; break;
        case 1: md->num_decode_tokens = -fz_int(&in, 1, 2); break;
        case 2: md->num_prefill_tokens += fz_chance(&in, 128) ? 1 : -1; break;
        case 3: if (P > 0) c.qsl[fz_int(&in, 1, P)] -= fz_int(&in, 1, 20); break;
        case 4: md->query_start_loc = NULL; break;
        case 5: md->seq_lens = NULL; break;
        case 6: if (P + Dn > 0) c.seq_lens[fz_int(&in, 0, P + Dn - 1)] += fz_int(&in, -30, 3);
        break;
        case 7: if (P > 0) c.ctx[fz_int(&in, 0, P - 1)] += fz_int(&in, -5, 5); break;
        case 8: md->context_lens = c.ctx; break;   /* a prefix for any type */
        case 9: md->block_tables = NULL; break;
        case 10: md->max_blocks_per_seq = -fz_int(&in, 1, 2); break;
        case 11: md->encoder_seq_lens = fz_chance(&in, 128) ? NULL : c.enc_lens; break;
        case 12: md->encoder_start_loc = fz_chance(&in, 128) ? NULL : c.enc_loc; break;
        case 13: md->num_encoder_tokens += fz_int(&in, -2, 2); break;
        case 14: if (P + Dn > 0) c.enc_lens[fz_int(&in, 0, P + Dn - 1)] += fz_int(&in, -3, 3);
        break;
        case 15: md->cross_block_tables = fz_chance(&in, 128) ? NULL : c.tables; break;
        case 16: if (P > 0) c.enc_loc[fz_int(&in, 0, P)] += fz_int(&in, -3, 3); break;
        case 17: c.has_cache = !c.has_cache; break;
        default: break;
    }
    if (md->num_encoder_tokens < 0) md->num_encoder_tokens = 0;

    /* rows: queries and outputs over the query tokens, keys and values over the written ones */
    int qtokens = type == ATTN_ENCODER ? md->num_encoder_tokens : c.qsl[P] + Dn;
    int ktokens = type == ATTN_ENCODER ? md->num_encoder_tokens : type == ATTN_ENCODER_DECODER
                  ? enc_tokens : self_tokens;
    qtokens = FZ_MAX(qtokens, 0); ktokens = FZ_MAX(ktokens, 0);
    fz_expect rows_ex = {0};  /* which rows a call checks depends on the batch: the model below */
    fz_rows_make(&in, &rng, &c.q, qtokens, qw, 1, NULL, &rows_ex);
    fz_rows_make(&in, &rng, &c.out, qtokens, qw, 0, NULL, &rows_ex);
    fz_rows_make(&in, &rng, &c.k, ktokens, kw, 1, NULL, &rows_ex);
    fz_rows_make(&in, &rng, &c.v, ktokens, kw, 1, &c.k, &rows_ex);
    if (type == ATTN_ENCODER_DECODER && !cross_rows && c.k.r.data) {  /* cross K/V already cached */
        free(c.k.r.data); c.k.r.data = NULL; c.k.valid = 1;
    }
    attn_kv_cache *cache = c.has_cache ? &c.fc.c : NULL;
    gen_declared(&in, md, type);  /* read last: older corpus inputs keep their meaning */
    gen_copies(&in, &rng, md, c.copies, nb);
    md->profile_run = md->slot_mapping == NULL && fz_chance(&in, 128);  /* read last, as above */

    /* ---- the model of the status ---- */
    {
        int nP = md->num_prefills, nD = md->num_decode_tokens, pt = md->num_prefill_tokens;
        const int32_t *qs = md->query_start_loc;
        fz_bad_if(&ex, nP < 0 || nD < 0 || pt < 0, ATTN_ERR_INVALID_ARG);
        if (nP >= 0 && nD >= 0 && pt >= 0) {
            if (nP > 0) fz_bad_if(&ex, !offsets_ok(qs, nP) || qs[nP] != pt, ATTN_ERR_INVALID_ARG);
            else fz_bad_if(&ex, pt != 0, ATTN_ERR_INVALID_ARG);
            int qs_ok = nP > 0 && offsets_ok(qs, nP);
            int64_t Tq = qs_ok ? qs[nP] : 0;
            const int32_t *lens = md->seq_lens;
            int prefix = md->context_lens != NULL;
            int write_n = 0, need_cache = 0;
            const int64_t *wslots = NULL;
            const fz_rows *kr = &c.k;
            if (type == ATTN_DECODER || type == ATTN_ENCODER_ONLY) {
                fz_bad_if(&ex, type == ATTN_ENCODER_ONLY &&
                          (nD > 0 || prefix), ATTN_ERR_INVALID_ARG);
                if (prefix)
                    for (int s = 0; s < nP; s++)
                        fz_bad_if(&ex, !lens || md->context_lens[s] < 0 ||
                                       (qs_ok &&
                                        (int64_t)md->context_lens[s] + qs[s + 1] - qs[s] !=
                                                lens[s]),
                                  ATTN_ERR_INVALID_ARG);
                if (lens) {  /* the new tokens are counted in seq_lens; no prefix: exactly */
                    for (int s = 0; s < nP && qs_ok; s++)
                        fz_bad_if(&ex, prefix ? qs[s + 1] - qs[s] > lens[s]
                                              : qs[s + 1] - qs[s] != lens[s], ATTN_ERR_INVALID_ARG);
                    for (int i = 0; i < nD; i++) fz_bad_if(&ex, lens[nP + i] < 1,
                                                           ATTN_ERR_INVALID_ARG);
                }
                need_cache = prefix || nD > 0;
                fz_bad_if(&ex, need_cache && !lens, ATTN_ERR_INVALID_ARG);
                fz_bad_if(&ex, ((prefix && nP > 0) || nD > 0) && !md->block_tables,
                          ATTN_ERR_INVALID_ARG);
                if (cache && md->slot_mapping) {
                    wslots = md->slot_mapping; write_n = (int)Tq + nD;
                }
                /* a step that reads the cache writes its new tokens, or says it is a profiling
                   run */
                fz_bad_if(&ex, cache && !md->slot_mapping && !md->profile_run &&
                          (nD > 0 || (prefix && nP > 0)), ATTN_ERR_INVALID_ARG);
                /* rows: queries and outputs over all tokens, keys and values for the prefills'
                   own attention (plain) and for the writes */
                fz_bad_if(&ex, !rows_ok(&c.q, Tq + nD) ||
                          !rows_ok(&c.out, Tq + nD), ATTN_ERR_INVALID_ARG);
                if (!prefix) fz_bad_if(&ex, !rows_ok(&c.k, Tq) || !rows_ok(&c.v, Tq) ||
                                       c.k.r.dtype != c.v.r.dtype,
                                       ATTN_ERR_INVALID_ARG);
                if (lens && cache) {
                    if (prefix) tables_model(md->block_tables, md->max_blocks_per_seq, lens, nP, bs,
                                             nb, &ex);
                    if (nD) tables_model(md->block_tables
                                         ? md->block_tables + nP * md->max_blocks_per_seq : NULL,
                                         md->max_blocks_per_seq, lens + nP, nD, bs, nb, &ex);
                }
            } else if (type == ATTN_ENCODER) {
                const int32_t *el = md->encoder_start_loc;
                fz_bad_if(&ex, !md->encoder_seq_lens || !el || nD > 0 ||
                          prefix, ATTN_ERR_INVALID_ARG);
                fz_bad_if(&ex, el &&
                          (!offsets_ok(el, nP) || el[nP] != md->num_encoder_tokens),
                          ATTN_ERR_INVALID_ARG);
                int64_t Te = md->num_encoder_tokens;
                fz_bad_if(&ex, !rows_ok(&c.q, Te) || !rows_ok(&c.out, Te) || !rows_ok(&c.k, Te) ||
                               !rows_ok(&c.v, Te) ||
                                   c.k.r.dtype != c.v.r.dtype, ATTN_ERR_INVALID_ARG);
            } else {  /* ENCODER_DECODER */
                const int32_t *el = md->encoder_start_loc, *elen = md->encoder_seq_lens;
                fz_bad_if(&ex, !elen || !md->cross_block_tables, ATTN_ERR_INVALID_ARG);
                int cross_paged = c.k.r.data == NULL;
                if (!cross_paged && nP > 0) {
                    fz_bad_if(&ex, !el || !offsets_ok(el, nP) ||
                              el[nP] != md->num_encoder_tokens, ATTN_ERR_INVALID_ARG);
                    if (el && elen && offsets_ok(el, nP))
                        for (int s = 0; s < nP; s++) fz_bad_if(&ex, el[s + 1] - el[s] != elen[s],
                                                               ATTN_ERR_INVALID_ARG);
                    if (cache && md->cross_slot_mapping) {
                        wslots = md->cross_slot_mapping; write_n = md->num_encoder_tokens;
                    }
                }
                need_cache = cross_paged || nD > 0;
                int64_t Tk = !cross_paged && nP > 0 && el && offsets_ok(el, nP) ? el[nP] : 0;
                fz_bad_if(&ex, !rows_ok(&c.q, Tq + nD) ||
                          !rows_ok(&c.out, Tq + nD), ATTN_ERR_INVALID_ARG);
                if (!cross_paged) fz_bad_if(&ex, !rows_ok(&c.k, Tk) || !rows_ok(&c.v, Tk) ||
                                            c.k.r.dtype != c.v.r.dtype,
                                            ATTN_ERR_INVALID_ARG);
                if (elen && cache && md->cross_block_tables) {
                    if (cross_paged) tables_model(md->cross_block_tables,
                            md->max_cross_blocks_per_seq, elen, nP, bs, nb, &ex);
                    if (nD) tables_model(md->cross_block_tables + nP * md->max_cross_blocks_per_seq,
                                         md->max_cross_blocks_per_seq, elen + nP, nD, bs, nb, &ex);
                }
            }
            fz_bad_if(&ex, need_cache && !cache, ATTN_ERR_INVALID_ARG);
            if (wslots) {  /* attn_write_kv: rows over the written tokens, slots in the cache */
                fz_bad_if(&ex, !rows_ok(kr, write_n) ||
                          !rows_ok(&c.v, write_n), ATTN_ERR_INVALID_ARG);
                for (int t = 0; t < write_n; t++)
                    fz_bad_if(&ex, wslots[t] < -1 || wslots[t] >= num_slots, ATTN_ERR_OUT_OF_RANGE);
            }
            c.write_tokens = wslots ? write_n : 0;
            c.query_tokens = (int)(type == ATTN_ENCODER ? md->num_encoder_tokens : Tq + nD);
        }
    }

    if (fz_ok(&ex) && c.write_tokens)
        slots_model(md, type, type == ATTN_ENCODER_DECODER ? md->cross_slot_mapping
                    : md->slot_mapping, bs, &ex);
    fz_bad_if(&ex, !rows_given_ok(&c.k) || !rows_given_ok(&c.v), ATTN_ERR_INVALID_ARG);
    fz_bad_if(&ex, md->num_seqs != 0 &&
                   md->num_seqs != md->num_prefills + md->num_decode_tokens, ATTN_ERR_INVALID_ARG);
    fz_bad_if(&ex, md->num_tokens != 0 &&
                   md->num_tokens != (type == ATTN_ENCODER ? md->num_encoder_tokens
                                      : md->num_prefill_tokens) + md->num_decode_tokens,
              ATTN_ERR_INVALID_ARG);
    copies_model(md, c.has_cache, nb, &ex);

    if (fz_ok(&ex) && cache &&
        (type == ATTN_DECODER || type == ATTN_ENCODER_DECODER)) mark_unread(&c, type);

    if (getenv("FZ_DEBUG")) dump_case(&c, type, e);
    /* the call */
    size_t need = attn_forward_workspace_size(&c.layer, md, e), ws_bytes;
    void *ws = fz_gen_ws(&in, need, &ws_bytes, &ex);
    fz_snaps keep = {0}, outs = {0};
    fz_snap(&keep, "query", c.q.r.data, c.q.bytes);
    fz_snap(&keep, "key", c.k.r.data, c.k.bytes);
    fz_snap(&keep, "value", c.v.r.data, c.v.bytes);
    int ki = fz_snap(&outs, "key cache", c.fc.k, fz_cache_bytes(&c.fc));
    int vi = fz_snap(&outs, "value cache", c.fc.v, fz_cache_bytes(&c.fc));
    int oi = fz_snap(&outs, "out", c.out.r.data, c.out.bytes);
    attn_status st =
            attn_forward(&c.layer, e, c.q.r, c.k.r, c.v.r, cache, md, c.out.r, ws, ws_bytes);
    fz_check_status(&ex, st, "attn_forward");
    int i = fz_snaps_changed(&keep);
    FZ_REQUIRE(i < 0, "attn_forward wrote its input %s", keep.name[i]);
    fz_unchanged_on_error(&outs, st, "attn_forward");

    if (st == ATTN_OK) {
        /* the cache: the model's writes, bit for bit */
        size_t cb = fz_cache_bytes(&c.fc);
        void *kb = fz_alloc(cb), *vb = fz_alloc(cb);
        memcpy(kb, outs.copy[ki], cb); memcpy(vb, outs.copy[vi], cb);
        size_t block_bytes = fz_cache_block_bytes(&c.fc);
        for (int i = 0; i < md->num_blocks_to_copy; i++) {  /* copies first, then writes */
            size_t from = (size_t)md->blocks_to_copy[2 * i] * block_bytes;
            size_t to = (size_t)md->blocks_to_copy[2 * i + 1] * block_bytes;
            memcpy((char *)kb + to, (char *)kb + from, block_bytes);
            memcpy((char *)vb + to, (char *)vb + from, block_bytes);
        }
        const int64_t *wslots = type == ATTN_ENCODER_DECODER ? md->cross_slot_mapping
                                : md->slot_mapping;
        if (c.write_tokens) fz_model_writes(&c.fc, kb, vb, &c.k, &c.v, wslots, c.write_tokens);
        FZ_REQUIRE(fz_cache_same(&c.fc, kb, c.fc.k) &&
                   fz_cache_same(&c.fc, vb, c.fc.v), "attn_forward: the cache differs "
                   "from the model's writes (%d tokens)", c.write_tokens);
        free(kb); free(vb);
        /* the outputs, against the reference over the model's keys */
        if (c.kp.tame) {
            fz_cache_dequant(&c.fc);
            double *want = (double *)fz_alloc(sizeof(double) * (size_t)(c.query_tokens * qw + 1));
            int nP = md->num_prefills, causal = type == ATTN_DECODER;
            const int32_t *qs = type == ATTN_ENCODER ? md->encoder_start_loc : md->query_start_loc;
            int cross_paged = type == ATTN_ENCODER_DECODER && !c.k.r.data;
            const int32_t *kl = type == ATTN_ENCODER_DECODER ? md->encoder_seq_lens : md->seq_lens;
            const int32_t *tb = type == ATTN_ENCODER_DECODER ? md->cross_block_tables
                                : md->block_tables;
            int mb = type == ATTN_ENCODER_DECODER ? md->max_cross_blocks_per_seq
                     : md->max_blocks_per_seq;
            for (int s = 0; s < nP; s++) {
                int Lq = qs[s + 1] - qs[s];
                const float *qf = c.q.f + (int64_t)qs[s] * qw;
                double *o = want + (int64_t)qs[s] * qw;
                if (type == ATTN_ENCODER_DECODER ? cross_paged : md->context_lens != NULL) {
                    ref_paged_seq(p, &c.fc, c.fc.kf, c.fc.vf, tb + s * mb, causal, Lq, kl[s], qf,
                                  o);
                } else {
                    const int32_t *ks0 = type == ATTN_ENCODER_DECODER ? md->encoder_start_loc : qs;
                    int Lk = ks0[s + 1] - ks0[s];
                    ref_rows_seq(p, causal, Lq, Lk, qf, c.k.f + (int64_t)ks0[s] * kw,
                                 c.v.f + (int64_t)ks0[s] * kw, o);
                }
            }
            int t0 = type == ATTN_ENCODER ? 0 : md->num_prefill_tokens;
            for (int d = 0; d < md->num_decode_tokens; d++)
                ref_paged_seq(p, &c.fc, c.fc.kf, c.fc.vf, tb + (nP + d) * mb, 1, 1, kl[nP + d],
                              c.q.f + (int64_t)(t0 + d) * qw, want + (int64_t)(t0 + d) * qw);
            /* the bf16 kernels' rounding where the queries and either keys are bf16 */
            attn_dtype kdt = c.k.r.data && c.k.r.dtype == ATTN_BF16 ? ATTN_BF16 : c.fc.made.dtype;
            double atol_floor = fz_probs_atol(e, c.q.r.dtype, kdt);
            if (oi >= 0)
                fz_rows_check(&c.out, outs.copy[oi], want, c.query_tokens, atol_floor,
                              "attn_forward");
            free(want);
        }
        /* the same bits at another thread count, with a dirty workspace */
        void *k1 = fz_alloc(cb), *v1 = fz_alloc(cb), *o1 = fz_alloc(c.out.bytes);
        memcpy(k1, c.fc.k, cb); memcpy(v1, c.fc.v, cb);
        if (oi >= 0) memcpy(o1, c.out.r.data, c.out.bytes);
        fz_snaps_restore(&outs);
        attn_exec e2 = fz_exec_threads(e, fz_int(&in, 1, 16), 1);
        size_t bytes2 = attn_forward_workspace_size(&c.layer, md, &e2);
        void *ws2 = fz_alloc(bytes2);
        memset(ws2, 0xff, bytes2);
        st = attn_forward(&c.layer, &e2, c.q.r, c.k.r, c.v.r, cache, md, c.out.r, ws2, bytes2);
        FZ_REQUIRE(st == ATTN_OK, "attn_forward: %s at %d threads", attn_status_str(st),
                   e2.num_threads);
        FZ_REQUIRE((oi < 0 || !memcmp(o1, c.out.r.data, c.out.bytes)) && !memcmp(k1, c.fc.k, cb) &&
                   !memcmp(v1, c.fc.v, cb),
                   "attn_forward: other bits at %d threads", e2.num_threads);
        free(k1); free(v1); free(o1); free(ws2);
    }
    fz_snaps_free(&keep); fz_snaps_free(&outs);
    free(ws); free(c.tables); free(c.cross_tables); free(c.slots); free(c.cross_slots);
    fz_rows_free(&c.q); fz_rows_free(&c.out); fz_rows_free(&c.k); fz_rows_free(&c.v);
    fz_cache_free(&c.fc);
    return 0;
}
