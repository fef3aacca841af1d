//! Property tests: no header value makes the timeout parsers panic, and what
//! is written reads back within the documented rounding.

use super::TimeoutFormat;
use http::HeaderValue;
use proptest::{collection::vec, prelude::*, sample::select};
use std::time::Duration;

fn format() -> impl Strategy<Value = TimeoutFormat> {
    prop_oneof![Just(TimeoutFormat::Millis), Just(TimeoutFormat::Grpc)]
}

/// Bytes close to a timeout: digits, units, signs and whitespace, with the odd
/// byte outside ASCII.
fn near_miss() -> impl Strategy<Value = Vec<u8>> {
    vec(select(b"0123456789HMSmunsx+-. \t\x80\xff".to_vec()), 0..16)
}

/// Durations of every magnitude, from nanoseconds to `Duration::MAX`.
fn duration() -> impl Strategy<Value = Duration> {
    (any::<u64>(), 0u32..=64, 0u32..1_000_000_000)
        .prop_map(|(secs, shift, nanos)| Duration::new(secs.checked_shr(shift).unwrap_or(0), nanos))
}

/// What a duration must read back as, in nanoseconds, when written in gRPC's
/// format: never zero, exact under 100 ms, otherwise within one part in
/// 100 000 below, and `99999999H` beyond that.
fn check_grpc(budget: Duration, read: Duration) -> Result<(), TestCaseError> {
    let largest = Duration::from_secs(99_999_999 * 3600);
    prop_assert!(!read.is_zero(), "{budget:?} written as zero");
    if budget.is_zero() {
        prop_assert_eq!(read, Duration::from_nanos(1));
    } else if budget >= largest {
        prop_assert_eq!(read, largest);
    } else if budget < Duration::from_millis(100) {
        prop_assert_eq!(read, budget);
    } else {
        prop_assert!(read <= budget, "{read:?} above {budget:?}");
        let lost = (budget - read).as_nanos();
        prop_assert!(
            lost * 100_000 <= budget.as_nanos(),
            "{budget:?} lost {lost} ns"
        );
    }
    Ok(())
}

proptest! {
    #[test]
    fn parsing_arbitrary_bytes_never_panics(bytes in vec(any::<u8>(), 0..32), format in format()) {
        if let Ok(value) = HeaderValue::from_bytes(&bytes) {
            let _ = format.parse(&value);
        }
    }

    #[test]
    fn parsing_near_misses_never_panics(bytes in near_miss(), format in format()) {
        if let Ok(value) = HeaderValue::from_bytes(&bytes) {
            if let Ok(read) = format.parse(&value) {
                // Whatever is accepted is written back the same way, up to
                // leading zeros and the choice of unit; zero, which is never
                // written, as the smallest unit.
                let again = format.format(read);
                let expected = read.max(format.smallest_unit());
                prop_assert_eq!(format.parse(&again), Ok(expected));
            }
        }
    }

    #[test]
    fn written_budgets_read_back_within_the_rounding(budget in duration()) {
        let millis = TimeoutFormat::Millis.format(budget);
        let read = TimeoutFormat::Millis.parse(&millis).expect("written values parse");
        let expected = u64::try_from(budget.as_millis()).unwrap_or(u64::MAX).max(1);
        prop_assert_eq!(read, Duration::from_millis(expected), "never below 1 ms");

        let grpc = TimeoutFormat::Grpc.format(budget);
        prop_assert!(grpc.len() <= 9, "{grpc:?} is longer than 8 digits and a unit");
        let read = TimeoutFormat::Grpc.parse(&grpc).expect("written values parse");
        check_grpc(budget, read)?;
    }
}
