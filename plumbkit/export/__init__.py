"""Export: a plan written into the user's own source (``ast`` call sites, minimal text edits).

Pure Python; may import ``plumbkit.model`` only (the plan's vocabulary).
"""

from .source import CodegenError, rewrite_source

__all__ = ["CodegenError", "rewrite_source"]
