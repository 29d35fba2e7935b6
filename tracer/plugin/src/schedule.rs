//! The quantum schedule (`quantum=Q`): the vCPUs that have a region open take turns, each
//! running Q instructions (counted at translation-block starts, so a turn may overrun by
//! one block) before the next one in index order runs its own Q. A turn also ends at the
//! end of an operation (a benchmark loop's marker, native/harness's hc_count), so that an
//! operation of L < Q instructions runs alone in its turn: a line every vCPU writes at
//! every operation moves at each one, not L / Q times per operation. Host threads run a
//! program's emulated CPUs in host-scheduler slices of milliseconds, in which a line stays
//! in one vCPU's cache for thousands of operations; in turns of Q instructions, a line that
//! every vCPU writes at every operation of more than Q instructions moves at each one, as it
//! does between cores running together. One vCPU runs at a time, so the order of the traced
//! accesses, and the transfers counted from it, depend on the instruction counts only.
//!
//! A vCPU leaves the turns while it waits outside guest code (a system call in user mode,
//! an idle vCPU in system mode) and joins them again after. A turn that does not come
//! within `LAPSE` (the holder is stuck in the host: QEMU's exclusive sections wait for
//! every running vCPU) is skipped: the vCPU runs without its turn, counted as a lapse, so
//! the run goes on and says that its order was not the schedule's.
//!
//! A futex call that wakes (FUTEX_WAKE and its kin) never waits: the waker keeps its
//! turn, and when it woke k waiters it holds the turn until k woken vCPUs have joined the
//! turns again (up to `LAPSE`), so a woken waiter rejoins at the waker's instruction, not
//! wherever the others got to while the host took to run it.
//!
//! With `jitter=on` each turn's length is drawn uniformly from Q/2 to 3Q/2 (a fixed
//! pseudo-random sequence, so a run's order still depends on instruction counts only).
//! Turns of exactly Q keep the vCPUs' relative phases as they were when the turns began:
//! a loop of system calls whose instruction counts repeat can settle into one of several
//! interleavings and stay there for a whole run, where cores running together drift
//! between them.
//!
//! With `workers=N` the turns start only once N vCPUs have joined: a worker whose loop
//! starts first waits for the others (up to `START_LAPSE`, then a lapse), so that no
//! window begins with a lone worker for as long as the host takes to start the rest (a
//! host-timed share of its operations that moved nothing, different in every run).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

const LAPSE: Duration = Duration::from_millis(500);
/// How long the first members wait for the others before the turns start without them
/// (counted as a lapse): a missing one may itself wait for the waiting ones, in QEMU's
/// exclusive sections, so no longer than a turn's lapse.
const START_LAPSE: Duration = LAPSE;
/// How long the vCPU whose turn comes next spins, watching for it, before it sleeps: a
/// turn passed to a sleeping thread waits for the host to wake it (milliseconds on a busy
/// host). Only that one vCPU spins; it is woken when it becomes next.
const SPIN: Duration = Duration::from_micros(50);
const NOBODY: u32 = u32::MAX;

/// Whose turn it is, among which vCPUs: the schedule's state, apart from its waiting.
#[derive(Default, Debug)]
pub struct Turns {
    quantum: u64,
    /// The vCPUs taking turns: a region open, not waiting outside guest code.
    members: u64,
    /// The vCPU whose turn it is.
    holder: Option<u32>,
    /// Instructions the holder ran in its turn so far, and the turn's length.
    used: u64,
    length: u64,
    /// With `jitter=on`: the state of the turn lengths' pseudo-random sequence.
    jitter: Option<u64>,
    /// The members the turns wait for before the first one starts (0: none).
    expected: u32,
    started: bool,
    /// Woken futex waiters not yet back in the turns (a waiter back before its waker's
    /// call returned counts below zero), and the waker holding its turn for them.
    owed: i64,
    waker: Option<u32>,
}

impl Turns {
    /// Turns of `quantum` instructions, starting once `expected` vCPUs have joined.
    pub fn new(quantum: u64, expected: u32) -> Self {
        Turns { quantum, length: quantum, expected, ..Turns::default() }
    }

    /// The same turns, each of a length drawn from Q/2 to 3Q/2.
    pub fn jittered(self) -> Self {
        Turns { jitter: Some(0x9e37_79b9_7f4a_7c15), ..self }
    }

    /// `holder`'s turn (if any) starts: none of its instructions counted yet.
    fn begin(&mut self, holder: Option<u32>) {
        self.holder = holder;
        self.used = 0;
        self.length = match self.jitter.as_mut() {
            Some(state) => {
                // xorshift64: any fixed sequence spread over the range does
                *state ^= *state << 13;
                *state ^= *state >> 7;
                *state ^= *state << 17;
                self.quantum / 2 + *state % (self.quantum + 1)
            }
            None => self.quantum,
        };
    }

    pub fn is_started(&self) -> bool {
        self.started
    }

    /// Starts the turns without the members still missing (they waited too long).
    pub fn start(&mut self) {
        self.started = true;
        if self.holder.is_none() && self.members != 0 {
            self.begin(Some(self.members.trailing_zeros()));
        }
    }

    pub fn holder(&self) -> Option<u32> {
        self.holder
    }

    /// `vcpu` takes turns from now on; it runs at once when nobody else does.
    pub fn join(&mut self, vcpu: u32) {
        self.members |= 1u64 << vcpu;
        if !self.started && self.members.count_ones() >= self.expected {
            self.start();
        } else if self.started && self.holder.is_none() {
            self.begin(Some(vcpu));
        }
    }

    /// `vcpu` stops taking turns; the next member's turn starts if it was its own.
    pub fn leave(&mut self, vcpu: u32) {
        self.members &= !(1u64 << vcpu);
        if self.holder == Some(vcpu) {
            self.pass(vcpu);
        }
    }

    /// `vcpu` is about to run `count` instructions; when that ends its turn, the next
    /// member's starts.
    pub fn ran(&mut self, vcpu: u32, count: u64) {
        if self.holder != Some(vcpu) {
            return;
        }
        self.used += count;
        if self.used >= self.length {
            self.pass(vcpu);
        }
    }

    /// `vcpu` ended an operation: its turn ends if it held it.
    pub fn end_turn(&mut self, vcpu: u32) {
        if self.holder == Some(vcpu) {
            self.pass(vcpu);
        }
    }

    /// The member whose turn comes after the holder's (none when the holder is alone).
    pub fn successor(&self) -> Option<u32> {
        let holder = self.holder?;
        let after = (holder + 1) % 64;
        let others = (self.members & !(1u64 << holder)).rotate_right(after);
        (others != 0).then(|| (after + others.trailing_zeros()) % 64)
    }

    pub fn is_member(&self, vcpu: u32) -> bool {
        self.members & (1u64 << vcpu) != 0
    }

    /// The next member after `vcpu` in index order (wrapping; itself when alone).
    fn pass(&mut self, vcpu: u32) {
        let after = (vcpu + 1) % 64;
        let rotated = self.members.rotate_right(after);
        self.begin((rotated != 0).then(|| (after + rotated.trailing_zeros()) % 64));
    }
}

/// The turns, and the waiting of the vCPUs whose turn it is not.
pub struct Schedule {
    turns: Mutex<Turns>,
    /// Whether the end of an operation ends the turn (`operation_ends=off`: turns of Q
    /// only, in which operations shorter than Q overlap as a lock's waiters need).
    operation_ends: bool,
    /// The holder (NOBODY: none), read without the lock by the vCPUs waiting for a turn.
    holder: AtomicU32,
    /// One per vCPU: a turn wakes only the vCPU it goes to.
    wake: Vec<Condvar>,
    lapses: Mutex<Vec<u32>>,
    /// Per vCPU: the futex command it is in (FUTEX_NONE: none).
    futex: Vec<AtomicU32>,
}

const FUTEX_NONE: u32 = u32::MAX;
/// The futex commands that may wait (FUTEX_WAIT, LOCK_PI, WAIT_BITSET, WAIT_REQUEUE_PI,
/// LOCK_PI2) and those that wake (WAKE, REQUEUE, CMP_REQUEUE, WAKE_OP, UNLOCK_PI,
/// WAKE_BITSET, CMP_REQUEUE_PI); the command is the op without its flags (0x7f).
const FUTEX_WAITS: [u32; 5] = [0, 6, 9, 11, 13];
const FUTEX_WAKES: [u32; 7] = [1, 3, 4, 5, 7, 10, 12];
pub const FUTEX_COMMAND: u64 = 0x7f;

impl Schedule {
    pub fn new(turns: Turns, vcpus: usize, operation_ends: bool) -> Self {
        Schedule {
            turns: Mutex::new(turns),
            operation_ends,
            holder: AtomicU32::new(NOBODY),
            wake: (0..vcpus).map(|_| Condvar::new()).collect(),
            lapses: Mutex::new(vec![0; vcpus]),
            futex: (0..vcpus).map(|_| AtomicU32::new(FUTEX_NONE)).collect(),
        }
    }

    /// `vcpu` calls futex with `command`: it leaves the turns if the call may wait; any
    /// other keeps its turn (it ends without another thread's help).
    pub fn futex_call(&self, vcpu: u32, command: u32) {
        self.futex[vcpu as usize].store(command, Ordering::Relaxed);
        if FUTEX_WAITS.contains(&command) {
            self.leave(vcpu);
        }
    }

    /// `vcpu`'s futex call returned `ret`: a waiter joins again (a woken one, ret 0, pays
    /// its waker's debt); a waker that woke k holds its turn until k woken are back.
    pub fn futex_return(&self, vcpu: u32, ret: i64) {
        let command = self.futex[vcpu as usize].swap(FUTEX_NONE, Ordering::Relaxed);
        if FUTEX_WAITS.contains(&command) {
            let mut turns = self.turns.lock().unwrap();
            if ret == 0 {
                turns.owed -= 1;
                if let Some(waker) = turns.waker {
                    self.wake[waker as usize].notify_one();
                }
            }
            turns.join(vcpu);
            self.wake_holder(&turns);
            self.wait_turn(turns, vcpu);
        } else if FUTEX_WAKES.contains(&command) && ret > 0 {
            self.await_woken(vcpu, ret);
        }
    }

    fn await_woken(&self, vcpu: u32, woken: i64) {
        let mut turns = self.turns.lock().unwrap();
        turns.owed += woken;
        turns.waker = Some(vcpu);
        let lapse = Instant::now() + LAPSE;
        while turns.owed > 0 {
            let now = Instant::now();
            if now >= lapse {
                turns.owed = 0; // they never came (a waiter outside the turns)
                break;
            }
            turns = self.wake[vcpu as usize].wait_timeout(turns, lapse - now).unwrap().0;
        }
        turns.waker = None;
    }

    pub fn join(&self, vcpu: u32) {
        let mut turns = self.turns.lock().unwrap();
        turns.join(vcpu);
        self.wake_holder(&turns);
        self.wait_turn(turns, vcpu);
    }

    pub fn leave(&self, vcpu: u32) {
        let mut turns = self.turns.lock().unwrap();
        turns.leave(vcpu);
        self.wake_holder(&turns);
    }

    /// Before `vcpu` runs a block of `count` instructions: waits for its turn.
    pub fn ran(&self, vcpu: u32, count: u64) {
        let mut turns = self.turns.lock().unwrap();
        if !turns.is_member(vcpu) {
            return;
        }
        turns.ran(vcpu, count);
        self.wake_holder(&turns);
        self.wait_turn(turns, vcpu);
    }

    /// `vcpu` ended an operation: the next member's turn, and `vcpu` waits for its own.
    pub fn end_turn(&self, vcpu: u32) {
        if !self.operation_ends {
            return;
        }
        let mut turns = self.turns.lock().unwrap();
        if !turns.is_member(vcpu) {
            return;
        }
        turns.end_turn(vcpu);
        self.wake_holder(&turns);
        self.wait_turn(turns, vcpu);
    }

    /// The lapses of `vcpu` since the last call (its region's count), reset.
    pub fn take_lapses(&self, vcpu: u32) -> u32 {
        std::mem::take(&mut self.lapses.lock().unwrap()[vcpu as usize])
    }

    /// Wakes the holder, and the vCPU whose turn is next so that it spins for it.
    fn wake_holder(&self, turns: &Turns) {
        self.holder.store(turns.holder().unwrap_or(NOBODY), Ordering::Release);
        for vcpu in [turns.holder(), turns.successor()].into_iter().flatten() {
            self.wake[vcpu as usize].notify_one();
        }
    }

    fn wait_turn<'a>(&'a self, mut turns: MutexGuard<'a, Turns>, vcpu: u32) {
        let mut lapse = Instant::now() + if turns.is_started() { LAPSE } else { START_LAPSE };
        loop {
            if !turns.is_member(vcpu) || turns.holder() == Some(vcpu) {
                return;
            }
            if turns.successor() == Some(vcpu) {
                drop(turns);
                let spun = Instant::now() + SPIN;
                while self.holder.load(Ordering::Acquire) != vcpu && Instant::now() < spun {
                    std::hint::spin_loop();
                }
                turns = self.turns.lock().unwrap();
                if !turns.is_member(vcpu) || turns.holder() == Some(vcpu) {
                    return;
                }
            }
            let now = Instant::now();
            if now >= lapse && !turns.is_started() {
                // the missing workers did not come: the turns start with those here
                turns.start();
                self.wake_holder(&turns);
                self.lapses.lock().unwrap()[vcpu as usize] += 1;
                lapse = now + LAPSE;
                continue;
            }
            if now >= lapse {
                drop(turns);
                self.lapses.lock().unwrap()[vcpu as usize] += 1;
                return;
            }
            turns = self.wake[vcpu as usize].wait_timeout(turns, lapse - now).unwrap().0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Coherence, Holders};
    use std::collections::HashMap;

    #[test]
    fn jittered_turns_last_from_half_to_one_and_a_half_quanta_about_one_on_average() {
        let mut turns = Turns::new(200, 0).jittered();
        turns.join(0);
        turns.join(1);
        let mut lengths = Vec::new();
        for _ in 0..1000 {
            let holder = turns.holder().unwrap();
            let mut ran = 0;
            while turns.holder() == Some(holder) {
                turns.ran(holder, 1);
                ran += 1;
            }
            lengths.push(ran);
        }
        assert!(lengths.iter().all(|&n| (100..=300).contains(&n)), "{lengths:?}");
        let mean = lengths.iter().sum::<u64>() as f64 / lengths.len() as f64;
        assert!((190.0..210.0).contains(&mean), "{mean}");
        assert!(lengths.windows(2).any(|pair| pair[0] != pair[1]));
    }

    #[test]
    fn turns_go_round_the_members_in_index_order() {
        let mut turns = Turns::new(10, 0);
        turns.join(2);
        turns.join(0);
        turns.join(5);
        assert_eq!((turns.holder(), turns.successor()), (Some(2), Some(5)));
        turns.ran(2, 6);
        assert_eq!(turns.holder(), Some(2));
        turns.ran(0, 100); // not its turn: its count is not taken
        turns.ran(2, 4);
        assert_eq!(turns.holder(), Some(5));
        turns.ran(5, 12);
        assert_eq!(turns.holder(), Some(0));
        turns.leave(0); // waits outside guest code: the next member's turn
        assert_eq!(turns.holder(), Some(2));
        turns.leave(5);
        turns.ran(2, 10);
        assert_eq!(turns.holder(), Some(2), "alone, it keeps the turn");
        turns.leave(2);
        assert_eq!(turns.holder(), None);
    }

    #[test]
    fn turns_start_once_the_expected_workers_joined() {
        let mut turns = Turns::new(10, 3);
        turns.join(1);
        turns.join(0);
        assert_eq!(turns.holder(), None, "a lone first worker does not run");
        turns.leave(1);
        turns.join(1);
        assert_eq!(turns.holder(), None);
        turns.join(2);
        assert_eq!((turns.holder(), turns.successor()), (Some(0), Some(1)));
        let mut late = Turns::new(10, 3);
        late.join(4);
        late.start(); // the third never came
        assert_eq!(late.holder(), Some(4));
    }

    #[test]
    fn a_waker_holds_its_turn_until_the_waiter_it_woke_is_back() {
        let schedule = std::sync::Arc::new(Schedule::new(Turns::new(1000, 0), 4, true));
        schedule.join(0);
        schedule.futex_call(1, 0); // vCPU 1 waits on a futex (it holds no turn)
        let waiter = std::sync::Arc::clone(&schedule);
        let woken = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100)); // the host takes its time
            waiter.futex_return(1, 0);
        });
        let started = Instant::now();
        schedule.futex_call(0, 1); // FUTEX_WAKE: no wait, the turn kept
        assert_eq!(schedule.turns.lock().unwrap().holder(), Some(0));
        schedule.futex_return(0, 1); // woke one: holds the turn until it is back
        assert!(started.elapsed() >= Duration::from_millis(90));
        assert!(schedule.turns.lock().unwrap().is_member(1));
        assert_eq!(schedule.turns.lock().unwrap().holder(), Some(0));
        schedule.leave(0); // its turn goes to the woken one
        woken.join().unwrap();
        assert_eq!(schedule.turns.lock().unwrap().holder(), Some(1));
    }

    /// What a synthetic vCPU does at one instruction: touch a line (store or load) or not.
    type Step = Option<(u64, bool)>;

    /// A synthetic program of `vcpus` emulated CPUs with memory: `step(vcpu, memory)` is
    /// its next instruction, and the operations it completed.
    trait Program {
        fn step(&mut self, vcpu: usize) -> Step;
        fn operations(&self) -> u64;
    }

    /// Runs the program under the turns, one instruction per block, until it completed
    /// `operations`: the transfers per operation of each line. With `operation_ends`, the
    /// end of each operation ends the turn (a benchmark loop's marker).
    fn transfers_per_op(
        program: &mut dyn Program,
        vcpus: u32,
        quantum: u64,
        operations: u64,
        operation_ends: bool,
    ) -> HashMap<u64, f64> {
        let mut turns = Turns::new(quantum, vcpus);
        (0..vcpus).for_each(|v| turns.join(v));
        let mut holders: HashMap<u64, Holders> = HashMap::new();
        let mut moved: HashMap<u64, u64> = HashMap::new();
        while program.operations() < operations {
            let vcpu = turns.holder().unwrap();
            turns.ran(vcpu, 1);
            let done = program.operations();
            if let Some((line, store)) = program.step(vcpu as usize) {
                let cost = holders.entry(line).or_default().access(vcpu, store);
                *moved.entry(line).or_default() += u64::from(cost == Coherence::Transfer);
            }
            if operation_ends && program.operations() > done {
                turns.end_turn(vcpu);
            }
        }
        let ops = program.operations() as f64;
        moved.into_iter().map(|(line, count)| (line, count as f64 / ops)).collect()
    }

    const SHARED: u64 = 0x1000;
    const TICKET: u64 = 0x2000;
    const SERVING: u64 = 0x3000;
    const DATA: u64 = 0x4000;

    /// Each operation: `length - 1` instructions that touch no memory, then one store (to
    /// one line all share, or to the vCPU's own), which ends it.
    struct Stores {
        shared: bool,
        length: u64,
        at: Vec<u64>,
        done: u64,
    }

    impl Program for Stores {
        fn step(&mut self, vcpu: usize) -> Step {
            let at = self.at[vcpu];
            self.at[vcpu] = (at + 1) % self.length;
            if at != self.length - 1 {
                return None;
            }
            self.done += 1;
            Some((if self.shared { SHARED } else { 0x10_0000 + 64 * vcpu as u64 }, true))
        }

        fn operations(&self) -> u64 {
            self.done
        }
    }

    fn stores(shared: bool, vcpus: u32, quantum: u64, length: u64, operation_ends: bool) -> f64 {
        let mut program = Stores { shared, length, at: vec![0; vcpus as usize], done: 0 };
        let counts = transfers_per_op(&mut program, vcpus, quantum, 5_000, operation_ends);
        counts.values().sum()
    }

    #[test]
    fn a_line_all_write_at_every_operation_moves_at_each_one_a_private_line_never() {
        for vcpus in [2, 4, 8, 16] {
            // Turns shorter than an operation: every store finds the line elsewhere.
            let shared = stores(true, vcpus, 50, 100, false);
            assert!((0.99..=1.0).contains(&shared), "{vcpus} vCPUs: {shared}");
            assert_eq!(stores(false, vcpus, 50, 100, false), 0.0);
        }
        assert_eq!(stores(true, 1, 50, 100, false), 0.0, "alone, nothing moves");
        // Turns of 4 operations: the line moves once per turn, at its first store.
        let long = stores(true, 4, 400, 100, false);
        assert!((0.24..=0.26).contains(&long), "{long}");
    }

    #[test]
    fn an_operation_shorter_than_a_turn_ends_it() {
        for vcpus in [2, 4, 16] {
            // Operations of 10 instructions, turns of 200: the end of each one ends the
            // turn, so the line all write moves at each one, as without ends it does not.
            let ended = stores(true, vcpus, 200, 10, true);
            assert!((0.99..=1.0).contains(&ended), "{vcpus} vCPUs: {ended}");
            let unended = stores(true, vcpus, 200, 10, false);
            assert!((0.04..=0.06).contains(&unended), "{vcpus} vCPUs: {unended}");
            assert_eq!(stores(false, vcpus, 200, 10, true), 0.0);
        }
    }

    /// Each operation: a ticket lock's acquire (take a ticket, spin reading the ticket
    /// served until it is this one's), `hold` stores to the data it guards (longer than a
    /// turn: the holder is preempted, the others queue), the release (serve the next
    /// ticket), then `pause` instructions without memory.
    struct TicketLock {
        next_ticket: u64,
        serving: u64,
        /// Per vCPU: its ticket while it holds or waits for the lock; where it is.
        ticket: Vec<Option<u64>>,
        stage: Vec<u64>,
        hold: u64,
        pause: u64,
        done: u64,
    }

    impl Program for TicketLock {
        fn step(&mut self, vcpu: usize) -> Step {
            match (self.ticket[vcpu], self.stage[vcpu]) {
                (None, 0) => {
                    self.ticket[vcpu] = Some(self.next_ticket);
                    self.next_ticket += 1;
                    Some((TICKET, true))
                }
                (None, _) => {
                    self.stage[vcpu] = (self.stage[vcpu] + 1) % self.pause;
                    None
                }
                (Some(mine), 0) => {
                    self.stage[vcpu] = u64::from(self.serving == mine);
                    Some((SERVING, false))
                }
                (Some(_), stage) if stage <= self.hold => {
                    self.stage[vcpu] += 1;
                    Some((DATA, true))
                }
                (Some(_), _) => {
                    self.serving += 1;
                    self.ticket[vcpu] = None;
                    self.stage[vcpu] = 1 % self.pause;
                    self.done += 1;
                    Some((SERVING, true))
                }
            }
        }

        fn operations(&self) -> u64 {
            self.done
        }
    }

    fn ticket_lock(vcpus: u32) -> HashMap<u64, f64> {
        let n = vcpus as usize;
        let mut lock = TicketLock {
            next_ticket: 0,
            serving: 0,
            ticket: vec![None; n],
            stage: vec![0; n],
            hold: 20,
            pause: 10,
            done: 0,
        };
        transfers_per_op(&mut lock, vcpus, 8, 20_000, false)
    }

    #[test]
    fn a_ticket_lock_moves_its_serving_line_once_per_waiter_at_each_release() {
        assert!(ticket_lock(1).values().all(|&count| count == 0.0));
        let mut last = 0.0;
        for vcpus in [2, 4, 8, 16] {
            let counts = ticket_lock(vcpus);
            // The ticket and the data move once per acquire.
            for line in [TICKET, DATA] {
                assert!((0.99..=1.01).contains(&counts[&line]), "{vcpus}: {line:#x} {counts:?}");
            }
            // Each release takes the line from the waiters, each of which reads it again:
            // the collapse of a ticket lock (its cost per handoff grows with the waiters).
            let serving = counts[&SERVING];
            let waiters = f64::from(vcpus - 1);
            assert!((serving - waiters).abs() < 0.01, "{vcpus}: {serving}");
            assert!(serving > last);
            last = serving;
        }
    }
}
