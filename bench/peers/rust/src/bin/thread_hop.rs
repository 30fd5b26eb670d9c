//! What the OS charges for handing work to another thread and back, the limit beside the Node and Swift
//! floors (docs/benchmarks.md): a run from Node or Swift crosses between the language's thread and the
//! core's several times, a run from Rust never. N round trips between two threads over std channels (a
//! futex wake and a context switch each way); process CPU (user + system, both threads) and wall time per
//! round trip, that is per two hops.
//!
//!     cargo run --release -p ambit-bench-runners --bin thread-hop -- 200000

use std::sync::mpsc;
use std::time::Instant;

fn main() {
    let n: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let (to_b, from_a) = mpsc::channel::<u32>();
    let (to_a, from_b) = mpsc::channel::<u32>();
    let echo = std::thread::spawn(move || {
        for x in from_a {
            if to_a.send(x).is_err() {
                break;
            }
        }
    });
    let round_trip = |i| {
        to_b.send(i).unwrap_or_else(|_| ambit_bench_runners::fail("the echo thread ended"));
        from_b.recv().unwrap_or_else(|_| ambit_bench_runners::fail("the echo thread ended"))
    };
    for i in 0..1_000 {
        round_trip(i);
    }
    let (c0, t0) = (ambit_bench_runners::usage().0, Instant::now());
    for i in 0..n {
        round_trip(i);
    }
    let (c1, t1) = (ambit_bench_runners::usage().0, Instant::now());
    drop(to_b);
    let _ = echo.join();
    let per = |total_ms: f64| total_ms * 1000.0 / f64::from(n);
    println!(
        "{n} round trips between two threads: {:.2} µs CPU and {:.2} µs wall per round trip (two hops)",
        per(c1 - c0),
        per((t1 - t0).as_secs_f64() * 1000.0)
    );
}
