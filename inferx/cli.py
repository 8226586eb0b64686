"""The `inferx` command group and `inferx-compile`. User errors print one message, no traceback,
and exit 1; a usage error exits 2 (click's convention)."""

from __future__ import annotations

import sys
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


SPLIT_MARKER = "// -----"


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="inferx")
def main() -> None:
    """InferX: compile HuggingFace LLMs into artifacts that run at the bandwidth limit of Hopper GPUs."""


@main.command("opt")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True), default="-")
@click.option("-p", "--pipeline", default="", help='Passes to run, e.g. "canonicalize,cse,dce".')
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), default="-")
@click.option("--print-ir-after-all", is_flag=True, help="Print the IR to stderr after every pass.")
@click.option("--print-ir-after", "print_after", multiple=True, metavar="NAME",
              help="Print the IR to stderr after each run of pass NAME (repeatable).")
@click.option("--split-input-file", is_flag=True,
              help=f"Treat each chunk between '{SPLIT_MARKER}' lines as its own module; "
                   "report every chunk's error and go on.")
@click.option("--list-passes", is_flag=True, help="List the passes and their options.")
def opt_command(file: str, pipeline: str, output: str, print_ir_after_all: bool,
                print_after: tuple[str, ...], split_input_file: bool, list_passes: bool) -> None:
    """Parse IR text, verify it, run PIPELINE, print the result (like mlir-opt)."""
    from inferx.compiler.ir.textio import IRError, parse_module, verify_module
    from inferx.passes import registry
    from inferx.passes.pipeline import PassManager, PipelineError, describe, parse

    passes = registry()
    if list_passes:
        click.echo(describe(passes))
        return
    unknown_after = [n for n in print_after if n not in passes]
    if unknown_after:
        raise UserError(f"--print-ir-after: unknown pass {unknown_after[0]!r}; the passes are:\n{describe(passes)}")
    try:
        pass_list = parse(pipeline, passes) if pipeline.strip() else []
    except PipelineError as e:
        raise UserError(str(e)) from None

    name = "<stdin>" if file == "-" else file
    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text()
    except OSError as e:
        raise UserError(f"cannot read {file}: {e.strerror}") from None

    def after(p, module) -> None:  # type: ignore[no-untyped-def]
        if print_ir_after_all or p.name in print_after:
            click.echo(f"// -----// IR after {p.name} //----- //\n{str(module)}", err=True)

    chunks = _split(text) if split_input_file else [(0, text)]
    outputs: list[str] = []
    failed = False
    for line_offset, chunk in chunks:
        try:
            module, source = parse_module("\n" * line_offset + chunk, name)
            verify_module(module, source)
            PassManager(pass_list, after).run(module)
            outputs.append(str(module))
        except IRError as e:
            if not split_input_file:
                raise UserError(str(e)) from None
            click.echo(str(e), err=True)
            failed = True
    result = f"\n{SPLIT_MARKER}\n".join(outputs) + "\n"
    if output == "-":
        click.echo(result, nl=False)
    else:
        Path(output).write_text(result)
    if failed:
        sys.exit(1)


def _split(text: str) -> list[tuple[int, str]]:
    """Chunks between ``// -----`` lines, each with the number of lines before it."""
    chunks: list[tuple[int, str]] = []
    current: list[str] = []
    start = 0
    for i, line in enumerate(text.split("\n")):
        if line.strip() == SPLIT_MARKER:
            chunks.append((start, "\n".join(current)))
            current, start = [], i + 1
        else:
            current.append(line)
    chunks.append((start, "\n".join(current)))
    return chunks


@main.command("compile")
@click.argument("model")
@click.option("-o", "--output", required=True, help="Artifact path (a directory, or a .ixa file).")
@click.option("--target", type=click.Choice(["h200", "h100", "sm_90", "cpu"]), default="h200")
def compile_command(model: str, output: str, target: str) -> None:
    """Compile MODEL (an HF checkpoint directory or a GGUF file) into an artifact."""
    raise UserError(
        "inferx compile is not available yet: this version has the ix IR, its passes and the "
        "reference interpreter, but no model frontend or code generator"
    )


def compile_main() -> None:
    """Entry point of `inferx-compile`: the same command as `inferx compile`."""
    compile_command(prog_name="inferx-compile")
