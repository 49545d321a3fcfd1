"""A plugin module that fails to import, to test that a requested broken plugin stops the run."""

raise ImportError("this example plugin is broken on purpose (missing dependency 'frobnicate')")
