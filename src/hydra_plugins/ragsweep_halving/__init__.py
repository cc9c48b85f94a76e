"""ragsweep's own Hydra sweeper: successive halving on ``dataset.limit`` (``hydra/sweeper=ragsweep_halving``)."""
