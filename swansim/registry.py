"""One registry type for every pluggable family: policies, placements, cpufreq and thermal
governors, models.

A `Registry` maps names to plug-ins (classes or factories) and reads like a dict. Members
register themselves where they are defined (``@REGISTRY.register("name")``); a family that
outside packages may extend names an entry-point group (``swansim.policies``), whose members
are loaded the first time anyone asks the registry for a name or its list - so a researcher's
own package adds a policy by declaring, in its packaging metadata,

    [options.entry_points]
    swansim.policies =
        my-policy = my_package.module:MyPolicy

with no edit to swansim. An entry point that cannot be loaded is not listed; asking for it by
name is one `InputError` with the reason. (A leaf: imports only `errors` and `checks`.)
"""
from __future__ import annotations

from collections.abc import Mapping
from importlib import metadata
from typing import Callable, Generic, Iterator, TypeVar

from swansim.checks import did_you_mean, shown
from swansim.errors import InputError

T = TypeVar("T")


class Registry(Mapping, Generic[T]):
    """Plug-ins of one ``family`` ("policy", "placement", ...) by name, in registration order
    (the built-in ones first, then entry points, in the order the environment lists them)."""

    def __init__(self, family: str, entry_points: str | None = None,
                 on_register: Callable[[str, T], None] | None = None):
        self.family = family
        self.group = entry_points
        self._on_register = on_register
        self._items: dict[str, T] = {}
        self._broken: dict[str, str] = {}       # entry points that failed to load, and why
        self._discovered = entry_points is None

    def register(self, name: str, obj: T | None = None):
        """Add ``obj`` as ``name``; without ``obj`` a decorator. Registering the same object
        again is harmless; another object under a taken name is a bug (ValueError)."""
        if obj is None:
            return lambda o: self.register(name, o)
        old = self._items.get(name)
        if old is not None and old is not obj:
            raise ValueError(f"{self.family} {name!r} is registered twice ({old!r}, {obj!r})")
        if self._on_register is not None:
            self._on_register(name, obj)
        self._items[name] = obj
        return obj

    def get(self, name, where: str | None = None) -> T:     # type: ignore[override]
        """The member called ``name``; an unknown name is one InputError naming ``where``, the
        nearest known name and the known ones."""
        self._discover()
        if isinstance(name, str) and name in self._items:
            return self._items[name]
        if isinstance(name, str) and name in self._broken:
            raise InputError(where or self.family, name, f"{self.family} plug-in could not be loaded: "
                                                         f"{self._broken[name]}")
        raise InputError(where or self.family, shown(name),
                         f"unknown {self.family}{did_you_mean(str(name), self._items)}; "
                         f"known: {', '.join(self._items)}")

    def names(self) -> tuple[str, ...]:
        self._discover()
        return tuple(self._items)

    def __getitem__(self, name: str) -> T:
        self._discover()
        return self._items[name]

    def __iter__(self) -> Iterator[str]:
        self._discover()
        return iter(list(self._items))

    def __len__(self) -> int:
        self._discover()
        return len(self._items)

    def __contains__(self, name) -> bool:
        self._discover()
        return name in self._items

    def __repr__(self) -> str:
        return f"Registry({self.family!r}: {', '.join(self._items)})"

    def _discover(self) -> None:
        if self._discovered:
            return
        self._discovered = True
        for ep in metadata.entry_points(group=self.group):
            if ep.name in self._items:
                continue    # a built-in name is not replaced from outside
            try:
                self.register(ep.name, ep.load())
            except Exception as e:   # noqa: BLE001 - an outside package's failure, reported by name
                self._broken[ep.name] = f"{ep.value}: {type(e).__name__}: {e}"
