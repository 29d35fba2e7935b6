"""How the data of a shared line is written as a name, whichever target named it: the
fields of one object, the objects of one line, the bytes a line's access mask covers."""

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
