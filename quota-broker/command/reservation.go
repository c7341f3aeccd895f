package command

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gputide/gputide/quota-broker/api"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/reservation"
)

func jsonOf(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// ReservationCreateCommand is "gputide reservation create" (DESIGN L10).
type ReservationCreateCommand struct{ brokerCmd }

func (c *ReservationCreateCommand) Synopsis() string {
	return "Book GPUs for a namespace over a window"
}
func (c *ReservationCreateCommand) Help() string {
	return strings.TrimSpace(`
Usage: gputide reservation create -namespace NS -gpus N -start RFC3339 -duration D [options]

  Books N GPUs of one flavor of the namespace's quota node over
  [start, start + duration). Refused (with the flavor, the node, the
  instant, the numbers and the earliest later start that fits) when the
  bookings of that flavor at some node on the path to the root would pass
  its nominal of the flavor (L10, L13); other flavors' bookings do not
  count. Needs submit-job on the namespace.

Options:

  -namespace NS     The workspace. Required.
  -gpus N           GPUs booked. Required.
  -alloc-gpus N     GPUs per allocation; divides -gpus. Default: the largest
                    divisor of -gpus up to 8.
  -flavor F         The flavor booked (DESIGN L13). Required in a tree of
                    several flavors (the error lists them); default: the
                    tree's only flavor. Not with -model.
  -model M          GPU model, only in a tree without flavor blocks.
                    Default: any.
  -pool P           Nomad node pool. Default: default.
  -start T          RFC 3339 with offset, e.g. 2026-12-07T08:00:00+09:00.
  -duration D       Go duration, from reservation_min_duration (1h) to 2160h.
  -id ID            [a-z0-9][a-z0-9-]{0,62}. Default: r- and 8 hex digits.
` + apiHelp)
}

// bookingFromFlags checks the flag values and builds the request; errors
// name the flag and its value. Whether flavor is one of the tree's is
// the broker's check (reservation.Prepare): the CLI checks its form and
// that it does not come with a model.
func bookingFromFlags(ns, gpus, allocGPUs, flavor, model, pool, start, duration, id string) (api.BookingRequest, error) {
	req := api.BookingRequest{ID: id, Namespace: ns, Flavor: flavor, Model: model, NodePool: pool, Start: start, Duration: duration}
	if ns == "" || gpus == "" || start == "" || duration == "" {
		return req, fmt.Errorf("missing flags: -namespace, -gpus, -start and -duration are required")
	}
	if flavor != "" && !quota.ValidName(flavor) {
		return req, fmt.Errorf("-flavor %q: not a flavor name (1 to %d letters, digits, '.', '_' or '-')", flavor, quota.MaxNameLen)
	}
	if flavor != "" && model != "" {
		return req, fmt.Errorf("-flavor %q: given with -model %q: a booking gives flavor or model, not both", flavor, model)
	}
	n, err := intFlag("gpus", gpus, 1)
	if err != nil {
		return req, err
	}
	req.GPUs = n
	if allocGPUs != "" {
		a, err := intFlag("alloc-gpus", allocGPUs, 1)
		if err != nil {
			return req, err
		}
		if n%a != 0 {
			return req, fmt.Errorf("-alloc-gpus %q: must divide -gpus (%d)", allocGPUs, n)
		}
		req.AllocGPUs = a
	}
	if _, err := time.Parse(time.RFC3339, start); err != nil {
		return req, fmt.Errorf("-start %q: not an RFC 3339 time such as 2026-12-07T08:00:00+09:00", start)
	}
	d, err := time.ParseDuration(duration)
	if err != nil {
		return req, fmt.Errorf("-duration %q: not a Go duration", duration)
	}
	if d <= 0 || d > reservation.MaxDuration {
		return req, fmt.Errorf("-duration %q: must be more than 0 and at most %s", duration, reservation.MaxDuration)
	}
	if id != "" {
		if err := reservation.ValidID(id); err != nil {
			return req, fmt.Errorf("-%s", err)
		}
	}
	return req, nil
}

func (c *ReservationCreateCommand) Run(args []string) int {
	f := c.init("reservation create")
	var ns, gpus, allocGPUs, flavor, model, pool, start, duration, id string
	f.StringVar(&ns, "namespace", "", "")
	f.StringVar(&gpus, "gpus", "", "")
	f.StringVar(&allocGPUs, "alloc-gpus", "", "")
	f.StringVar(&flavor, "flavor", "", "")
	f.StringVar(&model, "model", "", "")
	f.StringVar(&pool, "pool", "", "")
	f.StringVar(&start, "start", "", "")
	f.StringVar(&duration, "duration", "", "")
	f.StringVar(&id, "id", "", "")
	if _, code, ok := c.parse(args, 0, ""); !ok {
		return code
	}
	req, err := bookingFromFlags(ns, gpus, allocGPUs, flavor, model, pool, start, duration, id)
	if err != nil {
		return c.usage(err.Error())
	}
	return c.call(func(ctx context.Context, cl *api.Client) error {
		res, err := cl.CreateReservation(ctx, req)
		if err != nil {
			return err
		}
		if c.asJSON {
			c.printJSON(res)
			return nil
		}
		r := res.Reservation
		c.Ui.Output(fmt.Sprintf("Reservation %q booked: %d %s (%dx%d) of %s for %s, %s to %s",
			r.ID, r.GPUs, flavorGPUs(r.Flavor), r.GPUs/max(r.AllocGPUs, 1), r.AllocGPUs, r.Node, r.Namespace, fmtTime(r.Start), fmtTime(r.End)))
		return nil
	})
}

// flavorGPUs says "GPUs" of a booking's flavor: "a100 GPUs", or "GPUs"
// for the implicit flavor of a tree without flavor blocks.
func flavorGPUs(flavor string) string {
	if flavor == "" || flavor == quota.ImplicitFlavor {
		return "GPUs"
	}
	return flavor + " GPUs"
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return ""
	}
	return reservation.FormatInstant(*t)
}

// ReservationListCommand is "gputide reservation list".
type ReservationListCommand struct{ brokerCmd }

func (c *ReservationListCommand) Synopsis() string { return "List Calendar bookings" }
func (c *ReservationListCommand) Help() string {
	return strings.TrimSpace(`
Usage: gputide reservation list [-namespace NS] [options]

  Lists the bookings that have not ended. Those of namespaces the token
  cannot read show only namespace and GPUs. An ended or cancelled booking
  is in history: see "gputide reservation show ID".
` + apiHelp)
}

func (c *ReservationListCommand) Run(args []string) int {
	f := c.init("reservation list")
	var ns string
	f.StringVar(&ns, "namespace", "", "")
	if _, code, ok := c.parse(args, 0, ""); !ok {
		return code
	}
	return c.call(func(ctx context.Context, cl *api.Client) error {
		res, err := cl.Reservations(ctx, ns)
		if err != nil {
			return err
		}
		if c.asJSON {
			c.printJSON(res)
			return nil
		}
		rows := [][]string{{"ID", "Namespace", "Node", "Flavor", "GPUs", "Alloc GPUs", "Start", "End", "Running"}}
		for _, r := range res.Reservations {
			rows = append(rows, []string{r.ID, r.Namespace, r.Node, r.Flavor, strconv.Itoa(r.GPUs), zeroDash(r.AllocGPUs), fmtTime(r.Start), fmtTime(r.End), zeroDash(r.Running)})
		}
		c.Ui.Output(formatList(rows))
		return nil
	})
}

func zeroDash(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// ReservationShowCommand is "gputide reservation show ID".
type ReservationShowCommand struct{ brokerCmd }

func (c *ReservationShowCommand) Synopsis() string { return "Show one Calendar booking" }
func (c *ReservationShowCommand) Help() string {
	return strings.TrimSpace(`
Usage: gputide reservation show ID [options]

  Shows one booking; needs read-job on its namespace. A booking that ended
  or was cancelled is read from history, with its outcome (ended,
  cancelled, forced) and when; then the plan's warnings about it (its
  allocations cannot be placed before its start, GPUs held for it).
` + apiHelp)
}

func (c *ReservationShowCommand) Run(args []string) int {
	c.init("reservation show")
	rest, code, ok := c.parse(args, 1, "the reservation ID")
	if !ok {
		return code
	}
	if err := reservation.ValidID(rest[0]); err != nil {
		return c.usage(err.Error())
	}
	return c.call(func(ctx context.Context, cl *api.Client) error {
		res, err := cl.Reservation(ctx, rest[0])
		if err != nil {
			return err
		}
		if c.asJSON {
			c.printJSON(res)
			return nil
		}
		r := res.Reservation
		kv := [][2]string{{"ID", r.ID}, {"Namespace", r.Namespace}, {"Node", r.Node}, {"GPUs", strconv.Itoa(r.GPUs)},
			{"Alloc GPUs", strconv.Itoa(r.AllocGPUs)}, {"Flavor", r.Flavor}, {"Model", r.Model}, {"Node pool", r.NodePool}, {"Start", fmtTime(r.Start)},
			{"End", fmtTime(r.End)}, {"Running allocations", strconv.Itoa(r.Running)}}
		if r.Outcome != "" {
			kv = append(kv, [2]string{"Outcome", r.Outcome}, [2]string{"Ended at", fmtTime(r.EndedAt)})
		}
		c.Ui.Output(formatKV(kv) + warningLines(res.Warnings))
		return nil
	})
}

func formatKV(kv [][2]string) string {
	rows := make([][]string, 0, len(kv))
	for _, p := range kv {
		rows = append(rows, []string{p[0], "= " + p[1]})
	}
	return formatList(rows)
}

// ReservationCancelCommand is "gputide reservation cancel ID [-force]".
type ReservationCancelCommand struct{ brokerCmd }

func (c *ReservationCancelCommand) Synopsis() string { return "Cancel a Calendar booking" }
func (c *ReservationCancelCommand) Help() string {
	return strings.TrimSpace(`
Usage: gputide reservation cancel ID [-force] [options]

  Cancels a booking; it goes to history. A booking with running
  allocations needs -force (they are then stopped). Needs submit-job on
  its namespace.
` + apiHelp)
}

func (c *ReservationCancelCommand) Run(args []string) int {
	f := c.init("reservation cancel")
	var force bool
	f.BoolVar(&force, "force", false, "")
	rest, code, ok := c.parse(args, 1, "the reservation ID")
	if !ok {
		return code
	}
	if err := reservation.ValidID(rest[0]); err != nil {
		return c.usage(err.Error()) // before any call: ".." would be cleaned into another path
	}
	return c.call(func(ctx context.Context, cl *api.Client) error {
		res, err := cl.CancelReservation(ctx, rest[0], force)
		if err != nil {
			return err
		}
		if c.asJSON {
			c.printJSON(res)
			return nil
		}
		c.Ui.Output(fmt.Sprintf("Reservation %q cancelled", rest[0]))
		return nil
	})
}
