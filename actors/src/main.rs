//! The `actormq` binary: `broker`, `bench store`.

use std::path::PathBuf;
use std::sync::Arc;

use actormq::bench::{print_store_report, run_store_bench, StoreBenchArgs};
use actormq::store::{Store, StoreParams};
use actormq_core::clock::SystemClock;
use actormq_core::config::{load, StoreConfig};
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
    /// Run a broker (this build: the store; the remoting port and name server come next).
    Broker {
        /// Configuration file (ActorMQ TOML).
        #[arg(short = 'c', long = "configFile")]
        config: Option<PathBuf>,
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
        Command::Broker { config } => run_broker(config),
    }
}

fn run_broker(config: Option<PathBuf>) -> anyhow::Result<()> {
    let env: Vec<(String, String)> = std::env::vars().collect();
    let loaded = load(config.as_deref(), &env)?;
    let store_cfg: &StoreConfig = &loaded.config.store;
    let params = StoreParams::from_config(store_cfg).map_err(anyhow::Error::msg)?;
    actix_rt::System::new().block_on(async move {
        let store = Store::open(params.clone(), Arc::new(SystemClock)).await?;
        tracing::info!(
            version = env!("CARGO_PKG_VERSION"),
            store = %params.root.display(),
            commit_log_end = store.report.commit_log_end,
            consume_queues = store.report.consume_queues,
            recovery_ms = store.report.recovery_ms,
            "ActorMQ store started"
        );
        tokio::signal::ctrl_c().await?;
        tracing::info!("stopping");
        store.shutdown().await?;
        anyhow::Ok(())
    })
}
