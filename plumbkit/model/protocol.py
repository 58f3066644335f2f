"""How configurations are compared: the measuring protocol and its named presets. Pure Python,
so the command line and the magics can offer the names without importing TensorFlow."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Protocol:
    """How each contender is measured. ``QUICK`` for notebooks and tests, ``FULL`` for the bench."""

    rounds: int = 5
    window: float = 1.0  # seconds per window
    tolerance: float = 0.05  # two consecutive windows within this: steady state
    max_windows: int = 8  # windows tried before measuring anyway (noted)
    fill_limit: float = 60.0  # longest wait for a cache to fill (seconds; noted if hit)
    #: Most rounds added, interleaved like the others, while a speed-up is too noisy to tell
    #: (plumbkit.engine.compare). They can settle it only if the rounds reach 8, where the
    #: interval first drops the extreme ratios.
    extra_rounds: int = 0

    def describe(self) -> str:
        extra = f" (up to {self.extra_rounds} more while the rounds disagree)" if self.extra_rounds else ""
        return (f"{self.rounds} interleaved rounds{extra}; each contender built fresh, caches filled, then "
                f"run until two consecutive {self.window:g} s windows agree within "
                f"{100 * self.tolerance:.0f}%, then one {self.window:g} s window measured")

    def short(self) -> str:
        rounds = f"{self.rounds}–{self.rounds + self.extra_rounds}" if self.extra_rounds else f"{self.rounds}"
        return f"{rounds} rounds of {self.window:g} s windows"


FULL = Protocol(extra_rounds=4)
QUICK = Protocol(rounds=3, window=0.3, max_windows=4, fill_limit=30.0, extra_rounds=5)
#: A first look: three rounds (the fewest that can show a change) of 0.1 s windows, none added;
#: a wide spread, which the comparison reports ("too noisy to tell" when it holds 1).
BRIEF = Protocol(rounds=3, window=0.1, max_windows=2, fill_limit=5.0)
#: The names ``%%plumb --protocol`` and ``plumbkit demo --protocol`` take.
PROTOCOLS = {"brief": BRIEF, "quick": QUICK, "full": FULL}
#: The option's help, one text for both.
PROTOCOL_HELP = (f"how the configurations are compared: brief ({BRIEF.short()}, a first look), "
                 f"quick ({QUICK.short()}, default), full ({FULL.short()}, as the bench)")

__all__ = ["BRIEF", "FULL", "PROTOCOLS", "PROTOCOL_HELP", "Protocol", "QUICK"]
