"""The lab directory (what `twin generate` writes and everything reads), its
checks and config differences, and the output directories verbs write."""
