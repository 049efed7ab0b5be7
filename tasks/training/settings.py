"""Settings declared once: the fields of frozen dataclasses, each also a command-line flag.

A job's settings are frozen dataclasses: config.py's TrainConfig (the loop) and JobSettings (model and
data), and the job's own. A field made with `flag(...)` is a flag too; its metadata holds the help and the
checking type (arguments.py) or the choices, as in transformers' HfArgumentParser. The flag is the field's
name with hyphens (`layerwise_decay`: --layerwise-decay); the course's spellings keep their underscores and
take hyphens as well (`course=True`: --batch_size, --batch-size); a bool that is on by default is turned off
by --no-<name> (its help, a noun phrase, then reads "without ...").

A job states its defaults once, as instances: `TrainConfig(epochs=3)`. `SettingsParser` makes one help group
per instance, with those values as the defaults that --help shows, and `parse` returns new instances, each
checked by its `__post_init__` (a contradiction is a usage error that names the flags). `as_dict` and
`from_dict` carry them into a run's config.json and back (run_dir.py compares them on --resume).

Read next: config.py (the settings every job shares).
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
from typing import Any, Callable, Sequence

# The width of --help where no terminal says otherwise (a pipe, a file): the docstrings' line length.
HELP_WIDTH = 110


def flag(default: Any, help: str, *, type: Callable[[str], Any] | None = None,
         choices: Sequence[str] | None = None, metavar: str | None = None, nargs: str | None = None,
         required: bool = False, course: bool = False, same_on_resume: bool = True) -> Any:
    """A dataclass field that is also a flag. type: a checking type from arguments.py (or choices);
    course: the CS224N starter's underscore spelling, hyphens accepted too; same_on_resume=False: a setting
    that --resume may change (it does not shape the run: threads, where the outputs go, ...)."""
    return dataclasses.field(default=default, metadata=dict(
        help=help, type=type, choices=choices, metavar=metavar, nargs=nargs, required=required, course=course,
        same_on_resume=same_on_resume))


def flag_fields(settings: Any) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(settings) if "help" in f.metadata]


def flag_names(field: dataclasses.Field, default: Any) -> list[str]:
    """The field's spellings on the command line, the one --help shows first."""
    name = f"no_{field.name}" if default is True else field.name
    hyphens = "--" + name.replace("_", "-")
    return [f"--{name}", hyphens] if field.metadata["course"] and "_" in name else [hyphens]


def shown(value: Any) -> str:
    """A default as --help prints it: 5e-05, sts=4, a b."""
    if isinstance(value, tuple):
        return ",".join(f"{k}={shown(v)}" for k, v in value) if value and isinstance(value[0], tuple) \
            else " ".join(map(shown, value))
    return f"{value:g}" if isinstance(value, float) else str(value)


def frozen(value: Any) -> Any:
    """argparse's (and JSON's) lists as tuples, so that settings stay immutable and compare equal."""
    return tuple(frozen(v) for v in value) if isinstance(value, list) else value


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The job's docstring as written; a flag on one line where it fits, in the spelling it is declared."""

    def __init__(self, prog: str) -> None:
        width = shutil.get_terminal_size((HELP_WIDTH, 24)).columns
        super().__init__(prog, max_help_position=34, width=min(width, HELP_WIDTH) - 2)

    def _format_action_invocation(self, action: argparse.Action) -> str:
        first = action.option_strings[0] if action.option_strings else None
        if first is None or not first.startswith("--"):
            return super()._format_action_invocation(action)
        if action.nargs == 0:
            return first
        return f"{first} {self._format_args(action, self._get_default_metavar_for_optional(action))}"


class SettingsParser(argparse.ArgumentParser):
    """A job's command line, made from its settings' default instances; `parse` gives new instances back."""

    def __init__(self, prog: str, description: str | None, *defaults: Any,
                 check: Callable[..., None] | None = None, fixed: Sequence[str] = ()) -> None:
        """fixed: fields the job does not offer as flags (they keep the defaults' values)."""
        course = any(f.metadata["course"] for d in defaults for f in flag_fields(d))
        super().__init__(prog=prog, description=description, usage="%(prog)s [options]",
                         epilog="Flags spelled with underscores (the course's) also take hyphens." if course
                         else None, formatter_class=HelpFormatter, allow_abbrev=False)
        self.defaults, self.check, self.fixed = defaults, check, set(fixed)
        for settings in defaults:
            title = (type(settings).__doc__ or type(settings).__name__).splitlines()[0].rstrip(".")
            group = self.add_argument_group(title)
            for field in flag_fields(settings):
                if field.name not in self.fixed:
                    add_flag(group, field, getattr(settings, field.name))

    def parse(self, argv: Sequence[str] | None = None) -> tuple:
        """The command line as new instances of the defaults' classes, in their order, checked by each
        class's `__post_init__` and then together by `check`: a contradiction is a usage error (status 2)."""
        args = self.parse_args(argv)
        try:
            settings = tuple(dataclasses.replace(d, **{f.name: frozen(getattr(args, f.name))
                                                       for f in flag_fields(d) if f.name not in self.fixed})
                             for d in self.defaults)
            if self.check:
                self.check(*settings)
        except ValueError as error:  # the messages name the flags
            self.error(str(error))
        return settings


def add_flag(group, field: dataclasses.Field, default: Any) -> None:
    meta = field.metadata
    names = flag_names(field, default)
    text = meta["help"].replace("%", "%%")  # argparse formats help with %
    if isinstance(default, bool):
        group.add_argument(*names, dest=field.name, action="store_false" if default else "store_true",
                           default=default, help=f"without {text}" if default else text)
        return
    if default not in (None, ()):
        text += f" (default {shown(default)})".replace("%", "%%")
    group.add_argument(*names, dest=field.name, type=meta["type"], choices=meta["choices"],
                       nargs=meta["nargs"], default=default, required=meta["required"],
                       metavar=meta["metavar"] or getattr(meta["type"], "metavar", None), help=text)


def as_dict(*settings: Any) -> dict[str, Any]:
    """Several settings instances as one flat dict (their field names never clash: each is a flag)."""
    merged: dict[str, Any] = {}
    for instance in settings:
        merged.update(dataclasses.asdict(instance))
    return merged


def from_dict(cls: type, saved: dict[str, Any]) -> Any:
    """An instance of `cls` from a run's saved settings; a field the run did not save keeps its default."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: frozen(v) for k, v in saved.items() if k in names})
