#!/usr/bin/env bash
# golangci-lint.sh runs the project's golangci-lint (version pinned by hack/tools/lint/go.mod), building
# it into the tools cache outside the checkout first when it is missing (see scripts/go-tool.sh).
#
#   scripts/golangci-lint.sh run           # what `make lint` runs (configuration: .golangci.yml)
#   scripts/golangci-lint.sh run --fix     # what `make lint-fix` runs
exec "$(dirname "${BASH_SOURCE[0]}")/go-tool.sh" golangci-lint "$@"
