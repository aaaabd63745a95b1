# ruff: noqa: E501  (SQL lines are kept exactly as SQLAlchemy emits them)
"""The conversation store's current schema as SQL, compiled once from the SQLModel models.

Creating a fresh ``memory.db`` runs these statements with the standard library alone, so a
daemon's first start does not import SQLAlchemy (about 20 MiB resident for the rest of the
process's life) just to build five tables. :mod:`fermix_core.store.models` stays the source
of truth: ``tests/store/test_stored_ddl.py`` compiles the models and requires exactly these
statements, in this order; after changing a model, regenerate this file with
``python -m fermix_core.store.ddl`` (it prints the module from the models).
"""

from __future__ import annotations

#: ``CREATE TABLE`` / ``CREATE INDEX ... IF NOT EXISTS``, tables in dependency order, each
#: table followed by its indexes sorted by name — what SQLAlchemy's SQLite dialect emits.
STATEMENTS: tuple[str, ...] = (
    (
        "\n"
        "CREATE TABLE IF NOT EXISTS conversations (\n"
        "\tid INTEGER NOT NULL, \n"
        '\t"key" VARCHAR NOT NULL, \n'
        "\tchannel VARCHAR NOT NULL, \n"
        "\tchat_id VARCHAR NOT NULL, \n"
        "\tthread_id VARCHAR, \n"
        "\twindow_start_seq INTEGER NOT NULL, \n"
        "\tsummary_message_id INTEGER, \n"
        "\tcreated_at FLOAT NOT NULL, \n"
        "\tupdated_at FLOAT NOT NULL, \n"
        "\tPRIMARY KEY (id), \n"
        '\tUNIQUE ("key")\n'
        ")\n"
        "\n"
    ),
    (
        "\n"
        "CREATE TABLE IF NOT EXISTS counters (\n"
        "\tname VARCHAR NOT NULL, \n"
        "\tvalue INTEGER NOT NULL, \n"
        "\tPRIMARY KEY (name)\n"
        ")\n"
        "\n"
    ),
    (
        "\n"
        "CREATE TABLE IF NOT EXISTS schema_version (\n"
        "\tcomponent VARCHAR NOT NULL, \n"
        "\tversion INTEGER NOT NULL, \n"
        "\tPRIMARY KEY (component)\n"
        ")\n"
        "\n"
    ),
    (
        "\n"
        "CREATE TABLE IF NOT EXISTS turns (\n"
        "\tid INTEGER NOT NULL, \n"
        "\tconversation_id INTEGER NOT NULL, \n"
        "\tuser_message_id INTEGER, \n"
        "\tstatus VARCHAR NOT NULL, \n"
        "\tspeaker VARCHAR NOT NULL, \n"
        "\tsender_id VARCHAR, \n"
        "\tsession_id VARCHAR NOT NULL, \n"
        "\trun_profile VARCHAR NOT NULL, \n"
        "\tmodel VARCHAR, \n"
        "\tprovider VARCHAR, \n"
        "\tinput_tokens INTEGER NOT NULL, \n"
        "\toutput_tokens INTEGER NOT NULL, \n"
        "\tcached_input_tokens INTEGER NOT NULL, \n"
        "\treasoning_tokens INTEGER NOT NULL, \n"
        "\tstarted_at FLOAT NOT NULL, \n"
        "\tfinished_at FLOAT, \n"
        "\tPRIMARY KEY (id), \n"
        "\tCONSTRAINT ck_turns_status CHECK (status = 'started' OR status = 'committed' OR status = 'stopped' OR status = 'failed' OR status = 'empty'), \n"
        "\tCONSTRAINT ck_turns_speaker CHECK (speaker = 'owner' OR speaker = 'guest' OR speaker = 'job' OR speaker = 'system'), \n"
        "\tFOREIGN KEY(conversation_id) REFERENCES conversations (id)\n"
        ")\n"
        "\n"
    ),
    (
        "\n"
        "CREATE TABLE IF NOT EXISTS messages (\n"
        "\tid INTEGER NOT NULL, \n"
        "\tconversation_id INTEGER NOT NULL, \n"
        "\tturn_id INTEGER, \n"
        "\tseq INTEGER NOT NULL, \n"
        "\tanchor_seq INTEGER NOT NULL, \n"
        "\tkind VARCHAR NOT NULL, \n"
        "\trole VARCHAR NOT NULL, \n"
        "\tspeaker VARCHAR NOT NULL, \n"
        "\tsender_id VARCHAR, \n"
        "\tsender_name VARCHAR, \n"
        "\tbody VARCHAR NOT NULL, \n"
        "\ttext VARCHAR NOT NULL, \n"
        "\tcreated_at FLOAT NOT NULL, \n"
        "\tPRIMARY KEY (id), \n"
        "\tCONSTRAINT uq_messages_conversation_seq UNIQUE (conversation_id, seq), \n"
        "\tCONSTRAINT ck_messages_kind CHECK (kind = 'message' OR kind = 'summary' OR kind = 'marker'), \n"
        "\tCONSTRAINT ck_messages_role CHECK (role = 'system' OR role = 'user' OR role = 'assistant' OR role = 'tool'), \n"
        "\tCONSTRAINT ck_messages_speaker CHECK (speaker = 'owner' OR speaker = 'guest' OR speaker = 'job' OR speaker = 'system'), \n"
        "\tFOREIGN KEY(conversation_id) REFERENCES conversations (id), \n"
        "\tFOREIGN KEY(turn_id) REFERENCES turns (id)\n"
        ")\n"
        "\n"
    ),
)


def compile_from_models() -> tuple[str, ...]:
    """The statements SQLAlchemy compiles from the models now (imports SQLAlchemy)."""
    from sqlalchemy.dialects import sqlite as sqlite_dialect
    from sqlalchemy.schema import CreateIndex, CreateTable

    from fermix_core.store.models import store_registry

    dialect = sqlite_dialect.dialect()
    statements: list[str] = []
    for table in store_registry.metadata.sorted_tables:
        statements.append(str(CreateTable(table, if_not_exists=True).compile(dialect=dialect)))
        for index in sorted(table.indexes, key=lambda ix: ix.name or ""):
            statements.append(str(CreateIndex(index, if_not_exists=True).compile(dialect=dialect)))
    return tuple(statements)


if __name__ == "__main__":  # pragma: no cover - a maintainer's regeneration aid
    for statement in compile_from_models():
        print(repr(statement))
