"""AlphaZero for 15x15 Gomoku (freestyle, five in a row): 4 residual blocks of 32 channels, trained
by `python -m framework experiment=gomoku_15x15` for 180 min on a 2-core CPU (997,536 self-play
moves, 24,268 games; benchmarks/gomoku_learning.py)."""
