# attn_bench's csv rows for the bench/*_targets.sh scripts (awk -F, -f bench/csv_rows.awk -f ...):
# col[name] is a column's index by the names in the header line, and med(a, k) the median of
# a[k, 1] .. a[k, n[k]] (the script counts a row key's rounds in n[k]).
$1 == "mode" { for (i = 1; i <= NF; i++) col[$i] = i; next }
function med(a, k,   i, j, t, m, v) {
    m = n[k]; for (i = 1; i <= m; i++) v[i] = a[k, i]
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
}
