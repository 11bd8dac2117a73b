package syncer

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/telemetry"
)

// The Replace strategy (the default): the local copy is exactly the remote's content, labels and
// annotations, with the agent's marks; a local change to it is reverted.

// replaceCopy writes the copy as Replace does: created when there is none, else updated to the
// remote's content (what local writers changed is reverted). It reports whether it wrote (false:
// the copy is current, or a write fight holds the write back).
func (r *Reconciler) replaceCopy(ctx context.Context, remote *unstructured.Unstructured, localKey types.NamespacedName, live *unstructured.Unstructured,
	fightKey types.NamespacedName, marks *copyMarks) (*unstructured.Unstructured, bool, error) {
	if r.replaceCurrent(remote, live, marks) {
		r.count(telemetry.DirectionDown, telemetry.ResultUnchanged)
		return live, false, nil
	}
	// The same remote content written again means a local writer undid the last write.
	if live != nil && !r.admitWrite(ctx, sideLocal, fightKey, live, specHash(remote, r.Keys, r.Region)) {
		return live, false, nil
	}
	out := desiredReplace(remote, live, localKey, r.Keys, r.Region)
	marks.apply(out)
	r.setTraceparent(ctx, out)
	var err error
	if live == nil {
		err = r.write(ctx, sideLocal, "create local", out, func(ctx context.Context) error {
			return r.Local.Create(ctx, out, client.FieldOwner(shard.FieldManager))
		})
	} else {
		err = r.write(ctx, sideLocal, "update local", out, func(ctx context.Context) error {
			return r.Local.Update(ctx, out, client.FieldOwner(shard.FieldManager))
		})
	}
	return out, err == nil, err
}

// replaceCurrent is Replace's one in-sync rule: live (nil: no copy) holds exactly the remote's
// content, labels and annotations, and the extra marks.
func (r *Reconciler) replaceCurrent(remote, live *unstructured.Unstructured, marks *copyMarks) bool {
	return live != nil && replaceInSync(remote, live, r.Keys, r.Region) && marks.on(live)
}

// desiredReplace returns the local object the Replace strategy writes: live (or a new object at
// local when live is nil) with its content replaced by the remote's and the remote's labels and
// annotations laid over its own. Labels and annotations that only the local side has are kept, so
// local tooling (and the regional controller's trace context) survives.
func desiredReplace(remote, live *unstructured.Unstructured, local types.NamespacedName, keys shard.Keys, region string) *unstructured.Unstructured {
	var out *unstructured.Unstructured
	if live != nil {
		out = live.DeepCopy()
		for k := range out.Object {
			if isContentKey(k) {
				delete(out.Object, k)
			}
		}
		// status stays as it is: it is the local controller's (and ignored by Update when the
		// kind has a status subresource).
	} else {
		out = newCopy(remote, local)
	}
	copyContent(out, remote)
	labels, annotations := copiedMetadata(remote, keys, region)
	outLabels, outAnnotations := out.GetLabels(), out.GetAnnotations()
	// Keys copied before that the remote no longer has are removed; local-only keys stay.
	if live != nil {
		for _, entry := range strings.Split(live.GetAnnotations()[keys.CopiedKeys], ",") {
			if k, ok := strings.CutPrefix(entry, "label:"); ok {
				if _, still := labels[k]; !still {
					delete(outLabels, k)
				}
			} else if k, ok := strings.CutPrefix(entry, "annotation:"); ok {
				if _, still := annotations[k]; !still {
					delete(outAnnotations, k)
				}
			}
		}
	}
	annotations[keys.CopiedKeys] = copiedKeys(remote, keys)
	out.SetLabels(merged(outLabels, labels))
	out.SetAnnotations(merged(outAnnotations, annotations))
	return out
}

// replaceInSync reports whether live already equals what Replace would write.
func replaceInSync(remote, live *unstructured.Unstructured, keys shard.Keys, region string) bool {
	if !contentEqual(remote.Object, live.Object) {
		return false
	}
	labels, annotations := copiedMetadata(remote, keys, region)
	return isSubMap(labels, live.GetLabels()) && isSubMap(annotations, live.GetAnnotations()) &&
		live.GetAnnotations()[keys.CopiedKeys] == copiedKeys(remote, keys)
}
