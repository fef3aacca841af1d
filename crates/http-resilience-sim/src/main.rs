//! The simulator's command line (placeholder).
use std::time::Instant as Wall;
fn main() {
    let start = Wall::now();
    let outcome = http_resilience_sim::outage::run(1);
    println!("{}", outcome.report());
    let path = outcome
        .report()
        .write_svg(std::path::Path::new("/tmp/sim"))
        .unwrap();
    println!("{} in {:?}", path.display(), start.elapsed());
}
