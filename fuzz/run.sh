#!/bin/sh
# The long run: every fuzz target (or the ones named) for FUZZ_SECONDS seconds each (120 by
# default), one process at a time, each from its committed seeds (seeds/<target>/) and the
# corpus it grew before (corpus/<target>/, not committed). Prints each target's executions;
# a crash leaves its input in artifacts/<target>/ and the log in logs/<target>.log.
set -eu
cd "$(dirname "$0")"
secs=${FUZZ_SECONDS:-120}
targets=${*:-$(ls fuzz_targets | sed 's/\.rs$//')}
cargo +nightly fuzz build
bin=target/$(rustc +nightly -vV | sed -n 's/^host: //p')/release
mkdir -p logs
for t in $targets; do
    mkdir -p "corpus/$t" "artifacts/$t"
    status=ok
    "$bin/$t" "corpus/$t" "seeds/$t" -max_total_time="$secs" -max_len=16384 -print_final_stats=1 \
        -artifact_prefix="artifacts/$t/" >"logs/$t.log" 2>&1 || status=CRASH
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "logs/$t.log")
    echo "$t: ${execs:-?} executions in ${secs}s, $(ls "corpus/$t" | wc -l) corpus entries, $status"
done
