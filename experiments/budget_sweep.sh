#!/usr/bin/env bash
# Final pass rate against the iteration budget (1..20): one run at budget 20; the report reads the
# plan at every smaller budget from the run's records (budget_curve.png, budget_curve.csv).
#
#   experiments/budget_sweep.sh                        # openai gpt-4o-mini
#   MODEL=gpt-4-turbo experiments/budget_sweep.sh metacontroller.max_iterations=30
set -euo pipefail
LLM="${LLM:-openai}"
MODEL="${MODEL:-gpt-4o-mini}"
OUT="${OUT:-runs/budget_sweep/${MODEL//\//_}-$(date +%Y-%m-%d_%H-%M-%S)}"

modulo check +experiment=budget_sweep "llm=${LLM}" "llm.model=${MODEL}" "hydra.run.dir=${OUT}/.check" "$@"
ran=0
modulo run +experiment=budget_sweep "llm=${LLM}" "llm.model=${MODEL}" "run.dir=${OUT}" "hydra.run.dir=${OUT}" "$@" || ran=$?
# 0: every problem ran; 1: some ended in error, and the report marks them; anything else: nothing to report
if [ "$ran" -gt 1 ]; then exit "$ran"; fi
modulo report "${OUT}"
exit "$ran"
