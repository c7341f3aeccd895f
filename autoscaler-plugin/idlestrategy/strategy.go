// Package idlestrategy is the Nomad Autoscaler strategy plugin "gputide-idle"
// (DESIGN §8 "Idle lending", issue 11 item 4): it grows an elastic idle batch
// group by the broker's idle_fit for it, the extra allocations of the group's
// shape that fit now on free, healthy, unheld GPUs.
//
// The check reads the figure through the APM plugin:
//
//	check "idle" {
//	  source   = "gputide-apm"
//	  query    = "idle_fit{namespace=\"workspace-c\",job=\"training\",group=\"train\"}"
//	  strategy "gputide-idle" {}
//	}
//
// Run returns count = current + the latest point (a point below 0 counts as
// 0), so the group only grows here; the broker shrinks it (L7). The policy's
// max caps the count (the Autoscaler applies it), its min must be at least 1
// (a batch job at count 0 is dead), and hysteresis is its
// cooldown_on_scale_up. The plugin keeps no state: Run gets no policy ID.
package idlestrategy

import (
	"errors"
	"fmt"
	"math"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad-autoscaler/plugins/base"
	"github.com/hashicorp/nomad-autoscaler/plugins/strategy"
	"github.com/hashicorp/nomad-autoscaler/sdk"

	"github.com/gputide/gputide/autoscaler-plugin/pluginconf"
)

// Name is the plugin's name: binary, driver and strategy block label.
const Name = "gputide-idle"

// Sentinels wrapped by Run's errors.
var (
	// ErrNoPoint: the check's source gave no metric point.
	ErrNoPoint = errors.New("no metric point")
	// ErrBadPoint: the latest point is not a finite number.
	ErrBadPoint = errors.New("bad metric point")
)

var _ strategy.Strategy = (*Strategy)(nil)

// Strategy is the plugin.
type Strategy struct {
	log hclog.Logger
}

// New returns the plugin logging to log.
func New(log hclog.Logger) *Strategy {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Strategy{log: log}
}

// PluginInfo names the plugin as a strategy.
func (s *Strategy) PluginInfo() (*base.PluginInfo, error) {
	return &base.PluginInfo{Name: Name, PluginType: sdk.PluginTypeStrategy}, nil
}

// SetConfig takes the agent's plugin block: the agent's nomad_* keys are
// ignored, any other key refused by name.
func (s *Strategy) SetConfig(cfg map[string]string) error {
	return pluginconf.Check(Name, cfg)
}

// Run sets the count to count + the latest point of eval.Metrics (at least
// count), direction up when it grows, none otherwise. The check's strategy
// block takes no keys; any key is an error naming it.
func (s *Strategy) Run(eval *sdk.ScalingCheckEvaluation, count int64) (*sdk.ScalingCheckEvaluation, error) {
	if eval == nil {
		return nil, fmt.Errorf("%s: no evaluation", Name)
	}
	if eval.Check != nil && eval.Check.Strategy != nil {
		if err := pluginconf.Check(Name, eval.Check.Strategy.Config); err != nil {
			return nil, err
		}
	}
	if len(eval.Metrics) == 0 {
		return nil, fmt.Errorf("%s: %w: the check's source (gputide-apm, query idle_fit{...}) returned nothing", Name, ErrNoPoint)
	}
	latest := eval.Metrics[0]
	for _, m := range eval.Metrics[1:] {
		if !m.Timestamp.Before(latest.Timestamp) {
			latest = m
		}
	}
	v := latest.Value
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil, fmt.Errorf("%s: %w: %v at %s", Name, ErrBadPoint, v, latest.Timestamp)
	}
	extra := int64(0)
	if v > 0 {
		extra = int64(math.Min(math.Floor(v), float64(math.MaxInt32)))
	}
	if eval.Action == nil {
		eval.Action = &sdk.ScalingAction{}
	}
	eval.Action.Count = count + extra
	eval.Action.Direction = sdk.ScaleDirectionNone
	if extra > 0 {
		eval.Action.Direction = sdk.ScaleDirectionUp
	}
	eval.Action.Reason = fmt.Sprintf("idle_fit %d: count %d + %d = %d", extra, count, extra, count+extra)
	return eval, nil
}
