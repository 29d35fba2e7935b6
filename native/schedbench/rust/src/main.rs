//! schedbench-tokio: the scheduler micro-benchmarks (cycle, yield, churn, locality,
//! transfer) as Tokio tasks on `worker_threads = p`. Same options, semantics and output
//! as the C ports in ../c: a human line, then the JSON line of docs/format-bench.md.

mod benches;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

const DEFAULT_DURATION: f64 = 5.0;
const MAX_SAMPLES: usize = 3600;

#[derive(Clone, Debug)]
pub struct Options {
    pub duration: f64,
    pub warmup: f64,
    pub iterations: u64,
    pub threads: usize,
    pub procs: usize,
    pub ring: usize,
    pub spots: usize,
    pub work_words: usize,
    pub share: bool,
    pub exhaust: bool,
}

/// A counting semaphore on its own cache line. Tokio's semaphore is FIFO and hands
/// permits added by V straight to queued waiters, like the other runtimes'.
#[repr(align(64))]
pub struct Sem(Semaphore);

/// A new semaphore holds no permits.
impl Default for Sem {
    fn default() -> Self {
        Sem(Semaphore::new(0))
    }
}

impl Sem {
    pub async fn p(&self) {
        self.0.acquire().await.expect("semaphore closed").forget();
    }
    pub fn v(&self) {
        self.0.add_permits(1);
    }
}

#[repr(align(64))]
struct Counter(AtomicU64);

struct Shared {
    opts: Options,
    name: &'static str,
    counters: Vec<Counter>,
    stop: AtomicBool,
    exited: AtomicUsize,
}

static SHARED: OnceLock<Shared> = OnceLock::new();

fn shared() -> &'static Shared {
    SHARED.get().expect("benchmark not started")
}

pub fn options() -> &'static Options {
    &shared().opts
}

/// One operation done by task `index`; only that task writes its counter.
pub fn count(index: usize) {
    let c = &shared().counters[index].0;
    c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

pub fn must_stop(index: usize) -> bool {
    let s = shared();
    if s.opts.iterations > 0 && s.counters[index].0.load(Ordering::Relaxed) >= s.opts.iterations {
        s.stop.store(true, Ordering::Relaxed);
    }
    s.stop.load(Ordering::Relaxed)
}

pub fn seed(index: usize) -> u64 {
    0x9E37_79B9_7F4A_7C15u64.wrapping_mul(index as u64 + 1) | 1
}

pub fn random(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    x
}

fn program_name(bench: &str) -> String {
    format!("{bench}-tokio")
}

pub fn usage_error(bench: &str, msg: &str) -> ! {
    eprintln!("{}: {}", program_name(bench), msg);
    std::process::exit(2);
}

/// A run that cannot finish (e.g. a stalled transfer round): report and leave at once.
pub fn failure(msg: &str) -> ! {
    eprintln!("{}: {}", program_name(shared().name), msg);
    std::process::exit(1);
}

fn total_ops() -> u64 {
    shared().counters.iter().map(|c| c.0.load(Ordering::Relaxed)).sum()
}

fn parse_options(bench: &benches::Spec, args: &[String]) -> Options {
    let name = bench.name;
    let mut o = Options {
        duration: 0.0,
        warmup: 0.0,
        iterations: 0,
        threads: 0,
        procs: 1,
        ring: 5,
        spots: 0,
        work_words: 256,
        share: false,
        exhaust: false,
    };
    let (mut duration_given, mut threads_given) = (false, false);
    let mut i = 0;
    while i < args.len() {
        let flag = args[i].as_str();
        if flag == "-h" || flag == "--help" {
            println!(
                "usage: {} [-d seconds | -i iterations] [-W seconds] [-t threads] [-p processors] {}\n\
                 -d seconds (default 5), -i stop once one task did this many operations,\n\
                 -W seconds to run before measuring (default 0),\n\
                 -t tasks (default {} per processor), -p worker threads (default 1),\n\
                 -r ring size (cycle), -s spots (churn, locality), -w words touched (locality),\n\
                 -S 0|1 share data (locality), -e 0|1 park instead of yield (transfer).\n\
                 The last stdout line is a JSON object (docs/format-bench.md).",
                program_name(name),
                bench.extra_flags.chars().map(|c| format!("[-{c} N] ")).collect::<String>(),
                bench.default_threads_per_proc
            );
            std::process::exit(0);
        }
        let letter = flag.strip_prefix('-').filter(|l| l.len() == 1).unwrap_or_else(|| {
            usage_error(name, &format!("unexpected argument '{flag}' (see -h)"))
        });
        if !"ditpW".contains(letter) && !bench.extra_flags.contains(letter) {
            usage_error(name, &format!("option -{letter} does not apply to {name}"));
        }
        let value = args
            .get(i + 1)
            .unwrap_or_else(|| usage_error(name, &format!("-{letter} needs a value")));
        let int = |min: u64| -> u64 {
            match value.parse::<u64>() {
                Ok(v) if v >= min => v,
                _ => usage_error(
                    name,
                    &format!("-{letter} needs an integer >= {min}, got '{value}'"),
                ),
            }
        };
        match letter {
            "d" => {
                o.duration = match value.parse::<f64>() {
                    Ok(v) if v > 0.0 && v <= MAX_SAMPLES as f64 => v,
                    _ => usage_error(
                        name,
                        &format!("-d needs seconds in (0, {MAX_SAMPLES}], got '{value}'"),
                    ),
                };
                duration_given = true;
            }
            "W" => {
                o.warmup = match value.parse::<f64>() {
                    Ok(v) if (0.0..=MAX_SAMPLES as f64).contains(&v) => v,
                    _ => usage_error(
                        name,
                        &format!("-W needs seconds in [0, {MAX_SAMPLES}], got '{value}'"),
                    ),
                };
            }
            "i" => o.iterations = int(1),
            "t" => {
                o.threads = int(1) as usize;
                threads_given = true;
            }
            "p" => o.procs = int(1) as usize,
            "r" => o.ring = int(1) as usize,
            "s" => o.spots = int(1) as usize,
            "w" => o.work_words = int(1) as usize,
            "S" => o.share = int(0) == 1,
            "e" => o.exhaust = int(0) == 1,
            _ => unreachable!(),
        }
        if (letter == "S" || letter == "e") && int(0) > 1 {
            usage_error(name, &format!("-{letter} takes 0 or 1"));
        }
        i += 2;
    }
    if duration_given && o.iterations > 0 {
        usage_error(name, "give either -d or -i, not both");
    }
    if !duration_given && o.iterations == 0 {
        o.duration = DEFAULT_DURATION;
    }
    if o.procs > 1024 {
        usage_error(name, &format!("-p {}: at most 1024 processors", o.procs));
    }
    if !threads_given {
        o.threads = o.procs * bench.default_threads_per_proc;
    }
    if o.threads > 100_000 {
        usage_error(name, &format!("-t {}: at most 100000 threads", o.threads));
    }
    if let Err(msg) = (bench.validate)(&o) {
        usage_error(name, &msg);
    }
    o
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let spec = args
        .get(1)
        .and_then(|n| benches::SPECS.iter().find(|s| s.name == n.as_str()))
        .unwrap_or_else(|| {
            let names: Vec<&str> = benches::SPECS.iter().map(|s| s.name).collect();
            eprintln!("schedbench-tokio: usage: schedbench-tokio BENCHMARK [options]; BENCHMARK is one of {}", names.join(", "));
            std::process::exit(2);
        });
    let opts = parse_options(spec, &args[2..]);
    let threads = opts.threads;
    let procs = opts.procs;
    let iterations = opts.iterations;
    let duration = opts.duration;
    let warmup = opts.warmup;
    if SHARED
        .set(Shared {
            opts,
            name: spec.name,
            counters: (0..threads).map(|_| Counter(AtomicU64::new(0))).collect(),
            stop: AtomicBool::new(false),
            exited: AtomicUsize::new(0),
        })
        .is_err()
    {
        unreachable!("started twice");
    }

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(procs)
        .build()
        .unwrap_or_else(|e| failure(&format!("cannot start the Tokio runtime: {e}")));
    let bench = (spec.setup)(options());
    let gates: &'static [Sem] = Box::leak((0..threads).map(|_| Sem::default()).collect());
    let handles: Vec<_> = (0..threads)
        .map(|index| {
            let body = bench.task(index);
            runtime.spawn(async move {
                gates[index].p().await;
                body.await;
                shared().exited.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();

    let (nsamples, slice) = if iterations > 0 {
        (MAX_SAMPLES, 1.0)
    } else {
        let n = if duration >= 2.0 { duration as usize } else { 1 };
        (n, duration / n as f64)
    };
    let mut samples: Vec<f64> = Vec::new();
    bench.started();
    for gate in gates {
        gate.v();
    }
    std::thread::sleep(Duration::from_secs_f64(warmup));
    let baseline = total_ops();
    let start = Instant::now();
    let mut slice_start = start;
    let mut slice_ops = baseline;
    loop {
        std::thread::sleep(Duration::from_millis(1));
        let now = Instant::now();
        let stopping = if iterations > 0 {
            shared().stop.load(Ordering::Relaxed)
        } else {
            now.duration_since(start).as_secs_f64() >= duration
        };
        let elapsed = now.duration_since(slice_start).as_secs_f64();
        if elapsed >= slice - 0.0005 || stopping {
            let ops = total_ops();
            if samples.len() < nsamples && (elapsed >= slice * 0.5 || samples.is_empty()) {
                samples.push((ops - slice_ops) as f64 / elapsed);
            }
            slice_ops = ops;
            slice_start = now;
        }
        if stopping {
            break;
        }
    }
    shared().stop.store(true, Ordering::SeqCst);
    let elapsed = start.elapsed().as_secs_f64();
    let measured = total_ops() - baseline;
    while shared().exited.load(Ordering::SeqCst) < threads {
        bench.drain();
        std::thread::sleep(Duration::from_millis(1));
    }
    runtime.block_on(async {
        for h in handles {
            if let Err(e) = h.await {
                failure(&format!("a task failed: {e}"));
            }
        }
    });
    let total = total_ops();

    let ops_per_sec = measured as f64 / elapsed;
    let ns_per_op = if measured > 0 { elapsed * 1e9 / measured as f64 } else { 0.0 };
    let per_proc = ops_per_sec / procs as f64;
    println!(
        "{} tokio: {:.0} ops/s, {:.1} ns/op, {:.0} ops/s per processor ({} processors, {} threads, {:.2} s)",
        spec.name, ops_per_sec, ns_per_op, per_proc, procs, threads, elapsed
    );
    let samples: Vec<String> = samples.iter().map(|s| format!("{s:.3}")).collect();
    println!(
        "{{\"benchmark\": \"sched-{}\", \"mode\": \"\", \"runtime\": \"tokio\", \"workers\": {}, \
         \"ops_per_sec\": {:.3}, \"samples\": [{}], \"cycles_per_op\": null, \"extra\": {{\
         \"ns_per_op\": {:.3}, \"ns_per_op_per_proc\": {:.3}, \"ops_per_sec_per_proc\": {:.3}, \
         \"processors\": {}, \"threads\": {}, \"seconds\": {:.6}, \"measured_ops\": {}, \"total_ops\": {}{}}}}}",
        spec.name,
        procs,
        ops_per_sec,
        samples.join(", "),
        ns_per_op,
        ns_per_op * procs as f64,
        per_proc,
        procs,
        threads,
        elapsed,
        measured,
        total,
        bench.extra_json()
    );
}
