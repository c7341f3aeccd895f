# The gputide quota broker as a Nomad service job.
#
#   nomad var put -namespace=default nomad/jobs/gputide-broker token=<management token> consul_token=<consul token>
#   nomad job run -var 'gputide_url=https://.../gputide_linux_amd64.tar.gz' jobs/gputide-broker.nomad.hcl
#
# It runs in the default namespace, outside the namespaces it governs, in a
# real node pool (never the holding pool), as two instances on two nodes
# (distinct_hosts) sharing one Consul store (DESIGN §6). Both watch Nomad
# and serve reads; only the holder of the Consul session lock on
# gputide/leader acts (L12). The other takes over within 3 s of a graceful
# stop and within 25 s of a crash, repeating nothing (intents and job
# records are in Consul). The quota file below only seeds the store's tree
# when Consul has none; later quota changes go to the store (gputide quota
# commands or the API) and apply live on both brokers.
variable "gputide_url" {
  type        = string
  description = "URL of a gputide release archive (go-getter syntax) holding the gputide binary"
}

variable "nomad_addr" {
  type    = string
  default = "http://127.0.0.1:4646"
}

variable "consul_addr" {
  type    = string
  default = "127.0.0.1:8500"
}

job "gputide-broker" {
  namespace = "default"
  type      = "service"
  priority  = 90

  group "broker" {
    # Two brokers, one per node: one acts, the other stands by (L12).
    count = 2

    constraint {
      operator = "distinct_hosts"
      value    = "true"
    }

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
        {{ with nomadVar "nomad/jobs/gputide-broker" }}NOMAD_TOKEN={{ .token }}
        CONSUL_HTTP_TOKEN={{ .consul_token }}{{ end }}
        EOT
      }

      template {
        destination = "local/broker.hcl"
        data        = <<-EOT
        nomad {
          address = "${var.nomad_addr}"
        }
        consul {
          address = "${var.consul_addr}"
          prefix  = "gputide/"
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
          # jobs/nomad-autoscaler.nomad.hcl's default_evaluation_interval
          autoscaler_evaluation_interval = "1m"
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

      # SIGINT: the broker finishes the call in flight, releases the leader
      # lock (the standby takes over at once) and exits.
      kill_signal  = "SIGINT"
      kill_timeout = "30s"

      resources {
        cpu    = 500
        memory = 256
      }
    }
  }
}
