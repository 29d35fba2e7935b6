"""Fresh processes (common/parallel.py's map_unordered with fresh_process=True): each item
in a process forked by a server that collected and froze its heap once, after its imports."""

import gc
import subprocess
import sys

from scalecheck.common.parallel import map_unordered


def _inherited_heap(_item):
    """In the fresh process: whether the server imported the module that froze its heap."""
    return "scalecheck.common.forkserver_preload" in sys.modules


def test_a_fresh_process_inherits_the_servers_frozen_heap():
    assert list(map_unordered(_inherited_heap, [0, 1], jobs=2, fresh_process=True)) == [True] * 2


def test_the_servers_module_freezes_what_was_imported_before_it():
    code = (
        "import gc, scalecheck.analyze.analyze, scalecheck.common.forkserver_preload; "
        "print(gc.get_freeze_count())"
    )
    frozen = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert int(frozen.stdout) > 10_000  # the analysis's modules: z3, rich, the engine
    assert gc.get_freeze_count() == 0  # importing it here would have frozen the test's heap
