"""Failure drills (`twin drill`): the cases of a fault set, their run on a
Dask cluster or a live twin, and the report ranking them (docs/drills.md)."""
