//! The five benchmarks; each mirrors the C port of the same name in ../c (see there
//! for the reasoning behind the details).

use std::cell::UnsafeCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::{count, failure, must_stop, random, seed, Options, Sem};

pub type Task = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

pub trait Bench: Sync {
    /// The body of task `index`.
    fn task(&'static self, index: usize) -> Task;
    /// Right after the tasks are released.
    fn started(&self) {}
    /// After the stop: release tasks blocked for good (called until all have exited).
    fn drain(&self) {}
    /// Benchmark-specific members of "extra", each as `, "key": value`.
    fn extra_json(&self) -> String {
        String::new()
    }
}

pub struct Spec {
    pub name: &'static str,
    pub extra_flags: &'static str,
    pub default_threads_per_proc: usize,
    pub validate: fn(&Options) -> Result<(), String>,
    pub setup: fn(&Options) -> &'static dyn Bench,
}

pub const SPECS: [Spec; 5] = [
    Spec {
        name: "cycle",
        extra_flags: "r",
        default_threads_per_proc: 500,
        validate: validate_cycle,
        setup: Cycle::setup,
    },
    Spec {
        name: "yield",
        extra_flags: "",
        default_threads_per_proc: 100,
        validate: no_checks,
        setup: Yield::setup,
    },
    Spec {
        name: "churn",
        extra_flags: "s",
        default_threads_per_proc: 100,
        validate: validate_spots,
        setup: Churn::setup,
    },
    Spec {
        name: "locality",
        extra_flags: "swS",
        default_threads_per_proc: 32,
        validate: validate_spots,
        setup: Locality::setup,
    },
    Spec {
        name: "transfer",
        extra_flags: "e",
        default_threads_per_proc: 1,
        validate: no_checks,
        setup: Transfer::setup,
    },
];

fn no_checks(_: &Options) -> Result<(), String> {
    Ok(())
}

fn leak<T>(value: T) -> &'static T {
    Box::leak(Box::new(value))
}

fn semaphores(n: usize) -> Vec<Sem> {
    (0..n).map(|_| Sem::default()).collect()
}

// ---- cycle ----

fn validate_cycle(o: &Options) -> Result<(), String> {
    if !o.threads.is_multiple_of(o.ring) {
        return Err(format!("-t {} is not a multiple of the ring size -r {}", o.threads, o.ring));
    }
    Ok(())
}

struct Cycle {
    sems: Vec<Sem>,
    ring: usize,
}

impl Cycle {
    fn setup(o: &Options) -> &'static dyn Bench {
        leak(Cycle { sems: semaphores(o.threads), ring: o.ring })
    }
}

impl Bench for Cycle {
    fn task(&'static self, index: usize) -> Task {
        Box::pin(async move {
            let first = index - index % self.ring;
            let next = &self.sems[first + (index - first + 1) % self.ring];
            loop {
                self.sems[index].p().await;
                let stopping = must_stop(index); // read while holding the token
                next.v();
                count(index);
                if stopping {
                    return;
                }
            }
        })
    }
    fn started(&self) {
        for first in (0..self.sems.len()).step_by(self.ring) {
            self.sems[first].v();
        }
    }
    fn extra_json(&self) -> String {
        format!(", \"ring_size\": {}, \"rings\": {}", self.ring, self.sems.len() / self.ring)
    }
}

// ---- yield ----

struct Yield;

impl Yield {
    fn setup(_: &Options) -> &'static dyn Bench {
        leak(Yield)
    }
}

impl Bench for Yield {
    fn task(&'static self, index: usize) -> Task {
        Box::pin(async move {
            loop {
                tokio::task::yield_now().await;
                count(index);
                if must_stop(index) {
                    return;
                }
            }
        })
    }
}

// ---- churn ----

fn spot_count(o: &Options) -> usize {
    if o.spots > 0 {
        o.spots
    } else {
        o.threads / 2
    }
}

fn validate_spots(o: &Options) -> Result<(), String> {
    let spots = spot_count(o);
    if spots < 1 || o.threads < spots + o.procs {
        return Err(format!(
            "-t {} must be at least spots ({}) + processors ({})",
            o.threads, spots, o.procs
        ));
    }
    Ok(())
}

struct Churn {
    spots: Vec<Sem>,
    waiters_ready: AtomicUsize,
}

impl Churn {
    fn setup(o: &Options) -> &'static dyn Bench {
        leak(Churn { spots: semaphores(spot_count(o)), waiters_ready: AtomicUsize::new(0) })
    }
}

impl Bench for Churn {
    fn task(&'static self, index: usize) -> Task {
        Box::pin(async move {
            let mut rng = seed(index);
            // The first `spots` tasks start by waiting: without that debt no P would block.
            let mut skip_post = index < self.spots.len();
            let mut spot = &self.spots[index % self.spots.len()];
            // The others start once every waiter is about to wait (see ../c/churn.c).
            if skip_post {
                self.waiters_ready.fetch_add(1, Ordering::SeqCst);
            } else {
                while self.waiters_ready.load(Ordering::SeqCst) < self.spots.len() {
                    tokio::task::yield_now().await;
                }
            }
            loop {
                if !skip_post {
                    spot.v();
                }
                skip_post = false;
                spot.p().await;
                count(index);
                if must_stop(index) {
                    return;
                }
                spot = &self.spots[(random(&mut rng) % self.spots.len() as u64) as usize];
            }
        })
    }
    fn drain(&self) {
        for spot in &self.spots {
            spot.v();
        }
    }
    fn extra_json(&self) -> String {
        format!(", \"spots\": {}", self.spots.len())
    }
}

// ---- locality ----

/// A data block. Exactly one task touches it at a time: its owner, or (with -S 1) the
/// task it was handed to while the previous owner was blocked on its semaphore.
struct Block(UnsafeCell<Vec<u64>>);
unsafe impl Sync for Block {}

#[repr(align(64))]
struct Worker {
    wake: Sem,
    block: AtomicUsize, // index into Locality::blocks
}

const EMPTY_SPOT: usize = usize::MAX;

struct Locality {
    workers: Vec<Worker>,
    blocks: Vec<Block>,
    spots: Vec<AtomicUsize>, // the worker sitting there, or EMPTY_SPOT
    share: bool,
    words: usize,
}

impl Locality {
    fn setup(o: &Options) -> &'static dyn Bench {
        leak(Locality {
            workers: (0..o.threads)
                .map(|i| Worker { wake: Sem::default(), block: AtomicUsize::new(i) })
                .collect(),
            blocks: (0..o.threads)
                .map(|_| Block(UnsafeCell::new((0..o.work_words as u64).collect())))
                .collect(),
            spots: (0..spot_count(o)).map(|_| AtomicUsize::new(EMPTY_SPOT)).collect(),
            share: o.share,
            words: o.work_words,
        })
    }
}

impl Bench for Locality {
    fn task(&'static self, index: usize) -> Task {
        Box::pin(async move {
            let me = &self.workers[index];
            let mut rng = seed(index);
            loop {
                let mine = me.block.load(Ordering::Relaxed);
                // SAFETY: block `mine` belongs to this task until it hands it over below.
                let data = unsafe { &mut *self.blocks[mine].0.get() };
                for word in data.iter_mut() {
                    *word = word.wrapping_add(index as u64);
                }
                let spot = &self.spots[(random(&mut rng) % self.spots.len() as u64) as usize];
                let previous = spot.swap(index, Ordering::AcqRel);
                if previous != EMPTY_SPOT {
                    let other = &self.workers[previous];
                    if self.share {
                        // `other` is blocked (or about to block) and touches no data now.
                        let theirs = other.block.swap(mine, Ordering::Relaxed);
                        me.block.store(theirs, Ordering::Relaxed);
                    }
                    other.wake.v();
                }
                me.wake.p().await;
                count(index);
                if must_stop(index) {
                    return;
                }
            }
        })
    }
    fn drain(&self) {
        for spot in &self.spots {
            let sitting = spot.swap(EMPTY_SPOT, Ordering::AcqRel);
            if sitting != EMPTY_SPOT {
                self.workers[sitting].wake.v();
            }
        }
    }
    fn extra_json(&self) -> String {
        format!(
            ", \"spots\": {}, \"work_words\": {}, \"share\": {}",
            self.spots.len(),
            self.words,
            self.share
        )
    }
}

// ---- transfer ----

const STALL_LIMIT: Duration = Duration::from_secs(5);

#[repr(align(64))]
struct Member {
    seen: AtomicI64,
    wake: Sem,
}

struct Transfer {
    members: Vec<Member>,
    exhaust: bool,
    round: AtomicI64,
    leader: AtomicUsize,
    done: AtomicBool,
}

impl Transfer {
    fn setup(o: &Options) -> &'static dyn Bench {
        leak(Transfer {
            members: (0..o.threads)
                .map(|_| Member { seen: AtomicI64::new(0), wake: Sem::default() })
                .collect(),
            exhaust: o.exhaust,
            round: AtomicI64::new(0),
            leader: AtomicUsize::new(0),
            done: AtomicBool::new(false),
        })
    }

    fn wake_others(&self, me: usize) {
        for (i, m) in self.members.iter().enumerate() {
            if i != me {
                m.wake.v();
            }
        }
    }

    /// One round led by `me`: spins (never yields) until everyone acknowledged.
    fn lead(&self, me: usize, rng: &mut u64) {
        let round = self.round.load(Ordering::SeqCst) + 1;
        self.round.store(round, Ordering::SeqCst);
        self.members[me].seen.store(round, Ordering::SeqCst);
        if must_stop(me) {
            self.done.store(true, Ordering::SeqCst);
            if self.exhaust {
                self.wake_others(me);
            }
            return;
        }
        if self.exhaust {
            self.wake_others(me); // after publishing the round: see ../c/transfer.c
        }
        let start = Instant::now();
        for (i, m) in self.members.iter().enumerate() {
            let mut spins = 0u32;
            while m.seen.load(Ordering::SeqCst) != round {
                std::hint::spin_loop();
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(1024) && start.elapsed() > STALL_LIMIT {
                    failure(&format!(
                        "round {round} stalled: thread {i} did not acknowledge within {} s",
                        STALL_LIMIT.as_secs()
                    ));
                }
            }
        }
        let next = (random(rng) % self.members.len() as u64) as usize;
        self.leader.store(next, Ordering::SeqCst);
        count(me);
        if self.exhaust && next != me {
            self.members[next].wake.v();
        }
    }
}

impl Bench for Transfer {
    fn task(&'static self, index: usize) -> Task {
        Box::pin(async move {
            let mut rng = seed(index);
            while !self.done.load(Ordering::SeqCst) {
                if self.leader.load(Ordering::SeqCst) == index {
                    self.lead(index, &mut rng);
                } else {
                    self.members[index]
                        .seen
                        .store(self.round.load(Ordering::SeqCst), Ordering::SeqCst);
                    if self.exhaust {
                        self.members[index].wake.p().await;
                    } else {
                        tokio::task::yield_now().await;
                    }
                }
            }
        })
    }
    fn drain(&self) {
        for m in &self.members {
            m.wake.v();
        }
    }
    fn extra_json(&self) -> String {
        format!(
            ", \"exhaust\": {}, \"rounds\": {}",
            self.exhaust,
            self.round.load(Ordering::SeqCst)
        )
    }
}
