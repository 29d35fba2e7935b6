"""The options of a run as one typed value, each default declared here only: built at the
command line's edge (``scalecheck run``, ``scalecheck pipeline``: run_cli.py) or by a
caller of ``run_tests`` from keywords, then handed to the loop and the target."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from scalecheck.run.counting import Filters
from scalecheck.run.target import TraceSettings

# Linux: tests per boot, at most. A boot costs about 9 s of QEMU's CPU (2026-12-07), as
# much as 300 tests' guest work, while the disk a boot asks for grows by the trace's bytes
# per test and repeat (750 MiB for 4000 tests and 2 repeats); a crash or hang reboots
# anyway. With 4000 the main job's 5,253 tests take one boot per VM at -j 2.
BATCH = 4000


@dataclass(frozen=True)
class RunOptions:
    """What `scalecheck run` takes besides its directory and --ops (run_cli.py says what
    each means). The Linux ones are ignored by a library target."""

    target: str = "linux"  # 'linux', 'lib:PATH' or a shipped library's name
    kernel: str | Path | None = None  # None: the newest /boot/vmlinuz-*
    vmlinux: Path | None = None
    kernel_args: str = ""
    jobs: int | None = None  # None: one per host core
    repeats: int = 2
    limit: int | None = None
    fs: str = "tmpfs"
    granularity: str = "stable"
    count_unrepeated: bool = False
    keep_tick_work: bool = False
    lsm: str = "minor"
    timeout: float = 5.0  # seconds one call may take
    batch: int = BATCH
    cluster: str | None = None
    retry_unfinished: bool = False

    @classmethod
    def from_args(cls, args) -> RunOptions:
        """The options an argparse namespace holds (one made by run_cli.add_run_options)."""
        return cls(**{field.name: getattr(args, field.name) for field in fields(cls)})

    def trace_settings(self) -> TraceSettings:
        return TraceSettings(
            repeats=self.repeats,
            granularity=self.granularity,
            filters=Filters(
                count_unrepeated=self.count_unrepeated, keep_tick_work=self.keep_tick_work
            ),
            timeout=self.timeout,
        )


DEFAULTS = RunOptions()
