package health

import (
	"context"
	"errors"
	"net/http"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// Liveness is the agent's liveness check. It never depends on management: an unreachable
// management cluster is no reason to restart a region's agent.
func Liveness() healthz.Checker { return healthz.Ping }

// cacheSyncWait is how long a readiness probe waits for the local caches.
const cacheSyncWait = time.Second

// Readiness is the agent's readiness check: the local caches (c) have synced.
func Readiness(c cache.Cache) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), cacheSyncWait)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return errors.New("local caches not synced")
		}
		return nil
	}
}
