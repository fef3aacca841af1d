//! Property tests: over any sequence of calls, outcomes, drops and waits on
//! a few keys, an open circuit admits nothing, no more probes are out than
//! allowed, keys do not touch each other, and the map keeps its bound.

use super::{
    circuit::{Ctx, Ticket},
    policy::Judged,
    BreakerKey, BreakerPolicy, CircuitState, KeyRef,
};
use crate::policy::{TransientDecoder, Verdict};
use http::StatusCode;
use proptest::prelude::*;
use std::{sync::Arc, time::Duration};
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

struct Run {
    policy: BreakerPolicy<TransientDecoder>,
    held: Vec<Ticket>,
    probes: u32,
    max_keys: usize,
}

impl Run {
    fn state(&self, n: u8) -> Option<CircuitState> {
        self.policy
            .state(&BreakerKey::authority("http", &host(n), 80))
    }

    fn states(&self) -> Vec<Option<CircuitState>> {
        (0..6).map(|n| self.state(n)).collect()
    }

    /// Applies `op`, checking what it must not break; returns the key it
    /// touched, if any.
    fn apply(&mut self, op: &Op) -> Option<u8> {
        let shared = &*self.policy.shared;
        let ctx = Ctx::of(shared);
        match *op {
            Op::Call(n) => {
                let before = self.state(n);
                let name = host(n);
                let key = KeyRef::Authority {
                    scheme: "http",
                    host: &name,
                    port: 80,
                };
                let circuit = shared.registry.get_or_insert(key, ctx);
                let admitted = circuit.admit(ctx);
                if let Some(CircuitState::Open { until }) = before {
                    if Instant::now() < until {
                        assert!(admitted.is_err(), "admitted while open");
                    }
                }
                if let Ok(ticket) = admitted {
                    self.held.push(ticket);
                }
                Some(n)
            }
            Op::Settle(i, outcome) if !self.held.is_empty() => {
                let ticket = self.held.swap_remove(i % self.held.len());
                let host = ticket.circuit().key().host().map(str::to_owned);
                ticket.settle(ctx, judged(outcome));
                host.and_then(|h| h[1..2].parse().ok())
            }
            Op::Drop(i) if !self.held.is_empty() => {
                let ticket = self.held.swap_remove(i % self.held.len());
                let host = ticket.circuit().key().host().map(str::to_owned);
                drop(ticket);
                host.and_then(|h| h[1..2].parse().ok())
            }
            _ => None,
        }
    }

    fn check(&self) {
        assert!(
            self.policy.states().len() <= self.max_keys,
            "over the key bound"
        );
        for ticket in &self.held {
            let circuit = ticket.circuit();
            assert!(circuit.probes_in_flight() <= self.probes);
            let out = self
                .held
                .iter()
                .filter(|t| Arc::ptr_eq(t.circuit(), circuit) && t.is_current_probe())
                .count();
            assert!(
                out <= self.probes as usize,
                "{out} probes out of {}",
                self.probes
            );
        }
    }
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
            let mut run = Run { policy, held: Vec::new(), probes, max_keys };
            for op in &ops {
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
