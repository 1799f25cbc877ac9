/* fuzz_pool.c - the block pool and its sequences under fuzzed operation sequences: appends
   (with copy-on-write of a shared last block), forks, truncations, releases, exhaustion and
   recovery, and calls with broken arguments (a pool or sequence struct whose fields disagree,
   a child that is not empty or shares its parent's table, NULL buffers, negative counts); with
   a prefix cache attached (most inputs; sometimes a hash of 0 to 3 bits, so that entries
   collide), lookups, sequences over two namespaces and small alphabets of token ids, and
   evictions.
   A model from the documentation predicts each status and what a successful call does (the
   slots, the copy-on-write pair, which blocks are taken and given back). After every operation
   the pool's invariants hold (tests/pool_check.h): each refcount equals the number of table
   entries that name the block, each block is held, free (on the free stack once) or cached and
   evictable (in the LRU list once, in order), the counts agree, every cached block is in its
   hash bucket, every sequence has ceil(len / block_size) blocks. A lookup's hit is exact: each
   block found holds the sequence's token ids in its namespace and follows the one before it.
   An error changes nothing. */
#include "fuzz.h"
#include "../pool_check.h"

enum { MAX_SEQS = 6, MAX_TABLE = 12, MAX_OPS = 300, MAX_TOKENS = MAX_TABLE * 8 };

typedef struct world {
    attn_block_pool pool;
    void *mem, *cache_mem;
    size_t mem_bytes, cache_bytes;
    attn_seq seq[MAX_SEQS];
    int32_t table[MAX_SEQS][MAX_TABLE];
    int32_t tok[MAX_SEQS][MAX_TOKENS];  /* each sequence's token ids */
} world;

/* The invariants, from the tables alone (an independent recount). */
static void check_invariants(const world *w, const char *after) {
    attn_seq *seqs[MAX_SEQS];
    char msg[256];
    for (int s = 0; s < MAX_SEQS; s++) seqs[s] = (attn_seq *)&w->seq[s];
    FZ_REQUIRE(pool_check(&w->pool, seqs, MAX_SEQS, msg, sizeof msg), "after %s: %s", after, msg);
}

/* Blocks no sequence holds (free or evictable): what an allocation can take. */
static int unheld_blocks(const world *w) {
    int n = 0;
    for (int b = 0; b < w->pool.num_blocks; b++) n += w->pool.refcount[b] == 0;
    return n;
}

/* Everything an operation may change, to compare after an error. */
static void snap_world(fz_snaps *s, const world *w) {
    fz_snap(s, "pool struct", &w->pool, sizeof w->pool);
    fz_snap(s, "pool memory", w->mem, w->mem_bytes);
    if (w->cache_mem) fz_snap(s, "cache memory", w->cache_mem, w->cache_bytes);
    fz_snap(s, "sequences", w->seq, sizeof w->seq);
    fz_snap(s, "tables", w->table, sizeof w->table);
}

/* A copy of a pool or sequence struct with one field that disagrees with the rest. */
static attn_block_pool broken_pool(fz_in *in, const attn_block_pool *p) {
    attn_block_pool b = *p;
    switch (fz_int(in, 0, 5)) {
        case 0: b.refcount = NULL; break;
        case 1: b.free_ids = NULL; break;
        case 2: b.num_blocks = fz_int(in, -1, 0); break;
        case 3: b.block_size = fz_int(in, -1, 0); break;
        case 4: b.num_free = b.num_blocks + fz_int(in, 1, 3); break;
        default: b.num_free = -fz_int(in, 1, 3); break;
    }
    return b;
}
static attn_seq broken_seq(fz_in *in, const attn_seq *q, int bs) {
    attn_seq b = *q;
    switch (fz_int(in, 0, 4)) {
        case 0: b.len = -fz_int(in, 1, 5); break;
        case 1: b.num_blocks = q->num_blocks + (fz_chance(in, 128) ? 1 : -1); break;
        case 2: b.len = q->len + bs; break;   /* more tokens than its blocks hold */
        case 3: b.max_blocks = q->num_blocks - 1; if (b.max_blocks >= 0) break; /* fall through */
        default: b.max_blocks = -1; break;
    }
    return b;
}

static int64_t blocks_for(int64_t len, int bs) { return (len + bs - 1) / bs; }

static void op_append(fz_in *in, world *w, int s, int broken) {
    attn_block_pool *p = &w->pool;
    attn_seq *q = &w->seq[s];
    fz_expect ex = {0};
    int bs = p->block_size;
    int n = fz_chance(in, 8) ? -fz_int(in, 1, 3) : fz_int(in, 0, fz_chance(in, 32) ? 100 : 20);
    int64_t slots[101], cow[1][2] = {{-7, -7}};
    int n_cow = -7;
    int null_slots = fz_chance(in, 4), null_cow = fz_chance(in, 48);
    attn_block_pool bp = broken == 1 ? broken_pool(in, p) : *p;
    attn_seq bq = broken == 2 ? broken_seq(in, q, bs) : *q;
    fz_bad_if(&ex, broken != 0, ATTN_ERR_INVALID_ARG);
    fz_bad_if(&ex, n < 0 || (n > 0 && null_slots), ATTN_ERR_INVALID_ARG);
    int partial = n > 0 && q->len % bs != 0;
    int cow_needed = partial && p->refcount[q->block_table[q->num_blocks - 1]] > 1;
    fz_bad_if(&ex, cow_needed && null_cow, ATTN_ERR_INVALID_ARG);
    int64_t new_blocks = n >= 0 ? blocks_for(q->len + n, bs) : q->num_blocks;
    fz_bad_if(&ex, new_blocks > q->max_blocks, ATTN_ERR_OUT_OF_RANGE);
    fz_bad_if(&ex, new_blocks - q->num_blocks + cow_needed > unheld_blocks(w),
              ATTN_ERR_OUT_OF_BLOCKS);
    for (int i = 0; i < n && q->len + i < MAX_TOKENS; i++)  /* the new tokens' ids, first */
        w->tok[s][q->len + i] = fz_int(in, 0, 2);
    /* the model: what is free now, and the table before */
    uint8_t *was_free = (uint8_t *)calloc((size_t)p->num_blocks, 1);
    for (int b = 0; b < p->num_blocks; b++) was_free[b] = p->refcount[b] == 0;
    int32_t before[MAX_TABLE] = {0};
    if (q->block_table) memcpy(before, q->block_table, sizeof before);  /* NULL: a table of 0 */
    int old_blocks = q->num_blocks;
    int64_t old_len = q->len;
    fz_snaps sn = {0};
    snap_world(&sn, w);
    fz_snap(&sn, "slots", slots, sizeof slots);
    fz_snap(&sn, "cow pairs", cow, sizeof cow);
    fz_snap(&sn, "n_cow", &n_cow, sizeof n_cow);
    attn_status st =
            attn_seq_append(broken == 1 ? &bp : p, broken == 2 ? &bq : q, n, null_slots ? NULL
                            : slots,
                                     null_cow ? NULL : cow, null_cow ? NULL : &n_cow);
    fz_check_status(&ex, st, "attn_seq_append");
    fz_unchanged_on_error(&sn, st, "attn_seq_append");
    if (st == ATTN_OK) {
        FZ_REQUIRE(q->len == old_len + n &&
                   q->num_blocks == new_blocks, "attn_seq_append: len %lld, %d blocks",
                   (long long)q->len, q->num_blocks);
        for (int b = 0; b < old_blocks - (cow_needed ? 1 : 0); b++)
            FZ_REQUIRE(q->block_table[b] == before[b], "attn_seq_append changed table entry %d", b);
        if (!null_cow) FZ_REQUIRE(n_cow == cow_needed, "attn_seq_append: n_cow %d, the model %d",
                                  n_cow, cow_needed);
        if (cow_needed) {
            int32_t fresh = q->block_table[old_blocks - 1];
            FZ_REQUIRE(cow[0][0] == before[old_blocks - 1] && cow[0][1] == fresh && was_free[fresh],
                       "attn_seq_append: copy-on-write pair (%lld, %lld), old block %d",
                       (long long)cow[0][0],
                       (long long)cow[0][1], (int)before[old_blocks - 1]);
            was_free[fresh] = 0;
        }
        for (int b = old_blocks; b < q->num_blocks; b++) {
            int32_t id = q->block_table[b];
            FZ_REQUIRE(id >= 0 && id < p->num_blocks &&
                       was_free[id], "attn_seq_append took block %d (not free)", (int)id);
            was_free[id] = 0;
        }
        for (int i = 0; i < n; i++) {
            int64_t pos = old_len + i, want = (int64_t)q->block_table[pos / bs] * bs + pos % bs;
            FZ_REQUIRE(slots[i] == want, "attn_seq_append: slot %d is %lld, the model %lld", i,
                       (long long)slots[i],
                       (long long)want);
        }
    }
    fz_snaps_free(&sn);
    free(was_free);
}

static void op_fork(fz_in *in, world *w, int s, int broken) {
    attn_block_pool *p = &w->pool;
    fz_expect ex = {0};
    int c = fz_int(in, 0, MAX_SEQS - 1);
    attn_seq *parent = &w->seq[s], *child = &w->seq[c];
    attn_seq shared = *child;
    int share = fz_chance(in, 8) && parent->num_blocks > 0;
    if (share) shared.block_table = parent->block_table;   /* the parent's own table */
    attn_block_pool bp = broken == 1 ? broken_pool(in, p) : *p;
    attn_seq bq = broken == 2 ? broken_seq(in, parent, p->block_size) : *parent;
    fz_bad_if(&ex, broken != 0 || c == s || child->len != 0 || child->num_blocks != 0 ||
              share, ATTN_ERR_INVALID_ARG);
    fz_bad_if(&ex, parent->num_blocks > child->max_blocks, ATTN_ERR_OUT_OF_RANGE);
    if (c != s && child->len == 0) memcpy(w->tok[c], w->tok[s], sizeof w->tok[s]);
    fz_snaps sn = {0};
    snap_world(&sn, w);
    fz_snap(&sn, "child copy", &shared, sizeof shared);
    attn_status st = attn_seq_fork(broken == 1 ? &bp : p, broken == 2 ? &bq : parent,
                                   share ? &shared : c == s && broken == 2 ? &bq : child);
    fz_check_status(&ex, st, "attn_seq_fork");
    fz_unchanged_on_error(&sn, st, "attn_seq_fork");
    if (st == ATTN_OK) {
        FZ_REQUIRE(child->len == parent->len && child->num_blocks == parent->num_blocks &&
                   (parent->num_blocks == 0 ||
                    !memcmp(child->block_table, parent->block_table,
                            sizeof(int32_t) * (size_t)parent->num_blocks)),
                   "attn_seq_fork: the child is not the parent's copy");
    }
    fz_snaps_free(&sn);
}

static void op_truncate(fz_in *in, world *w, int s, int broken) {
    attn_block_pool *p = &w->pool;
    attn_seq *q = &w->seq[s];
    fz_expect ex = {0};
    int64_t new_len = fz_int(in, -2, (int)q->len + 2);
    attn_block_pool bp = broken == 1 ? broken_pool(in, p) : *p;
    attn_seq bq = broken == 2 ? broken_seq(in, q, p->block_size) : *q;
    fz_bad_if(&ex, broken != 0 || new_len < 0 || new_len > q->len, ATTN_ERR_INVALID_ARG);
    int32_t before[MAX_TABLE] = {0};
    if (q->block_table) memcpy(before, q->block_table, sizeof before);  /* NULL: a table of 0 */
    fz_snaps sn = {0};
    snap_world(&sn, w);
    attn_status st = attn_seq_truncate(broken == 1 ? &bp : p, broken == 2 ? &bq : q, new_len);
    fz_check_status(&ex, st, "attn_seq_truncate");
    fz_unchanged_on_error(&sn, st, "attn_seq_truncate");
    if (st == ATTN_OK)
        FZ_REQUIRE(q->len == new_len && q->num_blocks == blocks_for(new_len, p->block_size) &&
                   (q->num_blocks == 0 ||
                    !memcmp(before, q->block_table, sizeof(int32_t) * (size_t)q->num_blocks)),
                   "attn_seq_truncate: len %lld, %d blocks", (long long)q->len, q->num_blocks);
    fz_snaps_free(&sn);
}

static void op_release(fz_in *in, world *w, int s, int broken) {
    attn_block_pool *p = &w->pool;
    attn_seq *q = &w->seq[s];
    attn_block_pool bp = broken == 1 ? broken_pool(in, p) : *p;
    attn_seq bq = broken == 2 ? broken_seq(in, q, p->block_size) : *q;
    fz_snaps sn = {0};
    snap_world(&sn, w);
    attn_seq_release(broken == 1 ? &bp : p, broken == 2 ? &bq : q);
    if (broken) {  /* no status to return: a broken argument changes nothing */
        int i = fz_snaps_changed(&sn);
        FZ_REQUIRE(i < 0, "attn_seq_release with a broken argument changed %s", sn.name[i]);
    } else {
        FZ_REQUIRE(q->len == 0 &&
                   q->num_blocks == 0, "attn_seq_release: len %lld, %d blocks", (long long)q->len,
                   q->num_blocks);
    }
    fz_snaps_free(&sn);
}

/* A lookup, sometimes into a sequence given new token ids and a namespace first. */
static void op_lookup(fz_in *in, world *w, int s, int broken) {
    attn_block_pool *p = &w->pool;
    attn_seq *q = &w->seq[s];
    fz_expect ex = {0};
    int bs = p->block_size, from = fz_int(in, 0, MAX_SEQS - 1);
    int64_t prompt = fz_int(in, -1, MAX_TOKENS);
    if (q->len == 0 && fz_chance(in, 128)) {  /* another's ids (a shared prefix), a few changed */
        for (int i = 0; i < MAX_TOKENS; i++)
            w->tok[s][i] = fz_chance(in, 16) ? fz_int(in, 0, 2) : w->tok[from][i];
        uint64_t ns = (uint64_t)fz_int(in, 0, 1);
        FZ_REQUIRE(attn_seq_set_tokens(q, fz_chance(in, 8) ? NULL : w->tok[s], ns) == ATTN_OK,
                   "attn_seq_set_tokens of an empty sequence");
    }
    attn_block_pool bp = broken == 1 ? broken_pool(in, p) : *p;
    attn_seq bq = broken == 2 ? broken_seq(in, q, bs) : *q;
    fz_bad_if(&ex, broken != 0 || p->cache.num_buckets == 0 || q->len != 0 || q->tokens == NULL ||
              prompt < 1, ATTN_ERR_INVALID_ARG);
    int64_t hit_before = p->cache.hit_tokens;
    fz_snaps sn = {0};
    snap_world(&sn, w);
    attn_status st = attn_prefix_cache_lookup(broken == 1 ? &bp : p, broken == 2 ? &bq : q,
                                              prompt);
    fz_check_status(&ex, st, "attn_prefix_cache_lookup");
    fz_unchanged_on_error(&sn, st, "attn_prefix_cache_lookup");
    if (st == ATTN_OK) {
        int64_t most = FZ_MIN((prompt - 1) / bs, (int64_t)q->max_blocks) * bs;
        FZ_REQUIRE(q->len % bs == 0 && q->len <= most && p->cache.hit_tokens - hit_before == q->len,
                   "attn_prefix_cache_lookup: %lld tokens found of %lld (at most %lld)",
                   (long long)q->len, (long long)prompt, (long long)most);
        for (int b = 0; b < q->num_blocks; b++) {
            int32_t id = q->block_table[b];
            uint64_t before = b ? p->cache.serial[q->block_table[b - 1]] : 0;
            FZ_REQUIRE(p->cache.serial[id] != 0 && p->cache.ns[id] == q->cache_ns &&
                       p->cache.parent[id] == before &&
                       !memcmp(p->cache.tokens + (size_t)id * (size_t)bs, q->tokens + b * bs,
                               sizeof(int32_t) * (size_t)bs),
                       "attn_prefix_cache_lookup: block %d (id %d) is not the sequence's", b,
                       (int)id);
        }
    }
    fz_snaps_free(&sn);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_in in = {data, size, 0};
    world *w = (world *)calloc(1, sizeof *w);
    int nb = fz_int(&in, 1, 32), bs = fz_int(&in, 1, 8);
    /* init: the documented refusals first */
    {
        fz_expect ex = {0};
        int r = fz_int(&in, 0, 15) - 11;  /* 0..4: a broken argument */
        int nb_call = r == 0 ? fz_int(&in, -2, 0) : nb, bs_call = r == 1 ? fz_int(&in, -2, 0) : bs;
        size_t need = attn_block_pool_bytes(nb_call);
        FZ_REQUIRE((need == 0) == (nb_call < 1), "attn_block_pool_bytes(%d) = %zu", nb_call, need);
        w->mem_bytes = need ? need : 64;
        w->mem = fz_alloc(w->mem_bytes);
        size_t bytes = r == 2 ? w->mem_bytes - 1 : w->mem_bytes;
        fz_bad_if(&ex, nb_call < 1 || bs_call < 1 || r == 3 || r == 4, ATTN_ERR_INVALID_ARG);
        fz_bad_if(&ex, r == 2, ATTN_ERR_WORKSPACE_TOO_SMALL);
        fz_snaps sn = {0};
        fz_snap(&sn, "pool struct", &w->pool, sizeof w->pool);
        attn_status st =
                attn_block_pool_init(r == 4 ? NULL : &w->pool, nb_call, bs_call, r == 3 ? NULL
                                     : w->mem, bytes);
        fz_check_status(&ex, st, "attn_block_pool_init");
        fz_unchanged_on_error(&sn, st, "attn_block_pool_init");
        fz_snaps_free(&sn);
        if (st != ATTN_OK) { free(w->mem); free(w); return 0; }
        FZ_REQUIRE(attn_block_pool_free_count(&w->pool) == nb &&
                   attn_block_pool_used_count(&w->pool) == 0,
                   "a fresh pool: %d free, %d used", attn_block_pool_free_count(&w->pool),
                   attn_block_pool_used_count(&w->pool));
    }
    if (fz_int(&in, 0, 3) != 0) {  /* a prefix cache, sometimes with a weak hash */
        w->cache_bytes = attn_prefix_cache_bytes(nb, bs);
        w->cache_mem = fz_alloc(w->cache_bytes);
        FZ_REQUIRE(attn_prefix_cache_init(&w->pool, w->cache_mem, w->cache_bytes) == ATTN_OK,
                   "attn_prefix_cache_init on a fresh pool");
        if (fz_chance(&in, 64)) w->pool.cache.hash_bits = fz_int(&in, 0, 3);
    }
    for (int s = 0; s < MAX_SEQS; s++) {
        int room = fz_int(&in, 0, MAX_TABLE);
        fz_expect ex = {0};
        int r = fz_int(&in, 0, 31);  /* 30, 31: a refused init first */
        if (r >= 30) {
            fz_snaps sn = {0};
            fz_snap(&sn, "sequence", &w->seq[s], sizeof w->seq[s]);
            attn_status st =
                    attn_seq_init(&w->seq[s], r == 30 ? NULL : w->table[s], r == 30
                                  ? FZ_MAX(room, 1) : -1);
            fz_bad(&ex, ATTN_ERR_INVALID_ARG);
            fz_check_status(&ex, st, "attn_seq_init");
            fz_unchanged_on_error(&sn, st, "attn_seq_init");
            fz_snaps_free(&sn);
        }
        if (attn_seq_init(&w->seq[s], room ? w->table[s] : NULL, room) != ATTN_OK) abort();
        if (attn_seq_set_tokens(&w->seq[s], w->tok[s], (uint64_t)(s % 2)) != ATTN_OK) abort();
    }
    check_invariants(w, "init");
    static const char *names[5] = {"append", "fork", "truncate", "release", "lookup"};
    for (int k = 0; k < MAX_OPS && in.at < in.n; k++) {
        int op = fz_int(&in, 0, 11), s = fz_int(&in, 0, MAX_SEQS - 1);
        int broken = fz_chance(&in, 12) ? fz_int(&in, 1, 2) : 0;  /* 1: the pool, 2: the sequence */
        op = op < 5 ? 0 : op < 7 ? 1 : op < 9 ? 2 : op < 10 ? 3 : 4;
        switch (op) {
            case 0: op_append(&in, w, s, broken); break;
            case 1: op_fork(&in, w, s, broken); break;
            case 2: op_truncate(&in, w, s, broken); break;
            case 3: op_release(&in, w, s, broken); break;
            default: op_lookup(&in, w, s, broken); break;
        }
        check_invariants(w, names[op]);
    }
    for (int s = 0; s < MAX_SEQS; s++) attn_seq_release(&w->pool, &w->seq[s]);
    check_invariants(w, "releasing every sequence");
    FZ_REQUIRE(attn_block_pool_free_count(&w->pool) == nb,
               "blocks leaked: %d of %d free after releasing everything",
               attn_block_pool_free_count(&w->pool), nb);
    free(w->mem);
    free(w->cache_mem);
    free(w);
    return 0;
}
