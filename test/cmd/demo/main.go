// Command demo runs `make demo`: a local management cluster and regions on real control planes,
// with the demo tenant operator and a regionsync agent per region, until Ctrl-C. It prints each
// change's trace across the clusters and the agents' metrics; SIGUSR1 prints them again. With
// OTEL_EXPORTER_OTLP_ENDPOINT set, the spans it receives are forwarded there too.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/regionsync/regionsync/test/framework/demo"
)

func main() {
	self, _ := os.Executable()
	dir := flag.String("dir", ".demo", "directory for kubeconfigs, agent configurations and logs (emptied first)")
	agentBin := flag.String("agent", filepath.Join(filepath.Dir(self), "agent"), "agent binary")
	operatorBin := flag.String("tenant-operator", filepath.Join(filepath.Dir(self), "tenant-operator"), "tenant operator binary")
	hubBin := flag.String("hub", filepath.Join(filepath.Dir(self), "hub"), "hub binary")
	exit := flag.Bool("exit", false, "tear down after the round trip instead of waiting for Ctrl-C")
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.Level(zapcore.ErrorLevel)))
	err := demo.Run(ctrl.SetupSignalHandler(), demo.Options{Dir: *dir, AgentBinary: *agentBin, OperatorBinary: *operatorBin, HubBinary: *hubBin, Out: os.Stdout, Exit: *exit})
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}
