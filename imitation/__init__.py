"""A plain imitation learner that judges demonstration datasets: it knows no SAC and writes no datasets."""
