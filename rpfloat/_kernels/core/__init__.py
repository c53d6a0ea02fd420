"""Integer-only pieces that every backend compiles: no array loops, no CPU tricks."""
