"""A drill's cases on the simulator, as a worker plays them: the unfaulted lab built once
(its files checked, deployed on the simulator, the simulator's network and the routing read
from its configs), each case applied to it as a delta (its faults only: the scenario checked
again, a timeline, the simulation) and judged in memory (`Held` observations: the files a
run directory would hold, parsed and checked as they would be read from disk, never
written). A case's run directory is given back only when asked (`twin drill --runs`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

from labs import registry
from labs.backend import quiet
from labs.lifecycle import Managed
from twin import safeio
from twin.drill.cases import Case, Outcome, When, outcome, with_faults
from twin.lab import check as labcheck
from twin.lab.directory import Lab
from twin.scenario import model as scenarios
from twin.scenario import plan, player
from twin.scenario.observations import FABRIC_BYTES, Held, files
from twin.verdict import verdict

SCENARIO = "scenario.yaml"
"""The name a case's scenario is checked under (its run directory's)."""
RUN = "drill-case"
"""The run directory a held run stands for, under the lab's `runs` (never written)."""


@dataclass
class Unfaulted:
    """A lab on the simulator without a fault, with what every case of a drill shares."""

    lab: Lab
    scenario: dict[str, Any]
    """The drill's scenario as data (its faults replaced by each case's)."""
    sim: Managed
    fabric: bytes

    @classmethod
    def build(cls, lab: Lab, scenario: dict[str, Any]) -> Unfaulted:
        """Check the lab, deploy it on the simulator when it is not (whose backend keeps its
        network and routing between plays while its files stay as they are), and read its
        intent."""
        sim = registry.get("sim")
        if sim.running(lab):
            labcheck.check(lab, live=True, applied=False)
        else:
            sim.deploy(lab, quiet)  # checks the lab first
        fabric = safeio.read(lab.path / "fabric.yaml", FABRIC_BYTES) or b""
        return cls(lab, scenario, sim, fabric)

    def play(self, case: Case, when: When) -> tuple[Outcome, dict[str, str | bytes]]:
        """One case played and judged in memory: its outcome and its run directory's files
        (name -> content, as `twin.scenario.observations.save` writes them)."""
        start, cpu = time.monotonic(), time.process_time()
        loaded = scenarios.checked(with_faults(self.scenario, case, when), self.lab, SCENARIO)
        timeline = plan.timeline(self.lab, loaded)
        played = self.sim.play(self.lab, timeline, quiet)
        out = self.lab.path / "runs" / RUN
        run = player.record(out, self.lab, loaded, self.sim, played)
        content = {SCENARIO: scenarios.dump(loaded), **files(run, played, self.fabric)}
        obs = Held(out, content=content)
        results = verdict.evaluate(self.lab, obs, loaded.validate_)
        done = outcome(case.label, obs, results, time.monotonic() - start)
        return replace(done, cpu=round(time.process_time() - cpu, 3)), content
