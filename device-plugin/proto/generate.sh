#!/usr/bin/env bash
# generate.sh regenerates the Go code for the .proto files in this folder.
#
# Needs: protoc (Debian: apt-get install -y protobuf-compiler, libprotoc 3.21),
# protoc-gen-go and protoc-gen-go-grpc. The plugin versions are pinned here so
# that the generated files only change when these pins change; missing ones are
# installed with `go install` into $(go env GOPATH)/bin.
#
# Run from anywhere: `go generate ./device-plugin/proto/` or
# `bash device-plugin/proto/generate.sh`.
set -euo pipefail

PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
gobin="$(go env GOPATH)/bin"
export PATH="$gobin:$PATH"

want_version() { # binary version
  command -v "$1" >/dev/null 2>&1 && "$1" --version 2>/dev/null | grep -q -- "${2#v}"
}
want_version protoc-gen-go "$PROTOC_GEN_GO_VERSION" ||
  go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
want_version protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION" ||
  go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"
command -v protoc >/dev/null || {
  echo "protoc not found: apt-get install -y protobuf-compiler" >&2
  exit 1
}

cd "$root"
# Paths relative to the repository root become the registered file names
# (device-plugin/proto/...), which keeps them unique in any binary.
protoc -I . -I /usr/include \
  --go_out=. --go_opt=module=github.com/gputide/gputide \
  --go-grpc_out=. --go-grpc_opt=module=github.com/gputide/gputide \
  device-plugin/proto/hclspecpb/hcl_spec.proto \
  device-plugin/proto/basepb/base.proto \
  device-plugin/proto/structspb/attribute.proto \
  device-plugin/proto/structspb/stats.proto \
  device-plugin/proto/devicepb/device.proto
