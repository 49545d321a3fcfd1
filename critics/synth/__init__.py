"""Synthesized problem families with solver oracles: ``synth/tasks``, ``synth/calendar``, ``synth/trip``.

* :mod:`.family` the shared machinery: incremental Z3 synthesis (PDoctor's Alg. 1) with a witness
  plan, optional uniqueness by blocking clauses, injected contradictions, unsat-core explanations,
  Z3 evaluation of concrete plans;
* :mod:`.tasks`, :mod:`.calendar`, :mod:`.trip` the three families (constraint kinds, encodings,
  wordings, query and plan parsers, mutants);
* :mod:`.benchmark` the registered benchmarks (``benchmark.n=50 benchmark.seed=1``, ``benchmark.path=``),
  evaluation (solved, abstention, wrongful abstention) and ``variant`` for error dissection;
* :mod:`.critics` one derived binary critic per constraint kind;
* :mod:`.audit` critic mutation testing (``modulo critics audit BENCHMARK``);
* :mod:`.cli` the click commands of ``modulo synth`` and ``modulo bench synth/FAMILY oracle-script``
  (``write_set`` writes a fixed set of problems to JSONL).
"""
