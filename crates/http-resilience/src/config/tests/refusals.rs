//! Settings that load but could never do what they say are refused, under
//! the path they were written at.

use super::refused_setting;

/// The full path `text` is refused under.
fn refused_at(text: &str) -> String {
    refused_setting(text).field().to_owned()
}

#[test]
fn a_bad_value_in_a_default_table_turned_off_is_refused_under_default() {
    let cases = [
        (
            "[default.breaker]\nenabled = false\nfailure_ratio = 2.0",
            "default.breaker.failure_ratio",
        ),
        (
            "[default.hedge]\nenabled = false\npercentile = 150.0",
            "default.hedge.percentile",
        ),
        (
            "[default.hedge]\nenabled = false\ndelay = \"10ms\"\nmax_attempts = 0",
            "default.hedge.max_attempts",
        ),
        (
            "[default.overload]\nenabled = false\nmax_keys = 0",
            "default.overload.max_keys",
        ),
        (
            "[default.overload]\nenabled = false\nmax_wait = \"0s\"",
            "default.overload.max_wait",
        ),
        (
            "[default.rate_limit]\nenabled = false\nburst = 0",
            "default.rate_limit.burst",
        ),
        (
            "[default.rate_limit]\nenabled = false\nper = \"0s\"",
            "default.rate_limit.per",
        ),
    ];
    for (text, path) in cases {
        assert_eq!(refused_at(text), path, "{text}");
    }
    // A client that turns the table on inherits the value: it is the
    // default's, and reported there.
    let text =
        "[default.hedge]\nenabled = false\npercentile = 150.0\n[clients.x.hedge]\nenabled = true";
    assert_eq!(refused_at(text), "default.hedge.percentile");
}

#[test]
fn a_client_that_hedges_is_refused_a_propagated_budget() {
    // The hedging stack sends no budget upstream: the setting could not
    // take effect.
    let text = r#"
        [clients.search]
        propagate = "grpc"
        hedge.delay = "50ms"
    "#;
    assert_eq!(refused_at(text), "clients.search.propagate");
    let inherited = "[default]\npropagate = \"grpc\"\n[clients.search]\nhedge.delay = \"50ms\"";
    assert_eq!(refused_at(inherited), "clients.search.propagate");
}

#[test]
fn a_token_ratio_under_a_thousandth_is_refused() {
    // Rounded to thousandths, 0.0005 would read as 0.001.
    let text = "[default.retry.budget]\nmax_tokens = 10\ntoken_ratio = 0.0005";
    assert_eq!(refused_at(text), "default.retry.budget.token_ratio");
}

#[test]
fn a_feign_period_under_a_millisecond_is_refused() {
    // Feign counts whole milliseconds: 500 µs would be no wait at all.
    let text = "[default]\npreset = \"feign\"\nretry.delay = \"500us\"\nretry.max_delay = \"1s\"";
    assert_eq!(refused_at(text), "default.retry.delay");
}

#[test]
fn a_budget_header_that_would_replace_another_is_refused() {
    let cases = [
        // "off" turns every other setting off; here it would be a name.
        (
            "[default]\npropagate = \"grpc\"\n[clients.x]\npropagate_header = \"off\"",
            "clients.x.propagate_header",
        ),
        // The request's own length would be replaced by the budget.
        (
            "[default]\npropagate_header = \"content-length\"\npropagate_format = \"millis\"",
            "default.propagate_header",
        ),
        // The attempt number would be lost under the budget.
        (
            "[default]\npropagate = \"grpc\"\nretry.attempt_header = \"grpc-timeout\"",
            "default.propagate_header",
        ),
        // A `grpc-timeout` with no unit fails the call on every gRPC server.
        (
            "[default]\npropagate_header = \"grpc-timeout\"\npropagate_format = \"millis\"",
            "default.propagate_format",
        ),
    ];
    for (text, path) in cases {
        assert_eq!(refused_at(text), path, "{text}");
    }
}
