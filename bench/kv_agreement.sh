#!/bin/sh
# Greedy tokens of the llama runner with each KV cache dtype against those with an f32 cache:
# the `make run` checkpoint (build/model.bin: random weights, dim 512, 6 layers, 8 heads / 2 KV
# heads, vocab 4096), 8 prompts, M generated tokens each (--ignore-eos), greedy, 2 threads.
# For each dtype: per prompt, how many of the first M tokens agree with f32's before the first
# difference (min / median / max and prompts with all M), and the largest |logit - f32 logit| over
# the positions whose context is still the same (up to and including the first difference).
# Usage: sh bench/kv_agreement.sh [BUILD_DIR] [M]   (after `make build/ex_llama build/model.bin`)
B=${1:-build}; M=${2:-48}
set -- -p "Once upon a time" -p "The little dog ran to the park" \
    -p "In the morning the sun was warm and the birds sang in the tall trees" -p "She said hello" \
    -p "A cat sat on the mat" -p "The king had three sons" \
    -p "Tom and his sister went to the sea to look for shells" -p "It was a cold night"
for dt in f32 f16 bf16 fp8_e4m3 fp8_e5m2 int8 int4; do
    OMP_WAIT_POLICY=passive "$B/ex_llama" "$B/model.bin" -z "$B/tokenizer.bin" -m "$M" \
        --ignore-eos --threads 2 --kv-dtype $dt --dump "$B/agree_$dt.dump" "$@" > /dev/null 2>&1 ||
        { echo "the runner failed with --kv-dtype $dt"; exit 1; }
done
printf '| dtype | tokens agreeing with f32 (of %d): min / median / max ' "$M"
echo "| prompts with all $M | max logit error |"
echo "|---|---|---|---|"
for dt in f16 bf16 fp8_e4m3 fp8_e5m2 int8 int4; do
    # A dump: "samples N vocab V greedy 1", then per sample "sample P I NP NG", its NP + NG
    # tokens, and NG rows of V logits (examples/llama.c --dump); the two are read side by side.
    awk -v M="$M" -v dt="$dt" -v f="$B/agree_f32.dump" -v o="$B/agree_$dt.dump" '
        BEGIN {
            getline a < f; getline < o; split(a, h, " "); n = h[2]; worst = 0; full = 0
            for (s = 0; s < n; s++) {
                getline a < f; getline < o; split(a, h, " "); np = h[4]; ng = h[5]
                getline a < f; getline b < o; split(a, x, " "); split(b, y, " ")
                same = 0; while (same < ng && x[np + same + 1] == y[np + same + 1]) same++
                agree[s] = same; if (same == M) full++
                for (g = 1; g <= ng; g++) {  # logits of the same context: up to the first change
                    getline a < f; getline b < o
                    if (g > same + 1) continue
                    split(a, x, " "); split(b, y, " ")
                    for (v in x) { d = x[v] - y[v]; if (d < 0) d = -d; if (d > worst) worst = d }
                }
            }
            for (i = 0; i < n; i++)  # sort the agreements
                for (j = i + 1; j < n; j++)
                    if (agree[j] < agree[i]) { t = agree[i]; agree[i] = agree[j]; agree[j] = t }
            med = n % 2 ? agree[(n - 1) / 2] : (agree[n / 2 - 1] + agree[n / 2]) / 2
            printf "| %s | %d / %g / %d | %d of %d | %.3g |\n", dt, agree[0], med, agree[n - 1],
                   full, n, worst
        }' < /dev/null
done
