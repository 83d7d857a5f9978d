//! Store interop with Apache RocketMQ 4.9.4, both directions (issue #35, part 1): one broker
//! writes a store through Apache's 4.9.4 Java client, is stopped (SIGTERM, or SIGKILL so that
//! the `abort` file stays), and the other broker opens the same `storePathRootDir` and must serve
//! it as the first one did.
//!
//! What each scenario writes (`InteropDriver.java`, Apache's client): topics `IA` and `IB` of 4
//! queues (sync sends, tags, keys, every 10th message a shared key as well, every 5th user
//! properties), one batch of 10 into `IB` queue 2, `IC`: 70 incompressible 1 MB messages (the
//! CommitLog rolls into its second file), `IR`: 2 messages of which a consumer of `InteropFail`
//! sends one to the group's DLQ and one back for a retry (delay level 1, redelivered into
//! `%RETRY%InteropFail` before the stop), the group `InteropGroup` committed at half of every
//! `IA` queue, and just before the stop one message with delay level 4 (30 s) into `IDelay`,
//! still pending at the switch. What it checks after the switch, through the same client against
//! the other broker:
//! * every message of those topics (retry and DLQ included) as the writer served it (`dump`:
//!   queue offset, offsetMsgId, CommitLog offset, size, flags, times, hosts, body CRC and length,
//!   tags, keys, properties), counted as intact / missing / corrupt (any field differs) / extra:
//!   0 missing, 0 corrupt, 0 extra;
//! * the group's committed offsets, and a push consumer of the group gets exactly the second half;
//! * queries by key find what they found on the writer, searches by store time (each queue's
//!   offset) answer what it answered;
//! * the delayed message is delivered into `IDelay` when due, by the new broker;
//! * `config/*.json` as the new broker left them beside the writer's: each difference is printed
//!   (one line each), the reader's own changes apart from those tolerated; the reader's recovery
//!   log line is printed too (ActorMQ's `store recovered`, Apache's `last shutdown`).
//!
//! Brokers: Apache's from the reference release (`../conformance/brokers.rs`: `Apache`), ActorMQ
//! as its own `actormq broker` process with its embedded name server, both on 127.0.0.1 on free
//! ports, with the same file sizes (`STORE_KEYS`: 64 MiB CommitLog files). A kill scenario runs
//! both brokers in SYNC_FLUSH, so that what a SEND_OK acknowledged is on disk when the kill
//! comes; and it waits until `config/consumerOffset.json` holds the committed offsets and
//! `config/delayOffset.json` the retry's delivery (both brokers persist them on a timer, not per
//! change: without the wait the next broker would, rightly, deliver the retry again). Every
//! process is stopped by its PID when its handle drops, also when a test panics; the tests run
//! one at a time (each runs two to three JVMs; on a 2-core machine two at once would make the
//! delay level's timing a race).
//!
//! Needs Java 17 and the reference release, as the conformance suite. Alone:
//! `cargo test -p actormq --test interop -- --nocapture` (about 100 s).

#[path = "../conformance/brokers.rs"]
mod brokers;
#[path = "../conformance/drivers.rs"]
mod drivers;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use brokers::{Apache, Endpoints, Proc, Stop, STORE_KEYS};
use drivers::LineDriver;

/// One scenario at a time (see the module docs).
static SERIAL: Mutex<()> = Mutex::new(());

const GROUP: &str = "InteropGroup";
/// The group whose consumer sends one `IR` message to its DLQ and one back for a retry.
const FAIL_GROUP: &str = "InteropFail";
/// Every topic whose messages the reader must serve as the writer did.
const TOPICS: &str = "IA,IB,IC,IR,%RETRY%InteropFail,%DLQ%InteropFail";
/// `IC`: this many messages of `BIG_SIZE` bytes (incompressible), so the CommitLog rolls into
/// its second 64 MiB file (a BLANK record ends the first) and both brokers read across the roll.
const BIG_COUNT: usize = 70;
const BIG_SIZE: usize = 1_000_000;
/// Level 4: 30 s, due while the second broker runs. Not level 3 (10 s): the writer's stop (a
/// JVM's shutdown on a loaded 2-core machine) must end before the message is due, or the writer
/// delivers it itself and the switch has nothing pending.
const DELAY_LEVEL: u32 = 4;
const DELAY_KEY: &str = "delayed-key";
/// Key queries compared between the two brokers, with how many messages each finds.
const QUERIES: &[(&str, &str, usize)] = &[
    ("IA", "ia-7", 1),
    ("IA", "ia-shared", 20),
    ("IB", "ib-33", 1),
    ("IB", "ib-shared", 12),
    ("IB", "ibb-4", 1),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Apache,
    ActorMq,
}

/// A broker holding the store: Apache's (with its name server) or an `actormq broker` process.
enum Broker {
    Apache(Apache),
    ActorMq { ends: Endpoints, proc: Proc },
}

impl Broker {
    fn start(side: Side, tools: &Tools, dir: &Path, store: &Path, flush: &str) -> Broker {
        std::fs::create_dir_all(dir).unwrap();
        match side {
            Side::Apache => Broker::Apache(Apache::start_on(
                &tools.reference,
                dir,
                store,
                &[("flushDiskType", flush)],
            )),
            Side::ActorMq => start_actormq(dir, store, flush),
        }
    }

    fn ends(&self) -> &Endpoints {
        match self {
            Broker::Apache(a) => &a.ends,
            Broker::ActorMq { ends, .. } => ends,
        }
    }

    fn stop(&mut self, how: Stop) -> std::process::ExitStatus {
        match self {
            Broker::Apache(a) => a.stop_broker(how),
            Broker::ActorMq { proc, .. } => proc.stop(how, Duration::from_secs(60)),
        }
    }
}

/// `actormq broker` on `store` with its embedded name server, [`STORE_KEYS`] as `ACTORMQ_*`
/// variables; returns once its log says `broker started` (within 60 s).
fn start_actormq(dir: &Path, store: &Path, flush: &str) -> Broker {
    let port = brokers::free_broker_port();
    let ns_port = brokers::free_port();
    let log = dir.join("actormq.log");
    let out = std::fs::File::create(&log).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_actormq"));
    cmd.args([
        "broker",
        "--namesrv-listen",
        &format!("127.0.0.1:{ns_port}"),
    ]);
    // Nothing from the test's own environment may change the broker's configuration.
    for (k, _) in std::env::vars() {
        if k.starts_with("ACTORMQ_") || k == "NAMESRV_ADDR" || k == "NOTIFY_SOCKET" {
            cmd.env_remove(k);
        }
    }
    for (k, v) in STORE_KEYS {
        cmd.env(format!("ACTORMQ_{}", k.to_uppercase()), v);
    }
    cmd.env("ACTORMQ_STOREPATHROOTDIR", store)
        .env("ACTORMQ_LISTENPORT", port.to_string())
        .env("ACTORMQ_METRICSPROMEXPORTERPORT", "0")
        .env("ACTORMQ_FLUSHDISKTYPE", flush)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out);
    // SAFETY: runs in the forked child before exec and only calls prctl(2), which is
    // async-signal-safe: the broker gets SIGKILL if the test thread that started it dies.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let child = cmd.spawn().expect("spawn the actormq binary");
    let mut proc = Proc(child, "ActorMQ broker");
    let start = Instant::now();
    while !read(&log).contains("broker started") {
        if let Ok(Some(st)) = proc.0.try_wait() {
            panic!(
                "ActorMQ exited ({st}) before starting; log:\n{}",
                read(&log)
            );
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "ActorMQ did not start within 60 s; log:\n{}",
            read(&log)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Broker::ActorMq {
        ends: Endpoints {
            namesrv: format!("127.0.0.1:{ns_port}"),
            broker: format!("127.0.0.1:{port}"),
            store_root: store.display().to_string(),
        },
        proc,
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// The reference release and the compiled `InteropDriver`.
struct Tools {
    reference: PathBuf,
    classes: PathBuf,
}

impl Tools {
    fn new(tmp: &Path) -> Tools {
        let reference = brokers::reference_dir();
        let classes = drivers::compile_java(
            &reference,
            "tests/interop/InteropDriver.java",
            &tmp.join("classes"),
        );
        Tools { reference, classes }
    }

    fn driver(&self, ends: &Endpoints, dir: &Path, name: &str) -> Driver {
        let mut d = LineDriver::java_main(
            &self.reference,
            &self.classes,
            "InteropDriver",
            ends,
            &dir.join(format!("{name}-home")),
            &dir.join(format!("{name}-driver.log")),
        );
        let ready = d.step("wait-ready");
        assert_eq!(ready, "ready\n", "{name}: the broker never became ready");
        Driver(d)
    }
}

/// The Java client: each step's output, failing the test on an `error` line.
struct Driver(LineDriver);

impl Driver {
    fn step(&mut self, line: &str) -> String {
        let out = self.0.step(line);
        assert!(
            !out.lines().any(|l| l.starts_with("error ")),
            "`{line}` failed:\n{out}"
        );
        out
    }
}

/// What the writer's broker served before the stop, to be found again on the reader's.
struct Written {
    /// `(topic, queue, offset)` → the message's line.
    messages: BTreeMap<(String, u32, u64), String>,
    /// Per `IA` queue: the group's committed offset.
    committed: BTreeMap<u32, u64>,
    /// The output of each of [`QUERIES`].
    queries: Vec<String>,
    /// `search` steps (queue offsets by store time) and what the writer answered.
    searches: Vec<(String, String)>,
    /// The delayed message's msgId (its UNIQ_KEY).
    delayed_id: String,
}

/// Parses `dump` output: `msg <topic> <queue> <offset> ...` lines, keyed by their position.
fn parse_dump(out: &str) -> BTreeMap<(String, u32, u64), String> {
    let mut m = BTreeMap::new();
    for l in out.lines().filter(|l| l.starts_with("msg ")) {
        let w: Vec<&str> = l.split(' ').collect();
        let key = (
            w[1].to_string(),
            w[2].parse().unwrap(),
            w[3].parse().unwrap(),
        );
        assert!(m.insert(key, l.to_string()).is_none(), "twice: {l}");
    }
    m
}

/// `offset queue=Q committed=C ...` lines.
fn parse_offsets(out: &str) -> BTreeMap<u32, u64> {
    out.lines()
        .filter_map(|l| {
            let q = field(l, "queue=")?.parse().ok()?;
            let c = field(l, "committed=")?.parse().ok()?;
            Some((q, c))
        })
        .collect()
}

fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let at = line.find(name)? + name.len();
    line[at..].split(' ').next()
}

/// The writer's phase: topics, messages, the half commit, what it serves, then the delayed one.
fn write_store(d: &mut Driver, kill: bool, store: &Path) -> Written {
    d.step("create-topic topic=IA queues=4");
    d.step("create-topic topic=IB queues=4");
    d.step("create-topic topic=IC queues=4");
    d.step("create-topic topic=IDelay queues=1");
    d.step("create-topic topic=IR queues=1");
    let out = d.step("write topic=IR n=2 prefix=ir");
    assert_eq!(out.matches(" SEND_OK ").count(), 2, "{out}");
    d.step(&format!("start-fail group={FAIL_GROUP} topic=IR"));
    for (topic, n, prefix, size) in [
        ("IA", 200, "ia", 0),
        ("IB", 120, "ib", 0),
        ("IC", BIG_COUNT, "ic", BIG_SIZE),
    ] {
        let out = d.step(&format!(
            "write topic={topic} n={n} prefix={prefix} size={size}"
        ));
        assert_eq!(out.matches(" SEND_OK ").count(), n, "{out}");
    }
    let out = d.step("batch topic=IB queue=2 n=10 prefix=ibb");
    assert!(out.contains(" SEND_OK "), "{out}");
    let out = d.step("wait-fail");
    assert_eq!(out, "retried ir-1 reconsume=1\n", "the retry came back");
    let out = d.step(&format!("commit-half group={GROUP} topic=IA"));
    assert_eq!(out.lines().count(), 4, "{out}");
    let committed = parse_offsets(&d.step(&format!("offsets group={GROUP} topic=IA")));
    assert_eq!(committed.values().sum::<u64>(), 100, "{committed:?}");
    if kill {
        wait_offsets_persisted(store, &committed);
        // The retry's delivery out of SCHEDULE_TOPIC_XXXX: not yet persisted, the next broker
        // would deliver it again (at least once, on either broker).
        wait_persisted(store, "delayOffset.json", |j| {
            j.get("offsetTable")?.get("1")?.as_u64().filter(|&o| o >= 1)
        });
    }
    let dump = d.step(&format!("dump topics={TOPICS},IDelay"));
    let messages = parse_dump(&dump);
    assert_eq!(
        messages.len(),
        334 + BIG_COUNT,
        "the writer serves 200 + 130 + {BIG_COUNT} + 2 + a retry + a DLQ message:\n{dump}"
    );
    let queries = QUERIES
        .iter()
        .map(|(t, k, n)| {
            let out = d.step(&format!("query topic={t} key={k} expect={n}"));
            assert!(out.starts_with(&format!("query {k} found={n}\n")), "{out}");
            out
        })
        .collect();
    let searches = time_searches(&messages)
        .into_iter()
        .map(|step| {
            let out = d.step(&step);
            (step, out)
        })
        .collect();
    let out = d.step(&format!(
        "delay topic=IDelay level={DELAY_LEVEL} key={DELAY_KEY}"
    ));
    assert!(out.contains(" SEND_OK "), "{out}");
    let delayed_id = field(&out, "msgId=").unwrap().to_string();
    Written {
        messages,
        committed,
        queries,
        searches,
        delayed_id,
    }
}

/// Queue offsets by store time: of `IA` at the store time of its queue 0's message 10 (the
/// first CommitLog file), of `IC` at that of its queue 1's message 16 (the second file).
fn time_searches(messages: &BTreeMap<(String, u32, u64), String>) -> Vec<String> {
    [("IA", 0, 10), ("IC", 1, 16)]
        .iter()
        .map(|(t, q, o)| {
            let line = &messages[&(t.to_string(), *q, *o)];
            let stored = field(line, "stored=").unwrap();
            let ts = stored.split('@').next().unwrap();
            format!("search topic={t} ts={ts}")
        })
        .collect()
}

/// Polls (60 s) until `config/consumerOffset.json` holds the group's committed `IA` offsets.
fn wait_offsets_persisted(store: &Path, committed: &BTreeMap<u32, u64>) {
    wait_persisted(store, "consumerOffset.json", |j| {
        let table = j.get("offsetTable")?.get(format!("IA@{GROUP}"))?;
        let m: BTreeMap<u32, u64> = table
            .as_object()?
            .iter()
            .filter_map(|(q, o)| Some((q.parse().ok()?, o.as_u64()?)))
            .collect();
        (&m == committed).then_some(m)
    });
}

/// Polls (60 s) until `config/<file>` parses and `holds` finds what it wants in it.
fn wait_persisted<T>(store: &Path, file: &str, holds: impl Fn(&serde_json::Value) -> Option<T>) {
    let path = store.join("config").join(file);
    let start = Instant::now();
    loop {
        let text = read(&path);
        if parse_json(&text).as_ref().and_then(&holds).is_some() {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{} never held what the kill must find there; last:\n{text}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// fastjson writes integer keys bare (`{0:25}`); quoted, the text is JSON.
fn parse_json(text: &str) -> Option<serde_json::Value> {
    let quoted = regex::Regex::new(r"([{,])(-?\d+):")
        .unwrap()
        .replace_all(text, "$1\"$2\":");
    serde_json::from_str(&quoted).ok()
}

/// The reader's phase: everything the writer served, the group, the queries, the delayed message.
fn check_store(d: &mut Driver, w: &Written, reader: Side) {
    let got = parse_dump(&d.step(&format!("dump topics={TOPICS}")));
    let (mut present, mut missing, mut corrupt) = (0, 0, 0);
    for (k, line) in &w.messages {
        match got.get(k) {
            Some(l) if l == line => present += 1,
            Some(l) => {
                corrupt += 1;
                eprintln!("corrupt {k:?}:\n  writer: {line}\n  reader: {l}");
            }
            None => {
                missing += 1;
                eprintln!("missing {k:?}: {line}");
            }
        }
    }
    let extra: Vec<_> = got
        .keys()
        .filter(|k| !w.messages.contains_key(*k))
        .collect();
    println!(
        "{reader:?} read back {} messages written: {present} intact, {missing} missing, {corrupt} \
         corrupt, {} extra",
        w.messages.len(),
        extra.len()
    );
    assert_eq!(
        (missing, corrupt, extra.len()),
        (0, 0, 0),
        "extra: {extra:?}"
    );
    let offsets = parse_offsets(&d.step(&format!("offsets group={GROUP} topic=IA")));
    assert_eq!(offsets, w.committed, "the group's committed offsets");
    for ((t, k, n), before) in QUERIES.iter().zip(&w.queries) {
        let out = d.step(&format!("query topic={t} key={k} expect={n}"));
        assert_eq!(&out, before, "query by key {k} on {t}");
    }
    for (step, before) in &w.searches {
        assert_eq!(&d.step(step), before, "`{step}`");
        print!("{before}");
    }
    println!(
        "{reader:?}: {GROUP}'s offsets {offsets:?}, {} key queries and {} searches by time as the \
         writer answered",
        QUERIES.len(),
        w.searches.len()
    );
    let resumed = d.step(&format!("resume group={GROUP} topic=IA expect=100"));
    let got: BTreeSet<(u32, u64)> = resumed
        .lines()
        .filter(|l| l.starts_with("got IA "))
        .map(|l| {
            let w: Vec<&str> = l.split(' ').collect();
            (w[2].parse().unwrap(), w[3].parse().unwrap())
        })
        .collect();
    let want: BTreeSet<(u32, u64)> = w
        .messages
        .keys()
        .filter(|(t, q, o)| t == "IA" && *o >= w.committed[q])
        .map(|(_, q, o)| (*q, *o))
        .collect();
    assert_eq!(want.len(), 100);
    assert_eq!(got, want, "the group resumed elsewhere:\n{resumed}");
    assert!(resumed.starts_with("resume received=100\n"), "{resumed}");
    println!("{reader:?}: {GROUP} resumed at its offsets: the second half, 100 messages");
    let delivered = d.step(&format!("wait-delivered topic=IDelay key={DELAY_KEY}"));
    assert!(delivered.starts_with("msg IDelay 0 0 "), "{delivered}");
    assert!(
        delivered.contains(&format!("UNIQ_KEY={}", w.delayed_id))
            && delivered.contains(&format!("DELAY={DELAY_LEVEL}"))
            && delivered.contains(&format!("crc32={} ", crc32(b"delayed-delayed-key"))),
        "the delayed message as delivered: {delivered}"
    );
    println!("{reader:?}: the delayed message (level {DELAY_LEVEL}) delivered when due");
}

fn crc32(b: &[u8]) -> u32 {
    crc32fast::hash(b)
}

/// `config/*.json` of the store, parsed.
fn config_files(store: &Path) -> BTreeMap<String, serde_json::Value> {
    let mut out = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir(store.join("config")) else {
        return out;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if name.ends_with(".json") {
            let text = std::fs::read_to_string(e.path()).unwrap();
            let v = parse_json(&text).unwrap_or_else(|| panic!("config/{name} is not JSON"));
            out.insert(name, v);
        }
    }
    out
}

/// Every leaf that differs between two JSON values, as `path: a -> b` lines (an entry on one
/// side only is one line).
fn json_diff(
    path: &str,
    a: Option<&serde_json::Value>,
    b: Option<&serde_json::Value>,
) -> Vec<String> {
    use serde_json::Value;
    match (a, b) {
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter()
                .flat_map(|k| json_diff(&format!("{path}.{k}"), x.get(k), y.get(k)))
                .collect()
        }
        (x, y) if x == y => Vec::new(),
        (x, y) => {
            let show = |v: Option<&Value>| v.map_or("(absent)".to_string(), |v| v.to_string());
            vec![format!("{path}: {} -> {}", show(x), show(y))]
        }
    }
}

/// The CommitLog's file names.
fn commit_log_files(store: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(store.join("commitlog"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    names
}

/// What the reader logged about the store it opened: ActorMQ's `store recovered` line (the
/// previous run as it judged it, the recovered end, what it scanned and re-dispatched), Apache's
/// `last shutdown` line of its store log.
fn recovery_line(reader: Side, dir: &Path) -> String {
    let (log, needle) = match reader {
        Side::ActorMq => (dir.join("actormq.log"), "store recovered"),
        Side::Apache => (
            dir.join("home/logs/rocketmqlogs/store.log"),
            "last shutdown",
        ),
    };
    read(&log)
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no `{needle}` line in {}", log.display()))
        .to_string()
}

/// Whether a difference in `config/*.json` is the reader's own doing: its consumers (the
/// group's resumed offsets, retry topics, the groups their heartbeats created), the delayed
/// message it delivered, the version stamps every change bumps.
fn reader_made(path: &str) -> bool {
    path.contains(GROUP)
        || path.contains("%RETRY%")
        || path.contains("InteropReader")
        || path.contains(".dataVersion.")
        || path == format!("config/delayOffset.json.offsetTable.{DELAY_LEVEL}")
}

/// Prints each difference between the writer's `config/*.json` (at its stop) and the reader's
/// (at its stop), one line each: first those the reader's own work explains, then the ones the
/// test tolerates (a field or file one broker writes and the other does not, or writes
/// differently), which both brokers started with and served the store through.
fn print_config_diffs(
    before: &BTreeMap<String, serde_json::Value>,
    after: &BTreeMap<String, serde_json::Value>,
    writer: Side,
    reader: Side,
) {
    let names: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    // A file one side did not write is compared with an empty one: its entries, one line each.
    let empty = serde_json::Value::Object(serde_json::Map::new());
    let diffs: Vec<String> = names
        .into_iter()
        .flat_map(|name| {
            json_diff(
                &format!("config/{name}"),
                Some(before.get(name).unwrap_or(&empty)),
                Some(after.get(name).unwrap_or(&empty)),
            )
        })
        .collect();
    let (made, tolerated): (Vec<_>, Vec<_>) = diffs
        .iter()
        .partition(|d| reader_made(d.split(": ").next().unwrap_or_default()));
    for d in &made {
        println!("changed by the {reader:?} phase: {d}");
    }
    for d in &tolerated {
        println!("tolerated ({writer:?} wrote, {reader:?} rewrote): {d}");
    }
    println!(
        "config/*.json: {} differences from the reader's own work, {} tolerated",
        made.len(),
        tolerated.len()
    );
}

/// The `delayOffset.json` offset of `DELAY_LEVEL` (0 when absent): the delayed message is still
/// pending while it is 0.
fn delay_progress(store: &Path) -> u64 {
    let text = read(&store.join("config/delayOffset.json"));
    parse_json(&text)
        .and_then(|j| j.get("offsetTable")?.get(DELAY_LEVEL.to_string())?.as_u64())
        .unwrap_or(0)
}

/// One scenario: `writer` writes the store, is stopped `how`, `reader` opens and serves it.
fn switch(writer: Side, reader: Side, how: Stop) {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let tools = Tools::new(tmp.path());
    let store = tmp.path().join("store");
    let kill = how == Stop::Kill;
    let flush = if kill { "SYNC_FLUSH" } else { "ASYNC_FLUSH" };
    println!("{writer:?} writes ({flush}), stopped {how:?}; {reader:?} reads");

    let wdir = tmp.path().join("writer");
    let mut w_broker = Broker::start(writer, &tools, &wdir, &store, flush);
    let written = {
        let mut d = tools.driver(w_broker.ends(), &wdir, "writer");
        write_store(&mut d, kill, &store)
    };
    let status = w_broker.stop(how);
    drop(w_broker);
    let abort = store.join("abort").exists();
    println!("{writer:?} stopped ({status}); abort file present: {abort}");
    assert_eq!(abort, kill, "the abort file after a {how:?} stop");
    let files = commit_log_files(&store);
    println!("CommitLog files: {files:?}");
    assert!(files.len() >= 2, "the CommitLog did not roll: {files:?}");
    assert_eq!(
        delay_progress(&store),
        0,
        "the delayed message was delivered before the switch"
    );
    let before = config_files(&store);

    let rdir = tmp.path().join("reader");
    let mut r_broker = Broker::start(reader, &tools, &rdir, &store, flush);
    {
        let mut d = tools.driver(r_broker.ends(), &rdir, "reader");
        check_store(&mut d, &written, reader);
    }
    println!("{reader:?} on opening: {}", recovery_line(reader, &rdir));
    let status = r_broker.stop(Stop::Clean);
    drop(r_broker);
    println!("{reader:?} stopped ({status})");
    print_config_diffs(&before, &config_files(&store), writer, reader);
    println!(
        "{writer:?} -> {reader:?} after {how:?}: passed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn apache_writes_actormq_reads_after_clean_stop() {
    switch(Side::Apache, Side::ActorMq, Stop::Clean);
}

#[test]
fn apache_writes_actormq_reads_after_kill_9() {
    switch(Side::Apache, Side::ActorMq, Stop::Kill);
}

#[test]
fn actormq_writes_apache_reads_after_clean_stop() {
    switch(Side::ActorMq, Side::Apache, Stop::Clean);
}

#[test]
fn actormq_writes_apache_reads_after_kill_9() {
    switch(Side::ActorMq, Side::Apache, Stop::Kill);
}
