"""The models shipped with scalecheck, by the name ``--model`` accepts."""

SHIPPED = {
    "posix": "scalecheck.models.posix:Posix",
    "rename": "scalecheck.models.rename:RenameFS",
    "counter": "scalecheck.models.counter:RefCounter",
}
