//! The relay's two sides as IO: the client's stdin and stdout (a thread's queue, or driven
//! by the runtime), the upstream's pipes or transport, and the frame writers that keep each
//! direction in order.

#[allow(unused_imports, reason = "the relay's imports, shared by its parts")]
use super::*;

/// One event from the client's stdin reader.
#[derive(Debug)]
pub enum ClientEvent {
    /// A line (or an oversize line) from the client.
    Line(Line),
    /// The client closed its end (or reading failed).
    Eof,
}

/// One item for the client's stdout writer.
#[derive(Debug)]
pub enum ClientOut {
    /// A frame, newline included.
    Frame(Bytes),
    /// Acknowledge once every earlier frame has been written.
    Barrier(oneshot::Sender<()>),
}

/// The client's input: read on the runtime, or by a thread through a channel.
pub enum ClientInput {
    /// Events from a reader thread (or a test).
    Queue(mpsc::Receiver<ClientEvent>),
    /// stdin driven by the runtime: a pipe or socket of toolgate's own.
    Direct(AsyncLines<BufReader<AsyncIn>>),
}

/// Where frames for the client go: written in place, or queued for a writer thread.
pub enum ClientSink {
    /// To a writer thread (or a test).
    Queue(mpsc::Sender<ClientOut>),
    /// Written by the sending task; the lock keeps writers in order (it is fair).
    Direct(tokio::sync::Mutex<FrameWriter<AsyncOut>>),
}

/// Writes whole frames to a non-blocking stream, even when a writer is cancelled halfway
/// (a task aborted while the peer was slow to read): the rest of its frame is written
/// before the next one, so the peer never sees two frames run together.
pub struct FrameWriter<W> {
    pub(super) out: W,
    /// The pipe written to, grown to the frames it carries.
    pub(super) growth: PipeGrowth,
    /// The frame being written and how much of it is out.
    pub(super) pending: Bytes,
    pub(super) done: usize,
    /// A write failed: the peer is gone; later frames are discarded.
    pub(super) broken: bool,
}

/// The upstream's two directions: a child's pipes, or a transport's channels.
#[derive(Debug)]
pub enum UpstreamIo {
    /// A child process's stdin and stdout.
    Child(ChildStdin, ChildStdout),
    /// A transport (`remote`): the frames to send (newline included), and the lines it
    /// received (each one message, newline included). Closing the sender tells the
    /// transport the client is done; the transport ends the receiver when it is.
    Channel(mpsc::Sender<Bytes>, mpsc::Receiver<Line>),
}

/// Where frames for the upstream go; `None` once closed.
pub(super) enum ServerSink {
    /// The child's stdin, written by the sending task under a fair lock.
    Pipe(tokio::sync::Mutex<Option<FrameWriter<ChildStdin>>>),
    /// A transport's input queue (bounded: a slow upstream applies back-pressure).
    Channel(tokio::sync::Mutex<Option<mpsc::Sender<Bytes>>>),
}

pub(super) async fn client_reader(shared: Arc<RelayParts>, mut input: ClientInput) {
    loop {
        match input.next().await {
            ClientEvent::Line(Line::Frame(frame)) => {
                on_frame_then_poll(&shared, Direction::ClientToServer, frame).await;
            }
            ClientEvent::Line(Line::Oversize { prefix, len }) => {
                let id = recover_id(&prefix);
                warn!(
                    "client sent a {len}-byte message, over the limit: dropped{}",
                    if id.is_some() {
                        " (request answered with an error)"
                    } else {
                        ""
                    }
                );
                let msg = format!(
                    "invalid request: message of {len} bytes exceeds the limit \
                     (help: raise `--max-message-bytes`)"
                );
                let reply = build::error_response(id.as_deref(), INVALID_REQUEST, &msg);
                dispatch(&shared, Out::Client(with_newline(reply).into())).await;
            }
            ClientEvent::Eof => break,
        }
    }
    debug!("client input closed; closing the upstream's stdin");
    shared.lock().client_gone = true;
    shared.lock().origin.clear();
    shared.to_server.close().await;
}

/// What the upstream reader reads.
pub(super) enum UpstreamOut {
    Pipe(ChildStdout),
    Channel(mpsc::Receiver<Line>),
}

/// The upstream's lines, from a pipe or from a transport.
pub(super) enum UpstreamLines {
    Pipe(AsyncLines<BufReader<ChildStdout>>),
    Channel(mpsc::Receiver<Line>),
}

pub(super) async fn upstream_reader(shared: Arc<RelayParts>, upstream: UpstreamOut, max: usize) {
    let mut lines = match upstream {
        UpstreamOut::Pipe(stdout) => {
            let growth = PipeGrowth::of(stdout.as_fd());
            UpstreamLines::Pipe(
                AsyncLines::new(BufReader::with_capacity(64 * 1024, stdout), max).growing(growth),
            )
        }
        UpstreamOut::Channel(rx) => UpstreamLines::Channel(rx),
    };
    loop {
        match lines.next_line().await {
            Ok(Some(Line::Frame(frame))) => {
                on_frame_then_poll(&shared, Direction::ServerToClient, frame).await;
            }
            Ok(Some(Line::Oversize { prefix, len })) => {
                warn!("upstream wrote a {len}-byte line, over the limit: dropped");
                // If it was the response to a pending client request, answer that request.
                let reply = recover_id(&prefix).and_then(|raw| {
                    let key = IdKey::from_raw(&raw)?;
                    shared.lock().client_pending.remove(&key)?;
                    let msg = format!(
                        "upstream response of {len} bytes exceeds the limit \
                         (help: raise `--max-message-bytes`)"
                    );
                    Some(build::error_response(Some(&raw), INTERNAL_ERROR, &msg))
                });
                if let Some(reply) = reply {
                    dispatch(&shared, Out::Client(with_newline(reply).into())).await;
                }
            }
            Ok(None) => break,
            Err(err) => {
                warn!("reading the upstream's stdout failed: {err}");
                break;
            }
        }
    }
    debug!("upstream stdout closed");
}

/// The client's stdout: written in place when it is a pipe or a socket of toolgate's own
/// (the case under an MCP client: `O_NONBLOCK` on toolgate's end, driven by epoll, no
/// thread hand-off per frame); otherwise (a terminal, a file, or the same pipe or socket
/// as stdin or stderr) a dedicated thread writes it, so that toolgate never makes a file
/// description non-blocking under another reader or writer.
pub fn client_sink() -> std::io::Result<ClientSink> {
    let stdout = std::io::stdout();
    match own_stream(
        stdout.as_fd(),
        [std::io::stdin().as_fd(), std::io::stderr().as_fd()],
    )
    .and_then(writer_of)
    {
        Some(out) => Ok(ClientSink::Direct(tokio::sync::Mutex::new(
            FrameWriter::new(out, PipeGrowth::of(stdout.as_fd())),
        ))),
        None => {
            let (tx, rx) = mpsc::channel(QUEUE);
            spawn_stdout_writer(rx)?;
            Ok(ClientSink::Queue(tx))
        }
    }
}

/// The client's stdin: read on the runtime when it is a pipe or a socket of toolgate's
/// own, else by a dedicated thread (a blocking read that shutdown never waits for).
pub fn client_input(max: usize) -> std::io::Result<ClientInput> {
    let stdin = std::io::stdin();
    match own_stream(
        stdin.as_fd(),
        [std::io::stdout().as_fd(), std::io::stderr().as_fd()],
    )
    .and_then(reader_of)
    {
        Some(input) => Ok(ClientInput::Direct(
            AsyncLines::new(BufReader::with_capacity(64 * 1024, input), max)
                .growing(PipeGrowth::of(stdin.as_fd())),
        )),
        None => {
            let (tx, rx) = mpsc::channel(QUEUE);
            spawn_stdin_reader(max, tx)?;
            Ok(ClientInput::Queue(rx))
        }
    }
}

pub(super) type AsyncOut = std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send + Sync>>;

pub(super) type AsyncIn = std::pin::Pin<Box<dyn tokio::io::AsyncRead + Send + Sync>>;

/// A stream toolgate may make non-blocking: a pipe or socket that is not also one of
/// `others` (O_NONBLOCK applies to the open file description, which the upstream inherits
/// for stderr). Returns a duplicate of the descriptor and whether it is a socket.
pub(super) fn own_stream<const N: usize>(
    fd: std::os::fd::BorrowedFd<'_>,
    others: [std::os::fd::BorrowedFd<'_>; N],
) -> Option<(std::os::fd::OwnedFd, bool)> {
    use rustix::fs::{FileType, fstat};
    let st = fstat(fd).ok()?;
    let same = |other: std::os::fd::BorrowedFd<'_>| {
        fstat(other).is_ok_and(|o| o.st_dev == st.st_dev && o.st_ino == st.st_ino)
    };
    if others.into_iter().any(same) {
        return None;
    }
    let socket = match FileType::from_raw_mode(st.st_mode) {
        FileType::Fifo => false,
        FileType::Socket => true,
        _ => return None,
    };
    Some((rustix::io::dup(fd).ok()?, socket))
}

pub(super) fn writer_of((fd, socket): (std::os::fd::OwnedFd, bool)) -> Option<AsyncOut> {
    if socket {
        unix_stream(fd).map(|w| Box::pin(w) as AsyncOut)
    } else {
        tokio::net::unix::pipe::Sender::from_owned_fd(fd)
            .ok()
            .map(|w| Box::pin(w) as AsyncOut)
    }
}

pub(super) fn reader_of((fd, socket): (std::os::fd::OwnedFd, bool)) -> Option<AsyncIn> {
    if socket {
        unix_stream(fd).map(|r| Box::pin(r) as AsyncIn)
    } else {
        tokio::net::unix::pipe::Receiver::from_owned_fd(fd)
            .ok()
            .map(|r| Box::pin(r) as AsyncIn)
    }
}

/// A socket of toolgate's own, non-blocking, on the runtime.
pub(super) fn unix_stream(fd: std::os::fd::OwnedFd) -> Option<tokio::net::UnixStream> {
    let std = std::os::unix::net::UnixStream::from(fd);
    std.set_nonblocking(true).ok()?;
    tokio::net::UnixStream::from_std(std).ok()
}

/// Writes frames to the client's stdout on a dedicated thread (a blocking write must
/// never stall the relay). One write per frame, flushed.
pub fn spawn_stdout_writer(
    mut rx: mpsc::Receiver<ClientOut>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("toolgate-stdout".into())
        .spawn(move || {
            use std::io::Write;
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            let mut broken = false;
            while let Some(msg) = rx.blocking_recv() {
                match msg {
                    ClientOut::Frame(frame) => {
                        if broken {
                            continue;
                        }
                        if let Err(err) = out.write_all(&frame).and_then(|()| out.flush()) {
                            debug!("writing to the client failed: {err}");
                            broken = true;
                        }
                    }
                    ClientOut::Barrier(ack) => {
                        let _ = ack.send(());
                    }
                }
            }
        })
}

/// Reads the client's stdin on a dedicated thread (tokio stdin reads cannot be
/// cancelled, so shutdown never waits for it).
pub fn spawn_stdin_reader(
    max: usize,
    tx: mpsc::Sender<ClientEvent>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("toolgate-stdin".into())
        .spawn(move || {
            let reader = std::io::BufReader::with_capacity(64 * 1024, std::io::stdin());
            let mut lines = crate::proxy::lines::SyncLines::new(reader, max);
            loop {
                let event = match lines.next_line() {
                    Ok(Some(line)) => ClientEvent::Line(line),
                    Ok(None) => ClientEvent::Eof,
                    Err(err) => {
                        warn!("reading stdin failed: {err}");
                        ClientEvent::Eof
                    }
                };
                let eof = matches!(event, ClientEvent::Eof);
                if tx.blocking_send(event).is_err() || eof {
                    return;
                }
            }
        })
}

impl ClientInput {
    pub(super) async fn next(&mut self) -> ClientEvent {
        match self {
            ClientInput::Queue(rx) => rx.recv().await.unwrap_or(ClientEvent::Eof),
            ClientInput::Direct(lines) => match lines.next_line().await {
                Ok(Some(line)) => ClientEvent::Line(line),
                Ok(None) => ClientEvent::Eof,
                Err(err) => {
                    warn!("reading stdin failed: {err}");
                    ClientEvent::Eof
                }
            },
        }
    }
}

impl<W: tokio::io::AsyncWrite + Unpin> FrameWriter<W> {
    pub(super) fn new(out: W, growth: PipeGrowth) -> Self {
        FrameWriter {
            out,
            growth,
            pending: Bytes::new(),
            done: 0,
            broken: false,
        }
    }

    /// Writes one frame (newline included) after the rest of any interrupted one.
    pub(super) async fn write_frame(&mut self, frame: impl Into<Bytes>) -> std::io::Result<()> {
        let frame = frame.into();
        self.finish().await?;
        self.growth.fit(frame.len());
        self.pending = frame;
        self.done = 0;
        self.finish().await
    }

    /// Completes the frame in progress. Cancel-safe: `done` only counts bytes written.
    pub(super) async fn finish(&mut self) -> std::io::Result<()> {
        if self.broken {
            return Err(std::io::ErrorKind::BrokenPipe.into());
        }
        while let Some(rest) = self.pending.get(self.done..).filter(|r| !r.is_empty()) {
            match self.out.write(rest).await {
                Ok(0) => {
                    self.broken = true;
                    return Err(std::io::ErrorKind::WriteZero.into());
                }
                Ok(n) => self.done += n,
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Err(err) => {
                    self.broken = true;
                    return Err(err);
                }
            }
        }
        // Dropped, not kept: the interceptor may still hold a part of it (a result it
        // indexes), and the buffer is freed when both are done.
        self.pending = Bytes::new();
        self.done = 0;
        Ok(())
    }
}

impl ClientSink {
    /// Sends one frame (newline included). `Err` when the client can no longer get it.
    pub(super) async fn send(&self, frame: impl Into<Bytes>) -> Result<(), ProxyError> {
        let frame = frame.into();
        match self {
            ClientSink::Queue(tx) => tx
                .send(ClientOut::Frame(frame))
                .await
                .map_err(|_| ProxyError::ClientGone),
            ClientSink::Direct(out) => out.lock().await.write_frame(frame).await.map_err(|err| {
                debug!("writing to the client failed: {err}");
                ProxyError::ClientGone
            }),
        }
    }

    /// Waits until every frame sent before has been written, up to `limit`.
    pub(super) async fn flush(&self, limit: Duration) {
        match self {
            ClientSink::Queue(tx) => {
                let (ack, done) = oneshot::channel();
                let sent = tokio::time::timeout(limit, tx.send(ClientOut::Barrier(ack)));
                if matches!(sent.await, Ok(Ok(()))) {
                    let _ = tokio::time::timeout(limit, done).await;
                }
            }
            // The lock is fair: once it is ours, every earlier writer has finished (or was
            // cancelled, and its frame is completed here).
            ClientSink::Direct(out) => {
                let _ =
                    tokio::time::timeout(limit, async { out.lock().await.finish().await }).await;
            }
        }
    }
}

impl ServerSink {
    pub(super) async fn send(&self, frame: impl Into<Bytes>) -> Result<(), ProxyError> {
        let frame = frame.into();
        match self {
            ServerSink::Pipe(stdin) => {
                let mut stdin = stdin.lock().await;
                let Some(pipe) = stdin.as_mut() else {
                    return Err(ProxyError::UpstreamGone);
                };
                if let Err(err) = pipe.write_frame(frame).await {
                    debug!("writing to the upstream failed: {err}");
                    *stdin = None;
                    return Err(ProxyError::UpstreamGone);
                }
                Ok(())
            }
            ServerSink::Channel(tx) => {
                let mut tx = tx.lock().await;
                let Some(queue) = tx.as_ref() else {
                    return Err(ProxyError::UpstreamGone);
                };
                if queue.send(frame).await.is_err() {
                    *tx = None;
                    return Err(ProxyError::UpstreamGone);
                }
                Ok(())
            }
        }
    }

    /// Closes the upstream's input (after any write in progress).
    pub(super) async fn close(&self) {
        match self {
            ServerSink::Pipe(stdin) => drop(stdin.lock().await.take()),
            ServerSink::Channel(tx) => drop(tx.lock().await.take()),
        }
    }
}

impl UpstreamLines {
    pub(super) async fn next_line(&mut self) -> std::io::Result<Option<Line>> {
        match self {
            UpstreamLines::Pipe(lines) => lines.next_line().await,
            UpstreamLines::Channel(rx) => Ok(rx.recv().await),
        }
    }
}
