//! The values the layers pass to one another in a request's extensions: the
//! call's deadline, which every layer below the one that set it reads, the
//! marker of a retry's last attempt, and the number of an attempt. They live here, apart from every
//! layer, so that no layer has to reach into another for them.
//!
//! Both are plain values: copied onto another request, or built by hand, they
//! mean what they say there and can shorten a limit, never switch one off.
//!
//! # Example
//!
//! ```
//! use http_resilience::{extensions::FinalAttempt, RequestDeadline};
//! use std::time::Duration;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let mut request = http::Request::new(());
//! request.extensions_mut().insert(RequestDeadline::after(Duration::from_secs(2)));
//! assert!(RequestDeadline::of(&request).is_some());
//! assert!(request.extensions().get::<FinalAttempt>().is_none());
//! # }
//! ```

mod attempt;
mod deadline;
mod final_attempt;

pub use self::{attempt::AttemptNumber, deadline::RequestDeadline, final_attempt::FinalAttempt};
