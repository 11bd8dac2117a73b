// Package scheme builds the runtime.Scheme of the shipped binaries: the built-in Kubernetes kinds
// plus regionsync's own API group. The demo's API is not in it (the harness adds it: see
// testenv.Scheme), so the production agent does not link it.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
)

// New returns a new scheme with the built-in kinds and regionsync's API.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(regionsyncv1alpha1.AddToScheme(s))
	return s
}
