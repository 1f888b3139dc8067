"""The engine: a campaign's config, its plan, the stacks and launchers that run its points, and the records kept and
aggregated from them (docs/architecture.md, "Layers")."""
