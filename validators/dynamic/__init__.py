"""Dynamic validators: verdicts from a run's observations (and the lab's configs)."""
