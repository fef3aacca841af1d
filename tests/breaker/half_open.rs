//! A hundred callers at once at the end of a break, through clones of one
//! stack (the combined service, then the three layers), on a multi-threaded
//! runtime: the upstream sees at most the probes the half-open ramp allows,
//! every other caller fails at once with the open-circuit error, and after
//! enough successful probes the circuit closes and every caller goes through.
//!
//! Each probe's answer is held back (`HOLD`) far longer than the burst takes
//! to be admitted or turned away, so that no probe ends (and frees its place)
//! before every caller of its burst has been seen.

use super::{assert_open, breaker, get, guarded, key, stack, support::GUARD, uri, Form, Svc};
use http::StatusCode;
use http_resilience::key::PerKey;
use http_resilience::{breaker::CircuitState, BoxError, FailureKind};
use http_resilience_mock::{vacant_addr, MockResponse, MockServer};
use std::{net::SocketAddr, sync::Arc, time::Duration};
use tokio::sync::Barrier;
use tower::ServiceExt;

/// Callers in each burst.
const CALLERS: usize = 100;

/// The break: calls fail at once, so it only has to outlast the setup.
const PAUSE: Duration = Duration::from_secs(1);

/// How long each probe's answer is held back.
const HOLD: Duration = Duration::from_millis(500);

/// What one burst's callers got.
#[derive(Debug, Default, PartialEq, Eq)]
struct Tally {
    ok: usize,
    open: usize,
}

/// `CALLERS` calls to `addr` at once, each on its own task and clone of `svc`.
async fn burst(svc: &Svc, addr: SocketAddr) -> Tally {
    let barrier = Arc::new(Barrier::new(CALLERS));
    let tasks: Vec<_> = (0..CALLERS)
        .map(|_| {
            let svc = svc.clone();
            let barrier = Arc::clone(&barrier);
            tokio::spawn(async move {
                barrier.wait().await;
                svc.oneshot(get(uri(addr))).await
            })
        })
        .collect();
    let mut tally = Tally::default();
    for task in tasks {
        match guarded(task).await.unwrap() {
            Ok(response) => {
                assert_eq!(response.status(), StatusCode::OK);
                tally.ok += 1;
            }
            Err(err) => {
                let err: BoxError = err;
                assert_open(&err, addr);
                tally.open += 1;
            }
        }
    }
    tally
}

/// Trips the circuit of a refusing upstream through `form`, starts the
/// upstream during the break, and sends bursts at its end: `probes` at once
/// may go, `successes` of them close the circuit.
async fn ramp(form: Form, probes: u32, successes: u32) {
    let addr = vacant_addr().unwrap();
    let breaker = breaker(1, PAUSE).half_open(probes, successes).unwrap();
    let svc = stack(
        form,
        &breaker,
        Duration::from_secs(10),
        Duration::from_secs(5),
    );

    let err = guarded(svc.clone().oneshot(get(uri(addr))))
        .await
        .unwrap_err();
    assert!(
        matches!(breaker.state(&key(addr)), Some(CircuitState::Open { .. })),
        "{form:?}: open after a refusal ({err}): {:?}",
        breaker.states()
    );
    let server = guarded(MockServer::start_on(addr)).await.unwrap();
    let Some(CircuitState::Open { until }) = breaker.state(&key(addr)) else {
        unreachable!()
    };
    tokio::time::sleep_until(until + Duration::from_millis(50)).await;

    // Every burst lets `probes` through, until `successes` have succeeded.
    let bursts = successes.div_ceil(probes);
    let mut sent = 0;
    for round in 1..=bursts {
        let allowed = probes.min(successes - sent) as usize;
        for _ in 0..allowed {
            server.enqueue(MockResponse::ok("probe").with_head_delay(HOLD));
        }
        let tally = burst(&svc, addr).await;
        sent += allowed as u32;
        assert_eq!(
            tally,
            Tally {
                ok: allowed,
                open: CALLERS - allowed
            },
            "{form:?}, burst {round}"
        );
        assert_eq!(
            server.request_count(),
            sent as usize,
            "{form:?}, burst {round}: only the probes reached the upstream"
        );
        let expected = if sent < successes {
            CircuitState::HalfOpen
        } else {
            CircuitState::Closed
        };
        assert_eq!(
            breaker.state(&key(addr)),
            Some(expected),
            "{form:?}, burst {round}"
        );
    }

    // Closed: the next burst goes through whole.
    for _ in 0..CALLERS {
        server.enqueue(MockResponse::ok("closed"));
    }
    let tally = burst(&svc, addr).await;
    assert_eq!(
        tally,
        Tally {
            ok: CALLERS,
            open: 0
        },
        "{form:?}"
    );
    assert_eq!(server.request_count(), sent as usize + CALLERS, "{form:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_probe_at_a_time_and_three_successes_to_close_the_combined_service() {
    ramp(Form::Combined, 1, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_probe_at_a_time_and_three_successes_to_close_the_three_layers() {
    ramp(Form::Layers, 1, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_probes_at_once_close_the_combined_service() {
    ramp(Form::Combined, 2, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_probes_at_once_close_the_three_layers() {
    ramp(Form::Layers, 2, 2).await;
}

/// How a probe ends with no outcome to count.
#[derive(Debug, Clone, Copy)]
enum Ending {
    /// The stack's own deadline (1 s) ends it, against a probe held 5 s.
    Deadline,
    /// The caller drops its call once the upstream has it (the deadline is
    /// 10 s).
    Dropped,
}

/// Trips the circuit through `form`, lets a probe go at the end of the
/// break and ends it as `ending` says; then checks that the circuit is
/// still half-open with the probe's place given back: the next call goes as
/// the probe (it reaches the upstream) instead of being turned away.
async fn probe_without_outcome(form: Form, ending: Ending) {
    let addr = vacant_addr().unwrap();
    let breaker = breaker(1, PAUSE);
    let deadline = match ending {
        Ending::Deadline => Duration::from_secs(1),
        Ending::Dropped => Duration::from_secs(10),
    };
    let svc = stack(form, &breaker, deadline, Duration::from_secs(5));
    guarded(svc.clone().oneshot(get(uri(addr))))
        .await
        .unwrap_err();
    let server = guarded(MockServer::start_on(addr)).await.unwrap();
    let Some(CircuitState::Open { until }) = breaker.state(&key(addr)) else {
        panic!("{form:?}: open: {:?}", breaker.states());
    };
    tokio::time::sleep_until(until + Duration::from_millis(50)).await;

    server.enqueue(MockResponse::ok("held").with_head_delay(Duration::from_secs(5)));
    let call = svc.clone().oneshot(get(uri(addr)));
    match ending {
        Ending::Deadline => {
            let err = guarded(call).await.unwrap_err();
            assert_eq!(
                FailureKind::of(&*err),
                FailureKind::Deadline,
                "{form:?}: {err}"
            );
        }
        Ending::Dropped => {
            // Dropped once the upstream has it, while it is held.
            let mut call = std::pin::pin!(call);
            tokio::select! {
                seen = server.wait_for_requests(1, GUARD) => assert!(seen, "{form:?}: never sent"),
                outcome = &mut call => panic!("{form:?}: the probe ended: {outcome:?}"),
            }
        }
    }
    assert_eq!(server.request_count(), 1, "{form:?}, {ending:?}");
    assert_eq!(
        breaker.state(&key(addr)),
        Some(CircuitState::HalfOpen),
        "{form:?}, {ending:?}: neither a failure nor a success"
    );

    server.enqueue(MockResponse::ok("probe"));
    let response = guarded(svc.oneshot(get(uri(addr))))
        .await
        .unwrap_or_else(|err| panic!("{form:?}, {ending:?}: the place was kept: {err}"));
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(server.request_count(), 2, "{form:?}, {ending:?}");
    assert_eq!(
        breaker.state(&key(addr)),
        Some(CircuitState::Closed),
        "{form:?}, {ending:?}"
    );
}

#[tokio::test]
async fn a_probe_ended_by_the_deadline_or_dropped_gives_its_place_back() {
    tokio::join!(
        probe_without_outcome(Form::Combined, Ending::Deadline),
        probe_without_outcome(Form::Combined, Ending::Dropped),
        probe_without_outcome(Form::Layers, Ending::Deadline),
        probe_without_outcome(Form::Layers, Ending::Dropped),
    );
}
