#!/usr/bin/env bash
# A multi-host Remora test cluster on one machine: every host is a network namespace with its
# own `remorad`, and all hosts are joined by a Linux bridge that lives in a namespace of its
# own, so the root namespace gets no interfaces, addresses or routes.
#
#   scripts/cluster.sh up N [--base DIR]    # N hosts remora-h1..remora-hN, switch remora-sw
#   scripts/cluster.sh status [--base DIR]
#   scripts/cluster.sh down [--base DIR]    # idempotent
#
# Host K has eth0 = 10.77.0.K/24 and plays node 4*K (TCP port 7400); its daemon uses the
# runtime directory DIR/hK and logs to DIR/hK.log. DIR (default /tmp/remora-cluster) also
# holds cluster.toml (with a fresh random secret) and pids. The daemon is $REMORA_DAEMON, else
# target/release/remorad, else target/debug/remorad (the newer of the two if both exist), else
# remorad on PATH. Needs root and iproute2.
set -Eeuo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
base=/tmp/remora-cluster
switch_ns=remora-sw
port=7400

die() {
    echo "cluster.sh: $*" >&2
    exit 1
}

usage() {
    sed -n 's/^#   \(scripts\/cluster.sh .*\)/  \1/p' "$0" >&2
    exit 2
}

find_ip() {
    local c
    for c in "$(command -v ip 2>/dev/null || true)" /usr/sbin/ip /sbin/ip /usr/bin/ip /bin/ip; do
        if [[ -n "$c" && -x "$c" ]]; then
            IP="$c"
            return
        fi
    done
    die "the iproute2 'ip' command is not installed (apt-get install iproute2)"
}

need_root() {
    [[ "$(id -u)" == 0 ]] || die "must run as root (network namespaces need CAP_NET_ADMIN); try: sudo $0 $*"
}

find_daemon() {
    if [[ -n "${REMORA_DAEMON:-}" ]]; then
        [[ -x "$REMORA_DAEMON" ]] || die "REMORA_DAEMON=$REMORA_DAEMON is not an executable"
        DAEMON="$REMORA_DAEMON"
    elif [[ -x "$repo/target/release/remorad" && ! "$repo/target/debug/remorad" -nt "$repo/target/release/remorad" ]]; then
        DAEMON="$repo/target/release/remorad"
    elif [[ -x "$repo/target/debug/remorad" ]]; then
        DAEMON="$repo/target/debug/remorad"
    elif command -v remorad >/dev/null 2>&1; then
        DAEMON="$(command -v remorad)"
    else
        die "no remorad: build it (cargo build -p remora-node) or set REMORA_DAEMON"
    fi
    { "$DAEMON" --help 2>/dev/null || true; } | grep -q -- --cluster ||
        die "$DAEMON is too old (no --cluster option): rebuild it (cargo build -p remora-node)"
}

# Our namespaces, whatever the pids file says: remora-sw and remora-h<digits>.
our_namespaces() {
    "$IP" netns list 2>/dev/null | awk '{print $1}' | grep -E '^remora-(sw|h[0-9]+)$' || true
}

# Is $1 a live remorad (guards against a recycled pid)?
is_remorad() {
    [[ -r "/proc/$1/comm" && "$(cat "/proc/$1/comm" 2>/dev/null)" == remorad ]]
}

# Stop the given pids: SIGTERM, up to 3 s grace, then SIGKILL.
stop_pids() {
    local pid i alive
    (($# > 0)) || return 0
    kill -TERM "$@" 2>/dev/null || true
    for i in $(seq 30); do
        alive=0
        for pid in "$@"; do
            [[ -d "/proc/$pid" ]] && alive=1
        done
        ((alive)) || return 0
        sleep 0.1
    done
    kill -KILL "$@" 2>/dev/null || true
}

cmd_down() {
    local pids=() k pid ns
    if [[ -f "$base/pids" ]]; then
        while read -r k pid; do
            [[ -n "${pid:-}" ]] && is_remorad "$pid" && pids+=("$pid")
        done <"$base/pids"
    fi
    stop_pids "${pids[@]}"
    rm -f "$base/pids"
    for ns in $(our_namespaces); do
        # Anything still running inside one of our namespaces (a daemon from another base
        # directory, a program started there by hand) would keep it alive after deletion.
        pids=()
        for pid in $("$IP" netns pids "$ns" 2>/dev/null); do pids+=("$pid"); done
        stop_pids "${pids[@]}"
        "$IP" netns delete "$ns" 2>/dev/null || true
    done
    echo "cluster down (logs kept in $base)"
}

cmd_status() {
    local nss k pid ns node sock state
    nss="$(our_namespaces)"
    if [[ -z "$nss" ]]; then
        echo "no cluster namespaces"
    else
        echo "namespaces:"
        for ns in $(echo "$nss" | sort -V); do
            if [[ "$ns" == "$switch_ns" ]]; then
                printf '  %-12s %s\n' "$ns" "bridge br0"
            else
                printf '  %-12s %s\n' "$ns" \
                    "eth0 $("$IP" -n "$ns" -4 -o addr show dev eth0 2>/dev/null | awk '{print $4}' || true)"
            fi
        done
    fi
    [[ -f "$base/pids" ]] || {
        echo "no daemons recorded in $base/pids"
        return 0
    }
    echo "daemons ($base):"
    while read -r k pid; do
        [[ -n "${pid:-}" ]] || continue
        node=$((4 * k))
        sock="$base/h$k/node-$node.sock"
        if is_remorad "$pid"; then state=running; else state=dead; fi
        printf '  host %-3s node %-4s pid %-8s %-8s %s\n' "$k" "$node" "$pid" "$state" \
            "$([[ -S "$sock" ]] && echo "$sock" || echo "(no socket)")"
    done <"$base/pids"
}

cmd_up() {
    local n="$1" k ns node secret pid i
    [[ "$n" =~ ^[0-9]+$ ]] && ((n >= 1 && n <= 250)) || die "up: N must be 1..250, not '$n'"
    [[ -z "$(our_namespaces)" ]] || die "a cluster is already up ($(our_namespaces | tr '\n' ' ')); run: $0 down"
    find_daemon
    mkdir -p "$base"
    rm -f "$base/pids"
    # Any failure while building the network: take down what exists so far.
    trap 'trap - ERR; echo "cluster.sh: set-up failed; cleaning up" >&2; cmd_down >/dev/null; exit 1' ERR

    # The switch: a bridge in a namespace of its own.
    "$IP" netns add "$switch_ns"
    "$IP" -n "$switch_ns" link set lo up
    "$IP" -n "$switch_ns" link add br0 type bridge
    "$IP" -n "$switch_ns" link set br0 up

    # The hosts: the veth pair is created directly in the two namespaces, so no interface
    # ever appears in the root namespace.
    for k in $(seq "$n"); do
        ns="remora-h$k"
        "$IP" netns add "$ns"
        "$IP" -n "$ns" link set lo up
        "$IP" link add eth0 netns "$ns" type veth peer name "h$k" netns "$switch_ns"
        "$IP" -n "$switch_ns" link set "h$k" master br0 up
        "$IP" -n "$ns" addr add "10.77.0.$k/24" dev eth0
        "$IP" -n "$ns" link set eth0 up
    done

    secret="$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"
    {
        echo "# written by scripts/cluster.sh up $n"
        echo "secret = \"$secret\""
        echo "heartbeat_ms = 200"
        for k in $(seq "$n"); do
            printf '\n[[node]]\nid = %d\nhost = "10.77.0.%d"\nport = %d\n' $((4 * k)) "$k" "$port"
        done
    } >"$base/cluster.toml"
    chmod 600 "$base/cluster.toml"
    trap - ERR

    for k in $(seq "$n"); do
        ns="remora-h$k"
        node=$((4 * k))
        rm -rf "$base/h$k"
        mkdir -m 700 "$base/h$k"
        # `ip netns exec` and setsid both exec, so $! is the daemon itself. REMORA_LOG (if
        # set) passes through; NO_COLOR keeps the log free of escape codes.
        NO_COLOR=1 setsid "$IP" netns exec "$ns" "$DAEMON" --node "$node" --runtime-dir "$base/h$k" \
            --cluster "$base/cluster.toml" </dev/null >"$base/h$k.log" 2>&1 &
        echo "$k $!" >>"$base/pids"
    done

    while read -r k pid; do
        node=$((4 * k))
        for i in $(seq 200); do
            [[ -S "$base/h$k/node-$node.sock" ]] && break
            if ! [[ -d "/proc/$pid" ]]; then
                echo "cluster.sh: the daemon of host $k (node $node) exited; $base/h$k.log:" >&2
                tail -n 20 "$base/h$k.log" >&2 || true
                cmd_down >/dev/null
                exit 1
            fi
            sleep 0.05
        done
        [[ -S "$base/h$k/node-$node.sock" ]] || {
            echo "cluster.sh: no socket from host $k (node $node) after 10 s; $base/h$k.log:" >&2
            tail -n 20 "$base/h$k.log" >&2 || true
            cmd_down >/dev/null
            exit 1
        }
    done <"$base/pids"

    echo "cluster up: $n hosts, daemon $DAEMON, cluster file $base/cluster.toml"
    for k in $(seq "$n"); do
        echo "  host $k: namespace remora-h$k, 10.77.0.$k, node $((4 * k)), log $base/h$k.log"
    done
    cat <<EOF
Run a program on host K (here K=1, node 4):
  ip netns exec remora-h1 env REMORA_RUNTIME_DIR=$base/h1 REMORA_NODE=4 \\
      REMORA_CLUSTER=$base/cluster.toml REMORA_NO_SPAWN=1 ./prog
Stop everything: $0 down${base_arg}
EOF
}

[[ $# -ge 1 ]] || usage
cmd="$1"
shift
n=""
base_arg=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --base)
            [[ $# -ge 2 ]] || die "--base needs a directory"
            base="$2"
            base_arg=" --base $2"
            shift 2
            ;;
        --base=*)
            base="${1#--base=}"
            base_arg=" --base $base"
            shift
            ;;
        -h | --help) usage ;;
        *)
            [[ "$cmd" == up && -z "$n" ]] || die "unexpected argument '$1'"
            n="$1"
            shift
            ;;
    esac
done
[[ "$base" == /* ]] || base="$PWD/$base"

case "$cmd" in
    up)
        [[ -n "$n" ]] || die "up: how many hosts? (up N)"
        need_root up "$n"
        find_ip
        cmd_up "$n"
        ;;
    down)
        need_root down
        find_ip
        cmd_down
        ;;
    status)
        find_ip
        cmd_status
        ;;
    *) usage ;;
esac
