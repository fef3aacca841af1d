//! The simulator's command line: runs a scenario (or all of them), prints
//! its table beside the published figures, and writes its picture.
//!
//! ```text
//! cargo run -p http-resilience-sim -- outage
//! cargo run -p http-resilience-sim -- all --seed 7 --out docs/sim
//! ```

use http_resilience_sim::Scenario;
use std::{
    path::{Path, PathBuf},
    process::ExitCode,
};

const USAGE: &str = "\
usage: http-resilience-sim <scenario> [--seed N] [--out DIR]

scenarios:
  outage      retry amplification of three retrying layers, with and without a shared budget
  metastable  a capacity drop under retries, with and without budget, throttling and breaker
  hedging     hedging at the 95th percentile and the 99.9th percentile
  throttling  client-side throttling at twice the upstream's capacity
  all         every one of them

--seed N   the seed of every random draw (default 1): the same seed, the same figures
--out DIR  where the pictures go (default target/sim in the workspace)";

struct Args {
    scenarios: Vec<Scenario>,
    seed: u64,
    out: PathBuf,
}

/// The workspace's root, two levels above this crate's manifest.
fn workspace() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .nth(2)
        .unwrap_or(manifest)
        .to_path_buf()
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let which = args.next().ok_or("no scenario given")?;
    let scenarios = match which.as_str() {
        "all" => Scenario::ALL.to_vec(),
        name => vec![Scenario::from_name(name).ok_or_else(|| format!("no scenario {name:?}"))?],
    };
    let mut parsed = Args {
        scenarios,
        seed: 1,
        out: workspace().join("target/sim"),
    };
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--seed" => {
                parsed.seed = value
                    .parse()
                    .map_err(|_| format!("not a seed: {value:?}"))?
            }
            "--out" => parsed.out = PathBuf::from(value),
            _ => return Err(format!("unknown option {flag:?}")),
        }
    }
    Ok(parsed)
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(problem) => {
            eprintln!("{problem}\n\n{USAGE}");
            return ExitCode::FAILURE;
        }
    };
    for scenario in args.scenarios {
        let report = scenario.run(args.seed);
        println!("{report}");
        match report.write_svg(&args.out) {
            Ok(path) => println!("picture: {}\n", path.display()),
            Err(err) => {
                eprintln!(
                    "could not write the picture in {}: {err}",
                    args.out.display()
                );
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
