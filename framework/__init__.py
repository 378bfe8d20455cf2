"""framework: plugin-based reinforcement-learning experiments, composed by Hydra, tracked in MLflow."""

import time

__version__ = "0.1.0"

#: When this process imported the framework: the start of a run launched from the command line.
STARTED_AT = time.time()
