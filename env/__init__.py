"""Environment construction: the PushT wrapper, or any gymnasium Box environment."""

from env.pusht_wrapper import PUSHT_ENV_ID, PushTOptions, PushTWrapper, make_env

__all__ = ["PUSHT_ENV_ID", "PushTOptions", "PushTWrapper", "make_env"]
