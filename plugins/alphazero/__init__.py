"""AlphaZero: a policy-value network, self-play by tree search, training, gating, evaluation."""
