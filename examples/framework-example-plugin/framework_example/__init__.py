"""Example third-party plugin for framework: the Corridor environment."""
