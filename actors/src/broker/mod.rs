//! The broker: remoting server, request handling, metadata, client registry, long polling, the
//! embedded name server and the registration with name servers.
//!
//! [`start`] brings a broker up in this order: take the store lock → write the abort file (after a
//! clean stop; one left by a crash stays as it is until recovery is done) → open and recover the
//! store → write the abort file for this run → load metadata → start the client registry, long
//! polling and request processor → listen → start (or not) the embedded name server → serve
//! `/metrics` ([`crate::metrics`]) → register with the name servers. [`BrokerHandle::stop`] reverses it: stop accepting (requests and scrapes),
//! unregister, flush and close the store, close the connections, persist metadata, remove the
//! abort file, release the lock.

pub mod admin;
pub mod admin_store;
pub mod client_call;
pub mod clients;
pub mod metadata;
pub mod processor;
pub mod pull_hold;
pub mod registrar;
pub mod reply;
pub mod slave_sync;
pub mod store_stats;
pub mod testing;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use actormq_core::clock::SharedClock;
use actormq_core::config::Config;
use actormq_core::meta;
use actormq_core::store::store_lock::{create_abort_file, remove_abort_file, StoreLock};
use anyhow::Context as _;
use tokio::net::TcpListener;

use crate::metered::{start_on, ActorRef};
use crate::metrics::{BrokerLabels, BrokerMetrics, MetricsServer, ScrapeSources};
use crate::namesrv::{start_namesrv, NamesrvHandle, NamesrvOptions};
use crate::remoting::server::ConnectionThreads;
use crate::store::{PreviousRun, Store, StoreParams};
use clients::ClientRegistry;
use metadata::{MetaSettings, Metadata, PersistAll};
use processor::{BrokerProcessorFactory, ProcessorSettings};
use pull_hold::{MessagesArrived, PullHold};
use registrar::{BrokerIdentity, RegisterNow, Registrar, UnregisterAll};

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
    ha: actix::Arbiter,
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
    let started = std::time::Instant::now();
    let root = cfg.store.store_path_root_dir.clone();
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        store = %root.display(),
        listen_port = cfg.broker.listen_port,
        flush = ?cfg.store.flush_disk_type,
        role = ?cfg.store.broker_role,
        cluster = %cfg.broker.broker_cluster_name,
        broker_name = %cfg.broker.broker_name,
        "starting ActorMQ broker"
    );
    std::fs::create_dir_all(&root)
        .with_context(|| format!("cannot create the store directory {}", root.display()))?;
    let lock = StoreLock::acquire(&root)?;
    let previous = if !actormq_core::store::store_lock::abort_file_exists(&root) {
        PreviousRun::Clean
    } else if actormq_core::store::store_lock::crashed_on_this_boot(&root) {
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
    let params = StoreParams::from_config(&cfg.store).map_err(anyhow::Error::msg)?;
    let hold_cell: Arc<OnceLock<ActorRef<PullHold>>> = Arc::new(OnceLock::new());
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
        create_abort_file(&root)?;
    }
    let store = Arc::new(Store::open_with(params, clock.clone(), Some(hook), previous).await?);
    create_abort_file(&root)?;
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

    let b = &cfg.broker;
    let ip = advertised_ip(&cfg)?;
    let bind_ip = if cfg.broker.broker_ip1.is_some() {
        ip
    } else {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    };
    let listener = TcpListener::bind(SocketAddr::new(bind_ip, b.listen_port))
        .await
        .with_context(|| format!("cannot listen on {bind_ip}:{} (listenPort)", b.listen_port))?;
    let port = listener.local_addr()?.port();
    let store_host = SocketAddr::new(ip, port);
    let metrics_listener =
        MetricsServer::bind(SocketAddr::new(bind_ip, b.metrics_prom_exporter_port))?;
    let ha_ip: IpAddr = match &b.broker_ip2 {
        Some(ip2) => ip2
            .parse()
            .with_context(|| format!("brokerIP2 = {ip2:?} is not an IP address"))?,
        None => ip,
    };
    // A master serves its slaves on haListenPort — on every interface when brokerIP2 is set
    // (as RocketMQ always does: slaves are told brokerIP2, which may be a NAT or moving
    // address), else where the remoting port listens; a slave listens on none.
    let ha_listener = if cfg.store.broker_role.is_master() {
        let at = SocketAddr::new(
            if b.broker_ip2.is_some() {
                IpAddr::V4(Ipv4Addr::UNSPECIFIED)
            } else {
                bind_ip
            },
            cfg.store.ha_listen_port,
        );
        Some(
            std::net::TcpListener::bind(at)
                .with_context(|| format!("cannot listen on {at} (haListenPort)"))?,
        )
    } else {
        None
    };
    let ha_port = match &ha_listener {
        Some(l) => l.local_addr()?.port(),
        None => cfg.store.ha_listen_port,
    };

    // Name servers: configured ones, or an embedded one.
    let mut namesrv = None;
    let mut namesrv_addrs = b.namesrv_addrs();
    if namesrv_addrs.is_empty() && !opts.no_embedded_namesrv {
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
        namesrv_addrs = vec![reach.to_string()];
        namesrv = Some(h);
    }

    let settings = MetaSettings {
        cluster: b.broker_cluster_name.clone(),
        broker_name: b.broker_name.clone(),
        auto_create_topic: b.auto_create_topic_enable,
        auto_create_group: b.auto_create_subscription_group,
        default_topic_queue_nums: b.default_topic_queue_nums,
        cluster_topic_enable: b.cluster_topic_enable,
        broker_topic_enable: b.broker_topic_enable,
        offset_flush_interval: Duration::from_millis(b.flush_consumer_offset_interval_ms.max(100)),
    };
    let mut meta = Metadata::load(cfg.store.config_dir(), settings, clock.clone())?;
    let meta_view = meta.view();
    let topics_view = meta_view.clone();
    // The request path's settings, here for `brokerPermission` in the registrations too (an
    // `updateBrokerConfig` replaces them).
    let settings = Arc::new(arc_swap::ArcSwap::from_pointee(
        ProcessorSettings::from_config(&cfg),
    ));
    let reg_settings = settings.clone();
    let identity = BrokerIdentity {
        cluster: b.broker_cluster_name.clone(),
        broker_name: b.broker_name.clone(),
        broker_id: b.broker_id,
        broker_addr: store_host.to_string(),
        ha_server_addr: SocketAddr::new(ha_ip, ha_port).to_string(),
    };
    // A slave's master: haMasterAddress, else what the name servers say (kept up to date by
    // the registrar).
    let master_ha: Arc<arc_swap::ArcSwapOption<String>> = Arc::new(arc_swap::ArcSwapOption::new(
        cfg.store.ha_master_address.clone().map(Arc::new),
    ));
    let mut reg = Registrar::new(
        namesrv_addrs.clone(),
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
    let master_addr: Arc<arc_swap::ArcSwapOption<String>> =
        Arc::new(arc_swap::ArcSwapOption::empty());
    if cfg.store.broker_role.is_slave() {
        let ha = cfg
            .store
            .ha_master_address
            .is_none()
            .then(|| master_ha.clone());
        reg = reg.with_master(ha, master_addr.clone());
    }
    let registrar = start_on(None, reg);
    // What the log says of replication: the port a master serves, or "none".
    let ha_addr = if cfg.store.broker_role.is_master() {
        SocketAddr::new(ha_ip, ha_port).to_string()
    } else {
        "none".to_string()
    };
    let ha_arb = actix::Arbiter::new();
    crate::metered::name_thread(&ha_arb.handle(), "ha");
    let ha_params = crate::ha::HaParams::from_config(&cfg.store);
    match ha_listener {
        Some(l) => {
            let (view, state) = (store.reader().commit_log().clone(), store.ha().clone());
            ha_arb.spawn(crate::ha::serve_master(l, view, state, ha_params));
        }
        None => {
            let addr: crate::ha::MasterAddr =
                Arc::new(move || master_ha.load_full().map(|a| (*a).clone()));
            ha_arb.spawn(crate::ha::run_slave(store.clone(), addr, ha_params));
        }
    }
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
        ha_arb.spawn(slave_sync::run(
            addr,
            meta_ref.clone(),
            store.clone(),
            slave_sync::first_delay(),
        ));
    }
    std::mem::forget(meta_arb); // lives as long as the process; stopped with the system

    let registry = ClientRegistry::new();
    let subs = registry.view();
    let clients = start_on(None, registry);
    let pull_hold = start_on(None, PullHold::new(store.reader().clone()));
    let _ = hold_cell.set(pull_hold.clone());

    let metrics = BrokerMetrics::new(BrokerLabels {
        cluster: b.broker_cluster_name.clone(),
        broker_name: b.broker_name.clone(),
    });
    let scrape = ScrapeSources {
        metrics: metrics.clone(),
        reader: store.reader().clone(),
        state: store.state().clone(),
        store_root: root.clone(),
        meta: meta_ref.clone(),
        meta_view: meta_view.clone(),
        clients: clients.clone(),
        pool: store.write_buffer_pool().cloned(),
        ha: cfg
            .store
            .broker_role
            .is_master()
            .then(|| store.ha().clone()),
    };
    let factory = BrokerProcessorFactory {
        store: store.clone(),
        reader: store.reader().clone(),
        meta: meta_ref.clone(),
        meta_view,
        clients,
        subs,
        pull_hold,
        settings: settings.clone(),
        live: Arc::new(admin::LiveConfig::new(
            cfg.clone(),
            settings,
            clock.now_ms(),
        )),
        rates: Default::default(),
        store_host,
        boot_ms: clock.now_ms(),
        stats: Default::default(),
        metrics,
    };
    let threads = match b.server_selector_threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n as usize,
    };
    let connections = ConnectionThreads::start(threads, Arc::new(factory));
    let accept = actix_rt::spawn(connections.serve(listener));
    let metrics_server = MetricsServer::start(metrics_listener, ip, scrape)?;
    registrar.try_notify(RegisterNow(None));
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        broker = %store_host,
        name_servers = %namesrv_addrs.join(";"),
        embedded_namesrv = namesrv.is_some(),
        metrics = %metrics_server.addr,
        ha = %ha_addr,
        store = %root.display(),
        connection_threads = threads,
        flush = ?cfg.store.flush_disk_type,
        role = ?cfg.store.broker_role,
        startup_ms = started.elapsed().as_millis() as u64,
        recovery_ms = store.report.recovery_ms,
        "broker started"
    );
    Ok(BrokerHandle {
        broker_addr: store_host,
        metrics_addr: Some(metrics_server.addr),
        metrics: Some(metrics_server),
        namesrv,
        namesrv_addrs,
        ha_addr: cfg
            .store
            .broker_role
            .is_master()
            .then(|| SocketAddr::new(ha_ip, ha_port)),
        store,
        meta: meta_ref,
        registrar,
        accept,
        ha: ha_arb,
        connections,
        root,
        _lock: lock,
    })
}

impl BrokerHandle {
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
