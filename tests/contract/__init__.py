"""The contract every backend keeps through `labs.lifecycle` (tests/contract/test_lifecycle.py)."""
