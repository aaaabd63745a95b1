"""The ``fermix`` command line.

``entry.main`` answers ``--version`` and ``--help`` from :mod:`.commands` alone, without
importing typer, pydantic or any plugin; every other invocation assembles the typer app in
:mod:`.app`, which imports one command group at a time.
"""
