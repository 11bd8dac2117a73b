// Command kubectl-regionsync is regionsync's kubectl plugin: the fleet at a glance (status), an
// object's way from management to its region or why it has none (explain), and the operator's
// documented annotations as verbs (release, pause, resume). It reads management through the
// user's own kubeconfig (--kubeconfig, --context, -n) and a region through --region-context.
//
// Install it with `go install ./cmd/kubectl-regionsync` (or krew, deploy/krew/regionsync.yaml);
// kubectl finds it on PATH as `kubectl regionsync`.
package main

import (
	"errors"
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// Version is the plugin's version, set at build time with -ldflags "-X main.Version=...".
var Version = "dev"

func main() {
	cmd := newRootCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}, nil)
	if err := cmd.Execute(); err != nil {
		if errors.Is(err, errProblemsFound) {
			os.Exit(exitProblems)
		}
		os.Exit(1)
	}
}
