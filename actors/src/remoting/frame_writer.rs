//! [`FrameWriter`]: a server connection's outgoing frames, written to its socket with vectored
//! writes (`writev`), so that body parts — a PULL's records, slices of the mapped CommitLog —
//! go from where they lie to the socket without a copy in user space.
//!
//! Owns: the socket's write half and the bytes queued for it. In: [`FrameWriter::write`] from
//! the connection's actor (its thread). Out: bytes to the socket; a write error to the actor's
//! `WriteHandler` (the connection closes), as actix's `FramedWrite` did before it, whose
//! structure this keeps: one future spawned on the actor's context writes whatever is queued
//! whenever it is woken, so the replies of one turn of the actor leave in one system call.
//!
//! Invariants:
//! * Bytes leave in the order their frames were written: the queue is `chunks`, then `buf`. A
//!   frame's leading words, header and `body` are encoded into `buf`
//!   (`codec::encode_frame_head`); a frame with `body_parts` first moves `buf` (its own head and
//!   every frame before it) to the end of `chunks` and appends its parts after it.
//! * A frame without parts costs what it did: encoded into `buf` and written with one `write`
//!   (vectored only while parts are queued).
//! * A part is never copied: its `Bytes` is written from where it lies and dropped once the
//!   socket took all of it (a mapped part then lets go of its file; see
//!   `actormq_core::store::reader::mapped_bytes` for why its bytes cannot change meanwhile).
//! * Like `FramedWrite` over a tokio socket (which answers `Pending`, never `WouldBlock`), the
//!   queue is not bounded here: a connection keeps reading requests while its peer reads slowly.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use actix::fut::ActorFuture;
use actix::io::WriteHandler;
use actix::{Actor, AsyncContext, Running};
use actormq_core::protocol::codec::encode_frame_head;
use actormq_core::protocol::command::RemotingCommand;
use bytes::{Buf, Bytes, BytesMut};
use tokio::io::AsyncWrite;

/// Iovecs handed to one `writev`: three PULL answers of 32 records (33 chunks each: the head,
/// then the records); Linux takes up to 1024.
const MAX_IOVECS: usize = 128;

/// The bytes queued for a socket, in order: `chunks`, then `buf`.
#[derive(Default)]
pub(crate) struct Queue {
    /// Frozen heads and body parts, oldest first; the front one may be partly written.
    chunks: VecDeque<Bytes>,
    /// Frames (or a head whose parts are not queued yet) encoded after the last chunk.
    buf: BytesMut,
}

impl Queue {
    pub(crate) fn is_empty(&self) -> bool {
        self.chunks.is_empty() && self.buf.is_empty()
    }

    /// Queues `cmd`'s frame: the same bytes as `codec::encode_frame`, parts not copied.
    pub(crate) fn push(&mut self, cmd: RemotingCommand) {
        encode_frame_head(&cmd, &mut self.buf);
        if cmd.body_parts.is_empty() {
            return;
        }
        self.chunks.push_back(self.buf.split().freeze());
        self.chunks
            .extend(cmd.body_parts.into_iter().filter(|p| !p.is_empty()));
    }

    /// One write of the front of the queue: `write` while only `buf` holds bytes, `writev` of up
    /// to [`MAX_IOVECS`] chunks (and `buf`, if they all fit) otherwise. What the socket took is
    /// dropped from the queue.
    pub(crate) fn poll_write_some<W: AsyncWrite + Unpin>(
        &mut self,
        io: &mut W,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<usize>> {
        let r = if self.chunks.is_empty() {
            Pin::new(io).poll_write(cx, &self.buf)
        } else {
            let mut iov = [IoSlice::new(&[]); MAX_IOVECS];
            let mut n = 0;
            for c in self.chunks.iter().take(MAX_IOVECS) {
                iov[n] = IoSlice::new(c);
                n += 1;
            }
            if n < MAX_IOVECS && !self.buf.is_empty() {
                iov[n] = IoSlice::new(&self.buf);
                n += 1;
            }
            Pin::new(io).poll_write_vectored(cx, &iov[..n])
        };
        if let Poll::Ready(Ok(n)) = r {
            self.consume(n);
        }
        r
    }

    /// Drops the first `n` queued bytes (written).
    fn consume(&mut self, mut n: usize) {
        while n > 0 {
            match self.chunks.front_mut() {
                Some(c) if c.len() <= n => {
                    n -= c.len();
                    self.chunks.pop_front();
                }
                Some(c) => {
                    c.advance(n);
                    n = 0;
                }
                None => {
                    // A socket never reports more than it was given; `min` keeps a broken
                    // writer from panicking the connection's thread.
                    let n = n.min(self.buf.len());
                    self.buf.advance(n);
                    return;
                }
            }
        }
    }
}

struct Shared<T> {
    io: T,
    queue: Queue,
    /// The writing future's waker, taken by the next [`FrameWriter::write`].
    task: Option<Waker>,
}

/// Writes [`RemotingCommand`] frames to `T` from a future spawned on an actor's context.
pub struct FrameWriter<T>(Rc<RefCell<Shared<T>>>);

impl<T: AsyncWrite + Unpin + 'static> FrameWriter<T> {
    /// Spawns the writing future on `ctx`; a write error goes to `A`'s [`WriteHandler`].
    pub fn new<A, E>(io: T, ctx: &mut A::Context) -> FrameWriter<T>
    where
        A: Actor + WriteHandler<E>,
        A::Context: AsyncContext<A>,
        E: From<io::Error> + 'static,
    {
        let shared = Rc::new(RefCell::new(Shared {
            io,
            queue: Queue::default(),
            task: None,
        }));
        ctx.spawn(WriterFut::<T, E> {
            shared: shared.clone(),
            error: std::marker::PhantomData,
        });
        FrameWriter(shared)
    }

    /// Queues `cmd`'s frame; it is written once the actor's current turn ends.
    pub fn write(&mut self, cmd: RemotingCommand) {
        let mut s = self.0.borrow_mut();
        s.queue.push(cmd);
        if let Some(task) = s.task.take() {
            task.wake();
        }
    }
}

struct WriterFut<T, E> {
    shared: Rc<RefCell<Shared<T>>>,
    error: std::marker::PhantomData<fn() -> E>,
}

impl<T, E, A> ActorFuture<A> for WriterFut<T, E>
where
    T: AsyncWrite + Unpin + 'static,
    E: From<io::Error> + 'static,
    A: Actor + WriteHandler<E>,
    A::Context: AsyncContext<A>,
{
    type Output = ();

    fn poll(
        self: Pin<&mut Self>,
        act: &mut A,
        ctx: &mut A::Context,
        task: &mut Context<'_>,
    ) -> Poll<()> {
        let mut guard = self.shared.borrow_mut();
        let s = &mut *guard;
        s.task = None;
        while !s.queue.is_empty() {
            let failed = match s.queue.poll_write_some(&mut s.io, task) {
                Poll::Ready(Ok(0)) => Some(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "failed to write frame to transport",
                )),
                Poll::Ready(Ok(_)) => None,
                Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::Interrupted => None,
                Poll::Ready(Err(e)) => Some(e),
                Poll::Pending => return Poll::Pending,
            };
            if let Some(e) = failed {
                if act.error(e.into(), ctx) == Running::Stop {
                    act.finished(ctx);
                    return Poll::Ready(());
                }
                // The handler chose to go on: what could not be written is dropped, or the
                // same error would come back at once.
                s.queue = Queue::default();
            }
        }
        match Pin::new(&mut s.io).poll_flush(task) {
            Poll::Ready(Ok(())) => {}
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Err(e)) => {
                if act.error(e.into(), ctx) == Running::Stop {
                    act.finished(ctx);
                    return Poll::Ready(());
                }
            }
        }
        s.task = Some(task.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actormq_core::protocol::codec::encode_frame;
    use actormq_core::protocol::command::SerializeType;

    /// A socket that takes at most `max` bytes per write and is not ready every third call, and
    /// counts the calls of each kind.
    struct Slow {
        out: Vec<u8>,
        max: usize,
        calls: usize,
        writes: usize,
        writevs: usize,
    }

    impl AsyncWrite for Slow {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.writes += 1;
            self.take(cx, &[IoSlice::new(buf)])
        }
        fn poll_write_vectored(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            self.writevs += 1;
            self.take(cx, bufs)
        }
        fn is_write_vectored(&self) -> bool {
            true
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    impl Slow {
        fn new(max: usize) -> Slow {
            Slow {
                out: Vec::new(),
                max,
                calls: 0,
                writes: 0,
                writevs: 0,
            }
        }
        fn take(&mut self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
            self.calls += 1;
            if self.calls % 3 == 0 {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            let mut left = self.max;
            let mut n = 0;
            for b in bufs {
                let take = b.len().min(left);
                self.out.extend_from_slice(&b[..take]);
                (left, n) = (left - take, n + take);
                if left == 0 {
                    break;
                }
            }
            Poll::Ready(Ok(n))
        }
    }

    fn frames() -> Vec<RemotingCommand> {
        let req = RemotingCommand::new_request(11).with_opaque(5);
        let small = RemotingCommand::response_to(&req, 0, None).with_body(&b"small body"[..]);
        let parts: Vec<Bytes> = (0..150u8)
            .map(|i| Bytes::from(vec![i; 1 + usize::from(i) * 7]))
            .collect();
        let pull = RemotingCommand::response_to(&req, 0, Some("FOUND".into()))
            .with_ext("nextBeginOffset", "150")
            .with_body_parts(parts.clone());
        let binary = pull
            .clone()
            .with_serialize_type(SerializeType::RocketMq)
            .with_body(&b"before the parts"[..])
            .with_body_parts(vec![Bytes::new(), parts[3].clone(), Bytes::new()]);
        vec![
            small.clone(),
            pull.clone(),
            small.clone(),
            binary,
            pull,
            small,
        ]
    }

    /// Whatever the socket takes per call, the bytes that leave are the frames as
    /// `encode_frame` copies them, in order.
    #[test]
    fn the_bytes_written_are_encode_frame_s_in_order() {
        let mut golden = BytesMut::new();
        for f in frames() {
            encode_frame(&f, &mut golden);
        }
        for max in [1, 7, 100, 1199, 4096, 1 << 20] {
            let mut q = Queue::default();
            for f in frames() {
                q.push(f);
            }
            let mut io = Slow::new(max);
            let waker = futures_util::task::noop_waker();
            let mut cx = Context::from_waker(&waker);
            while !q.is_empty() {
                let _ = q.poll_write_some(&mut io, &mut cx);
                assert!(io.calls < 10_000_000, "no progress with max {max}");
            }
            assert_eq!(io.out, golden.to_vec(), "max {max}");
            assert!(io.writevs > 0, "max {max}: parts go out with writev");
        }
    }

    /// A PULL answer queued behind a slow socket while retention deletes the CommitLog file its
    /// records lie in: the queued parts keep the file mapped, and the bytes that leave are the
    /// records as they were read.
    #[test]
    fn records_queued_while_retention_deletes_their_file_leave_intact() {
        use actormq_core::store::mapped_file::Warm;
        use actormq_core::store::mapped_file_queue::MappedFileQueue;
        use actormq_core::store::reader::mapped_bytes;
        let dir = tempfile::tempdir().unwrap();
        let q = MappedFileQueue::load(dir.path(), 64 * 1024).unwrap();
        let first = q.create_and_push(0, Warm::No).unwrap();
        let records: Vec<Vec<u8>> = (0..32u8).map(|i| vec![i; 1199]).collect();
        let all = records.concat();
        unsafe { first.write_slice(0, all.len()).copy_from_slice(&all) };
        first.publish_wrote(64 * 1024);
        q.create_and_push(64 * 1024, Warm::No).unwrap();
        let view = q.view();
        let parts: Vec<Bytes> = (0..32u64)
            .map(|i| mapped_bytes(view.read(i * 1199, 1199).unwrap()))
            .collect();
        let req = RemotingCommand::new_request(11).with_opaque(3);
        let reply = RemotingCommand::response_to(&req, 0, Some("FOUND".into()))
            .with_ext("nextBeginOffset", "32")
            .with_body_parts(parts);
        let mut golden = BytesMut::new();
        encode_frame(
            &reply.clone().with_body_parts(Vec::new()).with_body(all),
            &mut golden,
        );

        let mut queue = Queue::default();
        queue.push(reply);
        let mut io = Slow::new(1000);
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let _ = queue.poll_write_some(&mut io, &mut cx); // part of it leaves before the delete
        let path = first.path().to_path_buf();
        drop(first);
        assert_eq!(q.delete_files(&q.files()[..1]).unwrap(), 1);
        assert!(!path.exists());
        while !queue.is_empty() {
            let _ = queue.poll_write_some(&mut io, &mut cx);
        }
        assert!(
            io.out == golden[..],
            "the bytes sent are the records as read"
        );
    }

    /// A frame without parts, with nothing else queued, goes out with a plain write.
    #[test]
    fn a_frame_without_parts_is_one_plain_write() {
        let req = RemotingCommand::new_request(10).with_opaque(9);
        let reply = RemotingCommand::response_to(&req, 0, None).with_body(&b"ok"[..]);
        let mut q = Queue::default();
        q.push(reply.clone());
        let mut io = Slow::new(usize::MAX);
        let waker = futures_util::task::noop_waker();
        let _ = q.poll_write_some(&mut io, &mut Context::from_waker(&waker));
        assert!(q.is_empty());
        assert_eq!((io.writes, io.writevs), (1, 0));
        let mut golden = BytesMut::new();
        encode_frame(&reply, &mut golden);
        assert_eq!(io.out, golden.to_vec());
    }
}
