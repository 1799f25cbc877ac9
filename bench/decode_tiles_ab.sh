#!/bin/sh
# Paged decode with its logits on the AMX tiles for bf16 queries from G = 8 (the default) and
# for every query dtype from G = 4 (ATTN_DECODE_TILES): builds build/attn_bench and
# build/attn_bench_decode_tiles, then runs `decode --gqa 1,4,8` with each in turn, ROUNDS times
# (A B A B ...), so both see the machine in the same states: f32 queries (split in three bf16
# terms on the tiles) over bf16 and fp8 caches, then bf16 queries (one term) at G = 4 and 8,
# which differ only at G = 4. On a CPU without usable tiles both run the same kernels
# (attn_cpu_features says amx=no).
# Usage: sh bench/decode_tiles_ab.sh [ROUNDS] [more attn_bench decode options]
set -e
ROUNDS=${1:-2}
[ $# -gt 0 ] && shift
make -s build/attn_bench build/attn_bench_decode_tiles
i=0
while [ $i -lt "$ROUNDS" ]; do
    for b in attn_bench attn_bench_decode_tiles; do
        echo "== round $i: $b"
        ./build/$b decode --gqa 1,4,8 -t 2 -r 5 --kv-dtype bf16,fp8_e4m3,fp8_e5m2 "$@"
        ./build/$b decode --gqa 4,8 -t 2 -r 5 --dtype bf16 --kv-dtype bf16,fp8_e4m3 "$@"
    done
    i=$((i + 1))
done
