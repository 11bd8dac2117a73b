package syncer

import (
	"context"
	"maps"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/regionsync/regionsync/internal/jsonvalue"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/telemetry"
)

// The Apply strategy: server-side apply with field manager regionsync (forced), owning exactly
// the fields the remote has, so fields local controllers own survive.

// applyCopy writes the copy as Apply does. It reports whether it wrote (false: the copy holds
// what would be applied, or a write fight holds the write back).
func (r *Reconciler) applyCopy(ctx context.Context, remote *unstructured.Unstructured, localKey types.NamespacedName, live *unstructured.Unstructured,
	fightKey types.NamespacedName, marks *copyMarks) (*unstructured.Unstructured, bool, error) {
	desired, hash, inSync := r.applyPlan(remote, localKey, live, marks)
	if inSync {
		r.count(telemetry.DirectionDown, telemetry.ResultUnchanged)
		return live, false, nil
	}
	if live != nil && !r.admitWrite(ctx, sideLocal, fightKey, live, hash) {
		return live, false, nil
	}
	r.setTraceparent(ctx, desired)
	err := r.write(ctx, sideLocal, "apply local", desired, func(ctx context.Context) error {
		return r.Local.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired), client.FieldOwner(shard.FieldManager), client.ForceOwnership)
	})
	return desired, err == nil, err
}

// applyPlan is what Apply writes for remote at localKey, the hash of that content, and whether
// live (nil: no copy) already holds it: Apply's one in-sync rule.
func (r *Reconciler) applyPlan(remote *unstructured.Unstructured, localKey types.NamespacedName, live *unstructured.Unstructured,
	marks *copyMarks) (*unstructured.Unstructured, string, bool) {
	desired, hash := desiredApply(remote, localKey, r.Keys, r.Region, marks)
	return desired, hash, live != nil && applyInSync(desired, hash, live, r.Keys)
}

// desiredApply returns the apply configuration the Apply strategy sends: only the fields the agent
// owns (content, copied labels and annotations, its marks), plus the hash of that configuration.
func desiredApply(remote *unstructured.Unstructured, local types.NamespacedName, keys shard.Keys, region string, marks *copyMarks) (*unstructured.Unstructured, string) {
	out := newCopy(remote, local)
	copyContent(out, remote)
	labels, annotations := copiedMetadata(remote, keys, region)
	if marks != nil {
		maps.Copy(labels, marks.labels)
		maps.Copy(annotations, marks.annotations)
	}
	out.SetLabels(labels)
	out.SetAnnotations(annotations)
	h := jsonvalue.Hash(out.Object)
	annotations[keys.AppliedHash] = h
	out.SetAnnotations(annotations)
	return out, h
}

// applyInSync reports whether live already holds everything Apply would send: the same applied
// configuration (the hash; a field removed on the remote changes it) and no drift on any field
// of it.
func applyInSync(desired *unstructured.Unstructured, hash string, live *unstructured.Unstructured, keys shard.Keys) bool {
	if live.GetAnnotations()[keys.AppliedHash] != hash {
		return false
	}
	for k, v := range desired.Object {
		if isContentKey(k) && !jsonvalue.IsSubset(v, live.Object[k]) {
			return false
		}
	}
	return isSubMap(desired.GetLabels(), live.GetLabels()) && isSubMap(desired.GetAnnotations(), live.GetAnnotations())
}
