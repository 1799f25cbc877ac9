#!/bin/sh
# The shared-prefix decode's targets on this machine (16 sequences x (4,096 shared + 128 own
# tokens), D = 128): attn_bench decode over MHA (H32/Hk32) with f32 and bf16 caches and H32/Hk8
# with bf16, R rounds in one process, medians per row. For each: the decode and decode-shared
# times with their % of the roofline, the speed-up, the possible one (the rooflines' ratio, the
# shared blocks counted once) and its share (target 70%; MHA over f32 also 5x). Then the stacks'
# own arithmetic (decode-shared-hot: every whole partition a stacked pass, read from L2/L3) as a
# share of the FMA peak, and the share of the possible that the stacks at that rate plus the own
# rows at the read bandwidth would allow: where it is under 70%, the arithmetic holds the row.
# Usage: sh bench/shared_prefix_targets.sh [BUILD_DIR] [THREADS] [ROUNDS]   (after `make bench`)
B=${1:-build}; T=${2:-2}; R=${3:-3}
SEQS=16; CTX=4224; PREFIX=4096
OUT=${TMPDIR:-/tmp}/shared_prefix_targets.$$.csv
: > "$OUT"
for _ in $(seq 1 "$R"); do
    for shape in "--hk 32 --kv-dtype f32,bf16" "--hk 8 --kv-dtype bf16"; do
        # shellcheck disable=SC2086
        "$B/attn_bench" decode --seqs $SEQS --ctx $CTX --shared-prefix $PREFIX -H 32 $shape \
            --hot -t "$T" -r 5 -o csv >> "$OUT" || { echo "attn_bench failed"; rm -f "$OUT"; exit 1; }
    done
done
# The csv's columns by the names in its header line, and the medians: bench/csv_rows.awk.
awk -F, -v prefix=$PREFIX -f "$(dirname "$0")/csv_rows.awk" -f /dev/stdin "$OUT" <<'AWK'
    $1 == "decode" || $1 == "decode-shared" || $1 == "decode-shared-hot" {
        s = "H" $(col["H"]) "/" $(col["Hk"]) " " $(col["kv_dtype"])
        k = $1 "|" s
        n[k]++; ms[k, n[k]] = $(col["median_ms"]); pct[k, n[k]] = $(col["pct_of_limit"])
        gbs[k, n[k]] = $(col["value"]); peak[k, n[k]] = $(col["fma_peak_gflops"])
        bw[k, n[k]] = $(col["read_bw_gbs"])
        flops[s] = 4.0 * $(col["H"]) * $(col["D"]) * $(col["seqs"]) * $(col["kv_len"])
        ctx[s] = $(col["kv_len"]); shape[s] = 1
    }
    END {
        print "| shape | decode ms (% roof) | shared ms (% roof) | speed-up | possible | of possible (>= 70%) | stacks: % of FMA peak | at most |"
        print "|---|---|---|---|---|---|---|---|"
        for (s in shape) {
            u = "decode|" s; sh = "decode-shared|" s; h = "decode-shared-hot|" s
            if (!n[u] || !n[sh] || !n[h]) continue
            mu = med(ms, u); msh = med(ms, sh); mh = med(ms, h); pu = med(pct, u); ps = med(pct, sh)
            possible = (pu * mu) / (ps * msh)
            # the least a step takes: its shared part at the stacks' rate (decode-shared-hot
            # stacks every whole partition), its own rows (the decode row's bytes) at the bandwidth
            own = med(gbs, u) * mu * 1e-3 * (ctx[s] - prefix) / ctx[s]  # GB
            least = mh * prefix / ctx[s] + own / med(bw, u) * 1e3       # ms
            printf "| %s | %.1f (%.0f%%) | %.2f (%.0f%%) | %.1fx | %.1fx | %.0f%% | %.0f%% | %.0f%% |\n", s,
                mu, pu, msh, ps, mu / msh, possible, 100 * ps / pu,
                100 * flops[s] / (mh * 1e6) / med(peak, h), 100 * mu / least / possible
        }
    }
AWK
rm -f "$OUT"
