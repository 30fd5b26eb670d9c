//! What the Rust runners of bench/peers share: the settings from the environment and the measurement
//! (bench/peers/README.md has the protocol).

use std::time::Instant;

use serde_json::{Value, json};

/// The runner's settings, from `BENCH_*`.
#[derive(Debug, Clone)]
pub struct Settings {
    pub base_url: String,
    pub wire: String,
    pub stream: bool,
    pub runs: usize,
    pub warmup: usize,
    /// The extra tools (`BENCH_TOOLS`), `{name, description, parameters}` each.
    pub extra: Vec<Value>,
    pub defer: bool,
    /// `BENCH_CONCURRENCY`: when above 0, the measured runs are that many at once.
    pub concurrency: usize,
}

impl Settings {
    pub fn from_env() -> Settings {
        let var = |k: &str| std::env::var(k).unwrap_or_default();
        let num = |k: &str, d: usize| var(k).parse().unwrap_or(d);
        let extra = match var("BENCH_TOOLS") {
            p if p.is_empty() => Vec::new(),
            p => {
                let text = std::fs::read_to_string(&p).unwrap_or_else(|e| fail(&format!("{p}: {e}")));
                serde_json::from_str(&text).unwrap_or_else(|e| fail(&format!("{p}: {e}")))
            }
        };
        Settings {
            base_url: var("BENCH_BASE_URL"),
            wire: if var("BENCH_WIRE").is_empty() { "chat".into() } else { var("BENCH_WIRE") },
            stream: var("BENCH_STREAM") == "1",
            runs: num("BENCH_RUNS", 200),
            warmup: num("BENCH_WARMUP", 20),
            extra,
            defer: var("BENCH_DEFER") == "1",
            concurrency: num("BENCH_CONCURRENCY", 0),
        }
    }
}

/// Exits with a message on standard error.
pub fn fail(msg: &str) -> ! {
    eprintln!("{msg}");
    std::process::exit(1)
}

/// CPU time of the whole process (user + system, every thread) in ms, and the peak RSS in KB.
pub fn usage() -> (f64, i64) {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we own.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1000.0 + t.tv_usec as f64 / 1000.0;
    (ms(u.ru_utime) + ms(u.ru_stime), u.ru_maxrss)
}

/// Prints `READY`, runs `warmup + runs` times, and prints the result line. `run` returns the final text.
pub async fn measure<F, Fut>(s: &Settings, calls: impl Fn() -> usize, mut run: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = String>,
{
    println!("READY");
    let mut output = String::new();
    for _ in 0..s.warmup {
        output = run().await;
    }
    let (c0, _) = usage();
    let t0 = Instant::now();
    for _ in 0..s.runs {
        output = run().await;
    }
    let wall = t0.elapsed().as_secs_f64() * 1000.0;
    let (c1, rss) = usage();
    if !output.contains("sunny") || calls() != s.warmup + s.runs {
        fail(&format!("wrong result: output={output:?}, tool calls={}", calls()));
    }
    let line = json!({"runs": s.runs, "cpu_ms": c1 - c0, "wall_ms": wall, "maxrss_kb": rss, "tool_calls": calls(), "output": output});
    println!("{line}");
}

/// Open file descriptors of this process, from /proc (Linux).
pub fn fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map(Iterator::count).unwrap_or(0)
}

/// Resident set now, in KB, from /proc (Linux).
pub fn rss_kb() -> i64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: i64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    // SAFETY: sysconf reads a constant.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } / 1024
}

/// Prints `READY`, runs `warmup` runs one after the other, then `concurrency` runs at once (each a task),
/// and prints the result line with per-run latencies, RSS and file descriptors.
pub async fn measure_concurrent<F, Fut>(s: &Settings, calls: impl Fn() -> usize, run: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = String> + Send + 'static,
{
    println!("READY");
    for _ in 0..s.warmup {
        run().await;
    }
    let (rss0, fds0) = (rss_kb(), fds());
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = done.clone();
    let sampler = tokio::spawn(async move {
        let mut peak = 0;
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            peak = peak.max(fds());
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        peak
    });
    let (c0, _) = usage();
    let t0 = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..s.concurrency {
        let f = run();
        set.spawn(async move {
            let t = Instant::now();
            let out = f.await;
            (t.elapsed().as_secs_f64() * 1000.0, out)
        });
    }
    let mut lat = Vec::with_capacity(s.concurrency);
    let mut output = String::new();
    while let Some(r) = set.join_next().await {
        let (ms, out) = r.unwrap_or_else(|e| fail(&format!("run task: {e}")));
        lat.push(ms);
        output = out;
    }
    let wall = t0.elapsed().as_secs_f64() * 1000.0;
    let (c1, rss) = usage();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let peak_fds = sampler.await.unwrap_or(0).max(fds0);
    if !output.contains("sunny") || calls() != s.warmup + s.concurrency {
        fail(&format!("wrong result: output={output:?}, tool calls={}", calls()));
    }
    lat.sort_by(f64::total_cmp);
    let n = lat.len();
    let line = json!({"runs": n, "concurrency": n, "cpu_ms": c1 - c0, "wall_ms": wall, "maxrss_kb": rss,
        "rss_before_kb": rss0, "lat_p50_ms": lat[n / 2], "lat_p99_ms": lat[(n * 99 / 100).min(n - 1)],
        "fds_before": fds0, "fds_peak": peak_fds, "tool_calls": calls(), "output": output});
    println!("{line}");
}
