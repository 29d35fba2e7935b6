"""What each guest frame was while the program ran, for the kernel lines whose memory is no
longer what it was when they are named: the program has exited by then (and everything it
started was killed), so a slab page its processes filled is freed and names as a bare
"page". While the guest runs, the host copies the kernel's struct page array from the
guest's RAM every few seconds and keeps, per frame, the last struct page that said slab
(or page table); the lines still bare are then named again by the same data namer
(run/linux/datanames.py) reading that remembered array instead of the live one.

The same copies walk the task list (init_task.tasks, and each process's threads) for the
kernel stacks of the tasks then alive: a line of a freed stack names as "vmalloc".

A slab page allocated and freed between two copies is not seen; a frame that held more
than one slab over the run is named by the last seen; so with a task's stack.
"""

import struct
import time

from scalecheck.run.linux import datanames
from scalecheck.run.linux.kernel_layout import Layout, SlabMark
from scalecheck.run.linux.kernel_symbols import VMEMMAP
from scalecheck.run.linux.kernelmem import PAGE_SHIFT, KernelMemory
from scalecheck.run.linux.vm import MEMORY_BYTES

COPY_INTERVAL = 3.0  # wall seconds between two copies of the struct page array
STACK_BYTES = 16 << 10  # THREAD_SIZE on x86-64
MAX_TASKS = 10_000  # a walk stops there (a list read while it changes may not end)
# The fields the task walk reads: (struct, field).
TASK_FIELDS = (
    ("task_struct", "tasks"),
    ("task_struct", "stack"),
    ("task_struct", "comm"),
    ("task_struct", "signal"),
    ("task_struct", "thread_node"),
    ("signal_struct", "thread_head"),
)
_WORD = struct.Struct("<Q")
PAGE_TABLE = "page table"


class RememberedMemory(KernelMemory):
    """The guest's kernel memory, with the struct page array as remembered."""

    def __init__(self, live: KernelMemory, top_table: int, pages: bytearray):
        super().__init__(live.memory, top_table)
        self.remembered = pages

    def read(self, vaddr: int, size: int) -> bytes | None:
        at = vaddr - VMEMMAP[0]
        if at >= 0 and at + size <= len(self.remembered):
            return bytes(self.remembered[at : at + size])
        return super().read(vaddr, size)


class FrameHistory:
    """Per frame, the last struct page seen marking a slab or a page table."""

    def __init__(self, kernel: KernelMemory, top_table: int, layout: Layout, types, init_task):
        self.kernel, self.top_table, self.layout = kernel, top_table, layout
        offsets = {pair: types.offset_of(*pair) for pair in TASK_FIELDS}
        # empty: a kernel whose tasks this does not know (no stacks named)
        self.task_offsets: dict = offsets if None not in offsets.values() and init_task else {}
        self.init_task = init_task
        self.stacks: dict[int, str] = {}  # a kernel stack's start -> its task's name
        self.marks = {"slab": layout.slab_mark, PAGE_TABLE: SlabMark.of(types, "table")}
        self.frames = MEMORY_BYTES >> PAGE_SHIFT
        self.remembered = bytearray(self.frames * layout.page_size)
        self.tables: set[int] = set()  # frames last seen as page tables
        self.copies, self._last = 0, 0.0

    def copy_now(self) -> None:
        """Takes a copy when COPY_INTERVAL has passed since the last."""
        if time.monotonic() - self._last < COPY_INTERVAL:
            return
        self._last = time.monotonic()
        array = self._read_array()
        if array is None:
            return
        size, kinds = self.layout.page_size, {}
        for frame in range(self.frames):
            at = frame * size
            (head,) = _WORD.unpack_from(array, at + self.layout.compound_head)
            head_frame = (head - 1 - VMEMMAP[0]) // size if head & 1 else frame
            if head_frame not in kinds:
                kinds[head_frame] = self._kind(array, head_frame * size)
            kind = kinds[head_frame]
            if kind:
                self.remembered[at : at + size] = array[at : at + size]
                (self.tables.add if kind == PAGE_TABLE else self.tables.discard)(frame)
        self.copies += 1
        if self.task_offsets:
            self._walk_tasks()

    def _list(self, head: int, member: int):
        """The structs on the kernel list at head, each linked at offset member."""
        at = self.kernel.u64(head)
        for _ in range(MAX_TASKS):
            if not at or at == head:
                return
            yield at - member
            at = self.kernel.u64(at)

    def _walk_tasks(self) -> None:
        """Each live task's kernel stack, and its name."""
        off = self.task_offsets
        tasks, threads = off[("task_struct", "tasks")], off[("task_struct", "thread_node")]
        for leader in self._list(self.init_task + tasks, tasks):
            signal = self.kernel.u64(leader + off[("task_struct", "signal")])
            members = (
                self._list(signal + off[("signal_struct", "thread_head")], threads)
                if signal
                else [leader]
            )
            for task in members:
                stack = self.kernel.u64(task + off[("task_struct", "stack")])
                comm = self.kernel.string(task + off[("task_struct", "comm")], 16)
                if stack and comm is not None:
                    self.stacks[stack] = comm

    def stack_of(self, vaddr: int) -> str | None:
        """The name of the task whose kernel stack held vaddr."""
        start = vaddr & ~(STACK_BYTES - 1)
        return self.stacks.get(start)

    def _kind(self, array: bytes, at: int) -> str | None:
        for kind, mark in self.marks.items():
            if mark is None or at + mark.offset + mark.size > len(array):
                continue
            word = int.from_bytes(array[at + mark.offset : at + mark.offset + mark.size], "little")
            if mark.matches(word):
                return kind
        return None

    def _read_array(self) -> bytes | None:
        chunks = []
        step = 1 << PAGE_SHIFT
        for at in range(VMEMMAP[0], VMEMMAP[0] + len(self.remembered), step):
            paddr = self.kernel.phys(at)
            chunk = self.kernel.memory.read(paddr, step) if paddr is not None else None
            if chunk is None:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

    def namer(self, symbols, types, tables) -> datanames.DataNamer:
        """A data namer that reads the remembered struct page array."""
        return datanames.DataNamer(
            symbols, types, tables, RememberedMemory(self.kernel, self.top_table, self.remembered)
        )
