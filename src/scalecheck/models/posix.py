"""POSIX file system and virtual memory: the 18 operations of the commutativity paper.

One flat root directory; two processes, each with its own fd table and mappings. File
data is counted in units of one page; a pipe holds bytes. Bounds (why they lose nothing
for pairs of calls is argued in docs/analyzer.md): initial files hold at most
MAX_UNITS pages, two calls grow a file by at most two units and a pipe by two bytes,
fds range over NFD numbers per process and mappings over NPAGES pages.
"""

from typing import ClassVar

from scalecheck.model import (
    And,
    Array,
    Bool,
    Chosen,
    Dict,
    Enum,
    If,
    Implies,
    Int,
    Key,
    Map,
    Model,
    Struct,
    Uninterpreted,
    error,
    fault,
    ok,
    operation,
)
from scalecheck.models.rename import Filename, Inum, RenameFS

MAX_UNITS = 3  # length and offsets of initial files, and offsets given as arguments
FILE_CAPACITY = 6  # MAX_UNITS plus what lseek(+2) and a write can add
PIPE_CAPACITY = 4  # two queued bytes plus two writes
NFD = 6
MAX_LINKS = 4  # nothing branches on a link count, so a small bound loses nothing
NPAGES = 4
ZERO = 0  # the Byte value of a zero-filled page
FD_BASE = 10  # model fd k is real fd FD_BASE + k; the driver holds every fd below
MAP_BASE = 1 << 32  # model page k is mapped at MAP_BASE + k * PAGE_SIZE
PAGE_SIZE = 4096

PipeId = Uninterpreted("PipeId", allocatable=True)
Byte = Uninterpreted("Byte", zero=True)
Fd = Key("Fd", NFD)
Page = Key("Page", NPAGES)
Pid = Enum("proc0", "proc1")
Whence = Enum("SEEK_SET", "SEEK_CUR", "SEEK_END")
Offset = Int(0, MAX_UNITS)
SeekOffset = Int(-1, 2)

Inode = Struct(
    nlink=Int(0, MAX_LINKS),
    length=Offset,
    data=Array(Byte, FILE_CAPACITY),
    # a file reads as zeros past its end, so growing it later exposes zeros
    invariant=lambda inode: [
        Implies(i >= inode.length, inode.data[i] == ZERO) for i in range(FILE_CAPACITY)
    ],
)
FileDescriptor = Struct(ispipe=Bool(), pipe=PipeId, writer=Bool(), inum=Inum, off=Offset)
Pipe = Struct(data=Array(Byte, PIPE_CAPACITY), head=Int(0, 0), tail=Int(0, 2))
Mapping = Struct(anon=Bool(), writable=Bool(), inum=Inum, off=Offset, anondata=Byte)


class Process:
    def __init__(self):
        self.fds = Dict(Fd, FileDescriptor).any()
        self.vmas = Dict(Page, Mapping).any()


class Posix(Model):
    TEST_CONSTANTS: ClassVar[dict[str, int]] = {
        "fd_base": FD_BASE,
        "map_base": MAP_BASE,
        "page_size": PAGE_SIZE,
        "unit_size": PAGE_SIZE,
    }

    def __init__(self):
        self.fname_to_inum = Dict(Filename, Inum).any()
        self.inodes = Map(Inum, Inode).any()
        self.pipes = Map(PipeId, Pipe).any()
        self.procs = [Process(), Process()]

    # ------------------------------------------------------------------ names

    @operation(pn=Filename, creat=Bool(), excl=Bool(), trunc=Bool(), anyfd=Bool(), pid=Pid)
    def open(self, pn, creat, excl, trunc, anyfd, pid):
        if pn in self.fname_to_inum:
            if creat and excl:
                return error("EEXIST")
            inum = self.fname_to_inum[pn]
            if trunc:
                self.inodes[inum] = Inode.new(nlink=self.inodes[inum].nlink, length=0, data=ZERO)
        else:
            if not creat:
                return error("ENOENT")
            inum = Inum.fresh()
            self.inodes[inum] = Inode.new(nlink=1, length=0, data=ZERO)
            self.fname_to_inum[pn] = inum
        fds = self.procs[pid].fds
        fd = fds.any_free_key() if anyfd else fds.lowest_free_key()
        fds[fd] = FileDescriptor.new(ispipe=False, pipe=0, writer=False, inum=inum, off=0)
        return ok(fd)

    @operation(old=Filename, new=Filename)
    def link(self, old, new):
        if old not in self.fname_to_inum:
            return error("ENOENT")
        if new in self.fname_to_inum:
            return error("EEXIST")
        inum = self.fname_to_inum[old]
        self.fname_to_inum[new] = inum
        self.inodes[inum].nlink += 1
        return ok()

    @operation(pn=Filename)
    def unlink(self, pn):
        if pn not in self.fname_to_inum:
            return error("ENOENT")
        self.inodes[self.fname_to_inum[pn]].nlink -= 1
        del self.fname_to_inum[pn]
        return ok()

    rename = RenameFS.rename  # the talk's example, exactly

    @operation(pn=Filename)
    def stat(self, pn):
        if pn not in self.fname_to_inum:
            return error("ENOENT")
        inum = self.fname_to_inum[pn]
        return self._stat_inode(inum)

    def _stat_inode(self, inum):
        inode = self.inodes[inum]
        return ok(0, ino=Chosen(inum), nlink=inode.nlink, size=inode.length)

    # ------------------------------------------------------------------ file descriptors

    @operation(fd=Fd, pid=Pid)
    def fstat(self, fd, pid):
        fds = self.procs[pid].fds
        if fd not in fds:
            return error("EBADF")
        if fds[fd].ispipe:
            return ok(0, ino=Chosen(fds[fd].pipe), nlink=1, size=0)
        return self._stat_inode(fds[fd].inum)

    @operation(fd=Fd, off=SeekOffset, whence=Whence, pid=Pid)
    def lseek(self, fd, off, whence, pid):
        fds = self.procs[pid].fds
        if fd not in fds:
            return error("EBADF")
        file = fds[fd]
        if file.ispipe:
            return error("ESPIPE")
        if whence == Whence.SEEK_SET:
            new_off = off
        elif whence == Whence.SEEK_CUR:
            new_off = file.off + off
        else:
            new_off = self.inodes[file.inum].length + off
        if new_off < 0:
            return error("EINVAL")
        file.off = new_off
        return ok(new_off)

    @operation(fd=Fd, pid=Pid)
    def close(self, fd, pid):
        fds = self.procs[pid].fds
        if fd not in fds:
            return error("EBADF")
        del fds[fd]
        return ok()

    @operation(pid=Pid)
    def pipe(self, pid):
        pipe_id = PipeId.fresh()
        self.pipes[pipe_id] = Pipe.new(data=ZERO, head=0, tail=0)
        fds = self.procs[pid].fds
        read_end = fds.lowest_free_key()
        fds[read_end] = FileDescriptor.new(ispipe=True, pipe=pipe_id, writer=False, inum=0, off=0)
        write_end = fds.lowest_free_key()
        fds[write_end] = FileDescriptor.new(ispipe=True, pipe=pipe_id, writer=True, inum=0, off=0)
        return ok(0, fds=[read_end, write_end])

    @operation(fd=Fd, pid=Pid)
    def read(self, fd, pid):
        fds = self.procs[pid].fds
        if fd not in fds:
            return error("EBADF")
        file = fds[fd]
        if file.ispipe:
            if file.writer:
                return error("EBADF")
            pipe = self.pipes[file.pipe]
            if pipe.head == pipe.tail:
                return error("EAGAIN")
            byte = pipe.data[pipe.head]
            pipe.head += 1
            return ok(1, data=byte)
        inode = self.inodes[file.inum]
        if file.off >= inode.length:
            return ok(0)
        byte = inode.data[file.off]
        file.off += 1
        return ok(1, data=byte)

    @operation(fd=Fd, byte=Byte, pid=Pid)
    def write(self, fd, byte, pid):
        fds = self.procs[pid].fds
        if fd not in fds:
            return error("EBADF")
        file = fds[fd]
        if file.ispipe:
            if not file.writer:
                return error("EBADF")
            pipe = self.pipes[file.pipe]
            pipe.data[pipe.tail] = byte
            pipe.tail += 1
            return ok(1)
        self._write_unit(file.inum, file.off, byte)
        file.off += 1
        return ok(1)

    def _write_unit(self, inum, off, byte):
        inode = self.inodes[inum]
        inode.data[off] = byte
        if off + 1 > inode.length:
            inode.length = off + 1

    @operation(fd=Fd, off=Offset, pid=Pid)
    def pread(self, fd, off, pid):
        fds = self.procs[pid].fds
        if fd not in fds:
            return error("EBADF")
        if fds[fd].ispipe:
            return error("ESPIPE")
        inode = self.inodes[fds[fd].inum]
        if off >= inode.length:
            return ok(0)
        return ok(1, data=inode.data[off])

    @operation(fd=Fd, off=Offset, byte=Byte, pid=Pid)
    def pwrite(self, fd, off, byte, pid):
        fds = self.procs[pid].fds
        if fd not in fds:
            return error("EBADF")
        if fds[fd].ispipe:
            return error("ESPIPE")
        self._write_unit(fds[fd].inum, off, byte)
        return ok(1)

    # ------------------------------------------------------------------ virtual memory

    @operation(anon=Bool(), writable=Bool(), fixed=Bool(), va=Page, fd=Fd, off=Offset, pid=Pid)
    def mmap(self, anon, writable, fixed, va, fd, off, pid):
        proc = self.procs[pid]
        if anon:
            inum = 0
        else:
            if fd not in proc.fds:
                return error("EBADF")
            if proc.fds[fd].ispipe:
                # mapping needs read access first: a pipe's write end fails on that
                return error("EACCES" if proc.fds[fd].writer else "ENODEV")
            inum = proc.fds[fd].inum
        addr = va if fixed else proc.vmas.any_free_key()
        proc.vmas[addr] = Mapping.new(
            anon=anon, writable=writable, inum=inum, off=0 if anon else off, anondata=ZERO
        )
        return ok(addr)

    @operation(va=Page, pid=Pid)
    def munmap(self, va, pid):
        vmas = self.procs[pid].vmas
        if va in vmas:
            del vmas[va]
        return ok()

    @operation(va=Page, writable=Bool(), pid=Pid)
    def mprotect(self, va, writable, pid):
        vmas = self.procs[pid].vmas
        if va not in vmas:
            return error("ENOMEM")
        vmas[va].writable = writable
        return ok()

    @operation(va=Page, pid=Pid)
    def memread(self, va, pid):
        vmas = self.procs[pid].vmas
        if va not in vmas:
            return fault("SIGSEGV")
        mapping = vmas[va]
        if mapping.anon:
            return ok(0, data=mapping.anondata)
        inode = self.inodes[mapping.inum]
        if mapping.off >= inode.length:
            return fault("SIGBUS")
        return ok(0, data=inode.data[mapping.off])

    @operation(va=Page, byte=Byte, pid=Pid)
    def memwrite(self, va, byte, pid):
        vmas = self.procs[pid].vmas
        if va not in vmas:
            return fault("SIGSEGV")
        mapping = vmas[va]
        if not mapping.writable:
            return fault("SIGSEGV")
        if mapping.anon:
            mapping.anondata = byte
            return ok()
        inode = self.inodes[mapping.inum]
        if mapping.off >= inode.length:
            return fault("SIGBUS")
        inode.data[mapping.off] = byte
        return ok()

    # ------------------------------------------------------------------ building tests

    def setup_constraints(self, reads):
        """An inode's link count covers every name the test creates for it."""
        names = [r for r in reads if r.map_name == "fname_to_inum"]
        constraints = []
        for inode_read in (r for r in reads if r.map_name == "inodes"):
            nlink = inode_read.leaves[inode_read.leaf_names.index("nlink")]
            linked = [
                If(
                    And(
                        r.present,
                        r.leaves[0] == inode_read.key,
                        *[r.key != earlier.key for earlier in names[:i]],
                    ),
                    1,
                    0,
                )
                for i, r in enumerate(names)
            ]
            constraints.append(nlink >= sum(linked))
        return constraints

    @classmethod
    def describe_test(cls, ops, snapshot, args, results, label):
        """The test file's setup, calls and results (docs/format-tests.md)."""
        inode_index, pipe_index = {}, {}

        def inode(label_):
            return inode_index.setdefault(label_, len(inode_index))

        def pipe(label_):
            return pipe_index.setdefault(label_, len(pipe_index))

        files = {
            f"f{name}": inode(entry[""])
            for name, entry in snapshot.get("fname_to_inum", {}).items()
            if entry["present"]
        }
        procs = []
        for pid in range(2):
            fds, maps = {}, {}
            for fd, entry in snapshot.get(f"procs[{pid}].fds", {}).items():
                if entry["present"] and entry["ispipe"]:
                    fds[str(fd + FD_BASE)] = {
                        "pipe": pipe(entry["pipe"]),
                        "end": "w" if entry["writer"] else "r",
                    }
                elif entry["present"]:
                    fds[str(fd + FD_BASE)] = {"file": inode(entry["inum"]), "off": entry["off"]}
            for page, entry in snapshot.get(f"procs[{pid}].vmas", {}).items():
                if entry["present"] and entry["anon"]:
                    maps[str(_address(page))] = {
                        "anon": True,
                        "writable": entry["writable"],
                        "data": _byte(entry["anondata"]),
                    }
                elif entry["present"]:
                    maps[str(_address(page))] = {
                        "anon": False,
                        "writable": entry["writable"],
                        "file": inode(entry["inum"]),
                        "off": entry["off"],
                    }
            procs.append({"fds": fds, "maps": maps})
        names_per_inode = [list(files.values()).count(index) for index in range(len(inode_index))]
        inodes = []
        for label_, index in sorted(inode_index.items(), key=lambda item: item[1]):
            known = snapshot.get("inodes", {}).get(label_)
            inodes.append(
                {
                    "nlink": known["nlink"],
                    "data": [_byte(known[f"data[{i}]"]) for i in range(known["length"])],
                }
                if known
                else {"nlink": names_per_inode[index], "data": []}
            )
        pipes = []
        for label_, _ in sorted(pipe_index.items(), key=lambda item: item[1]):
            known = snapshot.get("pipes", {}).get(label_)
            pipes.append(
                {"data": [_byte(known[f"data[{i}]"]) for i in range(known["head"], known["tail"])]}
                if known
                else {"data": []}
            )
        setup = {"files": files, "inodes": inodes, "pipes": pipes, "procs": procs}

        calls = []
        for number, (op, call_args) in enumerate(zip(ops, args, strict=True)):
            types = cls.operations()[op].argument_types
            proc = call_args.get("pid", number)
            described = {
                name: _describe_argument(types[name], value)
                for name, value in call_args.items()
                if name != "pid"
            }
            calls.append({"op": op, "proc": proc, "args": described})
        expect = {
            order.lower(): [
                _describe_result(op, result, label)
                for op, result in zip(ops, order_results, strict=True)
            ]
            for order, order_results in results.items()
        }
        return setup, calls, expect


def _address(page):
    return MAP_BASE + page * PAGE_SIZE


def _byte(label):
    """Byte label 0 is the zero page; others are 'A', 'B', ..."""
    return 0 if label == ZERO else 0x40 + label


def _describe_argument(symtype, value):
    if symtype is Filename:
        return f"f{value}"
    if symtype is Fd:
        return value + FD_BASE
    if symtype is Page:
        return _address(value)
    if symtype is Byte:
        return _byte(value)
    return value


def _describe_result(op, result, label):
    if "ret" not in result:
        return result
    described = dict(result)
    if op == "open" and result["ret"] != "*":
        described["ret"] = result["ret"] + FD_BASE
    if op == "pipe":
        described["fds"] = [fd if fd == "*" else fd + FD_BASE for fd in result["fds"]]
    if op == "mmap" and result["ret"] != "*":
        described["ret"] = _address(result["ret"])
    if result.get("data", "*") != "*":
        described["data"] = _byte(label(Byte.kind, result["data"]))
    return described
