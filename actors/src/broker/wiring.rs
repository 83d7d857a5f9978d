//! The broker's wiring: [`start`] brings a broker up, [`BrokerHandle::stop`] takes it down.
//!
//! Start, in this order, each step one function: take the store lock → open and recover the
//! store ([`open_store`]: the abort file written before the store's writers start after a clean
//! stop, and for this run once recovery is done; one left by a crash stays as it is until then)
//! → bind the remoting, `/metrics` and HA ports ([`Endpoints::bind`]) → start (or not) the
//! embedded name server ([`name_servers`]) → start the actors ([`start_actors`]: metadata,
//! registrar, replication, client registry, long polling) → build the connection threads'
//! processors ([`processor_factory`]) and accept → serve `/metrics` → register with the name
//! servers and wait for their answers (at most `registerBrokerTimeoutMills`). Stop reverses it:
//! stop accepting (requests and scrapes), stop replication, unregister, flush and close the
//! store, close the connections, persist metadata, remove the abort file, release the lock.
//!
//! Owns the handles of everything it started; no messages of its own beyond the first
//! `RegisterNow`, `GetRegistrations` (status) and the last `UnregisterAll` (registrar) and
//! `PersistAll` (metadata).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use actormq_core::clock::SharedClock;
use actormq_core::config::Config;
use actormq_core::meta;
use actormq_core::store::store_lock::{
    abort_file_exists, crashed_on_this_boot, create_abort_file, remove_abort_file, StoreLock,
};
use anyhow::Context as _;
use arc_swap::{ArcSwap, ArcSwapOption};
use tokio::net::TcpListener;

use super::clients::{ClientRegistry, SubscriptionView};
use super::live_config::LiveConfig;
use super::messages::{
    GetRegistrations, MessagesArrived, NamesrvStatus, PersistAll, RegisterNow, UnregisterAll,
};
use super::metadata::{MetaSettings, MetaView, Metadata};
use super::metrics_source::ActorSource;
use super::processor::BrokerProcessorFactory;
use super::pull_hold::PullHold;
use super::registrar::{register_and_wait, BrokerIdentity, Registrar};
use super::settings::ProcessorSettings;
use super::slave_sync;
use crate::metered::{start_beside, start_on, ActorRef};
use crate::metrics::{BrokerLabels, BrokerMetrics, MetricsServer, ScrapeSources};
use crate::namesrv::{start_namesrv, NamesrvHandle, NamesrvOptions};
use crate::remoting::server::ConnectionThreads;
use crate::store::{PreviousRun, Store, StoreParams};

/// Where to listen, beyond what the configuration says.
#[derive(Clone, Debug, Default)]
pub struct BrokerOptions {
    /// Run an embedded name server on this address when no name server is configured
    /// (`None` = `0.0.0.0:9876`).
    pub namesrv_listen: Option<SocketAddr>,
    /// Never run the embedded name server.
    pub no_embedded_namesrv: bool,
    /// The embedded name server's `${user.home}` (its `namesrv/kvConfig.json`); `None` = `$HOME`.
    pub namesrv_home: Option<std::path::PathBuf>,
}

pub struct BrokerHandle {
    pub broker_addr: SocketAddr,
    /// Where `GET /metrics` answers (`metricsPromExporterPort` on the advertised address).
    pub metrics_addr: Option<SocketAddr>,
    metrics: Option<MetricsServer>,
    pub namesrv: Option<NamesrvHandle>,
    pub namesrv_addrs: Vec<String>,
    /// Where a master serves its slaves (the address it advertises); `None` on a slave.
    pub ha_addr: Option<SocketAddr>,
    store: Arc<Store>,
    meta: ActorRef<Metadata>,
    registrar: ActorRef<Registrar>,
    accept: actix_rt::task::JoinHandle<()>,
    /// The replication thread: the HA port's connections (a master) or the replication client
    /// (a slave).
    ha: actix::ArbiterHandle,
    connections: ConnectionThreads,
    root: std::path::PathBuf,
    _lock: StoreLock,
}

/// The address this broker tells clients: `brokerIP1`, else the address used for outbound
/// traffic (no packet is sent to find it), else loopback.
fn advertised_ip(cfg: &Config) -> anyhow::Result<IpAddr> {
    if let Some(ip) = &cfg.broker.broker_ip1 {
        return ip
            .parse()
            .with_context(|| format!("brokerIP1 = {ip:?} is not an IP address"));
    }
    let probe = std::net::UdpSocket::bind("0.0.0.0:0").and_then(|s| {
        s.connect("10.255.255.255:9")?;
        s.local_addr()
    });
    Ok(probe
        .map(|a| a.ip())
        .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)))
}

/// Starts a broker on the current actix system.
pub async fn start(
    cfg: Config,
    opts: BrokerOptions,
    clock: SharedClock,
) -> anyhow::Result<BrokerHandle> {
    let started = Instant::now();
    let root = cfg.store.store_path_root_dir.clone();
    log_starting(&cfg);
    std::fs::create_dir_all(&root)
        .with_context(|| format!("cannot create the store directory {}", root.display()))?;
    let lock = StoreLock::acquire(&root)?;
    let hold_cell: Arc<OnceLock<ActorRef<PullHold>>> = Arc::new(OnceLock::new());
    let store = open_store(&cfg, &root, clock.clone(), &hold_cell).await?;
    let mut net = Endpoints::bind(&cfg).await?;
    let (namesrv, namesrv_addrs) = name_servers(&cfg, &opts, net.ip).await?;
    // The request path's settings, here for `brokerPermission` in the registrations too (an
    // `updateBrokerConfig` replaces them).
    let settings = Arc::new(ArcSwap::from_pointee(ProcessorSettings::from_config(&cfg)));
    let actors = start_actors(&cfg, &clock, &store, &mut net, &namesrv_addrs, &settings)?;
    let _ = hold_cell.set(actors.pull_hold.clone());
    let metrics = BrokerMetrics::new(BrokerLabels {
        cluster: cfg.broker.broker_cluster_name.clone(),
        broker_name: cfg.broker.broker_name.clone(),
    });
    let scrape = scrape_sources(&cfg, &store, &actors, metrics.clone());
    let factory = processor_factory(&cfg, &clock, &store, &actors, settings, &net, metrics);
    let threads = match cfg.broker.server_selector_threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n as usize,
    };
    let connections = ConnectionThreads::start(threads, Arc::new(factory));
    let accept = actix_rt::spawn(connections.serve(net.listener));
    let metrics_server = MetricsServer::start(net.metrics, net.ip, scrape)?;
    let limit = Duration::from_millis(cfg.broker.register_broker_timeout_ms.max(1000));
    if !register_and_wait(&actors.registrar, limit).await {
        tracing::warn!(
            limit_ms = limit.as_millis() as u64,
            "the first registration with the name servers is not answered yet; starting anyway"
        );
    }
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        broker = %net.store_host,
        name_servers = %namesrv_addrs.join(";"),
        embedded_namesrv = namesrv.is_some(),
        metrics = %metrics_server.addr,
        ha = %net.ha_addr.map_or("none".to_string(), |a| a.to_string()),
        store = %root.display(),
        connection_threads = threads,
        flush = ?cfg.store.flush_disk_type,
        role = ?cfg.store.broker_role,
        startup_ms = started.elapsed().as_millis() as u64,
        recovery_ms = store.report.recovery_ms,
        "broker started"
    );
    Ok(BrokerHandle {
        broker_addr: net.store_host,
        metrics_addr: Some(metrics_server.addr),
        metrics: Some(metrics_server),
        namesrv,
        namesrv_addrs,
        ha_addr: net.ha_addr,
        store,
        meta: actors.meta,
        registrar: actors.registrar,
        accept,
        ha: actors.ha,
        connections,
        root,
        _lock: lock,
    })
}

fn log_starting(cfg: &Config) {
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        store = %cfg.store.store_path_root_dir.display(),
        listen_port = cfg.broker.listen_port,
        flush = ?cfg.store.flush_disk_type,
        role = ?cfg.store.broker_role,
        cluster = %cfg.broker.broker_cluster_name,
        broker_name = %cfg.broker.broker_name,
        "starting ActorMQ broker"
    );
}

/// How the previous run ended, from the abort file it left (or not).
fn previous_run(root: &Path) -> PreviousRun {
    let previous = if !abort_file_exists(root) {
        PreviousRun::Clean
    } else if crashed_on_this_boot(root) {
        PreviousRun::ProcessDied
    } else {
        PreviousRun::Crashed
    };
    if previous != PreviousRun::Clean {
        tracing::warn!(
            store = %root.display(),
            same_boot = previous == PreviousRun::ProcessDied,
            "the previous run did not stop cleanly (abort file present); recovering"
        );
    }
    previous
}

/// Opens and recovers the store, the abort file written around it (see the module docs). New
/// messages are told to [`PullHold`] once it is in `hold_cell`.
async fn open_store(
    cfg: &Config,
    root: &Path,
    clock: SharedClock,
    hold_cell: &Arc<OnceLock<ActorRef<PullHold>>>,
) -> anyhow::Result<Arc<Store>> {
    let previous = previous_run(root);
    let params = StoreParams::from_config(&cfg.store).map_err(anyhow::Error::msg)?;
    let hook_cell = hold_cell.clone();
    let hook: crate::store::cq_builder::ArrivalHook = Arc::new(move |arrivals| {
        if let Some(h) = hook_cell.get() {
            // A dropped hint is covered by PullHold's own scan.
            h.try_notify(MessagesArrived(arrivals));
        }
    });
    if previous == PreviousRun::Clean {
        // Before the store starts the actors that write (delayed delivery, retention): a power
        // loss after their first write must find the abort file. An abort file left by a crash
        // is kept as it is through recovery instead: rewritten now, it would name this boot, and
        // a start killed during recovery would be taken for a mere process death.
        create_abort_file(root)?;
    }
    let store = Arc::new(Store::open_with(params, clock, Some(hook), previous).await?);
    create_abort_file(root)?;
    log_recovered(root, previous, &store);
    Ok(store)
}

fn log_recovered(root: &Path, previous: PreviousRun, store: &Store) {
    tracing::info!(
        store = %root.display(),
        previous_run = match previous {
            PreviousRun::Clean => "stopped cleanly",
            PreviousRun::ProcessDied => "process died",
            PreviousRun::Crashed => "crashed",
        },
        commit_log_end = store.report.commit_log_end,
        scan_from = store.report.scan_from,
        files_scanned = store.report.files_scanned,
        records_scanned = store.report.records_scanned,
        cut = store.report.truncated_reason.as_deref().unwrap_or("none"),
        redispatched_bytes = store.report.redispatch_bytes,
        consume_queues = store.report.consume_queues,
        recovery_ms = store.report.recovery_ms,
        scan_ms = store.report.scan_ms,
        dispatch_ms = store.report.dispatch_ms,
        "store recovered"
    );
}

/// The ports this broker listens on, bound, and the addresses it advertises.
struct Endpoints {
    /// `brokerIP1`, or the outbound address.
    ip: IpAddr,
    listener: TcpListener,
    /// `ip:listenPort` (the port bound, for an ephemeral one): written into every record.
    store_host: SocketAddr,
    metrics: std::net::TcpListener,
    /// A master's HA port (none on a slave); taken by [`start_replication`].
    ha_listener: Option<std::net::TcpListener>,
    /// What the registrations carry as the HA server's address: `brokerIP2` (else `ip`) and the
    /// HA port.
    ha_server_addr: SocketAddr,
    /// `ha_server_addr` on a master, none on a slave.
    ha_addr: Option<SocketAddr>,
}

impl Endpoints {
    async fn bind(cfg: &Config) -> anyhow::Result<Endpoints> {
        let b = &cfg.broker;
        let ip = advertised_ip(cfg)?;
        let bind_ip = if b.broker_ip1.is_some() {
            ip
        } else {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        };
        let listener = TcpListener::bind(SocketAddr::new(bind_ip, b.listen_port))
            .await
            .with_context(|| {
                format!("cannot listen on {bind_ip}:{} (listenPort)", b.listen_port)
            })?;
        let store_host = SocketAddr::new(ip, listener.local_addr()?.port());
        let metrics = MetricsServer::bind(SocketAddr::new(bind_ip, b.metrics_prom_exporter_port))?;
        let ha_ip: IpAddr = match &b.broker_ip2 {
            Some(ip2) => ip2
                .parse()
                .with_context(|| format!("brokerIP2 = {ip2:?} is not an IP address"))?,
            None => ip,
        };
        let ha_listener = bind_ha(cfg, bind_ip)?;
        let ha_port = match &ha_listener {
            Some(l) => l.local_addr()?.port(),
            None => cfg.store.ha_listen_port,
        };
        let ha_server_addr = SocketAddr::new(ha_ip, ha_port);
        Ok(Endpoints {
            ip,
            listener,
            store_host,
            metrics,
            ha_listener,
            ha_server_addr,
            ha_addr: cfg.store.broker_role.is_master().then_some(ha_server_addr),
        })
    }
}

/// A master serves its slaves on haListenPort — on every interface when brokerIP2 is set (as
/// RocketMQ always does: slaves are told brokerIP2, which may be a NAT or moving address), else
/// where the remoting port listens; a slave listens on none.
fn bind_ha(cfg: &Config, bind_ip: IpAddr) -> anyhow::Result<Option<std::net::TcpListener>> {
    if !cfg.store.broker_role.is_master() {
        return Ok(None);
    }
    let ip = if cfg.broker.broker_ip2.is_some() {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    } else {
        bind_ip
    };
    let at = SocketAddr::new(ip, cfg.store.ha_listen_port);
    let l = std::net::TcpListener::bind(at)
        .with_context(|| format!("cannot listen on {at} (haListenPort)"))?;
    Ok(Some(l))
}

/// The name servers to register with: the configured ones, or an embedded one (started here,
/// unless told not to).
async fn name_servers(
    cfg: &Config,
    opts: &BrokerOptions,
    ip: IpAddr,
) -> anyhow::Result<(Option<NamesrvHandle>, Vec<String>)> {
    let addrs = cfg.broker.namesrv_addrs();
    if !addrs.is_empty() || opts.no_embedded_namesrv {
        return Ok((None, addrs));
    }
    let at = opts
        .namesrv_listen
        .unwrap_or_else(|| SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 9876));
    let l = TcpListener::bind(at)
        .await
        .with_context(|| format!("cannot listen on {at} (embedded name server)"))?;
    let ns_opts = NamesrvOptions {
        home: opts.namesrv_home.clone(),
        ..NamesrvOptions::default()
    };
    let h = start_namesrv(l, ns_opts)
        .await
        .context("embedded name server")?;
    let reach = if h.local_addr.ip().is_unspecified() {
        SocketAddr::new(ip, h.local_addr.port())
    } else {
        h.local_addr
    };
    Ok((Some(h), vec![reach.to_string()]))
}

/// The broker's actors and the views the request path reads beside them.
struct Actors {
    meta: ActorRef<Metadata>,
    meta_view: MetaView,
    registrar: ActorRef<Registrar>,
    /// The replication thread.
    ha: actix::ArbiterHandle,
    clients: ActorRef<ClientRegistry>,
    subs: SubscriptionView,
    pull_hold: ActorRef<PullHold>,
}

/// Loads metadata and starts, in order: the registrar, replication, metadata (told to register
/// each topic change), a slave's metadata copy, the client registry and long polling.
fn start_actors(
    cfg: &Config,
    clock: &SharedClock,
    store: &Arc<Store>,
    net: &mut Endpoints,
    namesrv_addrs: &[String],
    settings: &Arc<ArcSwap<ProcessorSettings>>,
) -> anyhow::Result<Actors> {
    let mut meta = Metadata::load(cfg.store.config_dir(), meta_settings(cfg), clock.clone())?;
    let meta_view = meta.view();
    // A slave's master: haMasterAddress, else what the name servers say (kept up to date by
    // the registrar); and its remoting address, for the metadata copy.
    let master_ha: Arc<ArcSwapOption<String>> = Arc::new(ArcSwapOption::new(
        cfg.store.ha_master_address.clone().map(Arc::new),
    ));
    let master_addr: Arc<ArcSwapOption<String>> = Arc::new(ArcSwapOption::empty());
    let registrar = start_registrar(
        cfg,
        namesrv_addrs,
        net,
        &meta_view,
        settings,
        (&master_ha, &master_addr),
    );
    let ha = start_replication(cfg, store, net.ha_listener.take(), master_ha);
    let reg = registrar.clone();
    meta.on_topic_change(Box::new(move || {
        let (tx, rx) = tokio::sync::oneshot::channel();
        reg.try_notify(RegisterNow(Some(tx)));
        rx
    }));
    let meta_arb = actix::Arbiter::new();
    let meta_ref = start_on(Some(&meta_arb.handle()), meta);
    if cfg.store.broker_role.is_slave() {
        let addr: slave_sync::MasterRemoting =
            Arc::new(move || master_addr.load_full().map(|a| (*a).clone()));
        ha.spawn(slave_sync::run(
            addr,
            meta_ref.clone(),
            store.clone(),
            slave_sync::first_delay(),
        ));
    }
    std::mem::forget(meta_arb); // lives as long as the process; stopped with the system
    let registry = ClientRegistry::new();
    let subs = registry.view();
    Ok(Actors {
        meta: meta_ref,
        meta_view,
        registrar,
        ha,
        clients: start_on(None, registry),
        subs,
        // On dispatch's thread: the arrival after each dispatched batch is a same-thread hint,
        // not a wake of another thread per batch (most find no pull parked).
        pull_hold: start_beside(
            store.dispatch_arbiter(),
            PullHold::new(store.reader().clone()),
        ),
    })
}

fn meta_settings(cfg: &Config) -> MetaSettings {
    let b = &cfg.broker;
    MetaSettings {
        cluster: b.broker_cluster_name.clone(),
        broker_name: b.broker_name.clone(),
        auto_create_topic: b.auto_create_topic_enable,
        auto_create_group: b.auto_create_subscription_group,
        default_topic_queue_nums: b.default_topic_queue_nums,
        cluster_topic_enable: b.cluster_topic_enable,
        broker_topic_enable: b.broker_topic_enable,
        offset_flush_interval: Duration::from_millis(b.flush_consumer_offset_interval_ms.max(100)),
    }
}

/// The registrar: the topic table with the broker's permission, and on a slave its master's
/// addresses to keep up to date (`master_ha` only without `haMasterAddress`).
fn start_registrar(
    cfg: &Config,
    namesrv_addrs: &[String],
    net: &Endpoints,
    meta_view: &MetaView,
    settings: &Arc<ArcSwap<ProcessorSettings>>,
    (master_ha, master_addr): (&Arc<ArcSwapOption<String>>, &Arc<ArcSwapOption<String>>),
) -> ActorRef<Registrar> {
    let b = &cfg.broker;
    let identity = BrokerIdentity {
        cluster: b.broker_cluster_name.clone(),
        broker_name: b.broker_name.clone(),
        broker_id: b.broker_id,
        broker_addr: net.store_host.to_string(),
        ha_server_addr: net.ha_server_addr.to_string(),
    };
    let (topics_view, reg_settings) = (meta_view.clone(), settings.clone());
    let mut reg = Registrar::new(
        namesrv_addrs.to_vec(),
        identity,
        Arc::new(move || {
            with_broker_permission(
                (*topics_view.topics()).clone(),
                reg_settings.load().broker_perm,
            )
        }),
        Duration::from_millis(b.register_name_server_period_ms.clamp(10_000, 60_000)),
        Duration::from_millis(b.register_broker_timeout_ms.max(1000)),
    );
    if cfg.store.broker_role.is_slave() {
        let ha = cfg
            .store
            .ha_master_address
            .is_none()
            .then(|| master_ha.clone());
        reg = reg.with_master(ha, master_addr.clone());
    }
    start_on(None, reg)
}

/// The replication thread: a master serves its slaves on the HA port, a slave replicates from
/// its master.
fn start_replication(
    cfg: &Config,
    store: &Arc<Store>,
    ha_listener: Option<std::net::TcpListener>,
    master_ha: Arc<ArcSwapOption<String>>,
) -> actix::ArbiterHandle {
    // The store's "ha" thread, where `HaMaster` runs: acks and wakes stay on one thread.
    let ha_arb = store.ha_arbiter().clone();
    let ha_params = crate::store::ha::HaParams::from_config(&cfg.store);
    match ha_listener {
        Some(l) => {
            let (view, state) = (store.reader().commit_log().clone(), store.ha().clone());
            ha_arb.spawn(crate::store::ha::serve_master(l, view, state, ha_params));
        }
        None => {
            let addr: crate::store::ha::MasterAddr =
                Arc::new(move || master_ha.load_full().map(|a| (*a).clone()));
            ha_arb.spawn(crate::store::ha::run_slave(store.clone(), addr, ha_params));
        }
    }
    ha_arb
}

/// What a `/metrics` scrape reads.
fn scrape_sources(
    cfg: &Config,
    store: &Arc<Store>,
    actors: &Actors,
    metrics: Arc<BrokerMetrics>,
) -> ScrapeSources {
    ScrapeSources {
        metrics,
        reader: store.reader().clone(),
        state: store.state().clone(),
        store_root: cfg.store.store_path_root_dir.clone(),
        broker: Arc::new(ActorSource {
            meta: actors.meta.clone(),
            meta_view: actors.meta_view.clone(),
            clients: actors.clients.clone(),
        }),
        pool: store.write_buffer_pool().cloned(),
        ha: cfg
            .store
            .broker_role
            .is_master()
            .then(|| store.ha().clone()),
    }
}

/// What each connection thread builds its request path from.
fn processor_factory(
    cfg: &Config,
    clock: &SharedClock,
    store: &Arc<Store>,
    actors: &Actors,
    settings: Arc<ArcSwap<ProcessorSettings>>,
    net: &Endpoints,
    metrics: Arc<BrokerMetrics>,
) -> BrokerProcessorFactory {
    BrokerProcessorFactory {
        store: store.clone(),
        reader: store.reader().clone(),
        meta: actors.meta.clone(),
        meta_view: actors.meta_view.clone(),
        clients: actors.clients.clone(),
        subs: actors.subs.clone(),
        pull_hold: actors.pull_hold.clone(),
        settings: settings.clone(),
        live: Arc::new(LiveConfig::new(cfg.clone(), settings, clock.now_ms())),
        rates: Default::default(),
        store_host: net.store_host,
        boot_ms: clock.now_ms(),
        stats: Default::default(),
        metrics,
    }
}

impl BrokerHandle {
    /// How registering with each name server is going (the registrar's status), in
    /// configuration order; empty if the registrar is gone.
    pub async fn registrations(&self) -> Vec<NamesrvStatus> {
        self.registrar
            .send(GetRegistrations)
            .await
            .unwrap_or_default()
    }

    /// Clean stop: stop accepting, unregister, flush and close the store, close the
    /// connections, persist metadata, remove the abort file so the next start takes the normal
    /// recovery path.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.accept.abort();
        // Replication first: a slave stops appending, a master stops serving its slaves, and the
        // sends waiting for a slave's ack are answered now, not at `slaveTimeout`.
        self.store.ha().close();
        self.ha.stop();
        if let Some(m) = &self.metrics {
            m.stop().await;
        }
        if let Some(n) = &self.namesrv {
            n.stop_accepting();
        }
        let _ =
            tokio::time::timeout(Duration::from_secs(5), self.registrar.send(UnregisterAll)).await;
        // Connections may still hold the processor (and so the store); shutdown stops the store's
        // actors regardless, so late requests get SERVICE_NOT_AVAILABLE.
        let stored = self.store.shutdown().await;
        // Then the connection threads: their sockets close, their processors (store refs) go —
        // also after a failed store stop (which leaves the abort file: the next start recovers
        // as after a crash).
        self.connections.stop().await;
        // Metadata last, when no connection is left to commit an offset (a PULL's or an
        // UPDATE_CONSUMER_OFFSET) or to create a topic: persisted earlier, what came in
        // meanwhile was lost, and consumers read it again after the restart. RocketMQ persists
        // consumerOffset.json after its remoting server is down alike.
        let persisted = self.meta.send(PersistAll).await;
        stored?;
        persisted??;
        remove_abort_file(&self.root)?;
        tracing::info!(store = %self.root.display(), "broker stopped cleanly");
        Ok(())
    }
}

/// The topic table a broker registers: as RocketMQ's `registerBrokerAll`, when
/// `brokerPermission` is not read+write every topic's perm is the broker's, so that routes stop
/// offering a broker taken out of writing (4) or reading (2).
fn with_broker_permission(mut table: meta::TopicTable, broker_perm: u32) -> meta::TopicTable {
    if broker_perm & (meta::PERM_READ | meta::PERM_WRITE) != meta::PERM_READ | meta::PERM_WRITE {
        for c in table.topic_config_table.values_mut() {
            c.perm = broker_perm;
        }
    }
    table
}
