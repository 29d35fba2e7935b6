"""The talk's example: rename in one flat directory of hard-linked files."""

from scalecheck.model import Dict, Int, Map, Model, Struct, Uninterpreted, error, ok, operation

Filename = Uninterpreted("Filename")
Inum = Uninterpreted("Inum", allocatable=True)
Inode = Struct(nlink=Int(lo=1))


class RenameFS(Model):
    def __init__(self):
        self.fname_to_inum = Dict(Filename, Inum).any()
        self.inodes = Map(Inum, Inode).any()

    @operation(src=Filename, dst=Filename)
    def rename(self, src, dst):
        if src not in self.fname_to_inum:
            return error("ENOENT")
        if src == dst:
            return ok()
        if dst in self.fname_to_inum:
            self.inodes[self.fname_to_inum[dst]].nlink -= 1
        self.fname_to_inum[dst] = self.fname_to_inum[src]
        del self.fname_to_inum[src]
        return ok()
