"""Benchmark catalogs: the TOML files that tell the driver which benchmarks exist.

The format is fixed by docs/format-bench.md; each family ships one file in
``catalog/`` (kernel.toml, sched.toml, ldu.toml, ...).
"""

import tomllib
from dataclasses import dataclass
from pathlib import Path

from scalecheck.common.errors import UserError

DEFAULT_CATALOG_DIR = Path(__file__).resolve().parent / "catalog"


@dataclass(frozen=True)
class Benchmark:
    name: str
    description: str
    seed: str
    build: str
    command: str
    modes: tuple[str, ...]
    runtimes: tuple[str, ...]
    metric: str
    min_cores: int
    catalog_file: str
    # An extra sum whose share of the operations sets what the workers share (which
    # share a run falls in is the benchmark's own timing): `scalecheck sharing` gives it.
    regime: str = ""

    def series(self) -> list[tuple[str, str]]:
        """Every (mode, runtime) pair this benchmark is run with; "" where the axis is absent."""
        return [
            (mode, runtime) for mode in self.modes or ("",) for runtime in self.runtimes or ("",)
        ]


def _string(entry: dict, key: str, where: str, default: str | None = None) -> str:
    value = entry.get(key, default)
    if not isinstance(value, str) or (default is None and not value.strip()):
        raise UserError(f"{where}: '{key}' must be a non-empty string")
    return value


def _string_list(entry: dict, key: str, where: str) -> tuple[str, ...]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise UserError(f"{where}: '{key}' must be a list of non-empty strings")
    if len(set(value)) != len(value):
        raise UserError(f"{where}: '{key}' lists a value twice")
    return tuple(value)


def _parse_entry(entry: object, where: str, catalog_file: str) -> Benchmark:
    if not isinstance(entry, dict):
        raise UserError(f"{where}: each [[benchmark]] must be a table")
    name = _string(entry, "name", where)
    where = f"{where} ({name})"
    min_cores = entry.get("min_cores", 1)
    if not isinstance(min_cores, int) or isinstance(min_cores, bool) or min_cores < 1:
        raise UserError(f"{where}: 'min_cores' must be a whole number >= 1")
    return Benchmark(
        name=name,
        description=_string(entry, "description", where, ""),
        seed=_string(entry, "seed", where, ""),
        build=_string(entry, "build", where, ""),
        command=_string(entry, "command", where),
        modes=_string_list(entry, "modes", where),
        runtimes=_string_list(entry, "runtimes", where),
        metric=_string(entry, "metric", where, "ops/s"),
        min_cores=min_cores,
        catalog_file=catalog_file,
        regime=_string(entry, "regime", where, ""),
    )


def load_catalog(directories: list[Path] | None = None) -> dict[str, Benchmark]:
    """All benchmarks of every *.toml in the directories, by name (names are unique)."""
    benchmarks: dict[str, Benchmark] = {}
    for directory in directories or [DEFAULT_CATALOG_DIR]:
        if not directory.is_dir():
            raise UserError(f"catalog directory {directory} does not exist")
        for path in sorted(directory.glob("*.toml")):
            try:
                document = tomllib.loads(path.read_text())
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
                raise UserError(f"catalog {path}: not valid TOML: {err}") from None
            entries = document.get("benchmark", [])
            if not isinstance(entries, list):
                raise UserError(
                    f"catalog {path}: 'benchmark' must be an array of tables ([[benchmark]])"
                )
            for index, entry in enumerate(entries):
                benchmark = _parse_entry(entry, f"catalog {path.name} entry {index + 1}", path.name)
                if benchmark.name in benchmarks:
                    other = benchmarks[benchmark.name].catalog_file
                    raise UserError(
                        f"benchmark {benchmark.name} is defined in both {other} and {path.name}"
                    )
                benchmarks[benchmark.name] = benchmark
    return benchmarks


def select(catalog: dict[str, Benchmark], names: list[str], everything: bool) -> list[Benchmark]:
    """The benchmarks named (in catalog order when --all), or a one-line error."""
    if everything and names:
        raise UserError("give benchmark names or --all, not both")
    if everything:
        if not catalog:
            raise UserError("the catalog has no benchmarks")
        return list(catalog.values())
    if not names:
        raise UserError("name at least one benchmark or pass --all (see `scalecheck bench list`)")
    unknown = [name for name in names if name not in catalog]
    if unknown:
        raise UserError(
            f"unknown benchmark {', '.join(unknown)}; known: {', '.join(catalog) or 'none'}"
        )
    return [catalog[name] for name in dict.fromkeys(names)]
