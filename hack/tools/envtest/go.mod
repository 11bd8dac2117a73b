// Module envtest pins controller-runtime's setup-envtest, which scripts/control-plane.sh tries first
// to download etcd and kube-apiserver where the network allows it; nothing imports it.
module github.com/regionsync/regionsync/hack/tools/envtest

go 1.26.0

require sigs.k8s.io/controller-runtime/tools/setup-envtest v0.25.1

require (
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/go-logr/zapr v1.3.0 // indirect
	github.com/spf13/afero v1.12.0 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	go.uber.org/zap v1.27.0 // indirect
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	golang.org/x/text v0.40.0 // indirect
	sigs.k8s.io/yaml v1.6.0 // indirect
)
