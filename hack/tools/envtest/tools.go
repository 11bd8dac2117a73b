//go:build tools

// Package tools records the tool this module pins.
package tools

import _ "sigs.k8s.io/controller-runtime/tools/setup-envtest"
