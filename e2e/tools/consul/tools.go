//go:build tools

// Package tools pins the Consul server module for build.sh; it is never
// compiled (build tag tools).
package tools

import _ "github.com/hashicorp/consul"
