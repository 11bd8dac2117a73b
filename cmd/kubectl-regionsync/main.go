// Command kubectl-regionsync is regionsync's kubectl plugin: the fleet at a glance (status), an
// object's way from management to its region or why it has none (explain), what a Distribution
// would do before it lands (diff, exit code 1 when it changes something), what needs a person
// (doctor, exit code 2 when something does), the operator's documented annotations as verbs
// (release, pause, resume, retry) and the library's decommissioning (decommission). It reads
// management through the user's own kubeconfig (--kubeconfig, --context, -n) and a region through
// --region-context.
//
// Install it with `go install github.com/regionsync/regionsync/cmd/kubectl-regionsync@latest`
// (or krew, deploy/krew/regionsync.yaml); kubectl finds it on PATH as `kubectl regionsync`.
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
		if errors.Is(err, errDifferences) {
			os.Exit(1)
		}
		var ee *exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}
