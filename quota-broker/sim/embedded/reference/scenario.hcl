# The reference scenario (DESIGN §1) for `gputide sim`.
#
# 128 GPUs (16 nodes x 8 H100), three teams on the quota tree of quota.hcl:
#   team A  workspace-a  Quota1   (128, child-level preemption): inference
#   team B  workspace-b  Quota1.1 (48): training replayed from Philly
#   team C  workspace-c  Quota1.2 (80): dev instances and Philly training
# Use case 1 happens every morning and at the afternoon peak, when the
# inference service scales up and takes GPUs back from training; use case 2
# (the quota move) happens on Tuesday at noon. See docs/simulator.md.
#
# Paths are relative to this file. The traces are read from ../shared/traces
# (beside the repository) when it is there, and from the sample shipped in
# examples/traces-sample otherwise.

name      = "reference"
quota     = "quota.hcl"
time_zone = "America/Los_Angeles"
start     = "2026-12-07 00:00" # a Monday, local time
length    = "48h"              # `gputide sim -days N` overrides it
seed      = 1

broker {
  interval     = "30s" # the broker plans at least this often; the autoscaler evaluates as often
  kill_timeout = "30s" # training jobs' kill_timeout: a stopped allocation holds its GPUs this long
  # Pre-warm of scheduled scale-ups. Under gputide the core does it as the
  # broker does (DESIGN L5 "Pre-warm"): free GPUs are held as soon as the
  # boundary is within drain_horizon (default 1h), the victims are stopped
  # at boundary - (their largest kill_timeout + drain_margin, default 60s),
  # and the holds last until boundary + evaluation_interval + settle. The
  # comparison policies (-compare), which have no pre-warm, get the
  # autoscaler's count raised kill_timeout + interval early instead.
  prewarm      = true
}

cluster {
  nodes "h100" {
    count      = 16
    gpus       = 8
    model      = "NVIDIA H100 80GB HBM3"
    datacenter = "dc1"
    node_pool  = "default"
  }
}

# Team A: an LLM chat service, one 8-GPU replica per node. Four replicas on
# weekdays 08:00-22:00, two on weekend days, one at night; plus up to two
# replicas that follow the diurnal request shape of the Alibaba GenAI trace.
inference "chat" {
  namespace    = "workspace-a"
  group        = "server"
  priority     = 80
  gpus         = 8
  kill_timeout = "5s"
  default      = 1
  windows = {
    day     = "mon-fri 08:00-22:00 4"
    weekend = "sat,sun 10:00-20:00 2"
  }

  demand {
    trace    = "../../../shared/traces/alibaba/v2026-genai/lora_request_trace.csv"
    fallback = "../traces-sample/alibaba-genai-hourly.csv"
    # The trace's clock is anonymised; -8h puts its quiet hours at 01:00-07:00.
    shift = "-8h"
    extra = 2
  }
}

# Teams B and C: training replayed from the Philly trace, week of Monday
# 2017-10-23 (Philly timestamps are taken as US-Pacific local time). Six of
# Philly's virtual clusters are mapped to the two workspaces: team B's
# training asks for more than its 48 GPUs most of the week, team C's for
# less than its 80, so B's idle jobs borrow what C leaves. 60% of the jobs
# are idle jobs (gputide_idle = "true").
training "philly" {
  trace           = "../../../shared/traces/philly/philly.csv"
  fallback        = "../traces-sample/philly-sample.csv"
  trace_time_zone = "America/Los_Angeles"
  trace_start     = "2017-10-23 00:00:00" # maps to start
  time_scale      = 1     # trace seconds per simulated second
  gpu_scale       = 1     # job GPUs are multiplied by this (rounded up)
  sample          = 1     # fraction of rows kept
  idle_fraction   = 0.6
  min_duration    = "60s" # as Pollux's sampler: drop jobs shorter than a minute
  max_gpus        = 32    # larger jobs cannot fit a 48- or 80-GPU quota
  priority        = 50
  checkpoint      = "30m" # a preempted job loses the work since its last checkpoint
  in_flight       = true  # jobs running at trace_start start with the simulation
  workspaces = {
    "6c71a0" = "workspace-b"
    "103959" = "workspace-b"
    "11cb48" = "workspace-c"
    "b436b2" = "workspace-c"
    "e13805" = "workspace-c"
    "ed69ec" = "workspace-c"
  }
}

# Team C: six notebook-style dev instances, one GPU each, running all week.
dev "notebook" {
  namespace = "workspace-c"
  count     = 6
  gpus      = 1
  priority  = 60
}

# Use case 2: an admin moves 8 GPUs from Quota1.2 to Quota1.1, live.
quota_move "use-case-2" {
  at = "2026-12-08 12:00"
  gpus = {
    "Quota1.1" = 56
    "Quota1.2" = 72
  }
}
