# The quota tree of the reference-week scenario (scenario-week.hcl): the
# reference tree (quota.hcl) with min_runtime 1h instead of 10m, so that a
# job that has just (re)started is spared while an older victim set
# suffices (DESIGN L5): a preempted job is not stopped again before it has
# made an hour of progress. docs/simulator.md says why.
#
# The quota tree of the reference scenario (DESIGN §1).
#
# A cluster of 128 GPUs shared by three teams. Each team's workspace is a
# Nomad namespace bound to one quota node:
#
#   Quota1    128 GPUs  workspace-a  team A: inference services
#   Quota1.1   48 GPUs  workspace-b  team B: training batch jobs
#   Quota1.2   80 GPUs  workspace-c  team C: dev instances and training
#
# Child-level preemption on Quota1 lets team A's inference take GPUs back
# from the training of teams B and C (use case 1). Use case 2 moves 8 GPUs
# from Quota1.2 to Quota1.1 (48 -> 56, 80 -> 72) in one change.

settings {
  # Allocations younger than this are spared by preemption while an older
  # victim set suffices (DESIGN L5).
  min_runtime = "1h"
  # Debt created by lowering a quota is protected for this long (DESIGN L9).
  debt_grace = "10m"
}

quota "Quota1" {
  gpus             = 128
  child_preemption = true
  namespaces       = ["workspace-a"]

  quota "Quota1.1" {
    gpus       = 48
    namespaces = ["workspace-b"]
  }

  quota "Quota1.2" {
    gpus       = 80
    namespaces = ["workspace-c"]
  }
}
