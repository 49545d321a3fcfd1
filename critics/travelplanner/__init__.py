"""TravelPlanner (sole-planning): data, indexed database store, official and strict checks, critics,
evaluator, benchmark class and a greedy baseline.

Modules:

* :mod:`.data`      loading the train / validation / validation-ref splits into Problems
* :mod:`.store`     the database tables in an indexed SQLite file, with memoised keyed lookups
* :mod:`.text`      the entry parsers the official evaluation uses ("Name, City", "from A to B")
* :mod:`.official`  the official commonsense and hard checks, bug for bug
* :mod:`.strict`    the sound reading of every check (whatever passes strict passes official)
* :mod:`.critics`   the 13 registered critics
* :mod:`.evaluate`  per-plan evaluation and the official aggregation (``eval.py``)
* :mod:`.benchmark` the :class:`~critics.travelplanner.benchmark.TravelPlanner` benchmark
* :mod:`.greedy`    the paper's greedy-search baseline
"""
