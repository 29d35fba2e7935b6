"""POSIX file system and virtual memory: the 18 operations of the commutativity paper,
plus the commutative variants the sv6 work pairs with POSIX calls: datagram sockets that
are ordered or unordered, fork and exec beside posix_spawn, and fstatx beside fstat.

One flat root directory; two processes, each with its own fd table and mappings. File
data is counted in units of one page; a pipe holds bytes. Bounds (why they lose nothing
for pairs of calls is argued in docs/analyzer.md): initial files hold at most
MAX_UNITS pages, two calls grow a file by at most two units and a pipe by two bytes,
fds range over NFD numbers per process and mappings over NPAGES pages, a datagram
socket queues at most SOCK_CAPACITY messages (a full queue gives EAGAIN). Processes
that fork and posix_spawn create are kept only as state (their fd table and address
space); no operation runs in them.
"""

from scalecheck.interfaces.rename import Filename, Inum, RenameFS
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
    Not,
    Or,
    Struct,
    Uninterpreted,
    Variant,
    error,
    fault,
    ok,
    operation,
)

MAX_UNITS = 3  # length and offsets of initial files, and offsets given as arguments
FILE_CAPACITY = 6  # MAX_UNITS plus what lseek(+2) and a write can add
PIPE_CAPACITY = 4  # two queued bytes plus two writes
NFD = 6
MAX_LINKS = 4  # nothing branches on a link count, so a small bound loses nothing
NPAGES = 4
SOCK_CAPACITY = 2  # two receives consume at most two messages; full is a state of its own
ZERO = 0  # the Byte value of a zero-filled page

PipeId = Uninterpreted("PipeId", allocatable=True)
SockId = Uninterpreted("SockId")
ProcId = Uninterpreted("ProcId", allocatable=True)  # a child's pid: any unused one
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
FileDescriptor = Struct(
    ispipe=Bool(), pipe=PipeId, writer=Bool(), inum=Inum, off=Offset, cloexec=Bool()
)
Pipe = Struct(data=Array(Byte, PIPE_CAPACITY), head=Int(0, 0), tail=Int(0, 2))
Mapping = Struct(anon=Bool(), writable=Bool(), inum=Inum, off=Offset, anondata=Byte)
# A datagram socket's queue as slots: an ordered socket keeps its messages in slots
# 0, 1, ... oldest first; an unordered one in any slots, so that which message a receive
# takes (or which slot a send fills) is the implementation's choice of a slot, the same
# in either order, and two receives of different messages leave equal states.
Socket = Struct(
    unordered=Bool(),
    queued=Array(Bool(), SOCK_CAPACITY),
    data=Array(Byte, SOCK_CAPACITY),
    invariant=lambda sock: [
        *[Implies(Not(sock.queued[i]), sock.data[i] == ZERO) for i in range(SOCK_CAPACITY)],
        *[
            Implies(And(Not(sock.unordered), sock.queued[i + 1]), sock.queued[i])
            for i in range(SOCK_CAPACITY - 1)
        ],
    ],
)


class Process:
    def __init__(self, fds=None, vmas=None):
        self.fds = Dict(Fd, FileDescriptor).any() if fds is None else fds
        self.vmas = Dict(Page, Mapping).any() if vmas is None else vmas


def _sockets_unordered(inputs, unordered):
    return And(
        [
            inputs.initial("sockets", "unordered", inputs.arg(call, "sock")) == unordered
            for call in "AB"
        ]
    )


class Posix(Model):
    def __init__(self):
        self.fname_to_inum = Dict(Filename, Inum).any()
        self.inodes = Map(Inum, Inode).any()
        self.pipes = Map(PipeId, Pipe).any()
        self.procs = [Process(), Process()]
        self.sockets = Map(SockId, Socket).any()
        # Processes created by fork and posix_spawn, by their (implementation-chosen) pid.
        self.children = {}

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
        fds[fd] = FileDescriptor.new(
            ispipe=False, pipe=0, writer=False, inum=inum, off=0, cloexec=False
        )
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

    def _stat_inode(self, inum, with_nlink=True):
        inode = self.inodes[inum]
        if not with_nlink:
            return ok(0, ino=Chosen(inum), size=inode.length)
        return ok(0, ino=Chosen(inum), nlink=inode.nlink, size=inode.length)

    # ------------------------------------------------------------------ file descriptors

    @operation(fd=Fd, pid=Pid)
    def fstat(self, fd, pid):
        return self._fstat(fd, pid, with_nlink=True)

    @operation(fd=Fd, nlink=Bool(), pid=Pid)
    def fstatx(self, fd, nlink, pid):
        """fstat returning only the fields the mask asks for; ``nlink``: whether the mask
        holds the link count (the inode number and size are always asked for)."""
        if nlink:
            return self._fstat(fd, pid, with_nlink=True)
        return self._fstat(fd, pid, with_nlink=False)

    def _fstat(self, fd, pid, with_nlink):
        fds = self.procs[pid].fds
        if fd not in fds:
            return error("EBADF")
        if fds[fd].ispipe:
            if not with_nlink:
                return ok(0, ino=Chosen(fds[fd].pipe), size=0)
            return ok(0, ino=Chosen(fds[fd].pipe), nlink=1, size=0)
        return self._stat_inode(fds[fd].inum, with_nlink)

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
        fds[read_end] = FileDescriptor.new(
            ispipe=True, pipe=pipe_id, writer=False, inum=0, off=0, cloexec=False
        )
        write_end = fds.lowest_free_key()
        fds[write_end] = FileDescriptor.new(
            ispipe=True, pipe=pipe_id, writer=True, inum=0, off=0, cloexec=False
        )
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

    # ------------------------------------------------------------------ datagram sockets

    @operation(sock=SockId, byte=Byte)
    def sendto(self, sock, byte):
        """Queue a one-byte message (non-blocking: a full queue gives EAGAIN)."""
        queue = self.sockets[sock]
        if And([queue.queued[i] for i in range(SOCK_CAPACITY)]):
            return error("EAGAIN")
        if queue.unordered:
            slot = queue.queued.any_index(lambda queued: Not(queued))
        else:
            slot = SOCK_CAPACITY - 1  # behind the last queued message
            for i in reversed(range(SOCK_CAPACITY - 1)):
                slot = If(Not(queue.queued[i]), i, slot)
        queue.data[slot] = byte
        queue.queued[slot] = True
        return ok(1)

    @operation(sock=SockId)
    def recvfrom(self, sock):
        """Take the oldest message (ordered) or any queued one (unordered); an empty queue
        gives EAGAIN (non-blocking)."""
        queue = self.sockets[sock]
        if not Or([queue.queued[i] for i in range(SOCK_CAPACITY)]):
            return error("EAGAIN")
        if queue.unordered:
            slot = queue.queued.any_index(lambda queued: queued)
            byte = queue.data[slot]
            queue.data[slot] = ZERO
            queue.queued[slot] = False
            return ok(1, data=byte)
        byte = queue.data[0]
        for i in range(SOCK_CAPACITY - 1):
            queue.data[i] = queue.data[i + 1]
            queue.queued[i] = queue.queued[i + 1]
        queue.data[SOCK_CAPACITY - 1] = ZERO
        queue.queued[SOCK_CAPACITY - 1] = False
        return ok(1, data=byte)

    # ------------------------------------------------------------------ processes

    @operation(pid=Pid)
    def fork(self, pid):
        """A child with a copy of the caller's fd table and address space. (The copy keeps
        each fd's offset as it was at the fork: the model has no open file descriptions
        that parent and child would share.)"""
        parent = self.procs[pid]
        child = ProcId.fresh()
        self.children[str(child)] = Process(parent.fds.copy(), parent.vmas.copy())
        return ok(Chosen(child))

    @operation(pid=Pid)
    def exec(self, pid):
        """Replace the caller's program: its mappings go, close-on-exec fds are closed."""
        proc = self.procs[pid]
        proc.fds.discard_where(lambda file: file.cloexec)
        proc.vmas.discard_where(lambda mapping: True)
        return ok()

    @operation(fd=Fd, pid=Pid)
    def posix_spawn(self, fd, pid):
        """A child running a new program whose fd table holds only what the file action
        names: the caller's ``fd`` as the child's fd 0 (a dup2 action); nothing else of
        the caller is copied."""
        fds = self.procs[pid].fds
        if fd not in fds:
            return error("EBADF")
        given = fds[fd]
        child_fds = Dict(Fd, FileDescriptor).empty("spawned.fds")
        child_fds[0] = FileDescriptor.new(
            ispipe=given.ispipe,
            pipe=given.pipe,
            writer=given.writer,
            inum=given.inum,
            off=given.off,
            cloexec=False,
        )
        child = ProcId.fresh()
        self.children[str(child)] = Process(child_fds, Dict(Page, Mapping).empty("spawned.vmas"))
        return ok(Chosen(child))

    # ------------------------------------------------------------------ the variants, compared

    variants = (
        Variant(
            "recvfrom || recvfrom: an ordered socket vs an unordered one",
            ("recvfrom", "recvfrom"),
            ("recvfrom", "recvfrom"),
            posix_when=lambda inputs: _sockets_unordered(inputs, False),
            posix_when_text="both sockets ordered",
            variant_when=lambda inputs: _sockets_unordered(inputs, True),
            variant_when_text="both sockets unordered",
        ),
        Variant("fork || open vs posix_spawn || open", ("fork", "open"), ("posix_spawn", "open")),
        Variant("fork || mmap vs posix_spawn || mmap", ("fork", "mmap"), ("posix_spawn", "mmap")),
        Variant(
            "fstat || link vs fstatx || link without the link count",
            ("fstat", "link"),
            ("fstatx", "link"),
            variant_when=lambda inputs: Not(inputs.arg("A", "nlink")),
            variant_when_text="A's mask leaves out the link count",
        ),
    )

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
