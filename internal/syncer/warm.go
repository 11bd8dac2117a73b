package syncer

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/regionsync/regionsync/internal/retry"
	"github.com/regionsync/regionsync/internal/telemetry"
)

// cacheWaitTimeout bounds every wait for a cache: one attempt to start and sync a kind's
// informer (then retried with backoff), a controller's start, the listing of a kind's caches.
const cacheWaitTimeout = time.Minute

// warm starts the kind's informers on both clusters and those of its secrets, retrying (each
// attempt bounded by cacheWaitTimeout) while a cluster does not serve the kind, the agent may not
// list it, or its cache does not sync; then it registers the kind's event handlers on them, once
// for the engine's lifetime, and marks the kind available. The other kinds are never waited for.
func (e *Engine) warm(ctx context.Context, remote cluster.Cluster, i int, k *kind) {
	r := k.r
	warm := telemetry.KindWarm.WithLabelValues(r.Name())
	warm.Set(0)
	_ = retry.Until(ctx, restartBackoff, func(ctx context.Context, backoff time.Duration) (bool, error) {
		infs, side, err := e.informers(ctx, remote, k)
		if err == nil {
			err = register(infs)
		}
		if err == nil {
			close(r.available)
			warm.Set(1)
			return true, nil
		}
		if ctx.Err() == nil {
			e.log.Error(err, "kind not available; retrying (the other kinds are not affected)",
				"field", fmt.Sprintf("resources[%d]", i), "resource", r.Name(), "cluster", side, "backoff", backoff)
		}
		return false, nil
	})
}

// watched is an informer and the handler the kind registers on it.
type watched struct {
	informer cache.Informer
	handler  toolscache.ResourceEventHandler
}

// informers returns the kind's synced informers with their handlers, or the side that failed and
// why, within cacheWaitTimeout.
func (e *Engine) informers(ctx context.Context, remote cluster.Cluster, k *kind) ([]watched, string, error) {
	ctx, cancel := context.WithTimeout(ctx, cacheWaitTimeout)
	defer cancel()
	onRemote, onLocal, onSecret := e.handlers(k)
	inf, err := synced(ctx, remote.GetCache(), unstructuredFor(k.r.GVK))
	if err != nil {
		return nil, "management", err
	}
	out := []watched{{inf, onRemote}}
	proto, err := e.localPrototype(k.r.GVK)
	if err == nil {
		inf, err = synced(ctx, e.mgr.GetCache(), proto)
	}
	if err != nil {
		return nil, "the local cluster", err
	}
	out = append(out, watched{inf, onLocal})
	for _, name := range k.r.Resource.Secrets {
		inf, err := synced(ctx, e.secretCaches[name], &corev1.Secret{})
		if err != nil {
			return nil, "the local cluster (secrets named " + name + ")", err
		}
		out = append(out, watched{inf, onSecret})
	}
	if k.r.Namespaces != nil && k.r.Resource.FanOutEnabled() {
		inf, err := synced(ctx, e.namespaces, namespacePrototype())
		if err != nil {
			return nil, "the local cluster (namespaces, for fan-out)", err
		}
		out = append(out, watched{inf, namespaceHandler{k: k}})
	}
	return out, "", nil
}

// synced returns c's informer for obj once it has synced, or an error when ctx ends first.
func synced(ctx context.Context, c cache.Cache, obj client.Object) (cache.Informer, error) {
	inf, err := c.GetInformer(ctx, obj)
	if err == nil && !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		err = ctx.Err()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("cache not synced within %s (may the agent list and watch this kind?): %w", cacheWaitTimeout, err)
	}
	return inf, err
}

// register adds every handler to its informer; when one fails, those added are removed again, so
// that a retry never registers a handler twice.
func register(infs []watched) error {
	var done []func() error
	for _, w := range infs {
		reg, err := w.informer.AddEventHandler(w.handler)
		if err != nil {
			for _, undo := range done {
				_ = undo()
			}
			return fmt.Errorf("registering event handler: %w", err)
		}
		done = append(done, func() error { return w.informer.RemoveEventHandler(reg) })
	}
	return nil
}
