"""The struct types a kernel's BTF does not say, as data shipped beside this module:
slab_types.txt (a slab cache's objects) and static_types.txt (static variables)."""

from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True)
class TypeTables:
    """The struct types the kernel's BTF does not say: of a slab cache's objects
    (slab_types.txt) and of static variables (static_types.txt: vmlinux BTF describes only
    per-cpu variables). Data, not code: add lines for your own kernel as needed."""

    slabs: dict[str, str]
    statics: dict[str, str]

    @classmethod
    def load(cls) -> "TypeTables":
        return cls(load_type_table("slab_types.txt"), load_type_table("static_types.txt"))


def load_type_table(file_name: str, text: str | None = None) -> dict[str, str]:
    """A `name struct` table (one pair per line, # comments) shipped beside this module."""
    if text is None:
        text = resources.files("scalecheck.run.linux").joinpath(file_name).read_text()
    table = {}
    for line in text.splitlines():
        words = line.split("#")[0].split()
        if len(words) == 2:
            table[words[0]] = words[1]
        elif words:
            raise ValueError(f"{file_name}: expected `name struct`, got {line!r}")
    return table
