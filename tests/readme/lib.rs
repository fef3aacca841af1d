//! The Rust snippets of the two READMEs (the workspace's, and the published
//! crate's, `crates/http-resilience/README.md`), compiled as they are shown:
//! each is a doctest of the README's own text, included here, so a snippet
//! that would not compile when pasted into a new project (a missing `use`, a
//! type that only an example defines) fails `cargo test --workspace`. Why
//! doctests, and what `tests/readme/main.rs` checks besides, is said there.
//!
//! The snippets are `no_run`: they call upstreams that a test does not start.
//! The examples beside them (`crates/http-resilience/examples`) run the same
//! code against loopback upstreams.

/// The workspace README.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct WorkspaceReadme;

/// The published crate's README.
#[cfg(doctest)]
#[doc = include_str!("../../crates/http-resilience/README.md")]
pub struct CrateReadme;
