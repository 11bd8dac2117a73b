package regionsync

import (
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/regionsync/regionsync/internal/syncer"
)

// Complete exposes complete to this package's external tests (those that need pkg/config, which
// imports this package): the defaulted Options and the engine's settings.
func Complete(o Options) (Options, *syncer.Settings, error) {
	o, s, _, err := o.complete(runtime.NewScheme())
	return o, s, err
}
