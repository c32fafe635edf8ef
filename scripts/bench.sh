#!/usr/bin/env bash
# Every benchmark, each beside its reference in the same run. Installs Debian's ucx-utils
# (ucx_perftest, the reference of the SCIF message latency) when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v ucx_perftest >/dev/null; then
    echo "installing ucx-utils (ucx_perftest)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ucx-utils >/dev/null || \
        echo "could not install ucx-utils: the SCIF row against UCX is skipped"
fi
cargo build --release --workspace
REMORA_NODE="${REMORA_NODE:-4}" target/release/remora bench all
