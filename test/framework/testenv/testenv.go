// Package testenv starts real Kubernetes control planes for tests and the demo: N named clusters in
// one process, each an envtest kube-apiserver + etcd plus a kube-controller-manager process (so
// namespace finalization and garbage collection, hence Foreground deletion, complete). It hands out
// admin clients and kubeconfig files, and clients that impersonate a ServiceAccount so tests can
// prove RBAC.
//
// Every child process is started with PR_SET_PDEATHSIG=SIGKILL, so nothing outlives the test
// process, even when a test panics or times out.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Options configures a Fleet.
type Options struct {
	// Dir receives kubeconfig files and control-plane logs (default: a new temporary directory,
	// removed by Stop).
	Dir string
	// CRDDirectoryPaths are installed on every cluster (default: the repository's deploy/crds and
	// deploy/crds/demo).
	CRDDirectoryPaths []string
	// NoControllerManager skips kube-controller-manager (faster start; deletions that need the
	// namespace controller or the garbage collector then never complete).
	NoControllerManager bool
	// Log receives progress lines (nil = silent).
	Log func(format string, args ...any)
}

// Cluster is one running control plane.
type Cluster struct {
	// Name is the cluster's name in the fleet ("management", "us-east-1", ...).
	Name string
	// Config is an admin (system:masters) rest.Config.
	Config *rest.Config
	// Client is an admin client with the project's scheme.
	Client client.Client
	// Kubeconfig is the path of an admin kubeconfig file for this cluster.
	Kubeconfig string

	dir string
	env *envtest.Environment
	kcm *Process
}

// Fleet is a set of named clusters started together.
type Fleet struct {
	// Clusters in the order they were named.
	Clusters []*Cluster
	dir      string
	ownDir   bool
}

// Cluster returns the cluster of that name, or nil.
func (f *Fleet) Cluster(name string) *Cluster {
	for _, c := range f.Clusters {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Dir is where the fleet's kubeconfigs and logs are.
func (f *Fleet) Dir() string { return f.dir }

// NoControlPlaneEnv names the environment variable that, when set, makes Start fail: make test-unit
// and make fuzz set it, so that a test that needs API servers fails there loudly instead of starting
// them.
const NoControlPlaneEnv = "REGIONSYNC_NO_CONTROL_PLANE"

// Start starts one cluster per name, in parallel, and returns when all are serving with their
// CRDs installed. On error everything started so far is stopped.
func Start(names []string, opts Options) (*Fleet, error) {
	if len(names) == 0 {
		return nil, errors.New("testenv: no cluster names")
	}
	if os.Getenv(NoControlPlaneEnv) != "" {
		return nil, fmt.Errorf("testenv: %s is set (pure-logic run): this test needs API servers; run it with make test", NoControlPlaneEnv)
	}
	binDir, err := ControlPlaneDir()
	if err != nil {
		return nil, err
	}
	f := &Fleet{dir: opts.Dir}
	if f.dir == "" {
		if f.dir, err = os.MkdirTemp("", "regionsync-fleet-"); err != nil {
			return nil, err
		}
		f.ownDir = true
	}
	if opts.CRDDirectoryPaths == nil {
		root, err := RepoRoot()
		if err != nil {
			return nil, err
		}
		opts.CRDDirectoryPaths = []string{filepath.Join(root, "deploy", "crds"), filepath.Join(root, "deploy", "crds", "demo")}
	}
	wrappers, err := writeWrappers(filepath.Join(f.dir, "bin"), binDir)
	if err != nil {
		return nil, err
	}
	f.Clusters = make([]*Cluster, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			f.Clusters[i], errs[i] = startCluster(name, filepath.Join(f.dir, name), binDir, wrappers, opts)
			if errs[i] == nil && opts.Log != nil {
				opts.Log("cluster %s up in %s (kubeconfig %s)", name, time.Since(start).Round(100*time.Millisecond), f.Clusters[i].Kubeconfig)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		_ = f.Stop()
		return nil, err
	}
	return f, nil
}

// Stop stops every cluster and its controller-manager, and removes the fleet's directory when
// Start created it.
func (f *Fleet) Stop() error {
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range f.Clusters {
		if c == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.stop(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("stopping %s: %w", c.Name, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if f.ownDir {
		_ = os.RemoveAll(f.dir)
	}
	return errors.Join(errs...)
}

// wrappers are shell scripts that exec a control-plane binary under setpriv --pdeathsig KILL, so
// the processes envtest starts die with the test process.
type wrappers struct{ etcd, apiserver string }

func writeWrappers(dir, binDir string) (wrappers, error) {
	w := wrappers{etcd: filepath.Join(binDir, "etcd"), apiserver: filepath.Join(binDir, "kube-apiserver")}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return w, nil // no util-linux: run the binaries directly; Stop still cleans up
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return w, err
	}
	write := func(name, target string) (string, error) {
		p := filepath.Join(dir, name)
		script := fmt.Sprintf("#!/bin/sh\nexec %s --pdeathsig KILL -- %s \"$@\"\n", setpriv, target)
		return p, os.WriteFile(p, []byte(script), 0o755)
	}
	if w.etcd, err = write("etcd", w.etcd); err != nil {
		return w, err
	}
	w.apiserver, err = write("kube-apiserver", w.apiserver)
	return w, err
}

func startCluster(name, dir, binDir string, w wrappers, opts Options) (*Cluster, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: binDir,
		CRDDirectoryPaths:     opts.CRDDirectoryPaths,
		ErrorIfCRDPathMissing: true,
		Scheme:                Scheme(),
	}
	api := env.ControlPlane.GetAPIServer()
	api.Path = w.apiserver
	// Real clusters keep watch caches; so does ours. Events are kept long enough to read them.
	api.Configure().Set("event-ttl", "1h")
	env.ControlPlane.Etcd = &envtest.Etcd{Path: w.etcd}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("cluster %s: starting API server: %w", name, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	c := &Cluster{Name: name, Config: cfg, dir: dir, env: env}
	c.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := WriteKubeconfig(c.Kubeconfig, name, cfg); err != nil {
		_ = c.stop()
		return nil, err
	}
	if c.Client, err = client.New(cfg, client.Options{Scheme: Scheme()}); err != nil {
		_ = c.stop()
		return nil, err
	}
	if !opts.NoControllerManager {
		if err := c.startControllerManager(filepath.Join(binDir, "kube-controller-manager")); err != nil {
			_ = c.stop()
			return nil, fmt.Errorf("cluster %s: %w", name, err)
		}
	}
	return c, nil
}

func (c *Cluster) startControllerManager(path string) error {
	logFile, err := os.Create(filepath.Join(c.dir, "kube-controller-manager.log"))
	if err != nil {
		return err
	}
	p, err := StartProcess(path, []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--use-service-account-credentials=false",
		"--controllers=namespace-controller,garbage-collector-controller",
		"--concurrent-gc-syncs=5",
		"--concurrent-namespace-syncs=5",
	}, nil, logFile, func() { logFile.Close() })
	if err != nil {
		logFile.Close()
		return fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	c.kcm = p
	return nil
}

// stopControllerManager stops this cluster's kube-controller-manager; it is idempotent.
func (c *Cluster) stopControllerManager() {
	if c.kcm == nil {
		return
	}
	c.kcm.Stop(syscall.SIGTERM, 10*time.Second)
	c.kcm = nil
}

func (c *Cluster) stop() error {
	c.stopControllerManager()
	if c.env == nil {
		return nil
	}
	err := c.env.Stop()
	c.env = nil
	return err
}

// ServiceAccountUser is the user name of a ServiceAccount.
func ServiceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// ImpersonatingConfig returns a copy of the admin config that acts as user (with groups): every
// request is authorized as that identity, so RBAC is enforced exactly as for the real one.
func (c *Cluster) ImpersonatingConfig(user string, groups ...string) *rest.Config {
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append([]string{"system:authenticated"}, groups...)}
	return cfg
}

// ServiceAccountConfig returns a config that acts as the ServiceAccount namespace/name, with the
// groups the API server gives ServiceAccount tokens.
func (c *Cluster) ServiceAccountConfig(namespace, name string) *rest.Config {
	return c.ImpersonatingConfig(ServiceAccountUser(namespace, name),
		"system:serviceaccounts", "system:serviceaccounts:"+namespace)
}

// ServiceAccountTokenConfig returns a config that authenticates as the ServiceAccount
// namespace/name (which must exist) with a token of the TokenRequest API, valid for an hour:
// unlike ServiceAccountConfig it is that identity, not the admin impersonating it, so it can
// itself impersonate others exactly as far as its RBAC allows.
func (c *Cluster) ServiceAccountTokenConfig(ctx context.Context, namespace, name string) (*rest.Config, error) {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return nil, err
	}
	secs := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("a token of ServiceAccount %s/%s: %w", namespace, name, err)
	}
	cfg := rest.AnonymousClientConfig(c.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg, nil
}

// ServiceAccountClient is a client acting as the ServiceAccount namespace/name.
func (c *Cluster) ServiceAccountClient(namespace, name string) (client.Client, error) {
	return client.New(c.ServiceAccountConfig(namespace, name), client.Options{Scheme: Scheme()})
}

// WriteImpersonatingKubeconfig writes a kubeconfig file that acts as user (with groups) and
// returns its path; processes such as the agent binary then run with exactly that identity.
func (c *Cluster) WriteImpersonatingKubeconfig(fileName, user string, groups ...string) (string, error) {
	p := filepath.Join(c.dir, fileName)
	return p, WriteKubeconfig(p, c.Name, c.ImpersonatingConfig(user, groups...))
}

// WriteKubeconfig writes cfg (TLS client certificates or token, optional impersonation) as a
// kubeconfig file with one context named name.
func WriteKubeconfig(path, name string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
	}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
		Impersonate:           cfg.Impersonate.UserName,
		ImpersonateGroups:     cfg.Impersonate.Groups,
	}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// ControlPlaneDir returns the directory holding etcd, kube-apiserver and kube-controller-manager:
// $KUBEBUILDER_ASSETS when it is set (make test sets it), else what scripts/control-plane.sh
// prints (building the binaries on first use).
func ControlPlaneDir() (string, error) {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(filepath.Join(root, "scripts", "control-plane.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("scripts/control-plane.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// RepoRoot finds the repository root (the directory holding this module's go.mod).
func RepoRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if ok {
		root := filepath.Join(filepath.Dir(file), "..", "..")
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			return filepath.Abs(root)
		}
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.HasPrefix(string(data), "module github.com/regionsync/regionsync\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testenv: repository root (go.mod of github.com/regionsync/regionsync) not found")
		}
		dir = parent
	}
}
