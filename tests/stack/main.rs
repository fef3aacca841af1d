//! The three layers as a stack: the order of the layers, any composition of them, Reactor WebClient's contracts, and the invariants of the canonical stack.

#[path = "../support/mod.rs"]
mod support;

mod compositions;
mod invariants;
mod limits;
mod order;
mod reactor_contracts;
