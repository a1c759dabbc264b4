"""The fake backend: the routing model's FIBs and deterministic flows, no root, no processes."""
