package syncer

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/regionsync/regionsync/internal/retry"
)

// warm starts the kind's informers on both clusters, retrying while a cluster does not serve the
// kind, and then marks the kind available.
func (e *Engine) warm(ctx context.Context, remote cluster.Cluster, i int, r *Reconciler) {
	_ = retry.Until(ctx, restartBackoff, func(ctx context.Context, backoff time.Duration) (bool, error) {
		_, err := remote.GetCache().GetInformer(ctx, unstructuredFor(r.GVK))
		side := "management"
		if err == nil {
			var proto client.Object
			if proto, err = e.localPrototype(r.GVK); err == nil {
				_, err = e.mgr.GetCache().GetInformer(ctx, proto)
			}
			side = "the local cluster"
		}
		if err == nil {
			close(r.available)
			return true, nil
		}
		e.log.Error(err, "kind not served; retrying (the other kinds are not affected)",
			"field", fmt.Sprintf("resources[%d]", i), "resource", r.Name(), "cluster", side, "backoff", backoff)
		return false, nil
	})
}
