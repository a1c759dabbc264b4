"""A change to a lab: its edits applied (incidents, `twin apply`) and its
dynamic review (`twin diff`: the same scenario on the base and the candidate)."""
