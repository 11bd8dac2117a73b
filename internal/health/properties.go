package health

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
)

// ClusterPropertyList is the About API's (KEP-2149) list kind of a cluster's ClusterProperty
// objects: cluster-scoped, each with spec.value.
var ClusterPropertyList = schema.GroupVersionKind{Group: "about.k8s.io", Version: "v1alpha1", Kind: "ClusterPropertyList"}

// ClusterProperties lists a cluster's ClusterProperty objects as a Region reports them: by name,
// at most MaxClusterProperties, each value cut to MaxClusterPropertyValue characters. A cluster
// that does not serve the About API has none (nil, no error).
func ClusterProperties(ctx context.Context, c client.Reader) ([]regionsyncv1alpha1.ClusterProperty, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(ClusterPropertyList)
	if err := c.List(ctx, list); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	out := make([]regionsyncv1alpha1.ClusterProperty, 0, len(list.Items))
	for _, item := range list.Items {
		value, _, _ := unstructured.NestedString(item.Object, "spec", "value")
		if len(value) > regionsyncv1alpha1.MaxClusterPropertyValue {
			value = value[:regionsyncv1alpha1.MaxClusterPropertyValue]
		}
		out = append(out, regionsyncv1alpha1.ClusterProperty{Name: item.GetName(), Value: value})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if len(out) > regionsyncv1alpha1.MaxClusterProperties {
		out = out[:regionsyncv1alpha1.MaxClusterProperties]
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// PropertyReader reads a cluster's ClusterProperty objects at most once per Every (the Region
// reporter asks on every tick), keeping the last answer when a read fails (logged once per
// failure, not per attempt).
type PropertyReader struct {
	Reader client.Reader
	Every  time.Duration
	Log    logr.Logger

	mu      sync.Mutex
	read    time.Time
	props   []regionsyncv1alpha1.ClusterProperty
	failing string
}

// Get returns the properties, reading them again when the last read is older than Every.
func (p *PropertyReader) Get() []regionsyncv1alpha1.ClusterProperty {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.read.IsZero() && time.Since(p.read) < p.Every {
		return p.props
	}
	p.read = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	props, err := ClusterProperties(ctx, p.Reader)
	switch {
	case err != nil && err.Error() != p.failing:
		p.failing = err.Error()
		msg := "reading the regional ClusterProperty objects (About API); the Region keeps the last ones read"
		if apierrors.IsForbidden(err) {
			msg = "reading the regional ClusterProperty objects (About API) is forbidden: grant the agent get and list on clusterproperties.about.k8s.io to report them"
		}
		p.Log.Error(err, msg)
	case err == nil:
		if p.failing != "" {
			p.Log.Info("reading the regional ClusterProperty objects works again")
		}
		p.failing, p.props = "", props
	}
	return p.props
}
