"""``scalecheck kernel``: fetch other kernels of the distribution and list them, as inputs
to ``run --kernel`` (run/linux/kernels.py does the work)."""

import json
import sys

from scalecheck.run.linux import kernels


def register(subparsers):
    p = subparsers.add_parser(
        "kernel",
        help="fetch other kernels of the distribution and list them",
        description="Kernels to trace besides the installed one: Debian's packages, "
        "downloaded with apt-get download and unpacked into ~/.cache/scalecheck/kernels/ "
        "(not installed, /boot untouched). `run --kernel 6.12` then traces the one fetched.",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    f = actions.add_parser(
        "fetch",
        help="download and unpack a kernel series' newest package",
        description="Download the newest linux-image-SERIES.*-amd64-unsigned package "
        "(or -rt-amd64 for SERIES-rt) with apt-get download and unpack it with dpkg -x.",
    )
    f.add_argument("name", help="a kernel series: 6.12, 6.1, 6.12-rt (PREEMPT_RT)")
    f.set_defaults(func=_fetch_command)
    li = actions.add_parser(
        "list",
        help="list the fetched kernels",
        description="List the kernels `kernel fetch` unpacked, newest first.",
    )
    li.add_argument("--json", action="store_true", help="print JSON instead of a table")
    li.set_defaults(func=_list_command)


def _fetch_command(args) -> int:
    kernels.fetch(args.name)
    return 0


def _list_command(args) -> int:
    found = kernels.fetched()
    if args.json:
        print(json.dumps(found, indent=1))
        return 0
    if not found:
        print("no kernels fetched (scalecheck kernel fetch 6.12)", file=sys.stderr)
        return 0
    print(f"{'release':<28} {'package version':<22} {'package MB':>10}  image")
    for k in found:
        print(
            f"{k['release']:<28} {k['version']:<22} {k['package_bytes'] / 1e6:>10.1f}  {k['path']}"
        )
    return 0
