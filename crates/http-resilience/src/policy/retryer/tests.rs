//! The ready-made retryers' schedules.

use super::*;

#[test]
fn fixed_delay_allows_exactly_its_retries() {
    let mut retryer = FixedDelay::new(Duration::from_millis(10), 2);
    let delays: Vec<_> = (1..=4).map(|n| retryer.next_delay(n, None)).collect();
    let ten = Some(Duration::from_millis(10));
    assert_eq!(delays, [ten, ten, None, None]);
}

#[test]
fn server_delay_wins_but_is_capped() {
    let mut retryer =
        FixedDelay::new(Duration::from_millis(10), 3).with_max_delay(Duration::from_secs(2));
    assert_eq!(
        retryer.next_delay(1, Some(Duration::from_millis(1500))),
        Some(Duration::from_millis(1500))
    );
    assert_eq!(
        retryer.next_delay(2, Some(Duration::from_secs(60))),
        Some(Duration::from_secs(2))
    );
}

#[test]
fn never_does_not_retry() {
    assert_eq!(FixedDelay::never().next_delay(1, None), None);
}

fn schedule<R: Retryer>(prototype: &R, attempts: u32) -> Vec<Option<Duration>> {
    let mut retryer = prototype.for_request();
    (1..=attempts)
        .map(|n| retryer.next_delay(n, None))
        .collect()
}

#[test]
fn exponential_grows_and_caps() {
    let ms = Duration::from_millis;
    let backoff = ExponentialBackoff::new(ms(100), 2.0, ms(500), 6).unwrap();
    assert_eq!(
        schedule(&backoff, 6),
        [
            Some(ms(100)),
            Some(ms(200)),
            Some(ms(400)),
            Some(ms(500)),
            Some(ms(500)),
            None
        ]
    );
    // A huge attempt number saturates at the cap instead of overflowing.
    let mut wide = ExponentialBackoff::new(ms(1), 10.0, Duration::from_secs(60), u32::MAX).unwrap();
    assert_eq!(
        wide.next_delay(u32::MAX - 1, None),
        Some(Duration::from_secs(60))
    );
}

#[test]
fn delays_beyond_584_years_are_not_cut_short() {
    // 2^64 ns is some 584 years: a longer delay is counted in seconds.
    let millennium = Duration::from_secs(1000 * 365 * 86_400);
    let backoff = ExponentialBackoff::new(millennium, 1.0, Duration::MAX, 3).unwrap();
    assert_eq!(schedule(&backoff, 1), [Some(millennium)]);
    let backoff = ExponentialBackoff::new(Duration::MAX, 10.0, Duration::MAX, 3).unwrap();
    assert_eq!(
        schedule(&backoff, 3),
        [Some(Duration::MAX), Some(Duration::MAX), None]
    );
}

#[test]
fn feign_with_zero_attempts_makes_the_first_only() {
    let mut feign = FeignRetryer::new(Duration::from_millis(100), Duration::ZERO, 0);
    assert_eq!(feign.max_attempts(), Some(1));
    assert_eq!(feign.next_delay(1, None), None);
}

#[test]
fn server_delay_wins_and_is_capped_by_max_delay() {
    let mut backoff = ExponentialBackoff::default();
    let secs = Duration::from_secs;
    assert_eq!(backoff.next_delay(1, Some(secs(0))), Some(secs(0)));
    assert_eq!(backoff.next_delay(2, Some(secs(30))), Some(secs(1)));
}

#[test]
fn jitter_stays_within_its_bounds_and_repeats_with_a_seed() {
    let ms = Duration::from_millis;
    for jitter in [Jitter::Full, Jitter::Equal, Jitter::Decorrelated] {
        let backoff = ExponentialBackoff::new(ms(100), 2.0, ms(2000), 8)
            .unwrap()
            .with_jitter(jitter)
            .with_seed(42);
        let first = schedule(&backoff, 7);
        let second = schedule(&backoff, 7);
        assert_ne!(first, second, "{jitter:?}: each request draws afresh");
        let again = schedule(
            &ExponentialBackoff::new(ms(100), 2.0, ms(2000), 8)
                .unwrap()
                .with_jitter(jitter)
                .with_seed(42),
            7,
        );
        assert_eq!(first, again, "{jitter:?}: a seed repeats");
        for (n, delay) in first.iter().enumerate() {
            let delay = delay.unwrap();
            let base = ms(100 * (1 << n)).min(ms(2000));
            let (low, high) = match jitter {
                Jitter::Full => (Duration::ZERO, base),
                Jitter::Equal => (base / 2, base),
                _ => (ms(100), ms(2000)),
            };
            assert!(low <= delay && delay <= high, "{jitter:?} #{n}: {delay:?}");
        }
    }
}

#[test]
fn invalid_backoffs_are_rejected_by_name() {
    let ms = Duration::from_millis;
    let err = ExponentialBackoff::new(ms(100), 0.5, ms(1000), 5).unwrap_err();
    assert_eq!(err.to_string(), "multiplier must be at least 1.0");
    assert_eq!(err.field(), "multiplier");
    let err = ExponentialBackoff::new(ms(100), f64::NAN, ms(1000), 5).unwrap_err();
    assert_eq!(err.to_string(), "multiplier must be at least 1.0");
    let err = ExponentialBackoff::new(ms(100), 1.5, ms(50), 5).unwrap_err();
    assert_eq!(
        err.to_string(),
        "max_delay must be at least the initial delay"
    );
    let err = ExponentialBackoff::new(ms(100), 1.5, ms(1000), 0).unwrap_err();
    assert_eq!(err.to_string(), "max_attempts must be at least 1");
    assert_eq!(err.problem(), "must be at least 1");
}

#[test]
fn feign_follows_its_code_to_the_millisecond() {
    let ms = Duration::from_millis;
    let feign = FeignRetryer::default();
    assert_eq!(
        schedule(&feign, 5),
        [
            Some(ms(150)),
            Some(ms(225)),
            Some(ms(337)),
            Some(ms(506)),
            None
        ]
    );
    let capped = FeignRetryer::new(ms(400), ms(1000), 6);
    assert_eq!(
        schedule(&capped, 6),
        [
            Some(ms(600)),
            Some(ms(900)),
            Some(ms(1000)),
            Some(ms(1000)),
            Some(ms(1000)),
            None
        ]
    );
    let mut paced = feign.for_request();
    assert_eq!(
        paced.next_delay(1, Some(Duration::from_secs(30))),
        Some(ms(1000))
    );
    assert_eq!(
        paced.next_delay(2, Some(Duration::ZERO)),
        Some(Duration::ZERO)
    );
}

#[test]
fn backoff_delegates() {
    let ms = Duration::from_millis;
    let fixed: AnyRetryer = FixedDelay::new(ms(10), 1).into();
    assert_eq!(schedule(&fixed, 2), [Some(ms(10)), None]);
    let feign: AnyRetryer = FeignRetryer::default().into();
    assert_eq!(schedule(&feign, 1), [Some(ms(150))]);
    let exp: AnyRetryer = ExponentialBackoff::default().into();
    assert_eq!(schedule(&exp, 1), [Some(ms(100))]);
}

// ===== nonsense refused, extremes taken =====

use crate::InvalidSetting;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn nonsense_backoffs_are_refused_by_field() {
    let cases: [(Duration, f64, Duration, u32, &str); 13] = [
        (ms(100), f64::NAN, ms(1000), 3, "multiplier"),
        (ms(100), -f64::NAN, ms(1000), 3, "multiplier"),
        (ms(100), f64::INFINITY, ms(1000), 3, "multiplier"),
        (ms(100), f64::NEG_INFINITY, ms(1000), 3, "multiplier"),
        (ms(100), -2.0, ms(1000), 3, "multiplier"),
        (ms(100), -0.0, ms(1000), 3, "multiplier"),
        (ms(100), 0.0, ms(1000), 3, "multiplier"),
        (ms(100), f64::MIN_POSITIVE, ms(1000), 3, "multiplier"),
        (ms(100), 0.99, ms(1000), 3, "multiplier"),
        (ms(100), 2.0, ms(99), 3, "max_delay"),
        (Duration::MAX, 2.0, Duration::ZERO, 3, "max_delay"),
        (ms(100), 2.0, ms(1000), 0, "max_attempts"),
        (Duration::ZERO, 1.0, Duration::ZERO, 0, "max_attempts"),
    ];
    for (initial, multiplier, max, attempts, field) in cases {
        let err: InvalidSetting =
            ExponentialBackoff::new(initial, multiplier, max, attempts).unwrap_err();
        assert_eq!(err.field(), field, "{err}");
        assert!(err.problem().starts_with("must be"), "{err}");
    }
}

#[test]
fn retryers_take_extreme_values() {
    // A fixed delay of `Duration::MAX`, `u32::MAX` times.
    let mut fixed = FixedDelay::new(Duration::MAX, u32::MAX);
    assert_eq!(fixed.next_delay(1, None), Some(Duration::MAX));
    assert_eq!(fixed.next_delay(u32::MAX, None), Some(Duration::MAX));
    assert_eq!(Retryer::max_attempts(&fixed), Some(u32::MAX));
    let mut deaf = FixedDelay::new(ms(10), 1).with_max_delay(Duration::ZERO);
    assert_eq!(
        deaf.next_delay(1, Some(Duration::MAX)),
        Some(Duration::ZERO)
    );

    // Feign's retryer takes any numbers, as Feign does.
    let mut huge = FeignRetryer::new(Duration::MAX, Duration::MAX, u32::MAX);
    assert_eq!(
        huge.next_delay(1, None),
        Some(Duration::from_millis(u64::MAX))
    );
    assert_eq!(huge.next_delay(2, Some(Duration::MAX)), Some(Duration::MAX));
    let mut none = FeignRetryer::new(ms(100), Duration::ZERO, 0);
    assert_eq!(Retryer::max_attempts(&none), Some(1));
    assert_eq!(none.next_delay(1, None), None);
    let mut capped = FeignRetryer::new(ms(100), ms(10), 3);
    assert_eq!(capped.next_delay(1, None), Some(ms(10)));

    // Exponential backoff at the edge of what it accepts.
    for jitter in [
        Jitter::None,
        Jitter::Full,
        Jitter::Equal,
        Jitter::Decorrelated,
    ] {
        let backoff = ExponentialBackoff::new(Duration::MAX, 10.0, Duration::MAX, u32::MAX)
            .unwrap()
            .with_jitter(jitter)
            .with_seed(1);
        let mut retryer: AnyRetryer = backoff.for_request().into();
        for attempt in [1, 2, 1000, u32::MAX - 1] {
            let delay = retryer.next_delay(attempt, None).expect("below the limit");
            assert!(delay <= Duration::MAX, "{jitter:?}");
        }
        assert_eq!(retryer.next_delay(u32::MAX, None), None);
    }
    let mut steep = ExponentialBackoff::new(ms(1), f64::MAX, Duration::from_secs(1), 10)
        .unwrap()
        .for_request();
    assert_eq!(steep.next_delay(1, None), Some(ms(1)));
    assert_eq!(steep.next_delay(2, None), Some(Duration::from_secs(1)));
    let mut flat = ExponentialBackoff::new(Duration::ZERO, 1.0, Duration::ZERO, 2)
        .unwrap()
        .with_jitter(Jitter::Decorrelated);
    assert_eq!(flat.next_delay(1, None), Some(Duration::ZERO));
}

// ===== zero grows to zero =====

#[test]
fn a_zero_initial_delay_stays_zero_however_many_attempts() {
    // `initial × multiplier^(attempts − 1)`: zero for a zero initial delay,
    // whatever the power.
    let mut zero = ExponentialBackoff::new(Duration::ZERO, 2.0, Duration::from_secs(1), u32::MAX)
        .unwrap()
        .for_request();
    assert_eq!(zero.next_delay(1, None), Some(Duration::ZERO));
    assert_eq!(zero.next_delay(1024, None), Some(Duration::ZERO));
    assert_eq!(
        zero.next_delay(1100, None),
        Some(Duration::ZERO),
        "2^1099 overflows to infinity, 0 × inf is NaN, and NaN reads as the cap"
    );
}
