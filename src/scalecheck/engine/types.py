"""Symbolic types of the model language and the values built from them.

Scalars are plain Z3 expressions, so model code uses ordinary Python operators on them
(``src == dst``, ``off + 1``); the explorer decides every ``if`` on one (see explore.py).
Composite values (structs, fixed-size arrays) are Python objects over scalar leaves. Maps
are state containers: a shared *base* (the unknown initial state, one uninterpreted
function per leaf) plus a short log of writes, which keeps every formula quantifier-free.
"""

from __future__ import annotations

import z3

from scalecheck.engine import explore
from scalecheck.engine.explore import FRESH_BASE, join_name
from scalecheck.engine.rawz3 import is_false, ite, not_

# Keys above a bounded key domain that allocations (lowest_free_key, any_free_key) may
# take when the domain is full: two calls allocate at most 4 (two pipes, two fds each).
SPARE_KEYS = 4


class SymType:
    """A type whose values are made of scalar Z3 leaves."""

    def leaves(self) -> list[tuple[str, ScalarType]]:
        raise NotImplementedError

    def build(self, exprs, on_change=None):
        """Make a value from an iterator over leaf expressions."""
        raise NotImplementedError

    def flatten(self, value) -> list:
        raise NotImplementedError

    def invariant(self, value) -> list:
        """Constraints every value of this type in the initial state satisfies."""
        return []

    def any(self):
        """An arbitrary initial value, named when the model's state is bound."""
        return Unbound(self)


class Unbound:
    """Placeholder for ``T.any()`` in a model's ``__init__``, replaced by named constants."""

    def __init__(self, symtype: SymType):
        self.symtype = symtype


class ScalarType(SymType):
    sort: z3.SortRef
    kind = (
        "int"  # how test generation treats a value: "int", "bool", "enum" or an uninterpreted kind
    )

    def describe(self) -> dict:
        return {"class": self.kind}

    def leaves(self):
        return [("", self)]

    def build(self, exprs, on_change=None):
        return next(exprs)

    def flatten(self, value):
        return [as_expr(value, self)]

    def domain(self, expr) -> list:
        """Constraints on any value of this type (bounds)."""
        return []

    def invariant(self, value):
        return self.domain(value)


class Bool(ScalarType):
    kind = "bool"

    def __init__(self):
        self.sort = z3.BoolSort()


class Int(ScalarType):
    """An integer, optionally bounded: bounds keep the formulas small and decidable."""

    def __init__(self, lo: int | None = None, hi: int | None = None):
        self.sort = z3.IntSort()
        self.lo, self.hi = lo, hi

    def domain(self, expr):
        bounds = []
        if self.lo is not None:
            bounds.append(expr >= self.lo)
        if self.hi is not None:
            bounds.append(expr <= self.hi)
        return bounds


class Key(Int):
    """A bounded integer whose identity matters but whose value the test may choose
    within its range (file descriptors, page numbers): tests enumerate the equality
    pattern among keys, as for uninterpreted values."""

    def __init__(self, name: str, count: int):
        super().__init__(0, count - 1)
        self.kind = name

    def describe(self) -> dict:
        return {"class": "key"}


class Uninterpreted(ScalarType):
    """Values compared only for equality: names, inode numbers, pipe ids, data bytes.

    ``allocatable`` types can produce fresh values (``Inum.fresh()``) that are distinct
    from every value of the initial state.
    """

    def __init__(self, name: str, allocatable: bool = False, zero: bool = False):
        self.sort = z3.IntSort()
        self.kind = name
        self.allocatable = allocatable
        self.zero = zero  # the value 0 is special (e.g. a zero-filled page), so tests tell it apart

    def domain(self, expr):
        return [expr >= 0, expr < FRESH_BASE] if self.allocatable else [expr >= 0]

    def describe(self) -> dict:
        return {"class": "uninterpreted", "zero": self.zero}

    def fresh(self):
        """A value the implementation chooses, unused until now (e.g. a new inode number)."""
        return explore.current().choose_fresh(self)


class Enum(ScalarType):
    kind = "enum"

    def __init__(self, *names: str):
        self.sort = z3.IntSort()
        self.names = names
        for number, name in enumerate(names):
            setattr(self, name, z3.IntVal(number))

    def domain(self, expr):
        return [expr >= 0, expr < len(self.names)]


class Struct(SymType):
    """A record of named fields; ``invariant`` gives constraints of the initial state."""

    def __init__(self, invariant=None, **fields: SymType):
        self.fields = fields
        self._invariant = invariant

    def new(self, **values):
        """A value with the given fields (arrays may be given one value to fill them)."""
        leaves = []
        for name, ftype in self.fields.items():
            value = values[name]
            if isinstance(ftype, Array) and not isinstance(value, (list, tuple)):
                value = [value] * ftype.size
            leaves += [
                as_expr(v, leaf)
                for v, (_, leaf) in zip(
                    value if isinstance(value, (list, tuple)) else [value],
                    ftype.leaves(),
                    strict=True,
                )
            ]
        return self.build(iter(leaves))

    def leaves(self):
        return [
            (join_name(name, sub), leaf)
            for name, ftype in self.fields.items()
            for sub, leaf in ftype.leaves()
        ]

    def build(self, exprs, on_change=None):
        value = StructValue(self, on_change)
        for name, ftype in self.fields.items():
            object.__setattr__(value, name, ftype.build(exprs, value._changed))
        return value

    def flatten(self, value):
        return [
            leaf
            for name, ftype in self.fields.items()
            for leaf in ftype.flatten(getattr(value, name))
        ]

    def invariant(self, value):
        constraints = [
            c for name, ftype in self.fields.items() for c in ftype.invariant(getattr(value, name))
        ]
        if self._invariant:
            constraints += list(self._invariant(value))
        return constraints


class StructValue:
    """A struct read from a map writes itself back when a field changes, so model code
    can say ``self.inodes[inum].nlink -= 1`` as in the man page."""

    _type: Struct

    def __init__(self, symtype: Struct, on_change=None):
        object.__setattr__(self, "_type", symtype)
        object.__setattr__(self, "_on_change", on_change)

    def __setattr__(self, name, value):
        if name not in self._type.fields:
            raise AttributeError(f"struct has no field {name!r}")
        object.__setattr__(self, name, value)
        self._changed()

    def _changed(self):
        if self._on_change:
            self._on_change()


class Array(SymType):
    """A fixed-size array; a symbolic index selects with an if-then-else chain."""

    def __init__(self, elem: ScalarType, size: int):
        self.elem, self.size = elem, size

    def leaves(self):
        return [(f"[{i}]", self.elem) for i in range(self.size)]

    def build(self, exprs, on_change=None):
        return ArrayValue(self, [next(exprs) for _ in range(self.size)], on_change)

    def flatten(self, value):
        return list(value.items)

    def invariant(self, value):
        return [c for item in value.items for c in self.elem.domain(item)]


class ArrayValue:
    def __init__(self, symtype: Array, items: list, on_change=None):
        self.type, self.items, self._on_change = symtype, items, on_change

    def __len__(self):
        return self.type.size

    def _check_index(self, index):
        if isinstance(index, int):
            if not 0 <= index < self.type.size:
                raise explore.BoundExceeded(f"index {index} outside array of {self.type.size}")
        elif not (index >= 0) or not (index < self.type.size):
            raise explore.BoundExceeded(f"index may leave array of {self.type.size}")

    def __getitem__(self, index):
        self._check_index(index)
        if isinstance(index, int):
            return self.items[index]
        result = self.items[-1]
        for i in range(self.type.size - 2, -1, -1):
            result = ite(index == i, self.items[i], result)
        return result

    def any_index(self, where):
        """An index the implementation chooses among those where ``where(item)`` holds
        (which queued message an unordered socket delivers, which free slot it fills)."""
        index = explore.current().choose(Int(), "index", within=range(self.type.size))
        explore.current().assume(where(self[index]))
        return index

    def __setitem__(self, index, value):
        self._check_index(index)
        value = as_expr(value, self.type.elem)
        if isinstance(index, int):
            self.items[index] = value
        else:
            self.items = [ite(index == i, value, item) for i, item in enumerate(self.items)]
        if self._on_change:
            self._on_change()


class MapType:
    """A map from keys to values. ``Map`` is total (every key has a value); ``Dict`` is
    partial (keys may be absent; ``in``, ``del``)."""

    partial = False

    def __init__(self, key: ScalarType, value: SymType):
        self.key, self.value = key, value

    def any(self):
        return Unbound(self)

    def empty(self, name: str) -> MapValue:
        """A map created empty during a call (a spawned process's fd table): no key is
        present and nothing is read of the initial state."""
        return MapValue(self, name, empty=True)


class Map(MapType):
    pass


class Dict(MapType):
    partial = True


class MapValue:
    def __init__(self, symtype: MapType, name: str, empty: bool = False):
        self.type = symtype
        self.name = name
        self.empty = empty  # created empty: no base of the initial state behind it
        self.log: list[tuple] = []  # (key, present, leaves), newest last

    def copy(self) -> MapValue:
        """A snapshot: later writes to either map do not show in the other (fork's copy of
        a process's fd table), while both still read the same initial state."""
        twin = MapValue(self.type, self.name, self.empty)
        twin.log = list(self.log)
        return twin

    # -- reading --
    def lookup(self, key, base: tuple | None = None) -> tuple:
        """(present, leaves) of ``key``, as expressions over the initial state, or over
        ``base`` (its initial (present, leaves)) when that is known."""
        key = as_expr(key, self.type.key)
        # Newest write first: a write at the very same key term hides everything older, and
        # writes at other concrete keys cannot match; only the rest need an if-then-else.
        undecided = []
        for logged_key, logged_present, logged_leaves in reversed(self.log):
            if logged_key.eq(key):
                present, leaves = logged_present, logged_leaves
                break
            if not (z3.is_int_value(logged_key) and z3.is_int_value(key)):
                undecided.append((logged_key, logged_present, logged_leaves))
        else:
            if self.empty and base is None:
                base = self._absent()
            present, leaves = base or explore.current().read_base(self, key)
        for logged_key, logged_present, logged_leaves in reversed(undecided):
            hit = logged_key == key
            present = ite(hit, logged_present, present)
            # A known-absent base has no leaves (only presence is asked of it).
            leaves = [ite(hit, new, old) for new, old in zip(logged_leaves, leaves, strict=False)]
        return present, leaves

    def __contains__(self, key):
        if not self.type.partial:
            raise TypeError(f"{self.name} is a total Map: every key is present")
        return self.lookup(key)[0]

    def __getitem__(self, key):
        present, leaves = self.lookup(key)
        if self.type.partial and not present:
            raise explore.ModelError(
                f"{self.name}[key] read where the key may be absent; test `in` first"
            )
        key = as_expr(key, self.type.key)
        value = self.type.value.build(iter(leaves), lambda: self._write_back(key, value))
        return value

    def _write_back(self, key, value):
        self.log.append((key, z3.BoolVal(True), self.type.value.flatten(value)))

    def __setitem__(self, key, value):
        self.log.append(
            (as_expr(key, self.type.key), z3.BoolVal(True), self.type.value.flatten(value))
        )

    def __delitem__(self, key):
        key = as_expr(key, self.type.key)
        if key not in self:
            raise explore.ModelError(f"del {self.name}[key] of an absent key")
        self.log.append((key, z3.BoolVal(False), self.lookup(key)[1]))

    def discard_where(self, condition):
        """Remove every entry whose value meets ``condition(value)`` without a branch per
        key: exec closes the close-on-exec fds and drops every mapping at once."""
        for key in self._allocatable_keys():
            above = key not in self._domain_keys()  # absent initially, like _is_free's
            present, leaves = self.lookup(key, base=self._absent() if above else None)
            if is_false(present):
                continue
            value = self.type.value.build(iter(leaves))
            self.log.append((z3.IntVal(key), z3.And(present, z3.Not(condition(value))), leaves))

    def _absent(self) -> tuple:
        """(present, leaves) of a key no initial state holds."""
        return z3.BoolVal(False), [_default(leaf.sort) for _, leaf in self.type.value.leaves()]

    # -- implementation-chosen keys (file descriptors, addresses) --
    def _domain_keys(self):
        key_type = self.type.key
        if not isinstance(key_type, Int) or key_type.lo is None or key_type.hi is None:
            raise explore.ModelError(f"{self.name}: free keys need a bounded integer key type")
        return range(key_type.lo, key_type.hi + 1)

    def _allocatable_keys(self) -> range:
        """The key domain and the spare keys above it that can be free now. No initial
        state uses a key above the domain (a test's setup cannot name one), so when every
        key of the domain is in use an allocation takes the next one, as Linux gives fd 6
        when fds 0..5 are open: a full domain is a real state, not a reason to drop the
        path. Each write so far can have taken one spare key, so the first len(log) + 1
        spare keys hold a free one (up to SPARE_KEYS)."""
        keys = self._domain_keys()
        return range(keys[0], keys[-1] + 1 + min(len(self.log) + 1, SPARE_KEYS))

    def _is_free(self, key: int) -> z3.BoolRef:
        if key in self._domain_keys():
            return not_(self.lookup(key)[0])
        # Above the domain: absent in every initial state; no base read is needed.
        return not_(self.lookup(key, base=(z3.BoolVal(False), []))[0])

    def has_free_key(self) -> z3.BoolRef:
        """Whether some allocatable key is absent. A model whose interface has an error for
        a full table (EMFILE, ENOMEM) can test it and take that error path."""
        return z3.Or([self._is_free(k) for k in self._allocatable_keys()])

    def _require_free_key(self):
        # Fewer writes than spare keys leave a spare key free: no solver call needed.
        if len(self.log) < SPARE_KEYS:
            return
        # A path that used up even the spare keys is beyond the model's bounds: it ends
        # in BoundExceeded, reported as a model error, instead of vanishing.
        if not self.has_free_key():
            raise explore.BoundExceeded(
                f"{self.name}: every key up to {self._allocatable_keys()[-1]} in use"
            )

    def lowest_free_key(self):
        """The lowest absent key (POSIX's lowest-numbered fd rule)."""
        self._require_free_key()
        keys = self._allocatable_keys()
        result = z3.IntVal(keys[-1])
        for k in reversed(keys[:-1]):
            result = ite(self._is_free(k), z3.IntVal(k), result)
        return result

    def any_free_key(self):
        """Some absent key, chosen by the implementation (O_ANYFD, a non-fixed mmap)."""
        self._require_free_key()
        keys = self._allocatable_keys()
        key = explore.current().choose(self.type.key, f"{self.name}.free", within=keys)
        explore.current().assume(z3.Not(self.lookup(key)[0]))
        return key

    def written_keys(self) -> list:
        return [key for key, _, _ in self.log]


def _default(sort) -> z3.ExprRef:
    """A leaf of an absent entry (never compared: an absent entry's leaves are not part of
    the state)."""
    return z3.BoolVal(False) if sort == z3.BoolSort() else z3.IntVal(0)


def as_expr(value, symtype: ScalarType):
    """A Python constant or expression as a Z3 expression of the type's sort."""
    if isinstance(value, z3.ExprRef):
        return value
    if isinstance(value, bool):
        return z3.BoolVal(value)
    if isinstance(value, int):
        return z3.IntVal(value)
    raise TypeError(f"not a scalar value: {value!r}")
