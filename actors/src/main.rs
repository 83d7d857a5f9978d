//! The `actormq` binary: `broker`, `bench store`.

use std::path::PathBuf;
use std::sync::Arc;

use actormq::bench::{print_store_report, run_store_bench, StoreBenchArgs};
use actormq::broker::BrokerOptions;
use actormq_core::clock::SystemClock;
use actormq_core::config::load;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "actormq",
    version,
    about = "A RocketMQ-compatible message broker built from actors"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a broker (with an embedded name server unless one is configured).
    Broker {
        /// Configuration file (ActorMQ TOML).
        #[arg(short = 'c', long = "configFile")]
        config: Option<PathBuf>,
        /// Name server address(es), `host:port;host:port`. Without one (here, in the file or in
        /// NAMESRV_ADDR) the broker runs an embedded name server on port 9876.
        #[arg(short = 'n', long = "namesrvAddr")]
        namesrv: Option<String>,
    },
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
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Bench {
            what: BenchCommand::Store(args),
        } => {
            let report = actix_rt::System::new().block_on(run_store_bench(&args))?;
            print_store_report(&args, &report);
            Ok(())
        }
        Command::Broker { config, namesrv } => run_broker(config, namesrv),
    }
}

fn run_broker(config: Option<PathBuf>, namesrv: Option<String>) -> anyhow::Result<()> {
    let env: Vec<(String, String)> = std::env::vars().collect();
    let mut loaded = load(config.as_deref(), &env)?;
    loaded.log_warnings();
    if let Some(n) = namesrv {
        loaded.config.broker.namesrv_addr = Some(n);
    }
    let cfg = loaded.config;
    actix_rt::System::new().block_on(async move {
        let broker =
            actormq::broker::start(cfg, BrokerOptions::default(), Arc::new(SystemClock)).await?;
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received; stopping"),
            _ = term.recv() => tracing::info!("SIGTERM received; stopping"),
        }
        broker.stop().await
    })
}
