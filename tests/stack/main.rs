//! The three layers as a stack: the order of the layers, any composition of them, Reactor WebClient's contracts, the invariants of the canonical stack, the combined service against the three layers, guards in a row that each make a call wait, a body read after the deadline, one listener form for the retry and the guards, and a stack taken apart layer by layer.

#[path = "../support/mod.rs"]
mod support;

mod compositions;
mod fused;
mod guard_pairs;
mod invariants;
mod late_reading;
mod limits;
mod listeners;
mod order;
mod reactor_contracts;
mod wrapper;
