"""The command line: settings declared once as dataclass fields that are also flags, and the checked types
of their values. It imports only the standard library (grading/ uses the types too).

A job's settings are one typed object: a frozen dataclass whose fields are groups of flags (`Flags`):
settings.py's TrainingSettings (the loop) and JobSettings (model and data), and the job's own. In a group, a
field made with `flag(...)` is a flag too; its metadata holds the help and the checking type or the choices,
as in transformers' HfArgumentParser. The flag is the field's name with hyphens (`layerwise_decay`:
--layerwise-decay); the course's spellings keep their underscores and take hyphens as well (`course=True`:
--batch_size, --batch-size); a bool that is on by default is turned off by --no-<name> (its help, a noun
phrase, then reads "without ...").

A job states its defaults once, in its settings object's fields (`training: TrainingSettings =
TrainingSettings(epochs=3)`). `SettingsParser` makes a help group per group, in the fields' order, showing
those defaults; `parse` returns a new object, each group checked by its `__post_init__`, the whole by its
`check` (a contradiction is a usage error naming the flags). `as_dict` and `from_dict` carry the groups into
config.json and back (run_folder.py compares them on --resume).

The types check a flag's value where argparse reads it, before any work starts: each is a function from the
command line's string to the value, raising argparse.ArgumentTypeError with what would be accepted; argparse
adds the flag's name, so a bad value reads, for example,

    error: argument --limit: must be an integer >= 0 (0: every example), got '-5'

and the job exits with status 2 before it reads data or loads a model.

Read next: settings.py (the settings every job shares).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from tasks.data.numbers import decimal, whole_number

# The width of --help where no terminal says otherwise (a pipe, a file): the docstrings' line length.
HELP_WIDTH = 110


def flag(default: Any, help: str, *, type: Callable[[str], Any] | None = None,
         choices: Sequence[str] | None = None, metavar: str | None = None, nargs: str | None = None,
         required: bool = False, course: bool = False, same_on_resume: bool = True) -> Any:
    """A dataclass field that is also a flag. type: a checking type (below, or choices);
    course: the CS224N starter's underscore spelling, hyphens accepted too; same_on_resume=False: a setting
    that --resume may change (it does not shape the run: threads, where the outputs go, ...)."""
    return dataclasses.field(default=default, metadata=dict(
        help=help, type=type, choices=choices, metavar=metavar, nargs=nargs, required=required, course=course,
        same_on_resume=same_on_resume))


class Flags:
    """A group of flags (one help group): a frozen dataclass whose fields made with `flag(...)` are its flags.
    A group whose flags depend on the job (job.py's CourseFiles: five per row of its table) overrides these."""

    def flag_fields(self) -> list[dataclasses.Field]:
        return [f for f in dataclasses.fields(self) if "help" in f.metadata]

    def values(self) -> dict[str, Any]:
        """Every field's value, by name (config.json's part of this group)."""
        return dataclasses.asdict(self)

    def replaced(self, values: dict[str, Any]) -> Any:
        """A new group with these flags' values (checked by `__post_init__`)."""
        return dataclasses.replace(self, **values)


def groups(settings: Any) -> tuple[Flags, ...]:
    """A job's settings object as its groups of flags, in their fields' order (the order of --help)."""
    return tuple(getattr(settings, f.name) for f in dataclasses.fields(settings))


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
    """A job's command line, made from its settings' default instance; `parse` gives a new instance back."""

    def __init__(self, prog: str, description: str | None, defaults: Any, fixed: Sequence[str] = ()) -> None:
        """defaults: the job's settings object; fixed: flags it does not offer (they keep their defaults)."""
        course = any(f.metadata["course"] for g in groups(defaults) for f in g.flag_fields())
        super().__init__(prog=prog, description=description, usage="%(prog)s [options]",
                         epilog="Flags spelled with underscores (the course's) also take hyphens." if course
                         else None, formatter_class=HelpFormatter, allow_abbrev=False)
        self.defaults, self.fixed = defaults, set(fixed)
        for settings in groups(defaults):
            title = (type(settings).__doc__ or type(settings).__name__).splitlines()[0].rstrip(".")
            group = self.add_argument_group(title)
            values = settings.values()
            for field in settings.flag_fields():
                if field.name not in self.fixed:
                    add_flag(group, field, values[field.name])

    def parse(self, argv: Sequence[str] | None = None) -> Any:
        """The command line as a new instance of the defaults' class, each group checked by its
        `__post_init__`, then the whole by its `check`: a contradiction is a usage error (status 2)."""
        args = self.parse_args(argv)
        for action in self._actions:  # argparse reads "--lr=--" as an empty list, past the flag's type
            if action.option_strings and action.nargs is None and isinstance(getattr(args, action.dest, None),
                                                                              list):
                self.error(f"argument {'/'.join(action.option_strings)}: expected one value, got '--' (the "
                           "end of the options)")
        try:
            parsed = {f.name: group.replaced({g.name: frozen(getattr(args, g.name))
                                              for g in group.flag_fields() if g.name not in self.fixed})
                      for f, group in zip(dataclasses.fields(self.defaults), groups(self.defaults))}
            settings = dataclasses.replace(self.defaults, **parsed)
            settings.check()
            return settings
        except ValueError as error:  # the messages name the flags
            self.error(str(error))


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


def as_dict(*settings: Flags) -> dict[str, Any]:
    """Several groups of flags as one flat dict (their field names never clash: each is a flag)."""
    return {name: value for group in settings for name, value in group.values().items()}


def from_dict(cls: type, saved: dict[str, Any]) -> Any:
    """An instance of `cls` from a run's saved settings; a field the run did not save keeps its default."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: frozen(v) for k, v in saved.items() if k in names})


# ----- checked types: a flag's value, checked where argparse reads it -------------------------------


def integer(low: int, meaning: str = "", high: int | Callable[[], int] | None = None,
            high_meaning: str = "") -> Callable[[str], int]:
    """An int >= low (and <= high: a number, or a function giving it when the flag is read), written in ASCII
    digits (tasks/data/numbers.py: "1_0" and "１" are refused); `meaning` explains a special value in the
    message (e.g. "0: every example"), `high_meaning` the bound."""
    def parse(text: str) -> int:
        top = high() if callable(high) else high
        try:
            value = whole_number(text) if "." not in text else None  # a flag's integer has no ".0"
        except ValueError:
            value = None
        note = f" ({meaning})" if meaning else ""
        if value is None or value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}{note}, got {text!r}")
        if top is not None and value > top:
            raise argparse.ArgumentTypeError(f"must be an integer from {low} to {top} ({high_meaning}), "
                                             f"got {text!r}")
        return value
    parse.__name__ = f"integer >= {low}"
    parse.checked, parse.metavar = True, "N"
    return parse


def real(low: float, high: float = math.inf, low_open: bool = False, high_open: bool = False,
         meaning: str = "") -> Callable[[str], float]:
    """A finite float in the interval given ("(0, 1]" is low=0, low_open=True, high=1), written in ASCII
    digits (tasks/data/numbers.py)."""
    interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open or high == math.inf else ']'}"

    def parse(text: str) -> float:
        try:
            value = decimal(text)
        except ValueError:
            value = math.nan
        inside = (math.isfinite(value) and (value > low if low_open else value >= low)
                  and (value < high if high_open else value <= high))
        if not inside:
            note = f" ({meaning})" if meaning else ""
            raise argparse.ArgumentTypeError(f"must be a number in {interval}{note}, got {text!r}")
        return value
    parse.__name__ = f"number in {interval}"
    parse.checked, parse.metavar = True, "X"
    return parse


def machine_cpus() -> int:
    """The CPUs this process may run on: more threads than that only slow every operation down, and
    hundreds of thousands crash OpenMP (--threads 100000 ended in a segmentation fault)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


positive_int = integer(1)
# torch.manual_seed takes a seed below 2**64; a larger one was an OverflowError deep inside it
seed_int = integer(0, high=2**64 - 1, high_meaning="torch.manual_seed's range")
threads_int = integer(0, "0: decide from the idle cores", high=machine_cpus,
                      high_meaning="this machine's CPUs")
non_negative_int = integer(0)
positive = real(0.0, low_open=True)
non_negative = real(0.0)
probability = real(0.0, 1.0, high_open=True, meaning="a dropout probability")


# ----- paths: the right kind of thing, checked before any work starts ----------------------------------


def _exists(path: Path, text: str) -> bool:
    """Whether something is at `path` (under a file, nothing is); a path the operating system refuses to look
    up (a name too long, a symlink loop, a folder we may not search) is the flag's error, naming the cause."""
    try:
        path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as error:
        raise argparse.ArgumentTypeError(f"{text!r}: {error.strerror}") from None
    return True


def _existing(text: str, folder: bool) -> str:
    kind, other = ("folder", "file") if folder else ("file", "folder")
    path = Path(text)
    if not text:
        raise argparse.ArgumentTypeError(f"must be a {kind}, got an empty path")
    if not _exists(path, text):
        raise argparse.ArgumentTypeError(f"no such {kind}: {text!r}")
    if path.is_dir() != folder:
        raise argparse.ArgumentTypeError(f"{text!r} is a {other}, not a {kind}")
    if not os.access(path, os.R_OK | (os.X_OK if folder else 0)):
        raise argparse.ArgumentTypeError(f"{text!r} is not readable")
    return text


def existing_file(text: str) -> str:
    """A file that exists and can be read (a folder given instead is named as such)."""
    return _existing(text, folder=False)


def existing_dir(text: str) -> str:
    """A folder that exists and can be read (a file given instead is named as such)."""
    return _existing(text, folder=True)


def output_dir(text: str) -> str:
    """A folder to write into: absent (it will be created) or a folder, under a writable folder."""
    path = Path(text)
    if not text:
        raise argparse.ArgumentTypeError("must be a folder, got an empty path")
    if _exists(path, text) and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a file, not a folder")
    existing = path
    while not _exists(existing, text):  # the nearest folder that exists is where the new ones will be made
        existing = existing.parent
    if not existing.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} cannot be created: {str(existing)!r} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text!r} is not writable ({str(existing)!r} is read-only to you)")
    return text


def output_file(text: str) -> str:
    """A file to write: not a folder, in a folder that exists or can be made and is writable."""
    path = Path(text)
    if not text:
        raise argparse.ArgumentTypeError("must be a file, got an empty path")
    if _exists(path, text) and path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder, not a file")
    if _exists(path, text) and not path.is_file():  # written beside, then renamed: it would replace the node
        raise argparse.ArgumentTypeError(f"{text!r} is not a regular file (a device, a pipe or a socket); "
                                         "give the path of a file to write")
    output_dir(str(path.parent) or ".")
    return text


# ----- environment switches: on or off, read as strictly as a flag ------------------------------------

SWITCH_ON, SWITCH_OFF = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


def env_switch(name: str) -> bool:
    """The environment variable `name` as a switch: 1, true, yes or on (any case) turn it on; unset, empty, 0,
    false, no or off leave it off; anything else is a usage error naming the variable and the values it takes
    (exit status 2, as argparse's)."""
    value = os.environ.get(name, "")
    if value.strip().lower() in SWITCH_ON + SWITCH_OFF:
        return value.strip().lower() in SWITCH_ON
    print(f"error: environment variable {name}={value!r}: must be one of {', '.join(SWITCH_ON)} (on) or "
          f"{', '.join(SWITCH_OFF[:-1])} or empty (off)", file=sys.stderr)
    raise SystemExit(2)


def nonempty(text: str) -> str:
    """A non-empty name or name-or-path (a model, a split list, a layer spec): checked further where used."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def model_name_or_path(text: str) -> str:
    """A model's name or folder (hub.py says which it means, where used): not empty, and a path the operating
    system can look up (not a name too long, not through a symlink loop)."""
    _exists(Path(nonempty(text)).expanduser(), text)
    return text


def choice_list(allowed: tuple[str, ...]) -> Callable[[str], list[str]]:
    """A comma-separated list of some of `allowed` ("train,dev")."""
    def parse(text: str) -> list[str]:
        items = [item.strip() for item in text.split(",")]
        unknown = [item for item in items if item not in allowed]
        if unknown or not text.strip():
            raise argparse.ArgumentTypeError(f"must be a comma-separated list of {', '.join(allowed)}, "
                                             f"got {text!r}")
        return items
    parse.__name__ = "list"
    parse.checked, parse.metavar = True, ",".join(allowed[:2]) + ",..."
    return parse


def name_weights(allowed: tuple[str, ...]) -> Callable[[str], tuple[tuple[str, float], ...]]:
    """Comma-separated name=factor pairs, each name one of `allowed` and each factor > 0 ("sts=2,sst=1.5")."""
    factor = real(0.0, low_open=True)

    def parse(text: str) -> tuple[tuple[str, float], ...]:
        pairs = []
        for item in text.split(","):
            name, equals, value = item.strip().partition("=")
            if not equals or name not in allowed:
                raise argparse.ArgumentTypeError(f"must be comma-separated name=factor pairs, the names from "
                                                 f"{', '.join(allowed)} (e.g. {allowed[-1]}=2), got {text!r}")
            try:
                pairs.append((name, factor(value)))
            except argparse.ArgumentTypeError as error:
                raise argparse.ArgumentTypeError(f"{name}'s factor {error}") from None
        if len({name for name, _ in pairs}) < len(pairs):
            raise argparse.ArgumentTypeError(f"names a task twice: {text!r}")
        return tuple(pairs)
    parse.__name__ = "name=factor list"
    parse.checked, parse.metavar = True, "NAME=X,..."
    return parse


def module_names(text: str) -> str:
    """Comma-separated module-name suffixes ("query,value", "attention.output.dense"), or "all-linear"
    (--lora-targets); whether they name layers of the model is checked once it is loaded."""
    items = [item.strip() for item in text.split(",")]
    if not all(item and all(c.isalnum() or c in "._-" for c in item) for item in items):
        raise argparse.ArgumentTypeError(f"must be all-linear or comma-separated module names such as "
                                         f"query,value, got {text!r}")
    return ",".join(items)


# Every flag that takes a value goes through a checking type (or has choices): tests/test_command_line.py
# enumerates every job's parser and finds any that does not. The checks mark their types so, and name the
# value --help shows (`add_flag`):
for _check, _metavar in ((existing_file, "FILE"), (existing_dir, "DIR"), (output_dir, "DIR"),
                         (output_file, "FILE"), (nonempty, "NAME"), (model_name_or_path, "NAME"),
                         (module_names, "NAMES")):
    _check.checked, _check.metavar = True, _metavar
