// Command region-kubeconfig writes to stdout the kubeconfig a region's agent uses to reach the
// management cluster: management's server and CA from the caller's kubeconfig, and a fresh token
// of the region's identity (the ServiceAccount regionsync-system/region-<region>, from the
// TokenRequest API, as `kubectl create token` would). Nothing else of the caller's kubeconfig
// is copied: no other user, client certificate, key, token, exec plugin or context.
//
//	region-kubeconfig REGION [--context CTX] [--duration D] [--kubeconfig FILE] [--server URL]
//
// scripts/region-kubeconfig.sh builds and runs it (Go is all it needs, no kubectl).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// DefaultDuration is the requested token lifetime; the API server may cap it
// (--service-account-max-token-expiration), which the command then reports.
const DefaultDuration = 720 * time.Hour

// Namespace holds the regions' identities on management.
const Namespace = "regionsync-system"

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "region-kubeconfig:", err)
		var usage usageError
		if errors.As(err, &usage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ error }

type options struct {
	region, context, kubeconfig, server string
	duration                            time.Duration
}

// parseArgs accepts REGION before, between or after the flags.
func parseArgs(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("region-kubeconfig", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.context, "context", "", "context of the caller's kubeconfig that reaches management (default: the current context)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "the caller's kubeconfig (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&o.server, "server", "", "management's address as the region reaches it (default: the context's server)")
	fs.DurationVar(&o.duration, "duration", DefaultDuration, "requested token lifetime")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: region-kubeconfig REGION [--context CTX] [--duration D] [--kubeconfig FILE] [--server URL]")
		fs.PrintDefaults()
	}
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return o, usageError{err}
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(positional) != 1 {
		fs.Usage()
		return o, usageError{fmt.Errorf("want exactly one REGION, got %d arguments", len(positional))}
	}
	o.region = positional[0]
	if msgs := validation.IsDNS1123Label(o.region); len(msgs) > 0 {
		return o, usageError{fmt.Errorf("REGION %q: %s", o.region, strings.Join(msgs, "; "))}
	}
	if o.duration < 10*time.Minute {
		return o, usageError{fmt.Errorf("--duration %s: the API server issues tokens of at least 10m", o.duration)}
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseArgs(args, stderr)
	if err != nil {
		return err
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.context})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return fmt.Errorf("the caller's kubeconfig: %w", err)
	}
	if cfg.Insecure {
		return errors.New("the context skips TLS verification (insecure-skip-tls-verify): the region's kubeconfig would too; give the context management's CA")
	}
	ca := cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		if ca, err = os.ReadFile(cfg.CAFile); err != nil {
			return fmt.Errorf("the context's certificate-authority: %w", err)
		}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	sa := "region-" + o.region
	secs := int64(o.duration / time.Second)
	tr, err := cs.CoreV1().ServiceAccounts(Namespace).CreateToken(ctx, sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("ServiceAccount %s/%s not found on management (%s): apply deploy/regions/%s/management first", Namespace, sa, cfg.Host, o.region)
	case err != nil:
		return fmt.Errorf("creating a token for ServiceAccount %s/%s on %s: %w", Namespace, sa, cfg.Host, err)
	case tr.Status.Token == "":
		return fmt.Errorf("the API server returned no token for ServiceAccount %s/%s", Namespace, sa)
	}
	server := cfg.Host
	if o.server != "" {
		server = o.server
	}
	data, err := Kubeconfig(o.region, server, cfg.ServerName, ca, tr.Status.Token)
	if err != nil {
		return err
	}
	if _, err := stdout.Write(data); err != nil {
		return err
	}
	expires := tr.Status.ExpirationTimestamp.Time
	fmt.Fprintf(stderr, "region-kubeconfig: token of %s/%s for %s, expires %s", Namespace, sa, server, expires.UTC().Format(time.RFC3339))
	if got := time.Until(expires).Round(time.Minute); got < o.duration-time.Minute {
		fmt.Fprintf(stderr, " (the API server capped it at %s; %s requested)", got, o.duration)
	}
	fmt.Fprintln(stderr)
	return nil
}

// Kubeconfig is a kubeconfig with one cluster (server, CA, TLS server name), one user (the token)
// and one context joining them, named for the region.
func Kubeconfig(region, server, tlsServerName string, ca []byte, token string) ([]byte, error) {
	kc := clientcmdapi.NewConfig()
	user, ctxName := "region-"+region, "region-"+region+"@management"
	kc.Clusters["management"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca, TLSServerName: tlsServerName}
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts[ctxName] = &clientcmdapi.Context{Cluster: "management", AuthInfo: user}
	kc.CurrentContext = ctxName
	if _, err := clientcmd.NewDefaultClientConfig(*kc, nil).ClientConfig(); err != nil {
		return nil, fmt.Errorf("the kubeconfig written would not load: %w", err)
	}
	return clientcmd.Write(*kc)
}
