//! scalecheck conflict tracer: a QEMU TCG plugin (plugin API v1, QEMU 7.2).
//!
//! The guest driver brackets each traced system call with marker instructions
//! (`nopl MAGIC(%rax)`, recognised here from their bytes at translation time). Between a
//! vCPU's start and end marker, every memory access made by kernel code on that vCPU is
//! folded into a per-region table of physical cache lines (bytes read and written, and the
//! PCs that touched the line). Accesses made inside interrupt handlers are dropped; a
//! region during which the vCPU entered the context-switch routine is flagged. At the end
//! marker the region is appended to a compact binary file (format in docs/tracer.md).
//!
//! In user mode (`mode=user`, for `qemu-x86_64` running a library's test program) there is
//! no kernel: every access made between a thread's markers is recorded, by virtual address
//! (user-mode QEMU has no physical addresses; the address space is the one process's).
//!
//! With `transfers=on` each line also counts its transfers: the accesses of this region's
//! vCPU that a coherent cache with room for every line would have had to bring from
//! another vCPU (a read of a line another vCPU wrote, by each vCPU that does not hold it:
//! at N vCPUs, each waiter of a lock reads its release again; a write to a line that other
//! vCPUs hold and this one does not), in the order the traced accesses of all vCPUs reach
//! the plugin; and apart from them its invalidations: the writes to a line this vCPU
//! already holds while other vCPUs hold it too, which move no data but take the line from
//! the others' caches (their next access is then a transfer). Each line also counts its
//! pair transfers: the accesses that would have been transfers had the coherence unit been
//! the line's 128-byte-aligned pair but were not transfers of the line itself (x86's L2
//! spatial prefetcher fetches a line's pair with it, so two vCPUs writing the two lines of
//! one pair slow each other though they share no line). Each line also counts its moves by
//! the kind of access that made them, whose cost to a core differs: a load's transfers, and
//! an atomic read-modify-write's (a lock-prefixed instruction or an `xchg` with memory, told
//! at translation time) transfers and invalidations; the rest are plain stores'. An atomic
//! takes the line for writing at its read (a locked instruction's load asks for ownership),
//! so it moves the line at most once: one transfer or one invalidation, not both, whether
//! QEMU reports it as one access or as a read and a write.
//!
//! Accesses to the stack through the stack pointer (pushes, pops, near calls and returns,
//! moves and arithmetic on `[rsp+d]`) are not instrumented unless `profile=on`,
//! `transfers=on` or `quantum=Q`: the running task's (or thread's) own stack, which another
//! call reaches only through a pointer to an object on it, an access instrumented as any
//! other, while the two calls of a test run one after the other. They were two fifths of the
//! kernel's accesses, and QEMU calls the plugin at every instrumented access, in a region
//! or not (99 % of the calls come outside regions). QEMU 7.2 cannot drop the instrumentation
//! between regions: `qemu_plugin_reset`, its only way to retranslate, flushes the code while
//! a vCPU may still point at a freed instruction's callback list (with a reset at each
//! region's start and end, QEMU aborted in `qemu_plugin_vcpu_mem_cb` in the first test).
//!
//! In system mode only kernel code's accesses are recorded, unless `user=on`: then the
//! accesses of user code between the markers are recorded too (a program's threads traced
//! in user space and in the kernel together; lines are physical either way).
//!
//! Plugin arguments: `out=PATH` (binary output), `entries=PATH` (optional: kernel entry
//! points, lines `irq HEX`, `exc HEX` or `switch HEX`), `pcs=N` (PCs kept per line, default 32;
//! the accesses of any further PCs are folded into one entry with PC 0), `mode=user`,
//! `transfers=on`, `user=on`, `quantum=Q` (the vCPUs with a region open take turns of Q
//! instructions, or of one operation of a benchmark's loop when shorter, unless
//! `operation_ends=off`; with `workers=N` the turns start once N vCPUs opened a region;
//! `jitter=on`: turns of Q/2 to 3Q/2: schedule.rs).
//!
//! With `profile=on` (scalecheck profile: a whole program, unmodified), one marker run by
//! any vCPU opens the window on every vCPU and another closes it; in between every access
//! of every vCPU is recorded (user code's too, with `user=on`) into one region per vCPU and
//! context, the context being the region's tag: user code, kernel code entered by an
//! exception from user mode (a page fault), other kernel code (after a context switch: a
//! kernel thread, the idle loop, or the rest of a call that slept), or the system call whose
//! function (`sys HEX` lines of the entries file, the k-th one context CONTEXT_SYSCALL + k)
//! the vCPU entered last, until user code runs again. A task's context survives a context
//! switch: the first access of the switch routine (a push onto the old task's kernel stack)
//! files the context under that stack, and the first access to another kernel stack (a pop
//! from the new task's) takes that one's back. The regions are written when the window
//! closes.

use iced_x86::{Decoder, DecoderOptions, InstructionInfoFactory, Mnemonic, Register as X86};
use qemu_plugin::install::{Args, Info, Value};
use qemu_plugin::plugin::{HasCallbacks, Register};
use qemu_plugin::{register, sys, MemoryInfo, PluginId, Result, VCPUIndex};
use std::collections::HashMap;
use std::ffi::c_void;
use std::fs::File;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{BufWriter, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

mod schedule;
use schedule::{Schedule, FUTEX_COMMAND};

/// `nopl disp32(%rax)` = 0f 1f 80 + disp32: a 7-byte NOP carrying a 32-bit magic.
const NOPL_DISP32: [u8; 3] = [0x0f, 0x1f, 0x80];
const MARK_START: u32 = 0x5c5c_0001;
const MARK_END: u32 = 0x5c5c_0002;
const MARK_TAG0: u32 = 0x5c5c_0010;
const MARK_TAG1: u32 = 0x5c5c_0011;
const MARK_PROFILE_ON: u32 = 0x5c5c_0003;
const MARK_PROFILE_OFF: u32 = 0x5c5c_0004;
/// The end of one operation of a benchmark's loop: with `quantum=Q`, the end of the turn.
const MARK_OPERATION_END: u32 = 0x5c5c_0005;
/// Profile mode's contexts (a region's tag).
const CONTEXT_USER: u32 = 0;
const CONTEXT_FAULT: u32 = 1;
const CONTEXT_KERNEL: u32 = 2;
const CONTEXT_SYSCALL: u32 = 16;
/// x86-64 kernel stacks: THREAD_SIZE bytes, as aligned, in the vmalloc area (VMAP_STACK).
const STACK_SIZE: u64 = 16 << 10;
const VMALLOC: (u64, u64) = (0xffff_c900_0000_0000, 0xffff_e900_0000_0000);
const IRETQ: [u8; 2] = [0x48, 0xcf];
/// Kernel code lives in the upper half of the x86-64 address space.
const KERNEL_HALF: u64 = 0xffff_8000_0000_0000;
const LINE: u64 = 64;
/// The unit x86's spatial prefetcher moves: a line and its pair.
const PAIR: u64 = 2 * LINE;
const MAX_VCPUS: usize = 64;
/// Deeper than any real nesting of interrupts/exceptions: the stack must have lost track.
const MAX_ENTRY_DEPTH: usize = 32;

const FILE_MAGIC: &[u8; 8] = b"SCTRACE3";
const REGION_MAGIC: u32 = 0x4e47_4552; // "REGN"
const FLAG_CTXSWITCH: u32 = 1;
const FLAG_RESTARTED: u32 = 2;
const FLAG_PCS_TRUNCATED: u32 = 4;
/// Each line record carries its transfer and invalidation counts (`transfers=on`).
const FLAG_TRANSFERS: u32 = 8;
/// Each line record carries its pair transfers after them (`transfers=on`).
const FLAG_PAIR_TRANSFERS: u32 = 16;
/// With `quantum=Q`: this vCPU once ran without its turn (the schedule's order lapsed).
const FLAG_SCHEDULE_LAPSED: u32 = 32;
/// Each line record carries its moves by access kind after the pair transfers
/// (`transfers=on`): loads' transfers, atomics' transfers, atomics' invalidations.
const FLAG_ACCESS_KINDS: u32 = 64;
/// The pairs' holders are kept in this many maps, each under its own lock, so that vCPUs
/// touching different lines seldom wait for each other.
const HOLDER_SHARDS: usize = 64;

/// Hashes a line address for the per-access maps with one multiplication instead of the
/// default SipHash, whose defence against chosen keys is not needed: keys are the lines
/// the kernel's accesses touch. The product's high bits, which the map's control bytes
/// use, depend on every bit of the line number.
#[derive(Default)]
struct LineHasher(u64);

impl Hasher for LineHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, key: u64) {
        let product = (self.0 ^ (key / LINE)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = product ^ (product >> 29);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type LineMap<V> = HashMap<u64, V, BuildHasherDefault<LineHasher>>;

/// The bytes of one line that one instruction read and wrote. Per-instruction bytes let
/// the host tell which code sites touched the same data, wherever the line boundaries of
/// a heap object fall in a given run.
#[derive(Default)]
struct SiteAccess {
    pc: u64,
    read_mask: u64,
    write_mask: u64,
}

#[derive(Default)]
struct LineInfo {
    first_vaddr: u64,
    read_mask: u64,
    write_mask: u64,
    /// In first-seen order; a last entry with PC 0 holds the PCs beyond the limit.
    sites: Vec<SiteAccess>,
    /// The entry of `sites` the last access used: looked at first (loops and copies touch
    /// a line many times in a row from one instruction).
    last_site: usize,
    transfers: u32,
    invalidations: u32,
    pair_transfers: u32,
    /// Of `transfers`: loads' (atomics' reads aside).
    load_transfers: u32,
    /// Of `transfers` and `invalidations`: atomic read-modify-writes'.
    atomic_transfers: u32,
    atomic_invalidations: u32,
}

/// The kind of access a memory callback reports.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    Load,
    Store,
    /// Either access of an atomic read-modify-write.
    Atomic,
}

impl Kind {
    /// Whether the access takes the line for writing: a store, and an atomic's read too.
    fn owns(self) -> bool {
        self != Kind::Load
    }
}

impl LineInfo {
    /// Counts one access's cost to this line under its kind.
    fn count(&mut self, cost: Coherence, kind: Kind) {
        let (total, of_kind) = match (cost, kind) {
            (Coherence::Local, _) => return,
            (Coherence::Transfer, Kind::Load) => {
                (&mut self.transfers, Some(&mut self.load_transfers))
            }
            (Coherence::Transfer, Kind::Atomic) => {
                (&mut self.transfers, Some(&mut self.atomic_transfers))
            }
            (Coherence::Transfer, Kind::Store) => (&mut self.transfers, None),
            (Coherence::Invalidation, Kind::Atomic) => {
                (&mut self.invalidations, Some(&mut self.atomic_invalidations))
            }
            (Coherence::Invalidation, _) => (&mut self.invalidations, None),
        };
        *total = total.saturating_add(1);
        if let Some(of_kind) = of_kind {
            *of_kind = of_kind.saturating_add(1);
        }
    }
}

/// Which vCPUs' caches hold a line, as a coherent cache with room for every line sees it.
#[derive(Default)]
struct Holders {
    vcpus: u64,
    /// A vCPU wrote it: a vCPU that does not hold it reads the writer's data, from another
    /// cache (not from memory), however many others read it since.
    written: bool,
}

/// What one access cost the coherent cache.
#[derive(PartialEq, Debug)]
enum Coherence {
    /// Served from this vCPU's own copy, or the first access of any vCPU.
    Local,
    /// The line came from another vCPU: a read of a line another vCPU wrote, a write
    /// to a line other vCPUs hold and this one does not.
    Transfer,
    /// A write to a line this vCPU holds beside others: no data moves, the other copies go.
    Invalidation,
}

/// The holders of a 128-byte pair of lines: of each line, and of the pair as one unit.
#[derive(Default)]
struct PairHolders {
    lines: [Holders; 2],
    pair: Holders,
}

impl PairHolders {
    /// One access by `vcpu` to `line` (of this pair): what it cost the line, and whether it
    /// was a transfer of the pair only (a transfer had the unit been the pair, not one of
    /// the line).
    fn access(&mut self, line: u64, vcpu: u32, store: bool) -> (Coherence, bool) {
        let half = ((line / LINE) % 2) as usize;
        let cost = self.lines[half].access(vcpu, store);
        let pair_cost = self.pair.access(vcpu, store);
        let pair_only = pair_cost == Coherence::Transfer && cost != Coherence::Transfer;
        (cost, pair_only)
    }
}

impl Holders {
    /// One access by `vcpu`.
    fn access(&mut self, vcpu: u32, store: bool) -> Coherence {
        let me = 1u64 << vcpu;
        let held = self.vcpus & me != 0;
        let others = self.vcpus & !me != 0;
        let cost = match (store, held) {
            (true, false) if others => Coherence::Transfer,
            (true, true) if others => Coherence::Invalidation,
            (false, false) if self.written => Coherence::Transfer,
            _ => Coherence::Local,
        };
        if store {
            self.vcpus = me;
            self.written = true;
        } else {
            self.vcpus |= me;
        }
        cost
    }
}

#[derive(Default)]
struct Region {
    tag: u32,
    flags: u32,
    accesses: u64,
    dropped_in_interrupts: u64,
    interrupts: u32,
    lines: LineMap<LineInfo>,
}

impl Region {
    /// Folds one access into the region's lines: `size` bytes at `paddr` (first seen at
    /// `vaddr`) by the instruction at `pc`. Returns the lines it touched (an unaligned
    /// access may straddle two), for the caller's per-line counts.
    fn record(
        &mut self,
        paddr: u64,
        vaddr: u64,
        size: u64,
        store: bool,
        pc: u64,
        max_pcs: usize,
    ) -> [Option<u64>; 2] {
        self.accesses += 1;
        let mut touched = [None, None];
        let mut start = paddr;
        let end = paddr + size;
        for slot in touched.iter_mut() {
            if start >= end {
                break;
            }
            let line = start & !(LINE - 1);
            let part_end = end.min(line + LINE);
            let bits = part_end - start;
            let mask = if bits == 64 { u64::MAX } else { ((1u64 << bits) - 1) << (start - line) };
            let entry = self.lines.entry(line).or_insert_with(|| LineInfo {
                first_vaddr: (vaddr + (start - paddr)) & !(LINE - 1),
                ..LineInfo::default()
            });
            let site_at = match entry.sites.get(entry.last_site) {
                Some(last) if last.pc == pc => entry.last_site,
                _ => {
                    let mut found = entry.sites.iter().position(|s| s.pc == pc);
                    if found.is_none() && entry.sites.len() >= max_pcs {
                        self.flags |= FLAG_PCS_TRUNCATED;
                        found = entry.sites.iter().position(|s| s.pc == 0);
                    }
                    found.unwrap_or_else(|| {
                        let site_pc = if entry.sites.len() < max_pcs { pc } else { 0 };
                        entry.sites.push(SiteAccess { pc: site_pc, ..SiteAccess::default() });
                        entry.sites.len() - 1
                    })
                }
            };
            entry.last_site = site_at;
            let site = &mut entry.sites[site_at];
            if store {
                site.write_mask |= mask;
                entry.write_mask |= mask;
            } else {
                site.read_mask |= mask;
                entry.read_mask |= mask;
            }
            *slot = Some(line);
            start = part_end;
        }
        touched
    }
}

#[derive(Default)]
struct Vcpu {
    building_tag: u32,
    /// One entry per IDT entry in progress: true = interrupt (drop), false = exception (keep).
    entries: Vec<bool>,
    region: Option<Region>,
    /// Profile mode: the regions of the contexts other than the current one's.
    stashed: HashMap<u32, Region>,
    /// Profile mode, in the switch routine: None before its first access, then the old
    /// task's stack, until an access to another stack.
    switching: Option<Option<u64>>,
}

impl Vcpu {
    fn in_interrupt(&self) -> bool {
        self.entries.iter().any(|&is_irq| is_irq)
    }

    fn context(&self) -> Option<u32> {
        self.region.as_ref().map(|region| region.tag)
    }

    /// Profile mode: the accesses from now on go to `context`'s region.
    fn enter_context(&mut self, context: u32, flags: u32) {
        if self.region.is_none() || self.context() == Some(context) {
            return;
        }
        if let Some(region) = self.region.take() {
            self.stashed.insert(region.tag, region);
        }
        let region = self.stashed.remove(&context);
        self.region = Some(region.unwrap_or(Region { tag: context, flags, ..Region::default() }));
    }
}

/// Whether a region is open on one vCPU, alone in its cache line: read on every guest
/// memory access, written by its own vCPU's markers only.
#[repr(align(64))]
#[derive(Default)]
struct ActiveFlag(AtomicBool);

struct Tracer {
    /// Fast check on the hot path: is a region open on this vCPU?
    active: Vec<ActiveFlag>,
    vcpus: Vec<Mutex<Vcpu>>,
    out: Mutex<BufWriter<File>>,
    irq_entries: Vec<u64>,
    exc_entries: Vec<u64>,
    switch_entries: Vec<u64>,
    max_pcs: usize,
    user_mode: bool,
    /// System mode with `user=on`: user code's accesses are recorded too.
    user_code: bool,
    /// With `transfers=on`: every traced pair's holders, sharded by pair.
    holders: Option<Vec<Mutex<LineMap<PairHolders>>>>,
    /// With `quantum=Q`: the turns the vCPUs with a region open take.
    schedule: Option<Schedule>,
    /// With `profile=on`: the system calls' entry points, sorted, each with its context.
    profile: Option<Vec<(u64, u32)>>,
    /// Instructions that access the stack only, through the stack pointer, get no memory
    /// callback (off with `profile=on`, `transfers=on` or `quantum=Q`, which follow stacks
    /// or count lines moving between vCPUs while regions overlap).
    stack_untraced: bool,
    /// Profile mode: the context of each task switched away from, by its kernel stack.
    stacks: Mutex<HashMap<u64, u32>>,
}

static TRACER: OnceLock<Tracer> = OnceLock::new();

fn tracer() -> &'static Tracer {
    TRACER.get().expect("tracer configured at install")
}

impl Tracer {
    fn vcpu(&self, index: VCPUIndex) -> Option<&Mutex<Vcpu>> {
        self.vcpus.get(index as usize)
    }

    fn on_marker(&self, index: VCPUIndex, magic: u32) {
        let Some(cell) = self.vcpu(index) else { return };
        if magic == MARK_OPERATION_END {
            if let (true, Some(schedule)) = (self.is_active(index), &self.schedule) {
                schedule.end_turn(index);
            }
            return;
        }
        let mut vcpu = cell.lock().unwrap();
        let started = magic == MARK_START;
        // Markers run in user mode, so no kernel entry can be in progress on this vCPU;
        // resetting here repairs any imbalance a context switch left behind.
        vcpu.entries.clear();
        match magic {
            MARK_PROFILE_ON | MARK_PROFILE_OFF => {
                drop(vcpu);
                self.set_profile(magic == MARK_PROFILE_ON);
                return;
            }
            MARK_TAG0 | MARK_TAG1 => {
                vcpu.building_tag = (vcpu.building_tag << 1) | u32::from(magic == MARK_TAG1);
            }
            MARK_START => {
                let mut region = Region { tag: vcpu.building_tag, ..Region::default() };
                region.flags |= self.region_flags();
                if vcpu.region.is_some() {
                    region.flags |= FLAG_RESTARTED;
                }
                vcpu.building_tag = 0;
                vcpu.region = Some(region);
                self.active[index as usize].0.store(true, Ordering::Release);
            }
            MARK_END => {
                self.active[index as usize].0.store(false, Ordering::Release);
                if let Some(mut region) = vcpu.region.take() {
                    drop(vcpu);
                    if let Some(schedule) = &self.schedule {
                        schedule.leave(index);
                        if schedule.take_lapses(index) > 0 {
                            region.flags |= FLAG_SCHEDULE_LAPSED;
                        }
                    }
                    self.write_region(index, &region);
                }
                return;
            }
            _ => {}
        }
        drop(vcpu);
        // Outside the vCPU's lock: the turn may be another's.
        if let (true, Some(schedule)) = (started, &self.schedule) {
            schedule.join(index);
        }
    }

    fn region_flags(&self) -> u32 {
        if self.holders.is_some() {
            FLAG_TRANSFERS | FLAG_PAIR_TRANSFERS | FLAG_ACCESS_KINDS
        } else {
            0
        }
    }

    /// Profile mode: opens the window on every vCPU, or closes it and writes its regions.
    fn set_profile(&self, on: bool) {
        if self.profile.is_none() {
            return;
        }
        for (index, cell) in self.vcpus.iter().enumerate() {
            let mut vcpu = cell.lock().unwrap();
            if on {
                let region =
                    Region { tag: CONTEXT_KERNEL, flags: self.region_flags(), ..Region::default() };
                vcpu.region = Some(region);
                self.active[index].0.store(true, Ordering::Release);
                continue;
            }
            self.active[index].0.store(false, Ordering::Release);
            let mut regions: Vec<Region> = vcpu.stashed.drain().map(|(_, region)| region).collect();
            regions.extend(vcpu.region.take());
            drop(vcpu);
            regions.sort_by_key(|region| region.tag);
            for region in regions.iter().filter(|region| region.accesses > 0) {
                self.write_region(index as VCPUIndex, region);
            }
        }
    }

    /// Profile mode, in the switch routine: files the old task's context under its stack at
    /// the first access, takes the new task's at the first access to another stack.
    fn follow_switch(&self, vcpu: &mut Vcpu, old: Option<u64>, vaddr: u64) {
        let stack = vaddr & !(STACK_SIZE - 1);
        match old {
            None => {
                if let Some(context) = vcpu.context() {
                    self.stacks.lock().unwrap().insert(stack, context);
                }
                vcpu.switching = Some(Some(stack));
            }
            Some(old) if stack != old && (VMALLOC.0..VMALLOC.1).contains(&vaddr) => {
                let saved = self.stacks.lock().unwrap().remove(&stack);
                vcpu.enter_context(saved.unwrap_or(CONTEXT_KERNEL), self.region_flags());
                vcpu.switching = None;
            }
            Some(_) => {}
        }
    }

    /// Profile mode: a vCPU's accesses from now on are `context`'s.
    fn on_profile_context(&self, index: VCPUIndex, context: u32) {
        if !self.is_active(index) {
            return;
        }
        let Some(cell) = self.vcpu(index) else { return };
        cell.lock().unwrap().enter_context(context, self.region_flags());
    }

    /// A vCPU with a region open stops (`waiting`) or starts again taking turns.
    fn on_wait(&self, index: VCPUIndex, waiting: bool) {
        match &self.schedule {
            Some(schedule) if self.is_active(index) && waiting => schedule.leave(index),
            Some(schedule) if self.is_active(index) => schedule.join(index),
            _ => {}
        }
    }

    fn on_kernel_entry(&self, index: VCPUIndex, is_irq: bool) {
        let Some(cell) = self.vcpu(index) else { return };
        let mut vcpu = cell.lock().unwrap();
        if vcpu.entries.len() >= MAX_ENTRY_DEPTH {
            vcpu.entries.clear();
        }
        vcpu.entries.push(is_irq);
        if self.profile.is_some() && !is_irq && vcpu.context() == Some(CONTEXT_USER) {
            vcpu.enter_context(CONTEXT_FAULT, self.region_flags());
        }
        if is_irq {
            if let Some(region) = vcpu.region.as_mut() {
                region.interrupts += 1;
            }
        }
    }

    fn on_iretq(&self, index: VCPUIndex) {
        let Some(cell) = self.vcpu(index) else { return };
        cell.lock().unwrap().entries.pop();
    }

    fn is_active(&self, index: VCPUIndex) -> bool {
        self.active.get(index as usize).is_some_and(|a| a.0.load(Ordering::Acquire))
    }

    fn on_context_switch(&self, index: VCPUIndex) {
        if !self.is_active(index) {
            return;
        }
        let Some(cell) = self.vcpu(index) else { return };
        let mut vcpu = cell.lock().unwrap();
        if self.profile.is_some() {
            vcpu.switching = Some(None);
        } else if let Some(region) = vcpu.region.as_mut() {
            region.flags |= FLAG_CTXSWITCH;
        }
    }

    /// One access inside a region (`on_memory` checked the flag): kept out of line, so that
    /// the far more frequent accesses outside regions cost only the flag's check.
    #[inline(never)]
    fn on_access(&self, index: VCPUIndex, pc: u64, info: &MemoryInfo, vaddr: u64, atomic: bool) {
        let paddr = if self.user_mode {
            vaddr
        } else {
            let Some(hw) = info.hwaddr(vaddr) else { return };
            if hw.is_io() {
                return;
            }
            hw.hwaddr()
        };
        let size = 1u64 << info.size_shift();
        let store = info.is_store();
        let Some(cell) = self.vcpu(index) else { return };
        let mut vcpu = cell.lock().unwrap();
        if self.profile.is_some() && pc < KERNEL_HALF {
            // User code runs: no kernel entry is in progress on this vCPU.
            vcpu.entries.clear();
            vcpu.switching = None;
            vcpu.enter_context(CONTEXT_USER, self.region_flags());
        } else if let Some(old) = vcpu.switching {
            self.follow_switch(&mut vcpu, old, vaddr);
        }
        let in_interrupt = vcpu.in_interrupt();
        let max_pcs = self.max_pcs;
        let Some(region) = vcpu.region.as_mut() else { return };
        if in_interrupt {
            region.dropped_in_interrupts += 1;
            return;
        }
        for line in region.record(paddr, vaddr, size, store, pc, max_pcs).into_iter().flatten() {
            if let Some(shards) = &self.holders {
                // Taken under this vCPU's lock, never the other way round.
                let pair = line & !(PAIR - 1);
                let shard = &shards[(pair / PAIR) as usize % HOLDER_SHARDS];
                let kind = match (atomic, store) {
                    (true, _) => Kind::Atomic,
                    (false, true) => Kind::Store,
                    (false, false) => Kind::Load,
                };
                let (cost, pair_only) =
                    shard.lock().unwrap().entry(pair).or_default().access(line, index, kind.owns());
                let entry = region.lines.get_mut(&line).expect("line just recorded");
                if pair_only {
                    entry.pair_transfers = entry.pair_transfers.saturating_add(1);
                }
                entry.count(cost, kind);
            }
        }
    }

    fn write_region(&self, index: VCPUIndex, region: &Region) {
        let mut buf = Vec::with_capacity(48 + region.lines.len() * 100);
        for v in [REGION_MAGIC, index, region.tag, region.flags] {
            buf.extend_from_slice(&v.to_le_bytes());
        }
        buf.extend_from_slice(&region.accesses.to_le_bytes());
        buf.extend_from_slice(&region.dropped_in_interrupts.to_le_bytes());
        buf.extend_from_slice(&region.interrupts.to_le_bytes());
        buf.extend_from_slice(&(region.lines.len() as u32).to_le_bytes());
        let mut lines: Vec<_> = region.lines.iter().collect();
        lines.sort_unstable_by_key(|(line, _)| **line);
        for (line, info) in lines {
            for v in [*line, info.first_vaddr, info.read_mask, info.write_mask] {
                buf.extend_from_slice(&v.to_le_bytes());
            }
            buf.extend_from_slice(&(info.sites.len() as u32).to_le_bytes());
            if region.flags & FLAG_TRANSFERS != 0 {
                buf.extend_from_slice(&info.transfers.to_le_bytes());
                buf.extend_from_slice(&info.invalidations.to_le_bytes());
            }
            if region.flags & FLAG_PAIR_TRANSFERS != 0 {
                buf.extend_from_slice(&info.pair_transfers.to_le_bytes());
            }
            if region.flags & FLAG_ACCESS_KINDS != 0 {
                for v in [info.load_transfers, info.atomic_transfers, info.atomic_invalidations] {
                    buf.extend_from_slice(&v.to_le_bytes());
                }
            }
            for site in &info.sites {
                for v in [site.pc, site.read_mask, site.write_mask] {
                    buf.extend_from_slice(&v.to_le_bytes());
                }
            }
        }
        let mut out = self.out.lock().unwrap();
        // Flush per region: after a guest crash or a killed QEMU, every finished region
        // is already on disk for the runner.
        if out.write_all(&buf).and_then(|_| out.flush()).is_err() {
            eprintln!("scalecheck-tracer: cannot write output");
        }
    }
}

fn parse_entries(path: &str) -> std::io::Result<(Vec<u64>, Vec<u64>, Vec<u64>)> {
    let (mut irq, mut exc, mut switch) = (Vec::new(), Vec::new(), Vec::new());
    for line in std::fs::read_to_string(path)?.lines() {
        let mut words = line.split_whitespace();
        let (Some(kind), Some(addr)) = (words.next(), words.next()) else { continue };
        let Ok(addr) = u64::from_str_radix(addr.trim_start_matches("0x"), 16) else { continue };
        match kind {
            "irq" => irq.push(addr),
            "exc" => exc.push(addr),
            "switch" => switch.push(addr),
            _ => {}
        }
    }
    for list in [&mut irq, &mut exc, &mut switch] {
        list.sort_unstable();
    }
    Ok((irq, exc, switch))
}

/// The `sys HEX` lines of the entries file: each entry point with its context, in order.
fn parse_syscalls(path: &str) -> std::io::Result<Vec<(u64, u32)>> {
    let mut found = Vec::new();
    for line in std::fs::read_to_string(path)?.lines() {
        let mut words = line.split_whitespace();
        if let (Some("sys"), Some(addr)) = (words.next(), words.next()) {
            if let Ok(addr) = u64::from_str_radix(addr.trim_start_matches("0x"), 16) {
                found.push((addr, CONTEXT_SYSCALL + found.len() as u32));
            }
        }
    }
    found.sort_unstable();
    Ok(found)
}

fn string_arg(args: &Args, key: &str) -> Option<String> {
    match args.parsed.get(key) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Integer(i)) => Some(i.to_string()),
        _ => None,
    }
}

/// Instructions QEMU translates into plain loads and stores (no helper, no atomic), whose
/// accesses are all on the stack when their memory operands are.
const INLINE_STACK_MNEMONICS: [Mnemonic; 25] = [
    Mnemonic::Push,
    Mnemonic::Pop,
    Mnemonic::Call,
    Mnemonic::Ret,
    Mnemonic::Mov,
    Mnemonic::Movzx,
    Mnemonic::Movsx,
    Mnemonic::Movsxd,
    Mnemonic::Add,
    Mnemonic::Sub,
    Mnemonic::And,
    Mnemonic::Or,
    Mnemonic::Xor,
    Mnemonic::Cmp,
    Mnemonic::Test,
    Mnemonic::Inc,
    Mnemonic::Dec,
    Mnemonic::Adc,
    Mnemonic::Sbb,
    Mnemonic::Neg,
    Mnemonic::Not,
    Mnemonic::Shl,
    Mnemonic::Shr,
    Mnemonic::Sar,
    Mnemonic::Imul,
];

/// Whether every memory access of the x86-64 instruction in `bytes` is to the stack
/// through the stack pointer (implicit, as a push's, or `[rsp+d]`), made by code QEMU
/// generates inline. A segment register loaded from memory and a far call go through helpers.
fn stack_only(bytes: &[u8], pc: u64) -> bool {
    let insn = Decoder::with_ip(64, bytes, pc, DecoderOptions::NONE).decode();
    if insn.is_invalid()
        || insn.has_lock_prefix()
        || insn.op0_register().is_segment_register()
        || insn.is_call_far_indirect()
        || !INLINE_STACK_MNEMONICS.contains(&insn.mnemonic())
    {
        return false;
    }
    let mut factory = InstructionInfoFactory::new();
    let used = factory.info(&insn).used_memory();
    !used.is_empty()
        && used.iter().all(|memory| {
            memory.base() == X86::RSP
                && memory.index() == X86::None
                && matches!(memory.segment(), X86::SS | X86::DS)
        })
}

/// Whether the x86-64 instruction in `bytes` is an atomic read-modify-write: lock-prefixed,
/// or an exchange with memory (locked without the prefix).
fn is_atomic(bytes: &[u8], pc: u64) -> bool {
    let insn = Decoder::with_ip(64, bytes, pc, DecoderOptions::NONE).decode();
    insn.has_lock_prefix()
        || (insn.mnemonic() == Mnemonic::Xchg
            && (0..insn.op_count()).any(|op| insn.op_kind(op) == iced_x86::OpKind::Memory))
}

fn marker_magic(bytes: &[u8]) -> Option<u32> {
    if bytes.len() == 7 && bytes[..3] == NOPL_DISP32 {
        let magic = u32::from_le_bytes([bytes[3], bytes[4], bytes[5], bytes[6]]);
        [
            MARK_START,
            MARK_END,
            MARK_TAG0,
            MARK_TAG1,
            MARK_PROFILE_ON,
            MARK_PROFILE_OFF,
            MARK_OPERATION_END,
        ]
        .contains(&magic)
        .then_some(magic)
    } else {
        None
    }
}

struct ConflictTracer;

impl Register for ConflictTracer {
    fn register(&mut self, id: PluginId, args: &Args, _info: &Info) -> Result<()> {
        let out_path = string_arg(args, "out").unwrap_or_else(|| "scalecheck-trace.bin".into());
        let mut out = BufWriter::new(File::create(&out_path).expect("cannot create trace output"));
        out.write_all(FILE_MAGIC).and_then(|_| out.flush()).expect("cannot write trace output");
        let (irq_entries, exc_entries, switch_entries) = match string_arg(args, "entries") {
            Some(path) => parse_entries(&path).expect("cannot read entries file"),
            None => Default::default(),
        };
        let max_pcs = match args.parsed.get("pcs") {
            Some(Value::Integer(n)) if *n > 0 => *n as usize,
            _ => 32,
        };
        let quantum = match args.parsed.get("quantum") {
            Some(Value::Integer(n)) if *n > 0 => Some(*n as u64),
            _ => None,
        };
        let user_mode = string_arg(args, "mode").as_deref() == Some("user");
        let profile = match (args.parsed.get("profile"), string_arg(args, "entries")) {
            (Some(Value::Bool(true)), Some(path)) => {
                Some(parse_syscalls(&path).expect("cannot read entries file"))
            }
            (Some(Value::Bool(true)), None) => Some(Vec::new()),
            _ => None,
        };
        let transfers = matches!(args.parsed.get("transfers"), Some(Value::Bool(true)));
        let tracer = Tracer {
            active: (0..MAX_VCPUS).map(|_| ActiveFlag::default()).collect(),
            vcpus: (0..MAX_VCPUS).map(|_| Mutex::new(Vcpu::default())).collect(),
            out: Mutex::new(out),
            irq_entries,
            exc_entries,
            switch_entries,
            max_pcs,
            user_mode,
            user_code: matches!(args.parsed.get("user"), Some(Value::Bool(true))),
            // QEMU parses on/off, yes/no, true/false as booleans.
            holders: transfers
                .then(|| (0..HOLDER_SHARDS).map(|_| Mutex::new(LineMap::default())).collect()),
            schedule: quantum.map(|q| {
                let ends = !matches!(args.parsed.get("operation_ends"), Some(Value::Bool(false)));
                let workers = match args.parsed.get("workers") {
                    Some(Value::Integer(n)) if *n > 0 => *n as u32,
                    _ => 0,
                };
                let turns = schedule::Turns::new(q, workers);
                let jitter = matches!(args.parsed.get("jitter"), Some(Value::Bool(true)));
                Schedule::new(if jitter { turns.jittered() } else { turns }, MAX_VCPUS, ends)
            }),
            stack_untraced: profile.is_none() && quantum.is_none() && !transfers,
            profile,
            stacks: Mutex::new(HashMap::new()),
        };
        if TRACER.set(tracer).is_err() {
            panic!("scalecheck-tracer installed twice");
        }
        // SAFETY: the callbacks have the signatures QEMU calls them with; TRACER is set.
        unsafe {
            sys::qemu_plugin_register_vcpu_tb_trans_cb(id, Some(on_translate));
            if quantum.is_some() && user_mode {
                sys::qemu_plugin_register_vcpu_syscall_cb(id, Some(on_syscall));
                sys::qemu_plugin_register_vcpu_syscall_ret_cb(id, Some(on_syscall_return));
            } else if quantum.is_some() {
                sys::qemu_plugin_register_vcpu_idle_cb(id, Some(on_idle));
                sys::qemu_plugin_register_vcpu_resume_cb(id, Some(on_resume));
            }
        }
        Ok(())
    }
}

impl HasCallbacks for ConflictTracer {}

/// Execute-callback events, passed to `on_exec` as its data: a marker's magic, or one of
/// these (none is a marker magic).
const EXEC_IRQ_ENTRY: u64 = 1;
const EXEC_EXC_ENTRY: u64 = 2;
const EXEC_SWITCH: u64 = 3;
const EXEC_IRETQ: u64 = 4;
/// Profile mode: the entry of a system call's function, its context in the low 32 bits.
const EXEC_SYSCALL: u64 = 1 << 32;

impl Tracer {
    /// What an instruction at `pc` with these bytes gets: an execute callback with this
    /// event, and whether its memory accesses are recorded.
    fn instrumentation(&self, pc: u64, bytes: &[u8]) -> (Option<u64>, bool) {
        // Decoding costs translation time: only for instructions whose accesses count.
        let traced = || !(self.stack_untraced && stack_only(bytes, pc));
        if pc < KERNEL_HALF {
            if let Some(magic) = marker_magic(bytes) {
                return (Some(u64::from(magic)), false);
            }
            return (None, (self.user_mode || self.user_code) && traced());
        }
        let syscall = self.profile.as_ref().and_then(|entries| {
            entries.binary_search_by_key(&pc, |&(addr, _)| addr).ok().map(|at| entries[at].1)
        });
        let event = if let Some(context) = syscall {
            Some(EXEC_SYSCALL | u64::from(context))
        } else if self.irq_entries.binary_search(&pc).is_ok() {
            Some(EXEC_IRQ_ENTRY)
        } else if self.exc_entries.binary_search(&pc).is_ok() {
            Some(EXEC_EXC_ENTRY)
        } else if self.switch_entries.binary_search(&pc).is_ok() {
            Some(EXEC_SWITCH)
        } else if bytes == IRETQ {
            Some(EXEC_IRETQ)
        } else {
            None
        };
        (event, traced())
    }
}

/// Instruments each translated block, through QEMU's own API (it replaces the crate's
/// handler, registered before `register` runs): the data of an instruction's memory
/// callback is its PC itself, not a pointer to a boxed closure, so the call QEMU makes on
/// every memory access reads no per-instruction memory. Those scattered loads (one heap
/// box per translated instruction) missed the cache and were about a third of QEMU's time.
unsafe extern "C" fn on_translate(_id: sys::qemu_plugin_id_t, tb: *mut sys::qemu_plugin_tb) {
    let t = tracer();
    if t.schedule.is_some() {
        sys::qemu_plugin_register_vcpu_tb_exec_cb(
            tb,
            Some(on_block),
            sys::qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
            sys::qemu_plugin_tb_n_insns(tb) as *mut c_void,
        );
    }
    for index in 0..sys::qemu_plugin_tb_n_insns(tb) {
        let insn = sys::qemu_plugin_tb_get_insn(tb, index);
        let pc = sys::qemu_plugin_insn_vaddr(insn);
        let bytes = std::slice::from_raw_parts(
            sys::qemu_plugin_insn_data(insn) as *const u8,
            sys::qemu_plugin_insn_size(insn),
        );
        let (event, memory) = t.instrumentation(pc, bytes);
        if let Some(event) = event {
            sys::qemu_plugin_register_vcpu_insn_exec_cb(
                insn,
                Some(on_exec),
                sys::qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
                event as *mut c_void,
            );
        }
        if memory {
            // Decoded only when lines' moves are counted (translation time).
            let atomic = t.holders.is_some() && is_atomic(bytes, pc);
            sys::qemu_plugin_register_vcpu_mem_cb(
                insn,
                Some(if atomic { on_atomic_memory } else { on_memory }),
                sys::qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
                sys::qemu_plugin_mem_rw::QEMU_PLUGIN_MEM_RW,
                pc as *mut c_void,
            );
        }
    }
}

unsafe extern "C" fn on_exec(vcpu: VCPUIndex, event: *mut c_void) {
    let t = tracer();
    match event as u64 {
        EXEC_IRQ_ENTRY => t.on_kernel_entry(vcpu, true),
        EXEC_EXC_ENTRY => t.on_kernel_entry(vcpu, false),
        EXEC_SWITCH => t.on_context_switch(vcpu),
        EXEC_IRETQ => t.on_iretq(vcpu),
        syscall if syscall & EXEC_SYSCALL != 0 => t.on_profile_context(vcpu, syscall as u32),
        magic => t.on_marker(vcpu, magic as u32),
    }
}

/// A block of `count` instructions (its data) starts on `vcpu`: with `quantum=Q`, its
/// turn's instructions.
unsafe extern "C" fn on_block(vcpu: VCPUIndex, count: *mut c_void) {
    let t = tracer();
    if let (true, Some(schedule)) = (t.is_active(vcpu), &t.schedule) {
        schedule.ran(vcpu, count as u64);
    }
}

/// x86-64 Linux system calls that may wait for another thread (or yield to one): a vCPU
/// leaves the turns for them. Any other call keeps its turn (it runs in the host, where no
/// access is traced, and ends without another thread's help).
const WAITING_SYSCALLS: [i64; 26] = [
    0, 1, 7, 19, 20, 23, 24, 34, 35, 43, 45, 47, 61, 65, 70, 202, 220, 230, 232, 247, 270, 271,
    281, 288, 299, 435,
];

/// futex(2): its command (the second argument) says whether it waits (schedule.rs).
const SYS_FUTEX: i64 = 202;

fn may_wait(num: i64) -> bool {
    WAITING_SYSCALLS.contains(&num)
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn on_syscall(
    _id: sys::qemu_plugin_id_t,
    vcpu: VCPUIndex,
    num: i64,
    _a1: u64,
    a2: u64,
    _a3: u64,
    _a4: u64,
    _a5: u64,
    _a6: u64,
    _a7: u64,
    _a8: u64,
) {
    let t = tracer();
    match &t.schedule {
        Some(schedule) if num == SYS_FUTEX && t.is_active(vcpu) => {
            schedule.futex_call(vcpu, (a2 & FUTEX_COMMAND) as u32)
        }
        _ if may_wait(num) => t.on_wait(vcpu, true),
        _ => {}
    }
}

unsafe extern "C" fn on_syscall_return(
    _id: sys::qemu_plugin_id_t,
    vcpu: VCPUIndex,
    num: i64,
    ret: i64,
) {
    let t = tracer();
    match &t.schedule {
        Some(schedule) if num == SYS_FUTEX && t.is_active(vcpu) => schedule.futex_return(vcpu, ret),
        _ if may_wait(num) => t.on_wait(vcpu, false),
        _ => {}
    }
}

unsafe extern "C" fn on_idle(_id: sys::qemu_plugin_id_t, vcpu: VCPUIndex) {
    tracer().on_wait(vcpu, true);
}

unsafe extern "C" fn on_resume(_id: sys::qemu_plugin_id_t, vcpu: VCPUIndex) {
    tracer().on_wait(vcpu, false);
}

unsafe extern "C" fn on_memory(
    vcpu: VCPUIndex,
    info: sys::qemu_plugin_meminfo_t,
    vaddr: u64,
    pc: *mut c_void,
) {
    on_traced_memory(vcpu, info, vaddr, pc, false);
}

/// `on_memory` for an atomic read-modify-write's accesses: one, read and written, from
/// qemu-x86_64's atomic helpers (reported as a store); a read, then a write, where TCG
/// translates the instruction inline (one vCPU thread for all). A callback of its own, so
/// that the kind is fixed at translation time and costs nothing per access.
unsafe extern "C" fn on_atomic_memory(
    vcpu: VCPUIndex,
    info: sys::qemu_plugin_meminfo_t,
    vaddr: u64,
    pc: *mut c_void,
) {
    on_traced_memory(vcpu, info, vaddr, pc, true);
}

#[inline(always)]
fn on_traced_memory(
    vcpu: VCPUIndex,
    info: sys::qemu_plugin_meminfo_t,
    vaddr: u64,
    pc: *mut c_void,
    atomic: bool,
) {
    let t = tracer();
    if t.is_active(vcpu) {
        t.on_access(vcpu, pc as u64, &MemoryInfo::from(info), vaddr, atomic);
    }
}

register!(ConflictTracer);

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::hash::BuildHasher;

    fn sites(region: &Region, line: u64) -> Vec<(u64, u64, u64)> {
        region.lines[&line].sites.iter().map(|s| (s.pc, s.read_mask, s.write_mask)).collect()
    }

    #[test]
    fn an_access_sets_its_bytes_in_its_line_and_site() {
        let mut region = Region::default();
        let touched = region.record(0x1008, 0xffff_8880_0000_1008, 8, true, 0xa, 32);
        assert_eq!(touched, [Some(0x1000), None]);
        region.record(0x1000, 0xffff_8880_0000_1000, 4, false, 0xb, 32);
        let line = &region.lines[&0x1000];
        assert_eq!(line.first_vaddr, 0xffff_8880_0000_1000);
        assert_eq!((line.read_mask, line.write_mask), (0xf, 0xff00));
        assert_eq!(sites(&region, 0x1000), [(0xa, 0, 0xff00), (0xb, 0xf, 0)]);
        assert_eq!(region.accesses, 2);
    }

    #[test]
    fn an_access_straddling_two_lines_is_split_between_them() {
        let mut region = Region::default();
        let touched = region.record(0x103c, 0x7000_003c, 8, false, 0xa, 32);
        assert_eq!(touched, [Some(0x1000), Some(0x1040)]);
        assert_eq!(region.lines[&0x1000].read_mask, 0xf << 60);
        assert_eq!(region.lines[&0x1040].read_mask, 0xf);
        assert_eq!(region.lines[&0x1040].first_vaddr, 0x7000_0040);
        assert_eq!(region.accesses, 1);
    }

    #[test]
    fn each_pc_has_one_site_and_pcs_beyond_the_limit_fold_into_pc_0() {
        let mut region = Region::default();
        // a, b, a again (not the last site used), then two PCs beyond the limit of 3.
        for (pc, offset) in [(0xa, 0), (0xb, 1), (0xa, 2), (0xc, 3), (0xd, 4), (0xe, 5)] {
            region.record(0x2000 + offset, 0x2000 + offset, 1, true, pc, 3);
        }
        assert_eq!(
            sites(&region, 0x2000),
            [(0xa, 0, 0b101), (0xb, 0, 0b10), (0xc, 0, 0b1000), (0, 0, 0b11_0000)]
        );
        assert_ne!(region.flags & FLAG_PCS_TRUNCATED, 0);
    }

    fn tracer(user_mode: bool, user_code: bool) -> Tracer {
        Tracer {
            active: Vec::new(),
            vcpus: Vec::new(),
            out: Mutex::new(BufWriter::new(File::create("/dev/null").unwrap())),
            irq_entries: vec![0xffff_ffff_8100_0000],
            exc_entries: vec![0xffff_ffff_8100_0100],
            switch_entries: vec![0xffff_ffff_8100_0200],
            max_pcs: 32,
            user_mode,
            user_code,
            holders: None,
            schedule: None,
            profile: None,
            stacks: Mutex::new(HashMap::new()),
            stack_untraced: false,
        }
    }

    #[test]
    fn only_inline_accesses_through_the_stack_pointer_are_stack_only() {
        let stack = [
            &[0x53][..],                        // push rbx
            &[0x5b],                            // pop rbx
            &[0xe8, 0, 0, 0, 0],                // call rel32
            &[0xc3],                            // ret
            &[0x48, 0x8b, 0x44, 0x24, 0x08],    // mov rax, [rsp+8]
            &[0x48, 0x89, 0x3c, 0x24],          // mov [rsp], rdi
            &[0x48, 0x83, 0x44, 0x24, 0x08, 1], // add qword [rsp+8], 1
        ];
        for bytes in stack {
            assert!(stack_only(bytes, 0xffff_ffff_8100_0000), "{bytes:x?}");
        }
        let other = [
            &[0x48, 0x8b, 0x07][..],         // mov rax, [rdi]
            &[0xff, 0x30],                   // push qword [rax]
            &[0xff, 0x10],                   // call qword [rax]
            &[0x65, 0x48, 0x8b, 0x04, 0x24], // mov rax, gs:[rsp]
            &[0xf0, 0x83, 0x0c, 0x24, 0x00], // lock or dword [rsp], 0
            &[0x48, 0x8b, 0x04, 0xcc],       // mov rax, [rsp+rcx*8]
            &IRETQ,                          // its pops go through a helper
            &[0x8e, 0x1c, 0x24],             // mov ds, [rsp]
            &[0xff, 0x1c, 0x24],             // call far [rsp]
            &[0x48, 0x8d, 0x44, 0x24, 0x08], // lea rax, [rsp+8]: no access
            &[0x90],                         // nop
        ];
        for bytes in other {
            assert!(!stack_only(bytes, 0xffff_ffff_8100_0000), "{bytes:x?}");
        }
        let mut system = tracer(false, false);
        let push = [0x53];
        assert_eq!(system.instrumentation(0xffff_ffff_8100_0300, &push), (None, true));
        system.stack_untraced = true;
        assert_eq!(system.instrumentation(0xffff_ffff_8100_0300, &push), (None, false));
        assert_eq!(
            system.instrumentation(0xffff_ffff_8100_0000, &push),
            (Some(EXEC_IRQ_ENTRY), false)
        );
        let mut user = tracer(true, false);
        user.stack_untraced = true;
        assert_eq!(user.instrumentation(0x40_1000, &push), (None, false));
        assert_eq!(user.instrumentation(0x40_1000, &[0x48, 0x8b, 0x07]), (None, true));
    }

    #[test]
    fn markers_entries_and_iretq_get_their_events_and_kernel_code_its_accesses() {
        let system = tracer(false, false);
        let start = [0x0f, 0x1f, 0x80, 0x01, 0x00, 0x5c, 0x5c];
        let other_nopl = [0x0f, 0x1f, 0x80, 0x01, 0x00, 0x00, 0x00];
        assert_eq!(system.instrumentation(0x40_1000, &start), (Some(0x5c5c_0001), false));
        assert_eq!(system.instrumentation(0x40_1000, &other_nopl), (None, false));
        assert_eq!(system.instrumentation(0x40_1000, &[0x8b, 0x07]), (None, false));
        let kernel = |pc: u64, bytes: &[u8]| system.instrumentation(pc, bytes);
        assert_eq!(kernel(0xffff_ffff_8100_0000, &[0x90]), (Some(EXEC_IRQ_ENTRY), true));
        assert_eq!(kernel(0xffff_ffff_8100_0100, &[0x90]), (Some(EXEC_EXC_ENTRY), true));
        assert_eq!(kernel(0xffff_ffff_8100_0200, &[0x90]), (Some(EXEC_SWITCH), true));
        assert_eq!(kernel(0xffff_ffff_8100_0300, &IRETQ), (Some(EXEC_IRETQ), true));
        assert_eq!(kernel(0xffff_ffff_8100_0300, &[0x8b, 0x07]), (None, true));
        // User code's accesses: in user mode (a library's test program) or with user=on.
        for user in [tracer(true, false), tracer(false, true)] {
            assert_eq!(user.instrumentation(0x40_1000, &[0x8b, 0x07]), (None, true));
            assert_eq!(user.instrumentation(0x40_1000, &start), (Some(0x5c5c_0001), false));
        }
        // The events are told apart from the markers' magics.
        for event in [EXEC_IRQ_ENTRY, EXEC_EXC_ENTRY, EXEC_SWITCH, EXEC_IRETQ] {
            assert!(![MARK_START, MARK_END, MARK_TAG0, MARK_TAG1].contains(&(event as u32)));
        }
    }

    #[test]
    fn two_vcpus_writing_the_two_lines_of_a_pair_move_the_pair_not_a_line() {
        let mut pair = PairHolders::default();
        // vCPU 0 writes line 0x1000, vCPU 1 line 0x1040, in turn: no line moves, the pair
        // does at every access but the first.
        let accesses: Vec<_> =
            (0..4).map(|i| pair.access(0x1000 + 0x40 * (i % 2), (i % 2) as u32, true)).collect();
        assert_eq!(
            accesses,
            [
                (Coherence::Local, false),
                (Coherence::Local, true),
                (Coherence::Local, true),
                (Coherence::Local, true)
            ]
        );
        // One line passed back and forth: transfers of the line, none of the pair only.
        let mut shared = PairHolders::default();
        shared.access(0x1000, 0, true);
        assert_eq!(shared.access(0x1000, 1, false), (Coherence::Transfer, false));
        assert_eq!(shared.access(0x1000, 1, true), (Coherence::Invalidation, false));
        // Two lines of different pairs: nothing moves.
        let (mut a, mut b) = (PairHolders::default(), PairHolders::default());
        for _ in 0..2 {
            assert_eq!(a.access(0x1000, 0, true), (Coherence::Local, false));
            assert_eq!(b.access(0x1080, 1, true), (Coherence::Local, false));
        }
    }

    /// One access of `kind` by `vcpu` to the line at 0x1000, counted into `line`.
    fn touch(pair: &mut PairHolders, line: &mut LineInfo, vcpu: u32, kind: Kind) {
        line.count(pair.access(0x1000, vcpu, kind.owns()).0, kind);
    }

    #[test]
    fn each_move_is_counted_under_the_kind_of_access_that_made_it() {
        // vCPU 0 stores, vCPU 1 only loads: the loads' transfers, the stores' invalidations.
        let (mut pair, mut published) = (PairHolders::default(), LineInfo::default());
        for _ in 0..3 {
            touch(&mut pair, &mut published, 0, Kind::Store);
            touch(&mut pair, &mut published, 1, Kind::Load);
        }
        assert_eq!((published.transfers, published.load_transfers), (3, 3));
        assert_eq!((published.invalidations, published.atomic_invalidations), (2, 0));
        // Both store in turn: the stores' transfers.
        let (mut pair, mut stored) = (PairHolders::default(), LineInfo::default());
        for vcpu in [0, 1, 0, 1] {
            touch(&mut pair, &mut stored, vcpu, Kind::Store);
        }
        assert_eq!((stored.transfers, stored.load_transfers, stored.invalidations), (3, 0, 0));
        // Both increment atomically in turn (a read, then a write, each reported): the
        // read takes the line for writing, so each increment moves it once.
        let (mut pair, mut incremented) = (PairHolders::default(), LineInfo::default());
        for vcpu in [0, 0, 1, 1, 0, 0] {
            touch(&mut pair, &mut incremented, vcpu, Kind::Atomic);
        }
        assert_eq!((incremented.transfers, incremented.atomic_transfers), (2, 2));
        assert_eq!(incremented.invalidations, 0);
        // An atomic on a line it holds beside a reader: one invalidation, the atomic's.
        touch(&mut pair, &mut incremented, 1, Kind::Load);
        touch(&mut pair, &mut incremented, 0, Kind::Atomic);
        assert_eq!((incremented.invalidations, incremented.atomic_invalidations), (1, 1));
    }

    #[test]
    fn locked_instructions_and_exchanges_with_memory_are_atomic() {
        let atomic = [
            &[0xf0, 0x48, 0x0f, 0xc1, 0x07][..], // lock xadd [rdi], rax
            &[0xf0, 0x83, 0x07, 0x01],           // lock add dword [rdi], 1
            &[0xf0, 0x0f, 0xb1, 0x17],           // lock cmpxchg [rdi], edx
            &[0x48, 0x87, 0x07],                 // xchg [rdi], rax
        ];
        for bytes in atomic {
            assert!(is_atomic(bytes, 0x40_1000), "{bytes:x?}");
        }
        let plain = [
            &[0x83, 0x07, 0x01][..], // add dword [rdi], 1
            &[0x48, 0x89, 0x07],     // mov [rdi], rax
            &[0x48, 0x87, 0xc3],     // xchg rbx, rax
            &[0x0f, 0xb1, 0x17],     // cmpxchg [rdi], edx (no lock)
        ];
        for bytes in plain {
            assert!(!is_atomic(bytes, 0x40_1000), "{bytes:x?}");
        }
    }

    #[test]
    fn profile_contexts_keep_their_regions_and_a_task_takes_its_context_through_a_switch() {
        let mut t = tracer(false, true);
        t.profile = Some(vec![(0xffff_ffff_8120_0000, CONTEXT_SYSCALL)]);
        let mut vcpu = Vcpu {
            region: Some(Region { tag: CONTEXT_USER, ..Region::default() }),
            ..Vcpu::default()
        };
        vcpu.region.as_mut().unwrap().accesses = 3;
        vcpu.enter_context(CONTEXT_SYSCALL, 0);
        vcpu.enter_context(CONTEXT_USER, 0);
        assert_eq!(
            (vcpu.context(), vcpu.region.as_ref().unwrap().accesses),
            (Some(CONTEXT_USER), 3)
        );
        assert_eq!(vcpu.stashed.keys().collect::<Vec<_>>(), [&CONTEXT_SYSCALL]);
        // A task in its call switches away (a push onto its stack), another task's stack
        // comes in (its context unknown: other kernel code), then the first task's again.
        let (old_stack, new_stack) = (0xffff_c900_0001_0000, 0xffff_c900_0002_0000);
        vcpu.enter_context(CONTEXT_SYSCALL, 0);
        vcpu.switching = Some(None);
        t.follow_switch(&mut vcpu, None, old_stack + 0x3ff8);
        t.follow_switch(&mut vcpu, Some(old_stack), 0xffff_8880_0000_1000); // not a stack
        assert_eq!(vcpu.context(), Some(CONTEXT_SYSCALL));
        t.follow_switch(&mut vcpu, Some(old_stack), new_stack + 0x3f00);
        assert_eq!((vcpu.context(), vcpu.switching), (Some(CONTEXT_KERNEL), None));
        vcpu.switching = Some(None);
        t.follow_switch(&mut vcpu, None, new_stack + 0x3ff8);
        t.follow_switch(&mut vcpu, Some(new_stack), old_stack + 0x3f00);
        assert_eq!(vcpu.context(), Some(CONTEXT_SYSCALL));
        let syscall = 0xffff_ffff_8120_0000;
        assert_eq!(t.instrumentation(syscall, &[0x90]), (Some(EXEC_SYSCALL | 16), true));
    }

    #[test]
    fn line_hashes_spread_over_the_bits_the_map_uses() {
        // hashbrown picks a bucket from the low bits and a control byte from the top 7;
        // 4,096 random hashes fill about 2,600 of 4,096 buckets.
        let build = BuildHasherDefault::<LineHasher>::default();
        for stride in [LINE, 4096] {
            let hashes: Vec<u64> =
                (0..4096u64).map(|n| build.hash_one(0xffff_8880_0100_0000 + n * stride)).collect();
            let top: HashSet<u64> = hashes.iter().map(|h| h >> 57).collect();
            let low: HashSet<u64> = hashes.iter().map(|h| h & 0xfff).collect();
            assert_eq!(top.len(), 128, "stride {stride}");
            assert!(low.len() > 2000, "stride {stride}: {} of 4096 buckets", low.len());
        }
    }
}
