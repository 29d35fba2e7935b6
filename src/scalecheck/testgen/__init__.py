"""The testgen stage: concrete tests for every commutative path of an analysis, written to
DIR/tests.jsonl (``scalecheck testgen``), and new tests for the paths a run left
(``--refine-left-path``)."""
