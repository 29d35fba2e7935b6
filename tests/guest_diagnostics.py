"""Tests of the Linux target's recovery share these: a test whose call A is a diagnostic op
of the Linux binding (binding/linux_posix.py: `_hang` never returns, `_panic` crashes the
guest kernel) and whose call B stats a file."""


def diagnostic_test(name: str, op: str) -> dict:
    return {
        "id": f"{op}-stat/{name}",
        "pair": [op, "stat"],
        "path": 0,
        "model": "posix",
        "setup": {
            "files": {"f0": 0},
            "inodes": [{"nlink": 1, "data": []}],
            "pipes": [],
            "procs": [{"fds": {}, "maps": {}}, {"fds": {}, "maps": {}}],
        },
        "calls": [
            {"op": op, "proc": 0, "args": {}},
            {"op": "stat", "proc": 1, "args": {"pn": "f0"}},
        ],
        "expect": {"ab": [{"ret": 0}, {"ret": 0}], "ba": [{"ret": 0}, {"ret": 0}]},
    }
