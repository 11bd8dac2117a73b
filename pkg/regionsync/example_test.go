package regionsync_test

import (
	"context"
	"log"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	"github.com/regionsync/regionsync/pkg/regionsync"
	"github.com/regionsync/regionsync/test/framework/tenantoperator"
)

// What the examples are given: the regional cluster the host manages (localConfig), the
// management cluster (managementConfig), the host's scheme and the context the host runs in.
// The paired tests (embed_test.go) set them to real API servers and run each example.
var (
	localConfig      *rest.Config
	managementConfig *rest.Config
	hostScheme       *runtime.Scheme
	ctx              context.Context
)

// A regional controller manager that runs its own typed controller for Tenants embeds
// regionsync for the same kind: the syncer reads Tenants through the host's informer (one watch
// for both), and copies are written only where management has an object for this region.
func ExampleNew_typed() {
	mgr, err := ctrl.NewManager(localConfig, ctrl.Options{
		Scheme:  hostScheme, // registers demov1alpha1.Tenant
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		log.Fatal(err)
	}
	// The host's own controller of Tenants.
	if err := (&tenantoperator.Reconciler{Client: mgr.GetClient(), Region: "us-east-1"}).SetupWithManager(mgr); err != nil {
		log.Fatal(err)
	}
	syncer, err := regionsync.New(mgr, regionsync.Options{
		Region:     "us-east-1",
		Management: regionsync.Management{Config: managementConfig},
		Shard:      regionsync.Shard{RemoteResourceSuffix: "-us-east-1"},
		Resources: []regionsync.Resource{{
			Object:  &demov1alpha1.Tenant{},
			Secrets: []string{tenantoperator.TokenSecretName},
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := mgr.AddHealthzCheck("regionsync", syncer.Healthz()); err != nil {
		log.Fatal(err)
	}
	if err := mgr.AddReadyzCheck("regionsync", syncer.Readyz()); err != nil {
		log.Fatal(err)
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			log.Print(err)
		}
	}()
}

// Kinds the host has no Go type for are named by group, version and kind. ConfigMap-like kinds
// work too: every top-level field but apiVersion, kind, metadata and status is copied.
func ExampleNew_unstructured() {
	mgr, err := ctrl.NewManager(localConfig, ctrl.Options{
		Scheme:  hostScheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		log.Fatal(err)
	}
	configMaps := &unstructured.Unstructured{}
	configMaps.SetAPIVersion("v1")
	configMaps.SetKind("ConfigMap")
	if _, err := regionsync.New(mgr, regionsync.Options{
		Region:     "eu-west-1",
		Management: regionsync.Management{Config: managementConfig},
		Shard:      regionsync.Shard{RemoteResourceSuffix: "-eu-west-1", NamespacePrefix: "tenant-"},
		Resources:  []regionsync.Resource{{Object: configMaps, Strategy: regionsync.StrategyApply}},
	}); err != nil {
		log.Fatal(err)
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			log.Print(err)
		}
	}()
}

// A gravitational/sync-controller user keeps its annotation keys, finalizer, suffixes and
// secrets: sync-controller's Reconciler fields map one to one (see MIGRATION.md), and copies and
// namespaces sync-controller created are taken over in place.
func ExampleNew_syncControllerCompatible() {
	mgr, err := ctrl.NewManager(localConfig, ctrl.Options{
		Scheme:  hostScheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := regionsync.New(mgr, regionsync.Options{
		Region:           "ap-south-1",
		AnnotationDomain: "cloud.teleport.dev",                            // sync-controller's keys and finalizer
		Management:       regionsync.Management{Config: managementConfig}, // RemoteClient, RemoteCache
		Shard: regionsync.Shard{
			RemoteResourceSuffix: "-ap-south-1", // RemoteResourceSuffix
			LocalNamespaceSuffix: "",            // LocalNamespaceSuffix
			NamespacePrefix:      "teleport-",   // NamespacePrefix
		},
		Resources: []regionsync.Resource{{
			Object:            &demov1alpha1.Tenant{},                   // Resource
			Secrets:           []string{tenantoperator.TokenSecretName}, // LocalSecretNames
			DeletePropagation: metav1.DeletePropagationForeground,       // LocalPropagationPolicy
			Concurrency:       4,                                        // ConcurrentReconciles
		}},
	}); err != nil {
		log.Fatal(err)
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			log.Print(err)
		}
	}()
}

// A host that runs several replicas without leader election still has exactly one writer: by
// default every replica claims the region's shard on management with its own identity, and only
// the holder of the claim syncs. (Start this on every replica.)
func ExampleNew_leaderElectionOff() {
	mgr, err := ctrl.NewManager(localConfig, ctrl.Options{
		Scheme:         hostScheme,
		Metrics:        metricsserver.Options{BindAddress: "0"},
		LeaderElection: false,
	})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := regionsync.New(mgr, regionsync.Options{
		Region:     "sa-east-1",
		Management: regionsync.Management{Config: managementConfig},
		Shard:      regionsync.Shard{RemoteResourceSuffix: "-sa-east-1"},
		Resources:  []regionsync.Resource{{Object: &demov1alpha1.Tenant{}}},
		// Claim.Scope defaults to regionsync.ClaimPerReplica.
	}); err != nil {
		log.Fatal(err)
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			log.Print(err)
		}
	}()
}
