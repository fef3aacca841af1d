//! Property tests: over any sequence of calls, outcomes, drops and waits on
//! a few keys, an open circuit admits nothing, no more probes are out than
//! allowed, a ramp lets no more calls through than its share and opens
//! again on a failure, keys do not touch each other, and the map keeps its
//! bound.

use super::{
    circuit::{Circuit, Ticket},
    rules::Judged,
    BreakerPolicy, CircuitState,
};
use crate::key::PerKey;
use crate::key::{KeyRef, UpstreamKey};
use crate::policy::{TransientDecoder, Verdict};
use http::StatusCode;
use proptest::prelude::*;
use std::{collections::HashMap, sync::Arc, time::Duration};
use tokio::time::Instant;

#[derive(Debug, Clone)]
enum Op {
    Call(u8),
    Settle(usize, u8),
    Drop(usize),
    Wait(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..6).prop_map(Op::Call),
        4 => (any::<usize>(), 0u8..3).prop_map(|(i, o)| Op::Settle(i, o)),
        1 => any::<usize>().prop_map(Op::Drop),
        2 => (0u64..3000).prop_map(Op::Wait),
    ]
}

fn host(n: u8) -> String {
    format!("h{n}.test")
}

fn judged(outcome: u8) -> Judged {
    match outcome {
        0 => Judged::Success,
        1 => Judged::Failure(Verdict::retry(StatusCode::SERVICE_UNAVAILABLE)),
        _ => Judged::Ignored,
    }
}

/// The calls of one ramp's step on one key: the step (its ramp's end and
/// its share), the calls that came and those let through.
#[derive(Debug, Default)]
struct Step {
    step: Option<(Instant, u32, u32)>,
    seen: u64,
    through: u64,
}

struct Run {
    policy: BreakerPolicy<TransientDecoder>,
    /// The calls admitted and not ended yet, each with its circuit.
    held: Vec<(Arc<Circuit>, Ticket)>,
    probes: u32,
    max_keys: usize,
    steps: HashMap<u8, Step>,
}

impl Run {
    fn state(&self, n: u8) -> Option<CircuitState> {
        self.policy
            .state(&UpstreamKey::authority("http", &host(n), 80))
    }

    fn states(&self) -> Vec<Option<CircuitState>> {
        (0..6).map(|n| self.state(n)).collect()
    }

    /// Applies `op`, checking what it must not break; returns the key it
    /// touched, if any.
    fn apply(&mut self, op: &Op) -> Option<u8> {
        match *op {
            Op::Call(n) => {
                self.call(n);
                Some(n)
            }
            Op::Settle(i, outcome) if !self.held.is_empty() => {
                let (circuit, ticket) = self.held.swap_remove(i % self.held.len());
                let n = number(&circuit);
                let ramping = ticket.is_current_ramp(&circuit);
                let judged = judged(outcome);
                let shared = &*self.policy.shared;
                ticket.settle(&circuit, shared.ctx(), judged);
                if ramping {
                    let state = Some(circuit.state(shared.rules.clock.base()));
                    match judged {
                        Judged::Failure(_) => assert!(
                            matches!(state, Some(CircuitState::Open { .. })),
                            "a failure in the ramp left {state:?}"
                        ),
                        _ => assert!(matches!(state, Some(CircuitState::Ramp { .. }))),
                    }
                }
                n
            }
            Op::Drop(i) if !self.held.is_empty() => {
                let (circuit, ticket) = self.held.swap_remove(i % self.held.len());
                let n = number(&circuit);
                let base = self.policy.shared.rules.clock.base();
                let before = circuit.state(base);
                ticket.release(&circuit);
                if let CircuitState::Ramp { .. } = before {
                    assert_eq!(before, circuit.state(base), "a drop changed a ramp");
                }
                n
            }
            _ => None,
        }
    }

    /// A call on key `n`: turned away while open, within the share while
    /// ramping, closing the circuit at the ramp's end.
    fn call(&mut self, n: u8) {
        let shared = &*self.policy.shared;
        let ctx = shared.ctx();
        let before = self.state(n);
        let name = host(n);
        let key = KeyRef::Authority {
            scheme: "http",
            host: &name,
            port: 80,
        };
        let circuit = shared.registry.get_or_insert(key, ctx);
        let admitted = circuit.admit(ctx);
        let now = Instant::now();
        match before {
            Some(CircuitState::Open { until }) if now < until => {
                assert!(admitted.is_err(), "admitted while open");
            }
            Some(CircuitState::Ramp { until, .. }) if now >= until => {
                assert!(admitted.is_ok(), "turned away after the ramp");
                assert_eq!(self.state(n), Some(CircuitState::Closed));
            }
            Some(CircuitState::Ramp {
                admitted: a,
                of,
                until,
            }) => {
                let step = self.steps.entry(n).or_default();
                if step.step != Some((until, a, of)) {
                    *step = Step {
                        step: Some((until, a, of)),
                        ..Step::default()
                    };
                }
                step.seen += 1;
                step.through += u64::from(admitted.is_ok());
                let share = step.seen * u64::from(a);
                assert!(
                    step.through * u64::from(of) < share + u64::from(of),
                    "{} of {} calls let through at {a} in {of}",
                    step.through,
                    step.seen
                );
            }
            _ => {}
        }
        if let Ok(ticket) = admitted {
            self.held.push((circuit, ticket));
        }
    }

    fn check(&self) {
        assert!(
            self.policy.states().len() <= self.max_keys,
            "over the key bound"
        );
        for (circuit, _) in &self.held {
            assert!(circuit.probes_in_flight() <= self.probes);
            let out = self
                .held
                .iter()
                .filter(|(c, t)| Arc::ptr_eq(c, circuit) && t.is_current_probe(c))
                .count();
            assert!(
                out <= self.probes as usize,
                "{out} probes out of {}",
                self.probes
            );
        }
    }
}

/// The number of the key of `circuit`.
fn number(circuit: &Circuit) -> Option<u8> {
    let host = circuit.key().host()?;
    host[1..2].parse().ok()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn circuits_keep_their_invariants(
        consecutive in 1u32..4,
        min_throughput in 1u32..6,
        probes in 1u32..4,
        successes in 1u32..4,
        max_keys in 1usize..8,
        ramp_steps in 0u32..5,
        ramp_secs in 1u64..6,
        keys in 1u8..7,
        ops in proptest::collection::vec(op(), 1..120),
    ) {
        let runtime = crate::test_support::paused();
        runtime.block_on(async {
            let policy = BreakerPolicy::default()
                .consecutive_failures(consecutive).unwrap()
                .failure_ratio(0.5, Duration::from_secs(10), min_throughput).unwrap()
                .break_duration(Duration::from_secs(1), Duration::from_secs(4)).unwrap()
                .half_open(probes, successes).unwrap()
                .max_keys(max_keys, Duration::from_secs(5)).unwrap()
                .with_seed(7);
            // NOTE: no ramp when `ramp_steps` is zero.
            let policy = match ramp_steps {
                0 => policy,
                steps => policy.ramp(Duration::from_secs(ramp_secs), steps).unwrap(),
            };
            let steps = HashMap::new();
            let mut run = Run { policy, held: Vec::new(), probes, max_keys, steps };
            // NOTE: the calls go to the first `keys` keys: with one or two,
            // circuits reach their ramps often.
            let ops = ops.into_iter().map(|op| match op {
                Op::Call(n) => Op::Call(n % keys),
                op => op,
            });
            for op in &ops.collect::<Vec<_>>() {
                if let Op::Wait(ms) = op {
                    tokio::time::advance(Duration::from_millis(*ms)).await;
                    continue;
                }
                let before = run.states();
                let touched = run.apply(op);
                let after = run.states();
                for n in 0..6u8 {
                    let i = usize::from(n);
                    if Some(n) != touched && before[i].is_some() && after[i].is_some() {
                        assert_eq!(before[i], after[i], "key {n} changed by {op:?}");
                    }
                }
                run.check();
            }
        });
    }
}
