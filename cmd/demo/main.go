// Command demo runs `make demo`: a local management cluster and regions on real control planes,
// with the demo tenant operator and regionsync agents, until Ctrl-C.
package main

import (
	"flag"
	"fmt"
	"os"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/regionsync/regionsync/internal/demo"
)

func main() {
	dir := flag.String("dir", ".demo", "directory for kubeconfigs and logs (emptied first)")
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.Level(zapcore.ErrorLevel)))
	if err := demo.Run(ctrl.SetupSignalHandler(), demo.Options{Dir: *dir, Out: os.Stdout}); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}
