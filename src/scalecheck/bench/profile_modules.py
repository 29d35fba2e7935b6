"""The symbols of the modules a profile's guest loads (9p, virtio: the kernel facts' boot
loaded none), from the guest's /proc/kallsyms, saved after the window closed: the code
that wrote a line (`p9_client_rpc [9pnet]`) and a module's static data."""

import bisect
from pathlib import Path

from scalecheck.run.linux.kernel_symbols import DATA_TYPES, TEXT_TYPES

KALLSYMS_FILE = "modules.kallsyms"
# How far past a data symbol's address a line is still named by it (kallsyms gives no sizes).
DATA_REACH = 4096


class ModuleSymbols:
    def __init__(self, path: Path):
        code, data = [], []
        try:
            text = path.read_text(errors="replace")
        except OSError:
            text = ""
        for line in text.splitlines():
            parts = line.split()
            if len(parts) != 4:
                continue
            address, kind, name, module = int(parts[0], 16), parts[1], parts[2], parts[3]
            if kind in TEXT_TYPES:
                code.append((address, f"{name} {module}"))
            elif kind in DATA_TYPES:
                data.append((address, f"{name} {module}"))
        self.code, self.data = sorted(code), sorted(data)

    @staticmethod
    def _below(table: list, address: int, reach: int) -> str | None:
        i = bisect.bisect_right(table, (address, "\uffff")) - 1
        return table[i][1] if i >= 0 and address - table[i][0] < reach else None

    def function(self, pc: int) -> str | None:
        return self._below(self.code, pc, 1 << 20)

    def variable(self, vaddr: int) -> str | None:
        return self._below(self.data, vaddr, DATA_REACH)
