"""Training a SAC policy: the run's config, the trainer, its checkpoints and resume, its logging."""
