//! The `actormq` binary: `broker`, `namesrv`, `bench store`, `bench produce`, `bench consume`.

use std::path::PathBuf;
use std::sync::Arc;

use actormq::broker::BrokerOptions;
use actormq::tools::bench::{print_store_report, run_store_bench, StoreBenchArgs};
use actormq::tools::bench_wire::{
    print_consume_report, print_produce_report, run_consume, run_produce, ConsumeArgs, ProduceArgs,
};
use actormq_core::clock::SystemClock;
use actormq_core::config::{
    load_with_overrides, load_with_runtime, parse_override, print_config_items, process_env,
};
use clap::{Parser, Subcommand};

/// mimalloc instead of glibc malloc: per-thread heaps with cheap frees from other threads (a
/// request's buffers are allocated on a connection thread and freed on the writer's).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "actormq",
    version,
    about = "A RocketMQ-compatible message broker built from actors"
)]
struct Cli {
    /// Log format: `human` (default) or `json` (one JSON object per line, for log shippers).
    /// Filter with RUST_LOG, e.g. `RUST_LOG=actormq=debug`.
    #[arg(long, global = true, default_value = "human", value_parser = ["human", "json"])]
    log_format: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a broker (with an embedded name server unless one is configured).
    Broker {
        /// Configuration file: a RocketMQ `broker.conf` (Java properties) or ActorMQ TOML.
        #[arg(short = 'c', long = "configFile")]
        config: Option<PathBuf>,
        /// Print every configuration item (as broker.conf lines) and exit, like RocketMQ's -p.
        #[arg(short = 'p', long = "printConfigItem")]
        print_all: bool,
        /// Print the important configuration items and exit, like RocketMQ's -m.
        #[arg(short = 'm', long = "printImportantConfig")]
        print_important: bool,
        /// `key=value` overrides with RocketMQ key names; they win over the file and the
        /// environment.
        #[arg(value_name = "KEY=VALUE")]
        overrides: Vec<String>,
        /// Name server address(es), `host:port;host:port`. Without one (here, in the file or in
        /// NAMESRV_ADDR) the broker runs an embedded name server on port 9876.
        #[arg(short = 'n', long = "namesrvAddr")]
        namesrv: Option<String>,
        /// Where the embedded name server listens (default 0.0.0.0:9876).
        #[arg(long = "namesrv-listen")]
        namesrv_listen: Option<std::net::SocketAddr>,
    },
    /// Run a standalone name server until SIGINT/SIGTERM.
    Namesrv {
        /// Address to listen on (default `0.0.0.0:<listenPort>`: the `-c` file's, else 9876).
        #[arg(long)]
        listen: Option<std::net::SocketAddr>,
        /// A RocketMQ name server config file (Java properties: `kvConfigPath`,
        /// `orderMessageEnable`, `listenPort`, …), as `mqnamesrv -c`; updates are written back to
        /// it.
        #[arg(short = 'c', long = "configFile")]
        config: Option<PathBuf>,
    },
    /// Administer a cluster: mqadmin's commands (clusterList, topicStatus, consumerProgress, …).
    Admin(actormq::tools::admin::AdminArgs),
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        what: BenchCommand,
    },
}

#[derive(Subcommand)]
enum BenchCommand {
    /// In-process store benchmark (no network).
    Store(StoreBenchArgs),
    /// Send messages to a broker over TCP (RocketMQ remoting protocol), found through a name
    /// server; reports msgs/s, MB/s, latency percentiles and errors by response code.
    Produce(ProduceArgs),
    /// Pull every queue of a topic over TCP from offset 0 (or the end); reports msgs/s, MB/s and
    /// pull latency.
    Consume(ConsumeArgs),
}

/// Fail points (the `fail` crate) named in `FAILPOINTS`, as `name=actions;name=actions`: how the
/// crash tests stop a broker at an exact point of its recovery, e.g.
/// `FAILPOINTS=recovery-progress-checkpoint=2*off->pause`. For tests only: `pause` and `sleep`
/// block the thread that reaches the point (for `recovery-progress-checkpoint`, the system thread
/// that also handles signals), and `return` is not supported there (it panics). Unset in
/// production; a malformed value is refused at start rather than ignored.
fn configure_fail_points() -> anyhow::Result<()> {
    let Ok(spec) = std::env::var("FAILPOINTS") else {
        return Ok(());
    };
    for entry in spec.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, actions) = entry
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("FAILPOINTS entry {entry:?}: expected name=actions"))?;
        fail::cfg(name.trim(), actions.trim())
            .map_err(|e| anyhow::anyhow!("FAILPOINTS entry {entry:?}: {e}"))?;
        tracing::warn!(
            fail_point = name.trim(),
            actions = actions.trim(),
            "fail point armed"
        );
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        // actix-web's own start-up chatter is not an operator's concern.
        .unwrap_or_else(|_| "info,actix_server=warn".into());
    if cli.log_format == "json" {
        tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .init();
    } else {
        tracing_subscriber::fmt().with_env_filter(filter).init();
    }
    configure_fail_points()?;
    match cli.command {
        Command::Bench {
            what: BenchCommand::Store(args),
        } => {
            let report = actix_rt::System::new().block_on(run_store_bench(&args))?;
            print_store_report(&args, &report);
            Ok(())
        }
        Command::Bench {
            what: BenchCommand::Produce(args),
        } => {
            let report = client_runtime(usize::from(args.threads))?.block_on(run_produce(&args))?;
            print_produce_report(&args, &report);
            Ok(())
        }
        Command::Bench {
            what: BenchCommand::Consume(args),
        } => {
            let report = client_runtime(cores())?.block_on(run_consume(&args))?;
            print_consume_report(&args, &report);
            Ok(())
        }
        Command::Namesrv { listen, config } => run_namesrv(listen, config),
        Command::Admin(args) => {
            // An admin error is for a person: one line, no backtrace, exit status 1.
            if let Err(e) = client_runtime(cores())?.block_on(actormq::tools::admin::run(args)) {
                eprintln!("error: {e:#}");
                std::process::exit(1);
            }
            Ok(())
        }
        Command::Broker {
            config,
            print_all,
            print_important,
            overrides,
            namesrv,
            namesrv_listen,
        } => run_broker(BrokerCli {
            config,
            print_all,
            print_important,
            overrides,
            namesrv,
            namesrv_listen,
        }),
    }
}

/// The runtime of the over-the-wire benchmarks: plain multi-thread tokio, one worker per core.
/// The bench clients' runtime with `threads` workers.
fn client_runtime(threads: usize) -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .enable_all()
        .thread_name("bench-client")
        .build()?)
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// SIGINT and SIGTERM, caught from [`StopSignals::install`] on: one that comes while the broker
/// is still starting (recovering) is kept for when it has started, instead of killing the
/// process with its default action mid-recovery.
struct StopSignals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn install() -> anyhow::Result<StopSignals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(StopSignals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// The next SIGINT or SIGTERM (cancel-safe).
    async fn wait(&mut self) {
        tokio::select! {
            _ = self.int.recv() => tracing::info!("SIGINT received; stopping"),
            _ = self.term.recv() => tracing::info!("SIGTERM received; stopping"),
        }
    }
}

fn run_namesrv(
    listen: Option<std::net::SocketAddr>,
    config_file: Option<PathBuf>,
) -> anyhow::Result<()> {
    use actormq::namesrv::{start_namesrv, NamesrvOptions};
    let opts = NamesrvOptions {
        config_file,
        ..NamesrvOptions::default()
    };
    // As RocketMQ's NamesrvStartup: the port is the file's `listenPort` (default 9876).
    let listen = match listen {
        Some(l) => l,
        None => {
            let mut file = actormq::namesrv::config::NamesrvConfig::new(9876);
            if let Some(path) = &opts.config_file {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    anyhow::anyhow!("cannot read the name server config {}: {e}", path.display())
                })?;
                file.update(&text);
            }
            let port = file
                .get("listenPort")
                .and_then(|p| p.parse::<u16>().ok())
                .unwrap_or(9876);
            std::net::SocketAddr::from(([0, 0, 0, 0], port))
        }
    };
    actix_rt::System::new().block_on(async move {
        let mut signals = StopSignals::install()?;
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
        let ns = start_namesrv(listener, opts).await?;
        systemd_notify(&[
            sd_notify::NotifyState::Ready,
            sd_notify::NotifyState::Status(&format!("name server on {}", ns.local_addr)),
        ]);
        signals.wait().await;
        systemd_notify(&[sd_notify::NotifyState::Stopping]);
        ns.stop_accepting();
        Ok(())
    })
}

struct BrokerCli {
    config: Option<PathBuf>,
    print_all: bool,
    print_important: bool,
    overrides: Vec<String>,
    namesrv: Option<String>,
    namesrv_listen: Option<std::net::SocketAddr>,
}

fn run_broker(cli: BrokerCli) -> anyhow::Result<()> {
    // Layers: defaults -> NAMESRV_ADDR -> file -> ACTORMQ_* -> command line (-n, key=value).
    let mut layer = Vec::new();
    if let Some(n) = cli.namesrv {
        layer.push(("namesrvAddr".to_owned(), n));
    }
    for a in &cli.overrides {
        layer.push(parse_override(a)?);
    }
    let env = process_env();
    let mut loaded = load_with_overrides(cli.config.as_deref(), &env, &layer)?;
    // Keys changed with `updateBrokerConfig` in an earlier run sit between the file and the
    // environment.
    let runtime = loaded
        .config
        .store
        .config_dir()
        .join(actormq::broker::admin::RUNTIME_FILE);
    if runtime.exists() {
        loaded = load_with_runtime(cli.config.as_deref(), Some(&runtime), &env, &layer)?;
        tracing::info!(file = %runtime.display(), "applying configuration changed at runtime (updateBrokerConfig)");
    }
    loaded.log_warnings();
    if cli.print_all || cli.print_important {
        print!(
            "{}",
            print_config_items(&loaded.config, cli.print_important && !cli.print_all)
        );
        return Ok(());
    }
    let cfg = loaded.config;
    let namesrv_listen = cli.namesrv_listen;
    actix_rt::System::new().block_on(async move {
        let mut signals = StopSignals::install()?;
        let start = actormq::broker::start(
            cfg,
            BrokerOptions {
                namesrv_listen,
                ..Default::default()
            },
            Arc::new(SystemClock),
        );
        tokio::pin!(start);
        let broker = tokio::select! {
            // A stop asked for wins over a start finishing in the same poll: systemd is then
            // told STOPPING, never READY after it sent the stop.
            biased;
            () = signals.wait() => {
                // Recovery is not cut short (its next attempt would redo it); the stop that was
                // asked for follows the start, so the next start takes the normal path.
                tracing::info!("a stop was asked for while starting: stopping once started");
                systemd_notify(&[sd_notify::NotifyState::Stopping]);
                return start.await?.stop().await;
            }
            b = &mut start => b?,
        };
        // Only now: recovery and its re-dispatch are done, the port is open, and registration
        // with the name servers has been sent.
        systemd_notify(&[
            sd_notify::NotifyState::Ready,
            sd_notify::NotifyState::Status(&format!("serving on {}", broker.broker_addr)),
        ]);
        signals.wait().await;
        systemd_notify(&[sd_notify::NotifyState::Stopping]);
        broker.stop().await
    })
}

/// Tells systemd (a `Type=notify` unit) how the service is doing; nothing without
/// `$NOTIFY_SOCKET`. A failure to tell it is logged, never fatal: systemd then times the start out
/// by itself.
fn systemd_notify(state: &[sd_notify::NotifyState]) {
    if let Err(e) = sd_notify::notify(state) {
        tracing::warn!(error = %e, "telling systemd (NOTIFY_SOCKET) failed");
    }
}
