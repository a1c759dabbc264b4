"""netns."""
