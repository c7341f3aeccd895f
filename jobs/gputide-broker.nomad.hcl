# The gputide quota broker as a Nomad service job.
#
#   nomad var put -namespace=default nomad/jobs/gputide-broker token=<management token>
#   nomad job run -var 'gputide_url=https://.../gputide_linux_amd64.tar.gz' jobs/gputide-broker.nomad.hcl
#
# It runs in the default namespace, outside the namespaces it governs, in a
# real node pool (never the holding pool), as one instance: only one broker
# may act at a time (L12). The quota tree is a template here; point
# quota_file at a file you manage with your configuration tooling to change
# quotas live (use case 2: the broker reloads it when it changes).
variable "gputide_url" {
  type        = string
  description = "URL of a gputide release archive (go-getter syntax) holding the gputide binary"
}

variable "nomad_addr" {
  type    = string
  default = "http://127.0.0.1:4646"
}

job "gputide-broker" {
  namespace = "default"
  type      = "service"
  priority  = 90

  group "broker" {
    count = 1

    restart {
      attempts = 10
      interval = "5m"
      delay    = "5s"
      mode     = "delay"
    }

    task "agent" {
      driver = "exec"

      artifact {
        source = var.gputide_url
      }

      config {
        command = "local/gputide"
        args    = ["agent", "-config", "local/broker.hcl"]
      }

      # The broker's token, from a Nomad variable; never in the jobspec.
      template {
        destination = "secrets/nomad.env"
        env         = true
        data        = <<-EOT
        {{ with nomadVar "nomad/jobs/gputide-broker" }}NOMAD_TOKEN={{ .token }}{{ end }}
        EOT
      }

      template {
        destination = "local/broker.hcl"
        data        = <<-EOT
        nomad {
          address = "${var.nomad_addr}"
        }
        quota_file   = "quota.hcl"
        holding_pool = "gputide-queue"
        interval     = "30s"
        staleness    = "15s"
        http_bind    = "127.0.0.1:4780"
        EOT
      }

      template {
        destination = "local/quota.hcl"
        data        = <<-EOT
        settings {
          min_runtime = "10m"
          debt_grace  = "10m"
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
        EOT
      }

      # SIGINT: the broker finishes the call in flight and exits.
      kill_signal  = "SIGINT"
      kill_timeout = "30s"

      resources {
        cpu    = 500
        memory = 256
      }
    }
  }
}
