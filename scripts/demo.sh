#!/usr/bin/env bash
# The main job on a fresh machine, with zero set-up: build, install into ./target/prefix,
# run the SISCI, SCIF and RSM hello-world pairs as two nodes of this host (each program starts its own
# node daemon), then a short benchmark across the two nodes.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cc >/dev/null || { echo "installing gcc"; apt-get update -qq && apt-get install -y -qq gcc make; }
cargo build --release --workspace
prefix="${PREFIX:-$PWD/target/prefix}"
target/release/remora install --prefix "$prefix"
make -s -C examples PREFIX="$prefix"
# Run "$2" as node 4 in the background and "$3" as node 8, and wait for both.
pair() {
    echo "--- $1"
    REMORA_NODE=4 $2 &
    local first=$!
    REMORA_NODE=8 $3
    wait "$first"
}
pair "hello world: receiver on node 4, sender on node 8" examples/hello_receiver "examples/hello_sender 4"
pair "DMA: the receiver's segment is written by node 8's DMA engine" examples/dma_receiver "examples/dma_sender 4"
pair "interrupts: node 8 triggers interrupt 12345 of node 4" examples/intr_receiver "examples/intr_sender 4"
pair "SCIF: server on node 4, client on node 8 (a message, then an RMA and a fence signal)" \
    "examples/scif_hello server 2050" "examples/scif_hello client 4 2050"
pair "RSM: node 4 exports a page of its own memory, node 8 puts into it and maps it" \
    "examples/rsm_hello export" "examples/rsm_hello import 4"
echo "--- benchmarks (node 4 and node 8 of this host)"
"$prefix/bin/remora" bench pio --rounds 9
"$prefix/bin/remora" bench memcpy --reps 5
"$prefix/bin/remora" bench connect --samples 200
"$prefix/bin/remora" bench intr --rounds 5
"$prefix/bin/remora" bench dma --reps 3
"$prefix/bin/remora" bench dsm
command -v ucx_perftest >/dev/null || \
    { apt-get install -y -qq ucx-utils >/dev/null 2>&1 || echo "(no ucx-utils: the UCX reference is skipped)"; }
"$prefix/bin/remora" bench scif --rounds 5
"$prefix/bin/remora" bench rsm --rounds 5 --reps 9
"$prefix/bin/remora" status
