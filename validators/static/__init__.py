"""static."""
