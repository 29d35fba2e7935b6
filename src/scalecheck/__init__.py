"""scalecheck: the scalable commutativity rule, made practical."""

__version__ = "0.1.0"
