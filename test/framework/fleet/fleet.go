// Package fleet is the one fleet launcher of the e2e, the benchmarks and the demo, in the shape of
// Cluster API's test/framework: a management cluster and regional clusters, the overlays under
// deploy/ applied as operators apply them, agents and hubs run as their binaries, and what a
// scenario needs from the result behind one interface, Fleet.
//
// Two launchers implement it. StartLocal runs every cluster as a real control plane from testenv
// (kube-apiserver, etcd and, unless told otherwise, kube-controller-manager processes) and every
// agent and hub replica as a separate process that authenticates as the overlay's identities; it
// runs everywhere, CI included. StartKind creates kind clusters (sigs.k8s.io/kind, in Docker),
// builds and loads the image and applies the overlays' Deployments. The render helpers
// (RenderRegion, RenderHub, CopyDeployTree) serve both and the tests of the overlays.
package fleet

import (
	"context"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/regionsync/regionsync/internal/shard/claim"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// Fleet is what the e2e scenarios need from a launched fleet, whichever launcher started it.
type Fleet interface {
	// Management is an admin client on the management cluster.
	Management() client.Client
	// Region is an admin client on a regional cluster.
	Region(name string) client.Client
	// Regions lists the deployed regions.
	Regions() []string
	// AddRegion creates a cluster for a region whose overlays exist under deployDir and deploys
	// it (management registration, agent overlay, agents running).
	AddRegion(ctx context.Context, name, deployDir string) error
	// KillLeader kills the replica of region that syncs (SIGKILL, or a pod deletion with no
	// grace period) and returns its name.
	KillLeader(ctx context.Context, region string) (string, error)
	// AgentIdentities are clients acting as region's agent: its ServiceAccount in the region and
	// its identity on management.
	AgentIdentities(region string) (local, management client.Client, err error)
	// AgentLogs returns the logs of every running agent replica of every region so far.
	AgentLogs() (string, error)
	// StopAgents stops every agent replica of region (SIGTERM, as scaling its Deployment to
	// zero does): they release the shard Lease and stop renewing it.
	StopAgents(ctx context.Context, region string) error
	// StartAgents starts region's agent replicas again after StopAgents.
	StartAgents(ctx context.Context, region string) error
	// ManagementAs is a client on management acting as user (with groups), for RBAC and the
	// admission policies to judge as they would that user's own requests.
	ManagementAs(user string, groups ...string) (client.Client, error)
	// HubLogs returns the logs of every hub replica (deploy/kustomize/hub-clusterprofiles on management).
	HubLogs() (string, error)
}

// Management is the management cluster's name in a local fleet (LocalFleet.Cluster).
const Management = "management"

// The identities the overlays create: the agent's ServiceAccount in its region, the hub's on
// management, both in AgentNamespace (each region's identity on management is
// RegionServiceAccount).
const (
	AgentNamespace      = "regionsync-system"
	AgentServiceAccount = "regionsync-agent"
	HubServiceAccount   = "regionsync-hub"
)

// tenantOperator names the demo tenant operator: its objects on kind and its traces' service.
const tenantOperator = "tenant-operator"

// deploymentKind is the kind of the overlays' workloads.
const deploymentKind = "Deployment"

// RegionServiceAccount is the name of region's ServiceAccount on management (in AgentNamespace),
// the identity its agents act as there.
func RegionServiceAccount(region string) string { return "region-" + region }

// LeaseHolder returns the replica named on region's shard Lease on management ("" when the
// Lease names none).
func LeaseHolder(ctx context.Context, mgmt client.Client, region string) (string, error) {
	lease := &coordinationv1.Lease{}
	if err := mgmt.Get(ctx, client.ObjectKey{Namespace: AgentNamespace, Name: claim.LeaseName(region)}, lease); err != nil {
		return "", err
	}
	return lease.Annotations[claim.HolderAnnotation], nil
}

// Replica is one process a local fleet runs: an agent or hub replica, or another process given
// to LocalFleet.Run (the demo's tenant operators). The fleet stops it with itself.
type Replica struct {
	// Name is the replica's name (POD_NAME for an agent or hub: the leader named on the Leases).
	Name string
	// Region is the region the process serves ("" for a hub).
	Region string
	// Config and Kubeconfig are the files it runs with (Config is empty for a process given
	// arguments of its own).
	Config, Kubeconfig string
	// Log is the path of its log file.
	Log string
	// Pprof is where it serves net/http/pprof ("" when it does not).
	Pprof string
	// Proc is the running process.
	Proc *testenv.Process

	grace time.Duration
}

// Stop sends sig and waits for the exit, killing the process after the fleet's StopGrace.
func (r *Replica) Stop(sig syscall.Signal) { r.Proc.Stop(sig, r.grace) }

// Alive reports whether the process is still running.
func (r *Replica) Alive() bool { return r.Proc.Alive() }
