/* pool_check.h - the block pool's invariants, recounted from the sequences' tables alone (not
   from the pool's own counts), for the suite, the fuzz harness and the stress run. Include it
   after attn.h. pool_check(pool, seqs, n, msg, bytes) returns 1 when they hold, else 0 with the
   first broken one in msg:
   - each refcount equals the number of table entries of the n sequences that name the block;
   - each block is in exactly one state: held (refcount > 0), free (refcount 0, not cached, on
     the free stack once) or evictable (refcount 0, cached, in the LRU list once); num_free and
     the cache's num_evictable and num_cached are those counts;
   - every sequence has ceil(len / block_size) blocks within its table;
   - with a prefix cache: every cached block is found in the bucket its hash names, and only
     cached blocks are in buckets; the LRU list runs from head to tail in increasing last_use,
     each link consistent both ways; a cached block's predecessor entry is older than it. */
#ifndef ATTN_POOL_CHECK_H
#define ATTN_POOL_CHECK_H
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int pool_check_fail(char *msg, size_t bytes, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, bytes, fmt, ap);
    va_end(ap);
    return 0;
}

static int pool_check_cache(const attn_block_pool *p, char *msg, size_t bytes) {
    const attn_prefix_cache *c = &p->cache;
    int nb = p->num_blocks, cached = 0, in_lru = 0, ok = 1;
    uint8_t *seen = (uint8_t *)calloc((size_t)nb, 1);
    for (int b = 0; b < nb; b++) cached += c->serial[b] != 0;
    if (cached != c->num_cached)
        ok = pool_check_fail(msg, bytes, "num_cached %d, %d blocks have an entry",
                             c->num_cached, cached);
    for (int k = 0; ok && k < c->num_buckets; k++)
        for (int32_t b = c->bucket[k], steps = 0; ok && b >= 0; b = c->next[b], steps++) {
            if (b >= nb || steps > nb || seen[b] || c->serial[b] == 0 ||
                (c->hash[b] & (uint64_t)(c->num_buckets - 1)) != (uint64_t)k)
                ok = pool_check_fail(msg, bytes, "bucket %d holds block %d wrongly", k, (int)b);
            else if (c->parent[b] >= c->serial[b])
                ok = pool_check_fail(msg, bytes, "block %d (entry %llu) follows entry %llu", (int)b,
                                     (unsigned long long)c->serial[b],
                                     (unsigned long long)c->parent[b]);
            else
                seen[b] = 1;
        }
    for (int b = 0; ok && b < nb; b++)
        if ((c->serial[b] != 0) != seen[b])
            ok = pool_check_fail(msg, bytes, "cached block %d is in no bucket", b);
    memset(seen, 0, (size_t)nb);
    uint64_t last = 0;
    for (int32_t b = c->lru_head, prev = -1; ok && b >= 0; prev = b, b = c->lru_next[b]) {
        if (b >= nb || seen[b] || c->lru_prev[b] != prev || c->serial[b] == 0 ||
            p->refcount[b] != 0 || c->last_use[b] <= last)
            ok = pool_check_fail(msg, bytes, "LRU list entry %d: block %d out of order or held",
                                 in_lru, (int)b);
        else if (c->lru_next[b] < 0 && c->lru_tail != b)
            ok = pool_check_fail(msg, bytes, "LRU list ends at %d, tail %d", (int)b,
                                 (int)c->lru_tail);
        seen[b < nb && b >= 0 ? b : 0] = 1;
        last = b < nb ? c->last_use[b] : last;
        in_lru++;
    }
    if (ok && c->lru_head < 0 && c->lru_tail >= 0)
        ok = pool_check_fail(msg, bytes, "LRU list empty but tail %d", (int)c->lru_tail);
    if (ok && in_lru != c->num_evictable)
        ok = pool_check_fail(msg, bytes, "num_evictable %d, LRU list of %d", c->num_evictable,
                             in_lru);
    for (int b = 0; ok && b < nb; b++)
        if (p->refcount[b] == 0 && c->serial[b] != 0 && !seen[b])
            ok = pool_check_fail(msg, bytes, "evictable block %d is not in the LRU list", b);
    free(seen);
    return ok;
}

static int pool_check(const attn_block_pool *p, attn_seq *const *seqs, int n, char *msg,
                      size_t bytes) {
    int nb = p->num_blocks, bs = p->block_size, unheld = 0, ok = 1;
    int cache = p->cache.num_buckets > 0;
    int32_t *count = (int32_t *)calloc((size_t)nb, sizeof(int32_t));
    uint8_t *in_stack = (uint8_t *)calloc((size_t)nb, 1);
    for (int s = 0; ok && s < n; s++) {
        const attn_seq *q = seqs[s];
        if (q->len < 0 || q->num_blocks != (q->len + bs - 1) / bs || q->num_blocks > q->max_blocks)
            ok = pool_check_fail(msg, bytes, "sequence %d has len %lld, %d blocks (room %d)", s,
                                 (long long)q->len, q->num_blocks, q->max_blocks);
        for (int b = 0; ok && b < q->num_blocks; b++) {
            int32_t id = q->block_table[b];
            if (id < 0 || id >= nb) ok = pool_check_fail(msg, bytes, "sequence %d names block %d",
                                                         s, (int)id);
            else count[id]++;
        }
    }
    for (int b = 0; ok && b < nb; b++) {
        if (p->refcount[b] != count[b])
            ok = pool_check_fail(msg, bytes, "block %d has refcount %d, %d tables name it", b,
                                 (int)p->refcount[b], (int)count[b]);
        unheld += count[b] == 0 && !(cache && p->cache.serial[b] != 0);
    }
    if (ok && p->num_free != unheld)
        ok = pool_check_fail(msg, bytes, "num_free %d, %d blocks neither held nor cached",
                             p->num_free, unheld);
    for (int i = 0; ok && i < p->num_free; i++) {
        int32_t id = p->free_ids[i];
        if (id < 0 || id >= nb || in_stack[id] || count[id] != 0 ||
            (cache && p->cache.serial[id] != 0))
            ok = pool_check_fail(msg, bytes, "free stack entry %d is block %d (twice, held or "
                                 "cached)", i, (int)id);
        else
            in_stack[id] = 1;
    }
    if (ok && cache) ok = pool_check_cache(p, msg, bytes);
    if (ok && !cache && (p->cache.num_evictable != 0 || p->cache.num_cached != 0))
        ok = pool_check_fail(msg, bytes, "no cache but %d cached blocks", p->cache.num_cached);
    free(count);
    free(in_stack);
    return ok;
}
#endif
