"""The analyze stage: the commutativity conditions of every pair of a model's operations,
written to DIR/analysis/ (``scalecheck analyze``)."""
