//! The two brokers under comparison, started the same way for every driver: Apache RocketMQ
//! 4.9.4 (a name server and a broker JVM from the reference release) and ActorMQ (the in-process
//! test broker with its embedded name server). Both get the same store geometry, so offsets and
//! file-size-dependent answers can be compared. Every process started here is stopped by its PID
//! when its handle drops, also when a test panics. The interop suite (`tests/interop`) includes
//! this file too: it starts Apache's broker on a store of its choosing ([`Apache::start_on`]) and
//! stops it cleanly or with SIGKILL ([`Apache::stop_broker`]). Each of the two binaries uses a
//! part of this file, hence the `dead_code` allowance.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use actormq::broker::testing::TestBroker;

/// The store geometry both brokers get (RocketMQ key names; ActorMQ's test broker uses the same).
pub const STORE_KEYS: &[(&str, &str)] = &[
    ("mappedFileSizeCommitLog", "67108864"),
    ("mappedFileSizeConsumeQueue", "600000"),
    ("maxHashSlotNum", "50000"),
    ("maxIndexNum", "200000"),
    ("brokerClusterName", "DefaultCluster"),
    ("brokerName", "broker-a"),
    ("autoCreateTopicEnable", "true"),
    ("brokerIP1", "127.0.0.1"),
];

/// Where Apache RocketMQ 4.9.4 is: `$ACTORMQ_REFERENCE_DIR` (the `reference/` folder holding
/// `run-java.sh`), else `../shared/reference` beside the repository, else `/work/shared/reference`.
pub fn reference_dir() -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let candidates: Vec<PathBuf> = std::env::var_os("ACTORMQ_REFERENCE_DIR")
        .map(PathBuf::from)
        .into_iter()
        .chain([
            repo.join("../shared/reference"),
            PathBuf::from("/work/shared/reference"),
        ])
        .collect();
    for c in &candidates {
        if c.join("run-java.sh").is_file() {
            return c.canonicalize().unwrap_or_else(|_| c.clone());
        }
    }
    panic!(
        "the conformance suite needs Apache RocketMQ 4.9.4 (the reference: run-java.sh, \
         rocketmq-4.9.4/), Java 17 and Debian's libnetty-java; looked in {candidates:?}; set \
         ACTORMQ_REFERENCE_DIR (run-java.sh reads ROCKETMQ_REFERENCE_HOME as the rocketmq-4.9.4 folder itself)"
    )
}

/// Addresses a driver talks to.
#[derive(Clone, Debug)]
pub struct Endpoints {
    pub namesrv: String,
    pub broker: String,
    /// Paths printed by tools that differ only by where the test put the store.
    pub store_root: String,
}

/// A child process killed (SIGKILL, by PID) and reaped when dropped.
pub struct Proc(pub Child, pub &'static str);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// How a broker process is stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// SIGTERM, then wait for the process to exit: Apache's shutdown hook (or ActorMQ's signal
    /// handler) flushes, writes the checkpoint and removes the `abort` file.
    Clean,
    /// SIGKILL: nothing runs, the `abort` file stays.
    Kill,
}

impl Proc {
    /// Stops the process as `how` says and waits (at most `limit`) until it has exited.
    pub fn stop(&mut self, how: Stop, limit: Duration) -> std::process::ExitStatus {
        let pid = self.0.id() as i32;
        let sig = match how {
            Stop::Clean => libc::SIGTERM,
            Stop::Kill => libc::SIGKILL,
        };
        // SAFETY: kill(2) on the PID of our own child, which is not reaped yet (only `wait`
        // below and `Drop` reap it), so the PID cannot name another process.
        let rc = unsafe { libc::kill(pid, sig) };
        assert_eq!(rc, 0, "kill({pid}, {sig}) of the {}", self.1);
        let start = Instant::now();
        loop {
            if let Some(status) = self.0.try_wait().expect("wait for a child") {
                return status;
            }
            assert!(
                start.elapsed() < limit,
                "the {} (PID {pid}) did not exit within {limit:?} of {how:?}",
                self.1
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A port that is free now, with `port - 2` (the broker's VIP channel) and `port + 1` (its HA
/// port) free as well.
pub fn free_broker_port() -> u16 {
    for _ in 0..200 {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
        let p = l.local_addr().unwrap().port();
        if !(1030..=65000).contains(&p) {
            continue;
        }
        let side: Vec<_> = [p - 2, p + 1]
            .iter()
            .filter_map(|q| TcpListener::bind(("127.0.0.1", *q)).ok())
            .collect();
        if side.len() == 2 {
            return p;
        }
    }
    panic!("no free port triple (p-2, p, p+1) found on 127.0.0.1");
}

pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    l.local_addr().unwrap().port()
}

/// Waits until `addr` accepts TCP connections or the child has exited.
pub fn wait_listening(addr: &str, child: &mut Proc, log: &Path, limit: Duration) {
    let start = Instant::now();
    while start.elapsed() < limit {
        if std::net::TcpStream::connect(addr).is_ok() {
            return;
        }
        if let Ok(Some(status)) = child.0.try_wait() {
            panic!(
                "{} exited ({status}) before listening on {addr}; log {}:\n{}",
                child.1,
                log.display(),
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{} did not listen on {addr} within {limit:?}", child.1);
}

/// Apache RocketMQ 4.9.4: a name server and one broker, each its own JVM.
pub struct Apache {
    pub ends: Endpoints,
    // Dropped broker first, then the name server.
    broker: Proc,
    _namesrv: Proc,
}

impl Apache {
    pub fn start(reference: &Path, dir: &Path) -> Apache {
        Apache::start_on(reference, dir, &dir.join("store"), &[])
    }

    /// Apache's name server and broker with their files under `dir`, the broker's store at
    /// `store` (`storePathRootDir`), [`STORE_KEYS`] and then `extra` in its `broker.conf`.
    pub fn start_on(reference: &Path, dir: &Path, store: &Path, extra: &[(&str, &str)]) -> Apache {
        let ns_port = free_port();
        let port = free_broker_port();
        let home = dir.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let ns_conf = dir.join("namesrv.conf");
        std::fs::write(&ns_conf, format!("listenPort={ns_port}\n")).unwrap();
        let mut conf = format!(
            "brokerId=0\nlistenPort={port}\nnamesrvAddr=127.0.0.1:{ns_port}\n\
             storePathRootDir={s}\nstorePathCommitLog={s}/commitlog\n",
            s = store.display()
        );
        for (k, v) in STORE_KEYS.iter().chain(extra) {
            conf.push_str(&format!("{k}={v}\n"));
        }
        let b_conf = dir.join("broker.conf");
        std::fs::write(&b_conf, conf).unwrap();
        let spawn = |main: &str, conf: &Path, log: &Path, what: &'static str| {
            let log_file = std::fs::File::create(log).unwrap();
            let child = Command::new(reference.join("run-java.sh"))
                .args([main, "-c", conf.to_str().unwrap()])
                .env("JAVA_HEAP", "384m")
                .env("JAVA_HOME_DIR", &home)
                .stdin(Stdio::null())
                .stdout(log_file.try_clone().unwrap())
                .stderr(log_file)
                .spawn()
                .unwrap_or_else(|e| panic!("start {what} with run-java.sh: {e}"));
            Proc(child, what)
        };
        let ns_log = dir.join("namesrv.log");
        let mut namesrv = spawn(
            "org.apache.rocketmq.namesrv.NamesrvStartup",
            &ns_conf,
            &ns_log,
            "Apache name server",
        );
        let ns = format!("127.0.0.1:{ns_port}");
        wait_listening(&ns, &mut namesrv, &ns_log, Duration::from_secs(60));
        let b_log = dir.join("broker.log");
        let mut broker = spawn(
            "org.apache.rocketmq.broker.BrokerStartup",
            &b_conf,
            &b_log,
            "Apache broker",
        );
        let addr = format!("127.0.0.1:{port}");
        wait_listening(&addr, &mut broker, &b_log, Duration::from_secs(90));
        // The broker listens before it has registered with the name server; its log says when.
        let start = Instant::now();
        while !std::fs::read_to_string(&b_log)
            .unwrap_or_default()
            .contains("boot success")
        {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "the Apache broker did not report boot success; log {}",
                b_log.display()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Apache {
            ends: Endpoints {
                namesrv: ns,
                broker: addr,
                store_root: store.display().to_string(),
            },
            broker,
            _namesrv: namesrv,
        }
    }

    /// Stops the broker JVM (not the name server) as `how` says and waits until it has exited.
    pub fn stop_broker(&mut self, how: Stop) -> std::process::ExitStatus {
        self.broker.stop(how, Duration::from_secs(90))
    }
}

/// ActorMQ: the in-process test broker with its embedded name server, given the same keys.
pub struct ActorMq {
    pub ends: Endpoints,
    broker: Option<TestBroker>,
}

impl ActorMq {
    pub fn start(dir: &Path) -> ActorMq {
        let store = dir.join("store");
        std::fs::create_dir_all(&store).unwrap();
        let b = TestBroker::start(&store, STORE_KEYS)
            .unwrap_or_else(|e| panic!("start ActorMQ on {}: {e:#}", store.display()));
        ActorMq {
            ends: Endpoints {
                namesrv: b.namesrv_addr.clone(),
                broker: b.broker_addr.clone(),
                store_root: store.display().to_string(),
            },
            broker: Some(b),
        }
    }
}

impl Drop for ActorMq {
    fn drop(&mut self) {
        if let Some(b) = self.broker.take() {
            b.stop();
        }
    }
}
