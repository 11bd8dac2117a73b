# regionsync agent image: a static binary on a distroless, non-root base.
#   make docker-build IMG=ghcr.io/regionsync/agent:dev
# Where golang and distroless cannot be pulled (air-gapped, this project's dev machines),
# `make agent-image-offline` builds the same binaries on the host into a FROM scratch image
# (hack/kind/agent-image.sh, hack/kind/Dockerfile.agent), which also holds the demo's tenant
# operator for the kind e2e; this product image holds only the agent and the hub.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
COPY pkg/ pkg/
ARG VERSION=dev
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath \
    -ldflags "-s -w -X main.Version=${VERSION}" \
    -o /out/ ./cmd/agent ./cmd/hub

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/agent /agent
# The hub (deploy/kustomize/hub runs it with command /hub) ships in the same image.
COPY --from=build /out/hub /hub
USER 65532:65532
ENTRYPOINT ["/agent"]
