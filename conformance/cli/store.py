"""`pullspec store`: commands on a store directory (RocketMQ's commitlog/ and consumequeue/)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from pullspec.spec.config import DEFAULT_MESSAGE_DELAY_LEVEL
from pullspec.spec.delay import parse_delay_levels
from pullspec.spec.errors import PullspecError
from pullspec.spec.profiles import Profile


@click.group("store")
def store_group() -> None:
    """Commands on a store directory, as a RocketMQ 4.x broker or the fast store writes it."""


@store_group.command("verify")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--profile", type=click.Choice(["4.7", "4.9"]), default="4.9", show_default=True)
@click.option(
    "--message-delay-level",
    default=DEFAULT_MESSAGE_DELAY_LEVEL,
    show_default=True,
    help="The broker's messageDelayLevel (schedule-topic entries hold delivery times).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def verify_command(directory: Path, profile: str, message_delay_level: str, as_json: bool) -> None:
    """Walk every commit-log record (magic code, sizes, body CRC, fields, topic, properties) and
    every consume-queue entry (it points at a record of its topic and queue, whose offset, size
    and tags code agree) of DIRECTORY, read-only, file sizes inferred from the files; print each
    problem as FILE@POSITION: WHAT. Exit 0 when clean, 1 when problems are found, 2 when
    DIRECTORY is not a store."""
    from pullspec.fast.integrity import verify_store  # numpy only when the command runs

    try:
        report = verify_store(
            directory, Profile.parse(profile), parse_delay_levels(message_delay_level)
        )
    except (PullspecError, OSError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    if as_json:
        click.echo(json.dumps(report.to_json()))
    else:
        for problem in report.problems:
            click.echo(str(problem))
        for note in report.notes:
            click.echo(f"note: {note}")
        click.echo(report.summary())
    sys.exit(0 if report.ok else 1)


COMMANDS = (store_group,)
