"""Judging: the bounds, references and claims a campaign's numbers are held against, the comparisons, findings and
verdicts drawn from them, the report and the history that show them (docs/architecture.md, "Layers")."""
