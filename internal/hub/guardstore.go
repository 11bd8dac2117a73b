package hub

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// GuardConfigMapName is the ConfigMap, in the hub's namespace, holding the shrink guard's
// memory: one JSON record per Distribution ("distribution.<namespace>.<name>") and per region
// ("region.<name>") with the current window's start and removal count and, for a Distribution,
// when its held removals were first held. Only the leading hub writes it.
const GuardConfigMapName = "regionsync-hub-removals"

// ConfigMapGuardStore keeps the shrink guard's memory in a ConfigMap, read from the API server
// (never a cache, so a new leader reads what the last one wrote) and written with optimistic
// locking.
type ConfigMapGuardStore struct {
	// Client writes the ConfigMap (the hub's own identity).
	Client client.Client
	// Reader reads it from the API server.
	Reader client.Reader
	// Key is the ConfigMap's namespace and name.
	Key types.NamespacedName

	resourceVersion string
}

// Load reads every record (none when the ConfigMap does not exist yet).
func (s *ConfigMapGuardStore) Load(ctx context.Context) (map[string]GuardRecord, error) {
	cm := &corev1.ConfigMap{}
	err := s.Reader.Get(ctx, s.Key, cm)
	if apierrors.IsNotFound(err) {
		s.resourceVersion = ""
		return map[string]GuardRecord{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading ConfigMap %s: %w", s.Key, err)
	}
	s.resourceVersion = cm.ResourceVersion
	recs, err := decodeRecords(cm.Data)
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s: %w", s.Key, err)
	}
	return recs, nil
}

// Save replaces the records; it fails on a concurrent write (another hub replica led meanwhile),
// after which the guard reads the memory again.
func (s *ConfigMapGuardStore) Save(ctx context.Context, records map[string]GuardRecord) error {
	data, err := encodeRecords(records)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Key.Namespace, Name: s.Key.Name, ResourceVersion: s.resourceVersion,
			Labels: map[string]string{"app.kubernetes.io/name": "regionsync-hub"}},
		Data: data,
	}
	if s.resourceVersion == "" {
		err = s.Client.Create(ctx, cm, client.FieldOwner(FieldManager))
	} else {
		err = s.Client.Update(ctx, cm, client.FieldOwner(FieldManager))
	}
	if err != nil {
		return fmt.Errorf("writing ConfigMap %s: %w", s.Key, err)
	}
	s.resourceVersion = cm.ResourceVersion
	return nil
}
