"""The lines a whole program's CPUs moved between them (scalecheck profile), from the plugin's
profile regions: one per vCPU and context (the region's tag: user code, a page fault, other
kernel code, or the system call in progress; tracer/plugin/src/lib.rs), named, with the
system calls that met on them and the rule's verdict.

A line is contended when two or more vCPUs touched it, one of them writing, and it moved
(a transfer or an invalidation). Two contexts on different vCPUs met on a line when both
touched it and one of them wrote it; their pair is weighed by the transfers both made.
"""

from collections import Counter
from itertools import combinations

from scalecheck.bench.profile_user import HARNESS, is_specific
from scalecheck.bench.rule_verdicts import COMMUTATIVE, Rule
from scalecheck.bench.sharing import RECORDER_FILE
from scalecheck.run.linux.kernel_symbols import USER_END

# The plugin's profile contexts (tracer/plugin/src/lib.rs, CONTEXT_*).
CONTEXT_USER, CONTEXT_FAULT, CONTEXT_KERNEL, CONTEXT_SYSCALL = 0, 1, 2, 16
FIXED_CONTEXTS = {
    CONTEXT_USER: "user code",
    CONTEXT_FAULT: "page fault",
    CONTEXT_KERNEL: "kernel (no call)",
}
SYSCALL_PREFIX = "__x64_sys_"
PAIRS_KEPT = 5


def syscall_entries(address_of: dict[str, int]) -> list[tuple[str, int]]:
    """The system calls' entry points (their __x64_sys_ functions), in name order: the
    k-th is context CONTEXT_SYSCALL + k."""
    return sorted(
        (name.removeprefix(SYSCALL_PREFIX), address)
        for name, address in address_of.items()
        if name.startswith(SYSCALL_PREFIX)
    )


def context_name(context: int, syscalls: list[str]) -> str:
    if context >= CONTEXT_SYSCALL and context - CONTEXT_SYSCALL < len(syscalls):
        return syscalls[context - CONTEXT_SYSCALL]
    return FIXED_CONTEXTS.get(context, f"context {context}")


def contended_lines(regions: list) -> dict[int, list]:
    """The contended lines by physical address, each with its touches (vcpu, context, line)."""
    touched: dict[int, list] = {}
    for region in regions:
        for paddr, line in region.lines.items():
            touched.setdefault(paddr, []).append((region.vcpu, region.tag, line))
    return {
        paddr: touches
        for paddr, touches in touched.items()
        if len({vcpu for vcpu, _, _ in touches}) >= 2
        and any(line.written for _, _, line in touches)
        and any(line.transfers or line.invalidations for _, _, line in touches)
    }


def call_pairs(touches: list, syscalls: list[str]) -> Counter:
    """The pairs of contexts that met on one line, each weighed by both sides' transfers."""
    pairs: Counter = Counter()
    for (vcpu_a, ctx_a, a), (vcpu_b, ctx_b, b) in combinations(touches, 2):
        if vcpu_a == vcpu_b or not (a.written or b.written):
            continue
        key = tuple(sorted((context_name(ctx_a, syscalls), context_name(ctx_b, syscalls))))
        pairs[key] += a.transfers + b.transfers
    return pairs


def representative(touches: list):
    """The touch whose virtual address names the line: a user one when any was (the
    kernel may reach a user page through its direct map)."""
    return min(touches, key=lambda touch: touch[2].vaddr)[2]


def line_masks(touches: list) -> int:
    mask = 0
    for _, _, line in touches:
        mask |= line.read_mask | line.write_mask
    return mask


def is_kernel(touches: list) -> bool:
    return representative(touches).vaddr >= USER_END


def line_rows(contended: dict, names: dict, syscalls: list[str], rule: Rule | None) -> list:
    """The lines grouped by name, most transfers first: lines, transfers, invalidations,
    the call pairs that met on them (most transfers first) and each pair's verdict."""
    rows: dict[str, dict] = {}
    for paddr, touches in contended.items():
        name = names[paddr]
        row = rows.setdefault(
            name,
            {"name": name, "lines": 0, "transfers": 0, "invalidations": 0, "_pairs": Counter()},
        )
        row["lines"] += 1
        row["transfers"] += sum(line.transfers for _, _, line in touches)
        row["invalidations"] += sum(line.invalidations for _, _, line in touches)
        row["_pairs"].update(call_pairs(touches, syscalls))
    for row in rows.values():
        judge_pairs(row, row.pop("_pairs"), rule)
    return sorted(rows.values(), key=lambda r: (-r["transfers"], -r["invalidations"], r["name"]))


def judge_pairs(row: dict, counted: Counter, rule: Rule | None) -> None:
    """The row's busiest pairs (PAIRS_KEPT, and the busiest pair of two calls the model
    has, if not among them), each with its verdict; the row's verdict is that pair's (the
    busiest pair's when no pair is in the model)."""
    ranked = counted.most_common()
    judged = next((pair for pair in ranked if rule and rule.has_calls(*pair[0])), None)
    kept = ranked[:PAIRS_KEPT] + ([judged] if judged and judged not in ranked[:PAIRS_KEPT] else [])
    row["pairs"] = [
        {"calls": list(calls), "transfers": moved, "verdict": verdict(rule, row["name"], calls)}
        for calls, moved in kept
    ]
    chosen = judged or (ranked[0] if ranked else None)
    row["verdict"] = verdict(rule, row["name"], chosen[0]) if chosen else "no pair of calls"
    row["judged_pair"] = list(chosen[0]) if chosen else None


def verdict(rule: Rule | None, name: str, calls: tuple) -> str:
    if not name.startswith("kernel: "):
        return "user memory: the program's own sharing, outside the kernel's interface"
    if rule is None:
        return "no analysis given"
    return rule.verdict(calls[0], calls[1], name)


def call_rows(contended: dict, syscalls: list[str]) -> list[dict]:
    """Each context's transfers and contended lines, most transfers first."""
    moved: Counter = Counter()
    lines: Counter = Counter()
    for touches in contended.values():
        for context in {ctx for _, ctx, _ in touches}:
            lines[context_name(context, syscalls)] += 1
        for _, context, line in touches:
            moved[context_name(context, syscalls)] += line.transfers
    return [
        {"call": call, "transfers": moved[call], "lines": lines[call]}
        for call in sorted(lines, key=lambda c: (-moved[c], -lines[c], c))
    ]


def pair_lines(contended: dict, syscalls: list[str]) -> Counter:
    """How many contended lines each pair of contexts met on (the heat map's cells)."""
    found: Counter = Counter()
    for touches in contended.values():
        found.update(call_pairs(touches, syscalls).keys())
    return found


def removable_share(rows: list[dict]) -> dict:
    """Of the contended kernel lines (and their transfers), the share whose verdict says
    the kernel could avoid them."""
    kernel = [row for row in rows if row["name"].startswith("kernel: ")]
    avoidable = [row for row in kernel if row["verdict"].startswith(COMMUTATIVE)]
    lines, moved = (sum(row[key] for row in kernel) for key in ("lines", "transfers"))
    return {
        "kernel_lines": lines,
        "avoidable_lines": sum(row["lines"] for row in avoidable),
        "kernel_transfers": moved,
        "avoidable_transfers": sum(row["transfers"] for row in avoidable),
    }


def is_recorders_own(name: str) -> bool:
    """A line of the allocation-site recorder's own memory: its buffers (a mapping per
    thread, named by its site in the recorder) and its static data (`alloc_sites.so:
    page_owners_buffer`, the stream it writes its pages with): the tool's cost, moved when
    a thread moves, not the program's data."""
    data = name.removeprefix("kernel: ").removeprefix("user: ").removeprefix("page of ")
    return name.endswith(f"({RECORDER_FILE})") or data.startswith(RECORDER_FILE)


def named_share(rows: list[dict]) -> dict:
    """Of the program's transfers, those in lines named beyond the kind of memory
    (profile_user.is_specific: not a bare page, heap or anonymous memory). The recorder's
    own buffers and the guest harness's memory are counted apart (`recorder_*`,
    `harness_*`), in neither: naming them says nothing of the program, and their weight
    is the tool's (how often the guest moved a thread; the run script, the page map)."""
    recorder = [row for row in rows if is_recorders_own(row["name"])]
    harness = [
        row for row in rows if row["name"].endswith(HARNESS) and not is_recorders_own(row["name"])
    ]
    program = [
        row
        for row in rows
        if not is_recorders_own(row["name"]) and not row["name"].endswith(HARNESS)
    ]
    named = [row for row in program if is_specific(row["name"])]
    return {
        "transfers": sum(row["transfers"] for row in program),
        "named_transfers": sum(row["transfers"] for row in named),
        "lines": sum(row["lines"] for row in program),
        "named_lines": sum(row["lines"] for row in named),
        "recorder_transfers": sum(row["transfers"] for row in recorder),
        "recorder_lines": sum(row["lines"] for row in recorder),
        "harness_transfers": sum(row["transfers"] for row in harness),
        "harness_lines": sum(row["lines"] for row in harness),
    }


def write_heatmap(pairs: Counter, path, title: str, top: int = 12) -> None:
    """The pairs of calls by the lines they met on, as a triangle of cells."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # here: every other command starts faster without it

    weight: Counter = Counter()
    for (a, b), count in pairs.items():
        weight[a] += count
        weight[b] += count
    calls = [call for call, _ in weight.most_common(top)]
    index = {call: i for i, call in enumerate(calls)}
    cells = [[0] * len(calls) for _ in calls]
    for (a, b), count in pairs.items():
        if a in index and b in index:
            i, j = sorted((index[a], index[b]), reverse=True)
            cells[i][j] = count
    figure, axes = plt.subplots(figsize=(1.0 + 0.6 * len(calls), 0.8 + 0.6 * len(calls)))
    image = axes.imshow(cells, cmap="Reds")
    axes.set_xticks(range(len(calls)), calls, rotation=60, ha="right", fontsize="small")
    axes.set_yticks(range(len(calls)), calls, fontsize="small")
    for i, row in enumerate(cells):
        for j, count in enumerate(row):
            if count:
                axes.text(j, i, str(count), ha="center", va="center", fontsize="x-small")
    figure.colorbar(image, label="contended lines both met on")
    axes.set_title(title, fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
