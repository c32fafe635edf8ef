#!/bin/sh
# The long run: every fuzz target (or the ones named), one process at a time, each from its
# committed seeds (seeds/<target>/) and the corpus it grew before (corpus/<target>/, not
# committed). Each runs FUZZ_SECONDS seconds (120 by default) or, with FUZZ_RUNS set, until
# it has executed FUZZ_RUNS inputs (bounded by FUZZ_SECONDS too when that is set). Prints
# each target's executions and time; a crash leaves its input in artifacts/<target>/ and the
# log in logs/<target>.log. On a shared machine: `nice -n 19 ./run.sh`.
set -eu
cd "$(dirname "$0")"
if [ -n "${FUZZ_RUNS:-}" ]; then
    limit="-runs=$FUZZ_RUNS -max_total_time=${FUZZ_SECONDS:-0}"
else
    limit="-max_total_time=${FUZZ_SECONDS:-120}"
fi
targets=${*:-$(ls fuzz_targets | sed 's/\.rs$//')}
cargo +nightly fuzz build
bin=target/$(rustc +nightly -vV | sed -n 's/^host: //p')/release
mkdir -p logs
for t in $targets; do
    mkdir -p "corpus/$t" "artifacts/$t"
    status=ok
    start=$(date +%s)
    # shellcheck disable=SC2086 # $limit is two options
    "$bin/$t" "corpus/$t" "seeds/$t" $limit -max_len=16384 -print_final_stats=1 \
        -artifact_prefix="artifacts/$t/" >"logs/$t.log" 2>&1 || status=CRASH
    secs=$(($(date +%s) - start))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "logs/$t.log")
    echo "$t: ${execs:-?} executions in ${secs}s, $(ls "corpus/$t" | wc -l) corpus entries, $status"
done
