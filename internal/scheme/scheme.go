// Package scheme builds the runtime.Scheme shared by the agent, the demo and the tests: the
// built-in Kubernetes kinds plus regionsync's own API groups.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
)

// New returns a new scheme with every kind regionsync knows.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(demov1alpha1.AddToScheme(s))
	utilruntime.Must(regionsyncv1alpha1.AddToScheme(s))
	return s
}
