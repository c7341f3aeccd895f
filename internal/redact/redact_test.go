package redact

import (
	"errors"
	"net/url"
	"testing"
)

func TestAddressHidesTheUserinfo(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://127.0.0.1:4646", "http://127.0.0.1:4646"},
		{"https://user:secret@nomad.example:4646", "https://redacted@nomad.example:4646"},
		{"http://token@nomad.example", "http://redacted@nomad.example"},
		{"http://user:secret@nomad.example/ui?x=1", "http://redacted@nomad.example/ui?x=redacted"},
		{"http://nomad.example:4646/?token=secret&a=b", "http://nomad.example:4646/?token=redacted&a=redacted"},
		{"http://nomad.example:4646?secret", "http://nomad.example:4646?redacted"},
		{"http://nomad.example:4646/#secret", "http://nomad.example:4646/#redacted"},
		{"http://admin:%secret@nomad.example", "redacted@nomad.example"}, // a bad escape: does not parse
		{"http://user:***@nomad.example/v1/jobs/parse", "http://redacted@nomad.example/v1/jobs/parse"},
		{"user:secret@10.0.0.1:4646", "redacted@10.0.0.1:4646"}, // does not parse: cut at the last '@'
		{"nomad.example:4646", "nomad.example:4646"},
	} {
		if got := Address(tc.in); got != tc.want {
			t.Errorf("Address(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestURLErrorRedactsTheURL(t *testing.T) {
	err := error(&url.Error{Op: "Get", URL: "http://tok3n@127.0.0.1:1/v1/quotas", Err: errors.New("connection refused")})
	if got, want := URLError(err).Error(), `Get "http://redacted@127.0.0.1:1/v1/quotas": connection refused`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if URLError(nil) != nil {
		t.Error("URLError(nil) is not nil")
	}
}
