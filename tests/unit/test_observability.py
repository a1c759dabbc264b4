"""Not-observable rows say how to make them observable; the registry's table of what each
backend observes agrees with the backends themselves."""

from __future__ import annotations

import importlib

from labs import registry


def test_the_table_of_what_backends_observe_is_theirs() -> None:
    for name, spec in registry.BACKENDS.items():
        module, cls = spec.split(":")
        assert registry.OBSERVES[name] == getattr(importlib.import_module(module), cls).capabilities


def test_each_missing_capability_gets_a_way_to_observe_it() -> None:
    assert registry.how_to_observe({"pfc", "queues"}, "netns") == (
        "run with --sim (the simulator observes pfc, queues)"
    )
    assert registry.how_to_observe({"bgp"}, "sim") == "run on netns or clab (--backend netns)"
    assert registry.how_to_observe({"bgp"}, "fake", "--twin-backend") == (
        "run on netns or clab (--twin-backend netns)"
    )
    assert registry.how_to_observe({"pfc"}, "fake", "--twin-backend") == (
        "run with --twin-backend sim (the simulator observes pfc)"
    )
    assert registry.how_to_observe({"pfc", "bgp"}, "fake") == "no single backend observes bgp, pfc"
