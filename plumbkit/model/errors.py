"""The error a user sees when what they gave is not a usable pipeline."""


class PipelineError(ValueError):
    """The object given is not a usable tf.data pipeline; the message says why and what to do."""
