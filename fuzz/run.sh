#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 20), starting from its seeds, and prints
# each target's executions and coverage. A crash stops the run with the failing input under
# fuzz/artifacts/<target>/; copy it to fuzz/regressions/<target>/ once fixed.
#   fuzz/run.sh [SECONDS] [TARGET…]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-20}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo +nightly fuzz list)
fi
cargo +nightly fuzz build -O >/dev/null
for t in "${targets[@]}"; do
    mkdir -p "fuzz/corpus/$t"
    log="fuzz/target/fuzz-$t.log"
    if ! cargo +nightly fuzz run -O "$t" "fuzz/corpus/$t" "fuzz/seeds/$t" -- \
        -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        >"$log" 2>&1; then
        echo "fuzz target $t FAILED; see $log and fuzz/artifacts/$t/" >&2
        tail -40 "$log" >&2
        exit 1
    fi
    runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo '?')
    cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 || echo 'cov: ?')
    corpus=$(find "fuzz/corpus/$t" -type f | wc -l)
    printf '%-16s %10s execs in %ss  %s  corpus %s\n' "$t" "$runs" "$secs" "$cov" "$corpus"
done
