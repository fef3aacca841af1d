//! Benchmarks of `http-resilience`; the code is under `benches/`, and
//! `BENCHMARKS.md` at the workspace root says how to run each and what they
//! show. This library is empty: the package exists so that the benches'
//! dependencies (criterion, reqwest, a counting allocator) stay out of the
//! published crate's dev-dependencies.
