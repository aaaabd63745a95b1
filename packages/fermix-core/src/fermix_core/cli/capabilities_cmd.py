"""``fermix capabilities``: the tools the agent has, and which a guest sees."""

from __future__ import annotations

import re

import typer

from fermix_core.cli.app import APP_SETTINGS
from fermix_core.cli.output import print_json, table

app = typer.Typer(help="List the agent's tools and who can use them.", **APP_SETTINGS)


#: A "." that ends a sentence: followed by whitespace or the end of the text.
_SENTENCE_END = re.compile(r"\.(?=\s|$)")


def first_sentence(text: str) -> str:
    """Up to the first full stop that ends a sentence, so ``[fermix_core.routing]`` or
    ``USER.md`` inside a description stay whole."""
    text = text.strip()
    match = _SENTENCE_END.search(text)
    return text[: match.start()] if match else text


@app.command()
def capabilities(
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """List the agent's tools and who can use them."""
    from fermix_core.cli.capabilities import describe_capabilities
    from fermix_core.cli.context import load_for_cli

    report = describe_capabilities(load_for_cli().registry)
    if as_json:
        print_json(report)
        return
    rows = [
        (
            t["name"],
            t["policy"],
            "yes" if t["guest"] else "no",
            "inline" if t["inline"] else "deferred",
            first_sentence(t["description"]),
        )
        for t in report["tools"]
    ]
    typer.echo(table(("TOOL", "POLICY", "GUEST", "SCHEMA", "WHAT IT DOES"), rows))
