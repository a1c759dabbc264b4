"""intent."""
