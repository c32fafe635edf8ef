#!/usr/bin/env bash
# check-consts.sh - verify that capi/sisci/src/consts/ matches the C headers.
#
# Builds tests/c/consts_check.c against include/ (it prints "NAME 0x<hex>"
# for every numeric constant), extracts the "pub const NAME: u32 = <literal>;"
# items from consts/*.rs in the same format, and diffs the two lists.
# Exits non-zero on any difference, including names present on one side only.
#
# Usage: scripts/check-consts.sh        (from anywhere; CC overrides the compiler)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cc="${CC:-cc}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# C side: compile and run the printer.
"$cc" -std=c99 -Wall -Wextra -Werror -I "$root/include" \
    "$root/tests/c/consts_check.c" -o "$tmp/consts_check"
"$tmp/consts_check" | LC_ALL=C sort > "$tmp/c.txt"

# Rust side: every top-level "pub const NAME: u32 = LITERAL;" line.
sed -n 's/^pub const \([A-Za-z0-9_]*\): u32 = \([0-9a-fA-Fx_]*\);$/\1 \2/p' \
    "$root"/capi/sisci/src/consts/*.rs |
while read -r name value; do
    value="${value//_/}"             # drop digit separators
    printf '%s 0x%x\n' "$name" "$((value))"
done | LC_ALL=C sort > "$tmp/rust.txt"

if diff -u --label "C headers" --label "consts.rs" "$tmp/c.txt" "$tmp/rust.txt"; then
    echo "check-consts: $(wc -l < "$tmp/c.txt") constants match"
else
    echo "check-consts: C headers and consts.rs disagree (see diff above)" >&2
    exit 1
fi
