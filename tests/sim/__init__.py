"""The sim tier: tests that run the packet simulator's C core (`--backend sim`, the hybrid run)."""
