/* attn.h - v0.6.1 - CPU attention for LLM inference (SDPA, paged KV, ALiBi/window/soft cap/sinks)
                     public domain or MIT - see the end of this file

   One file gives a C or C++ inference engine the attention layer of a vLLM-style server on a
   CPU: continuous-batch metadata, a paged (block-table) KV cache with its block allocator, bias
   builders, and SIMD + OpenMP kernels for prefill, chunked prefill over a cached prefix and
   paged decode.

   USAGE
       #define ATTN_IMPLEMENTATION      // in exactly ONE .c or .cpp file
       #include "attn.h"
   Every other file includes "attn.h" without the macro and sees the declarations only (they
   need nothing but <stddef.h> and <stdint.h>). Link with -lm; add -fopenmp for threads.

   CONFIG (define before the implementation include)
       macro                     default        effect
       ATTN_STATIC               off            every function is static (private copy per unit)
       ATTN_NO_SIMD              off            scalar kernels only (overrides everything below)
       ATTN_NO_AVX2              off            do not compile the AVX2+FMA kernels
       ATTN_NO_AVX512            off            do not compile the AVX-512 kernels
       ATTN_NO_NEON              off            do not compile the NEON kernels (aarch64)
       ATTN_NO_RUNTIME_DISPATCH  off            compile only the ISAs the compiler flags enable
       ATTN_NO_AMX               off            do not compile the AMX tile kernels (ATTN_ISA_AMX)
       ATTN_TILES_EMULATE        off            for tests: ATTN_ISA_AMX on any AVX2 CPU, the tile
                                                operations emulated where the CPU has no tiles
       ATTN_DECODE_TILES         off            paged decode's logits on the AMX tiles for f32
                                                and f16 queries and four query heads a KV head
                                                too, not only bf16 queries and eight (see AMX)
       ATTN_NO_FP8_KERNELS       off            fp8 KV caches are decoded through f32 copies of
                                                their rows, not by kernels of their own: slower
                                                fp8 decode, the same results, a faster build
       ATTN_USE_OPENMP           on if _OPENMP  run work items on OpenMP threads
       ATTN_NO_OPENMP            off            never use OpenMP, even with -fopenmp
       ATTN_USE_ONEDNN           off            prefill GEMMs on oneDNN when asked (-ldnnl, see
                                                ONEDNN)
       ATTN_ASSERT(x)            assert(x)      internal invariants only (never for bad input)
       ATTN_ASSERT_ON_ERROR      off            every error return also fails ATTN_ASSERT
       ATTN_HEADER_FILENAME      "attn.h"       this file's name, for its own re-inclusion
       ATTN_VALUE_CACHE_BYTES    2 MiB          most workspace a thread of a prefill call gives to
                                                key tiles packed once, reused (see MEMORY)
       ATTN_SERIAL_WORK          2^22           calls estimated below this many multiply-adds
                                                run on the calling thread (see THREADING)

   QUICK START (examples/quickstart.c)
       #define ATTN_IMPLEMENTATION
       #include "attn.h"
       #include <stdio.h>
       #include <stdlib.h>
       int main(void) {
           enum { T = 5, H = 4, HK = 2, D = 8 };           // one 5-token prompt, GQA 4:2
           float q[T * H * D], k[T * HK * D], v[T * HK * D], out[T * H * D];
           for (int i = 0; i < T * H * D; i++) q[i] = (float)((i * 7) % 11) / 11.0f;
           for (int i = 0; i < T * HK * D; i++) k[i] = (float)((i * 5) % 13) / 13.0f;
           for (int i = 0; i < T * HK * D; i++) v[i] = (float)(i % 17) / 17.0f;
           attn_params p = {0};
           p.num_heads = H; p.num_kv_heads = HK; p.head_size = D;   // scale 0 = 1/sqrt(D)
           int32_t cu[2] = {0, T};                                  // one sequence
           attn_rows rq = {q, ATTN_F32, 0}, rk = {k, ATTN_F32, 0};
           attn_rows rv = {v, ATTN_F32, 0}, ro = {out, ATTN_F32, 0};
           size_t ws_bytes = attn_sdpa_workspace_size(&p, NULL, cu, cu, 1);
           void *ws = malloc(ws_bytes);
           attn_status st = attn_sdpa(&p, NULL, rq, rk, rv, ro, cu, cu, 1, 1, NULL, ws, ws_bytes);
           printf("%s: out[last token, head 0, dim 0] = %f\n", attn_status_str(st),
                  out[(T - 1) * H * D]);
           free(ws);
           return st == ATTN_OK ? 0 : 1;
       }

   DOCUMENTATION
   LAYOUTS & SHAPES
       Activations are token-major rows (attn_rows): element (token t, head h, dim d) is at
       data[t*stride + h*D + d]; stride counts elements, 0 means packed (H*D for queries and
       outputs, Hk*D for keys and values). A larger stride lets q/k/v be column slices of a fused
       QKV matrix. Outputs have the query's shape, in the output rows' dtype. Activations may be
       f32, f16 or bf16; accumulation is always f32 and an f32 query is never rounded down.
       Query head h reads KV head h / (H/Hk) (GQA; MQA is Hk = 1).
   SEMANTICS (the same in every path)
       For query i at absolute position pos_i and key j:
           s = scale * <q_i, k_j>               scale = 1/sqrt(D) when 0 is given
           s = cap * tanh(s / cap)              when logits_soft_cap > 0
           s = s + slope_h * (j - pos_i)        when alibi_slopes are given
           visible(i, j) = (!causal || j <= pos_i) && (W == 0 || pos_i - j < W)
           p = softmax over visible j (+ exp(sink_h) in the denominator when sinks are given)
           out_i = sum_j p_j v_j ;  a row with no visible key gives out = 0 and lse = -inf
       With Lq queries over Lk keys, pos_i = Lk - Lq + i (bottom-right alignment): chunked
       prefill has Lk - Lq cached tokens before the chunk, decode has Lq = 1. When Lq > Lk under
       the causal mask the first Lq - Lk rows see no key and give 0 (defined, not an error).
       The sliding window W counts the query itself and is exact per token in every path, ALiBi
       or not. lse is the natural log of the softmax denominator (sink included) per
       (token, head), in scaled-logit units.
   PAGED KV CACHE
       Per layer: key and value arrays [num_blocks][num_kv_heads][block_size][head_size] in the
       cache dtype (f32, f16, bf16, fp8 e4m3, fp8 e5m2, int8, int4). fp8 stores
       RNE-saturate(x / scale) and reads stored * scale with the per-layer k_scale / v_scale.
       int8 and int4 keep a bf16 scale for each 32 elements of a (token, KV head) row, chosen
       at write time from their largest magnitude, inside the row (attn_dtype_row_bytes): 8.5
       and 4.5 bits an element at head size 128, no per-layer scale. Token p of sequence s lives in
       slot block_tables[s][p / bs] * bs + p % bs. Slot mappings are int64; -1 = do not write.
       Kernels never read a slot at or past a sequence's length.
   MEMORY
       Nothing allocates. Every operation that needs scratch has a *_workspace_size query that
       takes the same arguments; the caller passes ws/ws_bytes (any alignment) of at least that
       size. The KV cache and the block pool live in caller memory sized by attn_kv_cache_bytes/
       attn_block_pool_bytes, and a pool's prefix cache in memory sized by
       attn_prefix_cache_bytes. A workspace size depends on the shapes, on exec (threads, ISA,
       f32_probs, engine) and on the CPU, never on the dtypes: the queries see none, so one size
       serves every dtype and counts the scratch that only some of them use. Per call:
       - prefill (attn_sdpa, attn_paged_prefill, attn_forward's prefills): per thread, the tiles
         of queries, scores and outputs of one work item, and, where bf16 inputs may take the
         bf16 kernels on this CPU and ISA (PRECISION: bf16dot=fast, or ATTN_ISA_AMX), up to
         ATTN_VALUE_CACHE_BYTES (2 MiB) of keys and values packed once and reused by every
         query tile of a KV head - no more than the longest sequence needs. exec.f32_probs = 1
         leaves that out. Results never depend on it.
       - paged decode (attn_paged_decode, attn_forward's decodes): (2 + D) floats per query
         head and 512-token partition for the partial results, and per thread about
         (2 D + 528) x 4 bytes for each query head of up to eight KV heads (G rounded up to 4
         or 8), plus a few KB a KV head on ATTN_ISA_AMX; with two sequences or more (and not
         exec.no_shared_prefixes) a stacked pass's scratch (up to 64 query heads, for shared
         prefixes) where that is more, and 29 bytes a partition for their search.
   THREADING
       Each call splits its work into fixed items (for example sequence x KV head x query tile,
       or 512-token decode partitions) and runs them on OpenMP threads (exec.num_threads, 0 = the
       OpenMP default), on the caller's pool (exec.parallel_for), or serially: serially below
       ATTN_SERIAL_WORK, and on OpenMP for the next 16 calls after a region whose threads
       started over a millisecond late (another process holding a core). Outputs are the same
       bits on any thread count. Functions are thread-safe for distinct outputs; the globals are
       the idempotent CPU detection and that count.
   SIMD
       Scalar, AVX2+FMA and AVX-512 variants of the same kernels are compiled into every x86
       build (no -march flags needed), scalar and NEON into aarch64 builds; attn_build_info
       lists them. ATTN_ISA_AUTO (exec.isa = 0) takes the best the CPU supports (attn_best_isa,
       from cpuid/xgetbv, detected once; attn_cpu_features says what was found); exec.isa forces
       one, and a forced ISA the CPU or build lacks returns ATTN_ERR_UNSUPPORTED
       (attn_isa_supported asks first). Different ISAs agree to about 1e-6 relative; the same
       ISA is bitwise reproducible (DETERMINISM). f32 keys and values are read in place, never
       copied.
   AMX (ATTN_ISA_AMX; x86-64 Linux, GCC 11 / Clang 12 or later; ATTN_NO_AMX compiles it out)
       The AVX-512 ISA plus the AMX-BF16 tile units of Intel Xeons (Sapphire Rapids and later).
       ATTN_ISA_AUTO takes it where cpuid shows AMX-TILE and AMX-BF16, the OS enables tile state
       (XCR0) and Linux grants this process the tile data (arch_prctl ARCH_REQ_XCOMP_PERM, asked
       once at CPU detection); refused or elsewhere, AUTO stays on AVX-512 without a word, and
       attn_cpu_features says amx=no. exec.isa = ATTN_ISA_AVX512 keeps the tiles off. On the
       tiles, with the precision of bf16 inputs (PRECISION) and other bits than AVX-512's:
       - bf16 prefill (attn_sdpa, attn_paged_prefill, attn_forward's prefills) over bf16 keys
         and values or an fp8 cache, with a head size that is a multiple of 32 and
         exec.f32_probs = 0;
       - bf16 paged decode (attn_paged_decode, attn_forward's decodes) over a bf16 or fp8 cache,
         with a head size that is a multiple of 32 and eight or more query heads a KV head (the
         GQA of Llama-3-70B and wider): its logits, exact products summed in f32, whatever
         exec.f32_probs says.
       Every other call runs as on ATTN_ISA_AVX512, with its results. Each work item takes the
       tiles on the thread that runs it and releases them (OpenMP threads or a caller's pool).
       ATTN_DECODE_TILES (for measurement) puts decode's logits on the tiles for f32 and f16
       queries too, exactly (PRECISION), from four query heads a KV head; attn_build_info says
       decode_tiles=bf16 or decode_tiles=all. ATTN_TILES_EMULATE (for tests) runs ATTN_ISA_AMX
       on emulated tiles on any AVX2 CPU without them (AUTO never takes it); the suite defines
       it and runs both, on emulated tiles and on real ones where the CPU has them.
   PRECISION
       Accumulation is f32 everywhere, and inputs are read exactly as stored: f32 and f16
       activations and every KV cache dtype are computed in f32 from the stored values (fp8
       times its scale; int8 and int4 codes times their group's bf16 scale, a product exact in
       f32, so an f32 query multiplies the cache's exact values). exp() is within 2.1 ulp.
       What the caller chooses:
       - exec.f32_probs = 1: f32 probabilities, exact products and f32 sums for every dtype,
         ISA and CPU (slower for bf16 inputs where the bf16 kernels below would run). Only on
         ATTN_ISA_AMX does decode still take its logits from the tiles (AMX), which flush
         subnormal bf16 inputs to zero.
       - exec.f32_probs = 0 (the default): bf16 queries over bf16 keys and values or an fp8
         cache may take bf16 kernels where they are faster: on ATTN_ISA_AVX512 where the CPU's
         bf16 dot products outrun its FMAs (AMD's; attn_cpu_features says bf16dot=fast;
         docs/PERF.md#bf16-dot-rates), and on ATTN_ISA_AMX's tiles. There Q.K is still exact
         products of the stored values and the softmax f32, but the probabilities are rounded
         to bf16 (RNE) for P.V, so each weight carries a relative error of at most 2^-9 - below
         a bf16 output's own rounding - while the denominator and lse keep the f32 values; the
         tiles also flush subnormal bf16 inputs to zero. Elsewhere (Intel's CPUs without tiles,
         whose bf16 dot products are slower than their FMAs) they take the f32 kernels, as with
         f32_probs = 1.
       - f32 and f16 queries are never rounded to bf16: under ATTN_DECODE_TILES, decode's
         logits on tiles split a query into three bf16 terms, exactly for |q| from 2^-110 up
         (smaller terms count as 0).
   ONEDNN (ATTN_USE_ONEDNN, link -ldnnl, needs -fopenmp; Debian: libdnnl-dev, oneDNN 2.6)
       exec.gemm = ATTN_GEMM_ONEDNN (or an ATTN_BACKEND_IPEX layer) runs the two GEMMs of prefill
       (attn_sdpa, attn_paged_prefill, the prefills of attn_forward) on oneDNN matmul: f32, or
       bf16 operands with f32 accumulation when q and k/v are bf16, exec.f32_probs is 0 and
       oneDNN has a bf16 kernel for the CPU (P rounded to bf16 for P.V, as in PRECISION).
       Masks, biases and the online softmax stay ours: same semantics, results within f32
       rounding of the native engine. Decode always runs natively (it streams memory; there
       is no GEMM to win). oneDNN objects live for one call (nothing global, nothing leaks); a
       oneDNN failure returns ATTN_ERR_BACKEND. oneDNN runs each GEMM on the calling thread only
       (never nested in our threads, never oversubscribing), so determinism holds as below. Use
       one OpenMP runtime: libdnnl's libgomp (gcc), or clang's libomp, which serves its calls too.
   DETERMINISM
       For one build, ISA and GEMM engine, outputs are bitwise identical for any thread count,
       any caller pool and any batch composition (a sequence's result does not depend on its
       neighbours), and paged decode v1 == v2 bitwise. The two engines agree to f32 rounding.
   ERRORS
       Every fallible function returns attn_status. Bad input returns a code and writes nothing
       (outputs, caches and pools are untouched). The library never prints, aborts or exits.
       attn_forward also writes which check failed, naming the field and its values, into
       exec->error_msg when the caller gives one (no global or thread-local state), and
       attn_batch_build into batch->error_msg. ATTN_ASSERT_ON_ERROR stops at the failing check.
   EXTENDING
       A new dtype, mask or bias kind, or ISA: the checklists are in docs/EXTENDING.md.

   REVISION HISTORY
       0.6.1  (2026-11-29)  paged decode reads a span's KV heads in one kernel call where its
                            rows are read in place, and integer scales by a dword broadcast:
                            the same bits, faster with the cache in L2 or L3.
       0.6.0  (2026-11-29)  integer KV caches ATTN_INT8 and ATTN_INT4: groups of 32 elements of a
                            row with a bf16 scale each, in the row (attn_dtype_row_bytes, new),
                            written by attn_write_kv and attn_convert, read by every kernel
                            (exact dequantised values); attn_dtype_size is 0 for them and
                            attn_kv_cache_shape counts their bytes. ATTN_DTYPE_COUNT is 7.
       0.5.0  (2026-11-29)  paged decode, lean: one kernel body per ISA and cache dtype, its
                            blocks of query heads (1, 2, 4, 8) and kernel family chosen once per
                            call: a third of the compiled code and under half the build time of
                            0.4.16; sequences over one 512-token partition may change in their
                            last bits (their merge no longer fuses its multiply-adds). Prefix
                            cache (attn_prefix_cache_bytes/_init/_lookup, attn_seq_set_tokens):
                            full blocks kept by content, exact, LRU eviction after never-cached
                            blocks; free counts include evictable cached blocks. Calls
                            estimated below ATTN_SERIAL_WORK run on the calling thread, no
                            region has more threads than items, and after a region whose
                            threads started over 1 ms late (a core held by another process)
                            the next 16 calls run serially. attn_batch_build_checked,
                            attn_forward_workspace_bound, ATTN_ERR_CAPACITY (the builder's
                            capacity overflows, formerly ATTN_ERR_OUT_OF_RANGE); attn_forward
                            refuses a block named twice in a row and, with md.pool, a block not
                            in use; a NULL slot_mapping on a step that reads the cache needs
                            md.profile_run = 1; pool.error_msg. attn_metadata, attn_block_pool
                            and attn_seq have new fields at their ends (zero: the old meaning).
                            Shared-prefix decode: a partition several sequences' tables share
                            is computed once for all (the same bits; exec.no_shared_prefixes,
                            a new last field, turns it off). fp8 decode skips a block's padded
                            heads. The ISAs come from one table; attn_cpu_features always
                            prints bf16dot=fast|no. A cross-attention prefill with no encoder
                            tokens accepts NULL value rows
       0.4.16 (2026-11-28)  clean under gcc's -Wnull-dereference and -Wduplicated-branches: the
                            fp8 value pairs take a flag for a missing second row, not a null
                            pointer; the transpose-sum takes its pairing as an argument (no
                            change in behaviour)
       0.4.15 (2026-11-28)  paged decode over an f32 cache (AVX-512, NEON): five or six query
                            heads a KV head run as one group of that width, and seven or more
                            in groups of eight, each key and value vector loaded once for the
                            group, not once for each two heads (the same bits)
       0.4.14 (2026-11-28)  clean under g++'s -Wuseless-cast and clang's -Wcomma (no change in
                            behaviour)
       0.4.13 (2026-11-28)  the bf16 pair kernels (vdpbf16ps) run only where the CPU's bf16 dot
                            products outrun its FMAs (AMD; attn_cpu_features says
                            bf16dot=fast): on Intel, whose are slower, bf16 inputs take the
                            f32 kernels (f32 probabilities), except beside the AMX tiles,
                            which keep them
       0.4.12 (2026-11-27)  paged decode on ATTN_ISA_AMX: bf16 queries with sixteen or more
                            query heads a KV head over a bf16 or fp8 cache run P.V on the
                            tiles too (probabilities rounded to bf16, as before)
       0.4.11 (2026-11-27)  paged decode on ATTN_ISA_AMX: bf16 queries with eight or more query
                            heads a KV head over a bf16 or fp8 cache run their logits on the
                            tiles by default (ATTN_DECODE_TILES widens it to f32 and f16
                            queries and four heads); attn_build_info says decode_tiles=bf16
                            or =all
       0.4.10 (2026-11-27)  paged decode, AVX-512 BF16 + VBMI: bf16 queries over an fp8 cache
                            with three or more query heads a KV head take the bf16 pair kernels
                            (fp8 exact in bf16; probabilities rounded to bf16 as over a bf16
                            cache; exec.f32_probs = 1 keeps the f32 kernels)
       0.4.9  (2026-11-27)  paged decode, AVX-512 and NEON: three query heads a KV head
                            (Llama 3.2 3B) run as one group of three over f16, bf16 and fp8
                            caches, not padded to four, and two (Gemma 2) as one group of two,
                            not one head at a time (same results)
       0.4.8  (2026-11-27)  paged decode, AVX-512: five or six query heads a KV head run as one
                            group of that width over f16, bf16 and fp8 caches, not padded to
                            eight (same results)
       0.4.7  (2026-11-27)  ATTN_DECODE_TILES: paged decode's logits on the AMX tiles (off by
                            default); attn_build_info reports it
       0.4.6  (2026-11-27)  paged decode: one or two query heads a KV head run rows of the
                            registers' width or half of it (MHA at D = 128 with AVX-512) free
                            of width checks; the prefetch cursor crosses the per-chunk call
                            by pointer (same results)
       0.4.5  (2026-11-27)  paged decode, two or more query heads a KV head: the logits'
                            partial sums stored in pairs of keys, half-reduced (same results)
       0.4.4  (2026-11-26)  paged decode, AVX-512: the logits' transpose-reduce unrolled and
                            eight heads' queries kept in registers (same results)
       0.4.3  (2026-11-26)  paged decode: one or two query heads a KV head run without
                            padding to four over every cache dtype (0.4.1: f32 only); scalar
                            e4m3 decode without ldexpf (same results)
       0.4.2  (2026-11-26)  ATTN_ISA_AMX: the keys packed for the tiles and kept with the
                            values, over fp8 caches too; four key tiles a step
       0.4.1  (2026-11-26)  paged decode over an f32 cache: one or two query heads a KV head
                            (MHA, G = 2) run without padding to four; AVX2 decodes e4m3 rows
                            without their NaN fix where a chunk has no NaN code (same results)
       0.4.0  (2026-11-26)  ATTN_ISA_AMX: bf16 prefill on AMX tiles (ATTN_NO_AMX,
                            ATTN_TILES_EMULATE); attn_cpu_features reports amx; ATTN_ISA_COUNT
                            moved up by one
       0.3.0  (2026-11-26)  batch builder (attn_batch_build); copy-on-write pairs and declared
                            counts in attn_metadata, applied and checked by attn_forward;
                            exec.error_msg; ATTN_NO_FP8_KERNELS; attn_exec and attn_metadata
                            have new fields at their ends (zero keeps the old meaning)
       0.2.0  (2026-11-23)  prefill with query rows in vector lanes; AVX-512 BF16 dot products
                            for bf16 prefill and decode (exec.f32_probs to opt out)
       0.1.0  (2026-11-22)  first release: foundation, dtypes, dispatch, bias builders

   LICENSE: see the end of this file (MIT or Unlicense, your choice).
*/
/* CONTENTS, in file order. Each tag opens its section's banner: grep "\[P\]" finds paged decode.
       Declarations (always seen)
       [1]  status codes              [4a] CPU, ISA, threads       [4e] block allocator
       [2]  enums                     [4b] bias builders           [4f] paged decode
       [3]  parameter structs         [4c] dense varlen SDPA       [4g] paged prefill
                                      [4d] paged KV cache          [4h] backend layer
                                                                   [4i] batch builder
       Implementation (ATTN_IMPLEMENTATION, in one unit)
       [A]  configuration             [G]  kernel plans            [M]  prefill planning, attn_sdpa
       [B]  includes                  [H]  oneDNN GEMM shim        [N]  paged KV cache
       [C]  portability               [I]  kernel instantiation    [O]  block pool, sequences
       [D]  status strings, version   [J]  call, threads           [P]  paged decode
       [E]  CPU features              [K]  checks, convert         [Q]  paged prefill, merge
       [F]  scalar conversions        [L]  bias builders           [R]  backend layer
                                                                   [Ra] batch builder
       Kernel pass (the file included again by [I] once per ISA)
       [S]  vector layer              [U]  row conversions         [W]  prefill on oneDNN
       [T]  elementwise math, logits  [V]  prefill kernels         [X]  paged decode kernels
                                                                   [Y]  the kernel table */
#ifndef ATTN__KERNEL_PASS
#ifndef ATTN_H_INCLUDED
#define ATTN_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#define ATTN_VERSION_MAJOR 0
#define ATTN_VERSION_MINOR 6
#define ATTN_VERSION_PATCH 1
#define ATTN_VERSION_STRING "0.6.1"
#define ATTN_VERSION_NUMBER                                                                        \
    (ATTN_VERSION_MAJOR * 10000 + ATTN_VERSION_MINOR * 100 + ATTN_VERSION_PATCH)

#ifdef ATTN_STATIC
#if defined(__GNUC__) || defined(__clang__)
#define ATTNDEF static __attribute__((unused))  /* a unit need not call every function */
#else
#define ATTNDEF static
#endif
#else
#define ATTNDEF extern
#endif

#ifdef __cplusplus
#define ATTN_RESTRICT __restrict
extern "C" {
#else
#define ATTN_RESTRICT restrict
#endif

/* ---------------------------------------------------------------------------------------------
   [1] Status codes: one list makes both the enum and attn_status_str. */
#define ATTN__STATUS_LIST(X)                                                                      \
    X(ATTN_OK, 0, "ok")                                                                           \
    X(ATTN_ERR_INVALID_ARG, -1, "invalid argument")                                              \
    X(ATTN_ERR_UNSUPPORTED, -2, "unsupported (feature, ISA or engine not available)")            \
    X(ATTN_ERR_WORKSPACE_TOO_SMALL, -3, "workspace too small")                                   \
    X(ATTN_ERR_OUT_OF_BLOCKS, -4, "out of KV cache blocks")                                      \
    X(ATTN_ERR_BACKEND, -5, "GEMM backend (oneDNN) failure")                                     \
    X(ATTN_ERR_OUT_OF_RANGE, -6, "block id, slot or length outside the cache or block table")  \
    X(ATTN_ERR_CAPACITY, -7, "the step exceeds the batch's capacity (max_seqs, max_tokens or "     \
                             "max_blocks_per_seq)")

#define ATTN__STATUS_ENUM(name, value, text) name = value,
typedef enum attn_status { ATTN__STATUS_LIST(ATTN__STATUS_ENUM) ATTN__STATUS_END_ = 1 } attn_status;
#undef ATTN__STATUS_ENUM

/* Text for a status; never NULL ("unknown attn_status" for a value outside the list). */
ATTNDEF const char *attn_status_str(attn_status status);

/* Version compiled into the implementation, as ATTN_VERSION_NUMBER; compare it with the header's
   to detect a header/implementation mismatch. */
ATTNDEF int attn_version(void);

/* What the implementation was compiled with, e.g. "attn.h 0.6.1 isa=scalar,avx2,avx512,amx
   openmp=yes onednn=no decode_tiles=bf16" (GCC on x86-64, -fopenmp): the ISAs compiled in, by
   attn_isa_name ("amx(emulated...)" under ATTN_TILES_EMULATE), then " fp8_kernels=no" under
   ATTN_NO_FP8_KERNELS and decode_tiles=all under ATTN_DECODE_TILES. Static string. */
ATTNDEF const char *attn_build_info(void);

/* ---------------------------------------------------------------------------------------------
   [2] Enums: dtypes, ISAs, engines.

   The dtypes: one list makes the enum, attn_dtype_size and attn_dtype_name, and in the
   implementation each dtype's scalar load and store, its predicates, and its kernels' instances
   and dispatch. A row is X(enum name, value, token of its kernels' names, token of its vector
   loads and stores, element type, name, decode to f32, encode from f32, class, fold): the class
   says how the library treats it (see ATTN__DTC_PLAIN); the kernels' vector loads
   (ATTN__VLOAD_<token>) give value / fold, a power of two that the scales take back. A new
   dtype is a row here and its vector loads in each ISA's vector layer (see "vector layer"). */
#define ATTN__DTYPE_LIST(X)                                                                       \
    X(ATTN_F32,      0, f32,  F32,  float,    "f32",                                              \
      attn__f32_to_f32,     attn__f32_to_f32,     PLAIN,    1)                                    \
    /* IEEE binary16 */                                                                           \
    X(ATTN_F16,      1, f16,  F16,  uint16_t, "f16",                                              \
      attn_f16_to_f32,      attn_f32_to_f16,      PLAIN,    1)                                    \
    /* bfloat16 */                                                                                \
    X(ATTN_BF16,     2, bf16, BF16, uint16_t, "bf16",                                             \
      attn_bf16_to_f32,     attn_f32_to_bf16,     EVEN_ODD, 1)                                    \
    /* OCP e4m3fn: max 448, no inf, NaN = S.1111.111 */                                           \
    X(ATTN_FP8_E4M3, 3, e4m3, E4M3, uint8_t,  "fp8_e4m3",                                         \
      attn_fp8_e4m3_to_f32, attn_f32_to_fp8_e4m3, FP8,      256)                                  \
    /* OCP e5m2: max 57344, inf and NaN as IEEE */                                                \
    X(ATTN_FP8_E5M2, 4, e5m2, E5M2, uint8_t,  "fp8_e5m2",                                         \
      attn_fp8_e5m2_to_f32, attn_f32_to_fp8_e5m2, FP8,      1)                                    \
    /* symmetric int8 codes -127..127, one bf16 scale a group of 32 (see attn_dtype_row_bytes) */ \
    X(ATTN_INT8,     5, i8,   I8,   int8_t,   "int8",                                             \
      attn__i8_code_to_f32, attn__f32_to_i8_code, INT,      1)                                    \
    /* symmetric 4-bit codes -7..7, two a byte, one bf16 scale a group of 32 */                   \
    X(ATTN_INT4,     6, i4,   I4,   uint8_t,  "int4",                                             \
      attn__i4_code_to_f32, attn__f32_to_i4_code, INT,      1)

#define ATTN__DTYPE_ENUM(name, value, t, U, type, str, dec, enc, cls, fold) name = value,
typedef enum attn_dtype { ATTN__DTYPE_LIST(ATTN__DTYPE_ENUM) ATTN_DTYPE_COUNT } attn_dtype;
#undef ATTN__DTYPE_ENUM

/* Bytes per element of the dtypes stored element by element (f32, f16, bf16, fp8); 0 for the
   integer caches ATTN_INT8 and ATTN_INT4, whose rows hold codes and scales (attn_dtype_row_bytes),
   and for a value that is not an attn_dtype. */
ATTNDEF size_t attn_dtype_size(attn_dtype dtype);
ATTNDEF const char *attn_dtype_name(attn_dtype dtype);
/* Bytes of a row of n elements in dtype (n >= 1): n * attn_dtype_size for the element dtypes;
   for the integer caches, groups of 32 elements (the last may be shorter), one after the other,
   each its bf16 scale (2 bytes, little-endian, unaligned) and then its codes:
     ATTN_INT8  a code a byte (int8): 34 bytes a group, the last 2 + its elements;
                n + 2 ceil(n/32) a row;
     ATTN_INT4  16 bytes of codes a group: byte i holds element i of the group in its low nibble
                and element 16 + i in its high nibble, as 4-bit two's complement (elements past
                n are 0): 18 bytes a group, 18 ceil(n/32) a row.
   An element reads as code x scale, exact in f32 (a code of at most 8 bits times a bf16 scale).
   Written (attn_write_kv, attn_convert) from the group's largest magnitude m: scale =
   bf16(m / 127) (int8) or bf16(m / 7) (int4), the quotient in f32, rounded to nearest even,
   code = RNE(x / scale) (in f32) saturated to +-127 or +-7; a group of zeros has scale 0, a
   nonzero group whose scale rounds to 0 the least bf16 subnormal (2^-133), a group with an inf
   or NaN scale NaN (codes 0: it reads back as NaN). 0 for a bad dtype, n < 1 or overflow. */
ATTNDEF size_t attn_dtype_row_bytes(attn_dtype dtype, int64_t n);

/* Convert n elements. Every conversion goes through f32 and rounds once, to nearest even.
   To fp8: stored = saturate(x / scale) (finite overflow and +-inf clamp to +-max finite, NaN stays
   NaN). From fp8: x = stored * scale. scale 0 means 1; it must be finite and > 0, and must be 1
   (or 0) when neither side is fp8. f16/bf16 follow IEEE: overflow rounds to inf. An integer
   dtype's n elements are one row of attn_dtype_row_bytes(dtype, n) bytes (its groups as
   written there). dst and src must not overlap unless they are the same pointer with the same
   dtype (an element dtype's size, when both are element dtypes).
   Returns ATTN_ERR_INVALID_ARG (NULL with n > 0, bad dtype, bad scale, an integer row whose
   bytes do not fit a size_t, the same pointer (n > 0) to another dtype with an integer side). */
ATTNDEF attn_status attn_convert(void *dst, attn_dtype dst_dtype, const void *src,
                                 attn_dtype src_dtype, size_t n, float scale);

/* Scalar conversions (exact, the same rules as attn_convert; scale not applied). */
ATTNDEF uint16_t attn_f32_to_f16(float x);
ATTNDEF float attn_f16_to_f32(uint16_t h);
ATTNDEF uint16_t attn_f32_to_bf16(float x);
ATTNDEF float attn_bf16_to_f32(uint16_t h);
ATTNDEF uint8_t attn_f32_to_fp8_e4m3(float x);
ATTNDEF float attn_fp8_e4m3_to_f32(uint8_t b);
ATTNDEF uint8_t attn_f32_to_fp8_e5m2(float x);
ATTNDEF float attn_fp8_e5m2_to_f32(uint8_t b);

typedef enum attn_type {
    ATTN_DECODER = 0,      /* causal self-attention with a KV cache */
    ATTN_ENCODER,          /* encoder of an encoder-decoder model: non-causal, no cache */
    ATTN_ENCODER_ONLY,     /* BERT-like: non-causal self-attention, prefill only */
    ATTN_ENCODER_DECODER   /* cross-attention: decoder queries over the encoder's K/V */
} attn_type;

/* The ISAs: one list makes the enum (after ATTN_ISA_AUTO = 0, the best the CPU and build
   support), and in the implementation attn_isa_name, attn_isa_supported, attn_best_isa, the ISA
   list of attn_build_info and the kernel-table lookup (attn__kernels_for). A row is X(enum name,
   value, name, compile guard, runs on the CPU, preference, kernel table, build info): the guard is
   [A]'s ATTN__HAVE_<ISA> (1 or 0); "runs" tests cpu, the ATTN__CPU_ flags of [E]; AUTO takes the
   ISA of highest preference that runs (0: never by itself); the kernel table is read only where
   the guard is 1 (a pass's table, attn__table__<isa>, exists only where [I] compiles the pass);
   the build info is its text after "isa=" (a comma before it, but in the first row). A new ISA
   takes the next value, before ATTN_ISA_COUNT: the values are part of the ABI. */
#define ATTN__ISA_LIST(X)                                                                         \
    X(ATTN_ISA_SCALAR, 1, "scalar", 1, 1, 1, &attn__table__scalar, "scalar")                      \
    /* AVX2 + FMA + F16C */                                                                       \
    X(ATTN_ISA_AVX2,   2, "avx2",   ATTN__HAVE_AVX2,   (cpu & ATTN__CPU_AVX2) != 0,   2,          \
      &attn__table__avx2, ",avx2")                                                                \
    /* AVX-512 F/BW/VL/DQ: the vector kernels of every call, in 16 lanes; bf16 inputs take the    \
       bf16 dot-product kernels (AVX-512 BF16) only where they outrun the FMAs (see PRECISION) */ \
    X(ATTN_ISA_AVX512, 3, "avx512", ATTN__HAVE_AVX512, (cpu & ATTN__CPU_AVX512) != 0, 3,          \
      &attn__table__avx512, ",avx512")                                                            \
    /* aarch64 Advanced SIMD */                                                                   \
    X(ATTN_ISA_NEON,   4, "neon",   ATTN__HAVE_NEON,   1,                             2,          \
      &attn__table__neon, ",neon")                                                                \
    /* AVX-512 plus the AMX-BF16 tiles (x86-64 Linux): bf16 prefill, and bf16 decode with eight \
       or more query heads a KV head, on the tiles (see AMX); the rest as on AVX-512. Builds with \
       ATTN_TILES_EMULATE run it on emulated tiles over the AVX2 kernels where the CPU has none   \
       (AUTO never takes those) */                                                                \
    X(ATTN_ISA_AMX,    5, "amx",    ATTN__HAVE_TILES,                                             \
      attn__tiles_real(cpu) || attn__tiles_emulated(cpu), attn__tiles_real(cpu) ? 4 : 0,          \
      attn__tiles_real(cpu) ? ATTN__IF(ATTN__HAVE_AMX)(&attn__table__avx512, NULL)                \
                            : ATTN__IF(ATTN__HAVE_TILE_EMULATION)(&attn__table__avx2, NULL),      \
      ATTN__INFO_AMX)

#define ATTN__ISA_ENUM(name, value, str, guard, runs, pref, table, info) name = value,
typedef enum attn_isa {
    ATTN_ISA_AUTO = 0,
    ATTN__ISA_LIST(ATTN__ISA_ENUM)
    ATTN_ISA_COUNT
} attn_isa;
#undef ATTN__ISA_ENUM

typedef enum attn_gemm {
    ATTN_GEMM_NATIVE = 0,  /* our micro-kernels */
    ATTN_GEMM_ONEDNN       /* oneDNN matmul; needs ATTN_USE_ONEDNN, else ATTN_ERR_UNSUPPORTED */
} attn_gemm;

/* ---------------------------------------------------------------------------------------------
   [3] Parameter structs. A zero field means "default"; each says its default. */

/* Token-major activation rows. stride in elements, 0 = packed. */
typedef struct attn_rows {
    void *data;
    attn_dtype dtype;      /* f32, f16 or bf16 */
    int64_t stride;        /* elements between tokens; 0 = heads * head_size */
} attn_rows;

/* One attention layer's constants (vLLM AttentionImpl.__init__). */
typedef struct attn_params {
    int num_heads;              /* H */
    int num_kv_heads;           /* Hk; H % Hk == 0 */
    int head_size;              /* D, 1..ATTN_MAX_HEAD_SIZE */
    float scale;                /* 0 = 1/sqrt(D) */
    const float *alibi_slopes;  /* [H] or NULL (see attn_alibi_slopes) */
    int sliding_window;         /* W >= 0; 0 = none; W keys visible at most, the query included */
    float logits_soft_cap;      /* >= 0; 0 = none */
    const float *sinks;         /* [H] per-head sink logits, or NULL */
} attn_params;

#define ATTN_MAX_HEAD_SIZE 512

/* Checks H >= 1, Hk >= 1, H % Hk == 0, 1 <= D <= ATTN_MAX_HEAD_SIZE, finite scale >= 0, finite
   cap >= 0, window >= 0, finite slopes and sinks. ATTN_OK or ATTN_ERR_INVALID_ARG. */
ATTNDEF attn_status attn_params_check(const attn_params *params);

/* A caller thread pool: run task(ctx, item, thread) once for every item in [0, num_items), with
   thread in [0, num_threads) and no two concurrent calls sharing a thread index; return when
   all are done. */
typedef void attn_task_fn(void *ctx, int item, int thread);
typedef void attn_parallel_for_fn(void *pool, int num_items, int num_threads, attn_task_fn *task,
                                  void *ctx);

/* Execution settings. NULL or all-zero = defaults. */
typedef struct attn_exec {
    int num_threads;                    /* 0 = OpenMP default (or 1 without OpenMP/pool) */
    attn_isa isa;                       /* ATTN_ISA_AUTO = best available */
    attn_gemm gemm;                     /* ATTN_GEMM_NATIVE */
    attn_parallel_for_fn *parallel_for; /* NULL = OpenMP when compiled in, else serial */
    void *pool;                         /* passed to parallel_for */
    int f32_probs;  /* 1: keep softmax probabilities in f32 for bf16 inputs, i.e. do not use the
                       AVX-512 BF16 dot-product path (see PRECISION); slower, never less exact */
    char *error_msg;    /* NULL, or error_msg_bytes of caller memory where attn_forward writes
                           which check failed, naming the field (see ERRORS); "" on success */
    size_t error_msg_bytes;
    int no_shared_prefixes;  /* 1: paged decode reads a prefix shared by several sequences once
                                per sequence, not once for all (attn_paged_decode); the same
                                bits, slower - for comparisons */
} attn_exec;

/* ---------------------------------------------------------------------------------------------
   [4a] API: CPU, ISA, threads */

/* The best ISA this CPU and build support (never ATTN_ISA_AUTO). */
ATTNDEF attn_isa attn_best_isa(void);
/* 1 when the ISA is compiled in and the CPU (and OS) support it. ATTN_ISA_AUTO counts as 1. */
ATTNDEF int attn_isa_supported(attn_isa isa);
ATTNDEF const char *attn_isa_name(attn_isa isa);   /* "auto", "scalar", "avx2", ...; never NULL */
/* What was detected, e.g. "avx2=yes avx512=yes avx512bf16=yes avx512vbmi=yes amx=no bf16dot=no"
   (an Intel Xeon without AMX; on aarch64 "neon=yes"): amx=yes means usable tiles (the OS
   granted them), bf16dot=fast that bf16 inputs take the bf16 dot-product kernels (PRECISION).
   Static string. */
ATTNDEF const char *attn_cpu_features(void);
/* Threads a call with this exec will use (>= 1). */
ATTNDEF int attn_exec_threads(const attn_exec *exec);

/* Runs task over [0, num_items) the way the kernels do (exec's pool, else OpenMP, else serial).
   Returns ATTN_ERR_INVALID_ARG for a NULL task or num_items < 0. Exposed for callers that want
   the same scheduling for their own work, and for tests. */
ATTNDEF attn_status attn_parallel_run(const attn_exec *exec, int num_items, attn_task_fn *task,
                                      void *ctx);

/* ---------------------------------------------------------------------------------------------
   [4b] API: bias builders (dense f32 [H][Lq][Lk], -inf = masked; positions bottom-right aligned,
   pos_i = kv_len - q_len + i). They materialise exactly what the kernels apply. */

/* vLLM/BLOOM slopes for num_heads heads (non-powers of two included). */
ATTNDEF void attn_alibi_slopes(int num_heads, float *slopes);
/* bias[h][i][j] = slopes[h] * (j - pos_i) where visible under the causal mask (if causal), else
   -inf. */
ATTNDEF attn_status attn_make_alibi_bias(int num_heads, const float *slopes, int q_len, int kv_len,
                                         int causal, float *bias);
/* bias[h][i][j] = 0 where causal (if set) and pos_i - j < window, else -inf; window >= 1.
   The same mask for every head, so the output is [Lq][Lk]. */
ATTNDEF attn_status attn_make_sliding_window_bias(int window, int q_len, int kv_len, int causal,
                                                  float *bias);
/* Causal (if set) + ALiBi (params->alibi_slopes) + window (params->sliding_window): [H][Lq][Lk]. */
ATTNDEF attn_status attn_make_bias(const attn_params *params, int q_len, int kv_len, int causal,
                                   float *bias);

/* ---------------------------------------------------------------------------------------------
   [4c] API: dense varlen SDPA (no cache) - TorchSDPA / xFormers prefill.
   Sequence n's queries are rows [cu_seqlens_q[n], cu_seqlens_q[n+1]) of q, its keys/values rows
   [cu_seqlens_k[n], cu_seqlens_k[n+1]) of k and v; sequences never see each other.
   cu_seqlens_* are non-decreasing int32 [num_seqs+1] starting at 0. lse: [Tq][H] f32 or NULL.
   The workspace size depends on the longest key sequence where the bf16 pair kernels can run
   (see MEMORY); cu_seqlens_k = NULL in the size query gives the most any call can need. */
ATTNDEF size_t attn_sdpa_workspace_size(const attn_params *params, const attn_exec *exec,
                                        const int32_t *cu_seqlens_q, const int32_t *cu_seqlens_k,
                                        int num_seqs);
ATTNDEF attn_status attn_sdpa(const attn_params *params, const attn_exec *exec, attn_rows q,
                              attn_rows k, attn_rows v, attn_rows out,
                              const int32_t *cu_seqlens_q, const int32_t *cu_seqlens_k,
                              int num_seqs, int causal, float *lse, void *ws, size_t ws_bytes);

/* ---------------------------------------------------------------------------------------------
   [4d] API: paged KV cache (one per layer) - vLLM's kv_cache tensor, reshape_and_cache,
   swap_blocks and copy_blocks.

   Layout: key and value are each [num_blocks][num_kv_heads][block_size][head_size] in the cache
   dtype (token-major inside a block and head, vLLM's IPEX CPU view). The token at slot
   s = block * block_size + offset has K(h, d) at key[((block*Hk + h)*block_size + offset)*D + d].
   fp8 caches store RNE-saturate(x / scale) and read stored * scale (k_scale for key, v_scale
   for value); other dtypes store x rounded to nearest even and have scales of exactly 1.

   The fields are read-only after attn_kv_cache_init. A caller that wraps memory it already
   has (e.g. a vLLM tensor) may fill the struct by hand: key and value non-NULL, each holding
   num_blocks blocks, sizes as in attn_kv_cache_init, scales finite and > 0 (1 unless fp8).
   Every function below checks the struct and returns ATTN_ERR_INVALID_ARG when it is not.
   Decode reads the blocks in block-table order, one scattered run per block: on Linux, giving
   the key and value memory huge pages (madvise(MADV_HUGEPAGE)) can make those reads faster
   (docs/PERF.md#huge-pages). */
typedef struct attn_kv_cache {
    void *key, *value;     /* [num_blocks][num_kv_heads][block_size][head_size] each (rows of
                              attn_dtype_row_bytes(dtype, head_size) bytes); may be one buffer
                              (values that are the keys): read as two that hold the same */
    int num_blocks;        /* >= 1 */
    int block_size;        /* tokens per block, >= 1 */
    int num_kv_heads;      /* Hk >= 1 */
    int head_size;         /* D, 1..ATTN_MAX_HEAD_SIZE */
    attn_dtype dtype;      /* f32, f16, bf16, fp8 e4m3, fp8 e5m2, int8 or int4 */
    float k_scale, v_scale;  /* read = stored * scale; 1 for non-fp8 dtypes (the integer
                                caches' scales are in their rows) */
} attn_kv_cache;

/* Bytes of caller memory attn_kv_cache_init needs for one layer: 2 * align64(num_blocks *
   block_size * num_kv_heads * attn_dtype_row_bytes(dtype, head_size)) + 64, the 64
   being alignment slack so that any pointer (malloc's included) works.
   Returns 0 for an invalid argument (a size < 1, head_size > ATTN_MAX_HEAD_SIZE, a bad dtype)
   or when the size does not fit a size_t. Thread-safe (pure). */
ATTNDEF size_t attn_kv_cache_bytes(int num_blocks, int block_size, int num_kv_heads, int head_size,
                                   attn_dtype dtype);

/* Lays out one layer's cache in mem: key at the first 64-byte boundary of mem, value at the next
   64-byte boundary after it. The memory's contents are not touched (blocks are undefined until
   written, and the caller's first touch decides NUMA placement); only *cache is written.
   k_scale / v_scale: fp8 dequantization scales, finite and > 0, or 0 meaning 1; for f32, f16,
   bf16, int8 and int4 they must be 1 (or 0): the first three store values unscaled, the
   integer caches a scale a group in their rows (attn_dtype_row_bytes). The struct stores
   1 for a 0.
   Returns ATTN_ERR_INVALID_ARG (NULL cache or mem, a size < 1, head_size > ATTN_MAX_HEAD_SIZE,
   bad dtype or scale, size overflow) or ATTN_ERR_WORKSPACE_TOO_SMALL (bytes below
   attn_kv_cache_bytes); on error *cache is unchanged. Thread-safe for distinct caches. */
ATTNDEF attn_status attn_kv_cache_init(attn_kv_cache *cache, int num_blocks, int block_size,
                                       int num_kv_heads, int head_size, attn_dtype dtype,
                                       float k_scale, float v_scale, void *mem, size_t bytes);

/* vLLM's view of the cache tensor: shape = {2, num_blocks, block_size*num_kv_heads*head_size}
   ([0] = key, [1] = value); for the integer caches, whose elements are rows of codes and scales,
   shape[2] counts bytes: block_size*num_kv_heads*attn_dtype_row_bytes(dtype, head_size). A NULL
   cache gives {0, 0, 0}; a NULL shape does nothing. */
ATTNDEF void attn_kv_cache_shape(const attn_kv_cache *cache, int64_t shape[3]);

/* Sizing helpers for a whole model (num_layers caches of the same shape). Pure, thread-safe;
   each returns 0 for invalid arguments (sizes < 1, bad dtype, overflow).

   attn_kv_block_bytes: payload bytes of ONE block id over the whole model, K and V of every
   layer: num_layers * 2 * block_size * num_kv_heads * attn_dtype_row_bytes(dtype, head_size)
   (vLLM's CacheEngine.get_cache_block_size; no alignment slack). */
ATTNDEF size_t attn_kv_block_bytes(int num_layers, int block_size, int num_kv_heads,
                                   int head_size, attn_dtype dtype);
/* attn_kv_blocks_for_bytes: the largest num_blocks such that num_layers caches of
   attn_kv_cache_bytes(num_blocks, ...) bytes each fit in `bytes` (slack included), capped at
   2^31 - 1. 0 when not even one block fits. */
ATTNDEF int attn_kv_blocks_for_bytes(size_t bytes, int num_layers, int block_size,
                                     int num_kv_heads, int head_size, attn_dtype dtype);
/* attn_kv_max_tokens: tokens that attn_kv_blocks_for_bytes(bytes, ...) blocks hold, i.e. the
   longest single sequence that a byte budget holds: blocks * block_size. */
ATTNDEF int64_t attn_kv_max_tokens(size_t bytes, int num_layers, int block_size, int num_kv_heads,
                                   int head_size, attn_dtype dtype);
/* attn_kv_blocks_for_tokens: blocks a sequence of `tokens` tokens occupies,
   ceil(tokens / block_size); 0 for tokens <= 0 or block_size < 1. */
ATTNDEF int64_t attn_kv_blocks_for_tokens(int64_t tokens, int block_size);
/* attn_kv_tokens_for_blocks: token capacity of `blocks` blocks, blocks * block_size; 0 for
   blocks <= 0, block_size < 1 or overflow. */
ATTNDEF int64_t attn_kv_tokens_for_blocks(int64_t blocks, int block_size);

/* Writes new tokens' keys and values into the cache (vLLM reshape_and_cache). For token t in
   [0, num_tokens) with s = slot_mapping[t] != -1, block b = s / block_size, offset
   o = s % block_size, and every KV head h and dim d:
       K(b, h, o, d) = enc_k(key.data[t*key_stride + h*D + d])      (same for V with value)
   enc rounds to the cache dtype to nearest even (fp8: RNE-saturate(x / k_scale)); when the
   rows already have the cache dtype the row is copied bit for bit (NaN payloads included).
   key and value: f32, f16 or bf16 rows (may differ) of num_kv_heads*head_size elements,
   stride 0 = packed. slot -1 = padding, not written.
   Duplicate slots (two tokens with the same slot): the LAST such token wins, deterministically,
   for any thread count or pool (all writes to one block are made by one work item, in token
   order), exactly as a serial loop over t would leave the cache.
   Returns ATTN_ERR_INVALID_ARG (NULL or invalid cache, num_tokens < 0, NULL slot_mapping or
   rows data with num_tokens > 0, a rows dtype that is not f32/f16/bf16, stride below
   num_kv_heads*head_size, bad exec), ATTN_ERR_UNSUPPORTED (exec->isa not available) or
   ATTN_ERR_OUT_OF_RANGE (a slot < -1 or >= num_blocks*block_size). All slots are checked
   before anything is written: on error the cache is unchanged.
   Threads: work items own disjoint sets of blocks, run on exec (NULL = defaults). Concurrent
   calls are safe when they write different slots of one cache, or different caches. */
ATTNDEF attn_status attn_write_kv(attn_kv_cache *cache, attn_rows key, attn_rows value,
                                  const int64_t *slot_mapping, int num_tokens,
                                  const attn_exec *exec);

/* Copies whole blocks, key and value, from src to dst (vLLM swap_blocks, e.g. a device cache and
   a host swap cache): for each pair i, block pairs[i][0] of src to block pairs[i][1] of dst, a
   raw byte copy. pairs is int64 [n][2] (row-major, n rows), n >= 0.
   src and dst must have the same block_size, num_kv_heads, head_size, dtype and scales
   (num_blocks may differ) and be either the same cache (same key or value pointer) or
   non-overlapping memory.
   Rules, all checked before any byte is copied: every src id in [0, src->num_blocks) and dst id
   in [0, dst->num_blocks) (else ATTN_ERR_OUT_OF_RANGE); no dst id twice; and when src and dst
   are the same cache, no block is both a source and a destination, a self pair (a, a) included
   (else ATTN_ERR_INVALID_ARG). So the result does not depend on the order of the pairs.
   Returns ATTN_ERR_INVALID_ARG also for NULL/invalid caches, mismatched geometry, n < 0, or
   NULL pairs with n > 0. On error dst is unchanged. Needs no scratch (the duplicate checks use
   a fixed 8 KiB stack bitmap window). Runs on the calling thread. */
ATTNDEF attn_status attn_swap_blocks(const attn_kv_cache *src, attn_kv_cache *dst,
                                     const int64_t *pairs, int n);

/* Copy-on-write for forked sequences (vLLM copy_blocks): for every layer l in [0, num_layers)
   and pair i, copies block pairs[i][0] to block pairs[i][1] within caches[l], key and value.
   All caches must be valid and share num_blocks (their head counts, sizes and dtypes may
   differ). The pair rules are those of attn_swap_blocks within one cache: ids in
   [0, num_blocks) (else ATTN_ERR_OUT_OF_RANGE), distinct destinations, no id both a source and
   a destination (else ATTN_ERR_INVALID_ARG); num_layers < 0, n < 0, NULL caches/pairs with a
   positive count, or a NULL/invalid cache: ATTN_ERR_INVALID_ARG. Checked before copying: on
   error no cache changes. Runs on the calling thread. */
ATTNDEF attn_status attn_copy_blocks(attn_kv_cache *const *caches, int num_layers,
                                     const int64_t *pairs, int n);

/* ---------------------------------------------------------------------------------------------
   [4e] API: block allocator (vLLM's block manager) on caller memory, with reference counts for
   forked sequences and copy-on-write.

   The pool hands out block ids in [0, num_blocks); a block is free while its refcount is 0.
   Allocation and freeing are O(1) (a stack of free ids); nothing is allocated by the library.
   With a prefix cache attached (below), a free block that holds a cached prefix waits in the
   cache (evictable) instead of on the stack, and allocation takes it only when the stack is
   empty.
   Fields are read-only (refcount[b] may be read to inspect sharing).
   Thread safety: none of the pool/sequence functions may run concurrently on the same pool
   (the caller's scheduler serializes them, as vLLM's does); distinct pools are independent. */
/* The prefix cache's tables (see "Prefix cache" below), in caller memory attached to a pool by
   attn_prefix_cache_init. Fields are read-only; the counters may be read (and reset) freely. */
typedef struct attn_prefix_cache {
    uint64_t *hash;          /* [num_blocks] chain hash of a cached block */
    uint64_t *serial;        /* [num_blocks] its entry number (1, 2, ...); 0 = not cached */
    uint64_t *parent;        /* [num_blocks] entry number of the block before it in its
                                chain; 0 = the chain's first block */
    uint64_t *ns;            /* [num_blocks] its namespace */
    uint64_t *last_use;      /* [num_blocks] clock when it last became evictable */
    int32_t *tokens;         /* [num_blocks][block_size] its token ids */
    int32_t *bucket;         /* [num_buckets] first cached block of each bucket, -1 = none */
    int32_t *next;           /* [num_blocks] next cached block in the same bucket */
    int32_t *lru_prev, *lru_next;  /* [num_blocks] the evictable blocks, oldest first */
    int32_t lru_head, lru_tail;    /* oldest and newest evictable block, -1 = none */
    int num_buckets;         /* a power of two >= num_blocks; 0 = no cache */
    int num_cached;          /* cached blocks, held or evictable */
    int num_evictable;       /* cached blocks no sequence holds (refcount 0) */
    int hash_bits;           /* hashes keep their low hash_bits bits: 64 from init; tests
                                lower it to force collisions, which stay misses */
    uint64_t clock;          /* counts entries and releases: entry numbers, LRU order */
    int64_t lookups;         /* attn_prefix_cache_lookup calls that succeeded */
    int64_t lookup_tokens;   /* prompt tokens they were given */
    int64_t hit_tokens;      /* tokens they found cached (not computed again) */
    int64_t evictions;       /* cached blocks taken for new allocations */
    int64_t inserts;         /* blocks entered into the cache */
} attn_prefix_cache;

typedef struct attn_block_pool {
    int32_t *refcount;     /* [num_blocks] sequences holding each block; 0 = free */
    int32_t *free_ids;     /* [num_blocks] stack of free ids: free_ids[0 .. num_free) */
    int num_blocks;        /* ids 0 .. num_blocks-1 */
    int block_size;        /* tokens per block, for slots and block counts */
    int num_free;          /* free blocks that hold no cached prefix (the stack above) */
    char *error_msg;       /* NULL, or error_msg_bytes of caller memory where attn_seq_append
                              and attn_seq_fork write which check failed, naming the field and
                              its values ("" on success); set after attn_block_pool_init, which
                              clears both */
    size_t error_msg_bytes;
    attn_prefix_cache cache; /* the prefix cache: attn_prefix_cache_init (off after
                                attn_block_pool_init: NULL pointers, 0 counts) */
} attn_block_pool;

/* Bytes of caller memory a pool of num_blocks blocks needs (two int32 arrays, 64-byte aligned,
   plus 64 bytes of alignment slack). 0 for num_blocks < 1 or overflow. */
ATTNDEF size_t attn_block_pool_bytes(int num_blocks);

/* Makes every block free; the first allocations return ids 0, 1, 2, ... in that order.
   block_size is the cache's block size: the pool needs it to turn positions into slots and
   block counts.
   Returns ATTN_ERR_INVALID_ARG (NULL pool or mem, num_blocks < 1, block_size < 1) or
   ATTN_ERR_WORKSPACE_TOO_SMALL (bytes < attn_block_pool_bytes); on error *pool is unchanged. */
ATTNDEF attn_status attn_block_pool_init(attn_block_pool *pool, int num_blocks, int block_size,
                                         void *mem, size_t bytes);

/* Free blocks (those an allocation can take: the stack's and, with a prefix cache, the
   evictable cached ones), and blocks in use (num_blocks - free). 0 for a NULL pool. */
ATTNDEF int attn_block_pool_free_count(const attn_block_pool *pool);
ATTNDEF int attn_block_pool_used_count(const attn_block_pool *pool);

/* One sequence's blocks. block_table is caller memory of max_blocks int32 entries; entries
   [0, num_blocks) are the physical blocks of logical blocks 0, 1, ... (token p lives at slot
   block_table[p / bs] * bs + p % bs), so a row of the kernels' block_tables matrix can serve
   directly. Invariant kept by every function: num_blocks == ceil(len / block_size).
   Fields other than block_table/max_blocks are read-only; change them only through the
   functions below. */
typedef struct attn_seq {
    int32_t *block_table;  /* [max_blocks], caller-owned */
    int max_blocks;        /* capacity of block_table */
    int num_blocks;        /* blocks in use */
    int64_t len;           /* tokens */
    /* Prefix cache (attn_seq_set_tokens; attn_seq_init: NULL tokens, not cached) */
    const int32_t *tokens; /* caller's token ids of the sequence, tokens[p] at position p */
    uint64_t cache_ns;     /* namespace of its cached blocks */
    int cache_blocks;      /* leading full blocks whose chain is known; -1 = chain broken */
    uint64_t cache_hash;   /* chain hash after those blocks */
    uint64_t cache_parent; /* entry number of the last of them (0: none yet) */
} attn_seq;

/* An empty sequence over a caller table: len = 0, num_blocks = 0, no token ids (it takes no
   part in a prefix cache until attn_seq_set_tokens).
   ATTN_ERR_INVALID_ARG for a NULL seq, max_blocks < 0, or a NULL table with max_blocks > 0. */
ATTNDEF attn_status attn_seq_init(attn_seq *seq, int32_t *block_table, int max_blocks);

/* Appends n_tokens tokens (positions len .. len+n_tokens-1) and writes each one's slot to
   slots[0 .. n_tokens), allocating blocks as needed. Atomic: all or nothing.
   Copy-on-write: when the last block is partially filled (len % bs != 0), is shared
   (refcount > 1) and n_tokens > 0, a fresh block replaces it in the table, the pair
   (old, fresh) is written to cow_pairs[0], *n_cow = 1, and the old block loses one reference.
   The caller must then copy block old to block fresh in every layer (attn_copy_blocks with
   these pairs, or md.blocks_to_copy of attn_forward) BEFORE writing the new tokens' K/V;
   attn_batch_build ([4i]) does all of this for a step. At most one pair per call, so cow_pairs
   needs room for 1 row; cow_pairs and n_cow may be NULL when the caller knows nothing is
   shared, and if copy-on-write is needed while either is NULL the call fails with
   ATTN_ERR_INVALID_ARG.
   On success *n_cow (when non-NULL) is 0 or 1.
   Returns ATTN_ERR_INVALID_ARG (NULL/invalid pool or seq, n_tokens < 0, NULL slots with
   n_tokens > 0, a table entry that is not a live block id, missing cow buffers),
   ATTN_ERR_OUT_OF_RANGE (the table cannot hold ceil((len + n_tokens) / bs) blocks, or the length
   overflows) or ATTN_ERR_OUT_OF_BLOCKS (the pool has fewer free blocks than needed, the CoW
   block included). The table check comes first. On any error seq, pool, slots, cow_pairs and
   *n_cow are unchanged. */
ATTNDEF attn_status attn_seq_append(attn_block_pool *pool, attn_seq *seq, int n_tokens,
                                    int64_t *slots, int64_t cow_pairs[][2], int *n_cow);

/* Forks parent into child (beam search, parallel sampling, shared prefixes): child gets
   parent's len and blocks, and every block gains one reference. child must be empty
   (len 0, num_blocks 0: fresh from attn_seq_init or released) with its own table of
   child->max_blocks entries. Returns ATTN_ERR_INVALID_ARG (NULL/invalid pool or parent, child
   NULL, == parent, not empty, or sharing parent's table; a parent entry that is not a live
   block id) or ATTN_ERR_OUT_OF_RANGE (child->max_blocks < parent->num_blocks, or a refcount
   would overflow int32); on error nothing changes. With a prefix cache the child takes the
   parent's namespace and chain; its token ids are its own (set them before the fork, or it
   enters no block). */
ATTNDEF attn_status attn_seq_fork(attn_block_pool *pool, const attn_seq *parent, attn_seq *child);

/* Rolls a sequence back to its first new_len tokens (rejected speculative tokens, preemption):
   blocks wholly past new_len lose a reference (freed at 0); len = new_len. Tokens between
   new_len and the end of the kept last block are left as they are and will be overwritten (or
   copied on write, if that block is shared) by the next append. With a prefix cache, the
   blocks it cuts into or drops leave the cache (see "Prefix cache").
   Returns ATTN_ERR_INVALID_ARG (NULL/invalid pool or seq, new_len < 0 or > len, a dropped entry
   that is not a live block id); on error nothing changes. */
ATTNDEF attn_status attn_seq_truncate(attn_block_pool *pool, attn_seq *seq, int64_t new_len);

/* Drops every reference the sequence holds, from its last block to its first (blocks reaching
   refcount 0 return to the pool; cached ones stay cached, evictable); len = 0, num_blocks = 0,
   the table memory, token ids and namespace stay the caller's. A NULL or invalid pool or seq
   (or a table entry that is not a live block id) changes nothing. */
ATTNDEF void attn_seq_release(attn_block_pool *pool, attn_seq *seq);

/* Prefix cache (vLLM's automatic prefix caching): full blocks kept by content across requests.
   A pool may have one, in caller memory of attn_prefix_cache_bytes(num_blocks, block_size)
   bytes attached by attn_prefix_cache_init; without it every function above behaves as before.
   - Identity. A full block of a sequence is identified by the hash chain
         h(block i) = H(h(block i-1), its block_size token ids, the sequence's namespace)
     with h(block -1) a fixed seed; H is a 64-bit multiply-xorshift mix, the same on every
     platform (no randomness, no time). The namespace (attn_seq_set_tokens) is any 64-bit value
     the caller chooses to keep blocks apart: a model, an adapter, a tenant. A sequence finds
     only blocks of its own namespace. A partly filled block is never cached.
   - Exact. A hash only finds candidates: a block matches when its namespace, its token ids
     (stored for every cached block) and its predecessor (the entry matched one block earlier,
     by entry number) are all equal. A hash collision is a miss, never a reuse.
   - Entering. A sequence with token ids (attn_seq_set_tokens) enters each of its blocks into the
     cache when an append fills it (attn_seq_append, hence attn_batch_build), reading
     seq->tokens[p] for the block's positions p: the caller writes a token's id before the append
     that covers it (a serving loop has it then: the prompt from the start, a sampled token
     before the step that feeds it back). The block's K/V are those of the step that appended
     it, so run that step's attn_forward on every layer before the next lookup. A block whose
     content is cached already (another sequence computed the same prefix at the same time) is
     not entered twice; its chain continues through the cached one.
   - Lookup. attn_prefix_cache_lookup starts an empty sequence with the longest run of cached
     blocks that matches its first tokens, leaving at least its last token to compute (the
     logits need it): the blocks go into its table (one reference more each), len = the tokens
     found, and the next attn_batch_build prefills the rest as a chunk over that cached prefix.
   - Eviction. A cached block whose refcount falls to 0 stays cached (evictable) and counts as
     free. Allocation takes never-cached free blocks first, then evicts the evictable block that
     became evictable longest ago (least recently used, by a counter: deterministic). A release
     drops a sequence's blocks from its last to its first, so a chain's later blocks go before
     its first ones. A block that any sequence holds is never evicted.
   - Leaving. An append that writes into a cached block (after a truncation) and a truncation
     that cuts into or drops a block take that block out of the cache first (its K/V are then
     no longer those of its token ids, or may never have been written: truncation is also the
     way to roll back a step that failed). Copy-on-write works as without a cache.
   - Counters in pool->cache: lookups, lookup_tokens, hit_tokens, evictions, inserts.
   Thread safety: as the pool's functions. */

/* Bytes of caller memory for the prefix cache of a pool of num_blocks blocks of block_size
   tokens (64-byte aligned arrays plus 64 bytes of slack); 0 for a size < 1 or overflow. */
ATTNDEF size_t attn_prefix_cache_bytes(int num_blocks, int block_size);

/* Attaches an empty prefix cache in mem to an initialised pool whose blocks are all free (so
   call it right after attn_block_pool_init). Returns ATTN_ERR_INVALID_ARG (NULL/invalid pool or
   NULL mem, blocks in use) or ATTN_ERR_WORKSPACE_TOO_SMALL (bytes < attn_prefix_cache_bytes);
   on error the pool is unchanged. */
ATTNDEF attn_status attn_prefix_cache_init(attn_block_pool *pool, void *mem, size_t bytes);

/* Gives a sequence its token ids and namespace: tokens is caller memory with tokens[p] the id at
   position p, written before the append that covers p, unchanged while the sequence holds p,
   and alive until the sequence is released (repoint it after moving the array). NULL takes the
   sequence out of the cache's bookkeeping: it enters no block (its held blocks stay as they
   are). The namespace changes only while the sequence is empty.
   ATTN_ERR_INVALID_ARG for a NULL or invalid seq, or a new namespace for a non-empty one. */
ATTNDEF attn_status attn_seq_set_tokens(attn_seq *seq, const int32_t *tokens, uint64_t ns);

/* Starts the empty sequence seq (len 0, with token ids) from the longest run of cached blocks
   that matches its first prompt_len tokens, at most (prompt_len - 1) / block_size blocks (so
   the last prompt token is computed) and at most seq->max_blocks. On return seq->len is the
   number of tokens found (0 on a miss; the counters say the same). Needs no free block.
   Returns ATTN_ERR_INVALID_ARG (NULL/invalid pool or seq, no cache on the pool, a sequence that
   is not empty or has no token ids, prompt_len < 1); on error nothing changes. */
ATTNDEF attn_status attn_prefix_cache_lookup(attn_block_pool *pool, attn_seq *seq,
                                             int64_t prompt_len);


/* ---------------------------------------------------------------------------------------------
   [4f] API: paged decode - PagedAttention.forward_decode (vLLM paged_attention_v1 / _v2).
   One query token per sequence (q and out rows [num_seqs][H*D]); sequence s attends its
   seq_lens[s] cached keys (the current token already written), token p read from block
   block_tables[s * max_blocks_per_seq + p / block_size]. The query sits at position
   seq_lens[s] - 1 (ALiBi, window). Keys are split into partitions of ATTN_PARTITION_TOKENS; each
   (sequence, KV head, partition) is computed with the same arithmetic in v1 and v2 and merged in
   partition order, so v1 == v2 bitwise: v1 runs one work item per (sequence, KV head), v2 one per
   partition (long sequences keep every core busy). AUTO applies vLLM's rule: v1 when
   max_seq_len <= 8192 and (one partition or num_seqs * H > 512), else v2. Slots at or past
   seq_lens[s] and blocks wholly outside the sliding window are never read; seq_lens[s] == 0
   gives out = 0, lse = -inf. lse: [num_seqs][H] or NULL.
   Shared prefixes are read once: where the block tables of two or more sequences of a call name
   the same blocks for a whole partition (all its 512 keys present and inside each one's
   window) - parallel samples of one prompt, beam search, prefix-cache hits - that partition is
   computed in one pass for the query heads of all of them (up to 64 heads a pass), its keys and
   values read once instead of once a sequence. Automatic, here and in attn_forward's decodes;
   each sequence's out and lse are bitwise those it gets without the sharing, in any batch and
   on any thread count (exec.no_shared_prefixes = 1 turns it off, for comparisons). Finding them
   sorts the call's whole partitions by their first block (about 14 us for 512 partitions,
   docs/PERF.md#decode-shared-prefix).
   Errors: ATTN_ERR_INVALID_ARG (NULLs, negative lengths, dtype or geometry mismatch between
   params and cache), ATTN_ERR_OUT_OF_RANGE (a length the block table cannot hold, a block id
   outside the cache), ATTN_ERR_WORKSPACE_TOO_SMALL, ATTN_ERR_UNSUPPORTED (exec). */
#define ATTN_PARTITION_TOKENS 512
typedef enum attn_paged_version { ATTN_PAGED_AUTO = 0, ATTN_PAGED_V1,
                                 ATTN_PAGED_V2 } attn_paged_version;

/* Workspace for attn_paged_decode with these arguments (0 when they are invalid). */
ATTNDEF size_t attn_paged_decode_workspace_size(const attn_params *params, const attn_exec *exec,
                                                const attn_kv_cache *cache, const int32_t *seq_lens,
                                                int num_seqs, attn_paged_version version);
ATTNDEF attn_status attn_paged_decode(const attn_params *params, const attn_exec *exec, attn_rows q,
                                      attn_rows out, const attn_kv_cache *cache,
                                      const int32_t *block_tables, int max_blocks_per_seq,
                                      const int32_t *seq_lens, int num_seqs,
                                      attn_paged_version version, float *lse, void *ws,
                                      size_t ws_bytes);
/* The version AUTO resolves to for these lengths (vLLM's rule); V1/V2 are returned as given. */
ATTNDEF attn_paged_version attn_paged_decode_version(const attn_params *params,
                                                      const int32_t *seq_lens, int num_seqs,
                                                      attn_paged_version version);

/* ---------------------------------------------------------------------------------------------
   [4g] API: paged prefill - PagedAttention.forward_prefix (chunked prefill over a cached prefix).
   Sequence s's new query tokens are rows [query_start_loc[s], query_start_loc[s+1]) of q; its
   keys are all seq_lens[s] tokens in the paged cache (cached prefix + the new tokens, already
   written), so Lq <= seq_lens[s] (else ATTN_ERR_INVALID_ARG). Query m is at position
   seq_lens[s] - Lq + m (bottom-right causal when causal).
   Same options, dtypes, determinism and errors as attn_sdpa plus the block-table checks of
   attn_paged_decode. The workspace depends on the longest seq_lens only where a bf16 cache can
   take the bf16 pair kernels (see MEMORY; seq_lens = NULL in the size query gives the most any
   call can need). */
ATTNDEF size_t attn_paged_prefill_workspace_size(const attn_params *params, const attn_exec *exec,
                                                 const attn_kv_cache *cache,
                                                 const int32_t *query_start_loc,
                                                 const int32_t *seq_lens, int num_seqs);
ATTNDEF attn_status attn_paged_prefill(const attn_params *params, const attn_exec *exec,
                                       attn_rows q, attn_rows out, const attn_kv_cache *cache,
                                       const int32_t *block_tables, int max_blocks_per_seq,
                                       const int32_t *query_start_loc, const int32_t *seq_lens,
                                       int num_seqs, int causal, float *lse, void *ws,
                                       size_t ws_bytes);

/* Merges two partial attention results over disjoint key sets (cascade / shared prefix /
   split-KV): with w = exp(lse - max(lse_a, lse_b)), out = (out_a w_a + out_b w_b) / (w_a + w_b)
   and lse = log(e^lse_a + e^lse_b); a side with lse = -inf contributes nothing, both -inf give
   out = 0, lse = -inf. Rows are [num_tokens][num_heads*head_size] (any activation dtypes,
   strides allowed); lse arrays [num_tokens][num_heads]; lse (output) may be NULL. out may alias
   out_a or out_b (same dtype and stride). Partial results must come from calls without sinks
   (a sink belongs to the full softmax once, not to each part). */
ATTNDEF attn_status attn_merge_states(int num_tokens, int num_heads, int head_size,
                                      attn_rows out_a, const float *lse_a, attn_rows out_b,
                                      const float *lse_b, attn_rows out, float *lse);

/* ---------------------------------------------------------------------------------------------
   [4h] API: the backend layer = vLLM AttentionBackend + AttentionMetadata + AttentionImpl.forward.
   attn_forward does, in order: (0) copy md->blocks_to_copy within cache (copy-on-write of
   forked sequences, before any new token lands in a fresh block); (1) write the new K/V to the
   cache (DECODER / ENCODER_ONLY:
   slot_mapping; ENCODER_DECODER: cross_slot_mapping when key/value are given; ENCODER: never);
   (2) the prefills: plain SDPA over the new rows when context_lens is NULL, else paged prefill
   over the cached prefix; (3) the decodes: paged decode (cross: over cross_block_tables and
   encoder_seq_lens). Output rows follow the batch: prefill tokens, then one row per decode.
   Steps (2) and (3) run as ONE parallel region over fixed work items (decodes use the v1
   schedule, which equals v2 bitwise). Everything is validated before anything is written. */
typedef enum attn_backend {
    ATTN_BACKEND_SDPA = 0,  /* our SIMD kernels (vLLM TorchSDPA / xFormers) */
    ATTN_BACKEND_IPEX       /* prefill GEMMs on oneDNN (needs ATTN_USE_ONEDNN) */
} attn_backend;
ATTNDEF const char *attn_backend_name(attn_backend backend);  /* "SDPA", "IPEX"; never NULL */

/* One step's batch. BATCH ORDER: sequences 0 .. num_prefills-1 are the prefills (chunks),
   sequences num_prefills .. num_prefills+num_decode_tokens-1 the decodes (one token each); every
   per-sequence array (seq_lens, block_tables rows, encoder_seq_lens, ...) is indexed by this
   batch position, and every per-token array (slot_mapping, query and output rows) lists the
   prefills' tokens in that order (sequence s: rows [query_start_loc[s], query_start_loc[s+1])),
   then one token per decode. block_tables is a row-major matrix whose row stride is exactly
   max_blocks_per_seq entries: sequence s's logical block j is block_tables[s * max_blocks_per_seq
   + j] (the same for cross_block_tables with max_cross_blocks_per_seq). A zero-initialised
   field keeps its old meaning: the fields from blocks_to_copy on are optional (0 / NULL = none,
   not declared). attn_batch_build ([4i]) fills all of it from the sequences of a block pool. */
typedef struct attn_metadata {
    int num_prefills;                  /* prefill sequences (first in the batch) */
    int num_prefill_tokens;            /* their query tokens */
    int num_decode_tokens;             /* decode sequences, one query token each, after them */
    const int64_t *slot_mapping;       /* [prefill + decode tokens] cache slot per token, -1 =
                                          skip; NULL = write nothing: on a step
                                          that reads the cache only with profile_run */
    const int32_t *seq_lens;           /* [num_prefills + num_decode_tokens] keys per sequence,
                                          cached + new; needed with a cache */
    const int32_t *query_start_loc;    /* [num_prefills + 1] prefill token offsets, from 0 */
    const int32_t *context_lens;       /* [num_prefills] cached tokens before each chunk, or NULL
                                          for plain prefill (no prefix) */
    const int32_t *block_tables;       /* [sequences][max_blocks_per_seq], batch order */
    int max_blocks_per_seq;            /* entries per row of block_tables (its row stride) */
    const int32_t *encoder_seq_lens;   /* [sequences] encoder tokens of each sequence */
    const int32_t *encoder_start_loc;  /* [num_prefills + 1] offsets into the encoder rows */
    int num_encoder_tokens;
    const int64_t *cross_slot_mapping; /* [num_encoder_tokens] where cross K/V are written */
    const int32_t *cross_block_tables; /* [sequences][max_cross_blocks_per_seq] */
    int max_cross_blocks_per_seq;
    const int64_t *blocks_to_copy;     /* [num_blocks_to_copy][2] (src, dst) block pairs that
                                          attn_forward copies in `cache` (copy-on-write, vLLM's
                                          blocks_to_copy) before it writes the new K/V; the rules
                                          of attn_copy_blocks. NULL with 0 = none */
    int num_blocks_to_copy;
    int num_seqs;                      /* declared entries of seq_lens and rows of block_tables:
                                          must be num_prefills + num_decode_tokens; 0 = unchecked */
    int num_tokens;                    /* declared entries of slot_mapping and query rows: must be
                                          num_prefill_tokens + num_decode_tokens; 0 = unchecked */
    int profile_run;                   /* 1: a profiling run (vLLM's dummy step), slot_mapping may
                                          be NULL on a step that reads the cache and nothing is
                                          written; 0: that NULL is refused */
    const attn_block_pool *pool;       /* NULL, or the pool whose blocks the tables name: every
                                          block a sequence reads must be in use there, and the
                                          pool's block size the cache's (attn_batch_build sets
                                          it) */
} attn_metadata;

typedef struct attn_layer {
    attn_params params;
    attn_type type;
    attn_backend backend;
} attn_layer;

/* Checks params, type and backend (ATTN_BACKEND_IPEX without ATTN_USE_ONEDNN:
   ATTN_ERR_UNSUPPORTED) and fills layer. */
ATTNDEF attn_status attn_layer_init(attn_layer *layer, const attn_params *params, attn_type type,
                                    attn_backend backend);
/* Workspace for attn_forward with this step's metadata: 0 for a NULL layer or md, invalid
   params, a negative count, a negative exec->num_threads, or decodes without their lengths
   (seq_lens; encoder_seq_lens for ENCODER_DECODER). An empty step (a zeroed md) is valid and
   gets the fixed scratch of an empty step, which a later step may exceed: to size once, use
   attn_forward_workspace_bound. */
ATTNDEF size_t attn_forward_workspace_size(const attn_layer *layer, const attn_metadata *md,
                                           const attn_exec *exec);
/* Workspace that is enough for attn_forward on every step within these capacities: at most
   max_seqs sequences and max_tokens new tokens a step, and no sequence longer than max_context
   keys (cached + new tokens; for ENCODER_DECODER also its encoder tokens) - e.g. an attn_batch's
   max_seqs and max_tokens, and its max_blocks_per_seq * block_size. For one allocation at
   start-up: attn_forward_workspace_size(step) <= this for every such step and the same exec.
   0 for a NULL or invalid layer, a capacity < 1, a negative exec->num_threads or a size that
   does not fit a size_t. */
ATTNDEF size_t attn_forward_workspace_bound(const attn_layer *layer, int max_seqs, int max_tokens,
                                            int64_t max_context, const attn_exec *exec);
/* query: [prefill + decode tokens] rows (ENCODER: [num_encoder_tokens]); key/value: the new
   tokens' rows - the same tokens as query for self-attention, the encoder tokens for
   ENCODER_DECODER prefill (data NULL = already cached); cache: NULL only for ENCODER and
   cache-less ENCODER_ONLY. Errors as the kernels, plus ATTN_ERR_INVALID_ARG for missing
   encoder / cross metadata, decode metadata for ENCODER or ENCODER_ONLY, a prefix for
   ENCODER_ONLY, seq_lens != context_lens + query length, and (DECODER, ENCODER_ONLY) seq_lens
   below a sequence's new tokens (its query length; 1 for a decode).
   Consistency checks (ATTN_ERR_INVALID_ARG unless said):
   - DECODER, ENCODER_ONLY with seq_lens: every prefill has seq_lens[s] == context + query
     length, context being context_lens[s], or 0 when context_lens is NULL (a cached prefix
     needs context_lens);
   - with a cache, slot_mapping and block_tables, every written slot is the one of its position
     in its row: slot_mapping[t] == block_tables[s][pos / bs] * bs + pos % bs for token i of
     sequence s at pos = seq_lens[s] - Lq + i (decodes: pos = seq_lens[s] - 1); this catches rows
     in another order than the batch, a wrong row stride, a decode's seq_lens off by one; a slot
     outside the cache is ATTN_ERR_OUT_OF_RANGE. ENCODER_DECODER: cross_slot_mapping against
     cross_block_tables, encoder token i of prefill s at pos = i;
   - md->num_seqs / md->num_tokens, when declared (> 0), equal the counts;
   - blocks_to_copy: the pair rules of attn_copy_blocks (ATTN_ERR_OUT_OF_RANGE for an id outside
     the cache), a cache to copy in, and no NULL with a positive count;
   - every row the step reads from the cache names no block twice in the entries its length
     uses, and, with md->pool, only blocks in use there (the pool's block size must be the
     cache's, its block count at most the cache's);
   - slot_mapping NULL on a step that reads the cache (decodes, or a chunk over a cached prefix)
     needs md->profile_run = 1.
   On every return attn_forward writes exec->error_msg (when given): "" on success, else the
   failing check with the field and its values, e.g. "query_start_loc[1] = 16 but
   num_prefill_tokens = 0". */
ATTNDEF attn_status attn_forward(const attn_layer *layer, const attn_exec *exec, attn_rows query,
                                 attn_rows key, attn_rows value, attn_kv_cache *cache,
                                 const attn_metadata *md, attn_rows out, void *ws,
                                 size_t ws_bytes);

/* ---------------------------------------------------------------------------------------------
   [4i] API: the batch builder - one decoder step's attn_metadata from a block pool's sequences,
   so that nothing of it is filled by hand.
   attn_batch_build(batch, pool, seqs, num_new, n, md): batch position i is seqs[i] with
   num_new[i] >= 1 new tokens; the batch order is the order given (the caller lays out query rows
   the same way). The trailing run of entries with num_new == 1 are the decodes; everything
   before it is a prefill chunk (a cached prefix is the sequence's length before the call). It
   (1) checks everything, the blocks needed included (copy-on-write blocks of shared last blocks
   counted exactly), and fails with nothing changed: ATTN_ERR_OUT_OF_BLOCKS when the pool cannot
   hold the step (the scheduler preempts, e.g. attn_seq_release / attn_seq_truncate on a
   sequence, and calls again), ATTN_ERR_OUT_OF_RANGE when a sequence's own table cannot hold
   its new length, ATTN_ERR_CAPACITY when the step passes the batch's capacities (max_seqs,
   max_tokens, max_blocks_per_seq: build a smaller step), ATTN_ERR_INVALID_ARG for bad
   arguments (a sequence twice, num_new < 1, a table entry that is not a block in use or names
   a block twice, ...);
   (2) appends every sequence (attn_seq_append), collecting the copy-on-write pairs;
   (3) fills md completely (it is zeroed first): num_prefills, num_prefill_tokens,
   num_decode_tokens, slot_mapping, seq_lens (lengths after the step), context_lens (before),
   query_start_loc, block_tables (batch order, row stride max_blocks_per_seq, entries past a
   sequence's blocks 0), blocks_to_copy (so attn_forward does the copy-on-write of every layer
   before writing K/V: no attn_copy_blocks call), num_seqs, num_tokens and pool (so that
   attn_forward checks every block read is in use). md points into the
   batch's memory and stays valid until the next build with that batch.
   Covered: DECODER layers (self-attention: chunked prefill, decode, fork, copy-on-write); pass
   the same md to every layer. Not covered: ENCODER (no cache: no block tables to build),
   ENCODER_ONLY (md has context_lens, which that type refuses: clear it), and ENCODER_DECODER's
   cross metadata (encoder_*, cross_*), which the caller adds to the decoder's md.
   Errors write batch->error_msg (as exec->error_msg in attn_forward; "" on success).
   Thread safety: as the pool's functions (one caller per pool and batch at a time). */
typedef struct attn_batch {
    int max_seqs, max_tokens, max_blocks_per_seq;  /* capacities given to attn_batch_init */
    int64_t *slot_mapping;       /* [max_tokens] */
    int64_t *blocks_to_copy;     /* [max_seqs][2] */
    int32_t *seq_lens, *context_lens, *query_start_loc;  /* [max_seqs], [max_seqs], [+1] */
    int32_t *block_tables;       /* [max_seqs][max_blocks_per_seq] */
    char error_msg[160];         /* why the last build failed; "" after a success */
} attn_batch;

/* Bytes of caller memory for a batch of at most max_seqs sequences, max_tokens new tokens and
   max_blocks_per_seq blocks per sequence (64-byte aligned arrays plus 64 bytes of slack); 0 for
   a size < 1 or overflow. */
ATTNDEF size_t attn_batch_bytes(int max_seqs, int max_tokens, int max_blocks_per_seq);
/* Lays the arrays out in mem. ATTN_ERR_INVALID_ARG (NULL batch or mem, a size < 1) or
   ATTN_ERR_WORKSPACE_TOO_SMALL (bytes < attn_batch_bytes). */
ATTNDEF attn_status attn_batch_init(attn_batch *batch, int max_seqs, int max_tokens,
                                    int max_blocks_per_seq, void *mem, size_t bytes);
ATTNDEF attn_status attn_batch_build(attn_batch *batch, attn_block_pool *pool,
                                     attn_seq *const *seqs, const int32_t *num_new, int n,
                                     attn_metadata *md);
/* attn_batch_build that also checks what the caller believes: expect_len[i] is the length the
   caller's own bookkeeping gives seqs[i] before the step (NULL = unchecked, as attn_batch_build).
   A mismatch (a sequence used after attn_seq_release, a step built twice, a token appended by
   hand as well) is ATTN_ERR_INVALID_ARG naming the sequence, with nothing changed. */
ATTNDEF attn_status attn_batch_build_checked(attn_batch *batch, attn_block_pool *pool,
                                             attn_seq *const *seqs, const int64_t *expect_len,
                                             const int32_t *num_new, int n, attn_metadata *md);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_H_INCLUDED */

/* ---------------------------------------------------------------------------------------------
   IMPLEMENTATION: sections [A] to [R], then the kernel pass [S] to [Y] (see CONTENTS). */
#ifdef ATTN_IMPLEMENTATION
#ifndef ATTN_IMPLEMENTATION_INCLUDED
#define ATTN_IMPLEMENTATION_INCLUDED

/* ---------------------------------------------------------------------------------------------
   [A] Configuration defaults and impossible combinations. */
#if defined(ATTN_USE_OPENMP) && defined(ATTN_NO_OPENMP)
#error "attn.h: ATTN_USE_OPENMP and ATTN_NO_OPENMP contradict each other"
#endif
#if defined(_OPENMP) && !defined(ATTN_NO_OPENMP) && !defined(ATTN_USE_OPENMP)
#define ATTN_USE_OPENMP
#endif
#if defined(ATTN_USE_OPENMP) && !defined(_OPENMP)
#error "attn.h: ATTN_USE_OPENMP needs the compiler's OpenMP flag (-fopenmp)"
#endif
#if defined(ATTN_USE_ONEDNN) && defined(__has_include)
#if !__has_include(<oneapi/dnnl/dnnl.h>)
#error "attn.h: ATTN_USE_ONEDNN is defined but <oneapi/dnnl/dnnl.h> is missing (libdnnl-dev)"
#endif
#endif
#ifndef ATTN_HEADER_FILENAME
#define ATTN_HEADER_FILENAME "attn.h"
#endif
#ifndef ATTN_VALUE_CACHE_BYTES
#define ATTN_VALUE_CACHE_BYTES (2u << 20)
#endif
#ifndef ATTN_SERIAL_WORK
#define ATTN_SERIAL_WORK ((int64_t)1 << 22)
#endif
#ifndef ATTN_ASSERT
#include <assert.h>
#define ATTN_ASSERT(x) assert(x)
#endif

/* Which ISA passes are compiled: each ATTN__HAVE_<ISA> is 1 or 0, never undefined, because the
   ISA table (ATTN__ISA_LIST) reads them in expressions; test them with #if, not #ifdef
   (tests/house.sh checks). x86 paths need GCC/Clang target regions (or the matching -m flags
   under ATTN_NO_RUNTIME_DISPATCH); NEON is a compile-time choice on aarch64. */
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__) || defined(_M_IX86)
#define ATTN__X86 1
#endif
#if !defined(ATTN_NO_SIMD) && defined(ATTN__X86) && !defined(ATTN_NO_AVX2) &&                 \
    ((defined(__GNUC__) && !defined(ATTN_NO_RUNTIME_DISPATCH)) ||                            \
     (defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)))
#define ATTN__HAVE_AVX2 1
#else
#define ATTN__HAVE_AVX2 0
#endif
#if !defined(ATTN_NO_SIMD) && defined(ATTN__X86) && !defined(ATTN_NO_AVX512) &&               \
    ((defined(__GNUC__) && !defined(ATTN_NO_RUNTIME_DISPATCH)) ||                            \
     (defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) &&              \
      defined(__AVX512DQ__)))
#define ATTN__HAVE_AVX512 1
#else
#define ATTN__HAVE_AVX512 0
#endif
#if !defined(ATTN_NO_SIMD) && !defined(ATTN_NO_NEON) && defined(__aarch64__)
#define ATTN__HAVE_NEON 1
#else
#define ATTN__HAVE_NEON 0
#endif
/* AMX tiles (x86-64, GCC 11 / Clang 12 or later): the tile kernels of the AVX-512 pass. */
#if ATTN__HAVE_AVX512 && defined(__x86_64__) && !defined(ATTN_NO_AMX) &&                      \
    ((defined(__clang__) && __clang_major__ >= 12) ||                                         \
     (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 11))
#define ATTN__HAVE_AMX 1
#else
#define ATTN__HAVE_AMX 0
#endif
/* The same tile kernels over emulated tiles in the AVX2 pass (tests on CPUs without AMX). */
#if defined(ATTN_TILES_EMULATE) && ATTN__HAVE_AVX2 && !defined(ATTN_NO_AMX)
#define ATTN__HAVE_TILE_EMULATION 1
#else
#define ATTN__HAVE_TILE_EMULATION 0
#endif
/* ATTN_ISA_AMX is compiled in: real tiles, emulated ones, or both. */
#if ATTN__HAVE_AMX || ATTN__HAVE_TILE_EMULATION
#define ATTN__HAVE_TILES 1
#else
#define ATTN__HAVE_TILES 0
#endif
/* Decode's logits on the tiles too, wherever the tile kernels are (see attn__decode_tile_keys):
   for bf16 queries and eight or more query heads a KV head, or with ATTN_DECODE_TILES for every
   query dtype and four or more (attn__decode_tiles_may_run). */
#if ATTN__HAVE_TILES
#define ATTN__HAVE_DECODE_TILES 1
#endif
#ifdef ATTN_DECODE_TILES
#define ATTN__DECODE_TILES_ALL 1
#else
#define ATTN__DECODE_TILES_ALL 0
#endif
/* e4m3 decoded through byte tables with AVX-512 VBMI's byte permutes, written as inline asm so
   the AVX-512 pass needs no VBMI target (see attn__fp8_bf16_words__avx512); GNU-style only. */
#if ATTN__HAVE_AVX512 && defined(__GNUC__) && !defined(ATTN_NO_FP8_KERNELS)
#define ATTN__HAVE_E4M3_LUT 1
#endif

/* ---------------------------------------------------------------------------------------------
   [B] Includes. */
#include <math.h>
#include <string.h>
#include <float.h>
#include <stdarg.h>
#include <stdio.h>   /* vsnprintf, for error messages; nothing is printed */
#if ATTN__HAVE_AVX2 || ATTN__HAVE_AVX512
#include <immintrin.h>
#endif
#if defined(ATTN__X86) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif
#if ATTN__HAVE_NEON
#include <arm_neon.h>
#endif
#ifdef ATTN_USE_OPENMP
#include <omp.h>
#endif
#ifdef ATTN_USE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

/* ---------------------------------------------------------------------------------------------
   [C] Portability. */
#define ATTN__SIZE_MAX ((size_t)-1)
#define ATTN__INT_MAX 0x7fffffff
#define ATTN__INT64_MAX ((int64_t)0x7fffffffffffffffLL)
#if defined(__GNUC__) || defined(__clang__)
#define ATTN__PRIVATE static __attribute__((unused))
/* The kernels' helpers are inlined by force where the compiler optimises: their loops unroll
   by constants known only after inlining. Without optimisation (-O0) nothing folds those
   constants, and forcing the helpers inline multiplied the code of every kernel instance and the
   compiler's time and memory (docs/PERF.md#compile-time), so there they are plain calls. */
#ifdef __OPTIMIZE__
#define ATTN__INLINE inline __attribute__((always_inline))
#else
#define ATTN__INLINE inline
#endif
#define ATTN__NOINLINE __attribute__((noinline))
#define ATTN__LIKELY(x) __builtin_expect(!!(x), 1)
#else
#define ATTN__PRIVATE static
#define ATTN__INLINE __inline
#define ATTN__NOINLINE
#define ATTN__LIKELY(x) (x)
#endif
#define ATTN__CAT2_(a, b) a##b
#define ATTN__CAT2(a, b) ATTN__CAT2_(a, b)
/* ATTN__IF(c)(then, else): then where c expands to 1, else where it expands to 0 (a compile
   guard such as ATTN__HAVE_AVX2); the other branch is dropped unread, so it may name what this
   build lacks (the ISA table's kernel tables). */
#define ATTN__IF(c) ATTN__CAT2(ATTN__IF_, c)
#define ATTN__IF_1(then, otherwise) then
#define ATTN__IF_0(then, otherwise) otherwise
#define ATTN__ALIGN 64
#define ATTN__MIN(a, b) ((a) < (b) ? (a) : (b))
#define ATTN__MAX(a, b) ((a) > (b) ? (a) : (b))

#ifdef ATTN_ASSERT_ON_ERROR
#define ATTN__FAIL(code) (ATTN_ASSERT(!"attn.h error return"), (code))
#else
#define ATTN__FAIL(code) (code)
#endif
/* Return an error status from a validation check. */
#define ATTN__CHECK(cond, code)                                                                   \
    do {                                                                                          \
        if (!(cond)) return ATTN__FAIL(code);                                                     \
    } while (0)
#define ATTN__TRY(expr)                                                                           \
    do {                                                                                          \
        attn_status attn__st_ = (expr);                                                           \
        if (attn__st_ != ATTN_OK) return attn__st_;                                               \
    } while (0)
/* Error messages: a caller buffer (exec->error_msg, batch->error_msg) that a failing check fills
   with what it found, naming the field. ATTN__CHECKF(m, cond, code, "fmt", ...) is ATTN__CHECK
   that also formats its message into m (NULL or a 0-byte buffer: nothing is written). The text
   is formatted only on failure, so a check costs what ATTN__CHECK costs. */
typedef struct attn__msg { char *buf; size_t bytes; } attn__msg;
#if defined(__GNUC__) || defined(__clang__)
ATTN__PRIVATE attn_status attn__failf(const attn__msg *m, attn_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#endif
ATTN__PRIVATE attn_status attn__failf(const attn__msg *m, attn_status code, const char *fmt, ...) {
    if (m && m->buf && m->bytes) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(m->buf, m->bytes, fmt, ap);
        va_end(ap);
    }
    return code;
}
#define ATTN__CHECKF(m, cond, code, ...)                                                          \
    do {                                                                                          \
        if (!(cond)) return ATTN__FAIL(attn__failf((m), (code), __VA_ARGS__));                   \
    } while (0)
/* ATTN__TRY that writes a default message ("<what>: <status text>") when the failing call
   wrote none (the kernels' shared checks carry no message). */
#define ATTN__TRYF(m, expr, what)                                                                 \
    do {                                                                                          \
        attn_status attn__st_ = (expr);                                                           \
        if (attn__st_ != ATTN_OK) return attn__fail_default((m), attn__st_, (what));            \
    } while (0)

typedef union attn__bits32 { float f; uint32_t u; } attn__bits32;
ATTN__PRIVATE ATTN__INLINE uint32_t attn__f32_bits(float x) { attn__bits32 b; b.f = x; return b.u; }
ATTN__PRIVATE ATTN__INLINE float attn__bits_f32(uint32_t u) { attn__bits32 b; b.u = u; return b.f; }
ATTN__PRIVATE ATTN__INLINE size_t attn__align_up(size_t n) {
    return (n + (ATTN__ALIGN - 1)) & ~(size_t)(ATTN__ALIGN - 1);
}

/* ---------------------------------------------------------------------------------------------
   [D] Status strings, version, build info. */
ATTNDEF const char *attn_status_str(attn_status status) {
    switch (status) {
#define ATTN__STATUS_CASE(name, value, text) case name: return text;
        ATTN__STATUS_LIST(ATTN__STATUS_CASE)
#undef ATTN__STATUS_CASE
        default: return "unknown attn_status";
    }
}

/* The message of an error whose check wrote none: "<what>: <status text>". */
ATTN__PRIVATE attn_status attn__fail_default(const attn__msg *m, attn_status st, const char *what) {
    if (m && m->buf && m->bytes && m->buf[0] == '\0')
        attn__failf(m, st, "%s: %s", what, attn_status_str(st));
    return st;
}

ATTNDEF int attn_version(void) { return ATTN_VERSION_NUMBER; }

/* The AMX row's build info (the ISA table): which tiles this build runs ATTN_ISA_AMX on. */
#if ATTN__HAVE_AMX && ATTN__HAVE_TILE_EMULATION
#define ATTN__INFO_AMX ",amx(emulated where the CPU lacks tiles)"
#elif ATTN__HAVE_AMX
#define ATTN__INFO_AMX ",amx"
#else
#define ATTN__INFO_AMX ",amx(emulated)"
#endif
#ifdef ATTN_USE_OPENMP
#define ATTN__INFO_OMP " openmp=yes"
#else
#define ATTN__INFO_OMP " openmp=no"
#endif
#ifdef ATTN_USE_ONEDNN
#define ATTN__INFO_DNNL " onednn=yes"
#else
#define ATTN__INFO_DNNL " onednn=no"
#endif
#ifdef ATTN_NO_FP8_KERNELS
#define ATTN__INFO_FP8 " fp8_kernels=no"
#else
#define ATTN__INFO_FP8 ""
#endif
#if defined(ATTN__HAVE_DECODE_TILES) && ATTN__DECODE_TILES_ALL
#define ATTN__INFO_DECODE_TILES " decode_tiles=all"
#elif defined(ATTN__HAVE_DECODE_TILES)
#define ATTN__INFO_DECODE_TILES " decode_tiles=bf16"
#else
#define ATTN__INFO_DECODE_TILES ""
#endif

ATTNDEF const char *attn_build_info(void) {
#define ATTN__ISA_INFO(name, value, str, guard, runs, pref, table, info) ATTN__IF(guard)(info, "")
    return "attn.h " ATTN_VERSION_STRING " isa=" ATTN__ISA_LIST(ATTN__ISA_INFO)
        ATTN__INFO_OMP ATTN__INFO_DNNL ATTN__INFO_FP8 ATTN__INFO_DECODE_TILES;
#undef ATTN__ISA_INFO
}

/* ---------------------------------------------------------------------------------------------
   [E] CPU features. Detected once; the result is a pure function of the machine, so a race
   between two first callers writes the same value (the only global in the library). */
enum {
    ATTN__CPU_AVX2 = 1 << 0,     /* AVX2 + FMA + F16C, and the OS saves YMM state */
    ATTN__CPU_AVX512 = 1 << 1,   /* F + BW + VL + DQ, and the OS saves ZMM state */
    ATTN__CPU_AVX512BF16 = 1 << 2,
    ATTN__CPU_AVX512VBMI = 1 << 3,
    ATTN__CPU_AMX = 1 << 4,      /* AMX-TILE + AMX-BF16, tile state on, the OS lets us use it */
    ATTN__CPU_BF16_DOT_FAST = 1 << 5,  /* AVX-512 BF16 whose dot products outrun the FMAs:
                                          AMD's, not Intel's (docs/PERF.md#bf16-dot-rates) */
    ATTN__CPU_DETECTED = 1 << 30
};
static volatile int attn__cpu_flags_cache;

#if defined(ATTN__X86) && (defined(__GNUC__) || defined(__clang__))
ATTN__PRIVATE uint64_t attn__xgetbv0(void) {
    uint32_t eax, edx;
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((uint64_t)edx << 32) | eax;
}
/* Linux gives a process the 8 KB of tile data state only when asked (arch_prctl
   ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA); asking again is harmless, so racing first callers
   are fine. Made as a raw system call: <sys/syscall.h> needs feature macros the includer may
   not have set. Elsewhere tiles stay off. */
ATTN__PRIVATE int attn__tile_permission(void) {
#if defined(__linux__) && defined(__x86_64__) && ATTN__HAVE_AMX
    long ret, nr = 158 /* SYS_arch_prctl */, req = 0x1023 /* ARCH_REQ_XCOMP_PERM */, feature = 18;
    __asm__ volatile("syscall" : "=a"(ret) : "0"(nr), "D"(req), "S"(feature) : "rcx", "r11",
                     "memory");
    return ret == 0;
#else
    return 0;
#endif
}
/* Whether the CPU is AMD's ("AuthenticAMD"): its vdpbf16ps does more multiply-adds a cycle than
   vfmadd231ps, where Intel's Xeons do fewer (docs/PERF.md#bf16-dot-rates). */
ATTN__PRIVATE int attn__cpu_is_amd(void) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(0, &a, &b, &c, &d) && b == 0x68747541u && d == 0x69746e65u &&
           c == 0x444d4163u;
}
ATTN__PRIVATE int attn__detect_cpu(void) {
    unsigned a, b, c, d, flags = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, f16c = (c >> 29) & 1;
    if (!osxsave || !avx) return 0;
    uint64_t xcr0 = attn__xgetbv0();
    int ymm_ok = (xcr0 & 0x6) == 0x6, zmm_ok = (xcr0 & 0xe6) == 0xe6;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    int avx2 = (b >> 5) & 1, f = (b >> 16) & 1, dq = (b >> 17) & 1, bw = (b >> 30) & 1;
    int vl = (b >> 31) & 1, vbmi = (c >> 1) & 1;
    if (ymm_ok && avx2 && fma && f16c) flags |= ATTN__CPU_AVX2;
    if (zmm_ok && (flags & ATTN__CPU_AVX2) && f && dq && bw && vl) flags |= ATTN__CPU_AVX512;
    if ((flags & ATTN__CPU_AVX512) && vbmi) flags |= ATTN__CPU_AVX512VBMI;
    int amx = ((d >> 24) & 1) && ((d >> 22) & 1) && (xcr0 & 0x60000) == 0x60000;
    if ((flags & ATTN__CPU_AVX512) && __get_cpuid_count(7, 1, &a, &b, &c, &d) && ((a >> 5) & 1))
        flags |= ATTN__CPU_AVX512BF16;
    if ((flags & ATTN__CPU_AVX512BF16) && attn__cpu_is_amd()) flags |= ATTN__CPU_BF16_DOT_FAST;
    if ((flags & ATTN__CPU_AVX512BF16) && amx && attn__tile_permission())
        flags |= ATTN__CPU_AMX;
    return (int)flags;
}
#else
ATTN__PRIVATE int attn__cpu_is_amd(void) { return 0; }
ATTN__PRIVATE int attn__detect_cpu(void) { return 0; }
#endif

/* The flags attn_cpu_features names, in its order: X(flag, name, word when set, word when
   not). amx: usable tiles; bf16dot=fast: the bf16 pair kernels run (ATTN__CPU_BF16_DOT_FAST). */
#define ATTN__CPU_FEATURE_LIST(X)                                                                 \
    X(ATTN__CPU_AVX2, "avx2", "yes", "no")                                                        \
    X(ATTN__CPU_AVX512, "avx512", "yes", "no")                                                    \
    X(ATTN__CPU_AVX512BF16, "avx512bf16", "yes", "no")                                            \
    X(ATTN__CPU_AVX512VBMI, "avx512vbmi", "yes", "no")                                            \
    X(ATTN__CPU_AMX, "amx", "yes", "no")                                                          \
    X(ATTN__CPU_BF16_DOT_FAST, "bf16dot", "fast", "no")
#define ATTN__CPU_TEXT_BYTES(flag, name, yes, no) + sizeof(name "=" yes no)
/* attn_cpu_features' text, "name=word" for each flag, written at detection with the flags
   (before them, so a caller who sees the flags sees the text; a racing first caller writes the
   same bytes). */
static char attn__cpu_text[0 ATTN__CPU_FEATURE_LIST(ATTN__CPU_TEXT_BYTES)];
#undef ATTN__CPU_TEXT_BYTES

/* Appends "name=word " at p; returns the end. */
ATTN__PRIVATE char *attn__cpu_text_add(char *p, const char *name, const char *word) {
    size_t n = strlen(name), w = strlen(word);
    memcpy(p, name, n);
    p[n] = '=';
    memcpy(p + n + 1, word, w);
    p[n + 1 + w] = ' ';
    return p + n + w + 2;
}

ATTN__PRIVATE void attn__cpu_text_write(int flags) {
    char *p = attn__cpu_text;
#define ATTN__CPU_TEXT_ADD(flag, name, yes, no)                                                   \
    p = attn__cpu_text_add(p, name, (flags & flag) ? yes : no);
    ATTN__CPU_FEATURE_LIST(ATTN__CPU_TEXT_ADD)
#undef ATTN__CPU_TEXT_ADD
    p[-1] = '\0';
}

ATTN__PRIVATE int attn__cpu_flags(void) {
    int flags = attn__cpu_flags_cache;
    if (!(flags & ATTN__CPU_DETECTED)) {
        flags = attn__detect_cpu() | ATTN__CPU_DETECTED;
        attn__cpu_text_write(flags);
        attn__cpu_flags_cache = flags;
    }
    return flags;
}

ATTNDEF const char *attn_cpu_features(void) {
#ifdef __aarch64__
    return "neon=yes";  /* Advanced SIMD is mandatory in AArch64: nothing to detect */
#else
    attn__cpu_flags();  /* writes the text with the flags */
    return attn__cpu_text;
#endif
}

/* ATTN_ISA_AMX runs on real tiles (the AVX-512 pass) where the CPU and OS give them, else, in
   ATTN_TILES_EMULATE builds, on emulated tiles (the AVX2 pass). */
ATTN__PRIVATE int attn__tiles_real(int cpu) {
#if ATTN__HAVE_AMX
    return (cpu & ATTN__CPU_AMX) != 0;
#else
    (void)cpu;
    return 0;
#endif
}
ATTN__PRIVATE int attn__tiles_emulated(int cpu) {
#if ATTN__HAVE_TILE_EMULATION
    return !attn__tiles_real(cpu) && (cpu & ATTN__CPU_AVX2) != 0;
#else
    (void)cpu;
    return 0;
#endif
}

ATTNDEF int attn_isa_supported(attn_isa isa) {
    int cpu = attn__cpu_flags();
    (void)cpu;
    if (isa == ATTN_ISA_AUTO) return 1;
#define ATTN__ISA_RUNS(name, value, str, guard, runs, pref, table, info)                          \
    if (isa == name) return guard && (runs);
    ATTN__ISA_LIST(ATTN__ISA_RUNS)
#undef ATTN__ISA_RUNS
    return 0;
}

/* The supported ISA of highest preference (the ISA table's); the first of equals. */
ATTNDEF attn_isa attn_best_isa(void) {
    int cpu = attn__cpu_flags(), most = 0;
    attn_isa best = ATTN_ISA_SCALAR;
    (void)cpu;
#define ATTN__ISA_BEST(name, value, str, guard, runs, pref, table, info)                          \
    if (guard && (runs) && (pref) > most) {                                                       \
        best = name;                                                                              \
        most = (pref);                                                                            \
    }
    ATTN__ISA_LIST(ATTN__ISA_BEST)
#undef ATTN__ISA_BEST
    return best;
}

ATTNDEF const char *attn_isa_name(attn_isa isa) {
    if (isa == ATTN_ISA_AUTO) return "auto";
#define ATTN__ISA_NAME(name, value, str, guard, runs, pref, table, info)                          \
    if (isa == name) return str;
    ATTN__ISA_LIST(ATTN__ISA_NAME)
#undef ATTN__ISA_NAME
    return "unknown";
}

/* ---------------------------------------------------------------------------------------------
   [F] Scalar conversions: the specification every SIMD conversion is tested against. */

/* The classes of ATTN__DTYPE_LIST, as the library treats a dtype (flags; the kernel pass reads
   the class name, see attn__to_f32, attn__from_f32 and attn__decode_load2):
   PLAIN     rows of activations (queries, keys, values, outputs) or of a cache, unscaled; the
             kernels convert them a vector at a time both ways (ATTN__VLOAD_<U>, ATTN__VSTORE_<U>).
   EVEN_ODD  as PLAIN, but decode reads two vectors at once, the even elements then the odd ones
             (ATTN__VLOAD2_<U>: one shift or mask each; see attn__decode_pair_order).
   FP8       caches only, stored as RNE-saturate(x / scale) and read as stored * scale: encoded
             element by element, decoded two vectors at once in order (ATTN__VLOAD2_<U>), and by
             decode once for all the heads of a group, as its decode costs more than the loads
             of queries or accumulators that it would save.
   INT       caches only, rows of groups of codes with a scale each (attn_dtype_row_bytes): the
             row is the unit of every conversion (attn__to_f32 and attn__from_f32 take a whole
             row); the element columns of the list are the codes' (attn__i8_code_to_f32, ...);
             decode reads the rows in place on AVX-512 for one head a KV head, else as f32
             copies (attn__decode_in_place). */
#define ATTN__DT_ACTIVATION 1
#define ATTN__DT_EVEN_ODD 2
#define ATTN__DT_FP8 4
#define ATTN__DT_INT 8
#define ATTN__DTC_PLAIN ATTN__DT_ACTIVATION
#define ATTN__DTC_EVEN_ODD (ATTN__DT_ACTIVATION | ATTN__DT_EVEN_ODD)
#define ATTN__DTC_FP8 ATTN__DT_FP8
#define ATTN__DTC_INT ATTN__DT_INT
/* Whether decode has kernel instances of their own for the FP8 class (ATTN_NO_FP8_KERNELS). */
#ifdef ATTN_NO_FP8_KERNELS
#define ATTN__FP8_KERNELS 0
#else
#define ATTN__FP8_KERNELS 1
#endif

ATTNDEF size_t attn_dtype_size(attn_dtype dtype) {
#define ATTN__DTYPE_SIZE(name, value, t, U, type, str, dec, enc, cls, fold)                       \
    case name: return ATTN__DTC_##cls & ATTN__DT_INT ? 0 : sizeof(type);
    switch (dtype) {
        ATTN__DTYPE_LIST(ATTN__DTYPE_SIZE)
        case ATTN_DTYPE_COUNT: break;
    }
#undef ATTN__DTYPE_SIZE
    return 0;  /* not an attn_dtype */
}

ATTNDEF const char *attn_dtype_name(attn_dtype dtype) {
#define ATTN__DTYPE_NAME(name, value, t, U, type, str, dec, enc, cls, fold)                       \
    case name: return str;
    switch (dtype) {
        ATTN__DTYPE_LIST(ATTN__DTYPE_NAME)
        case ATTN_DTYPE_COUNT: break;
    }
#undef ATTN__DTYPE_NAME
    return "unknown";
}

/* Whether dt's class has the flag ATTN__DTYPE_FLAG (0 for a value that is not an attn_dtype), as
   comparisons that fold while the compiler reads them (fp8: dt == ATTN_FP8_E4M3 || dt ==
   ATTN_FP8_E5M2), so that the kernels' tests of a constant dt fold as early as any. */
#define ATTN__DTYPE_HAS(name, value, t, U, type, str, dec, enc, cls, fold)                        \
    || (dt == name && (ATTN__DTC_##cls & ATTN__DTYPE_FLAG))
#define ATTN__DTYPE_FLAG ATTN__DT_FP8
ATTN__PRIVATE int attn__is_fp8(attn_dtype dt) { return 0 ATTN__DTYPE_LIST(ATTN__DTYPE_HAS); }
#undef ATTN__DTYPE_FLAG
#define ATTN__DTYPE_FLAG ATTN__DT_ACTIVATION
ATTN__PRIVATE int attn__is_activation_dtype(attn_dtype dt) {
    return 0 ATTN__DTYPE_LIST(ATTN__DTYPE_HAS);
}
#undef ATTN__DTYPE_FLAG
#define ATTN__DTYPE_FLAG ATTN__DT_EVEN_ODD
ATTN__PRIVATE int attn__is_even_odd(attn_dtype dt) { return 0 ATTN__DTYPE_LIST(ATTN__DTYPE_HAS); }
#undef ATTN__DTYPE_FLAG
#define ATTN__DTYPE_FLAG ATTN__DT_INT
ATTN__PRIVATE int attn__is_int(attn_dtype dt) { return 0 ATTN__DTYPE_LIST(ATTN__DTYPE_HAS); }
#undef ATTN__DTYPE_FLAG
#undef ATTN__DTYPE_HAS

/* The integer caches' rows (attn_dtype_row_bytes): groups of ATTN__INT_GROUP elements, group g
   at g * attn__int_group_bytes, its bf16 scale and then its codes. */
#define ATTN__INT_GROUP 32
ATTN__PRIVATE int64_t attn__int_groups(int64_t n) {
    return (n + ATTN__INT_GROUP - 1) / ATTN__INT_GROUP;
}
ATTN__PRIVATE size_t attn__int_group_bytes(attn_dtype dt) {
    return 2 + (dt == ATTN_INT4 ? ATTN__INT_GROUP / 2 : ATTN__INT_GROUP);
}

ATTNDEF size_t attn_dtype_row_bytes(attn_dtype dtype, int64_t n) {
    size_t esz = attn_dtype_size(dtype);
    if (n < 1 || n > (int64_t)(ATTN__SIZE_MAX / 64)) return 0;  /* no product below can wrap */
    if (esz) return (size_t)n * esz;
    if (!attn__is_int(dtype)) return 0;
    if (dtype == ATTN_INT8) return (size_t)n + 2 * (size_t)attn__int_groups(n);
    return (size_t)attn__int_groups(n) * attn__int_group_bytes(dtype);
}

/* Whether dt is an attn_dtype. */
ATTN__PRIVATE int attn__dtype_ok(attn_dtype dt) { return attn_dtype_row_bytes(dt, 1) != 0; }

/* v >> shift, rounded to nearest even. */
ATTN__PRIVATE uint32_t attn__shift_rne(uint32_t v, int shift) {
    if (shift <= 0) return v;
    if (shift >= 32) return 0;
    uint32_t q = v >> shift, rem = v & ((1u << shift) - 1), half = 1u << (shift - 1);
    return q + (rem > half || (rem == half && (q & 1)));
}

/* Finite |x| (as f32 bits, sign cleared) to a binary format with mant_bits of mantissa and the
   given exponent bias, rounded to nearest even; returns the magnitude code, which may exceed
   the format's largest finite code (the caller saturates or makes inf). */
ATTN__PRIVATE uint32_t attn__encode_magnitude(uint32_t abs_bits, int mant_bits, int bias) {
    int e = (int)(abs_bits >> 23) - 127;
    uint32_t sig = abs_bits & 0x7fffffu;
    if (abs_bits >> 23) sig |= 0x800000u; else e = -126;  /* f32 subnormal: no hidden bit */
    int emin = 1 - bias;
    if (e >= emin) {  /* normal in the target (a carry into the exponent is just an addition) */
        uint32_t q = attn__shift_rne(sig, 23 - mant_bits);
        return ((uint32_t)(e + bias) << mant_bits) + (q - (1u << mant_bits));
    }
    /* subnormal in the target: units of 2^(emin - mant_bits); q == 2^mant_bits is min normal */
    return attn__shift_rne(sig, 23 - mant_bits + (emin - e));
}

ATTNDEF uint16_t attn_f32_to_f16(float x) {
    uint32_t b = attn__f32_bits(x), sign = (b >> 16) & 0x8000u, a = b & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* quiet NaN */
    if (a == 0x7f800000u) return (uint16_t)(sign | 0x7c00u);
    uint32_t m = attn__encode_magnitude(a, 10, 15);
    return (uint16_t)(sign | (m >= 0x7c00u ? 0x7c00u : m));  /* IEEE overflow rounds to inf */
}

ATTNDEF float attn_f16_to_f32(uint16_t h) {
    uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 31) /* inf, or NaN made quiet with its payload kept (as F16C does) */
        return attn__bits_f32(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0u));
    if (e == 0) {
        float v = (float)m * (1.0f / 16777216.0f);  /* m * 2^-24, exact */
        return sign ? -v : v;
    }
    return attn__bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

ATTNDEF uint16_t attn_f32_to_bf16(float x) {
    uint32_t b = attn__f32_bits(x);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((b >> 16) | 0x40u);  /* quiet NaN */
    return (uint16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

ATTNDEF float attn_bf16_to_f32(uint16_t h) { return attn__bits_f32((uint32_t)h << 16); }

/* fp8: saturating (SATFINITE, as vLLM): overflow and +-inf give +-max finite, NaN stays NaN. */
ATTNDEF uint8_t attn_f32_to_fp8_e4m3(float x) {
    uint32_t b = attn__f32_bits(x), sign = (b >> 24) & 0x80u, a = b & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint8_t)(sign | 0x7fu);
    if (a >= 0x7f800000u) return (uint8_t)(sign | 0x7eu);
    uint32_t m = attn__encode_magnitude(a, 3, 7);
    return (uint8_t)(sign | (m > 0x7eu ? 0x7eu : m));
}

/* A normal code is 2^(e - 7) (1 + m/8): its f32 bits are the sign, e + 120 and m as the top
   mantissa bits; a subnormal one is m 2^-9. Bits, not ldexpf: the scalar kernels decode every
   element through this. */
ATTNDEF float attn_fp8_e4m3_to_f32(uint8_t v) {
    uint32_t sign = (v & 0x80u) << 24, e = (v >> 3) & 0xfu, m = v & 7u;
    if (e == 15 && m == 7) return attn__bits_f32(sign | 0x7fc00000u);  /* NaN */
    if (e == 0) return attn__bits_f32(sign | attn__f32_bits((float)m * (1.0f / 512.0f)));
    return attn__bits_f32(sign | (e + 120) << 23 | m << 20);
}

ATTNDEF uint8_t attn_f32_to_fp8_e5m2(float x) {
    uint32_t b = attn__f32_bits(x), sign = (b >> 24) & 0x80u, a = b & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint8_t)(sign | 0x7fu);
    if (a >= 0x7f800000u) return (uint8_t)(sign | 0x7bu);
    uint32_t m = attn__encode_magnitude(a, 2, 15);
    return (uint8_t)(sign | (m > 0x7bu ? 0x7bu : m));
}

/* e5m2 is the top byte of an f16, so decoding is exact through f16. */
ATTNDEF float attn_fp8_e5m2_to_f32(uint8_t v) { return attn_f16_to_f32((uint16_t)(v << 8)); }

#ifdef ATTN__HAVE_E4M3_LUT
/* Every e4m3 value as bf16 bytes, for the table decode (attn__fp8_bf16_words__avx512): [0: the
   high byte XOR the index, 1: the low byte][the code's 7 magnitude bits]. Each value is exact
   in bf16 (3 mantissa bits), NaN included. The high byte holds its index XORed in so that XOR
   with the code itself puts the sign back in one step. Generated from attn_fp8_e4m3_to_f32;
   the tests decode every code both ways. */
static const uint8_t attn__e4m3_bf16_bytes[2][128] = {
    {0x00, 0x3a, 0x39, 0x38, 0x38, 0x39, 0x3a, 0x3b, 0x34, 0x35, 0x36, 0x37, 0x30, 0x31, 0x32, 0x33,
     0x2d, 0x2c, 0x2f, 0x2e, 0x29, 0x28, 0x2b, 0x2a, 0x25, 0x24, 0x27, 0x26, 0x21, 0x20, 0x23, 0x22,
     0x1e, 0x1f, 0x1c, 0x1d, 0x1a, 0x1b, 0x18, 0x19, 0x16, 0x17, 0x14, 0x15, 0x12, 0x13, 0x10, 0x11,
     0x0f, 0x0e, 0x0d, 0x0c, 0x0b, 0x0a, 0x09, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0x00,
     0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
     0x11, 0x10, 0x13, 0x12, 0x15, 0x14, 0x17, 0x16, 0x19, 0x18, 0x1b, 0x1a, 0x1d, 0x1c, 0x1f, 0x1e,
     0x22, 0x23, 0x20, 0x21, 0x26, 0x27, 0x24, 0x25, 0x2a, 0x2b, 0x28, 0x29, 0x2e, 0x2f, 0x2c, 0x2d,
     0x33, 0x32, 0x31, 0x30, 0x37, 0x36, 0x35, 0x34, 0x3b, 0x3a, 0x39, 0x38, 0x3f, 0x3e, 0x3d,
     0x00},
    {0x00, 0x00, 0x80, 0xc0, 0x00, 0x20, 0x40, 0x60, 0x80, 0x90, 0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xf0,
     0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xf0,
     0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xf0,
     0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xf0,
     0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xf0,
     0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xf0,
     0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xf0,
     0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xc0}
};
/* Every e5m2 value as bf16 bytes, laid out as attn__e4m3_bf16_bytes (exact: 2 mantissa bits;
   subnormals, infinities and NaN included), for the pair kernels' decode of fp8 caches.
   Generated from attn_fp8_e5m2_to_f32; the tests decode every code both ways. */
static const uint8_t attn__e5m2_bf16_bytes[2][128] = {
    {0x00, 0x36, 0x3a, 0x3b, 0x3c, 0x3d, 0x3e, 0x3f, 0x31, 0x30, 0x33, 0x32, 0x35, 0x34, 0x37, 0x36,
     0x2a, 0x2b, 0x28, 0x29, 0x2e, 0x2f, 0x2c, 0x2d, 0x23, 0x22, 0x21, 0x20, 0x27, 0x26, 0x25, 0x24,
     0x1c, 0x1d, 0x1e, 0x1f, 0x18, 0x19, 0x1a, 0x1b, 0x15, 0x14, 0x17, 0x16, 0x11, 0x10, 0x13, 0x12,
     0x0e, 0x0f, 0x0c, 0x0d, 0x0a, 0x0b, 0x08, 0x09, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0x00,
     0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x09, 0x08, 0x0b, 0x0a, 0x0d, 0x0c, 0x0f, 0x0e,
     0x12, 0x13, 0x10, 0x11, 0x16, 0x17, 0x14, 0x15, 0x1b, 0x1a, 0x19, 0x18, 0x1f, 0x1e, 0x1d, 0x1c,
     0x24, 0x25, 0x26, 0x27, 0x20, 0x21, 0x22, 0x23, 0x2d, 0x2c, 0x2f, 0x2e, 0x29, 0x28, 0x2b, 0x2a,
     0x36, 0x37, 0x34, 0x35, 0x32, 0x33, 0x30, 0x31, 0x3f, 0x3e, 0x3d, 0x3c, 0x03, 0x02, 0x01,
     0x00},
    {0x00, 0x80, 0x00, 0x40, 0x80, 0xa0, 0xc0, 0xe0, 0x00, 0x20, 0x40, 0x60, 0x80, 0xa0, 0xc0, 0xe0,
     0x00, 0x20, 0x40, 0x60, 0x80, 0xa0, 0xc0, 0xe0, 0x00, 0x20, 0x40, 0x60, 0x80, 0xa0, 0xc0, 0xe0,
     0x00, 0x20, 0x40, 0x60, 0x80, 0xa0, 0xc0, 0xe0, 0x00, 0x20, 0x40, 0x60, 0x80, 0xa0, 0xc0, 0xe0,
     0x00, 0x20, 0x40, 0x60, 0x80, 0xa0, 0xc0, 0xe0, 0x00, 0x20, 0x40, 0x60, 0x80, 0xa0, 0xc0, 0xe0,
     0x00, 0x20, 0x40, 0x60, 0x80, 0xa0, 0xc0, 0xe0, 0x00, 0x20, 0x40, 0x60, 0x80, 0xa0, 0xc0, 0xe0,
     0x00, 0x20, 0x40, 0x60, 0x80, 0xa0, 0xc0, 0xe0, 0x00, 0x20, 0x40, 0x60, 0x80, 0xa0, 0xc0, 0xe0,
     0x00, 0x20, 0x40, 0x60, 0x80, 0xa0, 0xc0, 0xe0, 0x00, 0x20, 0x40, 0x60, 0x80, 0xa0, 0xc0, 0xe0,
     0x00, 0x20, 0x40, 0x60, 0x80, 0xa0, 0xc0, 0xe0, 0x00, 0x20, 0x40, 0x60, 0x80, 0xe0, 0xc0, 0xe0}
};
#endif

/* The f32 row of ATTN__DTYPE_LIST: its decode and encode. */
ATTN__PRIVATE float attn__f32_to_f32(float x) { return x; }

/* The integer rows' codes (ATTN__DTC_INT): an int8 code, and an int4 code in a byte's low nibble
   (4-bit two's complement), to f32 (unscaled), and x (already divided by the scale) to a code:
   nearest even, saturated to +-127 or +-7 (x is finite: attn__int_group_quantize). */
ATTN__PRIVATE float attn__i8_code_to_f32(int8_t c) { return (float)c; }
ATTN__PRIVATE float attn__i4_code_to_f32(uint8_t b) { return (float)((int)((b & 15u) ^ 8u) - 8); }
ATTN__PRIVATE int attn__int_code(float x, int most) {
    if (x >= (float)most) return most;
    if (x <= (float)-most) return -most;
    /* |x| < 128: adding 1.5 * 2^23 leaves no fraction bits, so the sum rounds x to an integer,
       to nearest even (the default rounding mode); subtracting it back is exact */
    volatile float big = x + 12582912.0f;
    return (int)(big - 12582912.0f);
}
ATTN__PRIVATE int8_t attn__f32_to_i8_code(float x) { return (int8_t)attn__int_code(x, 127); }
ATTN__PRIVATE uint8_t attn__f32_to_i4_code(float x) { return (uint8_t)(attn__int_code(x, 7) & 15); }

/* Element i of a group's codes (after its scale), unscaled; the group's scale. */
ATTN__PRIVATE float attn__int_code_at(const uint8_t *codes, attn_dtype dt, int i) {
    if (dt == ATTN_INT8) return attn__i8_code_to_f32((int8_t)codes[i]);
    return attn__i4_code_to_f32((uint8_t)(codes[i % 16] >> (i / 16 * 4)));
}
ATTN__PRIVATE float attn__int_scale_of(const void *group) {
    const uint8_t *b = (const uint8_t *)group;
    return attn_bf16_to_f32((uint16_t)(b[0] | b[1] << 8));
}

/* A group of m elements (1..32) from x: its scale and codes (attn_dtype_row_bytes). */
ATTN__PRIVATE void attn__int_group_quantize(void *group, attn_dtype dt, const float *x, int m) {
    uint8_t *scale_at = (uint8_t *)group, *codes = scale_at + 2;
    float most = 0.0f, top = dt == ATTN_INT8 ? 127.0f : 7.0f;
    int finite = 1, i;
    for (i = 0; i < m; i++) {
        finite &= isfinite(x[i]) != 0;
        most = ATTN__MAX(most, fabsf(x[i]));
    }
    uint16_t sb = finite ? attn_f32_to_bf16(most / top) : 0x7fc0;  /* NaN: no finite code says it */
    float scale = attn_bf16_to_f32(sb);
    if (finite && most > 0.0f && scale == 0.0f) scale = attn_bf16_to_f32(sb = 1);  /* subnormal */
    memset(codes, 0, dt == ATTN_INT8 ? (size_t)m : attn__int_group_bytes(dt) - 2);
    for (i = 0; finite && scale > 0.0f && i < m; i++) {
        float c = x[i] / scale;
        if (dt == ATTN_INT8) codes[i] = (uint8_t)attn__f32_to_i8_code(c);
        else codes[i % 16] |= (uint8_t)(attn__f32_to_i4_code(c) << (i / 16 * 4));
    }
    scale_at[0] = (uint8_t)(sb & 255);
    scale_at[1] = (uint8_t)(sb >> 8);
}

/* A group's m elements (1..32) to f32, times mul (scalar: the specification the vector
   conversions are tested against). */
ATTN__PRIVATE void attn__int_group_to_f32(float *dst, const void *group, attn_dtype dt, int m,
                                          float mul) {
    const uint8_t *codes = (const uint8_t *)group + 2;
    float scale = attn__int_scale_of(group) * mul;
    for (int i = 0; i < m; i++) dst[i] = attn__int_code_at(codes, dt, i) * scale;
}

/* A row of n elements from x (attn_dtype_row_bytes). */
ATTN__PRIVATE void attn__int_row_quantize(void *row, attn_dtype dt, const float *x, int64_t n) {
    for (int64_t g = 0; g * ATTN__INT_GROUP < n; g++)
        attn__int_group_quantize((char *)row + (size_t)g * attn__int_group_bytes(dt), dt,
                                 x + g * ATTN__INT_GROUP,
                                 (int)ATTN__MIN(n - g * ATTN__INT_GROUP, ATTN__INT_GROUP));
}

/* One element of any dtype to f32 (no scale). */
ATTN__PRIVATE float attn__load_f32(const void *p, attn_dtype dt, size_t i) {
#define ATTN__LOAD_F32(name, value, t, U, type, str, dec, enc, cls, fold)                         \
    case name: return dec(((const type *)p)[i]);
    switch (dt) {
        ATTN__DTYPE_LIST(ATTN__LOAD_F32)
        case ATTN_DTYPE_COUNT: break;
    }
#undef ATTN__LOAD_F32
    return 0.0f;  /* not an attn_dtype: the entry points let none through */
}

/* One f32 to any dtype (no scale). */
ATTN__PRIVATE void attn__store_f32(void *p, attn_dtype dt, size_t i, float x) {
#define ATTN__STORE_F32(name, value, t, U, type, str, dec, enc, cls, fold)                        \
    case name: ((type *)p)[i] = enc(x); break;
    switch (dt) {
        ATTN__DTYPE_LIST(ATTN__STORE_F32)
        case ATTN_DTYPE_COUNT: break;  /* not an attn_dtype: the entry points let none through */
    }
#undef ATTN__STORE_F32
}

/* ---------------------------------------------------------------------------------------------
   [G] Kernel plans, shared by every ISA.

   A plan holds everything a kernel needs, already validated. A call splits its work into fixed
   items whose arithmetic depends only on the item (never on the thread count), runs them on
   the threading driver, and each item uses the scratch of the thread that runs it. */

/* Where a prefill kernel reads its keys and values from. */
typedef enum attn__kv_source { ATTN__KV_ROWS = 0, ATTN__KV_PAGED } attn__kv_source;

#define ATTN__KEY_TILE 64        /* keys per tile: a multiple of every ISA's micro-tile height */
#define ATTN__TILE_STEP 4        /* key tiles a step of the tile kernels (docs/PERF.md#tile-step) */
#define ATTN__MAX_MR 8           /* largest micro-tile height (keys or dims) over the ISAs */
#define ATTN__ROW_QUANTUM 48     /* a multiple of every ISA's row block (NV * lanes) */
#define ATTN__QUERY_ROWS 96      /* target query rows (tokens x grouped heads) per work item */
#define ATTN__MAX_LANES 16       /* most f32 lanes of a vector over the ISAs */

/* Row stride of a block of query or output rows transposed a vector at a time: D rounded up
   to whole vectors of every ISA. */
ATTN__PRIVATE int attn__block_row_stride(int D) {
    return (D + ATTN__MAX_LANES - 1) / ATTN__MAX_LANES * ATTN__MAX_LANES;
}

/* The logits transform and the mask (SEMANTICS past the dot product).
   attn__logits holds what shapes a scaled score: soft cap, ALiBi, causal and window. It is set
   by attn__logits_init ([L]) and applied by attn__logits_of, written once over the vector
   layer (the prefill and decode softmax, and through its scalar instance the bias builders);
   the mask is attn__mask_bounds, and every key range derives from it. */
typedef struct attn__logits {
    float cap;                   /* > 0: s = cap * tanh(s / cap) (the kernel is given s / cap) */
    const float *slopes;         /* [H] or NULL: s = s + slopes[h] * (j - pos) */
    int causal, window;          /* the mask: j <= pos when causal, pos - j < window when > 0 */
} attn__logits;

/* Whether the transform changes visible scores (cap or ALiBi), past scaling them. */
ATTN__PRIVATE int attn__logits_shaped(const attn__logits *T) {
    return T->cap > 0.0f || T->slopes;
}

/* Head h's ALiBi slope (0 without ALiBi). */
ATTN__PRIVATE float attn__logits_slope(const attn__logits *T, int h) {
    return T->slopes ? T->slopes[h] : 0.0f;
}

/* A distance past any key's: the bound of an open side of the mask. */
#define ATTN__OPEN_BOUND ((int64_t)1 << 40)

/* The mask as bounds on d = j - pos, key position minus query position: key j is visible to
   the query at pos iff lo <= d <= hi (ATTN__OPEN_BOUND beyond an open side). */
ATTN__PRIVATE void attn__mask_bounds(const attn__logits *T, int64_t *lo, int64_t *hi) {
    *lo = T->window ? 1 - (int64_t)T->window : -ATTN__OPEN_BOUND;
    *hi = T->causal ? 0 : ATTN__OPEN_BOUND;
}

/* The keys [*lo, *hi) of [0, n) that some query at a position in [first, last] sees (one
   query: first = last); none when *lo >= *hi. Both bounds grow with the position, so the
   first query's keys start the range and the last one's end it. */
ATTN__PRIVATE void attn__visible_keys(const attn__logits *T, int64_t first, int64_t last,
                                      int64_t n, int64_t *lo, int64_t *hi) {
    int64_t d_lo, d_hi;
    attn__mask_bounds(T, &d_lo, &d_hi);
    *lo = ATTN__MAX((int64_t)0, first + d_lo);
    *hi = ATTN__MIN(n, last + d_hi + 1);
}

/* Whether the query at pos sees any of the keys [0, n) (a row that sees none gives 0). */
ATTN__PRIVATE int attn__sees_keys(const attn__logits *T, int64_t pos, int64_t n) {
    int64_t lo, hi;
    attn__visible_keys(T, pos, pos, n, &lo, &hi);
    return lo < hi;
}

typedef struct attn__prefill_plan {
    int H, Hk, G, D, Dp;         /* Dp: D padded to ATTN__MAX_MR */
    attn__logits logits;
    float q_mul;                 /* q is multiplied by q_mul (scale, or scale/cap) when packed */
    const float *sinks;
    int num_seqs, tile_tokens;   /* query tokens per work item */
    int rows_cap;                /* padded rows per item */
    /* queries and outputs */
    const char *q; attn_dtype q_dtype; int64_t q_stride;
    char *out; attn_dtype out_dtype; int64_t out_stride;
    float *lse;
    const int32_t *q_start;      /* [num_seqs+1] query row offsets */
    /* keys: dense rows ... */
    attn__kv_source source;
    const char *k, *v; attn_dtype kv_dtype; int64_t k_stride, v_stride;
    const int32_t *k_start;      /* [num_seqs+1] key row offsets (rows source) */
    int bf16_pairs;              /* bf16 q, k, v: eligible for the bf16 dot-product kernels */
    int tiles;                   /* bf16 q, k, v (or an fp8 cache), D % 32 == 0, ATTN_ISA_AMX: the
                                    tile kernels */
    int value_tiles;             /* whole key tiles of packed value pairs a thread keeps */
    int key_rows;                /* keys the scratch holds a step (attn__prefill_scratch_layout) */
    /* ... or the paged cache */
    const char *key_cache, *value_cache;
    size_t kv_row_bytes;         /* a cache row: attn_dtype_row_bytes(kv_dtype, D) */
    float k_scale, v_scale;
    int block_size, max_blocks;
    const int32_t *block_tables, *seq_lens;
    /* work items */
    int64_t *item_start;         /* [num_seqs+1] first item of each sequence */
    char *scratch; size_t scratch_bytes;  /* per thread */
    const void *dnnl;            /* attn__dnnl_call when the GEMMs run on oneDNN, else NULL */
} attn__prefill_plan;

/* Which (sequence, KV head) a thread's packed value tiles belong to, and how many of its first
   whole key tiles they hold; reset by every call before its items run (see [M]). */
typedef struct attn__value_cache { int seq, g, tiles; } attn__value_cache;

/* One work item's scratch, carved from the thread's slice by one function so that the size
   query and the layout cannot drift apart. The kernel keeps query rows in vector lanes
   ("transposed"): every per-row quantity (max, denominator, position, slope) is a vector, the
   online softmax needs no horizontal reduction, and K and V rows are read in their natural
   layout (broadcast), so f32 keys and values need no packing at all. */
typedef struct attn__prefill_scratch {
    float *qt;     /* [D][rows_cap] queries, pre-scaled, rows in lanes */
    float *s;      /* [KEY_TILE][rows_cap] scores, then probabilities */
    float *ot;     /* [Dp][rows_cap] running outputs */
    float *m, *l, *a;      /* [rows_cap] running max, denominator, rescale of the last tile */
    float *rel, *slope;    /* [rows_cap] row's token offset in the item; its head's ALiBi slope */
    float *kt, *vt;        /* [KEY_TILE][D], [KEY_TILE][Dp] keys / values converted to f32 */
    float *zero;           /* [Dp] zeros: the key row of padding columns (f32 or bf16) */
    float *rowblk;      /* [MAX_LANES][block_row_stride] a vector's worth of query or output rows */
    const float **krows, **vrows;  /* [KEY_TILE] where each key / value row of the tile is */
    const uint16_t **krows16, **vrows16;  /* [KEY_TILE] the same for the bf16 pair kernels */
    attn__value_cache *vcache;     /* the thread's packed value tiles (NULL when it keeps none) */
    uint32_t *vtiles;              /* [value_tiles][attn__cached_tile_words] packed tiles */
} attn__prefill_scratch;

/* One key tile's values interleaved by pairs of keys: [KEY_TILE / 2][Dp] u32. */
ATTN__PRIVATE size_t attn__value_tile_words(int Dp) { return (ATTN__KEY_TILE / 2) * (size_t)Dp; }
/* One cached key tile: its value pairs, or where the tile kernels may run (key_rows above
   KEY_TILE) its value columns and then its keys packed for the score tiles, as many words. */
ATTN__PRIVATE size_t attn__cached_tile_words(int Dp, int key_rows) {
    return attn__value_tile_words(Dp) * (key_rows > ATTN__KEY_TILE ? 2 : 1);
}

/* The thread's cached slot for the key tile at k0 (n keys) of (sequence seq, KV head g), or
   NULL where that tile is not kept. The query tiles of one (sequence, KV head) all walk its
   keys from 0 in the same whole tiles, so a thread keeps the first value_tiles of them packed
   and every later item of that KV head reads them back (the same values: results never depend
   on the cache). *fill says the slot is new: the caller packs it now. */
ATTN__PRIVATE uint32_t *attn__cached_tile(const attn__prefill_plan *P, int seq, int g, int64_t k0,
                                          int n, const attn__prefill_scratch *sc, int *fill) {
    attn__value_cache *cache = sc->vcache;
    int64_t t = k0 / ATTN__KEY_TILE;
    *fill = 0;
    if (!cache || n != ATTN__KEY_TILE || k0 % ATTN__KEY_TILE != 0 || t >= P->value_tiles)
        return NULL;
    if (cache->seq != seq || cache->g != g) { cache->seq = seq; cache->g = g; cache->tiles = 0; }
    if (t > cache->tiles) return NULL;
    *fill = t == cache->tiles;
    cache->tiles += *fill;
    return sc->vtiles + (size_t)t * attn__cached_tile_words(P->Dp, P->key_rows);
}

ATTN__PRIVATE size_t attn__carve(char **cursor, size_t bytes) {
    size_t at = (size_t)*cursor;  /* in integers: measuring starts from a NULL base */
    *cursor = (char *)(at + attn__align_up(bytes));
    return at;
}

/* Lays out one thread's prefill scratch at base (NULL = just measure); returns its size.
   key_rows: keys per step, ATTN__KEY_TILE, or ATTN__TILE_STEP times that where the tile kernels
   may run; it sizes the scores, the key rows and the tiles packed in kt. */
ATTN__PRIVATE size_t attn__prefill_scratch_layout(int rows_cap, int D, int Dp, int value_tiles,
                                                  int key_rows, char *base,
                                                  attn__prefill_scratch *s) {
    char *c = base;
    size_t rc = (size_t)rows_cap, f = sizeof(float), kr = (size_t)key_rows;
    attn__prefill_scratch t;
    t.qt = (float *)attn__carve(&c, f * (size_t)D * rc);
    t.s = (float *)attn__carve(&c, f * kr * rc);
    t.ot = (float *)attn__carve(&c, f * (size_t)Dp * rc);
    t.m = (float *)attn__carve(&c, f * rc);
    t.l = (float *)attn__carve(&c, f * rc);
    t.a = (float *)attn__carve(&c, f * rc);
    t.rel = (float *)attn__carve(&c, f * rc);
    t.slope = (float *)attn__carve(&c, f * rc);
    t.kt = (float *)attn__carve(&c, f * kr * (size_t)D);
    t.vt = (float *)attn__carve(&c, f * ATTN__KEY_TILE * (size_t)Dp);
    t.zero = (float *)attn__carve(&c, f * (size_t)Dp);
    t.rowblk = (float *)attn__carve(&c, f * ATTN__MAX_LANES * (size_t)attn__block_row_stride(D));
    t.krows = (const float **)attn__carve(&c, sizeof(float *) * ATTN__KEY_TILE);
    t.vrows = (const float **)attn__carve(&c, sizeof(float *) * ATTN__KEY_TILE);
    t.krows16 = (const uint16_t **)attn__carve(&c, sizeof(uint16_t *) * kr);
    t.vrows16 = (const uint16_t **)attn__carve(&c, sizeof(uint16_t *) * kr);
    t.vcache = NULL; t.vtiles = NULL;
    if (value_tiles > 0) {
        t.vcache = (attn__value_cache *)attn__carve(&c, sizeof(attn__value_cache));
        t.vtiles =
                (uint32_t *)attn__carve(&c,
                        sizeof(uint32_t) * attn__cached_tile_words(Dp, key_rows) *
                        (size_t)value_tiles);
    }
    if (s) *s = t;
    return (size_t)(c - base);
}

/* The sequence that work item `item` belongs to: item_start[seq] <= item < item_start[seq+1]. */
ATTN__PRIVATE int attn__find_seq(const int64_t *item_start, int num_seqs, int64_t item) {
    int lo = 0, hi = num_seqs - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (item_start[mid] <= item) lo = mid; else hi = mid - 1;
    }
    return lo;
}

/* The most keys of any of n sequences, given as offsets cu [n+1] or as lengths lens [n]
   (whichever is not NULL); -1 when both are NULL (not known). */
ATTN__PRIVATE int64_t attn__longest(const int32_t *cu, const int32_t *lens, int n) {
    int64_t most = 0;
    if (!cu && !lens) return -1;
    for (int i = 0; i < n; i++) most =
            ATTN__MAX(most, cu ? (int64_t)cu[i + 1] - cu[i] : (int64_t)lens[i]);
    return most;
}

/* Query row r of an item of KV head g whose first token is t0: token t0 + r / G, head
   g * G + r % G (the G heads of a token are consecutive rows). */
ATTN__PRIVATE const char *attn__query_row(const attn__prefill_plan *P, int g, int64_t t0, int r) {
    int64_t token = t0 + r / P->G, head = (int64_t)g * P->G + r % P->G;
    return P->q + (size_t)(token * P->q_stride + head * P->D) * attn_dtype_size(P->q_dtype);
}

/* Where key j of (sequence seq, KV head g) of a prefill plan is: its key row and value row.
   Inlined: each tile calls it twice per key (the prefetch of the next tile and the packing),
   and the call shows in bf16 prefill (docs/PERF.md#prefill-kv-row). */
ATTN__PRIVATE ATTN__INLINE void attn__kv_row(const attn__prefill_plan *P, int seq, int g, int64_t j,
                                             const char **kp, const char **vp) {
    size_t esz = attn_dtype_size(P->kv_dtype);
    if (P->source == ATTN__KV_ROWS) {
        int64_t row = P->k_start[seq] + j;
        *kp = P->k + (size_t)(row * P->k_stride + (int64_t)g * P->D) * esz;
        *vp = P->v + (size_t)(row * P->v_stride + (int64_t)g * P->D) * esz;
    } else {
        int64_t blk = P->block_tables[(int64_t)seq * P->max_blocks + j / P->block_size];
        size_t at = (size_t)((blk * P->Hk + g) * P->block_size + j % P->block_size) *
                    P->kv_row_bytes;
        *kp = P->key_cache + at;
        *vp = P->value_cache + at;
    }
}

/* Paged decode. Partial results of one (sequence, KV head, partition): for each of the G query
   heads its max logit m, denominator l and unnormalised output o[D]. */
#define ATTN__DECODE_CHUNK 16    /* keys handled at a time (never crossing a block) */
#define ATTN__HEAD_GROUP 4       /* query heads in a block of the decode kernels, */
#define ATTN__WIDE_GROUP 8       /* ... or this many, where the ISA's registers hold them */
#define ATTN__DECODE_SPAN 8      /* most KV heads per work item (read block by block together) */
#define ATTN__DECODE_STACK_HEADS 64  /* most query heads of a stacked pass (attn__decode_share): a
                                        shared partition's members are split into passes of at
                                        most this many heads, so its scratch is bounded */
/* Row stride of the logits scratch: a chunk's logits are stored as whole vectors (up to 16
   lanes), which may run past the partition's last key. */
#define ATTN__DECODE_PSTRIDE (ATTN_PARTITION_TOKENS + ATTN__DECODE_CHUNK)
#define ATTN__DECODE_TILE_TERMS 3  /* bf16 terms whose sum is an f32 query (decode's tiles) */
/* The decode calls whose logits run on tiles (attn__decode_tiles_may_run, attn__decode_plan_fill):
   this many query heads a KV head or more, queries of at most this many bf16 terms - bf16 queries
   (one) from eight; with ATTN_DECODE_TILES every query dtype from four. The workspace holds query
   tiles for that many terms. */
#define ATTN__DECODE_TILE_GROUP (ATTN__DECODE_TILES_ALL ? ATTN__HEAD_GROUP : 8)
#define ATTN__DECODE_TILE_QTERMS (ATTN__DECODE_TILES_ALL ? ATTN__DECODE_TILE_TERMS : 1)
/* ... and whose P.V runs on tiles too: bf16 queries (attn__decode_tile_values) from 16 heads a
   KV head, which fill the A tile's rows (docs/PERF.md#decode-tile-values) */
#define ATTN__DECODE_TILE_VALUES_GROUP 16

/* The element formats the decode kernels read K/V rows in: each dtype's own, with the dtype's
   value, and e4m3 decoded through byte tables to exact values (where the pass and the CPU have
   them: attn__decode_format), not through f16. The same products to the bit: the f16 way gives
   e4m3 / 256 and folds 256 into the scale (the fold of ATTN__DTYPE_LIST), a power of two. */
#define ATTN__FORMAT_ENUM(name, value, t, U, type, str, dec, enc, cls, fold) ATTN__FMT_##U = name,
typedef enum attn__format {
    ATTN__DTYPE_LIST(ATTN__FORMAT_ENUM) ATTN__FMT_E4M3_LUT,
    ATTN__FMT_E4M3_FINITE  /* e4m3 as value / 256 (as ATTN__FMT_E4M3), rows without NaN codes */
} attn__format;
#undef ATTN__FORMAT_ENUM

typedef struct attn__decode_plan {
    int H, Hk, G, Gs, D, Dv;     /* Gs: scratch rows a KV head (attn__decode_scratch_heads);
                                    Dv: D padded to 32, two vectors of any pass */
    attn__logits logits;         /* causal: the query is at the last key's position */
    float q_mul;
    const float *sinks;
    const char *q; attn_dtype q_dtype; int64_t q_stride;
    char *out; attn_dtype out_dtype; int64_t out_stride;
    float *lse;
    const char *key_cache, *value_cache;
    attn_dtype kv_dtype; float k_scale, v_scale;
    size_t kv_row_bytes;         /* a cache row: attn_dtype_row_bytes(kv_dtype, D) */
    int block_size, max_blocks;
    const int32_t *block_tables, *seq_lens;
    int num_seqs;
    int span, spans;             /* KV heads per work item, and items per (sequence, partition) */
    int bf16_pairs;              /* bf16 q, a bf16 cache (or fp8 with G >= 3), D % 32 == 0:
                                    eligible for the pair kernels (attn__decode_pairs) */
    int tile_keys;               /* the logits run on tiles (attn__decode_tile_keys) */
    int tile_values;             /* and P.V, bf16 probabilities (attn__decode_tile_values) */
    int tile_terms, tile_cols;   /* bf16 terms of a query (attn__decode_tile_queries), and the
                                    column tiles of a KV head's query heads */
    float tile_scale;            /* q_mul x k_scale x the rows' fold (attn__decode_tile_fold) */
    size_t tile_words;           /* a KV head's query tiles in the scratch, 32-bit words */
    int64_t *part_start;         /* [num_seqs+1] first partition of each sequence */
    float *partials;             /* [partitions][Hk][G * (2 + D)] */
    char *scratch; size_t scratch_bytes;
    /* Shared prefixes (attn__decode_share): partitions whose blocks several sequences' tables
       name, computed once for all of them by a stacked pass each KV head */
    int32_t *stacks;             /* [n_stacks][3]: partition index, first member, members */
    int32_t *members;            /* the stacks' sequences, stack after stack */
    uint8_t *stacked;            /* [partitions] 1: computed by a stack */
    int32_t *own;                /* [n_own] the other partitions, where n_stacks > 0 */
    int64_t *keys;               /* [partitions] the search's sort keys */
    int n_stacks, n_own;
    /* A stacked pass (a copy of the call's plan, G its stacked heads): head h of a KV head is
       head h % stack_G of sequence stack[h / stack_G]; its partial results go to stack_out */
    const int32_t *stack;        /* NULL: a pass for one sequence */
    int stack_G, stack_g0;       /* the call's G, and the pass's first KV head */
    float *stack_out;            /* [KV heads][G * (2 + D)] */
    int stack_span, stack_spans; /* the call's stacked passes: KV heads a pass, passes a stack */
} attn__decode_plan;

/* G padded to a multiple of the block hb. */
ATTN__PRIVATE int attn__decode_padded_heads(int G, int hb) {
    return (G + hb - 1) / hb * hb;
}

/* The next block of query heads a chunk of the decode kernels runs (the route's widths: how
   many heads one call serves), with `left` of the KV head's G heads still to run, from the
   widths the kernels compile for the rows' format (bits 1, 2, 4, 8: attn__kernels.decode_widths,
   fewer for some formats): eights for more than four heads left, else fours, for G > 2; for
   G = 1 and 2 blocks of that many heads, or of one. A block's heads past G are padding (their
   queries are 0 and nothing reads their logits; over fp8 rows the kernels skip their
   multiply-adds, elsewhere they run them): another pass over the rows for the last few heads
   costs more than padding (G = 5 as 4 + 1: 0.65-0.87x 8 padded, and 6 as 4 + 2 or 4 + 1 + 1:
   0.72-0.89x, docs/PERF.md#decode-design). */
ATTN__PRIVATE int attn__decode_next_block(int G, int left, int widths) {
    if ((widths & 8) && left > 4) return 8;
    if ((widths & 4) && G > 2) return 4;
    if ((widths & 2) && left == 2) return 2;
    if (widths & 1) return 1;
    return (widths & 2) ? 2 : 4;
}

/* The heads a block of the decode kernels computes, `left` of its KV head's heads not yet run:
   over fp8 rows (skip) those, the rest of the block padding without multiply-adds; over the
   others the whole block, its count a constant (their loops stay free of run-time tests, and
   the code smaller). At least 1, which lets the compiler drop the first head's test. */
ATTN__PRIVATE int attn__decode_live_heads(int skip, int left) {
    return skip ? ATTN__MAX(1, left) : ATTN__WIDE_GROUP;
}

/* The scratch's rows a KV head: room for the last head of any block sequence the call may run
   (attn__decode_next_block; the size queries see no dtypes): G rounded up to four, or to eight
   where the pass has blocks of eight. */
ATTN__PRIVATE int attn__decode_scratch_heads(int G, int widths) {
    return attn__decode_padded_heads(G, (widths & 8) && G > 4 ? 8 : 4);
}

/* What decode's tile rows of dt hold (attn__decode_tile_rows): value / fold, a power of two
   that the scale takes back (e4m3 through f16 comes as value / 256). */
ATTN__PRIVATE float attn__decode_tile_fold(attn_dtype dt) {
    return dt == ATTN_FP8_E4M3 ? 256.0f : 1.0f;
}

/* Per thread, for each of up to `span` KV heads of a work item: */
typedef struct attn__decode_scratch {
    float *q;       /* [span][Gs][Dv] pre-scaled queries (padded heads are 0) */
    float *p;       /* [span][Gs][PSTRIDE] logits, then probabilities */
    float *o;       /* [span][Gs][Dv] output accumulators */
    float *tile;    /* [DECODE_CHUNK][Dv] f32 K or V rows, when D is not a vector multiple */
    uint32_t *qt;   /* [span][tile_words] query tiles (tile_words 0: none) */
    uint16_t *kt;   /* [DECODE_CHUNK][Dv] bf16 key or value rows for the tiles, when not read
                       in place */
    float *ct;      /* [span][(Gs + 15) / 16][Dv / 16][16 heads][16 dims] P.V on tiles (C) */
    uint32_t *vt;   /* [16][Dv] a chunk's value rows in pairs of keys (B tiles; rows 8-15: 0) */
    uint16_t *pt;   /* [16 heads][32 keys] a chunk's bf16 probabilities (A tile; keys 16-31: 0) */
} attn__decode_scratch;

/* The floats of one KV head's C tiles of P.V on tiles (attn__decode_tile_values): [heads / 16
   up][Dv / 16][16 heads][16 dims]. */
ATTN__PRIVATE size_t attn__decode_tile_acc_size(int Gs, int Dv) {
    return (size_t)(Gs + 15) / 16 * 16 * (size_t)Dv;
}

/* Lays out one thread's decode scratch at base (NULL: only measures) and returns its size: with
   tile_words, query tiles and bf16 rows for the logits on tiles, and with G at
   ATTN__DECODE_TILE_VALUES_GROUP or more the operands of P.V on tiles too. */
ATTN__PRIVATE size_t attn__decode_scratch_layout(int span, int G, int Gs, int Dv,
                                                 size_t tile_words, char *base,
                                                 attn__decode_scratch *s) {
    char *c = base;
    size_t heads = (size_t)span * Gs;
    float *q = (float *)attn__carve(&c, sizeof(float) * heads * Dv);
    float *p = (float *)attn__carve(&c, sizeof(float) * heads * ATTN__DECODE_PSTRIDE);
    float *o = (float *)attn__carve(&c, sizeof(float) * heads * Dv);
    float *t = (float *)attn__carve(&c, sizeof(float) * (size_t)ATTN__DECODE_CHUNK * Dv);
    uint32_t *qt = NULL, *vt = NULL;
    uint16_t *kt = NULL, *pt = NULL;
    float *ct = NULL;
    if (tile_words) {
        qt = (uint32_t *)attn__carve(&c, sizeof(uint32_t) * (size_t)span * tile_words);
        kt = (uint16_t *)attn__carve(&c, sizeof(uint16_t) * (size_t)ATTN__DECODE_CHUNK * Dv);
    }
    if (tile_words && G >= ATTN__DECODE_TILE_VALUES_GROUP) {
        ct = (float *)attn__carve(&c, sizeof(float) * span * attn__decode_tile_acc_size(Gs, Dv));
        vt = (uint32_t *)attn__carve(&c, sizeof(uint32_t) * 16 * (size_t)Dv);
        pt = (uint16_t *)attn__carve(&c, sizeof(uint16_t) * 16 * 32);
    }
    if (s) {
        s->q = q; s->p = p; s->o = o; s->tile = t; s->qt = qt; s->kt = kt;
        s->ct = ct; s->vt = vt; s->pt = pt;
    }
    return (size_t)(c - base);
}

#ifdef ATTN__HAVE_DECODE_TILES
/* The C tiles of P.V of the span's KV head i. */
ATTN__PRIVATE float *attn__decode_tile_acc(const attn__decode_plan *P,
                                           const attn__decode_scratch *sc, int i) {
    return sc->ct + (size_t)i * attn__decode_tile_acc_size(P->Gs, P->Dv);
}

/* A KV head's C tiles of P.V (ct) as the partition's outputs po[G][D], times mul. */
ATTN__PRIVATE void attn__decode_tile_out(const attn__decode_plan *P, const float *ct, float mul,
                                         float *po) {
    for (int h = 0; h < P->G; h++)
        for (int d = 0; d < P->D; d++)
            po[(size_t)h * P->D + d] =
                    ct[(size_t)(h / 16) * 16 * P->D + (size_t)(d / 16) * 256 + (h % 16) * 16 +
                       d % 16] * mul;
}
#endif

/* Keys [j, j+n) of a sequence, all in block blk. A partition pass reads one piece at a time:
   with decode's prefetch, reading several pieces (scattered blocks) side by side, or chunks of
   keys taken from several blocks in turn, is no faster (docs/PERF.md#decode-pieces). */
typedef struct attn__decode_piece_at {
    int64_t blk, j;
    int n, off;   /* keys, and the first one's row in the block */
} attn__decode_piece_at;

/* Rows to ask for ahead of the kernels (see attn__decode_ahead_step): [at, end) into L2, the
   next piece's rows of the current head; [near, near_end) into L1, the rows the kernels read
   after the current ones when the L2 cursor asked for them earlier. esz bytes an element, for
   `heads` query heads (the route's padded heads). */
typedef struct attn__decode_ahead {
    const char *at, *end;
    const char *near, *near_end;
    size_t esz, heads;
    size_t owed;      /* bytes x heads read and not yet matched by lines asked for */
} attn__decode_ahead;

/* The next piece of [*j, hi) of sequence seq into *out (0: none left); advances *j past it. */
ATTN__PRIVATE int attn__decode_piece(const attn__decode_plan *P, int seq, int64_t *j, int64_t hi,
                                     attn__decode_piece_at *out) {
    if (*j >= hi) return 0;
    out->blk = P->block_tables[(int64_t)seq * P->max_blocks + *j / P->block_size];
    out->j = *j;
    out->off = (int)(*j % P->block_size);
    out->n = (int)ATTN__MIN(P->block_size - out->off, hi - *j);
    *j += out->n;
    return 1;
}

ATTN__PRIVATE float *attn__decode_partial(const attn__decode_plan *P, int64_t part, int g) {
    return P->partials + ((size_t)part * P->Hk + g) * (size_t)P->G * (2 + P->D);
}

/* The sequence and query head (*hq) of head h of KV head g in a pass for sequence seq: in a
   stacked pass (attn__decode_plan.stack) head h % stack_G of member h / stack_G. */
ATTN__PRIVATE int attn__decode_head(const attn__decode_plan *P, int seq, int g, int h, int *hq) {
    if (!P->stack) {
        *hq = g * P->G + h;
        return seq;
    }
    *hq = g * P->stack_G + h % P->stack_G;
    return P->stack[h / P->stack_G];
}

/* Where a pass writes KV head g's partial results of partition part of seq: a stacked pass
   into its own buffer, which attn__decode_stack_task hands to its members. */
ATTN__PRIVATE float *attn__decode_part_out(const attn__decode_plan *P, int seq, int part, int g) {
    if (P->stack) return P->stack_out + (size_t)(g - P->stack_g0) * P->G * (2 + (size_t)P->D);
    return attn__decode_partial(P, P->part_start[seq] + part, g);
}

/* What one call runs on, resolved once from its exec by the entry point (attn__call_resolve)
   and passed to everything below it. bf16 queries with bf16 keys and values take the bf16 pair
   kernels where `pairs` says so (each kernel family adds its own shape rules), and oneDNN's bf16
   GEMMs where `bf16_probs` does. */
typedef struct attn__call {
    const attn_exec *exec;          /* the caller's settings (NULL = defaults), for its pool */
    const struct attn__kernels *k;  /* the kernel table of the ISA */
    int threads;                    /* attn_exec_threads(exec) */
    attn_gemm gemm;                 /* the prefill GEMMs' engine (an IPEX layer's: oneDNN) */
    int bf16_probs;                 /* probabilities may be rounded to bf16 (no f32_probs) */
    int dot2;                       /* ... and the table's bf16 pair kernels run on this CPU */
    int pairs;                      /* ... and pay there (bf16dot=fast): the vector paths take
                                       them; beside the tiles dot2 is enough */
    int fp8_pairs;                  /* dot2, and over fp8 rows too (its byte tables run here) */
    int tiles;                      /* ... and bf16 prefill products run on tiles (ATTN_ISA_AMX) */
    int on_tiles;                   /* the call's ISA is ATTN_ISA_AMX and its table has tiles */
    int share;                      /* decode computes shared partitions once (not
                                       exec.no_shared_prefixes) */
    int64_t work;                   /* the call's estimated multiply-adds (attn__args_work), set
                                       by its entry point before it runs items;
                                       ATTN__WORK_UNKNOWN for attn_parallel_run */
    int64_t serial_work;            /* below this work the items run on the calling thread:
                                       ATTN_SERIAL_WORK */
} attn__call;

#ifdef ATTN_USE_ONEDNN
/* ---------------------------------------------------------------------------------------------
   [H] GEMM shim: oneDNN (ATTN_GEMM_ONEDNN, ATTN_BACKEND_IPEX). The oneDNN prefill item
   (attn__prefill_item_dnnl, in the kernel pass) keeps our masks and online softmax and sends the
   two GEMMs of each key tile to oneDNN matmul primitives, transposed so that their results
   land in the native kernels' layout (query rows in lanes) with plain destinations:
       S^T[KT][M] = K[KT][D] . Q[M][D]^T      O^T[D][M] += V[KT][D]^T . P^T[KT][M]
   M (the plan's padded rows per item) is fixed per call and a tile's key count is padded with
   zeros to the next multiple of 32, so a call needs at most 8 shapes (a tile's shape depends
   only on its own key count, never on the batch). A call creates their primitives once
   (oneDNN's primitive cache makes a repeated shape a cache hit) and, per thread, one stream
   and memory objects bound to that thread's scratch; all of it after validation, all of it
   destroyed before the call returns: no global state, nothing to leak. The GEMM operands are
   packed per tile: strided views of the caller's rows would skip the copy but move oneDNN 2.6
   from brgemm to a slower gemm kernel (docs/PERF.md#onednn).
   Threading: Debian's libdnnl threads with OpenMP. Every GEMM runs on the calling thread alone:
   inside our parallel region oneDNN sees omp_in_parallel() and never nests; outside it (serial
   driver, a caller's pool) the calling thread's OpenMP thread count is set to 1 around the call.
   So oneDNN never oversubscribes the cores, and an item's arithmetic depends only on the item:
   bitwise identical results for any thread count, as with the native kernels.
   bf16: when queries and keys/values are bf16 (scale 1) and oneDNN has a non-reference bf16
   matmul for this CPU, the GEMMs take bf16 operands as they are (the scale is applied to the
   f32 scores by the primitive) and accumulate in f32; P is rounded to bf16 for P.V. Otherwise
   (f32/f16/fp8 inputs, exec.f32_probs, or no bf16 hardware path) operands are widened to f32. */
#ifndef ATTN_USE_OPENMP
#error "attn.h: ATTN_USE_ONEDNN needs OpenMP (-fopenmp): oneDNN's GEMMs run on one thread by it"
#endif
#define ATTN__DNNL_KEY_TILE 256  /* keys per oneDNN tile: big enough to amortise a call */
#define ATTN__DNNL_KEY_STEP 32   /* a tail tile is padded to a multiple of this */
#define ATTN__DNNL_WIDTHS (ATTN__DNNL_KEY_TILE / ATTN__DNNL_KEY_STEP)

/* A thread's memory objects for tiles of one width (bound to its scratch buffers). */
typedef struct attn__dnnl_mems {
    dnnl_memory_t k, s, p, v;          /* p: the probabilities P.V reads (s itself in f32 mode) */
    dnnl_memory_t pad_qk, pad_pv;      /* the primitives' scratchpads (NULL when none) */
} attn__dnnl_mems;

/* A thread's oneDNN objects, kept in its scratch slice. */
typedef struct attn__dnnl_thread {
    dnnl_stream_t stream;
    dnnl_memory_t q, o;
    attn__dnnl_mems w[ATTN__DNNL_WIDTHS];  /* [i]: tiles of (i + 1) * KEY_STEP keys */
    int failed;                        /* a GEMM of this thread returned an error */
} attn__dnnl_thread;

/* A thread's oneDNN tile buffers. Scores, probabilities and outputs keep query rows in lanes,
   as the native kernels do ([keys][M], [D][M]: oneDNN writes them through transposed
   descriptors), so both engines share the masks, the online softmax and the epilogue. */
typedef struct attn__dnnl_scratch {
    float *q;      /* [M][D] packed queries (f32 pre-scaled, or bf16); rows past the item's are 0 */
    float *k, *v;      /* [KT][D] key and value rows (f32 or bf16); rows past the tile's are 0 */
    float *s;          /* [KT][M] scores, then probabilities */
    uint16_t *pb;      /* [KT][M] bf16 probabilities (bf16 mode) */
    float *o;          /* [Dp][M] running outputs */
    float *m, *l, *a, *rel, *slope;  /* [M] per-row state, as in attn__prefill_scratch */
    float *rowblk;     /* [MAX_LANES][block_row_stride] a vector's worth of output rows */
    attn__dnnl_thread *th;
} attn__dnnl_scratch;

/* The two GEMMs of a tile of one width. */
typedef struct attn__dnnl_shape {
    dnnl_primitive_t qk, pv;
    dnnl_memory_desc_t k, s, p, v, pad_qk, pad_pv;
} attn__dnnl_shape;

/* One call's primitives: rows M = the plan's padded rows per item; widths: shapes in use. */
typedef struct attn__dnnl_call {
    dnnl_engine_t engine;
    dnnl_memory_desc_t q, o;
    attn__dnnl_shape shape[ATTN__DNNL_WIDTHS];
    int rows, widths, threads;
    int bf16;          /* operands in bf16 (see [H]) */
} attn__dnnl_call;

ATTN__PRIVATE size_t attn__dnnl_scratch_layout(int rows, int D, int Dp, char *base,
                                               attn__dnnl_scratch *s) {
    char *c = base;
    size_t kv = (size_t)ATTN__DNNL_KEY_TILE * D, f = sizeof(float), rc = (size_t)rows;
    attn__dnnl_scratch t;
    t.q = (float *)attn__carve(&c, f * rc * D);
    t.k = (float *)attn__carve(&c, f * kv);
    t.v = (float *)attn__carve(&c, f * kv);
    t.s = (float *)attn__carve(&c, f * rc * ATTN__DNNL_KEY_TILE);
    t.pb = (uint16_t *)attn__carve(&c, sizeof(uint16_t) * rc * ATTN__DNNL_KEY_TILE);
    t.o = (float *)attn__carve(&c, f * rc * Dp);
    t.m = (float *)attn__carve(&c, f * rc);
    t.l = (float *)attn__carve(&c, f * rc);
    t.a = (float *)attn__carve(&c, f * rc);
    t.rel = (float *)attn__carve(&c, f * rc);
    t.slope = (float *)attn__carve(&c, f * rc);
    t.rowblk = (float *)attn__carve(&c, f * ATTN__MAX_LANES * (size_t)attn__block_row_stride(D));
    t.th = (attn__dnnl_thread *)attn__carve(&c, sizeof(attn__dnnl_thread));
    if (s) *s = t;
    return (size_t)(c - base);
}

ATTN__PRIVATE void attn__dnnl_scratch_of(const attn__prefill_plan *P, int thread,
                                         attn__dnnl_scratch *s) {
    const attn__dnnl_call *C = (const attn__dnnl_call *)P->dnnl;
    attn__dnnl_scratch_layout(C->rows, P->D, P->Dp, P->scratch + (size_t)thread * P->scratch_bytes,
                              s);
}

/* The native kernels' view of a oneDNN scratch: what the shared softmax and epilogue read. */
ATTN__PRIVATE attn__prefill_scratch attn__dnnl_lanes(const attn__dnnl_scratch *d) {
    attn__prefill_scratch v;
    memset(&v, 0, sizeof v);
    v.s = d->s; v.ot = d->o; v.m = d->m; v.l = d->l; v.a = d->a;
    v.rel = d->rel; v.slope = d->slope; v.rowblk = d->rowblk;
    return v;
}

/* Matrix rows x cols, row-major, or (transposed) stored as cols rows of `rows` elements. */
ATTN__PRIVATE int attn__dnnl_md(dnnl_memory_desc_t *md, int64_t rows, int64_t cols, int transposed,
                                dnnl_data_type_t dt) {
    dnnl_dims_t dims, strides;
    dims[0] = rows; dims[1] = cols;
    strides[0] = transposed ? 1 : cols;
    strides[1] = transposed ? rows : 1;
    return dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides) == dnnl_success;
}

/* oneDNN's reference implementations are slow loops: bf16 falls back to f32 rather than use them.
   */
ATTN__PRIVATE int attn__dnnl_is_reference(const_dnnl_primitive_desc_t pd) {
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0,
                                  (void *)&impl) != dnnl_success) return 1;
    return impl == NULL || strncmp(impl, "ref", 3) == 0;
}

/* C = scale * A . B (+ C when accumulate) as a primitive with a user-managed scratchpad. */
ATTN__PRIVATE int attn__dnnl_matmul(attn__dnnl_call *C, const dnnl_memory_desc_t *a,
                                    const dnnl_memory_desc_t *b, const dnnl_memory_desc_t *c,
                                    float scale, int accumulate, dnnl_primitive_t *prim,
                                    dnnl_memory_desc_t *pad) {
    dnnl_matmul_desc_t desc;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t ops = NULL;
    dnnl_primitive_desc_t pd = NULL;
    const dnnl_memory_desc_t *pad_md = NULL;
    int ok = dnnl_matmul_desc_init(&desc, a, b, NULL, c) == dnnl_success &&
             dnnl_primitive_attr_create(&attr) == dnnl_success &&
             dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) ==
                     dnnl_success;
    if (ok && scale != 1.0f)
        ok = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &scale) == dnnl_success;
    if (ok && accumulate)
        ok = dnnl_post_ops_create(&ops) == dnnl_success &&
             dnnl_post_ops_append_sum(ops, 1.0f) == dnnl_success &&
             dnnl_primitive_attr_set_post_ops(attr, ops) == dnnl_success;
    ok = ok && dnnl_primitive_desc_create(&pd, &desc, attr, C->engine, NULL) == dnnl_success;
    ok = ok && !(C->bf16 && attn__dnnl_is_reference(pd));
    if (ok) pad_md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    ok = ok && pad_md != NULL && dnnl_primitive_create(prim, pd) == dnnl_success;
    if (ok) *pad = *pad_md;
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (ops) dnnl_post_ops_destroy(ops);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return ok;
}

/* oneDNN runs on the calling thread alone (see [H]). Returns the thread count to restore. */
ATTN__PRIVATE int attn__dnnl_solo_begin(void) {
    int n = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (n > 1) omp_set_num_threads(1);
    return n;
}
ATTN__PRIVATE void attn__dnnl_solo_end(int n) {
    if (n > 1) omp_set_num_threads(n);
}

ATTN__PRIVATE int attn__dnnl_memory(dnnl_memory_t *mem, const dnnl_memory_desc_t *md,
                                    dnnl_engine_t engine, void *data) {
    return dnnl_memory_create(mem, md, engine, data) == dnnl_success;
}

/* A scratchpad memory when the primitive needs one. */
ATTN__PRIVATE int attn__dnnl_pad(dnnl_memory_t *mem, const dnnl_memory_desc_t *md,
                                 dnnl_engine_t e) {
    return dnnl_memory_desc_get_size(md) == 0 ||
           attn__dnnl_memory(mem, md, e, DNNL_MEMORY_ALLOCATE);
}

/* A thread's stream and memory objects for every width in use. */
ATTN__PRIVATE int attn__dnnl_thread_init(const attn__dnnl_call *C, attn__dnnl_scratch *s) {
    attn__dnnl_thread *th = s->th;
    dnnl_engine_t e = C->engine;
    int ok = dnnl_stream_create(&th->stream, e, dnnl_stream_default_flags) == dnnl_success &&
             attn__dnnl_memory(&th->q, &C->q, e, s->q) && attn__dnnl_memory(&th->o, &C->o, e, s->o);
    for (int i = 0; ok && i < C->widths; i++) {
        const attn__dnnl_shape *sh = &C->shape[i];
        attn__dnnl_mems *m = &th->w[i];
        ok = attn__dnnl_memory(&m->k, &sh->k, e, s->k) &&
             attn__dnnl_memory(&m->s, &sh->s, e, s->s) &&
             attn__dnnl_memory(&m->p, &sh->p, e, C->bf16 ? (void *)s->pb : (void *)s->s) &&
             attn__dnnl_memory(&m->v, &sh->v, e, s->v) &&
                 attn__dnnl_pad(&m->pad_qk, &sh->pad_qk, e) &&
             attn__dnnl_pad(&m->pad_pv, &sh->pad_pv, e);
    }
    return ok;
}

ATTN__PRIVATE void attn__dnnl_free_memory(dnnl_memory_t m) {
    if (m) dnnl_memory_destroy(m);
}

ATTN__PRIVATE void attn__dnnl_thread_free(attn__dnnl_thread *th) {
    for (int i = 0; i < ATTN__DNNL_WIDTHS; i++) {
        attn__dnnl_mems *m = &th->w[i];
        attn__dnnl_free_memory(m->k); attn__dnnl_free_memory(m->s); attn__dnnl_free_memory(m->p);
        attn__dnnl_free_memory(m->v);
        attn__dnnl_free_memory(m->pad_qk); attn__dnnl_free_memory(m->pad_pv);
    }
    attn__dnnl_free_memory(th->q); attn__dnnl_free_memory(th->o);
    if (th->stream) dnnl_stream_destroy(th->stream);
    memset(th, 0, sizeof *th);
}

/* Destroys the primitives and per-thread objects (not the engine); returns whether a GEMM failed.
   */
ATTN__PRIVATE int attn__dnnl_free_objects(attn__dnnl_call *C, const attn__prefill_plan *P) {
    int failed = 0;
    for (int t = 0; t < C->threads; t++) {
        attn__dnnl_scratch s;
        attn__dnnl_scratch_of(P, t, &s);
        failed |= s.th->failed;
        attn__dnnl_thread_free(s.th);
    }
    for (int i = 0; i < ATTN__DNNL_WIDTHS; i++) {
        if (C->shape[i].qk) dnnl_primitive_destroy(C->shape[i].qk);
        if (C->shape[i].pv) dnnl_primitive_destroy(C->shape[i].pv);
        C->shape[i].qk = C->shape[i].pv = NULL;
    }
    return failed;
}

/* Destroys what attn__dnnl_acquire created; ATTN_ERR_BACKEND when a GEMM failed meanwhile. */
ATTN__PRIVATE attn_status attn__dnnl_release(attn__dnnl_call *C, attn__prefill_plan *P) {
    int failed = attn__dnnl_free_objects(C, P);
    if (C->engine) dnnl_engine_destroy(C->engine);
    C->engine = NULL;
    P->dnnl = NULL;
    return failed ? ATTN__FAIL(ATTN_ERR_BACKEND) : ATTN_OK;
}

/* The primitives of tiles `width` keys wide; bf16 mode scales the scores in the GEMM. */
ATTN__PRIVATE int attn__dnnl_shape_init(attn__dnnl_call *C, attn__dnnl_shape *sh, int64_t D,
                                        int64_t width, float q_mul) {
    dnnl_data_type_t dt = C->bf16 ? dnnl_bf16 : dnnl_f32;
    /* S^T = K . Q^T and O^T += V^T . P^T: every destination is a plain matrix in the lanes
       layout (oneDNN 2.6 runs a transposed destination on its reference kernel: see
       docs/PERF.md#onednn), the transposes are views of the packed K/V tiles and queries */
    return attn__dnnl_md(&sh->k, width, D, 0, dt) &&
           attn__dnnl_md(&sh->s, width, C->rows, 0, dnnl_f32) &&
           attn__dnnl_md(&sh->p, width, C->rows, 0, dt) && attn__dnnl_md(&sh->v, D, width, 1, dt) &&
           attn__dnnl_matmul(C, &sh->k, &C->q, &sh->s, C->bf16 ? q_mul : 1.0f, 0, &sh->qk,
                             &sh->pad_qk) &&
           attn__dnnl_matmul(C, &sh->v, &sh->p, &C->o, 1.0f, 1, &sh->pv, &sh->pad_pv);
}

/* Every primitive and per-thread object of the call, in C->bf16's mode. */
ATTN__PRIVATE int attn__dnnl_build(attn__dnnl_call *C, const attn__prefill_plan *P) {
    int64_t D = P->D;
    int ok = attn__dnnl_md(&C->q, D, C->rows, 1, C->bf16 ? dnnl_bf16 : dnnl_f32) &&
             attn__dnnl_md(&C->o, D, C->rows, 0, dnnl_f32);
    for (int i = 0; ok && i < C->widths; i++)
        ok = attn__dnnl_shape_init(C, &C->shape[i], D, (int64_t)(i + 1) * ATTN__DNNL_KEY_STEP,
                                   P->q_mul);
    for (int t = 0; ok && t < C->threads; t++) {
        attn__dnnl_scratch s;
        attn__dnnl_scratch_of(P, t, &s);
        ok = attn__dnnl_thread_init(C, &s);
    }
    return ok;
}

/* The most keys any sequence of the plan has (the widest tile a call can need). */
ATTN__PRIVATE int64_t attn__prefill_max_keys(const attn__prefill_plan *P) {
    int rows = P->source == ATTN__KV_ROWS;
    return attn__longest(rows ? P->k_start : NULL, rows ? NULL : P->seq_lens, P->num_seqs);
}

/* Creates one call's engine, primitives and per-thread objects, and points the plan at them. */
ATTN__PRIVATE attn_status attn__dnnl_acquire(attn__dnnl_call *C, attn__prefill_plan *P,
                                             const attn__call *c) {
    int threads = c->threads;
    int64_t tiles = (attn__prefill_max_keys(P) + ATTN__DNNL_KEY_STEP - 1) / ATTN__DNNL_KEY_STEP;
    int ok, t, solo = attn__dnnl_solo_begin();  /* primitives planned for one thread */
    memset(C, 0, sizeof *C);
    C->rows = P->rows_cap; C->threads = threads;
    C->widths = (int)ATTN__MIN((int64_t)ATTN__DNNL_WIDTHS, ATTN__MAX(tiles, (int64_t)1));
    C->bf16 = c->bf16_probs && P->q_dtype == ATTN_BF16 && P->kv_dtype == ATTN_BF16;
    P->dnnl = C;
    for (t = 0; t < threads; t++) {
        attn__dnnl_scratch s;
        attn__dnnl_scratch_of(P, t, &s);
        memset(s.th, 0, sizeof *s.th);
    }
    ok = dnnl_engine_create(&C->engine, dnnl_cpu, 0) == dnnl_success && attn__dnnl_build(C, P);
    if (!ok && C->engine && C->bf16) {  /* no bf16 hardware path: widen to f32 */
        attn__dnnl_free_objects(C, P);
        C->bf16 = 0;
        ok = attn__dnnl_build(C, P);
    }
    attn__dnnl_solo_end(solo);
    if (!ok) {
        attn__dnnl_release(C, P);
        return ATTN__FAIL(ATTN_ERR_BACKEND);
    }
    return ATTN_OK;
}

/* c = a . b (+ c) on the thread's stream; an error is remembered, not printed. */
ATTN__PRIVATE void attn__dnnl_gemm(attn__dnnl_thread *th, dnnl_primitive_t prim, dnnl_memory_t a,
                                   dnnl_memory_t b, dnnl_memory_t c, dnnl_memory_t pad) {
    dnnl_exec_arg_t args[4];
    int solo = attn__dnnl_solo_begin();
    args[0].arg = DNNL_ARG_SRC; args[0].memory = a;
    args[1].arg = DNNL_ARG_WEIGHTS; args[1].memory = b;
    args[2].arg = DNNL_ARG_DST; args[2].memory = c;
    args[3].arg = DNNL_ARG_SCRATCHPAD; args[3].memory = pad;
    if (dnnl_primitive_execute(prim, th->stream, pad ? 4 : 3, args) != dnnl_success ||
        dnnl_stream_wait(th->stream) != dnnl_success)
        th->failed = 1;
    attn__dnnl_solo_end(solo);
}
typedef attn__dnnl_call attn__gemm_call;
#else
typedef struct attn__gemm_call { int unused; } attn__gemm_call;  /* native GEMMs need no state */
#endif /* ATTN_USE_ONEDNN */

/* Optional kernels of an ISA pass, each named by the CPU feature it needs besides the pass's
   own (attn__kernels.caps); a call uses those its CPU has (attn__call_of). */
#define ATTN__CAP_BF16_PAIRS ATTN__CPU_AVX512BF16  /* bf16 pair dot products (ATTN__HAS_DOT2) */
#define ATTN__CAP_E4M3_LUT ATTN__CPU_AVX512VBMI    /* e4m3 byte tables (ATTN__HAS_E4M3_LUT) */
#define ATTN__CAP_TILES (1 << 20)  /* tile kernels for bf16 prefill (ATTN__HAS_TILES): used when
                                      the call's ISA is ATTN_ISA_AMX, which picks the table */
#define ATTN__CAP_DECODE_TILES (1 << 21)  /* decode on tiles (ATTN__HAS_DECODE_TILES) */

/* ---------------------------------------------------------------------------------------------
   [I] Kernel instantiation. The kernel pass, sections [S] to [Y] at the end of this file,
   is compiled here: the file includes itself once per ISA with ATTN__KERNEL_PASS set, inside
   that ISA's target region, and each pass fills one attn__kernels table. A function the pass
   defines as ATTN__FN(name) is compiled as name__scalar, name__avx2, name__avx512 or
   name__neon, so a profiler's symbol (attn__decode_partition__avx512) is found by grepping
   its name without the ISA suffix. KERNEL NAMES (tests/house.sh checks this list):
       attn__block_masked attn__decode_ahead_of attn__decode_ahead_step attn__decode_chunk_at
       attn__decode_chunk_bf16 attn__decode_chunk_dt attn__decode_chunk_e4m3
       attn__decode_chunk_e4m3_lut attn__decode_chunk_e5m2 attn__decode_chunk_f16
       attn__decode_chunk_f32 attn__decode_chunk_fn attn__decode_chunk_for attn__decode_chunk_i4
       attn__decode_chunk_i8 attn__decode_dot2_keys attn__decode_dot2_pv_cols
       attn__decode_dot2_pv_step attn__decode_dot2_row attn__decode_dot2_values
       attn__decode_dot_keys attn__decode_even_odd attn__decode_fold attn__decode_format
       attn__decode_fp8 attn__decode_in_place attn__decode_keys_paired attn__decode_load
       attn__decode_load2 attn__decode_load_q attn__decode_logits attn__decode_pair_chunk_bf16
       attn__decode_pair_chunk_dt attn__decode_pair_chunk_fp8 attn__decode_pair_logits
       attn__decode_pair_order attn__decode_pair_values attn__decode_pairs attn__decode_partition
       attn__decode_parts_store attn__decode_parts_zero attn__decode_pass attn__decode_piece_rows
       attn__decode_probs_bf16 attn__decode_pv_cols_nv attn__decode_pv_key
       attn__decode_reduce_parts attn__decode_restore_order attn__decode_rows attn__decode_rows_of
       attn__decode_softmax attn__decode_softmax_heads attn__decode_tile_dots attn__decode_tile_fp8
       attn__decode_tile_fp8_tables attn__decode_tile_keys attn__decode_tile_logits
       attn__decode_tile_probs attn__decode_tile_pv attn__decode_tile_queries
       attn__decode_tile_rows attn__decode_tile_value_pairs attn__decode_tile_value_pass
       attn__decode_tile_values attn__decode_together attn__decode_unpack_order
       attn__decode_values attn__dnnl_between
       attn__dnnl_pack_kv attn__dnnl_pack_q attn__exp_pairs attn__from_f32 attn__init_rows
       attn__int_load2 attn__int_row_to_f32 attn__int_scaled2 attn__load_outputs
       attn__load_queries attn__logits_of attn__pack_key_tiles attn__pack_value_cols
       attn__pack_value_pairs attn__prefetch_tile attn__prefill_item attn__prefill_item_dnnl
       attn__pv_dot2_micro attn__pv_micro attn__pv_tiles attn__qk_dot2_micro attn__qk_micro
       attn__qk_tiles attn__rescale_of attn__rescale_outputs attn__softmax_lanes attn__store_rows
       attn__table attn__tile_emu_dp attn__tile_emu_load attn__tile_emu_store attn__tile_file
       attn__tile_operands attn__tile_outputs attn__tile_rows attn__tile_rows16
       attn__tile_rows_to_bf16 attn__tile_scores attn__tile_step attn__tile_values
       attn__tiles_begin attn__tiles_end attn__to_f32 attn__transpose_block attn__unfold attn__vexp
       attn__vtanh */

/* The per-ISA kernel table. */
typedef struct attn__kernels {
    attn_isa isa;
    int caps;  /* ATTN__CAP_* this pass has */
    int decode_widths;  /* decode's blocks of query heads this pass compiles: 1 | 2 | 4 | 8 */
    /* dst[i] = src[i] * scale as f32 (any dtype) */
    void (*to_f32)(float *dst, const void *src, attn_dtype dt, int n, float scale);
    /* dst[i] = src[i] rounded to dt (f32, f16, bf16) */
    void (*from_f32)(void *dst, attn_dtype dt, const float *src, int n);
    void (*prefill_item)(const attn__prefill_plan *plan, int item, int thread);
    /* one decode partition's partial results (attn__decode_merge merges them) */
    void (*decode_partition)(const attn__decode_plan *plan, int seq, int g0, int g1, int part,
                             int thread);
#ifdef ATTN_USE_ONEDNN
    void (*prefill_item_dnnl)(const attn__prefill_plan *plan, int item, int thread);  /* [H] */
#endif
} attn__kernels;

#define ATTN__ISA_SCALAR_PASS 1
#define ATTN__ISA_AVX2_PASS 2
#define ATTN__ISA_AVX512_PASS 3
#define ATTN__ISA_NEON_PASS 4

/* A pass's target region (GCC's and Clang's; under ATTN_NO_RUNTIME_DISPATCH the -m flags enable
   the ISA instead): every function between ATTN__TARGET_PUSH(targets) and ATTN__TARGET_POP() is
   compiled for those targets. */
#define ATTN__PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define ATTN__TARGET_PUSH(t)                                                                      \
    ATTN__PRAGMA(clang attribute push(__attribute__((target(t))), apply_to = function))
#define ATTN__TARGET_POP() ATTN__PRAGMA(clang attribute pop)
#elif defined(__GNUC__)
#define ATTN__TARGET_PUSH(t) ATTN__PRAGMA(GCC push_options) ATTN__PRAGMA(GCC target(t))
#define ATTN__TARGET_POP() ATTN__PRAGMA(GCC pop_options)
#else
#define ATTN__TARGET_PUSH(t)
#define ATTN__TARGET_POP()
#endif

/* GCC 12's AVX-512 headers self-initialise placeholders (`__Y = __Y`), which -Wmaybe-uninitialized
   reports at every inlined use in C++; the kernels themselves read nothing uninitialised. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

/* Each pass is one block: the ISA table (ATTN__ISA_LIST) cannot include a file or test a guard
   with #if, so the block does, under the row's compile guard and in the ISA's target region. */
#define ATTN__KERNEL_PASS ATTN__ISA_SCALAR_PASS
#include ATTN_HEADER_FILENAME
#undef ATTN__KERNEL_PASS

#if ATTN__HAVE_AVX2
#define ATTN__KERNEL_PASS ATTN__ISA_AVX2_PASS
ATTN__TARGET_PUSH("avx2,fma,f16c")
#include ATTN_HEADER_FILENAME
ATTN__TARGET_POP()
#undef ATTN__KERNEL_PASS
#endif

#if ATTN__HAVE_AVX512
#define ATTN__KERNEL_PASS ATTN__ISA_AVX512_PASS
ATTN__TARGET_PUSH("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#include ATTN_HEADER_FILENAME
ATTN__TARGET_POP()
#undef ATTN__KERNEL_PASS
#endif

#if ATTN__HAVE_NEON
#define ATTN__KERNEL_PASS ATTN__ISA_NEON_PASS
#include ATTN_HEADER_FILENAME
#undef ATTN__KERNEL_PASS
#endif
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/* The kernel table of an ISA (the ISA table's). The scalar table for an ISA this build or CPU
   lacks, which the entry points refuse before any kernel runs (the size queries answer for any
   exec). */
ATTN__PRIVATE const attn__kernels *attn__kernels_for(attn_isa isa) {
    const attn__kernels *k = NULL;
    int cpu = attn__cpu_flags();
    (void)cpu;
#define ATTN__ISA_TABLE(name, value, str, guard, runs, pref, table, info)                         \
    if (isa == name) k = ATTN__IF(guard)(table, NULL);
    ATTN__ISA_LIST(ATTN__ISA_TABLE)
#undef ATTN__ISA_TABLE
    return k ? k : &attn__table__scalar;
}

/* ---------------------------------------------------------------------------------------------
   [J] Call context and threading driver: one resolved exec, one parallel-for over fixed items. */
ATTNDEF int attn_exec_threads(const attn_exec *exec) {
    int n = exec ? exec->num_threads : 0;
    if (n > 0) return n;
    if (exec && exec->parallel_for) return 1;
#ifdef ATTN_USE_OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

#define ATTN__WORK_UNKNOWN ((int64_t)0x7fffffffffffffffLL)  /* never below the threshold */

/* Which kernels a call takes (PRECISION and AMX in the header give the caller's view). The ISA
   picks the kernel table (attn__kernels_for, the ISA table's); with f32_probs 0, bf16 queries
   may then take these, each where the plan's shapes and dtypes allow it:
   - dot2: the table and the CPU have the bf16 pair kernels (AVX-512 BF16); pairs: dot2 where
     the CPU's bf16 dot products outrun its FMAs (ATTN__CPU_BF16_DOT_FAST, AMD's), and fp8_pairs:
     dot2 with the e4m3 byte tables (AVX-512 VBMI). Prefill takes the pair kernels for bf16
     keys and values and an even D (attn__prefill_plan's bf16_pairs), decode for a bf16 cache,
     or an fp8 one with fp8_pairs and G >= 3, and D % 32 == 0 (attn__decode_plan_fill).
   - tiles: ATTN_ISA_AMX whose table has the tile kernels, on the native engine. Prefill runs
     Q.K and P.V on them over bf16 keys and values or an fp8 cache with D % 32 == 0
     (attn__prefill_plan's tiles); decode its logits with G >= ATTN__DECODE_TILE_GROUP (8; with
     ATTN_DECODE_TILES every query dtype and G >= 4: attn__decode_tiles_may_run) and P.V too
     with G >= ATTN__DECODE_TILE_VALUES_GROUP (16). Beside the tiles the pair kernels run
     wherever the CPU has them (dot2, not pairs): measured faster there.
   Everything else takes the f32 vector kernels of the table's pass. */
/* The call context of exec, unchecked: for the size queries, which answer for any exec, and
   after attn__call_resolve. onednn: the prefill GEMMs run on oneDNN whatever exec says (an IPEX
   layer). */
ATTN__PRIVATE void attn__call_of(const attn_exec *exec, int onednn, attn__call *c) {
    attn_isa isa = exec ? exec->isa : ATTN_ISA_AUTO;
    if (isa == ATTN_ISA_AUTO) isa = attn_best_isa();
    c->exec = exec;
    c->k = attn__kernels_for(isa);
    c->threads = attn_exec_threads(exec);
    c->gemm = onednn ? ATTN_GEMM_ONEDNN : exec ? exec->gemm : ATTN_GEMM_NATIVE;
    c->bf16_probs = !(exec && exec->f32_probs);
    c->share = !(exec && exec->no_shared_prefixes);
    c->dot2 = c->bf16_probs && (c->k->caps & attn__cpu_flags() & ATTN__CAP_BF16_PAIRS) != 0;
    /* the pair kernels pay where the CPU's bf16 dot products outrun its FMAs; elsewhere (Intel's
       Xeons) the f32 kernels are faster, except beside the tiles: docs/PERF.md#bf16-dot-rates */
    c->pairs = c->dot2 && (attn__cpu_flags() & ATTN__CPU_BF16_DOT_FAST) != 0;
    c->fp8_pairs = c->dot2 && (c->k->caps & attn__cpu_flags() & ATTN__CAP_E4M3_LUT) != 0;
    c->on_tiles = isa == ATTN_ISA_AMX && (c->k->caps & ATTN__CAP_TILES) != 0;
    c->tiles = c->bf16_probs && c->on_tiles && c->gemm == ATTN_GEMM_NATIVE;
    c->work = ATTN__WORK_UNKNOWN;
    c->serial_work = ATTN_SERIAL_WORK;
}

/* Validates exec (with the engine onednn forces) and fills the call context: what every entry
   point that runs kernels does first, once. */
ATTN__PRIVATE attn_status attn__call_resolve(const attn_exec *exec, int onednn, attn__call *c) {
    attn_isa isa = exec ? exec->isa : ATTN_ISA_AUTO;
    attn_gemm gemm = onednn ? ATTN_GEMM_ONEDNN : exec ? exec->gemm : ATTN_GEMM_NATIVE;
    ATTN__CHECK(!exec || exec->num_threads >= 0, ATTN_ERR_INVALID_ARG);
    ATTN__CHECK((int)isa >= 0 && isa < ATTN_ISA_COUNT, ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(gemm == ATTN_GEMM_NATIVE || gemm == ATTN_GEMM_ONEDNN, ATTN_ERR_INVALID_ARG);
#ifndef ATTN_USE_ONEDNN
    ATTN__CHECK(gemm == ATTN_GEMM_NATIVE, ATTN_ERR_UNSUPPORTED);
#endif
    ATTN__CHECK(attn_isa_supported(isa), ATTN_ERR_UNSUPPORTED);
    attn__call_of(exec, onednn, c);
    return ATTN_OK;
}

/* Threads the items of a call run on: 1 (the calling thread, no parallel region) when its work
   is below c->serial_work, else no more threads than items. A parallel region costs a few
   microseconds on idle cores, but up to a scheduler time slice (milliseconds) when another
   process keeps one of its cores busy and a thread waits for it: a small call (a decode step
   of a small model, a short prefill chunk) is faster on one thread. ATTN_SERIAL_WORK is where
   two threads start to win on an idle machine (docs/PERF.md#serial-below). */
ATTN__PRIVATE int attn__run_threads(const attn__call *c, int num_items) {
    if (c->work < c->serial_work) return 1;
    return ATTN__MAX(1, ATTN__MIN(c->threads, num_items));
}

#ifdef ATTN_USE_OPENMP
/* OpenMP regions after one whose last thread started late run on the calling thread: where
   another process keeps a core busy, a region waits for the thread that shares that core, a
   scheduler slice (milliseconds, however small the call), so the next ATTN__LATE_CALLS calls
   past the threshold run serially, then the threads are tried again
   (docs/PERF.md#serial-below). Results do not depend on it: every thread count gives the same
   bits. A process-wide hint, read and written atomically. */
#define ATTN__LATE_START 1e-3  /* seconds from a region's start to its last thread's */
#define ATTN__LATE_CALLS 16
static int attn__late_calls_left;
static int attn__team_made;  /* the most threads a region had: a larger one starts threads */

/* Whether this call takes the calling thread alone, the threads having started late lately. */
ATTN__PRIVATE int attn__late_serial(void) {
    int left;
#pragma omp atomic read
    left = attn__late_calls_left;
    if (left <= 0) return 0;
#pragma omp atomic
    attn__late_calls_left--;
    return 1;
}

/* The items on `threads` OpenMP threads, dynamic (items differ in cost: causal tiles; results
   do not depend on who runs what); a region whose last thread started late turns the next
   calls serial (attn__late_serial), but not one that starts new threads (slow once). */
ATTN__PRIVATE void attn__run_omp(int threads, int num_items, attn_task_fn *task, void *ctx) {
    double t0 = omp_get_wtime(), late = 0.0;
    int made;
#pragma omp atomic read
    made = attn__team_made;
#pragma omp parallel num_threads(threads)
    {
        double start = omp_get_wtime() - t0;
        int i;
#pragma omp critical(attn__late)
        if (start > late) late = start;
#pragma omp for schedule(dynamic, 1)
        for (i = 0; i < num_items; i++) task(ctx, i, omp_get_thread_num());
    }
    if (threads > made) {
#pragma omp atomic write
        attn__team_made = threads;
    } else if (late > ATTN__LATE_START) {
#pragma omp atomic write
        attn__late_calls_left = ATTN__LATE_CALLS;
    }
}
#endif

ATTN__PRIVATE void attn__run_items(const attn__call *c, int num_items, attn_task_fn *task,
                                   void *ctx) {
    int threads = attn__run_threads(c, num_items);
    if (num_items <= 0) return;
    if (c->work >= c->serial_work && c->exec && c->exec->parallel_for) {
        c->exec->parallel_for(c->exec->pool, num_items, threads, task, ctx);
        return;
    }
#ifdef ATTN_USE_OPENMP
    if (threads > 1 && !attn__late_serial()) {
        attn__run_omp(threads, num_items, task, ctx);
        return;
    }
#endif
    for (int i = 0; i < num_items; i++) task(ctx, i, 0);
}

ATTNDEF attn_status attn_parallel_run(const attn_exec *exec, int num_items, attn_task_fn *task,
                                      void *ctx) {
    ATTN__CHECK(task != NULL && num_items >= 0, ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(!exec || exec->num_threads >= 0, ATTN_ERR_INVALID_ARG);
    attn__call c;
    attn__call_of(exec, 0, &c);
    attn__run_items(&c, num_items, task, ctx);
    return ATTN_OK;
}

/* ---------------------------------------------------------------------------------------------
   [K] Parameter checks and attn_convert. Every public entry point validates, then plans,
   dispatches and runs its items on the threading driver. */
ATTN__PRIVATE int attn__finite_array(const float *x, int n) {
    for (int i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

ATTNDEF attn_status attn_params_check(const attn_params *p) {
    ATTN__CHECK(p != NULL, ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(p->num_heads >= 1 && p->num_kv_heads >= 1, ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(p->num_heads % p->num_kv_heads == 0, ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(p->head_size >= 1 && p->head_size <= ATTN_MAX_HEAD_SIZE, ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(isfinite(p->scale) && p->scale >= 0.0f, ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(isfinite(p->logits_soft_cap) && p->logits_soft_cap >= 0.0f, ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(p->sliding_window >= 0, ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(!p->alibi_slopes || attn__finite_array(p->alibi_slopes, p->num_heads),
                ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(!p->sinks || attn__finite_array(p->sinks, p->num_heads), ATTN_ERR_INVALID_ARG);
    return ATTN_OK;
}

ATTN__PRIVATE float attn__scale(const attn_params *p) {
    return p->scale > 0.0f ? p->scale : 1.0f / sqrtf((float)p->head_size);
}

/* The byte offset of element `at` in dt: an integer row's at a multiple of 32, where whole
   groups start, so that the elements from there are a row of their own (attn_dtype_row_bytes). */
ATTN__PRIVATE size_t attn__convert_offset(attn_dtype dt, size_t at) {
    if (attn__is_int(dt)) return at / ATTN__INT_GROUP * attn__int_group_bytes(dt);
    return at * attn_dtype_size(dt);
}

ATTNDEF attn_status attn_convert(void *dst, attn_dtype dst_dtype, const void *src,
                                 attn_dtype src_dtype, size_t n, float scale) {
    ATTN__CHECK(attn__dtype_ok(dst_dtype) && attn__dtype_ok(src_dtype), ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(n == 0 || (dst && src), ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(isfinite(scale) && scale >= 0.0f, ATTN_ERR_INVALID_ARG);
    if (scale == 0.0f) scale = 1.0f;
    ATTN__CHECK(scale == 1.0f || attn__is_fp8(dst_dtype) || attn__is_fp8(src_dtype),
                ATTN_ERR_INVALID_ARG);
    int ints = attn__is_int(dst_dtype) || attn__is_int(src_dtype);
    /* an integer row's bytes must fit a size_t; in place only to its own dtype (n = 0 has no
       bytes, so two NULLs are not "in place") */
    ATTN__CHECK(!ints || n == 0 || (n <= (size_t)ATTN__INT64_MAX &&
                                    attn_dtype_row_bytes(dst_dtype, (int64_t)n) &&
                                    attn_dtype_row_bytes(src_dtype, (int64_t)n)),
                ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(!ints || n == 0 || dst != src || dst_dtype == src_dtype, ATTN_ERR_INVALID_ARG);
    if (ints && dst_dtype == src_dtype) {  /* an integer row to its own dtype: its bytes */
        if (n) memmove(dst, src, attn_dtype_row_bytes(src_dtype, (int64_t)n));
        return ATTN_OK;
    }
    const attn__kernels *kern = attn__kernels_for(attn_best_isa());
    float buf[256];
    float read_scale = attn__is_fp8(src_dtype) ? scale : 1.0f;
    float write_div = attn__is_fp8(dst_dtype) ? scale : 1.0f;
    /* Chunks of 256 (whole integer groups) go through an f32 buffer; a same-pointer call (of
       element dtypes, above) with a wider destination must run backwards. */
    int backwards = attn_dtype_size(dst_dtype) > attn_dtype_size(src_dtype) &&
                    (const void *)dst == src;
    size_t chunks = (n + 255) / 256;
    for (size_t ci = 0; ci < chunks; ci++) {
        size_t c = backwards ? chunks - 1 - ci : ci, at = c * 256;
        int m = (int)ATTN__MIN((size_t)256, n - at);
        kern->to_f32(buf, (const char *)src + attn__convert_offset(src_dtype, at), src_dtype, m,
                     read_scale);
        if (write_div != 1.0f)
            for (int i = 0; i < m; i++) buf[i] /= write_div;
        if (attn__is_fp8(dst_dtype))
            for (int i = 0; i < m; i++) attn__store_f32(dst, dst_dtype, at + (size_t)i, buf[i]);
        else
            kern->from_f32((char *)dst + attn__convert_offset(dst_dtype, at), dst_dtype, buf, m);
    }
    return ATTN_OK;
}

/* ---------------------------------------------------------------------------------------------
   [L] Bias builders, and the logits transform's parameters: a bias is what the transform
   ([G], attn__logits_of in [T]) adds to a score, over the keys the mask lets each query see. */

/* The transform of params, causal when `causal`; returns what queries are multiplied by before
   it: the scale, or scale / cap under a soft cap (the transform is then given s / cap). */
ATTN__PRIVATE float attn__logits_init(attn__logits *T, const attn_params *p, int causal) {
    float scale = attn__scale(p);
    T->cap = p->logits_soft_cap; T->slopes = p->alibi_slopes;
    T->causal = causal != 0; T->window = p->sliding_window;
    return T->cap > 0.0f ? scale / T->cap : scale;
}

ATTNDEF void attn_alibi_slopes(int num_heads, float *slopes) {
    int p = 1, k;
    if (num_heads < 1 || !slopes) return;
    while (p * 2 <= num_heads) p *= 2;  /* largest power of two <= num_heads */
    /* base = 2^(-8/p): slope k = 2^(-8k/p), computed in double and rounded once */
    for (k = 1; k <= p; k++) slopes[k - 1] = (float)exp2(-8.0 * k / p);
    /* the remaining heads interleave the odd powers of extra = 2^(-4/p) */
    for (k = 0; k < num_heads - p; k++) slopes[p + k] = (float)exp2(-4.0 * (2 * k + 1) / p);
}

ATTN__PRIVATE attn_status attn__bias_shape_check(int num_heads, int q_len, int kv_len,
                                                 float *bias) {
    ATTN__CHECK(num_heads >= 1 && q_len >= 0 && kv_len >= 0, ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(bias != NULL || (int64_t)q_len * kv_len == 0, ATTN_ERR_INVALID_ARG);
    return ATTN_OK;
}

/* The one builder behind the three public ones: -inf outside each row's visible keys, else
   the transform's scalar instance on a score that adds nothing. T has no cap: a soft cap is
   not a sum, so no bias holds it. */
ATTN__PRIVATE void attn__fill_bias(const attn__logits *T, int num_heads, int q_len, int kv_len,
                                   float *bias) {
    float none = T->slopes ? -0.0f : 0.0f;  /* slope * d + -0 is slope * d to its sign */
    if ((int64_t)q_len * kv_len == 0) return;  /* bias may be NULL */
    for (int h = 0; h < num_heads; h++) {
        float slope = attn__logits_slope(T, h);
        for (int i = 0; i < q_len; i++) {
            int64_t pos = (int64_t)kv_len - q_len + i, lo, hi;
            float *row = bias + ((size_t)h * q_len + i) * kv_len;
            attn__visible_keys(T, pos, pos, kv_len, &lo, &hi);
            for (int j = 0; j < kv_len; j++)
                row[j] = j < lo || j >= hi ? -INFINITY
                         : attn__logits_of__scalar(T, none, 1.0f, slope, (float)(j - pos), 0,
                                                   0.0f, 0.0f);
        }
    }
}

ATTNDEF attn_status attn_make_alibi_bias(int num_heads, const float *slopes, int q_len, int kv_len,
                                         int causal, float *bias) {
    attn__logits T;
    ATTN__TRY(attn__bias_shape_check(num_heads, q_len, kv_len, bias));
    ATTN__CHECK(slopes && attn__finite_array(slopes, num_heads), ATTN_ERR_INVALID_ARG);
    memset(&T, 0, sizeof T);
    T.slopes = slopes; T.causal = causal != 0;
    attn__fill_bias(&T, num_heads, q_len, kv_len, bias);
    return ATTN_OK;
}

ATTNDEF attn_status attn_make_sliding_window_bias(int window, int q_len, int kv_len, int causal,
                                                  float *bias) {
    attn__logits T;
    ATTN__TRY(attn__bias_shape_check(1, q_len, kv_len, bias));
    ATTN__CHECK(window >= 1, ATTN_ERR_INVALID_ARG);
    memset(&T, 0, sizeof T);
    T.window = window; T.causal = causal != 0;
    attn__fill_bias(&T, 1, q_len, kv_len, bias);
    return ATTN_OK;
}

ATTNDEF attn_status attn_make_bias(const attn_params *params, int q_len, int kv_len, int causal,
                                   float *bias) {
    attn__logits T;
    ATTN__TRY(attn_params_check(params));
    ATTN__TRY(attn__bias_shape_check(params->num_heads, q_len, kv_len, bias));
    attn__logits_init(&T, params, causal);
    T.cap = 0.0f;
    attn__fill_bias(&T, params->num_heads, q_len, kv_len, bias);
    return ATTN_OK;
}

/* ---------------------------------------------------------------------------------------------
   [M] Prefill planning, shared by attn_sdpa and attn_paged_prefill.
   A prefill call's workspace (MEMORY gives the caller's view) holds per thread one work item's
   tiles of queries, scores and outputs (attn__prefill_scratch_layout), and, where the pair or
   tile kernels can run (attn__value_cache_tiles), the value rows of the first whole 64-key
   tiles of one (sequence, KV head), packed once and reused by each query tile of that KV head
   (attn__value_cache): interleaved by pairs of keys, as vdpbf16ps reads them, or for the tiles
   each dim's keys in order and the keys in 1 KB blocks (twice the bytes, so half as many
   tiles; an fp8 cache made bf16), at most ATTN_VALUE_CACHE_BYTES a thread and no more than the
   longest key sequence needs. The size queries see no dtypes (attn_forward's no cache either),
   so they count these tiles for f32 and f16 calls too, which leave them unused. On the tiles
   each thread's scratch also holds TILE_STEP key tiles' scores, keys and values. */

/* Checks an activation rows argument with `width` elements per token. */
ATTN__PRIVATE attn_status attn__rows_check(attn_rows r, int64_t width, int64_t tokens) {
    ATTN__CHECK(attn__is_activation_dtype(r.dtype), ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(r.stride == 0 || r.stride >= width, ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(tokens == 0 || r.data != NULL, ATTN_ERR_INVALID_ARG);
    return ATTN_OK;
}

/* cu must be int32 [n+1], starting at 0, non-decreasing. */
ATTN__PRIVATE attn_status attn__offsets_check(const int32_t *cu, int n) {
    ATTN__CHECK(cu != NULL && cu[0] == 0, ATTN_ERR_INVALID_ARG);
    for (int i = 0; i < n; i++) ATTN__CHECK(cu[i + 1] >= cu[i], ATTN_ERR_INVALID_ARG);
    return ATTN_OK;
}

ATTN__PRIVATE int attn__tile_tokens(int G) { return ATTN__MAX(1, ATTN__QUERY_ROWS / G); }
/* Prefill's head size padded to whole micro-tiles of every ISA (Dp). */
ATTN__PRIVATE int attn__padded_dims(int D) {
    return (D + ATTN__MAX_MR - 1) / ATTN__MAX_MR * ATTN__MAX_MR;
}
ATTN__PRIVATE int attn__rows_cap(int G) {
    int rows = attn__tile_tokens(G) * G;
    return (rows + ATTN__ROW_QUANTUM - 1) / ATTN__ROW_QUANTUM * ATTN__ROW_QUANTUM;
}

/* Whether the tile kernels may run in a prefill call (its ISA has them and D is a multiple of
   32, as they need; the dtypes decide later): what the workspace is laid out for. */
ATTN__PRIVATE int attn__tiles_may_run(const attn__call *c, int head_size) {
    return c->tiles && head_size % 32 == 0;
}
/* Keys a prefill step takes: TILE_STEP key tiles where the tile kernels may run, else one. */
ATTN__PRIVATE int attn__key_rows(const attn__call *c, int head_size) {
    return attn__tiles_may_run(c, head_size) ? ATTN__TILE_STEP * ATTN__KEY_TILE : ATTN__KEY_TILE;
}

/* How many whole key tiles each thread of a prefill call keeps packed (attn__cached_tile, see
   above): as many as the longest key sequence has (longest < 0: not known, no limit), within
   ATTN_VALUE_CACHE_BYTES; none where neither the pair nor the tile kernels can run (the call's
   kernel table or CPU lacks them, f32_probs, oneDNN). */
ATTN__PRIVATE int attn__value_cache_tiles(const attn__call *c, int head_size, int64_t longest) {
    int key_rows = attn__key_rows(c, head_size);
    size_t tile_bytes =
            sizeof(uint32_t) * attn__cached_tile_words(attn__padded_dims(head_size), key_rows);
    int64_t fit = (int64_t)(ATTN_VALUE_CACHE_BYTES / tile_bytes);
    if (!(c->pairs || c->tiles) || c->gemm != ATTN_GEMM_NATIVE) return 0;
    if (longest >= 0) fit = ATTN__MIN(fit, longest / ATTN__KEY_TILE);
    return (int)ATTN__MIN(fit, (int64_t)0x7fffffff);
}

/* Lays out a prefill call's workspace, [item_start: num_seqs+1 int64][scratch per thread], at
   base into P (base NULL: only measures) and returns its size. Nothing is written to base. */
ATTN__PRIVATE size_t attn__prefill_ws_layout(const attn__call *c, const attn_params *p,
                                             int num_seqs, int value_tiles, char *base,
                                             attn__prefill_plan *P) {
    int G = p->num_heads / p->num_kv_heads, D = p->head_size;
    int rows_cap = attn__rows_cap(G);
    int Dp = attn__padded_dims(D);
    int key_rows = attn__key_rows(c, D);
    size_t per_thread = attn__align_up(
            attn__prefill_scratch_layout(rows_cap, D, Dp, value_tiles, key_rows, NULL, NULL));
#ifdef ATTN_USE_ONEDNN  /* the oneDNN engine has its own tiles */
    if (c->gemm == ATTN_GEMM_ONEDNN)
        per_thread = attn__align_up(attn__dnnl_scratch_layout(rows_cap, D, Dp, NULL, NULL));
#endif
    size_t head = attn__align_up(sizeof(int64_t) * ((size_t)num_seqs + 1));
    if (base) {
        char *aligned =
                (char *)(((uintptr_t)base + ATTN__ALIGN - 1) & ~(uintptr_t)(ATTN__ALIGN - 1));
        P->item_start = (int64_t *)(void *)aligned;
        P->scratch = aligned + head;
        P->scratch_bytes = per_thread;
        P->value_tiles = value_tiles;
        P->key_rows = key_rows;
    }
    return ATTN__ALIGN + head + per_thread * (size_t)c->threads;  /* + alignment slack */
}

/* Fills the parts of a prefill plan that come from params, and the item offsets. Returns the
   number of items, or -1 when there are more than an int can count. */
ATTN__PRIVATE int64_t attn__prefill_plan_init(attn__prefill_plan *P, const attn_params *p,
                                              const int32_t *q_start, int num_seqs, int causal) {
    int64_t items = 0;
    P->H = p->num_heads; P->Hk = p->num_kv_heads; P->G = P->H / P->Hk; P->D = p->head_size;
    P->Dp = attn__padded_dims(P->D);
    P->q_mul = attn__logits_init(&P->logits, p, causal);  /* scores come out as s or s/cap */
    P->sinks = p->sinks;
    P->num_seqs = num_seqs; P->tile_tokens = attn__tile_tokens(P->G);
    P->rows_cap = attn__rows_cap(P->G);
    P->q_start = q_start;
    for (int s = 0; s < num_seqs; s++) {
        int64_t lq = q_start[s + 1] - q_start[s];
        if (P->item_start) P->item_start[s] = items;
        items += (lq + P->tile_tokens - 1) / P->tile_tokens * P->Hk;
    }
    if (P->item_start) P->item_start[num_seqs] = items;
    return items > 0x7fffffff ? -1 : items;
}

typedef struct attn__prefill_run {
    const attn__prefill_plan *plan;
    const attn__kernels *k;
} attn__prefill_run;
/* One prefill item on the plan's GEMM engine. */
ATTN__PRIVATE void attn__prefill_item_on(const attn__kernels *k, const attn__prefill_plan *P,
                                         int item, int thread) {
#ifdef ATTN_USE_ONEDNN
    if (P->dnnl) { k->prefill_item_dnnl(P, item, thread); return; }
#endif
    k->prefill_item(P, item, thread);
}
ATTN__PRIVATE void attn__prefill_task(void *ctx, int item, int thread) {
    const attn__prefill_run *run = (const attn__prefill_run *)ctx;
    attn__prefill_item_on(run->k, run->plan, item, thread);
}

/* Sets up the call's GEMM engine (oneDNN: after validation, before anything is written). The
   returned status says whether the items can run. */
ATTN__PRIVATE attn_status attn__gemm_begin(const attn__call *c, attn__prefill_plan *P,
                                           int64_t items, attn__gemm_call *call) {
#ifdef ATTN_USE_ONEDNN
    if (c->gemm == ATTN_GEMM_ONEDNN && items > 0)
        return attn__dnnl_acquire(call, P, c);
#else
    (void)c; (void)items; (void)call;
#endif
    P->dnnl = NULL;
    return ATTN_OK;
}
ATTN__PRIVATE attn_status attn__gemm_end(attn__prefill_plan *P, attn__gemm_call *call) {
#ifdef ATTN_USE_ONEDNN
    if (P->dnnl) return attn__dnnl_release(call, P);
#else
    (void)P; (void)call;
#endif
    return ATTN_OK;
}

/* Every thread's packed value tiles start empty: the workspace may hold another call's. */
ATTN__PRIVATE void attn__value_caches_reset(const attn__prefill_plan *P, int threads) {
    attn__prefill_scratch sc;
    if (P->value_tiles == 0) return;
    for (int t = 0; t < threads; t++) {
        attn__prefill_scratch_layout(P->rows_cap, P->D, P->Dp, P->value_tiles, P->key_rows,
                                     P->scratch + (size_t)t * P->scratch_bytes, &sc);
        sc.vcache->seq = -1;
        sc.vcache->tiles = 0;
    }
}

/* Runs every item of a prefill plan on the call's engine. */
ATTN__PRIVATE attn_status attn__prefill_execute(const attn__call *c, attn__prefill_plan *P,
                                                int64_t items) {
    attn__prefill_run run;
    attn__gemm_call call;
    ATTN__TRY(attn__gemm_begin(c, P, items, &call));
    attn__value_caches_reset(P, c->threads);
    run.plan = P; run.k = c->k;
    attn__run_items(c, (int)items, attn__prefill_task, &run);
    return attn__gemm_end(P, &call);
}

ATTNDEF size_t attn_sdpa_workspace_size(const attn_params *params, const attn_exec *exec,
                                        const int32_t *cu_seqlens_q, const int32_t *cu_seqlens_k,
                                        int num_seqs) {
    attn__call c;
    (void)cu_seqlens_q;
    if (attn_params_check(params) != ATTN_OK || num_seqs < 0) return 0;
    if (exec && exec->num_threads < 0) return 0;
    attn__call_of(exec, 0, &c);
    int64_t longest = attn__longest(cu_seqlens_k, NULL, num_seqs);
    int tiles = attn__value_cache_tiles(&c, params->head_size, longest);
    return attn__prefill_ws_layout(&c, params, num_seqs, tiles, NULL, NULL);
}

/* The arguments of one kernel call, as an entry point was given them (params already checked):
   queries and outputs, and keys and values either as rows (cache NULL: k and v, sequence n's at
   rows [k_start[n], k_start[n+1])) or in the paged cache (sequence n's seq_lens[n] keys through
   row n of tables). Prefill reads q_start and causal, decode version. */
typedef struct attn__args {
    const attn_params *params;
    attn_rows q, out, k, v;
    const attn_kv_cache *cache;
    const int32_t *tables; int max_blocks;
    const int32_t *q_start, *k_start, *seq_lens;
    int num_seqs, causal;
    attn_paged_version version;   /* V1 or V2 */
    float *lse;
} attn__args;

/* Multiply-adds of Lq queries over Lk keys, Q.K and P.V, per head dim: the pairs a query sees
   (bottom-right causal: Lk - Lq + i + 1 for query i; a window caps each at W). An estimate for
   the threading driver (attn__run_threads), not an exact count. */
ATTN__PRIVATE int64_t attn__pairs_work(int64_t Lq, int64_t Lk, int causal, int window) {
    int64_t pairs = Lq * Lk;
    if (causal && Lq <= Lk) pairs -= Lq * (Lq - 1) / 2;
    if (window > 0) pairs = ATTN__MIN(pairs, Lq * (int64_t)window);
    return 2 * pairs;
}

/* The estimated multiply-adds of a checked call: prefill (q_start set) or decode (one query a
   sequence), over rows or the cache. */
ATTN__PRIVATE int64_t attn__args_work(const attn__args *a) {
    const attn_params *p = a->params;
    int64_t work = 0;
    for (int n = 0; n < a->num_seqs; n++) {
        int64_t Lq = a->q_start ? a->q_start[n + 1] - a->q_start[n] : 1;
        int64_t Lk = a->cache ? a->seq_lens[n] : a->k_start[n + 1] - a->k_start[n];
        work += attn__pairs_work(Lq, Lk, a->q_start ? a->causal : 1, p->sliding_window);
    }
    return work * p->num_heads * p->head_size;
}

/* The cache checks, with the paged cache below. */
ATTN__PRIVATE attn_status attn__cache_matches(const attn_params *p, const attn_kv_cache *c);
ATTN__PRIVATE attn_status attn__block_tables_check(const attn_kv_cache *c, const int32_t *tables,
                                                   int max_blocks, const int32_t *seq_lens,
                                                   int num_seqs);

/* Checks a prefill's arguments, in the order the entry points have always checked them. */
ATTN__PRIVATE attn_status attn__prefill_check(const attn__args *a) {
    const attn_params *p = a->params;
    int64_t width = (int64_t)p->num_heads * p->head_size;
    int64_t kv_width = (int64_t)p->num_kv_heads * p->head_size;
    if (a->cache) ATTN__TRY(attn__cache_matches(p, a->cache));
    ATTN__CHECK(a->num_seqs >= 0, ATTN_ERR_INVALID_ARG);
    ATTN__TRY(attn__offsets_check(a->q_start, a->num_seqs));
    if (a->cache)
        ATTN__TRY(attn__block_tables_check(a->cache, a->tables, a->max_blocks, a->seq_lens,
                                           a->num_seqs));
    else
        ATTN__TRY(attn__offsets_check(a->k_start, a->num_seqs));
    ATTN__TRY(attn__rows_check(a->q, width, a->q_start[a->num_seqs]));
    ATTN__TRY(attn__rows_check(a->out, width, a->q_start[a->num_seqs]));
    if (!a->cache) {
        ATTN__TRY(attn__rows_check(a->k, kv_width, a->k_start[a->num_seqs]));
        ATTN__TRY(attn__rows_check(a->v, kv_width, a->k_start[a->num_seqs]));
        ATTN__CHECK(a->k.dtype == a->v.dtype, ATTN_ERR_INVALID_ARG);
    }
    return ATTN_OK;
}

/* Fills a prefill plan, its workspace already laid out (attn__prefill_ws_layout), from checked
   arguments; *items: its work items. */
ATTN__PRIVATE attn_status attn__prefill_plan_fill(attn__prefill_plan *P, const attn__call *c,
                                                  const attn__args *a, int64_t *items) {
    const attn_params *p = a->params;
    int64_t width = (int64_t)p->num_heads * p->head_size;
    int64_t kv_width = (int64_t)p->num_kv_heads * p->head_size;
    *items = attn__prefill_plan_init(P, p, a->q_start, a->num_seqs, a->causal);
    ATTN__CHECK(*items >= 0, ATTN_ERR_INVALID_ARG);
    P->q = (const char *)a->q.data; P->q_dtype = a->q.dtype;
    P->q_stride = a->q.stride ? a->q.stride : width;
    P->out = (char *)a->out.data; P->out_dtype = a->out.dtype;
    P->out_stride = a->out.stride ? a->out.stride : width;
    P->lse = a->lse;
    if (a->cache) {
        const attn_kv_cache *cache = a->cache;
        P->source = ATTN__KV_PAGED;
        P->key_cache = (const char *)cache->key; P->value_cache = (const char *)cache->value;
        P->kv_dtype = cache->dtype; P->k_scale = cache->k_scale; P->v_scale = cache->v_scale;
        P->block_size = cache->block_size; P->max_blocks = a->max_blocks;
        P->block_tables = a->tables; P->seq_lens = a->seq_lens;
    } else {
        P->source = ATTN__KV_ROWS;
        P->k = (const char *)a->k.data; P->v = (const char *)a->v.data; P->kv_dtype = a->k.dtype;
        P->k_stride = a->k.stride ? a->k.stride : kv_width;
        P->v_stride = a->v.stride ? a->v.stride : kv_width;
        P->k_start = a->k_start;
        P->k_scale = P->v_scale = 1.0f;
    }
    P->kv_row_bytes = attn_dtype_row_bytes(P->kv_dtype, P->D);
    /* the tile kernels: bf16 queries over bf16 keys and values or an fp8 cache (its values are
       exact in bf16; the scales go onto the scores and the outputs), D in whole 32-dim rows */
    P->tiles = c->tiles && P->q_dtype == ATTN_BF16 && P->D % 32 == 0 &&
               (P->kv_dtype == ATTN_BF16 || attn__is_fp8(P->kv_dtype));
    /* the pair kernels where they pay (beside the tiles wherever they run, as measured): bf16
       queries, keys and values (a bf16 cache has unit scales), even D */
    P->bf16_pairs = (P->tiles ? c->dot2 : c->pairs) && P->q_dtype == ATTN_BF16 &&
                    P->kv_dtype == ATTN_BF16 && P->D % 2 == 0;
    return ATTN_OK;
}

/* Lays out the workspace of a prefill with checked arguments, checks its size, and fills the
   plan (attn_sdpa, attn_paged_prefill). */
ATTN__PRIVATE attn_status attn__plan_prefill(attn__prefill_plan *P, const attn__call *c,
                                             const attn__args *a, int value_tiles, char *ws,
                                             size_t ws_bytes, int64_t *items) {
    memset(P, 0, sizeof *P);
    size_t need = attn__prefill_ws_layout(c, a->params, a->num_seqs, value_tiles, ws, P);
    ATTN__CHECK(ws != NULL && ws_bytes >= need, ATTN_ERR_WORKSPACE_TOO_SMALL);
    return attn__prefill_plan_fill(P, c, a, items);
}

ATTNDEF attn_status attn_sdpa(const attn_params *params, const attn_exec *exec, attn_rows q,
                              attn_rows k, attn_rows v, attn_rows out,
                              const int32_t *cu_seqlens_q, const int32_t *cu_seqlens_k,
                              int num_seqs, int causal, float *lse, void *ws, size_t ws_bytes) {
    attn__call c;
    attn__args a;
    attn__prefill_plan P;
    int64_t items;
    ATTN__TRY(attn_params_check(params));
    ATTN__TRY(attn__call_resolve(exec, 0, &c));
    memset(&a, 0, sizeof a);
    a.params = params; a.q = q; a.out = out; a.k = k; a.v = v;
    a.q_start = cu_seqlens_q; a.k_start = cu_seqlens_k; a.num_seqs = num_seqs;
    a.causal = causal; a.lse = lse;
    ATTN__TRY(attn__prefill_check(&a));
    int64_t longest = attn__longest(cu_seqlens_k, NULL, num_seqs);
    int tiles = attn__value_cache_tiles(&c, params->head_size, longest);
    ATTN__TRY(attn__plan_prefill(&P, &c, &a, tiles, (char *)ws, ws_bytes, &items));
    c.work = attn__args_work(&a);
    return attn__prefill_execute(&c, &P, items);
}

/* ---------------------------------------------------------------------------------------------
   [N] Paged KV cache: sizes, layout, write, swap/copy. */

/* *out = a * b; 0 when it overflows a size_t. */
ATTN__PRIVATE int attn__mul_size(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > ATTN__SIZE_MAX / a) return 0;
    *out = a * b;
    return 1;
}

/* Bytes of one block of the key (or the value) array, or 0 for an invalid shape or overflow. */
ATTN__PRIVATE size_t attn__kv_block_half_bytes(int block_size, int num_kv_heads, int head_size,
                                               attn_dtype dtype) {
    size_t row = attn_dtype_row_bytes(dtype, head_size), n;
    if (!row || block_size < 1 || num_kv_heads < 1 || head_size < 1 ||
        head_size > ATTN_MAX_HEAD_SIZE)
        return 0;
    if (!attn__mul_size((size_t)block_size, (size_t)num_kv_heads, &n)) return 0;
    if (!attn__mul_size(n, row, &n)) return 0;
    return n;
}

/* Bytes of one whole key (or value) array, or 0. Kept below SIZE_MAX/2 minus slack so that the
   total of attn_kv_cache_bytes cannot wrap. */
ATTN__PRIVATE size_t attn__kv_array_bytes(int num_blocks, int block_size, int num_kv_heads,
                                          int head_size, attn_dtype dtype) {
    size_t half = attn__kv_block_half_bytes(block_size, num_kv_heads, head_size, dtype), n;
    if (!half || num_blocks < 1 || !attn__mul_size(half, (size_t)num_blocks, &n)) return 0;
    return n <= (ATTN__SIZE_MAX - 4 * ATTN__ALIGN) / 2 ? n : 0;
}

ATTNDEF size_t attn_kv_cache_bytes(int num_blocks, int block_size, int num_kv_heads, int head_size,
                                   attn_dtype dtype) {
    size_t n = attn__kv_array_bytes(num_blocks, block_size, num_kv_heads, head_size, dtype);
    return n ? ATTN__ALIGN + 2 * attn__align_up(n) : 0;
}

/* A valid scale as given to init: finite, >= 0 (0 = 1), and 1 unless the dtype is fp8. */
ATTN__PRIVATE int attn__kv_scale_ok(attn_dtype dtype, float scale) {
    if (!isfinite(scale) || scale < 0.0f) return 0;
    return attn__is_fp8(dtype) || scale == 0.0f || scale == 1.0f;
}

ATTNDEF attn_status attn_kv_cache_init(attn_kv_cache *cache, int num_blocks, int block_size,
                                       int num_kv_heads, int head_size, attn_dtype dtype,
                                       float k_scale, float v_scale, void *mem, size_t bytes) {
    size_t n = attn__kv_array_bytes(num_blocks, block_size, num_kv_heads, head_size, dtype);
    ATTN__CHECK(cache != NULL && mem != NULL && n != 0, ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(attn__kv_scale_ok(dtype, k_scale) && attn__kv_scale_ok(dtype, v_scale),
                ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(bytes >= ATTN__ALIGN + 2 * attn__align_up(n), ATTN_ERR_WORKSPACE_TOO_SMALL);
    char *base = (char *)(((uintptr_t)mem + ATTN__ALIGN - 1) & ~(uintptr_t)(ATTN__ALIGN - 1));
    cache->key = base;
    cache->value = base + attn__align_up(n);
    cache->num_blocks = num_blocks;
    cache->block_size = block_size;
    cache->num_kv_heads = num_kv_heads;
    cache->head_size = head_size;
    cache->dtype = dtype;
    cache->k_scale = k_scale == 0.0f ? 1.0f : k_scale;
    cache->v_scale = v_scale == 0.0f ? 1.0f : v_scale;
    return ATTN_OK;
}

/* The one check of a cache struct, made by every function that takes one: the rule of the
   attn_kv_cache comment (init's rules, with scales already resolved: finite and > 0, exactly 1
   unless fp8). */
ATTN__PRIVATE int attn__kv_cache_ok(const attn_kv_cache *c) {
    return c != NULL && c->key != NULL && c->value != NULL &&
           attn__kv_array_bytes(c->num_blocks, c->block_size, c->num_kv_heads, c->head_size,
                                c->dtype) != 0 &&
           c->k_scale > 0.0f && c->v_scale > 0.0f && attn__kv_scale_ok(c->dtype, c->k_scale) &&
           attn__kv_scale_ok(c->dtype, c->v_scale);
}

ATTNDEF void attn_kv_cache_shape(const attn_kv_cache *cache, int64_t shape[3]) {
    if (!shape) return;
    shape[0] = cache ? 2 : 0;
    shape[1] = cache ? cache->num_blocks : 0;
    shape[2] = cache ? (int64_t)cache->block_size * cache->num_kv_heads *
                       (attn__is_int(cache->dtype)
                                ? (int64_t)attn_dtype_row_bytes(cache->dtype, cache->head_size)
                                : cache->head_size) : 0;
}

/* ---------------------------------------------------------------------------------------------
   [N.1] Sizing helpers. */
ATTNDEF size_t attn_kv_block_bytes(int num_layers, int block_size, int num_kv_heads,
                                   int head_size, attn_dtype dtype) {
    size_t half = attn__kv_block_half_bytes(block_size, num_kv_heads, head_size, dtype), n;
    if (!half || num_layers < 1 || !attn__mul_size(half, 2, &n) ||
        !attn__mul_size(n, (size_t)num_layers, &n))
        return 0;
    return n;
}

ATTNDEF int attn_kv_blocks_for_bytes(size_t bytes, int num_layers, int block_size,
                                     int num_kv_heads, int head_size, attn_dtype dtype) {
    size_t half = attn__kv_block_half_bytes(block_size, num_kv_heads, head_size, dtype);
    if (!half || num_layers < 1) return 0;
    /* Per layer: ALIGN + 2*align_up(nb*half) <= bytes/num_layers. With q the room for one array
       rounded down to the alignment, align_up(x) <= q exactly when x <= q, so nb = q / half.
       q is also kept within the largest array attn_kv_cache_bytes accepts. */
    size_t per_layer = bytes / (size_t)num_layers;
    if (per_layer < ATTN__ALIGN) return 0;
    size_t q = ATTN__MIN((per_layer - ATTN__ALIGN) / 2, (ATTN__SIZE_MAX - 4 * ATTN__ALIGN) / 2);
    size_t nb = q / ATTN__ALIGN * ATTN__ALIGN / half;
    return nb > ATTN__INT_MAX ? ATTN__INT_MAX : (int)nb;
}

ATTNDEF int64_t attn_kv_max_tokens(size_t bytes, int num_layers, int block_size, int num_kv_heads,
                                   int head_size, attn_dtype dtype) {
    int nb =
            attn_kv_blocks_for_bytes(bytes, num_layers, block_size, num_kv_heads, head_size, dtype);
    return (int64_t)nb * block_size;  /* < 2^62: no overflow */
}

ATTNDEF int64_t attn_kv_blocks_for_tokens(int64_t tokens, int block_size) {
    if (tokens <= 0 || block_size < 1) return 0;
    return tokens / block_size + (tokens % block_size != 0);  /* no tokens + bs - 1 overflow */
}

ATTNDEF int64_t attn_kv_tokens_for_blocks(int64_t blocks, int block_size) {
    if (blocks <= 0 || block_size < 1 || blocks > ATTN__INT64_MAX / block_size) return 0;
    return blocks * block_size;
}

/* ---------------------------------------------------------------------------------------------
   [N.2] attn_write_kv (reshape_and_cache). */
typedef struct attn__write_kv_ctx {
    const attn_kv_cache *cache;
    const attn__kernels *kern;
    attn_rows key, value;          /* strides resolved (never 0) */
    const int64_t *slots;
    int num_tokens, num_items;
} attn__write_kv_ctx;

/* One head row of D elements into the cache dtype. Same dtype: a byte copy, so f32 -> f32 is
   bit-exact (NaN payloads too). fp8 divides by the scale first (stored = enc(x / scale)). */
ATTN__PRIVATE void attn__write_kv_row(const attn__kernels *kern, void *dst, attn_dtype cdt,
                                      float scale, const void *src, attn_dtype sdt, int D) {
    float buf[ATTN_MAX_HEAD_SIZE];
    const float *x = (const float *)src;
    if (sdt == cdt) {
        memcpy(dst, src, (size_t)D * attn_dtype_size(cdt));
        return;
    }
    if (sdt != ATTN_F32) {
        kern->to_f32(buf, src, sdt, D, 1.0f);
        x = buf;
    }
    if (attn__is_fp8(cdt)) {
        for (int d = 0; d < D; d++) attn__store_f32(dst, cdt, (size_t)d, x[d] / scale);
    } else {
        kern->from_f32(dst, cdt, x, D);
    }
}

/* The work item that owns block b: Fibonacci hashing (the high bits of b * 2^32/phi, scaled to
   n), which spreads consecutive and strided block ids evenly where b % n would not (e.g. the
   even ids of one of two sequences that allocated alternately). */
ATTN__PRIVATE int attn__block_owner(int64_t b, int n) {
    uint32_t h = (uint32_t)b * 2654435769u;
    return (int)(((uint64_t)h * (uint32_t)n) >> 32);
}

/* Item k writes, in token order, the tokens whose block it owns. Every write to a block therefore
   comes from one item, so duplicate slots resolve to the last token no matter how many threads
   run the items or in which order: the result equals the serial loop's. */
ATTN__PRIVATE void attn__write_kv_task(void *ctx, int item, int thread) {
    const attn__write_kv_ctx *w = (const attn__write_kv_ctx *)ctx;
    const attn_kv_cache *c = w->cache;
    int Hk = c->num_kv_heads, D = c->head_size, bs = c->block_size;
    size_t row = attn_dtype_row_bytes(c->dtype, D);
    size_t kesz = attn_dtype_size(w->key.dtype), vesz = attn_dtype_size(w->value.dtype);
    (void)thread;
    for (int t = 0; t < w->num_tokens; t++) {
        int64_t s = w->slots[t];
        if (s < 0) continue;  /* -1 = padding; never derive a block from it */
        int64_t blk = s / bs, off = s % bs;
        if (attn__block_owner(blk, w->num_items) != item) continue;
        for (int h = 0; h < Hk; h++) {
            size_t at = (size_t)((blk * Hk + h) * bs + off) * row;
            size_t kat = (size_t)(t * w->key.stride + (int64_t)h * D) * kesz;
            size_t vat = (size_t)(t * w->value.stride + (int64_t)h * D) * vesz;
            attn__write_kv_row(w->kern, (char *)c->key + at, c->dtype, c->k_scale,
                               (const char *)w->key.data + kat, w->key.dtype, D);
            attn__write_kv_row(w->kern, (char *)c->value + at, c->dtype, c->v_scale,
                               (const char *)w->value.data + vat, w->value.dtype, D);
        }
    }
}

/* attn_write_kv's checks of everything but exec and the slots' range. */
ATTN__PRIVATE attn_status attn__write_kv_check(const attn_kv_cache *cache, attn_rows key,
                                               attn_rows value, const int64_t *slot_mapping,
                                               int num_tokens) {
    ATTN__CHECK(attn__kv_cache_ok(cache), ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(num_tokens >= 0 && (num_tokens == 0 || slot_mapping), ATTN_ERR_INVALID_ARG);
    int64_t width = (int64_t)cache->num_kv_heads * cache->head_size;
    ATTN__TRY(attn__rows_check(key, width, num_tokens));
    ATTN__TRY(attn__rows_check(value, width, num_tokens));
    return ATTN_OK;
}

/* Checks the slots' range, then writes (checked arguments; attn_write_kv, attn_forward). */
ATTN__PRIVATE attn_status attn__write_kv(const attn__call *c, attn_kv_cache *cache, attn_rows key,
                                         attn_rows value, const int64_t *slot_mapping,
                                         int num_tokens) {
    attn__write_kv_ctx w;
    int64_t width = (int64_t)cache->num_kv_heads * cache->head_size;
    int64_t num_slots = (int64_t)cache->num_blocks * cache->block_size;
    for (int t = 0; t < num_tokens; t++)
        ATTN__CHECK(slot_mapping[t] >= -1 && slot_mapping[t] < num_slots, ATTN_ERR_OUT_OF_RANGE);
    if (num_tokens == 0) return ATTN_OK;

    w.cache = cache;
    w.kern = c->k;
    w.key = key;
    w.value = value;
    if (!w.key.stride) w.key.stride = width;
    if (!w.value.stride) w.value.stride = width;
    w.slots = slot_mapping;
    w.num_tokens = num_tokens;
    /* One item per thread (each scans the slot list once); the result does not depend on it. */
    w.num_items = ATTN__MAX(1, ATTN__MIN(ATTN__MIN(c->threads, num_tokens), 1024));
    attn__run_items(c, w.num_items, attn__write_kv_task, &w);
    return ATTN_OK;
}

ATTNDEF attn_status attn_write_kv(attn_kv_cache *cache, attn_rows key, attn_rows value,
                                  const int64_t *slot_mapping, int num_tokens,
                                  const attn_exec *exec) {
    attn__call c;
    ATTN__TRY(attn__write_kv_check(cache, key, value, slot_mapping, num_tokens));
    ATTN__TRY(attn__call_resolve(exec, 0, &c));
    c.work = (int64_t)num_tokens * cache->num_kv_heads * cache->head_size * 2;  /* copies */
    return attn__write_kv(&c, cache, key, value, slot_mapping, num_tokens);
}

/* ---------------------------------------------------------------------------------------------
   [N.3] Swap and copy of whole blocks. */

/* Block ids per pass of the conflict check: two 4 KiB bitmaps on the stack. */
#define ATTN__ID_WINDOW 32768

/* 1 when pairs (already range-checked) conflict: a destination twice, or - in one cache - a
   block that is both a source and a destination. Destinations are scanned in windows of
   ATTN__ID_WINDOW ids, jumping to the next used window, so no allocation is needed and the cost
   is O(n * windows touched). */
ATTN__PRIVATE int attn__pairs_conflict(const int64_t *pairs, int n, int same_cache) {
    uint32_t dst_bits[ATTN__ID_WINDOW / 32], src_bits[ATTN__ID_WINDOW / 32];
    int64_t base = ATTN__INT64_MAX;
    int i;
    for (i = 0; i < n; i++) base = ATTN__MIN(base, pairs[2 * i + 1]);
    while (base != ATTN__INT64_MAX) {
        int64_t next = ATTN__INT64_MAX;
        memset(dst_bits, 0, sizeof dst_bits);
        memset(src_bits, 0, sizeof src_bits);
        for (i = 0; i < n; i++) {
            int64_t d = pairs[2 * i + 1] - base;
            if (d >= ATTN__ID_WINDOW) next = ATTN__MIN(next, pairs[2 * i + 1]);
            if (d < 0 || d >= ATTN__ID_WINDOW) continue;
            if (dst_bits[d >> 5] & (1u << (d & 31))) return 1;
            dst_bits[d >> 5] |= 1u << (d & 31);
        }
        if (same_cache) {
            for (i = 0; i < n; i++) {
                int64_t s = pairs[2 * i] - base;
                if (s >= 0 && s < ATTN__ID_WINDOW) src_bits[s >> 5] |= 1u << (s & 31);
            }
            for (i = 0; i < ATTN__ID_WINDOW / 32; i++)
                if (dst_bits[i] & src_bits[i]) return 1;
        }
        base = next;
    }
    return 0;
}

/* Range, then conflicts: ATTN_ERR_OUT_OF_RANGE before ATTN_ERR_INVALID_ARG for the pair rules. */
ATTN__PRIVATE attn_status attn__pairs_check(const int64_t *pairs, int n, int64_t src_blocks,
                                            int64_t dst_blocks, int same_cache) {
    ATTN__CHECK(n >= 0 && (n == 0 || pairs != NULL), ATTN_ERR_INVALID_ARG);
    for (int i = 0; i < n; i++) {
        int64_t a = pairs[2 * i], b = pairs[2 * i + 1];
        ATTN__CHECK(a >= 0 && a < src_blocks && b >= 0 && b < dst_blocks, ATTN_ERR_OUT_OF_RANGE);
    }
    ATTN__CHECK(!attn__pairs_conflict(pairs, n, same_cache), ATTN_ERR_INVALID_ARG);
    return ATTN_OK;
}

/* Block a of src to block b of dst, key and value (validated: never overlapping). */
ATTN__PRIVATE void attn__copy_block(const attn_kv_cache *src, attn_kv_cache *dst, int64_t a,
                                    int64_t b) {
    size_t bb = attn__kv_block_half_bytes(src->block_size, src->num_kv_heads, src->head_size,
                                          src->dtype);
    memcpy((char *)dst->key + (size_t)b * bb, (const char *)src->key + (size_t)a * bb, bb);
    memcpy((char *)dst->value + (size_t)b * bb, (const char *)src->value + (size_t)a * bb, bb);
}

ATTNDEF attn_status attn_swap_blocks(const attn_kv_cache *src, attn_kv_cache *dst,
                                     const int64_t *pairs, int n) {
    ATTN__CHECK(attn__kv_cache_ok(src) && attn__kv_cache_ok(dst), ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(src->block_size == dst->block_size && src->num_kv_heads == dst->num_kv_heads &&
                    src->head_size == dst->head_size && src->dtype == dst->dtype,
                ATTN_ERR_INVALID_ARG);
    /* a byte copy between different scales would silently change the values */
    ATTN__CHECK(src->k_scale == dst->k_scale && src->v_scale == dst->v_scale, ATTN_ERR_INVALID_ARG);
    int same = src == dst || src->key == dst->key || src->value == dst->value;
    ATTN__TRY(attn__pairs_check(pairs, n, src->num_blocks, dst->num_blocks, same));
    for (int i = 0; i < n; i++) attn__copy_block(src, dst, pairs[2 * i], pairs[2 * i + 1]);
    return ATTN_OK;
}

ATTNDEF attn_status attn_copy_blocks(attn_kv_cache *const *caches, int num_layers,
                                     const int64_t *pairs, int n) {
    ATTN__CHECK(num_layers >= 0 && (num_layers == 0 || caches != NULL), ATTN_ERR_INVALID_ARG);
    for (int l = 0; l < num_layers; l++) {
        ATTN__CHECK(attn__kv_cache_ok(caches[l]), ATTN_ERR_INVALID_ARG);
        ATTN__CHECK(caches[l]->num_blocks == caches[0]->num_blocks, ATTN_ERR_INVALID_ARG);
    }
    int64_t nb = num_layers ? caches[0]->num_blocks : ATTN__INT64_MAX;
    ATTN__TRY(attn__pairs_check(pairs, n, nb, nb, 1));
    for (int l = 0; l < num_layers; l++)
        for (int i = 0; i < n; i++)
            attn__copy_block(caches[l], caches[l], pairs[2 * i], pairs[2 * i + 1]);
    return ATTN_OK;
}

/* ---------------------------------------------------------------------------------------------
   [O] Block pool and sequences. Every mutating function validates everything first and then
   commits, so an error leaves the pool and the sequence byte for byte as they were. */
ATTNDEF size_t attn_block_pool_bytes(int num_blocks) {
    if (num_blocks < 1 || (size_t)num_blocks > (ATTN__SIZE_MAX - 4 * ATTN__ALIGN) / 8) return 0;
    return ATTN__ALIGN + 2 * attn__align_up(sizeof(int32_t) * (size_t)num_blocks);
}

ATTNDEF attn_status attn_block_pool_init(attn_block_pool *pool, int num_blocks, int block_size,
                                         void *mem, size_t bytes) {
    size_t need = attn_block_pool_bytes(num_blocks);
    ATTN__CHECK(pool != NULL && mem != NULL && need != 0 && block_size >= 1, ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(bytes >= need, ATTN_ERR_WORKSPACE_TOO_SMALL);
    char *base = (char *)(((uintptr_t)mem + ATTN__ALIGN - 1) & ~(uintptr_t)(ATTN__ALIGN - 1));
    pool->refcount = (int32_t *)(void *)base;
    pool->free_ids =
            (int32_t *)(void *)(base + attn__align_up(sizeof(int32_t) * (size_t)num_blocks));
    pool->num_blocks = num_blocks;
    pool->block_size = block_size;
    pool->num_free = num_blocks;
    pool->error_msg = NULL;
    pool->error_msg_bytes = 0;
    memset(&pool->cache, 0, sizeof pool->cache);  /* no prefix cache until one is attached */
    for (int i = 0; i < num_blocks; i++) {
        pool->refcount[i] = 0;
        pool->free_ids[i] = num_blocks - 1 - i;  /* popped from the top: 0 comes out first */
    }
    return ATTN_OK;
}

/* Blocks an allocation can take: the free stack's, then the evictable cached ones. */
ATTN__PRIVATE int attn__pool_available(const attn_block_pool *p) {
    return p->num_free + p->cache.num_evictable;
}

ATTNDEF int attn_block_pool_free_count(const attn_block_pool *pool) {
    return pool ? attn__pool_available(pool) : 0;
}

ATTNDEF int attn_block_pool_used_count(const attn_block_pool *pool) {
    return pool ? pool->num_blocks - attn__pool_available(pool) : 0;
}

/* The prefix cache's fields agree with each other and the pool's (or there is none). */
ATTN__PRIVATE int attn__cache_ok(const attn_block_pool *p) {
    const attn_prefix_cache *c = &p->cache;
    if (c->num_buckets == 0) return c->num_cached == 0 && c->num_evictable == 0;
    return c->hash && c->serial && c->parent && c->ns && c->last_use && c->tokens && c->bucket &&
           c->next && c->lru_prev && c->lru_next && c->num_buckets >= p->num_blocks &&
           (c->num_buckets & (c->num_buckets - 1)) == 0 && c->num_evictable >= 0 &&
           c->num_evictable <= c->num_cached && c->num_cached <= p->num_blocks &&
           p->num_free <= p->num_blocks - c->num_evictable;
}

ATTN__PRIVATE int attn__pool_ok(const attn_block_pool *p) {
    return p != NULL && p->refcount != NULL && p->free_ids != NULL && p->num_blocks >= 1 &&
           p->block_size >= 1 && p->num_free >= 0 && p->num_free <= p->num_blocks &&
           attn__cache_ok(p);
}

/* The sequence's own fields agree with each other and with the pool's block size. */
ATTN__PRIVATE int attn__seq_ok(const attn_block_pool *p, const attn_seq *s) {
    return s != NULL && s->max_blocks >= 0 && (s->max_blocks == 0 || s->block_table != NULL) &&
           s->num_blocks >= 0 && s->num_blocks <= s->max_blocks && s->len >= 0 &&
           s->num_blocks == attn_kv_blocks_for_tokens(s->len, p->block_size);
}

/* Entries [from, to) of the table are ids of blocks that are in use. */
ATTN__PRIVATE int attn__seq_ids_live(const attn_block_pool *p, const attn_seq *s, int from,
                                     int to) {
    for (int i = from; i < to; i++) {
        int32_t b = s->block_table[i];
        if (b < 0 || b >= p->num_blocks || p->refcount[b] <= 0) return 0;
    }
    return 1;
}

/* ---- the prefix cache's tables: hash buckets (chained through next) and the LRU list ---- */

/* A 64-bit multiply-xorshift mix (each step a bijection). */
ATTN__PRIVATE ATTN__INLINE uint64_t attn__mix64(uint64_t x) {
    x ^= x >> 32;
    x *= 0x9e3779b97f4a7c15ull;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    return x ^ (x >> 32);
}

/* H(h(parent), the block's tokens, ns), kept to the cache's hash_bits low bits. */
ATTN__PRIVATE uint64_t attn__block_hash(const attn_prefix_cache *c, uint64_t parent_hash,
                                        const int32_t *tok, int bs, uint64_t ns) {
    uint64_t h = attn__mix64(parent_hash ^ attn__mix64(ns ^ 0x243f6a8885a308d3ull));
    for (int i = 0; i < bs; i++) h = attn__mix64(h + (uint32_t)tok[i]);
    if (c->hash_bits >= 64) return h;
    return c->hash_bits <= 0 ? 0 : h & ((1ull << c->hash_bits) - 1);
}

/* The cached block whose namespace, predecessor entry and tokens are these (the hash only
   narrows the search); -1 when there is none. */
ATTN__PRIVATE int32_t attn__cache_find(const attn_block_pool *p, uint64_t h, uint64_t parent,
                                       uint64_t ns, const int32_t *tok) {
    const attn_prefix_cache *c = &p->cache;
    size_t bs = (size_t)p->block_size;
    for (int32_t b = c->bucket[h & (uint64_t)(c->num_buckets - 1)]; b >= 0; b = c->next[b])
        if (c->hash[b] == h && c->parent[b] == parent && c->ns[b] == ns &&
            !memcmp(c->tokens + (size_t)b * bs, tok, sizeof(int32_t) * bs))
            return b;
    return -1;
}

ATTN__PRIVATE void attn__cache_enter(attn_block_pool *p, int32_t b, uint64_t h, uint64_t parent,
                                     uint64_t ns, const int32_t *tok) {
    attn_prefix_cache *c = &p->cache;
    size_t bs = (size_t)p->block_size;
    int32_t *head = &c->bucket[h & (uint64_t)(c->num_buckets - 1)];
    c->hash[b] = h; c->parent[b] = parent; c->ns[b] = ns; c->serial[b] = ++c->clock;
    memcpy(c->tokens + (size_t)b * bs, tok, sizeof(int32_t) * bs);
    c->next[b] = *head;
    *head = b;
    c->num_cached++;
    c->inserts++;
}

/* Takes a held or evicted block out of the hash buckets (nothing when it is not cached). */
ATTN__PRIVATE void attn__cache_leave(attn_block_pool *p, int32_t b) {
    attn_prefix_cache *c = &p->cache;
    if (c->num_buckets == 0 || c->serial[b] == 0) return;
    int32_t *at = &c->bucket[c->hash[b] & (uint64_t)(c->num_buckets - 1)];
    while (*at != b) at = &c->next[*at];
    *at = c->next[b];
    c->serial[b] = 0;
    c->num_cached--;
}

ATTN__PRIVATE void attn__lru_push(attn_prefix_cache *c, int32_t b) {
    c->last_use[b] = ++c->clock;
    c->lru_prev[b] = c->lru_tail; c->lru_next[b] = -1;
    if (c->lru_tail >= 0) c->lru_next[c->lru_tail] = b; else c->lru_head = b;
    c->lru_tail = b;
    c->num_evictable++;
}

ATTN__PRIVATE void attn__lru_unlink(attn_prefix_cache *c, int32_t b) {
    if (c->lru_prev[b] >= 0) c->lru_next[c->lru_prev[b]] = c->lru_next[b];
    else c->lru_head = c->lru_next[b];
    if (c->lru_next[b] >= 0) c->lru_prev[c->lru_next[b]] = c->lru_prev[b];
    else c->lru_tail = c->lru_prev[b];
    c->num_evictable--;
}

/* A block for a new allocation, refcount 1: from the free stack, else the least recently used
   evictable cached block (it leaves the cache). The caller has checked attn__pool_available. */
ATTN__PRIVATE int32_t attn__pool_pop(attn_block_pool *p) {
    int32_t b;
    if (p->num_free > 0) {
        b = p->free_ids[--p->num_free];
    } else {
        b = p->cache.lru_head;
        attn__lru_unlink(&p->cache, b);
        attn__cache_leave(p, b);
        p->cache.evictions++;
    }
    p->refcount[b] = 1;
    return b;
}

/* One reference less; at 0 the block returns to the free stack, or waits in the LRU list when
   it is cached. A count already at 0 (a table that lists a block twice) is left alone, so a
   block is never pushed twice. */
ATTN__PRIVATE void attn__pool_drop(attn_block_pool *p, int32_t b) {
    if (p->refcount[b] > 0 && --p->refcount[b] == 0) {
        if (p->cache.num_buckets > 0 && p->cache.serial[b] != 0) attn__lru_push(&p->cache, b);
        else p->free_ids[p->num_free++] = b;
    }
}

/* The sequence's prefix-cache fields are in range (its chain covers full blocks only). */
ATTN__PRIVATE int attn__seq_cache_ok(const attn_block_pool *p, const attn_seq *s) {
    return s->cache_blocks >= -1 && s->cache_blocks <= s->len / p->block_size;
}

/* Resets the sequence's chain to its first cache_blocks blocks: the chain then continues
   through the cached entry of its last kept block, or breaks (-1) when that block is not
   cached (the sequence enters no more blocks). */
ATTN__PRIVATE void attn__seq_chain_cut(const attn_block_pool *p, attn_seq *s, int keep) {
    if (s->cache_blocks >= 0 && s->cache_blocks <= keep) return;
    s->cache_blocks = keep; s->cache_hash = 0; s->cache_parent = 0;
    if (keep == 0) return;
    int32_t b = s->block_table[keep - 1];
    if (p->cache.num_buckets > 0 && p->cache.serial[b] != 0) {
        s->cache_hash = p->cache.hash[b]; s->cache_parent = p->cache.serial[b];
    } else {
        s->cache_blocks = -1;
    }
}

/* Enters the sequence's newly filled blocks into the cache (after an append). A block whose
   content is cached already is not entered again: the chain continues through that entry. */
ATTN__PRIVATE void attn__seq_enter_full(attn_block_pool *p, attn_seq *s) {
    attn_prefix_cache *c = &p->cache;
    int bs = p->block_size, full = (int)(s->len / bs);
    if (c->num_buckets == 0 || s->tokens == NULL || s->cache_blocks < 0) return;
    while (s->cache_blocks < full) {
        int i = s->cache_blocks;
        int32_t b = s->block_table[i];
        const int32_t *tok = s->tokens + (size_t)i * (size_t)bs;
        uint64_t h = attn__block_hash(c, s->cache_hash, tok, bs, s->cache_ns);
        int32_t same = attn__cache_find(p, h, s->cache_parent, s->cache_ns, tok);
        if (same < 0) {
            if (c->serial[b] != 0) { s->cache_blocks = -1; return; }  /* not expected: stop */
            attn__cache_enter(p, b, h, s->cache_parent, s->cache_ns, tok);
            same = b;
        }
        s->cache_hash = h; s->cache_parent = c->serial[same];
        s->cache_blocks++;
    }
}

ATTNDEF attn_status attn_seq_init(attn_seq *seq, int32_t *block_table, int max_blocks) {
    ATTN__CHECK(seq != NULL && max_blocks >= 0 && (max_blocks == 0 || block_table),
                ATTN_ERR_INVALID_ARG);
    seq->block_table = block_table;
    seq->max_blocks = max_blocks;
    seq->num_blocks = 0;
    seq->len = 0;
    seq->tokens = NULL; seq->cache_ns = 0;
    seq->cache_blocks = 0; seq->cache_hash = 0; seq->cache_parent = 0;
    return ATTN_OK;
}

/* The pool's message buffer (pool->error_msg), cleared: where the sequence functions say which
   check failed. */
ATTN__PRIVATE attn__msg attn__pool_msg(attn_block_pool *pool) {
    attn__msg m = {NULL, 0};
    if (pool && pool->error_msg && pool->error_msg_bytes) {
        m.buf = pool->error_msg; m.bytes = pool->error_msg_bytes;
        m.buf[0] = '\0';
    }
    return m;
}

/* The pool and a sequence of it, checked with messages (attn_seq_append, attn_seq_fork). */
ATTN__PRIVATE attn_status attn__pool_seq_check(const attn_block_pool *pool, const attn_seq *seq,
                                               const char *name, const attn__msg *m) {
    ATTN__CHECKF(m, attn__pool_ok(pool), ATTN_ERR_INVALID_ARG,
                 "pool is NULL or not initialised (attn_block_pool_init)");
    ATTN__CHECKF(m, seq != NULL, ATTN_ERR_INVALID_ARG, "%s is NULL", name);
    ATTN__CHECKF(m, attn__seq_ok(pool, seq), ATTN_ERR_INVALID_ARG,
                 "%s is not a valid sequence of this pool (len = %lld, num_blocks = %d, "
                 "max_blocks = %d, block_size = %d)", name, (long long)seq->len, seq->num_blocks,
                 seq->max_blocks, pool->block_size);
    return ATTN_OK;
}

ATTNDEF attn_status attn_seq_append(attn_block_pool *pool, attn_seq *seq, int n_tokens,
                                    int64_t *slots, int64_t cow_pairs[][2], int *n_cow) {
    attn__msg msg = attn__pool_msg(pool), *m = &msg;
    ATTN__TRY(attn__pool_seq_check(pool, seq, "seq", m));
    ATTN__CHECKF(m, attn__seq_cache_ok(pool, seq), ATTN_ERR_INVALID_ARG,
                 "seq->cache_blocks = %d, outside -1 .. seq->len / block_size = %lld",
                 seq->cache_blocks, (long long)(seq->len / pool->block_size));
    ATTN__CHECKF(m, n_tokens >= 0 && (n_tokens == 0 || slots != NULL), ATTN_ERR_INVALID_ARG,
                 "n_tokens = %d%s", n_tokens, n_tokens < 0 ? "" : " with slots NULL");
    int bs = pool->block_size, last = seq->num_blocks - 1;
    /* only a partially filled last block receives new tokens in place */
    int partial = n_tokens > 0 && seq->len % bs != 0;
    ATTN__CHECKF(m, !partial || attn__seq_ids_live(pool, seq, last, last + 1),
                 ATTN_ERR_INVALID_ARG, "seq->block_table[%d] = %d is not a block in use", last,
                 partial ? seq->block_table[last] : 0);
    int cow = partial && pool->refcount[seq->block_table[last]] > 1;
    ATTN__CHECKF(m, !cow || (cow_pairs != NULL && n_cow != NULL), ATTN_ERR_INVALID_ARG,
                 "block %d is shared (refcount %d) so it is copied on write, but %s is NULL",
                 cow ? seq->block_table[last] : 0, cow ? pool->refcount[seq->block_table[last]]
                 : 0, cow_pairs ? "n_cow" : "cow_pairs");
    ATTN__CHECKF(m, seq->len <= ATTN__INT64_MAX - n_tokens, ATTN_ERR_OUT_OF_RANGE,
                 "seq->len = %lld + n_tokens = %d overflows", (long long)seq->len, n_tokens);
    int64_t new_len = seq->len + n_tokens;
    int64_t new_blocks = attn_kv_blocks_for_tokens(new_len, bs);
    ATTN__CHECKF(m, new_blocks <= seq->max_blocks, ATTN_ERR_OUT_OF_RANGE,
                 "%lld tokens need %lld blocks but seq->max_blocks = %d", (long long)new_len,
                 (long long)new_blocks, seq->max_blocks);
    ATTN__CHECKF(m, new_blocks - seq->num_blocks + cow <= attn__pool_available(pool),
                 ATTN_ERR_OUT_OF_BLOCKS,
                 "%lld new blocks needed (copy-on-write included) but the pool has %d free",
                 (long long)(new_blocks - seq->num_blocks + cow), attn__pool_available(pool));

    if (n_cow) *n_cow = 0;
    if (cow) {
        int32_t old = seq->block_table[last], fresh = attn__pool_pop(pool);
        cow_pairs[0][0] = old;
        cow_pairs[0][1] = fresh;
        *n_cow = 1;
        seq->block_table[last] = fresh;
        attn__pool_drop(pool, old);  /* it was shared, so it stays allocated */
    } else if (partial) {
        attn__cache_leave(pool, seq->block_table[last]);  /* written in place */
    }
    while (seq->num_blocks < new_blocks) seq->block_table[seq->num_blocks++] = attn__pool_pop(pool);
    for (int i = 0; i < n_tokens; i++) {
        int64_t p = seq->len + i;
        slots[i] = (int64_t)seq->block_table[p / bs] * bs + p % bs;
    }
    seq->len = new_len;
    attn__seq_enter_full(pool, seq);
    return ATTN_OK;
}

ATTNDEF attn_status attn_seq_fork(attn_block_pool *pool, const attn_seq *parent, attn_seq *child) {
    const attn_status IA = ATTN_ERR_INVALID_ARG;
    attn__msg msg = attn__pool_msg(pool), *m = &msg;
    ATTN__TRY(attn__pool_seq_check(pool, parent, "parent", m));
    ATTN__CHECKF(m, child != NULL && child != parent, IA, "child is %s",
                 child ? "parent" : "NULL");
    ATTN__CHECKF(m, child->len == 0 && child->num_blocks == 0, IA,  /* it would leak them */
                 "child is not empty (len = %lld, num_blocks = %d)", (long long)child->len,
                 child->num_blocks);
    ATTN__CHECKF(m, child->max_blocks >= 0 && (child->max_blocks == 0 || child->block_table), IA,
                 "child->max_blocks = %d with block_table %s", child->max_blocks,
                 child->block_table ? "set" : "NULL");
    ATTN__CHECKF(m, parent->num_blocks == 0 || child->block_table != parent->block_table, IA,
                 "child and parent share one block_table");
    for (int i = 0; i < parent->num_blocks; i++)
        ATTN__CHECKF(m, attn__seq_ids_live(pool, parent, i, i + 1), IA,
                     "parent->block_table[%d] = %d is not a block in use", i,
                     parent->block_table[i]);
    ATTN__CHECKF(m, parent->num_blocks <= child->max_blocks, ATTN_ERR_OUT_OF_RANGE,
                 "parent has %d blocks but child->max_blocks = %d", parent->num_blocks,
                 child->max_blocks);
    for (int i = 0; i < parent->num_blocks; i++)
        ATTN__CHECKF(m, pool->refcount[parent->block_table[i]] < ATTN__INT_MAX,
                     ATTN_ERR_OUT_OF_RANGE, "block %d's refcount would overflow int32",
                     parent->block_table[i]);
    for (int i = 0; i < parent->num_blocks; i++) {
        child->block_table[i] = parent->block_table[i];
        pool->refcount[parent->block_table[i]]++;
    }
    child->num_blocks = parent->num_blocks;
    child->len = parent->len;
    child->cache_ns = parent->cache_ns;  /* the same blocks: the same namespace and chain */
    child->cache_blocks = parent->cache_blocks;
    child->cache_hash = parent->cache_hash;
    child->cache_parent = parent->cache_parent;
    return ATTN_OK;
}

ATTNDEF attn_status attn_seq_truncate(attn_block_pool *pool, attn_seq *seq, int64_t new_len) {
    ATTN__CHECK(attn__pool_ok(pool) && attn__seq_ok(pool, seq), ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(new_len >= 0 && new_len <= seq->len, ATTN_ERR_INVALID_ARG);
    int keep = (int)attn_kv_blocks_for_tokens(new_len, pool->block_size);
    int keep_full = (int)(new_len / pool->block_size);
    ATTN__CHECK(attn__seq_ids_live(pool, seq, keep_full, seq->num_blocks) &&
                attn__seq_cache_ok(pool, seq), ATTN_ERR_INVALID_ARG);
    for (int i = keep_full; i < seq->num_blocks; i++)  /* cut into or dropped: uncached */
        attn__cache_leave(pool, seq->block_table[i]);
    attn__seq_chain_cut(pool, seq, keep_full);
    while (seq->num_blocks > keep) attn__pool_drop(pool, seq->block_table[--seq->num_blocks]);
    seq->len = new_len;
    return ATTN_OK;
}

ATTNDEF void attn_seq_release(attn_block_pool *pool, attn_seq *seq) {
    if (!attn__pool_ok(pool) || !attn__seq_ok(pool, seq) ||
        !attn__seq_ids_live(pool, seq, 0, seq->num_blocks)) {
        (void)ATTN__FAIL(ATTN_ERR_INVALID_ARG);  /* stops here under ATTN_ASSERT_ON_ERROR */
        return;
    }
    while (seq->num_blocks > 0) attn__pool_drop(pool, seq->block_table[--seq->num_blocks]);
    seq->len = 0;
    seq->cache_blocks = 0; seq->cache_hash = 0; seq->cache_parent = 0;
}

/* ---- prefix cache: sizing, attaching, token ids, lookup ---- */

/* Lays out the cache's arrays at base (NULL: only measures); returns the bytes from base. */
ATTN__PRIVATE size_t attn__cache_layout(attn_prefix_cache *c, char *base, size_t nb, size_t bs,
                                        size_t buckets) {
    size_t at = 0;
    uint64_t **u64[5];
    int32_t **i32[4];
    u64[0] = &c->hash; u64[1] = &c->serial; u64[2] = &c->parent; u64[3] = &c->ns;
    u64[4] = &c->last_use;
    i32[0] = &c->next; i32[1] = &c->lru_prev; i32[2] = &c->lru_next; i32[3] = &c->bucket;
    for (int i = 0; i < 5; i++) {
        if (base) *u64[i] = (uint64_t *)(void *)(base + at);
        at += attn__align_up(sizeof(uint64_t) * nb);
    }
    for (int i = 0; i < 4; i++) {
        if (base) *i32[i] = (int32_t *)(void *)(base + at);
        at += attn__align_up(sizeof(int32_t) * (i == 3 ? buckets : nb));
    }
    if (base) c->tokens = (int32_t *)(void *)(base + at);
    at += attn__align_up(sizeof(int32_t) * nb * bs);
    return at;
}

/* The hash table's bucket count: the smallest power of two >= num_blocks. */
ATTN__PRIVATE size_t attn__cache_buckets(int num_blocks) {
    size_t n = 1;
    while (n < (size_t)num_blocks) n *= 2;
    return n;
}

ATTNDEF size_t attn_prefix_cache_bytes(int num_blocks, int block_size) {
    if (num_blocks < 1 || block_size < 1 || num_blocks > (1 << 29)) return 0;
    size_t nb = (size_t)num_blocks, bs = (size_t)block_size;
    if (bs > (ATTN__SIZE_MAX / 8 - 4096) / nb) return 0;  /* the token ids, with slack */
    attn_prefix_cache c;
    return ATTN__ALIGN + attn__cache_layout(&c, NULL, nb, bs, attn__cache_buckets(num_blocks));
}

ATTNDEF attn_status attn_prefix_cache_init(attn_block_pool *pool, void *mem, size_t bytes) {
    ATTN__CHECK(attn__pool_ok(pool) && mem != NULL, ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(pool->num_free == pool->num_blocks, ATTN_ERR_INVALID_ARG);  /* nothing in use */
    size_t need = attn_prefix_cache_bytes(pool->num_blocks, pool->block_size);
    ATTN__CHECK(need != 0, ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(bytes >= need, ATTN_ERR_WORKSPACE_TOO_SMALL);
    attn_prefix_cache *c = &pool->cache;
    size_t nb = (size_t)pool->num_blocks, buckets = attn__cache_buckets(pool->num_blocks);
    char *base = (char *)(((uintptr_t)mem + ATTN__ALIGN - 1) & ~(uintptr_t)(ATTN__ALIGN - 1));
    memset(c, 0, sizeof *c);
    attn__cache_layout(c, base, nb, (size_t)pool->block_size, buckets);
    memset(c->serial, 0, sizeof(uint64_t) * nb);
    memset(c->bucket, 0xff, sizeof(int32_t) * buckets);  /* -1: empty */
    c->num_buckets = (int)buckets;
    c->lru_head = c->lru_tail = -1;
    c->hash_bits = 64;
    return ATTN_OK;
}

ATTNDEF attn_status attn_seq_set_tokens(attn_seq *seq, const int32_t *tokens, uint64_t ns) {
    ATTN__CHECK(seq != NULL && seq->len >= 0 && seq->num_blocks >= 0, ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(ns == seq->cache_ns || (seq->len == 0 && seq->num_blocks == 0),
                ATTN_ERR_INVALID_ARG);
    seq->tokens = tokens;
    seq->cache_ns = ns;
    return ATTN_OK;
}

ATTNDEF attn_status attn_prefix_cache_lookup(attn_block_pool *pool, attn_seq *seq,
                                             int64_t prompt_len) {
    ATTN__CHECK(attn__pool_ok(pool) && pool->cache.num_buckets > 0 && attn__seq_ok(pool, seq),
                ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(seq->len == 0 && seq->num_blocks == 0 && seq->tokens != NULL && prompt_len >= 1,
                ATTN_ERR_INVALID_ARG);
    attn_prefix_cache *c = &pool->cache;
    int bs = pool->block_size;
    int64_t most = ATTN__MIN((prompt_len - 1) / bs, (int64_t)seq->max_blocks);
    uint64_t h = 0, parent = 0;
    int n = 0;
    while (n < most) {  /* nothing below fails: each hit is committed as it is found */
        const int32_t *tok = seq->tokens + (size_t)n * (size_t)bs;
        uint64_t hn = attn__block_hash(c, h, tok, bs, seq->cache_ns);
        int32_t b = attn__cache_find(pool, hn, parent, seq->cache_ns, tok);
        if (b < 0 || pool->refcount[b] == ATTN__INT_MAX) break;
        if (pool->refcount[b] == 0) attn__lru_unlink(c, b);  /* evictable no more */
        pool->refcount[b]++;
        seq->block_table[n++] = b;
        h = hn; parent = c->serial[b];
    }
    seq->num_blocks = n;
    seq->len = (int64_t)n * bs;
    seq->cache_blocks = n; seq->cache_hash = h; seq->cache_parent = parent;
    c->lookups++;
    c->lookup_tokens += prompt_len;
    c->hit_tokens += seq->len;
    return ATTN_OK;
}


/* ---------------------------------------------------------------------------------------------
   [P] Paged decode. */

/* A cache the attention kernels can read with the layer's params: a valid struct
   (attn__kv_cache_ok) with the layer's KV heads and head size. */
ATTN__PRIVATE attn_status attn__cache_matches(const attn_params *p, const attn_kv_cache *c) {
    ATTN__CHECK(attn__kv_cache_ok(c), ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(c->num_kv_heads == p->num_kv_heads &&
                c->head_size == p->head_size, ATTN_ERR_INVALID_ARG);
    return ATTN_OK;
}

/* The new query tokens are part of the keys (seq_lens counts them), so no sequence may have
   more of them than keys. q_start NULL: one query token per sequence (decodes). */
ATTN__PRIVATE attn_status attn__queries_in_keys(const int32_t *q_start, const int32_t *seq_lens,
                                                int n) {
    for (int s = 0; s < n; s++) {
        int64_t lq = q_start ? (int64_t)q_start[s + 1] - q_start[s] : 1;
        ATTN__CHECK(lq <= seq_lens[s], ATTN_ERR_INVALID_ARG);
    }
    return ATTN_OK;
}

/* Every block a sequence will read must be inside the table and the cache. */
ATTN__PRIVATE attn_status attn__block_tables_check(const attn_kv_cache *c, const int32_t *tables,
                                                   int max_blocks, const int32_t *seq_lens,
                                                   int num_seqs) {
    ATTN__CHECK(num_seqs == 0 || seq_lens != NULL, ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(max_blocks >= 0, ATTN_ERR_INVALID_ARG);
    for (int s = 0; s < num_seqs; s++) {
        int64_t blocks = ((int64_t)seq_lens[s] + c->block_size - 1) / c->block_size;
        ATTN__CHECK(seq_lens[s] >= 0, ATTN_ERR_INVALID_ARG);
        ATTN__CHECK(blocks <= max_blocks, ATTN_ERR_OUT_OF_RANGE);
        ATTN__CHECK(blocks == 0 || tables != NULL, ATTN_ERR_INVALID_ARG);
        for (int64_t b = 0; b < blocks; b++) {
            int32_t id = tables[(int64_t)s * max_blocks + b];
            ATTN__CHECK(id >= 0 && id < c->num_blocks, ATTN_ERR_OUT_OF_RANGE);
        }
    }
    return ATTN_OK;
}

ATTNDEF attn_paged_version attn_paged_decode_version(const attn_params *params,
                                                      const int32_t *seq_lens, int num_seqs,
                                                      attn_paged_version version) {
    if (version != ATTN_PAGED_AUTO) return version;
    int64_t max_len = ATTN__MAX((int64_t)0, attn__longest(NULL, seq_lens, num_seqs));
    int64_t parts = (max_len + ATTN_PARTITION_TOKENS - 1) / ATTN_PARTITION_TOKENS;
    int64_t heads = params ? (int64_t)num_seqs * params->num_heads : 0;
    return max_len <= 8192 && (parts <= 1 || heads > 512) ? ATTN_PAGED_V1 : ATTN_PAGED_V2;
}

/* Whether a decode call's logits may run on tiles: its ISA is ATTN_ISA_AMX with the decode tile
   kernels, D a multiple of 32 and ATTN__DECODE_TILE_GROUP or more query heads a KV head (the
   dtypes decide later, attn__decode_plan_fill). What its workspace is laid out for. */
ATTN__PRIVATE int attn__decode_tiles_may_run(const attn__call *c, const attn_params *p) {
    return c->on_tiles && (c->k->caps & ATTN__CAP_DECODE_TILES) != 0 && p->head_size % 32 == 0 &&
           p->num_heads / p->num_kv_heads >= ATTN__DECODE_TILE_GROUP;
}
/* The column tiles of G query heads of `terms` bf16 terms each: 16 / terms heads a tile. */
ATTN__PRIVATE int attn__decode_tile_cols(int G, int terms) {
    int per_tile = 16 / terms;
    return (G + per_tile - 1) / per_tile;
}
/* A KV head's query tiles (attn__decode_tile_queries) in 32-bit words, for the most terms. */
ATTN__PRIVATE size_t attn__decode_tile_words(const attn_params *p) {
    int G = p->num_heads / p->num_kv_heads;
    return (size_t)attn__decode_tile_cols(G, ATTN__DECODE_TILE_QTERMS) * (p->head_size / 32) * 256;
}

/* A KV head's query tiles of a stacked pass of `heads` query heads (none without tiles). */
ATTN__PRIVATE size_t attn__decode_stack_words(size_t tile_words, int heads, int D) {
    if (!tile_words) return 0;
    return (size_t)attn__decode_tile_cols(heads, ATTN__DECODE_TILE_QTERMS) * (D / 32) * 256;
}

/* KV heads a stacked pass of Gs query heads each (with padding) runs: as many as keep it
   within ATTN__DECODE_STACK_HEADS heads (a block's rows of neighbouring KV heads are one run). */
ATTN__PRIVATE int attn__decode_stack_span(int Hk, int Gs) {
    return ATTN__MAX(1, ATTN__MIN(ATTN__MIN(Hk, ATTN__DECODE_SPAN), ATTN__DECODE_STACK_HEADS / Gs));
}

/* A thread's scratch for a stacked pass of `heads` query heads a KV head (Gs with padding) over
   `span` KV heads: the pass's scratch, then its partial results (attn__decode_plan.stack_out). */
ATTN__PRIVATE size_t attn__decode_stack_scratch(int span, int heads, int Gs, int Dv, int D,
                                                size_t tile_words) {
    return attn__align_up(
                   attn__decode_scratch_layout(span, heads, Gs, Dv, tile_words, NULL, NULL)) +
           sizeof(float) * (size_t)span * heads * (2 + (size_t)D);
}

/* Whether a call may compute shared partitions once (attn__decode_share): sharing on, two
   sequences or more, and room for two of them in a stacked pass. Otherwise its workspace has
   no room for the search or the stacked passes. */
ATTN__PRIVATE int attn__decode_may_share(const attn__call *c, int G, int num_seqs) {
    return c->share && num_seqs >= 2 && 2 * G <= ATTN__DECODE_STACK_HEADS;
}

/* Lays out a decode workspace, [part_start: num_seqs+1 int64][partials][the shared prefixes'
   search and stacks, partitions-long arrays][scratch per thread: a work item's, or a stacked
   pass's, whichever is larger], at base into P (base NULL: only measures) and returns its
   size, with room for stacks of up to `sharers` sequences (a call's own count, or a bound's).
   Nothing is written to base. */
ATTN__PRIVATE size_t attn__decode_ws_layout_for(const attn_params *p, const attn__call *c,
                                                const int32_t *seq_lens, int num_seqs,
                                                int sharers, char *base, attn__decode_plan *P) {
    int G = p->num_heads / p->num_kv_heads, D = p->head_size;
    int Gs = attn__decode_scratch_heads(G, c->k->decode_widths), Dv = (D + 31) / 32 * 32;
    int64_t parts = 0;
    for (int s = 0; s < num_seqs; s++)
        parts +=
                ((int64_t)ATTN__MAX(seq_lens[s], 0) + ATTN_PARTITION_TOKENS - 1)
                    / ATTN_PARTITION_TOKENS;
    size_t head = attn__align_up(sizeof(int64_t) * ((size_t)num_seqs + 1));
    size_t partials =
            attn__align_up(sizeof(float) * (size_t)parts * p->num_kv_heads * G * (2 + (size_t)D));
    int span = ATTN__MIN(p->num_kv_heads, ATTN__DECODE_SPAN);
    size_t tile_words = attn__decode_tiles_may_run(c, p) ? attn__decode_tile_words(p) : 0;
    size_t per_thread =
            attn__align_up(attn__decode_scratch_layout(span, G, Gs, Dv, tile_words, NULL, NULL));
    size_t n = (size_t)parts, i32 = attn__align_up(sizeof(int32_t) * n), share = 0;
    int may_share = attn__decode_may_share(c, G, sharers);
    if (may_share) share = attn__align_up(sizeof(int64_t) * n) + 5 * i32 + attn__align_up(n);
    for (int m = 2; may_share && m <= sharers && m * G <= ATTN__DECODE_STACK_HEADS; m++) {
        /* every stack's size */
        int heads = m * G, Gsm = attn__decode_scratch_heads(heads, c->k->decode_widths);
        per_thread = ATTN__MAX(per_thread, attn__align_up(attn__decode_stack_scratch(
                attn__decode_stack_span(p->num_kv_heads, Gsm), heads, Gsm, Dv, D,
                attn__decode_stack_words(tile_words, heads, D))));
    }
    if (base) {
        char *a = (char *)(((uintptr_t)base + ATTN__ALIGN - 1) & ~(uintptr_t)(ATTN__ALIGN - 1));
        char *sh = a + head + partials;
        P->part_start = (int64_t *)(void *)a;
        P->partials = (float *)(void *)(a + head);
        P->keys = (int64_t *)(void *)sh;
        sh += attn__align_up(sizeof(int64_t) * n);
        P->stacks = (int32_t *)(void *)sh;
        P->members = (int32_t *)(void *)(sh + 3 * i32);
        P->own = (int32_t *)(void *)(sh + 4 * i32);
        P->stacked = (uint8_t *)(void *)(sh + 5 * i32);
        P->scratch = a + head + partials + share;
        P->scratch_bytes = per_thread;
        P->Gs = Gs; P->Dv = Dv; P->tile_words = tile_words;
    }
    return ATTN__ALIGN + head + partials + share + per_thread * (size_t)c->threads;
}

/* A decode call's workspace (attn__decode_ws_layout_for), room for its own sequences' stacks. */
ATTN__PRIVATE size_t attn__decode_ws_layout(const attn_params *p, const attn__call *c,
                                            const int32_t *seq_lens, int num_seqs, char *base,
                                            attn__decode_plan *P) {
    return attn__decode_ws_layout_for(p, c, seq_lens, num_seqs, num_seqs, base, P);
}

ATTNDEF size_t attn_paged_decode_workspace_size(const attn_params *params, const attn_exec *exec,
                                                const attn_kv_cache *cache, const int32_t *seq_lens,
                                                int num_seqs, attn_paged_version version) {
    attn__call c;
    (void)version;  /* v1 and v2 share one layout, so either can run in the same workspace */
    if (attn_params_check(params) != ATTN_OK ||
        attn__cache_matches(params, cache) != ATTN_OK) return 0;
    if (num_seqs < 0 || (num_seqs > 0 && !seq_lens) || (exec && exec->num_threads < 0)) return 0;
    attn__call_of(exec, 0, &c);
    return attn__decode_ws_layout(params, &c, seq_lens, num_seqs, NULL, NULL);
}

typedef struct attn__decode_run {
    const attn__decode_plan *plan;
    const attn__kernels *k;
} attn__decode_run;

/* Merges a sequence's partitions in order (the sink first, as a term with no value):
   out = sum_p o_p e^(m_p - M) / (sum_p l_p e^(m_p - M)), lse = M + log(denominator). One loop
   for every ISA (it runs once per sequence and head, D floats a partition: about 1% of the
   partitions' time), the output rounded by the ISA's row conversion. */
ATTN__PRIVATE void attn__decode_merge(const attn__decode_run *run, int seq, int g) {
    const attn__decode_plan *P = run->plan;
    int G = P->G, D = P->D, h, d;
    int64_t parts = P->part_start[seq + 1] - P->part_start[seq], k;
    float acc[ATTN_MAX_HEAD_SIZE];
    size_t osz = attn_dtype_size(P->out_dtype);
    int has_keys = attn__sees_keys(&P->logits, P->seq_lens[seq] - 1, P->seq_lens[seq]);
    for (h = 0; h < G; h++) {
        int hq = g * G + h;
        float M = P->sinks ? P->sinks[hq] : -INFINITY, l = 0.0f;
        for (k = 0; k < parts; k++)
            M = ATTN__MAX(M, attn__decode_partial(P, P->part_start[seq] + k, g)[h]);
        for (d = 0; d < D; d++) acc[d] = 0.0f;
        if (P->sinks) l = attn__vexp__scalar(P->sinks[hq] - M);
        for (k = 0; k < parts && M > -INFINITY; k++) {
            const float *part = attn__decode_partial(P, P->part_start[seq] + k, g);
            const float *o = part + 2 * G + (size_t)h * D;
            float w = attn__vexp__scalar(part[h] - M);
            if (part[G + h] == 0.0f) continue;  /* empty partition (window) */
            for (d = 0; d < D; d++) acc[d] += o[d] * w;
            l += part[G + h] * w;
        }
        float inv = has_keys ? 1.0f / l : 0.0f;
        for (d = 0; d < D; d++) acc[d] *= inv;
        run->k->from_f32(P->out + (size_t)(seq * P->out_stride + (int64_t)hq * D) * osz,
                         P->out_dtype, acc, D);
        if (P->lse) P->lse[(int64_t)seq * P->H + hq] = has_keys ? M + logf(l) : -INFINITY;
    }
}

/* v1: one item per (sequence, span of KV heads) computes its partitions in order, then merges
   them. The span only groups the reads: each KV head's arithmetic is the same in any span. */
ATTN__PRIVATE void attn__decode_v1_item(const attn__decode_run *run, int item, int thread) {
    const attn__decode_plan *P = run->plan;
    int seq = item / P->spans, g0 = item % P->spans * P->span, g1 = ATTN__MIN(g0 + P->span, P->Hk);
    int parts = (int)(P->part_start[seq + 1] - P->part_start[seq]);
    for (int part = 0; part < parts; part++)
        if (!P->n_stacks || !P->stacked[P->part_start[seq] + part])  /* else a stack's */
            run->k->decode_partition(P, seq, g0, g1, part, thread);
    for (int g = g0; g < g1; g++) attn__decode_merge(run, seq, g);
}

ATTN__PRIVATE void attn__decode_v1_task(void *ctx, int item, int thread) {
    attn__decode_v1_item((const attn__decode_run *)ctx, item, thread);
}

/* v2, first pass: one item per (partition, span of KV heads), of the partitions no stack
   computes. */
ATTN__PRIVATE void attn__decode_v2_part_task(void *ctx, int item, int thread) {
    const attn__decode_run *run = (const attn__decode_run *)ctx;
    const attn__decode_plan *P = run->plan;
    int64_t part = P->n_stacks ? P->own[item / P->spans] : item / P->spans;
    int seq = attn__find_seq(P->part_start, P->num_seqs, part);
    int g0 = item % P->spans * P->span, g1 = ATTN__MIN(g0 + P->span, P->Hk);
    run->k->decode_partition(P, seq, g0, g1, (int)(part - P->part_start[seq]), thread);
}

/* KV heads per work item: as many as the scratch holds (a block's rows of neighbouring KV heads
   are contiguous, so they are read as one run), halved while that leaves fewer than four items
   per thread. */
ATTN__PRIVATE void attn__decode_choose_span(attn__decode_plan *P, attn_paged_version version,
                                            int threads) {
    int64_t units = version == ATTN_PAGED_V1 ? P->num_seqs : P->part_start[P->num_seqs];
    int span = ATTN__MIN(P->Hk, ATTN__DECODE_SPAN);  /* in int64_t: Hk may be INT_MAX */
    while (span > 1 &&
           units * (((int64_t)P->Hk + span - 1) / span) < 4 * (int64_t)threads) span =
                   (span + 1) / 2;
    P->span = span;
    P->spans = (int)(((int64_t)P->Hk + span - 1) / span);
}

/* A stacked pass: one item per (stack, span of KV heads) computes the stack's partition for the
   heads of all its members at once - the partition's rows read once, not once a member - and
   hands each member its partial results, the same bits as its own pass would give
   (attn__decode_partition). Runs before the passes of the sequences' other partitions. */
ATTN__PRIVATE void attn__decode_stack_task(void *ctx, int item, int thread) {
    const attn__decode_run *run = (const attn__decode_run *)ctx;
    const attn__decode_plan *P = run->plan;
    const int32_t *st = P->stacks + 3 * (size_t)(item / P->stack_spans);
    int g0 = item % P->stack_spans * P->stack_span, g1 = ATTN__MIN(g0 + P->stack_span, P->Hk);
    int part = st[0], n = st[2], G = P->G, D = P->D;
    attn__decode_plan S = *P;
    S.stack = P->members + st[1]; S.stack_G = G; S.stack_g0 = g0;
    S.G = n * G;
    S.Gs = attn__decode_scratch_heads(S.G, run->k->decode_widths);
    S.tile_cols = attn__decode_tile_cols(S.G, P->tile_terms);
    S.tile_words = attn__decode_stack_words(P->tile_words, S.G, D);
    S.stack_out = (float *)(void *)(P->scratch + (size_t)thread * P->scratch_bytes +
                                    attn__align_up(attn__decode_scratch_layout(
                                            g1 - g0, S.G, S.Gs, P->Dv, S.tile_words, NULL, NULL)));
    run->k->decode_partition(&S, S.stack[0], g0, g1, part, thread);
    for (int g = g0; g < g1; g++) {
        const float *from = attn__decode_part_out(&S, S.stack[0], part, g);
        for (int i = 0; i < n; i++) {
            float *to = attn__decode_partial(P, P->part_start[S.stack[i]] + part, g);
            memcpy(to, from + i * G, sizeof(float) * (size_t)G);
            memcpy(to + G, from + S.G + i * G, sizeof(float) * (size_t)G);
            memcpy(to + 2 * G, from + 2 * (size_t)S.G + (size_t)i * G * D,
                   sizeof(float) * (size_t)G * D);
        }
    }
}

/* The stacked passes of a plan (none: nothing). */
ATTN__PRIVATE void attn__decode_run_stacks(const attn__call *c, attn__decode_run *run) {
    attn__run_items(c, run->plan->n_stacks * run->plan->stack_spans, attn__decode_stack_task, run);
}

/* v2, second pass: the same ordered merge as v1. */
ATTN__PRIVATE void attn__decode_v2_merge_task(void *ctx, int item, int thread) {
    const attn__decode_run *run = (const attn__decode_run *)ctx;
    (void)thread;
    attn__decode_merge(run, item / run->plan->Hk, item % run->plan->Hk);
}

/* Checks a decode's arguments, in the order the entry points have always checked them. */
ATTN__PRIVATE attn_status attn__decode_check(const attn__args *a) {
    const attn_params *p = a->params;
    int64_t width = (int64_t)p->num_heads * p->head_size;
    ATTN__TRY(attn__cache_matches(p, a->cache));
    ATTN__CHECK(a->num_seqs >= 0, ATTN_ERR_INVALID_ARG);
    ATTN__TRY(attn__block_tables_check(a->cache, a->tables, a->max_blocks, a->seq_lens,
                                       a->num_seqs));
    ATTN__TRY(attn__rows_check(a->q, width, a->num_seqs));
    ATTN__TRY(attn__rows_check(a->out, width, a->num_seqs));
    ATTN__CHECK((int64_t)a->num_seqs * p->num_kv_heads <= 0x7fffffff, ATTN_ERR_INVALID_ARG);
    return ATTN_OK;
}

/* Moves a[i] down the max-heap a[0, end) to its place. */
ATTN__PRIVATE void attn__sift_down(int64_t *a, int64_t i, int64_t end) {
    for (int64_t ch; (ch = 2 * i + 1) < end; i = ch) {
        if (ch + 1 < end && a[ch + 1] > a[ch]) ch++;
        if (a[i] >= a[ch]) return;
        int64_t t = a[i];
        a[i] = a[ch]; a[ch] = t;
    }
}

/* Sorts n keys ascending in place (heapsort: no memory of its own, n log n). */
ATTN__PRIVATE void attn__sort_keys(int64_t *a, int64_t n) {
    for (int64_t i = n / 2 - 1; i >= 0; i--) attn__sift_down(a, i, n);
    for (int64_t end = n - 1; end > 0; end--) {
        int64_t t = a[0];
        a[0] = a[end]; a[end] = t;
        attn__sift_down(a, 0, end);
    }
}

/* Whether a stacked pass may compute partition part of sequence s: its 512 keys all there and
   all visible to the query (a window may leave them out: then its own pass, as without
   sharing), so that every member reads the same keys the same way. */
ATTN__PRIVATE int attn__decode_whole_part(const attn__decode_plan *P, int s, int64_t part) {
    int64_t L = P->seq_lens[s], first = part * ATTN_PARTITION_TOKENS, lo, hi;
    attn__visible_keys(&P->logits, L - 1, L - 1, L, &lo, &hi);
    return lo <= first && first + ATTN_PARTITION_TOKENS <= hi;
}

/* Whether the tables of sequences a and b name the same blocks for partition part. */
ATTN__PRIVATE int attn__decode_same_blocks(const attn__decode_plan *P, int a, int b,
                                           int64_t part) {
    int64_t b0 = part * ATTN_PARTITION_TOKENS / P->block_size,
            b1 = ((part + 1) * ATTN_PARTITION_TOKENS - 1) / P->block_size;
    const int32_t *ta = P->block_tables + (int64_t)a * P->max_blocks,
                  *tb = P->block_tables + (int64_t)b * P->max_blocks;
    return memcmp(ta + b0, tb + b0, sizeof(int32_t) * (size_t)(b1 - b0 + 1)) == 0;
}

/* Appends the stacks of the sequences members[from, to) that share partition part: as few
   stacks as ATTN__DECODE_STACK_HEADS allows, their sizes as even as they go. */
ATTN__PRIVATE void attn__decode_add_stacks(attn__decode_plan *P, int part, int from, int to) {
    int most = ATTN__DECODE_STACK_HEADS / P->G, n = to - from;
    int count = (n + most - 1) / most;
    for (int k = 0, at = from; k < count; k++) {
        int32_t *st = P->stacks + 3 * (size_t)P->n_stacks++;
        st[0] = part; st[1] = at; st[2] = n / count + (k < n % count);
        at += st[2];
    }
}

/* The shared prefixes of a decode call (attn__decode_plan.stacks): the whole partitions
   (attn__decode_whole_part) that the tables of two or more sequences name the same blocks for.
   Each is keyed by its first block and its index among all partitions, and the keys sorted: a
   run of one first block is split into the sets whose blocks all agree, at the same partition
   index. A call where no two partitions start in one block costs the keys' sort. */
ATTN__PRIVATE void attn__decode_share(attn__decode_plan *P, const attn__call *c) {
    int64_t total = P->part_start[P->num_seqs], n = 0, i, j;
    int n_members = 0, widths = c->k->decode_widths;
    P->n_stacks = P->n_own = 0;
    if (!attn__decode_may_share(c, P->G, P->num_seqs)) return;
    for (int s = 0; s < P->num_seqs; s++)
        for (int64_t part = 0; part < P->part_start[s + 1] - P->part_start[s]; part++)
            if (attn__decode_whole_part(P, s, part)) {
                int64_t blk = P->block_tables[(int64_t)s * P->max_blocks +
                                              part * ATTN_PARTITION_TOKENS / P->block_size];
                P->keys[n++] = blk << 32 | (P->part_start[s] + part);
            }
    attn__sort_keys(P->keys, n);
    memset(P->stacked, 0, (size_t)total);
    for (i = 0; i < n; i = j) {
        for (j = i + 1; j < n && P->keys[j] >> 32 == P->keys[i] >> 32; j++) {}
        for (int64_t a = i; a + 1 < j; a++) {  /* the sets of the run [i, j) */
            int64_t ia = P->keys[a] & 0xffffffff;
            int sa = attn__find_seq(P->part_start, P->num_seqs, ia), from = n_members;
            int64_t pa = ia - P->part_start[sa];
            if (P->stacked[ia]) continue;
            P->members[n_members++] = sa;
            for (int64_t b = a + 1; b < j; b++) {
                int64_t ib = P->keys[b] & 0xffffffff;
                int sb = attn__find_seq(P->part_start, P->num_seqs, ib);
                if (P->stacked[ib] || ib - P->part_start[sb] != pa ||
                    !attn__decode_same_blocks(P, sa, sb, pa)) continue;
                P->members[n_members++] = sb;
                P->stacked[ia] = P->stacked[ib] = 1;
            }
            if (P->stacked[ia]) attn__decode_add_stacks(P, (int)pa, from, n_members);
            else n_members = from;
        }
    }
    for (i = 0; i < total && P->n_stacks; i++)
        if (!P->stacked[i]) P->own[P->n_own++] = (int32_t)i;
    int most = 1;  /* one span for all the stacks: the largest one's */
    for (int k = 0; k < P->n_stacks; k++) most = ATTN__MAX(most, P->stacks[3 * k + 2]);
    P->stack_span = attn__decode_stack_span(P->Hk, attn__decode_scratch_heads(most * P->G, widths));
    P->stack_spans = (int)(((int64_t)P->Hk + P->stack_span - 1) / P->stack_span);
}

/* Fills a decode plan, its workspace already laid out (attn__decode_ws_layout), from checked
   arguments: the partitions' offsets, then everything the kernels read. */
ATTN__PRIVATE attn_status attn__decode_plan_fill(attn__decode_plan *P, const attn__call *c,
                                                 const attn__args *a) {
    const attn_params *params = a->params;
    const attn_kv_cache *cache = a->cache;
    int H = params->num_heads, Hk = params->num_kv_heads, D = params->head_size;
    int64_t *part_start = P->part_start, acc = 0;
    for (int s = 0; s < a->num_seqs; s++) {
        part_start[s] = acc;
        acc += ((int64_t)a->seq_lens[s] + ATTN_PARTITION_TOKENS - 1) / ATTN_PARTITION_TOKENS;
    }
    part_start[a->num_seqs] = acc;
    ATTN__CHECK(acc * Hk <= 0x7fffffff, ATTN_ERR_INVALID_ARG);
    P->H = H; P->Hk = Hk; P->G = H / Hk; P->D = D;
    P->q_mul = attn__logits_init(&P->logits, params, 1);
    P->sinks = params->sinks;
    P->q = (const char *)a->q.data; P->q_dtype = a->q.dtype;
    P->q_stride = a->q.stride ? a->q.stride : (int64_t)H * D;
    P->out = (char *)a->out.data; P->out_dtype = a->out.dtype;
    P->out_stride = a->out.stride ? a->out.stride : (int64_t)H * D;
    P->lse = a->lse;
    P->key_cache = (const char *)cache->key; P->value_cache = (const char *)cache->value;
    P->kv_dtype = cache->dtype; P->k_scale = cache->k_scale; P->v_scale = cache->v_scale;
    P->kv_row_bytes = attn_dtype_row_bytes(cache->dtype, cache->head_size);
    P->block_size = cache->block_size; P->max_blocks = a->max_blocks;
    P->block_tables = a->tables; P->seq_lens = a->seq_lens; P->num_seqs = a->num_seqs;
    /* the logits on tiles over the caches whose values bf16 holds exactly, for the queries whose
       terms the workspace holds: bf16 queries as they are, the others split in three */
    P->tile_terms = a->q.dtype == ATTN_BF16 ? 1 : ATTN__DECODE_TILE_TERMS;
    P->tile_keys = P->tile_words != 0 && P->tile_terms <= ATTN__DECODE_TILE_QTERMS &&
                   (cache->dtype == ATTN_BF16 || attn__is_fp8(cache->dtype));
    /* the pair kernels where they pay (beside the tiles wherever they run): bf16 queries over a
       bf16 cache, or over an fp8 one (exact in bf16) where the kernel table has the byte tables
       that make its rows bf16 (AVX-512 VBMI; not under ATTN_NO_FP8_KERNELS) and three or more
       query heads a KV head - they run heads in fours or eights, and one or two heads padded to
       four would cost more than their own kernels */
    P->bf16_pairs = (P->tile_keys ? c->dot2 : c->pairs) && a->q.dtype == ATTN_BF16 &&
                    D % 32 == 0 &&
                    (cache->dtype == ATTN_BF16 ||
                     (attn__is_fp8(cache->dtype) && P->G >= 3 && c->fp8_pairs));
    /* P.V on tiles too where the probabilities may be rounded to bf16: bf16 queries, as the
       pair kernels do */
    P->tile_values = P->tile_keys && a->q.dtype == ATTN_BF16 && c->bf16_probs &&
                     P->G >= ATTN__DECODE_TILE_VALUES_GROUP;
    P->tile_cols = attn__decode_tile_cols(P->G, P->tile_terms);
    P->tile_scale = P->q_mul * P->k_scale * attn__decode_tile_fold(cache->dtype);
    attn__decode_choose_span(P, a->version, c->threads);
    attn__decode_share(P, c);
    return ATTN_OK;
}

/* Runs every item of a decode plan, in v1's or v2's schedule. */
ATTN__PRIVATE void attn__decode_execute(const attn__call *c, const attn__decode_plan *P,
                                        attn_paged_version version) {
    attn__decode_run run;
    run.plan = P; run.k = c->k;
    attn__decode_run_stacks(c, &run);
    if (version == ATTN_PAGED_V1) {
        attn__run_items(c, P->num_seqs * P->spans, attn__decode_v1_task, &run);
    } else {
        int parts = (int)((P->n_stacks ? P->n_own : P->part_start[P->num_seqs]) * P->spans);
        attn__run_items(c, parts, attn__decode_v2_part_task, &run);
        attn__run_items(c, P->num_seqs * P->Hk, attn__decode_v2_merge_task, &run);
    }
}

ATTNDEF attn_status attn_paged_decode(const attn_params *params, const attn_exec *exec, attn_rows q,
                                      attn_rows out, const attn_kv_cache *cache,
                                      const int32_t *block_tables, int max_blocks_per_seq,
                                      const int32_t *seq_lens, int num_seqs,
                                      attn_paged_version version, float *lse, void *ws,
                                      size_t ws_bytes) {
    attn__call c;
    attn__args a;
    attn__decode_plan P;
    ATTN__TRY(attn_params_check(params));
    ATTN__TRY(attn__call_resolve(exec, 0, &c));
    ATTN__CHECK((int)version >= 0 && version <= ATTN_PAGED_V2, ATTN_ERR_INVALID_ARG);
    memset(&a, 0, sizeof a);
    a.params = params; a.q = q; a.out = out; a.cache = cache;
    a.tables = block_tables; a.max_blocks = max_blocks_per_seq; a.seq_lens = seq_lens;
    a.num_seqs = num_seqs; a.lse = lse;
    a.version = attn_paged_decode_version(params, seq_lens, num_seqs, version);
    ATTN__TRY(attn__decode_check(&a));
    memset(&P, 0, sizeof P);
    size_t need = attn__decode_ws_layout(params, &c, seq_lens, num_seqs, (char *)ws, &P);
    ATTN__CHECK(ws != NULL && ws_bytes >= need, ATTN_ERR_WORKSPACE_TOO_SMALL);
    ATTN__TRY(attn__decode_plan_fill(&P, &c, &a));
    c.work = attn__args_work(&a);
    attn__decode_execute(&c, &P, a.version);
    return ATTN_OK;
}


/* ---------------------------------------------------------------------------------------------
   [Q] Paged prefill and merge_states. */
/* Paged prefill's packed tiles: a bf16 cache for the pair kernels, and an fp8 cache too where
   the tile kernels may run (they pack its rows as bf16). */
ATTN__PRIVATE int attn__paged_value_tiles(const attn__call *c, const attn_kv_cache *cache,
                                          const int32_t *seq_lens, int num_seqs) {
    if (cache->dtype != ATTN_BF16 &&
        !(attn__tiles_may_run(c, cache->head_size) && attn__is_fp8(cache->dtype)))
        return 0;
    return attn__value_cache_tiles(c, cache->head_size, attn__longest(NULL, seq_lens, num_seqs));
}

ATTNDEF size_t attn_paged_prefill_workspace_size(const attn_params *params, const attn_exec *exec,
                                                 const attn_kv_cache *cache,
                                                 const int32_t *query_start_loc,
                                                 const int32_t *seq_lens, int num_seqs) {
    attn__call c;
    (void)query_start_loc;
    if (attn_params_check(params) != ATTN_OK ||
        attn__cache_matches(params, cache) != ATTN_OK) return 0;
    if (num_seqs < 0 || (exec && exec->num_threads < 0)) return 0;
    attn__call_of(exec, 0, &c);
    int tiles = attn__paged_value_tiles(&c, cache, seq_lens, num_seqs);
    return attn__prefill_ws_layout(&c, params, num_seqs, tiles, NULL, NULL);
}

ATTNDEF attn_status attn_paged_prefill(const attn_params *params, const attn_exec *exec,
                                       attn_rows q, attn_rows out, const attn_kv_cache *cache,
                                       const int32_t *block_tables, int max_blocks_per_seq,
                                       const int32_t *query_start_loc, const int32_t *seq_lens,
                                       int num_seqs, int causal, float *lse, void *ws,
                                       size_t ws_bytes) {
    attn__call c;
    attn__args a;
    attn__prefill_plan P;
    int64_t items;
    ATTN__TRY(attn_params_check(params));
    ATTN__TRY(attn__call_resolve(exec, 0, &c));
    memset(&a, 0, sizeof a);
    a.params = params; a.q = q; a.out = out; a.cache = cache;
    a.tables = block_tables; a.max_blocks = max_blocks_per_seq;
    a.q_start = query_start_loc; a.seq_lens = seq_lens; a.num_seqs = num_seqs;
    a.causal = causal; a.lse = lse;
    ATTN__TRY(attn__prefill_check(&a));
    int tiles = attn__paged_value_tiles(&c, cache, seq_lens, num_seqs);
    ATTN__TRY(attn__plan_prefill(&P, &c, &a, tiles, (char *)ws, ws_bytes, &items));
    ATTN__TRY(attn__queries_in_keys(query_start_loc, seq_lens, num_seqs));
    c.work = attn__args_work(&a);
    return attn__prefill_execute(&c, &P, items);
}

ATTNDEF attn_status attn_merge_states(int num_tokens, int num_heads, int head_size,
                                      attn_rows out_a, const float *lse_a, attn_rows out_b,
                                      const float *lse_b, attn_rows out, float *lse) {
    int64_t width = (int64_t)num_heads * head_size;
    float a[ATTN_MAX_HEAD_SIZE], b[ATTN_MAX_HEAD_SIZE];
    ATTN__CHECK(num_tokens >= 0 && num_heads >= 1, ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(head_size >= 1 && head_size <= ATTN_MAX_HEAD_SIZE, ATTN_ERR_INVALID_ARG);
    ATTN__TRY(attn__rows_check(out_a, width, num_tokens));
    ATTN__TRY(attn__rows_check(out_b, width, num_tokens));
    ATTN__TRY(attn__rows_check(out, width, num_tokens));
    ATTN__CHECK(num_tokens == 0 || (lse_a && lse_b), ATTN_ERR_INVALID_ARG);
    const attn__kernels *K = attn__kernels_for(attn_best_isa());
    size_t sa = attn_dtype_size(out_a.dtype), sb = attn_dtype_size(out_b.dtype),
           so = attn_dtype_size(out.dtype);
    int64_t ra = out_a.stride ? out_a.stride : width, rb = out_b.stride ? out_b.stride : width;
    int64_t ro = out.stride ? out.stride : width;
    for (int64_t t = 0; t < num_tokens; t++)
        for (int h = 0; h < num_heads; h++) {
            float la = lse_a[t * num_heads + h], lb = lse_b[t * num_heads + h];
            float m = ATTN__MAX(la, lb);
            float wa = m == -INFINITY ? 0.0f : expf(la - m),
                  wb = m == -INFINITY ? 0.0f : expf(lb - m);
            float inv = wa + wb > 0.0f ? 1.0f / (wa + wb) : 0.0f;
            int64_t col = (int64_t)h * head_size;
            K->to_f32(a, (const char *)out_a.data + (size_t)(t * ra + col) * sa, out_a.dtype,
                      head_size, 1.0f);
            K->to_f32(b, (const char *)out_b.data + (size_t)(t * rb + col) * sb, out_b.dtype,
                      head_size, 1.0f);
            for (int d = 0; d < head_size; d++) {  /* a weight of 0 must not let inf/NaN leak in */
                a[d] = (wa > 0.0f ? a[d] * wa : 0.0f) + (wb > 0.0f ? b[d] * wb : 0.0f);
                a[d] *= inv;
            }
            K->from_f32((char *)out.data + (size_t)(t * ro + col) * so, out.dtype, a, head_size);
            if (lse) lse[t * num_heads + h] = m == -INFINITY ? -INFINITY : m + logf(wa + wb);
        }
    return ATTN_OK;
}

/* ---------------------------------------------------------------------------------------------
   [R] The backend layer. */
ATTNDEF const char *attn_backend_name(attn_backend backend) {
    switch (backend) {
        case ATTN_BACKEND_SDPA: return "SDPA";
        case ATTN_BACKEND_IPEX: return "IPEX";
        default: return "unknown";
    }
}

ATTNDEF attn_status attn_layer_init(attn_layer *layer, const attn_params *params, attn_type type,
                                    attn_backend backend) {
    ATTN__CHECK(layer != NULL, ATTN_ERR_INVALID_ARG);
    ATTN__TRY(attn_params_check(params));
    ATTN__CHECK((int)type >= ATTN_DECODER && type <= ATTN_ENCODER_DECODER, ATTN_ERR_INVALID_ARG);
    ATTN__CHECK(backend == ATTN_BACKEND_SDPA || backend == ATTN_BACKEND_IPEX, ATTN_ERR_INVALID_ARG);
#ifndef ATTN_USE_ONEDNN
    ATTN__CHECK(backend == ATTN_BACKEND_SDPA, ATTN_ERR_UNSUPPORTED);
#endif
    layer->params = *params;
    layer->type = type;
    layer->backend = backend;
    return ATTN_OK;
}

/* What one forward call does, resolved from layer type and metadata. */
typedef struct attn__forward_shape {
    int prefills, decodes, prefill_tokens;
    int paged_prefill, causal, cross;
    const int32_t *q_start, *k_start;     /* prefill query / key row offsets (rows source) */
    const int32_t *prefill_lens, *decode_lens;
    const int32_t *tables; int max_blocks;
    const int64_t *slots; int write_tokens;
} attn__forward_shape;

/* The longest key sequence of the prefills, from the metadata alone, so that the size query
   (which sees no K/V rows and no cache) and the call agree: the cross prefill's keys are the
   encoder tokens, a chunk over a cached prefix reads seq_lens keys, a plain prefill its own
   rows. -1 when the metadata leaves it out (the call then refuses it). */
ATTN__PRIVATE int64_t attn__forward_longest_keys(const attn_layer *L, const attn_metadata *md) {
    int n = md->num_prefills;
    if (n <= 0) return 0;
    if (L->type == ATTN_ENCODER) return attn__longest(md->encoder_start_loc, NULL, n);
    if (L->type == ATTN_ENCODER_DECODER) return attn__longest(NULL, md->encoder_seq_lens, n);
    return md->context_lens ? attn__longest(NULL, md->seq_lens, n)
           : attn__longest(md->query_start_loc, NULL, n);
}

/* Resolves and checks the metadata; every check names its field in m. */
ATTN__PRIVATE attn_status attn__forward_resolve(const attn_layer *L, const attn_metadata *md,
                                                attn_rows key, const attn_kv_cache *cache,
                                                attn__forward_shape *f, const attn__msg *m) {
    const attn_status IA = ATTN_ERR_INVALID_ARG;
    ATTN__CHECKF(m, L != NULL && md != NULL, IA, "%s is NULL", L ? "md" : "layer");
    const attn_params *lp = &L->params;
    ATTN__CHECKF(m, attn_params_check(lp) == ATTN_OK, IA,
                 "layer->params (attn_params_check): num_heads = %d, num_kv_heads = %d, "
                 "head_size = %d, scale = %g, sliding_window = %d, logits_soft_cap = %g%s%s",
                 lp->num_heads, lp->num_kv_heads, lp->head_size, (double)lp->scale,
                 lp->sliding_window, (double)lp->logits_soft_cap,
                 lp->alibi_slopes ? ", alibi_slopes set" : "", lp->sinks ? ", sinks set" : "");
    ATTN__CHECKF(m, md->num_prefills >= 0 && md->num_prefill_tokens >= 0 &&
                     md->num_decode_tokens >= 0, IA,
                 "a negative count: num_prefills = %d, num_prefill_tokens = %d, "
                 "num_decode_tokens = %d", md->num_prefills, md->num_prefill_tokens,
                 md->num_decode_tokens);
    memset(f, 0, sizeof *f);
    f->prefills = md->num_prefills; f->decodes = md->num_decode_tokens;
    f->prefill_tokens = md->num_prefill_tokens;
    f->q_start = md->query_start_loc; f->k_start = md->query_start_loc;
    f->tables = md->block_tables; f->max_blocks = md->max_blocks_per_seq;
    const int32_t *qsl = md->query_start_loc;
    int n = f->prefills;
    if (n > 0) {
        ATTN__CHECKF(m, qsl != NULL, IA, "query_start_loc is NULL with num_prefills = %d", n);
        ATTN__CHECKF(m, qsl[0] == 0, IA, "query_start_loc[0] = %d, not 0", qsl[0]);
        for (int i = 0; i < n; i++)
            ATTN__CHECKF(m, qsl[i + 1] >= qsl[i], IA,
                         "query_start_loc[%d] = %d is below query_start_loc[%d] = %d", i + 1,
                         qsl[i + 1], i, qsl[i]);
        ATTN__CHECKF(m, qsl[n] == f->prefill_tokens, IA,
                     "query_start_loc[%d] = %d but num_prefill_tokens = %d", n, qsl[n],
                     f->prefill_tokens);
    } else {  /* no prefill: offset arrays are optional */
        static const int32_t no_tokens[1] = {0};
        ATTN__CHECKF(m, f->prefill_tokens == 0, IA,
                     "num_prefill_tokens = %d but num_prefills = 0", f->prefill_tokens);
        f->q_start = f->k_start = no_tokens;
    }
    ATTN__CHECKF(m, md->num_blocks_to_copy >= 0 &&
                     (md->num_blocks_to_copy == 0 || md->blocks_to_copy != NULL), IA,
                 "blocks_to_copy is NULL with num_blocks_to_copy = %d", md->num_blocks_to_copy);
    ATTN__CHECKF(m, md->num_blocks_to_copy == 0 || cache != NULL, IA,
                 "num_blocks_to_copy = %d but cache is NULL", md->num_blocks_to_copy);
    ATTN__CHECKF(m, md->num_seqs == 0 || (int64_t)md->num_seqs == (int64_t)n + f->decodes, IA,
                 "num_seqs = %d (declared) but num_prefills + num_decode_tokens = %d + %d",
                 md->num_seqs, n, f->decodes);
    const int32_t *lens = md->seq_lens, *ctx = md->context_lens;
    switch (L->type) {
        case ATTN_DECODER:
        case ATTN_ENCODER_ONLY:
            f->causal = L->type == ATTN_DECODER;
            f->paged_prefill = ctx != NULL;
            ATTN__CHECKF(m, L->type == ATTN_DECODER || f->decodes == 0, IA,
                         "num_decode_tokens = %d but an ENCODER_ONLY layer has no decodes",
                         f->decodes);
            ATTN__CHECKF(m, L->type == ATTN_DECODER || !f->paged_prefill, IA,
                         "context_lens is given but an ENCODER_ONLY layer has no cached prefix");
            f->prefill_lens = lens; f->decode_lens = lens ? lens + n : NULL;
            f->slots = cache ? md->slot_mapping : NULL;
            f->write_tokens = f->prefill_tokens + f->decodes;
            ATTN__CHECKF(m, !f->paged_prefill || n == 0 || lens != NULL, IA,
                         "seq_lens is NULL but context_lens is given: a chunk over a cached prefix "
                         "reads seq_lens[s] = context_lens[s] + its query length keys");
            ATTN__CHECKF(m, f->decodes == 0 || lens != NULL, IA,
                         "seq_lens is NULL with num_decode_tokens = %d", f->decodes);
            if (lens) {  /* the new tokens are counted in seq_lens, after the cached ones */
                for (int s = 0; s < n; s++) {
                    int64_t lq = (int64_t)qsl[s + 1] - qsl[s];
                    if (ctx) {
                        ATTN__CHECKF(m, ctx[s] >= 0, IA, "context_lens[%d] = %d", s, ctx[s]);
                        ATTN__CHECKF(m, (int64_t)ctx[s] + lq == lens[s], IA,
                                     "seq_lens[%d] = %d but context_lens[%d] + query length = "
                                     "%d + %lld", s, lens[s], s, ctx[s], (long long)lq);
                    } else {
                        ATTN__CHECKF(m, lq == lens[s], IA,
                                     "seq_lens[%d] = %d but its query length is %lld and "
                                     "context_lens is NULL (a cached prefix needs context_lens)",
                                     s, lens[s], (long long)lq);
                    }
                }
                for (int s = 0; s < f->decodes; s++)
                    ATTN__CHECKF(m, lens[n + s] >= 1, IA,
                                 "seq_lens[%d] = %d: a decode's keys include its new token",
                                 n + s, lens[n + s]);
            }
            break;
        case ATTN_ENCODER:  /* all prefill over the encoder tokens, no cache */
            ATTN__CHECKF(m, md->encoder_seq_lens && md->encoder_start_loc, IA,
                         "encoder_seq_lens or encoder_start_loc is NULL (ENCODER layer)");
            ATTN__CHECKF(m, f->decodes == 0 && !ctx, IA,
                         "an ENCODER layer has no decodes (num_decode_tokens = %d) and no "
                         "context_lens", f->decodes);
            ATTN__TRYF(m, attn__offsets_check(md->encoder_start_loc, n), "encoder_start_loc");
            ATTN__CHECKF(m, md->encoder_start_loc[n] == md->num_encoder_tokens, IA,
                         "encoder_start_loc[%d] = %d but num_encoder_tokens = %d", n,
                         md->encoder_start_loc[n], md->num_encoder_tokens);
            f->q_start = f->k_start = md->encoder_start_loc;
            f->prefill_tokens = md->num_encoder_tokens;
            f->prefill_lens = md->encoder_seq_lens;
            break;
        case ATTN_ENCODER_DECODER:  /* decoder queries over the encoder's K/V */
            ATTN__CHECKF(m, md->encoder_seq_lens && md->cross_block_tables, IA,
                         "encoder_seq_lens or cross_block_tables is NULL (ENCODER_DECODER layer)");
            f->cross = 1;
            f->tables = md->cross_block_tables; f->max_blocks = md->max_cross_blocks_per_seq;
            f->prefill_lens = md->encoder_seq_lens;
            f->decode_lens = md->encoder_seq_lens + n;
            f->paged_prefill = key.data == NULL;  /* encoder K/V already cached */
            if (!f->paged_prefill && n > 0) {
                const int32_t *esl = md->encoder_start_loc;
                ATTN__CHECKF(m, esl != NULL, IA, "encoder_start_loc is NULL with key rows given");
                ATTN__TRYF(m, attn__offsets_check(esl, n), "encoder_start_loc");
                ATTN__CHECKF(m, esl[n] == md->num_encoder_tokens, IA,
                             "encoder_start_loc[%d] = %d but num_encoder_tokens = %d", n, esl[n],
                             md->num_encoder_tokens);
                for (int s = 0; s < n; s++)
                    ATTN__CHECKF(m, esl[s + 1] - esl[s] == md->encoder_seq_lens[s], IA,
                                 "encoder_seq_lens[%d] = %d but encoder_start_loc gives %d rows",
                                 s, md->encoder_seq_lens[s], esl[s + 1] - esl[s]);
                f->k_start = esl;
                f->slots = cache ? md->cross_slot_mapping : NULL;
                f->write_tokens = md->num_encoder_tokens;
            }
            break;
        default: return ATTN__FAIL(attn__failf(m, IA, "layer->type = %d", (int)L->type));
    }
    ATTN__CHECKF(m, md->num_tokens == 0 ||
                     (int64_t)md->num_tokens == (int64_t)f->prefill_tokens + f->decodes, IA,
                 "num_tokens = %d (declared) but the step has %d prefill + %d decode tokens",
                 md->num_tokens, f->prefill_tokens, f->decodes);
    ATTN__CHECKF(m, cache || (!f->paged_prefill && f->decodes == 0), IA,
                 "cache is NULL but the step reads it (%s)",
                 f->decodes ? "decodes" : "a cached prefix");
    ATTN__CHECKF(m, !(f->paged_prefill || f->decodes) || f->prefill_lens || f->decode_lens, IA,
                 "seq_lens is NULL but the step reads the cache");
    ATTN__CHECKF(m, !((f->paged_prefill && n > 0) || f->decodes) || f->tables != NULL, IA,
                 "%s is NULL but the step reads the cache",
                 f->cross ? "cross_block_tables" : "block_tables");
    return ATTN_OK;
}

/* attn_forward's rows: dtypes and strides (the kernels' checks repeated with messages). */
ATTN__PRIVATE attn_status attn__forward_rows(const attn_params *p, attn_rows r, const char *name,
                                             int64_t width, const char *width_name,
                                             const attn__msg *m) {
    ATTN__CHECKF(m, attn__is_activation_dtype(r.dtype), ATTN_ERR_INVALID_ARG,
                 "%s.dtype = %d is not f32, f16 or bf16", name, (int)r.dtype);
    ATTN__CHECKF(m, r.stride == 0 || r.stride >= width, ATTN_ERR_INVALID_ARG,
                 "%s.stride = %lld is below %s = %d * %d = %lld", name, (long long)r.stride,
                 width_name, (int)(width / p->head_size), p->head_size, (long long)width);
    return ATTN_OK;
}

/* The first entry of row[0, n) (ids >= 0) whose id an earlier entry has, or -1. bits: a zeroed
   bitmap of ATTN__ID_WINDOW ids, zeroed again on return; ids are taken a window at a time, so
   nothing is allocated and a row whose ids share a window is read twice. */
ATTN__PRIVATE int attn__row_repeat(const int32_t *row, int n, uint32_t *bits) {
    int64_t base = 0;
    int found = -1;
    for (int i = 0; i < n; i++) base = i ? ATTN__MIN(base, row[i]) : row[i];
    while (n > 0 && found < 0) {
        int64_t next = ATTN__INT64_MAX;
        for (int i = 0; i < n && found < 0; i++) {
            int64_t d = row[i] - base;
            if (d >= ATTN__ID_WINDOW) next = ATTN__MIN(next, row[i]);
            if (d < 0 || d >= ATTN__ID_WINDOW) continue;
            if (bits[d >> 5] & (1u << (d & 31))) found = i;
            bits[d >> 5] |= 1u << (d & 31);
        }
        for (int i = 0; i < n; i++) {  /* clear what this window set */
            int64_t d = row[i] - base;
            if (d >= 0 && d < ATTN__ID_WINDOW) bits[d >> 5] &= ~(1u << (d & 31));
        }
        if (next == ATTN__INT64_MAX) break;
        base = next;
    }
    return found;
}

/* The first index below n of id in row (attn__row_repeat's earlier entry). */
ATTN__PRIVATE int attn__row_find(const int32_t *row, int n, int32_t id) {
    for (int i = 0; i < n; i++)
        if (row[i] == id) return i;
    return n;
}

/* exec as attn__call_resolve checks it, each refusal with its field and value. */
ATTN__PRIVATE attn_status attn__forward_exec_check(const attn_exec *exec, int onednn,
                                                   const attn__msg *m) {
    if (!exec) return ATTN_OK;
    ATTN__CHECKF(m, exec->num_threads >= 0, ATTN_ERR_INVALID_ARG, "exec->num_threads = %d",
                 exec->num_threads);
    ATTN__CHECKF(m, (int)exec->isa >= 0 && exec->isa < ATTN_ISA_COUNT, ATTN_ERR_INVALID_ARG,
                 "exec->isa = %d is not an attn_isa", (int)exec->isa);
    ATTN__CHECKF(m, onednn || exec->gemm == ATTN_GEMM_NATIVE || exec->gemm == ATTN_GEMM_ONEDNN,
                 ATTN_ERR_INVALID_ARG, "exec->gemm = %d is not an attn_gemm", (int)exec->gemm);
    ATTN__CHECKF(m, attn_isa_supported(exec->isa), ATTN_ERR_UNSUPPORTED,
                 "exec->isa = %s, which this CPU or build lacks (attn_cpu_features: %s)",
                 attn_isa_name(exec->isa), attn_cpu_features());
    return ATTN_OK;
}

/* The cache against the layer (and md->pool), with messages, before the kernels' own checks
   (which say only "invalid argument"). */
ATTN__PRIVATE attn_status attn__forward_cache_check(const attn_params *p, const attn_metadata *md,
                                                    const attn_kv_cache *c, const attn__msg *m) {
    const attn_block_pool *pool = md->pool;
    if (!c) return ATTN_OK;
    ATTN__CHECKF(m, attn__kv_cache_ok(c), ATTN_ERR_INVALID_ARG,
                 "cache is not a valid attn_kv_cache (key %s, value %s, num_blocks = %d, "
                 "block_size = %d, num_kv_heads = %d, head_size = %d, dtype = %d, k_scale = %g, "
                 "v_scale = %g)", c->key ? "set" : "NULL", c->value ? "set" : "NULL",
                 c->num_blocks, c->block_size, c->num_kv_heads, c->head_size, (int)c->dtype,
                 (double)c->k_scale, (double)c->v_scale);
    ATTN__CHECKF(m, c->num_kv_heads == p->num_kv_heads && c->head_size == p->head_size,
                 ATTN_ERR_INVALID_ARG, "cache num_kv_heads %d, head_size %d but the layer's "
                 "num_kv_heads %d, head_size %d", c->num_kv_heads, c->head_size,
                 p->num_kv_heads, p->head_size);
    if (!pool) return ATTN_OK;
    ATTN__CHECKF(m, attn__pool_ok(pool), ATTN_ERR_INVALID_ARG,
                 "md->pool is not an initialised attn_block_pool");
    ATTN__CHECKF(m, pool->block_size == c->block_size, ATTN_ERR_INVALID_ARG,
                 "cache block_size %d but the pool's block_size %d", c->block_size,
                 pool->block_size);
    ATTN__CHECKF(m, pool->num_blocks <= c->num_blocks, ATTN_ERR_INVALID_ARG,
                 "the pool has %d blocks but the cache only %d", pool->num_blocks,
                 c->num_blocks);
    return ATTN_OK;
}

/* Each row the step reads: with use 0 its blocks inside the row and the cache (before the
   kernels' checks, which carry no message); with use 1 (after the slots' consistency, which
   names a wrong row stride better) in use in md->pool when given, and no block twice (a row
   that names one twice, or a freed one, reads another sequence's keys). s runs over the
   prefills that read the cache, then the decodes. */
ATTN__PRIVATE attn_status attn__forward_tables_check(const attn_metadata *md,
                                                     const attn__forward_shape *f,
                                                     const attn_kv_cache *c, int use,
                                                     const attn__msg *m) {
    uint32_t bits[ATTN__ID_WINDOW / 32];
    const char *tname = f->cross ? "cross_block_tables" : "block_tables";
    const char *lname = f->cross ? "encoder_seq_lens" : "seq_lens";
    const char *mname = f->cross ? "max_cross_blocks_per_seq" : "max_blocks_per_seq";
    int first = f->paged_prefill ? 0 : f->prefills, n = f->prefills + f->decodes;
    if (!c || !f->tables || first >= n) return ATTN_OK;
    ATTN__CHECKF(m, f->max_blocks >= 0, ATTN_ERR_INVALID_ARG, "%s = %d", mname, f->max_blocks);
    memset(bits, 0, sizeof bits);
    for (int s = first; s < n; s++) {
        int32_t len = s < f->prefills ? f->prefill_lens[s] : f->decode_lens[s - f->prefills];
        int64_t blocks = ((int64_t)len + c->block_size - 1) / c->block_size;
        const int32_t *row = f->tables + (size_t)s * (size_t)f->max_blocks;
        ATTN__CHECKF(m, len >= 0, ATTN_ERR_INVALID_ARG, "%s[%d] = %d", lname, s, len);
        ATTN__CHECKF(m, blocks <= f->max_blocks, ATTN_ERR_OUT_OF_RANGE,
                     "%s[%d] = %d needs %lld blocks of %d but %s = %d", lname, s, len,
                     (long long)blocks, c->block_size, mname, f->max_blocks);
        for (int b = 0; b < (int)blocks; b++) {
            ATTN__CHECKF(m, row[b] >= 0 && row[b] < c->num_blocks, ATTN_ERR_OUT_OF_RANGE,
                         "%s[%d][%d] = %d is outside the cache (num_blocks = %d)", tname, s, b,
                         row[b], c->num_blocks);
            ATTN__CHECKF(m, !use || !md->pool || f->cross ||
                             (row[b] < md->pool->num_blocks && md->pool->refcount[row[b]] > 0),
                         ATTN_ERR_INVALID_ARG, "%s[%d][%d] = %d is not a block in use in "
                         "md->pool (freed, or the pool re-initialised)", tname, s, b, row[b]);
        }
        if (!use) continue;
        int rep = attn__row_repeat(row, (int)blocks, bits);
        ATTN__CHECKF(m, rep < 0, ATTN_ERR_INVALID_ARG,
                     "%s[%d] names block %d twice (entries %d and %d)", tname, s,
                     rep < 0 ? 0 : row[rep], rep < 0 ? 0 : attn__row_find(row, rep, row[rep]),
                     rep);
    }
    return ATTN_OK;
}

/* Rows the step writes or reads that are NULL, and a step that reads the cache without slots
   to write its new tokens (allowed for a profiling run only). */
ATTN__PRIVATE attn_status attn__forward_data_check(const attn_metadata *md,
                                                   const attn__forward_shape *f, attn_rows query,
                                                   attn_rows key, attn_rows value, attn_rows out,
                                                   const attn_kv_cache *c, const attn__msg *m) {
    int reads = f->decodes > 0 || (f->paged_prefill && f->prefills > 0);
    ATTN__CHECKF(m, f->cross || !c || !reads || md->slot_mapping || md->profile_run,
                 ATTN_ERR_INVALID_ARG, "slot_mapping is NULL on a step that reads the cache: "
                 "its new tokens would not be written (set md->profile_run = 1 for a profiling "
                 "run)");
    if (f->slots && f->write_tokens > 0)
        ATTN__CHECKF(m, key.data && value.data, ATTN_ERR_INVALID_ARG,
                     "%s.data is NULL but %s gives %d tokens to write", key.data ? "value" : "key",
                     f->cross ? "cross_slot_mapping" : "slot_mapping", f->write_tokens);
    if (f->prefill_tokens > 0 || f->decodes > 0)
        ATTN__CHECKF(m, query.data && out.data, ATTN_ERR_INVALID_ARG,
                     "%s.data is NULL with %d prefill and %d decode tokens",
                     query.data ? "out" : "query", f->prefill_tokens, f->decodes);
    /* the prefills read their own rows: the query tokens' (self) or the encoder tokens' (cross) */
    int kv_rows = f->cross ? md->num_encoder_tokens : f->prefill_tokens;
    if (!f->paged_prefill && f->prefill_tokens > 0 && kv_rows > 0)
        ATTN__CHECKF(m, key.data && value.data, ATTN_ERR_INVALID_ARG,
                     "%s.data is NULL but the prefills read %d keys and values from the rows",
                     key.data ? "value" : "key", kv_rows);
    return ATTN_OK;
}

/* After the kernels' checks, before anything is written: the copy-on-write pairs, and every
   slot against its range and (self-attention with block tables) against its position's entry
   in the block tables. */
ATTN__PRIVATE attn_status attn__forward_consistency(const attn_metadata *md,
                                                    const attn__forward_shape *f,
                                                    const attn_kv_cache *cache,
                                                    const attn__msg *m) {
    int nc = md->num_blocks_to_copy;
    if (nc > 0) {
        const int64_t *pr = md->blocks_to_copy;
        ATTN__CHECKF(m, attn__kv_cache_ok(cache), ATTN_ERR_INVALID_ARG,
                     "cache is not a valid attn_kv_cache (blocks_to_copy needs one)");
        for (int i = 0; i < nc; i++)
            ATTN__CHECKF(m, pr[2 * i] >= 0 && pr[2 * i] < cache->num_blocks &&
                             pr[2 * i + 1] >= 0 && pr[2 * i + 1] < cache->num_blocks,
                         ATTN_ERR_OUT_OF_RANGE,
                         "blocks_to_copy[%d] = (%lld, %lld) but the cache has %d blocks", i,
                         (long long)pr[2 * i], (long long)pr[2 * i + 1], cache->num_blocks);
        ATTN__CHECKF(m, !attn__pairs_conflict(pr, nc, 1), ATTN_ERR_INVALID_ARG,
                     "blocks_to_copy: a destination twice, or a block both source and "
                     "destination");
    }
    if (!f->slots || !cache || f->write_tokens == 0) return ATTN_OK;
    const char *name = f->cross ? "cross_slot_mapping" : "slot_mapping";
    int64_t bs = cache->block_size, cap = (int64_t)cache->num_blocks * bs;
    for (int t = 0; t < f->write_tokens; t++)
        ATTN__CHECKF(m, f->slots[t] >= -1 && f->slots[t] < cap, ATTN_ERR_OUT_OF_RANGE,
                     "%s[%d] = %lld is outside the cache (num_blocks * block_size = %lld)", name,
                     t, (long long)f->slots[t], (long long)cap);
    /* cross: the encoder tokens of each prefill, at positions 0 .. encoder_seq_lens[s) */
    const int32_t *tables = f->cross ? md->cross_block_tables : md->block_tables;
    const int32_t *lens = f->cross ? md->encoder_seq_lens : md->seq_lens;
    const char *tname = f->cross ? "cross_block_tables" : "block_tables";
    int mb = f->cross ? md->max_cross_blocks_per_seq : md->max_blocks_per_seq;
    if (!tables || !lens || mb <= 0) return ATTN_OK;
    for (int s = 0; s < f->prefills + (f->cross ? 0 : f->decodes); s++) {
        int pre = s < f->prefills;
        const int32_t *st = f->cross ? f->k_start : f->q_start;  /* the written rows */
        int64_t t0 = pre ? st[s] : (int64_t)f->prefill_tokens + (s - f->prefills);
        int64_t lq = pre ? (int64_t)st[s + 1] - st[s] : 1;
        const int32_t *row = tables + (size_t)s * (size_t)mb;
        for (int64_t i = 0; i < lq; i++) {
            int64_t slot = f->slots[t0 + i], pos = lens[s] - lq + i, b = pos / bs;
            if (slot == -1) continue;
            ATTN__CHECKF(m, b < mb, ATTN_ERR_INVALID_ARG,
                         "%s[%lld]: sequence %d's position %lld needs %s[%d][%lld] but its rows "
                         "have %d entries", name, (long long)(t0 + i), s, (long long)pos, tname,
                         s, (long long)b, mb);
            int64_t want = (int64_t)row[b] * bs + pos % bs;
            ATTN__CHECKF(m, slot == want, ATTN_ERR_INVALID_ARG,
                         "%s[%lld] = %lld but sequence %d's position %lld is at "
                         "%s[%d][%lld] * %lld + %lld = %lld (rows in batch order, row stride "
                         "%s = %d, %s counting the new tokens)", name, (long long)(t0 + i),
                         (long long)slot, s, (long long)pos, tname, s, (long long)b,
                         (long long)bs, (long long)(pos % bs), (long long)want,
                         f->cross ? "max_cross_blocks_per_seq" : "max_blocks_per_seq", mb,
                         f->cross ? "encoder_seq_lens" : "seq_lens");
        }
    }
    return ATTN_OK;
}

/* Lays out attn_forward's workspace, [prefill plan][decode plan], each part by its own kernel's
   layout function, at base into pre and dec (base NULL: only measures); returns its size. The
   prefills' packed bf16 value tiles (see [M]) follow from the metadata's longest keys. */
ATTN__PRIVATE size_t attn__forward_ws_layout(const attn__call *c, const attn_layer *L,
                                             const attn_metadata *md, const attn__forward_shape *f,
                                             char *base, attn__prefill_plan *pre,
                                             attn__decode_plan *dec) {
    int tiles = attn__value_cache_tiles(c, L->params.head_size, attn__forward_longest_keys(L, md));
    size_t pre_bytes = attn__prefill_ws_layout(c, &L->params, f->prefills, tiles, base, pre);
    size_t at = attn__align_up(pre_bytes);
    if (!f->decodes) return at;
    return at + attn__decode_ws_layout(&L->params, c, f->decode_lens, f->decodes,
                                       base ? base + at : NULL, dec);
}

ATTNDEF size_t attn_forward_workspace_size(const attn_layer *layer, const attn_metadata *md,
                                           const attn_exec *exec) {
    attn__forward_shape f;
    attn__call c;
    if (!layer || !md || attn_params_check(&layer->params) != ATTN_OK) return 0;
    if (md->num_prefills < 0 || md->num_decode_tokens < 0 ||
        (exec && exec->num_threads < 0)) return 0;
    /* the prefill part depends on the sequence count and the longest keys, the decode part on
       decode lengths */
    memset(&f, 0, sizeof f);
    f.prefills = md->num_prefills;
    f.decodes = layer->type == ATTN_DECODER ||
                layer->type == ATTN_ENCODER_DECODER ? md->num_decode_tokens : 0;
    f.decode_lens = layer->type == ATTN_ENCODER_DECODER ? md->encoder_seq_lens : md->seq_lens;
    if (f.decodes && !f.decode_lens) return 0;
    if (f.decode_lens) f.decode_lens += f.prefills;
    attn__call_of(exec, layer->backend == ATTN_BACKEND_IPEX, &c);
    return attn__forward_ws_layout(&c, layer, md, &f, NULL, NULL, NULL);
}

ATTNDEF size_t attn_forward_workspace_bound(const attn_layer *layer, int max_seqs, int max_tokens,
                                            int64_t max_context, const attn_exec *exec) {
    attn__call c;
    if (!layer || attn_params_check(&layer->params) != ATTN_OK) return 0;
    if (max_seqs < 1 || max_tokens < 1 || max_context < 1 || max_context > ATTN__INT_MAX ||
        (exec && exec->num_threads < 0)) return 0;
    attn__call_of(exec, layer->backend == ATTN_BACKEND_IPEX, &c);
    /* every sequence of a step has a new token: at most n prefills, or n decodes */
    int n = ATTN__MIN(max_seqs, max_tokens);
    int tiles = attn__value_cache_tiles(&c, layer->params.head_size, max_context);
    size_t bound = attn__align_up(attn__prefill_ws_layout(&c, &layer->params, n, tiles, NULL,
                                                          NULL));
    /* the decode part grows with the decodes' partitions, each as long as the longest
       context; one sequence holding all of them, with room for stacks of n, plus the
       per-sequence offsets of n */
    int64_t parts = (max_context + ATTN_PARTITION_TOKENS - 1) / ATTN_PARTITION_TOKENS;
    if (parts * n > ATTN__INT_MAX / ATTN_PARTITION_TOKENS) return 0;
    int32_t all[1];
    all[0] = (int32_t)(parts * n * ATTN_PARTITION_TOKENS);
    size_t dec = attn__decode_ws_layout_for(&layer->params, &c, all, 1, n, NULL, NULL);
    size_t offsets = attn__align_up(sizeof(int64_t) * ((size_t)n + 1));
    if (dec > ATTN__SIZE_MAX / 2 - bound - offsets) return 0;
    return bound + dec + offsets;
}

typedef struct attn__forward_run {
    const attn__kernels *k;
    const attn__prefill_plan *prefill; int prefill_items;
    const attn__decode_run *decode;
} attn__forward_run;

/* Items [0, prefill_items) are prefill tiles, the rest (sequence, KV head) decodes. */
ATTN__PRIVATE void attn__forward_task(void *ctx, int item, int thread) {
    const attn__forward_run *run = (const attn__forward_run *)ctx;
    if (item < run->prefill_items) attn__prefill_item_on(run->k, run->prefill, item, thread);
    else attn__decode_v1_item(run->decode, item - run->prefill_items, thread);
}

ATTNDEF attn_status attn_forward(const attn_layer *layer, const attn_exec *exec, attn_rows query,
                                 attn_rows key, attn_rows value, attn_kv_cache *cache,
                                 const attn_metadata *md, attn_rows out, void *ws,
                                 size_t ws_bytes) {
    attn__call c;
    attn__forward_shape f;
    attn__args a;
    attn__prefill_plan pre;
    attn__decode_plan dec;
    attn__decode_run drun;
    attn__forward_run run;
    attn__gemm_call call;
    int64_t pre_items = 0;
    attn__msg msg = {NULL, 0}, *m = &msg;
    if (exec && exec->error_msg && exec->error_msg_bytes) {
        msg.buf = exec->error_msg; msg.bytes = exec->error_msg_bytes;
        msg.buf[0] = '\0';
    }
    ATTN__TRY(attn__forward_resolve(layer, md, key, cache, &f, m));
    ATTN__TRY(attn__forward_exec_check(exec, layer->backend == ATTN_BACKEND_IPEX, m));
    ATTN__TRYF(m, attn__call_resolve(exec, layer->backend == ATTN_BACKEND_IPEX, &c), "exec");
    const attn_params *p = &layer->params;
    int64_t width = (int64_t)p->num_heads * p->head_size;
    int64_t kv_width = (int64_t)p->num_kv_heads * p->head_size;
    ATTN__TRY(attn__forward_rows(p, query, "query", width, "num_heads * head_size", m));
    ATTN__TRY(attn__forward_rows(p, out, "out", width, "num_heads * head_size", m));
    if (key.data)
        ATTN__TRY(attn__forward_rows(p, key, "key", kv_width, "num_kv_heads * head_size", m));
    if (value.data)
        ATTN__TRY(attn__forward_rows(p, value, "value", kv_width, "num_kv_heads * head_size", m));
    memset(&pre, 0, sizeof pre);
    memset(&dec, 0, sizeof dec);
    size_t need = attn__forward_ws_layout(&c, layer, md, &f, (char *)ws, &pre, &dec);
    ATTN__CHECKF(m, ws != NULL && ws_bytes >= need, ATTN_ERR_WORKSPACE_TOO_SMALL,
                 "ws_bytes = %llu but attn_forward_workspace_size gives %llu%s",
                 (unsigned long long)ws_bytes, (unsigned long long)need, ws ? "" : " (ws is NULL)");
    ATTN__TRY(attn__forward_cache_check(p, md, cache, m));
    ATTN__TRY(attn__forward_tables_check(md, &f, cache, 0, m));
    ATTN__TRY(attn__forward_data_check(md, &f, query, key, value, out, cache, m));
    /* the prefills: over the new rows, or (paged) over the cache */
    memset(&a, 0, sizeof a);
    a.params = p; a.q = query; a.out = out; a.k = key; a.v = value;
    a.cache = f.paged_prefill ? cache : NULL;
    a.tables = f.tables; a.max_blocks = f.max_blocks;
    a.q_start = f.q_start; a.k_start = f.k_start; a.seq_lens = f.prefill_lens;
    a.num_seqs = f.prefills; a.causal = f.causal;
    ATTN__TRYF(m, attn__prefill_check(&a),
               "the prefills (cache geometry, block tables, rows and their data)");
    ATTN__TRYF(m, attn__prefill_plan_fill(&pre, &c, &a, &pre_items), "the prefills' plan");
    int64_t work = attn__args_work(&a) + (int64_t)f.write_tokens * kv_width * 2;
    if (f.decodes) {  /* one query row each, after the prefill tokens */
        size_t qsz = attn_dtype_size(query.dtype), osz = attn_dtype_size(out.dtype);
        int64_t q_row = query.stride ? query.stride : width;
        int64_t o_row = out.stride ? out.stride : width;
        memset(&a, 0, sizeof a);
        ATTN__CHECKF(m, query.data && out.data, ATTN_ERR_INVALID_ARG,
                     "%s.data is NULL with num_decode_tokens = %d", query.data ? "out" : "query",
                     f.decodes);
        a.params = p; a.q = query; a.out = out; a.cache = cache;
        a.q.data = (char *)query.data + (size_t)(f.prefill_tokens * q_row) * qsz;
        a.out.data = (char *)out.data + (size_t)(f.prefill_tokens * o_row) * osz;
        /* NULL tables stay NULL (the decode check refuses them; no offset from NULL) */
        a.tables = f.tables && f.max_blocks >= 0 ? f.tables + (size_t)f.prefills * f.max_blocks
                   : f.tables;  /* a negative row stride is refused by the decode check */
        a.max_blocks = f.max_blocks;
        a.seq_lens = f.decode_lens; a.num_seqs = f.decodes; a.version = ATTN_PAGED_V1;
        ATTN__TRYF(m, attn__decode_check(&a), "the decodes (cache geometry, block tables, rows)");
        ATTN__TRYF(m, attn__decode_plan_fill(&dec, &c, &a), "the decodes' plan");
        work += attn__args_work(&a);
    }
    c.work = work;
    /* decode items are decodes x spans, and spans <= Hk */
    ATTN__CHECKF(m, pre_items + (int64_t)f.decodes * p->num_kv_heads <= 0x7fffffff,
                 ATTN_ERR_INVALID_ARG, "the step has more than 2^31 - 1 work items");
    ATTN__TRY(attn__forward_consistency(md, &f, cache, m));
    ATTN__TRY(attn__forward_tables_check(md, &f, cache, 1, m));
    if (f.slots)
        ATTN__TRYF(m, attn__write_kv_check(cache, key, value, f.slots, f.write_tokens),
                   "writing the new K/V (cache, key and value rows)");
    ATTN__TRYF(m, attn__gemm_begin(&c, &pre, pre_items, &call), "oneDNN");  /* before any write */
    for (int i = 0; i < md->num_blocks_to_copy; i++)  /* checked: in range, no conflicts */
        attn__copy_block(cache, cache, md->blocks_to_copy[2 * i], md->blocks_to_copy[2 * i + 1]);
    if (f.slots) {  /* the slots' range is checked again before anything is written */
        attn_status st = attn__write_kv(&c, cache, key, value, f.slots, f.write_tokens);
        if (st != ATTN_OK) {
            attn__gemm_end(&pre, &call);
            return attn__fail_default(m, st, "writing the new K/V (key, value, slot_mapping)");
        }
    }
    attn__value_caches_reset(&pre, c.threads);
    drun.plan = &dec; drun.k = c.k;
    run.k = c.k; run.prefill = &pre; run.prefill_items = (int)pre_items; run.decode = &drun;
    int items = (int)pre_items + (f.decodes ? f.decodes * dec.spans : 0);
    if (f.decodes) attn__decode_run_stacks(&c, &drun);  /* the decodes' shared partitions */
    attn__run_items(&c, items, attn__forward_task, &run);
    ATTN__TRYF(m, attn__gemm_end(&pre, &call), "oneDNN");
    return ATTN_OK;
}

/* ---------------------------------------------------------------------------------------------
   [Ra] Batch builder: checks the whole step (blocks included), then appends and fills. */

/* Lays out a batch's arrays at base (NULL: only measures); returns the bytes from base. */
ATTN__PRIVATE size_t attn__batch_layout(attn_batch *b, char *base, size_t S, size_t T, size_t MB) {
    size_t at = 0;
    if (base) b->slot_mapping = (int64_t *)(void *)(base + at);
    at += attn__align_up(sizeof(int64_t) * T);
    if (base) b->blocks_to_copy = (int64_t *)(void *)(base + at);
    at += attn__align_up(2 * sizeof(int64_t) * S);
    if (base) b->seq_lens = (int32_t *)(void *)(base + at);
    at += attn__align_up(sizeof(int32_t) * S);
    if (base) b->context_lens = (int32_t *)(void *)(base + at);
    at += attn__align_up(sizeof(int32_t) * S);
    if (base) b->query_start_loc = (int32_t *)(void *)(base + at);
    at += attn__align_up(sizeof(int32_t) * (S + 1));
    if (base) b->block_tables = (int32_t *)(void *)(base + at);
    at += attn__align_up(sizeof(int32_t) * S * MB);
    return at;
}

ATTNDEF size_t attn_batch_bytes(int max_seqs, int max_tokens, int max_blocks_per_seq) {
    if (max_seqs < 1 || max_tokens < 1 || max_blocks_per_seq < 1) return 0;
    size_t S = (size_t)max_seqs, T = (size_t)max_tokens, MB = (size_t)max_blocks_per_seq;
    size_t lim = ATTN__SIZE_MAX / 16 - 1024;  /* each array, with its rounding, stays below */
    if (T > lim / 8 || S > lim / 16 || MB > lim / 4 / S) return 0;
    return ATTN__ALIGN + attn__batch_layout(NULL, NULL, S, T, MB);
}

ATTNDEF attn_status attn_batch_init(attn_batch *batch, int max_seqs, int max_tokens,
                                    int max_blocks_per_seq, void *mem, size_t bytes) {
    size_t need = attn_batch_bytes(max_seqs, max_tokens, max_blocks_per_seq);
    attn__msg msg = {NULL, 0}, *m = &msg;
    ATTN__CHECK(batch != NULL, ATTN_ERR_INVALID_ARG);
    msg.buf = batch->error_msg; msg.bytes = sizeof batch->error_msg;
    msg.buf[0] = '\0';
    ATTN__CHECKF(m, mem != NULL, ATTN_ERR_INVALID_ARG, "mem is NULL");
    ATTN__CHECKF(m, max_seqs >= 1 && max_tokens >= 1 && max_blocks_per_seq >= 1,
                 ATTN_ERR_INVALID_ARG, "max_seqs = %d, max_tokens = %d, max_blocks_per_seq = %d: "
                 "each must be >= 1", max_seqs, max_tokens, max_blocks_per_seq);
    ATTN__CHECKF(m, need != 0, ATTN_ERR_INVALID_ARG,
                 "max_seqs = %d, max_tokens = %d, max_blocks_per_seq = %d: the size overflows",
                 max_seqs, max_tokens, max_blocks_per_seq);
    ATTN__CHECKF(m, bytes >= need, ATTN_ERR_WORKSPACE_TOO_SMALL,
                 "bytes = %llu but attn_batch_bytes gives %llu", (unsigned long long)bytes,
                 (unsigned long long)need);
    char *base = (char *)(((uintptr_t)mem + ATTN__ALIGN - 1) & ~(uintptr_t)(ATTN__ALIGN - 1));
    memset(batch, 0, sizeof *batch);
    batch->max_seqs = max_seqs; batch->max_tokens = max_tokens;
    batch->max_blocks_per_seq = max_blocks_per_seq;
    attn__batch_layout(batch, base, (size_t)max_seqs, (size_t)max_tokens,
                       (size_t)max_blocks_per_seq);
    return ATTN_OK;
}

/* Sequence i of a step as the caller sees it: its length what the caller expects, and every
   entry of its table a block in use, named once (a table that lists a freed block, or one
   twice, would read another sequence's keys). bits: attn__row_repeat's zeroed bitmap. */
ATTN__PRIVATE attn_status attn__batch_seq_check(const attn_block_pool *pool, const attn_seq *q,
                                                int i, const int64_t *expect_len, uint32_t *bits,
                                                const attn__msg *m) {
    ATTN__CHECKF(m, !expect_len || q->len == expect_len[i], ATTN_ERR_INVALID_ARG,
                 "seqs[%d]->len = %lld but expect_len[%d] = %lld (released, built twice for "
                 "one step, or appended to outside the builder?)", i, (long long)q->len, i,
                 expect_len ? (long long)expect_len[i] : 0LL);
    for (int j = 0; j < q->num_blocks; j++)
        ATTN__CHECKF(m, attn__seq_ids_live(pool, q, j, j + 1), ATTN_ERR_INVALID_ARG,
                     "seqs[%d]->block_table[%d] = %d is not a block in use in the pool (freed, "
                     "or the pool re-initialised)", i, j, q->block_table[j]);
    int rep = attn__row_repeat(q->block_table, q->num_blocks, bits);
    ATTN__CHECKF(m, rep < 0, ATTN_ERR_INVALID_ARG,
                 "seqs[%d]->block_table names block %d twice (entries %d and %d)", i,
                 rep < 0 ? 0 : q->block_table[rep], rep < 0 ? 0 :
                 attn__row_find(q->block_table, rep, q->block_table[rep]), rep);
    return ATTN_OK;
}

ATTNDEF attn_status attn_batch_build(attn_batch *batch, attn_block_pool *pool,
                                     attn_seq *const *seqs, const int32_t *num_new, int n,
                                     attn_metadata *md) {
    return attn_batch_build_checked(batch, pool, seqs, NULL, num_new, n, md);
}

ATTNDEF attn_status attn_batch_build_checked(attn_batch *batch, attn_block_pool *pool,
                                             attn_seq *const *seqs, const int64_t *expect_len,
                                             const int32_t *num_new, int n, attn_metadata *md) {
    const attn_status IA = ATTN_ERR_INVALID_ARG, OOR = ATTN_ERR_OUT_OF_RANGE;
    const attn_status CAP = ATTN_ERR_CAPACITY;
    uint32_t bits[ATTN__ID_WINDOW / 32];
    attn__msg msg = {NULL, 0}, *m = &msg;
    ATTN__CHECK(batch != NULL, IA);
    msg.buf = batch->error_msg; msg.bytes = sizeof batch->error_msg;
    msg.buf[0] = '\0';
    ATTN__CHECKF(m, batch->slot_mapping && batch->blocks_to_copy && batch->seq_lens &&
                     batch->context_lens && batch->query_start_loc && batch->block_tables &&
                     batch->max_seqs >= 1 && batch->max_tokens >= 1 &&
                     batch->max_blocks_per_seq >= 1, IA,
                 "batch is not initialised (attn_batch_init)");
    ATTN__CHECKF(m, md != NULL, IA, "md is NULL");
    ATTN__CHECKF(m, attn__pool_ok(pool), IA, "pool is NULL or not initialised");
    ATTN__CHECKF(m, n >= 0 && (n == 0 || (seqs != NULL && num_new != NULL)), IA,
                 "n = %d with seqs or num_new NULL", n);
    ATTN__CHECKF(m, n <= batch->max_seqs, CAP, "n = %d sequences but the batch's max_seqs = %d",
                 n, batch->max_seqs);
    memset(bits, 0, sizeof bits);
    int bs = pool->block_size, mb = batch->max_blocks_per_seq;
    int64_t tokens = 0, need = 0, *last_cow = batch->blocks_to_copy;  /* scratch until step 2 */
    for (int i = 0; i < n; i++) {
        const attn_seq *q = seqs[i];
        ATTN__CHECKF(m, q != NULL, IA, "seqs[%d] is NULL", i);
        ATTN__CHECKF(m, attn__seq_ok(pool, q), IA,
                     "seqs[%d] is not a valid sequence of this pool (len = %lld, num_blocks = "
                     "%d, max_blocks = %d, block_size = %d)", i, (long long)q->len,
                     q->num_blocks, q->max_blocks, bs);
        ATTN__CHECKF(m, num_new[i] >= 1, IA,
                     "num_new[%d] = %d: a sequence of the step has at least one new token", i,
                     num_new[i]);
        ATTN__TRY(attn__batch_seq_check(pool, q, i, expect_len, bits, m));
        for (int j = 0; j < i; j++)
            ATTN__CHECKF(m, seqs[j] != q && (seqs[j]->block_table != q->block_table ||
                                             q->max_blocks == 0),
                         IA, "seqs[%d] and seqs[%d] are the same sequence (or share a table)", j,
                         i);
        ATTN__CHECKF(m, q->len + num_new[i] <= ATTN__INT_MAX, OOR,
                     "seqs[%d]: length %lld + %d new tokens does not fit seq_lens (int32)", i,
                     (long long)q->len, num_new[i]);
        int64_t nb = attn_kv_blocks_for_tokens(q->len + num_new[i], bs);
        ATTN__CHECKF(m, nb <= q->max_blocks, OOR,
                     "seqs[%d] needs %lld blocks for %lld tokens but its table has max_blocks = "
                     "%d", i, (long long)nb, (long long)(q->len + num_new[i]), q->max_blocks);
        ATTN__CHECKF(m, nb <= mb, CAP,
                     "seqs[%d] needs %lld blocks but the batch's max_blocks_per_seq = %d", i,
                     (long long)nb, mb);
        tokens += num_new[i];
        ATTN__CHECKF(m, tokens <= batch->max_tokens, CAP,
                     "the step has more than the batch's max_tokens = %d new tokens (at seqs[%d])",
                     batch->max_tokens, i);
        need += nb - q->num_blocks;
        last_cow[i] = -1;
        if (q->len % bs != 0) {  /* the last block takes new tokens: copied first if shared */
            int32_t last = q->block_table[q->num_blocks - 1];
            ATTN__CHECKF(m, last >= 0 && last < pool->num_blocks && pool->refcount[last] > 0, IA,
                         "seqs[%d]->block_table[%d] = %d is not a block in use", i,
                         q->num_blocks - 1, last);
            int64_t refs = pool->refcount[last];
            if (refs > 1)  /* each earlier copy of the same block in this step drops one */
                for (int j = 0; j < i; j++) refs -= last_cow[j] == last;
            if (refs > 1) { last_cow[i] = last; need++; }
        }
    }
    ATTN__CHECKF(m, need <= attn__pool_available(pool), ATTN_ERR_OUT_OF_BLOCKS,
                 "the step needs %lld free blocks (copy-on-write included) but the pool has %d",
                 (long long)need, attn__pool_available(pool));
    /* (2) commit: nothing below can fail */
    int decodes = 0, ncow = 0;
    while (decodes < n && num_new[n - 1 - decodes] == 1) decodes++;
    int prefills = n - decodes;
    int64_t t = 0;
    batch->query_start_loc[0] = 0;
    for (int i = 0; i < n; i++) {
        attn_seq *q = seqs[i];
        int64_t pair[1][2];
        int got = 0;
        int32_t before = (int32_t)q->len;
        attn_status st = attn_seq_append(pool, q, num_new[i], batch->slot_mapping + t, pair, &got);
        ATTN_ASSERT(st == ATTN_OK);  /* everything it checks was checked above */
        if (st != ATTN_OK) return attn__failf(m, st, "seqs[%d]: append failed", i);
        if (got) {  /* ncow <= i: the scratch entries it overwrites are spent */
            batch->blocks_to_copy[2 * ncow] = pair[0][0];
            batch->blocks_to_copy[2 * ncow + 1] = pair[0][1];
            ncow++;
        }
        if (i < prefills) {
            batch->context_lens[i] = before;
            batch->query_start_loc[i + 1] = batch->query_start_loc[i] + num_new[i];
        }
        batch->seq_lens[i] = (int32_t)q->len;
        int32_t *row = batch->block_tables + (size_t)i * (size_t)mb;
        memcpy(row, q->block_table, sizeof(int32_t) * (size_t)q->num_blocks);
        memset(row + q->num_blocks, 0, sizeof(int32_t) * (size_t)(mb - q->num_blocks));
        t += num_new[i];
    }
    memset(md, 0, sizeof *md);
    md->num_prefills = prefills;
    md->num_prefill_tokens = batch->query_start_loc[prefills];
    md->num_decode_tokens = decodes;
    md->slot_mapping = batch->slot_mapping;
    md->seq_lens = batch->seq_lens;
    md->query_start_loc = batch->query_start_loc;
    md->context_lens = batch->context_lens;
    md->block_tables = batch->block_tables;
    md->max_blocks_per_seq = mb;
    md->blocks_to_copy = ncow ? batch->blocks_to_copy : NULL;
    md->num_blocks_to_copy = ncow;
    md->num_seqs = n;
    md->num_tokens = (int)t;
    md->pool = pool;
    return ATTN_OK;
}
#endif /* ATTN_IMPLEMENTATION_INCLUDED */
#endif /* ATTN_IMPLEMENTATION */
#else /* ATTN__KERNEL_PASS */
/* ---------------------------------------------------------------------------------------------
   KERNEL PASS, sections [S] to [Y]. This part of the file is included once per ISA by [I] with
   ATTN__KERNEL_PASS set (stb_image_resize2's trick): the vector layer below maps ATTN__V* to
   one ISA, and every kernel is written once over it. Names get the ISA suffix through
   ATTN__FN (attn__prefill_item__avx2, ...); everything is #undef'd at the end of the pass. */

/* ---------------------------------------------------------------------------------------------
   [S] Vector layer.
   Each dtype of ATTN__DTYPE_LIST has, per ISA, ATTN__VLOAD_<U>(p): L elements as f32 (value /
   fold); PLAIN and EVEN_ODD dtypes ATTN__VSTORE_<U>(p, v) (rounded to nearest even); EVEN_ODD
   and FP8 dtypes ATTN__VLOAD2_<U>(p, a, b), two vectors at once (see ATTN__DTC_PLAIN). The INT
   dtypes' codes: ATTN__VLOAD_I8(p), L int8 codes, and ATTN__VLOAD2_I4(p, lo, hi), the low and
   the high nibbles of L bytes, as f32 (exact; attn__int_row_to_f32 applies the scales). */
/* A loop unrolled whole, so that the arrays it indexes stay in registers. */
#if defined(__GNUC__) && !defined(__clang__)
#define ATTN__UNROLL _Pragma("GCC unroll 16")
#elif defined(__clang__)
#define ATTN__UNROLL _Pragma("unroll")
#else
#define ATTN__UNROLL
#endif
#if ATTN__KERNEL_PASS == ATTN__ISA_SCALAR_PASS
#define ATTN__FN(name) name##__scalar
#define ATTN__PASS_ISA ATTN_ISA_SCALAR
#define ATTN__VF float
#define ATTN__L 1   /* lanes */
#define ATTN__MR 4  /* prefill micro-tile height: keys (scores) or head dims (outputs) */
#define ATTN__NV 4  /* prefill micro-tile width in vectors of query rows */
#define ATTN__VZERO() 0.0f
#define ATTN__VSET1(x) (x)
#define ATTN__VLOAD(p) (*(p))
#define ATTN__VSTORE(p, v) (*(p) = (v))
#define ATTN__VADD(a, b) ((a) + (b))
#define ATTN__VSUB(a, b) ((a) - (b))
#define ATTN__VMUL(a, b) ((a) * (b))
#define ATTN__VDIV(a, b) ((a) / (b))
#define ATTN__VFMA(a, b, c) ((a) * (b) + (c))
#define ATTN__VMAX(a, b) ((a) > (b) ? (a) : (b))
#define ATTN__VMIN(a, b) ((a) < (b) ? (a) : (b))
#define ATTN__VHSUM(v) (v)
#define ATTN__VHMAX(v) (v)
#define ATTN__VIOTA() 0.0f
#define ATTN__VLT_SELECT(x, y, a, b) ((x) < (y) ? (a) : (b))
#define ATTN__VIN_SELECT(c, lo, hi, a, b) ((c) >= (lo) && (c) <= (hi) ? (a) : (b))
#define ATTN__VEXP2I(n) attn__bits_f32((uint32_t)((int32_t)(n) + 127) << 23)
#define ATTN__VLOAD_F16(p) attn_f16_to_f32(*(p))
#define ATTN__VLOAD_BF16(p) attn_bf16_to_f32(*(p))
#define ATTN__VLOAD2_BF16(p, ev, od)                                                              \
    ((ev) = attn_bf16_to_f32((p)[0]), (od) = attn_bf16_to_f32((p)[1]))
#define ATTN__VSTORE_F16(p, v) (*(p) = attn_f32_to_f16(v))
#define ATTN__VSTORE_BF16(p, v) (*(p) = attn_f32_to_bf16(v))
#define ATTN__VLOAD_E5M2(p) attn_fp8_e5m2_to_f32(*(p))
#define ATTN__VLOAD_E4M3(p) (attn_fp8_e4m3_to_f32(*(p)) * (1.0f / 256.0f))  /* value / 256, exact */
#define ATTN__VLOAD_I8(p) ((float)*(const int8_t *)(const void *)(p))
#define ATTN__VLOAD2_I4(p, lo, hi)                                                                \
    ((lo) = attn__i4_code_to_f32(*(p)), (hi) = attn__i4_code_to_f32((uint8_t)(*(p) >> 4)))
#define ATTN__VTRANSUM(f, pairs) ((void)(pairs), (f)[0])  /* one key a lane: never in pairs */
#define ATTN__VPAIR_SUMS(x, y) (x)  /* unused: one lane holds one key (one key a step) */
#define ATTN__VTRANSPOSE(v) ((void)(v))
#define ATTN__DKT 1   /* decode: keys per dot-product step */
#define ATTN__DACC 8   /* decode: P.V accumulators (vectors) kept in registers; 16 cost a
                          sixth of gcc's -O2 time (docs/PERF.md#scalar-dacc) */
#define ATTN__HAS_DOT2 0   /* bf16 pair dot products (see the AVX-512 pass) */
#define ATTN__HAS_PAIRS 0  /* bf16 pair layouts for the pair and tile kernels */
#define ATTN__HAS_TILES 0  /* tile kernels for bf16 prefill (AVX-512 pass; AVX2 emulated) */

#elif ATTN__KERNEL_PASS == ATTN__ISA_AVX2_PASS
#define ATTN__FN(name) name##__avx2
#define ATTN__PASS_ISA ATTN_ISA_AVX2
#define ATTN__VF __m256
#define ATTN__L 8
#define ATTN__MR 4
#define ATTN__NV 3  /* 12 accumulators, 3 row vectors, 1 broadcast: all 16 registers (faster
                       than 4 x 2: docs/PERF.md#prefill-micro-tile) */
#define ATTN__VZERO() _mm256_setzero_ps()
#define ATTN__VSET1(x) _mm256_set1_ps(x)
#define ATTN__VLOAD(p) _mm256_loadu_ps(p)
#define ATTN__VSTORE(p, v) _mm256_storeu_ps((p), (v))
#define ATTN__VADD(a, b) _mm256_add_ps((a), (b))
#define ATTN__VSUB(a, b) _mm256_sub_ps((a), (b))
#define ATTN__VMUL(a, b) _mm256_mul_ps((a), (b))
#define ATTN__VDIV(a, b) _mm256_div_ps((a), (b))
#define ATTN__VFMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define ATTN__VMAX(a, b) _mm256_max_ps((a), (b))
#define ATTN__VMIN(a, b) _mm256_min_ps((a), (b))
#define ATTN__VHSUM(v) attn__hsum__avx2(v)
#define ATTN__VHMAX(v) attn__hmax__avx2(v)
#define ATTN__VIOTA() _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7)
#define ATTN__VLT_SELECT(x, y, a, b) _mm256_blendv_ps((b), (a), _mm256_cmp_ps((x), (y), _CMP_LT_OQ))
#define ATTN__VIN_SELECT(c, lo, hi, a, b)                                                         \
    _mm256_blendv_ps((b), (a), _mm256_and_ps(_mm256_cmp_ps((c), (lo), _CMP_GE_OQ),               \
                                             _mm256_cmp_ps((c), (hi), _CMP_LE_OQ)))
#define ATTN__VEXP2I(n)                                                                           \
    _mm256_castsi256_ps(_mm256_slli_epi32(                                                        \
        _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23))
#define ATTN__VLOAD_F16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p)))
#define ATTN__VLOAD_BF16(p)                                                                       \
    _mm256_castsi256_ps(_mm256_slli_epi32(                                                        \
        _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(p))), 16))
#define ATTN__VLOAD2_BF16(p, ev, od) attn__bf16_eo__avx2((const void *)(p), &(ev), &(od))
#define ATTN__VSTORE_F16(p, v)                                                                    \
    _mm_storeu_si128((__m128i *)(void *)(p), _mm256_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT))
#define ATTN__VSTORE_BF16(p, v) attn__store_bf16__avx2((p), (v))
#define ATTN__VLOAD_E5M2(p)                                                                       \
    _mm256_cvtph_ps(                                                                              \
        _mm_slli_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(const void *)(p))), 8))
#define ATTN__VLOAD_E4M3(p)                                                                       \
    _mm256_cvtph_ps(_mm256_castsi256_si128(attn__e4m3_f16__avx2(                                  \
        _mm256_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(const void *)(p))))))
#define ATTN__VLOAD2_E4M3(p, a, b)                                                                \
    attn__f16_pair__avx2(attn__e4m3_f16__avx2(attn__load16_u8__avx2(p)), &(a), &(b))
#define ATTN__VLOAD2_E5M2(p, a, b)                                                                 \
    attn__f16_pair__avx2(_mm256_slli_epi16(attn__load16_u8__avx2(p), 8), &(a), &(b))
#define ATTN__VLOAD_I8(p)                                                                         \
    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(p))))
#define ATTN__VLOAD2_I4(p, lo, hi) attn__i4_pair__avx2((p), &(lo), &(hi))
#define ATTN__HAS_E4M3_FINITE 1  /* e4m3 decode without the NaN fix (attn__e4m3_has_nan__avx2) */
#define ATTN__E4M3_HAS_NAN(p, n) attn__e4m3_has_nan__avx2((p), (n))
#define ATTN__VLOAD_E4M3_FINITE(p)                                                                \
    _mm256_cvtph_ps(_mm256_castsi256_si128(attn__e4m3_f16_finite__avx2(                           \
        _mm256_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(const void *)(p))))))
#define ATTN__VLOAD2_E4M3_FINITE(p, a, b)                                                         \
    attn__f16_pair__avx2(attn__e4m3_f16_finite__avx2(attn__load16_u8__avx2(p)), &(a), &(b))
#define ATTN__VTRANSUM(f, pairs) ((pairs) ? attn__transum_pairs__avx2(f) : attn__transum__avx2(f))
#define ATTN__VPAIR_SUMS(x, y) attn__pair_sums__avx2((x), (y))
#define ATTN__VTRANSPOSE(v) attn__transpose__avx2(v)
#define ATTN__DKT 2
#define ATTN__DACC 8
#define ATTN__HAS_DOT2 0

/* 2L bf16 values as two f32 vectors: the even-indexed ones, then the odd-indexed ones. One
   shift or mask each, where the in-order widening needs a shuffle and a shift. */
ATTN__PRIVATE ATTN__INLINE void attn__bf16_eo__avx2(const void *p, __m256 *ev, __m256 *od) {
    __m256i x = _mm256_loadu_si256((const __m256i *)p);
    *ev = _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
    *od = _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32((int)0xffff0000u)));
}
ATTN__PRIVATE ATTN__INLINE float attn__hsum__avx2(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_shuffle_ps(x, x, 1));
    return _mm_cvtss_f32(x);
}
ATTN__PRIVATE ATTN__INLINE float attn__hmax__avx2(__m256 v) {
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    x = _mm_max_ss(x, _mm_shuffle_ps(x, x, 1));
    return _mm_cvtss_f32(x);
}
/* e4m3 codes (one per 16-bit lane) as the f16 of value / 256. Moved to the top byte and back one
   place arithmetically, the sign lands on bit 15 and exponent:mantissa where f16 keeps them
   (bit 14, a copy of the sign, is cleared; f16's bias is 8 more, hence the 1/256; e4m3
   subnormals land on f16 subnormals, exactly). The NaN codes S.1111.111 land on
   S.01111.1110000000, the only lanes equal to 0x3f80 but for the sign; the xor turns them into
   the quiet NaN S.11111.1000000000, as the scalar decoder gives. Sixteen codes at once: the
   integer work per code is half that of eight. */
ATTN__PRIVATE ATTN__INLINE __m256i attn__e4m3_f16_finite__avx2(__m256i w) {
    return _mm256_and_si256(_mm256_srai_epi16(_mm256_slli_epi16(w, 8), 1),
                            _mm256_set1_epi16((short)0xbf80));
}
ATTN__PRIVATE ATTN__INLINE __m256i attn__e4m3_f16__avx2(__m256i w) {
    __m256i h = attn__e4m3_f16_finite__avx2(w);
    __m256i nan =
            _mm256_cmpeq_epi16(_mm256_and_si256(h, _mm256_set1_epi16(0x7fff)),
                               _mm256_set1_epi16(0x3f80));
    return _mm256_xor_si256(h, _mm256_and_si256(nan, _mm256_set1_epi16(0x4180)));
}
/* Whether any of the n e4m3 codes at p is a NaN (S.1111.111). The decode kernels read e4m3 rows
   without the NaN fix above (ATTN__FMT_E4M3_FINITE, three operations fewer per sixteen codes);
   a chunk with a NaN code goes to them as exact f32 copies instead (attn__decode_rows_of). The
   scan costs three operations per thirty-two codes, once for all the heads of a group. */
ATTN__PRIVATE ATTN__INLINE int attn__e4m3_has_nan__avx2(const void *p, size_t n) {
    const uint8_t *b = (const uint8_t *)p;
    const __m256i mag = _mm256_set1_epi8(0x7f);
    __m256i any = _mm256_setzero_si256();
    size_t i = 0;
    int found;
    for (; i + 32 <= n; i += 32)
        any = _mm256_or_si256(any, _mm256_cmpeq_epi8(_mm256_and_si256(
                                                        _mm256_loadu_si256((const __m256i *)(
                                                            const void *)(b + i)), mag), mag));
    found = _mm256_movemask_epi8(any) != 0;
    for (; i < n; i++) found |= (b[i] & 0x7f) == 0x7f;
    return found;
}
/* Sixteen bytes at p, one per 16-bit lane. */
ATTN__PRIVATE ATTN__INLINE __m256i attn__load16_u8__avx2(const void *p) {
    return _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)p));
}
/* L bytes of int4 codes: their low nibbles, then their high nibbles, as f32 (exact). */
ATTN__PRIVATE ATTN__INLINE void attn__i4_pair__avx2(const void *p, __m256 *lo, __m256 *hi) {
    __m256i b = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p));
    *lo = _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(b, 28), 28));
    *hi = _mm256_cvtepi32_ps(_mm256_srai_epi32(b, 4));
}
/* Sixteen f16 as two f32 vectors, in order. */
ATTN__PRIVATE ATTN__INLINE void attn__f16_pair__avx2(__m256i h, __m256 *a, __m256 *b) {
    *a = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
    *b = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
}
/* The transpose-reduce of 8 keys' vectors of partial sums is a tree of 7 adds (128-bit halves,
   pairs, lanes). Its first round takes two keys' vectors to one, their pair sums: the halves of
   x added in the low half, those of y in the high. */
ATTN__PRIVATE ATTN__INLINE __m256 attn__pair_sums__avx2(__m256 x, __m256 y) {
    return _mm256_add_ps(_mm256_permute2f128_ps(x, y, 0x20), _mm256_permute2f128_ps(x, y, 0x31));
}
/* The other two rounds over four vectors of pair sums: the sum of a[i]'s low half comes out in lane
   i, that of its high half in lane i + 4. */
ATTN__PRIVATE ATTN__INLINE __m256 attn__transum_rest__avx2(const __m256 *a) {
    __m256 b[2];
    int i;
    for (i = 0; i < 2; i++)
        b[i] = _mm256_add_ps(_mm256_shuffle_ps(a[2 * i], a[2 * i + 1], 0x44),
                             _mm256_shuffle_ps(a[2 * i], a[2 * i + 1], 0xee));
    return _mm256_add_ps(_mm256_shuffle_ps(b[0], b[1], 0x88), _mm256_shuffle_ps(b[0], b[1], 0xdd));
}
/* Lane i of the result = horizontal sum of v[i], for 8 vectors: v[i] and v[i+4] paired, so
   the sums come out in lane order. */
ATTN__PRIVATE ATTN__INLINE __m256 attn__transum__avx2(const __m256 *v) {
    __m256 a[4];
    int i;
    for (i = 0; i < 4; i++) a[i] = attn__pair_sums__avx2(v[i], v[i + 4]);
    return attn__transum_rest__avx2(a);
}
/* Lane i = the sum of key i, from f[p] = the pair sums of keys 2p and 2p+1: the same adds as
   attn__transum__avx2, and one permute to lane order. */
ATTN__PRIVATE ATTN__INLINE __m256 attn__transum_pairs__avx2(const __m256 *f) {
    return _mm256_permutevar8x32_ps(attn__transum_rest__avx2(f),
                                    _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}
/* Transposes 8 vectors in place (lane j of v[i] <-> lane i of v[j]): pairs of rows
   interleaved, then pairs of pairs, then the 128-bit halves swapped across. */
ATTN__PRIVATE ATTN__INLINE void attn__transpose__avx2(__m256 *v) {
    __m256 t[8], u[8];
    int i, k;
    for (i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]);
    }
    for (k = 0; k < 2; k++) {  /* u[4k+e]: lane e of each 128-bit half, rows 4k..4k+3 */
        u[4 * k] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], 0x44);
        u[4 * k + 1] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], 0xee);
        u[4 * k + 2] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0x44);
        u[4 * k + 3] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0xee);
    }
    for (i = 0; i < 4; i++) {
        v[i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x20);
        v[4 + i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x31);
    }
}
/* bf16 round-to-nearest-even on the integer bits, NaN kept quiet: the same rule as
   attn_f32_to_bf16, eight at a time; each lane's bf16 in its low 16 bits. */
ATTN__PRIVATE ATTN__INLINE __m256i attn__bf16_bits__avx2(__m256 v) {
    __m256i b = _mm256_castps_si256(v);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
    __m256i r =
            _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(b, _mm256_set1_epi32(0x7fff)), lsb),
                              16);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x7fffffff)),
                                     _mm256_set1_epi32(0x7f800000));
    __m256i qn = _mm256_or_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(0x40));
    return _mm256_blendv_epi8(r, qn, nan);
}
ATTN__PRIVATE ATTN__INLINE void attn__store_bf16__avx2(uint16_t *p, __m256 v) {
    __m256i r = attn__bf16_bits__avx2(v);
    __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128((__m128i *)(void *)p, packed);
}
#if ATTN__HAVE_TILE_EMULATION
/* The tile kernels over emulated tiles (ATTN_TILES_EMULATE): the bf16 pair layouts they use,
   and the tile operations as plain code over a tile file in memory (see [V]). */
#define ATTN__HAS_PAIRS 1
#define ATTN__HAS_TILES 1
#define ATTN__TILES_REAL 0
#define ATTN__PAIRS_TARGET
#define ATTN__TILE_TARGET
#define ATTN__VPAIR_BF16(dst, a, b, n) attn__pair_rows__avx2((dst), (a), (b), (n))
#define ATTN__VPAIR_PROBS(dst, lo, hi) attn__pair_probs__avx2((dst), (lo), (hi))
ATTN__PRIVATE void attn__pair_rows__avx2(uint32_t *dst, const uint16_t *a, const uint16_t *b,
                                         int n) {
    for (int i = 0; i < n; i++) dst[i] = a[i] | (uint32_t)b[i] << 16;
}
/* As attn__pair_probs__avx512, with the rounding of attn__store_bf16__avx2. */
ATTN__PRIVATE ATTN__INLINE void attn__pair_probs__avx2(float *dst, __m256 lo, __m256 hi) {
    __m256i pair = _mm256_or_si256(attn__bf16_bits__avx2(lo),
                                   _mm256_slli_epi32(attn__bf16_bits__avx2(hi), 16));
    _mm256_storeu_si256((__m256i *)(void *)dst, pair);
}
#else
#define ATTN__HAS_PAIRS 0
#define ATTN__HAS_TILES 0
#endif

#elif ATTN__KERNEL_PASS == ATTN__ISA_AVX512_PASS
#define ATTN__FN(name) name##__avx512
#define ATTN__PASS_ISA ATTN_ISA_AVX512
#define ATTN__VF __m512
#define ATTN__L 16
#define ATTN__MR 8
#define ATTN__NV 3
#define ATTN__VZERO() _mm512_setzero_ps()
#define ATTN__VSET1(x) _mm512_set1_ps(x)
#define ATTN__VLOAD(p) _mm512_loadu_ps(p)
#define ATTN__VSTORE(p, v) _mm512_storeu_ps((p), (v))
#define ATTN__VADD(a, b) _mm512_add_ps((a), (b))
#define ATTN__VSUB(a, b) _mm512_sub_ps((a), (b))
#define ATTN__VMUL(a, b) _mm512_mul_ps((a), (b))
#define ATTN__VDIV(a, b) _mm512_div_ps((a), (b))
#define ATTN__VFMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define ATTN__VMAX(a, b) _mm512_max_ps((a), (b))
#define ATTN__VMIN(a, b) _mm512_min_ps((a), (b))
#define ATTN__VHSUM(v) attn__hsum__avx512(v)
#define ATTN__VHMAX(v) attn__hmax__avx512(v)
#define ATTN__VIOTA() _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
#define ATTN__VLT_SELECT(x, y, a, b)                                                               \
    _mm512_mask_blend_ps(_mm512_cmp_ps_mask((x), (y), _CMP_LT_OQ), (b), (a))
#define ATTN__VIN_SELECT(c, lo, hi, a, b)                                                         \
    _mm512_mask_blend_ps(_mm512_cmp_ps_mask((c), (lo), _CMP_GE_OQ) &                              \
                             _mm512_cmp_ps_mask((c), (hi), _CMP_LE_OQ), (b), (a))
#define ATTN__VEXP2I(n)                                                                           \
    _mm512_castsi512_ps(_mm512_slli_epi32(                                                        \
        _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23))
/* vscalefps scales by 2^n directly, and zero-masking replaces the select (see attn__vexp) */
#define ATTN__VEXP_SCALE(x, p, n)                                                                 \
    _mm512_maskz_scalef_ps(_mm512_cmp_ps_mask((x), _mm512_set1_ps(-87.0f), _CMP_NLT_UQ), (p), (n))
#define ATTN__VLOAD_F16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p)))
#define ATTN__VLOAD_BF16(p)                                                                       \
    _mm512_castsi512_ps(_mm512_slli_epi32(                                                        \
        _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(p))), 16))
#define ATTN__VLOAD2_BF16(p, ev, od) attn__bf16_eo__avx512((const void *)(p), &(ev), &(od))
#define ATTN__VSTORE_F16(p, v)                                                                    \
    _mm256_storeu_si256((__m256i *)(void *)(p), _mm512_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT))
#define ATTN__VSTORE_BF16(p, v) attn__store_bf16__avx512((p), (v))
#define ATTN__VLOAD_E5M2(p)                                                                       \
    _mm512_cvtph_ps(_mm256_slli_epi16(                                                            \
        _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(p))), 8))
#define ATTN__VLOAD_E4M3(p)                                                                       \
    _mm512_cvtph_ps(_mm512_castsi512_si256(attn__e4m3_f16__avx512(                                \
        _mm512_cvtepu8_epi16(                                                                     \
            _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(p)))))))
#define ATTN__VLOAD2_E4M3(p, a, b)                                                                \
    attn__f16_pair__avx512(attn__e4m3_f16__avx512(attn__load32_u8__avx512(p)), &(a), &(b))
#define ATTN__VLOAD2_E5M2(p, a, b)                                                                 \
    attn__f16_pair__avx512(_mm512_slli_epi16(attn__load32_u8__avx512(p), 8), &(a), &(b))
#define ATTN__VLOAD_I8(p)                                                                         \
    _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(p))))
#define ATTN__VLOAD2_I4(p, lo, hi) attn__i4_pair__avx512((p), &(lo), &(hi))
#define ATTN__VLOAD2_I4S(p, s, lo, hi) attn__i4_scaled__avx512((p), (s), &(lo), &(hi))
#define ATTN__VSET1_BF16(p) attn__bf16_set1__avx512(p)
#define ATTN__HAS_INT_IN_PLACE 1  /* decode reads integer rows in place (attn__decode_in_place) */
#ifdef ATTN__HAVE_E4M3_LUT
#define ATTN__HAS_E4M3_LUT 1
#define ATTN__E4M3_LUT_READY() ((attn__cpu_flags() & ATTN__CPU_AVX512VBMI) != 0)
#define ATTN__VLOAD2_E4M3_LUT(p, a, b) attn__e4m3_lut2__avx512((p), &(a), &(b))
#endif
#define ATTN__VTRANSUM(f, pairs)                                                                  \
    ((pairs) ? attn__transum_pairs__avx512(f) : attn__transum__avx512(f))
#define ATTN__VPAIR_SUMS(x, y) attn__pair_sums__avx512((x), (y))
#define ATTN__VTRANSPOSE(v) attn__transpose__avx512(v)
#define ATTN__DKT 4
#define ATTN__DACC 16
/* bf16 pair dot products (AVX-512 BF16), compiled here and used only when the CPU has them:
   VI holds 16 pairs of bf16 (low half first); VDOT2 adds a.lo*b.lo + a.hi*b.hi to each lane. */
#define ATTN__HAS_DOT2 1
#define ATTN__DOT2_READY() ((attn__cpu_flags() & ATTN__CPU_AVX512BF16) != 0)
#define ATTN__DOT2_TARGET                                                                          \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,avx512bf16")))
#define ATTN__HAS_PAIRS 1
#define ATTN__PAIRS_TARGET ATTN__DOT2_TARGET
#if ATTN__HAVE_AMX
/* AMX: the tile kernels of [V] on the tile registers (every CPU with tiles has AVX-512 BF16). */
#define ATTN__HAS_TILES 1
#define ATTN__TILES_REAL 1
#define ATTN__TILE_TARGET                                                                          \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,avx512bf16,"          \
                          "amx-tile,amx-bf16")))
#else
#define ATTN__HAS_TILES 0
#endif
#define ATTN__VI __m512i
#define ATTN__VLOADI(p) _mm512_loadu_si512((const void *)(p))
#define ATTN__VSTOREI(p, v) _mm512_storeu_si512((void *)(p), (v))
#define ATTN__VSET1I(x) _mm512_set1_epi32((int)(x))
#define ATTN__VDOT2(acc, a, b) _mm512_dpbf16_ps((acc), (__m512bh)(a), (__m512bh)(b))
#define ATTN__VPAIR_BF16(dst, a, b, n) attn__pair_rows__avx512((dst), (a), (b), (n))
#define ATTN__VPAIR_PROBS(dst, lo, hi) attn__pair_probs__avx512((dst), (lo), (hi))
#define ATTN__VZEROI() _mm512_setzero_si512()
/* rows a and b (2L bf16 each) as pairs (a_i, b_i): lo has the first half of each 128-bit lane,
   hi the second (see attn__decode_unpack_order) */
#define ATTN__VUNPACK_PAIRS(a, b, lo, hi)                                                         \
    ((lo) = _mm512_unpacklo_epi16((a), (b)), (hi) = _mm512_unpackhi_epi16((a), (b)))
#ifdef ATTN__HAVE_E4M3_LUT
/* fp8 rows as the pair kernels' bf16 (attn__fp8_bf16_row__avx512; AVX-512 VBMI: callers check
   ATTN__E4M3_LUT_READY): a key row's 2L codes at p in order; the pairs (a[j], b[j]) of the
   first L codes of two value rows, or (a[j], 0) where two is 0 (b is not read). e5m2 picks
   the tables: e5m2's or e4m3's. */
#define ATTN__HAS_FP8_PAIRS 1
#define ATTN__VLOADI_FP8(p, e5m2) attn__fp8_bf16_row__avx512((p), (e5m2))
#define ATTN__VPAIRI_FP8(a, b, two, e5m2) attn__fp8_bf16_pairs__avx512((a), (b), (two), (e5m2))
#endif

/* Word indices for a word permute that interleaves: word 2k takes word k, word 2k+1 takes
   word second + k (of the pair of sources, for the two-source permute). */
ATTN__PRIVATE ATTN__INLINE __m512i attn__interleave_index__avx512(short second) {
    const __m512i k = _mm512_set_epi16(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8,
                                       7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    return _mm512_mask_add_epi16(k, 0xaaaaaaaau, k, _mm512_set1_epi16(second));
}
/* dst[i] = a[i] | b[i] << 16: two bf16 rows interleaved into pairs, 32 at a time by two-source
   word permutes (a's words are 0-31, b's 32-63). */
ATTN__PRIVATE void attn__pair_rows__avx512(uint32_t *dst, const uint16_t *a, const uint16_t *b,
                                           int n) {
    const __m512i first = attn__interleave_index__avx512(32);
    const __m512i second = _mm512_add_epi16(first, _mm512_set1_epi16(16));
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512i x = _mm512_loadu_si512((const void *)(a + i)),
                y = _mm512_loadu_si512((const void *)(b + i));
        _mm512_storeu_si512((void *)(dst + i), _mm512_permutex2var_epi16(x, first, y));
        _mm512_storeu_si512((void *)(dst + i + 16), _mm512_permutex2var_epi16(x, second, y));
    }
    for (; i < n; i++) dst[i] = a[i] | (uint32_t)b[i] << 16;
}
/* Rounds two vectors of probabilities to bf16 (RNE) and stores them as pairs (lo in the low
   half). The instruction flushes subnormals, which never occur here: attn__vexp returns 0 or
   at least e^-87, a normal number. */
ATTN__DOT2_TARGET ATTN__PRIVATE ATTN__INLINE void attn__pair_probs__avx512(float *dst, __m512 lo,
                                                                           __m512 hi) {
    __m512i halves = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);  /* words 0-15: lo, 16-31: hi */
    _mm512_storeu_si512((void *)dst,
                        _mm512_permutexvar_epi16(attn__interleave_index__avx512(16), halves));
}

ATTN__PRIVATE ATTN__INLINE void attn__bf16_eo__avx512(const void *p, __m512 *ev, __m512 *od) {
    __m512i x = _mm512_loadu_si512(p);
    *ev = _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
    *od = _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32((int)0xffff0000u)));
}
ATTN__PRIVATE ATTN__INLINE float attn__hsum__avx512(__m512 v) { return _mm512_reduce_add_ps(v); }
ATTN__PRIVATE ATTN__INLINE float attn__hmax__avx512(__m512 v) { return _mm512_reduce_max_ps(v); }
/* As attn__e4m3_f16__avx2, 32 codes. */
ATTN__PRIVATE ATTN__INLINE __m512i attn__e4m3_f16__avx512(__m512i w) {
    __m512i h =
            _mm512_and_si512(_mm512_srai_epi16(_mm512_slli_epi16(w, 8), 1),
                             _mm512_set1_epi16((short)0xbf80));
    __mmask32 nan =
            _mm512_cmpeq_epi16_mask(_mm512_and_si512(h, _mm512_set1_epi16(0x7fff)),
                                    _mm512_set1_epi16(0x3f80));
    return _mm512_mask_mov_epi16(h, nan, _mm512_xor_si512(h, _mm512_set1_epi16(0x4180)));
}
/* 32 bytes at p, one per 16-bit lane. */
ATTN__PRIVATE ATTN__INLINE __m512i attn__load32_u8__avx512(const void *p) {
    return _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)p));
}
/* L bytes of int4 codes: their low nibbles, then their high nibbles, as f32 (exact). */
ATTN__PRIVATE ATTN__INLINE void attn__i4_pair__avx512(const void *p, __m512 *lo, __m512 *hi) {
    __m512i b = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p));
    *lo = _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(b, 28), 28));
    *hi = _mm512_cvtepi32_ps(_mm512_srai_epi32(b, 4));
}
/* The same times s, through a table of the 16 codes times s that vpermps reads by each byte's
   nibble (it takes an index's low 4 bits: no masking): two shuffles for the shifts and
   conversions that would crowd port 0. The same products, exact. */
ATTN__PRIVATE ATTN__INLINE void attn__i4_scaled__avx512(const void *p, __m512 s, __m512 *lo,
                                                       __m512 *hi) {
    const __m512 codes = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1);
    __m512 t = _mm512_mul_ps(codes, s);
    __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
    *lo = _mm512_permutexvar_ps(b, t);
    *hi = _mm512_permutexvar_ps(_mm512_srli_epi32(b, 4), t);
}
/* The bf16 at p (unaligned, two more bytes readable after it: a group's scale and its first
   codes) in every lane as f32: a broadcast of the dword at p, which a load port does alone (a
   word's broadcast takes a shuffle), shifted up. */
ATTN__PRIVATE ATTN__INLINE __m512 attn__bf16_set1__avx512(const void *p) {
    uint32_t w;
    memcpy(&w, p, sizeof w);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_set1_epi32((int)w), 16));
}
/* 32 f16 as two f32 vectors, in order. */
ATTN__PRIVATE ATTN__INLINE void attn__f16_pair__avx512(__m512i h, __m512 *a, __m512 *b) {
    *a = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
    *b = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
}
#ifdef ATTN__HAVE_E4M3_LUT
/* The fp8 codes in bytes 0-31 of x as 32 bf16 words, word w the value of code spread[2w] (the
   decode to f32 and the pair kernels' values: attn__fp8_spread_halves), through the tables t
   (attn__e4m3_bf16_bytes or
   attn__e5m2_bf16_bytes): the codes spread to both bytes of
   their word (a byte permute), the high bytes looked up (the low ones zeroed), the low bytes
   looked up (the codes kept in the high ones), and a XOR that leaves the high byte's entry
   with the code's sign. Four instructions for the eight of the way through f16 (where the NaN
   codes need a compare and a blend). The permutes are AVX-512 VBMI: asm, so that the pass
   needs no VBMI target; callers check ATTN__E4M3_LUT_READY. (e5m2, whose f16 way is a shift,
   gains nothing from tables: docs/PERF.md#e4m3-tables.) */
ATTN__PRIVATE ATTN__INLINE __m512i attn__fp8_bf16_words__avx512(__m512i x, __m512i spread,
                                                               const uint8_t (*t)[128]) {
    const __m512i h0 = _mm512_loadu_si512((const void *)t[0]),
                  h1 = _mm512_loadu_si512((const void *)(t[0] + 64));
    const __m512i l0 = _mm512_loadu_si512((const void *)t[1]),
                  l1 = _mm512_loadu_si512((const void *)(t[1] + 64));
    const __mmask64 high = 0xaaaaaaaaaaaaaaaaull, low = 0x5555555555555555ull;
    __m512i h;
    __asm__("vpermb %[x], %[i], %[x]" : [x] "+v"(x) : [i] "v"(spread));
    h = x;
    __asm__("vpermi2b %[t1], %[t0], %[h]%{%[k]%}%{z%}" : [h] "+v"(h) : [t0] "v"(h0), [t1] "v"(h1),
            [k] "Yk"(high));
    __asm__("vpermi2b %[t1], %[t0], %[x]%{%[k]%}" : [x] "+v"(x) : [t0] "v"(l0), [t1] "v"(l1),
            [k] "Yk"(low));
    return _mm512_xor_si512(h, x);
}
/* Word 2j code j, word 2j+1 code 16 + j: the spread of the e4m3 decode to f32 and of the pair
   kernels' values. */
ATTN__PRIVATE ATTN__INLINE __m512i attn__fp8_spread_halves__avx512(void) {
    return _mm512_set_epi8(31, 31, 15, 15, 30, 30, 14, 14, 29, 29, 13, 13, 28, 28, 12, 12, 27, 27,
                           11, 11, 26, 26, 10, 10, 25, 25, 9, 9, 24, 24, 8, 8, 23, 23, 7, 7, 22, 22,
                           6, 6, 21, 21, 5, 5, 20, 20, 4, 4, 19, 19, 3, 3, 18, 18, 2, 2, 17, 17, 1,
                           1, 16, 16, 0, 0);
}
/* 32 e4m3 codes at p as two f32 vectors, in order (the vector kernels' e4m3 rows where the CPU
   has VBMI): each dword of the words holds codes j and 16 + j, so a shift and a mask split it
   (the bf16 value is the f32's high half). */
ATTN__PRIVATE ATTN__INLINE void attn__e4m3_lut2__avx512(const uint8_t *p, __m512 *a, __m512 *b) {
    __m512i w = attn__fp8_bf16_words__avx512(
        _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)p)),
        attn__fp8_spread_halves__avx512(), attn__e4m3_bf16_bytes);
    *a = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    *b = _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32((int)0xffff0000u)));
}
/* The bf16 pair kernels over an fp8 cache (bf16 queries; attn__decode_pairs): their rows as
   bf16 words through the byte tables of the format (e5m2 or e4m3), each value exact. A key
   row's 32 codes at p in order (word w: code w); the values of two keys, codes [0, 16) of
   rows a and b (b NULL: zeros), as the 16 pairs (a[j], b[j]) in order - so neither needs the
   bf16 rows' unpacking order. */
ATTN__PRIVATE ATTN__INLINE const uint8_t (*attn__fp8_bf16_table__avx512(int e5m2))[128] {
    return e5m2 ? attn__e5m2_bf16_bytes : attn__e4m3_bf16_bytes;
}
ATTN__PRIVATE ATTN__INLINE __m512i attn__fp8_bf16_row__avx512(const uint8_t *p, int e5m2) {
    const __m512i spread =
            _mm512_set_epi8(31, 31, 30, 30, 29, 29, 28, 28, 27, 27, 26, 26, 25, 25, 24, 24, 23, 23,
                            22, 22, 21, 21, 20, 20, 19, 19, 18, 18, 17, 17, 16, 16, 15, 15, 14, 14,
                            13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8, 7, 7, 6, 6, 5, 5, 4, 4, 3,
                            3, 2, 2, 1, 1, 0, 0);
    __m512i x = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)p));
    return attn__fp8_bf16_words__avx512(x, spread, attn__fp8_bf16_table__avx512(e5m2));
}
ATTN__PRIVATE ATTN__INLINE __m512i attn__fp8_bf16_pairs__avx512(const uint8_t *a, const uint8_t *b,
                                                                int two, int e5m2) {
    __m128i ra = _mm_loadu_si128((const __m128i *)(const void *)a);
    __m256i x = two ? _mm256_inserti128_si256(_mm256_castsi128_si256(ra),
                                              _mm_loadu_si128((const __m128i *)(const void *)b), 1)
                    : _mm256_zextsi128_si256(ra);
    return attn__fp8_bf16_words__avx512(_mm512_castsi256_si512(x),
                                        attn__fp8_spread_halves__avx512(),
                                        attn__fp8_bf16_table__avx512(e5m2));
}
#endif
#if ATTN__HAS_TILES
/* n fp8 codes (n a multiple of 32) as bf16 for decode's tiles, 32 at a time: their f16 (e4m3:
   value / 256, the NaN fix; e5m2: the value) widened to f32 and rounded to bf16 by one
   instruction, exact (they have at most four significant bits). Every CPU with tiles has
   AVX-512 BF16. */
#define ATTN__HAS_TILE_FP8_BF16 1
#define ATTN__TILE_FP8_BF16(dst, src, dt, n) attn__tile_fp8_bf16__avx512((dst), (src), (dt), (n))
ATTN__TILE_TARGET ATTN__PRIVATE void attn__tile_fp8_bf16__avx512(uint16_t *dst, const void *src,
                                                                 attn_dtype dt, int n) {
    for (int i = 0; i < n; i += 32) {
        __m512i w = attn__load32_u8__avx512((const uint8_t *)src + i);
        __m512 a, b;
        attn__f16_pair__avx512(dt == ATTN_FP8_E4M3 ? attn__e4m3_f16__avx512(w)
                                                   : _mm512_slli_epi16(w, 8), &a, &b);
        _mm512_storeu_si512((void *)(dst + i), (__m512i)_mm512_cvtne2ps_pbh(b, a));
    }
}
#endif
/* The transpose-reduce of 16 keys' vectors of partial sums is a tree of 15 adds (256-bit
   halves, 128-bit quarters, pairs, lanes). Its first round takes two keys' vectors to one, their
   pair sums: the halves of x added in the low half, those of y in the high. */
ATTN__PRIVATE ATTN__INLINE __m512 attn__pair_sums__avx512(__m512 x, __m512 y) {
    return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x44), _mm512_shuffle_f32x4(x, y, 0xee));
}
/* 4 (k % 4) + k / 4 for k < 16: a 4 x 4 transpose, its own inverse. */
static const int attn__transum_order[16] = {0, 4, 8, 12, 1, 5, 9, 13,
                                            2, 6, 10, 14, 3, 7, 11, 15};
/* The other three rounds over eight vectors of pair sums: the sum of input k (the low half of
   a[k/2] for even k, the high half for odd) comes out in lane attn__transum_order[k]. */
ATTN__PRIVATE ATTN__INLINE __m512 attn__transum_rest__avx512(const __m512 *a) {
    __m512 b[4], c[2];
    int i;
    ATTN__UNROLL for (i = 0; i < 4; i++)
        b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xdd));
    ATTN__UNROLL for (i = 0; i < 2; i++)
        c[i] = _mm512_add_ps(_mm512_shuffle_ps(b[2 * i], b[2 * i + 1], 0x44),
                             _mm512_shuffle_ps(b[2 * i], b[2 * i + 1], 0xee));
    return _mm512_add_ps(_mm512_shuffle_ps(c[0], c[1], 0x88), _mm512_shuffle_ps(c[0], c[1], 0xdd));
}
/* Lane i of the result = horizontal sum of v[i], for 16 vectors, paired in the order that comes
   out in lane order. */
ATTN__PRIVATE ATTN__INLINE __m512 attn__transum__avx512(const __m512 *v) {
    const int *order = attn__transum_order;
    __m512 a[8];
    int i;
    ATTN__UNROLL for (i = 0; i < 8; i++)  /* unrolled: gcc -O2 otherwise loops over order[] */
        a[i] = attn__pair_sums__avx512(v[order[2 * i]], v[order[2 * i + 1]]);
    return attn__transum_rest__avx512(a);
}
/* Lane i = the sum of key i, from f[p] = the pair sums of keys 2p and 2p+1: the same adds as
   attn__transum__avx512, and one permute to lane order. */
ATTN__PRIVATE ATTN__INLINE __m512 attn__transum_pairs__avx512(const __m512 *f) {
    return _mm512_permutexvar_ps(_mm512_loadu_si512((const void *)attn__transum_order),
                                 attn__transum_rest__avx512(f));
}
/* Transposes 16 vectors in place (lane j of v[i] <-> lane i of v[j]): within each 128-bit
   lane as for 4x4 blocks (pairs of rows interleaved, then pairs of pairs), then the 128-bit
   lanes gathered across four vectors in two rounds. */
ATTN__PRIVATE ATTN__INLINE void attn__transpose__avx512(__m512 *v) {
    __m512 t[16], u[16];
    int i, k, e;
    for (i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]);
    }
    for (k = 0; k < 4; k++) {  /* u[4k+e]: lane e of each 128-bit quarter, rows 4k..4k+3 */
        __m512d a = _mm512_castps_pd(t[4 * k]), b = _mm512_castps_pd(t[4 * k + 1]);
        __m512d c = _mm512_castps_pd(t[4 * k + 2]), d = _mm512_castps_pd(t[4 * k + 3]);
        u[4 * k] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        u[4 * k + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        u[4 * k + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        u[4 * k + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    for (e = 0; e < 4; e++) {  /* column 4q+e = quarter q of u[e], u[4+e], u[8+e], u[12+e] */
        __m512 w0 = _mm512_shuffle_f32x4(u[e], u[4 + e], 0x88);
        __m512 w1 = _mm512_shuffle_f32x4(u[e], u[4 + e], 0xdd);
        __m512 x0 = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0x88);
        __m512 x1 = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0xdd);
        v[e] = _mm512_shuffle_f32x4(w0, x0, 0x88);
        v[8 + e] = _mm512_shuffle_f32x4(w0, x0, 0xdd);
        v[4 + e] = _mm512_shuffle_f32x4(w1, x1, 0x88);
        v[12 + e] = _mm512_shuffle_f32x4(w1, x1, 0xdd);
    }
}
ATTN__PRIVATE ATTN__INLINE void attn__store_bf16__avx512(uint16_t *p, __m512 v) {
    __m512i b = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
    __m512i r =
            _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(b, _mm512_set1_epi32(0x7fff)), lsb),
                              16);
    __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(b, _mm512_set1_epi32(0x7fffffff)),
                                            _mm512_set1_epi32(0x7f800000));
    r = _mm512_mask_blend_epi32(nan, r,
                                _mm512_or_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(0x40)));
    _mm256_storeu_si256((__m256i *)(void *)p, _mm512_cvtepi32_epi16(r));
}

#elif ATTN__KERNEL_PASS == ATTN__ISA_NEON_PASS
#define ATTN__FN(name) name##__neon
#define ATTN__PASS_ISA ATTN_ISA_NEON
#define ATTN__VF float32x4_t
#define ATTN__L 4
#define ATTN__MR 8
#define ATTN__NV 3
#define ATTN__VZERO() vdupq_n_f32(0.0f)
#define ATTN__VSET1(x) vdupq_n_f32(x)
#define ATTN__VLOAD(p) vld1q_f32(p)
#define ATTN__VSTORE(p, v) vst1q_f32((p), (v))
#define ATTN__VADD(a, b) vaddq_f32((a), (b))
#define ATTN__VSUB(a, b) vsubq_f32((a), (b))
#define ATTN__VMUL(a, b) vmulq_f32((a), (b))
#define ATTN__VDIV(a, b) vdivq_f32((a), (b))
#define ATTN__VFMA(a, b, c) vfmaq_f32((c), (a), (b))
/* Not vmaxq/vminq: FMAX propagates NaN and orders -0 below +0, while every other pass returns
   the second operand when the compare fails (scalar ?:, SSE maxps). With FMAX a NaN score made
   the running max NaN and exp(NaN) NaN, where the scalar and x86 passes get exp(-87). */
#define ATTN__VMAX(a, b) attn__max__neon((a), (b))
#define ATTN__VMIN(a, b) attn__min__neon((a), (b))
#define ATTN__VHSUM(v) vaddvq_f32(v)
#define ATTN__VHMAX(v) attn__hmax__neon(v)
#define ATTN__VIOTA() attn__iota__neon()
#define ATTN__VLT_SELECT(x, y, a, b) vbslq_f32(vcltq_f32((x), (y)), (a), (b))
#define ATTN__VIN_SELECT(c, lo, hi, a, b)                                                         \
    vbslq_f32(vandq_u32(vcgeq_f32((c), (lo)), vcleq_f32((c), (hi))), (a), (b))
#define ATTN__VEXP2I(n)                                                                           \
    vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127)), 23))
#define ATTN__VLOAD_F16(p) vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)))
#define ATTN__VLOAD_BF16(p) vreinterpretq_f32_u32(vshlq_n_u32(vmovl_u16(vld1_u16(p)), 16))
#define ATTN__VLOAD2_BF16(p, ev, od) attn__bf16_eo__neon((p), &(ev), &(od))
#define ATTN__VSTORE_F16(p, v) vst1_u16((p), vreinterpret_u16_f16(vcvt_f16_f32(v)))
#define ATTN__VSTORE_BF16(p, v) attn__store_bf16__neon((p), (v))
#define ATTN__VLOAD_E5M2(p)                                                                        \
    vcvt_f32_f16(vreinterpret_f16_u16(vshl_n_u16(attn__load4_u8__neon(p), 8)))
#define ATTN__VLOAD_E4M3(p)                                                                       \
    vcvt_f32_f16(vreinterpret_f16_u16(attn__e4m3_f16__neon(attn__load4_u8__neon(p))))
#define ATTN__VLOAD_I8(p) vcvtq_f32_s32(attn__load4_s8__neon(p))
#define ATTN__VLOAD2_I4(p, lo, hi) attn__i4_pair__neon((p), &(lo), &(hi))
#define ATTN__VTRANSUM(f, pairs)                                                                  \
    ((pairs) ? vpaddq_f32((f)[0], (f)[1])                                                         \
             : vpaddq_f32(vpaddq_f32((f)[0], (f)[1]), vpaddq_f32((f)[2], (f)[3])))
#define ATTN__VPAIR_SUMS(x, y) vpaddq_f32((x), (y))
#define ATTN__VTRANSPOSE(v) attn__transpose__neon(v)
#define ATTN__DKT 4
#define ATTN__DACC 16
#define ATTN__HAS_DOT2 0
#define ATTN__HAS_PAIRS 0
#define ATTN__HAS_TILES 0

ATTN__PRIVATE ATTN__INLINE void attn__bf16_eo__neon(const uint16_t *p, float32x4_t *ev,
                                                    float32x4_t *od) {
    uint32x4_t x = vreinterpretq_u32_u16(vld1q_u16(p));
    *ev = vreinterpretq_f32_u32(vshlq_n_u32(x, 16));
    *od = vreinterpretq_f32_u32(vandq_u32(x, vdupq_n_u32(0xffff0000u)));
}
ATTN__PRIVATE ATTN__INLINE float32x4_t attn__max__neon(float32x4_t a, float32x4_t b) {
    return vbslq_f32(vcgtq_f32(a, b), a, b);
}
ATTN__PRIVATE ATTN__INLINE float32x4_t attn__min__neon(float32x4_t a, float32x4_t b) {
    return vbslq_f32(vcltq_f32(a, b), a, b);
}
/* The same max, folded in halves like the AVX2 pass's hmax (not FMAXV, for the reason above). */
ATTN__PRIVATE ATTN__INLINE float attn__hmax__neon(float32x4_t v) {
    v = attn__max__neon(v, vextq_f32(v, v, 2));
    v = attn__max__neon(v, vextq_f32(v, v, 1));
    return vgetq_lane_f32(v, 0);
}
ATTN__PRIVATE ATTN__INLINE float32x4_t attn__iota__neon(void) {
    static const float iota[4] = {0, 1, 2, 3};
    return vld1q_f32(iota);
}
/* Four bytes widened to 16-bit lanes (reads exactly four). */
ATTN__PRIVATE ATTN__INLINE uint16x4_t attn__load4_u8__neon(const uint8_t *p) {
    uint32_t x;
    memcpy(&x, p, 4);
    return vget_low_u16(vmovl_u8(vreinterpret_u8_u32(vdup_n_u32(x))));
}
/* Four bytes, sign-extended. */
ATTN__PRIVATE ATTN__INLINE int32x4_t attn__load4_s8__neon(const void *p) {
    int32_t x;
    memcpy(&x, p, 4);
    return vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_s32(vdup_n_s32(x)))));
}
/* L bytes of int4 codes: their low nibbles, then their high nibbles, as f32 (exact). */
ATTN__PRIVATE ATTN__INLINE void attn__i4_pair__neon(const void *p, float32x4_t *lo,
                                                    float32x4_t *hi) {
    int32x4_t b = attn__load4_s8__neon(p);
    *lo = vcvtq_f32_s32(vshrq_n_s32(vshlq_n_s32(b, 28), 28));
    *hi = vcvtq_f32_s32(vshrq_n_s32(b, 4));
}
/* As attn__e4m3_f16__avx2, four codes. */
ATTN__PRIVATE ATTN__INLINE uint16x4_t attn__e4m3_f16__neon(uint16x4_t w) {
    uint16x4_t h =
            vand_u16(vreinterpret_u16_s16(vshr_n_s16(vreinterpret_s16_u16(vshl_n_u16(w, 8)), 1)),
                            vdup_n_u16(0xbf80));
    uint16x4_t nan = vceq_u16(vand_u16(h, vdup_n_u16(0x7fff)), vdup_n_u16(0x3f80));
    return veor_u16(h, vand_u16(nan, vdup_n_u16(0x4180)));
}
/* Transposes 4 vectors in place (lane j of v[i] <-> lane i of v[j]). */
ATTN__PRIVATE ATTN__INLINE void attn__transpose__neon(float32x4_t *v) {
    float32x4x2_t a = vtrnq_f32(v[0], v[1]), b = vtrnq_f32(v[2], v[3]);
    v[0] = vcombine_f32(vget_low_f32(a.val[0]), vget_low_f32(b.val[0]));
    v[1] = vcombine_f32(vget_low_f32(a.val[1]), vget_low_f32(b.val[1]));
    v[2] = vcombine_f32(vget_high_f32(a.val[0]), vget_high_f32(b.val[0]));
    v[3] = vcombine_f32(vget_high_f32(a.val[1]), vget_high_f32(b.val[1]));
}
ATTN__PRIVATE ATTN__INLINE void attn__store_bf16__neon(uint16_t *p, float32x4_t v) {
    uint32x4_t b = vreinterpretq_u32_f32(v);
    uint32x4_t lsb = vandq_u32(vshrq_n_u32(b, 16), vdupq_n_u32(1));
    uint32x4_t r = vshrq_n_u32(vaddq_u32(vaddq_u32(b, vdupq_n_u32(0x7fff)), lsb), 16);
    uint32x4_t nan = vcgtq_u32(vandq_u32(b, vdupq_n_u32(0x7fffffff)), vdupq_n_u32(0x7f800000));
    r = vbslq_u32(nan, vorrq_u32(vshrq_n_u32(b, 16), vdupq_n_u32(0x40)), r);
    vst1_u16(p, vmovn_u32(r));
}
#endif

/* for (i = 0; i < n; i += STEP) unrolled, n (a constant after inlining) at most MAX. clang 14
   fully unrolls a loop (and so keeps the arrays it indexes in registers) only when its bound is
   a literal before inlining, hence MAX and a test of n (see attn__decode_pv_cols_nv); gcc's code
   is as fast either way (docs/PERF.md#decode-clang). */
#define ATTN__UNROLL_UPTO(i, n, MAX, STEP)                                                         \
    ATTN__UNROLL for (i = 0; i < (MAX); i += (STEP)) if (i < (n))
#define ATTN__NR (ATTN__NV * ATTN__L)   /* query rows of a prefill micro-tile */
#if defined(__GNUC__) || defined(__clang__)
#define ATTN__PREFETCH(p) __builtin_prefetch((p), 0, 3)     /* into L1 */
#define ATTN__PREFETCH_L2(p) __builtin_prefetch((p), 0, 1)  /* into L2 (x86: prefetcht2) */
#else
#define ATTN__PREFETCH(p) ((void)(p))
#define ATTN__PREFETCH_L2(p) ((void)(p))
#endif
/* gcc folds a vector loaded once for several multiply-adds into each of them as a memory
   operand (a load per use); this empty asm makes it a register value. Used where loads, not
   multiply-adds, bound a loop (see attn__decode_dot_keys); x86 vector passes only. */
#if (ATTN__KERNEL_PASS == ATTN__ISA_AVX2_PASS || ATTN__KERNEL_PASS == ATTN__ISA_AVX512_PASS) &&   \
        (defined(__GNUC__) || defined(__clang__))
#define ATTN__VKEEP(v) __asm__("" : "+v"(v))
#else
#define ATTN__VKEEP(v) ((void)0)
#endif
#ifndef ATTN__HAS_E4M3_LUT  /* e4m3 through byte tables (see the AVX-512 pass) */
#define ATTN__HAS_E4M3_LUT 0
#endif
#ifndef ATTN__HAS_FP8_PAIRS  /* fp8 caches on the bf16 pair kernels (see the AVX-512 pass) */
#define ATTN__HAS_FP8_PAIRS 0
#endif
#ifndef ATTN__HAS_E4M3_FINITE  /* e4m3 chunks free of NaN codes decoded without the fix (AVX2) */
#define ATTN__HAS_E4M3_FINITE 0
#define ATTN__E4M3_HAS_NAN(p, n) 0
#endif
#if ATTN__HAS_TILES && defined(ATTN__HAVE_DECODE_TILES)
#define ATTN__HAS_DECODE_TILES 1  /* decode on the tiles (attn__decode_tile_keys, _values) */
#else
#define ATTN__HAS_DECODE_TILES 0
#endif
#ifndef ATTN__HAS_INT_IN_PLACE  /* elsewhere through f32 copies (docs/PERF.md#decode-int) */
#define ATTN__HAS_INT_IN_PLACE 0
#endif
#ifndef ATTN__VSET1_BF16  /* a group's bf16 scale at p (unaligned) in every lane as f32 */
#define ATTN__VSET1_BF16(p) ATTN__VSET1(attn__int_scale_of(p))
#endif
#ifndef ATTN__VLOAD2_I4S  /* a whole int4 group's codes (L = 16) times s, where the ISA has a
                             faster way than ATTN__VLOAD2_I4 and two products (AVX-512) */
#define ATTN__VLOAD2_I4S(p, s, lo, hi)                                                            \
    (ATTN__VLOAD2_I4((p), (lo), (hi)), (lo) = ATTN__VMUL((lo), (s)), (hi) = ATTN__VMUL((hi), (s)))
#endif
#ifndef ATTN__HAS_TILE_FP8_BF16  /* fp8 rows to bf16 in one pass (decode's tiles, AVX-512) */
#define ATTN__HAS_TILE_FP8_BF16 0
#define ATTN__TILE_FP8_BF16(dst, src, dt, n) ((void)0)
#endif

/* ---------------------------------------------------------------------------------------------
   [T] Elementwise math over the vector layer, and the logits transform. */

/* Two vectors of fp8 codes at once, where the ISA converts them together (see
   attn__e4m3_f16__avx2); otherwise one at a time. */
#ifndef ATTN__VLOAD2_E4M3
#define ATTN__VLOAD2_E4M3(p, a, b)                                                                \
    ((a) = ATTN__VLOAD_E4M3(p), (b) = ATTN__VLOAD_E4M3((p) + ATTN__L))
#define ATTN__VLOAD2_E5M2(p, a, b)                                                                 \
    ((a) = ATTN__VLOAD_E5M2(p), (b) = ATTN__VLOAD_E5M2((p) + ATTN__L))
#endif
/* The f32 row of ATTN__DTYPE_LIST. */
#define ATTN__VLOAD_F32(p) ATTN__VLOAD(p)
#define ATTN__VSTORE_F32(p, v) ATTN__VSTORE((p), (v))

#ifndef ATTN__VEXP_SCALE
/* p * 2^n, or 0 where x < -87 (a NaN x is not below: it gives e^-87, as the clamp makes it).
   n is an integer in [-126, 0] wherever the result is kept. */
#define ATTN__VEXP_SCALE(x, p, n)                                                                 \
    ATTN__VLT_SELECT((x), ATTN__VSET1(-87.0f), ATTN__VZERO(), ATTN__VMUL((p), ATTN__VEXP2I(n)))
#endif

/* e^x for x <= 0 - every caller's domain: scores minus their running maximum, and -2|x| for
   tanh; so no clamp from above (x may exceed 0 by rounding: e^x stays finite up to 88).
   Cody-Waite range reduction to r in [-ln2/2, ln2/2], a degree-6 minimax polynomial, scaled by
   2^n: within 2.1 ulp of e^x over [-87, 0] (the degree-7 Taylor it replaced: 1.7 ulp, and one
   FMA more). Results below e^-87 are 0, so exp(-inf) = 0 exactly; a NaN x gives e^-87 on every
   ISA (max takes the second operand). */
ATTN__PRIVATE ATTN__INLINE ATTN__VF ATTN__FN(attn__vexp)(ATTN__VF x) {
    const float magic = 12582912.0f;  /* 1.5 * 2^23: adding it rounds to nearest even */
    ATTN__VF xc = ATTN__VMAX(x, ATTN__VSET1(-87.0f));
    ATTN__VF n = ATTN__VFMA(xc, ATTN__VSET1(1.44269504088896341f), ATTN__VSET1(magic));
    n = ATTN__VSUB(n, ATTN__VSET1(magic));
    ATTN__VF r = ATTN__VFMA(n, ATTN__VSET1(-0.693145751953125f), xc);
    r = ATTN__VFMA(n, ATTN__VSET1(-1.428606765330187e-06f), r);
    ATTN__VF p = ATTN__VSET1(0.0014061241f);  /* minimax with c0 = c1 = 1 (Remez, relative error) */
    p = ATTN__VFMA(p, r, ATTN__VSET1(0.008379011f));
    p = ATTN__VFMA(p, r, ATTN__VSET1(0.041664775f));
    p = ATTN__VFMA(p, r, ATTN__VSET1(0.16666366f));
    p = ATTN__VFMA(p, r, ATTN__VSET1(0.50000006f));
    p = ATTN__VFMA(p, r, ATTN__VSET1(1.0f));
    p = ATTN__VFMA(p, r, ATTN__VSET1(1.0f));
    return ATTN__VEXP_SCALE(x, p, n);
}

/* tanh(x) = sign(x) (1 - e) / (1 + e), e = exp(-2|x|): absolute error ~1e-7. */
ATTN__PRIVATE ATTN__INLINE ATTN__VF ATTN__FN(attn__vtanh)(ATTN__VF x) {
    ATTN__VF ax = ATTN__VMAX(x, ATTN__VSUB(ATTN__VZERO(), x));
    ATTN__VF e = ATTN__FN(attn__vexp)(ATTN__VMUL(ax, ATTN__VSET1(-2.0f)));
    ATTN__VF t = ATTN__VMUL(ATTN__VSUB(ATTN__VSET1(1.0f), e),
                            ATTN__VDIV(ATTN__VSET1(1.0f), ATTN__VADD(ATTN__VSET1(1.0f), e)));
    return ATTN__VLT_SELECT(x, ATTN__VZERO(), ATTN__VSUB(ATTN__VZERO(), t), t);
}

/* SEMANTICS past the dot product, on a vector of scores x whose keys lie at d = j - pos from
   their queries: x times mul (unless 1: scores whose query was not pre-scaled), the soft cap
   (x is then s / cap), ALiBi with the lanes' slopes, and -inf where d is outside [lo, hi]
   (attn__mask_bounds) when `masked`. Callers that know each query's visible keys pass only
   those, unmasked. The decode softmax and the bias builders take the scalar instance. */
ATTN__PRIVATE ATTN__INLINE ATTN__VF ATTN__FN(attn__logits_of)(const attn__logits *T, ATTN__VF x,
                                                              float mul, ATTN__VF slope,
                                                              ATTN__VF d, int masked, ATTN__VF lo,
                                                              ATTN__VF hi) {
    if (mul != 1.0f) x = ATTN__VMUL(x, ATTN__VSET1(mul));
    if (T->cap > 0.0f) x = ATTN__VMUL(ATTN__FN(attn__vtanh)(x), ATTN__VSET1(T->cap));
    if (T->slopes) x = ATTN__VFMA(slope, d, x);
    if (masked) x = ATTN__VIN_SELECT(d, lo, hi, x, ATTN__VSET1(-INFINITY));
    return x;
}

/* ---------------------------------------------------------------------------------------------
   [U] Row conversions. */

/* v times fold, the factor a dtype's vector loads are below its values (ATTN__DTYPE_LIST); a
   constant after inlining, so 1 costs nothing. */
ATTN__PRIVATE ATTN__INLINE ATTN__VF ATTN__FN(attn__unfold)(ATTN__VF v, float fold) {
    if (fold != 1.0f) v = ATTN__VMUL(v, ATTN__VSET1(fold));
    return v;
}

/* Elements [e, e + 2L) of an integer group (e a multiple of 2L) as f32, times s (its scale,
   times any factor): code x scale, exact for the scale alone (attn_dtype_row_bytes). int8 a
   vector of codes each; int4 with L = 16 the two nibbles of the group's 16 bytes, else the low
   nibbles of bytes [e, e + 2L) (e < 16) or the high ones of bytes [e - 16, e - 16 + 2L). */
ATTN__PRIVATE ATTN__INLINE void ATTN__FN(attn__int_scaled2)(const uint8_t *group, attn_dtype dt,
                                                           int e, ATTN__VF s, ATTN__VF *a,
                                                           ATTN__VF *b) {
    const uint8_t *codes = group + 2;
    if (dt == ATTN_INT8) {
        *a = ATTN__VLOAD_I8(codes + e);
        *b = ATTN__VLOAD_I8(codes + e + ATTN__L);
    } else if (2 * ATTN__L == ATTN__INT_GROUP) {
        ATTN__VLOAD2_I4S(codes, s, *a, *b);
        return;
    } else {
        ATTN__VF lo, hi;
        ATTN__VLOAD2_I4(codes + e % 16, lo, hi);
        *a = e < 16 ? lo : hi;
        ATTN__VLOAD2_I4(codes + e % 16 + ATTN__L, lo, hi);
        *b = e < 16 ? lo : hi;
    }
    *a = ATTN__VMUL(*a, s);
    *b = ATTN__VMUL(*b, s);
}

/* A row of n elements of an integer cache (attn_dtype_row_bytes) as f32, times mul: whole groups
   a pair of vectors at a time (bit-exact to attn__int_group_to_f32), a shorter last group by
   it. */
ATTN__PRIVATE void ATTN__FN(attn__int_row_to_f32)(float *ATTN_RESTRICT dst, const void *row,
                                                  attn_dtype dt, int n, float mul) {
    const size_t gb = attn__int_group_bytes(dt);
    int g = 0;
    for (; (g + 1) * ATTN__INT_GROUP <= n; g++) {
        const uint8_t *group = (const uint8_t *)row + (size_t)g * gb;
        ATTN__VF s = ATTN__VSET1_BF16(group), a, b;
        if (mul != 1.0f) s = ATTN__VMUL(s, ATTN__VSET1(mul));
        for (int e = 0; e < ATTN__INT_GROUP; e += 2 * ATTN__L) {
            ATTN__FN(attn__int_scaled2)(group, dt, e, s, &a, &b);
            ATTN__VSTORE(dst + g * ATTN__INT_GROUP + e, a);
            ATTN__VSTORE(dst + g * ATTN__INT_GROUP + e + ATTN__L, b);
        }
    }
    if (g * ATTN__INT_GROUP < n)
        attn__int_group_to_f32(dst + g * ATTN__INT_GROUP, (const char *)row + (size_t)g * gb, dt,
                               n - g * ATTN__INT_GROUP, mul);
}

/* dst[i] = src[i] * scale as f32, for any dtype: the whole vectors through the dtype's vector
   loads (bit-exact to the scalar decoders), each through ATTN__TO_F32_OP, the rest element by
   element. The rows of a class (ATTN__TO_F32_<class>) from element i on; FP8 decodes pairs of
   vectors first, as the decode kernels read them, so the tests of this function cover both of
   its loads; INT takes the whole row. */
#define ATTN__TO_F32_PLAIN(one, two, fold, p)                                                     \
    for (; i + ATTN__L <= n; i += ATTN__L)                                                        \
        ATTN__VSTORE(dst + i, ATTN__TO_F32_OP(ATTN__FN(attn__unfold)(one((p) + i), (fold))))
#define ATTN__TO_F32_EVEN_ODD ATTN__TO_F32_PLAIN
#define ATTN__TO_F32_FP8(one, two, fold, p)                                                       \
    for (; i + 2 * ATTN__L <= n; i += 2 * ATTN__L) {                                              \
        ATTN__VF va, vb;                                                                          \
        two((p) + i, va, vb);                                                                     \
        ATTN__VSTORE(dst + i, ATTN__TO_F32_OP(ATTN__FN(attn__unfold)(va, (fold))));               \
        ATTN__VSTORE(dst + i + ATTN__L, ATTN__TO_F32_OP(ATTN__FN(attn__unfold)(vb, (fold))));     \
    }                                                                                             \
    ATTN__TO_F32_PLAIN(one, two, fold, p)
#define ATTN__TO_F32_INT(one, two, fold, p)                                                       \
    ATTN__FN(attn__int_row_to_f32)(dst, (p), dt, n, scale);                                       \
    i = n
#define ATTN__TO_F32_CASE(name, value, t, U, type, str, dec, enc, cls, fold)                      \
    case name:                                                                                    \
        ATTN__TO_F32_##cls(ATTN__VLOAD_##U, ATTN__VLOAD2_##U, fold, (const type *)src);           \
        break;
ATTN__PRIVATE void ATTN__FN(attn__to_f32)(float *ATTN_RESTRICT dst, const void *src,
                                          attn_dtype dt, int n, float scale) {
    int i = 0;
    ATTN__VF vs = ATTN__VSET1(scale);
    if (scale == 1.0f) {  /* a plain decode: no multiply, so even signalling NaNs keep their bits */
        if (dt == ATTN_F32) {
            memcpy(dst, src, sizeof(float) * (size_t)n);
            return;
        }
#define ATTN__TO_F32_OP(v) (v)
        switch (dt) {
            ATTN__DTYPE_LIST(ATTN__TO_F32_CASE)
            case ATTN_DTYPE_COUNT: break;
        }
#undef ATTN__TO_F32_OP
        for (; i < n; i++) dst[i] = attn__load_f32(src, dt, (size_t)i);
        return;
    }
#define ATTN__TO_F32_OP(v) ATTN__VMUL((v), vs)
    switch (dt) {
        ATTN__DTYPE_LIST(ATTN__TO_F32_CASE)
        case ATTN_DTYPE_COUNT: break;
    }
#undef ATTN__TO_F32_OP
    for (; i < n; i++) dst[i] = attn__load_f32(src, dt, (size_t)i) * scale;
}
#undef ATTN__TO_F32_PLAIN
#undef ATTN__TO_F32_EVEN_ODD
#undef ATTN__TO_F32_FP8
#undef ATTN__TO_F32_INT
#undef ATTN__TO_F32_CASE

/* dst[i] = src[i] rounded to dt (RNE; fp8 saturates, element by element): a class's whole
   vectors (ATTN__FROM_F32_<class>) through the dtype's vector store, the rest one at a time; an
   INT dtype's whole row (attn__int_row_quantize). */
#define ATTN__FROM_F32_PLAIN(store, p)                                                            \
    for (; i + ATTN__L <= n; i += ATTN__L) store((p) + i, ATTN__VLOAD(src + i))
#define ATTN__FROM_F32_EVEN_ODD ATTN__FROM_F32_PLAIN
#define ATTN__FROM_F32_FP8(store, p) (void)0
#define ATTN__FROM_F32_INT(store, p) (attn__int_row_quantize((p), dt, src, n), i = n)
#define ATTN__FROM_F32_CASE(name, value, t, U, type, str, dec, enc, cls, fold)                    \
    case name: ATTN__FROM_F32_##cls(ATTN__VSTORE_##U, (type *)dst); break;
ATTN__PRIVATE void ATTN__FN(attn__from_f32)(void *dst, attn_dtype dt,
                                            const float *ATTN_RESTRICT src,
                                            int n) {
    int i = 0;
    switch (dt) {
        ATTN__DTYPE_LIST(ATTN__FROM_F32_CASE)
        case ATTN_DTYPE_COUNT: break;
    }
    for (; i < n; i++) attn__store_f32(dst, dt, (size_t)i, src[i]);
}
#undef ATTN__FROM_F32_PLAIN
#undef ATTN__FROM_F32_EVEN_ODD
#undef ATTN__FROM_F32_FP8
#undef ATTN__FROM_F32_INT
#undef ATTN__FROM_F32_CASE

/* ---------------------------------------------------------------------------------------------
   [V] Prefill: flash-attention over tiles of (query tokens x grouped heads) x keys.
   Query rows live in vector lanes (see attn__prefill_scratch): a row block is NV vectors, NR
   rows; a micro-tile is MR keys (scores) or MR head dims (outputs) by one row block. */

/* S[c][r] = K_c . Q_r for MR keys by NR rows: key elements broadcast from their rows. */
ATTN__PRIVATE ATTN__INLINE void ATTN__FN(attn__qk_micro)(const float *ATTN_RESTRICT qt, int rs,
                                                          int D, const float *const *krows,
                                                          float *ATTN_RESTRICT s) {
    ATTN__VF acc[ATTN__MR][ATTN__NV];
    const float *k[ATTN__MR];
    int i, v, d;
    ATTN__UNROLL for (i = 0; i < ATTN__MR; i++) {
        k[i] = krows[i];
        ATTN__UNROLL for (v = 0; v < ATTN__NV; v++) acc[i][v] = ATTN__VZERO();
    }
    for (d = 0; d < D; d++) {
        ATTN__VF qv[ATTN__NV];
        ATTN__UNROLL for (v = 0; v < ATTN__NV; v++) qv[v] =
                ATTN__VLOAD(qt + (size_t)d * rs + v * ATTN__L);
        ATTN__UNROLL for (i = 0; i < ATTN__MR; i++) {
            ATTN__VF b = ATTN__VSET1(k[i][d]);
            ATTN__UNROLL for (v = 0; v < ATTN__NV; v++) acc[i][v] = ATTN__VFMA(b, qv[v], acc[i][v]);
        }
    }
    ATTN__UNROLL for (i = 0; i < ATTN__MR; i++)
        ATTN__UNROLL for (v = 0; v < ATTN__NV; v++)
            ATTN__VSTORE(s + (size_t)i * rs + v * ATTN__L, acc[i][v]);
}

/* A micro-tile's output accumulators, O[d][r] * alpha[r]; alpha NULL: all the rows' factors
   are 1 (their max did not move), and the multiply is skipped - x * 1 is x, so no bit changes. */
ATTN__PRIVATE ATTN__INLINE void ATTN__FN(attn__load_outputs)(const float *ATTN_RESTRICT ot, int rs,
                                                              const float *ATTN_RESTRICT alpha,
                                                              ATTN__VF acc[ATTN__MR][ATTN__NV]) {
    int i, v;
    ATTN__UNROLL for (i = 0; i < ATTN__MR; i++)
        ATTN__UNROLL for (v = 0; v < ATTN__NV; v++) {
            acc[i][v] = ATTN__VLOAD(ot + (size_t)i * rs + v * ATTN__L);
            if (alpha) acc[i][v] = ATTN__VMUL(acc[i][v], ATTN__VLOAD(alpha + v * ATTN__L));
        }
}

/* O[d][r] = O[d][r] * alpha[r] + sum_c V_c[d] P[c][r] for MR dims (from d0) by NR rows. */
ATTN__PRIVATE ATTN__INLINE void ATTN__FN(attn__pv_micro)(const float *ATTN_RESTRICT p, int rs,
                                                         int n,
                                                          const float *const *vrows, int d0,
                                                          const float *ATTN_RESTRICT alpha,
                                                          float *ATTN_RESTRICT ot) {
    ATTN__VF acc[ATTN__MR][ATTN__NV];
    int i, v, c;
    ATTN__FN(attn__load_outputs)(ot, rs, alpha, acc);
    for (c = 0; c < n; c++) {
        ATTN__VF pv[ATTN__NV];
        const float *vr = vrows[c] + d0;
        ATTN__UNROLL for (v = 0; v < ATTN__NV; v++) pv[v] =
                ATTN__VLOAD(p + (size_t)c * rs + v * ATTN__L);
        ATTN__UNROLL for (i = 0; i < ATTN__MR; i++) {
            ATTN__VF b = ATTN__VSET1(vr[i]);
            ATTN__UNROLL for (v = 0; v < ATTN__NV; v++) acc[i][v] = ATTN__VFMA(b, pv[v], acc[i][v]);
        }
    }
    ATTN__UNROLL for (i = 0; i < ATTN__MR; i++)
        ATTN__UNROLL for (v = 0; v < ATTN__NV; v++)
            ATTN__VSTORE(ot + (size_t)i * rs + v * ATTN__L, acc[i][v]);
}

/* Points krows / vrows at keys [k0, k0+n) of (sequence, kv head): straight into the source
   when it is f32 with no scale (values also need D to be whole micro-tiles, as the kernel reads
   MR dims at a time), else at rows dequantized into kt / vt. Columns n..ncols-1 are zeros. */
ATTN__PRIVATE void ATTN__FN(attn__tile_rows)(const attn__prefill_plan *P, int seq, int g,
                                             int64_t k0, int n, int ncols,
                                             const attn__prefill_scratch *sc) {
    int D = P->D, Dp = P->Dp, c, d;
    int direct_k = P->kv_dtype == ATTN_F32 && P->k_scale == 1.0f;
    int direct_v = direct_k && P->v_scale == 1.0f && D % ATTN__MR == 0;
    for (c = 0; c < n; c++) {
        const char *kp, *vp;
        attn__kv_row(P, seq, g, k0 + c, &kp, &vp);
        if (direct_k) {
            sc->krows[c] = (const float *)(const void *)kp;
        } else {
            ATTN__FN(attn__to_f32)(sc->kt + (size_t)c * D, kp, P->kv_dtype, D, P->k_scale);
            sc->krows[c] = sc->kt + (size_t)c * D;
        }
        if (direct_v) {
            sc->vrows[c] = (const float *)(const void *)vp;
        } else {
            float *vr = sc->vt + (size_t)c * Dp;
            ATTN__FN(attn__to_f32)(vr, vp, P->kv_dtype, D, P->v_scale);
            for (d = D; d < Dp; d++) vr[d] = 0.0f;
            sc->vrows[c] = vr;
        }
    }
    for (; c < ncols; c++) sc->krows[c] = sc->zero;
}

#if ATTN__HAS_DOT2
/* The bf16 pair path (AVX-512 BF16 dot products) for bf16 queries, keys and values. Pairs run
   along each product's reduction: head dims for scores, keys for outputs. Queries are packed
   unscaled (scaling would round them) and the scale goes onto the f32 scores. Probabilities are
   rounded to bf16 for P.V - this path's one approximation, as in every bf16 flash attention
   (relative error <= 2^-9 per weight, below the bf16 output's own rounding); the denominator
   sums the unrounded values, so the lse is as exact as on the f32 path. exec.f32_probs turns
   the path off. */

/* S[c][r] = K_c . Q_r over pairs of head dims, MR keys by NR rows. */
ATTN__DOT2_TARGET ATTN__PRIVATE void ATTN__FN(attn__qk_dot2_micro)(
    const uint32_t *ATTN_RESTRICT qt2, int rs, int D2, const uint16_t *const *krows,
    float *ATTN_RESTRICT s) {
    ATTN__VF acc[ATTN__MR][ATTN__NV];
    const uint16_t *k[ATTN__MR];
    int i, v, d2;
    ATTN__UNROLL for (i = 0; i < ATTN__MR; i++) {
        k[i] = krows[i];
        ATTN__UNROLL for (v = 0; v < ATTN__NV; v++) acc[i][v] = ATTN__VZERO();
    }
    for (d2 = 0; d2 < D2; d2++) {
        ATTN__VI qv[ATTN__NV];
        ATTN__UNROLL for (v = 0; v < ATTN__NV; v++) qv[v] =
                ATTN__VLOADI(qt2 + (size_t)d2 * rs + v * ATTN__L);
        ATTN__UNROLL for (i = 0; i < ATTN__MR; i++) {
            uint32_t pair;
            memcpy(&pair, k[i] + 2 * d2, sizeof pair);
            ATTN__VI b = ATTN__VSET1I(pair);
            ATTN__UNROLL for (v = 0; v < ATTN__NV; v++) acc[i][v] =
                    ATTN__VDOT2(acc[i][v], b, qv[v]);
        }
    }
    ATTN__UNROLL for (i = 0; i < ATTN__MR; i++)
        ATTN__UNROLL for (v = 0; v < ATTN__NV; v++)
            ATTN__VSTORE(s + (size_t)i * rs + v * ATTN__L, acc[i][v]);
}

/* O[d][r] = O[d][r] * alpha[r] + sum over pairs of keys, MR dims (from d0) by NR rows; p2 and
   vt2 ([n2][Dp]) hold pairs of probabilities and of value elements. */
ATTN__DOT2_TARGET ATTN__PRIVATE void ATTN__FN(attn__pv_dot2_micro)(
    const uint32_t *ATTN_RESTRICT p2, int rs, int n2, const uint32_t *ATTN_RESTRICT vt2, int Dp,
    int d0, const float *ATTN_RESTRICT alpha, float *ATTN_RESTRICT ot) {
    ATTN__VF acc[ATTN__MR][ATTN__NV];
    int i, v, c2;
    ATTN__FN(attn__load_outputs)(ot, rs, alpha, acc);
    for (c2 = 0; c2 < n2; c2++) {
        ATTN__VI pv[ATTN__NV];
        const uint32_t *vr = vt2 + (size_t)c2 * Dp + d0;
        ATTN__UNROLL for (v = 0; v < ATTN__NV; v++) pv[v] =
                ATTN__VLOADI(p2 + (size_t)c2 * rs + v * ATTN__L);
        ATTN__UNROLL for (i = 0; i < ATTN__MR; i++) {
            ATTN__VI b = ATTN__VSET1I(vr[i]);
            ATTN__UNROLL for (v = 0; v < ATTN__NV; v++) acc[i][v] =
                    ATTN__VDOT2(acc[i][v], b, pv[v]);
        }
    }
    ATTN__UNROLL for (i = 0; i < ATTN__MR; i++)
        ATTN__UNROLL for (v = 0; v < ATTN__NV; v++)
            ATTN__VSTORE(ot + (size_t)i * rs + v * ATTN__L, acc[i][v]);
}
#endif

#if ATTN__HAS_PAIRS
/* Keys [k0, k0+n) for the pair and tile kernels: where each key and value row is (padding
   columns read zeros). */
ATTN__PRIVATE void ATTN__FN(attn__tile_rows16)(const attn__prefill_plan *P, int seq, int g,
                                               int64_t k0, int n, int ncols,
                                               const attn__prefill_scratch *sc) {
    const uint16_t *zero = (const uint16_t *)(const void *)sc->zero;
    int c;
    for (c = 0; c < n; c++) {
        const char *kp, *vp;
        attn__kv_row(P, seq, g, k0 + c, &kp, &vp);
        sc->krows16[c] = (const uint16_t *)(const void *)kp;
        sc->vrows16[c] = (const uint16_t *)(const void *)vp;
    }
    for (; c < ncols; c++) sc->krows16[c] = sc->vrows16[c] = zero;
}

/* The tile's n value rows (sc->vrows16) interleaved by pairs of keys into vt2 [n/2][Dp] (an odd
   last key pairs with zeros, as do dims >= D). */
ATTN__PRIVATE void ATTN__FN(attn__pack_value_pairs)(const attn__prefill_plan *P, int n,
                                                    const attn__prefill_scratch *sc,
                                                    uint32_t *vt2) {
    const uint16_t *zero = (const uint16_t *)(const void *)sc->zero;
    int D = P->D, Dp = P->Dp, c2, d;
    for (c2 = 0; 2 * c2 < n; c2++) {
        uint32_t *row = vt2 + (size_t)c2 * Dp;
        ATTN__VPAIR_BF16(row, sc->vrows16[2 * c2], 2 * c2 + 1 < n ? sc->vrows16[2 * c2 + 1] : zero,
                         D);
        for (d = D; d < Dp; d++) row[d] = 0;
    }
}

/* The values of the tile at k0 (n keys) as pairs for the pair kernels: from the thread's cache
   (attn__cached_tile), or packed now into the cache's new slot or into vt. The tile's rows are
   where attn__tile_rows16 left them. */
ATTN__PRIVATE const uint32_t *ATTN__FN(attn__tile_values)(const attn__prefill_plan *P, int seq,
                                                          int g, int64_t k0, int n,
                                                          const attn__prefill_scratch *sc) {
    int fill;
    uint32_t *slot = attn__cached_tile(P, seq, g, k0, n, sc, &fill);
    if (slot && !fill) return slot;
    if (!slot) slot = (uint32_t *)(void *)sc->vt;
    ATTN__FN(attn__pack_value_pairs)(P, n, sc, slot);
    return slot;
}
#endif

#if ATTN__HAS_PAIRS
/* The exponentials of a tile's n score rows, x * mul - ref, left as bf16 pairs of keys (pair
   c/2 overwrites row c/2, which has been read already; an odd last key pairs with 0); returns
   their sum, unrounded, so the lse stays f32-exact. */
ATTN__PAIRS_TARGET ATTN__PRIVATE ATTN__VF ATTN__FN(attn__exp_pairs)(float *ATTN_RESTRICT s, int rs,
                                                                   int n,
                                                                   ATTN__VF mul, ATTN__VF neg_ref) {
    ATTN__VF sum = ATTN__VZERO();
    for (int c = 0; c < n; c += 2) {
        ATTN__VF e0 =
                ATTN__FN(attn__vexp)(ATTN__VFMA(ATTN__VLOAD(s + (size_t)c * rs), mul, neg_ref));
        ATTN__VF e1 = ATTN__VZERO();
        if (c + 1 < n)
            e1 = ATTN__FN(attn__vexp)(ATTN__VFMA(ATTN__VLOAD(s + (size_t)(c + 1) * rs), mul,
                                                 neg_ref));
        ATTN__VPAIR_PROBS(s + (size_t)(c / 2) * rs, e0, e1);
        sum = ATTN__VADD(sum, ATTN__VADD(e0, e1));
    }
    return sum;
}
#endif

/* Online softmax of one vector of rows over a tile of n keys: applies the logits transform
   (score_mul, cap, ALiBi, and the mask when `masked`), updates the rows' m and l and leaves their
   rescale factor in a. dist0 is the first key's position minus the item's first query position;
   rel holds each row's query position minus that first one, so dist0 + c - rel is key minus
   query position. With `pairs` the probabilities are left as bf16 pairs of keys. */
ATTN__PRIVATE void ATTN__FN(attn__softmax_lanes)(const attn__prefill_plan *P,
                                                 float *ATTN_RESTRICT s,
                                                 int rs, int n, float dist0, int masked,
                                                 float score_mul, int pairs,
                                                 const attn__prefill_scratch *sc, int r0) {
    attn__logits T = P->logits;
    ATTN__VF rel = ATTN__VLOAD(sc->rel + r0), slope = ATTN__VLOAD(sc->slope + r0);
    ATTN__VF ninf = ATTN__VSET1(-INFINITY), xmax = ninf, sum = ATTN__VZERO();
    int64_t d_lo, d_hi;  /* as floats: exact, or past any distance on an open side */
    attn__mask_bounds(&T, &d_lo, &d_hi);
    ATTN__VF lo = ATTN__VSET1((float)d_lo), hi = ATTN__VSET1((float)d_hi);
    /* shaped scores are rewritten in place; plain ones stay raw and take score_mul (> 0, so
       it commutes with max) inside the exponent's FMA */
    int c, shape = attn__logits_shaped(&T) || masked;
    ATTN__VF mul = ATTN__VSET1(score_mul), exp_mul = shape ? ATTN__VSET1(1.0f) : mul;
    for (c = 0; c < n; c++) {
        float *sc_row = s + (size_t)c * rs;
        ATTN__VF x = ATTN__VLOAD(sc_row);
        if (shape) {
            ATTN__VF dist = ATTN__VSUB(ATTN__VSET1(dist0 + (float)c), rel);
            x = ATTN__FN(attn__logits_of)(&T, x, score_mul, slope, dist, masked, lo, hi);
            ATTN__VSTORE(sc_row, x);
        }
        xmax = ATTN__VMAX(xmax, x);
    }
    if (!shape) xmax = ATTN__VMUL(xmax, mul);
    ATTN__VF m_old = ATTN__VLOAD(sc->m + r0), m_new = ATTN__VMAX(m_old, xmax);
    /* rows that have seen no key yet subtract 0, not -inf (which would make NaNs) */
    ATTN__VF ref = ATTN__VLT_SELECT(m_new, ATTN__VSET1(-FLT_MAX), ATTN__VZERO(), m_new);
    ATTN__VF neg_ref = ATTN__VSUB(ATTN__VZERO(), ref);
#if ATTN__HAS_PAIRS
    if (pairs) sum = ATTN__FN(attn__exp_pairs)(s, rs, n, exp_mul, neg_ref);
    else
#endif
    {
        (void)pairs;
        for (c = 0; c < n; c++) {
            float *sc_row = s + (size_t)c * rs;
            ATTN__VF e = ATTN__FN(attn__vexp)(ATTN__VFMA(ATTN__VLOAD(sc_row), exp_mul, neg_ref));
            ATTN__VSTORE(sc_row, e);
            sum = ATTN__VADD(sum, e);
        }
    }
    ATTN__VF alpha = ATTN__FN(attn__vexp)(ATTN__VSUB(m_old, ref));
    ATTN__VSTORE(sc->a + r0, alpha);
    ATTN__VSTORE(sc->l + r0, ATTN__VFMA(ATTN__VLOAD(sc->l + r0), alpha, sum));
    ATTN__VSTORE(sc->m + r0, m_new);
}

/* Sets up an item's per-row state (row r = token r / G, head g*G + r % G) for rows_pad rows and
   zeroes its outputs; padding rows start empty and are never written out. */
ATTN__PRIVATE void ATTN__FN(attn__init_rows)(const attn__prefill_plan *P, int g, int rows,
                                             int rows_pad, const attn__prefill_scratch *sc) {
    int G = P->G, rs = P->rows_cap, r, d;
    for (r = 0; r < rows_pad; r++) {
        int h = g * G + r % G, real = r < rows;
        sc->m[r] = real && P->sinks ? P->sinks[h] : -INFINITY;
        sc->l[r] = real && P->sinks ? 1.0f : 0.0f;
        sc->slope[r] = real ? attn__logits_slope(&P->logits, h) : 0.0f;
        sc->rel[r] = (float)(r / G);
        sc->a[r] = 1.0f;
    }
    for (d = 0; d < P->Dp; d++)
        for (r = 0; r < rows_pad; r++) sc->ot[(size_t)d * rs + r] = 0.0f;
}

/* Transposes an L x L block: the first m rows of src (stride ss; the others taken as 0) go
   to columns of dst (stride ds), of which the first n rows are written, row i times mul[i]
   when mul is given. Moves bits unchanged otherwise (pairs of bf16 ride as one lane). */
ATTN__PRIVATE ATTN__INLINE void ATTN__FN(attn__transpose_block)(const float *ATTN_RESTRICT src,
                                                                size_t ss, int m,
                                                                 float *ATTN_RESTRICT dst,
                                                                 size_t ds, int n,
                                                                 const float *mul) {
    ATTN__VF v[ATTN__L];
    int i;
    for (i = 0; i < ATTN__L; i++) v[i] = i < m ? ATTN__VLOAD(src + i * ss) : ATTN__VZERO();
    ATTN__VTRANSPOSE(v);
    for (i = 0; i < n; i++) ATTN__VSTORE(dst + i * ds, mul ? ATTN__VMUL(v[i], ATTN__VSET1(mul[i]))
                                         : v[i]);
}

/* Loads an item's query rows transposed, L rows at a time - as f32 pre-scaled, or as unscaled
   bf16 pairs of dims for the pair kernels (a pair of bf16 is moved as one 32-bit lane);
   padding rows are zero queries. */
ATTN__PRIVATE void ATTN__FN(attn__load_queries)(const attn__prefill_plan *P, int g, int64_t t0,
                                                int rows, int rows_pad, int pairs,
                                                const attn__prefill_scratch *sc) {
    int D = P->D, rs = P->rows_cap, cols = pairs ? D / 2 : D, r, i, d;
    size_t qsz = attn_dtype_size(P->q_dtype), stride = (size_t)attn__block_row_stride(D);
    for (r = 0; r < rows; r++) {  /* all lines asked for first: the rows come from memory */
        const char *src = attn__query_row(P, g, t0, r);
        for (d = 0; d < D * (int)qsz; d += 64) ATTN__PREFETCH(src + d);
    }
    for (r = 0; r < rows_pad; r += ATTN__L) {
        for (i = 0; i < ATTN__L; i++) {  /* the block's rows, as f32 (or pairs) */
            float *dst = sc->rowblk + (size_t)i * stride;
            if (r + i >= rows) memset(dst, 0, sizeof(float) * (size_t)cols);
            else if (pairs) memcpy(dst, attn__query_row(P, g, t0, r + i),
                                   sizeof(float) * (size_t)cols);
            else ATTN__FN(attn__to_f32)(dst, attn__query_row(P, g, t0, r + i), P->q_dtype, D,
                                        P->q_mul);
            /* read by the last vector, never stored */
            for (d = cols; d < (int)stride; d++) dst[d] = 0.0f;
        }
        for (d = 0; d < cols; d += ATTN__L)
            ATTN__FN(attn__transpose_block)(sc->rowblk + d, stride, ATTN__L,
                                            sc->qt + (size_t)d * rs + r, (size_t)rs,
                                            ATTN__MIN(ATTN__L, cols - d), NULL);
    }
    for (d = 0; d < P->Dp; d++) sc->zero[d] = 0.0f;
    ATTN__FN(attn__init_rows)(P, g, rows, rows_pad, sc);
}

/* Writes an item's finished rows, L at a time: out = O * out_mul / l (0 when no key is
   visible; out_mul: the value scale the tile kernels leave out, else 1), lse = m + log(l).
   pos0 is the first row's query position. */
ATTN__PRIVATE void ATTN__FN(attn__store_rows)(const attn__prefill_plan *P, int g, int64_t t0,
                                              int64_t pos0, int64_t Lk, int rows, float out_mul,
                                              const attn__prefill_scratch *sc) {
    int G = P->G, D = P->D, rs = P->rows_cap, r0, i, d;
    size_t osz = attn_dtype_size(P->out_dtype), stride = (size_t)attn__block_row_stride(D);
    attn__logits T = P->logits;  /* kept in registers across the calls below */
    for (r0 = 0; r0 < rows; r0 += ATTN__L) {
        int n = ATTN__MIN(ATTN__L, rows - r0), has_keys[ATTN__L];
        float inv[ATTN__L];
        for (i = 0; i < n; i++) {
            has_keys[i] = attn__sees_keys(&T, pos0 + (r0 + i) / G, Lk);
            inv[i] = has_keys[i] ? 1.0f / sc->l[r0 + i] : 0.0f;
            if (out_mul != 1.0f) inv[i] *= out_mul;
        }
        for (d = 0; d < D; d += ATTN__L)  /* rows back from lanes (rows_cap covers r0 + L) */
            ATTN__FN(attn__transpose_block)(sc->ot + (size_t)d * rs + r0, (size_t)rs,
                                            ATTN__MIN(ATTN__L, D - d),
                                            sc->rowblk + d, stride, n, inv);
        for (i = 0; i < n; i++) {
            int r = r0 + i, h = g * G + r % G;
            int64_t token = t0 + r / G;
            ATTN__FN(attn__from_f32)(P->out + (size_t)(token * P->out_stride + (int64_t)h * D)
                                     * osz,
                                     P->out_dtype, sc->rowblk + (size_t)i * stride, D);
            if (P->lse) P->lse[token * P->H + h] = has_keys[i] ? sc->m[r] + logf(sc->l[r])
                : -INFINITY;
        }
    }
}

/* Whether any row of [r0, r0 + L) masks any key of [k0, k0 + n): decides the softmax path. */
ATTN__PRIVATE int ATTN__FN(attn__block_masked)(const attn__prefill_plan *P, int64_t pos0, int r0,
                                               int64_t k0, int n) {
    int64_t first = pos0 + r0 / P->G, last = pos0 + (r0 + ATTN__L - 1) / P->G, lo, hi;
    attn__mask_bounds(&P->logits, &lo, &hi);
    return k0 - last < lo || k0 + n - 1 - first > hi;  /* the nearest and farthest distances */
}

/* Asks for the key and value rows [k0, k0+n) of (sequence, KV head g) to be brought into
   cache: the next tile's, while the current one is computed. The rows are a few lines each,
   a whole K/V row (all KV heads) apart, which the hardware prefetcher follows poorly. */
ATTN__PRIVATE void ATTN__FN(attn__prefetch_tile)(const attn__prefill_plan *P, int seq, int g,
                                                 int64_t k0,
                                                 int n) {
    size_t bytes = P->kv_row_bytes;
    for (int c = 0; c < n; c++) {
        const char *kp, *vp;
        attn__kv_row(P, seq, g, k0 + c, &kp, &vp);
        for (size_t b = 0; b < bytes; b += 64) { ATTN__PREFETCH(kp + b); ATTN__PREFETCH(vp + b); }
    }
}

#if ATTN__HAS_TILES
/* The tile kernels (ATTN_ISA_AMX) for bf16 queries, keys and values with D a multiple of 32:
   both products of a key tile on 16 x 16 f32 tiles, in the item's transposed layout, under the
   pair path's precision rule (queries unscaled, probabilities rounded to bf16 for P.V):
     scores   S^T[key][row] = K . Q^T: A = 16 key rows, 32 dims a step (packed into 1 KB
              blocks), B = the queries' pairs of dims (qt);
     outputs  O^T[dim][row] += V^T . P^T: A = 16 rows of the values transposed (dim d's keys in
              order, so pairs of keys), B = the probabilities' pairs of keys (s, as
              attn__exp_pairs leaves them).
   Both A operands are packed once per (sequence, KV head) and key tile and kept like the pair
   path's value tiles (attn__tile_operands). A step takes TILE_STEP key tiles, so the outputs
   are loaded, rescaled and stored once per 256 keys (docs/PERF.md#tile-step).
   Tiles 0-3 accumulate a 2 x 2 block of 16 x 16 results, 4-5 hold A, 6-7 hold B; every tile
   is 16 rows of 64 bytes. ATTN__T* are the AMX instructions in the AVX-512 pass, and in the
   AVX2 pass (ATTN_TILES_EMULATE) the same operations on a tile file in memory, so the kernels
   above them are one code, tested on any x86 CPU. */
#if ATTN__TILES_REAL
typedef struct ATTN__FN(attn__tile_file) { int unused; } ATTN__FN(attn__tile_file);
/* GCC writes the tile instructions as asm statements that name only their pointer registers:
   the compiler knows of no memory they read or write. This barrier keeps every store before a
   tile load (the configuration, packed operands) and every load after a tile store. */
#define ATTN__TILE_FENCE() __asm__ volatile("" ::: "memory")
#define ATTN__TLOAD(tf, t, p, stride) _tile_loadd(t, (p), (stride))
#define ATTN__TSTORE(tf, t, p, stride) _tile_stored(t, (p), (stride))
#define ATTN__TZERO(tf, t) _tile_zero(t)
#define ATTN__TDP(tf, c, a, b) _tile_dpbf16ps(c, a, b)

/* Palette 1, tiles 0-7 of 16 rows x 64 bytes: once per item on the thread that runs it, which
   releases them after (OpenMP threads and a caller's pool alike). */
ATTN__TILE_TARGET ATTN__PRIVATE void ATTN__FN(attn__tiles_begin)(void) {
    unsigned char cfg[64];
    memset(cfg, 0, sizeof cfg);
    cfg[0] = 1;
    for (int t = 0; t < 8; t++) { cfg[16 + 2 * t] = 64; cfg[48 + t] = 16; }
    ATTN__TILE_FENCE();
    _tile_loadconfig(cfg);
}
ATTN__TILE_TARGET ATTN__PRIVATE void ATTN__FN(attn__tiles_end)(void) { _tile_release(); }
#else
typedef struct ATTN__FN(attn__tile_file) { unsigned char reg[8][1024]; } ATTN__FN(attn__tile_file);
#define ATTN__TLOAD(tf, t, p, stride) ATTN__FN(attn__tile_emu_load)(&(tf), t, (p), (stride))
#define ATTN__TSTORE(tf, t, p, stride) ATTN__FN(attn__tile_emu_store)(&(tf), t, (p), (stride))
#define ATTN__TZERO(tf, t) memset((tf).reg[t], 0, 1024)
#define ATTN__TDP(tf, c, a, b) ATTN__FN(attn__tile_emu_dp)(&(tf), c, a, b)
#define ATTN__TILE_FENCE() ((void)0)

ATTN__PRIVATE void ATTN__FN(attn__tiles_begin)(void) {}
ATTN__PRIVATE void ATTN__FN(attn__tiles_end)(void) {}
ATTN__PRIVATE void ATTN__FN(attn__tile_emu_load)(ATTN__FN(attn__tile_file) *tf, int t,
                                                 const void *p, size_t stride) {
    for (int r = 0; r < 16; r++) memcpy(tf->reg[t] + 64 * r, (const char *)p + r * stride, 64);
}
ATTN__PRIVATE void ATTN__FN(attn__tile_emu_store)(const ATTN__FN(attn__tile_file) *tf, int t,
                                                  void *p, size_t stride) {
    for (int r = 0; r < 16; r++) memcpy((char *)p + r * stride, tf->reg[t] + 64 * r, 64);
}
/* tdpbf16ps: C[m][n] += A[m].pair[k] . B[k].pair[n] over k, products of bf16 exact in f32. */
ATTN__PRIVATE void ATTN__FN(attn__tile_emu_dp)(ATTN__FN(attn__tile_file) *tf, int c, int a,
                                               int b) {
    uint16_t A[16 * 32], B[16 * 32];
    float C[256], bf[32];
    memcpy(A, tf->reg[a], sizeof A); memcpy(B, tf->reg[b], sizeof B);
    memcpy(C, tf->reg[c], sizeof C);
    for (int k = 0; k < 16; k++) {
        for (int j = 0; j < 32; j++) bf[j] = attn_bf16_to_f32(B[k * 32 + j]);
        for (int m = 0; m < 16; m++) {
            float a0 = attn_bf16_to_f32(A[m * 32 + 2 * k]);
            float a1 = attn_bf16_to_f32(A[m * 32 + 2 * k + 1]);
            for (int n = 0; n < 16; n++) C[m * 16 + n] += a0 * bf[2 * n] + a1 * bf[2 * n + 1];
        }
    }
    memcpy(tf->reg[c], C, sizeof C);
}
#endif

/* S^T for nk (1 or 2) blocks of 16 keys (packed by attn__pack_key_tiles from kp) by nr (1 or 2)
   blocks of 16 rows (query pairs of dims qt2, row stride rs), over D dims; into s (stride rs). */
ATTN__TILE_TARGET ATTN__PRIVATE void ATTN__FN(attn__qk_tiles)(const uint16_t *kp, int nk,
                                                              const uint32_t *qt2, int rs, int nr,
                                                              int D, float *s) {
    ATTN__FN(attn__tile_file) tf;
    size_t row = (size_t)rs * sizeof(float);
    (void)tf;
    ATTN__TILE_FENCE();
    ATTN__TZERO(tf, 0);
    if (nr > 1) ATTN__TZERO(tf, 1);
    if (nk > 1) ATTN__TZERO(tf, 2);
    if (nk > 1 && nr > 1) ATTN__TZERO(tf, 3);
    for (int d = 0; d < D; d += 32) {
        const uint32_t *q = qt2 + (size_t)(d / 2) * rs;
        const uint16_t *k = kp + (size_t)(d / 32) * 512;  /* 16 keys x 32 dims, 1 KB */
        ATTN__TLOAD(tf, 4, k, 64);
        ATTN__TLOAD(tf, 6, q, row);
        ATTN__TDP(tf, 0, 4, 6);
        if (nr > 1) {
            ATTN__TLOAD(tf, 7, q + 16, row);
            ATTN__TDP(tf, 1, 4, 7);
        }
        if (nk > 1) {
            ATTN__TLOAD(tf, 5, k + (size_t)16 * D, 64);
            ATTN__TDP(tf, 2, 5, 6);
            if (nr > 1) ATTN__TDP(tf, 3, 5, 7);
        }
    }
    ATTN__TSTORE(tf, 0, s, row);
    if (nr > 1) ATTN__TSTORE(tf, 1, s + 16, row);
    if (nk > 1) ATTN__TSTORE(tf, 2, s + (size_t)16 * rs, row);
    if (nk > 1 && nr > 1) ATTN__TSTORE(tf, 3, s + (size_t)16 * rs + 16, row);
    ATTN__TILE_FENCE();
}

/* O^T += V^T . P^T for 2 blocks of 16 dims by nr (1 or 2) blocks of 16 rows (probability
   pairs p2, row stride rs), over `chunks` steps of 32 keys: steps 2t and 2t+1 read the value
   columns vc[t] ([dims][KEY_TILE] bf16, from the first of the two dim blocks) of key tile t;
   on the outputs ot (stride rs). */
ATTN__TILE_TARGET ATTN__PRIVATE void ATTN__FN(attn__pv_tiles)(const uint16_t *const *vc,
                                                              const uint32_t *p2, int rs, int nr,
                                                              int chunks, float *ot) {
    ATTN__FN(attn__tile_file) tf;
    size_t row = (size_t)rs * sizeof(float), vrow = ATTN__KEY_TILE * sizeof(uint16_t);
    float *ot2 = ot + (size_t)16 * rs;
    (void)tf;
    ATTN__TILE_FENCE();
    ATTN__TLOAD(tf, 0, ot, row);
    ATTN__TLOAD(tf, 2, ot2, row);
    if (nr > 1) {
        ATTN__TLOAD(tf, 1, ot + 16, row);
        ATTN__TLOAD(tf, 3, ot2 + 16, row);
    }
    for (int c = 0; c < chunks; c++) {
        const uint32_t *p = p2 + (size_t)16 * c * rs;
        const uint16_t *v = vc[c / 2] + 32 * (c % 2);
        ATTN__TLOAD(tf, 6, p, row);
        ATTN__TLOAD(tf, 4, v, vrow);
        ATTN__TLOAD(tf, 5, v + (size_t)16 * ATTN__KEY_TILE, vrow);
        ATTN__TDP(tf, 0, 4, 6);
        ATTN__TDP(tf, 2, 5, 6);
        if (nr > 1) {
            ATTN__TLOAD(tf, 7, p + 16, row);
            ATTN__TDP(tf, 1, 4, 7);
            ATTN__TDP(tf, 3, 5, 7);
        }
    }
    ATTN__TSTORE(tf, 0, ot, row);
    ATTN__TSTORE(tf, 2, ot2, row);
    if (nr > 1) {
        ATTN__TSTORE(tf, 1, ot + 16, row);
        ATTN__TSTORE(tf, 3, ot2 + 16, row);
    }
    ATTN__TILE_FENCE();
}

/* fp8 cache rows as bf16 (exact: every e4m3 and e5m2 value is a bf16 value), unscaled: rows
   [c0, c1) of the tile's row pointers are converted into dst ([c1 - c0][D]) through f32 in the
   scratch's row block and pointed there. */
ATTN__PRIVATE void ATTN__FN(attn__tile_rows_to_bf16)(const attn__prefill_plan *P,
                                                     const uint16_t **rows, int c0, int c1,
                                                     uint16_t *dst,
                                                     const attn__prefill_scratch *sc) {
    for (int c = c0; c < c1; c++) {
        uint16_t *to = dst + (size_t)(c - c0) * P->D;
        ATTN__FN(attn__to_f32)(sc->rowblk, rows[c], P->kv_dtype, P->D, 1.0f);
        ATTN__FN(attn__from_f32)(to, ATTN_BF16, sc->rowblk, P->D);
        rows[c] = to;
    }
}

/* A key tile's keys (sc->krows16, padded to whole blocks of 16) as the A tiles of the score
   products: dims [32 j, 32 j + 32) of keys [16 b, 16 b + 16) at pack + (b D / 32 + j) 512
   (bf16 elements), 1 KB each, loaded with a stride of 64 bytes. The cache holds a KV head's
   rows a whole K/V row apart (2 KB for 8 heads of 128 dims), which maps a tile's 16 rows onto
   two L1 sets: loaded in place they came from L2 (docs/PERF.md#tile-step). fp8 rows are made
   bf16 on the way (exact, unscaled: k_scale goes into the scores). */
ATTN__PRIVATE void ATTN__FN(attn__pack_key_tiles)(const attn__prefill_plan *P, int keys,
                                                  const attn__prefill_scratch *sc,
                                                  uint16_t *pack) {
    const uint16_t *zero = (const uint16_t *)(const void *)sc->zero;
    uint16_t *bf16_row = (uint16_t *)(void *)(sc->rowblk + P->D);  /* past to_f32's D floats */
    int D = P->D, chunks = D / 32;
    for (int c = 0; c < keys; c++) {
        uint16_t *dst = pack + ((size_t)(c / 16) * chunks * 16 + c % 16) * 32;
        if (P->kv_dtype != ATTN_BF16 && sc->krows16[c] != zero)  /* krows16[c] becomes bf16_row */
            ATTN__FN(attn__tile_rows_to_bf16)(P, sc->krows16, c, c + 1, bf16_row, sc);
        const uint16_t *src = sc->krows16[c];
        for (int j = 0; j < chunks; j++)
            memcpy(dst + (size_t)j * 512, src + 32 * j, 32 * sizeof(uint16_t));
    }
}

/* The tile's n values as columns for the output tiles, dst [D][KEY_TILE] bf16 (row d: the keys
   in order, so pairs of keys per 32-bit word; keys past n are 0): the pair path's value pairs
   (in vt) transposed as 32-bit words. fp8 values are made bf16 first, unscaled (v_scale goes
   onto the outputs). */
ATTN__PRIVATE void ATTN__FN(attn__pack_value_cols)(const attn__prefill_plan *P, int n,
                                                   const attn__prefill_scratch *sc,
                                                   uint32_t *dst) {
    const uint32_t *pairs = (const uint32_t *)(const void *)sc->vt;
    int D = P->D, Dp = P->Dp, valid = (n + 1) / 2, k2, d;
    if (P->kv_dtype != ATTN_BF16) {  /* fp8: the rows as bf16 in vt past the pairs' half */
        uint16_t *rows = (uint16_t *)(void *)(sc->vt + (size_t)ATTN__KEY_TILE / 2 * Dp);
        ATTN__FN(attn__tile_rows_to_bf16)(P, sc->vrows16, 0, n, rows, sc);
    }
    ATTN__FN(attn__pack_value_pairs)(P, n, sc, (uint32_t *)(void *)sc->vt);
    for (k2 = 0; k2 < ATTN__KEY_TILE / 2; k2 += ATTN__L)
        for (d = 0; d < D; d += ATTN__L) {
            const uint32_t *from = pairs + (size_t)k2 * Dp + d;
            uint32_t *to = dst + (size_t)d * (ATTN__KEY_TILE / 2) + k2;
            ATTN__FN(attn__transpose_block)((const float *)(const void *)from, (size_t)Dp,
                                            ATTN__MAX(0, ATTN__MIN(ATTN__L, valid - k2)),
                                            (float *)(void *)to, ATTN__KEY_TILE / 2, ATTN__L,
                                            NULL);
        }
}

/* Key tile t of a step (keys [k0, k0 + n), n <= KEY_TILE) as the tile kernels read it: its value
   columns (*vc, attn__pack_value_cols) and its keys (*kc, attn__pack_key_tiles), from the
   thread's cache (attn__cached_tile) or packed now into the cache's new slot (values, then
   keys) or into kt (keys of tile t at 32 D t floats, values at 32 D (t + TILE_STEP)). */
ATTN__PRIVATE void ATTN__FN(attn__tile_operands)(const attn__prefill_plan *P, int seq, int g,
                                                 int64_t k0, int n, int t,
                                                 const attn__prefill_scratch *sc,
                                                 const uint16_t **vc, const uint16_t **kc) {
    int fill, keys = (n + 15) / 16 * 16;
    size_t words = (size_t)(ATTN__KEY_TILE / 2) * P->D;  /* one tile's keys or values, floats */
    uint32_t *slot = attn__cached_tile(P, seq, g, k0, n, sc, &fill);
    uint32_t *vdst = slot ? slot
                          : (uint32_t *)(void *)(sc->kt + (size_t)(t + ATTN__TILE_STEP) * words);
    uint16_t *kdst = slot ? (uint16_t *)(void *)(slot + attn__value_tile_words(P->Dp))
                          : (uint16_t *)(void *)(sc->kt + (size_t)t * words);
    *vc = (const uint16_t *)(const void *)vdst;
    *kc = kdst;
    if (slot && !fill) return;
    ATTN__FN(attn__tile_rows16)(P, seq, g, k0, n, keys, sc);
    ATTN__FN(attn__pack_value_cols)(P, n, sc, vdst);
    ATTN__FN(attn__pack_key_tiles)(P, keys, sc, kdst);
}

/* O = O * alpha for the rows [r_begin, r_end) whose factor is not 1, a vector of rows at a
   time. */
ATTN__PRIVATE void ATTN__FN(attn__rescale_outputs)(const attn__prefill_scratch *sc, int rs, int D,
                                                   int r_begin, int r_end) {
    for (int r0 = r_begin; r0 < r_end; r0 += ATTN__L) {
        int i = 0;
        while (i < ATTN__L && sc->a[r0 + i] == 1.0f) i++;
        if (i == ATTN__L) continue;  /* x * 1 is x: skipping changes no bit */
        ATTN__VF alpha = ATTN__VLOAD(sc->a + r0);
        for (int d = 0; d < D; d++) {
            float *o = sc->ot + (size_t)d * rs + r0;
            ATTN__VSTORE(o, ATTN__VMUL(ATTN__VLOAD(o), alpha));
        }
    }
}

/* One step on tiles: keys [k0, k0+n), n <= TILE_STEP KEY_TILE, for the rows [0, rows_pad) (a
   multiple of 16) of an item whose first query is at pos0. First each key tile's keys and
   values as the tiles read them (attn__tile_operands). Then, a pair of row blocks (32 rows) at
   a time, software-pipelined: the scores of pair r go to the tiles, then the softmax of pair
   r - 1 runs on the vector units while the tiles work, then that pair's outputs: O = O * alpha
   + P . V, after zeroing the pairs of probabilities past the keys up to a whole 32-key step
   (the products read them). Each row's stages keep their order and rows never mix, so the
   results are those of running the stages one after another. */
ATTN__PRIVATE void ATTN__FN(attn__tile_step)(const attn__prefill_plan *P, int seq, int g,
                                             int64_t k0, int n, int rows_pad, int64_t pos0,
                                             const attn__prefill_scratch *sc) {
    int rs = P->rows_cap, D = P->D, blocks = (n + 15) / 16, pairs = (n + 1) / 2;
    int chunks = (pairs + 15) / 16, groups = (rows_pad + 31) / 32, b, t, r;
    uint32_t *p2 = (uint32_t *)(void *)sc->s;
    const uint16_t *vc[ATTN__TILE_STEP], *kc[ATTN__TILE_STEP];
    float score_mul = P->q_mul * P->k_scale;  /* an fp8 cache's key scale (1 for bf16) */
    for (t = 0; t * ATTN__KEY_TILE < n; t++)
        ATTN__FN(attn__tile_operands)(P, seq, g, k0 + t * ATTN__KEY_TILE,
                                      ATTN__MIN(ATTN__KEY_TILE, n - t * ATTN__KEY_TILE), t, sc,
                                      &vc[t], &kc[t]);
    for (r = 0; r <= groups; r++) {
        if (r < groups) {  /* scores of row pair r */
            int rb = 32 * r, nr = ATTN__MIN(2, (rows_pad - rb) / 16);
            for (b = 0; b < blocks; b += 2)
                ATTN__FN(attn__qk_tiles)(kc[b / 4] + (size_t)16 * (b % 4) * D,
                                         ATTN__MIN(2, blocks - b),
                                         (const uint32_t *)(const void *)sc->qt + rb, rs, nr, D,
                                         sc->s + (size_t)16 * b * rs + rb);
        }
        if (r > 0) {  /* softmax and outputs of row pair r - 1 */
            int r0 = 32 * (r - 1), r1 = ATTN__MIN(r0 + 32, rows_pad), rb, c2, d;
            for (rb = r0; rb < r1; rb += ATTN__L)
                ATTN__FN(attn__softmax_lanes)(P, sc->s + rb, rs, n, (float)(k0 - pos0),
                                              ATTN__FN(attn__block_masked)(P, pos0, rb, k0, n),
                                              score_mul, 1, sc, rb);
            for (c2 = pairs; c2 < 16 * chunks; c2++)
                memset(p2 + (size_t)c2 * rs + r0, 0, sizeof(uint32_t) * (size_t)(r1 - r0));
            ATTN__FN(attn__rescale_outputs)(sc, rs, D, r0, r1);
            for (d = 0; d < D; d += 32) {
                const uint16_t *vd[ATTN__TILE_STEP];
                for (t = 0; t * ATTN__KEY_TILE < n; t++) vd[t] = vc[t] + (size_t)d * ATTN__KEY_TILE;
                ATTN__FN(attn__pv_tiles)(vd, p2 + r0, rs, (r1 - r0) / 16, chunks,
                                         sc->ot + (size_t)d * rs + r0);
            }
        }
    }
}
#endif

/* Scores of one tile: S[c][r] for keys [k0, k0+n) by rows [0, rows_pad). */
ATTN__PRIVATE void ATTN__FN(attn__tile_scores)(const attn__prefill_plan *P, int seq, int g,
                                               int64_t k0, int n, int rows_pad, int pairs,
                                               const attn__prefill_scratch *sc) {
    int rs = P->rows_cap, ncols = (n + ATTN__MR - 1) / ATTN__MR * ATTN__MR, rb, c0;
#if ATTN__HAS_DOT2
    if (pairs) {
        ATTN__FN(attn__tile_rows16)(P, seq, g, k0, n, ncols, sc);
        for (rb = 0; rb < rows_pad; rb += ATTN__NR)
            for (c0 = 0; c0 < ncols; c0 += ATTN__MR)
                ATTN__FN(attn__qk_dot2_micro)((const uint32_t *)(const void *)sc->qt + rb, rs,
                                              P->D / 2,
                                              sc->krows16 + c0, sc->s + (size_t)c0 * rs + rb);
        return;
    }
#endif
    (void)pairs;
    ATTN__FN(attn__tile_rows)(P, seq, g, k0, n, ncols, sc);
    for (rb = 0; rb < rows_pad; rb += ATTN__NR)
        for (c0 = 0; c0 < ncols; c0 += ATTN__MR)
            ATTN__FN(attn__qk_micro)(sc->qt + rb, rs, P->D, sc->krows + c0,
                                     sc->s + (size_t)c0 * rs + rb);
}

/* The rescale factors of row block rb, or NULL when they are all 1 (nothing to rescale). */
ATTN__PRIVATE const float *ATTN__FN(attn__rescale_of)(const attn__prefill_scratch *sc, int rb) {
    for (int r = rb; r < rb + ATTN__NR; r++)
        if (sc->a[r] != 1.0f) return sc->a + rb;
    return NULL;
}

/* Outputs after one tile: O = O * alpha + P . V over the tile's n keys; vt2: the tile's value
   pairs for the pair kernels, NULL for the f32 ones. */
ATTN__PRIVATE void ATTN__FN(attn__tile_outputs)(const attn__prefill_plan *P, int n, int rows_pad,
                                                const uint32_t *vt2,
                                                const attn__prefill_scratch *sc) {
    int rs = P->rows_cap, Dm = (P->D + ATTN__MR - 1) / ATTN__MR * ATTN__MR, rb, d0;
#if ATTN__HAS_DOT2
    if (vt2) {
        for (rb = 0; rb < rows_pad; rb += ATTN__NR) {
            const float *alpha = ATTN__FN(attn__rescale_of)(sc, rb);
            for (d0 = 0; d0 < Dm; d0 += ATTN__MR)
                ATTN__FN(attn__pv_dot2_micro)((const uint32_t *)(const void *)sc->s + rb, rs,
                                              (n + 1) / 2,
                                              vt2, P->Dp, d0, alpha, sc->ot + (size_t)d0 * rs + rb);
        }
        return;
    }
#endif
    (void)vt2;
    for (rb = 0; rb < rows_pad; rb += ATTN__NR) {
        const float *alpha = ATTN__FN(attn__rescale_of)(sc, rb);
        for (d0 = 0; d0 < Dm; d0 += ATTN__MR)
            ATTN__FN(attn__pv_micro)(sc->s + rb, rs, n, sc->vrows, d0, alpha,
                                     sc->ot + (size_t)d0 * rs + rb);
    }
}

/* One work item: (sequence, KV head, tile of query tokens), all G query heads of the KV head
   together so each K/V tile serves G * tile_tokens rows. */
ATTN__PRIVATE void ATTN__FN(attn__prefill_item)(const attn__prefill_plan *P, int item, int thread) {
    attn__prefill_scratch sc;
    int seq = attn__find_seq(P->item_start, P->num_seqs, item);
    int G = P->G, TT = P->tile_tokens, rb, pairs = 0, on_tiles = 0;
    int64_t qs = P->q_start[seq], Lq = P->q_start[seq + 1] - qs;
    int64_t Lk = P->source == ATTN__KV_ROWS ? P->k_start[seq + 1] - P->k_start[seq]
                 : P->seq_lens[seq];
    int64_t tiles = (Lq + TT - 1) / TT, local = item - P->item_start[seq];
    int g = (int)(local / tiles);
    int64_t i0 = (tiles - 1 - local % tiles) * TT;  /* heaviest (latest) causal tiles first */
    int mq = (int)ATTN__MIN((int64_t)TT, Lq - i0), rows = mq * G;
    int64_t pos0 = Lk - Lq + i0, pmax = pos0 + mq - 1, k0, kbeg, kend;
#if ATTN__HAS_TILES
    on_tiles = P->tiles;
#endif
#if ATTN__HAS_DOT2
    pairs = P->bf16_pairs && ATTN__DOT2_READY();
#endif
    pairs |= on_tiles;  /* the tile kernels use the pair path's layouts */
    int quantum = on_tiles ? 16 : ATTN__NR;  /* tiles take rows 16 at a time */
    int rows_pad = (rows + quantum - 1) / quantum * quantum;

    attn__prefill_scratch_layout(P->rows_cap, P->D, P->Dp, P->value_tiles, P->key_rows,
                                 P->scratch + (size_t)thread * P->scratch_bytes, &sc);
    ATTN__FN(attn__load_queries)(P, g, qs + i0, rows, rows_pad, pairs, &sc);
#if ATTN__HAS_TILES
    if (on_tiles) ATTN__FN(attn__tiles_begin)();
#endif
    attn__visible_keys(&P->logits, pos0, pmax, Lk, &kbeg, &kend);
    int step = on_tiles ? P->key_rows : ATTN__KEY_TILE;  /* tiles: TILE_STEP key tiles a step */
    for (k0 = kbeg; k0 < kend; k0 += step) {
        int n = (int)ATTN__MIN((int64_t)step, kend - k0);
        int next = (int)ATTN__MIN((int64_t)step, kend - k0 - n);
        ATTN__FN(attn__prefetch_tile)(P, seq, g, k0 + n, next);
#if ATTN__HAS_TILES
        if (on_tiles) {
            ATTN__FN(attn__tile_step)(P, seq, g, k0, n, rows_pad, pos0, &sc);
            continue;
        }
#endif
        ATTN__FN(attn__tile_scores)(P, seq, g, k0, n, rows_pad, pairs, &sc);
        for (rb = 0; rb < rows_pad; rb += ATTN__L)
            ATTN__FN(attn__softmax_lanes)(P, sc.s + rb, P->rows_cap, n, (float)(k0 - pos0),
                                          ATTN__FN(attn__block_masked)(P, pos0, rb, k0, n),
                                          pairs ? P->q_mul : 1.0f, pairs, &sc, rb);
        const uint32_t *vt2 = NULL;
#if ATTN__HAS_PAIRS
        if (pairs) vt2 = ATTN__FN(attn__tile_values)(P, seq, g, k0, n, &sc);
#endif
        ATTN__FN(attn__tile_outputs)(P, n, rows_pad, vt2, &sc);
    }
#if ATTN__HAS_TILES
    if (on_tiles) ATTN__FN(attn__tiles_end)();
#endif
    ATTN__FN(attn__store_rows)(P, g, qs + i0, pos0, Lk, rows, on_tiles ? P->v_scale : 1.0f, &sc);
}

#ifdef ATTN_USE_ONEDNN
/* ---------------------------------------------------------------------------------------------
   [W] Prefill with oneDNN GEMMs (see [H]): the same items, masks and online softmax. */

/* Keys and values [k0, k0+n) of (sequence, KV head g) as rows [width][D], f32 or (bf16 mode)
   bf16 copied as they are; rows >= n are 0. */
ATTN__PRIVATE void ATTN__FN(attn__dnnl_pack_kv)(const attn__prefill_plan *P, int bf16, int seq,
                                                int g, int64_t k0, int n, int width,
                                                float *ATTN_RESTRICT k, float *ATTN_RESTRICT v) {
    size_t D = (size_t)P->D, esz = bf16 ? sizeof(uint16_t) : sizeof(float);
    char *kb = (char *)k, *vb = (char *)v;
    for (int c = 0; c < n; c++) {
        const char *kp, *vp;
        attn__kv_row(P, seq, g, k0 + c, &kp, &vp);
        if (bf16) {
            memcpy(kb + c * D * esz, kp, D * esz);
            memcpy(vb + c * D * esz, vp, D * esz);
        } else {
            ATTN__FN(attn__to_f32)(k + c * D, kp, P->kv_dtype, P->D, P->k_scale);
            ATTN__FN(attn__to_f32)(v + c * D, vp, P->kv_dtype, P->D, P->v_scale);
        }
    }
    memset(kb + n * D * esz, 0, (size_t)(width - n) * D * esz);
    memset(vb + n * D * esz, 0, (size_t)(width - n) * D * esz);
}

/* The item's queries: f32 pre-scaled, or (bf16 mode) bf16 as they are; rows >= rows are 0. */
ATTN__PRIVATE void ATTN__FN(attn__dnnl_pack_q)(const attn__prefill_plan *P, int bf16, int64_t t0,
                                               int g, int rows, int M, float *ATTN_RESTRICT q) {
    int D = P->D;
    size_t esz = bf16 ? sizeof(uint16_t) : sizeof(float);
    for (int r = 0; r < rows; r++) {
        const char *src = attn__query_row(P, g, t0, r);
        if (bf16) memcpy((char *)q + (size_t)r * D * esz, src, (size_t)D * esz);
        else ATTN__FN(attn__to_f32)(q + (size_t)r * D, src, P->q_dtype, D, P->q_mul);
    }
    memset((char *)q + (size_t)rows * D * esz, 0, (size_t)(M - rows) * D * esz);
}

/* After the shared softmax: scores of the padding keys [n, width) become 0 probabilities (the
   zero-padded V then adds nothing, even if a padded score was not finite), bf16 mode rounds P
   for its GEMM, and the outputs take the rows' rescale factors before P.V accumulates. */
ATTN__PRIVATE void ATTN__FN(attn__dnnl_between)(const attn__prefill_plan *P, int n, int width,
                                                int bf16, int rows_pad,
                                                const attn__dnnl_scratch *sc) {
    int rs = P->rows_cap, c, d, r;
    memset(sc->s + (size_t)n * rs, 0, sizeof(float) * (size_t)(width - n) * rs);
    if (bf16)
        for (c = 0; c < width; c++)
            ATTN__FN(attn__from_f32)(sc->pb + (size_t)c * rs, ATTN_BF16, sc->s + (size_t)c * rs,
                                     rs);
    for (d = 0; d < P->D; d++)
        for (r = 0; r < rows_pad; r += ATTN__L) {
            float *o = sc->o + (size_t)d * rs + r;
            ATTN__VSTORE(o, ATTN__VMUL(ATTN__VLOAD(o), ATTN__VLOAD(sc->a + r)));
        }
}

/* One work item (the same split as attn__prefill_item): queries packed once, then per key tile
   S = Q.K^T on oneDNN, the shared masks + online softmax, O = alpha O + P.V on oneDNN, and the
   shared epilogue. */
ATTN__PRIVATE void ATTN__FN(attn__prefill_item_dnnl)(const attn__prefill_plan *P, int item,
                                                     int thread) {
    const attn__dnnl_call *C = (const attn__dnnl_call *)P->dnnl;
    attn__dnnl_scratch dn;
    attn__prefill_scratch sc;
    int seq = attn__find_seq(P->item_start, P->num_seqs, item);
    int TT = P->tile_tokens, rs = P->rows_cap, rb;
    int64_t qs = P->q_start[seq], Lq = P->q_start[seq + 1] - qs;
    int64_t Lk = P->source == ATTN__KV_ROWS ? P->k_start[seq + 1] - P->k_start[seq]
                 : P->seq_lens[seq];
    int64_t tiles = (Lq + TT - 1) / TT, local = item - P->item_start[seq];
    int g = (int)(local / tiles);
    int64_t i0 = (tiles - 1 - local % tiles) * TT;  /* heaviest (latest) causal tiles first */
    int mq = (int)ATTN__MIN((int64_t)TT, Lq - i0), rows = mq * P->G;
    int rows_pad = (rows + ATTN__L - 1) / ATTN__L * ATTN__L;
    int64_t pos0 = Lk - Lq + i0, pmax = pos0 + mq - 1, k0, kbeg, kend;

    attn__dnnl_scratch_of(P, thread, &dn);
    sc = attn__dnnl_lanes(&dn);
    ATTN__FN(attn__dnnl_pack_q)(P, C->bf16, qs + i0, g, rows, rs, dn.q);
    ATTN__FN(attn__init_rows)(P, g, rows, rs, &sc);
    attn__visible_keys(&P->logits, pos0, pmax, Lk, &kbeg, &kend);
    for (k0 = kbeg; k0 < kend; k0 += ATTN__DNNL_KEY_TILE) {
        int n = (int)ATTN__MIN((int64_t)ATTN__DNNL_KEY_TILE, kend - k0);
        int wi = (n + ATTN__DNNL_KEY_STEP - 1) / ATTN__DNNL_KEY_STEP - 1;  /* narrowest shape */
        const attn__dnnl_shape *sh = &C->shape[wi];
        const attn__dnnl_mems *mem = &dn.th->w[wi];
        int width = (wi + 1) * ATTN__DNNL_KEY_STEP;
        ATTN__FN(attn__dnnl_pack_kv)(P, C->bf16, seq, g, k0, n, width, dn.k, dn.v);
        attn__dnnl_gemm(dn.th, sh->qk, mem->k, dn.th->q, mem->s, mem->pad_qk);
        for (rb = 0; rb < rows_pad; rb += ATTN__L)  /* scores come out scaled in both modes */
            ATTN__FN(attn__softmax_lanes)(P, dn.s + rb, rs, n, (float)(k0 - pos0),
                                          ATTN__FN(attn__block_masked)(P, pos0, rb, k0, n), 1.0f, 0,
                                          &sc, rb);
        ATTN__FN(attn__dnnl_between)(P, n, width, C->bf16, rows_pad, &dn);
        attn__dnnl_gemm(dn.th, sh->pv, mem->v, mem->p, dn.th->o, mem->pad_pv);
    }
    ATTN__FN(attn__store_rows)(P, g, qs + i0, pos0, Lk, rows, 1.0f, &sc);
}
#endif /* ATTN_USE_ONEDNN */

/* ---------------------------------------------------------------------------------------------
   [X] Paged decode: one query token, the G heads of each KV head of a span, one partition. */

/* Where a chunk of K or V rows is read from: the cache itself (native dtype, dequantized in
   registers) when D is a multiple of two vectors, else an f32 copy padded to Dv. */
typedef struct ATTN__FN(attn__decode_rows) {
    const void *base;
    attn_dtype dt;
    size_t stride;   /* elements between rows */
    int kv_heads;    /* KV heads whose rows a chunk call reads, a block's rows of one head apart:
                        1, or the pass's span where attn__decode_together */
} ATTN__FN(attn__decode_rows);

/* Whether this pass runs the bf16 pair kernels (see attn__decode_pair_logits; over an fp8
   cache the plan asks for them only where the pass has the byte tables that make its rows
   bf16). */
ATTN__PRIVATE int ATTN__FN(attn__decode_pairs)(const attn__decode_plan *P) {
#if ATTN__HAS_DOT2
    return P->bf16_pairs && ATTN__DOT2_READY();
#else
    (void)P;
    return 0;
#endif
}

/* Whether K/V rows are read from the cache itself (see attn__decode_rows): not those of a dtype
   without kernels of its own (ATTN_NO_FP8_KERNELS; the scalar pass, whose loads convert an
   element at a time anyway, has the f32 kernels only). Integer rows only on AVX-512 and for one
   query head a KV head (MHA), where decoding in registers saves the copies' stores and loads;
   with more heads the copies are decoded once for all of them, not once per block of heads;
   and only for D a multiple of 32 (attn__int_load2 finds a group from the element's index).
   The same bits either way; the measurements: docs/PERF.md#decode-int. */
ATTN__PRIVATE int ATTN__FN(attn__decode_in_place)(const attn__decode_plan *P) {
    if (P->D % (2 * ATTN__L) != 0) return 0;
    if (ATTN__L == 1) return P->kv_dtype == ATTN_F32;
    if (attn__is_int(P->kv_dtype))
        return ATTN__HAS_INT_IN_PLACE && P->D % ATTN__INT_GROUP == 0 && P->G == 1;
    return ATTN__FP8_KERNELS || !attn__is_fp8(P->kv_dtype);
}

/* Otherwise, bf16 K/V rows read in place come as pairs of vectors (attn__decode_load2): in each
   whole group of 2L elements, the even ones, then the odd ones. The queries are put into that
   order (to = 1) and the value accumulators taken back out of it (to = 0), so a dot product
   only sums in another order and the outputs are in place. */
ATTN__PRIVATE int ATTN__FN(attn__decode_even_odd)(const attn__decode_plan *P) {
    return attn__is_even_odd(P->kv_dtype) && ATTN__FN(attn__decode_in_place)(P) &&
           !ATTN__FN(attn__decode_pairs)(P);
}
ATTN__PRIVATE void ATTN__FN(attn__decode_pair_order)(float *x, int n, int to) {
    float tmp[2 * ATTN__L];
    for (int g = 0; g + 2 * ATTN__L <= n; g += 2 * ATTN__L) {
        float *y = x + g;
        memcpy(tmp, y, sizeof tmp);
        for (int j = 0; j < ATTN__L; j++) {
            if (to) { y[j] = tmp[2 * j]; y[ATTN__L + j] = tmp[2 * j + 1]; }
            else { y[2 * j] = tmp[j]; y[2 * j + 1] = tmp[ATTN__L + j]; }
        }
    }
}

/* The format the vector kernels read in-place rows of dt in: e4m3 through the byte tables where
   the pass and the CPU have them (AVX-512 VBMI: up to 1.25x the f16 way,
   docs/PERF.md#decode-design), else without the NaN fix where the pass has that (AVX2:
   attn__decode_rows_of hands a chunk with a NaN code to the kernels as f32 copies), else the
   dtype's own. */
ATTN__PRIVATE attn__format ATTN__FN(attn__decode_format)(attn_dtype dt) {
#if ATTN__HAS_E4M3_LUT
    if (dt == ATTN_FP8_E4M3 && ATTN__E4M3_LUT_READY()) return ATTN__FMT_E4M3_LUT;
#endif
    if (dt == ATTN_FP8_E4M3 && ATTN__HAS_E4M3_FINITE) return ATTN__FMT_E4M3_FINITE;
    return (attn__format)dt;  /* a dtype's own format has its value */
}

/* Scales folded into q (keys) and into the partition's output (values), so the inner loops
   never multiply by them. Rows the vector kernels read in registers come back as value / fold
   (see ATTN__DTYPE_LIST: e4m3 through f16 as value / 256, with or without the NaN fix), so the
   fold joins the scale there: a power of two, exact. (The byte tables, of the vector kernels
   and of the pair kernels, give the value itself.) */
ATTN__PRIVATE float ATTN__FN(attn__decode_fold)(const attn__decode_plan *P, float scale) {
    if (!ATTN__FN(attn__decode_in_place)(P) || ATTN__FN(attn__decode_pairs)(P) ||
        ATTN__FN(attn__decode_format)(P->kv_dtype) == ATTN__FMT_E4M3_LUT)
        return scale;
#define ATTN__FOLD_OF(name, value, t, U, type, str, dec, enc, cls, fold)                          \
    (fold) != 1 && P->kv_dtype == name ? scale * (float)(fold) :
    return ATTN__DTYPE_LIST(ATTN__FOLD_OF) scale;  /* a test for each dtype with a fold: e4m3 */
#undef ATTN__FOLD_OF
}

/* Row off of KV head g in block blk. */
ATTN__PRIVATE const char *ATTN__FN(attn__decode_chunk_at)(const attn__decode_plan *P,
                                                          const char *cache,
                                                          int64_t blk, int g, int off) {
    return cache + (size_t)((blk * P->Hk + g) * P->block_size + off) * P->kv_row_bytes;
}

/* Rows [off, off+n) of (block, kv head). */
ATTN__PRIVATE ATTN__FN(attn__decode_rows) ATTN__FN(attn__decode_rows_of)(const attn__decode_plan *P,
                                                                         const char *cache,
                                                                         int64_t blk,
                                                                         int g, int off, int n,
                                                                         int Dv,
                                                                         float *tile) {
    ATTN__FN(attn__decode_rows) r;
    const char *base = ATTN__FN(attn__decode_chunk_at)(P, cache, blk, g, off);
    r.kv_heads = 1;
    float mul = 1.0f;  /* rows read in place come as value / fold: the copies too */
    if (ATTN__FN(attn__decode_in_place)(P)) {
        r.base = base; r.dt = P->kv_dtype; r.stride = (size_t)P->D;
        /* e4m3 read without the NaN fix: a chunk with a NaN code is copied exactly instead */
        if (!(ATTN__FN(attn__decode_format)(P->kv_dtype) == ATTN__FMT_E4M3_FINITE &&
              ATTN__E4M3_HAS_NAN(base, (size_t)n * P->D)))
            return r;
        mul = 1.0f / ATTN__FN(attn__decode_fold)(P, 1.0f);  /* 1/256: exact */
    }
    for (int t = 0; t < n; t++) {  /* exact decode: the scale is folded elsewhere */
        float *row = tile + (size_t)t * Dv;
        ATTN__FN(attn__to_f32)(row, base + (size_t)t * P->kv_row_bytes, P->kv_dtype, P->D, mul);
        for (int d = P->D; d < Dv; d++) row[d] = 0.0f;
    }
    r.base = tile; r.dt = ATTN_F32; r.stride = (size_t)Dv;
    return r;
}

/* Whether one chunk call reads the chunk's rows of all the span's KV heads, one head after the
   other (attn__decode_rows.kv_heads), so that a call's cost is paid once a span, not once a
   head (docs/PERF.md#decode-span-call): where the rows are read in place whatever their codes
   (not AVX2's e4m3, whose chunks with a NaN code are copied), not on tiles. */
ATTN__PRIVATE int ATTN__FN(attn__decode_together)(const attn__decode_plan *P) {
    return ATTN__FN(attn__decode_in_place)(P) && !P->tile_keys && !P->tile_values &&
           ATTN__FN(attn__decode_format)(P->kv_dtype) != ATTN__FMT_E4M3_FINITE;
}

/* The rows that come after the current ones (the chunk call's KV heads' rows of the next piece),
   asked for into L2 a line at a time while the kernels step through the current rows: blocks are
   scattered, so the hardware prefetcher cannot follow from one to the next. A kernel that read n
   elements of a row for hp of the query heads asks for n * hp / heads elements' worth of the next
   rows: whatever the number of passes a kernel makes over a chunk, the next piece is asked for
   exactly as fast as the current one is consumed, spread over the work (a burst of a head's whole
   next rows stalls the loads; twice or half that pace is slower). Into L2, not L1: L1 requests a
   block ahead stall the loads of the current rows. The rows after the current ones, already asked
   into L2 a block earlier (the next KV head's rows of the same block), are asked into L1 at the
   same pace, a line for each line of the L2 cursor: then the kernels find them in L1. In cache the
   prefetches cost time (each is a miss to handle); from DRAM they gain more than that. The
   measurements and the variants tried: docs/PERF.md#decode-prefetch. */
ATTN__PRIVATE ATTN__INLINE void ATTN__FN(attn__decode_ahead_step)(attn__decode_ahead *a, int n,
                                                                  int hp) {
    a->owed += (size_t)n * (size_t)hp * a->esz;
    for (; a->owed >= 64 * a->heads && a->at < a->end; a->at += 64, a->owed -= 64 * a->heads) {
        ATTN__PREFETCH_L2(a->at);
        if (a->near < a->near_end) {
            ATTN__PREFETCH(a->near);
            a->near += 64;
        }
    }
}

/* KV heads [g, g_end)'s rows of piece pc: [*begin, *end) (with the other rows of their block
   between them where the piece is not a whole block). */
ATTN__PRIVATE void ATTN__FN(attn__decode_piece_rows)(const attn__decode_plan *P, const char *cache,
                                                     const attn__decode_piece_at *pc, int g,
                                                     int g_end, const char **begin,
                                                     const char **end) {
    *begin = ATTN__FN(attn__decode_chunk_at)(P, cache, pc->blk, g, pc->off);
    *end = ATTN__FN(attn__decode_chunk_at)(P, cache, pc->blk, g_end - 1, pc->off) +
           (size_t)pc->n * P->kv_row_bytes;
}

/* The cursor over KV heads [g, g_end)'s rows of piece pc (none: NULL), nothing into L1 yet. */
ATTN__PRIVATE attn__decode_ahead ATTN__FN(attn__decode_ahead_of)(const attn__decode_plan *P,
                                                                 const char *cache,
                                                                 const attn__decode_piece_at *pc,
                                                                 int g, int g_end) {
    attn__decode_ahead a;
    a.at = a.end = a.near = a.near_end = NULL;
    /* the bytes of an element, at least one (int4's half byte: the cursor stops at its end) */
    a.esz = ATTN__MAX((size_t)1, P->kv_row_bytes / (size_t)P->D);
    a.heads = (size_t)P->G;
    a.owed = 0;
    if (pc) ATTN__FN(attn__decode_piece_rows)(P, cache, pc, g, g_end, &a.at, &a.end);
    return a;
}

/* L elements of a K/V row at base + i as f32 (value / fold); dt is a constant after inlining, so
   each format gets its own loop with the dequantization in registers. */
ATTN__PRIVATE ATTN__INLINE ATTN__VF ATTN__FN(attn__decode_load)(const void *base, attn__format dt,
                                                               size_t i) {
#define ATTN__LOAD_CASE(name, value, t, U, type, str, dec, enc, cls, fold)                        \
    case ATTN__FMT_##U: return ATTN__LOAD1_##cls(ATTN__VLOAD_##U, (const type *)base + i);
#define ATTN__LOAD1_PLAIN(one, p) one(p)
#define ATTN__LOAD1_EVEN_ODD ATTN__LOAD1_PLAIN
#define ATTN__LOAD1_FP8 ATTN__LOAD1_PLAIN
#define ATTN__LOAD1_INT(one, p) ATTN__VZERO()  /* read in pairs of vectors only (decode_load2) */
    switch (dt) {
        ATTN__DTYPE_LIST(ATTN__LOAD_CASE)
        case ATTN__FMT_E4M3_LUT: break;  /* read in pairs of vectors only (decode_load2) */
        case ATTN__FMT_E4M3_FINITE:
#if ATTN__HAS_E4M3_FINITE
            return ATTN__VLOAD_E4M3_FINITE((const uint8_t *)base + i);
#else
            break;  /* only where the pass has it (attn__decode_format) */
#endif
    }
#undef ATTN__LOAD_CASE
#undef ATTN__LOAD1_PLAIN
#undef ATTN__LOAD1_EVEN_ODD
#undef ATTN__LOAD1_FP8
#undef ATTN__LOAD1_INT
    return ATTN__VZERO();  /* not a format */
}

/* Elements [i, i + 2L) of integer rows read in place (rows of D a multiple of 32, one after the
   other, so that element i's group is the (i / 32)th of the run: attn_dtype_row_bytes), scaled:
   the exact values. */
ATTN__PRIVATE ATTN__INLINE void ATTN__FN(attn__int_load2)(const void *base, attn_dtype dt,
                                                         size_t i, ATTN__VF *a, ATTN__VF *b) {
    const uint8_t *group = (const uint8_t *)base + i / ATTN__INT_GROUP * attn__int_group_bytes(dt);
    ATTN__FN(attn__int_scaled2)(group, dt, (int)(i % ATTN__INT_GROUP), ATTN__VSET1_BF16(group), a,
                                b);
}

/* The two vectors of elements [i, i + 2L) of a K/V row: as the class reads them
   (ATTN__LOAD2_<class>), PLAIN one at a time, EVEN_ODD paired (the even elements, then the odd
   ones: see attn__decode_pair_order), FP8 two at once in order. */
#define ATTN__LOAD2_PLAIN(fmt, two, p)                                                            \
    (*a = ATTN__FN(attn__decode_load)(base, fmt, i),                                              \
     *b = ATTN__FN(attn__decode_load)(base, fmt, i + ATTN__L))
#define ATTN__LOAD2_EVEN_ODD(fmt, two, p) two((p), *a, *b)
#define ATTN__LOAD2_FP8(fmt, two, p) two((p), *a, *b)
#define ATTN__LOAD2_INT(fmt, two, p)                                                              \
    ATTN__FN(attn__int_load2)(base, (fmt) == ATTN__FMT_I4 ? ATTN_INT4 : ATTN_INT8, i, a, b)
#define ATTN__LOAD2_CASE(name, value, t, U, type, str, dec, enc, cls, fold)                       \
    case ATTN__FMT_##U:                                                                           \
        ATTN__LOAD2_##cls(ATTN__FMT_##U, ATTN__VLOAD2_##U, (const type *)base + i);               \
        return;
ATTN__PRIVATE ATTN__INLINE void ATTN__FN(attn__decode_load2)(const void *base, attn__format dt,
                                                              size_t i, ATTN__VF *a, ATTN__VF *b) {
    switch (dt) {
        ATTN__DTYPE_LIST(ATTN__LOAD2_CASE)
        case ATTN__FMT_E4M3_LUT:
#if ATTN__HAS_E4M3_LUT
            ATTN__VLOAD2_E4M3_LUT((const uint8_t *)base + i, *a, *b);
            return;
#else
            break;  /* only where the pass has the tables (attn__decode_format) */
#endif
        case ATTN__FMT_E4M3_FINITE:
#if ATTN__HAS_E4M3_FINITE
            ATTN__VLOAD2_E4M3_FINITE((const uint8_t *)base + i, *a, *b);
            return;
#else
            break;  /* only where the pass has it (attn__decode_format) */
#endif
    }
    *a = *b = ATTN__VZERO();  /* not a format */
}
#undef ATTN__LOAD2_PLAIN
#undef ATTN__LOAD2_EVEN_ODD
#undef ATTN__LOAD2_FP8
#undef ATTN__LOAD2_INT
#undef ATTN__LOAD2_CASE

/* Whether rows of format dt are fp8, whose decode costs more than its loads (a constant after
   inlining): the formats that also take blocks of two and eight heads (attn__decode_chunk_dt). */
ATTN__PRIVATE ATTN__INLINE int ATTN__FN(attn__decode_fp8)(attn__format dt) {
    return dt == ATTN__FMT_E4M3 || dt == ATTN__FMT_E4M3_FINITE || dt == ATTN__FMT_E5M2 ||
           dt == ATTN__FMT_E4M3_LUT;
}

/* The dot-product kernels' accumulators: acc[h][c] for hb heads and keys t..t+nk (nk 1 or
   even), cleared, then left as the per-lane partials that attn__decode_reduce_parts sums. For
   two or more heads a step of an even number of keys stores them in pairs, after the first
   round of the transpose-reduce (ATTN__VPAIR_SUMS): part[h][(t + c) % L / 2] holds the pair
   sums of keys t+c and t+c+1, half the vectors to store and load again. One head's keys (MHA:
   with one accumulator a key the pair sums cost about what the stores they save do) and single
   keys are stored as they are, in part[h][(t + c) % L] (docs/PERF.md#decode-paired-parts). */
ATTN__PRIVATE ATTN__INLINE int ATTN__FN(attn__decode_keys_paired)(int hb, int nk) {
    return nk % 2 == 0 && hb > 1;
}
ATTN__PRIVATE ATTN__INLINE void ATTN__FN(attn__decode_parts_zero)(ATTN__VF acc[][ATTN__DKT], int hb,
                                                                  int nk) {
    int h, c;
    ATTN__UNROLL_UPTO(h, hb, ATTN__WIDE_GROUP, 1)
        ATTN__UNROLL_UPTO(c, nk, ATTN__DKT, 1) acc[h][c] = ATTN__VZERO();
}
ATTN__PRIVATE ATTN__INLINE void ATTN__FN(attn__decode_parts_store)(ATTN__VF acc[][ATTN__DKT],
                                                                   int hb, int na, int t, int nk,
                                                                   ATTN__VF part[][ATTN__L]) {
    int h, c;
    if (ATTN__FN(attn__decode_keys_paired)(hb, nk)) {
        ATTN__UNROLL_UPTO(h, na, ATTN__WIDE_GROUP, 1)
            ATTN__UNROLL_UPTO(c, nk, ATTN__DKT, 2)
                part[h][(t + c) % ATTN__L / 2] = ATTN__VPAIR_SUMS(acc[h][c], acc[h][c + 1]);
    } else {
        ATTN__UNROLL_UPTO(h, na, ATTN__WIDE_GROUP, 1)
            ATTN__UNROLL_UPTO(c, nk, ATTN__DKT, 1) part[h][(t + c) % ATTN__L] = acc[h][c];
    }
}

/* logits[h][0, L) = mul * the lane sums of keys [0, m) for hb heads, lanes m.. 0: one
   transpose-reduce per L keys, whole vectors stored (the logits rows have room past n). With
   in_pairs (a constant: the steps' keys were paired) keys [0, paired) were stored in pairs
   (attn__decode_parts_store) and the others one at a time, paired here; without, every key one
   at a time. A function of its own, shared by every format and block: it runs once per L keys
   of a head. */
ATTN__PRIVATE ATTN__NOINLINE void ATTN__FN(attn__decode_reduce_parts)(ATTN__VF part[][ATTN__L],
                                                                    int hb, int in_pairs,
                                                                    int paired, int m, float mul,
                                                                    float *ATTN_RESTRICT logits) {
    int h, t;
    if (in_pairs)  /* slot t is written after keys 2t and 2t + 1 are read; later ones are > t */
        for (t = paired / 2; t < ATTN__L / 2; t++)
            for (h = 0; h < hb; h++)
                part[h][t] = 2 * t >= m ? ATTN__VZERO()
                        : ATTN__VPAIR_SUMS(part[h][2 * t],
                                           2 * t + 1 < m ? part[h][2 * t + 1] : ATTN__VZERO());
    else
        for (t = m; t < ATTN__L; t++)
            for (h = 0; h < hb; h++) part[h][t] = ATTN__VZERO();
    for (h = 0; h < hb; h++) {
        ATTN__VF sums = ATTN__VTRANSUM(part[h], in_pairs);
        if (mul != 1.0f) sums = ATTN__VMUL(sums, ATTN__VSET1(mul));
        ATTN__VSTORE(logits + (size_t)h * ATTN__DECODE_PSTRIDE, sums);
    }
}

/* Keys per step of the logits: DKT, half as many for eight heads, so that the hb x nk
   accumulators stay in registers. */
#define ATTN__DECODE_STEP_KEYS(hb)                                                                \
    ((hb) <= ATTN__HEAD_GROUP ? ATTN__DKT : ATTN__MAX(1, ATTN__DKT * ATTN__HEAD_GROUP / (hb)))

/* part[h][t..t+nk) = per-lane partial dot products of the hb queries (rows Dv apart, read from
   L1) with keys t..t+nk over Dk dims (a multiple of 2L), the keys from `last` on read as key
   `last` (their
   logits fall past the chunk, where nothing reads them). The nk rows are read side by side, so
   that one query load serves nk keys and each key vector is loaded (decoded) once for the hb
   heads. gcc folds the loads back into the multiply-adds (one load per multiply-add), so
   ATTN__VKEEP holds each query vector in a register for the nk keys; not for e4m3's decode with
   its NaN fix, which needs the registers (docs/PERF.md#decode-query-loads). Of the block's hb
   heads the first na are computed; the others are padding, without multiply-adds. */
ATTN__PRIVATE ATTN__INLINE void ATTN__FN(attn__decode_dot_keys)(const float *ATTN_RESTRICT q,
                                                                int Dv, int hb, int na,
                                                                const void *k, attn__format dt,
                                                                size_t stride, int Dk, int t,
                                                                int nk, int last,
                                                                ATTN__VF part[][ATTN__L],
                                                                attn__decode_ahead *ahead) {
    ATTN__VF acc[ATTN__WIDE_GROUP][ATTN__DKT], k0[ATTN__DKT], k1[ATTN__DKT];
    size_t row[ATTN__DKT];
    int h, c, d;
    ATTN__FN(attn__decode_parts_zero)(acc, na, nk);
    ATTN__FN(attn__decode_ahead_step)(ahead, nk * Dk, na);
    ATTN__UNROLL_UPTO(c, nk, ATTN__DKT, 1) row[c] = (size_t)ATTN__MIN(t + c, last) * stride;
    for (d = 0; d < Dk; d += 2 * ATTN__L) {
        ATTN__UNROLL_UPTO(c, nk, ATTN__DKT, 1)
            ATTN__FN(attn__decode_load2)(k, dt, row[c] + d, &k0[c], &k1[c]);
        ATTN__UNROLL_UPTO(h, na, ATTN__WIDE_GROUP, 1) {
            ATTN__VF q0 = ATTN__VLOAD(q + (size_t)h * Dv + d),
                     q1 = ATTN__VLOAD(q + (size_t)h * Dv + d + ATTN__L);
            if (dt != ATTN__FMT_E4M3) { ATTN__VKEEP(q0); ATTN__VKEEP(q1); }
            ATTN__UNROLL_UPTO(c, nk, ATTN__DKT, 1) {
                acc[h][c] = ATTN__VFMA(q0, k0[c], acc[h][c]);
                acc[h][c] = ATTN__VFMA(q1, k1[c], acc[h][c]);
            }
        }
    }
    ATTN__FN(attn__decode_parts_store)(acc, hb, na, t, nk, part);
}

/* logits[h][t] = q_h . k_t (t < n) for the hb heads of a block (hb and dt constants after
   inlining): the per-key partial vectors (attn__decode_dot_keys) summed L keys at a time by one
   transpose-reduce, not one horizontal sum per key; whole vectors are stored (the logits rows
   have room past n). Whole steps of nk keys only, a chunk's last step filled with its last key
   (one loop to compile, not a second for the odd keys). */
ATTN__PRIVATE ATTN__INLINE void ATTN__FN(attn__decode_logits)(const float *ATTN_RESTRICT q, int Dv,
                                                              int hb, int na, const void *k,
                                                              attn__format dt, size_t stride,
                                                              int n, int Dk,
                                                              float *ATTN_RESTRICT logits,
                                                              attn__decode_ahead *ahead) {
    ATTN__VF part[ATTN__WIDE_GROUP][ATTN__L];
    const int nk = ATTN__DECODE_STEP_KEYS(hb);
    for (int t0 = 0; t0 < n; t0 += ATTN__L) {
        int m = ATTN__MIN(ATTN__L, n - t0), t;
        for (t = 0; t < m; t += nk)
            ATTN__FN(attn__decode_dot_keys)(q, Dv, hb, na, k, dt, stride, Dk, t0 + t, nk, n - 1,
                                            part, ahead);
        ATTN__FN(attn__decode_reduce_parts)(part, na, ATTN__FN(attn__decode_keys_paired)(hb, nk),
                                            t, m, 1.0f, logits + t0);
    }
}

/* acc[h][c] += p[h][t] v_t[d0 + c*L ..] for hb heads, c < nv (hb, nvmax constants after
   inlining; nv <= nvmax, both even). */
ATTN__PRIVATE ATTN__INLINE void ATTN__FN(attn__decode_pv_key)(ATTN__VF *acc,
                                                              const float *ATTN_RESTRICT p, int t,
                                                              const void *v, attn__format dt,
                                                              size_t stride, int d0,
                                                              int nv, int na, int nvmax) {
    ATTN__VF vv[ATTN__DACC];
    int h, c;
    ATTN__UNROLL_UPTO(c, nvmax, ATTN__DACC, 2) {
        const size_t at = (size_t)t * stride + d0 + c * ATTN__L;
        vv[c] = vv[c + 1] = ATTN__VZERO();
        if (c < nv) ATTN__FN(attn__decode_load2)(v, dt, at, &vv[c], &vv[c + 1]);
    }
    ATTN__UNROLL_UPTO(h, na, ATTN__WIDE_GROUP, 1) {
        ATTN__VF w = ATTN__VSET1(p[(size_t)h * ATTN__DECODE_PSTRIDE + t]);
        ATTN__UNROLL_UPTO(c, nvmax, ATTN__DACC, 1)
            if (c < nv) acc[h * nvmax + c] = ATTN__VFMA(w, vv[c], acc[h * nvmax + c]);
    }
}

/* o[h][d0, d0 + nv*L) += sum_t p[h][t] v_t for hb heads, the hb * nvmax accumulators in
   registers across the chunk's n keys (hb, nvmax constants after inlining; nv <= nvmax). Keys
   two at a time, so the bookkeeping of the prefetch and the loop is paid once per pair: with
   AVX2 it is more instructions than the multiply-adds of a key (docs/PERF.md#decode-pv); an odd
   last key in the same loop (one copy of the prefetch's code). */
ATTN__PRIVATE ATTN__INLINE void ATTN__FN(attn__decode_pv_cols_nv)(const float *ATTN_RESTRICT p,
                                                                  int n,
                                                                  const void *v, attn__format dt,
                                                                  size_t stride,
                                                                  int d0, int nv, int na,
                                                                  int nvmax, int Dv,
                                                                  float *ATTN_RESTRICT o,
                                                                  attn__decode_ahead *ahead) {
    ATTN__VF acc[ATTN__DACC];
    int h, c, t;
    ATTN__UNROLL_UPTO(h, na, ATTN__WIDE_GROUP, 1)
        ATTN__UNROLL_UPTO(c, nvmax, ATTN__DACC, 1)
            acc[h * nvmax + c] = c < nv ? ATTN__VLOAD(o + (size_t)h * Dv + d0 + c * ATTN__L)
                : ATTN__VZERO();
    for (t = 0; t < n; t += 2) {
        int two = t + 1 < n;
        ATTN__FN(attn__decode_ahead_step)(ahead, (1 + two) * nv * ATTN__L, na);
        ATTN__FN(attn__decode_pv_key)(acc, p, t, v, dt, stride, d0, nv, na, nvmax);
        if (two) ATTN__FN(attn__decode_pv_key)(acc, p, t + 1, v, dt, stride, d0, nv, na, nvmax);
    }
    ATTN__UNROLL_UPTO(h, na, ATTN__WIDE_GROUP, 1)
        ATTN__UNROLL_UPTO(c, nvmax, ATTN__DACC, 1)
            if (c < nv) ATTN__VSTORE(o + (size_t)h * Dv + d0 + c * ATTN__L, acc[h * nvmax + c]);
}

/* P.V for the hb heads of a block (hb and dt constants after inlining): column segments of
   DACC / hb vectors, at most eight (an even number: bf16's pairs of vectors stay whole), each
   segment's accumulators in registers across the chunk's keys and each value vector loaded
   (decoded) once for the hb heads; what is left of a row after its whole segments, in segments
   of two vectors. Each loop's width is a constant, free of checks. */
ATTN__PRIVATE ATTN__INLINE void ATTN__FN(attn__decode_values)(const float *ATTN_RESTRICT p, int n,
                                                              const void *v, attn__format dt,
                                                              size_t stride, int Dk, int Dv,
                                                              int hb, int na,
                                                              float *ATTN_RESTRICT o,
                                                              attn__decode_ahead *ahead) {
    const int seg = ATTN__MIN(8, ATTN__DACC / hb);
    int d = 0;
    for (; d + seg * ATTN__L <= Dk; d += seg * ATTN__L)
        ATTN__FN(attn__decode_pv_cols_nv)(p, n, v, dt, stride, d, seg, na, seg, Dv, o, ahead);
    for (; seg > 2 && d < Dk; d += 2 * ATTN__L)  /* seg 2: no rest (a constant test) */
        ATTN__FN(attn__decode_pv_cols_nv)(p, n, v, dt, stride, d, 2, na, 2, Dv, o, ahead);
}

#if ATTN__HAS_DOT2
/* The bf16 pair kernels of decode (AVX-512 BF16; bf16 queries, a bf16 cache - or an fp8 one,
   whose values bf16 holds exactly, through the byte tables (AVX-512 VBMI), where G >= 3 -, D a
   multiple of 2L, exec.f32_probs off): the loops above with pair dot products, about half the
   instructions.
   Keys: q . k over pairs of head dims, the queries unscaled (scaling would round them), the
   scale applied to the f32 logits - exact products, f32 sums. Values: pairs of keys, rows t and
   t+1 unpacked into (v_t, v_t+1) pairs against the probabilities rounded to bf16, as in
   prefill's pair path (relative error <= 2^-9 per weight; the denominator and lse use the
   unrounded values). Unpacking works within 128-bit lanes, so the value accumulators of a bf16
   cache hold the dims in the order that attn__decode_unpack_order undoes at the partition's
   end; fp8's are in order. */

/* Elements [i, i + 2L) of a key row as L bf16 pairs: bf16 rows as they are, fp8 rows through
   the tables (dt a constant after inlining: ATTN__FMT_BF16, or ATTN__FMT_E4M3_LUT for both fp8
   formats, whose tables e5m2 picks at run time - one function for the two). */
ATTN__DOT2_TARGET ATTN__PRIVATE ATTN__INLINE ATTN__VI ATTN__FN(attn__decode_dot2_row)(
    const void *base, attn__format dt, int e5m2, size_t i) {
#if ATTN__HAS_FP8_PAIRS
    if (dt != ATTN__FMT_BF16) return ATTN__VLOADI_FP8((const uint8_t *)base + i, e5m2);
#endif
    (void)dt; (void)e5m2;
    return ATTN__VLOADI((const uint16_t *)base + i);
}

/* Dims [i, i + 2L) of the value rows of keys t (row at i) and t + 1 (stride further; two = 0:
   zeros) as pairs (v_t, v_t+1) in lo and hi: bf16 rows unpacked within 128-bit lanes (see
   attn__decode_unpack_order), fp8 rows in order, the first L dims in lo. */
ATTN__DOT2_TARGET ATTN__PRIVATE ATTN__INLINE void ATTN__FN(attn__decode_dot2_values)(
    const void *base, attn__format dt, int e5m2, size_t i, size_t stride, int two, ATTN__VI *lo,
    ATTN__VI *hi) {
    (void)dt; (void)e5m2;  /* bf16 alone where the pass has no fp8 pair kernels */
#if ATTN__HAS_FP8_PAIRS
    if (dt != ATTN__FMT_BF16) {
        const uint8_t *a = (const uint8_t *)base + i, *b = two ? a + stride : a;
        *lo = ATTN__VPAIRI_FP8(a, b, two, e5m2);
        *hi = ATTN__VPAIRI_FP8(a + ATTN__L, b + ATTN__L, two, e5m2);
        return;
    }
#endif
    const uint16_t *v = (const uint16_t *)base + i;
    ATTN__VI a = ATTN__VLOADI(v), b = two ? ATTN__VLOADI(v + stride) : ATTN__VZEROI();
    ATTN__VUNPACK_PAIRS(a, b, *lo, *hi);
}

/* part[h][t..t+nk) for hb query heads (bf16 rows qs apart, read from L1) over key rows of
   format dt (hb and dt constants after inlining), keys from `last` on read as key `last` (see
   attn__decode_dot_keys): each key vector loaded (decoded) once for the hb heads, each query
   vector once for the nk keys. */
ATTN__DOT2_TARGET ATTN__PRIVATE ATTN__INLINE void ATTN__FN(attn__decode_dot2_keys)(
    const uint16_t *qm, int qs, int nv, const void *k, attn__format dt, int e5m2, size_t stride,
    int t, int nk, int last, int hb, int na, ATTN__VF part[][ATTN__L],
    attn__decode_ahead *ahead) {
    ATTN__VF acc[ATTN__WIDE_GROUP][ATTN__DKT];
    size_t row[ATTN__DKT];
    int h, c, i;
    ATTN__FN(attn__decode_parts_zero)(acc, na, nk);
    ATTN__FN(attn__decode_ahead_step)(ahead, nk * nv * 2 * ATTN__L, na);
    ATTN__UNROLL_UPTO(c, nk, ATTN__DKT, 1) row[c] = (size_t)ATTN__MIN(t + c, last) * stride;
    for (i = 0; i < nv; i++) {
        ATTN__VI kv[ATTN__DKT];
        ATTN__UNROLL_UPTO(c, nk, ATTN__DKT, 1)
            kv[c] = ATTN__FN(attn__decode_dot2_row)(k, dt, e5m2,
                                                    row[c] + (size_t)i * 2 * ATTN__L);
        ATTN__UNROLL_UPTO(h, na, ATTN__WIDE_GROUP, 1) {
            ATTN__VI qv = ATTN__VLOADI(qm + (size_t)h * qs + (size_t)i * 2 * ATTN__L);
            ATTN__UNROLL_UPTO(c, nk, ATTN__DKT, 1) acc[h][c] = ATTN__VDOT2(acc[h][c], kv[c], qv);
        }
    }
    ATTN__FN(attn__decode_parts_store)(acc, hb, na, t, nk, part);
}

/* logits[h][t] = mul * q_h . k_t (t < n) for the first na of the hb heads of a block, q as bf16
   rows qs apart (hb and dt constants after inlining). */
ATTN__DOT2_TARGET ATTN__PRIVATE ATTN__INLINE void ATTN__FN(attn__decode_pair_logits)(
    const uint16_t *q, int qs, const void *k, attn__format dt, int e5m2, size_t stride, int n,
    int Dk, float mul, int hb, int na, float *ATTN_RESTRICT logits, attn__decode_ahead *ahead) {
    ATTN__VF part[ATTN__WIDE_GROUP][ATTN__L];
    const int nk = ATTN__DECODE_STEP_KEYS(hb);  /* even: the steps' keys are paired */
    int nv = Dk / (2 * ATTN__L), t0;
    for (t0 = 0; t0 < n; t0 += ATTN__L) {
        int m = ATTN__MIN(ATTN__L, n - t0), t;
        for (t = 0; t < m; t += nk)
            ATTN__FN(attn__decode_dot2_keys)(q, qs, nv, k, dt, e5m2, stride, t0 + t, nk, n - 1, hb,
                                             na, part, ahead);
        ATTN__FN(attn__decode_reduce_parts)(part, na, 1, t, m, mul, logits + t0);
    }
}

/* One step of attn__decode_dot2_pv_cols: keys t and t + 1, or with two = 0 (a constant) the odd
   last key t, paired with a zero row and weight. */
ATTN__DOT2_TARGET ATTN__PRIVATE ATTN__INLINE void ATTN__FN(attn__decode_dot2_pv_step)(
    ATTN__VF *acc, const uint16_t *p, int ps, int t, int two, const void *v, attn__format dt,
    int e5m2, size_t stride, int d0, int nv, int na, int nvmax, attn__decode_ahead *ahead) {
    ATTN__VI lo[ATTN__DACC / 2], hi[ATTN__DACC / 2];
    int h, i;
    ATTN__FN(attn__decode_ahead_step)(ahead, (1 + two) * nv * 2 * ATTN__L, na);  /* rows read */
    ATTN__UNROLL_UPTO(i, nvmax, ATTN__DACC / 2, 1) {
        size_t at = (size_t)t * stride + d0 + (size_t)i * 2 * ATTN__L;
        lo[i] = hi[i] = ATTN__VZEROI();
        if (i < nv)
            ATTN__FN(attn__decode_dot2_values)(v, dt, e5m2, at, stride, two, &lo[i], &hi[i]);
    }
    ATTN__UNROLL_UPTO(h, na, ATTN__WIDE_GROUP, 1) {
        const uint16_t *ph = p + (size_t)h * ps + t;
        ATTN__VI w = ATTN__VSET1I((uint32_t)ph[0] | (two ? (uint32_t)ph[1] << 16 : 0u));
        ATTN__UNROLL_UPTO(i, nvmax, ATTN__DACC / 2, 1)
            if (i < nv) {
                acc[h * 2 * nvmax + 2 * i] = ATTN__VDOT2(acc[h * 2 * nvmax + 2 * i], lo[i], w);
                acc[h * 2 * nvmax + 2 * i + 1] =
                        ATTN__VDOT2(acc[h * 2 * nvmax + 2 * i + 1], hi[i], w);
            }
    }
}

/* o[h] += sum_t p[h][t] v_t over dims [d0, d0 + nv * 2L) for the na active heads of a block,
   pairs of keys at a time (an odd last key pairs with a zero row and weight); p holds bf16 rows
   ps apart. The 2 * na * nvmax accumulators stay in registers (na at most the block's width,
   nvmax and dt constants after inlining). */
ATTN__DOT2_TARGET ATTN__PRIVATE ATTN__INLINE void ATTN__FN(attn__decode_dot2_pv_cols)(
    const uint16_t *p, int ps, int n, const void *v, attn__format dt, int e5m2, size_t stride,
    int d0, int nv, int na, int nvmax, int Dv, float *ATTN_RESTRICT o, attn__decode_ahead *ahead) {
    ATTN__VF acc[ATTN__DACC];
    int h, i, t;
    ATTN__UNROLL_UPTO(h, na, ATTN__WIDE_GROUP, 1)
        ATTN__UNROLL_UPTO(i, 2 * nvmax, ATTN__DACC, 1)
            acc[h * 2 * nvmax + i] = i < 2 * nv
                ? ATTN__VLOAD(o + (size_t)h * Dv + d0 + i * ATTN__L) : ATTN__VZERO();
    for (t = 0; t + 1 < n; t += 2)
        ATTN__FN(attn__decode_dot2_pv_step)(acc, p, ps, t, 1, v, dt, e5m2, stride, d0, nv, na,
                                            nvmax, ahead);
    if (t < n)
        ATTN__FN(attn__decode_dot2_pv_step)(acc, p, ps, t, 0, v, dt, e5m2, stride, d0, nv, na,
                                            nvmax, ahead);
    ATTN__UNROLL_UPTO(h, na, ATTN__WIDE_GROUP, 1)
        ATTN__UNROLL_UPTO(i, 2 * nvmax, ATTN__DACC, 1)
            if (i < 2 * nv)
                ATTN__VSTORE(o + (size_t)h * Dv + d0 + i * ATTN__L, acc[h * 2 * nvmax + i]);
}

/* P.V for the first na of the hb heads of a block on the pair kernels: column segments of
   DACC / (2 hb) vector pairs, each pair of rows decoded once for the block's heads. */
ATTN__DOT2_TARGET ATTN__PRIVATE ATTN__INLINE void ATTN__FN(attn__decode_pair_values)(
    const uint16_t *p, int ps, int n, const void *v, attn__format dt, int e5m2, size_t stride,
    int Dk, int Dv, int hb, int na, float *ATTN_RESTRICT o, attn__decode_ahead *ahead) {
    const int seg = ATTN__DACC / (2 * hb), w = 2 * ATTN__L;
    for (int d = 0; d < Dk; d += seg * w)
        ATTN__FN(attn__decode_dot2_pv_cols)(p, ps, n, v, dt, e5m2, stride, d,
                                            ATTN__MIN(seg, (Dk - d) / w), na, seg, Dv, o, ahead);
}

/* A head's probabilities p[0, n) rounded to bf16 (RNE) in place, at the start of the row. */
ATTN__PRIVATE void ATTN__FN(attn__decode_probs_bf16)(float *p, int n) {
    uint16_t *b = (uint16_t *)(void *)p, tail16[ATTN__L];
    float tail[ATTN__L];
    int i = 0;
    /* vectors: each is read before its bytes are written; the tail through copies, as the
       row changes type under it */
    for (; i + ATTN__L <= n; i += ATTN__L) ATTN__VSTORE_BF16(b + i, ATTN__VLOAD(p + i));
    memcpy(tail, p + i, sizeof(float) * (size_t)(n - i));
    for (int j = 0; j < n - i; j++) tail16[j] = attn_f32_to_bf16(tail[j]);
    memcpy(b + i, tail16, sizeof(uint16_t) * (size_t)(n - i));
}

/* Puts value accumulators of the pair kernels back in order: in each 2L dims, unpacking left
   dims 8k..8k+3 (the k-th 128-bit lane) in the first vector and 8k+4..8k+7 in the second. */
ATTN__PRIVATE void ATTN__FN(attn__decode_unpack_order)(float *x, int n) {
    float tmp[2 * ATTN__L];
    for (int g = 0; g + 2 * ATTN__L <= n; g += 2 * ATTN__L) {
        float *y = x + g;
        memcpy(tmp, y, sizeof tmp);
        for (int k = 0; k < ATTN__L / 4; k++)
            for (int e = 0; e < 4; e++) {
                y[8 * k + e] = tmp[4 * k + e];
                y[8 * k + 4 + e] = tmp[ATTN__L + 4 * k + e];
            }
    }
}
#endif

/* Block widths (query heads a register block serves) this pass compiles, for the blocks of
   attn__decode_next_block: one, four, and two and eight (for fp8 rows) where the registers hold
   eight heads' P.V accumulators of two vectors each (not AVX2; the scalar pass runs heads one at
   a time). */
#if ATTN__L == 1
#define ATTN__DECODE_WIDTHS 1
#elif ATTN__DACC >= 2 * ATTN__WIDE_GROUP
#define ATTN__DECODE_WIDTHS (1 | 2 | ATTN__HEAD_GROUP | ATTN__WIDE_GROUP)
#else
#define ATTN__DECODE_WIDTHS (1 | ATTN__HEAD_GROUP)
#endif

/* The kernels of the HB heads (a constant) from h, on the vector kernels. */
#define ATTN__DECODE_BLOCK(HB, NA)                                                                 \
    if (kind == 0)                                                                                 \
        ATTN__FN(attn__decode_logits)(sc->q + (heads + h) * Dv, Dv, (HB), (NA),                   \
                                      r.base, dt, r.stride, n, Dk,                                 \
                                      sc->p + (heads + h) * ATTN__DECODE_PSTRIDE + t, ahead);      \
    else                                                                                           \
        ATTN__FN(attn__decode_values)(sc->p + (heads + h) * ATTN__DECODE_PSTRIDE + t, n, r.base,   \
                                      dt, r.stride, Dk, Dv, (HB), (NA),                            \
                                      sc->o + (heads + h) * Dv, ahead);

/* One chunk of keys (kind 0) or values (kind 1), keys t.. of the partition, for the G heads
   from `heads` in the scratch, block after block (attn__decode_next_block), its rows read as dt
   (a constant after inlining: each format gets its own function, attn__decode_chunk_f32 ..).
   Blocks of two and eight are fp8's, whose decode the heads of a block share (f16, bf16 and f32
   rows take fours: docs/PERF.md#decode-design). Over fp8 rows a block's padded heads (past G)
   are skipped at run time, the block's width still a constant (attn__decode_live_heads): fp8's
   decode is arithmetic-bound (docs/PERF.md#decode-design). Integer rows come in place for one
   head only (attn__decode_in_place): their functions have blocks of one. The prefetch cursor
   goes in and out by value, so its address never leaves the function and it lives in
   registers: vector stores may alias anything, so by pointer each of its steps would be a load
   and a store in the inner loops, a chain through memory (docs/PERF.md#decode-cursor). */
ATTN__PRIVATE ATTN__INLINE attn__decode_ahead ATTN__FN(attn__decode_chunk_dt)(
    const attn__decode_plan *P, int kind, ATTN__FN(attn__decode_rows) r, int n, int Dk,
    const attn__decode_scratch *sc, size_t heads, int t, attn__decode_ahead cursor,
    attn__format dt) {
    attn__decode_ahead *ahead = &cursor;
    const int Dv = P->Dv, fp8 = ATTN__FN(attn__decode_fp8)(dt),
              one = dt == ATTN__FMT_I8 || dt == ATTN__FMT_I4,
              widths = ATTN__DECODE_WIDTHS & (fp8 ? ~0 : one ? 1 : 1 | ATTN__HEAD_GROUP);
    for (int h = 0, hb, na; h < P->G; h += hb) {
        hb = attn__decode_next_block(P->G, P->G - h, widths);
        na = attn__decode_live_heads(fp8, P->G - h);
        if ((widths & 8) && hb == 8) { ATTN__DECODE_BLOCK(8, ATTN__MIN(na, 8)) }
        else if ((widths & 4) && hb == 4) { ATTN__DECODE_BLOCK(4, ATTN__MIN(na, 4)) }
        else if ((widths & 2) && hb == 2) { ATTN__DECODE_BLOCK(2, 2) }
        else { ATTN__DECODE_BLOCK(1, 1) }
    }
    return cursor;
}
#undef ATTN__DECODE_BLOCK

#if ATTN__HAS_DOT2
/* The same on the pair kernels, in blocks of four (and eight over fp8 rows) heads: the queries
   as bf16 at the start of their rows, unscaled (the logits take the scale); the probabilities as
   bf16 at the start of theirs (attn__decode_probs_bf16). */
ATTN__DOT2_TARGET ATTN__PRIVATE ATTN__INLINE attn__decode_ahead
ATTN__FN(attn__decode_pair_chunk_dt)(
    const attn__decode_plan *P, int kind, ATTN__FN(attn__decode_rows) r, int n, int Dk,
    const attn__decode_scratch *sc, size_t heads, int t, attn__decode_ahead cursor,
    attn__format dt) {
    attn__decode_ahead *ahead = &cursor;
    const int Dv = P->Dv, ps = 2 * ATTN__DECODE_PSTRIDE;
    const int widths =
            dt == ATTN__FMT_BF16 ? ATTN__HEAD_GROUP : ATTN__HEAD_GROUP | ATTN__WIDE_GROUP;
    const float k_mul = P->q_mul * ATTN__FN(attn__decode_fold)(P, P->k_scale);
    const int e5m2 = P->kv_dtype == ATTN_FP8_E5M2;
    for (int h = 0, hb, na; h < P->G; h += hb) {
        const uint16_t *q16 = (const uint16_t *)(const void *)(sc->q + (heads + h) * Dv);
        float *ph = sc->p + (heads + h) * ATTN__DECODE_PSTRIDE, *oh = sc->o + (heads + h) * Dv;
        const uint16_t *p16 = (const uint16_t *)(void *)ph + t;
        hb = attn__decode_next_block(P->G, P->G - h, widths);
        na = attn__decode_live_heads(dt != ATTN__FMT_BF16, P->G - h);
#define ATTN__PAIR_BLOCK(HB)                                                                       \
    if (kind == 0)                                                                                 \
        ATTN__FN(attn__decode_pair_logits)(q16, 2 * Dv, r.base, dt, e5m2, r.stride, n, Dk, k_mul,  \
                                           (HB), ATTN__MIN(na, (HB)), ph + t, ahead);              \
    else                                                                                           \
        ATTN__FN(attn__decode_pair_values)(p16, ps, n, r.base, dt, e5m2, r.stride, Dk, Dv, (HB),  \
                                           ATTN__MIN(na, (HB)), oh, ahead);
        if (dt != ATTN__FMT_BF16 && hb == ATTN__WIDE_GROUP) { ATTN__PAIR_BLOCK(ATTN__WIDE_GROUP) }
        else { ATTN__PAIR_BLOCK(ATTN__HEAD_GROUP) }
#undef ATTN__PAIR_BLOCK
    }
    return cursor;
}
#endif

/* The chunk functions, one per format and kernel family: the body's loops with the format's
   row loads inlined, in a function of its own (in one function for every format, a switch around
   the kernels, clang 14 merges the formats' loops into one that switches inside;
   docs/PERF.md#decode-clang). A call runs the body for each of r's KV heads, their rows and
   scratch heads one after another. The cursor crosses the call by pointer, copied in and out
   once (docs/PERF.md#decode-chunk-call). */
typedef void (*ATTN__FN(attn__decode_chunk_fn))(const attn__decode_plan *P, int kind,
                                                ATTN__FN(attn__decode_rows) r, int n, int Dk,
                                                const attn__decode_scratch *sc, size_t heads,
                                                int t, attn__decode_ahead *cursor);
#define ATTN__DECODE_CHUNK_OF(TARGET, NAME, BODY, DT)                                              \
    TARGET ATTN__PRIVATE ATTN__NOINLINE void ATTN__FN(NAME)(                                       \
        const attn__decode_plan *P, int kind, ATTN__FN(attn__decode_rows) r, int n, int Dk,        \
        const attn__decode_scratch *sc, size_t heads, int t, attn__decode_ahead *cursor) {         \
        attn__decode_ahead a = *cursor;                                                            \
        const size_t head_rows = (size_t)P->block_size * P->kv_row_bytes;                          \
        for (int kv = 0; kv < r.kv_heads; kv++) {                                                  \
            a = ATTN__FN(BODY)(P, kind, r, n, Dk, sc, heads, t, a, DT);                            \
            r.base = (const char *)r.base + head_rows;                                             \
            heads += (size_t)P->Gs;                                                                \
        }                                                                                          \
        *cursor = a;                                                                               \
    }
#define ATTN__NO_TARGET
ATTN__DECODE_CHUNK_OF(ATTN__NO_TARGET, attn__decode_chunk_f32, attn__decode_chunk_dt, ATTN__FMT_F32)
#if ATTN__L > 1
ATTN__DECODE_CHUNK_OF(ATTN__NO_TARGET, attn__decode_chunk_f16, attn__decode_chunk_dt, ATTN__FMT_F16)
ATTN__DECODE_CHUNK_OF(ATTN__NO_TARGET, attn__decode_chunk_bf16, attn__decode_chunk_dt,
                      ATTN__FMT_BF16)
#endif
#if ATTN__FP8_KERNELS && ATTN__L > 1
ATTN__DECODE_CHUNK_OF(ATTN__NO_TARGET, attn__decode_chunk_e4m3, attn__decode_chunk_dt,
                      ATTN__HAS_E4M3_FINITE ? ATTN__FMT_E4M3_FINITE : ATTN__FMT_E4M3)
ATTN__DECODE_CHUNK_OF(ATTN__NO_TARGET, attn__decode_chunk_e5m2, attn__decode_chunk_dt,
                      ATTN__FMT_E5M2)
#if ATTN__HAS_E4M3_LUT
ATTN__DECODE_CHUNK_OF(ATTN__NO_TARGET, attn__decode_chunk_e4m3_lut, attn__decode_chunk_dt,
                      ATTN__FMT_E4M3_LUT)
#endif
#endif
#if ATTN__HAS_INT_IN_PLACE
ATTN__DECODE_CHUNK_OF(ATTN__NO_TARGET, attn__decode_chunk_i8, attn__decode_chunk_dt, ATTN__FMT_I8)
ATTN__DECODE_CHUNK_OF(ATTN__NO_TARGET, attn__decode_chunk_i4, attn__decode_chunk_dt, ATTN__FMT_I4)
#endif
#if ATTN__HAS_DOT2
ATTN__DECODE_CHUNK_OF(ATTN__DOT2_TARGET, attn__decode_pair_chunk_bf16, attn__decode_pair_chunk_dt,
                      ATTN__FMT_BF16)
#if ATTN__HAS_FP8_PAIRS
ATTN__DECODE_CHUNK_OF(ATTN__DOT2_TARGET, attn__decode_pair_chunk_fp8, attn__decode_pair_chunk_dt,
                      ATTN__FMT_E4M3_LUT)  /* both fp8 formats: see attn__decode_dot2_row */
#endif
#endif
#undef ATTN__NO_TARGET
#undef ATTN__DECODE_CHUNK_OF

/* The chunk function of a pass over the cache's rows in place (rows read as f32 copies take
   attn__decode_chunk_f32): the route's kernel family (pairs or vector) and the format. The plan
   asks for the pair kernels over bf16 rows, or over fp8 rows where the pass and the CPU have
   their byte tables (attn__decode_plan_fill). */
ATTN__PRIVATE ATTN__FN(attn__decode_chunk_fn) ATTN__FN(attn__decode_chunk_for)(
    const attn__decode_plan *P) {
    attn__format f = ATTN__FN(attn__decode_format)(P->kv_dtype);
#if ATTN__HAS_DOT2
    if (ATTN__FN(attn__decode_pairs)(P)) {
#if ATTN__HAS_FP8_PAIRS
        if (attn__is_fp8(P->kv_dtype)) return ATTN__FN(attn__decode_pair_chunk_fp8);
#endif
        return ATTN__FN(attn__decode_pair_chunk_bf16);
    }
#endif
    if (!ATTN__FN(attn__decode_in_place)(P)) return ATTN__FN(attn__decode_chunk_f32);
    switch (f) {
#if ATTN__L > 1
        case ATTN__FMT_F16: return ATTN__FN(attn__decode_chunk_f16);
        case ATTN__FMT_BF16: return ATTN__FN(attn__decode_chunk_bf16);
#endif
#if ATTN__HAS_INT_IN_PLACE
        case ATTN__FMT_I8: return ATTN__FN(attn__decode_chunk_i8);
        case ATTN__FMT_I4: return ATTN__FN(attn__decode_chunk_i4);
#endif
#if ATTN__FP8_KERNELS && ATTN__L > 1
        case ATTN__FMT_E4M3:
        case ATTN__FMT_E4M3_FINITE: return ATTN__FN(attn__decode_chunk_e4m3);
        case ATTN__FMT_E5M2: return ATTN__FN(attn__decode_chunk_e5m2);
#if ATTN__HAS_E4M3_LUT
        case ATTN__FMT_E4M3_LUT: return ATTN__FN(attn__decode_chunk_e4m3_lut);
#endif
#endif
        default: return ATTN__FN(attn__decode_chunk_f32);
    }
}

#if ATTN__HAS_DECODE_TILES
/* Decode's logits on tiles (attn__decode_plan.tile_keys): for each 32 dims,
   C[key][column] += K[key][dims] . B[dim pairs][column], the A tile 16 key rows of a chunk (bf16
   rows of the cache in place, or bf16 copies of fp8 rows, which bf16 holds exactly), the B tiles
   the query heads' bf16 terms (attn__decode_tile_queries). An f32 query is the sum of three
   bf16 terms, q1 = bf16(q), q2 = bf16(q - q1), q3 = q - q1 - q2 (exact for |q| from 2^-110 up:
   the tiles read subnormal bf16 as 0), each term's products are exact in f32, and a head's
   logit is the sum of its terms' columns, smallest first: no f32 query is rounded to bf16. A
   bf16 query is one term, unscaled, and its logits take the scale, as the pair kernels do.
   The value pass runs on the vector kernels, or from G = 16 on tiles (attn__decode_tile_values). */

/* KV head g's query terms as B tiles at qt: column tile c, dims [32 s, 32 s + 32) at
   qt + (c S + s) 256 (S = D / 32), row i = dims 32 s + 2 i and + 1 as one bf16 pair; a column
   tile holds terms 0.. of 16 / T heads, term-major (column u (16 / T) + i: term u of its head
   i). Unused columns are 0. f32 and f16 queries are taken times mul (the scale, exact after
   the split), bf16 queries as they are. */
ATTN__PRIVATE void ATTN__FN(attn__decode_tile_queries)(const attn__decode_plan *P, int seq, int g,
                                                       float mul, uint32_t *qt) {
    int G = P->G, D = P->D, S = D / 32, T = P->tile_terms, per_tile = 16 / T, h, d, u;
    size_t qsz = attn_dtype_size(P->q_dtype);
    float q[ATTN_MAX_HEAD_SIZE];
    uint16_t terms[ATTN__DECODE_TILE_TERMS][ATTN_MAX_HEAD_SIZE];
    memset(qt, 0, sizeof(uint32_t) * 256 * (size_t)S * P->tile_cols);
    for (h = 0; h < G; h++) {
        int hq, s = attn__decode_head(P, seq, g, h, &hq);
        const char *src = P->q + (size_t)(s * P->q_stride + (int64_t)hq * D) * qsz;
        uint32_t *tile = qt + (size_t)(h / per_tile) * S * 256;
        ATTN__FN(attn__to_f32)(q, src, P->q_dtype, D, T == 1 ? 1.0f : mul);
        for (d = 0; d < D; d += ATTN__L) {  /* each term, then what it leaves: exact in f32 */
            ATTN__VF rest = ATTN__VLOAD(q + d);
            for (u = 0; u < T; u++) {
                ATTN__VSTORE_BF16(terms[u] + d, rest);
                rest = ATTN__VSUB(rest, ATTN__VLOAD_BF16(terms[u] + d));
            }
        }
        for (u = 0; u < T; u++)
            for (d = 0; d < D; d += 2) {
                uint32_t *row = tile + (size_t)(d / 32) * 256 + (size_t)(d % 32 / 2) * 16;
                row[u * per_tile + h % per_tile] =
                        terms[u][d] | (uint32_t)terms[u][d + 1] << 16;
            }
    }
}

/* An fp8 row of D codes as the bf16 of value / fold (exact): in one pass where the ISA layer
   has it, else through f32 in tmp. */
ATTN__PRIVATE void ATTN__FN(attn__decode_tile_fp8)(uint16_t *dst, const void *src, attn_dtype dt,
                                                   int D, float *tmp) {
    if (ATTN__HAS_TILE_FP8_BF16) {
        ATTN__TILE_FP8_BF16(dst, src, dt, D);
        return;
    }
    ATTN__FN(attn__to_f32)(tmp, src, dt, D, 1.0f / attn__decode_tile_fold(dt));
    ATTN__FN(attn__from_f32)(dst, ATTN_BF16, tmp, D);
}

/* The chunk's n key rows as bf16 for the A tiles, *row_bytes apart: a whole chunk of a bf16
   cache in place, otherwise copies in sc->kt (fp8 rows as value / fold, exact), the rows past
   n 0: a tile reads 16 rows. */
ATTN__PRIVATE const uint16_t *ATTN__FN(attn__decode_tile_rows)(const attn__decode_plan *P,
                                                              const char *rows, int n,
                                                              const attn__decode_scratch *sc,
                                                              size_t *row_bytes) {
    int D = P->D;
    *row_bytes = sizeof(uint16_t) * (size_t)D;
    if (P->kv_dtype == ATTN_BF16 && n == ATTN__DECODE_CHUNK)
        return (const uint16_t *)(const void *)rows;
    for (int t = 0; t < ATTN__DECODE_CHUNK; t++) {
        uint16_t *to = sc->kt + (size_t)t * D;
        const char *from = rows + (size_t)t * P->kv_row_bytes;
        if (t >= n) memset(to, 0, *row_bytes);
        else if (P->kv_dtype == ATTN_BF16) memcpy(to, from, *row_bytes);
        else ATTN__FN(attn__decode_tile_fp8)(to, from, P->kv_dtype, D, sc->tile);
    }
    return sc->kt;
}

/* C tiles 0 .. nc - 1 (nc <= 4) for keys k (row_bytes apart) by the column tiles at qt, over
   S steps of 32 dims, stored at cb (a tile every 256 floats, rows of 16). The cursor asks for the
   next rows at the pace of n keys of all heads a step (none: ahead NULL). */
ATTN__TILE_TARGET ATTN__PRIVATE void ATTN__FN(attn__decode_tile_dots)(const uint16_t *k,
                                                                      size_t row_bytes,
                                                                      const uint32_t *qt, int S,
                                                                      int nc, int n, float *cb,
                                                                      attn__decode_ahead *ahead) {
    ATTN__FN(attn__tile_file) tf;
    (void)tf;
#define ATTN__TILE_B(c) (qt + ((size_t)(c) * S + s) * 256)
    ATTN__TILE_FENCE();
    ATTN__TZERO(tf, 0);
    if (nc > 1) ATTN__TZERO(tf, 1);
    if (nc > 2) ATTN__TZERO(tf, 2);
    if (nc > 3) ATTN__TZERO(tf, 3);
    for (int s = 0; s < S; s++) {
        ATTN__TLOAD(tf, 4, k + 32 * s, row_bytes);
        ATTN__TLOAD(tf, 5, ATTN__TILE_B(0), 64);
        ATTN__TDP(tf, 0, 4, 5);
        if (nc > 1) { ATTN__TLOAD(tf, 6, ATTN__TILE_B(1), 64); ATTN__TDP(tf, 1, 4, 6); }
        if (nc > 2) { ATTN__TLOAD(tf, 7, ATTN__TILE_B(2), 64); ATTN__TDP(tf, 2, 4, 7); }
        if (nc > 3) { ATTN__TLOAD(tf, 5, ATTN__TILE_B(3), 64); ATTN__TDP(tf, 3, 4, 5); }
        if (ahead) ATTN__FN(attn__decode_ahead_step)(ahead, 32 * n, (int)ahead->heads);
    }
#undef ATTN__TILE_B
    ATTN__TSTORE(tf, 0, cb, 64);
    if (nc > 1) ATTN__TSTORE(tf, 1, cb + 256, 64);
    if (nc > 2) ATTN__TSTORE(tf, 2, cb + 512, 64);
    if (nc > 3) ATTN__TSTORE(tf, 3, cb + 768, 64);
    ATTN__TILE_FENCE();
}

/* The logits of a column tile's nh heads from its C tile cb ([16 keys][16 columns]): each
   head's term columns summed, smallest term first (one term: times mul), 16 keys a head into p
   (head i at p + i PSTRIDE; as whole vectors, like the vector kernels). */
ATTN__PRIVATE void ATTN__FN(attn__decode_tile_logits)(const float *cb, int terms, int nh,
                                                      float mul, float *p) {
    float ct[256];  /* [columns][keys] */
    int per_tile = 16 / terms, i, u, k0, c0;
    for (k0 = 0; k0 < 16; k0 += ATTN__L)
        for (c0 = 0; c0 < 16; c0 += ATTN__L)
            ATTN__FN(attn__transpose_block)(cb + k0 * 16 + c0, 16, ATTN__L, ct + c0 * 16 + k0, 16,
                                            ATTN__L, NULL);
    for (i = 0; i < nh; i++)
        for (k0 = 0; k0 < 16; k0 += ATTN__L) {
            ATTN__VF v = ATTN__VLOAD(ct + ((terms - 1) * per_tile + i) * 16 + k0);
            for (u = terms - 2; u >= 0; u--)
                v = ATTN__VADD(v, ATTN__VLOAD(ct + (u * per_tile + i) * 16 + k0));
            if (terms == 1) v = ATTN__VMUL(v, ATTN__VSET1(mul));
            ATTN__VSTORE(p + (size_t)i * ATTN__DECODE_PSTRIDE + k0, v);
        }
}

/* The logits of a KV head's G query heads (query tiles qt) for the n keys of a chunk (rows:
   the cache's), into p (head 0's row at the chunk); four column tiles at a time. */
ATTN__PRIVATE void ATTN__FN(attn__decode_tile_keys)(const attn__decode_plan *P, const char *rows,
                                                    int n, const attn__decode_scratch *sc,
                                                    const uint32_t *qt, float *p,
                                                    attn__decode_ahead *ahead) {
    float cb[4 * 256];
    size_t row_bytes;
    const uint16_t *k = ATTN__FN(attn__decode_tile_rows)(P, rows, n, sc, &row_bytes);
    int T = P->tile_terms, per_tile = 16 / T, S = P->D / 32;
    float mul = T == 1 ? P->tile_scale : 1.0f;
    for (int c0 = 0; c0 < P->tile_cols; c0 += 4) {
        int nc = ATTN__MIN(4, P->tile_cols - c0);
        ATTN__FN(attn__decode_tile_dots)(k, row_bytes, qt + (size_t)c0 * S * 256, S, nc, n, cb,
                                         c0 == 0 ? ahead : NULL);
        for (int c = 0; c < nc; c++) {
            int h0 = (c0 + c) * per_tile;
            ATTN__FN(attn__decode_tile_logits)(cb + 256 * c, T, ATTN__MIN(per_tile, P->G - h0),
                                               mul, p + (size_t)h0 * ATTN__DECODE_PSTRIDE);
        }
    }
}

/* P.V on tiles (attn__decode_plan.tile_values, bf16 queries: the probabilities rounded to bf16
   as the pair kernels round them): for each 16 dims, C[head][dims] += A[head][keys] .
   B[pairs of keys][dims], A the chunk's bf16 probabilities of up to 16 query heads (keys 16-31
   of the tile 0), B its value rows interleaved by pairs of keys (bf16 rows of the cache; fp8
   rows through the pair kernels' byte tables where the pass and the CPU have them, else bf16
   copies of value / fold; pairs 8-15 0). The C tiles are a KV head's
   accumulators in the scratch (sc->ct), loaded and stored around each chunk: the pass visits
   every KV head of its span between two chunks of one. The products are the pair kernels'
   (exact); only the order of their sums differs. */

/* The value rows v (D a row) of a chunk of n keys as pairs of keys into rows 0-7 of vt (D pairs a
   row; pairs past the chunk 0), dt a constant after inlining: bf16 rows (row n 0 when n is odd:
   attn__decode_tile_rows), or fp8 codes through the pair kernels' byte tables (ATTN__FMT_E5M2 or
   _E4M3_LUT; the values themselves, not value / fold: one pass, no bf16 copy of the rows). The
   cursor asks for the next rows at the pace of the rows read. */
ATTN__PRIVATE ATTN__INLINE void ATTN__FN(attn__decode_tile_value_pairs)(
    const char *v, int n, int D, attn__format dt, int e5m2, uint32_t *vt,
    attn__decode_ahead *ahead) {
    size_t row = (size_t)D * (dt == ATTN__FMT_BF16 ? sizeof(uint16_t) : 1);
    int i = 0;
    (void)e5m2;  /* the fp8 tables' choice, where the pass has them */
    for (; i < (n + 1) / 2; i++) {
        const char *a = v + 2 * i * row, *b = a + row;
        uint32_t *dst = vt + (size_t)i * D;
#if ATTN__HAS_FP8_PAIRS
        if (dt != ATTN__FMT_BF16) {  /* an odd last key: no row b (never formed past the chunk) */
            const int two = 2 * i + 1 < n;
            const uint8_t *a8 = (const uint8_t *)a, *b8 = two ? (const uint8_t *)b : a8;
            for (int d = 0; d < D; d += ATTN__L)
                ATTN__VSTOREI(dst + d, ATTN__VPAIRI_FP8(a8 + d, b8 + d, two, e5m2));
        } else
#endif
            ATTN__VPAIR_BF16(dst, (const uint16_t *)(const void *)a,
                             (const uint16_t *)(const void *)b, D);
        ATTN__FN(attn__decode_ahead_step)(ahead, 2 * D, (int)ahead->heads);
    }
    for (; i < ATTN__DECODE_CHUNK / 2; i++) memset(vt + (size_t)i * D, 0, sizeof(uint32_t) * D);
}

/* Whether P.V on tiles reads fp8 value rows through the byte tables (the values themselves),
   rather than as bf16 copies of value / fold (attn__decode_tile_rows). */
ATTN__PRIVATE int ATTN__FN(attn__decode_tile_fp8_tables)(const attn__decode_plan *P) {
#if ATTN__HAS_FP8_PAIRS
    return attn__is_fp8(P->kv_dtype) && ATTN__E4M3_LUT_READY();
#else
    (void)P;
    return 0;
#endif
}

/* The A tile pt[16 heads][32 keys]: the probabilities of nh heads (rows of p, PSTRIDE apart)
   for the n keys of a chunk as bf16 (RNE, as attn__decode_probs_bf16 rounds them), the other
   heads and keys of the first 16 0; keys 16-31 stay as they are (0). */
ATTN__PRIVATE void ATTN__FN(attn__decode_tile_probs)(const float *p, int nh, int n,
                                                     uint16_t *pt) {
    for (int r = 0; r < 16; r++) {
        const float *pr = p + (size_t)r * ATTN__DECODE_PSTRIDE;
        uint16_t *row = pt + 32 * r;
        if (r < nh && n == ATTN__DECODE_CHUNK)
            for (int k = 0; k < ATTN__DECODE_CHUNK; k += ATTN__L)
                ATTN__VSTORE_BF16(row + k, ATTN__VLOAD(pr + k));
        else
            for (int k = 0; k < ATTN__DECODE_CHUNK; k++)
                row[k] = r < nh && k < n ? attn_f32_to_bf16(pr[k]) : 0;
    }
}

/* C tiles ct[D / 16][16 heads][16 dims] += A (pt) . B (the rows of vt, D pairs a row), two or
   four C tiles at a time (D is a multiple of 32); first: start them at 0. */
ATTN__TILE_TARGET ATTN__PRIVATE void ATTN__FN(attn__decode_tile_pv)(const uint16_t *pt,
                                                                    const uint32_t *vt, int D,
                                                                    float *ct, int first) {
    ATTN__FN(attn__tile_file) tf;
    size_t vs = sizeof(uint32_t) * (size_t)D;
    (void)tf;
#define ATTN__TILE_C(c) (ct + ((size_t)j + (c)) * 256)
#define ATTN__TILE_V(c) (vt + ((size_t)j + (c)) * 16)
/* C tile c (0 or the accumulators) += A . B tile b (the values of dims 16 (j + c) ..) */
#define ATTN__TILE_PV(c, b)                                                                        \
    do {                                                                                           \
        if (first) ATTN__TZERO(tf, c);                                                             \
        else ATTN__TLOAD(tf, c, ATTN__TILE_C(c), 64);                                              \
        ATTN__TLOAD(tf, b, ATTN__TILE_V(c), vs);                                                   \
        ATTN__TDP(tf, c, 4, b);                                                                    \
    } while (0)
    ATTN__TILE_FENCE();
    ATTN__TLOAD(tf, 4, pt, 64);
    for (int j = 0; j < D / 16; j += 4) {
        int four = j + 4 <= D / 16;
        ATTN__TILE_PV(0, 5);
        ATTN__TILE_PV(1, 6);
        if (four) { ATTN__TILE_PV(2, 7); ATTN__TILE_PV(3, 5); }
        ATTN__TSTORE(tf, 0, ATTN__TILE_C(0), 64);
        ATTN__TSTORE(tf, 1, ATTN__TILE_C(1), 64);
        if (four) {
            ATTN__TSTORE(tf, 2, ATTN__TILE_C(2), 64);
            ATTN__TSTORE(tf, 3, ATTN__TILE_C(3), 64);
        }
    }
    ATTN__TILE_FENCE();
#undef ATTN__TILE_PV
#undef ATTN__TILE_V
#undef ATTN__TILE_C
}

/* P.V of a KV head's G query heads for the n keys of a chunk (rows: the cache's; p: head 0's
   probabilities at the chunk) into its C tiles ct, sixteen heads at a time; first: the
   partition's first chunk. */
ATTN__PRIVATE void ATTN__FN(attn__decode_tile_values)(const attn__decode_plan *P,
                                                      const char *rows, int n,
                                                      const attn__decode_scratch *sc,
                                                      const float *p, float *ct, int first,
                                                      attn__decode_ahead *ahead) {
    int D = P->D;
#if ATTN__HAS_FP8_PAIRS
    if (ATTN__FN(attn__decode_tile_fp8_tables)(P))  /* both fp8 formats, their tables by e5m2 */
        ATTN__FN(attn__decode_tile_value_pairs)(rows, n, D, ATTN__FMT_E4M3_LUT,
                                                P->kv_dtype == ATTN_FP8_E5M2, sc->vt, ahead);
    else
#endif
    {
        size_t row_bytes;
        ATTN__FN(attn__decode_tile_value_pairs)(
            (const char *)ATTN__FN(attn__decode_tile_rows)(P, rows, n, sc, &row_bytes), n, D,
            ATTN__FMT_BF16, 0, sc->vt, ahead);
    }
    for (int h0 = 0; h0 < P->G; h0 += 16) {
        ATTN__FN(attn__decode_tile_probs)(p + (size_t)h0 * ATTN__DECODE_PSTRIDE,
                                          ATTN__MIN(16, P->G - h0), n, sc->pt);
        ATTN__FN(attn__decode_tile_pv)(sc->pt, sc->vt, D, ct + (size_t)h0 * D, first);
    }
}

#endif

/* One pass (keys, kind 0, or values, kind 1) over the keys [lo, hi) for KV heads [g0, g1): a
   block piece at a time, and for each head its rows of the piece (a block keeps each head's rows
   together, the heads one after another) - all the heads in one chunk call where
   attn__decode_together. The piece after the current one (after the last keys: the first
   values) is prefetched meanwhile into L2, and the rows read next into L1 (see
   attn__decode_ahead_step): the next heads' rows of this piece, or after the last head the
   first head's of the next piece - not with one head a span, where those are the L2 cursor's own
   rows, and asking for them into L1 a block ahead is slower (docs/PERF.md#decode-prefetch). */
ATTN__PRIVATE void ATTN__FN(attn__decode_pass)(const attn__decode_plan *P, int kind, int seq,
                                               int64_t lo,
                                               int64_t hi, int g0, int g1,
                                               const attn__decode_scratch *sc) {
    const char *cache = kind ? P->value_cache : P->key_cache;
    int Gs = P->Gs, Dv = P->Dv;
    int Dk = (P->D + 2 * ATTN__L - 1) / (2 * ATTN__L) * 2 * ATTN__L;  /* dims the loops touch */
    ATTN__FN(attn__decode_chunk_fn) chunk = ATTN__FN(attn__decode_chunk_for)(P);
    attn__decode_piece_at cur, nxt;
    int64_t j = lo;
    const int together = ATTN__FN(attn__decode_together)(P);
    if (!attn__decode_piece(P, seq, &j, hi, &cur)) return;
    for (;;) {
        const char *next_cache = cache;
        int64_t jn = j;
        int has_next = attn__decode_piece(P, seq, &jn, hi, &nxt);
        int last = !has_next;  /* told by position: K and V may be one buffer */
        if (last && kind == 0) {  /* after the keys come the values */
            jn = lo;
            has_next = attn__decode_piece(P, seq, &jn, hi, &nxt);
            next_cache = P->value_cache;
        }
        for (int g = g0, g_end; g < g1; g = g_end) {
            size_t heads = (size_t)(g - g0) * Gs;
            g_end = together ? g1 : g + 1;
            attn__decode_ahead ahead = ATTN__FN(attn__decode_ahead_of)(
                    P, next_cache, has_next ? &nxt : NULL, g, g_end);
            if (g + 1 < g1) ATTN__FN(attn__decode_piece_rows)(P, cache, &cur, g + 1,
                                                              together ? g1 : g + 2,
                                                              &ahead.near, &ahead.near_end);
            else if (g1 - g0 > 1 && has_next)
                ATTN__FN(attn__decode_piece_rows)(P, next_cache, &nxt, g0, g0 + 1, &ahead.near,
                                                  &ahead.near_end);
            for (int c = 0; c < cur.n; c += ATTN__DECODE_CHUNK) {
                int m = ATTN__MIN(ATTN__DECODE_CHUNK, cur.n - c);
#if ATTN__HAS_DECODE_TILES
                if (kind == 0 && P->tile_keys) {
                    ATTN__FN(attn__decode_tile_keys)(
                        P, ATTN__FN(attn__decode_chunk_at)(P, cache, cur.blk, g, cur.off + c), m,
                        sc, sc->qt + (size_t)(g - g0) * P->tile_words,
                        sc->p + heads * ATTN__DECODE_PSTRIDE + (cur.j - lo) + c, &ahead);
                    continue;
                }
                if (kind == 1 && P->tile_values) {
                    int t = (int)(cur.j - lo) + c;
                    ATTN__FN(attn__decode_tile_values)(
                        P, ATTN__FN(attn__decode_chunk_at)(P, cache, cur.blk, g, cur.off + c), m,
                        sc, sc->p + heads * ATTN__DECODE_PSTRIDE + t,
                        attn__decode_tile_acc(P, sc, g - g0), t == 0, &ahead);
                    continue;
                }
#endif
                ATTN__FN(attn__decode_rows) r =
                    ATTN__FN(attn__decode_rows_of)(P, cache, cur.blk, g, cur.off + c, m, Dv,
                                                   sc->tile);
                r.kv_heads = g_end - g;
                (r.dt == P->kv_dtype ? chunk : ATTN__FN(attn__decode_chunk_f32))(
                    P, kind, r, m, Dk, sc, heads, (int)(cur.j - lo) + c, &ahead);
            }
        }
        if (last) break;
        cur = nxt;
        j = jn;
    }
}

#if ATTN__HAS_DECODE_TILES
/* The value pass of a partition with P.V on tiles (attn__decode_tile_values), and its outputs
   into the partial results of KV heads [g0, g1). */
ATTN__PRIVATE void ATTN__FN(attn__decode_tile_value_pass)(const attn__decode_plan *P, int seq,
                                                          int part, int64_t lo, int64_t hi,
                                                          int g0, int g1,
                                                          const attn__decode_scratch *sc) {
    float mul = ATTN__FN(attn__decode_tile_fp8_tables)(P)
                        ? P->v_scale : P->v_scale * attn__decode_tile_fold(P->kv_dtype);
    memset(sc->pt, 0, sizeof(uint16_t) * 16 * 32);
    memset(sc->vt + (size_t)8 * P->D, 0, sizeof(uint32_t) * 8 * (size_t)P->D);
    ATTN__FN(attn__tiles_begin)();
    ATTN__FN(attn__decode_pass)(P, 1, seq, lo, hi, g0, g1, sc);
    ATTN__FN(attn__tiles_end)();
    for (int g = g0; g < g1; g++)
        attn__decode_tile_out(P, attn__decode_tile_acc(P, sc, g - g0), mul,
                              attn__decode_part_out(P, seq, part, g) + 2 * P->G);
}
#endif

/* Softmax of one head's logits over the partition's keys [lo, lo + n), all visible to the query
   at pos: applies the logits transform (its scalar instance, in every pass), returns m and l,
   leaves exp(s - m) in place. */
ATTN__PRIVATE ATTN__NOINLINE void ATTN__FN(attn__decode_softmax)(const attn__decode_plan *P, int h,
                                                                int64_t pos,
                                                  int64_t lo, int n, float *ATTN_RESTRICT s,
                                                  float *m_out, float *l_out) {
    attn__logits T = P->logits;
    int c = 0, nv = n / ATTN__L * ATTN__L;
    float m = -INFINITY, l = 0.0f, slope = attn__logits_slope(&T, h);
    ATTN__VF vmax = ATTN__VSET1(-INFINITY), vsum = ATTN__VZERO();
    if (attn__logits_shaped(&T))  /* scalar: at most one partition, not the hot part */
        for (c = 0; c < n; c++)
            s[c] = attn__logits_of__scalar(&T, s[c], 1.0f, slope, (float)(lo + c - pos), 0, 0.0f,
                                           0.0f);
    for (c = 0; c < nv; c += ATTN__L) vmax = ATTN__VMAX(vmax, ATTN__VLOAD(s + c));
    m = ATTN__VHMAX(vmax);
    for (; c < n; c++) m = ATTN__MAX(m, s[c]);
    ATTN__VF vm = ATTN__VSET1(m);
    for (c = 0; c < nv; c += ATTN__L) {
        ATTN__VF e = ATTN__FN(attn__vexp)(ATTN__VSUB(ATTN__VLOAD(s + c), vm));
        ATTN__VSTORE(s + c, e);
        vsum = ATTN__VADD(vsum, e);
    }
    l = ATTN__VHSUM(vsum);
    for (; c < n; c++) { s[c] = attn__vexp__scalar(s[c] - m); l += s[c]; }
    *m_out = m;
    *l_out = l;
}

/* Queries of the G heads of KV head g as f32 times mul into the rows of q[Gs][Dv] (padded heads
   and dims 0: any block the kernels run reads zeros past G) - or, for the pair kernels, as their
   bf16 values at the start of each row; the output accumulators o[Gs][Dv] 0. */
ATTN__PRIVATE ATTN__NOINLINE void ATTN__FN(attn__decode_load_q)(const attn__decode_plan *P,
                                                               int seq, int g,
                                                 float mul,
                                                 float *q, float *o) {
    int G = P->G, D = P->D, Dv = P->Dv, pairs = ATTN__FN(attn__decode_pairs)(P), h, d;
    int heads = P->Gs;
    size_t qsz = attn_dtype_size(P->q_dtype);
    for (h = 0; h < heads; h++) {
        float *qh = q + (size_t)h * Dv;
        for (d = 0; d < Dv; d++) qh[d] = 0.0f;
        if (h < G && !P->tile_keys) {  /* the logits on tiles read their own query tiles */
            int hq, s = attn__decode_head(P, seq, g, h, &hq);
            const char *src = P->q + (size_t)(s * P->q_stride + (int64_t)hq * D) * qsz;
            if (pairs) memcpy(qh, src, sizeof(uint16_t) * (size_t)D);
            else ATTN__FN(attn__to_f32)(qh, src, P->q_dtype, D, mul);
        }
        if (ATTN__FN(attn__decode_even_odd)(P)) ATTN__FN(attn__decode_pair_order)(qh, D, 1);
        for (d = 0; d < Dv; d++) o[(size_t)h * Dv + d] = 0.0f;
    }
}

/* The softmax of KV head g's logits p[Gs][PSTRIDE], in place and as the value pass reads it
   (bf16 for the pair kernels), each head's query at its sequence's last key; m and l go to its
   partial results. */
ATTN__PRIVATE void ATTN__FN(attn__decode_softmax_heads)(const attn__decode_plan *P, int seq,
                                                        int g, int64_t lo, int n, float *p,
                                                        float *partial) {
    int G = P->G, h, c, n_heads;
    for (h = 0; h < G; h++) {
        int hq, s = attn__decode_head(P, seq, g, h, &hq);
        ATTN__FN(attn__decode_softmax)(P, hq, (int64_t)P->seq_lens[s] - 1, lo, n,
                                       p + (size_t)h * ATTN__DECODE_PSTRIDE,
                                       &partial[h], &partial[G + h]);
    }
    for (h = G, n_heads = P->Gs; h < n_heads; h++)  /* padding: 0 */
        for (c = 0; c < n; c++) p[(size_t)h * ATTN__DECODE_PSTRIDE + c] = 0.0f;
#if ATTN__HAS_DOT2
    for (h = 0; h < n_heads && ATTN__FN(attn__decode_pairs)(P) && !P->tile_values; h++)
        ATTN__FN(attn__decode_probs_bf16)(p + (size_t)h * ATTN__DECODE_PSTRIDE, n);
#endif
}

/* A head's value accumulators back in dimension order, from the order its kernels left. */
ATTN__PRIVATE void ATTN__FN(attn__decode_restore_order)(const attn__decode_plan *P, float *o) {
#if ATTN__HAS_DOT2
    if (ATTN__FN(attn__decode_pairs)(P) && P->kv_dtype == ATTN_BF16)  /* fp8's are in order */
        ATTN__FN(attn__decode_unpack_order)(o, P->D);
#endif
    if (ATTN__FN(attn__decode_even_odd)(P)) ATTN__FN(attn__decode_pair_order)(o, P->D, 0);
}

/* One partition of sequence seq for KV heads [g0, g1): keys block by block (all the heads of a
   block together), the softmax, then the values the same way. Each head's arithmetic is
   independent of g0 and g1 and of the block the kernels run it in, so any grouping of heads
   gives the same bits - also a stacked pass's (attn__decode_plan.stack: the heads of several
   sequences, whose tables name the same blocks for this partition, all of it visible to each:
   seq is its first member). */
ATTN__PRIVATE void ATTN__FN(attn__decode_partition)(const attn__decode_plan *P, int seq, int g0,
                                                    int g1,
                                                    int part, int thread) {
    attn__decode_scratch sc;
    int G = P->G, Gs = P->Gs, D = P->D, Dv = P->Dv, g, h, d;
    int64_t L = P->seq_lens[seq], pos = L - 1, lo, hi;
    attn__visible_keys(&P->logits, pos, pos, L, &lo, &hi);
    lo = ATTN__MAX(lo, (int64_t)part * ATTN_PARTITION_TOKENS);
    hi = ATTN__MIN(hi, (int64_t)part * ATTN_PARTITION_TOKENS + ATTN_PARTITION_TOKENS);
    if (lo >= hi) {  /* wholly outside the window: nothing to read */
        for (g = g0; g < g1; g++) {
            float *partial = attn__decode_part_out(P, seq, part, g);
            for (h = 0; h < G; h++) { partial[h] = -INFINITY; partial[G + h] = 0.0f; }
            for (d = 0; d < G * D; d++) partial[2 * G + d] = 0.0f;
        }
        return;
    }
    attn__decode_scratch_layout(g1 - g0, G, Gs, Dv, P->tile_words,
                                P->scratch + (size_t)thread * P->scratch_bytes, &sc);
    float k_mul = P->q_mul * ATTN__FN(attn__decode_fold)(P, P->k_scale);
    for (g = g0; g < g1; g++) {
        size_t heads = (size_t)(g - g0) * Gs;
        ATTN__FN(attn__decode_load_q)(P, seq, g, k_mul, sc.q + heads * Dv, sc.o + heads * Dv);
    }
#if ATTN__HAS_DECODE_TILES
    if (P->tile_keys) {
        for (g = g0; g < g1; g++)
            ATTN__FN(attn__decode_tile_queries)(P, seq, g, P->tile_scale,
                                                sc.qt + (size_t)(g - g0) * P->tile_words);
        ATTN__FN(attn__tiles_begin)();
        ATTN__FN(attn__decode_pass)(P, 0, seq, lo, hi, g0, g1, &sc);
        ATTN__FN(attn__tiles_end)();
    } else
#endif
    ATTN__FN(attn__decode_pass)(P, 0, seq, lo, hi, g0, g1, &sc);
    for (g = g0; g < g1; g++)
        ATTN__FN(attn__decode_softmax_heads)(P, seq, g, lo, (int)(hi - lo),
                                             sc.p + (size_t)(g - g0) * Gs * ATTN__DECODE_PSTRIDE,
                                             attn__decode_part_out(P, seq, part, g));
#if ATTN__HAS_DECODE_TILES
    if (P->tile_values) {
        ATTN__FN(attn__decode_tile_value_pass)(P, seq, part, lo, hi, g0, g1, &sc);
        return;
    }
#endif
    ATTN__FN(attn__decode_pass)(P, 1, seq, lo, hi, g0, g1, &sc);
    float v_mul = ATTN__FN(attn__decode_fold)(P, P->v_scale);
    for (g = g0; g < g1; g++) {
        float *po = attn__decode_part_out(P, seq, part, g) + 2 * G;
        float *o = sc.o + (size_t)(g - g0) * Gs * Dv;
        for (h = 0; h < G; h++) {
            ATTN__FN(attn__decode_restore_order)(P, o + (size_t)h * Dv);
            for (d = 0; d < D; d++) po[(size_t)h * D + d] = o[(size_t)h * Dv + d] * v_mul;
        }
    }
}

/* ---------------------------------------------------------------------------------------------
   [Y] The kernel table of this pass. */
static const attn__kernels ATTN__FN(attn__table) = {
    ATTN__PASS_ISA,
    (ATTN__HAS_DOT2 ? ATTN__CAP_BF16_PAIRS : 0) | (ATTN__HAS_E4M3_LUT ? ATTN__CAP_E4M3_LUT : 0) |
        (ATTN__HAS_TILES ? ATTN__CAP_TILES : 0) |
        (ATTN__HAS_DECODE_TILES ? ATTN__CAP_DECODE_TILES : 0),
    ATTN__DECODE_WIDTHS,
    ATTN__FN(attn__to_f32), ATTN__FN(attn__from_f32), ATTN__FN(attn__prefill_item),
    ATTN__FN(attn__decode_partition)
#ifdef ATTN_USE_ONEDNN
    , ATTN__FN(attn__prefill_item_dnnl)
#endif
};

#undef ATTN__FN
#undef ATTN__PASS_ISA
#undef ATTN__VF
#undef ATTN__L
#undef ATTN__MR
#undef ATTN__NV
#undef ATTN__NR
#undef ATTN__VZERO
#undef ATTN__VSET1
#undef ATTN__VLOAD
#undef ATTN__VSTORE
#undef ATTN__VADD
#undef ATTN__VSUB
#undef ATTN__VMUL
#undef ATTN__VDIV
#undef ATTN__VFMA
#undef ATTN__VMAX
#undef ATTN__VMIN
#undef ATTN__VHSUM
#undef ATTN__VHMAX
#undef ATTN__VIOTA
#undef ATTN__VLT_SELECT
#undef ATTN__VIN_SELECT
#undef ATTN__VEXP2I
#undef ATTN__VEXP_SCALE
#undef ATTN__VLOAD_F32
#undef ATTN__VSTORE_F32
#undef ATTN__VLOAD_F16
#undef ATTN__VLOAD_BF16
#undef ATTN__VLOAD2_BF16
#undef ATTN__VSTORE_F16
#undef ATTN__VSTORE_BF16
#undef ATTN__VLOAD_E5M2
#undef ATTN__VLOAD_E4M3
#undef ATTN__VLOAD2_E4M3
#undef ATTN__VLOAD2_E5M2
#undef ATTN__VLOAD_I8
#undef ATTN__VLOAD2_I4
#undef ATTN__VLOAD2_I4S
#undef ATTN__VSET1_BF16
#undef ATTN__VTRANSUM
#undef ATTN__VPAIR_SUMS
#undef ATTN__VTRANSPOSE
#undef ATTN__DKT
#undef ATTN__DACC
#undef ATTN__DECODE_WIDTHS
#undef ATTN__DECODE_STEP_KEYS
#undef ATTN__VKEEP
#undef ATTN__PREFETCH
#undef ATTN__PREFETCH_L2
#undef ATTN__HAS_E4M3_LUT
#undef ATTN__HAS_E4M3_FINITE
#undef ATTN__HAS_INT_IN_PLACE
#undef ATTN__HAS_DECODE_TILES
#undef ATTN__HAS_TILE_FP8_BF16
#undef ATTN__TILE_FP8_BF16
#undef ATTN__E4M3_HAS_NAN
#undef ATTN__VLOAD_E4M3_FINITE
#undef ATTN__VLOAD2_E4M3_FINITE
#undef ATTN__E4M3_LUT_READY
#undef ATTN__VLOAD2_E4M3_LUT
#undef ATTN__UNROLL
#undef ATTN__HAS_DOT2
#ifdef ATTN__DOT2_READY
#undef ATTN__DOT2_READY
#undef ATTN__DOT2_TARGET
#undef ATTN__VI
#undef ATTN__VLOADI
#undef ATTN__VSTOREI
#undef ATTN__VSET1I
#undef ATTN__VDOT2
#undef ATTN__VPAIR_BF16
#undef ATTN__VPAIR_PROBS
#undef ATTN__VZEROI
#undef ATTN__VUNPACK_PAIRS
#endif
#if ATTN__HAS_FP8_PAIRS
#undef ATTN__VLOADI_FP8
#undef ATTN__VPAIRI_FP8
#endif
#undef ATTN__HAS_FP8_PAIRS
#if ATTN__HAS_TILES
#undef ATTN__TILES_REAL
#undef ATTN__TILE_TARGET
#undef ATTN__TLOAD
#undef ATTN__TSTORE
#undef ATTN__TZERO
#undef ATTN__TDP
#undef ATTN__TILE_FENCE
#endif
#if ATTN__HAS_PAIRS
#undef ATTN__PAIRS_TARGET
#ifndef ATTN__DOT2_READY
#undef ATTN__VPAIR_BF16
#undef ATTN__VPAIR_PROBS
#endif
#endif
#undef ATTN__HAS_PAIRS
#undef ATTN__HAS_TILES
#endif /* ATTN__KERNEL_PASS */

/*
---------------------------------------------------------------------------------------------------
This software is available under 2 licenses -- choose whichever you prefer.
---------------------------------------------------------------------------------------------------
ALTERNATIVE A - MIT License
Copyright (c) 2026 the attn.h authors
Permission is hereby granted, free of charge, to any person obtaining a copy of this software and
associated documentation files (the "Software"), to deal in the Software without restriction,
including without limitation the rights to use, copy, modify, merge, publish, distribute,
sublicense, and/or sell copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:
The above copyright notice and this permission notice shall be included in all copies or
substantial portions of the Software.
THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT
NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND
NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM,
DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT
OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
---------------------------------------------------------------------------------------------------
ALTERNATIVE B - Public Domain (www.unlicense.org)
This is free and unencumbered software released into the public domain.
Anyone is free to copy, modify, publish, use, compile, sell, or distribute this software, either in
source code form or as a compiled binary, for any purpose, commercial or non-commercial, and by any
means.
In jurisdictions that recognize copyright laws, the author or authors of this software dedicate any
and all copyright interest in the software to the public domain. We make this dedication for the
benefit of the public at large and to the detriment of our heirs and successors. We intend this
dedication to be an overt act of relinquishment in perpetuity of all present and future rights to
this software under copyright law.
THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT
NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND
NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY,
WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE
SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
---------------------------------------------------------------------------------------------------
*/
