"""The evaluation protocol (pusht-eval-v1): the episode runner and its metrics, the policy file, loading a policy."""
