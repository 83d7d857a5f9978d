#!/usr/bin/env bash
# Broker CPU per message and msgs/s, Apache RocketMQ 4.9.4 against ActorMQ after (and, optionally,
# before) a change, measured in one run and printed as one table (issue #34).
#
#   cargo build --release -p actormq && tests/bench/compare-apache.sh [rounds]      # rounds: 3
#   AMQ_BEFORE=/path/to/older/actormq tests/bench/compare-apache.sh 3
#   N=20000 WARM=5000 tests/bench/compare-apache.sh 1                                 # a quick check
#
# Brokers, in this order in every round: Apache 4.9.4 (name server and broker JVMs from
# ../shared/reference, or $ACTORMQ_REFERENCE_DIR), ActorMQ "after" ($AMQ, default
# target/release/actormq, its embedded name server) and, when $AMQ_BEFORE names a binary, ActorMQ
# "before". Each is started twice per round, each time on a fresh store under $TMPDIR (default
# /tmp: keep it on the disk the SYNC_FLUSH figures are about):
#   1. flushDiskType=ASYNC_FLUSH (the default). Warm-up: Apache's benchmark Producer -w 64, $WARM
#      messages, then its benchmark Consumer reading them. Then, each load on a new topic, 1 KiB:
#        sync x8      Apache's benchmark Producer (Java client 4.9.4), -w 8 -s 1024 -q $N
#        sync x64     the same, -w 64
#        async x4     `actormq bench produce --mode async --connections 4 --count $N_ASYNC` (window
#                     256; the "after" binary is the client for every broker: 4.9.4 takes its flow)
#        consume      Apache's benchmark Consumer (DefaultMQPushConsumer, 20 consume threads, pulls
#                     32 a time) reading sync x64's topic ($N messages) from offset 0 until it has
#                     consumed $N. The Consumer has no count option and never stops, so a class
#                     this script compiles (CountingConsumer below) calls its unchanged main and
#                     exits once the client's CONSUME_OK_TPS counter of the topic and group reaches $N.
#   2. flushDiskType=SYNC_FLUSH (ActorMQ: ACTORMQ_FLUSHDISKTYPE). Warm-up: Producer -w 64, $WARM
#      messages. Then sync_flush x64: Producer -w 64 -s 1024 -q $N.
# Figures: broker µs/msg is the broker process's utime+stime (/proc/PID/stat; Apache: the broker
# JVM) from the client's first output line (JVM up, before it connects) to its completion line,
# divided by the messages of the load; msgs/s is those messages over the same wall-clock span. For
# async x4 both are `bench produce`'s own (--broker-pid: its sending span). The table gives per load
# and broker the median over rounds of each, each round's raw "msgs/s @ µs/msg", and the ratios of
# the medians' µs/msg after ÷ Apache (and after ÷ before). A load with failed sends is marked.
# Time: one round of three brokers with N=20000 WARM=5000 took 165 s and 186 s here (2 cores shared
# with builds), 123 s and 141 s of it outside the measured loads (broker and JVM starts, warm-ups);
# scaled, a default run (3 rounds, N=100000, N_ASYNC=400000, WARM=20000, three brokers) takes about
# 20 minutes. Bounds: each client is killed after $LOAD_TIMEOUT s (300); no broker session starts
# after $MAX_SECONDS (3600), and the table then covers the rounds every broker finished.
# JAVA_HEAP (run-java.sh's, default 512m) sizes every JVM, the Apache broker's included.
# Everything started is stopped by PID (also on an error or Ctrl-C) and its store deleted. ActorMQ
# listens on 127.0.0.1 only; Apache 4.9.4's broker has no bind address and listens on every
# interface. Ports: APACHE_NS, APACHE_BROKER, AMQ_NS, AMQ_BROKER, AMQ_METRICS; all must be free, and
# so must APACHE_BROKER - 2 (4.9.4's VIP channel), APACHE_BROKER + 1 and AMQ_BROKER + 1 (HA).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
REF=${ACTORMQ_REFERENCE_DIR:-$ROOT/../shared/reference}
[ -x "$REF/run-java.sh" ] || REF=/work/shared/reference
AMQ=${AMQ:-$ROOT/target/release/actormq}
AMQ_BEFORE=${AMQ_BEFORE:-}
ROUNDS=${1:-3}
N=${N:-100000} N_ASYNC=${N_ASYNC:-} WARM=${WARM:-20000}
LOAD_TIMEOUT=${LOAD_TIMEOUT:-300} MAX_SECONDS=${MAX_SECONDS:-3600}
APACHE_NS=${APACHE_NS:-22876} APACHE_BROKER=${APACHE_BROKER:-22911}
AMQ_NS=${AMQ_NS:-21876} AMQ_BROKER=${AMQ_BROKER:-21911} AMQ_METRICS=${AMQ_METRICS:-21557}
TICK=$(getconf CLK_TCK)
[ -x "$AMQ" ] || { echo "build it first: cargo build --release -p actormq (or set AMQ)" >&2; exit 1; }
[ -z "$AMQ_BEFORE" ] || [ -x "$AMQ_BEFORE" ] || { echo "AMQ_BEFORE=$AMQ_BEFORE is not an executable" >&2; exit 1; }
positive() {
  for v in "$@"; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "$v must be a positive integer, not '${!v}'" >&2; exit 1; }
  done
}
positive ROUNDS N WARM LOAD_TIMEOUT MAX_SECONDS APACHE_NS APACHE_BROKER AMQ_NS AMQ_BROKER AMQ_METRICS
N_ASYNC=${N_ASYNC:-$((4 * N))}
positive N_ASYNC
"$ROOT/tests/conformance/setup-java.sh" >/dev/null
BROKERS=(apache after)
[ -n "$AMQ_BEFORE" ] && BROKERS+=(before)

PIDS=() DIRS=()
forget() { # PID: waited for, so never to be signalled again (its number may be reused)
  local p keep=()
  for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
  PIDS=("${keep[@]}")
}
stop_all() { # stops, by PID, everything started and not yet stopped; deletes every temp dir
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  for p in "${DIRS[@]}"; do rm -rf "$p"; done
  PIDS=() DIRS=()
}
KEEP=$(mktemp -d "${TMPDIR:-/tmp}/compare-run.XXXX") # results and the compiled class, for the whole run
RES=$KEEP/results
trap 'stop_all; rm -rf "$KEEP"' EXIT
trap 'exit 130' INT TERM
die() { echo "compare-apache: $*" >&2; exit 1; }

# Broker CPU of PID in clock ticks, utime+stime (fields 14 and 15; counted after the ')' of comm).
# No fork: it is read at the very start and end of each load.
ticks() {
  local s f
  read -r s < "/proc/$1/stat" || die "broker $1 is gone"
  s=${s##*) }
  read -r -a f <<< "$s"
  echo $((f[11] + f[12]))
}
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_port() {
  for _ in $(seq 1 240); do listening "$1" && return 0; sleep 0.5; done
  die "nothing listens on 127.0.0.1:$1"
}
for p in "$APACHE_NS" "$APACHE_BROKER" $((APACHE_BROKER - 2)) $((APACHE_BROKER + 1)) "$AMQ_NS" \
  "$AMQ_BROKER" $((AMQ_BROKER + 1)) "$AMQ_METRICS"; do
  listening "$p" && die "port $p is in use: set APACHE_NS, APACHE_BROKER, AMQ_NS, AMQ_BROKER, AMQ_METRICS"
done
# Sets TMPD to a new temp dir, deleted by stop_all (not a command substitution: DIRS must be
# appended in this shell).
tmp() { TMPD=$(mktemp -d "${TMPDIR:-/tmp}/compare-$1.XXXX"); DIRS+=("$TMPD"); }

# The benchmark Consumer, stopped after a count (see the header). Its group's counter is the one
# ConsumeMessageConcurrentlyService.processConsumeResult adds each consumed message to.
cat > "$KEEP/CountingConsumer.java" <<'EOF'
import java.lang.reflect.Field;
import java.util.Arrays;
import java.util.Map;
import org.apache.rocketmq.client.impl.MQClientManager;
import org.apache.rocketmq.client.impl.factory.MQClientInstance;
import org.apache.rocketmq.client.stat.ConsumerStatsManager;
import org.apache.rocketmq.common.stats.StatsItem;
import org.apache.rocketmq.common.stats.StatsItemSet;

/** args: count topic group [benchmark Consumer args]; exits 0 at count, 1 after 10 s without
 *  progress, 2 if the Consumer does not start. */
public class CountingConsumer {
    public static void main(String[] a) throws Exception {
        long n = Long.parseLong(a[0]);
        String key = a[1] + "@" + a[2];
        try {
            org.apache.rocketmq.example.benchmark.Consumer.main(Arrays.copyOfRange(a, 3, a.length));
        } catch (Throwable e) { // the client's own threads would keep the JVM up
            e.printStackTrace();
            Runtime.getRuntime().halt(2);
        }
        Field factories = MQClientManager.class.getDeclaredField("factoryTable");
        factories.setAccessible(true);
        Field okTps = ConsumerStatsManager.class.getDeclaredField("topicAndGroupConsumeOKTPS");
        okTps.setAccessible(true);
        long last = -1, lastChange = System.nanoTime();
        while (true) {
            long done = 0;
            for (Object c : ((Map<?, ?>) factories.get(MQClientManager.getInstance())).values()) {
                StatsItemSet set = (StatsItemSet) okTps.get(((MQClientInstance) c).getConsumerStatsManager());
                StatsItem item = set.getStatsItem(key);
                if (item != null) done += item.getValue().sum();
            }
            if (done >= n) {
                System.out.printf("[Complete] Consumed: %d%n", done);
                Runtime.getRuntime().halt(0);
            }
            if (done != last) { last = done; lastChange = System.nanoTime(); }
            if (System.nanoTime() - lastChange > 10_000_000_000L) {
                System.out.printf("[Stalled] Consumed: %d of %d%n", done, n);
                Runtime.getRuntime().halt(1);
            }
            Thread.sleep(2);
        }
    }
}
EOF
javac -nowarn -cp "$REF/rocketmq-4.9.4/lib/*" -d "$KEEP" "$KEEP/CountingConsumer.java" ||
  die "CountingConsumer does not compile against $REF/rocketmq-4.9.4/lib"

start_apache() { # flushDiskType
  local s
  tmp apache; s=$TMPD
  printf 'listenPort=%s\n' "$APACHE_NS" > "$s/ns.conf"
  JAVA_HOME_DIR=$s "$REF/run-java.sh" org.apache.rocketmq.namesrv.NamesrvStartup -c "$s/ns.conf" > "$s/ns.log" 2>&1 &
  PIDS+=($!)
  wait_port "$APACHE_NS"
  printf 'brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerId=0\nlistenPort=%s\nnamesrvAddr=127.0.0.1:%s\nbrokerIP1=127.0.0.1\nstorePathRootDir=%s/store\nstorePathCommitLog=%s/store/commitlog\nautoCreateTopicEnable=true\nflushDiskType=%s\n' \
    "$APACHE_BROKER" "$APACHE_NS" "$s" "$s" "$1" > "$s/broker.conf"
  JAVA_HOME_DIR=$s "$REF/run-java.sh" org.apache.rocketmq.broker.BrokerStartup -c "$s/broker.conf" > "$s/broker.log" 2>&1 &
  BPID=$!; PIDS+=($!); NS=127.0.0.1:$APACHE_NS
  # "boot success" comes after its first registration with the name server.
  for _ in $(seq 1 120); do grep -q 'boot success' "$s/broker.log" && return 0; sleep 0.5; done
  tail -5 "$s/broker.log" >&2; die "Apache's broker did not boot"
}
start_actormq() { # binary flushDiskType
  local s
  tmp amq; s=$TMPD
  ACTORMQ_STOREPATHROOTDIR=$s/store ACTORMQ_BROKERIP1=127.0.0.1 ACTORMQ_LISTENPORT=$AMQ_BROKER \
    ACTORMQ_METRICSPROMEXPORTERPORT=$AMQ_METRICS ACTORMQ_FLUSHDISKTYPE=$2 \
    "$1" broker --namesrv-listen "127.0.0.1:$AMQ_NS" > "$s/broker.log" 2>&1 &
  BPID=$!; PIDS+=($!); NS=127.0.0.1:$AMQ_NS
  wait_port "$AMQ_NS"; wait_port "$AMQ_BROKER"; sleep 1
}
start_broker() { # broker flushDiskType
  case $1 in
    apache) start_apache "$2" ;;
    after) start_actormq "$AMQ" "$2" ;;
    before) start_actormq "$AMQ_BEFORE" "$2" ;;
  esac
}

# Runs a client in the background (its PID in PIDS, killed after LOAD_TIMEOUT) and reads its
# output as it comes: the broker's CPU and the clock are sampled when a line starts with the start
# marker and again when one starts with the end marker (then END is that line). Sets SPAN (s) and
# TICKS (broker CPU ticks) between them; OUT is the client's whole output.
timed() { # start-marker end-marker command...
  local start=$1 end=$2 fifo line t0="" c0="" t1="" c1="" cpid
  shift 2
  tmp client; fifo=$TMPD/out; OUT=$TMPD/log; mkfifo "$fifo"
  JAVA_HOME_DIR=$TMPD timeout "$LOAD_TIMEOUT" "$@" > "$fifo" 2>&1 &
  cpid=$!; PIDS+=("$cpid"); END=""
  # read -t: every 5 s without a line the broker is checked (a client of a dead broker can retry
  # for ever); a line cut by the timeout is kept in part.
  local part="" rc
  while :; do
    if IFS= read -r -t 5 line; then
      line=$part$line part=""
    else
      rc=$?
      if [ "$rc" -gt 128 ]; then
        part=$part$line
        kill -0 "$BPID" 2>/dev/null || die "the broker (PID $BPID) stopped during: $*"
        continue
      fi
      line=$part$line part=""
      [ -n "$line" ] || break
    fi
    if [ -z "$t0" ] && [[ $line == "$start"* ]]; then
      t0=$EPOCHREALTIME; c0=$(ticks "$BPID")
    elif [ -n "$t0" ] && [ -z "$END" ] && [[ $line == "$end"* ]]; then
      c1=$(ticks "$BPID"); t1=$EPOCHREALTIME; END=$line
    fi
    printf '%s\n' "$line" >> "$OUT"
  done < "$fifo"
  wait "$cpid" || true
  forget "$cpid"
  kill -0 "$BPID" 2>/dev/null || die "the broker (PID $BPID) stopped during: $*"
  [ -n "$END" ] || { tail -5 "$OUT" >&2; die "no '$end' line from: $*"; }
  SPAN=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')
  TICKS=$((c1 - c0))
}
record() { # load broker round msgs/s µs/msg note
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >> "$RES"
  printf '  round %s %-7s %-15s %8s msgs/s %7s µs/msg %s\n' "$3" "$2" "$1" "$4" "$5" "$6"
}
figures() { # messages -> "msgs/s µs/msg" from SPAN and TICKS
  awk -v m="$1" -v s="$SPAN" -v t="$TICKS" -v hz="$TICK" 'BEGIN { printf "%.0f %.1f", m / s, t * 1e6 / hz / m }'
}
producer() { # topic threads count [load broker round]: the Java benchmark Producer, sync
  local f note=""
  timed "topic:" "[Complete]" "$REF/run-java.sh" org.apache.rocketmq.example.benchmark.Producer \
    -n "$NS" -t "$1" -w "$2" -s 1024 -q "$3"
  # "Send Failed: a Response Failed: b": either non-zero marks the figures, and the topic then
  # holds at most count - a - b messages (a send that timed out may still have been stored), so
  # that is what a consumer of it waits for (STORED).
  f=$(sed -n 's/.*Send Failed: \([0-9]*\) Response Failed: \([0-9]*\).*/\1 \2/p' <<< "$END")
  if [ -n "$f" ]; then STORED=$(( $3 - ${f%% *} - ${f##* } )); else STORED=$3; fi
  [ $# -gt 3 ] || return 0
  [ "$f" = "0 0" ] || note="(send failed, response failed: ${f:-?})"
  read -r rate us <<< "$(figures "$3")"
  record "$4" "$5" "$6" "$rate" "$us" "$note"
}
consumer() { # topic group count [load broker round]
  timed "topic:" "[Complete]" env EXTRA_CP="$KEEP" "$REF/run-java.sh" CountingConsumer "$3" "$1" "$2" \
    -n "$NS" -t "$1" -g "$2"
  [ $# -gt 3 ] || return 0
  read -r rate us <<< "$(figures "$3")"
  record "$4" "$5" "$6" "$rate" "$us" ""
}
async_load() { # topic broker round: bench produce measures itself (--broker-pid)
  local rate us errs
  timed "bench produce:" "errors" "$AMQ" bench produce -n "$NS" --topic "$1" --size 1024 --mode async \
    --connections 4 --count "$N_ASYNC" --broker-pid "$BPID" --quiet
  rate=$(sed -n 's/^rate *: *\([0-9]*\) msgs.*/\1/p' "$OUT")
  us=$(sed -n 's/^broker cpu: \([0-9.]*\) µs.*/\1/p' "$OUT")
  errs=$(sed -n 's/^errors *: *//p' "$OUT")
  [ -n "$rate" ] && [ -n "$us" ] || { cat "$OUT" >&2; die "bench produce printed no rate or broker cpu"; }
  record "async x4" "$2" "$3" "$rate" "$us" "$([ "$errs" = none ] || echo "(errors: $errs)")"
}

session() { # broker round
  local b=$1 r=$2
  start_broker "$b" ASYNC_FLUSH
  local tw=Warm_$RANDOM
  producer "$tw" 64 "$WARM"
  consumer "$tw" warm_consumer "$STORED"
  producer "Sync8_$RANDOM" 8 "$N" "sync x8" "$b" "$r"
  local t64=Sync64_$RANDOM
  producer "$t64" 64 "$N" "sync x64" "$b" "$r"
  local stored=$STORED
  async_load "Async_$RANDOM" "$b" "$r"
  consumer "$t64" cmp_consumer "$stored" consume "$b" "$r"
  stop_all
  start_broker "$b" SYNC_FLUSH
  producer "Warm_$RANDOM" 64 "$WARM"
  producer "SyncFlush_$RANDOM" 64 "$N" "sync_flush x64" "$b" "$r"
  stop_all
}

T_START=$SECONDS
echo "compare-apache: ${BROKERS[*]}; $ROUNDS round(s); N=$N N_ASYNC=$N_ASYNC WARM=$WARM; $(date -u +%FT%TZ)"
echo "  after: $AMQ${AMQ_BEFORE:+; before: $AMQ_BEFORE}; Apache: $REF"
done_rounds=0
for r in $(seq 1 "$ROUNDS"); do
  for b in "${BROKERS[@]}"; do
    if [ $((SECONDS - T_START)) -ge "$MAX_SECONDS" ]; then
      echo "compare-apache: MAX_SECONDS=$MAX_SECONDS reached: round $r is left out" >&2
      break 2
    fi
    session "$b" "$r"
  done
  done_rounds=$r
done
echo "compare-apache: $done_rounds round(s) in $((SECONDS - T_START)) s"
[ "$done_rounds" -gt 0 ] || die "no round finished for every broker: no table"

# The table: per load and broker, the median over rounds (of rounds done by every broker).
awk -F'\t' -v rounds="$done_rounds" -v brokers="${BROKERS[*]}" '
function median(s,   a, n, i, j, t) {
  n = split(s, a, " ")
  for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]; a[j + 1] = t }
  return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
$3 <= rounds {
  k = $1 SUBSEP $2
  rate[k] = rate[k] " " $4; us[k] = us[k] " " $5
  raw[k] = raw[k] sprintf("%s%s @ %s%s", raw[k] == "" ? "" : " · ", $4, $5, $6 == "" ? "" : " " $6)
  if (!($1 in seen)) { seen[$1] = 1; loads[++nl] = $1 }
}
END {
  nb = split(brokers, b, " ")
  printf "\n%-15s %-7s %10s %10s   %s\n", "load", "broker", "msgs/s", "µs/msg", "rounds (msgs/s @ µs/msg)"
  for (i = 1; i <= nl; i++) {
    for (j = 1; j <= nb; j++) {
      k = loads[i] SUBSEP b[j]
      if (!(k in rate)) continue
      m[b[j]] = median(us[k])
      printf "%-15s %-7s %10.0f %10.1f   %s\n", loads[i], b[j], median(rate[k]), m[b[j]], raw[k]
    }
    r = ""
    if (m["apache"] > 0 && m["after"] != "") r = sprintf("after ÷ Apache %.2f×", m["after"] / m["apache"])
    if (m["before"] > 0 && m["after"] != "") r = r sprintf("   after ÷ before %.2f×", m["after"] / m["before"])
    if (r != "") printf "%-15s µs/msg: %s\n", "", r
    delete m
  }
}' "$RES"
