# A mixed fleet (issue 17 item 6): 8 nodes of 8 H100 and 8 nodes of 8 A100,
# two of the A100 nodes cut into 1g.10gb MIG slices for team C's notebooks.
# Team A's inference runs on H100 by day; teams B and C train on H100 or
# A100 (Philly, as the reference); team C's notebooks each take one slice.
#
#   gputide sim -scenario examples/mixed/scenario.hcl
#
# The quota tree has three flavors (quota.hcl, DESIGN L13): h100, a100
# (whole A100) and a100-1g (the slices). Each workload names the flavors it
# allows, in the order it tries them (`flavors`, the snapshot's pending
# flavors); a job admitted in a flavor runs on that flavor's devices only.
# See docs/simulator.md ("Mixed models and MIG slices").

name      = "mixed"
quota     = "quota.hcl"
time_zone = "America/Los_Angeles"
start     = "2026-12-07 00:00" # a Monday, local time
length    = "48h"              # `gputide sim -days N` overrides it
seed      = 1

broker {
  interval     = "30s"
  kill_timeout = "30s"
  prewarm      = true
}

cluster {
  nodes "h100" {
    count = 8
    gpus  = 8
    model = "NVIDIA H100 80GB HBM3"
  }
  nodes "a100" {
    count = 6
    gpus  = 8
    model = "NVIDIA A100-SXM4-80GB"
  }
  # Two A100 nodes with every GPU cut into seven 1g.10gb slices: 56 MIG
  # devices a node, each a device instance of model NVIDIA A100-SXM4-80GB
  # and MIG profile 1g.10gb: flavor a100-1g.
  nodes "a100-mig" {
    count = 2
    gpus  = 8
    model = "NVIDIA A100-SXM4-80GB"
    mig {
      gpus    = 8
      profile = "1g.10gb"
      slices  = 7
    }
  }
}

# Team A: an LLM chat service on H100 only, one 8-GPU replica per node:
# four replicas on weekdays 08:00-22:00, two on weekend days, one at night,
# plus up to two that follow the diurnal shape of the Alibaba GenAI trace.
inference "chat" {
  namespace    = "workspace-a"
  group        = "server"
  priority     = 80
  gpus         = 8
  kill_timeout = "5s"
  default      = 1
  flavors      = ["h100"]
  windows = {
    day     = "mon-fri 08:00-22:00 4"
    weekend = "sat,sun 10:00-20:00 2"
  }

  demand {
    trace    = "../../../shared/traces/alibaba/v2026-genai/lora_request_trace.csv"
    fallback = "../traces-sample/alibaba-genai-hourly.csv"
    shift    = "-8h"
    extra    = 2
  }
}

# Teams B and C: training replayed from Philly (the reference's week and
# virtual clusters), allowed h100 and a100, H100 first.
training "philly" {
  trace           = "../../../shared/traces/philly/philly.csv"
  fallback        = "../traces-sample/philly-sample.csv"
  trace_time_zone = "America/Los_Angeles"
  trace_start     = "2017-10-23 00:00:00"
  idle_fraction   = 0.6
  min_duration    = "60s"
  max_gpus        = 32
  priority        = 50
  checkpoint      = "30m"
  flavors         = ["h100", "a100"]
  workspaces = {
    "6c71a0" = "workspace-b"
    "103959" = "workspace-b"
    "11cb48" = "workspace-c"
    "b436b2" = "workspace-c"
    "e13805" = "workspace-c"
    "ed69ec" = "workspace-c"
  }
}

# Team C: 24 notebooks, one 1g.10gb slice each, all week, on the cut nodes.
dev "notebook" {
  namespace = "workspace-c"
  count     = 24
  gpus      = 1
  priority  = 60
  flavors   = ["a100-1g"]
}
