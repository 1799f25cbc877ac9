/* test_prefix.c - the prefix cache of the block pool (attn_prefix_cache_*): hits, the longest
   matching run, namespaces, collisions under a deliberately weak hash, eviction order,
   truncation and writes taking blocks out, copy-on-write, the pool's invariants after every
   call of a long random walk (tests/pool_check.h), and a reused prefix giving the outputs of
   recomputing it through the batch builder and attn_forward. */
#include "pool_check.h"

enum { TPC_SEQS = 6, TPC_MAXB = 12, TPC_MAXT = 64 };

typedef struct tpc_world {
    attn_block_pool pool;
    void *pmem, *cmem;
    attn_seq seq[TPC_SEQS];
    int32_t table[TPC_SEQS][TPC_MAXB];
    int32_t tok[TPC_SEQS][TPC_MAXT];
} tpc_world;

static int tpc_init(tpc_world *w, int nb, int bs) {
    memset(w, 0, sizeof *w);
    size_t pb = attn_block_pool_bytes(nb), cb = attn_prefix_cache_bytes(nb, bs);
    w->pmem = tu_alloc(pb); w->cmem = tu_alloc(cb);
    if (attn_block_pool_init(&w->pool, nb, bs, w->pmem, pb) != ATTN_OK ||
        attn_prefix_cache_init(&w->pool, w->cmem, cb) != ATTN_OK)
        return 0;
    for (int s = 0; s < TPC_SEQS; s++) {
        attn_seq_init(&w->seq[s], w->table[s], TPC_MAXB);
        attn_seq_set_tokens(&w->seq[s], w->tok[s], 0);
    }
    return 1;
}

static void tpc_free(tpc_world *w) { free(w->pmem); free(w->cmem); }

/* The invariants over every sequence of the world. */
static int tpc_ok(const tpc_world *w) {
    attn_seq *seqs[TPC_SEQS];
    char msg[200];
    for (int s = 0; s < TPC_SEQS; s++) seqs[s] = (attn_seq *)&w->seq[s];
    int ok = pool_check(&w->pool, seqs, TPC_SEQS, msg, sizeof msg);
    if (!ok) printf("  pool invariant: %s\n", msg);
    return ok;
}

/* Appends n tokens to sequence s (no copy-on-write expected unless cow is given). */
static attn_status tpc_append(tpc_world *w, int s, int n) {
    int64_t slots[TPC_MAXT], cow[1][2];
    int n_cow = 0;
    return attn_seq_append(&w->pool, &w->seq[s], n, slots, cow, &n_cow);
}

static void tpc_fill(tpc_world *w, int s, int n, int base) {
    for (int i = 0; i < n; i++) w->tok[s][i] = base + i;
}

TEST(prefix_cache_sizes_and_refusals) {
    CHECK(attn_prefix_cache_bytes(0, 4) == 0 && attn_prefix_cache_bytes(4, 0) == 0);
    CHECK(attn_prefix_cache_bytes(-1, 4) == 0 && attn_prefix_cache_bytes(1 << 30, 1) == 0);
    CHECK(attn_prefix_cache_bytes(8, 4) > 8 * 4 * sizeof(int32_t));
    size_t pb = attn_block_pool_bytes(8), cb = attn_prefix_cache_bytes(8, 4);
    char *pmem = (char *)tu_alloc(pb), *cmem = (char *)tu_alloc(cb + 1);
    attn_block_pool pool;
    attn_seq q;
    int32_t table[4], tok[16] = {0};
    memset(&pool, 0, sizeof pool);  /* the padding too: the struct is compared byte for byte */
    memset(&q, 0, sizeof q);
    REQUIRE(attn_block_pool_init(&pool, 8, 4, pmem, pb) == ATTN_OK);
    CHECK(pool.cache.num_buckets == 0 && pool.cache.tokens == NULL);  /* off until attached */
    attn_seq_init(&q, table, 4);
    CHECK(q.tokens == NULL && q.cache_blocks == 0);
    CHECK_STATUS(attn_seq_set_tokens(&q, tok, 5), ATTN_OK);
    CHECK_STATUS(attn_prefix_cache_lookup(&pool, &q, 8), ATTN_ERR_INVALID_ARG);  /* no cache */
    attn_block_pool before = pool;
    CHECK_STATUS(attn_prefix_cache_init(&pool, cmem, cb - 1), ATTN_ERR_WORKSPACE_TOO_SMALL);
    CHECK_STATUS(attn_prefix_cache_init(&pool, NULL, cb), ATTN_ERR_INVALID_ARG);
    CHECK_STATUS(attn_prefix_cache_init(NULL, cmem, cb), ATTN_ERR_INVALID_ARG);
    CHECK(memcmp(&before, &pool, sizeof pool) == 0);
    CHECK_STATUS(attn_prefix_cache_init(&pool, cmem + 1, cb), ATTN_OK);  /* any alignment */
    CHECK_STATUS(attn_prefix_cache_lookup(&pool, &q, 0), ATTN_ERR_INVALID_ARG);
    /* a pool with blocks in use cannot take a cache */
    int64_t slots[5];
    REQUIRE(attn_seq_append(&pool, &q, 5, slots, NULL, NULL) == ATTN_OK);
    before = pool;
    CHECK_STATUS(attn_prefix_cache_init(&pool, cmem + 1, cb), ATTN_ERR_INVALID_ARG);
    CHECK(memcmp(&before, &pool, sizeof pool) == 0);
    /* a lookup into a sequence that is not empty, or has no token ids, changes nothing */
    attn_seq q_before = q;
    CHECK_STATUS(attn_prefix_cache_lookup(&pool, &q, 8), ATTN_ERR_INVALID_ARG);
    CHECK(memcmp(&q_before, &q, sizeof q) == 0);
    CHECK_STATUS(attn_seq_set_tokens(&q, tok, 6), ATTN_ERR_INVALID_ARG);  /* ns of a full one */
    CHECK_STATUS(attn_seq_set_tokens(&q, NULL, 5), ATTN_OK);
    attn_seq_release(&pool, &q);
    CHECK_STATUS(attn_prefix_cache_lookup(&pool, &q, 8), ATTN_ERR_INVALID_ARG);  /* no ids */
    CHECK_STATUS(attn_seq_set_tokens(&q, tok, 6), ATTN_OK);  /* empty: a new namespace */
    CHECK_STATUS(attn_prefix_cache_lookup(&pool, &q, 8), ATTN_OK);
    CHECK(pool.cache.lookups == 1 && pool.cache.lookup_tokens == 8);
    free(pmem); free(cmem);
}

/* A released prompt's full blocks are found again by the longest matching run, never more than
   leaves the last prompt token to compute; the counters follow. */
TEST(prefix_cache_finds_longest_matching_run) {
    static tpc_world w;
    REQUIRE(tpc_init(&w, 16, 4));
    tpc_fill(&w, 0, 14, 100);
    REQUIRE(tpc_append(&w, 0, 14) == ATTN_OK);  /* blocks 0..2 full and entered, 3 partial */
    CHECK_EQ_INT(w.pool.cache.num_cached, 3);
    CHECK_EQ_INT(w.pool.cache.inserts, 3);
    int32_t a[4];
    memcpy(a, w.table[0], sizeof a);
    attn_seq_release(&w.pool, &w.seq[0]);
    CHECK(tpc_ok(&w));
    CHECK_EQ_INT(w.pool.cache.num_evictable, 3);
    CHECK_EQ_INT(attn_block_pool_free_count(&w.pool), 16);  /* cached but free to take */
    /* the same 14 tokens: 3 blocks = 12 tokens (13 would leave no token) */
    tpc_fill(&w, 1, 14, 100);
    CHECK_STATUS(attn_prefix_cache_lookup(&w.pool, &w.seq[1], 14), ATTN_OK);
    CHECK_EQ_INT(w.seq[1].len, 12);
    CHECK(memcmp(w.table[1], a, 3 * sizeof(int32_t)) == 0);
    CHECK_EQ_INT(w.pool.cache.num_evictable, 0);
    CHECK(tpc_ok(&w));
    /* exactly 12 tokens: the last must be computed, so 2 blocks */
    tpc_fill(&w, 2, 12, 100);
    CHECK_STATUS(attn_prefix_cache_lookup(&w.pool, &w.seq[2], 12), ATTN_OK);
    CHECK_EQ_INT(w.seq[2].len, 8);
    CHECK_EQ_INT(w.pool.refcount[a[0]], 2);
    CHECK_EQ_INT(w.pool.refcount[a[2]], 1);
    /* a token changed in block 1: only block 0 matches, even though block 2's ids are equal */
    tpc_fill(&w, 3, 14, 100);
    w.tok[3][6] = 7;
    CHECK_STATUS(attn_prefix_cache_lookup(&w.pool, &w.seq[3], 14), ATTN_OK);
    CHECK_EQ_INT(w.seq[3].len, 4);
    /* a different first token: a miss */
    tpc_fill(&w, 4, 14, 101);
    CHECK_STATUS(attn_prefix_cache_lookup(&w.pool, &w.seq[4], 14), ATTN_OK);
    CHECK_EQ_INT(w.seq[4].len, 0);
    CHECK(w.pool.cache.lookups == 4 && w.pool.cache.lookup_tokens == 54 &&
          w.pool.cache.hit_tokens == 24);
    CHECK(tpc_ok(&w));
    /* sequence 3 goes on from its hit: its second block is its own, entered when full */
    REQUIRE(tpc_append(&w, 3, 10) == ATTN_OK);
    CHECK_EQ_INT(w.seq[3].cache_blocks, 3);
    CHECK(w.table[3][1] != a[1] && w.pool.cache.serial[w.table[3][1]] != 0);
    /* sequence 1 completes the prompt: block 3 is entered, blocks 0..2 were already */
    long inserts = (long)w.pool.cache.inserts;
    REQUIRE(tpc_append(&w, 1, 4) == ATTN_OK);
    CHECK_EQ_INT(w.pool.cache.inserts, inserts + 1);
    CHECK(tpc_ok(&w));
    for (int s = 0; s < TPC_SEQS; s++) attn_seq_release(&w.pool, &w.seq[s]);
    CHECK(tpc_ok(&w));
    CHECK_EQ_INT(attn_block_pool_free_count(&w.pool), 16);
    tpc_free(&w);
}

/* The same tokens in two namespaces are two entries; neither finds the other's. */
TEST(prefix_cache_namespaces_never_mix) {
    static tpc_world w;
    REQUIRE(tpc_init(&w, 16, 4));
    tpc_fill(&w, 0, 9, 5);
    REQUIRE(attn_seq_set_tokens(&w.seq[0], w.tok[0], 1) == ATTN_OK);
    REQUIRE(tpc_append(&w, 0, 9) == ATTN_OK);
    attn_seq_release(&w.pool, &w.seq[0]);
    tpc_fill(&w, 1, 9, 5);
    REQUIRE(attn_seq_set_tokens(&w.seq[1], w.tok[1], 2) == ATTN_OK);
    CHECK_STATUS(attn_prefix_cache_lookup(&w.pool, &w.seq[1], 9), ATTN_OK);
    CHECK_EQ_INT(w.seq[1].len, 0);  /* namespace 2 sees nothing of namespace 1 */
    REQUIRE(tpc_append(&w, 1, 9) == ATTN_OK);
    CHECK_EQ_INT(w.pool.cache.num_cached, 4);  /* its own two entries beside namespace 1's */
    attn_seq_release(&w.pool, &w.seq[1]);
    for (int ns = 1; ns <= 3; ns++) {
        attn_seq *q = &w.seq[2];
        tpc_fill(&w, 2, 9, 5);
        REQUIRE(attn_seq_set_tokens(q, w.tok[2], (uint64_t)ns) == ATTN_OK);
        CHECK_STATUS(attn_prefix_cache_lookup(&w.pool, q, 9), ATTN_OK);
        CHECK_EQ_INT(q->len, ns == 3 ? 0 : 8);
        for (int b = 0; b < q->num_blocks; b++)
            CHECK(w.pool.cache.ns[q->block_table[b]] == (uint64_t)ns);
        attn_seq_release(&w.pool, q);
    }
    CHECK(tpc_ok(&w));
    tpc_free(&w);
}

/* With a hash of 0 or 2 bits every entry collides with others: lookups still find exactly the
   blocks whose tokens and predecessors match, and no other. */
TEST(prefix_cache_collisions_never_reuse) {
    for (int bits = 0; bits <= 2; bits += 2) {
        static tpc_world w;
        REQUIRE(tpc_init(&w, 32, 2));
        w.pool.cache.hash_bits = bits;
        /* five prompts of 8 tokens from an alphabet of 2: many share some prefix */
        static const int32_t prompts[5][8] = {{0, 1, 0, 1, 1, 1, 0, 0}, {0, 1, 0, 0, 1, 1, 0, 0},
                                              {1, 1, 0, 1, 1, 1, 0, 0}, {0, 1, 0, 1, 1, 1, 1, 0},
                                              {1, 0, 1, 0, 0, 1, 0, 1}};
        for (int p = 0; p < 5; p++) {
            memcpy(w.tok[0], prompts[p], sizeof prompts[p]);
            if (attn_prefix_cache_lookup(&w.pool, &w.seq[0], 8) != ATTN_OK ||
                tpc_append(&w, 0, 8 - (int)w.seq[0].len) != ATTN_OK) {
                CHECK_MSG(0, "prompt %d", p);
                break;
            }
            attn_seq_release(&w.pool, &w.seq[0]);
            CHECK(tpc_ok(&w));
        }
        /* every query of 8 tokens: the hit is the longest prefix (in blocks of 2, at most 3
           blocks) shared with one of the prompts, and the hit blocks hold those tokens */
        for (int x = 0; x < 256; x++) {
            attn_seq *q = &w.seq[1];
            for (int i = 0; i < 8; i++) w.tok[1][i] = (x >> i) & 1;
            int want = 0;
            for (int p = 0; p < 5; p++) {
                int m = 0;
                while (m < 3 && !memcmp(prompts[p], w.tok[1], sizeof(int32_t) * 2 * (m + 1))) m++;
                if (m > want) want = m;
            }
            REQUIRE(attn_prefix_cache_lookup(&w.pool, q, 8) == ATTN_OK);
            CHECK_MSG(q->len == 2 * want, "bits %d query %d: %lld tokens found, %d share a prompt",
                      bits, x, (long long)q->len, 2 * want);
            for (int b = 0; b < q->num_blocks; b++)
                CHECK(!memcmp(w.pool.cache.tokens + 2 * q->block_table[b], w.tok[1] + 2 * b,
                              2 * sizeof(int32_t)));
            attn_seq_release(&w.pool, q);
        }
        CHECK(tpc_ok(&w));
        tpc_free(&w);
    }
}

/* Allocation takes never-cached free blocks first, then evicts least recently released first
   (a sequence's last block before its first), and never a held block. */
TEST(prefix_cache_eviction_order) {
    static tpc_world w;
    REQUIRE(tpc_init(&w, 8, 2));
    tpc_fill(&w, 0, 6, 10);  /* three full blocks each */
    tpc_fill(&w, 1, 6, 20);
    tpc_fill(&w, 2, 4, 30);
    REQUIRE(tpc_append(&w, 0, 6) == ATTN_OK && tpc_append(&w, 1, 6) == ATTN_OK);
    REQUIRE(tpc_append(&w, 2, 4) == ATTN_OK);
    int32_t a[3], b[3], c[2];
    memcpy(a, w.table[0], sizeof a); memcpy(b, w.table[1], sizeof b);
    memcpy(c, w.table[2], sizeof c);
    attn_seq_release(&w.pool, &w.seq[1]);  /* released first: b2, b1, b0 */
    attn_seq_release(&w.pool, &w.seq[0]);  /* then a2, a1, a0; c stays held */
    CHECK(tpc_ok(&w));
    CHECK_EQ_INT(w.pool.num_free, 0);
    CHECK_EQ_INT(attn_block_pool_free_count(&w.pool), 6);
    /* a hit on a's first block makes it held: it is skipped */
    tpc_fill(&w, 3, 3, 10);
    REQUIRE(attn_prefix_cache_lookup(&w.pool, &w.seq[3], 3) == ATTN_OK);
    CHECK_EQ_INT(w.seq[3].len, 2);
    CHECK_EQ_INT(w.pool.refcount[a[0]], 1);
    int32_t want[5] = {b[2], b[1], b[0], a[2], a[1]};
    tpc_fill(&w, 4, 10, 50);
    for (int i = 0; i < 5; i++) {
        REQUIRE(tpc_append(&w, 4, 2) == ATTN_OK);
        CHECK_MSG(w.table[4][i] == want[i], "allocation %d took block %d, want %d", i,
                  (int)w.table[4][i], (int)want[i]);
        CHECK_EQ_INT(w.pool.cache.evictions, i + 1);
        CHECK(tpc_ok(&w));
    }
    CHECK_STATUS(tpc_append(&w, 4, 1), ATTN_ERR_OUT_OF_BLOCKS);  /* a0 and c are held */
    /* the evicted prompts are gone: b finds nothing, a finds its held first block only */
    attn_seq_release(&w.pool, &w.seq[3]);
    tpc_fill(&w, 5, 6, 20);
    REQUIRE(attn_prefix_cache_lookup(&w.pool, &w.seq[5], 6) == ATTN_OK);
    CHECK_EQ_INT(w.seq[5].len, 0);
    /* never-cached free blocks go first: a pool with one */
    attn_seq_release(&w.pool, &w.seq[4]);  /* its five blocks: cached (full, with ids) */
    CHECK(tpc_ok(&w));
    tpc_free(&w);
    REQUIRE(tpc_init(&w, 4, 2));
    tpc_fill(&w, 0, 4, 1);
    REQUIRE(tpc_append(&w, 0, 4) == ATTN_OK);
    attn_seq_release(&w.pool, &w.seq[0]);  /* 2 cached + 2 never used */
    REQUIRE(attn_seq_set_tokens(&w.seq[1], NULL, 0) == ATTN_OK);
    REQUIRE(tpc_append(&w, 1, 4) == ATTN_OK);
    CHECK_EQ_INT(w.pool.cache.evictions, 0);
    CHECK_EQ_INT(w.pool.cache.num_cached, 2);
    CHECK(tpc_ok(&w));
    tpc_free(&w);
}

/* Truncation takes the blocks it cuts into or drops out of the cache; a shared cached block is
   copied on write as before; a fork keeps the chain. */
TEST(prefix_cache_truncate_fork_and_copy_on_write) {
    static tpc_world w;
    REQUIRE(tpc_init(&w, 16, 4));
    tpc_fill(&w, 0, 12, 40);
    REQUIRE(tpc_append(&w, 0, 12) == ATTN_OK);
    CHECK_EQ_INT(w.pool.cache.num_cached, 3);
    int32_t b2 = w.table[0][2];
    REQUIRE(attn_seq_truncate(&w.pool, &w.seq[0], 10) == ATTN_OK);  /* cuts into block 2 */
    CHECK(w.pool.cache.serial[b2] == 0);
    CHECK_EQ_INT(w.pool.cache.num_cached, 2);
    CHECK_EQ_INT(w.seq[0].cache_blocks, 2);
    CHECK(tpc_ok(&w));
    w.tok[0][10] = 99; w.tok[0][11] = 98;  /* other tokens after the cut */
    REQUIRE(tpc_append(&w, 0, 2) == ATTN_OK);  /* written in place, entered with the new ids */
    CHECK(w.pool.cache.serial[b2] != 0 && w.pool.cache.tokens[b2 * 4 + 2] == 99);
    CHECK(tpc_ok(&w));
    /* a lookup sees the new content only */
    tpc_fill(&w, 1, 13, 40);
    REQUIRE(attn_prefix_cache_lookup(&w.pool, &w.seq[1], 13) == ATTN_OK);
    CHECK_EQ_INT(w.seq[1].len, 8);
    attn_seq_release(&w.pool, &w.seq[1]);
    /* fork: the child holds the cached blocks too, and enters its own next block */
    tpc_fill(&w, 2, 16, 40);
    w.tok[2][10] = 99; w.tok[2][11] = 98; w.tok[2][12] = 7;
    REQUIRE(attn_seq_truncate(&w.pool, &w.seq[0], 12) == ATTN_OK);
    REQUIRE(attn_seq_fork(&w.pool, &w.seq[0], &w.seq[2]) == ATTN_OK);
    CHECK_EQ_INT(w.seq[2].cache_blocks, 3);
    REQUIRE(tpc_append(&w, 2, 4) == ATTN_OK);
    CHECK_EQ_INT(w.pool.cache.num_cached, 4);
    /* dropping a shared block through one sequence takes it out of the cache; the other keeps
       it (refcount 1) */
    REQUIRE(attn_seq_truncate(&w.pool, &w.seq[0], 8) == ATTN_OK);
    CHECK(w.pool.cache.serial[b2] == 0 && w.pool.refcount[b2] == 1);
    CHECK(tpc_ok(&w));
    /* copy-on-write of a shared partly filled block: the cached full blocks stay as they are */
    tpc_fill(&w, 3, 16, 60);
    REQUIRE(tpc_append(&w, 3, 6) == ATTN_OK);
    REQUIRE(attn_seq_set_tokens(&w.seq[4], w.tok[3], 0) == ATTN_OK);  /* the same ids */
    REQUIRE(attn_seq_fork(&w.pool, &w.seq[3], &w.seq[4]) == ATTN_OK);
    int64_t slots[4], cow[1][2];
    int n_cow = 0;
    REQUIRE(attn_seq_append(&w.pool, &w.seq[3], 2, slots, cow, &n_cow) == ATTN_OK);
    CHECK_EQ_INT(n_cow, 1);
    CHECK(w.pool.cache.serial[w.table[3][1]] != 0);  /* filled by the append: entered */
    REQUIRE(attn_seq_append(&w.pool, &w.seq[4], 2, slots, cow, &n_cow) == ATTN_OK);
    CHECK_EQ_INT(n_cow, 0);  /* its own now */
    CHECK(w.pool.cache.serial[w.table[4][1]] == 0);  /* the same content is cached already */
    CHECK_EQ_INT(w.seq[4].cache_blocks, 2);
    CHECK(tpc_ok(&w));
    for (int s = 0; s < TPC_SEQS; s++) attn_seq_release(&w.pool, &w.seq[s]);
    CHECK(tpc_ok(&w));
    CHECK_EQ_INT(attn_block_pool_free_count(&w.pool), 16);
    tpc_free(&w);
}

/* Thousands of random calls (appends, lookups, forks, truncations, releases, over two
   namespaces and a small alphabet, with a 3-bit hash half the time): the invariants after every
   call, and every hit is exact (its blocks hold the sequence's tokens, in its namespace). */
TEST(prefix_cache_random_walk_invariants) {
    static tpc_world w;
    uint64_t rng = 57;
    for (int round = 0; round < 4; round++) {
        REQUIRE(tpc_init(&w, 20, 1 + round));
        int bs = 1 + round;
        if (round % 2) w.pool.cache.hash_bits = 3;
        for (int step = 0; step < 1500; step++) {
            int s = attn_test_rand_int(&rng, 0, TPC_SEQS - 1), op = attn_test_rand_int(&rng, 0, 9);
            attn_seq *q = &w.seq[s];
            if (op < 4) {
                int n = attn_test_rand_int(&rng, 1, 8);
                for (int i = 0; i < n && q->len + i < TPC_MAXT; i++)
                    w.tok[s][q->len + i] = attn_test_rand_int(&rng, 0, 1);
                attn_status st = tpc_append(&w, s, n);
                CHECK(st == ATTN_OK || st == ATTN_ERR_OUT_OF_BLOCKS || st == ATTN_ERR_OUT_OF_RANGE);
            } else if (op < 6 && q->len == 0) {
                int n = attn_test_rand_int(&rng, 1, TPC_MAXT), from = (s + 1) % TPC_SEQS;
                for (int i = 0; i < n; i++) {  /* another's tokens, a few changed, or new ones */
                    int copy = op == 4 && attn_test_rand_int(&rng, 0, 15) != 0;
                    w.tok[s][i] = copy ? w.tok[from][i] : attn_test_rand_int(&rng, 0, 1);
                }
                REQUIRE(attn_seq_set_tokens(q, w.tok[s], (uint64_t)(s % 2)) == ATTN_OK);
                REQUIRE(attn_prefix_cache_lookup(&w.pool, q, n) == ATTN_OK);
                CHECK(q->len <= n - 1 && q->len % bs == 0);
                for (int b = 0; b < q->num_blocks; b++) {
                    int32_t id = q->block_table[b];
                    CHECK(w.pool.cache.ns[id] == (uint64_t)(s % 2) &&
                          !memcmp(w.pool.cache.tokens + (size_t)id * bs, w.tok[s] + b * bs,
                                  sizeof(int32_t) * (size_t)bs));
                }
            } else if (op == 6) {
                int c = attn_test_rand_int(&rng, 0, TPC_SEQS - 1);
                if (c != s && w.seq[c].len == 0) {
                    memcpy(w.tok[c], w.tok[s], sizeof w.tok[s]);
                    REQUIRE(attn_seq_fork(&w.pool, q, &w.seq[c]) == ATTN_OK);
                }
            } else if (op < 9) {
                CHECK_STATUS(attn_seq_truncate(&w.pool, q, attn_test_rand_int(&rng, 0,
                                                                          (int)q->len)), ATTN_OK);
            } else {
                attn_seq_release(&w.pool, q);
            }
            if (!tpc_ok(&w)) { CHECK_MSG(0, "round %d step %d op %d", round, step, op); break; }
        }
        CHECK_MSG(w.pool.cache.lookups > 50 && w.pool.cache.hit_tokens > 0 &&
                  w.pool.cache.evictions > 0,
                  "round %d: %lld lookups, %lld hit tokens, %lld evictions", round,
                  (long long)w.pool.cache.lookups, (long long)w.pool.cache.hit_tokens,
                  (long long)w.pool.cache.evictions);
        for (int s = 0; s < TPC_SEQS; s++) attn_seq_release(&w.pool, &w.seq[s]);
        CHECK(tpc_ok(&w));
        CHECK_EQ_INT(attn_block_pool_free_count(&w.pool), 20);
        tpc_free(&w);
    }
}

/* ---- a reused prefix through the batch builder and attn_forward ---- */
enum { TPF_H = 4, TPF_HK = 2, TPF_D = 16, TPF_BS = 4, TPF_BLOCKS = 40, TPF_MAXB = 16,
       TPF_MAXT = TPF_MAXB * TPF_BS };
#define TPF_QW (TPF_H * TPF_D)
#define TPF_KW (TPF_HK * TPF_D)

/* A token's query, key or value (kind 0, 1, 2) element i: a function of its id and position
   only, as a model's would be. */
static float tpf_value(int32_t id, int pos, int kind, int i) {
    uint64_t x = (uint64_t)(uint32_t)id * 0x9e3779b97f4a7c15ull ^
                 (uint64_t)pos * 0xc2b2ae3d27d4eb4full ^
                 (uint64_t)(kind * 4096 + i) * 0x165667b19e3779f9ull;
    x ^= x >> 31; x *= 0xbf58476d1ce4e5b9ull; x ^= x >> 29;
    return (float)(x % 2001) / 1000.0f - 1.0f;
}

typedef struct tpf_engine {
    attn_params p;
    attn_layer layer;
    attn_kv_cache cache;
    attn_block_pool pool;
    attn_batch batch;
    void *cmem, *pmem, *pcmem, *bmem;
} tpf_engine;

static int tpf_init(tpf_engine *e, int with_cache) {
    memset(e, 0, sizeof *e);
    e->p.num_heads = TPF_H; e->p.num_kv_heads = TPF_HK; e->p.head_size = TPF_D;
    size_t cb = attn_kv_cache_bytes(TPF_BLOCKS, TPF_BS, TPF_HK, TPF_D, ATTN_F32);
    size_t pb = attn_block_pool_bytes(TPF_BLOCKS), bb = attn_batch_bytes(4, TPF_MAXT, TPF_MAXB);
    size_t xb = attn_prefix_cache_bytes(TPF_BLOCKS, TPF_BS);
    e->cmem = tu_alloc(cb); e->pmem = tu_alloc(pb); e->bmem = tu_alloc(bb); e->pcmem = tu_alloc(xb);
    memset(e->cmem, 0x7f, cb);  /* junk where nothing was written */
    return attn_layer_init(&e->layer, &e->p, ATTN_DECODER, ATTN_BACKEND_SDPA) == ATTN_OK &&
           attn_kv_cache_init(&e->cache, TPF_BLOCKS, TPF_BS, TPF_HK, TPF_D, ATTN_F32, 1, 1,
                              e->cmem, cb) == ATTN_OK &&
           attn_block_pool_init(&e->pool, TPF_BLOCKS, TPF_BS, e->pmem, pb) == ATTN_OK &&
           (!with_cache || attn_prefix_cache_init(&e->pool, e->pcmem, xb) == ATTN_OK) &&
           attn_batch_init(&e->batch, 4, TPF_MAXT, TPF_MAXB, e->bmem, bb) == ATTN_OK;
}

static void tpf_free(tpf_engine *e) { free(e->cmem); free(e->pmem); free(e->pcmem); free(e->bmem); }

/* One step: sequences seqs[i] (token ids toks[i]) with num_new[i] new tokens; out gets the
   step's output rows in batch order. */
static attn_status tpf_step(tpf_engine *e, attn_seq **seqs, const int32_t *const *toks,
                            const int32_t *num_new, int n, float *out) {
    static float q[TPF_MAXT * TPF_QW], k[TPF_MAXT * TPF_KW], v[TPF_MAXT * TPF_KW];
    int64_t start[4];
    for (int i = 0; i < n; i++) start[i] = seqs[i]->len;
    attn_metadata md;
    attn_status st = attn_batch_build(&e->batch, &e->pool, seqs, num_new, n, &md);
    if (st != ATTN_OK) return st;
    int t = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < num_new[i]; j++, t++) {
            int pos = (int)start[i] + j;
            int32_t id = toks[i][pos];
            for (int x = 0; x < TPF_QW; x++) q[t * TPF_QW + x] = tpf_value(id, pos, 0, x);
            for (int x = 0; x < TPF_KW; x++) {
                k[t * TPF_KW + x] = tpf_value(id, pos, 1, x);
                v[t * TPF_KW + x] = tpf_value(id, pos, 2, x);
            }
        }
    attn_rows rq = {q, ATTN_F32, 0}, rk = {k, ATTN_F32, 0}, rv = {v, ATTN_F32, 0};
    attn_rows ro = {out, ATTN_F32, 0};
    size_t bytes = attn_forward_workspace_size(&e->layer, &md, NULL);
    void *ws = tu_alloc(bytes ? bytes : 1);
    st = attn_forward(&e->layer, NULL, rq, rk, rv, &e->cache, &md, ro, ws, bytes);
    free(ws);
    return st;
}

/* Request B shares request A's first 37 tokens. With the cache B starts from A's 9 full
   blocks and prefills only its last 14 tokens as a chunk over them, beside a decode of A in the
   same step; without it B computes all 50. B's output rows for those 14 positions agree (within
   the chunked-prefill tolerance, and with the double-precision reference); the K/V of the
   blocks B found are bitwise those B would have written. */
TEST(prefix_cache_reuse_equals_recompute) {
    static tpf_engine on, off;
    static float out_on[TPF_MAXT * TPF_QW], out_off[TPF_MAXT * TPF_QW], scratch[TPF_MAXT * TPF_QW];
    static double want[TPF_MAXT * TPF_QW];
    REQUIRE(tpf_init(&on, 1) && tpf_init(&off, 0));
    int32_t ta[TPF_MAXT], tb[TPF_MAXT];
    for (int i = 0; i < TPF_MAXT; i++) { ta[i] = 1000 + i; tb[i] = i < 37 ? 1000 + i : 7 * i; }
    int32_t tbl_a[TPF_MAXB], tbl_b[TPF_MAXB], tbl_c[TPF_MAXB];
    attn_seq a, b, c;
    attn_seq_init(&a, tbl_a, TPF_MAXB); attn_seq_init(&b, tbl_b, TPF_MAXB);
    attn_seq_init(&c, tbl_c, TPF_MAXB);
    REQUIRE(attn_seq_set_tokens(&a, ta, 9) == ATTN_OK && attn_seq_set_tokens(&b, tb, 9) == ATTN_OK);
    /* A: a 47-token prompt in two chunks, then one decode */
    REQUIRE(attn_prefix_cache_lookup(&on.pool, &a, 47) == ATTN_OK && a.len == 0);
    attn_seq *s1[1] = {&a};
    const int32_t *t1[1] = {ta};
    int32_t n1[1] = {30};
    REQUIRE(tpf_step(&on, s1, t1, n1, 1, scratch) == ATTN_OK);
    n1[0] = 17;
    REQUIRE(tpf_step(&on, s1, t1, n1, 1, scratch) == ATTN_OK);
    CHECK_EQ_INT(on.pool.cache.num_cached, 11);
    /* B arrives: a lookup, then its chunk beside A's decode */
    REQUIRE(attn_prefix_cache_lookup(&on.pool, &b, 50) == ATTN_OK);
    CHECK_EQ_INT(b.len, 36);
    attn_seq *s2[2] = {&b, &a};
    const int32_t *t2[2] = {tb, ta};
    int32_t n2[2] = {14, 1};
    REQUIRE(tpf_step(&on, s2, t2, n2, 2, out_on) == ATTN_OK);
    /* the same request computed whole, in a pool without a cache */
    attn_seq *s3[1] = {&c};
    const int32_t *t3[1] = {tb};
    int32_t n3[1] = {50};
    REQUIRE(tpf_step(&off, s3, t3, n3, 1, out_off) == ATTN_OK);
    CHECK_ALLCLOSE(out_on, out_off + 36 * TPF_QW, 14 * TPF_QW, 2e-6, 2e-5);
    /* and the oracle over B's 50 tokens */
    static float q[50 * TPF_QW], k[50 * TPF_KW], v[50 * TPF_KW];
    for (int pos = 0; pos < 50; pos++) {
        for (int x = 0; x < TPF_QW; x++) q[pos * TPF_QW + x] = tpf_value(tb[pos], pos, 0, x);
        for (int x = 0; x < TPF_KW; x++) {
            k[pos * TPF_KW + x] = tpf_value(tb[pos], pos, 1, x);
            v[pos * TPF_KW + x] = tpf_value(tb[pos], pos, 2, x);
        }
    }
    ref_attention(&on.p, 1, 14, 50, q + 36 * TPF_QW, 0, k, 0, v, 0, want, NULL);
    CHECK_ALLCLOSE_D(out_on, want, 14 * TPF_QW, 2e-5, 2e-5);
    /* the found blocks hold what B's own computation wrote, bit for bit */
    size_t block_floats = (size_t)TPF_HK * TPF_BS * TPF_D;
    for (int j = 0; j < 9; j++) {
        const float *ko = (const float *)on.cache.key + (size_t)b.block_table[j] * block_floats;
        const float *kf = (const float *)off.cache.key + (size_t)c.block_table[j] * block_floats;
        const float *vo = (const float *)on.cache.value + (size_t)b.block_table[j] * block_floats;
        const float *vf = (const float *)off.cache.value + (size_t)c.block_table[j] * block_floats;
        CHECK(b.block_table[j] == a.block_table[j]);
        CHECK_BITEQ(ko, kf, sizeof(float) * block_floats);
        CHECK_BITEQ(vo, vf, sizeof(float) * block_floats);
    }
    CHECK(on.pool.cache.hit_tokens == 36 && on.pool.cache.lookups == 2);
    attn_seq_release(&on.pool, &a); attn_seq_release(&on.pool, &b);
    attn_seq_release(&off.pool, &c);
    CHECK_EQ_INT(attn_block_pool_free_count(&on.pool), TPF_BLOCKS);
    tpf_free(&on); tpf_free(&off);
}

#define TEST_PREFIX_LIST                                                                          \
    ATTN_TEST_ENTRY(prefix_cache_sizes_and_refusals),                                            \
    ATTN_TEST_ENTRY(prefix_cache_finds_longest_matching_run),                                    \
    ATTN_TEST_ENTRY(prefix_cache_namespaces_never_mix),                                          \
    ATTN_TEST_ENTRY(prefix_cache_collisions_never_reuse),                                        \
    ATTN_TEST_ENTRY(prefix_cache_eviction_order),                                                \
    ATTN_TEST_ENTRY(prefix_cache_truncate_fork_and_copy_on_write),                               \
    ATTN_TEST_ENTRY(prefix_cache_random_walk_invariants),                                        \
    ATTN_TEST_ENTRY(prefix_cache_reuse_equals_recompute)
