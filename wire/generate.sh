#!/usr/bin/env bash
# wire/generate.sh: regenerates wire/corralv1 from proto/corral/v1/*.proto.
# It is the one documented way to regenerate the committed Go code (also
# reachable as `go generate ./wire`). It installs what it needs when missing:
# protoc from Debian's protobuf-compiler (apt-get), and the two Go plugins at
# pinned versions (go install) into $(go env GOPATH)/bin.
set -euo pipefail
cd "$(dirname "$0")/.."

PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2

if ! command -v protoc >/dev/null 2>&1; then
	sudo=""
	if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
	echo "wire/generate.sh: installing protobuf-compiler" >&2
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends protobuf-compiler >/dev/null
fi

gobin="$(go env GOPATH)/bin"
export PATH="$gobin:$PATH"
want_go="protoc-gen-go ${PROTOC_GEN_GO_VERSION}"
if [ "$(protoc-gen-go --version 2>/dev/null || true)" != "$want_go" ]; then
	go install "google.golang.org/protobuf/cmd/protoc-gen-go@${PROTOC_GEN_GO_VERSION}"
fi
want_grpc="protoc-gen-go-grpc ${PROTOC_GEN_GO_GRPC_VERSION#v}"
if [ "$(protoc-gen-go-grpc --version 2>/dev/null || true)" != "$want_grpc" ]; then
	go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@${PROTOC_GEN_GO_GRPC_VERSION}"
fi

protoc --proto_path=proto \
	--go_out=. --go_opt=module=github.com/corralhq/corral \
	--go-grpc_out=. --go-grpc_opt=module=github.com/corralhq/corral \
	proto/corral/v1/*.proto
echo "wire/generate.sh: regenerated wire/corralv1 with $(protoc --version)" >&2
