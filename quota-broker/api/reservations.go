package api

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/reservation"
	"github.com/gputide/gputide/quota-broker/store"
)

// DecodeBooking reads and checks a booking body into a Booking (ID may be
// empty: the server picks one). Errors name the field and its value.
func DecodeBooking(data []byte) (reservation.Booking, error) {
	var req BookingRequest
	if err := decodeStrict(data, &req); err != nil {
		return reservation.Booking{}, err
	}
	if req.Namespace == "" {
		return reservation.Booking{}, badInput("namespace", "", "is empty")
	}
	if req.ID != "" {
		if err := reservation.ValidID(req.ID); err != nil {
			return reservation.Booking{}, err
		}
	}
	if req.GPUs <= 0 {
		return reservation.Booking{}, badInput("gpus", strconv.Itoa(req.GPUs), "must be more than 0")
	}
	if req.AllocGPUs < 0 {
		return reservation.Booking{}, badInput("alloc_gpus", strconv.Itoa(req.AllocGPUs), "must divide gpus (%d)", req.GPUs)
	}
	start, err := time.Parse(time.RFC3339, req.Start)
	if err != nil {
		return reservation.Booking{}, badInput("start", req.Start, "not an RFC 3339 time such as 2026-12-07T08:00:00+09:00")
	}
	d, err := time.ParseDuration(req.Duration)
	if err != nil {
		return reservation.Booking{}, badInput("duration", req.Duration, "not a Go duration such as 168h")
	}
	if d <= 0 || d > reservation.MaxDuration {
		return reservation.Booking{}, badInput("duration", req.Duration, "must be more than 0 and at most %s", reservation.MaxDuration)
	}
	if req.Flavor != "" && req.Model != "" {
		return reservation.Booking{}, badInput("flavor", req.Flavor, "given with model %q: a booking gives flavor or model, not both", req.Model)
	}
	return reservation.Booking{ID: req.ID, Namespace: req.Namespace, GPUs: req.GPUs, AllocGPUs: req.AllocGPUs,
		Flavor: req.Flavor, Model: req.Model, NodePool: req.NodePool, Start: start, End: start.Add(d)}, nil
}

// flavorNames returns the function that names a booking's flavor in the
// stored tree of g (reservation.Tree.FlavorOf: "gpu" in a tree without
// flavor blocks, the only flavor for a booking stored before flavors),
// or the booking's own Flavor when there is no tree or the tree changed
// so that it has none.
func flavorNames(g *store.Guarded) func(reservation.Booking) string {
	var t *reservation.Tree
	if g != nil && g.Tree != nil && g.Tree.Root != nil {
		t, _ = reservation.NewTree(g.Tree.Root)
	}
	return func(b reservation.Booking) string {
		if t != nil {
			if f, err := t.FlavorOf(b); err == nil {
				return f
			}
		}
		return b.Flavor
	}
}

// entryOf renders b of flavor flavor (flavorNames) for c, redacted
// without read-job on its namespace. A booking cancelled by force whose
// jobs are still stopping shows outcome "forced" and ended_at its
// CancelledAt.
func entryOf(b reservation.Booking, flavor string, c *caller, running int) ReservationEntry {
	e := ReservationEntry{Namespace: b.Namespace, GPUs: b.GPUs}
	if c.canRead(b.Namespace) {
		start, end := b.Start, b.End
		e.ID, e.Node, e.AllocGPUs, e.Flavor, e.Model, e.NodePool, e.Start, e.End, e.Running =
			b.ID, b.Node, b.AllocGPUs, flavor, b.Model, b.NodePool, &start, &end, running
		if !b.CancelledAt.IsZero() {
			at := b.CancelledAt
			e.Outcome, e.EndedAt = "forced", &at
		}
	}
	return e
}

// running counts the live allocations naming booking id in the state.
func (s *Server) running(id string) int {
	st := s.cfg.Backend.State()
	if st.Snapshot == nil {
		return 0
	}
	n := 0
	for _, a := range st.Snapshot.Allocations {
		if a.Reservation == id {
			n++
		}
	}
	return n
}

// reservationList serves GET /v1/reservations[?namespace=] (any valid
// token), by ID, redacted per namespace.
func (s *Server) reservationList(w http.ResponseWriter, r *http.Request, c *caller) {
	_, fresh, err := s.current()
	if err != nil {
		writeError(w, err)
		return
	}
	g, err := s.cfg.Store.ReadGuarded(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, ReservationsResponse{State: fresh, Reservations: s.reservationsOf(g, r.URL.Query().Get("namespace"), c, s.cfg.Now())})
}

// reservationsOf renders the unended bookings (End after now) of g of
// namespace ns ("": all) for c, in the store's order (by ID), redacted per
// namespace (entryOf). An ended booking is left out at once, before the
// leader moves it to history (DESIGN L10 "End"); GET /v1/reservation/<id>
// still finds it.
func (s *Server) reservationsOf(g *store.Guarded, ns string, c *caller, now time.Time) []ReservationEntry {
	out := []ReservationEntry{}
	flavor := flavorNames(g)
	for _, b := range g.Reservations {
		if !b.End.After(now) {
			continue
		}
		if ns == "" || b.Namespace == ns {
			out = append(out, entryOf(b, flavor(b), c, s.running(b.ID)))
		}
	}
	return out
}

// reservationGet serves GET /v1/reservation/<id> (an ID that no booking
// can have is a 400 naming it): read-job on its
// namespace, else 404 as for a missing one. A booking no longer in
// reservations/ is read from history/reservations/<id> (ended, cancelled
// or forced; Outcome and EndedAt set).
func (s *Server) reservationGet(w http.ResponseWriter, r *http.Request, c *caller) {
	id := r.PathValue("id")
	if err := reservation.ValidID(id); err != nil {
		writeError(w, err) // 400 before any store read: no key is built of it
		return
	}
	st, fresh, err := s.current()
	if err != nil {
		writeError(w, err)
		return
	}
	warnings := warningsOf(st.Plan, c, func(w plan.Warning) bool { return w.Reservation == id })
	g, err := s.cfg.Store.ReadGuarded(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	if b, ok := g.Reservation(id); ok {
		if !c.canRead(b.Namespace) {
			writeError(w, notFound("reservation %q not found", id))
			return
		}
		writeJSON(w, ReservationResponse{State: fresh, Reservation: entryOf(b, flavorNames(g)(b), c, s.running(id)), Warnings: warnings})
		return
	}
	h, err := s.cfg.Store.ReservationHistoryOf(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) || err == nil && !c.canRead(h.Booking.Namespace) {
		writeError(w, notFound("reservation %q not found", id))
		return
	}
	if err != nil {
		writeError(w, err)
		return
	}
	e := entryOf(h.Booking, flavorNames(g)(h.Booking), c, s.running(id))
	ended := h.EndedAt
	e.Outcome, e.EndedAt = h.Outcome, &ended
	writeJSON(w, ReservationResponse{State: fresh, Reservation: e})
}

// reservationCreate serves POST /v1/reservations: submit-job on the
// namespace; one guarded write validated by reservation.Prepare, the
// namespace's cap (reservation_max_per_namespace) and L10 (Tree.Check) on
// the state at the guard index.
func (s *Server) reservationCreate(w http.ResponseWriter, r *http.Request, c *caller) {
	data, err := readBody(r)
	if err != nil {
		writeError(w, err)
		return
	}
	b, err := DecodeBooking(data)
	if err != nil {
		writeError(w, err)
		return
	}
	if !c.canSubmit(b.Namespace) {
		writeError(w, forbidden(fmt.Sprintf("permission denied: booking needs submit-job on namespace %q", b.Namespace)))
		return
	}
	if b.ID == "" {
		if b.ID, err = s.newID(); err != nil {
			writeError(w, err)
			return
		}
	}
	now := s.cfg.Now()
	var booked reservation.Booking
	var bookedFlavor string
	_, err = s.cfg.Store.Guarded(r.Context(), func(g *store.Guarded) ([]store.Change, error) {
		// The request is checked whole (tree, Prepare, L10) before its ID:
		// a caller learns that an ID is taken only for a booking that would
		// otherwise be accepted, so an ID of another namespace gets the same
		// answer as a free one until then (issue 16; the store keeps one
		// key per ID, DESIGN §6, so a taken ID is then refused).
		if g.Tree == nil || g.Tree.Root == nil {
			return nil, conflict("no quota tree is stored yet")
		}
		tree, err := reservation.NewTree(g.Tree.Root)
		if err != nil {
			return nil, conflict("quota tree: %v", err)
		}
		lim := s.limitsOf(g.Tree.Settings)
		nb, err := reservation.Prepare(tree, b, now, lim)
		if err != nil {
			return nil, err
		}
		if err := capPerNamespace(g, nb.Namespace, g.Tree.Settings.MaxPerNamespace(), now); err != nil {
			return nil, err
		}
		// Checked without its ID: Check passes over a booking of the
		// same ID (an update of itself), and a new booking updates
		// nothing, so another namespace's booking of that ID counts too.
		probe := nb
		probe.ID = ""
		if err := tree.Check(g.Reservations, probe, now.Add(lim.MaxAhead)); err != nil {
			return nil, err
		}
		if old, taken := g.Reservation(b.ID); taken {
			if c.canRead(old.Namespace) {
				return nil, conflict("reservation ID %q is taken (namespace %s, %s to %s)", b.ID, old.Namespace,
					reservation.FormatInstant(old.Start), reservation.FormatInstant(old.End))
			}
			return nil, conflict("reservation ID %q is taken", b.ID)
		}
		booked = nb
		bookedFlavor, _ = tree.FlavorOf(nb)
		return []store.Change{
			store.PutReservation(nb),
			store.PutChangeRecord(store.ChangeRecord{At: now, Op: "reservation create", Accessor: c.accessor(), Subject: nb.ID,
				Detail: fmt.Sprintf("%s %d %s GPUs on %s from %s for %s", nb.Namespace, nb.GPUs, bookedFlavor, nb.Node, reservation.FormatInstant(nb.Start), nb.Duration()), Guard: g.Counter}),
		}, nil
	})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSONStatus(w, http.StatusCreated, ReservationResponse{Reservation: entryOf(booked, bookedFlavor, c, 0)})
}

// capPerNamespace refuses (409) a new booking of namespace ns when ns
// already has max bookings that have not ended (End after now) in the
// guarded state g: tree setting reservation_max_per_namespace (issue 16).
// It runs inside the guarded write, so concurrent bookings cannot pass it.
func capPerNamespace(g *store.Guarded, ns string, max int, now time.Time) error {
	n := 0
	for _, b := range g.Reservations {
		if b.Namespace == ns && b.End.After(now) {
			n++
		}
	}
	if n >= max {
		return conflict("namespace %q has %d bookings that have not ended, the most reservation_max_per_namespace (%d) allows; cancel one, or an admin raises the setting", ns, n, max)
	}
	return nil
}

// limitsOf returns the booking limits of the stored tree's settings
// (reservation_max_ahead, reservation_min_duration; DESIGN L10, issue 9:
// every key that validates a write lives in the tree's settings, so leader
// and standbys agree); a setting absent (zero) there keeps Config.Limits.
func (s *Server) limitsOf(st quota.Settings) reservation.Limits {
	lim := s.cfg.Limits
	if st.ReservationMaxAhead > 0 {
		lim.MaxAhead = st.ReservationMaxAhead
	}
	if st.ReservationMinDuration > 0 {
		lim.MinDuration = st.ReservationMinDuration
	}
	return lim
}

// reservationCancel serves DELETE /v1/reservation/<id>[?force=true]:
// submit-job on its namespace cancels, with or without read-job there
// (DESIGN §9: submit-job books and cancels); without read-job the answer
// shows only the booking's namespace and GPUs (entryOf). A token with
// neither right there gets 404, as for a missing booking; read-job
// without submit-job gets 403. A booking with running allocations needs
// force. A booking without running
// allocations goes to history at once (outcome "cancelled"). A forced
// cancel of a booking in its window ends it now (End and CancelledAt set
// to now, DESIGN L10 "End": the core's L10.end stops its jobs at once) and
// the leader moves it to history (outcome "forced") once they are gone;
// cancelling it again answers the same booking and writes nothing.
func (s *Server) reservationCancel(w http.ResponseWriter, r *http.Request, c *caller) {
	id := r.PathValue("id")
	if err := reservation.ValidID(id); err != nil {
		writeError(w, err)
		return
	}
	force := false
	if v := r.URL.Query().Get("force"); v != "" {
		f, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, badInput("force", v, "want true or false"))
			return
		}
		force = f
	}
	now := s.cfg.Now()
	var gone reservation.Booking
	var goneFlavor string
	var running int
	_, err := s.cfg.Store.Guarded(r.Context(), func(g *store.Guarded) ([]store.Change, error) {
		b, ok := g.Reservation(id)
		if !ok || (!c.canRead(b.Namespace) && !c.canSubmit(b.Namespace)) {
			return nil, notFound("reservation %q not found", id)
		}
		if !c.canSubmit(b.Namespace) {
			return nil, forbidden(fmt.Sprintf("permission denied: cancelling needs submit-job on namespace %q", b.Namespace))
		}
		running = s.running(id)
		goneFlavor = flavorNames(g)(b)
		if !b.CancelledAt.IsZero() {
			gone = b // forced already; its jobs are stopping
			return nil, errAlreadyForced
		}
		if running > 0 && !force {
			return nil, conflict("reservation %q has %d running allocations; cancel with -force (?force=true) to stop them", id, running)
		}
		outcome := "cancelled"
		if running > 0 {
			outcome = "forced"
		}
		record := store.PutChangeRecord(store.ChangeRecord{At: now, Op: "reservation cancel", Accessor: c.accessor(), Subject: id,
			Detail: fmt.Sprintf("%s, %d running allocations", outcome, running), Guard: g.Counter})
		if running > 0 && now.After(b.Start) && now.Before(b.End) {
			// Forced: the booking ends now and stays until its jobs,
			// stopped by the core's L10.end, are gone; the leader then
			// moves it to history (agent endBookings).
			b.End, b.CancelledAt = now, now
			gone = b
			return []store.Change{store.PutReservation(b), record}, nil
		}
		gone = b
		return []store.Change{
			store.DeleteReservation(id),
			store.PutReservationHistory(store.ReservationHistory{Booking: b, EndedAt: now, Outcome: outcome}),
			record,
		}, nil
	})
	if err != nil && !errors.Is(err, errAlreadyForced) {
		writeError(w, err)
		return
	}
	writeJSON(w, ReservationResponse{Reservation: entryOf(gone, goneFlavor, c, running)})
}

// errAlreadyForced ends a cancel's guarded write without writing: the
// booking was cancelled by force before and its jobs are stopping.
var errAlreadyForced = errors.New("already cancelled by force")

// newID draws a default reservation ID (reservation.NewID).
func (s *Server) newID() (string, error) {
	src := s.cfg.Random
	if src == nil {
		src = rand.Reader
	}
	var b [4]byte
	if _, err := io.ReadFull(src, b[:]); err != nil {
		return "", fmt.Errorf("drawing a reservation ID: %w", err)
	}
	return reservation.NewID(b), nil
}
