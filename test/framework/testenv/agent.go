package testenv

import (
	"io"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
)

// Replica is one replica of the agent or the hub to run as a process, as a cluster runs it
// (both binaries take the same flags).
type Replica struct {
	// Binary is the agent or hub binary (BuildAgent, BuildHub, or bin/).
	Binary string
	// Name is the replica's name (POD_NAME: the leader named on the Leases and the Region).
	Name string
	// Config is the configuration file's path (agentconfig.WriteConfig for an agent).
	Config string
	// Kubeconfig is the cluster the replica runs in (the agent's region, the hub's management).
	Kubeconfig string
	// PprofAddr serves net/http/pprof there ("": off).
	PprofAddr string
	// Env adds to the environment (OTEL_* for the traces).
	Env []string
	// Out receives the output; OnExit runs once the process has exited (to close Out).
	Out    io.Writer
	OnExit func()
}

// StartReplica runs one replica: the one way the tests, the e2e, the benchmarks and the demo
// start an agent or hub process.
func StartReplica(a Replica) (*Process, error) {
	args := []string{"--config", a.Config, "--kubeconfig", a.Kubeconfig}
	if a.PprofAddr != "" {
		args = append(args, "--pprof-bind-address", a.PprofAddr)
	}
	return StartProcess(a.Binary, args, append([]string{"POD_NAME=" + a.Name}, a.Env...), a.Out, a.OnExit)
}

// TenantGVK is the kind the tests' agents sync: the demo Tenant. agentconfig.TenantConfig (an
// agent process's configuration file) and agentconfig.TenantOptions (an in-process agent's
// Options) both name it from here.
var TenantGVK = demov1alpha1.GroupVersion.WithKind("Tenant")
