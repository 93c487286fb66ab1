"""Random ops (CANN ops-math ``random/``).

* random: StatelessRandomUniformV2, StatelessRandomNormalV2, StatelessBernoulli, dropout masks, StatelessRandperm,
  MultinomialWithReplacement
"""
