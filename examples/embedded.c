/* embedded.c - the vendored build: one static arena, no malloc, no OpenMP, no run-time dispatch.

   What it shows: attn.h in a firmware-style program. Everything the library touches (the KV
   cache, the block pool, the block table, the workspaces) is carved from one static arena at
   start-up, sized by the library's own size queries; ATTN_NO_OPENMP and ATTN_NO_RUNTIME_DISPATCH
   leave out threads and the ISAs the compiler flags do not enable (on x86-64 without -m flags:
   the portable C kernels; on aarch64: NEON). A 40-token prompt is prefilled into an f16 paged
   cache (attn_write_kv + attn_paged_prefill) and 8 tokens are decoded (attn_paged_decode), each
   output checked against a double-precision reference. It prints the arena bytes used and,
   where the GNU linker provides the symbols, the program's code size.

   Build: cc -std=c99 -Os -I. examples/embedded.c -o embedded -lm
   aarch64: aarch64-linux-gnu-gcc -std=c99 -Os -static -I. examples/embedded.c -o embedded -lm */
#define ATTN_NO_OPENMP
#define ATTN_NO_RUNTIME_DISPATCH
#define ATTN_IMPLEMENTATION
#include "attn.h"
#include <math.h>
#include <stdio.h>

enum { H = 4, HK = 1, D = 32, BS = 8, BLOCKS = 8, PROMPT = 40, DECODES = 8 };
enum { LEN = PROMPT + DECODES, MAX_BLOCKS = BLOCKS };

/* ---- the arena: a bump allocator over static memory, 64-byte aligned pieces ---- */
static unsigned char arena[96 * 1024];
static size_t arena_used;

static void *arena_take(size_t bytes) {
    size_t at = (arena_used + 63) & ~(size_t)63;
    if (bytes == 0 || at + bytes > sizeof arena) return NULL;
    arena_used = at + bytes;
    return arena + at;
}

/* ---- test data and the reference ---- */
static float data_at(int kind, int pos, int i) { /* deterministic values in [-1, 1] */
    unsigned x = (unsigned)kind * 2654435761u + (unsigned)pos * 97u + (unsigned)i * 40503u;
    x ^= x >> 15; x *= 0x2c1b3c6du; x ^= x >> 12;
    return (float)(x % 2001) / 1000.0f - 1.0f;
}
static double f16_of(float f) { return attn_f16_to_f32(attn_f32_to_f16(f)); }

/* Head h of the query at position pos (q) over keys 0..pos, in double; the keys and values
   rounded to f16 as the cache stores them. */
static double reference(const float *q, int pos, int h, int d) {
    double m = -INFINITY, sum = 0, acc = 0, logit[LEN];
    for (int j = 0; j <= pos; j++) {
        double dot = 0;
        for (int e = 0; e < D; e++) dot += (double)q[h * D + e] * f16_of(data_at(1, j, e));
        logit[j] = dot / sqrt((double)D);
        m = fmax(m, logit[j]);
    }
    for (int j = 0; j <= pos; j++) {
        double w = exp(logit[j] - m);
        sum += w;
        acc += w * f16_of(data_at(2, j, d));
    }
    return acc / sum;
}

static double worst_error(const float *q, const float *out, int pos) {
    double worst = 0;
    for (int h = 0; h < H; h++)
        for (int d = 0; d < D; d++)
            worst = fmax(worst, fabs(out[h * D + d] - reference(q, pos, h, d)));
    return worst;
}

#if defined(__GNUC__) && defined(__linux__)
extern char __executable_start[], etext[];  /* GNU ld: the start and end of the code */
static long code_bytes(void) { return (long)(etext - __executable_start); }
#else
static long code_bytes(void) { return -1; }
#endif

int main(void) {
    attn_params p = {0};
    p.num_heads = H; p.num_kv_heads = HK; p.head_size = D;
    static float q[LEN][H * D], k[LEN][HK * D], v[LEN][HK * D], out[PROMPT][H * D];
    for (int t = 0; t < LEN; t++) {
        for (int i = 0; i < H * D; i++) q[t][i] = data_at(0, t, i);
        for (int i = 0; i < HK * D; i++) { k[t][i] = data_at(1, t, i); v[t][i] = data_at(2, t, i); }
    }

    /* Start-up: every piece of library memory from the arena, sized by the library. */
    attn_kv_cache cache;
    attn_block_pool pool;
    attn_seq seq;
    size_t cache_bytes = attn_kv_cache_bytes(BLOCKS, BS, HK, D, ATTN_F16);
    size_t pool_bytes = attn_block_pool_bytes(BLOCKS);
    void *cache_mem = arena_take(cache_bytes), *pool_mem = arena_take(pool_bytes);
    int32_t *table = (int32_t *)arena_take(sizeof(int32_t) * MAX_BLOCKS);
    if (!cache_mem || !pool_mem || !table ||
        attn_kv_cache_init(&cache, BLOCKS, BS, HK, D, ATTN_F16, 1, 1, cache_mem, cache_bytes) ||
        attn_block_pool_init(&pool, BLOCKS, BS, pool_mem, pool_bytes) ||
        attn_seq_init(&seq, table, MAX_BLOCKS)) {
        printf("start-up failed (arena %zu of %zu bytes)\n", arena_used, sizeof arena);
        return 1;
    }
    /* One workspace serves both calls: the larger of the two sizes (decode at the longest
       length; prefill sized for the longest keys, seq_lens NULL). */
    int32_t qsl[2] = {0, PROMPT}, lens[1] = {LEN};
    size_t prefill_ws = attn_paged_prefill_workspace_size(&p, NULL, &cache, qsl, NULL, 1);
    size_t decode_ws = attn_paged_decode_workspace_size(&p, NULL, &cache, lens, 1, ATTN_PAGED_AUTO);
    size_t ws_bytes = prefill_ws > decode_ws ? prefill_ws : decode_ws;
    void *ws = arena_take(ws_bytes);
    if (!ws) {
        printf("no room for a %zu-byte workspace (arena %zu of %zu bytes)\n", ws_bytes,
               arena_used, sizeof arena);
        return 1;
    }

    /* Prefill the prompt: slots, K/V into the cache, attention over it. */
    int64_t slots[PROMPT];
    int32_t seq_len[1] = {PROMPT};
    attn_rows rk = {k, ATTN_F32, 0}, rv = {v, ATTN_F32, 0};
    attn_rows rq = {q, ATTN_F32, 0}, ro = {out, ATTN_F32, 0};
    attn_status st = attn_seq_append(&pool, &seq, PROMPT, slots, NULL, NULL);
    if (!st) st = attn_write_kv(&cache, rk, rv, slots, PROMPT, NULL);
    if (!st)
        st = attn_paged_prefill(&p, NULL, rq, ro, &cache, table, MAX_BLOCKS, qsl, seq_len, 1, 1,
                                NULL, ws, ws_bytes);
    double worst = st ? INFINITY : worst_error(q[PROMPT - 1], out[PROMPT - 1], PROMPT - 1);

    /* Decode: one token at a time. */
    for (int t = PROMPT; t < LEN && !st; t++) {
        int64_t slot;
        attn_rows dk = {k[t], ATTN_F32, 0}, dv = {v[t], ATTN_F32, 0};
        attn_rows dq = {q[t], ATTN_F32, 0}, dout = {out[0], ATTN_F32, 0};
        st = attn_seq_append(&pool, &seq, 1, &slot, NULL, NULL);
        if (!st) st = attn_write_kv(&cache, dk, dv, &slot, 1, NULL);
        seq_len[0] = (int32_t)seq.len;
        if (!st)
            st = attn_paged_decode(&p, NULL, dq, dout, &cache, table, MAX_BLOCKS, seq_len, 1,
                                   ATTN_PAGED_AUTO, NULL, ws, ws_bytes);
        if (!st) worst = fmax(worst, worst_error(q[t], out[0], t));
    }
    printf("%s: %s, %d tokens in %d blocks; arena %zu bytes used of %zu; code %ld bytes; "
           "worst |out - reference| = %.2e\n", attn_build_info(), attn_status_str(st),
           (int)seq.len, seq.num_blocks, arena_used, sizeof arena, code_bytes(), worst);
    return st == ATTN_OK && worst < 1e-5 ? 0 : 1;
}
