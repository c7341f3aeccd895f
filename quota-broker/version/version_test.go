package version

import (
	"regexp"
	"testing"
)

// semver is the form Nomad's go-version accepts for a plugin version, kept
// to what a release of ours looks like: MAJOR.MINOR.PATCH[-PRERELEASE].
var semver = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z]+(\.[0-9A-Za-z]+)*)?$`)

func TestNumberIsASemanticVersion(t *testing.T) {
	if !semver.MatchString(Number) {
		t.Fatalf("Number %q is not MAJOR.MINOR.PATCH[-PRERELEASE]", Number)
	}
}

func TestString(t *testing.T) {
	defer func(c string) { Commit = c }(Commit)
	Commit = ""
	if got := String(); got != "v0.1.0-dev" {
		t.Errorf("without a commit: %q, want %q", got, "v0.1.0-dev")
	}
	Commit = "9fdc0b8a1c2e"
	if got := String(); got != "v0.1.0-dev (9fdc0b8a1c2e)" {
		t.Errorf("with a commit: %q, want %q", got, "v0.1.0-dev (9fdc0b8a1c2e)")
	}
}
