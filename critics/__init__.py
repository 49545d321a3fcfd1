"""Built-in critics and the benchmark packages they belong to.

Every critic here is registered through the ``modulo.critics`` entry-point group in modulo's
``pyproject.toml``, exactly as a third-party package would register its own.
"""
