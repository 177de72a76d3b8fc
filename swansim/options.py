"""Config fields that document themselves: the one source of a default, its help text and its
command-line option.

A config dataclass declares each user-facing field with `option` (default, help, and the
option's spelling where it is not the field's name with dashes). The CLI generates its options
from them (`swansim.cli.common.add_options`), the API's docstrings and error messages name the
fields, and `keyword_of` turns an error that names an option back into the field the Python
caller spelled. (A leaf: imports nothing of swansim.)
"""
from __future__ import annotations

from dataclasses import Field, field, fields


def option(default, *, help: str, flag: str | None = None, cli: bool = True, exclusive: str | None = None,
           known=None):
    """A config field (its default immutable: configs are frozen and shared): ``help`` says
    what it is (with its unit); ``flag`` is its option where that is not ``--field-name``;
    ``cli=False`` keeps it out of the command line; fields with the same ``exclusive`` name are
    mutually exclusive options; ``known()``, if given, lists the valid names (a registry's),
    shown in the help."""
    return field(default=default, metadata={"help": help, "flag": flag, "cli": cli, "exclusive": exclusive,
                                            "known": known})


def documented(config) -> list[Field]:
    """The fields of a config dataclass declared with `option`."""
    return [f for f in fields(config) if "help" in f.metadata]


def flag_of(f: Field) -> str:
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def keyword_of(flag: str, *configs) -> str:
    """The field whose option is ``flag`` in any of ``configs`` (else the flag's own words)."""
    for config in configs:
        for f in documented(config):
            if flag_of(f) == flag:
                return f.name
    return flag.lstrip("-").replace("-", "_")


def describe(config) -> str:
    """Every documented field as ``name (default): help`` lines, for docstrings."""
    return "\n".join(f"    {f.name} ({f.default!r}): {f.metadata['help']}" for f in documented(config))


def takes(config):
    """Decorator for an API function whose ``**config`` keywords are the fields of the dataclass
    ``config``: its signature (what ``help()`` and editors show) gains each field as a keyword
    with its default, and its docstring a line per field."""
    import inspect

    def wrap(fn):
        sig = inspect.signature(fn)
        own = [p for p in sig.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
        taken = {p.name for p in own}
        extra = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default)
                 for f in fields(config) if f.name not in taken]
        fn.__signature__ = sig.replace(parameters=[*own, *extra])
        fn.__doc__ = (fn.__doc__ or "").rstrip() + (
            f"\n\n    Keywords of `{config.__module__}.{config.__name__}` (default): what each is\n"
            + describe(config))
        return fn
    return wrap
