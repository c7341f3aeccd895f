package pluginconf

import (
	"errors"
	"testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name  string
		cfg   map[string]string
		known []string
		want  string // "" = accepted
	}{
		{"the agent's nomad_ keys are ignored", map[string]string{"nomad_address": "http://127.0.0.1:4646", "nomad_token": "s", "nomad_config_inherit": "true"}, nil, ""},
		{"known keys are accepted", map[string]string{"address": "http://x", "nomad_token": "s"}, []string{"address", "token"}, ""},
		{"an unknown key is refused by name", map[string]string{"adress": "http://x"}, []string{"address", "token"},
			`gputide-apm: config key "adress": unknown key; known keys are address, token`},
		{"a plugin without keys says where its settings go", map[string]string{"timezone": "UTC"}, nil,
			`gputide-apm: config key "timezone": unknown key; this plugin takes no keys here`},
		{"the first unknown key in sorted order is named", map[string]string{"zeta": "1", "alpha": "2"}, nil,
			`gputide-apm: config key "alpha": unknown key; this plugin takes no keys here`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check("gputide-apm", tt.cfg, tt.known...)
			got := ""
			if err != nil {
				got = err.Error()
				if !errors.Is(err, ErrUnknownKey) {
					t.Errorf("error %v does not wrap ErrUnknownKey", err)
				}
			}
			if got != tt.want {
				t.Errorf("Check(%v)\n got: %s\nwant: %s", tt.cfg, got, tt.want)
			}
		})
	}
}
