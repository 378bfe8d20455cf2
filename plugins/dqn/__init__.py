"""Our DQN: Q network, target network, epsilon-greedy acting with schedules, replay."""
