package api

import (
	"errors"
	"net/http"
	"testing"

	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/reservation"
)

// checkDecodeError: every decoder error is a 400 naming a field, or (a
// whole tree breaking L1) a 409; never a panic.
func checkDecodeError(t *testing.T, what string, data []byte, err error) {
	if err == nil {
		return
	}
	status, body := statusOf(err)
	var ve *quota.ValidationError
	if errors.As(err, &ve) && status == http.StatusConflict {
		return
	}
	if status != http.StatusBadRequest || body.Field == "" {
		t.Fatalf("%s(%q): %d %+v, want 400 naming a field", what, data, status, body)
	}
}

func FuzzDecoders(f *testing.F) {
	for _, s := range []string{
		bookingB, `{"namespace":"a","gpus":1,"start":"2026-12-07T08:00:00Z","duration":"1h","alloc_gpus":-3}`,
		`{"from":"A","to":"B","gpus":8}`, `{"gpus":3}`, `{"gpus":null}`, `{"Job":{"ID":"x"}}`, `{"Namespace":"n","JobID":"j"}`,
		`{"root":{"Name":"Q","GPUs":8,"Children":[{"Name":"A","GPUs":9}]}}`, "quota \"Q\" {\n  gpus = 8\n}\n", `{`, `[]`, `null`, `{"id":"R"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := DecodeBooking(data)
		var re *reservation.Error
		if err != nil && !errors.As(err, &re) {
			checkDecodeError(t, "DecodeBooking", data, err)
		} else if err != nil && re.Field == "" {
			t.Fatalf("DecodeBooking(%q): %v names no field", data, err)
		}
		_, err = DecodeMove(data)
		checkDecodeError(t, "DecodeMove", data, err)
		_, err = DecodeScale(data)
		checkDecodeError(t, "DecodeScale", data, err)
		_, err = DecodePlanRequest(data)
		checkDecodeError(t, "DecodePlanRequest", data, err)
		_, _, err = DecodeTree(data, "application/json")
		checkDecodeError(t, "DecodeTree json", data, err)
		_, _, err = DecodeTree(data, "text/plain")
		checkDecodeError(t, "DecodeTree hcl", data, err)
	})
}
