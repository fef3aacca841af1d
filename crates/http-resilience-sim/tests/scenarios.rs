//! Each scenario's headline figure, with seed 1, as the README and
//! BENCHMARKS.md print it; and the seed's promise: the same seed, the same
//! figures.

use http_resilience_sim::{Hedging, Metastable, Outage, Scenario, Throttling};
use std::{sync::OnceLock, time::Duration};

const SEED: u64 = 1;

/// The outage with seed 1, run once for the two tests that read it (the
/// figures, and the same figures again).
fn outage() -> &'static Outage {
    static RUN: OnceLock<Outage> = OnceLock::new();
    RUN.get_or_init(|| Outage::run(SEED))
}

#[test]
fn three_retrying_layers_multiply_an_outage_by_64_and_a_shared_budget_holds_it_under_1_1() {
    let (plain, budgeted) = (outage().retries, outage().budgeted);

    // Every call that started and ended within the outage: 4 x 4 x 4.
    assert_eq!(plain.outage.amplification(), 64.0, "{plain:?}");
    assert!(budgeted.outage.amplification() <= 1.1, "{budgeted:?}");
    assert!(budgeted.outage.amplification() >= 1.0, "{budgeted:?}");

    // The brown-out: about twice the load without the budget (the model
    // expects 2.0), none added with it, where every second call fails.
    let brown_out = plain.brown_out.amplification();
    assert!((brown_out - 2.0).abs() < 0.2, "{brown_out}");
    assert!(plain.brown_out.success() > 0.99, "{plain:?}");
    assert!(budgeted.brown_out.amplification() < 1.05, "{budgeted:?}");
    assert!(
        (budgeted.brown_out.success() - 0.5).abs() < 0.1,
        "{budgeted:?}"
    );

    // Healthy, before and after: one attempt per call, every call good.
    for phase in [
        plain.healthy,
        plain.recovered,
        budgeted.healthy,
        budgeted.recovered,
    ] {
        assert_eq!(phase.amplification(), 1.0, "{phase:?}");
        assert_eq!(phase.success(), 1.0, "{phase:?}");
    }
}

#[test]
fn a_capacity_drop_leaves_retries_down_and_the_guards_bring_the_system_back() {
    let metastable = Metastable::run(SEED);
    let (plain, guarded) = (metastable.retries, metastable.guarded);

    // Healthy before the trigger, whatever the strategy.
    assert_eq!(plain.before, 1.0, "{plain:?}");
    assert_eq!(guarded.before, 1.0, "{guarded:?}");

    // Retries alone: down long after the trigger ended, at four times the load.
    assert_eq!(plain.recovery, None, "{plain:?}");
    assert!(plain.long_after < 0.01, "{plain:?}");
    assert!(plain.load_long_after > 3.5, "{plain:?}");

    // The budget alone: no retries, whether or not the backlog drains.
    assert!(
        metastable.budgeted.load_long_after < 1.05,
        "{:?}",
        metastable.budgeted
    );

    // Budget, throttling and breaker: back within a bounded time, at 1x.
    let recovery = guarded.recovery.expect("recovered");
    assert!(recovery <= Duration::from_secs(60), "{guarded:?}");
    assert!(guarded.long_after > 0.99, "{guarded:?}");
    assert!(guarded.load_long_after < 1.05, "{guarded:?}");
}

#[test]
fn hedging_at_the_95th_percentile_cuts_most_of_the_tail_for_a_few_percent_more_requests() {
    let hedging = Hedging::run(SEED);
    let (single, hedged) = (hedging.single, hedging.hedged);

    // The stragglers set the 99.9th percentile of single requests.
    assert!(single.p999_ms > 1_000.0, "{single:?}");
    assert_eq!(single.extra_requests, 0.0, "{single:?}");

    // A hedge at the 95th percentile: the tail below 100 ms (the paper: 74),
    // most of its excess over the median gone, for a few percent more
    // requests (the paper: 2 % at its 10 ms delay, about 5 % at p95).
    assert!(hedged.p999_ms < 100.0, "{hedged:?}");
    let cut = 1.0 - (hedged.p999_ms - hedged.p50_ms) / (single.p999_ms - single.p50_ms);
    assert!(cut > 0.95, "{cut}");
    assert!(hedged.extra_requests > 0.02, "{hedged:?}");
    assert!(hedged.extra_requests < 0.07, "{hedged:?}");
    assert!(
        (hedged.p50_ms - single.p50_ms).abs() < 1.0,
        "the median is untouched"
    );
}

#[test]
fn throttling_rejects_as_the_sre_formula_says_and_k_sets_the_upstreams_load() {
    let throttling = Throttling::run(SEED);
    let (none, k2, k11) = (throttling.unthrottled, throttling.k2, throttling.k11);

    // The share the client turned away follows the formula on its counts.
    for run in [k2, k11] {
        let gap = (run.reject_ratio - run.formula).abs();
        assert!(gap < 0.03, "{run:?}");
    }
    assert!(k11.reject_ratio > 0.4, "{k11:?}");

    // Unthrottled, the upstream gets twice its capacity; K = 2 sits at the
    // formula's threshold, and the upstream rejects about one request per
    // request it serves (the book's words); K = 1.1 brings its load near
    // its capacity.
    assert!((none.load - 2.0).abs() < 0.1, "{none:?}");
    assert!((k2.load - 2.0).abs() < 0.1, "{k2:?}");
    assert!(
        (k2.upstream_rejects_per_accept - 1.0).abs() < 0.15,
        "{k2:?}"
    );
    assert!(k11.load > 0.95 && k11.load < 1.15, "{k11:?}");
    assert!(k11.upstream_rejects_per_accept < 0.2, "{k11:?}");
}

#[test]
fn the_same_seed_gives_the_same_figures_and_another_seed_others() {
    let (first, again) = (outage(), Outage::run(SEED));
    assert_eq!(first.retries, again.retries);
    assert_eq!(first.budgeted, again.budgeted);
    assert_eq!(first.report().table(), again.report().table());
    let other = Outage::run(SEED + 1);
    assert_ne!(first.budgeted, other.budgeted);

    // The picture too: the same bytes.
    let dir = std::env::temp_dir().join(format!("http-resilience-sim-{}", std::process::id()));
    let path = first.report().write_svg(&dir).expect("written");
    let svg = std::fs::read_to_string(&path).expect("read back");
    again.report().write_svg(&dir).expect("written again");
    let svg_again = std::fs::read_to_string(&path).expect("read back");
    std::fs::remove_dir_all(&dir).expect("removed");
    assert_eq!(svg, svg_again);
    assert_eq!(
        path.file_name().and_then(|n| n.to_str()),
        Some("outage.svg")
    );
    assert!(svg.starts_with("<svg"), "{}", &svg[..40]);
    for series in [
        "offered (calls/s)",
        "upstream load (attempts/s)",
        "goodput (good calls/s)",
        "p99 latency",
    ] {
        assert!(svg.contains(series), "{series}");
    }
    assert!(first.report().to_string().contains("64 attempts (4^3)"));
}

#[test]
fn every_scenario_is_named() {
    for scenario in Scenario::ALL {
        assert_eq!(Scenario::from_name(scenario.name()), Some(scenario));
    }
    assert_eq!(Scenario::from_name("nonsense"), None);
}
