"""The integration tier: live twins (namespaces, FRR, root) and tests that start processes."""
