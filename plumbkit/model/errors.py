"""The error a user sees when what they gave is not a usable pipeline, and errors said in one line."""

import re


class PipelineError(ValueError):
    """The object given is not a usable tf.data pipeline; the message says why and what to do."""


def first_line(error: "str | BaseException", limit: int = 300) -> str:
    """What went wrong, in one line: TensorFlow's errors run over many lines (op names, stacks,
    ``{{function_node ...}}`` prefixes, ``[Op:...]`` suffixes); the first line says what happened,
    and a serialization failure says it in its "Failed to serialize ..." sentence."""
    if isinstance(error, BaseException):
        text = getattr(error, "message", None) or str(error)
    else:
        text = error
    said = re.search(r"Failed to serialize[^\[]*", text)
    if said:
        return said.group(0).strip()[:limit]
    text = re.sub(r"\{\{[^}]*\}\}\s*", "", text)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return type(error).__name__ if isinstance(error, BaseException) else text
    return re.sub(r"\s*\[Op:\w+\].*$", "", lines[0])[:limit]
