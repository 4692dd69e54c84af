"""Check a parsed YAML document against a declarative table of keys before any work is done.

A schema is a `Table` (a mapping with known keys, each a `Key` with type, range and default) and the
item types `Number`, `Integer`, `Flag`, `Text`, `Choice`, `Numbers`, `ListOf`, `MapOf`, `AnyOf`. `check`
returns the document with defaults filled in, or raises one `ConfigError` line naming the key path
(`parameters[0].min`) and what is wrong; an unknown key gets a "did you mean" from difflib.

Numbers written as strings (`1e-3` is a string to YAML 1.1) are read as numbers; booleans are only
`true`/`false` (a quoted "false" is refused, never read as true).
"""

from __future__ import annotations

import difflib
import math
import numbers
import os
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError

REQUIRED = object()  # a Key default meaning "must be given"


def _where(path: str) -> str:
    return path or "the document"


def _fail(path: str, message: str) -> ConfigError:
    return ConfigError(f"{_where(path)}: {message}")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True)
class Number:
    """A finite real number in [min, max]; `above` is an exclusive lower bound."""

    min: float | None = None
    max: float | None = None
    above: float | None = None
    integer: bool = False

    def describe(self) -> str:
        return "an integer" if self.integer else "a number"

    def check(self, value: Any, path: str) -> Any:
        number = _as_number(value)
        if number is None or (self.integer and number != int(number)):
            raise _fail(path, f"must be {self.describe()}, got {_shown(value)}")
        if self.above is not None and not number > self.above:
            raise _fail(path, f"must be > {self.above:g}, got {number:g}")
        if self.min is not None and number < self.min:
            raise _fail(path, f"must be >= {self.min:g}, got {number:g}")
        if self.max is not None and number > self.max:
            raise _fail(path, f"must be <= {self.max:g}, got {number:g}")
        return int(number) if self.integer else float(number)


def Integer(min: float | None = None, max: float | None = None) -> Number:
    return Number(min, max, integer=True)


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Real):  # numpy scalars too, for documents built in Python
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


@dataclass(frozen=True)
class Numbers:
    """A number or a list of numbers (returned as a tuple); `lengths` limits how many (None: any)."""

    lengths: tuple[int, ...] | None = None

    def describe(self) -> str:
        return "a number or a list of numbers"

    def check(self, value: Any, path: str) -> tuple[float, ...]:
        items = list(value) if isinstance(value, (list, tuple)) else [value]
        out = tuple(_as_number(v) for v in items)
        if not items or any(v is None for v in out):
            raise _fail(path, f"must be {self.describe()}, got {_shown(value)}")
        if self.lengths is not None and len(out) not in self.lengths:
            raise _fail(path, f"needs {' or '.join(map(str, self.lengths))} values, got {len(out)}")
        return out  # type: ignore[return-value]


@dataclass(frozen=True)
class Flag:
    def describe(self) -> str:
        return "true or false"

    def check(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            raise _fail(path, f"must be true or false, got {_shown(value)}")
        return value


@dataclass(frozen=True)
class Text:
    """A non-empty string; `name` restricts it to a plain file name (no folder, no `..`)."""

    name: bool = False

    def describe(self) -> str:
        return "a plain name" if self.name else "a string"

    def check(self, value: Any, path: str) -> str:
        value = os.fspath(value) if isinstance(value, os.PathLike) else value
        if not isinstance(value, str) or not value.strip():
            raise _fail(path, f"must be {self.describe()}, got {_shown(value)}")
        if self.name and (
            value in (".", "..")
            or value.startswith(".")
            or "/" in value
            or "\\" in value
            or "\0" in value
            or len(value) > 120
        ):
            raise _fail(path, f"must be a plain file name (no folder, no leading '.'), got {_shown(value)}")
        return value


@dataclass(frozen=True)
class Choice:
    choices: tuple[str, ...]

    def describe(self) -> str:
        return "one of " + ", ".join(self.choices)

    def check(self, value: Any, path: str) -> str:
        if value not in self.choices:
            hint = difflib.get_close_matches(str(value), self.choices, n=1)
            guess = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise _fail(path, f"must be {self.describe()}, got {_shown(value)}{guess}")
        return value


@dataclass(frozen=True)
class ListOf:
    item: Any
    min_items: int = 0

    def describe(self) -> str:
        return "a list"

    def check(self, value: Any, path: str) -> list:
        if isinstance(value, tuple):
            value = list(value)
        if not isinstance(value, list):
            hint = f" (write [{value}])" if isinstance(value, (str, int, float)) else ""
            raise _fail(path, f"must be a list of {self.item.describe()}{hint}, got {_shown(value)}")
        if len(value) < self.min_items:
            raise _fail(path, f"needs at least {self.min_items} item(s)")
        return [self.item.check(v, f"{path}[{k}]") for k, v in enumerate(value)]


@dataclass(frozen=True)
class MapOf:
    """A mapping of free string keys to `item`s (a null value becomes `item`'s defaults)."""

    item: Any

    def describe(self) -> str:
        return "a mapping"

    def check(self, value: Any, path: str) -> dict:
        if not isinstance(value, dict) or not value:
            raise _fail(path, f"must be a non-empty mapping, got {_shown(value)}")
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise _fail(path, f"keys must be strings, got {_shown(k)}")
            out[k] = self.item.check({} if v is None else v, f"{path}.{k}")
        return out


@dataclass(frozen=True)
class AnyOf:
    """The first of `options` that accepts the value (tried in order; the last one's error when none does)."""

    options: tuple[Any, ...]

    def describe(self) -> str:
        return " or ".join(o.describe() for o in self.options)

    def check(self, value: Any, path: str) -> Any:
        shapes = [o for o in self.options if _shape_matches(o, value)]
        if not shapes:
            raise _fail(path, f"must be {self.describe()}, got {_shown(value)}")
        for option in shapes[:-1]:
            try:
                return option.check(value, path)
            except ConfigError:
                continue
        return shapes[-1].check(value, path)  # its error is the most specific


def _shape_matches(item: Any, value: Any) -> bool:
    if isinstance(item, (Table, MapOf)):
        return isinstance(value, dict)
    if isinstance(item, ListOf):
        return isinstance(value, (list, tuple))
    if isinstance(item, Text):
        return isinstance(value, (str, os.PathLike))
    return True


@dataclass(frozen=True)
class Key:
    type: Any
    default: Any = None  # REQUIRED: must be given; None: optional, absent stays None (a Table: its defaults)
    help: str = ""


@dataclass(frozen=True)
class Table:
    """A mapping with exactly these keys; a key in `renamed` (old -> new) is refused with its new name."""

    keys: dict[str, Key] = field(default_factory=dict)
    renamed: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        return "a mapping"

    def check(self, value: Any, path: str = "") -> dict[str, Any]:
        if not isinstance(value, dict):
            raise _fail(path, f"must be a mapping of keys, got {_shown(value)}")
        for k in value:
            if k not in self.keys:
                prefix = f"{path}." if path else ""
                if k in self.renamed:
                    raise ConfigError(f"{prefix}{k}: renamed {self.renamed[k]!r}")
                hint = difflib.get_close_matches(str(k), list(self.keys), n=1)
                guess = f" (did you mean {hint[0]!r}?)" if hint else f" (known: {', '.join(self.keys)})"
                raise ConfigError(f"{prefix}{k}: unknown key{guess}")
        out = {}
        for k, key in self.keys.items():
            sub = f"{path}.{k}" if path else k
            given = value.get(k)
            if given is None and isinstance(key.type, Table):
                given = {}  # a nested table always gets its defaults
            if given is None:
                if key.default is REQUIRED:
                    raise _fail(sub, "is required")
                out[k] = key.default
            else:
                out[k] = key.type.check(given, sub)
        return out


def check(schema: Table, doc: Any) -> dict[str, Any]:
    """`doc` checked against `schema`, with defaults filled in (ConfigError naming the key path)."""
    return schema.check(doc, "")
