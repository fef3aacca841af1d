//! The ramp after the probes: which calls it lets through, counted.

use super::{nanos, Ramp};

/// A ramp under way: its start and shape, and the calls of its current step.
///
/// NOTE: times are nanoseconds since the policy's base, as in the circuit.
/// Step `k` (from zero) covers the times `t` with
/// `floor((t - start) * steps / duration) == k` and lets `k + 1` in `steps`
/// calls through: of the `seen` calls of a step, `ceil(seen * (k + 1) /
/// steps)` are admitted, the first one included. The count starts over with
/// each step.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ramping {
    start: u64,
    duration: u64,
    steps: u32,
    step: u32,
    seen: u64,
    admitted: u64,
}

/// What a ramp makes of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Admission {
    /// Within the step's share: the call goes.
    Admit,
    /// Beyond it: turned away; the next step starts at `retry_at`.
    Reject { retry_at: u64 },
    /// The ramp is over: the circuit closes.
    Over,
}

// ===== impl Ramping =====

impl Ramping {
    /// A ramp of shape `ramp` from `start`.
    pub(super) fn new(start: u64, ramp: Ramp) -> Self {
        Self {
            start,
            duration: nanos(ramp.duration).max(1),
            steps: ramp.steps,
            ..Self::default()
        }
    }

    /// The step at `now` (from zero), or `None` once the ramp is over.
    fn step_at(&self, now: u64) -> Option<u32> {
        let elapsed = u128::from(now.saturating_sub(self.start));
        let step = elapsed * u128::from(self.steps) / u128::from(self.duration);
        u32::try_from(step).ok().filter(|&step| step < self.steps)
    }

    /// The start of step `step`: the first time `step_at` reads it.
    fn step_start(&self, step: u32) -> u64 {
        let offset =
            (u128::from(step) * u128::from(self.duration)).div_ceil(u128::from(self.steps));
        self.start
            .saturating_add(u64::try_from(offset).unwrap_or(u64::MAX))
    }

    /// The ramp's end.
    pub(super) fn end(&self) -> u64 {
        self.start.saturating_add(self.duration)
    }

    /// The share let through at `now`, as calls per `steps`: the step from
    /// 1, and `steps` once the ramp is over.
    pub(super) fn share_at(&self, now: u64) -> (u32, u32) {
        let step = self.step_at(now).map_or(self.steps, |step| step + 1);
        (step, self.steps)
    }

    /// Counts a call at `now`, and says whether it goes.
    pub(super) fn admit(&mut self, now: u64) -> Admission {
        let Some(step) = self.step_at(now) else {
            return Admission::Over;
        };
        if step != self.step {
            self.step = step;
            self.seen = 0;
            self.admitted = 0;
        }
        self.seen = self.seen.saturating_add(1);
        // NOTE: admitted < ceil(seen * share) <=> admitted * steps < seen * (step + 1).
        let allowed = u128::from(self.seen) * u128::from(step + 1);
        if u128::from(self.admitted) * u128::from(self.steps) < allowed {
            self.admitted += 1;
            Admission::Admit
        } else {
            Admission::Reject {
                retry_at: self.step_start(step + 1),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const SECOND: u64 = 1_000_000_000;

    fn ramp(secs: u64, steps: u32) -> Ramping {
        let shape = Ramp {
            duration: Duration::from_secs(secs),
            steps,
        };
        Ramping::new(10 * SECOND, shape)
    }

    /// Which of `calls` calls at `now` go.
    fn pattern(ramp: &mut Ramping, now: u64, calls: usize) -> String {
        (0..calls)
            .map(|_| match ramp.admit(now) {
                Admission::Admit => 'x',
                Admission::Reject { .. } => '.',
                Admission::Over => 'c',
            })
            .collect()
    }

    #[test]
    fn each_step_lets_its_share_through_counting_from_its_first_call() {
        let mut ramp = ramp(4, 4);
        assert_eq!(pattern(&mut ramp, 10 * SECOND, 8), "x...x...");
        assert_eq!(pattern(&mut ramp, 11 * SECOND, 8), "x.x.x.x.");
        assert_eq!(pattern(&mut ramp, 12 * SECOND, 8), "xxx.xxx.");
        assert_eq!(pattern(&mut ramp, 14 * SECOND - 1, 8), "xxxxxxxx");
        assert_eq!(pattern(&mut ramp, 14 * SECOND, 2), "cc");
    }

    #[test]
    fn a_call_turned_away_is_told_the_next_step() {
        let mut ramp = ramp(3, 3);
        assert_eq!(ramp.admit(10 * SECOND + 5), Admission::Admit);
        assert_eq!(
            ramp.admit(10 * SECOND + 5),
            Admission::Reject {
                retry_at: 11 * SECOND
            }
        );
        assert_eq!(ramp.share_at(11 * SECOND - 1), (1, 3));
        assert_eq!(ramp.share_at(11 * SECOND), (2, 3));
        assert_eq!(ramp.share_at(13 * SECOND), (3, 3));
        assert_eq!(ramp.end(), 13 * SECOND);
    }

    #[test]
    fn steps_that_do_not_divide_the_duration_start_where_they_are_read() {
        let ramp = Ramping::new(
            0,
            Ramp {
                duration: Duration::from_nanos(10),
                steps: 3,
            },
        );
        for step in 0..3 {
            let start = ramp.step_start(step);
            assert_eq!(ramp.step_at(start), Some(step));
            if start > 0 {
                assert_eq!(ramp.step_at(start - 1), Some(step - 1));
            }
        }
        assert_eq!(ramp.step_start(3), 10);
        assert_eq!(ramp.step_at(10), None);
    }
}
