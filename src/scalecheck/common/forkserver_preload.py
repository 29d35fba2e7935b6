"""Imported last by the forkserver of fresh processes (parallel.py), after the modules
the work needs, once.

The server dies with the thread that started it (the command's main thread). Each worker
it forks holds that process's liveness pipe, so the server alone never sees it end; a
worker dies with the server (parallel.die_with_parent). Without this, a killed command
left its workers on their items and then printing a BrokenPipeError on its stderr.

It collects its garbage and freezes what is left: every process it forks then starts
with nothing to collect and nothing to walk. Without this, each one's first collection
walked the whole inherited heap and wrote to every object's header, copying each page
the server shares with it: some 25 ms of CPU per process, a few seconds over an
analysis's pairs. The process still collects and freezes on its own
(parallel._fresh_worker), so what it starts from is the same.
"""

import gc

from scalecheck.common.parallel import die_with_parent

die_with_parent()
gc.collect()
gc.freeze()
