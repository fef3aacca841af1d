//! The transport over real sockets: the client's timeouts and typed failures, and the fault matrix.

#[path = "../support/mod.rs"]
mod support;

mod client;
mod credentials;
mod fault_matrix;
mod limits;
