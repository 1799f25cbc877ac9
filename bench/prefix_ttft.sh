#!/bin/sh
# Time to first token with and without the prefix cache, through the llama runner
# (examples/llama.c) on the generated checkpoint of `make run` (dim 512, 6 layers, 8 heads / 2 KV
# heads, vocab 4096): N requests whose prompts share their first P token ids and end with Q ids
# of their own arrive one after another (request i at step i, each generating one token, so
# every step is one request's whole prefill: the first computes the shared prefix, the others
# find it cached when the cache is on). The runner times each request from the start of its
# arrival step to its first token (the whole step: matmuls, attention, sampling) and counts the
# prefilled tokens. Runs alternate cache on / off, ROUNDS times each; one line per run, then the
# medians.
# Usage: sh bench/prefix_ttft.sh [N] [P] [Q] [ROUNDS] [THREADS]   (defaults 8 1024 64 3 2)
# BUILD (default build) holds ex_llama and ex_make_checkpoint (built here when missing).
N=${1:-8}; P=${2:-1024}; Q=${3:-64}; ROUNDS=${4:-3}; T=${5:-2}; B=${BUILD:-build}
mkdir -p "$B"
for ex in llama make_checkpoint; do
    [ -x "$B/ex_$ex" ] ||
        ${CC:-cc} -std=c99 -O2 -fopenmp -I. "examples/$ex.c" -o "$B/ex_$ex" -lm || exit 1
done
[ -f "$B/model.bin" ] ||
    "$B/ex_make_checkpoint" -o "$B/model.bin" -z "$B/tokenizer.bin" > /dev/null || exit 1
# prompt i: ids 1 (BOS), then P - 1 shared ids, then Q ids of its own (all below the vocab)
args=""; arrive=""
i=0
while [ $i -lt "$N" ]; do
    p=$(awk -v P="$P" -v Q="$Q" -v i="$i" 'BEGIN { s = "1"
        for (j = 1; j < P; j++) s = s " " (3 + (j * 37) % 4000)
        for (j = 0; j < Q; j++) s = s " " (3 + (i * 977 + j * 131 + 7) % 4000); print s }')
    args="$args -p \"$p\""
    arrive="$arrive${arrive:+,}$i"
    i=$((i + 1))
done
run() {  # $1 = on | off: prints "on|off prefilled ttft_mean hit_rate"
    out=$(eval "\"$B/ex_llama\" \"$B/model.bin\" -m 1 --ignore-eos --chunk 0 \
          --batch-tokens $((P + Q)) --threads $T --prefix-cache $1 --arrive $arrive -q $args" 2>&1) ||
        { echo "runner failed: $out" >&2; exit 1; }
    pre=$(echo "$out" | sed -n 's/.*prefill \([0-9]*\) tokens at.*/\1/p')
    ttft=$(echo "$out" | sed -n 's/.*time to first token: mean \([0-9.]*\) s.*/\1/p')
    hit=$(echo "$out" | sed -n 's/.*tokens found cached (\([0-9.]*\)%).*/\1/p')
    cost=$(echo "$out" | sed -n 's/.*a lookup that found blocks \([0-9.]*\) us, a miss \([0-9.]*\) us.*/\1 \2/p')
    echo "$1 $pre $ttft ${hit:--} ${cost:-- -}"
}
echo "# $N requests x ($P shared + $Q own) tokens, one after another; $T threads; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
echo "# cache prefilled_tokens mean_ttft_s hit_rate_% lookup_hit_us lookup_miss_us"
r=0
: > "$B/prefix_ttft.runs"
while [ $r -lt "$ROUNDS" ]; do
    run on | tee -a "$B/prefix_ttft.runs"
    run off | tee -a "$B/prefix_ttft.runs"
    r=$((r + 1))
done
median() {  # $1 = on | off, $2 = column: the median of that column over the runs
    grep "^$1 " "$B/prefix_ttft.runs" | awk -v c="$2" '{ print $c }' | sort -n |
        awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}
pon=$(median on 2); poff=$(median off 2); ton=$(median on 3); toff=$(median off 3)
echo "median on: prefilled $pon tokens, mean TTFT $ton s, lookups $(median on 5) us (hit), $(median on 6) us (miss)"
echo "median off: prefilled $poff tokens, mean TTFT $toff s"
awk -v a="$poff" -v b="$pon" -v c="$toff" -v d="$ton" 'BEGIN {
    printf "cache on vs off: %.2fx fewer prefilled tokens, %.2fx lower mean TTFT\n", a / b, c / d }'
