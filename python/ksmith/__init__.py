"""ksmith Python side: the evaluator worker, the probe runner and the reward function."""
