//! The HTTP side of `/metrics`: [`MetricsServer`] binds `metricsPromExporterPort` at start (a
//! port conflict fails the broker's start) and serves `GET /metrics` from one actix-web worker.
//!
//! In: HTTP scrapes. Out: [`ScrapeSources::render`]'s page, `text/plain` in the Prometheus text
//! format. The broker owns shutdown ([`MetricsServer::stop`]), so no signal handling here.

use std::net::SocketAddr;

use actix_web::{web, App, HttpResponse, HttpServer};

use super::scrape::ScrapeSources;

/// A running `/metrics` endpoint.
pub struct MetricsServer {
    /// Where scrapers reach it (the bound port on the advertised address).
    pub addr: SocketAddr,
    handle: actix_web::dev::ServerHandle,
}

impl MetricsServer {
    /// Binds `bind` now (so a port conflict fails the broker's start with a clear error).
    pub fn bind(bind: SocketAddr) -> anyhow::Result<std::net::TcpListener> {
        use anyhow::Context as _;
        let l = std::net::TcpListener::bind(bind)
            .with_context(|| format!("cannot listen on {bind} (metricsPromExporterPort)"))?;
        l.set_nonblocking(true)?;
        Ok(l)
    }

    /// Serves `/metrics` on `listener` (one worker thread; the broker owns shutdown, so no signal
    /// handling). `advertised` replaces an unspecified bound address in [`MetricsServer::addr`].
    pub fn start(
        listener: std::net::TcpListener,
        advertised: std::net::IpAddr,
        sources: ScrapeSources,
    ) -> anyhow::Result<MetricsServer> {
        let local = listener.local_addr()?;
        let addr = if local.ip().is_unspecified() {
            SocketAddr::new(advertised, local.port())
        } else {
            local
        };
        let data = web::Data::new(sources);
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .route("/metrics", web::get().to(scrape))
        })
        .workers(1)
        .disable_signals()
        .shutdown_timeout(5)
        .listen(listener)?
        .run();
        let handle = server.handle();
        actix_rt::spawn(async move {
            if let Err(e) = server.await {
                tracing::error!(error = %e, "the metrics endpoint failed");
            }
        });
        tracing::info!(%addr, "metrics endpoint listening (GET /metrics)");
        Ok(MetricsServer { addr, handle })
    }

    /// Stops accepting scrapes and waits (at most 5 s) for the ones in flight.
    pub async fn stop(&self) {
        self.handle.stop(true).await;
    }
}

async fn scrape(src: web::Data<ScrapeSources>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(prometheus::TEXT_FORMAT)
        .body(src.render().await)
}
