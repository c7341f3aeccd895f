// Package proto holds gputide's own declaration of Nomad's device plugin wire
// protocol: the .proto files and the Go generated from them.
//
// The proto packages, services, message names and field numbers are the same
// as Nomad's (hashicorp.nomad.plugins.base.proto,
// hashicorp.nomad.plugins.shared.hclspec, hashicorp.nomad.plugins.shared.structs
// and hashicorp.nomad.plugins.device), so a Nomad client speaks to them
// unchanged; see shared/reference/nomad-device-plugin-protocol.md. Nothing here
// imports github.com/hashicorp/nomad.
//
// Subpackages: basepb (BasePlugin), hclspecpb (config spec), structspb
// (Attribute, StatObject, StatValue), devicepb (DevicePlugin).
package proto

//go:generate bash generate.sh
