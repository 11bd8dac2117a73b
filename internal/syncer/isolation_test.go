package syncer_test

import (
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/regionsync/regionsync/internal/syncer"
)

// TestNamespaceScope: a management object that maps into one of the region's system namespaces
// or the agent's own namespace is refused with a Warning event on it, never claimed, and nothing
// is written in that namespace; the shard's other objects keep syncing.
func TestNamespaceScope(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	protected := append(append([]string{}, syncer.SystemNamespaces...), e.cfg.LeaderElection.Namespace)
	for _, ns := range protected {
		e.tenant(ns, "intruder", "takeover attempt")
	}
	ok := e.remoteNamespace("scope")
	e.tenant(ok, "fine", "Fine")
	e.waitSynced(ok, "fine")
	for _, ns := range protected {
		e.waitEvent(e.mgmt, ns, "intruder"+e.suffix, syncer.ReasonProtectedNamespace)
	}
	e.never("a copy written in a protected namespace", 2*time.Second, func() bool {
		for _, ns := range protected {
			if _, err := e.getLocal(ns, "intruder"); err == nil {
				return true
			}
		}
		return false
	})
	for _, ns := range protected {
		remote, err := e.getRemote(ns, "intruder")
		if err != nil {
			t.Fatal(err)
		}
		if controllerutil.ContainsFinalizer(remote, e.keys.Finalizer) {
			t.Errorf("%s/%s was claimed (finalizer %s)", ns, remote.Name, e.keys.Finalizer)
		}
	}
}
