"""What every ``inferx`` command shares: the command group, user errors (one message, no
traceback, exit 1) and the runtime's errors as user errors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click


class UserError(click.ClickException):
    """An error in what the user gave us: one message, no traceback, exit code 1.

    Messages that already carry a location (``file:line:col: error: ...``) print as they are;
    others get an ``error:`` prefix.
    """

    def show(self, file=None) -> None:  # type: ignore[no-untyped-def]
        located = ": error: " in self.message.split("\n", 1)[0]
        click.echo(self.message if located else f"error: {self.message}", err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="inferx")
def main() -> None:
    """InferX: compile HuggingFace LLMs into artifacts that run at the bandwidth limit of Hopper GPUs."""


def _check_output_file(value: str, option: str) -> None:
    """A UserError unless ``value`` can be written as a file: not a directory, in a directory."""
    path = Path(value)
    if path.is_dir():
        raise UserError(f"{option} {value}: is a directory, not a file")
    if not path.parent.is_dir():
        raise UserError(f"{option} {value}: no directory {path.parent}")


def _runtime_errors() -> tuple[type[BaseException], ...]:
    from inferx.runtime.artifact import ArtifactError
    from inferx.runtime.cuda_driver import CudaError
    from inferx.runtime.session import SessionError

    return (OSError, ArtifactError, SessionError, CudaError)


def _one_line(e: BaseException) -> str:
    """The error's message on one line; an OSError names its file."""
    if isinstance(e, OSError) and e.filename is not None and e.strerror:
        text = f"{e.filename}: {e.strerror}"
    else:
        text = str(e) or type(e).__name__
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


@contextmanager
def _user_errors(kinds: tuple[type[BaseException], ...]) -> Iterator[None]:
    """Turns the given exception types into a one-line UserError; anything else is a bug and keeps
    its traceback."""
    try:
        yield
    except kinds as e:
        raise UserError(_one_line(e)) from None
