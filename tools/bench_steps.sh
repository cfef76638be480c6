# Sourced by the training benchmarks (tools/bench_pp.sh, tools/bench_cp.sh): `stats` reads minidc
# train's step lines and prints "wall_median_ms virtual_ms_per_step" (steps 2 on: the first warms up).
stats() {
    awk '/^step/ {n++; w[n] = $7; for (i = 1; i <= NF; i++) if ($i == "virtual") v[n] = $(i + 1)}
         END {k = 0; for (i = 2; i <= n; i++) a[++k] = w[i];
              for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) {t = a[i]; a[i] = a[j]; a[j] = t}
              printf "%.1f %.3f", (a[int((k + 1) / 2)] + a[int(k / 2) + 1]) / 2, (v[n] - v[1]) / (n - 1)}'
}
