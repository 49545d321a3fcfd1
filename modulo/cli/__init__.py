"""The command line. Only this package touches Hydra objects."""
