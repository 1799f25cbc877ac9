#!/bin/sh
# The integer caches' speed targets on this machine: attn_bench decode over fp8 e4m3, int8 and
# int4 at G = 1, 4, 8 (--gqa's shapes), R rounds in one process each, medians per row. For each
# shape: the three decode times, int4 / e4m3 and int8 / e4m3 speed (targets 1.6x and 1.0x), each
# integer row's % of its roofline (target 75%) and its decode-hot time (the arithmetic's own:
# where it alone is over the target time, the CPU's ports, not its memory, hold the row).
# Usage: sh bench/kv_int_targets.sh [BUILD_DIR] [THREADS] [ROUNDS]   (after `make bench`)
B=${1:-build}; T=${2:-2}; R=${3:-3}
OUT=${TMPDIR:-/tmp}/kv_int_targets.$$.csv
: > "$OUT"
for _ in $(seq 1 "$R"); do
    "$B/attn_bench" decode --gqa 1,4,8 --kv-dtype fp8_e4m3,int8,int4 -t "$T" -r 5 --hot -o csv \
        >> "$OUT" || { echo "attn_bench failed"; rm -f "$OUT"; exit 1; }
done
# The csv's columns by the names in its header line, and the medians: bench/csv_rows.awk.
awk -F, -f "$(dirname "$0")/csv_rows.awk" -f /dev/stdin "$OUT" <<'AWK'
    $1 == "decode" || $1 == "decode-hot" {
        s = $(col["H"]) "/" $(col["Hk"]) " " $(col["seqs"]) "x" $(col["kv_len"])
        k = $1 "|H" s "|" $(col["kv_dtype"])
        n[k]++; ms[k, n[k]] = $(col["median_ms"]); pct[k, n[k]] = $(col["pct_of_limit"])
        shape[s] = 1
    }
    END {
        print "| shape | e4m3 ms | int8 ms (% roof) [hot] | int4 ms (% roof) [hot] | int8/e4m3 (>= 1.0) | int4/e4m3 (>= 1.6) |"
        print "|---|---|---|---|---|---|"
        for (s in shape) {
            e = "decode|H" s "|fp8_e4m3"; i8 = "decode|H" s "|int8"; i4 = "decode|H" s "|int4"
            if (!n[e] || !n[i8] || !n[i4]) continue
            printf "| H%s | %.1f | %.1f (%.0f%%) [%.1f] | %.1f (%.0f%%) [%.1f] | %.2fx | %.2fx |\n", s,
                med(ms, e), med(ms, i8), med(pct, i8), med(ms, "decode-hot|H" s "|int8"),
                med(ms, i4), med(pct, i4), med(ms, "decode-hot|H" s "|int4"),
                med(ms, e) / med(ms, i8), med(ms, e) / med(ms, i4)
        }
    }
AWK
rm -f "$OUT"
