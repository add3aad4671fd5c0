"""The command-line contract every script shares: exit codes, the one-line bad-input error, checked outputs."""

from __future__ import annotations

import argparse
import math
import os
import stat
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, NoReturn

from common import interrupts
from common.files import WriteError, atomic_file, ensure_writable_dir, tree_state
from common.ownership import refusal

# The exit codes every script shares (each one's --help lists them).
EXIT_SHORT = 1  # the work ran and fell short: fewer episodes than asked, or --verify found a problem
EXIT_BAD_INPUT = 2


EXIT_WRITE_FAILED = 74  # sysexits' EX_IOERR: a file could not be written (full disk, I/O error); nothing torn


EXIT_INTERRUPTED = 130


class BadInput(Exception):
    """A problem with the command line or its files, phrased as one line that says what to do."""


class CommandParser(argparse.ArgumentParser):
    """argparse under the contract, for every command and tool (and, as their parser_class, subcommands): a usage
    error (a missing value, an unknown option, a bad choice) is one stderr line and exit 2; argparse's own prints
    the whole usage before it."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"error: {' '.join(message.splitlines())}; see --help\n")

    def parse_known_args(self, args=None, namespace=None):  # noqa: ANN001, ANN201 (argparse's own signature)
        """argparse's, refusing an option given twice: argparse keeps the last silently (`--format lerobot --format
        zarr` would write zarr only). Options that gather values (append, count) may repeat."""
        words = sys.argv[1:] if args is None else list(args)
        seen: dict[str, str] = {}
        for word in words:
            if word == "--":
                break
            if not word.startswith("-") or word in ("-", "-h", "--help"):
                continue
            flag = word.split("=", 1)[0]
            matches = [option for option in self._option_string_actions if option.startswith(flag)]
            action = self._option_string_actions.get(flag) or (  # an abbreviation argparse would accept
                self._option_string_actions[matches[0]] if self.allow_abbrev and len(matches) == 1 else None)
            if action is None or isinstance(action, argparse._AppendAction | argparse._CountAction):
                continue
            if action.dest in seen:
                self.error(f"{seen[action.dest]} is given twice (as {flag} again); give it once")
            seen[action.dest] = flag
        return super().parse_known_args(args, namespace)


def counted(number: int, noun: str) -> str:
    """`1 episode`, `3 episodes`: a count in a message with its noun agreeing (nouns with a plain -s plural)."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


def first_line(err: BaseException) -> str:
    """An exception's message cut to its first line (its type where it has none): third-party errors run long."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def run_command(body: Callable[[], int], interrupted: str) -> int:
    """A script's body under the contract: bad input, a failed write and Ctrl-C or SIGTERM each become one stderr
    line (`interrupted` for a signal, noted where it lands and acted on at a safe point: common/interrupts.py) and
    their exit code."""
    try:
        with interrupts.handled():
            interrupts.check()  # a signal noted while the command loaded (interrupts.note_until_exit)
            return body()
    except BadInput as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except WriteError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_WRITE_FAILED
    except (interrupts.Interrupted, KeyboardInterrupt):
        print(interrupted, file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        interrupts.outcome_decided()


def check_finite(args: argparse.Namespace | dict) -> None:
    """Refuse NaN and infinities in any float option, and integers beyond 64 bits in any int option: argparse's
    float() accepts the first (a NaN noise level would silently act as none and be recorded as invalid JSON), its
    int() the second (numpy, torch and itertools then fail deep inside, with a traceback)."""
    for key, value in (vars(args) if isinstance(args, argparse.Namespace) else args).items():
        for number in value if isinstance(value, list) else [value]:
            if isinstance(number, float) and not math.isfinite(number):
                raise BadInput(f"--{key.replace('_', '-')} must be a finite number, got {number}")
            if isinstance(number, int) and not isinstance(number, bool) and not -2**63 <= number < 2**63:
                raise BadInput(f"--{key.replace('_', '-')} must be within 64 bits (below 2**63), got {number}")


def read_input_file(path: str | Path, option: str, advice: str, limit: int) -> bytes:
    """The bytes of a user's input file, at most `limit` of them: a regular file, checked before it is opened (a
    FIFO's open waits for a writer, deaf to Ctrl-C; a device such as /dev/zero never ends), or one line of BadInput
    ending in `advice`."""
    if not str(path):
        raise BadInput(f"{option} is empty; {advice}")
    try:
        kind = os.stat(path).st_mode
        if stat.S_ISDIR(kind):
            raise BadInput(f"{option} {str(path)!r} is a folder; {advice}")
        if not stat.S_ISREG(kind):
            raise BadInput(f"{option} {str(path)!r} is not a regular file (a device, pipe or socket); {advice}")
        with open(path, "rb") as handle:
            raw = handle.read(limit + 1)
    except FileNotFoundError:
        raise BadInput(f"{option} {str(path)!r} does not exist; {advice}") from None
    except OSError as err:
        raise BadInput(f"{option} {str(path)!r} cannot be read ({err.strerror or err}); {advice}") from None
    if len(raw) > limit:
        raise BadInput(f"{option} {str(path)!r} is over {limit // 1024} KiB, larger than any such file; {advice}")
    return raw


@dataclass(frozen=True)
class OutputFile:
    """A file a command writes for the user, as it stood when the run checked it, before any work (`found`:
    `tree_state`, empty for no file). `open` / `write` put the new bytes in place (temp file, fsync, rename) only if
    what stands there is still what was found: a file that appeared while the run worked is never replaced, nor
    one that changed after --overwrite's check said it was ours. Picklable: a worker may write it."""

    path: Path
    flag: str
    found: dict

    @contextmanager
    def open(self) -> Iterator[BinaryIO]:
        with atomic_file(self.path, put=self._put) as handle:
            yield handle

    def write(self, data: bytes) -> None:
        with self.open() as handle:
            handle.write(data)

    def _put(self, temp: str, path: Path) -> None:
        if tree_state(path) == self.found:
            if self.found:  # the file checked as ours, unchanged
                os.replace(temp, path)
                return
            try:
                os.link(temp, path)  # a link never replaces a file, not even one made this instant
                return
            except FileExistsError:
                pass
            except OSError:  # a file system without hard links: the check above is the guard
                os.replace(temp, path)
                return
        kept = _aside(path)
        os.rename(temp, kept)
        raise BadInput(f"{str(path)!r} {'changed' if self.found else 'appeared'} while this run worked and was not "
                       f"touched; the new {self.flag} is {str(kept)!r}: move it yourself, or run again")


def _aside(path: Path) -> Path:
    """A free name beside `path` for a result that could not be put in place: path.new, path.new2..."""
    n = 1
    while os.path.lexists(candidate := path.with_name(f"{path.name}.new{n if n > 1 else ''}")):
        n += 1
    return candidate


def output_file(path: str | Path, flag: str) -> OutputFile:
    """The output at `path` as it stands now, to be written later through `OutputFile`."""
    return OutputFile(Path(path), flag, tree_state(path))


def check_distinct_outputs(outputs: dict[str, str | None]) -> None:
    """Two output options (flag: path) naming one file, however spelt, would have the later write replace the
    earlier one after all the work: refused before it."""
    named: dict[Path, str] = {}
    for flag, path in outputs.items():
        if not path:
            continue
        same = Path(path).resolve()
        if same in named:
            raise BadInput(f"{named[same]} and {flag} both name {str(same)!r}; give each its own file")
        named[same] = flag


def check_output_file(path: str | None, flag: str, overwrite: bool, ours: Callable[[Path], bool],
                      what: str) -> OutputFile | None:
    """An output file may be new, or replaced with --overwrite when it is one this project wrote (`ours` says, from
    its content: common/ownership.py's stamps): a user's file of the same name, or one of ours edited since, is
    never overwritten. Its folder is checked apart (`check_writable_dir`), once the inputs are known to be good, so
    a refused run leaves no folder behind. The `OutputFile` to write it through (None without a path)."""
    if path is None:
        return None
    if not path:
        raise BadInput(f"{flag} is empty; give a file path, or leave {flag} out")
    out = Path(path)
    refuse_symlink(out, flag)
    refuse_inside_dataset(out, flag)
    if out.is_dir():
        raise BadInput(f"{flag} {str(out)!r} is a folder; give a file path such as {out / ('out' + out.suffix)}")
    if out.exists() and not overwrite:
        raise BadInput(f"{str(out)!r} already exists; pass --overwrite to replace it or choose another {flag}")
    if out.exists() and not ours(out):
        raise BadInput(f"--overwrite replaces only {what}, and {str(out)!r} is not one; nothing was touched; choose "
                       f"another {flag}")
    return output_file(out, flag)


def refuse_symlink(path: Path, option: str) -> None:
    """The one rule for links: no output is written through a symbolic link (a write or a removal there would reach
    files elsewhere that the run never checked)."""
    if path.is_symlink():
        raise BadInput(f"{option} {str(path)!r} is a symbolic link; outputs are never written through one: give the "
                       f"real path")


def refuse_inside_dataset(path: Path, option: str) -> None:
    """The one rule for outputs beside datasets: none is written inside a folder of ours (a dataset, a collection,
    a staging folder: common.ownership.folder_of_ours), which would then fail its checksums, or swap the file into
    a dataset, or delete it with the staging folder (a dataset's own writers build it in DIR.partial, beside it)."""
    if (problem := refusal(path, option, "write it outside that folder")) is not None:
        raise BadInput(problem)


def check_writable_dir(directory: str | Path, option: str) -> list[Path]:
    """Create `directory` and prove a file can be written there, before any episode runs; the folders created (for
    `remove_created_dirs` when the run is refused later)."""
    if not str(directory):  # Path("") would be the working directory
        raise BadInput(f"{option} is empty; give a folder path, or leave {option} out")
    directory = Path(directory)
    refuse_symlink(directory, option)
    refuse_inside_dataset(directory, option)
    try:
        return ensure_writable_dir(directory)
    except OSError as err:
        raise BadInput(f"{err} (for {option}); choose a writable path") from None
