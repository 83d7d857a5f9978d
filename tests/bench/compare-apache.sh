#!/usr/bin/env bash
# Broker CPU per message, Apache RocketMQ 4.9.4 against ActorMQ, measured in one run (issue #34).
#
#   cargo build --release -p actormq && tests/bench/compare-apache.sh [rounds]
#
# Each round starts Apache's name server and broker (../shared/reference, or
# $ACTORMQ_REFERENCE_DIR), then ActorMQ (target/release/actormq, embedded name server), each on a
# fresh temp store, and drives each with the same two loads, 1 KiB messages:
#   * Apache's benchmark Producer (the Java client 4.9.4), sync, 64 threads (-w 64), N messages
#     (N=120000; 30,000 first as a warm-up, not counted);
#   * `actormq bench produce --mode sync --connections 8 --duration 10`.
# The broker's CPU is utime+stime of its process from /proc/PID/stat before and after each load
# (for the second load `bench produce` reads it itself: --broker-pid, or ActorMQ's /metrics).
# Everything started is stopped by PID and its store deleted (CommitLog files are 1 GiB).
# ActorMQ listens on 127.0.0.1 only; Apache 4.9.4's broker has no bind address and listens on
# every interface (ports APACHE_NS/APACHE_BROKER below). The machine is shared: quote medians.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
REF=${ACTORMQ_REFERENCE_DIR:-$ROOT/../shared/reference}
[ -x "$REF/run-java.sh" ] || REF=/work/shared/reference
AMQ=$ROOT/target/release/actormq
ROUNDS=${1:-2}
N=${N:-120000}
APACHE_NS=${APACHE_NS:-22876} APACHE_BROKER=${APACHE_BROKER:-22911}
AMQ_NS=${AMQ_NS:-21876} AMQ_BROKER=${AMQ_BROKER:-21911} AMQ_METRICS=${AMQ_METRICS:-21557}
TICK=$(getconf CLK_TCK)
[ -x "$AMQ" ] || { echo "build it first: cargo build --release -p actormq" >&2; exit 1; }
"$ROOT/tests/conformance/setup-java.sh" >/dev/null

PIDS=() DIRS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  for d in "${DIRS[@]}"; do rm -rf "$d"; done
  PIDS=() DIRS=()
}
trap cleanup EXIT

cpu() { # utime+stime of PID in seconds (fields 14 and 15, counted after the ')' of comm)
  awk -v t="$TICK" '{ s = $0; sub(/.*\) /, "", s); split(s, f, " "); printf "%.3f", (f[12] + f[13]) / t }' "/proc/$1/stat"
}
wait_port() {
  for _ in $(seq 1 240); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.5; done
  echo "nothing listens on 127.0.0.1:$1" >&2; return 1
}
# Sets TMPD to a new temp dir, deleted by cleanup (not a command substitution: DIRS must be
# appended in this shell).
tmp() { TMPD=$(mktemp -d "/tmp/compare-$1.XXXX"); DIRS+=("$TMPD"); }

start_apache() {
  local s h; tmp rmq; s=$TMPD; tmp home; h=$TMPD
  printf 'listenPort=%s\n' "$APACHE_NS" > "$s/ns.conf"
  JAVA_HOME_DIR=$h "$REF/run-java.sh" org.apache.rocketmq.namesrv.NamesrvStartup -c "$s/ns.conf" > "$s/ns.log" 2>&1 &
  PIDS+=($!)
  wait_port "$APACHE_NS"
  printf 'brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerId=0\nlistenPort=%s\nnamesrvAddr=127.0.0.1:%s\nbrokerIP1=127.0.0.1\nstorePathRootDir=%s/store\nstorePathCommitLog=%s/store/commitlog\nautoCreateTopicEnable=true\n' \
    "$APACHE_BROKER" "$APACHE_NS" "$s" "$s" > "$s/broker.conf"
  JAVA_HOME_DIR=$h "$REF/run-java.sh" org.apache.rocketmq.broker.BrokerStartup -c "$s/broker.conf" > "$s/broker.log" 2>&1 &
  BPID=$!; PIDS+=($!); NS=127.0.0.1:$APACHE_NS
  wait_port "$APACHE_BROKER"; sleep 5 # registered with the name server
}
start_actormq() {
  local s; tmp amq; s=$TMPD
  ACTORMQ_STOREPATHROOTDIR=$s ACTORMQ_BROKERIP1=127.0.0.1 ACTORMQ_LISTENPORT=$AMQ_BROKER \
    ACTORMQ_METRICSPROMEXPORTERPORT=$AMQ_METRICS "$AMQ" broker --namesrv-listen "127.0.0.1:$AMQ_NS" > "$s.log" 2>&1 &
  BPID=$!; PIDS+=($!); DIRS+=("$s.log"); NS=127.0.0.1:$AMQ_NS
  wait_port "$AMQ_BROKER"; sleep 2
}
java_producer() { # topic count home -> the [Complete] line
  JAVA_HOME_DIR=$3 "$REF/run-java.sh" org.apache.rocketmq.example.benchmark.Producer -n "$NS" -t "$1" -w 64 -s 1024 -q "$2" 2>&1 |
    grep '\[Complete\] Send Total' | tail -1
}
measure() { # name
  local c0 c1 line tps h
  tmp cli; h=$TMPD
  java_producer "Warm$RANDOM" 30000 "$h" > /dev/null
  c0=$(cpu "$BPID"); line=$(java_producer "Cmp$RANDOM" "$N" "$h"); c1=$(cpu "$BPID")
  tps=$(sed -n 's/.*Send TPS: \([0-9]*\).*/\1/p' <<< "$line")
  printf '%-8s java Producer sync -w 64: %6s msgs/s  broker %5.1f µs/msg\n' "$1" "$tps" \
    "$(echo "($c1 - $c0) * 1000000 / $N" | bc -l)"
  local pid=() rate cpu_line
  [ "$1" = apache ] && pid=(--broker-pid "$BPID")
  out=$("$AMQ" bench produce -n "$NS" --topic "Own$RANDOM" --size 1024 --mode sync --connections 8 --duration 10 "${pid[@]}" 2>&1)
  rate=$(sed -n 's/^rate *: *\([0-9]*\) msgs.*/\1/p' <<< "$out")
  cpu_line=$(sed -n 's/^broker cpu: \([0-9.]*\) µs.*/\1/p' <<< "$out")
  printf '%-8s bench produce sync x8:     %6s msgs/s  broker %5s µs/msg\n' "$1" "$rate" "$cpu_line"
}

for r in $(seq 1 "$ROUNDS"); do
  echo "round $r"
  start_apache; measure apache; cleanup
  start_actormq; measure actormq; cleanup
done
