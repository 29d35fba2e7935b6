"""Kernel facts the tracer needs, learnt once per kernel image by a probe boot.

The probe boot (no plugin, no tests) has the driver dump /proc/kallsyms, the kernel
release and each CPU's per-cpu area offset (read through /proc/kcore); once the guest has
powered off, the host copies the kernel's BTF out of the guest's RAM file (``btf``, the
bytes of /sys/kernel/btf/vmlinux; absent for a kernel built without BTF). With ``nokaslr``
these hold for every later boot of the same image, so they are cached by the image's
identity. From kallsyms come the plugin's entry points: interrupt entries (accesses are
dropped until their ``iretq``), exception entries (kept) and the context-switch routine.
"""

import functools
import hashlib
import json
import re
import time
from pathlib import Path

from scalecheck.common.errors import UserError
from scalecheck.common.sources import cache_dir
from scalecheck.run import wire
from scalecheck.run.linux.btf import Types
from scalecheck.run.linux.kernelmem import GuestMemory, KernelMemory, read_kernel_btf
from scalecheck.run.linux.vm import MEMORY_BYTES, GuestSession

PROBE_TIMEOUT = 600
# IDT entries that are asynchronous (their accesses are not the traced call's work).
IRQ_ENTRY = re.compile(
    r"^(asm_common_interrupt|asm_spurious_interrupt|asm_sysvec_\w+|asm_exc_nmi)$"
)
EXC_ENTRY = re.compile(r"^asm_exc_\w+$")
SWITCH = {"__switch_to_asm"}


# Bumped whenever what the probe records changes, so stale caches are not used.
FACTS_VERSION = 3


def image_key(kernel: Path) -> str:
    st = kernel.stat()
    ident = f"{FACTS_VERSION}:{kernel.resolve()}:{st.st_size}:{int(st.st_mtime)}"
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


def kernel_facts(kernel: Path, kernel_args: str, built: dict, log=print) -> Path:
    """Directory holding facts.json, kallsyms and entries.txt for this kernel image."""
    facts_dir = cache_dir() / "kernels" / image_key(kernel)
    if (facts_dir / "facts.json").exists():
        return facts_dir
    log(f"probing kernel {kernel} once (symbols, per-cpu offsets)...")
    facts_dir.mkdir(parents=True, exist_ok=True)
    session = GuestSession(
        facts_dir / "probe",
        kernel,
        kernel_args,
        built["base_image"],
        wire.settings_line(facts=1),
        plugin=None,
        entries=None,
        ram_file=True,
    )
    try:
        deadline = time.monotonic() + PROBE_TIMEOUT
        while not session.exited() and time.monotonic() < deadline:
            time.sleep(0.5)
        btf = _probe_btf(session) if session.exited() else None
    finally:
        session.stop()
    lines = (
        session.out_path.read_bytes().decode("utf-8", "replace").splitlines()
        if session.out_path.exists()
        else []
    )
    reports = [wire.parse_report(line) for line in lines]
    if not any(report and report.kind == "DONE" for report in reports):
        tail = session.panic_message() or session.console_tail(3).replace("\n", " | ")
        raise UserError(
            f"kernel {kernel} did not boot the tracer's guest ({session.exit_description()}; "
            f"console: {tail or 'empty'})"
        )
    kallsyms = _kallsyms(session)
    release = next((r.rest for r in reports if r and r.kind == "RELEASE"), "")
    offsets = dict(
        report.percpu_offset() for report in reports if report and report.kind == "PERCPU_OFFSET"
    )
    if btf:
        (facts_dir / "btf").write_bytes(btf)
    (facts_dir / "kallsyms").write_text(kallsyms)
    (facts_dir / "entries.txt").write_text(entry_points(kallsyms))
    (facts_dir / "facts.json").write_text(
        json.dumps(
            {
                "release": release,
                "image": str(kernel),
                "percpu_offsets": offsets,
                "btf": bool(btf),
            },
            indent=1,
        )
    )
    return facts_dir


# Kernel symbols the host needs to find the BTF in guest memory.
BTF_SYMBOLS = frozenset({"__start_BTF", "__stop_BTF", "linux_banner", "init_top_pgt"})


def _kallsyms(session: GuestSession) -> str:
    return wire.kallsyms(session.out_path.read_bytes().decode("utf-8", "replace"))


def _probe_btf(session: GuestSession) -> bytes | None:
    """The kernel's BTF, from the RAM file of the probe's powered-off guest."""
    try:
        kallsyms = _kallsyms(session)
    except (OSError, ValueError):
        return None
    addresses = {}
    for line in kallsyms.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] in BTF_SYMBOLS:
            addresses[parts[2]] = int(parts[0], 16)
    memory = GuestMemory(session.memory_path, MEMORY_BYTES)
    try:
        return read_kernel_btf(KernelMemory(memory, addresses.get("init_top_pgt", 0)), addresses)
    finally:
        memory.close()


@functools.cache
def kernel_types(facts_dir: Path) -> Types | None:
    """The struct layouts of a probed kernel (None: it has no BTF); parsed once per process."""
    btf = facts_dir / "btf"
    return Types.from_file(btf) if btf.exists() else None


def entry_points(kallsyms: str) -> str:
    """The plugin's entries file: `irq|exc|switch HEX` lines."""
    out = []
    for line in kallsyms.splitlines():
        parts = line.split()
        if len(parts) != 3 or parts[1] not in "tT":
            continue
        addr, name = parts[0], parts[2]
        if IRQ_ENTRY.match(name):
            out.append(f"irq {addr}")
        elif EXC_ENTRY.match(name):
            out.append(f"exc {addr}")
        elif name in SWITCH:
            out.append(f"switch {addr}")
    if not any(entry.startswith("irq") for entry in out):
        raise UserError(
            "kernel symbols have no interrupt entry points (asm_common_interrupt ...): "
            "is this an x86-64 Linux kernel of 5.8 or later?"
        )
    return "\n".join(out) + "\n"
