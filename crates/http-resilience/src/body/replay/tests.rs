use super::{buffer::BLOCK, *};
use http::HeaderMap;
use http_body_util::{BodyExt, Empty, Full};
use http_resilience_mock::body::ScriptedBody;
use std::time::Duration;
use tokio_test::{assert_pending, assert_ready};

fn script() -> ScriptedBody {
    ScriptedBody::new().data("ab").data("cd").data("ef")
}

async fn text<B>(body: ReplayBody<B>) -> Result<Bytes, BoxError>
where
    B: Body + Unpin,
    B::Error: Into<BoxError>,
{
    Ok(body.collect().await?.to_bytes())
}

#[tokio::test]
async fn a_copy_replays_what_the_original_sent() {
    let original = ReplayBody::new(script());
    let copy = original.try_clone_body().unwrap();
    let second = copy.try_clone_body().unwrap();
    assert_eq!(text(original).await.unwrap(), "abcdef");
    assert!(copy.is_replayable() && second.is_replayable());
    assert_eq!(copy.size_hint().exact(), Some(6));
    assert_eq!(text(copy).await.unwrap(), "abcdef");
    assert_eq!(text(second).await.unwrap(), "abcdef");
}

#[tokio::test]
async fn an_original_dropped_unread_hands_the_whole_body_on() {
    let original = ReplayBody::new(script());
    let copy = original.try_clone_body().unwrap();
    drop(original);
    assert!(copy.is_replayable());
    assert_eq!(copy.size_hint().exact(), Some(6), "the body's own hint");
    let again = copy.try_clone_body().unwrap();
    assert_eq!(text(copy).await.unwrap(), "abcdef");
    assert_eq!(text(again).await.unwrap(), "abcdef", "and kept it");
}

#[tokio::test]
async fn a_body_over_the_cap_never_read_is_handed_on_in_full() {
    let big = Bytes::from(vec![7u8; 1000]);
    let original = ReplayBody::with_cap(Full::new(big.clone()), 64);
    let copy = original
        .try_clone_body()
        .expect("nothing read, nothing lost");
    drop(original);
    assert!(copy.is_replayable());
    assert_eq!(copy.size_hint().exact(), Some(1000));
    let again = copy.try_clone_body().unwrap();
    assert_eq!(text(copy).await.unwrap(), big, "sent once, in full");
    assert!(!again.is_replayable(), "and, over the cap, kept nowhere");
    assert_eq!(again.shared().len, 0);
}

#[tokio::test]
async fn a_partly_sent_original_hands_on_its_buffer_then_the_rest() {
    let mut original = ReplayBody::new(script().without_size_hint());
    let copy = original.try_clone_body().unwrap();
    let first = original.frame().await.unwrap().unwrap();
    assert_eq!(first.into_data().unwrap(), "ab");
    drop(original);
    assert!(copy.is_replayable());
    assert_eq!(text(copy).await.unwrap(), "abcdef", "in order");
}

#[tokio::test]
async fn a_partly_sent_original_past_the_cap_is_not_replayable() {
    let mut original = ReplayBody::with_cap(script().without_size_hint(), 3);
    let copy = original.try_clone_body().unwrap();
    assert!(original.frame().await.is_some());
    assert!(copy.is_replayable(), "2 bytes read, all kept");
    assert!(original.frame().await.is_some());
    assert!(!copy.is_replayable(), "4 bytes read, 2 of them lost");
    drop(original);
    assert!(copy.try_clone_body().is_none());
    let err = text(copy).await.unwrap_err();
    assert!(err.is::<NotReplayable>());
    assert_eq!(
        err.to_string(),
        "non-repeatable request: part of the body was sent and not kept (over the replay cap)"
    );
}

#[tokio::test(start_paused = true)]
async fn a_copy_read_while_the_original_sends_follows_it() {
    let original = ReplayBody::new(
        ScriptedBody::new()
            .data("ab")
            .wait(Duration::from_secs(1))
            .data("cd"),
    );
    let copy = original.try_clone_body().unwrap();
    let mut original = tokio_test::task::spawn(text(original));
    assert_pending!(original.poll(), "the original waits inside its body");
    let mut follower = tokio_test::task::spawn(text(copy));
    assert_pending!(follower.poll(), "played the first chunk, waits for more");
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(assert_ready!(original.poll()).unwrap(), "abcd");
    assert!(follower.is_woken());
    assert_eq!(assert_ready!(follower.poll()).unwrap(), "abcd");
}

#[tokio::test]
async fn a_body_over_the_cap_sent_in_full_is_not_replayable_and_frees_its_buffer() {
    let original = ReplayBody::with_cap(script().without_size_hint(), 4);
    let copy = original.try_clone_body().unwrap();
    // Everything still reaches the upstream.
    assert_eq!(text(original).await.unwrap(), "abcdef");
    assert!(!copy.is_replayable());
    assert!(copy.try_clone_body().is_none());
    assert_eq!(copy.shared().len, 0);
}

#[tokio::test]
async fn a_size_hint_over_the_cap_is_never_buffered() {
    let original = ReplayBody::with_cap(Full::new(Bytes::from(vec![0u8; 100])), 64);
    let copy = original.try_clone_body().unwrap();
    let mut original = original;
    assert_eq!(
        original
            .frame()
            .await
            .unwrap()
            .unwrap()
            .into_data()
            .unwrap()
            .len(),
        100
    );
    assert_eq!(copy.shared().len, 0);
    assert!(!copy.is_replayable());
}

#[tokio::test]
async fn an_original_with_no_copy_keeps_nothing() {
    let mut original = ReplayBody::new(script());
    assert!(original.frame().await.is_some());
    assert_eq!(original.shared().len, 0);
    assert!(original.try_clone_body().is_none(), "too late for a copy");
    assert_eq!(
        text(original).await.unwrap(),
        "cdef",
        "the rest still goes out"
    );
}

#[tokio::test]
async fn trailers_are_replayed_too() {
    let mut trailers = HeaderMap::new();
    trailers.insert("x-checksum", "42".parse().unwrap());
    let body =
        Full::new(Bytes::from_static(b"data")).with_trailers(async move { Some(Ok(trailers)) });
    // NOTE: pinned, since an async block is not `Unpin`.
    let original = ReplayBody::new(Box::pin(body));
    let copy = original.try_clone_body().unwrap();
    let sent = original.collect().await.unwrap();
    assert_eq!(sent.trailers().unwrap()["x-checksum"], "42");
    let replayed = copy.collect().await.unwrap();
    assert_eq!(replayed.trailers().unwrap()["x-checksum"], "42");
    assert_eq!(replayed.to_bytes(), "data");
}

#[tokio::test]
async fn an_empty_body_ends_for_every_copy_without_being_polled() {
    let original = ReplayBody::new(Empty::<Bytes>::new());
    let copy = original.try_clone_body().unwrap();
    assert!(original.is_end_stream());
    drop(original);
    assert!(copy.is_replayable());
    assert!(copy.is_end_stream());
    assert_eq!(copy.size_hint().exact(), Some(0));
}

#[tokio::test]
async fn a_failed_original_is_not_replayable() {
    #[derive(Debug)]
    struct Broken;
    impl Body for Broken {
        type Data = Bytes;
        type Error = std::io::Error;
        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
            Poll::Ready(Some(Err(std::io::Error::other("broken pipe"))))
        }
    }
    let original = ReplayBody::new(Broken);
    let copy = original.try_clone_body().unwrap();
    assert!(original.collect().await.is_err());
    assert!(!copy.is_replayable());
    assert_eq!(
        text(copy).await.unwrap_err().to_string(),
        "non-repeatable request: the body failed while it was sent"
    );
}

// ===== memory =====

/// The most chunks a buffer of `cap` holds, as the type's docs state.
fn most_chunks(cap: usize) -> usize {
    2 * (cap / BLOCK) + 1
}

/// `frames` of the given sizes, each of bytes counting on from the last,
/// and all of them together.
fn frames(sizes: &[usize]) -> (ScriptedBody, Bytes) {
    let mut script = ScriptedBody::new().without_size_hint();
    let mut whole = Vec::new();
    for &size in sizes {
        let frame: Vec<u8> = (whole.len()..whole.len() + size)
            .map(|n| (n % 251) as u8)
            .collect();
        whole.extend_from_slice(&frame);
        script = script.data(frame);
    }
    (script, Bytes::from(whole))
}

/// Polls `body` once, with a waker that does nothing: its next data frame,
/// its end, or `Pending`.
fn poll_data<B>(body: &mut ReplayBody<B>) -> Poll<Option<Result<Bytes, BoxError>>>
where
    B: Body + Unpin,
    B::Error: Into<BoxError>,
{
    let mut cx = Context::from_waker(Waker::noop());
    Pin::new(body)
        .poll_frame(&mut cx)
        .map(|frame| frame.map(|frame| frame.map(|f| f.into_data().unwrap())))
}

#[tokio::test]
async fn one_byte_frames_are_copied_into_a_few_blocks() {
    let (body, whole) = frames(&[1; 10_000]);
    let original = ReplayBody::new(body);
    let copy = original.try_clone_body().unwrap();
    assert_eq!(text(original).await.unwrap(), whole);
    assert_eq!(copy.shared().len, 10_000);
    assert_eq!(copy.shared().chunks.len(), 3, "4096, 4096 and 1808 bytes");
    assert_eq!(text(copy).await.unwrap(), whole);
}

#[tokio::test]
async fn a_large_frame_is_kept_without_a_copy() {
    let frame = Bytes::from(vec![7u8; BLOCK]);
    let original = ReplayBody::new(ScriptedBody::new().data(frame.clone()));
    let mut copy = original.try_clone_body().unwrap();
    assert_eq!(text(original).await.unwrap(), frame);
    let replayed = copy.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(replayed.as_ptr(), frame.as_ptr(), "the same storage");
    assert_eq!(replayed, frame);
}

#[tokio::test]
async fn small_and_large_frames_in_turn_stay_within_the_chunk_bound() {
    let sizes: Vec<usize> = [1, BLOCK]
        .into_iter()
        .cycle()
        .scan(0, |total, size| {
            *total += size;
            (*total <= DEFAULT_REPLAY_CAP).then_some(size)
        })
        .collect();
    let (body, whole) = frames(&sizes);
    let original = ReplayBody::new(body);
    let copy = original.try_clone_body().unwrap();
    assert_eq!(text(original).await.unwrap(), whole);
    let chunks = copy.shared().chunks.len();
    assert!(chunks <= most_chunks(DEFAULT_REPLAY_CAP), "{chunks} chunks");
    assert_eq!(text(copy).await.unwrap(), whole);
}

#[test]
fn a_copy_following_the_original_across_a_closed_block_plays_each_byte_once() {
    let (body, whole) = frames(&[2, BLOCK, 3]);
    let mut original = ReplayBody::new(body);
    let mut follower = original.try_clone_body().unwrap();
    let mut followed = Vec::new();
    let mut follow = |follower: &mut ReplayBody<_>| {
        while let Poll::Ready(Some(data)) = poll_data(follower) {
            followed.extend_from_slice(&data.unwrap());
        }
    };
    for _ in 0..3 {
        assert!(matches!(poll_data(&mut original), Poll::Ready(Some(Ok(_)))));
        // The first and last frames are played from the open block.
        follow(&mut follower);
    }
    assert!(matches!(poll_data(&mut original), Poll::Ready(None)));
    follow(&mut follower);
    assert_eq!(followed, whole);
    assert!(matches!(poll_data(&mut follower), Poll::Ready(None)));
}

proptest::proptest! {
    #[test]
    fn any_frames_replay_exactly_within_the_chunk_bound(
        sizes in proptest::collection::vec(
            proptest::prop_oneof![0..32usize, BLOCK - 2..BLOCK + 2, 0..3 * BLOCK],
            0..40,
        ),
        cap in 0..20 * BLOCK,
        follow in proptest::collection::vec(proptest::bool::ANY, 40),
    ) {
        let (body, whole) = frames(&sizes);
        let mut original = ReplayBody::with_cap(body, cap);
        let mut follower = original.try_clone_body().unwrap();
        let (mut sent, mut followed) = (Vec::new(), Vec::new());
        let mut failed = false;
        for n in 0.. {
            match poll_data(&mut original) {
                Poll::Ready(Some(data)) => sent.extend_from_slice(&data.unwrap()),
                Poll::Ready(None) => break,
                Poll::Pending => unreachable!("the script never waits"),
            }
            while follow.get(n).copied().unwrap_or(false) {
                match poll_data(&mut follower) {
                    Poll::Ready(Some(Ok(data))) => followed.extend_from_slice(&data),
                    Poll::Ready(Some(Err(_))) => failed = true,
                    _ => {}
                }
                if failed || followed.len() == sent.len() {
                    break;
                }
            }
            let chunks = follower.shared().chunks.len();
            proptest::prop_assert!(chunks <= most_chunks(cap), "{} chunks", chunks);
        }
        proptest::prop_assert_eq!(&sent[..], &whole[..], "the original sends it all");
        let again = follower.try_clone_body();
        let rest = ready_now(text(follower));
        if whole.len() <= cap {
            followed.extend_from_slice(&rest.unwrap());
            proptest::prop_assert_eq!(&followed[..], &whole[..]);
            proptest::prop_assert_eq!(ready_now(text(again.unwrap())).unwrap(), whole);
        } else {
            proptest::prop_assert!(failed || rest.is_err());
        }
    }
}

/// Runs a future that is ready at once, with a waker that does nothing.
fn ready_now<F: std::future::Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => unreachable!("nothing here waits"),
    }
}

// ===== extremes =====

#[tokio::test(flavor = "current_thread")]
async fn replay_caps_of_zero_and_usize_max() {
    let nothing_kept = ReplayBody::with_cap(Full::new(Bytes::from_static(b"abc")), 0);
    let copy = nothing_kept
        .try_clone_body()
        .expect("nothing read yet, so nothing lost");
    assert_eq!(
        nothing_kept.collect().await.unwrap().to_bytes(),
        "abc",
        "the original is still sent"
    );
    assert!(!copy.is_replayable(), "but none of it was kept");

    let everything = ReplayBody::with_cap(ScriptedBody::new().data("ab").data("c"), usize::MAX);
    let copy = everything.try_clone_body().expect("nothing spoiled yet");
    assert_eq!(everything.collect().await.unwrap().to_bytes(), "abc");
    assert_eq!(copy.collect().await.unwrap().to_bytes(), "abc");
}

// ===== whichever handle reads first takes the body =====

#[tokio::test(start_paused = true)]
async fn a_copy_read_before_the_original_takes_the_body() {
    // The original belongs to an attempt that has not begun to send its
    // body (its connection is still being set up); a hedge reads its copy.
    let original = ReplayBody::new(script());
    let copy = original.try_clone_body().unwrap();
    let read = tokio::time::timeout(Duration::from_secs(5), text(copy)).await;
    assert_eq!(
        read.expect("the copy waited for an original that never read the body")
            .unwrap(),
        "abcdef"
    );
    // The original, sent later, plays what the copy read.
    assert_eq!(text(original).await.unwrap(), "abcdef");
}

/// A body that yields "ab", then reports its end without being polled
/// again once `end` is set (as a channel whose sender is dropped).
struct EndsLater {
    sent: bool,
    end: Arc<std::sync::atomic::AtomicBool>,
}

impl Body for EndsLater {
    type Data = Bytes;
    type Error = std::convert::Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if !self.sent {
            self.sent = true;
            return Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"ab")))));
        }
        if self.end.load(std::sync::atomic::Ordering::SeqCst) {
            return Poll::Ready(None);
        }
        Poll::Pending
    }
    fn is_end_stream(&self) -> bool {
        self.sent && self.end.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[test]
fn a_follower_is_woken_when_the_reader_reports_its_end() {
    let end = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut original = ReplayBody::new(EndsLater {
        sent: false,
        end: Arc::clone(&end),
    });
    let copy = original.try_clone_body().unwrap();
    assert!(matches!(poll_data(&mut original), Poll::Ready(Some(Ok(_)))));
    let mut follower = tokio_test::task::spawn(text(copy));
    assert_pending!(follower.poll(), "played \"ab\", waits for more");
    end.store(true, std::sync::atomic::Ordering::SeqCst);
    // hyper reads `is_end_stream` and stops polling the body.
    assert!(original.is_end_stream());
    assert!(
        follower.is_woken(),
        "the buffer is complete, but the follower was not woken"
    );
    assert_eq!(assert_ready!(follower.poll()).unwrap(), "ab");
}

#[tokio::test(start_paused = true)]
async fn a_reader_dropped_while_pending_hands_the_rest_on() {
    let original = ReplayBody::new(
        ScriptedBody::new()
            .data("ab")
            .wait(Duration::from_secs(1))
            .data("cd"),
    );
    let copy = original.try_clone_body().unwrap();
    let mut original = tokio_test::task::spawn(text(original));
    assert_pending!(original.poll());
    let mut follower = tokio_test::task::spawn(text(copy));
    assert_pending!(follower.poll());
    drop(original);
    assert!(follower.is_woken());
    assert_pending!(follower.poll(), "took the rest, waits in its timer");
    tokio::time::advance(Duration::from_secs(1)).await;
    assert!(follower.is_woken());
    assert_eq!(assert_ready!(follower.poll()).unwrap(), "abcd");
}

#[tokio::test]
async fn a_body_at_the_cap_is_kept_with_exact_hints_and_one_byte_over_is_not() {
    // Exactly the cap: kept, replayed, exact hints all along.
    let original = ReplayBody::with_cap(ScriptedBody::new().data("abc").data("def"), 6);
    let copy = original.try_clone_body().unwrap();
    let mut original = original;
    assert_eq!(original.size_hint().exact(), Some(6));
    original.frame().await.unwrap().unwrap();
    assert_eq!(copy.size_hint().exact(), Some(6));
    drop(original);
    assert_eq!(copy.size_hint().exact(), Some(6), "buffer plus rest");
    let mut copy = copy;
    let again = copy.try_clone_body().unwrap();
    copy.frame().await.unwrap().unwrap();
    assert_eq!(copy.size_hint().exact(), Some(3));
    assert!(!copy.is_end_stream());
    copy.frame().await.unwrap().unwrap();
    assert!(copy.is_end_stream());
    assert_eq!(copy.size_hint().exact(), Some(0));
    assert!(copy.frame().await.is_none());
    assert!(copy.frame().await.is_none(), "and after the end");
    assert_eq!(text(again).await.unwrap(), "abcdef");
    // One byte over: not kept, but the first attempt still sends it all.
    let original = ReplayBody::with_cap(ScriptedBody::new().data("abc").data("defg"), 6);
    let copy = original.try_clone_body().unwrap();
    assert_eq!(text(original).await.unwrap(), "abcdefg");
    assert!(!copy.is_replayable());
}
