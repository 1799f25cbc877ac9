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


def ipex_module():
    """intel_extension_for_pytorch, or None where it does not import."""
    try:
        import intel_extension_for_pytorch
        return intel_extension_for_pytorch
    except Exception:
        return None


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


def prefill_rows(a, dt, S, torch_too, ipex):
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
    return rows


def decode_rows(a, dt, H, Hk, B, torch_too, ipex):
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
    p.add_argument("--peers", default="torch,ipex", help="which: torch, ipex (where it imports)")
    p.add_argument("--noncausal", action="store_true")
    p.add_argument("-r", "--reps", type=int, default=5)
    a = p.parse_args()
    peers = a.peers.split(",")
    ipex = ipex_module() if "ipex" in peers else None
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
                    for peer, med, rate, sd, err in prefill_rows(a, dt, S, "torch" in peers, ipex):
                        print(f"| {peer} | {name} | H{a.heads}/{a.kv_heads} S={S} | {t} "
                              f"| {med * 1e3:.2f} | {rate:.1f} | {sd:.1f} | {err:.1e} |",
                              flush=True)
            else:
                for H, Hk, B in decode_shapes(a):
                    rows = decode_rows(a, dt, H, Hk, B, "torch" in peers, ipex)
                    for peer, med, rate, sd, err in rows:
                        print(f"| {peer} | {name} | H{H}/{Hk} {B}x{a.ctx} | {t} "
                              f"| {med * 1e3:.2f} | {rate:.1f} | {sd:.1f} | {err:.1e} |",
                              flush=True)


if __name__ == "__main__":
    main()
