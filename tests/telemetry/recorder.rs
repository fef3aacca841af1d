//! A subscriber that keeps every span it is given: its name, level and
//! parent (explicit, or the span current when it was made), every field
//! given when it was made and every field recorded later, whether it was
//! closed; every event with the span it was in; and the stack of spans
//! entered now, so that an upstream can say which spans its `call` ran in
//! (the innermost is the current span, as a subscriber's `current_span`
//! would give it; overriding that method here would need `tracing-core`,
//! which is not a dependency of the tests).

use std::{
    collections::BTreeMap,
    fmt,
    sync::{Arc, Mutex, MutexGuard},
};
use tracing::{
    field::{Field, Visit},
    level_filters::LevelFilter,
    span,
    subscriber::{DefaultGuard, Interest},
    Event, Level, Metadata, Subscriber,
};

/// A field's value, with the type `tracing` was given it as, since an
/// exporter keeps that type (`server.port` an integer, `error.type` a
/// string); `tracing-opentelemetry` exports an `i64` as an integer but a
/// `u64` as a string, so the spans' integers are `i64`s (the events' are
/// not attributes of a convention, and stay as they are).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Str(String),
    U64(u64),
    I64(i64),
    Bool(bool),
    F64(f64),
    /// A value given with `%` or `?`: its text.
    Text(String),
}

/// A span as the subscriber saw it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SpanData {
    pub(crate) id: u64,
    pub(crate) name: &'static str,
    pub(crate) level: Level,
    /// The explicit parent, or the span current when this one was made.
    pub(crate) parent: Option<u64>,
    /// The fields given a value when the span was made (an `Empty` one is
    /// not among them).
    pub(crate) created: Vec<(&'static str, Value)>,
    /// Every field recorded later, in order.
    pub(crate) recorded: Vec<(&'static str, Value)>,
    /// Whether every handle to it was dropped.
    pub(crate) closed: bool,
    refs: usize,
}

impl SpanData {
    /// The value of `name`: the last one recorded, or the one it was made
    /// with.
    pub(crate) fn get(&self, name: &str) -> Option<&Value> {
        self.recorded
            .iter()
            .rev()
            .chain(self.created.iter())
            .find(|(field, _)| *field == name)
            .map(|(_, value)| value)
    }

    /// The string (or text) value of `name`.
    pub(crate) fn str(&self, name: &str) -> Option<&str> {
        match self.get(name)? {
            Value::Str(s) | Value::Text(s) => Some(s),
            other => panic!("{} {name} is not a string: {other:?}", self.name),
        }
    }

    /// The integer value of `name`, recorded as an `i64`.
    pub(crate) fn int(&self, name: &str) -> Option<i64> {
        match self.get(name)? {
            Value::I64(n) => Some(*n),
            other => panic!("{} {name} is not an i64: {other:?}", self.name),
        }
    }

    /// Every field with a value, the last one recorded winning.
    pub(crate) fn fields(&self) -> BTreeMap<&'static str, Value> {
        self.created
            .iter()
            .chain(self.recorded.iter())
            .cloned()
            .collect()
    }

    /// The same span with other ids, to compare runs.
    pub(crate) fn renumbered(&self, id: u64, parent: Option<u64>) -> Self {
        Self {
            id,
            parent,
            ..self.clone()
        }
    }

    /// The names of the fields recorded after the span was made, in order.
    pub(crate) fn recorded_names(&self) -> Vec<&'static str> {
        self.recorded.iter().map(|(name, _)| *name).collect()
    }
}

/// An event as the subscriber saw it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EventData {
    /// The span it was in (explicit, or the one current).
    pub(crate) span: Option<u64>,
    pub(crate) level: Level,
    pub(crate) fields: Vec<(&'static str, Value)>,
}

impl EventData {
    /// The value of `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&Value> {
        self.fields
            .iter()
            .find(|(field, _)| *field == name)
            .map(|(_, value)| value)
    }
}

#[derive(Default)]
struct State {
    spans: Vec<SpanData>,
    events: Vec<EventData>,
    // The spans entered now, innermost last.
    stack: Vec<u64>,
}

/// The recording subscriber; clones share what it recorded.
#[derive(Clone, Default)]
pub(crate) struct Recorder(Arc<Mutex<State>>);

impl fmt::Debug for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recorder")
            .field("spans", &self.state().spans)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    fn state(&self) -> MutexGuard<'_, State> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Makes this the subscriber of the current thread, until the guard is
    /// dropped.
    pub(crate) fn install(&self) -> DefaultGuard {
        let guard = tracing::subscriber::set_default(self.clone());
        // NOTE: a call site first reached by another test's thread while
        // this subscriber was being installed can be left cached as heard by
        // no one; asking again makes every call site ask this one too.
        tracing::callsite::rebuild_interest_cache();
        guard
    }

    /// Every span made so far, in the order they were made.
    pub(crate) fn spans(&self) -> Vec<SpanData> {
        self.state().spans.clone()
    }

    /// The spans named `name`, in the order they were made.
    pub(crate) fn named(&self, name: &str) -> Vec<SpanData> {
        self.spans()
            .into_iter()
            .filter(|span| span.name == name)
            .collect()
    }

    /// Every event so far.
    pub(crate) fn events(&self) -> Vec<EventData> {
        self.state().events.clone()
    }

    /// The spans entered now, outermost first.
    pub(crate) fn entered(&self) -> Vec<u64> {
        self.state().stack.clone()
    }
}

fn index(id: u64) -> usize {
    usize::try_from(id).expect("a span id fits") - 1
}

struct Fields<'a>(&'a mut Vec<(&'static str, Value)>);

impl Visit for Fields<'_> {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.push((field.name(), Value::F64(value)));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.push((field.name(), Value::I64(value)));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.push((field.name(), Value::U64(value)));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.push((field.name(), Value::Bool(value)));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name(), Value::Str(value.to_owned())));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .push((field.name(), Value::Text(format!("{value:?}"))));
    }
}

impl Subscriber for Recorder {
    // NOTE: every call site is always of interest, in every test of this
    // binary: `tracing` caches the interest per call site for the process.
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::always()
    }

    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::TRACE)
    }

    fn new_span(&self, attributes: &span::Attributes<'_>) -> span::Id {
        let mut state = self.state();
        let parent = if attributes.is_root() {
            None
        } else if let Some(parent) = attributes.parent() {
            Some(parent.into_u64())
        } else {
            state.stack.last().copied()
        };
        let mut created = Vec::new();
        attributes.record(&mut Fields(&mut created));
        let id = state.spans.len() as u64 + 1;
        let metadata = attributes.metadata();
        state.spans.push(SpanData {
            id,
            name: metadata.name(),
            level: *metadata.level(),
            parent,
            created,
            recorded: Vec::new(),
            closed: false,
            refs: 1,
        });
        span::Id::from_u64(id)
    }

    fn record(&self, span: &span::Id, values: &span::Record<'_>) {
        let mut state = self.state();
        let span = &mut state.spans[index(span.into_u64())];
        values.record(&mut Fields(&mut span.recorded));
    }

    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut state = self.state();
        let span = if event.is_root() {
            None
        } else if let Some(parent) = event.parent() {
            Some(parent.into_u64())
        } else {
            state.stack.last().copied()
        };
        let mut fields = Vec::new();
        event.record(&mut Fields(&mut fields));
        state.events.push(EventData {
            span,
            level: *event.metadata().level(),
            fields,
        });
    }

    fn enter(&self, span: &span::Id) {
        self.state().stack.push(span.into_u64());
    }

    fn exit(&self, span: &span::Id) {
        let mut state = self.state();
        let id = span.into_u64();
        if let Some(at) = state.stack.iter().rposition(|entered| *entered == id) {
            state.stack.remove(at);
        }
    }

    fn clone_span(&self, span: &span::Id) -> span::Id {
        self.state().spans[index(span.into_u64())].refs += 1;
        span.clone()
    }

    fn try_close(&self, span: span::Id) -> bool {
        let mut state = self.state();
        let span = &mut state.spans[index(span.into_u64())];
        span.refs -= 1;
        span.closed = span.refs == 0;
        span.closed
    }
}
