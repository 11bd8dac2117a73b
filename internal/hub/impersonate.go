package hub

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
)

// Writers hands out clients that act as a ServiceAccount (client-go impersonation, the way
// Flux's kustomize-controller and OCM's ManifestWork executor write a tenant's objects): every
// per-region object is written as a ServiceAccount of its Distribution's namespace, so a
// Distribution places only what that ServiceAccount may write there. One client per
// ServiceAccount, built on first use and kept; their number is that of the distinct
// ServiceAccounts Distributions name.
type Writers struct {
	config  *rest.Config
	options client.Options

	mu      sync.Mutex
	clients map[types.NamespacedName]client.Client
}

// NewWriters returns Writers acting, through cfg (the hub's own identity, which needs the verb
// impersonate on the ServiceAccounts), as the ServiceAccounts Distributions name.
func NewWriters(cfg *rest.Config, o client.Options) *Writers {
	return &Writers{config: cfg, options: o, clients: map[types.NamespacedName]client.Client{}}
}

// ServiceAccountUser is the user name the API server gives the ServiceAccount namespace/name.
func ServiceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// For returns the client acting as the ServiceAccount namespace/name.
func (w *Writers) For(namespace, name string) (client.Client, error) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	w.mu.Lock()
	defer w.mu.Unlock()
	if c, ok := w.clients[key]; ok {
		return c, nil
	}
	cfg := rest.CopyConfig(w.config)
	// Only the user name: the API server adds the ServiceAccount's groups itself.
	cfg.Impersonate = rest.ImpersonationConfig{UserName: ServiceAccountUser(namespace, name)}
	o := w.options
	o.HTTPClient = nil // a client of its own: the impersonation is in its transport
	c, err := client.New(cfg, o)
	if err != nil {
		return nil, fmt.Errorf("a client acting as ServiceAccount %s: %w", key, err)
	}
	w.clients[key] = c
	return c, nil
}

// ServiceAccountName is the ServiceAccount a Distribution's objects are written as:
// spec.serviceAccountName, else def (the hub configuration's default); an error naming the field
// when there is neither.
func ServiceAccountName(d *regionsyncv1alpha1.Distribution, def string) (string, error) {
	if n := d.Spec.ServiceAccountName; n != "" {
		return n, nil
	}
	if def != "" {
		return def, nil
	}
	return "", field.Required(field.NewPath("spec", "serviceAccountName"),
		fmt.Sprintf("names the ServiceAccount of namespace %s that the hub writes the per-region objects as; the hub's configuration sets no defaultServiceAccountName", d.Namespace))
}
