"""``hydra/sweeper=ragsweep_halving``: the sweeper's config node, registered with Hydra's ConfigStore."""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore


@dataclass
class HalvingSweeperConf:
    _target_: str = "hydra_plugins.ragsweep_halving.halving_sweeper.HalvingSweeper"
    # the space, as for the basic sweeper: {key: "a,b,c"} (choice(...) and range(...) too)
    params: Optional[Dict[str, str]] = None
    # the fidelity: this key is set to each rung's value (questions per system)
    fidelity: str = "dataset.limit"
    rungs: List[int] = field(default_factory=lambda: [20, 60, 180])
    # systems kept per rung at most: ceil(keep * systems in the rung), at least 1
    keep: float = 0.3333333333333333
    # the objective the promotion ranks and tests; null: the first of sweep.objectives
    objective: Optional[str] = None
    # the chance of dropping, at any rung of the whole sweep, a system whose true mean is the best: the
    # rungs planned to hold two systems or more share it (ragsweep.analysis.search.rung_alphas), each
    # testing by betting on the objective's known range (ragsweep.analysis.best.bounded_drop_p: valid at
    # every n, whatever the distribution); measured in experiments/simulations/sim_halving_sweep.py
    alpha: float = 0.05
    # jobs handed to the launcher at once (null: a whole rung)
    max_batch_size: Optional[int] = None


ConfigStore.instance().store(group="hydra/sweeper", name="ragsweep_halving", node=HalvingSweeperConf, provider="ragsweep")
