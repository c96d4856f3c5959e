"""What a scenario found, as one row of the reliability table, and the assertion on it."""

from __future__ import annotations

import dataclasses

# The guarantees: each of these must be 0 after every scenario (see docs/reliability.md).
GUARANTEED = ("lost", "duplicated", "stuck", "half_moved", "spurious_stalls", "undrained")
HEADER = (
    "| scenario | jobs | faults injected | lost | duplicated | stuck | half-moved "
    "| spurious stalls | undrained | exec dups | result |"
)
RULE = "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"
SAMPLE = 5


@dataclasses.dataclass
class Findings:
    """The counts of one scenario; each list holds the ids (or names) found in that category.

    ``spurious_stalls`` is ``None`` where workers are killed or stopped on purpose and a stall
    is the expected recovery. ``exempt`` names guarantees this scenario only measures (a
    fault the configuration does not protect against, such as AOF ``everysec``). ``broken``
    holds the scenario's own guarantees that do not hold (name -> ids); each fails it too.
    ``ran`` is False for a scenario that could not run (its row shows no figures).
    """

    scenario: str
    jobs: int
    faults: str = ""
    lost: list[str] = dataclasses.field(default_factory=list)
    duplicated: list[str] = dataclasses.field(default_factory=list)
    stuck: list[str] = dataclasses.field(default_factory=list)
    half_moved: list[str] = dataclasses.field(default_factory=list)
    spurious_stalls: list[str] | None = dataclasses.field(default_factory=list)
    undrained: list[str] = dataclasses.field(default_factory=list)
    exec_dups: int = 0
    seconds: float = 0.0
    notes: list[str] = dataclasses.field(default_factory=list)
    exempt: tuple[str, ...] = ()
    broken: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    ran: bool = True

    def violations(self) -> dict[str, list[str]]:
        """Guarantees broken: category -> ids."""
        broken = {}
        for name in GUARANTEED:
            found = getattr(self, name)
            if name not in self.exempt and found:
                broken[name] = found
        broken.update((name, found) for name, found in self.broken.items() if found)
        return broken

    def _cell(self, name: str) -> str:
        found = getattr(self, name)
        if not self.ran:
            return "-"
        if found is None:
            return "n/a"
        text = str(len(found))
        return f"{text} (measured)" if name in self.exempt else text

    def row(self) -> str:
        broken = self.violations()
        names = ", ".join(n.replace("_", " ") for n in broken)
        result = f"FAIL: {names}" if broken else "pass"
        cells = [self.scenario, str(self.jobs), self.faults]
        cells += [self._cell(n) for n in GUARANTEED[:5]]
        cells += [self._cell("undrained"), str(self.exec_dups) if self.ran else "-", result]
        return "| " + " | ".join(cells) + " |"

    def detail(self) -> str:
        """The notes and a sample of every broken guarantee, one indented line each."""
        lines = [f"    {note}" for note in self.notes]
        for name, found in self.violations().items():
            lines.append(f"    {name}: {len(found)}, e.g. {found[:SAMPLE]}")
        lines.append(f"    took {self.seconds:.1f}s")
        return "\n".join(lines)

    def check(self) -> None:
        """Fail the scenario when a guarantee is broken."""
        summary = "; ".join(
            f"{len(ids)} {name.replace('_', ' ')} (e.g. {ids[:SAMPLE]})"
            for name, ids in self.violations().items()
        )
        assert not summary, f"{self.scenario}: {summary}\n" + "\n".join(self.notes)


def table(findings: list[Findings]) -> str:
    return "\n".join([HEADER, RULE, *(f.row() for f in findings)])
