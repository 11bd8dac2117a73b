package syncer

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
)

// This file holds the pure part of namespace fan-out: which local namespaces a fan-out object's
// selector asks for, within the scope the agent may write. No client calls here.

// fanOutEvery is the fan-out selector that matches every namespace in the agent's scope.
const fanOutEvery = "*"

// errEmptyFanOut is the error of an empty fan-out selector: it would match every namespace
// (labels.Parse("") is Everything), which is never what an empty value means.
var errEmptyFanOut = errors.New(`empty selector (write "*" for every namespace in the agent's scope)`)

// parseFanOutSelector parses the value of the fan-out annotation: "*" selects every namespace,
// anything else is a label selector ("team=a,env in (prod,staging)"). An empty value is invalid.
func parseFanOutSelector(v string) (labels.Selector, error) {
	switch strings.TrimSpace(v) {
	case fanOutEvery:
		return labels.Everything(), nil
	case "":
		return nil, errEmptyFanOut
	}
	sel, err := labels.Parse(v)
	if err != nil {
		return nil, fmt.Errorf("not a label selector: %w", err)
	}
	return sel, nil
}

// namespaceInfo is what fan-out needs of a local namespace.
type namespaceInfo struct {
	name        string
	labels      map[string]string
	terminating bool
}

// fanOutScope says where a fan-out object may have copies: never in a protected namespace,
// never in skip (the source's own namespace when management and the region are one cluster),
// and only in namespaces inScope accepts.
type fanOutScope struct {
	protected sets.Set[string]
	inScope   func(namespace string) bool
	skip      string
}

// allows reports whether a copy may live in namespace ns.
func (s fanOutScope) allows(ns string) bool {
	return ns != s.skip && !s.protected.Has(ns) && s.inScope(ns)
}

// selectTargets returns, sorted, the namespaces that get a copy: in scope, matching sel, and
// not terminating (nothing can be created there; a copy already there goes with its namespace).
// terminating are the terminating namespaces, whose copies are not deleted one by one.
func selectTargets(namespaces []namespaceInfo, sel labels.Selector, scope fanOutScope) (targets []string, terminating sets.Set[string]) {
	terminating = sets.New[string]()
	for _, ns := range namespaces {
		if ns.terminating {
			terminating.Insert(ns.name)
			continue
		}
		if scope.allows(ns.name) && sel.Matches(labels.Set(ns.labels)) {
			targets = append(targets, ns.name)
		}
	}
	slices.Sort(targets)
	return targets, terminating
}
