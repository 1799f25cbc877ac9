#!/usr/bin/env python3
"""bench/peers.py - the peers of attn_bench on the same machine, in the same units.

PyTorch's scaled_dot_product_attention (and IPEX's flash attention when intel_extension_for_pytorch
imports) on attn_bench's prefill shapes: one sequence, H query heads over Hk KV heads, head size D,
causal; useful GFLOP/s = 4 * D FLOPs per visible (query, key) pair and head, as attn_bench counts.
Decode: one query token per sequence over a contiguous [seqs, Hk, ctx, D] cache (PyTorch has no
paged decode; this is the best case for it), reported as KV GB/s like attn_bench decode.

  python3 bench/peers.py -t 1,2 -S 512,2048,8192 --dtype bf16,f32
  python3 bench/peers.py --mode decode --seqs 64 --ctx 4096 --dtype f32,bf16

Prints a markdown table; medians of -r timed calls after one warm-up. Run it beside attn_bench in
the same session (shared machines drift) and quote the ratio.
"""
import argparse
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


def ipex_available():
    try:
        import intel_extension_for_pytorch  # noqa: F401
        return True
    except Exception:
        return False


def timed(fn, reps):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), (statistics.stdev(ts) if len(ts) > 1 else 0.0)


def prefill_row(a, dt, S):
    """(ms, GFLOP/s, sd) of one causal (or full) sequence of S tokens."""
    H, Hk, D = a.heads, a.kv_heads, a.head_size
    q = torch.randn(1, H, S, D).to(dt)
    k = torch.randn(1, Hk, S, D).to(dt)
    v = torch.randn(1, Hk, S, D).to(dt)
    pairs = S * (S + 1) // 2 if not a.noncausal else S * S
    flops = 4.0 * D * H * pairs
    med, sd = timed(lambda: sdpa(q, k, v, not a.noncausal), a.reps)
    return med, flops / med / 1e9, flops * sd / med / med / 1e9


def decode_row(a, dt):
    """(ms, KV GB/s, sd) of one query token per sequence over a contiguous cache."""
    H, Hk, D, B, L = a.heads, a.kv_heads, a.head_size, a.seqs, a.ctx
    q = torch.randn(B, H, 1, D).to(dt)
    k = torch.randn(B, Hk, L, D).to(dt)
    v = torch.randn(B, Hk, L, D).to(dt)
    kv_bytes = 2.0 * B * Hk * L * D * k.element_size()
    med, sd = timed(lambda: sdpa(q, k, v, False), a.reps)
    return med, kv_bytes / med / 1e9, kv_bytes * sd / med / med / 1e9


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--mode", default="prefill", choices=["prefill", "decode"])
    p.add_argument("-t", "--threads", default="1,2")
    p.add_argument("-S", "--seq", default="512,2048,8192")
    p.add_argument("--dtype", default="bf16,f32")
    p.add_argument("-H", "--heads", type=int, default=32)
    p.add_argument("--hk", dest="kv_heads", type=int, default=8)
    p.add_argument("-D", "--head-size", type=int, default=128)
    p.add_argument("--seqs", type=int, default=64)
    p.add_argument("--ctx", type=int, default=4096)
    p.add_argument("--noncausal", action="store_true")
    p.add_argument("-r", "--reps", type=int, default=5)
    a = p.parse_args()
    unit = "GFLOP/s" if a.mode == "prefill" else "GB/s"
    print(f"# torch {torch.__version__}, H={a.heads} Hk={a.kv_heads} D={a.head_size}, "
          f"ipex: {'yes' if ipex_available() else 'no'}")
    print(f"| peer | dtype | shape | threads | ms | {unit} | sd |")
    print("|---|---|---|---|---|---|---|")
    for t in [int(x) for x in a.threads.split(",")]:
        torch.set_num_threads(t)
        for name in a.dtype.split(","):
            dt = DTYPES[name]
            if a.mode == "prefill":
                for S in [int(x) for x in a.seq.split(",")]:
                    med, rate, sd = prefill_row(a, dt, S)
                    print(f"| torch sdpa | {name} | S={S} | {t} | {med * 1e3:.2f} | {rate:.1f} "
                          f"| {sd:.1f} |", flush=True)
            else:
                med, rate, sd = decode_row(a, dt)
                print(f"| torch sdpa (contiguous KV) | {name} | {a.seqs}x{a.ctx} | {t} "
                      f"| {med * 1e3:.2f} | {rate:.1f} | {sd:.1f} |", flush=True)


if __name__ == "__main__":
    main()
