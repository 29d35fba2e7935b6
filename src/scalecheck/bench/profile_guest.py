"""The guest that runs a whole program for `scalecheck profile`: the Linux target's kernel on N
vCPUs with the host's file system as its root (9p, read-only), the plugin's profile window
around the program, and the run's outcome and profile regions read back.

The initramfs is the tracer's base image (busybox) plus the 9p modules of the kernel's
version (the host's /lib/modules, or a fetched kernel's) and an init script: it loads
them, mounts the host's root read-only at /host and the run's directory (on the host)
writable at its own path under it, tmpfs at /tmp and /run, and runs the run script there
(chroot): the script brings up the loopback, turns address randomisation off (each
program's libraries at the same addresses in every process), starts the page map
(profile_user), opens the window, runs the program (in a process group of its own) with
its output in the run's directory, stops it at the bound (SIGTERM, then SIGKILL), closes
the window, stops everything else the same way, and says the program's status on the
console; the guest then waits for the host to name kernel data
from its memory and stop it. While the program runs the host copies the kernel's struct
pages (profile_frames).
"""

import lzma
import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from scalecheck.bench import profile_lines, wholestack
from scalecheck.bench.profile_boot import boot_object_name, boot_objects
from scalecheck.bench.profile_frames import PAGE_TABLE, FrameHistory
from scalecheck.bench.profile_heap import (
    ALLOCATIONS,
    mark_harness,
    name_heap_lines,
    read_harness,
)
from scalecheck.bench.profile_modules import KALLSYMS_FILE, ModuleSymbols
from scalecheck.bench.profile_user import MEMORY, UserPages, is_specific
from scalecheck.bench.sharing import ensure_recorder, kernel_names
from scalecheck.binding import abi
from scalecheck.common.errors import UserError
from scalecheck.run.linux import guest_build, kernels, vm
from scalecheck.run.linux.kernel_layout import Layout
from scalecheck.run.linux.kernel_symbols import KERNEL_IMAGE
from scalecheck.run.linux.kernelmem import KernelMemory
from scalecheck.run.regions import RegionReader

MODULES = ("virtio_pci", "9pnet_virtio", "9p")
# What a program (or its recipe) prints on stdout for per-unit figures: "completed: 20
# requests" (the last such line counts).
COMPLETED = re.compile(r"^completed: (\d+) (\w+)\s*$", re.MULTILINE)
HOST_ROOT, RUN_SHARE = "hostroot", "profilerun"
FAILED = "SCALECHECK-FAILED"
# A name of its own: a mail server will not start on a host named "(none)".
GUEST_HOSTNAME = "scalecheck-guest"
MOUNT_9P = "-t 9p -o trans=virtio,version=9p2000.L,msize=262144"
# Seconds the guest may take past the bound to stop the program, close the window (the
# plugin writes every region then) and say so.
STOP_MARGIN = 120.0
PLUGIN_OPTIONS = "transfers=on,user=on,profile=on,pcs=8"
# Kernel data names that say no type: the writers' functions are added to them.
BARE_KINDS = ("page", "vmalloc", "unknown", "anon page", "page cache")
# The guest's map of user pages (profile_pages, run in the guest: guest milliseconds
# between two rounds; its file in the guest's /run, then copied to the run's directory).
PAGES_INTERVAL_MS = 500
PAGES_FILE = "pages.txt"
# The page map's only reads and writes (profile_pages.c), left out of the profile: its
# reads of /proc/PID/pagemap touch the struct pages of the program's memory.
PAGE_MAP_CALLS = ("preadv2", "pwritev2")
# The pids of the guest's own processes that live while the program runs (init, the run
# script's shell, the page map, the watcher that stops the program at the bound, its sleep):
# their memory is the tool's, counted apart from the program's (profile_heap.mark_harness).
HARNESS_FILE = "harness"
# Guest seconds a program has between SIGTERM and SIGKILL, at the bound and at the end
# (what it started and left running): the recorder writes its records on a default
# SIGTERM, a program that handles it may stop its children.
TERM_GRACE = 2
# Before that, the recorder's signal (it writes its records and goes on: a process that
# handles SIGTERM itself, make, or is killed, is named too), and guest seconds to write.
RECORDS_SIGNAL = abi.value("RECORDS_SIGNAL")
RECORDS_GRACE = 1
# Bare pages named by their writer, which keeps one kind of data in pages of its own:
# a split virtqueue's ring (its descriptor table and available ring; allocated as pages,
# an indirect descriptor table is a slab object), which the device reads.
PAGE_WRITERS = {
    "virtqueue_add_split": "virtio split ring (descriptors, available ring)",
    "virtqueue_add_packed": "virtio packed ring",
}
# The page allocator's zeroing of a page it hands out (__GFP_ZERO, an anonymous fault).
ZEROING = frozenset({"clear_page_rep", "clear_page_erms", "clear_page_orig"})
# Functions that write no direct-mapped memory but page-table entries (the ones a bare
# page's lines name: an entry's setters, the zapping, copying and protecting loops that
# inline them, a new top level's kernel half); a page table is allocated zeroed.
PAGE_TABLE_WRITERS = frozenset(
    {
        "native_set_pte",
        "native_set_pmd",
        "native_set_pud",
        "native_set_p4d",
        "native_set_pgd",
        "pgd_alloc",
        "unmap_page_range",
        "copy_page_range",
        "change_protection",
        "move_page_tables",
        "__ptep_modify_prot_start",
        "ptep_set_access_flags",
        "pmdp_set_access_flags",
    }
)
# Functions that read page-table entries through the direct map, and nothing else there:
# the walkers (a table's empty entries are read, never written, by them).
PAGE_TABLE_READERS = PAGE_TABLE_WRITERS | {
    "walk_pgd_range",
    "pagemap_pmd_range",
    "free_pgd_range",
    "__handle_mm_fault",
}
# Bare pages whose every writer writes one kind of data (no zeroing: allocated unzeroed):
# mmu_gather's batch of pages to free after a TLB flush (a page of its own).
PAGE_ONLY_WRITERS = {"__tlb_remove_page_size": "mmu_gather batch (pages freed after a TLB flush)"}
# The code that reads such a page, and nothing else: the batch's pages are freed from it.
PAGE_ONLY_READERS = {
    "__tlb_remove_page_size": frozenset({"free_pages_and_swap_cache", "release_pages"})
}
ZEROED_PAGE = "page being zeroed on allocation"
# A line zeroed on allocation that only the copy-on-write fault's copy then read: a part
# of an anonymous (or a private file) page no user code touched, copied after a fork.
COPIED_ZEROED_PAGE = "page zeroed on allocation, then copied on a write fault (untouched part)"
COPY_ON_WRITE = "copy_page"


@dataclass
class Profiled:
    outcome: dict
    seconds: float
    syscalls: list[str]
    contended: dict = field(default_factory=dict)
    names: dict = field(default_factory=dict)
    pairs: Counter = field(default_factory=Counter)
    accesses: int = 0


def kernel_version(image: Path) -> str:
    """The version of a vmlinuz-VERSION image (whose modules the guest loads)."""
    if not image.name.startswith("vmlinuz-"):
        raise UserError(f"{image}: profile needs a vmlinuz-VERSION image (its modules)")
    return image.name.removeprefix("vmlinuz-")


def module_files(image: Path, unpacked: Path) -> list[Path]:
    """The .ko files of MODULES, dependencies first (modprobe --show-depends), from the
    host's /lib/modules or a fetched kernel's own (`scalecheck kernel fetch`); none for a
    module built in. Compressed ones (.ko.xz) are unpacked into ``unpacked``."""
    version = kernel_version(image)
    root = image.parent if (image.parent / kernels.MODULES / version).is_dir() else Path("/")
    try:
        if not (root / kernels.MODULES / version / "modules.dep").exists():
            # a package's modules come without the index its installation makes
            subprocess.run(["depmod", "-b", str(root), version], check=False)
        run = subprocess.run(
            ["modprobe", "-d", str(root), "-a", "-S", version, "--show-depends", *MODULES],
            capture_output=True,
            text=True,
        )
    except FileNotFoundError:
        raise UserError("modprobe or depmod not found (kmod): they find the 9p modules") from None
    if run.returncode != 0:
        raise UserError(
            f"no 9p modules for kernel {version} in {root / kernels.MODULES} (profile mounts "
            f"the host over 9p): {(run.stderr.strip().splitlines() or ['modprobe failed'])[0]}"
        )
    files: list[Path] = []
    for line in run.stdout.splitlines():
        words = line.split()
        if words[:1] == ["insmod"] and Path(words[1]) not in files:
            files.append(Path(words[1]))
    return [plain_module(path, unpacked) for path in files]


def plain_module(path: Path, unpacked: Path) -> Path:
    """The module itself, or its copy unpacked (busybox's insmod reads plain .ko files)."""
    if path.suffix != ".xz":
        return path
    plain = unpacked / path.stem
    unpacked.mkdir(parents=True, exist_ok=True)
    plain.write_bytes(lzma.decompress(path.read_bytes()))
    return plain


def init_script(modules: list[Path], rundir: Path, scratch_mb: int) -> str:
    loads = "".join(f"$B insmod {m} || echo '{FAILED} insmod {m.name}'\n" for m in modules)
    return f"""#!/bin/busybox sh
B=/bin/busybox
$B mount -t proc proc /proc
$B mount -t devtmpfs dev /dev
{loads}$B mkdir -p /host
if ! $B mount {MOUNT_9P},ro {HOST_ROOT} /host; then
    loaded=$($B cut -d' ' -f1 /proc/modules | $B tr '\\n' ' ')
    echo "{FAILED} the host file system could not be mounted (modules: $loaded)"
    exec $B sleep 1000000
fi
$B mount -t proc proc /host/proc
$B mount -t sysfs sys /host/sys
$B mount -t devtmpfs dev /host/dev
$B mount -t tmpfs -o size={scratch_mb}m scratch /host/tmp
$B mount -t tmpfs run /host/run
$B mkdir -p /host{rundir}
$B mount {MOUNT_9P} {RUN_SHARE} /host{rundir}
$B mkdir -p /host/dev/shm /host/dev/pts
$B mount -t tmpfs shm /host/dev/shm
$B mount -t devpts pts /host/dev/pts
echo {wholestack.STARTED}
$B chroot /host /bin/busybox sh {rundir}/run.sh
echo '{FAILED} the run script ended without a status'
exec $B sleep 1000000
"""


def run_script(argv: list[str], rundir: Path, duration: float, helpers: Path) -> str:
    mark = helpers / "profile_mark"
    # in the guest's /run: a program that drops its privileges still writes there
    recorder = f"LD_PRELOAD={ensure_recorder()} SCALECHECK_ALLOC_SITES=/run/{ALLOCATIONS}/"
    return f"""B=/bin/busybox
O={rundir}
$B ifconfig lo 127.0.0.1 up
$B hostname {GUEST_HOSTNAME}
echo 0 > /proc/sys/kernel/randomize_va_space
export HOME=/tmp TMPDIR=/tmp PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
cd /tmp
$B cut -d' ' -f1 /proc/uptime > $O/started
$B mkdir -m 1777 /run/{ALLOCATIONS}
{helpers / "profile_pages"} /run/{PAGES_FILE} {PAGES_INTERVAL_MS} &
pages=$!
echo 1 $$ $pages > $O/{HARNESS_FILE}
{mark} on
# a process group of its own, stopped as one at the bound
{recorder} $B setsid {wholestack.shell_words(argv)} >$O/stdout 2>$O/stderr </dev/null &
pid=$!
( $B sleep {duration:g} & echo $! >> $O/{HARNESS_FILE}; wait $!
  kill -{RECORDS_SIGNAL} -$pid 2>/dev/null && $B sleep {RECORDS_GRACE}
  kill -TERM -$pid 2>/dev/null && echo killed > $O/timed-out
  $B sleep {TERM_GRACE}; kill -9 -$pid 2>/dev/null ) &
watch=$!
echo $watch >> $O/{HARNESS_FILE}
wait $pid
status=$?
{mark} off
$B cut -d' ' -f1 /proc/uptime > $O/ended
kill -9 $watch $pages 2>/dev/null
# the shell's own kill: kill(-1) spares its caller
kill -{RECORDS_SIGNAL} -1
$B sleep {RECORDS_GRACE}
kill -TERM -1
$B sleep {TERM_GRACE}
kill -9 -1
$B cp /run/{PAGES_FILE} $O/{PAGES_FILE}
$B cp -r /run/{ALLOCATIONS} $O/
$B grep ']$' /proc/kallsyms > $O/{KALLSYMS_FILE}
echo $status > $O/status
$B sync
echo "{wholestack.EXIT} $status"
exec $B sleep 1000000
"""


def start_guest(
    args, argv: list[str], kernel, modules: list[Path], rundir: Path
) -> vm.GuestSession:
    helpers = guest_build.guest_dir() / "build"
    rundir.mkdir(parents=True, exist_ok=True)
    (rundir / "run.sh").write_text(run_script(argv, rundir, args.duration, helpers))
    image = wholestack.boot_image(
        Path(kernel.built["base_image"]),
        set(modules),
        init_script(modules, rundir, args.scratch_mb),
        rundir / "profile.cpio",
    )
    entries = rundir / "entries.txt"
    syscalls = profile_lines.syscall_entries(kernel.symbols.address_of)
    entries.write_text(
        kernel.entries.read_text() + "".join(f"sys {address:x}\n" for _, address in syscalls)
    )
    shares = []
    for tag, path, extra in ((HOST_ROOT, "/", ",readonly=on"), (RUN_SHARE, rundir, "")):
        shares += [
            "-fsdev",
            f"local,id={tag},path={path},security_model=none{extra}",
            "-device",
            f"virtio-9p-pci,fsdev={tag},mount_tag={tag}",
        ]
    return vm.GuestSession(
        rundir / "vm",
        kernel.image,
        f"{wholestack.KERNEL_ARGS} rdinit={wholestack.GUEST_INIT}",
        image,
        "",
        kernel.built["plugin"],
        entries,
        plugin_options=PLUGIN_OPTIONS,
        machine=vm.Machine(args.cpus, shares),
    )


def console(session: vm.GuestSession) -> str:
    try:
        return session.console_path.read_bytes().decode("utf-8", "replace").replace("\r", "")
    except FileNotFoundError:
        return ""


def wait_for_exit(session: vm.GuestSession, duration: float, while_running) -> None:
    """Until the run script says the program's status, calling while_running() every half
    second from the program's start; UserError when the guest fails, stops, or takes longer
    than the boot's and the bound's time."""
    deadline = time.monotonic() + wholestack.BOOT_TIMEOUT
    started = False
    while True:
        text = console(session)
        failed = re.search(rf"^{FAILED} (.*)$", text, re.MULTILINE)
        if failed and "insmod" not in failed.group(1):
            raise UserError(f"the guest could not start the program: {failed.group(1)}")
        # (the console may put a terminal reset before it on its line)
        if not started and re.search(rf"{wholestack.STARTED}$", text, re.MULTILINE):
            started, deadline = True, time.monotonic() + duration + STOP_MARGIN
        if re.search(rf"^{wholestack.EXIT} -?\d+$", text, re.MULTILINE):
            return
        if started:
            while_running()
        if session.exited():
            detail = session.panic_message() or session.exit_description()
            raise UserError(f"the guest stopped before the program ended: {detail}")
        if time.monotonic() > deadline:
            where = "reach its init" if not started else "stop the program"
            raise UserError(f"the guest did not {where} in time (the guest was stopped)")
        time.sleep(0.5)


def outcome(rundir: Path) -> tuple[dict, float]:
    """The program's status, whether the bound killed it, its stderr's last line, what it
    says it completed (COMPLETED), and the guest seconds of the window."""

    def read(name: str) -> str:
        path = rundir / name
        return path.read_text(errors="replace").strip() if path.exists() else ""

    errors = read("stderr").splitlines()
    started, ended = read("started"), read("ended")
    seconds = float(ended) - float(started) if started and ended else 0.0
    completed = COMPLETED.findall(read("stdout"))
    return {
        "status": int(read("status") or -1),
        "timed_out": bool(read("timed-out")),
        "last_error": errors[-1] if errors else "no message",
        "output": str(rundir),
        "completed": {"count": int(completed[-1][0]), "unit": completed[-1][1]}
        if completed
        else None,
    }, seconds


def frame_history(kernel, session: vm.GuestSession) -> FrameHistory | None:
    """The struct page copies of this boot (None for a kernel whose slabs naming does not
    know, or a guest whose memory cannot be read)."""
    layout = Layout.of(kernel.types) if kernel.types else None
    memory = session.guest_memory()
    if layout is None or memory is None:
        return None
    top = kernel.symbols.address_of.get("init_top_pgt", 0)
    init_task = kernel.symbols.address_of.get("init_task")
    return FrameHistory(KernelMemory(memory, top), top, layout, kernel.types, init_task)


def profile(args, argv: list[str], rundir: Path) -> Profiled:
    """Boots, runs the program, reads and names its contended lines, stops the guest."""
    # The modules first: a kernel without them fails before its facts are probed.
    image = kernels.resolve(args.kernel) if args.kernel else vm.default_kernel()
    modules = module_files(image, rundir / "modules")
    kernel = wholestack.Kernel(image)
    session = start_guest(args, argv, kernel, modules, rundir)
    try:
        histories: list[FrameHistory | None] = []

        def copy_frames() -> None:  # from the program's start: QEMU's RAM is mapped by then
            if not histories:
                histories.append(frame_history(kernel, session))
            if histories[0]:
                histories[0].copy_now()

        wait_for_exit(session, args.duration, copy_frames)
        history = histories[0] if histories else None
        result, seconds = outcome(rundir)
        regions = RegionReader(session.trace_path).read_new()
        syscalls = [name for name, _ in profile_lines.syscall_entries(kernel.symbols.address_of)]
        profiled = Profiled(result, seconds, syscalls)
        regions = [
            region
            for region in regions
            if profile_lines.context_name(region.tag, syscalls) not in PAGE_MAP_CALLS
        ]
        profiled.accesses = sum(region.accesses for region in regions)
        profiled.contended = profile_lines.contended_lines(regions)
        pages = UserPages(rundir / PAGES_FILE, *sorted((rundir / ALLOCATIONS).glob("*.pages")))
        loaded = ModuleSymbols(rundir / KALLSYMS_FILE)
        profiled.names = line_names(profiled, kernel, session, args.cpus, (pages, loaded))
        name_heap_lines(profiled.names, profiled.contended, pages, rundir / ALLOCATIONS)
        if history:
            rename_bare(profiled, kernel, history)
        harness = read_harness(rundir / HARNESS_FILE)
        mark_harness(profiled.names, profiled.contended, pages, harness)
        profiled.pairs = profile_lines.pair_lines(profiled.contended, syscalls)
        print(
            f"profile: {len(regions)} regions, {profiled.accesses} accesses, "
            f"{len(pages.owners)} user pages mapped, "
            f"{history.copies if history else 0} copies of struct page",
            file=sys.stderr,
        )
    finally:
        session.stop()
    return profiled


def boot_percpu_areas(namer, symbols, cpus: int) -> None:
    """The per-CPU areas of this boot, read from its __per_cpu_offset (the facts' boot had
    the tests' CPU count, which may differ)."""
    table = symbols.address_of.get("__per_cpu_offset")
    if namer.kernel is None or table is None:
        return
    offsets = {cpu: namer.kernel.u64(table + 8 * cpu) for cpu in range(cpus)}
    if all(offsets.values()):
        symbols.percpu_offsets = offsets


def line_names(profiled: Profiled, kernel, session: vm.GuestSession, cpus: int, found_by) -> dict:
    """Each contended line's name: a page of user memory by the process, file and symbol
    mapped there (the guest's page map), other kernel data as `scalecheck trace` names it
    (a module's static data by the module's symbols)."""
    pages, modules = found_by
    contended = profiled.contended
    kernel_lines = {
        paddr: touches for paddr, touches in contended.items() if profile_lines.is_kernel(touches)
    }
    namer = wholestack.data_namer(kernel, session)
    try:
        boot_percpu_areas(namer, kernel.symbols, cpus)
        found = kernel_names(
            [
                (profile_lines.representative(touches), profile_lines.line_masks(touches))
                for touches in kernel_lines.values()
            ],
            kernel.symbols,
            namer,
        )
        boot = boot_objects(namer.kernel, kernel.symbols, kernel.types) if namer.kernel else []
    finally:
        namer.close()
    names = {}
    for paddr, touches in contended.items():
        vaddr = profile_lines.representative(touches).vaddr
        if paddr not in kernel_lines:
            user = pages.name(paddr, vaddr)
            if not user or not is_specific(user):
                user = pages.name_by_address(vaddr) or user
            names[paddr] = f"user: {user or MEMORY}"
            continue
        user = pages.name(paddr)
        at_boot = found[paddr] == "page" and boot_object_name(
            boot, kernel.types, vaddr, profile_lines.line_masks(touches)
        )
        if user and found[paddr] in BARE_KINDS:
            names[paddr] = f"kernel: page of {user}"
        elif found[paddr] == "unknown" and modules.variable(vaddr):
            names[paddr] = f"kernel: {modules.variable(vaddr)}"
        elif at_boot:
            names[paddr] = f"kernel: {at_boot}"
        else:
            names[paddr] = kernel_name(found[paddr], touches, kernel.symbols, modules)
    return names


def rename_bare(profiled: Profiled, kernel, history: FrameHistory) -> None:
    """Kernel lines still bare named again from what the host saw while the program ran:
    a task's kernel stack, a page table, a slab since freed."""
    bare = {
        paddr: touches
        for paddr, touches in profiled.contended.items()
        if profile_lines.is_kernel(touches)
        and not is_specific(profiled.names[paddr])
        and not profiled.names[paddr].startswith("kernel: page of ")  # the page map's
    }
    namer = history.namer(kernel.symbols, kernel.types, kernel.tables)
    found = kernel_names(
        [
            (profile_lines.representative(touches), profile_lines.line_masks(touches))
            for touches in bare.values()
        ],
        kernel.symbols,
        namer,
    )
    for paddr, touches in bare.items():
        task = history.stack_of(profile_lines.representative(touches).vaddr)
        if task:
            profiled.names[paddr] = f"kernel: stack of {task}"
        elif paddr >> 12 in history.tables:
            profiled.names[paddr] = f"kernel: {PAGE_TABLE}"
        elif found[paddr] not in BARE_KINDS:
            profiled.names[paddr] = f"kernel: {found[paddr]} (freed by the end)"


def kernel_name(data: str, touches: list, symbols, modules: ModuleSymbols) -> str:
    """A kernel line's name; memory that names no type (a page that is no slab's, vmalloc)
    is named by its writers when they say what it held (page_kind), else adds them."""
    if data not in BARE_KINDS:
        return f"kernel: {data}"

    def function(pc: int) -> str:
        if pc >= KERNEL_IMAGE[1]:  # a module's code
            return modules.function(pc) or symbols.function(pc)
        return symbols.function(pc)

    sites = [site for _, _, line in touches for site in line.sites]
    writers = sorted({function(site.pc) for site in sites if site.pc and site.write_mask})
    # a site of pc 0 stands for those beyond the plugin's limit: unknown code
    accessors = {function(site.pc) if site.pc else "" for site in sites}
    kind = page_kind(writers, accessors) if data == "page" else None
    shown = ", ".join(writers[:2]) + (", ..." if len(writers) > 2 else "")
    return f"kernel: {kind or data} (written by {shown or 'unknown code'})"


def page_kind(writers: list[str], accessors: set[str]) -> str | None:
    """What a bare page's line held, by the code that touched it: a virtio ring
    (PAGE_WRITERS: any of its writers); a page table (every writer a page table's, or the
    zeroing of its allocation; or zeroed, then only read by page-table walkers); a page
    of PAGE_ONLY_WRITERS (every writer that one; or that one and the zeroing of another
    life of the frame, every access theirs or the page's readers'); a page the allocator
    zeroed and nothing else touched (every access the zeroing: the line moved between CPUs
    as a freed frame was handed out again, holding no one's data), or that only a
    copy-on-write fault's copy read then (zeros no user code touched, copied)."""
    for writer in writers:
        kind = PAGE_WRITERS.get(writer.split(" [")[0])  # a module's function: "f [module]"
        if kind:
            return kind
    written = set(writers)
    if written & PAGE_TABLE_WRITERS and written <= PAGE_TABLE_WRITERS | ZEROING:
        return PAGE_TABLE
    walked = accessors & PAGE_TABLE_READERS
    if written <= ZEROING and walked and accessors <= PAGE_TABLE_READERS | ZEROING:
        return PAGE_TABLE  # zeroed as allocated, then only walked: entries never filled
    if len(written) == 1 and writers[0] in PAGE_ONLY_WRITERS:
        return PAGE_ONLY_WRITERS[writers[0]]
    own = written - ZEROING
    only = next(iter(own)) if len(own) == 1 else ""
    if only in PAGE_ONLY_WRITERS and accessors <= ZEROING | own | PAGE_ONLY_READERS[only]:
        # the frame's two lives, each named: every transfer was of the one or the other
        return f"{PAGE_ONLY_WRITERS[only]}, or {ZEROED_PAGE}"
    if written and written <= ZEROING and accessors - ZEROING == {COPY_ON_WRITE}:
        return COPIED_ZEROED_PAGE  # zeros moved from the zeroing CPU to the copying one
    if accessors and accessors <= ZEROING:
        return ZEROED_PAGE
    return None
