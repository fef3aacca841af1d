//! The retry layer: when a request is safe to send again, `Retry-After`, the retryers' schedules, deadline-aware scheduling with the budget and events, and the replay of streamed bodies.

#[path = "../support/mod.rs"]
mod support;

mod deadline_budget_events;
mod decoders;
mod lost_body;
mod reopen;
mod replay;
mod report;
mod retry_after;
mod retune;
mod safety;
mod schedules;
