// Rule: generation annotations. After a spec sync, management records which generation was
// copied down and the copy's generation after the write, in one patch, only when they changed.

package syncer

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/telemetry"
)

// generationsPhase writes the generation annotations.
func (r *Reconciler) generationsPhase(ctx context.Context, s *scope) (bool, error) {
	if err := r.generations(ctx, s.remote, s.local); err != nil {
		s.result = reconcile.Result{}
		return true, err
	}
	return false, nil
}

// generations records, in one patch and only when they changed, which remote generation was
// copied down and the local generation that resulted; for a kind without metadata.generation
// (ConfigMap, Secret: both generations stay 0) also the hash of the content copied
// (D/sync-applied-hash), from which the hub tells whether the copy is current. The patch carries
// the remote UID, which the API server checks as a precondition.
func (r *Reconciler) generations(ctx context.Context, remote, local *unstructured.Unstructured) error {
	rg, lg := strconv.FormatInt(remote.GetGeneration(), 10), strconv.FormatInt(local.GetGeneration(), 10)
	hash := ""
	if remote.GetGeneration() == 0 {
		hash = r.Keys.AppliedContentHash(remote)
	}
	ann := remote.GetAnnotations()
	if ann[r.Keys.RemoteGeneration] == rg && ann[r.Keys.LocalGeneration] == lg && (hash == "" || ann[r.Keys.AppliedHash] == hash) {
		// The cache shows them: nothing left to remember (a memo per object would otherwise
		// stay for as long as the object does).
		r.patched.Delete(objectRef(remote))
		return nil
	}
	// The same patch was just written from this very version of the remote object: the cache
	// has not caught up yet (a local event can arrive before the remote one).
	memo := generationsPatch{from: remote.GetResourceVersion(), rg: rg, lg: lg, hash: hash}
	if v, ok := r.patched.Load(objectRef(remote)); ok && v == memo {
		return nil
	}
	annotations := map[string]string{r.Keys.RemoteGeneration: rg, r.Keys.LocalGeneration: lg}
	if hash != "" {
		annotations[r.Keys.AppliedHash] = hash
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         remote.GetUID(),
		"annotations": annotations,
	}})
	if err != nil {
		return err
	}
	err = r.write(ctx, sideManagement, "patch generations", remote, func(ctx context.Context) error {
		return r.Remote.Patch(ctx, remote.DeepCopy(), client.RawPatch(types.MergePatchType, patch), client.FieldOwner(shard.FieldManager))
	})
	if err != nil {
		r.countFailure(telemetry.DirectionMeta, err)
		return fmt.Errorf("writing generation annotations on %s: %w", objectRef(remote), err)
	}
	r.patched.Store(objectRef(remote), memo)
	r.count(telemetry.DirectionMeta, telemetry.ResultWritten)
	return nil
}

// generationsPatch remembers the last generation annotations (and applied-content hash) written
// on a remote object and the resourceVersion they were written over.
type generationsPatch struct{ from, rg, lg, hash string }
