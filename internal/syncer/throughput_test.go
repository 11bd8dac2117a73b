//go:build integration

package syncer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/regionsync/regionsync/pkg/regionsync"
	"github.com/regionsync/regionsync/test/framework/agentconfig"
)

// BenchmarkInitialSync measures the initial-sync target (docs/performance.md#figures-and-targets): regionsync's throughput against a
// plain client performing the same minimal writes per object (claim on management, create in the
// region, generation annotations on management) at the same concurrency, against the same API
// servers, in the same run. It reports objects/s of both and their ratio (target ≥ 0.9).
func BenchmarkInitialSync(b *testing.B) {
	const objects, concurrency = 300, 4
	needFleet(b)
	var agentRate, plainRate float64
	for i := 0; i < b.N; i++ {
		plainRate += plainSync(b, objects, concurrency)
		agentRate += agentSync(b, objects, concurrency)
	}
	b.ReportMetric(agentRate/float64(b.N), "agent-objects/s")
	b.ReportMetric(plainRate/float64(b.N), "plain-objects/s")
	b.ReportMetric(agentRate/plainRate, "agent/plain")
}

// seed creates n ConfigMaps named "cm-<i><suffix>" in a new management namespace.
func seed(b *testing.B, ns, suffix string, n int) {
	ctx := context.Background()
	if err := management.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	if err := region.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	for i := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%d%s", i, suffix)}, Data: map[string]string{"k": "v"}}
		if err := management.Client.Create(ctx, cm); err != nil {
			b.Fatal(err)
		}
	}
}

// plainSync performs the minimal writes with a plain client and returns objects/s.
func plainSync(b *testing.B, n, concurrency int) float64 {
	b.StopTimer()
	name := fmt.Sprintf("plain-%d", testSeq.Add(1))
	seed(b, name, "", n)
	b.StartTimer()
	ctx := context.Background()
	start := time.Now()
	// One list, then only the writes: the plain client reads no more than the agent's cache does.
	list := &corev1.ConfigMapList{}
	if err := management.Client.List(ctx, list, client.InNamespace(name)); err != nil {
		b.Fatal(err)
	}
	byName := map[string]*corev1.ConfigMap{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	work := make(chan int)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				key := types.NamespacedName{Namespace: name, Name: fmt.Sprintf("cm-%d", i)}
				cm := byName[key.Name]
				claim, _ := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": []string{"regionsync.dev/sync-local"}, "resourceVersion": cm.ResourceVersion}})
				if err := management.Client.Patch(ctx, cm, client.RawPatch(types.MergePatchType, claim)); err != nil {
					b.Error(err)
					return
				}
				local := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: key.Name, Labels: map[string]string{"x": "y"}}, Data: cm.Data}
				if err := region.Client.Create(ctx, local); err != nil {
					b.Error(err)
					return
				}
				gens, _ := json.Marshal(map[string]any{"metadata": map[string]any{"uid": cm.UID, "annotations": map[string]string{
					"regionsync.dev/sync-remote-generation": "0", "regionsync.dev/sync-local-generation": "0"}}})
				if err := management.Client.Patch(ctx, cm, client.RawPatch(types.MergePatchType, gens)); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}

// agentSync starts an agent over n unsynced objects and returns objects/s until the last one's
// generation annotations are written.
func agentSync(b *testing.B, n, concurrency int) float64 {
	b.StopTimer()
	name := fmt.Sprintf("agent-%d", testSeq.Add(1))
	suffix := "-" + name
	seed(b, name, suffix, n)
	b.StartTimer()
	start := time.Now()
	e := newEnv(b, withOptions(func(o *regionsync.Options) {
		o.Region, o.Shard.RemoteResourceSuffix = name, suffix
		o.Resources = []regionsync.Resource{{Object: agentconfig.Kind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}), Concurrency: concurrency}}
	}))
	ctx := context.Background()
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		list := &corev1.ConfigMapList{}
		if err := management.Client.List(ctx, list, client.InNamespace(name)); err != nil {
			return false, err
		}
		done := 0
		for _, cm := range list.Items {
			if cm.Annotations[e.keys.LocalGeneration] != "" {
				done++
			}
		}
		return done >= n, nil
	})
	elapsed := time.Since(start)
	b.StopTimer()
	e.stop()
	if err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	return float64(n) / elapsed.Seconds()
}
