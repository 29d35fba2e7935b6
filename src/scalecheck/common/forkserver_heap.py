"""Imported last by the forkserver of fresh processes (parallel.py), after the modules
the work needs: collects the server's garbage and freezes what is left, once.

Every process the server forks then starts with nothing to collect and nothing to walk.
Without this, each one's first collection walked the whole inherited heap and wrote to
every object's header, copying each page the server shares with it: some 25 ms of CPU
per process, a few seconds over an analysis's pairs. The process still collects and
freezes on its own (parallel._fresh_worker), so what it starts from is the same.
"""

import gc

gc.collect()
gc.freeze()
