//go:build tools

// Package tools pins apidiff for scripts/apidiff.sh.
package tools

import _ "golang.org/x/exp/cmd/apidiff"
