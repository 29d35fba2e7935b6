"""Host CPU of the Linux tracer's records: replays a finished boot's reports and trace.

`scalecheck run` keeps each VM's last boot in DIR/trace/vmN/ (`driver.out`, the driver's
report lines; `trace.bin`, the plugin's regions). This reads them again and makes every
test's record as the run did (outcome.finish), without QEMU and without guest memory (so
heap data stays unnamed: naming's reads of guest RAM are not in the figure; the heap loaded
before frozen, as the run freezes it), and reports
the CPU milliseconds per test, and each step's share of them (from a second, profiled
replay): reading the trace, the tick-work filter, the shared lines and their sites, the
page-table frames, the whole record. With `--records FILE` the records go
to FILE (sorted keys), so two builds of the host side can be checked for identical output
on the same input (`cmp`).

Usage: python3 bench/trace_host_cpu.py RUN_DIR [--vm N] [--records FILE] [--json]
"""

import argparse
import cProfile
import gc
import json
import pstats
import time
from pathlib import Path

from benchlib import print_result
from scalecheck import api

# Steps of the record, by the host function that does each (cumulative CPU in the profile).
STEPS = {
    "read_trace": "read_new",
    "tick_work_filter": "without_tick_work",
    "shared_lines": "_shared",
    "page_table_frames": "page_table_frames",
    "record": "finish",
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a directory `scalecheck run` traced")
    parser.add_argument("--vm", type=int, default=0, help="which VM's last boot (vmN)")
    parser.add_argument("--records", type=Path, help="write the records here")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    replay = api.replay_boot(args.run_dir, args.vm)
    # As the run does while it traces (run/loop.py): collections leave the loaded kernel
    # facts and tests alone. (A replay keeps every region until it is done; the run drops
    # each test's, so the collector has more to walk here.)
    gc.collect()
    gc.freeze()
    started = time.process_time()
    records = replay()
    cpu = time.process_time() - started
    profile = cProfile.Profile(time.process_time)
    profile.runcall(replay)
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in stats.values())
    result = {
        "tests": len(records),
        "host_cpu_ms_per_test": round(cpu * 1000 / max(1, len(records)), 2),
        "share_of_profiled_cpu": {
            step: round(sum(v[3] for k, v in stats.items() if k[2] == function) / total, 3)
            for step, function in STEPS.items()
        },
    }
    if args.records:
        args.records.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
    print_result(result, args.json)


if __name__ == "__main__":
    main()
