package nomad

import "testing"

func TestRedactAddressHidesTheUserinfo(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://127.0.0.1:4646", "http://127.0.0.1:4646"},
		{"https://user:secret@nomad.example:4646", "https://redacted@nomad.example:4646"},
		{"http://token@nomad.example", "http://redacted@nomad.example"},
		{"http://user:secret@nomad.example/ui?x=1", "http://redacted@nomad.example/ui?x=1"},
		{"user:secret@10.0.0.1:4646", "redacted@10.0.0.1:4646"}, // does not parse: cut at the last '@'
		{"nomad.example:4646", "nomad.example:4646"},
	} {
		if got := RedactAddress(tc.in); got != tc.want {
			t.Errorf("RedactAddress(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
