//! Property tests: retryers keep their bounds for any setting, and no header
//! value makes the `Retry-After` parser panic.

use super::{retry_after, ExponentialBackoff, FeignRetryer, FixedDelay, Jitter, Retryer};
use http::{HeaderMap, HeaderValue};
use proptest::prelude::*;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn jitter() -> impl Strategy<Value = Jitter> {
    prop_oneof![
        Just(Jitter::None),
        Just(Jitter::Full),
        Just(Jitter::Equal),
        Just(Jitter::Decorrelated),
    ]
}

fn millis(range: std::ops::Range<u64>) -> impl Strategy<Value = Duration> {
    range.prop_map(Duration::from_millis)
}

proptest! {
    #[test]
    fn exponential_delays_stay_within_the_jitter_bounds(
        initial in millis(0..10_000),
        extra in millis(0..60_000),
        multiplier in 1.0f64..20.0,
        max_attempts in 1u32..40,
        jitter in jitter(),
        seed in any::<u64>(),
    ) {
        let max_delay = initial + extra;
        let prototype = ExponentialBackoff::new(initial, multiplier, max_delay, max_attempts)
            .unwrap()
            .with_jitter(jitter)
            .with_seed(seed);
        let mut retryer = prototype.for_request();
        for n in 1..max_attempts {
            let delay = retryer.next_delay(n, None).expect("below the attempt limit");
            let exact = initial.as_secs_f64() * multiplier.powi(n as i32 - 1);
            let base = if exact >= max_delay.as_secs_f64() {
                max_delay
            } else {
                Duration::from_secs_f64(exact)
            };
            // One microsecond of slack for rounding to whole nanoseconds.
            let slack = Duration::from_micros(1);
            prop_assert!(delay <= max_delay, "{delay:?} above the cap {max_delay:?}");
            match jitter {
                Jitter::None => prop_assert!(delay.abs_diff(base) <= slack),
                Jitter::Full => prop_assert!(delay <= base + slack),
                Jitter::Equal => prop_assert!(delay + slack >= base / 2 && delay <= base + slack),
                _ => prop_assert!(delay >= initial && delay <= max_delay),
            }
        }
        prop_assert_eq!(retryer.next_delay(max_attempts, None), None);
    }

    #[test]
    fn server_delays_never_exceed_the_cap(
        asked in any::<u64>(),
        nanos in 0u32..1_000_000_000,
        cap in millis(0..100_000),
    ) {
        let asked = Duration::new(asked, nanos);
        let mut exponential = ExponentialBackoff::new(Duration::ZERO, 2.0, cap, 3).unwrap().for_request();
        prop_assert!(exponential.next_delay(1, Some(asked)).unwrap() <= cap);
        let mut fixed = FixedDelay::new(Duration::ZERO, 2).with_max_delay(cap);
        prop_assert!(fixed.next_delay(1, Some(asked)).unwrap() <= cap);
        let mut feign = FeignRetryer::new(Duration::from_millis(100), cap, 3);
        prop_assert!(feign.next_delay(1, Some(asked)).unwrap() <= cap);
    }

    #[test]
    fn feign_waits_never_exceed_the_max_period(
        period in millis(0..100_000),
        max_period in millis(0..100_000),
        max_attempts in 1u32..60,
    ) {
        let mut feign = FeignRetryer::new(period, max_period, max_attempts);
        for n in 1..max_attempts {
            let wait = feign.next_delay(n, None).expect("below the attempt limit");
            prop_assert!(wait <= max_period);
        }
        prop_assert_eq!(feign.next_delay(max_attempts, None), None);
    }

    #[test]
    fn retry_after_never_panics(
        value in proptest::collection::vec(any::<u8>(), 0..48),
        date in proptest::collection::vec(any::<u8>(), 0..48),
        now_secs in any::<u32>(),
    ) {
        let now = UNIX_EPOCH + Duration::from_secs(u64::from(now_secs));
        let mut headers = HeaderMap::new();
        if let Ok(value) = HeaderValue::from_bytes(&value) {
            headers.insert(http::header::RETRY_AFTER, value);
        }
        if let Ok(date) = HeaderValue::from_bytes(&date) {
            headers.insert(http::header::DATE, date);
        }
        let _ = retry_after::delay(&headers, now);
    }

    #[test]
    fn digits_are_read_as_seconds(seconds in any::<u64>(), pad in 0usize..3) {
        let text = format!("{}{seconds}{}", " ".repeat(pad), " ".repeat(pad));
        let mut headers = HeaderMap::new();
        headers.insert(http::header::RETRY_AFTER, HeaderValue::from_str(&text).unwrap());
        prop_assert_eq!(
            retry_after::delay(&headers, SystemTime::now()),
            Some(Ok(Duration::from_secs(seconds)))
        );
    }

    #[test]
    fn formatted_dates_round_trip(offset in 0u64..100_000, now_secs in 1_000_000u64..4_000_000_000) {
        let now = UNIX_EPOCH + Duration::from_secs(now_secs);
        let mut headers = HeaderMap::new();
        let at = httpdate::fmt_http_date(now + Duration::from_secs(offset));
        headers.insert(http::header::RETRY_AFTER, HeaderValue::from_str(&at).unwrap());
        prop_assert_eq!(
            retry_after::delay(&headers, now),
            Some(Ok(Duration::from_secs(offset)))
        );
    }
}
