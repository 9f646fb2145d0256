"""Where the data comes from: text sources, the training corpus, evaluation sets, the teacher and its
prefix trajectories (the training targets)."""
