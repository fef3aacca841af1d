//! The three layers as a stack: the order of the layers, any composition of them, Reactor WebClient's contracts, the invariants of the canonical stack, and the one-piece stack against the three layers.

#[path = "../support/mod.rs"]
mod support;

mod compositions;
mod fused;
mod invariants;
mod limits;
mod order;
mod reactor_contracts;
