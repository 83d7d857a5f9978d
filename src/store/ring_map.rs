//! `RingMap`: a long run of virtual memory backed by a short ring of physical pages — the write
//! buffer of a CommitLog file when `transientStorePoolEnable` is off (see
//! [`TransientStorePool::new_rings`](super::transient_pool::TransientStorePool::new_rings)).
//!
//! What it owns: one `memfd` of `ring` bytes, mapped shared at every `ring`-sized window of a
//! reserved span of `len` bytes. Byte `p` of the span *is* byte `p % ring` of the memfd, so a
//! buffer indexed by a file position (what `MappedFile` and the writer expect of a write buffer)
//! costs `ring` bytes of memory, not a file's worth, and a record that straddles a window boundary
//! is still contiguous in virtual memory (the next window starts over at the memfd's first byte).
//!
//! The rule that makes the aliasing safe is the user's: bytes `[committed, wrote)` must span at
//! most `ring` bytes, or the writer overwrites bytes not yet copied into the file. The CommitLog
//! writer commits before it would cross that line (`MappedFile::ring_room`), and after every batch
//! (in SYNC_FLUSH, for appends that wait for the flush, after every burst of its mailbox).
//!
//! The ring's pages are allocated at creation and stay resident (the memfd keeps them), but each
//! window needs its own page-table entries: only the first window's are made at creation (a whole
//! span's would cost a 1 GiB file 262,144 entries before its first byte). The owner maps the rest
//! ahead of its writes with [`RingMap::populate`] (`MappedFile::ring_room`), a few hundred entries
//! per call, instead of one page fault per 4 KiB in each window on its first pass (0.27 faults per
//! 1 KiB message measured). Behind the write it drops them again ([`RingMap::unmap`]): the kernel
//! counts a shared page once per mapping in the resident set (`RssShmem`), so a ring whose windows
//! all kept their entries showed as a whole file's worth (1 GiB) of memory for 16 MiB used.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const PAGE: usize = 4096;
const MADV_POPULATE_WRITE: libc::c_int = 23;

pub struct RingMap {
    base: *mut u8,
    len: usize,
    ring: usize,
}

// SAFETY: the mapping is plain memory owned by this value; who writes which bytes is decided by
// the lease protocol of the pool and the positions of `MappedFile`.
unsafe impl Send for RingMap {}
// SAFETY: as above.
unsafe impl Sync for RingMap {}

impl RingMap {
    /// Maps `len` bytes (rounded up to pages) backed by a ring of `ring` bytes (rounded up to
    /// pages, at most the span).
    pub fn new(len: usize, ring: usize) -> io::Result<RingMap> {
        let len = len.max(1).next_multiple_of(PAGE);
        let ring = ring.max(1).next_multiple_of(PAGE).min(len);
        // SAFETY: plain syscalls; every result is checked, and the fd is owned right away.
        let fd = unsafe { libc::memfd_create(c"actormq-write-ring".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by memfd_create and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: plain syscall on our fd.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), ring as libc::off_t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // Reserve the span first (no access, no memory), then lay the windows over it.
        // SAFETY: a fresh anonymous mapping at an address of the kernel's choice.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let map = RingMap {
            base: base.cast(),
            len,
            ring,
        };
        let mut off = 0;
        while off < len {
            let w = ring.min(len - off);
            // SAFETY: MAP_FIXED over a part of the span reserved above (owned by `map`, which
            // unmaps the whole span on drop, error paths included).
            let p = unsafe {
                libc::mmap(
                    map.base.add(off).cast(),
                    w,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED | libc::MAP_FIXED,
                    fd.as_raw_fd(),
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            off += ring;
        }
        // Every page of the ring allocated now, and the first window's entries made. Best effort
        // (an older kernel without POPULATE_WRITE faults the pages on first use instead).
        map.populate(0, ring);
        // The windows keep the memfd alive; the fd itself is no longer needed.
        drop(fd);
        Ok(map)
    }

    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.base
    }

    /// Maps the pages of `[start, start + len)` of the span (clamped to it; every page it
    /// touches) so that writing them takes no page fault. Never changes content: pages already
    /// mapped are left alone, so it may run while the owner writes elsewhere in the span. False
    /// when the kernel lacks `MADV_POPULATE_WRITE` (5.14+; the pages then fault on first use).
    pub fn populate(&self, start: usize, len: usize) -> bool {
        let end = start
            .saturating_add(len)
            .min(self.len)
            .next_multiple_of(PAGE);
        self.advise(start & !(PAGE - 1), end, MADV_POPULATE_WRITE)
    }

    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Drops the page-table entries of `[start, start + len)` of the span (clamped; the pages
    /// wholly inside it). The bytes stay in the ring (the memfd holds them): a later access maps
    /// them again, unchanged. For the resident set's sake only (module docs).
    pub fn unmap(&self, start: usize, len: usize) -> bool {
        let end = start.saturating_add(len).min(self.len) & !(PAGE - 1);
        // On a shared mapping MADV_DONTNEED removes mappings, never the memfd's pages.
        self.advise(start.next_multiple_of(PAGE), end, libc::MADV_DONTNEED)
    }

    /// `madvise(advice)` over the page-aligned `[start, end)`, clamped to the span; true when
    /// there is nothing to do.
    fn advise(&self, start: usize, end: usize, advice: libc::c_int) -> bool {
        let end = end.min(self.len);
        if end <= start {
            return true;
        }
        // SAFETY: advice on a page-aligned sub-range of the span this value owns (callers align
        // `start`; `len` is a multiple of the page).
        unsafe { libc::madvise(self.base.add(start).cast(), end - start, advice) == 0 }
    }

    /// Bytes of memory behind the span: how far apart two positions may be before they alias.
    pub fn ring(&self) -> usize {
        self.ring
    }
}

impl Drop for RingMap {
    fn drop(&mut self) {
        // SAFETY: the span was mapped by `new` and nothing refers to it after drop (leases hold
        // the pool, which holds this map).
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_a_ring_apart_are_the_same_byte_and_a_straddling_write_is_contiguous() {
        let m = RingMap::new(10 * PAGE, 4 * PAGE).unwrap();
        assert_eq!((m.len(), m.ring()), (10 * PAGE, 4 * PAGE));
        // SAFETY: the span is `len` bytes of writable memory owned by the test.
        let s = unsafe { std::slice::from_raw_parts_mut(m.as_mut_ptr(), m.len()) };
        s[5] = 1;
        assert_eq!((s[4 * PAGE + 5], s[8 * PAGE + 5]), (1, 1));
        // A write across the window boundary at 4 pages lands at the ring's end and start.
        s[4 * PAGE - 2..4 * PAGE + 2].copy_from_slice(&[7, 8, 9, 10]);
        assert_eq!(&s[4 * PAGE - 2..4 * PAGE], &[7, 8]);
        assert_eq!(&s[..2], &[9, 10]);
        assert_eq!(
            &s[8 * PAGE..8 * PAGE + 2],
            &[9, 10],
            "the last (partial) window too"
        );
    }

    /// Minor page faults this thread has taken so far.
    fn minor_faults() -> i64 {
        // SAFETY: getrusage fills the struct it is given.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) }, 0);
        u.ru_minflt
    }

    #[test]
    fn populate_maps_a_later_window_so_writing_it_takes_no_fault_and_changes_no_byte() {
        let m = RingMap::new(16 * PAGE, 4 * PAGE).unwrap();
        // SAFETY: the span is `len` bytes of writable memory owned by the test.
        let s = unsafe { std::slice::from_raw_parts_mut(m.as_mut_ptr(), m.len()) };
        s[PAGE + 3] = 9;
        // Window 1 (pages 4..8) not populated: each page written faults once.
        let f0 = minor_faults();
        s[4 * PAGE] = 1;
        s[6 * PAGE] = 1;
        let unpopulated = minor_faults() - f0;
        if !m.populate(8 * PAGE + 100, 2 * PAGE) {
            return; // a kernel without MADV_POPULATE_WRITE: nothing to check
        }
        let f1 = minor_faults();
        s[8 * PAGE] = 2;
        s[9 * PAGE + 7] = 2;
        let populated = minor_faults() - f1;
        assert_eq!((unpopulated, populated), (2, 0));
        // The populated window shows the ring's bytes, unchanged.
        assert_eq!(s[9 * PAGE + 3], 9);
        // Unmapped, the pages fault back in on the next write (a read fault would map its
        // neighbours too: the kernel's fault-around) and keep their bytes.
        assert!(m.unmap(8 * PAGE, 2 * PAGE));
        let f2 = minor_faults();
        s[8 * PAGE + 1] = 3;
        s[9 * PAGE + 8] = 3;
        assert_eq!(minor_faults() - f2, 2);
        assert_eq!((s[8 * PAGE], s[9 * PAGE + 3], s[9 * PAGE + 7]), (2, 9, 2));
        // Out of range or empty: nothing to do, no error.
        assert!(m.unmap(20 * PAGE, PAGE));
        assert!(m.populate(20 * PAGE, PAGE));
        assert!(m.populate(PAGE, 0));
    }

    #[test]
    fn a_ring_larger_than_the_span_is_the_span() {
        let m = RingMap::new(3 * PAGE + 1, 64 * PAGE).unwrap();
        assert_eq!((m.len(), m.ring()), (4 * PAGE, 4 * PAGE));
        // SAFETY: as above.
        let s = unsafe { std::slice::from_raw_parts_mut(m.as_mut_ptr(), m.len()) };
        s[4 * PAGE - 1] = 3;
        assert_eq!(s[..4 * PAGE - 1].iter().filter(|&&b| b != 0).count(), 0);
    }
}
