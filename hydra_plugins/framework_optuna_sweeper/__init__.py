"""`hydra/sweeper=optuna`: this project's Hydra sweeper over Optuna (framework.optuna_sweeper)."""
