//go:build integration

package syncer_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/regionsync/regionsync/internal/syncer"
	"github.com/regionsync/regionsync/pkg/regionsync"
	"github.com/regionsync/regionsync/test/framework/agentconfig"
)

// secretIn returns the Secret name in namespace ns of the region (nil when there is none).
func (f *fanOut) secretIn(ns, name string) *corev1.Secret {
	f.t.Helper()
	s := &corev1.Secret{}
	err := f.local.Get(f.ctx, client.ObjectKey{Namespace: ns, Name: name}, s)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// waitSecretCopies waits until exactly the namespaces in want (of those in all) hold a current
// fan-out copy of the image-pull Secret source (under its local name, the suffix removed): its
// type and data, the region's mark and the source's identity.
func (f *fanOut) waitSecretCopies(source types.NamespacedName, data map[string][]byte, all, want []string) {
	f.t.Helper()
	name := strings.TrimSuffix(source.Name, f.suffix)
	f.eventually(fmt.Sprintf("Secret copies of %s in exactly %v", source, want), func() error {
		for _, ns := range all {
			s := f.secretIn(ns, name)
			if !slices.Contains(want, ns) {
				if s != nil && s.Labels[f.keys.Region] == f.opts.Region {
					return fmt.Errorf("a copy in %s", ns)
				}
				continue
			}
			switch {
			case s == nil:
				return fmt.Errorf("no copy in %s", ns)
			case s.Type != corev1.SecretTypeDockerConfigJson || !maps.EqualFunc(s.Data, data, bytes.Equal):
				return fmt.Errorf("copy in %s has type %s and other data", ns, s.Type)
			case s.Labels[f.keys.Region] != f.opts.Region || s.Annotations[f.keys.FanOutSourceKey] != source.String() || s.Labels[f.keys.FanOutSource] == "":
				return fmt.Errorf("copy in %s is not marked as the region's copy of %s: labels %v annotations %v", ns, source, s.Labels, s.Annotations)
			}
		}
		return nil
	})
}

// eventMessages returns every Event message in namespace ns of a cluster.
func eventMessages(f *fanOut, c client.Client, ns string) []string {
	f.t.Helper()
	list := &eventsv1.EventList{}
	if err := c.List(f.ctx, list, client.InNamespace(ns)); err != nil {
		f.t.Fatal(err)
	}
	out := make([]string, 0, len(list.Items))
	for _, ev := range list.Items {
		out = append(out, ev.Reason+": "+ev.Note)
	}
	return out
}

// TestFanOutSecret fans an image-pull Secret (kubernetes.io/dockerconfigjson) out to the labelled
// namespaces of the region: a drifted copy is reverted, a deleted one recreated, and deleting the
// source removes every copy and releases its finalizer. A Secret the agent uploads (a tenant's
// token, asking for fan-out all the same) is never copied down, a management Secret that does not
// ask for fan-out is refused and nothing is written for it, and the region's Secrets that are not
// fan-out copies (one in the way of a copy, one at an ordinary Secret's mapped name, the uploaded
// token's local source) are never written or deleted. No Event, log line or report carries the
// data.
func TestFanOutSecret(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withStartLater(), withOptions(func(o *regionsync.Options) {
		o.Shard.NamespacePrefix = o.Region[len("region-"):] + "-"
		// The Tenant kind keeps uploading its tenant-token Secret.
		o.Resources = append(o.Resources, regionsync.Resource{Object: agentconfig.Kind(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}), AllowPrivileged: true,
			FanOut: &regionsync.FanOut{Enabled: true}})
	}))
	f := &fanOut{env: e, label: "fanout-" + e.name}
	sel := map[string]string{f.label: "yes"}
	a, b, d, taken := e.ns("a"), e.ns("b"), e.ns("d"), e.ns("taken")
	src, up := e.remoteNamespace("src"), e.remoteNamespace("up")
	for _, ns := range []string{a, b, taken} {
		f.namespace(ns, sel)
	}
	f.namespace(d, nil)
	f.namespace(src, nil) // the ordinary Secret's mapped namespace
	all := []string{a, b, d, taken, src, up, "kube-system", "default"}

	const password = "s3cr3t-registry-password"
	dockerConfig := []byte(`{"auths":{"registry.example.com":{"username":"puller","password":"` + password + `"}}}`)
	data := map[string][]byte{corev1.DockerConfigJsonKey: dockerConfig}
	leaks := []string{password, base64.StdEncoding.EncodeToString(dockerConfig)}

	// Local Secrets that are not copies: one in the way of a copy, one at the ordinary Secret's
	// mapped name.
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: taken, Name: "pull"}, StringData: map[string]string{"mine": "yes"}}
	plainLocal := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "plain"}, StringData: map[string]string{"local": "yes"}}
	for _, s := range []*corev1.Secret{foreign, plainLocal} {
		if err := e.local.Create(e.ctx, s); err != nil {
			t.Fatal(err)
		}
	}

	// On management: the image-pull Secret asking for fan-out, a Secret that does not, and the
	// upload target of a tenant's token, asking for fan-out into every namespace.
	pull := types.NamespacedName{Namespace: src, Name: "pull" + e.suffix}
	plain := types.NamespacedName{Namespace: src, Name: "plain" + e.suffix}
	token := types.NamespacedName{Namespace: up, Name: "tenant-token" + e.suffix}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: pull.Namespace, Name: pull.Name, Annotations: map[string]string{e.keys.FanOutNamespaces: f.label + "=yes"}},
			Type: corev1.SecretTypeDockerConfigJson, Data: data},
		{ObjectMeta: metav1.ObjectMeta{Namespace: plain.Namespace, Name: plain.Name}, StringData: map[string]string{"k": password}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: token.Namespace, Name: token.Name, Annotations: map[string]string{e.keys.FanOutNamespaces: "*"}}},
	} {
		if err := e.mgmt.Create(e.ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	e.tenant(up, "acme", "Acme")
	e.start()

	f.waitSecretCopies(pull, data, all, []string{a, b})
	e.eventually("the finalizer and the report on the source", func() error {
		s := &corev1.Secret{}
		if err := e.mgmt.Get(e.ctx, pull, s); err != nil {
			return err
		}
		if !slices.Contains(s.Finalizers, e.keys.Finalizer) {
			return fmt.Errorf("finalizers %v", s.Finalizers)
		}
		report := s.Annotations[e.keys.FanOutReport]
		// taken matches too, and is failed: the foreign Secret there is never adopted.
		if !strings.Contains(report, `"matching":3,"current":2,"failed":["`+taken+`"]`) {
			return fmt.Errorf("report %q", report)
		}
		for _, leak := range leaks {
			if strings.Contains(report, leak) {
				t.Fatalf("the report carries the Secret's data: %s", report)
			}
		}
		return nil
	})

	// The token is uploaded (the Tenant kind's upload works beside the Secret kind), and never
	// fanned out: refused, no finalizer, no report, no copy anywhere.
	e.eventually("token uploaded", func() error {
		s := &corev1.Secret{}
		if err := e.mgmt.Get(e.ctx, token, s); err != nil {
			return err
		}
		if s.Annotations[e.keys.LastUploadedHash] == "" || len(s.Data["token"]) == 0 {
			return fmt.Errorf("not uploaded yet: annotations %v", s.Annotations)
		}
		return nil
	})
	e.waitEvent(e.mgmt, up, token.Name, syncer.ReasonSecretNotFannedOut)
	// The ordinary Secret is refused, on management.
	e.waitEvent(e.mgmt, src, plain.Name, syncer.ReasonSecretNotFannedOut)

	// A drifted copy is reverted, a deleted one recreated; the foreign Secret in the way is left
	// alone and reported.
	drifted := f.secretIn(a, "pull")
	drifted.Data = map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}
	if err := e.local.Update(e.ctx, drifted); err != nil {
		t.Fatal(err)
	}
	if err := e.local.Delete(e.ctx, f.secretIn(b, "pull")); err != nil {
		t.Fatal(err)
	}
	f.waitSecretCopies(pull, data, all, []string{a, b})
	e.waitEvent(e.mgmt, src, pull.Name, syncer.ReasonAdoptionRefused)

	untouched := func() {
		t.Helper()
		for _, s := range []*corev1.Secret{foreign, plainLocal} {
			got := f.secretIn(s.Namespace, s.Name)
			if got == nil || got.ResourceVersion != s.ResourceVersion || got.Labels[e.keys.Region] != "" {
				t.Fatalf("the region's Secret %s/%s was written or deleted: %+v", s.Namespace, s.Name, got)
			}
		}
		for _, key := range []types.NamespacedName{plain, token} {
			s := &corev1.Secret{}
			if err := e.mgmt.Get(e.ctx, key, s); err != nil {
				t.Fatal(err)
			}
			if len(s.Finalizers) > 0 || s.Annotations[e.keys.FanOutReport] != "" {
				t.Fatalf("management Secret %s was claimed or reported on: finalizers %v annotations %v", key, s.Finalizers, s.Annotations)
			}
		}
		for _, ns := range all {
			for _, name := range []string{"plain", "tenant-token"} {
				if s := f.secretIn(ns, name); s != nil && s.Labels[e.keys.Region] != "" {
					t.Fatalf("%s was copied into %s: labels %v", name, ns, s.Labels)
				}
			}
		}
	}
	e.never("a copy of the uploaded token or of the ordinary Secret", 3*time.Second, func() bool {
		for _, ns := range all {
			for _, name := range []string{"plain", "tenant-token"} {
				if s := f.secretIn(ns, name); s != nil && s.Labels[e.keys.Region] != "" {
					return true
				}
			}
		}
		return false
	})
	untouched()
	// The uploaded token's local source is the tenant operator's, controlled by the local
	// Tenant, and stays so.
	tok := f.secretIn(up, "tenant-token")
	if tok == nil || tok.Labels[e.keys.Region] != "" || tok.Labels[e.keys.FanOutSource] != "" {
		t.Fatalf("the local token was written: %+v", tok)
	}

	// Deleting the source removes every copy and releases the finalizer.
	if err := e.mgmt.Delete(e.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: pull.Namespace, Name: pull.Name}}); err != nil {
		t.Fatal(err)
	}
	f.waitSecretCopies(pull, data, []string{a, b, d}, nil)
	e.eventually("the source gone", func() error {
		if err := e.mgmt.Get(e.ctx, pull, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("source still there: %v", err)
		}
		return nil
	})
	untouched()
	if got := f.secretIn(up, "tenant-token"); got == nil || got.ResourceVersion != tok.ResourceVersion {
		t.Fatal("the local token was deleted or written")
	}

	// No log line (every pass at verbosity 2, the refusals, the writes) carries the data.
	if e.log.Count(`"resource"="Secret"`) == 0 {
		t.Fatal("no log line of the Secret kind: the log check below would prove nothing")
	}
	for _, leak := range leaks {
		if n := e.log.Count(leak); n > 0 {
			t.Fatalf("%d agent log lines carry Secret data", n)
		}
	}
	// No Event, on either cluster, carries the Secrets' data.
	for _, c := range []struct {
		c   client.Client
		nss []string
	}{{e.mgmt, []string{src, up}}, {e.local, []string{a, b, taken, src, up}}} {
		for _, ns := range c.nss {
			for _, msg := range eventMessages(f, c.c, ns) {
				for _, leak := range leaks {
					if strings.Contains(msg, leak) {
						t.Fatalf("an Event in %s carries Secret data: %s", ns, msg)
					}
				}
			}
		}
	}
}

// TestFanOutSecretShippedRBAC runs a Secret fan-out agent in the region as the agent's
// ServiceAccount with exactly the shipped base RBAC, the fan-out add-on and its Secret
// sub-directory (deploy/kustomize/agent-fanout/secrets): enough to fan an image-pull Secret out,
// present and future namespaces, and to remove its copies with it.
func TestFanOutSecretShippedRBAC(t *testing.T) {
	t.Parallel()
	agent := shippedAgentRBAC(t, "agent", "agent-fanout", "agent-fanout/secrets")
	e := newEnv(t, withLocalConfig(agent), withOptions(func(o *regionsync.Options) {
		o.Shard.NamespacePrefix = o.Region[len("region-"):] + "-"
		o.Resources = []regionsync.Resource{{Object: agentconfig.Kind(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}), AllowPrivileged: true, FanOut: &regionsync.FanOut{Enabled: true}}}
	}))
	f := &fanOut{env: e, label: "fanout-" + e.name}
	a, later := e.ns("a"), e.ns("later")
	f.namespace(a, map[string]string{f.label: "yes"})
	src := e.remoteNamespace("src")
	key := types.NamespacedName{Namespace: src, Name: "pull" + e.suffix}
	data := map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"registry.example.com":{"auth":"cHVsbGVyOnB3"}}}`)}
	if err := e.mgmt.Create(e.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
		Annotations: map[string]string{e.keys.FanOutNamespaces: f.label + "=yes"}}, Type: corev1.SecretTypeDockerConfigJson, Data: data}); err != nil {
		t.Fatal(err)
	}
	f.waitSecretCopies(key, data, []string{a}, []string{a})
	f.namespace(later, map[string]string{f.label: "yes"})
	f.waitSecretCopies(key, data, []string{a, later}, []string{a, later})
	if err := e.mgmt.Delete(e.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}); err != nil {
		t.Fatal(err)
	}
	f.waitSecretCopies(key, data, []string{a, later}, nil)
}

// TestFanOutSecretTurnedOff: a Secret that stops asking for fan-out loses every copy, the one in
// its mapped namespace too (a Secret has no ordinary copy), through the deletion budget (all at
// once is held until released, as a selector typo would be), is refused from then on, and its
// finalizer is released: deleting it on management is not held.
func TestFanOutSecretTurnedOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withOptions(func(o *regionsync.Options) {
		o.Shard.NamespacePrefix = o.Region[len("region-"):] + "-"
		o.Resources = []regionsync.Resource{{Object: agentconfig.Kind(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}), AllowPrivileged: true, FanOut: &regionsync.FanOut{Enabled: true}}}
	}))
	f := &fanOut{env: e, label: "fanout-" + e.name}
	src, other := e.remoteNamespace("src"), e.ns("other")
	f.namespace(src, map[string]string{f.label: "yes"})
	f.namespace(other, map[string]string{f.label: "yes"})
	key := types.NamespacedName{Namespace: src, Name: "pull" + e.suffix}
	data := map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}
	if err := e.mgmt.Create(e.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
		Annotations: map[string]string{e.keys.FanOutNamespaces: f.label + "=yes"}}, Type: corev1.SecretTypeDockerConfigJson, Data: data}); err != nil {
		t.Fatal(err)
	}
	f.waitSecretCopies(key, data, []string{src, other}, []string{src, other})
	s := &corev1.Secret{}
	if err := e.mgmt.Get(e.ctx, key, s); err != nil {
		t.Fatal(err)
	}
	before := s.DeepCopy()
	delete(s.Annotations, e.keys.FanOutNamespaces)
	if err := e.mgmt.Patch(e.ctx, s, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	// Every copy going at once is held by the deletion budget, as a selector typo would be; the
	// region releases each copy.
	e.waitEvent(e.local, other, "pull", syncer.ReasonDeletionHeld)
	f.waitSecretCopies(key, data, []string{src, other}, []string{src, other})
	for _, ns := range []string{src, other} {
		c := f.secretIn(ns, "pull")
		c.Annotations[e.keys.ReleaseDeletion] = "true"
		if err := e.local.Update(e.ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	f.waitSecretCopies(key, data, []string{src, other}, nil)
	e.waitEvent(e.mgmt, src, key.Name, syncer.ReasonSecretNotFannedOut)
	e.eventually("the finalizer released", func() error {
		if err := e.mgmt.Get(e.ctx, key, s); err != nil {
			return err
		}
		if slices.Contains(s.Finalizers, e.keys.Finalizer) {
			return fmt.Errorf("finalizers %v", s.Finalizers)
		}
		return nil
	})
}
