//! The exact schedule of every retryer, through `StatusRetry`, on tokio's
//! paused clock: when each attempt starts, and so every wait between them.

use http::{Request, Response};
use http_resilience::{
    policy::{
        Decoder, ExponentialBackoff, FeignRetryer, FixedDelay, Jitter, Retryer, StatusDecoder,
    },
    presets,
    retry::{RetryPolicy, StatusRetryLayer},
    Attempts, BoxError,
};
use std::time::Duration;
use tokio::time::Instant;
use tower::{Layer, ServiceExt};
use tower_test::mock;

type Req = Request<()>;
type Resp = Response<http_body_util::Empty<bytes::Bytes>>;

/// Runs one call against an upstream that answers `statuses` in order (each
/// at once), and returns when each attempt started, in ms from the start, and
/// the attempts recorded on the response.
async fn attempt_times<D, R>(policy: RetryPolicy<D, R>, statuses: &[u16]) -> (Vec<u128>, u32)
where
    D: Decoder<http_body_util::Empty<bytes::Bytes>, BoxError> + Send + Sync + 'static,
    R: Retryer + Send + Sync + 'static,
{
    let (upstream, mut handle) = mock::pair::<Req, Resp>();
    let svc = StatusRetryLayer::new(policy).layer(upstream);
    let start = Instant::now();
    let statuses = statuses.to_vec();
    let server = tokio::spawn(async move {
        let mut times = Vec::new();
        for status in statuses {
            let Some((_request, send)) = handle.next_request().await else {
                break;
            };
            times.push(start.elapsed().as_millis());
            send.send_response(
                Response::builder()
                    .status(status)
                    .body(Default::default())
                    .unwrap(),
            );
        }
        times
    });
    // Virtual time: a guard of ten minutes costs nothing and outlasts every
    // schedule here.
    let response = tokio::time::timeout(Duration::from_secs(600), svc.oneshot(Request::new(())))
        .await
        .expect("the call ends")
        .unwrap();
    let attempts = Attempts::of(&response);
    (server.await.unwrap(), attempts)
}

fn always_503(n: usize) -> Vec<u16> {
    vec![503; n]
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn fixed_delay_waits_the_same_each_time() {
    let policy = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(Duration::from_millis(10), 2),
    );
    let (times, attempts) = attempt_times(policy, &always_503(5)).await;
    assert_eq!(times, [0, 10, 20]);
    assert_eq!(attempts, 3);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn exponential_default_follows_feigns_documented_numbers() {
    // 100 ms, x1.5, capped at 1 s, 5 attempts in all.
    let policy = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        ExponentialBackoff::default(),
    );
    let (times, attempts) = attempt_times(policy, &always_503(8)).await;
    // Waits of 100, 150, 225 and 337.5 ms; the clock ticks in whole ms.
    let waits: Vec<u128> = times.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(times[..4], [0, 100, 250, 475]);
    assert!(matches!(waits[3], 337 | 338), "{waits:?}");
    assert_eq!(attempts, 5);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn exponential_caps_at_the_max_delay() {
    let backoff = ExponentialBackoff::new(
        Duration::from_millis(100),
        3.0,
        Duration::from_millis(500),
        6,
    )
    .unwrap();
    let policy = RetryPolicy::new(StatusDecoder::new([503]).unwrap(), backoff);
    let (times, _) = attempt_times(policy, &always_503(8)).await;
    assert_eq!(times, [0, 100, 400, 900, 1400, 1900]);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn feign_retryer_waits_as_feigns_code() {
    let policy = RetryPolicy::new(StatusDecoder::new([503]).unwrap(), FeignRetryer::default());
    let (times, attempts) = attempt_times(policy, &always_503(8)).await;
    // Waits of 150, 225, 337 and 506 ms.
    assert_eq!(times, [0, 150, 375, 712, 1218]);
    assert_eq!(attempts, 5);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_success_ends_the_schedule() {
    let policy = RetryPolicy::new(StatusDecoder::new([503]).unwrap(), FeignRetryer::default());
    let (times, attempts) = attempt_times(policy, &[503, 200, 503]).await;
    assert_eq!(times, [0, 150]);
    assert_eq!(attempts, 2);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn seeded_jitter_gives_the_same_schedule_every_run() {
    for jitter in [Jitter::Full, Jitter::Equal, Jitter::Decorrelated] {
        let run = || {
            let backoff =
                ExponentialBackoff::new(Duration::from_millis(100), 2.0, Duration::from_secs(2), 5)
                    .unwrap()
                    .with_jitter(jitter)
                    .with_seed(7);
            RetryPolicy::new(StatusDecoder::new([503]).unwrap(), backoff)
        };
        let (first, _) = attempt_times(run(), &always_503(5)).await;
        let (second, _) = attempt_times(run(), &always_503(5)).await;
        assert_eq!(first, second, "{jitter:?}");
        let jittered = first.windows(2).any(|w| {
            let wait = w[1] - w[0];
            ![100, 200, 400, 800].contains(&wait)
        });
        assert!(jittered, "{jitter:?} moved at least one wait: {first:?}");
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn standard_preset_spreads_three_retries_within_its_bounds() {
    // Seeded, so that the run is the same every time.
    let policy = presets::standard()
        .retry()
        .clone()
        .map(|decoder| decoder, |backoff| backoff.with_seed(11));
    let (times, attempts) = attempt_times(policy, &always_503(6)).await;
    assert_eq!(attempts, 4);
    for wait in times.windows(2).map(|w| w[1] - w[0]) {
        // Decorrelated jitter: between the initial 2 s and the 30 s cap.
        assert!((2000..=30_000).contains(&wait), "{times:?}");
    }
}
