//! `Threaded`: the runtime's [`ParallelIo`] — how the ConsumeQueue store runs a batch of blocking
//! file-system calls (a new topic's files, two `fsync`s each; every file's `fdatasync` at a
//! crashed start; the syncs of new directories at a flush). The core hands such a batch to its
//! caller instead of starting threads itself (see `actormq_core::store::mapped_file::ParallelIo`);
//! this is the one place the store overlaps them.
//!
//! In: `run(jobs, job)` on the calling actor's thread (the ConsumeQueue builder's, or recovery's
//! before any actor starts). Out: every `job(i)` has returned when `run` does. The calls wait on
//! the device, not the CPU: concurrent ones overlap in the device's queue and, on a journaled
//! file system, share journal commits (the cq_builder module docs have the figures).
//!
//! Invariants: at most [`PARALLEL_IO_THREADS`] calls at once (the caller's thread and scoped
//! helpers that live for this call only); a helper the system refuses to start (a thread limit)
//! is simply not there, as the caller works through the jobs too; a panic in a job is passed on
//! to the caller, as it would be with the calls made in line.

use std::sync::atomic::{AtomicUsize, Ordering};

use actormq_core::store::mapped_file::ParallelIo;

/// Calls in flight at most: the caller's thread and up to this many minus one helpers.
pub const PARALLEL_IO_THREADS: usize = 8;

/// The runtime's [`ParallelIo`] (module docs).
#[derive(Clone, Copy, Debug, Default)]
pub struct Threaded;

impl ParallelIo for Threaded {
    fn run(&self, jobs: usize, job: &(dyn Fn(usize) + Sync)) {
        let helpers = PARALLEL_IO_THREADS.clamp(1, jobs.max(1)) - 1;
        if helpers == 0 {
            (0..jobs).for_each(job);
            return;
        }
        let next = AtomicUsize::new(0);
        let work = || loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= jobs {
                break;
            }
            job(i);
        };
        std::thread::scope(|s| {
            let started: Vec<_> = (0..helpers)
                .filter_map(|_| {
                    std::thread::Builder::new()
                        .name("parallel-io".into())
                        .spawn_scoped(s, work)
                        .ok()
                })
                .collect();
            work();
            for h in started {
                // A helper panics only if `job` does: pass it on, as the inline path would.
                if let Err(p) = h.join() {
                    std::panic::resume_unwind(p);
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actormq_core::store::mapped_file::map_jobs;
    use std::sync::atomic::AtomicUsize;
    use std::time::{Duration, Instant};

    #[test]
    fn every_job_runs_once_and_results_come_back_in_order() {
        let jobs: Vec<u64> = (0..1000).collect();
        let out = map_jobs(&Threaded, &jobs, |j| j * 2);
        assert_eq!(out, jobs.iter().map(|j| j * 2).collect::<Vec<_>>());
        assert_eq!(map_jobs(&Threaded, &jobs[..1], |j| j + 1), vec![1]);
        assert!(map_jobs(&Threaded, &jobs[..0], |j| *j).is_empty());
    }

    #[test]
    fn blocking_calls_overlap_on_up_to_eight_threads() {
        let running = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let jobs: Vec<u32> = (0..32).collect();
        let started = Instant::now();
        map_jobs(&Threaded, &jobs, |_| {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            // A call that waits, as an fsync does.
            std::thread::sleep(Duration::from_millis(20));
            running.fetch_sub(1, Ordering::SeqCst);
        });
        let most = most.load(Ordering::SeqCst);
        assert!(most > 1, "the calls overlapped");
        assert!(most <= PARALLEL_IO_THREADS, "{most} calls at once");
        assert!(
            started.elapsed() < Duration::from_millis(32 * 20),
            "faster than one after another"
        );
    }

    #[test]
    fn a_panicking_job_panics_the_caller() {
        let jobs: Vec<u32> = (0..16).collect();
        let r = std::panic::catch_unwind(|| {
            map_jobs(&Threaded, &jobs, |&j| {
                assert!(j != 11, "job 11 fails");
                j
            })
        });
        assert!(r.is_err());
    }
}
