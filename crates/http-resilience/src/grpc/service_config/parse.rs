//! Reading a service config from a `serde_json::Value`, field by field, so
//! that every error carries the path of the field it is about.
//!
//! NOTE: the document is walked by hand rather than derived with serde:
//! serde's errors say where in the text a value went wrong, not which field
//! it is, and A6's rules (a range, a non-empty list, one policy of two) are
//! checks on the values after parsing anyway.

use super::{error::InvalidServiceConfig, Index, MethodConfig, MethodName, MethodPolicy};
use crate::{
    hedge::{HedgeDelay, HedgePolicy},
    policy::{grpc_code_name, GrpcBackoff, GrpcDecoder, RetryBudget, GRPC_PREVIOUS_RPC_ATTEMPTS},
    presets::GRPC_MIN_USEFUL_ATTEMPT,
    retry::RetryPolicy,
};
use serde_json::{Map, Value};
use std::{collections::HashMap, sync::Arc, time::Duration};

type Object = Map<String, Value>;
type Parsed<T> = Result<T, InvalidServiceConfig>;

/// The largest number of seconds a protobuf `Duration` holds (10 000 years):
/// a longer duration is refused, as gRPC's clients refuse it.
const MAX_SECONDS: u64 = 315_576_000_000;

/// The longest duration gRPC's clients hold, `i64::MAX` nanoseconds (about
/// 292 years): a longer one is read as this, as grpc-java reads it (grpc-go
/// refuses it).
pub(super) const DURATION_CAP: Duration = Duration::new(9_223_372_036, 854_775_807);

/// The most attempts A6 lets a service config ask for; more are read as this.
const ATTEMPT_CAP: u32 = GrpcBackoff::ATTEMPT_CAP;

/// What a whole document yields: its method configs, the index that selects
/// one for a call, and the throttling bucket.
pub(super) struct Document {
    pub(super) methods: Vec<MethodConfig>,
    pub(super) index: Index,
    pub(super) throttling: Option<Arc<RetryBudget>>,
}

/// The path of a value in the document, as the errors print it.
#[derive(Debug, Clone)]
struct Path(String);

impl Path {
    fn field(&self, name: &str) -> Self {
        if self.0.is_empty() {
            Self(name.to_owned())
        } else {
            Self(format!("{}.{name}", self.0))
        }
    }

    fn index(&self, i: usize) -> Self {
        Self(format!("{}[{i}]", self.0))
    }

    fn error(&self, problem: impl Into<String>) -> InvalidServiceConfig {
        InvalidServiceConfig::new(self.0.clone(), problem)
    }

    /// The error for `value`, refused for `problem`.
    fn refused(&self, problem: impl Into<String>, value: &Value) -> InvalidServiceConfig {
        self.error(problem).with_value(value.to_string())
    }
}

/// Reads the document `value`.
pub(super) fn document(value: &Value) -> Parsed<Document> {
    let root = Path(String::new());
    let object = as_object(value, &root, "a JSON object")?;
    let throttling = optional(object, "retryThrottling", &root, throttling)?.map(Arc::new);
    let mut methods = Vec::new();
    let mut index = Index::default();
    // The first path each name was given at, to report a duplicate.
    let mut seen = HashMap::new();
    if let Some(list) = get(object, "methodConfig") {
        let path = root.field("methodConfig");
        for (i, entry) in as_array(list, &path)?.iter().enumerate() {
            let method = method_config(entry, &path.index(i), throttling.as_ref(), &mut seen)?;
            for name in method.names() {
                index.insert(name, i);
            }
            methods.push(method);
        }
    }
    Ok(Document {
        methods,
        index,
        throttling,
    })
}

// ===== method configs =====

fn method_config(
    value: &Value,
    path: &Path,
    budget: Option<&Arc<RetryBudget>>,
    seen: &mut HashMap<MethodName, Path>,
) -> Parsed<MethodConfig> {
    let object = as_object(value, path, "an object")?;
    let names = names(object, path, seen)?;
    let timeout = optional(object, "timeout", path, positive_duration)?;
    let policy = match (get(object, "retryPolicy"), get(object, "hedgingPolicy")) {
        (Some(_), Some(_)) => {
            return Err(path.error(
                "has both a retryPolicy and a hedgingPolicy; a method takes one or the other",
            ))
        }
        (Some(retry), None) => {
            MethodPolicy::Retry(retry_policy(retry, &path.field("retryPolicy"), budget)?)
        }
        (None, Some(hedge)) => {
            MethodPolicy::Hedge(hedging_policy(hedge, &path.field("hedgingPolicy"), budget)?)
        }
        (None, None) => MethodPolicy::None,
    };
    Ok(MethodConfig {
        names,
        timeout,
        policy,
    })
}

/// The `name` list; every name must be new to the whole document.
fn names(
    object: &Object,
    path: &Path,
    seen: &mut HashMap<MethodName, Path>,
) -> Parsed<Vec<MethodName>> {
    let Some(list) = get(object, "name") else {
        return Ok(Vec::new());
    };
    let path = path.field("name");
    let mut names = Vec::new();
    for (i, value) in as_array(list, &path)?.iter().enumerate() {
        let at = path.index(i);
        let name = method_name(value, &at)?;
        if let Some(first) = seen.get(&name) {
            return Err(at.error(format!("duplicates the name at {}", first.0)));
        }
        seen.insert(name.clone(), at);
        names.push(name);
    }
    Ok(names)
}

/// One name: `{"service": "pkg.Svc", "method": "M"}`, `{"service": "pkg.Svc"}`
/// or `{}`. An empty string is read as the field left out, as gRPC does.
fn method_name(value: &Value, path: &Path) -> Parsed<MethodName> {
    let object = as_object(value, path, "an object")?;
    let text = |field: &str| -> Parsed<Option<String>> {
        let value = optional(object, field, path, |v, p| Ok(as_str(v, p)?.to_owned()))?;
        Ok(value.filter(|text| !text.is_empty()))
    };
    let (service, method) = (text("service")?, text("method")?);
    if service.is_none() && method.is_some() {
        return Err(path.error("names a method but no service"));
    }
    Ok(MethodName { service, method })
}

// ===== policies =====

fn retry_policy(
    value: &Value,
    path: &Path,
    budget: Option<&Arc<RetryBudget>>,
) -> Parsed<RetryPolicy<GrpcDecoder, GrpcBackoff>> {
    let object = as_object(value, path, "an object")?;
    let attempts = required(object, "maxAttempts", path, max_attempts)?;
    let initial = required(object, "initialBackoff", path, positive_duration)?;
    let max = required(object, "maxBackoff", path, positive_duration)?;
    let multiplier = required(object, "backoffMultiplier", path, positive_number)?;
    let codes_path = path.field("retryableStatusCodes");
    let codes = required(object, "retryableStatusCodes", path, status_codes)?;
    let decoder = GrpcDecoder::new()
        .with_codes(codes)
        .map_err(|err| codes_path.error(err.problem()))?;
    let initial = initial.min(max);
    let multiplier = multiplier_read(multiplier, initial, max);
    // NOTE: A6 only asks both backoffs to be positive. With a maximum below
    // the initial one, gRPC's `min(initial × multiplier^n, max)` is the
    // maximum every time, which is what this schedule then computes.
    let backoff = GrpcBackoff::new(attempts, initial, max, multiplier)
        .map_err(|err| path.error(err.to_string()))?;
    let mut policy = RetryPolicy::new(decoder, backoff).map_options(|o| {
        o.with_previous_attempts_header(GRPC_PREVIOUS_RPC_ATTEMPTS)
            .deadline_aware(GRPC_MIN_USEFUL_ATTEMPT)
    });
    if let Some(budget) = budget {
        policy = policy.map_options(|o| o.with_budget(Arc::clone(budget)));
    }
    Ok(policy)
}

fn hedging_policy(
    value: &Value,
    path: &Path,
    budget: Option<&Arc<RetryBudget>>,
) -> Parsed<HedgePolicy<GrpcDecoder>> {
    let object = as_object(value, path, "an object")?;
    let attempts = required(object, "maxAttempts", path, max_attempts)?;
    let delay = optional(object, "hedgingDelay", path, non_negative_duration)?;
    let codes = optional(object, "nonFatalStatusCodes", path, status_codes)?;
    let decoder = match codes.unwrap_or_default() {
        // NOTE: no non-fatal code: every status but OK ends the call.
        codes if codes.is_empty() => GrpcDecoder::none(),
        codes => GrpcDecoder::new()
            .with_codes(codes)
            .map_err(|err| path.field("nonFatalStatusCodes").error(err.problem()))?,
    };
    let delay = HedgeDelay::fixed(delay.unwrap_or(Duration::ZERO));
    let mut policy = HedgePolicy::new(decoder, delay, attempts)
        .map_err(|err| path.error(err.to_string()))?
        .map_options(|o| o.with_previous_attempts_header(GRPC_PREVIOUS_RPC_ATTEMPTS));
    if let Some(budget) = budget {
        policy = policy.map_options(|o| o.with_budget(Arc::clone(budget)));
    }
    Ok(policy)
}

/// `retryThrottling`: A6's token bucket, as [`RetryBudget`] keeps it (in
/// thousandths of a token, as gRPC does).
fn throttling(value: &Value, path: &Path) -> Parsed<RetryBudget> {
    let object = as_object(value, path, "an object")?;
    let max = required(object, "maxTokens", path, |value, path| {
        let tokens = as_number(value, path)?;
        match thousandths(tokens) {
            Some(milli) if tokens <= 1000.0 => Ok(milli),
            _ => Err(path.refused("must be in (0, 1000]", value)),
        }
    })?;
    let ratio = required(object, "tokenRatio", path, |value, path| {
        let ratio = positive_number(value, path)?;
        thousandths(ratio).ok_or_else(|| {
            path.refused("must be at least 0.001 (gRPC keeps three decimals)", value)
        })
    })?;
    Ok(RetryBudget::from_milli(max, ratio))
}

/// `x` in thousandths, its digits past the third decimal ignored (A6: 0.5466
/// is read as 0.546), if that is at least one.
fn thousandths(x: f64) -> Option<u64> {
    // NOTE: read from the number's shortest decimal form, the one the config
    // wrote: in binary, 1.005 × 1000 is just below 1005, which flooring would
    // read as 1.004.
    let text = x.to_string();
    let (whole, fraction) = text.split_once('.').unwrap_or((&text, ""));
    let digits: String = fraction.chars().chain(['0'; 3]).take(3).collect();
    let milli = whole
        .parse::<u64>()
        .ok()?
        .checked_mul(1000)?
        .checked_add(digits.parse().ok()?)?;
    (milli >= 1).then_some(milli)
}

/// `maxAttempts`: an integer of at least 2; above A6's cap of 5, the cap.
fn max_attempts(value: &Value, path: &Path) -> Parsed<u32> {
    let number = as_number(value, path)?;
    if number.fract() != 0.0 {
        return Err(path.refused("must be an integer", value));
    }
    if number < 2.0 {
        return Err(path.refused("must be at least 2", value));
    }
    Ok(if number > f64::from(ATTEMPT_CAP) {
        ATTEMPT_CAP
    } else {
        number as u32
    })
}

fn positive_number(value: &Value, path: &Path) -> Parsed<f64> {
    let number = as_number(value, path)?;
    if number > 0.0 && number.is_finite() {
        Ok(number)
    } else {
        Err(path.refused("must be greater than 0", value))
    }
}

/// `backoffMultiplier` as the schedule takes it: any positive number, as
/// gRPC's clients take it, kept within the bounds past which no wait
/// changes. At most `max ÷ initial`: from there on, every wait after the
/// first is `max`. At least what makes the second wait under half a
/// nanosecond: from there on, every wait after the first is zero.
fn multiplier_read(multiplier: f64, initial: Duration, max: Duration) -> f64 {
    // NOTE: `initial` is at least 1 ns and at most `max`, so both bounds
    // are finite and the lower is below the upper.
    let initial = initial.as_nanos() as f64;
    let upper = (max.as_nanos() as f64 / initial).max(1.0);
    let lower = 0.49 / initial;
    multiplier.clamp(lower.min(upper), upper)
}

// ===== status codes =====

fn status_codes(value: &Value, path: &Path) -> Parsed<Vec<i32>> {
    let list = as_array(value, path)?;
    let codes = list.iter().enumerate();
    codes
        .map(|(i, code)| status_code(code, &path.index(i)))
        .collect()
}

/// A code by its name, as gRPC spells it (`"UNAVAILABLE"`), or its number.
fn status_code(value: &Value, path: &Path) -> Parsed<i32> {
    match value {
        Value::String(name) => {
            code_named(name).ok_or_else(|| path.refused(unknown_code(name), value))
        }
        Value::Number(number) => match number.as_u64() {
            Some(code) if code <= 16 => Ok(code as i32),
            _ => Err(path.refused("must be a gRPC code in 0..=16", value)),
        },
        other => Err(wrong_type(path, "a status code name or number", other)),
    }
}

/// The code named `name`, exactly as gRPC's clients accept it: upper case.
fn code_named(name: &str) -> Option<i32> {
    (0..=16).find(|&code| grpc_code_name(code) == Some(name))
}

/// Why `name` is no code: a name in the wrong case, or no name at all.
fn unknown_code(name: &str) -> &'static str {
    match code_named(&name.to_ascii_uppercase()) {
        Some(_) => "is not a gRPC status code name (gRPC's names are upper case)",
        None => "is not a gRPC status code name",
    }
}

// ===== durations =====

/// A positive duration (`"0.1s"`).
fn positive_duration(value: &Value, path: &Path) -> Parsed<Duration> {
    match duration(value, path)? {
        (false, duration) if !duration.is_zero() => Ok(duration),
        _ => Err(path.refused("must be greater than 0s", value)),
    }
}

/// A duration of zero or more (`"0s"`).
fn non_negative_duration(value: &Value, path: &Path) -> Parsed<Duration> {
    match duration(value, path)? {
        (negative, duration) if !negative || duration.is_zero() => Ok(duration),
        _ => Err(path.refused("must not be negative", value)),
    }
}

/// A duration, its sign apart, read as at most [`DURATION_CAP`].
fn duration(value: &Value, path: &Path) -> Parsed<(bool, Duration)> {
    let Value::String(text) = value else {
        return Err(wrong_type(
            path,
            "a duration string such as \"1.5s\"",
            value,
        ));
    };
    match parse_duration(text) {
        Ok((negative, duration)) => Ok((negative, duration.min(DURATION_CAP))),
        Err(DurationError::Malformed) => Err(path.refused(
            "must be a duration such as \"1.5s\" (seconds, up to 9 decimals, then \"s\")",
            value,
        )),
        Err(DurationError::TooLong) => Err(path.refused(
            "must be at most 315576000000s (10 000 years, the most a protobuf Duration holds)",
            value,
        )),
    }
}

/// Why a text is not a protobuf `Duration`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DurationError {
    /// Not in its form.
    Malformed,
    /// In its form, but more seconds than it holds.
    TooLong,
}

/// A protobuf `Duration` in its JSON form: an optional `-`, whole seconds,
/// optionally `.` and one to nine digits, then `s`; nothing else (no `+`, no
/// exponent, no spaces). Its sign (`true` when negative) and its length, up
/// to the 10 000 years the type holds.
pub(super) fn parse_duration(text: &str) -> Result<(bool, Duration), DurationError> {
    let (negative, seconds, nanos) = duration_parts(text).ok_or(DurationError::Malformed)?;
    // NOTE: digits alone that do not parse overflow a `u64`.
    let seconds = seconds.parse::<u64>().unwrap_or(u64::MAX);
    if seconds > MAX_SECONDS {
        return Err(DurationError::TooLong);
    }
    Ok((negative, Duration::new(seconds, nanos)))
}

/// The sign, the digits of the seconds and the nanoseconds of a duration in
/// protobuf's JSON form, if it is in that form.
fn duration_parts(text: &str) -> Option<(bool, &str, u32)> {
    let body = text.strip_suffix('s')?;
    let (negative, body) = match body.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, body),
    };
    let (seconds, fraction) = match body.split_once('.') {
        Some((seconds, fraction)) => (seconds, Some(fraction)),
        None => (body, None),
    };
    let digits = |text: &str| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    if !digits(seconds) {
        return None;
    }
    let nanos = match fraction {
        None => 0,
        Some(fraction) if digits(fraction) && fraction.len() <= 9 => {
            let scale = 10_u32.pow(9 - fraction.len() as u32);
            fraction.parse::<u32>().ok()? * scale
        }
        Some(_) => return None,
    };
    Some((negative, seconds, nanos))
}

// ===== JSON values =====

/// A field of `object`; `null` counts as left out, as proto JSON reads it.
fn get<'a>(object: &'a Object, name: &str) -> Option<&'a Value> {
    object.get(name).filter(|value| !value.is_null())
}

/// Reads the field `name` of `object` (at `path`) with `read`, if it is there.
fn optional<T>(
    object: &Object,
    name: &str,
    path: &Path,
    read: impl FnOnce(&Value, &Path) -> Parsed<T>,
) -> Parsed<Option<T>> {
    get(object, name)
        .map(|value| read(value, &path.field(name)))
        .transpose()
}

/// Reads the field `name` of `object` (at `path`) with `read`; an error if
/// it is left out.
fn required<T>(
    object: &Object,
    name: &str,
    path: &Path,
    read: impl FnOnce(&Value, &Path) -> Parsed<T>,
) -> Parsed<T> {
    optional(object, name, path, read)?.ok_or_else(|| path.field(name).error("is required"))
}

fn as_object<'a>(value: &'a Value, path: &Path, what: &str) -> Parsed<&'a Object> {
    value
        .as_object()
        .ok_or_else(|| wrong_type(path, what, value))
}

fn as_array<'a>(value: &'a Value, path: &Path) -> Parsed<&'a Vec<Value>> {
    value
        .as_array()
        .ok_or_else(|| wrong_type(path, "an array", value))
}

fn as_str<'a>(value: &'a Value, path: &Path) -> Parsed<&'a str> {
    value
        .as_str()
        .ok_or_else(|| wrong_type(path, "a string", value))
}

fn as_number(value: &Value, path: &Path) -> Parsed<f64> {
    value
        .as_f64()
        .ok_or_else(|| wrong_type(path, "a number", value))
}

fn wrong_type(path: &Path, expected: &str, value: &Value) -> InvalidServiceConfig {
    let got = match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    path.error(format!("must be {expected}, got {got}"))
}
