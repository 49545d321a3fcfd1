#!/usr/bin/env bash
# Critic subsets x backprompt strategies at budget 10 (16 runs), then the report with paired tests of
# every run against the first ([All] with strategy all).
#
#   experiments/critic_ablation.sh                     # openai gpt-4o-mini, joblib launcher
#   MODEL=gpt-4o LAUNCHER=ray_local experiments/critic_ablation.sh benchmark.limit=50
set -euo pipefail
LLM="${LLM:-openai}"
MODEL="${MODEL:-gpt-4o-mini}"
LAUNCHER="${LAUNCHER:-joblib}"
OUT="${OUT:-multirun/critic_ablation/${MODEL//\//_}-$(date +%Y-%m-%d_%H-%M-%S)}"

modulo check +experiment=critic_ablation "llm=${LLM}" "llm.model=${MODEL}" "hydra.run.dir=${OUT}/.check" "$@"
ran=0
modulo run -m +experiment=critic_ablation "llm=${LLM}" "llm.model=${MODEL}" \
  "hydra/launcher=${LAUNCHER}" "hydra.sweep.dir=${OUT}" "$@" || ran=$?
# 0: every problem ran; 1: some ended in error, and the report marks them; anything else: nothing to report
if [ "$ran" -gt 1 ]; then exit "$ran"; fi
modulo report "${OUT}"
exit "$ran"
