//! The re-opened body's unit tests: openings, lengths, errors and panics.

use super::*;
use crate::{body::Pristine, FailureKind};
use bytes::Bytes;
use http_body_util::BodyExt;
use http_resilience_mock::body::ScriptedBody;
use std::{
    convert::Infallible,
    error::Error,
    future::{ready, Ready},
    io,
    sync::atomic::{AtomicUsize, Ordering},
};

/// A factory whose `n`th opening plays `openings[n]` (the last one over
/// and over), counting its openings.
#[derive(Clone)]
struct Script {
    openings: Arc<Vec<ScriptedBody>>,
    opened: Arc<AtomicUsize>,
}

impl Script {
    fn new(openings: impl IntoIterator<Item = ScriptedBody>) -> Self {
        Self {
            openings: Arc::new(openings.into_iter().collect()),
            opened: Arc::default(),
        }
    }

    fn opened(&self) -> usize {
        self.opened.load(Ordering::Relaxed)
    }
}

impl Reopen for Script {
    type Body = ScriptedBody;
    type Error = Infallible;
    type Future = Ready<Result<ScriptedBody, Infallible>>;

    fn reopen(&self) -> Self::Future {
        let n = self.opened.fetch_add(1, Ordering::Relaxed);
        ready(Ok(self.openings[n.min(self.openings.len() - 1)].clone()))
    }
}

fn abcd() -> ScriptedBody {
    ScriptedBody::new().data("ab").data("cd")
}

async fn text<R>(body: ReopenBody<R>) -> Result<Bytes, BoxError>
where
    R: Reopen,
    <R::Body as Body>::Error: Into<BoxError>,
    <R::Body as Body>::Data: Send,
{
    Ok(body.collect().await?.to_bytes())
}

#[tokio::test]
async fn every_copy_opens_the_body_again_when_read_and_not_before() {
    let script = Script::new([abcd()]);
    let original = ReopenBody::new(script.clone());
    let copy = original.try_clone_body().expect("always a copy");
    let unread = copy.try_clone_body().expect("of a copy too");
    assert!(original.is_replayable() && copy.is_replayable());
    assert_eq!(script.opened(), 0, "nothing opened before it is read");
    assert_eq!(text(original).await.unwrap(), "abcd");
    assert_eq!(text(copy).await.unwrap(), "abcd");
    drop(unread);
    assert_eq!(script.opened(), 2, "the copy never read was never opened");
}

#[tokio::test]
async fn the_first_opening_that_knows_its_length_sets_every_copys_size_hint() {
    let original = ReopenBody::new(Script::new([abcd()]));
    let copy = original.try_clone_body().unwrap();
    assert_eq!(original.size_hint().exact(), None, "unknown before opening");
    assert!(!original.is_end_stream());
    let mut original = original;
    let first = original.frame().await.unwrap().unwrap();
    assert_eq!(first.into_data().unwrap(), "ab");
    assert_eq!(original.size_hint().exact(), Some(2), "what is left of it");
    assert_eq!(original.length(), Some(4));
    assert_eq!(copy.size_hint().exact(), Some(4), "known before it opens");
    assert_eq!(text(original).await.unwrap(), "cd");
    assert_eq!(text(copy).await.unwrap(), "abcd");
}

#[tokio::test]
async fn a_given_length_is_announced_before_the_first_opening() {
    let body = ReopenBody::with_length(Script::new([abcd()]), 4);
    assert_eq!(body.size_hint().exact(), Some(4));
    assert_eq!(body.try_clone_body().unwrap().size_hint().exact(), Some(4));
    assert_eq!(text(body).await.unwrap(), "abcd");
}

#[tokio::test]
async fn open_opens_the_first_body_at_once_and_copies_open_their_own() {
    let script = Script::new([abcd()]);
    let original = ReopenBody::open(script.clone()).await.unwrap();
    assert_eq!(script.opened(), 1);
    assert_eq!(original.size_hint().exact(), Some(4));
    let copy = original.try_clone_body().unwrap();
    assert_eq!(text(original).await.unwrap(), "abcd");
    assert_eq!(
        script.opened(),
        1,
        "the first attempt sent the first opening"
    );
    assert_eq!(text(copy).await.unwrap(), "abcd");
    assert_eq!(script.opened(), 2);
}

#[tokio::test]
async fn a_length_unknown_is_learned_from_the_first_copy_read_to_its_end() {
    let unknown = |text: &'static str| ScriptedBody::new().data(text).without_size_hint();
    let original = ReopenBody::new(Script::new([unknown("abcd"), unknown("abc")]));
    let copy = original.try_clone_body().unwrap();
    assert_eq!(text(original).await.unwrap(), "abcd");
    assert_eq!(copy.size_hint().exact(), Some(4), "learned at the end");
    let err = text(copy).await.unwrap_err();
    assert_eq!(err.downcast_ref(), Some(&BodyChanged::new(4, 3)));
}

#[tokio::test]
async fn a_shorter_opening_fails_with_the_typed_error_instead_of_ending() {
    let short = ScriptedBody::new().data("ab").without_size_hint();
    let original = ReopenBody::new(Script::new([abcd(), short]));
    let mut copy = original.try_clone_body().unwrap();
    assert_eq!(text(original).await.unwrap(), "abcd");
    let first = copy.frame().await.unwrap().unwrap();
    assert_eq!(first.into_data().unwrap(), "ab");
    assert!(!copy.is_end_stream(), "short: polled again for its error");
    let err = copy.frame().await.unwrap().unwrap_err();
    assert_eq!(err.downcast_ref(), Some(&BodyChanged::new(4, 2)));
    assert_eq!(FailureKind::of(&*err), FailureKind::RequestBody);
    assert!(copy.frame().await.is_none(), "and then ends");
    assert!(copy.is_end_stream());
}

#[tokio::test]
async fn a_longer_opening_fails_before_the_frame_that_goes_past_the_length() {
    let long = ScriptedBody::new()
        .data("ab")
        .data("cde")
        .without_size_hint();
    let mut body = ReopenBody::with_length(Script::new([long]), 4);
    let first = body.frame().await.unwrap().unwrap();
    assert_eq!(first.into_data().unwrap(), "ab");
    let err = body.frame().await.unwrap().unwrap_err();
    assert_eq!(err.downcast_ref(), Some(&BodyChanged::new(4, 5)));
    assert_eq!(body.size_hint().exact(), Some(0));
    assert!(body.frame().await.is_none());
}

#[tokio::test]
async fn an_opening_announcing_another_length_fails_before_any_byte() {
    let longer = ScriptedBody::new().data("ab").data("cde");
    let original = ReopenBody::new(Script::new([abcd(), longer]));
    let mut copy = original.try_clone_body().unwrap();
    assert_eq!(text(original).await.unwrap(), "abcd");
    let err = copy.frame().await.unwrap().unwrap_err();
    assert_eq!(err.downcast_ref(), Some(&BodyChanged::new(4, 5)));
    assert!(copy.frame().await.is_none());
}

#[tokio::test]
async fn a_body_ending_with_the_whole_length_reports_its_end_at_once() {
    let mut body = ReopenBody::with_length(Script::new([abcd()]), 4);
    assert!(body.frame().await.is_some());
    assert!(!body.is_end_stream());
    assert!(body.frame().await.is_some());
    assert!(body.is_end_stream(), "hyper stops here");
    assert_eq!(body.size_hint().exact(), Some(0));
}

#[tokio::test]
async fn a_failed_opening_is_a_typed_error_with_the_factorys_as_its_source() {
    let opened = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&opened);
    let mut body = ReopenBody::new(move || {
        counted.fetch_add(1, Ordering::Relaxed);
        ready(Err::<ScriptedBody, _>(io::Error::from(
            io::ErrorKind::NotFound,
        )))
    });
    let err = body.frame().await.unwrap().unwrap_err();
    let failed = err.downcast_ref::<ReopenFailed>().expect("the typed error");
    let source = failed
        .source()
        .unwrap()
        .downcast_ref::<io::Error>()
        .unwrap();
    assert_eq!(source.kind(), io::ErrorKind::NotFound);
    assert_eq!(FailureKind::of(&*err), FailureKind::RequestBody);
    assert!(body.frame().await.is_none(), "never an empty body after it");
    assert_eq!(opened.load(Ordering::Relaxed), 1, "and not opened again");
}

/// The [`FactoryPanicked`] below the error of a body whose factory
/// panicked.
fn panicked(err: &BoxError) -> &FactoryPanicked {
    let failed = err.downcast_ref::<ReopenFailed>().expect("the typed error");
    failed
        .source()
        .unwrap()
        .downcast_ref()
        .expect("a panic below it")
}

#[tokio::test]
async fn a_factory_that_panics_when_called_fails_the_body_with_its_message() {
    let mut body =
        ReopenBody::new(|| -> Ready<Result<ScriptedBody, Infallible>> { panic!("no such bucket") });
    let err = body.frame().await.unwrap().unwrap_err();
    assert_eq!(panicked(&err).message(), Some("no such bucket"));
    assert_eq!(FailureKind::of(&*err), FailureKind::RequestBody);
    assert!(body.frame().await.is_none(), "and then ends");
    assert!(body.is_end_stream());
}

#[tokio::test]
async fn an_opening_that_panics_when_polled_fails_the_body_with_its_message() {
    let mut body = ReopenBody::new(|| async {
        let bucket = 7;
        if bucket > 0 {
            panic!("bucket {bucket} is gone");
        }
        Ok::<_, Infallible>(abcd())
    });
    let err = body.frame().await.unwrap().unwrap_err();
    let panicked = panicked(&err);
    assert_eq!(panicked.message(), Some("bucket 7 is gone"));
    assert_eq!(panicked.source().unwrap().to_string(), "bucket 7 is gone");
    assert!(body.frame().await.is_none());
}

#[tokio::test]
async fn a_panic_without_text_fails_the_body_without_a_message() {
    let mut body = ReopenBody::new(|| -> Ready<Result<ScriptedBody, Infallible>> {
        std::panic::panic_any(7_u32)
    });
    let err = body.frame().await.unwrap().unwrap_err();
    assert_eq!(panicked(&err).message(), None);
    assert!(panicked(&err).source().is_none());
}

/// A body whose first poll fails.
struct Broken;

impl Body for Broken {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        Poll::Ready(Some(Err(io::Error::other("disk"))))
    }
}

#[tokio::test]
async fn the_errors_of_an_opened_body_pass_through() {
    let mut body = ReopenBody::new(|| ready(Ok::<_, Infallible>(Broken)));
    let err = body.frame().await.unwrap().unwrap_err();
    assert_eq!(err.to_string(), "disk");
    assert!(err.is::<io::Error>());
    assert!(body.frame().await.is_none());
}

#[tokio::test]
async fn trailers_pass_once_the_whole_length_is_sent() {
    let mut trailers = http::HeaderMap::new();
    trailers.insert("x-sum", "1".parse().unwrap());
    let with =
        move || {
            let body = http_body_util::Full::new(Bytes::from("abcd"))
                .with_trailers(ready(Some(Ok::<_, Infallible>(trailers.clone()))));
            ready(Ok::<_, Infallible>(body))
        };
    let body = ReopenBody::new(with);
    let copy = body.try_clone_body().unwrap();
    let sent = body.collect().await.unwrap();
    assert_eq!(sent.trailers().unwrap()["x-sum"], "1");
    assert_eq!(copy.collect().await.unwrap().to_bytes(), "abcd");
}

#[tokio::test]
async fn a_kept_request_copies_to_unopened_bodies() {
    let script = Script::new([abcd()]);
    let request = http::Request::put("http://upstream.test/")
        .body(ReopenBody::new(script.clone()))
        .unwrap();
    let pristine = Pristine::of(&request).expect("replayable");
    let next = pristine.next_attempt().expect("and again");
    assert_eq!(script.opened(), 0);
    assert_eq!(text(next.into_body()).await.unwrap(), "abcd");
    assert_eq!(text(request.into_body()).await.unwrap(), "abcd");
    assert_eq!(script.opened(), 2);
}

#[test]
fn messages_name_both_lengths_and_the_failure() {
    let changed = BodyChanged::new(1024, 1000);
    assert_eq!(
        changed.to_string(),
        "request body changed from the length announced"
    );
    assert_eq!((changed.expected(), changed.got()), (1024, 1000));
    let failed = ReopenFailed::new("gone");
    assert_eq!(failed.to_string(), "the request body could not be opened");
    let panicked = FactoryPanicked::new("boom");
    assert_eq!(panicked.to_string(), "the body factory panicked");
    assert_eq!(format!("{panicked:>27}"), "  the body factory panicked");
    assert_eq!(panicked.source().unwrap().to_string(), "boom");
    assert_eq!(failed.source().unwrap().to_string(), "gone");
}

#[test]
fn debug_shows_the_state_and_the_length() {
    let body = ReopenBody::with_length(Script::new([abcd()]), 4);
    assert_eq!(
        format!("{body:?}"),
        "ReopenBody { state: \"unopened\", length: Some(4), sent: 0, .. }"
    );
}

// ===== files =====

mod files {
    use super::*;
    use std::path::PathBuf;

    /// A file of `text` under the system's temporary directory, removed
    /// when dropped.
    struct TempFile(PathBuf);

    impl TempFile {
        fn new(name: &str, text: &[u8]) -> Self {
            let path =
                std::env::temp_dir().join(format!("http-resilience-{name}-{}", std::process::id()));
            std::fs::write(&path, text).unwrap();
            Self(path)
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn a_file_body_is_send_and_sync_as_reqwest_needs() {
        assert_send_sync::<ReopenBody<FileSource>>();
        assert_send_sync::<<FileSource as Reopen>::Future>();
        assert_send_sync::<FileBody>();
    }

    #[tokio::test]
    async fn a_file_announces_its_length_before_it_is_opened_and_sends_it_in_blocks() {
        let whole: Vec<u8> = (0..150_000_u32).map(|n| (n % 251) as u8).collect();
        let file = TempFile::new("blocks", &whole);
        let mut body = ReopenBody::file(&file.0).await.unwrap();
        assert_eq!(body.size_hint().exact(), Some(150_000));
        assert_eq!(body.factory().path(), file.0);
        let copy = body.try_clone_body().unwrap();
        let mut sizes = Vec::new();
        let mut sent = Vec::new();
        while let Some(frame) = body.frame().await {
            let data = frame.unwrap().into_data().unwrap();
            sizes.push(data.len());
            sent.extend_from_slice(&data);
        }
        assert!(
            sizes.iter().all(|size| *size as u64 <= 64 * 1024),
            "{sizes:?}"
        );
        assert!(sent == whole, "whole and in order");
        assert!(body.is_end_stream());
        assert!(text(copy).await.unwrap() == whole, "and again");
    }

    #[tokio::test]
    async fn a_file_whose_length_changed_fails_its_opening_before_any_byte() {
        let file = TempFile::new("changed", b"abcd");
        let body = ReopenBody::file(&file.0).await.unwrap();
        let mut copy = body.try_clone_body().unwrap();
        assert_eq!(text(body).await.unwrap(), "abcd");
        std::fs::write(&file.0, b"abcdef").unwrap();
        let err = copy.frame().await.unwrap().unwrap_err();
        assert_eq!(err.downcast_ref(), Some(&BodyChanged::new(4, 6)));
        assert!(copy.frame().await.is_none());
    }

    #[tokio::test]
    async fn a_file_gone_fails_the_attempt_with_the_io_error_below() {
        let file = TempFile::new("gone", b"abcd");
        let mut body = ReopenBody::file(&file.0).await.unwrap();
        std::fs::remove_file(&file.0).unwrap();
        let err = body.frame().await.unwrap().unwrap_err();
        let failed = err.downcast_ref::<ReopenFailed>().expect("the typed error");
        let io = failed
            .source()
            .unwrap()
            .downcast_ref::<io::Error>()
            .unwrap();
        assert_eq!(io.kind(), io::ErrorKind::NotFound);
    }

    #[tokio::test]
    async fn what_is_not_a_regular_file_is_refused() {
        let err = ReopenBody::file(std::env::temp_dir()).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(err.to_string(), "not a regular file");
        let missing = std::env::temp_dir().join("http-resilience-no-such-file");
        let err = ReopenBody::file(missing).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn a_file_opened_outside_a_runtime_fails_with_an_io_error() {
        let file = TempFile::new("outside", b"abcd");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let body = runtime.block_on(ReopenBody::file(&file.0)).unwrap();
        drop(runtime);
        let mut opening = std::pin::pin!(body.factory().reopen());
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let Poll::Ready(Err(err)) = opening.as_mut().poll(&mut cx) else {
            panic!("an error at once, outside a runtime");
        };
        assert_eq!(err.kind(), io::ErrorKind::Other);
    }
}
