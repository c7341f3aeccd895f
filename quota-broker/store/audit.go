package store

import (
	"context"
	"strconv"
	"time"
)

// dirHistoryChanges holds one record per guarded write made through the API
// (DESIGN §9: every quota write and booking records the token's accessor
// ID, never the secret).
const dirHistoryChanges Key = "history/changes/"

// ChangeRecord is the value of HistoryChangeKey: who made one guarded write
// through the API, and what it was.
type ChangeRecord struct {
	At time.Time `json:"at"`
	// Op is "quota move", "quota scale", "quota apply", "reservation
	// create" or "reservation cancel".
	Op string `json:"op"`
	// Accessor is the Nomad token's accessor ID, or "admin-token" for the
	// broker's own admin token; never a secret.
	Accessor string `json:"accessor"`
	// Subject names what changed: quota node names or a reservation ID.
	Subject string `json:"subject"`
	// Detail is a one-line summary ("Quota1.2 -> Quota1.1: 8 GPUs").
	Detail string `json:"detail,omitempty"`
	// Guard is the guard counter the write was validated at; with At it
	// makes the key unique.
	Guard uint64 `json:"guard"`
}

// HistoryChangeKey is history/changes/<time>-<guard>, the time in the
// fixed-width UTC layout of HistoryPreemptionKey so keys sort by time.
func HistoryChangeKey(at time.Time, guard uint64) Key {
	return dirHistoryChanges + Key(at.UTC().Format(historyTimeLayout)+"-"+strconv.FormatUint(guard, 10))
}

// PutChangeRecord records one API write inside its guarded transaction.
func PutChangeRecord(c ChangeRecord) Change {
	return Change{key: HistoryChangeKey(c.At, c.Guard), value: c}
}

// ChangeRecords lists the API write records, oldest first. They are not
// pruned by PruneHistory yet.
func (s *KV) ChangeRecords(ctx context.Context) ([]ChangeRecord, error) {
	return listDecode[ChangeRecord](ctx, s, dirHistoryChanges)
}
