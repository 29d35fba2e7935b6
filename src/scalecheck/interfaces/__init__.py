"""The interface models shipped with scalecheck, written in the model language
(``scalecheck.model``), by the name ``--model`` accepts."""

SHIPPED = {
    "posix": "scalecheck.interfaces.posix:Posix",
    "rename": "scalecheck.interfaces.rename:RenameFS",
    "counter": "scalecheck.interfaces.counter:RefCounter",
}
