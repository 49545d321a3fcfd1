#!/usr/bin/env bash
# The methods of Table 1 of the LLM-Modulo travel-planning paper for one model: Direct, CoT and LLM-Modulo
# with the critic subsets [All], [Common], [Hard], [Json] at budget 10 (six runs), then the report. They
# run on validation-ref, 129 of the paper's 180 validation queries (9 of its 60 easy ones): the figures are
# not a reproduction of the paper's (GPT-4-Turbo 4.4% -> 20.6% final pass rate, over all 180).
#
#   experiments/table1.sh                              # openai gpt-4-turbo, joblib launcher
#   MODEL=gpt-4o-mini experiments/table1.sh benchmark.limit=20
#   LLM=anthropic MODEL=claude-3-5-sonnet-latest LAUNCHER=ray_local experiments/table1.sh
#
# Extra arguments are Hydra overrides passed to every job. Re-running with the same OUT resumes the
# sweep; re-running into a new OUT answers every request from the response cache (no calls, no cost).
set -euo pipefail
LLM="${LLM:-openai}"
MODEL="${MODEL:-gpt-4-turbo}"
LAUNCHER="${LAUNCHER:-joblib}"
OUT="${OUT:-multirun/llm_modulo_table1/${MODEL//\//_}-$(date +%Y-%m-%d_%H-%M-%S)}"

# bind everything (components, data, API key) before any call or cost; its log goes to OUT/.check
modulo check +experiment=llm_modulo_table1 +method=modulo_all "llm=${LLM}" "llm.model=${MODEL}" "hydra.run.dir=${OUT}/.check" "$@"
ran=0
modulo run -m +experiment=llm_modulo_table1 "llm=${LLM}" "llm.model=${MODEL}" \
  "hydra/launcher=${LAUNCHER}" "hydra.sweep.dir=${OUT}" "$@" || ran=$?
# 0: every problem ran; 1: some ended in error, and the report marks them; anything else: nothing to report
if [ "$ran" -gt 1 ]; then exit "$ran"; fi
modulo report "${OUT}"
exit "$ran"
