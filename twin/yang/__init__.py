"""yang."""
