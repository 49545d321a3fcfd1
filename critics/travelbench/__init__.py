"""TravelBench (Cheng et al., 2025): loaders, the ten tools, the episode generator, the judge and the evaluator."""
