package syncer

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/regionsync/regionsync/internal/jsonvalue"
	"github.com/regionsync/regionsync/internal/shard"
)

var testKeys = shard.NewKeys("regionsync.dev")

func obj(content map[string]any, labels, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "demo.regionsync.dev/v1alpha1", "kind": "Tenant"}}
	for k, v := range content {
		u.Object[k] = v
	}
	u.SetNamespace("ns")
	u.SetName("acme-us")
	u.SetUID("remote-uid")
	u.SetLabels(labels)
	u.SetAnnotations(annotations)
	return u
}

func TestDesiredReplace(t *testing.T) {
	remote := obj(map[string]any{"spec": map[string]any{"a": int64(1)}, "status": map[string]any{"x": "remote"}},
		map[string]string{"tier": "gold"},
		map[string]string{"note": "n", testKeys.RemoteGeneration: "3", testKeys.Paused: "false", testKeys.TraceParent: "00-x"})
	live := obj(map[string]any{"spec": map[string]any{"a": int64(2), "b": true}, "extra": "gone", "status": map[string]any{"x": "local"}},
		map[string]string{"local": "kept"}, map[string]string{"kubectl.kubernetes.io/last-applied": "kept"})
	got := desiredReplace(remote, live, types.NamespacedName{Namespace: "ns", Name: "acme"}, testKeys, "us")

	if !contentEqual(got.Object, remote.Object) {
		t.Errorf("content %v, want the remote's %v", got.Object, remote.Object)
	}
	if got.Object["status"].(map[string]any)["x"] != "local" {
		t.Errorf("local status replaced: %v", got.Object["status"])
	}
	if l := got.GetLabels(); l["tier"] != "gold" || l["local"] != "kept" || l[testKeys.Region] != "us" {
		t.Errorf("labels %v", l)
	}
	a := got.GetAnnotations()
	for _, k := range []string{testKeys.RemoteGeneration, testKeys.Paused, testKeys.TraceParent} {
		if _, ok := a[k]; ok {
			t.Errorf("agent key %s copied down: %v", k, a)
		}
	}
	if a["note"] != "n" || a[testKeys.RemoteUID] != "remote-uid" || a["kubectl.kubernetes.io/last-applied"] != "kept" {
		t.Errorf("annotations %v", a)
	}
	if !replaceInSync(remote, got, testKeys, "us") {
		t.Error("the desired object is not in sync with itself")
	}
	if replaceInSync(remote, live, testKeys, "us") {
		t.Error("drifted object reported in sync")
	}
	// A label and an annotation removed on the remote disappear locally; local-only keys stay.
	remote2 := remote.DeepCopy()
	remote2.SetLabels(nil)
	remote2.SetAnnotations(map[string]string{"other": "x"})
	got2 := desiredReplace(remote2, got, types.NamespacedName{Namespace: "ns", Name: "acme"}, testKeys, "us")
	if l := got2.GetLabels(); l["tier"] != "" || l["local"] != "kept" || l[testKeys.Region] != "us" {
		t.Errorf("after removal, labels %v", l)
	}
	if a := got2.GetAnnotations(); a["note"] != "" || a["other"] != "x" || a["kubectl.kubernetes.io/last-applied"] != "kept" {
		t.Errorf("after removal, annotations %v", a)
	}
	if replaceInSync(remote2, got, testKeys, "us") || !replaceInSync(remote2, got2, testKeys, "us") {
		t.Error("in-sync check ignores removed keys")
	}
	// The remote must not be modified by building the local copy.
	remote.Object["spec"].(map[string]any)["a"] = int64(99)
	if got.Object["spec"].(map[string]any)["a"] != int64(1) {
		t.Error("desired object shares memory with the remote")
	}
}

func TestApplyInSync(t *testing.T) {
	remote := obj(map[string]any{"spec": map[string]any{"a": int64(1), "list": []any{"x"}}}, nil, nil)
	key := types.NamespacedName{Namespace: "ns", Name: "acme"}
	desired, hash := desiredApply(remote, key, testKeys, "us", nil)
	cases := map[string]struct {
		edit func(live *unstructured.Unstructured)
		want bool
	}{
		"identical":              {func(*unstructured.Unstructured) {}, true},
		"local-owned field kept": {func(l *unstructured.Unstructured) { l.Object["spec"].(map[string]any)["replicas"] = int64(3) }, true},
		"local label added":      {func(l *unstructured.Unstructured) { l.SetLabels(merged(l.GetLabels(), map[string]string{"x": "y"})) }, true},
		"drift on remote field":  {func(l *unstructured.Unstructured) { l.Object["spec"].(map[string]any)["a"] = int64(2) }, false},
		"list element changed":   {func(l *unstructured.Unstructured) { l.Object["spec"].(map[string]any)["list"] = []any{"y"} }, false},
		"list grew":              {func(l *unstructured.Unstructured) { l.Object["spec"].(map[string]any)["list"] = []any{"x", "y"} }, false},
		"hash differs":           {func(l *unstructured.Unstructured) { l.SetAnnotations(map[string]string{testKeys.AppliedHash: "old"}) }, false},
		"mark removed":           {func(l *unstructured.Unstructured) { l.SetLabels(nil) }, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			live := desired.DeepCopy()
			tc.edit(live)
			if got := applyInSync(desired, hash, live, testKeys); got != tc.want {
				t.Fatalf("applyInSync = %v, want %v", got, tc.want)
			}
		})
	}
	// A field removed on the remote changes the hash, so the copy is re-applied.
	delete(remote.Object["spec"].(map[string]any), "list")
	if _, h2 := desiredApply(remote, key, testKeys, "us", nil); h2 == hash {
		t.Fatal("hash ignores a removed field")
	}
}

func TestHashSecretData(t *testing.T) {
	a := hashSecretData("Opaque", map[string][]byte{"k": []byte("v"), "k2": []byte("v2")})
	if a != hashSecretData("Opaque", map[string][]byte{"k2": []byte("v2"), "k": []byte("v")}) {
		t.Error("hash depends on map order")
	}
	for name, other := range map[string]string{
		"value":  hashSecretData("Opaque", map[string][]byte{"k": []byte("w"), "k2": []byte("v2")}),
		"type":   hashSecretData("kubernetes.io/tls", map[string][]byte{"k": []byte("v"), "k2": []byte("v2")}),
		"split":  hashSecretData("Opaque", map[string][]byte{"k": []byte("vk2"), "": []byte("v2")}),
		"absent": hashSecretData("Opaque", map[string][]byte{"k": []byte("v")}),
	} {
		if other == a {
			t.Errorf("hash ignores a different %s", name)
		}
	}
}

// FuzzIsSubset: a value is always a subset of itself and of a copy with extra map keys.
func FuzzIsSubset(f *testing.F) {
	f.Add("a", int64(1), "b", true)
	f.Fuzz(func(t *testing.T, k1 string, v1 int64, k2 string, v2 bool) {
		want := map[string]any{k1: v1, "nested": map[string]any{k2: v2, "l": []any{v1, k1}}}
		got := jsonvalue.DeepCopy(want).(map[string]any)
		if !jsonvalue.IsSubset(want, got) {
			t.Fatal("not a subset of its copy")
		}
		got["extra-"+k1] = "x"
		got["nested"].(map[string]any)["extra-"+k2] = "y"
		if !jsonvalue.IsSubset(want, got) {
			t.Fatal("extra keys broke the subset")
		}
		if jsonvalue.Hash(want) != jsonvalue.Hash(jsonvalue.DeepCopy(want)) {
			t.Fatal("hash of a copy differs")
		}
	})
}

// TestStatusRefusal: which failed status uploads are refusals (reported, spec keeps flowing) and
// which are transient (spec held back in that pass).
func TestStatusRefusal(t *testing.T) {
	gr := schema.GroupResource{Group: "demo.regionsync.dev", Resource: "tenants"}
	cases := map[string]struct {
		err  error
		want bool
	}{
		"forbidden (RBAC, admission)": {apierrors.NewForbidden(gr, "a", errors.New("denied")), true},
		"invalid (schema)":            {apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: "Tenant"}, "a", nil), true},
		"no status subresource":       {apierrors.NewNotFound(gr, "a"), true},
		"bad request (webhook)":       {apierrors.NewBadRequest("no"), true},
		"method not supported":        {apierrors.NewMethodNotSupported(gr, "update"), true},
		"conflict":                    {apierrors.NewConflict(gr, "a", errors.New("stale")), false},
		"throttled":                   {apierrors.NewTooManyRequests("slow down", 1), false},
		"server error":                {apierrors.NewInternalError(errors.New("etcd")), false},
		"timeout":                     {apierrors.NewServerTimeout(gr, "update", 1), false},
		"connection refused":          {errors.New("dial tcp: connection refused"), false},
		"wrapped forbidden":           {fmt.Errorf("uploading: %w", apierrors.NewForbidden(gr, "a", errors.New("denied"))), true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := statusRefusal(tc.err); got != tc.want {
				t.Errorf("statusRefusal(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
