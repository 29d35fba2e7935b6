"""The files between the stages, each read and written through one module: the analysis
(``analysisfile``, docs/format-analysis.md), the tests (``testfile``, docs/format-tests.md)
and a run's results (``resultsfile``, docs/format-results.md)."""
