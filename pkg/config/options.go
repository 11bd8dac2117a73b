package config

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/pkg/regionsync"
)

// Options turns the configuration file into regionsync.Options for the management cluster at
// management (nil to validate only). Its kinds are unstructured and its claim is per fleet (the
// binary always runs with leader election among its replicas, in leaderElection.namespace). The
// fields map one to one and one way: the library defaults and validates them, as for any host.
func (c *AgentConfig) Options(management *rest.Config) regionsync.Options {
	m := c.Management
	o := regionsync.Options{
		Region:           c.Region,
		AnnotationDomain: c.AnnotationDomain,
		Management: regionsync.Management{
			Config: management, Namespace: m.Namespace, ClusterID: m.ClusterID,
		},
		Shard: c.Shard,
		DeletionBudget: regionsync.DeletionBudget{
			MaxFraction: c.DeletionBudget.MaxFraction, MinObjects: c.DeletionBudget.MinObjects, Window: c.DeletionBudget.Window.Duration,
		},
		ResyncPeriod:      c.ResyncPeriod.Duration,
		HeartbeatInterval: c.Telemetry.HeartbeatInterval.Duration,
		Claim: regionsync.Claim{
			Scope:          regionsync.ClaimPerFleet,
			FleetNamespace: c.LeaderElection.Namespace,
			LeaseDuration:  m.Claim.LeaseDuration.Duration,
			RenewDeadline:  m.Claim.RenewDeadline.Duration,
			RetryPeriod:    m.Claim.RetryPeriod.Duration,
		},
	}
	if m.StartJitter != nil {
		o.Management.StartJitter = m.StartJitter.Duration
	}
	if cr := m.CredentialRenewal; cr.Enabled {
		o.Management.CredentialRenewal = &regionsync.CredentialRenewal{
			Secret:    types.NamespacedName{Namespace: cr.SecretNamespace, Name: cr.SecretName},
			SecretKey: cr.SecretKey, Lifetime: cr.Lifetime.Duration, RenewBefore: cr.RenewBefore.Duration,
		}
	}
	for _, r := range c.Resources {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(r.GroupVersionKind())
		o.Resources = append(o.Resources, regionsync.Resource{
			Object: u, Secrets: r.Secrets, Strategy: r.Strategy, Adoption: r.Adoption,
			DeletePropagation: r.DeletePropagation, Concurrency: r.Concurrency, AllowPrivileged: r.AllowPrivileged,
			FanOut: r.FanOut,
		})
	}
	return o
}

// ManagementConfig loads the management cluster's client config from the kubeconfig file the
// configuration names, with the configured client limits (by default none: API Priority and
// Fairness on management protects it; see fleetspec.DefaultManagementQPS).
func (c *AgentConfig) ManagementConfig() (*rest.Config, error) {
	m := c.Management
	rc, err := clientcmd.BuildConfigFromFlags("", m.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("management.kubeconfig %s: %w", m.Kubeconfig, err)
	}
	rc.QPS = fleetspec.DefaultManagementQPS
	if m.QPS > 0 {
		rc.QPS = m.QPS
		rc.Burst = int(m.QPS * fleetspec.DefaultManagementBurstPerQPS)
	}
	if m.Burst > 0 {
		rc.Burst = m.Burst
	}
	return rc, nil
}
