//! A call's way through the rate limit: its slot at once, a wait for it
//! within the deadline, or a refusal; and what its response says of the
//! server's limits, learned. Both stack forms (the
//! [`GuardLayer<RateLimitPolicy>`](crate::guard::GuardLayer) and the combined service)
//! drive this one type.

use super::{
    bucket::{Bucket, Granted},
    error::{Limited, RateLimited},
    events::RateLimitEvent,
    gcra::Taken,
    learn,
    policy::{RateLimitPolicy, Shared},
    settings::RateLimitMode,
};
use crate::{
    guard::Ask,
    key::{self, nanos, AtHand, Keyed},
    BoxError, RequestDeadline,
};
use std::{
    future::Future,
    pin::Pin,
    sync::{atomic::Ordering, Arc},
    task::{Context, Poll},
    time::{Duration, SystemTime},
};
use tokio::time::{Instant, Sleep};

/// One call's pass through the bucket of its key.
pub(crate) struct RateLimitPass {
    pub(super) shared: Arc<Shared>,
    pub(super) bucket: Arc<Bucket>,
    step: Step,
}

enum Step {
    /// No slot waited for.
    Idle,
    /// Waiting until `until` (at most `latest` on the policy's clock): for
    /// the slot taken, or, with no slot yet, for the fleet's lease.
    Waiting {
        until: u64,
        latest: u64,
        wait: Wait,
        sleep: Option<Pin<Box<Sleep>>>,
    },
}

/// What a call waits for.
#[derive(Debug, Clone, Copy)]
enum Wait {
    /// Its slot: with the GCRA's slot taken and its interval, given back if
    /// the call is dropped before it (none for a leased token).
    Slot(Option<(Taken, u64)>),
    /// A lease of the fleet's quota, with no slot yet.
    Lease,
}

impl std::fmt::Debug for RateLimitPass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let step = match self.step {
            Step::Idle => "idle",
            Step::Waiting { .. } => "waiting",
        };
        f.debug_struct("RateLimitPass")
            .field("key", Keyed::key(&*self.bucket))
            .field("step", &step)
            .finish()
    }
}

// ===== impl RateLimitPass =====

impl RateLimitPass {
    /// The pass of a call whose first attempt is `request`, through the
    /// bucket of its key (the one `at_hand` keeps, when it is).
    #[inline]
    pub(crate) fn new<B>(
        policy: &RateLimitPolicy,
        at_hand: &mut AtHand<Bucket>,
        request: &http::Request<B>,
    ) -> Self {
        let shared = &policy.shared;
        let lookup = key::Lookup {
            registry: &shared.registry,
            key_fn: shared.key_fn.as_deref(),
            room: shared.room(),
            now: || shared.nanos(Instant::now()),
            make: |key, now| shared.bucket(key, now),
        };
        Self {
            bucket: key::entry_for(lookup, at_hand, request),
            shared: Arc::clone(shared),
            step: Step::Idle,
        }
    }

    /// Asks for the next attempt's slot under the call's `deadline`:
    /// `Ready(Ok)` when it is now, `Pending` when the call must wait for it,
    /// `Ready(Err)` turned away.
    #[inline]
    pub(crate) fn try_admit(&mut self, ask: &mut Ask) -> Poll<Result<(), BoxError>> {
        debug_assert!(matches!(self.step, Step::Idle), "a slot asked for twice");
        let deadline = ask.deadline();
        let now = self.shared.nanos(ask.now());
        self.bucket.touch(now);
        let latest = self.latest(now, deadline);
        match self.grant(now, latest) {
            Granted::Now => Poll::Ready(Ok(())),
            Granted::At(until, taken) => self.wait(until, latest, Wait::Slot(taken)),
            Granted::Lease(until) => self.wait(until, latest, Wait::Lease),
            Granted::Refused(at, reason) => Poll::Ready(Err(self.refuse(now, at, reason))),
        }
    }

    /// What the bucket gives a call asking at `now` whose slot may come no
    /// later than `latest`: the fleet's lease when the limit is the fleet's,
    /// else the key's own GCRA.
    #[inline]
    fn grant(&self, now: u64, latest: u64) -> Granted {
        #[cfg(feature = "redis")]
        if let (Some(fleet), Some(leases)) = (&self.shared.fleet, &self.bucket.leases) {
            return fleet.grant((&self.shared, &self.bucket), leases, now, latest);
        }
        let pace = self.bucket.pace(&self.shared, now);
        self.bucket.grant(&self.shared, now, latest, pace)
    }

    /// The latest slot a call asking at `now` may take: `now` when it is
    /// turned away at once over the limit, else the end of its longest wait,
    /// no later than its deadline less the least useful attempt.
    fn latest(&self, now: u64, deadline: Option<RequestDeadline>) -> u64 {
        let settings = &self.shared.settings;
        if settings.mode == RateLimitMode::TurnAway {
            return now;
        }
        let mut latest = settings
            .max_wait
            .map_or(u64::MAX, |wait| now.saturating_add(nanos(wait)));
        if let Some(deadline) = deadline {
            let end = self.shared.nanos(deadline.instant());
            latest = latest.min(end.saturating_sub(nanos(settings.min_attempt)));
        }
        latest.max(now)
    }

    /// Starts a wait until `until`.
    fn wait(&mut self, until: u64, latest: u64, wait: Wait) -> Poll<Result<(), BoxError>> {
        self.bucket.waiting.fetch_add(1, Ordering::Relaxed);
        self.step = Step::Waiting {
            until,
            latest,
            wait,
            sleep: None,
        };
        Poll::Pending
    }

    /// Polls the wait: asks first if nothing is asked yet, then sleeps until
    /// the slot (or the lease's wait) ends; a pause the server asked for
    /// meanwhile holds the call too, or turns it away when it outlasts what
    /// the call may wait. A wait for a lease that ends (the lease came, or
    /// the fleet's fallback holds now) asks again.
    pub(crate) fn poll_admit(
        &mut self,
        deadline: Option<RequestDeadline>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), BoxError>> {
        loop {
            if let Step::Idle = self.step {
                if let Poll::Ready(asked) = self.try_admit(&mut Ask::new(deadline, None)) {
                    return Poll::Ready(asked);
                }
            }
            match self.poll_wait(cx) {
                Poll::Ready(Ok(true)) => continue,
                Poll::Ready(Ok(false)) => return Poll::Ready(Ok(())),
                Poll::Ready(Err(err)) => return Poll::Ready(Err(err)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Polls the wait under way: `Ok(false)` once the slot is reached,
    /// `Ok(true)` once a wait for a lease ended (the call asks again).
    fn poll_wait(&mut self, cx: &mut Context<'_>) -> Poll<Result<bool, BoxError>> {
        loop {
            let Step::Waiting {
                until,
                latest,
                wait,
                sleep,
            } = &mut self.step
            else {
                return Poll::Ready(Ok(false));
            };
            let at = self.shared.instant(*until);
            let sleep = sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
            let leasing = matches!(wait, Wait::Lease);
            #[cfg(feature = "redis")]
            if leasing {
                if let Some(leases) = &self.bucket.leases {
                    if leases.poll_arrived(cx) {
                        self.end_wait();
                        return Poll::Ready(Ok(true));
                    }
                }
            }
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            let floor = self.bucket.floor();
            if !leasing && floor > *until {
                // NOTE: never early: the call sent before the pause's end
                // would be the one the server said not to send.
                if floor > *latest {
                    self.release();
                    let now = self.shared.nanos(Instant::now());
                    return Poll::Ready(Err(self.refuse(now, floor, Limited::Paused)));
                }
                *until = floor;
                let next = self.shared.instant(floor);
                sleep.as_mut().reset(next);
                continue;
            }
            self.end_wait();
            return Poll::Ready(Ok(leasing));
        }
    }

    /// Ends a wait, the slot kept.
    fn end_wait(&mut self) {
        if let Step::Waiting { .. } = std::mem::replace(&mut self.step, Step::Idle) {
            self.bucket.waiting.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Hears the attempt's outcome: what its response says of the server's
    /// limits, when the policy learns from it.
    pub(crate) fn settle<T, E>(&mut self, outcome: &Result<http::Response<T>, E>) {
        self.end_wait();
        let settings = &self.shared.settings;
        if !settings.signals.any() {
            return;
        }
        let Ok(response) = outcome else {
            return;
        };
        let status = response.status().as_u16();
        let heard = learn::hear(
            settings.signals,
            status,
            response.headers(),
            SystemTime::now(),
            settings.max_pause,
        );
        if heard != learn::Heard::default() {
            let now = self.shared.nanos(Instant::now());
            let longer = self.bucket.learn(&self.shared, heard, now);
            #[cfg(feature = "redis")]
            if let (Some(fleet), Some(pause)) = (&self.shared.fleet, longer) {
                fleet.share_pause(Keyed::key(&*self.bucket), pause);
            }
            #[cfg(not(feature = "redis"))]
            let _ = longer;
        }
    }

    /// Gives back the slot a waiting call took, when no call took one after
    /// it: the call was dropped, or ended before its attempt.
    pub(crate) fn release(&mut self) {
        if let Step::Waiting { wait, .. } = std::mem::replace(&mut self.step, Step::Idle) {
            self.bucket.waiting.fetch_sub(1, Ordering::Relaxed);
            if let Wait::Slot(Some((taken, interval))) = wait {
                self.bucket.gcra.give_back(taken, interval);
            }
        }
    }

    /// The error of a call asking at `now` turned away for `reason`, a slot
    /// free at `at`.
    pub(super) fn refuse(&self, now: u64, at: u64, reason: Limited) -> BoxError {
        let retry_after = Duration::from_nanos(at.saturating_sub(now));
        let key = Keyed::key(&*self.bucket);
        if self.shared.is_heard() || tracing::enabled!(tracing::Level::DEBUG) {
            self.shared.tell(&RateLimitEvent::Rejected {
                key,
                reason,
                retry_after,
            });
        }
        let free_at = self.shared.instant(at.max(now));
        RateLimited::new(key.clone(), reason, free_at, retry_after).into()
    }
}

impl Drop for RateLimitPass {
    fn drop(&mut self) {
        self.release();
    }
}
