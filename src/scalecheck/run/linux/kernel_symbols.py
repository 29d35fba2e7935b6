"""Names kernel PCs and classifies data addresses, from the guest's own /proc/kallsyms.

The guest runs with ``nokaslr``, so the addresses it reports once (in a probe boot) stay
valid for every later boot of the same kernel image. With a debug vmlinux, PCs also get
file:line (through binutils' addr2line).
"""

import bisect
import json
import shutil
import subprocess
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from scalecheck.common.errors import UserError
from scalecheck.run.outcome import function_of
from scalecheck.run.regions import disjoint_spans

# x86-64 kernel memory layout with 4-level paging and no KASLR (Documentation/x86/x86_64/mm.rst).
USER_END = 0x0000_8000_0000_0000
DIRECT_MAP = (0xFFFF_8880_0000_0000, 0xFFFF_C880_0000_0000)
VMALLOC = (0xFFFF_C900_0000_0000, 0xFFFF_E900_0000_0000)
VMEMMAP = (0xFFFF_EA00_0000_0000, 0xFFFF_EB00_0000_0000)
STRUCT_PAGE_SIZE = 64
KERNEL_IMAGE = (0xFFFF_FFFF_8000_0000, 0xFFFF_FFFF_A000_0000)
TEXT_TYPES = set("tTwW")
# An address further than this above its nearest symbol is not named after it.
NEAREST_SYMBOL_LIMIT = 1 << 20
DATA_TYPES = set("dDbBrRvV")


class KernelSymbols:
    # Page-table pages are heap frames known by their lock (outcome.page_table_frames).
    holds_page_tables = True

    def __init__(self, kallsyms_text: str, percpu_offsets: dict, vmlinux: Path | None = None):
        symbols = []
        for line in kallsyms_text.splitlines():
            parts = line.split()
            # Module symbols ("[mod]") are left out: the harness loads no modules.
            if len(parts) == 3:
                try:
                    symbols.append((int(parts[0], 16), parts[1], parts[2]))
                except ValueError:
                    continue
        by_name = {name: addr for addr, _, name in symbols}
        self.address_of = by_name
        if vmlinux:
            check_vmlinux(vmlinux, by_name)
        # Per-cpu variables are listed as absolute ("A") offsets into the per-cpu area.
        self.percpu_size = by_name.get("__per_cpu_end", 0)
        self._text = _SortedNames([(a, n) for a, k, n in symbols if k in TEXT_TYPES])
        self._data = _SortedNames(
            [
                (a, n)
                for a, k, n in symbols
                if k in DATA_TYPES and KERNEL_IMAGE[0] <= a < KERNEL_IMAGE[1]
            ]
        )
        self._percpu = _SortedNames(
            [(a, n) for a, k, n in symbols if k == "A" and a < self.percpu_size]
        )
        self.percpu_offsets = {int(cpu): off for cpu, off in percpu_offsets.items()}
        self._addr2line = _Addr2Line(vmlinux) if vmlinux else None
        self._pc_names: dict[int, str] = {}

    def pc_name(self, pc: int) -> str:
        name = self._pc_names.get(pc)
        if name is None:
            name = self._text.describe(pc) or hex(pc)
            if self._addr2line:
                where = self._addr2line.lookup(pc)
                if where:
                    name = f"{name} ({where})"
            self._pc_names[pc] = name
        return name

    def function(self, pc: int) -> str:
        """The bare function name (for grouping conflicts by code site)."""
        return function_of(self.pc_name(pc))

    def code_spans(self, names) -> tuple:
        """Sorted, disjoint [start, end) pairs holding every PC that ``function`` names as
        one of ``names``: from each such symbol to the next symbol above it."""
        return disjoint_spans(self._text.spans(names))

    def defines_any(self, names) -> bool:
        """Whether any of these names is a symbol of the kernel's."""
        return any(name in self.address_of for name in names)

    def struct_page_frame(self, vaddr: int) -> int | None:
        """The frame whose struct page (64 bytes each on x86-64) holds vaddr; None outside
        the vmemmap array."""
        if VMEMMAP[0] <= vaddr < VMEMMAP[1]:
            return (vaddr - VMEMMAP[0]) // STRUCT_PAGE_SIZE
        return None

    def classify(self, vaddr: int):
        """(kind, data_symbol) of a data address; kinds as in docs/format-results.md."""
        if vaddr < USER_END:
            return "user", ""
        if KERNEL_IMAGE[0] <= vaddr < KERNEL_IMAGE[1]:
            return "static", self._data.describe(vaddr) or ""
        cpu_base = self._percpu_area(vaddr)
        if cpu_base:
            cpu, base = cpu_base
            return (
                "percpu",
                f"{self._percpu.describe(vaddr - base) or hex(vaddr - base)} [cpu{cpu}]",
            )
        if VMEMMAP[0] <= vaddr < VMEMMAP[1]:
            return "heap", "struct page"
        if DIRECT_MAP[0] <= vaddr < DIRECT_MAP[1] or VMALLOC[0] <= vaddr < VMALLOC[1]:
            return "heap", ""
        return "unknown", ""

    def _percpu_area(self, vaddr: int) -> tuple[int, int] | None:
        """(cpu, base) of the per-cpu area holding vaddr."""
        for cpu, base in sorted(self.percpu_offsets.items()):
            if self.percpu_size and base <= vaddr < base + self.percpu_size:
                return cpu, base
        return None

    def variable(self, vaddr: int) -> tuple[str, int] | None:
        """(symbol, offset into it) of a static or per-cpu data address."""
        if KERNEL_IMAGE[0] <= vaddr < KERNEL_IMAGE[1]:
            return self._data.locate(vaddr)
        cpu_base = self._percpu_area(vaddr)
        return self._percpu.locate(vaddr - cpu_base[1]) if cpu_base else None

    @classmethod
    def load(cls, facts_dir: Path, vmlinux: Path | None = None) -> "KernelSymbols":
        facts = json.loads((facts_dir / "facts.json").read_text())
        kallsyms = (facts_dir / "kallsyms").read_text(errors="replace")
        return cls(kallsyms, facts.get("percpu_offsets", {}), vmlinux)


# Text symbols one of which any x86-64 Linux image has, to tell whether a vmlinux is the
# image that ran.
ANCHOR_SYMBOLS = ("start_kernel", "_stext", "do_syscall_64")


def check_vmlinux(vmlinux: Path, running: dict):
    """A one-line error unless ``vmlinux`` is an ELF with line information whose symbols sit
    where the running kernel's (kallsyms) do: file:line names from another build would lie."""
    try:
        with open(vmlinux, "rb") as f:
            elf = ELFFile(f)
            symtab = elf.get_section_by_name(".symtab")
            has_lines = elf.get_section_by_name(".debug_line") is not None
            anchors = {}
            for name in ANCHOR_SYMBOLS:
                found = symtab.get_symbol_by_name(name) if symtab else None
                if found:
                    anchors[name] = found[0]["st_value"]
    except (OSError, ELFError) as err:
        raise UserError(f"--vmlinux {vmlinux}: not a readable ELF file ({err})") from None
    if not has_lines:
        raise UserError(
            f"--vmlinux {vmlinux} has no line information (.debug_line): "
            "pass the debug vmlinux (e.g. Debian's linux-image-<version>-dbg)"
        )
    common = [name for name in anchors if name in running]
    if not common:
        raise UserError(
            f"--vmlinux {vmlinux} has none of {', '.join(ANCHOR_SYMBOLS)}: is it a Linux kernel?"
        )
    for name in common:
        if anchors[name] != running[name]:
            raise UserError(
                f"--vmlinux {vmlinux} is not the traced kernel: {name} is at "
                f"{anchors[name]:#x} there and at {running[name]:#x} in the guest"
            )


class _SortedNames:
    def __init__(self, pairs):
        pairs.sort()
        self._addrs = [a for a, _ in pairs]
        self._names = [n for _, n in pairs]

    def locate(self, addr: int) -> tuple[str, int] | None:
        """(nearest symbol at or below addr, offset from it)."""
        i = bisect.bisect_right(self._addrs, addr) - 1
        if i < 0:
            return None
        offset = addr - self._addrs[i]
        # Beyond 1 MiB from the nearest symbol the name would be a guess.
        if offset > NEAREST_SYMBOL_LIMIT:
            return None
        return self._names[i], offset

    def spans(self, names) -> list:
        """[start, end) of the addresses ``locate`` gives each symbol in ``names``."""
        found = []
        for i, name in enumerate(self._names):
            if name in names:
                start = self._addrs[i]
                end = start + NEAREST_SYMBOL_LIMIT + 1
                if i + 1 < len(self._addrs):
                    end = min(end, self._addrs[i + 1])
                found.append((start, end))
        return found

    def describe(self, addr: int) -> str | None:
        found = self.locate(addr)
        if found is None:
            return None
        name, offset = found
        return f"{name}+{offset:#x}" if offset else name


class _Addr2Line:
    """One long-lived addr2line process answering PC -> file:line."""

    def __init__(self, vmlinux: Path):
        tool = shutil.which("addr2line")
        self._proc: subprocess.Popen[str] | None = None
        if tool:
            self._proc = subprocess.Popen(
                [tool, "-e", str(vmlinux)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                bufsize=1,
            )

    def lookup(self, pc: int) -> str:
        proc = self._proc
        if proc is None:
            return ""
        assert proc.stdin is not None and proc.stdout is not None  # opened with PIPE
        proc.stdin.write(f"{pc:#x}\n")
        proc.stdin.flush()
        where = proc.stdout.readline().strip()
        return "" if where.startswith("??") else where
