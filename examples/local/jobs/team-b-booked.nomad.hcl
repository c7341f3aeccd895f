# Team B's job inside a Calendar booking (L10): it names the booking
# team-b-demo (2 GPUs of Quota1.1), which must exist first:
#   gputide reservation create -id team-b-demo -namespace workspace-b \
#     -gpus 2 -start <RFC 3339, e.g. 10 minutes ahead> -duration 1h
# Before the booking starts it waits; from the start it runs on the GPUs the
# broker drained and held for it; at the booking's end the broker stops it.
# Without the booking, the job is left unadmitted with a meta error.
job "booked" {
  namespace = "workspace-b"
  type      = "batch"
  priority  = 50
  node_pool = "gputide-queue"

  meta {
    gputide_pool        = "default"
    gputide_reservation = "team-b-demo"
  }

  group "worker" {
    count = 1

    task "train" {
      driver       = "raw_exec"
      kill_signal  = "SIGINT"
      kill_timeout = "30s"

      config {
        command = "/bin/sh"
        args    = ["-c", "trap 'echo checkpointing; sleep 2; echo checkpoint saved; exit 0' INT TERM; echo training on $NVIDIA_VISIBLE_DEVICES; while :; do sleep 1; done"]
      }

      resources {
        cpu    = 50
        memory = 32

        device "nvidia/gpu" {
          count = 2
        }
      }
    }
  }
}
