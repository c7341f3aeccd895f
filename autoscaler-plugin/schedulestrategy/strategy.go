// Package schedulestrategy is the Nomad Autoscaler strategy plugin
// "gputide-schedule": day/night counts in an IANA time zone (DESIGN §8, issue 11
// item 1), evaluated by quota-broker/schedule, the package the simulator, the
// broker's pre-warm and `gputide schedule preview` use.
//
// Its settings are the check's strategy block, which the agent sends with every
// Run (eval.Check.Strategy.Config):
//
//	strategy "gputide-schedule" {
//	  window_day    = "mon-fri 08:00-22:00 24"   # one or more window_<name> = "DAYS HH:MM-HH:MM COUNT"
//	  default_count = 2                          # alias default
//	  timezone      = "Europe/Berlin"            # alias time_zone; UTC when absent
//	  holidays      = "2026-12-25,2026-12-26"    # optional
//	  ramp          = "15m"                      # optional
//	}
//
// Run returns the count in force now, whatever the job's current count and the
// check's metrics are. One plugin process serves every policy and Run gets no
// policy ID, so the plugin keeps no state per policy: only a cache of parsed
// schedules keyed by a hash of the config map.
package schedulestrategy

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad-autoscaler/plugins/base"
	"github.com/hashicorp/nomad-autoscaler/plugins/strategy"
	"github.com/hashicorp/nomad-autoscaler/sdk"

	"github.com/gputide/gputide/autoscaler-plugin/pluginconf"
	"github.com/gputide/gputide/quota-broker/schedule"
)

// Name is the plugin's name: the binary in plugin_dir, the `driver` of its
// agent block and the strategy block's label.
const Name = "gputide-schedule"

// cacheSize bounds the parsed-schedule cache: one entry per distinct strategy
// block in the agent's policies; when full it is emptied (a policy set larger
// than this only costs a re-parse, ~10 µs).
const cacheSize = 256

// ErrNoConfig is returned by Run for a check without a strategy block.
var ErrNoConfig = errors.New("no strategy config")

var _ strategy.Strategy = (*Strategy)(nil)

// Strategy is the plugin. The zero value is not usable; use New.
type Strategy struct {
	log hclog.Logger
	now func() time.Time

	mu    sync.Mutex
	cache map[[sha256.Size]byte]parsed
}

type parsed struct {
	s   *schedule.Schedule
	err error
}

// New returns the plugin logging to log. now is the clock (time.Now when nil);
// tests pass a fixed one.
func New(log hclog.Logger, now func() time.Time) *Strategy {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if now == nil {
		now = time.Now
	}
	return &Strategy{log: log, now: now, cache: make(map[[sha256.Size]byte]parsed)}
}

// PluginInfo names the plugin as a strategy.
func (s *Strategy) PluginInfo() (*base.PluginInfo, error) {
	return &base.PluginInfo{Name: Name, PluginType: sdk.PluginTypeStrategy}, nil
}

// SetConfig takes the agent's plugin block: only the agent's nomad_* keys,
// which it ignores; any other key is refused by name (the schedule belongs in
// the check's strategy block).
func (s *Strategy) SetConfig(cfg map[string]string) error {
	err := pluginconf.Check(Name, cfg)
	if e, ok := err.(*pluginconf.Error); ok {
		e.Reason += " (the schedule goes in the check's strategy block)"
	}
	return err
}

// Run sets eval.Action to the count the schedule in the check's strategy block
// gives now, with direction up, down or none against count (the job's current
// count), and a reason naming the window and the zone. A bad config is an error
// naming the key and the value, e.g.
//
//	window_day: invalid time "25:00" in "mon-fri 25:00-22:00 24"
//
// Metrics are ignored.
func (s *Strategy) Run(eval *sdk.ScalingCheckEvaluation, count int64) (*sdk.ScalingCheckEvaluation, error) {
	if eval == nil || eval.Check == nil || eval.Check.Strategy == nil {
		return nil, fmt.Errorf("%s: %w: the check needs a strategy %q block with window_<name> and default_count", Name, ErrNoConfig, Name)
	}
	sched, err := s.schedule(eval.Check.Strategy.Config)
	if err != nil {
		return nil, err
	}
	a := Decide(sched, s.now(), count)
	if eval.Action == nil {
		eval.Action = &sdk.ScalingAction{}
	}
	eval.Action.Count = a.Count
	eval.Action.Direction = a.Direction
	eval.Action.Reason = a.Reason
	return eval, nil
}

// Action is what Run decides.
type Action struct {
	Count     int64
	Direction sdk.ScaleDirection
	Reason    string
}

// Decide returns the count sched gives at now and its direction against the
// current count, with a reason such as
//
//	window "day" in Europe/Berlin: count 24
//	window "day" in Europe/Berlin: count 12, ramping to 24
//	no window in Europe/Berlin: default count 2
//	no window in Europe/Berlin: count 23, ramping to the default count 2
func Decide(sched *schedule.Schedule, now time.Time, current int64) Action {
	n := sched.CountAt(now)
	name, target, inWindow := sched.WindowAt(now)
	zone := sched.Location().String()
	var where string
	switch {
	case inWindow && n == target:
		where = fmt.Sprintf("window %q in %s: count %d", name, zone, n)
	case inWindow:
		where = fmt.Sprintf("window %q in %s: count %d, ramping to %d", name, zone, n, target)
	case n == sched.Default():
		where = fmt.Sprintf("no window in %s: default count %d", zone, n)
	default:
		where = fmt.Sprintf("no window in %s: count %d, ramping to the default count %d", zone, n, sched.Default())
	}
	a := Action{Count: int64(n), Reason: where, Direction: sdk.ScaleDirectionNone}
	switch {
	case a.Count > current:
		a.Direction = sdk.ScaleDirectionUp
	case a.Count < current:
		a.Direction = sdk.ScaleDirectionDown
	}
	return a
}

// schedule parses cfg, or returns the schedule (or error) cached under cfg's
// hash.
func (s *Strategy) schedule(cfg map[string]string) (*schedule.Schedule, error) {
	key := hashConfig(cfg)
	s.mu.Lock()
	p, ok := s.cache[key]
	s.mu.Unlock()
	if ok {
		return p.s, p.err
	}
	sched, err := schedule.Parse(cfg)
	if err != nil {
		err = fmt.Errorf("%s: %w", Name, err)
	}
	s.mu.Lock()
	if len(s.cache) >= cacheSize {
		clear(s.cache)
	}
	s.cache[key] = parsed{s: sched, err: err}
	s.mu.Unlock()
	return sched, err
}

// hashConfig returns the SHA-256 of cfg's entries in key order, each key and
// value prefixed by its length, so that distinct maps give distinct inputs.
func hashConfig(cfg map[string]string) [sha256.Size]byte {
	h := sha256.New()
	var n [8]byte
	write := func(s string) {
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		write(k)
		write(cfg[k])
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}
