"""How the data of a shared line is written as a name, whichever target named it: the
fields of one object, the objects of one line, the bytes a line's access mask covers; and
the naming of a test's conflicts, repeat by repeat (name_data)."""

LINE_BYTES = 64


def mask_bytes(mask: int) -> list[int]:
    return [i for i in range(LINE_BYTES) if mask >> i & 1]


def join_names(names) -> str:
    """Names of the several objects or variables one line holds."""
    return " & ".join(dict.fromkeys(n for n in names if n))


def join_fields(label: str, found: list[str], start: int) -> str:
    """``label.field`` or ``label.outer.{field,field}`` for the field paths found (in
    order), or ``label+0xSTART`` when there are none."""
    found = list(dict.fromkeys(found))
    if not found:
        return f"{label}+{start:#x}" if start else label
    if len(found) == 1:
        return f"{label}.{found[0]}"
    # Fields of one embedded struct: `inode.{i_mtime,i_ctime}`, not the path twice.
    paths = [f.split(".") for f in found]
    common = 0
    while all(len(p) > common + 1 and p[common] == paths[0][common] for p in paths):
        common += 1
    prefix = "".join(part + "." for part in paths[0][:common])
    return f"{label}.{prefix}{{{','.join('.'.join(p[common:]) for p in paths)}}}"


def symbol_key(conflict: dict) -> str:
    """What names a conflict's data when the namer gave no name: the static or per-cpu
    symbol (without the CPU), the allocation site of a library's heap block (without the
    offset, which depends on where the block landed), else nothing (the kind alone)."""
    symbol = conflict["data_symbol"]
    if conflict["kind"] in ("static", "percpu"):
        return symbol.split(" [cpu")[0]
    return symbol.split("+")[0] if conflict["kind"] == "heap" else ""


def name_data(per_repeat: list, namers: list) -> None:
    """Sets each conflict's ``data`` (the name of its bytes) and ``site_data`` (per pair of
    sites, the name of the bytes that pair made conflict; ``symbol_key`` where the namer
    has none). Each repeat's lines are named by that repeat's namer (datanames.DataNamer
    for a boot, heapnames.DataNamer over a library's memory after that repeat; None: no
    names), before the repeats are compared, so that what repeats is the data, not the
    address. Repeats sharing a namer are named in one call."""
    groups: dict[int, tuple] = {}
    for conflicts, namer in zip(per_repeat, namers, strict=True):
        groups.setdefault(id(namer), (namer, []))[1].extend(conflicts)
    for namer, conflicts in groups.values():
        at = [(c["kind"], int(c["line"], 16), int(c["paddr"], 16)) for c in conflicts]
        whole = [(*line, int(c["bytes"], 16)) for line, c in zip(at, conflicts, strict=True)]
        by_site = [
            (*line, mask) for line, c in zip(at, conflicts, strict=True) for mask in c["site_bytes"]
        ]
        names = _named(whole, namer.name_lines if namer else None)
        # What repeats are compared by: names that do not hang on pointers an earlier
        # repeat's freed objects no longer hold.
        stable = _named(by_site, namer.stable_names if namer else None)
        for line, c in zip(at, conflicts, strict=True):
            c["data"] = names.get((*line, int(c["bytes"], 16)), "")
            c["site_data"] = [
                stable.get((*line, mask)) or symbol_key(c) for mask in c["site_bytes"]
            ]


def _named(lines: list, name_lines) -> dict:
    """Each distinct line (kind, vaddr, paddr, mask) -> its name by ``name_lines``."""
    distinct = list(dict.fromkeys(lines))
    if not name_lines or not distinct:
        return {}
    return dict(zip(distinct, name_lines(distinct), strict=True))
