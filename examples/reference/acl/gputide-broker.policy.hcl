# The broker's own Nomad token (nomad.token in broker.hcl, or NOMAD_TOKEN):
# the least the broker (gputide agent) needs to watch, plan and act on the
# governed workspaces. Instead of a management token:
#   nomad acl policy apply -description "gputide broker" gputide-broker acl/gputide-broker.policy.hcl
#   nomad acl token create -name gputide-broker -policy gputide-broker
# Checked by e2e/brokerpolicy_test.go: a broker with a token of this policy
# alone creates the holding pool, admits a job, preempts for another team
# and reads the scaling policies on a Nomad v1.11 agent with ACLs on.
#
# Namespaces: Nomad (v1.11) gives the event stream's Namespace topic to
# management tokens only. The broker reads its token at start
# (GET /v1/acl/token/self, open to any token) and, with a token of this
# policy, leaves the topic out and lists the namespaces (GET /v1/namespaces,
# filtered by this policy) at each planning cycle instead: its stream stays
# open (tested).
#
# The broker asks for namespace "*" in its lists (jobs, allocations,
# evaluations, scaling policies, the event stream), and Nomad filters them
# by this policy; list the governed workspaces here instead of "*" to
# narrow it (each must then be named).
namespace "*" {
  capabilities = [
    # GET /v1/jobs?namespace=* (nomad.List: the jobs of the snapshot).
    "list-jobs",
    # GET /v1/job/<id> and /v1/job/<id>/summary (before each admit,
    # suspend or preemption, and on job events); GET /v1/allocations and
    # GET /v1/evaluations?filter=blocked (nomad.List, L2); the Job,
    # Allocation and Evaluation topics of GET /v1/event/stream (nomad.Watch).
    "read-job",
    # PUT /v1/jobs: admit (NodePool = gputide_pool), suspend and preempt
    # (NodePool = the holding pool), expire a flex request (Stop = true);
    # DELETE /v1/job/<id> when a reservation ends (rule L10.end).
    "submit-job",
    # PUT /v1/allocation/<id>/stop: the victims of a preemption (L5, L8)
    # and the allocations of a suspended job.
    "alloc-lifecycle",
    # POST /v1/job/<id>/scale: scale-down of an elastic group (L5 units of
    # one allocation).
    "scale-job",
    # GET /v1/scaling/policies?namespace=* and /v1/scaling/policy/<id>:
    # the idle groups' gputide-idle checks (nomad.PolicyWatcher, issue 11).
    "list-scaling-policies",
    "read-scaling-policy",
  ]
}

# GET /v1/nodes?resources=true (the client nodes and their GPUs, L2) and the
# Node topic of the event stream.
node {
  policy = "read"
}

# GET /v1/node/pools (the pools admit_pools and gputide_pool may name) and
# GET /v1/node/pool/<name> (does the holding pool exist).
node_pool "*" {
  policy = "read"
}

# PUT /v1/node/pools: the broker creates its holding pool at start when
# Nomad lacks it (agent.ensureHoldingPool). Rename with holding_pool.
node_pool "gputide-queue" {
  policy = "write"
}
