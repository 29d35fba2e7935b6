"""The report stage: reads a run directory's tests and trace results, writes DIR/report/.

``from scalecheck.report import make_report``; ``make_report(run_dir)`` returns the summary.
"""


def __getattr__(name):
    # Imported on first use: the report pulls in matplotlib, which would otherwise slow down
    # every scalecheck command (the CLI imports each stage's cli module to build its parser).
    if name == "make_report":
        from scalecheck.report.build import make_report

        return make_report
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
