"""Render: results as text (terminals), static HTML (notebooks) and matplotlib figures.

Presentation only, never computing: reads ``plumbkit.model`` and ``plumbkit.analysis`` records
and the engine's result objects (imported for annotations only).
"""
