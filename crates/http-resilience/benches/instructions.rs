//! Calls one variant of the `overhead` bench a given number of times, and
//! nothing else, so that an instruction counter can tell what one call costs
//! without the noise of a shared machine's clock (issue 6, point 1).
//!
//! Run it under callgrind twice, with `N` calls and with none, and divide the
//! difference by `N`; `BENCHMARKS.md` has the loop over the variants:
//!
//! ```text
//! cargo bench -p http-resilience --bench instructions --no-run
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/deps/instructions-<hash> ours 20000
//! ```
//!
//! Variants: `bare`, `extension` (bare + deadline extension), `tower` and
//! `ours`, as in the `overhead` bench.

// NOTE: the shared module also serves benches that use more of it.
#[allow(dead_code)]
mod support;

use std::{hint::black_box, process::ExitCode};
use support::{call, ok_service, ours, tower_nesting, with_deadline_extension, Req};
use tower::Service;

/// Makes `calls` calls of `svc`, one after another, each answered at once.
async fn run<S>(mut svc: S, calls: u64)
where
    S: Service<Req>,
    S::Error: std::fmt::Debug,
{
    for _ in 0..calls {
        black_box(call(&mut svc).await.expect("the call succeeds"));
    }
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1).filter(|arg| arg != "--bench");
    let (Some(variant), Some(Ok(calls))) = (args.next(), args.next().map(|n| n.parse::<u64>()))
    else {
        // NOTE: `cargo bench` with no arguments runs every bench; this one
        // then only says how to use it.
        eprintln!("usage: instructions <bare|extension|tower|ours> <calls> (see BENCHMARKS.md)");
        return ExitCode::SUCCESS;
    };
    let rt = support::runtime();
    rt.block_on(async {
        match variant.as_str() {
            "bare" => run(ok_service(), calls).await,
            "extension" => run(with_deadline_extension(ok_service()), calls).await,
            "tower" => run(tower_nesting(ok_service()), calls).await,
            "ours" => run(ours(ok_service()), calls).await,
            _ => {
                eprintln!("unknown variant {variant:?}");
                return ExitCode::FAILURE;
            }
        }
        ExitCode::SUCCESS
    })
}
