package inspect

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/regionsync/regionsync/internal/shard"
)

// ExplainRequest names the object to explain and where to read it.
type ExplainRequest struct {
	// Management reads the management cluster.
	Management *Clients
	// Region opens the clients of the region to look for the copy in, when it is needed; nil:
	// the region is not read.
	Region func() (*Clients, error)
	// ManagementNamespace holds the shard Leases on management.
	ManagementNamespace string
	// Keys are the agents' annotation keys (a region's registered annotation domain overrides
	// them for that region).
	Keys shard.Keys
	// Mapping is the object's kind on management; Namespace and Name name it.
	Mapping         *meta.RESTMapping
	Namespace, Name string
	// Now is the clock liveness and ages are judged against.
	Now time.Time
}

// ReadExplainInput reads what Explain needs, a bounded number of requests whatever the number of
// regions: on management the object, the shard Leases, the Regions and the object's Events; in
// the region, when asked, one list for the copy and one for its Events.
func ReadExplainInput(ctx context.Context, req ExplainRequest) (ExplainInput, error) {
	mc, mapping, ns, name := req.Management, req.Mapping, req.Namespace, req.Name
	in := ExplainInput{Keys: req.Keys, Kind: shard.KindName(mapping.GroupVersionKind), Namespace: ns, Name: name, Now: req.Now}
	ref := fmt.Sprintf("%s %s/%s", in.Kind, ns, name)
	obj, err := mc.Dynamic.Resource(mapping.Resource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return ExplainInput{}, fmt.Errorf("reading %s on management: %w", ref, err)
	default:
		in.Object = obj
	}
	if in.Fleet, err = LoadFleet(ctx, mc, req.ManagementNamespace, in.Now); err != nil {
		return ExplainInput{}, err
	}
	if in.Events, err = eventsAbout(ctx, mc, ns, mapping.GroupVersionKind.Kind, name); err != nil {
		return ExplainInput{}, fmt.Errorf("listing the Events of %s on management: %w", ref, err)
	}
	if req.Region != nil {
		rc, err := req.Region()
		if err != nil {
			return ExplainInput{}, err
		}
		in.RegionRead = true
		if in.Copy, err = findCopy(ctx, rc, mapping, in); err != nil {
			return ExplainInput{}, err
		}
		if in.Copy != nil {
			if in.CopyEvents, err = eventsAbout(ctx, rc, in.Copy.GetNamespace(), mapping.GroupVersionKind.Kind, in.Copy.GetName()); err != nil {
				return ExplainInput{}, fmt.Errorf("listing the Events of the copy %s/%s in the region: %w", in.Copy.GetNamespace(), in.Copy.GetName(), err)
			}
		}
	}
	return in, nil
}

// eventsAbout lists the Events regarding kind namespace/name, oldest first.
func eventsAbout(ctx context.Context, c *Clients, namespace, kind, name string) ([]EventLine, error) {
	sel := fields.Set{"involvedObject.name": name, "involvedObject.kind": kind}.AsSelector().String()
	list, err := c.Kube.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, err
	}
	out := make([]EventLine, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, eventLineOf(&list.Items[i]))
	}
	sortEvents(out)
	return out, nil
}

// findCopy looks for the regional copy of the object: the copies are marked with their region
// (label Keys.Region) and the management object's UID (annotation Keys.RemoteUID), under each
// region's annotation domain. Where the region's localNamespaceSuffix is not registered the
// copy's namespace is not known, so copies are listed by name across namespaces: one list per
// local name and domain the taking shards give (normally one).
func findCopy(ctx context.Context, rc *Clients, mapping *meta.RESTMapping, in ExplainInput) (*unstructured.Unstructured, error) {
	type group struct {
		local  string
		keys   shard.Keys
		region []string
	}
	var groups []*group
	var labelsOf map[string]string
	if in.Object != nil {
		labelsOf = in.Object.GetLabels()
		if labelsOf == nil {
			labelsOf = map[string]string{}
		}
	}
	for _, s := range in.Fleet.shardList() {
		v := judgeShard(in.Kind, in.Namespace, in.Name, labelsOf, s)
		if !v.Takes || v.MapError != "" {
			continue
		}
		k := s.keys(in.Keys)
		i := slices.IndexFunc(groups, func(g *group) bool { return g.local == v.local.Name && g.keys.Domain == k.Domain })
		if i < 0 {
			groups = append(groups, &group{local: v.local.Name, keys: k})
			i = len(groups) - 1
		}
		groups[i].region = append(groups[i].region, s.Region)
	}
	for _, g := range groups {
		req, err := labels.NewRequirement(g.keys.Region, selection.In, g.region)
		if err != nil {
			return nil, fmt.Errorf("selecting copies of regions %v: %w", g.region, err)
		}
		list, err := rc.Dynamic.Resource(mapping.Resource).List(ctx, metav1.ListOptions{
			LabelSelector: labels.NewSelector().Add(*req).String(),
			FieldSelector: fields.OneTermEqualSelector("metadata.name", g.local).String(),
		})
		if err != nil {
			return nil, fmt.Errorf("looking for the copy %s of %s %s/%s in the region: %w", g.local, in.Kind, in.Namespace, in.Name, err)
		}
		for i := range list.Items {
			c := &list.Items[i]
			if in.Object != nil && c.GetAnnotations()[g.keys.RemoteUID] == string(in.Object.GetUID()) {
				return c, nil
			}
			if in.Object == nil && copyOf(c, in, g.keys, g.local) {
				return c, nil
			}
		}
	}
	return nil, nil
}

// copyOf reports whether c, a marked copy named local, maps back to the (gone) management object
// under its region's shard.
func copyOf(c *unstructured.Unstructured, in ExplainInput, k shard.Keys, local string) bool {
	s := in.Fleet.Shards[c.GetLabels()[k.Region]]
	if s == nil || s.DefErr != nil {
		return false
	}
	base := strings.TrimSuffix(in.Namespace, s.Def.RemoteNamespaceSuffix)
	if suffix, ok := s.localSuffix(); ok {
		return local+s.Def.RemoteResourceSuffix == in.Name && c.GetNamespace() == base+suffix
	}
	return local+s.Def.RemoteResourceSuffix == in.Name && strings.HasPrefix(c.GetNamespace(), base)
}
