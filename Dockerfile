# The image the manifests under deploy/kubernetes name
# (ghcr.io/corralhq/corral): one static binary, every part of corral
# behind its subcommand (corral dns, corral hub, corral edge, ...).
#
#   docker build -t ghcr.io/corralhq/corral:latest .
#
# The binary needs no cgo (CGO_ENABLED=0 builds it); the dashboard's and
# the reports' assets are embedded in it. The runtime image has no shell:
# the manifests' probes are HTTP probes, not commands.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags=-s -o /out/corral ./cmd/corral

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/corral /usr/local/bin/corral
USER nonroot
ENTRYPOINT ["/usr/local/bin/corral"]
