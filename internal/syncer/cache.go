package syncer

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/syncer/compact"
)

// LocalCacheOptions are the local manager's cache options: the managed kinds are cached only
// when they carry this region's mark, so the agent's memory does not grow with unrelated objects.
// Namespaces and unmarked objects are read directly, on the create path only. Unstructured
// objects of the compacted kinds are held compacted (compact.Transform).
func LocalCacheOptions(region, annotationDomain string, resync time.Duration, compacted []schema.GroupVersionKind) cache.Options {
	keys := shard.NewKeys(annotationDomain)
	// A default selector rather than one per kind: the cache then needs no REST mapping at
	// construction, so a kind whose CRD is missing cannot stop the agent from starting. The
	// manager's cache holds only the managed kinds (namespaces are read directly, secrets have
	// caches of their own).
	return cache.Options{
		DefaultLabelSelector: labels.SelectorFromSet(labels.Set{keys.Region: region}),
		DefaultTransform:     compact.Transform(compacted),
		SyncPeriod:           &resync,
	}
}

// LocalNewCache is the local manager's NewCache beside LocalCacheOptions: the unstructured
// informers of the compacted kinds decode watch events straight into the compact form
// (compact.NewCache).
func LocalNewCache(compacted []schema.GroupVersionKind) cache.NewCacheFunc {
	return compact.NewCache(compacted)
}

func unstructuredFor(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// localPrototype is the object the engine watches a kind with in the local cache: the host's Go
// type for a typed kind (sharing the host's informer), else unstructured.
func (e *Engine) localPrototype(gvk schema.GroupVersionKind) (client.Object, error) {
	if !e.typed[gvk] {
		return unstructuredFor(gvk), nil
	}
	return newTypedObject(e.mgr.GetScheme(), gvk)
}

// standbyCache is a cache the manager starts on every replica, leader or not: a bare cache.Cache
// added to a manager is a leader-election runnable, started only once the replica leads, so a
// warm standby's kinds could not become available (warm) until it had taken over, and the first
// sync after a failover waited for a cache to list and for warm's next retry.
type standbyCache struct{ cache.Cache }

// NeedLeaderElection is false: the cache runs on every replica.
func (standbyCache) NeedLeaderElection() bool { return false }

// addSecretCaches adds to mgr one small cache per local secret name of cfg, selected by field
// (the agent never caches other Secrets), started on every replica.
func addSecretCaches(mgr manager.Manager, cfg *Settings) (map[string]cache.Cache, error) {
	caches := map[string]cache.Cache{}
	for _, res := range cfg.Resources {
		for _, name := range res.Secrets {
			if _, ok := caches[name]; ok {
				continue
			}
			c, err := cache.New(mgr.GetConfig(), cache.Options{
				Scheme:     mgr.GetScheme(),
				Mapper:     mgr.GetRESTMapper(),
				HTTPClient: mgr.GetHTTPClient(),
				ByObject: map[client.Object]cache.ByObject{
					&corev1.Secret{}: {Field: fields.OneTermEqualSelector("metadata.name", name)},
				},
				DefaultTransform: cache.TransformStripManagedFields(),
			})
			if err != nil {
				return nil, fmt.Errorf("cache of local secrets named %s: %w", name, err)
			}
			if err := mgr.Add(standbyCache{c}); err != nil {
				return nil, err
			}
			caches[name] = c
		}
	}
	return caches, nil
}
