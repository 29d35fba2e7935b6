"""``--target linux``: the tests of the POSIX model on a real Linux kernel under QEMU.

Each VM boots with a batch of tests and runs them all (vm_worker.py); a guest panic, a hung
test or a killed QEMU costs one test (reported as crash/timeout) and a reboot with the rest.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from scalecheck.common.errors import UserError
from scalecheck.run.linux import (
    facts,
    guest_render,
    kernel_layout,
    kernels,
    snapshot,
    type_tables,
    vm,
)
from scalecheck.run.linux.guest_build import ensure_built
from scalecheck.run.linux.kernel_symbols import KernelSymbols
from scalecheck.run.linux.vm_worker import RunConfig, VmSettings, VmWorker
from scalecheck.run.options import RunOptions
from scalecheck.run.target import TargetMismatch, batch_size, run_workers


@dataclass(frozen=True)
class KernelTarget:
    """The Linux kernel of ``settings`` in VMs (target.py), of the release the submitting
    machine found."""

    settings: VmSettings
    release: str

    @property
    def batch(self) -> int:
        return self.settings.batch

    def prepare(self, trace_dir: Path, log) -> "RunConfig":
        config = prepare_vms(self.settings, trace_dir, log)
        if config.release != self.release:
            raise TargetMismatch(
                f"kernel {config.release}, the submitting machine's is {self.release}"
            )
        return config

    def trace(self, prepared: "RunConfig", tests: list, jobs: int, on_record) -> int:
        prepared.on_record = on_record
        return trace_here(prepared, tests, jobs)


def prepare_vms(
    settings: VmSettings, trace_dir: Path, log=print, on_vm_start=None, boots: bool = True
) -> RunConfig:
    """Builds (or finds built) the plugin and the driver, the kernel's facts (probed once
    per kernel image and cached) and the guest's snapshot the VMs start from (made once
    per kernel, arguments and build, and cached; not when no VM is to start, `boots`
    False): everything VMs of these settings need here."""
    built = ensure_built()
    facts_dir = facts.kernel_facts(settings.kernel, settings.kernel_args, built, log)
    return RunConfig(
        settings=settings,
        built=built,
        snapshot=snapshot.ensure_snapshot(
            facts_dir, settings.kernel, settings.kernel_args, built["base_image"], log
        )
        if boots
        else None,
        entries=facts_dir / "entries.txt",
        symbols=KernelSymbols.load(facts_dir, settings.vmlinux),
        types=facts.kernel_types(facts_dir),
        type_tables=type_tables.TypeTables.load(),
        release=json.loads((facts_dir / "facts.json").read_text())["release"],
        trace_dir=trace_dir,
        on_vm_start=on_vm_start,
    )


def trace_here(config: RunConfig, pending: list, jobs: int) -> int:
    """Runs ``pending`` [(index, Test)] in ``jobs`` VMs at once on this machine, each record
    going to ``config.on_record``; returns the number of boots."""
    size = batch_size(len(pending), jobs, config.settings.batch)
    workers = [VmWorker(config, pending[k::jobs], k, size) for k in range(jobs)]
    run_workers(workers, config.stop)
    return sum(w.boots for w in workers)


@dataclass
class LinuxRun:
    """``--target linux``: the tests of the POSIX model on a Linux kernel under QEMU."""

    starts = "boots"

    settings: VmSettings
    lsm: str
    on_vm_start: Callable | None = None  # called with each boot's session (tests kill VMs)

    @classmethod
    def open(
        cls, tests_header: dict, options: RunOptions, on_vm_start: Callable | None = None
    ) -> "LinuxRun":
        if tests_header.get("model", "posix") != "posix":
            raise UserError(
                f"tests of model {tests_header.get('model')!r} have no Linux mapping; "
                "`scalecheck run --target linux` runs posix-model tests"
            )
        kernel, vmlinux = options.kernel, options.vmlinux
        image = vm.check_kernel(kernels.resolve(kernel)) if kernel else vm.default_kernel()
        if vmlinux and not Path(vmlinux).is_file():
            raise UserError(f"--vmlinux {vmlinux} does not exist")
        vm.qemu_binary()
        lsm = options.lsm
        settings = VmSettings(
            trace=options.trace_settings(),
            kernel=image,
            kernel_args=" ".join(part for part in (vm.LSM_ARGS[lsm], options.kernel_args) if part),
            vmlinux=Path(vmlinux) if vmlinux else None,
            fs=options.fs,
            batch=options.batch,
        )
        return cls(settings, lsm, on_vm_start)

    def known_ops(self):
        return guest_render.OP_ARGS

    def start(self, trace_dir: Path, log) -> tuple[KernelTarget, RunConfig, dict]:
        config = prepare_vms(self.settings, trace_dir, log, self.on_vm_start)
        header = {
            "target": "linux",
            "kernel": self._kernel(config.release),
            "naming": kernel_layout.naming_support(config.types, config.symbols),
            "lsm": self.lsm,
            "fs": self.settings.fs,
        }
        return KernelTarget(self.settings, config.release), config, header

    def summary(self, prepared: RunConfig) -> dict:
        return {
            # Host time spent naming conflicting data (datanames.py), over this machine's VMs.
            "naming": {
                "lines": prepared.named_lines,
                "named": prepared.lines_with_names,
                "seconds": round(prepared.naming_seconds, 3),
                "support": kernel_layout.naming_support(prepared.types, prepared.symbols),
            },
            "kernel": self._kernel(prepared.release),
        }

    def _kernel(self, release: str) -> dict:
        return {
            "release": release,
            "image": str(self.settings.kernel),
            "args": vm.kernel_command_line(self.settings.kernel_args),
        }
