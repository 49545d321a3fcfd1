"""NATURAL PLAN (Zheng et al. 2024) as three benchmarks: ``natural_plan/trip``, ``natural_plan/meeting``
and ``natural_plan/calendar``.

Modules: :mod:`.common` (data files, splits, clocks), :mod:`.trip`, :mod:`.meeting`, :mod:`.calendar`
(constraint extraction from the prompt, plan schemas, text <-> plan, the official scoring),
:mod:`.trip_critics`, :mod:`.meeting_critics`, :mod:`.calendar_critics` (the critics),
:mod:`.benchmark` (the Benchmark classes, evaluation and the evaluate command) and :mod:`.replay`
(the stored Gemini answers as iteration 0).
"""
