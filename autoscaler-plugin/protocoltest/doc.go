// Package protocoltest holds the protocol tests of the autoscaler plugins: each
// built binary run under the Nomad Autoscaler v0.5.0's own plugin client
// (go-plugin with the autoscaler's handshake and plugin set, gRPC only), as its
// plugin manager runs it (issue 11, "Tests that must pass: Protocol").
package protocoltest
