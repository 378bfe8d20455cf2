"""`hydra/sweeper=optuna`: this project's Hydra sweeper over Optuna (its face: optuna_sweeper)."""
