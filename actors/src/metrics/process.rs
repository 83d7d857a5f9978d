//! The process series of `/metrics`, read from `/proc/self` at scrape time through
//! [`super::proc_stat`]: the Prometheus process-collector names and ActorMQ's per-thread-name CPU
//! (see [`super`] for the list and why the prometheus crate's own `process` feature is not used).
//!
//! In: a scrape. Out: metric families, process-wide, with no broker labels.
//! *Invariant:* what `/proc` cannot give is left out of the page (logged at debug), never a
//! failed scrape.

use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{Counter, CounterVec, Gauge, Opts, Registry};

use super::proc_stat;
use crate::metered;

/// The process series (see the module docs of [`super`]), from `/proc/self` now. A value `/proc` cannot give
/// is left out of the page (and logged at debug), never a failed scrape.
pub fn process_families() -> Vec<MetricFamily> {
    let registry = Registry::new();
    let add = |c: Box<dyn Collector>| {
        registry
            .register(c)
            .expect("process metric registered once per scrape");
    };
    let gauge = |name: &str, help: &str, v: f64| {
        let g = Gauge::new(name, help).expect("valid metric");
        g.set(v);
        add(Box::new(g));
    };
    match proc_stat::read_stat(&proc_stat::proc_dir(None).join("stat")) {
        Ok(s) => {
            let c = Counter::new(
                "process_cpu_seconds_total",
                "Total user and system CPU time spent in seconds.",
            )
            .expect("valid metric");
            c.inc_by(s.cpu_seconds());
            add(Box::new(c));
            gauge(
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                s.rss_bytes() as f64,
            );
            gauge(
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                s.vsize as f64,
            );
            gauge(
                "process_threads",
                "Number of OS threads in the process.",
                s.num_threads as f64,
            );
            match proc_stat::boot_time() {
                Ok(boot) => gauge(
                    "process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds.",
                    boot as f64 + s.starttime as f64 / proc_stat::clock_ticks() as f64,
                ),
                Err(e) => tracing::debug!(error = %e, "metrics: no boot time"),
            }
        }
        Err(e) => tracing::debug!(error = %e, "metrics: no process stat"),
    }
    match proc_stat::open_fds(None) {
        Ok(n) => gauge(
            "process_open_fds",
            "Number of open file descriptors.",
            n as f64,
        ),
        Err(e) => tracing::debug!(error = %e, "metrics: no fd count"),
    }
    if let Some(n) = proc_stat::max_fds() {
        gauge(
            "process_max_fds",
            "Maximum number of open file descriptors.",
            n as f64,
        );
    }
    match proc_stat::threads_by_name(None) {
        Ok(threads) => {
            let probes = metered::snapshot();
            let known: Vec<&str> = probes.iter().map(|p| p.name).collect();
            let cpu = CounterVec::new(
                Opts::new(
                    "actormq_thread_cpu_seconds_total",
                    "User and system CPU time of the live threads of this name, seconds (a \
                     thread's time leaves the sum when it exits)",
                ),
                &["thread"],
            )
            .expect("valid metric");
            for (comm, secs) in &threads {
                cpu.with_label_values(&[proc_stat::full_thread_name(comm, &known)])
                    .inc_by(*secs);
            }
            add(Box::new(cpu));
        }
        Err(e) => tracing::debug!(error = %e, "metrics: no thread list"),
    }
    registry.gather()
}
