//! HTTP/2 connections (cleartext, prior knowledge).
//!
//! The `h2` crate serves the streams. Between it and the socket sits a [`Gate`] that reads
//! the frame headers going both ways, for two things `h2` cannot do on its own:
//!
//! - turning a new stream away with a `GOAWAY` whose last stream identifier is *below* it
//!   (`h2` only ever announces the highest stream it has received, which would cover the
//!   stream): the gate writes that `GOAWAY` itself, between two of `h2`'s frames, and drops
//!   the frames of every stream above it from then on;
//! - knowing when a response head or body bytes have left for the socket, so that a fault
//!   that closes the connection after them does not cut frames still queued inside `h2`.
//!
//! The gate judges the client's frames by their 9-byte headers and passes payloads on as
//! they arrive: it never gathers a frame whole, so a frame announcing 16 MiB costs it no more
//! than one read. `h2` holds the client to its `SETTINGS_MAX_FRAME_SIZE` (16 KiB, the
//! protocol's initial value, which the server never raises) and closes the connection with
//! `GOAWAY` `FRAME_SIZE_ERROR` on a longer frame.
//!
//! Each stream's scripted response is taken from the queue when `h2` hands the stream over
//! (`accept`), in the order streams are opened. A stream `h2` rejects itself (a malformed
//! request, say, answered with `RST_STREAM`) is never handed over, so it takes no script.

use std::collections::HashMap;
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use h2::server::SendResponse;
use h2::{Reason, RecvStream, SendStream};
use http::header::{HeaderName, CONNECTION, CONTENT_LENGTH, TE, TRANSFER_ENCODING, UPGRADE};
use http::{HeaderValue, Method, StatusCode};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::{sleep, Sleep};

use crate::builder::Limits;
use crate::request::{BodyRecord, RecordedRequest};
use crate::response::{Behaviour, MockResponse};
use crate::server::{arm_reset, lock, OpenConnection, State};

/// The connection preface a client sends before its first frame (RFC 9113, section 3.4).
const PREFACE_LEN: usize = 24;
/// The length of a frame header.
const FRAME_HEAD_LEN: usize = 9;
/// Frame types (RFC 9113, section 6).
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const GOAWAY: u8 = 0x7;
const CONTINUATION: u8 = 0x9;
/// The flag that ends a header block.
const END_HEADERS: u8 = 0x4;

/// What a stream asks of its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Command {
    /// Drop the connection now (FIN, or RST when [`Shared::reset`] is set).
    Close,
    /// Send a `GOAWAY` covering every stream received, then close.
    GoAway,
}

/// How much of one stream's response has been written to the socket.
#[derive(Debug, Clone, Copy, Default)]
struct Written {
    head: bool,
    data: usize,
}

/// The state of one connection shared by its task, its stream tasks and its gate.
#[derive(Debug)]
struct Shared {
    /// The last stream identifier of a `GOAWAY` the gate is to write, until it takes it.
    goaway: Mutex<Option<u32>>,
    /// What has been written of each stream's response.
    written: watch::Sender<HashMap<u32, Written>>,
    commands: mpsc::UnboundedSender<Command>,
    /// Close with RST rather than FIN.
    reset: AtomicBool,
}

impl Shared {
    /// Starts following what is written of stream `id`'s response, for [`written`](Self::written).
    ///
    /// NOTE: only streams watched this way are followed, so the bookkeeping does not grow
    /// with every stream of a long connection; the behaviours that watch one end it.
    fn watch(&self, id: u32) {
        self.written.send_modify(|all| {
            all.insert(id, Written::default());
        });
    }

    /// Waits until the head and at least `data` body bytes of stream `id` are written; the
    /// stream must be [watched](Self::watch) from before its response was sent.
    async fn written(&self, id: u32, data: usize) {
        let mut updates = self.written.subscribe();
        let _ = updates
            .wait_for(|all| all.get(&id).is_some_and(|w| w.head && w.data >= data))
            .await;
    }

    fn command(&self, command: Command) {
        // NOTE: the receiver lives as long as the connection task, which owns every stream
        // task; a failed send means the connection is already gone.
        let _ = self.commands.send(command);
    }
}

/// Serves one HTTP/2 connection until it ends.
pub(crate) async fn serve(stream: TcpStream, state: Arc<State>, _open: OpenConnection) {
    let _ = stream.set_nodelay(true);
    let (commands, orders) = mpsc::unbounded_channel();
    let shared = Arc::new(Shared {
        goaway: Mutex::new(None),
        written: watch::Sender::new(HashMap::new()),
        commands,
        reset: AtomicBool::new(false),
    });
    let gate = Gate::new(stream, Arc::clone(&shared));
    let limits = state.limits;
    // NOTE: the handshake ends once the client preface has arrived.
    let Some(Ok(h2)) = limits.within_idle(h2::server::handshake(gate)).await else {
        return;
    };
    let connection = Connection {
        h2,
        // NOTE: dropped with this task, which aborts the stream tasks and closes the socket.
        streams: JoinSet::new(),
        orders,
        state,
        shared,
        limits,
        idle: None,
        last_accepted: 0,
    };
    connection.run().await;
}

/// One HTTP/2 connection as its task drives it.
struct Connection {
    h2: h2::server::Connection<Gate, Bytes>,
    /// The tasks answering its streams.
    streams: JoinSet<()>,
    orders: mpsc::UnboundedReceiver<Command>,
    state: Arc<State>,
    shared: Arc<Shared>,
    limits: Limits,
    /// Armed while no stream is being answered: the connection is closed when it fires.
    idle: Option<Pin<Box<Sleep>>>,
    /// The highest stream handed over by `h2` so far.
    last_accepted: u32,
}

// ===== impl Connection =====

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("streams", &self.streams.len())
            .field("last_accepted", &self.last_accepted)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Accepts streams and follows their commands until the connection ends.
    async fn run(mut self) {
        loop {
            self.arm_idle();
            tokio::select! {
                accepted = self.h2.accept() => match accepted {
                    Some(Ok((request, respond))) => {
                        if !self.start(request, respond) {
                            return self.turn_away().await;
                        }
                    }
                    Some(Err(_)) | None => return,
                },
                Some(_) = self.streams.join_next() => {}
                () = expired(&mut self.idle) => return self.close_idle().await,
                Some(order) = self.orders.recv() => match order {
                    Command::Close => return,
                    // `h2` announces the highest stream it received, then closes once the
                    // frame is flushed; `accept` drives it and ends with `None`.
                    Command::GoAway => self.h2.abrupt_shutdown(Reason::NO_ERROR),
                },
            }
        }
    }

    /// Takes the next script for a stream `h2` accepted and starts answering it; `false`
    /// when the script turns the stream away with a `GOAWAY` below it.
    fn start(&mut self, request: http::Request<RecvStream>, respond: SendResponse<Bytes>) -> bool {
        let id = respond.stream_id().as_u32();
        let script = self.state.next_response();
        if script.behaviour() == Behaviour::GoAwayUnprocessed {
            self.state.refuse();
            // NOTE: `h2` hands streams over in the order they were opened, so every stream
            // below this one that the server will act on has been handed over already.
            *lock(&self.shared.goaway) = Some(self.last_accepted);
            return false;
        }
        self.last_accepted = id;
        let state = Arc::clone(&self.state);
        let shared = Arc::clone(&self.shared);
        self.streams
            .spawn(answer(request, respond, script, state, shared));
        true
    }

    /// Drives the connection, accepting no more streams, until the gate has written its
    /// `GOAWAY` (and asks to close) or the connection ends; for at most the idle timeout,
    /// should the client not take the frame.
    async fn turn_away(&mut self) {
        let drive = async {
            loop {
                tokio::select! {
                    _ = poll_fn(|cx| self.h2.poll_closed(cx)) => return,
                    order = self.orders.recv() => if order != Some(Command::GoAway) {
                        return;
                    },
                }
            }
        };
        self.limits.within_idle(drive).await;
    }

    /// Arms the idle timer when no stream is being answered, and disarms it otherwise.
    fn arm_idle(&mut self) {
        if !self.streams.is_empty() {
            self.idle = None;
        } else if self.idle.is_none() {
            self.idle = self.limits.idle_timeout.map(|limit| Box::pin(sleep(limit)));
        }
    }

    /// Closes a connection left idle: a `GOAWAY` (`NO_ERROR`) covering every stream
    /// received, then the close; for at most one more idle timeout, should the client not
    /// take the frame.
    async fn close_idle(&mut self) {
        self.h2.abrupt_shutdown(Reason::NO_ERROR);
        let limits = self.limits;
        let _ = limits
            .within_idle(poll_fn(|cx| self.h2.poll_closed(cx)))
            .await;
    }
}

/// Waits for an armed timer; never ends when there is none.
async fn expired(timer: &mut Option<Pin<Box<Sleep>>>) {
    match timer {
        Some(timer) => timer.as_mut().await,
        None => std::future::pending().await,
    }
}

/// Applies a script to one stream.
async fn answer(
    request: http::Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    script: MockResponse,
    state: Arc<State>,
    shared: Arc<Shared>,
) {
    let id = respond.stream_id().as_u32();
    let behaviour = script.behaviour();
    if behaviour == Behaviour::RefuseStream {
        if !script.head_delay().is_zero() {
            tokio::time::sleep(script.head_delay()).await;
        }
        respond.send_reset(Reason::REFUSED_STREAM);
        state.refuse();
        return;
    }
    let (parts, mut body) = request.into_parts();
    let Ok(received) = read_body(&mut body, state.limits).await else {
        respond.send_reset(Reason::CANCEL);
        return;
    };
    let head_only = parts.method == Method::HEAD;
    let script = crate::range::answer(script, &parts.method, &parts.headers);
    state.record(RecordedRequest::new(
        parts.method,
        parts.uri,
        parts.version,
        parts.headers,
        received,
    ));
    if behaviour != Behaviour::NoResponse && !script.head_delay().is_zero() {
        tokio::time::sleep(script.head_delay()).await;
    }
    let body = if head_only {
        Bytes::new()
    } else {
        script.body().clone()
    };
    if let Ok(held) = respond_with(&mut respond, &script, body, &shared, id).await {
        hold(respond, held).await;
    }
}

/// Keeps what a stream's task holds for as long as it must.
async fn hold(mut respond: SendResponse<Bytes>, held: Held) {
    match held {
        Held::Nothing => {}
        Held::Unanswered => {
            let _ = poll_fn(|cx| respond.poll_reset(cx)).await;
        }
        Held::Stalled(mut stream) => {
            let _ = poll_fn(|cx| stream.poll_reset(cx)).await;
        }
        // NOTE: dropping the stream's handles would reset it (`CANCEL`) before the scripted
        // close, which the connection task is yet to carry out.
        Held::UntilClosed => std::future::pending::<()>().await,
    }
}

/// What a stream's task keeps once its behaviour has been applied.
#[derive(Debug)]
enum Held {
    /// Nothing: the response was sent in full.
    Nothing,
    /// The stream, unanswered, until the client resets it.
    Unanswered,
    /// The stream whose body never comes, until the client resets it.
    Stalled(SendStream<Bytes>),
    /// The stream, until the connection closes as the behaviour asked.
    UntilClosed,
}

/// Writes what the behaviour calls for; returns early if the stream or connection fails.
async fn respond_with(
    respond: &mut SendResponse<Bytes>,
    script: &MockResponse,
    body: Bytes,
    shared: &Shared,
    id: u32,
) -> Result<Held, h2::Error> {
    let head = encode_head(script);
    match script.behaviour() {
        Behaviour::Respond => {
            let mut stream = respond.send_response(head, body.is_empty())?;
            if !body.is_empty() {
                stream.send_data(body, true)?;
            }
            return Ok(Held::Nothing);
        }
        Behaviour::NoResponse => return Ok(Held::Unanswered),
        Behaviour::StallAfterHead => {
            return Ok(Held::Stalled(respond.send_response(head, false)?));
        }
        Behaviour::Drip { chunk, pause } => {
            let stream = respond.send_response(head, body.is_empty())?;
            drip(stream, body, chunk, pause).await?;
            return Ok(Held::Nothing);
        }
        Behaviour::CloseBeforeResponse => shared.command(Command::Close),
        Behaviour::ResetBeforeResponse => {
            shared.reset.store(true, Ordering::SeqCst);
            shared.command(Command::Close);
        }
        Behaviour::CloseAfterHead => {
            shared.watch(id);
            respond.send_response(head, false)?;
            shared.written(id, 0).await;
            shared.command(Command::Close);
        }
        Behaviour::GoAwayAfterProcessing => shared.command(Command::GoAway),
        // The refusals were dealt with before the body was read, the `GOAWAY` below the
        // stream before it was answered at all.
        Behaviour::RefuseStream | Behaviour::GoAwayUnprocessed => {}
        partial => return respond_in_part(respond, (head, body), partial, shared, id).await,
    }
    Ok(Held::UntilClosed)
}

/// [`respond_with`] for the behaviours that cut a body part-way.
async fn respond_in_part(
    respond: &mut SendResponse<Bytes>,
    (head, body): (http::Response<()>, Bytes),
    behaviour: Behaviour,
    shared: &Shared,
    id: u32,
) -> Result<Held, h2::Error> {
    match behaviour {
        Behaviour::ResetMidBody { sent } => {
            send_part(respond, head, &body, sent, shared, id).await?;
            shared.reset.store(true, Ordering::SeqCst);
            shared.command(Command::Close);
        }
        Behaviour::CloseMidBody { sent } => {
            send_part(respond, head, &body, sent, shared, id).await?;
            shared.command(Command::Close);
        }
        Behaviour::StallMidBody { sent } => {
            let sent = sent.min(body.len());
            let mut stream = respond.send_response(head, false)?;
            if sent > 0 {
                stream.send_data(body.slice(..sent), false)?;
            }
            return Ok(Held::Stalled(stream));
        }
        // NOTE: every other behaviour is `respond_with`'s own.
        _ => {}
    }
    Ok(Held::UntilClosed)
}

/// Sends the head and the first `sent` bytes of `body`, and waits until they are written to
/// the connection (so that a close or reset of the connection comes after them).
async fn send_part(
    respond: &mut SendResponse<Bytes>,
    head: http::Response<()>,
    body: &Bytes,
    sent: usize,
    shared: &Shared,
    id: u32,
) -> Result<(), h2::Error> {
    shared.watch(id);
    let mut stream = respond.send_response(head, false)?;
    let sent = sent.min(body.len());
    if sent > 0 {
        stream.send_data(body.slice(..sent), false)?;
    }
    shared.written(id, sent).await;
    Ok(())
}

/// Sends `body` `chunk` bytes at a time, waiting `pause` before each piece, then ends the
/// stream.
async fn drip(
    mut stream: SendStream<Bytes>,
    body: Bytes,
    chunk: usize,
    pause: Duration,
) -> Result<(), h2::Error> {
    if body.is_empty() {
        return Ok(());
    }
    for piece in body.chunks(chunk.max(1)) {
        tokio::time::sleep(pause).await;
        stream.send_data(body.slice_ref(piece), false)?;
    }
    stream.send_data(Bytes::new(), true)
}

/// Reads a request body in full, giving its flow-control capacity back as it goes and
/// recording its first bytes up to the recorded-body limit; fails when the body pauses for
/// longer than the idle timeout.
async fn read_body(body: &mut RecvStream, limits: Limits) -> Result<BodyRecord, h2::Error> {
    let mut all = BodyRecord::new(limits.max_recorded_body);
    loop {
        let Some(next) = limits.within_idle(body.data()).await else {
            return Err(h2::Error::from(Reason::CANCEL));
        };
        let Some(chunk) = next else {
            break;
        };
        let chunk = chunk?;
        let _ = body.flow_control().release_capacity(chunk.len());
        all.push(&chunk);
    }
    Ok(all)
}

/// The response head of a script: its status (`500` if HTTP cannot carry it), its headers
/// less the connection-specific ones HTTP/2 forbids, and `content-length` unless scripted.
fn encode_head(script: &MockResponse) -> http::Response<()> {
    let mut head = http::Response::new(());
    *head.status_mut() =
        StatusCode::from_u16(script.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let forbidden = [
        CONNECTION,
        TRANSFER_ENCODING,
        UPGRADE,
        TE,
        HeaderName::from_static("keep-alive"),
        HeaderName::from_static("proxy-connection"),
    ];
    for (name, value) in script.headers() {
        if !forbidden.contains(name) {
            head.headers_mut().append(name.clone(), value.clone());
        }
    }
    if !head.headers().contains_key(CONTENT_LENGTH) {
        head.headers_mut()
            .insert(CONTENT_LENGTH, HeaderValue::from(script.body().len()));
    }
    head
}

/// A `GOAWAY` frame with the error code `NO_ERROR` and no debug data.
fn goaway_frame(last_stream: u32) -> Bytes {
    let mut frame = Vec::with_capacity(FRAME_HEAD_LEN + 8);
    frame.extend_from_slice(&[0, 0, 8, GOAWAY, 0]);
    frame.extend_from_slice(&0u32.to_be_bytes());
    frame.extend_from_slice(&(last_stream & 0x7fff_ffff).to_be_bytes());
    frame.extend_from_slice(&u32::from(Reason::NO_ERROR).to_be_bytes());
    Bytes::from(frame)
}

/// The payload length a frame header announces.
fn frame_len(head: &[u8]) -> usize {
    usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2])
}

/// The socket as `h2` sees it; see the module docs.
#[derive(Debug)]
struct Gate {
    io: TcpStream,
    shared: Arc<Shared>,
    /// Bytes read from the socket and not yet judged: at most one read, plus the start of a
    /// frame header.
    raw: BytesMut,
    /// Bytes judged and waiting for `h2` to read them.
    ready: BytesMut,
    /// Payload bytes of the client's current frame still to pass on (or drop).
    ///
    /// NOTE: the client preface is passed on as the payload of a first frame without a
    /// header.
    in_left: usize,
    /// Whether the client's current frame is dropped.
    in_dropped: bool,
    /// The last stream identifier of the gate's `GOAWAY`, once it decided to send one:
    /// frames of higher streams are dropped.
    last: Option<u32>,
    /// The gate's `GOAWAY`, until it is written in full.
    goaway: Option<Bytes>,
    /// The header of `h2`'s frame being written, and how much of it is.
    out_head: [u8; FRAME_HEAD_LEN],
    out_head_len: usize,
    /// Payload bytes of that frame still to write.
    out_left: usize,
}

impl Gate {
    fn new(io: TcpStream, shared: Arc<Shared>) -> Self {
        Self {
            io,
            shared,
            raw: BytesMut::new(),
            ready: BytesMut::new(),
            in_left: PREFACE_LEN,
            in_dropped: false,
            last: None,
            goaway: None,
            out_head: [0; FRAME_HEAD_LEN],
            out_head_len: 0,
            out_left: 0,
        }
    }

    /// Judges the next piece of `raw` (a frame header, or payload bytes of the current frame), moving it to `ready` or dropping it; `false` if more bytes are
    /// needed.
    ///
    /// NOTE: a frame is judged by its header alone and its payload passed on as it arrives,
    /// never gathered whole: the gate holds at most one read of the client's bytes whatever
    /// length a frame announces. `h2` enforces its `SETTINGS_MAX_FRAME_SIZE` on the header it
    /// is passed, and answers a longer frame with `GOAWAY` `FRAME_SIZE_ERROR`.
    fn judge(&mut self) -> bool {
        if self.raw.is_empty() {
            return false;
        }
        if self.in_left > 0 {
            let piece = self.raw.split_to(self.in_left.min(self.raw.len()));
            self.in_left -= piece.len();
            if !self.in_dropped {
                self.ready.extend_from_slice(&piece);
            }
            return true;
        }
        if self.raw.len() < FRAME_HEAD_LEN {
            return false;
        }
        let head = self.raw.split_to(FRAME_HEAD_LEN);
        self.in_left = frame_len(&head);
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        self.in_dropped = self.last.is_some_and(|last| stream > last);
        if !self.in_dropped {
            self.ready.extend_from_slice(&head);
        }
        true
    }

    /// Writes the gate's `GOAWAY` if one is due and `h2` is between two frames; once it is
    /// written, asks the connection to close.
    fn poll_goaway(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.goaway.is_none() && self.last.is_none() {
            if let Some(last) = lock(&self.shared.goaway).take() {
                self.last = Some(last);
                self.goaway = Some(goaway_frame(last));
            }
        }
        while let Some(frame) = &mut self.goaway {
            if self.out_head_len != 0 {
                // NOTE: `h2` is in the middle of a frame and will write the rest of it.
                return Poll::Ready(Ok(()));
            }
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, frame))?;
            frame.advance(n);
            if frame.is_empty() {
                self.goaway = None;
                self.shared.command(Command::Close);
            }
        }
        Poll::Ready(Ok(()))
    }

    /// Follows `h2`'s frames through `written`, bytes that were just written.
    fn track(&mut self, mut written: &[u8]) {
        while !written.is_empty() {
            if self.out_head_len < FRAME_HEAD_LEN {
                let n = (FRAME_HEAD_LEN - self.out_head_len).min(written.len());
                self.out_head[self.out_head_len..self.out_head_len + n]
                    .copy_from_slice(&written[..n]);
                self.out_head_len += n;
                written = &written[n..];
                if self.out_head_len == FRAME_HEAD_LEN {
                    self.out_left = frame_len(&self.out_head);
                }
            } else {
                let n = self.out_left.min(written.len());
                self.out_left -= n;
                written = &written[n..];
                self.progress(n);
            }
            if self.out_head_len == FRAME_HEAD_LEN && self.out_left == 0 {
                if matches!(self.out_head[3], HEADERS | CONTINUATION)
                    && self.out_head[4] & END_HEADERS != 0
                {
                    let stream = self.out_stream();
                    self.shared.written.send_if_modified(|all| {
                        all.get_mut(&stream).map(|w| w.head = true).is_some()
                    });
                }
                self.out_head_len = 0;
            }
        }
    }

    /// The stream of `h2`'s frame being written.
    fn out_stream(&self) -> u32 {
        let head = self.out_head;
        u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff
    }

    /// Notes `payload` more bytes of the current frame as written.
    fn progress(&self, payload: usize) {
        if self.out_head[3] == DATA && payload > 0 {
            let stream = self.out_stream();
            self.shared
                .written
                .send_if_modified(|all| all.get_mut(&stream).map(|w| w.data += payload).is_some());
        }
    }
}

impl AsyncRead for Gate {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_goaway(cx))?;
        loop {
            if !this.ready.is_empty() {
                let n = this.ready.len().min(buf.remaining());
                buf.put_slice(&this.ready.split_to(n));
                return Poll::Ready(Ok(()));
            }
            if this.judge() {
                continue;
            }
            let mut chunk = [0; 8 * 1024];
            let mut read = ReadBuf::new(&mut chunk);
            ready!(Pin::new(&mut this.io).poll_read(cx, &mut read))?;
            if read.filled().is_empty() {
                // The client closed; an incomplete frame header left in `raw` is dropped.
                return Poll::Ready(Ok(()));
            }
            this.raw.extend_from_slice(read.filled());
        }
    }
}

impl AsyncWrite for Gate {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_goaway(cx))?;
        // NOTE: each write stops at the end of a frame header or payload, so that a frame
        // boundary is always between two writes, where the gate's GOAWAY can go.
        let limit = if this.out_head_len < FRAME_HEAD_LEN {
            FRAME_HEAD_LEN - this.out_head_len
        } else {
            this.out_left
        };
        let piece = &buf[..limit.min(buf.len())];
        let n = ready!(Pin::new(&mut this.io).poll_write(cx, piece))?;
        this.track(&piece[..n]);
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_goaway(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_goaway(cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        if self.shared.reset.load(Ordering::SeqCst) {
            let _ = arm_reset(&self.io);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use h2::client::SendRequest;
    use tokio::time::timeout;

    use super::*;
    use crate::MockServer;

    const LIMIT: Duration = Duration::from_secs(5);

    /// An HTTP/2 client connection to `server`, its connection driven in the background.
    async fn connect(server: &MockServer) -> SendRequest<Bytes> {
        let tcp = TcpStream::connect(server.addr()).await.unwrap();
        let (client, connection) = h2::client::handshake(tcp).await.unwrap();
        tokio::spawn(async move {
            let _ = connection.await;
        });
        client
    }

    /// Sends a request with `body` and reads the whole response.
    async fn send(
        client: &mut SendRequest<Bytes>,
        method: Method,
        body: &'static str,
    ) -> Result<(StatusCode, Bytes), h2::Error> {
        timeout(LIMIT, async {
            let mut ready = client.clone().ready().await?;
            let request = http::Request::builder()
                .method(method)
                .uri("http://127.0.0.1/orders")
                .body(())
                .unwrap();
            let (response, mut stream) = ready.send_request(request, body.is_empty())?;
            if !body.is_empty() {
                stream.send_data(Bytes::from_static(body.as_bytes()), true)?;
            }
            let response = response.await?;
            let status = response.status();
            let mut body = response.into_body();
            let mut all = BytesMut::new();
            while let Some(chunk) = body.data().await {
                let chunk = chunk?;
                let _ = body.flow_control().release_capacity(chunk.len());
                all.extend_from_slice(&chunk);
            }
            Ok((status, all.freeze()))
        })
        .await
        .expect("the exchange hung")
    }

    #[tokio::test]
    async fn answers_streams_in_order_and_records_them() {
        let server = MockServer::start_h2().await.unwrap();
        server.enqueue(MockResponse::ok("first").with_header("connection", "close"));
        server.enqueue(MockResponse::new(503).with_header("retry-after", "1"));
        let mut client = connect(&server).await;
        let (status, body) = send(&mut client, Method::POST, "{}").await.unwrap();
        assert_eq!((status, &body[..]), (StatusCode::OK, &b"first"[..]));
        let (status, body) = send(&mut client, Method::GET, "").await.unwrap();
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.is_empty());
        // Unscripted streams get the marked 500.
        let (status, _) = send(&mut client, Method::GET, "").await.unwrap();
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);

        let requests = server.requests();
        assert_eq!(requests.len(), 3);
        assert_eq!(requests[0].method, Method::POST);
        assert_eq!(requests[0].version, http::Version::HTTP_2);
        assert_eq!(requests[0].uri.path(), "/orders");
        assert_eq!(&requests[0].body[..], b"{}");
        assert_eq!(server.connection_count(), 1);
        assert_eq!(server.refused_count(), 0);
    }

    #[tokio::test]
    async fn a_range_is_served_over_http2_too() {
        let server = MockServer::start_h2().await.unwrap();
        let script = MockResponse::ok("0123456789").with_etag("\"v1\"");
        server.enqueue(script.with_ranges().stall_after(2));
        let client = connect(&server).await;
        let response = timeout(LIMIT, async {
            let mut ready = client.ready().await.unwrap();
            let request = http::Request::get("http://127.0.0.1/file")
                .header("range", "bytes=3-")
                .header("if-range", "\"v1\"")
                .body(())
                .unwrap();
            let (response, _) = ready.send_request(request, true).unwrap();
            let response = response.await.unwrap();
            let (head, mut body) = response.into_parts();
            let first = body.data().await.unwrap().unwrap();
            (head, first)
        })
        .await
        .expect("the exchange hung");
        let (head, first) = response;
        assert_eq!(head.status, StatusCode::PARTIAL_CONTENT);
        assert_eq!(head.headers["content-range"], "bytes 3-9/10");
        assert_eq!(head.headers["content-length"], "7");
        assert_eq!(&first[..], b"34", "the part stalls after two of its bytes");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn answered_and_cancelled_streams_end_their_tasks() {
        let metrics = tokio::runtime::Handle::current().metrics();
        let server = MockServer::start_h2().await.unwrap();
        let large = Bytes::from(vec![b'x'; 200 * 1024]);
        server.enqueue(MockResponse::ok(large.clone()));
        server.enqueue(MockResponse::ok("small"));
        server.enqueue(MockResponse::no_response());
        server.enqueue(MockResponse::stall_after_head(200));
        let mut client = connect(&server).await;
        // The accept loop, the connection's task and the client's connection.
        let idle = 3;
        let (_, body) = send(&mut client, Method::GET, "").await.unwrap();
        assert_eq!(
            body, large,
            "a body over the flow-control window arrives whole"
        );
        send(&mut client, Method::GET, "").await.unwrap();
        for _ in 0..2 {
            let request = http::Request::get("http://127.0.0.1/").body(()).unwrap();
            let (response, _) = client.send_request(request, true).unwrap();
            // The client gives up on the silent stream (dropping it resets it), and on the
            // stalled body.
            if let Ok(Ok(response)) = timeout(Duration::from_millis(100), response).await {
                drop(response);
            }
        }
        assert!(server.wait_for_requests(4, LIMIT).await);
        timeout(LIMIT, async {
            while metrics.num_alive_tasks() != idle {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("tasks: {}", metrics.num_alive_tasks()));
    }

    #[tokio::test]
    async fn a_body_over_the_record_limit_is_kept_in_part_and_flagged() {
        const KEPT: usize = 1024;
        let server = MockServer::builder()
            .max_recorded_body(KEPT)
            .start_h2()
            .await
            .unwrap();
        server.enqueue(MockResponse::ok("stored"));
        let mut client = connect(&server).await;
        // Over the 64 KiB flow-control window: the server gives the capacity back.
        let body: Vec<u8> = (0..100 * 1024).map(|i| (i % 251) as u8).collect();
        let request = http::Request::post("http://127.0.0.1/").body(()).unwrap();
        let (response, mut stream) = client.send_request(request, false).unwrap();
        stream.reserve_capacity(body.len());
        stream.send_data(Bytes::from(body.clone()), true).unwrap();
        let response = timeout(LIMIT, response).await.unwrap().unwrap();
        assert_eq!(response.status(), StatusCode::OK);

        let recorded = &server.requests()[0];
        assert_eq!(recorded.body, body[..KEPT]);
        assert!(recorded.is_body_truncated());
        assert_eq!(recorded.body_len, body.len() as u64);
    }

    #[tokio::test]
    async fn refused_stream_is_counted_not_recorded() {
        let server = MockServer::start_h2().await.unwrap();
        server.enqueue(MockResponse::refuse_stream());
        server.enqueue(MockResponse::ok("again"));
        let mut client = connect(&server).await;
        let err = send(&mut client, Method::POST, "{}").await.unwrap_err();
        assert_eq!(err.reason(), Some(Reason::REFUSED_STREAM), "{err:?}");
        assert!(err.is_reset() && err.is_remote(), "{err:?}");
        assert_eq!(server.refused_count(), 1);
        assert_eq!(server.request_count(), 0);
        // The connection stays usable.
        let (status, body) = send(&mut client, Method::POST, "{}").await.unwrap();
        assert_eq!((status, &body[..]), (StatusCode::OK, &b"again"[..]));
        assert_eq!(server.request_count(), 1);
        assert_eq!(server.connection_count(), 1);
    }

    #[tokio::test]
    async fn goaway_below_the_stream_turns_it_away_unread() {
        let server = MockServer::start_h2().await.unwrap();
        server.enqueue(MockResponse::ok("one"));
        server.enqueue(MockResponse::goaway_unprocessed());
        let mut client = connect(&server).await;
        send(&mut client, Method::GET, "").await.unwrap();
        let err = send(&mut client, Method::POST, "{}").await.unwrap_err();
        assert!(err.is_go_away() && err.is_remote(), "{err:?}");
        assert_eq!(err.reason(), Some(Reason::NO_ERROR));
        assert_eq!(server.refused_count(), 1);
        assert_eq!(server.request_count(), 1);
        // The server closes the connection after the GOAWAY.
        timeout(LIMIT, async {
            while server.open_connections() != 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .unwrap();
    }

    #[tokio::test]
    async fn goaway_on_the_first_stream_announces_none() {
        let server = MockServer::start_h2().await.unwrap();
        server.enqueue(MockResponse::goaway_unprocessed());
        let mut client = connect(&server).await;
        let err = send(&mut client, Method::GET, "").await.unwrap_err();
        assert!(err.is_go_away() && err.is_remote(), "{err:?}");
        assert_eq!((server.refused_count(), server.request_count()), (1, 0));
    }

    #[tokio::test]
    async fn goaway_after_processing_records_then_closes() {
        let server = MockServer::start_h2().await.unwrap();
        server.enqueue(MockResponse::goaway_after_processing());
        let mut client = connect(&server).await;
        let err = send(&mut client, Method::POST, "{}").await.unwrap_err();
        // The GOAWAY covers the stream, so it is not what fails it: the close is.
        assert!(!err.is_go_away(), "{err:?}");
        assert!(err.is_io(), "{err:?}");
        assert_eq!((server.refused_count(), server.request_count()), (0, 1));
    }

    #[tokio::test]
    async fn socket_faults_wait_for_the_frames_before_them() {
        let server = MockServer::start_h2().await.unwrap();
        server.enqueue(MockResponse::reset_mid_body("0123456789", 4));
        let mut client = connect(&server).await;
        let request = http::Request::get("http://127.0.0.1/").body(()).unwrap();
        let (response, _) = client.send_request(request, true).unwrap();
        let response = timeout(LIMIT, response).await.unwrap().unwrap();
        assert_eq!(response.headers()[CONTENT_LENGTH], "10");
        let mut body = response.into_body();
        let mut got = BytesMut::new();
        let failed = timeout(LIMIT, async {
            while let Some(chunk) = body.data().await {
                match chunk {
                    Ok(chunk) => got.extend_from_slice(&chunk),
                    Err(err) => return Some(err),
                }
            }
            None
        })
        .await
        .unwrap();
        assert_eq!(&got[..], b"0123");
        assert!(failed.is_some());
    }

    /// A client that writes HTTP/2 frames by hand, for what the `h2` client refuses to send.
    struct RawPeer {
        tcp: TcpStream,
    }

    /// The error codes `PROTOCOL_ERROR` and `FRAME_SIZE_ERROR` on the wire.
    const PROTOCOL_ERROR: u32 = 0x1;
    const FRAME_SIZE_ERROR: u32 = 0x6;
    /// Frame types and flags the raw peer uses.
    const SETTINGS: u8 = 0x4;
    const RST_STREAM: u8 = 0x3;
    const END_STREAM: u8 = 0x1;
    const ACK: u8 = 0x1;
    /// HPACK static-table entries (RFC 7541, appendix A): `:method GET`, `:path /`,
    /// `:scheme http`.
    const METHOD_GET: u8 = 0x82;
    const PATH_ROOT: u8 = 0x84;
    const SCHEME_HTTP: u8 = 0x86;

    /// A frame as the raw peer reads it.
    #[derive(Debug)]
    struct RawFrame {
        kind: u8,
        flags: u8,
        stream: u32,
        payload: Vec<u8>,
    }

    impl RawPeer {
        /// Connects, sends the client preface and an empty `SETTINGS` frame, and
        /// acknowledges the server's `SETTINGS`: once it returns, the peer writes nothing
        /// unasked.
        async fn connect(server: &MockServer) -> Self {
            let mut peer = Self {
                tcp: TcpStream::connect(server.addr()).await.unwrap(),
            };
            peer.write(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await;
            peer.frame(SETTINGS, 0, 0, &[]).await;
            loop {
                let frame = peer.read_frame().await.expect("the server's SETTINGS");
                if frame.kind == SETTINGS && frame.flags & ACK == 0 {
                    peer.frame(SETTINGS, ACK, 0, &[]).await;
                    return peer;
                }
            }
        }

        async fn write(&mut self, bytes: &[u8]) {
            use tokio::io::AsyncWriteExt;
            timeout(LIMIT, self.tcp.write_all(bytes))
                .await
                .unwrap()
                .unwrap();
        }

        /// Writes one frame.
        async fn frame(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
            let len = u32::try_from(payload.len()).unwrap().to_be_bytes();
            let mut frame = vec![len[1], len[2], len[3], kind, flags];
            frame.extend_from_slice(&stream.to_be_bytes());
            frame.extend_from_slice(payload);
            self.write(&frame).await;
        }

        /// Reads the next frame; `None` once the server closed the connection.
        async fn read_frame(&mut self) -> Option<RawFrame> {
            use tokio::io::AsyncReadExt;
            let mut head = [0; FRAME_HEAD_LEN];
            let read = timeout(LIMIT, self.tcp.read_exact(&mut head));
            read.await.unwrap().ok()?;
            let mut payload = vec![0; frame_len(&head)];
            let read = timeout(LIMIT, self.tcp.read_exact(&mut payload));
            read.await.unwrap().ok()?;
            Some(RawFrame {
                kind: head[3],
                flags: head[4],
                stream: u32::from_be_bytes([head[5], head[6], head[7], head[8]]),
                payload,
            })
        }

        /// Reads the next frame that is not a `SETTINGS` one; `None` once the server closed
        /// the connection.
        async fn next(&mut self) -> Option<RawFrame> {
            loop {
                let frame = self.read_frame().await?;
                if frame.kind != SETTINGS {
                    return Some(frame);
                }
            }
        }

        /// Reads frames until one of `kind` on `stream`.
        async fn until(&mut self, kind: u8, stream: u32) -> RawFrame {
            loop {
                let frame = self.next().await.expect("the server closed the connection");
                if frame.kind == kind && frame.stream == stream {
                    return frame;
                }
            }
        }

        /// Reads the body of the response on `stream`, to its end.
        async fn body(&mut self, stream: u32) -> Vec<u8> {
            let mut body = Vec::new();
            loop {
                let frame = self.until(DATA, stream).await;
                body.extend_from_slice(&frame.payload);
                if frame.flags & END_STREAM != 0 {
                    return body;
                }
            }
        }
    }

    #[tokio::test]
    async fn a_stream_h2_rejects_takes_no_script() {
        let server = MockServer::start_h2().await.unwrap();
        server.enqueue(MockResponse::ok("first"));
        server.enqueue(MockResponse::ok("second"));
        let mut peer = RawPeer::connect(&server).await;
        // No `:method`: `h2` resets the stream before the server's handling sees it.
        peer.frame(
            HEADERS,
            END_HEADERS | END_STREAM,
            1,
            &[SCHEME_HTTP, PATH_ROOT],
        )
        .await;
        let reset = peer.until(RST_STREAM, 1).await;
        assert_eq!(reset.payload, PROTOCOL_ERROR.to_be_bytes());

        let request = [METHOD_GET, SCHEME_HTTP, PATH_ROOT];
        peer.frame(HEADERS, END_HEADERS | END_STREAM, 3, &request)
            .await;
        assert_eq!(peer.body(3).await, b"first");
        assert_eq!((server.request_count(), server.refused_count()), (1, 0));
    }

    #[tokio::test]
    async fn a_stream_h2_rejects_leaves_a_scripted_goaway_for_the_next() {
        let server = MockServer::start_h2().await.unwrap();
        server.enqueue(MockResponse::goaway_unprocessed());
        let mut peer = RawPeer::connect(&server).await;
        peer.frame(
            HEADERS,
            END_HEADERS | END_STREAM,
            1,
            &[SCHEME_HTTP, PATH_ROOT],
        )
        .await;
        peer.until(RST_STREAM, 1).await;

        let request = [METHOD_GET, SCHEME_HTTP, PATH_ROOT];
        peer.frame(HEADERS, END_HEADERS | END_STREAM, 3, &request)
            .await;
        let goaway = peer.until(GOAWAY, 0).await;
        // Last stream 0: neither stream was acted on.
        assert_eq!(goaway.payload, [0; 8]);
        assert_eq!((server.request_count(), server.refused_count()), (0, 1));
    }

    #[tokio::test]
    async fn frames_split_across_reads_pass_whole() {
        let server = MockServer::start_h2().await.unwrap();
        server.enqueue(MockResponse::ok("split"));
        let mut peer = RawPeer::connect(&server).await;
        peer.tcp.set_nodelay(true).unwrap();
        let request = [METHOD_GET, SCHEME_HTTP, PATH_ROOT];
        let frame = [
            &[0, 0, 3, HEADERS, END_HEADERS | END_STREAM, 0, 0, 0, 1][..],
            &request,
        ]
        .concat();
        for piece in [&frame[..4], &frame[4..10], &frame[10..]] {
            peer.write(piece).await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(peer.body(1).await, b"split");
    }

    #[tokio::test]
    async fn a_frame_over_the_max_frame_size_closes_the_connection_unbuffered() {
        let server = MockServer::start_h2().await.unwrap();
        let mut peer = RawPeer::connect(&server).await;
        // A DATA frame announcing 16 MiB less a byte, of which only 1 KiB is ever sent: a
        // server that buffered frames whole would wait for the rest with the connection open.
        peer.write(&[0xff, 0xff, 0xff, DATA, 0, 0, 0, 0, 1]).await;
        peer.write(&[0; 1024]).await;
        let goaway = peer.until(GOAWAY, 0).await;
        assert_eq!(goaway.payload[4..8], FRAME_SIZE_ERROR.to_be_bytes());
        assert!(
            peer.next().await.is_none(),
            "the server closed the connection"
        );
        timeout(LIMIT, async {
            while server.open_connections() != 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .unwrap();
    }

    /// The idle timeout of the servers below: far below [`LIMIT`], which bounds every wait.
    const IDLE: Duration = Duration::from_millis(200);
    /// The error code `CANCEL`, and the `:method POST` entry of the HPACK static table.
    const CANCEL: u32 = 0x8;
    const METHOD_POST: u8 = 0x83;

    async fn start_with_idle_timeout() -> MockServer {
        MockServer::builder()
            .idle_timeout(IDLE)
            .start_h2()
            .await
            .unwrap()
    }

    /// Reads frames until the server closes the connection; returns the `GOAWAY` it sent
    /// on the way, if any.
    async fn until_closed(peer: &mut RawPeer) -> Option<RawFrame> {
        let mut goaway = None;
        while let Some(frame) = peer.next().await {
            if frame.kind == GOAWAY {
                goaway = Some(frame);
            }
        }
        goaway
    }

    #[tokio::test]
    async fn a_connection_without_a_preface_is_closed_after_the_idle_timeout() {
        let server = start_with_idle_timeout().await;
        let mut silent = TcpStream::connect(server.addr()).await.unwrap();
        // The server's SETTINGS, then the end of the stream.
        let mut all = Vec::new();
        let read = timeout(
            LIMIT,
            tokio::io::AsyncReadExt::read_to_end(&mut silent, &mut all),
        );
        read.await
            .expect("the server kept the silent connection")
            .unwrap();
        assert_eq!(all[3], SETTINGS, "{all:?}");
    }

    #[tokio::test]
    async fn an_idle_connection_is_closed_with_a_goaway_after_the_idle_timeout() {
        let server = start_with_idle_timeout().await;
        server.enqueue(MockResponse::ok("in time"));
        let mut peer = RawPeer::connect(&server).await;
        let request = [METHOD_GET, SCHEME_HTTP, PATH_ROOT];
        peer.frame(HEADERS, END_HEADERS | END_STREAM, 1, &request)
            .await;
        assert_eq!(peer.body(1).await, b"in time");

        let goaway = until_closed(&mut peer)
            .await
            .expect("a GOAWAY before the close");
        // Last stream 1, NO_ERROR.
        assert_eq!(goaway.payload, [0, 0, 0, 1, 0, 0, 0, 0]);
        assert_eq!(server.request_count(), 1);
    }

    #[tokio::test]
    async fn a_half_sent_header_block_is_closed_after_the_idle_timeout() {
        let server = start_with_idle_timeout().await;
        server.enqueue(MockResponse::ok("never"));
        let mut peer = RawPeer::connect(&server).await;
        // No END_HEADERS: a CONTINUATION frame should follow, and never does.
        peer.frame(HEADERS, END_STREAM, 1, &[METHOD_GET, SCHEME_HTTP])
            .await;

        assert!(until_closed(&mut peer).await.is_some());
        assert_eq!(server.request_count(), 0);
    }

    #[tokio::test]
    async fn a_body_that_pauses_past_the_idle_timeout_resets_its_stream() {
        let server = start_with_idle_timeout().await;
        server.enqueue(MockResponse::ok("never"));
        let mut peer = RawPeer::connect(&server).await;
        peer.frame(
            HEADERS,
            END_HEADERS,
            1,
            &[METHOD_POST, SCHEME_HTTP, PATH_ROOT],
        )
        .await;
        peer.frame(DATA, 0, 1, b"abc").await;

        let reset = peer.until(RST_STREAM, 1).await;
        assert_eq!(reset.payload, CANCEL.to_be_bytes());
        assert_eq!(
            server.request_count(),
            0,
            "a body cut short is not recorded"
        );
    }

    #[tokio::test]
    async fn scripted_silences_outlast_the_idle_timeout() {
        let server = start_with_idle_timeout().await;
        server.enqueue(MockResponse::no_response());
        server.enqueue(MockResponse::stall_after_head(200));
        let mut client = connect(&server).await;
        let mut pending = Vec::new();
        for _ in 0..2 {
            let request = http::Request::get("http://127.0.0.1/").body(()).unwrap();
            let (response, _) = client.send_request(request, true).unwrap();
            pending.push(response);
        }
        let stalled = timeout(LIMIT, pending.pop().unwrap())
            .await
            .unwrap()
            .unwrap();
        let mut silent = pending.pop().unwrap();
        let mut body = stalled.into_body();
        tokio::time::sleep(IDLE * 3).await;
        // The server is the slow one: it keeps its silences for as long as the client waits.
        let still = timeout(IDLE, async {
            tokio::select! {
                response = &mut silent => format!("a response: {response:?}"),
                data = body.data() => format!("body data: {data:?}"),
            }
        });
        let still = still.await;
        assert!(still.is_err(), "{still:?}");
        assert_eq!(server.open_connections(), 1);
    }

    #[test]
    fn heads_drop_connection_specific_fields() {
        let script = MockResponse::new(204)
            .with_header("connection", "close")
            .with_header("transfer-encoding", "chunked")
            .with_header("x-kept", "1");
        let head = encode_head(&script);
        assert_eq!(head.status(), StatusCode::NO_CONTENT);
        assert_eq!(head.headers().len(), 2, "{:?}", head.headers());
        assert_eq!(head.headers()[CONTENT_LENGTH], "0");
        assert_eq!(
            encode_head(&MockResponse::new(42)).status(),
            StatusCode::INTERNAL_SERVER_ERROR
        );
    }

    #[test]
    fn goaway_frame_is_well_formed() {
        let frame = goaway_frame(5);
        assert_eq!(
            &frame[..],
            &[0, 0, 8, GOAWAY, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0]
        );
    }
}
