//! Overload control against a simulated upstream of known capacity.
//!
//! The upstream (in process, no sockets) serves `SLOTS` requests at once,
//! each for about `SERVICE_TIME`, lets `QUEUE` more wait for a slot (slower
//! by their wait), and answers 503 at once beyond that; its capacity is
//! `SLOTS / SERVICE_TIME` calls per second. An open-loop driver offers calls
//! at a multiple of that capacity (seeded Poisson arrivals, each call its own
//! task, each bounded by a deadline), through the same retry stack with a
//! different overload control in the middle per variant (see
//! `overload/variants.rs`). A second scenario has the upstream answer 503 to
//! everything.
//!
//! Measured per cell, over the calls that arrived in the window: goodput
//! (successful calls per second over the capacity), the p99 latency of the
//! successful calls, and the upstream load (requests the upstream received
//! over calls offered). The targets, printed as met or not met, never
//! asserted: at 2x, goodput at least 90 % of capacity and p99 at most twice
//! the unloaded p99 (no control at 0.5x); against the failing upstream, at
//! most 1.1 requests per call offered.
//!
//! Everything runs on tokio's real clock (the bench crate's tokio has no
//! `test-util`), so the figures move a little from run to run.
//!
//! Run: `cargo bench -p http-resilience-bench --bench overload` (about two
//! minutes); see `BENCHMARKS.md`.

mod overload {
    pub(crate) mod driver;
    pub(crate) mod rng;
    pub(crate) mod upstream;
    pub(crate) mod variants;
}

use overload::{
    driver::{self, Cell, Load},
    upstream::{Mode, Shape, Upstream},
    variants::{self, Variant},
};
use std::time::Duration;

/// Requests the upstream serves at once.
const SLOTS: usize = 10;
/// Requests that may wait for a slot beyond those served.
const QUEUE: usize = 2 * SLOTS;
/// The mean time a request holds a slot.
const SERVICE_TIME: Duration = Duration::from_millis(20);
/// Each request's service time is the mean ± up to this share (seeded).
const SPREAD: f64 = 0.1;
/// The offered loads, as multiples of the capacity.
const LOADS: [f64; 4] = [0.5, 1.0, 2.0, 4.0];
/// The offered loads against the failing upstream.
const FAILING_LOADS: [f64; 2] = [1.0, 2.0];
/// Traffic before each measured window, so that adaptive controls settle.
const WARM_UP: Duration = Duration::from_millis(500);
/// The measured window of each cell (healthy upstream).
const WINDOW: Duration = Duration::from_secs(3);
/// The measured window of each cell (failing upstream: every answer is at once).
const FAILING_WINDOW: Duration = Duration::from_secs(2);

/// The whole call: the caller's deadline and `DeadlineLayer`'s budget.
pub(crate) const DEADLINE: Duration = Duration::from_secs(1);
/// Each attempt's limit, well above the slowest queued answer (about
/// `(1 + QUEUE / SLOTS)` service times).
pub(crate) const ATTEMPT_TIMEOUT: Duration = Duration::from_millis(250);
/// Attempts in all, the first included.
pub(crate) const MAX_ATTEMPTS: u32 = 3;
/// The first retry's wait (before jitter); each next one doubles.
pub(crate) const BACKOFF_INITIAL: Duration = Duration::from_millis(10);
/// The longest wait.
pub(crate) const BACKOFF_MAX: Duration = Duration::from_millis(100);
/// The retry budget: gRPC's token bucket of this many tokens...
pub(crate) const BUDGET_TOKENS: u32 = 100;
/// ...refilled by this much per success.
pub(crate) const BUDGET_RATIO: f64 = 0.1;

/// The upstream's capacity, in calls per second.
fn capacity() -> f64 {
    SLOTS as f64 / SERVICE_TIME.as_secs_f64()
}

fn shape() -> Shape {
    Shape {
        slots: SLOTS,
        queue: QUEUE,
        service_time: SERVICE_TIME,
        spread: SPREAD,
    }
}

/// One cell's figures.
#[derive(Debug, Clone, Copy)]
struct Figures {
    /// Successful calls per second over the capacity.
    goodput: f64,
    /// The p99 latency of the successful calls (none: no success).
    p99: Option<Duration>,
    /// Requests that reached the upstream per call offered.
    load: f64,
}

impl Figures {
    fn of(cell: &Cell, window: Duration) -> Self {
        Self {
            goodput: cell.successes.len() as f64 / window.as_secs_f64() / capacity(),
            p99: quantile(&cell.successes, 0.99),
            load: cell.upstream as f64 / cell.offered.max(1) as f64,
        }
    }

    fn show(&self) -> String {
        let p99 = self
            .p99
            .map_or("–".to_owned(), |p| format!("{:.1} ms", ms(p)));
        format!("{:.2} · {p99} · {:.2}", self.goodput, self.load)
    }
}

fn quantile(sorted: &[Duration], q: f64) -> Option<Duration> {
    let rank = (sorted.len() as f64 * q).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len().max(1)) - 1).copied()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One variant's row: the healthy loads, then the failing ones.
struct Row {
    name: &'static str,
    healthy: Vec<Figures>,
    failing: Vec<Figures>,
}

/// Runs one cell: a fresh upstream and a fresh stack, `multiple` × capacity.
async fn cell(variant: Variant, mode: Mode, multiple: f64, window: Duration) -> Figures {
    let upstream = Upstream::new(mode, shape(), 0x5EED);
    let stack = (variant.build)(upstream.clone());
    let load = Load {
        rate: multiple * capacity(),
        warm_up: WARM_UP,
        window,
        deadline: DEADLINE,
        seed: 0xA11 + multiple.to_bits(),
    };
    let figures = Figures::of(&driver::run(stack, &upstream, load).await, window);
    eprintln!(
        "{:<40} {:?} {multiple}x: {}",
        variant.name,
        mode,
        figures.show()
    );
    figures
}

async fn row(variant: Variant) -> Row {
    let mut healthy = Vec::new();
    for multiple in LOADS {
        healthy.push(cell(variant, Mode::Healthy, multiple, WINDOW).await);
    }
    let mut failing = Vec::new();
    for multiple in FAILING_LOADS {
        failing.push(cell(variant, Mode::Failing, multiple, FAILING_WINDOW).await);
    }
    Row {
        name: variant.name,
        healthy,
        failing,
    }
}

fn print_table(rows: &[Row]) {
    let loads = LOADS.iter().map(|m| format!(" {m}× |"));
    let failing = FAILING_LOADS.iter().map(|m| format!(" failing, {m}× |"));
    let header: String = loads.chain(failing).collect();
    println!("| variant |{header}");
    println!("|---|{}", "---:|".repeat(LOADS.len() + FAILING_LOADS.len()));
    for row in rows {
        let cells: String = row
            .healthy
            .iter()
            .chain(&row.failing)
            .map(|f| format!(" {} |", f.show()))
            .collect();
        println!("| {} |{cells}", row.name);
    }
    println!();
    println!("Each cell: goodput ÷ capacity · p99 of successful calls · upstream requests ÷ calls offered.");
}

fn verdict(met: bool, figure: String) -> String {
    format!("{} ({figure})", if met { "met" } else { "not met" })
}

fn print_targets(rows: &[Row], unloaded_p99: Duration) {
    let at_2x = LOADS.iter().position(|&m| m == 2.0).expect("2x is a load");
    println!(
        "\nTargets (unloaded p99, no control at 0.5×: {:.1} ms):\n",
        ms(unloaded_p99)
    );
    println!("| variant | 2×: goodput ≥ 0.90 | 2×: p99 ≤ 2 × unloaded | failing: load ≤ 1.1 |");
    println!("|---|---|---|---|");
    for row in rows {
        let two = row.healthy[at_2x];
        let goodput = verdict(two.goodput >= 0.9, format!("{:.3}", two.goodput));
        let p99 = two.p99.map_or("not met (no success)".to_owned(), |p| {
            let ratio = p.as_secs_f64() / unloaded_p99.as_secs_f64();
            verdict(ratio <= 2.0, format!("{ratio:.2}×"))
        });
        let worst = row.failing.iter().map(|f| f.load).fold(0.0, f64::max);
        let failing = verdict(worst <= 1.1, format!("{worst:.2}"));
        println!("| {} | {goodput} | {p99} | {failing} |", row.name);
    }
}

fn main() {
    // NOTE: one thread, as the other simulation benches: the upstream, the
    // stacks and the driver share it, so a busy machine slows them alike.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime");
    runtime.block_on(async {
        let mut rows = Vec::new();
        for variant in variants::all() {
            rows.push(row(variant).await);
        }
        let unloaded_p99 = rows[0].healthy[0].p99.expect("the unloaded run succeeds");
        print_table(&rows);
        print_targets(&rows, unloaded_p99);
    });
}
