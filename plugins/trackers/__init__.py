"""Built-in trackers: MLflow (the default) and none."""
