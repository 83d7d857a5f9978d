//! `TransientStorePool`: RocketMQ's pool of CommitLog write buffers (`transientStorePoolEnable`).
//!
//! What it owns: `transientStorePoolSize` buffers, each the size of one CommitLog file, page
//! aligned. They are anonymous private mappings, so the memory is committed lazily by the kernel
//! as the writer first touches each page, and stays resident once touched (buffers are reused,
//! never released to the kernel) — a recycled buffer costs the writer no page fault.
//!
//! Calls in: [`TransientStorePool::borrow`] (the CommitLog writer, when it starts writing a new
//! file), [`BufferLease`] dropped or [`BufferLease::release`] (whoever finished with the file —
//! normally the committer once the file is full and fully committed). No lock: each buffer has
//! one `AtomicBool` (free/borrowed); borrowing is a compare-and-swap scan over a handful of slots,
//! so the writer's roll path takes no lock and makes no syscall. Out: a token on the return
//! channel ([`TransientStorePool::returns`]) each time a buffer goes back, so a borrower that
//! found the pool empty blocks on the channel until one does instead of polling.
//!
//! Invariants: a buffer is lent to at most one file at a time (the CAS); a lease returns its
//! buffer exactly once (`release` consumes it, `Drop` covers every other path); a buffer goes
//! back (its flag is free) before its token is sent, so a token never comes before its buffer.
//!
//! Ring pools ([`TransientStorePool::new_rings`]) are ActorMQ's write path when
//! `transientStorePoolEnable` is off: the same leases, but each buffer is a
//! [`RingMap`] — a file-sized span over a few MiB of memory — and the CommitLog writer commits
//! it itself after every batch or SYNC_FLUSH burst (and before the ring would wrap over
//! uncommitted bytes). The writer
//! then never writes through the file's mapping, so flushing the file never write-protects the
//! writer's pages (`msync`'s per-page `folio_mkclean`, a TLB shootdown each, was the whole tail of
//! a send's latency), and the writer never page-faults (the ring stays resident).
//!
//! `mlock` (RocketMQ locks every buffer at start) is deliberately not done: it would commit
//! `size × file size` bytes of RAM up front (5 GiB by default) and usually fails against
//! `RLIMIT_MEMLOCK` anyway; the buffers are never swapped on a machine without swap, and a page
//! touched once stays resident because it is never returned.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, OnceLock};

use memmap2::{MmapOptions, MmapRaw};

use super::ring_map::RingMap;

/// Below this share of free buffers, borrowing logs a warning (RocketMQ warns under 40 %).
const WARN_FREE_PERCENT: usize = 40;

/// RocketMQ's `borrowBuffer` test, `availableBuffers.size() < poolSize * 0.4`, checked after the
/// borrow: `free` buffers of `total` left is low.
pub fn is_low(free: usize, total: usize) -> bool {
    free * 100 < total * WARN_FREE_PERCENT
}

pub struct TransientStorePool {
    buffer_size: usize,
    buffers: Vec<Buffer>,
    /// Buffers currently lent out (for the low-water warning and metrics).
    borrowed: AtomicUsize,
    /// Ring pools: memory behind each buffer.
    ring: Option<usize>,
    /// Where a token goes each time a buffer comes back; set once, by
    /// [`TransientStorePool::returns`].
    returned: OnceLock<SyncSender<()>>,
}

struct Buffer {
    map: Backing,
    free: AtomicBool,
}

enum Backing {
    /// Anonymous mapping: page aligned, zero on first touch, committed lazily.
    Anon(MmapRaw),
    /// A file-sized span over a small ring of memory (ring pools).
    Ring(RingMap),
}

impl Backing {
    fn as_mut_ptr(&self) -> *mut u8 {
        match self {
            Backing::Anon(m) => m.as_mut_ptr(),
            Backing::Ring(r) => r.as_mut_ptr(),
        }
    }
}

impl std::fmt::Debug for TransientStorePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransientStorePool")
            .field("buffers", &self.buffers.len())
            .field("buffer_size", &self.buffer_size)
            .field("available", &self.available())
            .finish()
    }
}

impl TransientStorePool {
    /// Reserves `count` buffers of `buffer_size` bytes (address space only; see module docs).
    pub fn new(count: usize, buffer_size: usize) -> io::Result<Arc<TransientStorePool>> {
        if count == 0 || buffer_size == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "transientStorePoolSize {count} × {buffer_size} bytes: both must be positive"
                ),
            ));
        }
        let mut buffers = Vec::with_capacity(count);
        for _ in 0..count {
            buffers.push(Buffer {
                map: Backing::Anon(MmapRaw::from(MmapOptions::new().len(buffer_size).map_anon().map_err(
                    |e| {
                        io::Error::new(
                            e.kind(),
                            format!(
                                "reserving the TransientStorePool ({count} buffers of {buffer_size} \
                                 bytes, transientStorePoolSize × mappedFileSizeCommitLog): {e}"
                            ),
                        )
                    },
                )?)),
                free: AtomicBool::new(true),
            });
        }
        Ok(Arc::new(TransientStorePool {
            buffer_size,
            buffers,
            borrowed: AtomicUsize::new(0),
            ring: None,
            returned: OnceLock::new(),
        }))
    }

    /// A ring pool (module docs): `count` buffers of `buffer_size` bytes of address space, each
    /// backed by `ring` bytes of memory (rounded up to pages, at most `buffer_size`).
    pub fn new_rings(
        count: usize,
        buffer_size: usize,
        ring: usize,
    ) -> io::Result<Arc<TransientStorePool>> {
        if count == 0 || buffer_size == 0 || ring == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{count} write rings of {ring} bytes for {buffer_size}-byte files"),
            ));
        }
        let mut buffers = Vec::with_capacity(count);
        let mut ring_bytes = ring;
        for _ in 0..count {
            let r = RingMap::new(buffer_size, ring).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("mapping a CommitLog write ring ({ring} bytes): {e}"),
                )
            })?;
            ring_bytes = r.ring();
            buffers.push(Buffer {
                map: Backing::Ring(r),
                free: AtomicBool::new(true),
            });
        }
        Ok(Arc::new(TransientStorePool {
            buffer_size,
            buffers,
            borrowed: AtomicUsize::new(0),
            ring: Some(ring_bytes),
            returned: OnceLock::new(),
        }))
    }

    /// Ring pools: the bytes of memory behind each buffer (module docs).
    pub fn ring_size(&self) -> Option<usize> {
        self.ring
    }

    pub fn buffer_size(&self) -> usize {
        self.buffer_size
    }
    pub fn capacity(&self) -> usize {
        self.buffers.len()
    }
    /// Buffers free right now (RocketMQ's `availableBufferNums`).
    pub fn available(&self) -> usize {
        self.buffers.len() - self.borrowed.load(Ordering::Acquire)
    }

    /// The return channel: a token each time a buffer goes back to the pool, for the one
    /// borrower that waits for buffers (the CommitLog writer, which owns the receiver). A token
    /// says "borrow again", it reserves nothing. The channel holds one token per buffer; a
    /// return that finds it full sends none, as a token is already waiting. `None` once taken.
    pub fn returns(&self) -> Option<Receiver<()>> {
        let (tx, rx) = sync_channel(self.buffers.len());
        self.returned.set(tx).ok().map(|()| rx)
    }

    /// Lends a free buffer, or `None` when every buffer is lent out. Never blocks.
    pub fn borrow(self: &Arc<Self>) -> Option<BufferLease> {
        for (idx, b) in self.buffers.iter().enumerate() {
            if b.free
                .compare_exchange(true, false, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                let lent = self.borrowed.fetch_add(1, Ordering::AcqRel) + 1;
                let free = self.buffers.len() - lent;
                // A ring pool has a buffer or two in use at every roll; nothing to warn about.
                if self.ring.is_none() && is_low(free, self.buffers.len()) {
                    // RocketMQ's words first, so a grep written for a RocketMQ store.log finds it.
                    tracing::warn!(
                        free,
                        total = self.buffers.len(),
                        "TransientStorePool only remain {free} sheets (under 40% free: files \
                         await commit, the committer is behind the writer)"
                    );
                }
                let ptr = b.map.as_mut_ptr();
                return Some(BufferLease {
                    pool: self.clone(),
                    idx,
                    ptr: BufPtr(ptr),
                    returned: AtomicBool::new(false),
                });
            }
        }
        None
    }

    /// Pre-faults `[start, start+len)` of buffer `idx` for writing (`MADV_POPULATE_WRITE`), so the
    /// writer takes no page fault on those pages (`warmMapedFileEnable` with write buffers: the
    /// buffers are what the writer touches). Never changes content — a page already present,
    /// possibly being written by the writer right now, is left alone — so it may run while the
    /// buffer is lent. False when the kernel lacks the advice (nothing else to do then: touching
    /// anonymous memory by reading maps only the shared zero page).
    pub fn prefault(&self, idx: usize, start: usize, len: usize) -> bool {
        let Some(b) = self.buffers.get(idx) else {
            return false;
        };
        // A ring's memory is allocated when it is made; only a window's page-table entries
        // may be missing (see `RingMap::populate`).
        if let Backing::Ring(r) = &b.map {
            return r.populate(start, len);
        }
        let start = start.min(self.buffer_size) & !4095;
        let len = len.min(self.buffer_size - start);
        if len == 0 {
            return true;
        }
        const MADV_POPULATE_WRITE: libc::c_int = 23;
        // SAFETY: advice on a page-aligned sub-range of a mapping the pool owns for its lifetime.
        let rc = unsafe {
            libc::madvise(
                b.map.as_mut_ptr().add(start).cast(),
                len,
                MADV_POPULATE_WRITE,
            )
        };
        rc == 0
    }

    fn give_back(&self, idx: usize) {
        let was_free = self.buffers[idx].free.swap(true, Ordering::AcqRel);
        debug_assert!(!was_free, "a write buffer was returned twice");
        if !was_free {
            self.borrowed.fetch_sub(1, Ordering::AcqRel);
            if let Some(tx) = self.returned.get() {
                // Full: a token is already waiting. Disconnected: no one waits any more.
                let _ = tx.try_send(());
            }
        }
    }
}

/// Raw base pointer of a lent buffer; `Send`/`Sync` because the lease protocol (one borrower, the
/// position rules of `MappedFile`) decides who touches which bytes.
#[derive(Clone, Copy)]
struct BufPtr(*mut u8);
// SAFETY: the pointer targets a mapping owned by the pool, which outlives the lease (the lease
// holds an `Arc` of the pool); concurrent access is ordered by the file's published positions.
unsafe impl Send for BufPtr {}
// SAFETY: as above.
unsafe impl Sync for BufPtr {}

/// One borrowed buffer. Returned to the pool by [`BufferLease::release`] or on drop.
pub struct BufferLease {
    pool: Arc<TransientStorePool>,
    idx: usize,
    ptr: BufPtr,
    /// Set by the first `release`: the buffer goes back exactly once, whoever asks first.
    returned: AtomicBool,
}

impl std::fmt::Debug for BufferLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BufferLease(#{})", self.idx)
    }
}

impl BufferLease {
    pub fn len(&self) -> usize {
        self.pool.buffer_size
    }
    pub fn is_empty(&self) -> bool {
        self.pool.buffer_size == 0
    }
    /// Base of the buffer. Who may touch which bytes is the caller's protocol (see
    /// `MappedFile`): the writer at or beyond its write position, the committer below it.
    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr.0
    }
    /// Hands the buffer back to the pool now (idempotent). The caller guarantees nobody touches
    /// the buffer through this lease afterwards.
    pub fn release(&self) {
        if !self.returned.swap(true, Ordering::AcqRel) {
            self.pool.give_back(self.idx);
        }
    }
    pub fn is_released(&self) -> bool {
        self.returned.load(Ordering::Acquire)
    }
    /// A ring buffer's memory size: positions this far apart share their bytes.
    pub fn ring_size(&self) -> Option<usize> {
        self.pool.ring
    }
    /// Pre-faults `[start, start + len)` of this buffer for writing (see
    /// [`TransientStorePool::prefault`]).
    pub fn prefault(&self, start: usize, len: usize) -> bool {
        self.pool.prefault(self.idx, start, len)
    }
    /// A write ring's `[start, start + len)`: drops the pages' mappings, keeping their bytes
    /// (`RingMap::unmap`). False, and nothing done, for any other buffer (its bytes would go).
    pub fn unmap_ring_pages(&self, start: usize, len: usize) -> bool {
        match &self.pool.buffers[self.idx].map {
            Backing::Ring(r) => r.unmap(start, len),
            Backing::Anon(_) => false,
        }
    }
}

impl Drop for BufferLease {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_is_low_under_40_percent_free_as_in_rocketmq() {
        // RocketMQ: `availableBuffers.size() < poolSize * 0.4`, after the borrow.
        let java = |free: usize, total: usize| (free as f64) < total as f64 * 0.4;
        for total in 1..=20 {
            for free in 0..=total {
                assert_eq!(is_low(free, total), java(free, total), "{free} of {total}");
            }
        }
        // The default pool of 5: the warning starts when one buffer is left.
        assert!(!is_low(2, 5));
        assert!(is_low(1, 5));
    }

    #[test]
    fn borrow_until_empty_then_return_makes_a_buffer_available_again() {
        let pool = TransientStorePool::new(2, 8192).unwrap();
        assert_eq!(pool.available(), 2);
        let a = pool.borrow().expect("first buffer");
        let b = pool.borrow().expect("second buffer");
        assert_eq!(pool.available(), 0);
        assert!(pool.borrow().is_none(), "an empty pool lends nothing");
        assert_ne!(a.as_mut_ptr(), b.as_mut_ptr(), "two leases, two buffers");
        let a_ptr = a.as_mut_ptr();
        a.release();
        assert_eq!(pool.available(), 1);
        let c = pool.borrow().expect("the returned buffer is lent again");
        assert_eq!(c.as_mut_ptr(), a_ptr);
        drop((b, c));
        assert_eq!(pool.available(), 2, "dropping a lease returns its buffer");
    }

    #[test]
    fn buffers_are_page_aligned_file_sized_and_writable() {
        let pool = TransientStorePool::new(1, 3 * 4096).unwrap();
        let l = pool.borrow().unwrap();
        assert_eq!(l.len(), 3 * 4096);
        assert_eq!(l.as_mut_ptr() as usize % 4096, 0);
        // SAFETY: we hold the only lease; the buffer is `len` bytes.
        let s = unsafe { std::slice::from_raw_parts_mut(l.as_mut_ptr(), l.len()) };
        assert!(s.iter().all(|&b| b == 0), "a fresh buffer reads as zeros");
        s[3 * 4096 - 1] = 7;
    }

    #[test]
    fn prefault_keeps_what_a_lent_buffer_holds() {
        let pool = TransientStorePool::new(1, 4 * 4096).unwrap();
        let l = pool.borrow().unwrap();
        // SAFETY: we hold the only lease; the buffer is `len` bytes.
        let s = unsafe { std::slice::from_raw_parts_mut(l.as_mut_ptr(), l.len()) };
        s[5] = 9;
        pool.prefault(0, 0, 4 * 4096);
        assert_eq!(s[5], 9, "written bytes are untouched");
        assert!(
            s[4096..].iter().all(|&b| b == 0),
            "populated pages read as zeros"
        );
        assert!(!pool.prefault(7, 0, 4096), "no such buffer");
    }

    #[test]
    fn a_returned_buffer_wakes_the_borrower_blocked_on_the_return_channel() {
        let pool = TransientStorePool::new(2, 4096).unwrap();
        let returns = pool.returns().expect("the first to ask gets the channel");
        assert!(pool.returns().is_none(), "one receiver per pool");
        let a = pool.borrow().unwrap();
        let b = pool.borrow().unwrap();
        assert!(pool.borrow().is_none());
        assert!(returns.try_recv().is_err(), "nothing came back yet");
        let giver = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            a.release();
            b
        });
        let started = std::time::Instant::now();
        returns
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("a token when the buffer goes back");
        let c = pool
            .borrow()
            .expect("the buffer is free once its token came");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        let b = giver.join().unwrap();
        // The channel holds one token per buffer; returns beyond that send none and never block.
        drop((b, c));
        let again: Vec<_> = (0..2).filter_map(|_| pool.borrow()).collect();
        assert_eq!(again.len(), 2);
        drop(again);
        assert_eq!(
            returns.try_iter().count(),
            2,
            "four returns, two tokens kept"
        );
    }

    #[test]
    fn an_empty_pool_is_refused_with_the_sizes() {
        let e = TransientStorePool::new(0, 4096).unwrap_err();
        assert!(e.to_string().contains("transientStorePoolSize 0"), "{e}");
    }
}
