package syncer

import (
	"fmt"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestPendingNamespaces: the namespaces noted for a fan-out object come back sorted and once;
// an event without a name, or more namespaces than a narrow pass looks at, leave nil (the next
// pass is a full one); objects do not share their notes.
func TestPendingNamespaces(t *testing.T) {
	a, b := types.NamespacedName{Namespace: "src", Name: "a"}, types.NamespacedName{Namespace: "src", Name: "b"}
	many := make([]string, maxNarrowNamespaces+1)
	for i := range many {
		many[i] = fmt.Sprintf("ns-%03d", i)
	}
	for _, tc := range []struct {
		name string
		add  []string
		want []string
	}{
		{"none", nil, nil},
		{"one", []string{"x"}, []string{"x"}},
		{"sorted, each once", []string{"z", "x", "z", "y"}, []string{"x", "y", "z"}},
		{"an event without a name", []string{"x", "", "y"}, nil},
		{"as many as a narrow pass looks at", many[:maxNarrowNamespaces], many[:maxNarrowNamespaces]},
		{"more", many, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p pendingNamespaces
			for _, ns := range tc.add {
				p.add(a, ns)
			}
			p.add(b, "other")
			if got := p.take(a); !slices.Equal(got, tc.want) {
				t.Errorf("take = %v, want %v", got, tc.want)
			}
			if got := p.take(a); got != nil {
				t.Errorf("second take = %v, want nil", got)
			}
			if got := p.take(b); !slices.Equal(got, []string{"other"}) {
				t.Errorf("the other object's = %v", got)
			}
		})
	}
	var p pendingNamespaces
	p.add(a, "x")
	p.forget(a)
	if got := p.take(a); got != nil {
		t.Errorf("after forget: %v", got)
	}
}
