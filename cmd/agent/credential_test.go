//go:build integration

package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/credential"
	"github.com/regionsync/regionsync/internal/shard/claim"
	"github.com/regionsync/regionsync/pkg/config"
	"github.com/regionsync/regionsync/test/framework/agentconfig"
	"github.com/regionsync/regionsync/test/framework/deploy"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// The region's management credential: the agent renews its real ServiceAccount token (the
// TokenRequest API, the shortest token the API server issues: 10 minutes) as the shipped
// overlays' identities — on management its region's ServiceAccount, in the region its own
// ServiceAccount, each with exactly the shipped RBAC — and writes it into its kubeconfig Secret.

// credentialEnv is management and one region with the shipped overlays applied, a region
// kubeconfig holding a real token of region-<region>, and the Secret it is stored in.
type credentialEnv struct {
	*fleetEnv
	region         string
	local          *testenv.Cluster
	localKC        string // the agent's ServiceAccount in the region
	cfg            *config.AgentConfig
	original       credential.Token
	secret         client.ObjectKey
	managementHost string
}

// newCredentialEnv starts the clusters, applies the shipped overlays, issues a token of lifetime
// for the region's identity, writes the kubeconfig file the agent reads and stores it in the
// region's Secret. The agent renews its token renewAfter after it was issued.
func newCredentialEnv(t *testing.T, region string, lifetime, renewAfter time.Duration) *credentialEnv {
	e := &credentialEnv{fleetEnv: newFleet(t, region), region: region}
	e.local = e.fleet.Cluster(region)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	e.applyOverlay(e.management.Client, filepath.Join(root, "deploy", "kustomize", "management"))
	e.applyOverlay(e.management.Client, filepath.Join(root, "deploy", "regions", region, "management"))
	agentObjs := e.applyOverlay(e.local.Client, filepath.Join(root, "deploy", "regions", region, "agent"))
	if e.cfg, err = deploy.AgentConfig(agentObjs); err != nil {
		t.Fatal(err)
	}
	if !e.cfg.Management.CredentialRenewal.Enabled {
		t.Fatalf("the shipped overlay of %s does not renew its credential", region)
	}
	e.localKC, err = e.local.WriteImpersonatingKubeconfig("agent-kubeconfig", testenv.ServiceAccountUser("regionsync-system", "regionsync-agent"),
		"system:serviceaccounts", "system:serviceaccounts:regionsync-system")
	if err != nil {
		t.Fatal(err)
	}
	e.managementHost = e.management.Config.Host
	e.original = e.issueToken(lifetime)
	kc := e.kubeconfig(e.original.Value)
	kcPath := filepath.Join(t.TempDir(), "management-kubeconfig")
	if err := os.WriteFile(kcPath, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	cr := agentconfig.Effective(e.cfg).Management.CredentialRenewal // the overlay's, defaults included
	e.secret = cr.Secret
	e.create(e.local.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.secret.Namespace, Name: e.secret.Name},
		Data: map[string][]byte{cr.SecretKey: kc}})
	// The file the Deployment mounts from that Secret, local paths and ports; the margin makes a
	// 10-minute token renew renewAfter after it was issued.
	e.cfg.Management.Kubeconfig = kcPath
	e.cfg.Telemetry.SecureMetrics = false // the test scrapes plain HTTP
	e.cfg.Management.CredentialRenewal.RenewBefore = metav1.Duration{Duration: e.original.Lifetime() - renewAfter}
	return e
}

// applyOverlay creates the objects of a kustomization (its CRDs aside: testenv installs
// deploy/crds), namespaces, accounts and roles first, and returns them.
func (e *credentialEnv) applyOverlay(c client.Client, dir string) []*unstructured.Unstructured {
	e.t.Helper()
	objs, err := deploy.Render(dir)
	if err != nil {
		e.t.Fatal(err)
	}
	rank := map[string]int{"Namespace": 0, "ServiceAccount": 1, "ClusterRole": 2, "Role": 2, "ClusterRoleBinding": 3, "RoleBinding": 3}
	r := func(o *unstructured.Unstructured) int {
		if v, ok := rank[o.GetKind()]; ok {
			return v
		}
		return 9
	}
	ordered := append([]*unstructured.Unstructured(nil), objs...)
	sort.SliceStable(ordered, func(i, j int) bool { return r(ordered[i]) < r(ordered[j]) })
	for _, o := range ordered {
		if o.GetKind() != "CustomResourceDefinition" {
			e.create(c, o.DeepCopy())
		}
	}
	return objs
}

// serviceAccount is the region's identity on management.
func (e *credentialEnv) serviceAccount() string { return "region-" + e.region }

// issueToken is what scripts/region-kubeconfig.sh does: a TokenRequest for the region's identity.
func (e *credentialEnv) issueToken(lifetime time.Duration) credential.Token {
	e.t.Helper()
	cs, err := kubernetes.NewForConfig(e.management.Config)
	if err != nil {
		e.t.Fatal(err)
	}
	secs := int64(lifetime / time.Second)
	tr, err := cs.CoreV1().ServiceAccounts("regionsync-system").CreateToken(e.ctx, e.serviceAccount(),
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	tok, err := credential.Parse(tr.Status.Token)
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

// tokenConfig is a client config for management with only that token.
func (e *credentialEnv) tokenConfig(token string) *rest.Config {
	return &rest.Config{Host: e.managementHost, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: e.management.Config.CAData}}
}

// kubeconfig is the region's kubeconfig: management's server and CA, and the token.
func (e *credentialEnv) kubeconfig(token string) []byte {
	e.t.Helper()
	p := filepath.Join(e.t.TempDir(), "kc")
	if err := testenv.WriteKubeconfig(p, "management", e.tokenConfig(token)); err != nil {
		e.t.Fatal(err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		e.t.Fatal(err)
	}
	return data
}

// authenticated says whether management accepts token: nil, or the error it answers (401
// Unauthorized once the token expired or its ServiceAccount is gone).
func (e *credentialEnv) authenticated(token string) error {
	cs, err := kubernetes.NewForConfig(e.tokenConfig(token))
	if err != nil {
		return err
	}
	_, err = cs.Discovery().ServerVersion()
	return err
}

// storedToken is the token of the kubeconfig in the region's Secret.
func (e *credentialEnv) storedToken() (credential.Token, error) {
	s := &corev1.Secret{}
	if err := e.local.Client.Get(e.ctx, e.secret, s); err != nil {
		return credential.Token{}, err
	}
	value, err := credential.KubeconfigToken(s.Data[agentconfig.Effective(e.cfg).Management.CredentialRenewal.SecretKey])
	if err != nil {
		return credential.Token{}, err
	}
	return credential.Parse(value)
}

// waitRenewed waits until the agent p renewed its token: its expiry metric and the Secret's
// token are past the token before (whose expiry is given), and the Secret's token is accepted by
// management. It returns the renewed token.
func (e *credentialEnv) waitRenewed(p *proc, before time.Time, timeout time.Duration) credential.Token {
	e.t.Helper()
	var renewed credential.Token
	e.eventually("the agent renewed its credential and stored it in the Secret", timeout, func() error {
		v, err := p.metric("regionsync_management_credential_expiry_timestamp_seconds")
		if err != nil {
			return err
		}
		if int64(v) <= before.Unix() {
			return fmt.Errorf("credential expiry metric %v, not past %d", int64(v), before.Unix())
		}
		if renewed, err = e.storedToken(); err != nil {
			return err
		}
		if !renewed.Expiry.After(before) {
			return fmt.Errorf("the Secret's token expires %s, not after %s", renewed.Expiry, before)
		}
		if renewed.Namespace != "regionsync-system" || renewed.ServiceAccount != e.serviceAccount() {
			return fmt.Errorf("the Secret holds a token of %s/%s", renewed.Namespace, renewed.ServiceAccount)
		}
		return e.authenticated(renewed.Value)
	})
	if n, err := p.counter("regionsync_management_credential_renewals_total", `result="renewed"`); err != nil || n < 1 {
		e.t.Fatalf("regionsync_management_credential_renewals_total{result=renewed} = %v (%v)", n, err)
	}
	return renewed
}

// tenant creates a Tenant of the region in namespace tenant-a (the overlay's prefix and label).
func (e *credentialEnv) tenant(name string) {
	e.t.Helper()
	e.create(e.management.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"}})
	e.create(e.management.Client, testenv.Tenant("tenant-a", name+"-"+e.region, name, func(t *demov1alpha1.Tenant) {
		t.Labels = map[string]string{regionsyncv1alpha1.RegionLabel: e.region}
	}))
}

// claimRenewed is the shard Lease's last renewal on management.
func (e *credentialEnv) claimRenewed() (time.Time, error) {
	l := &coordinationv1.Lease{}
	if err := e.management.Client.Get(e.ctx, client.ObjectKey{Namespace: "regionsync-system", Name: claim.LeaseName(e.region)}, l); err != nil {
		return time.Time{}, err
	}
	if l.Spec.RenewTime == nil {
		return time.Time{}, fmt.Errorf("Lease %s never renewed", l.Name)
	}
	return l.Spec.RenewTime.Time, nil
}

// A region's identity may create tokens of its own ServiceAccount only. Revoking a region is one
// step, deleting its ServiceAccount on management: the renewed token
// dies with it (tokens are bound to the ServiceAccount's UID), the agent, which renews every 10 s
// here, gets no new one, says so and stops within 60 s (its claim lapses; a change on management
// no longer reaches the region). The ServiceAccount re-created and a new token stored in the
// Secret let it back in without a restart.
func TestCredentialRevoked(t *testing.T) {
	t.Parallel()
	e := newCredentialEnv(t, "eu-west-1", credential.MinLifetime, 10*time.Second)
	p := startAgentWith(t, "revoked", e.localKC, e.cfg)
	e.tenant("t0")
	e.waitLocal(e.local, "tenant-a", "t0", 60*time.Second)
	renewed := e.waitRenewed(p, e.original.Expiry, 90*time.Second)
	if _, err := e.claimRenewed(); err != nil {
		t.Fatal(err)
	}
	// The region's identity creates tokens of its own ServiceAccount only (RBAC by name).
	cs, err := kubernetes.NewForConfig(e.tokenConfig(renewed.Value))
	if err != nil {
		t.Fatal(err)
	}
	for _, other := range []string{"region-us-east-1", "regionsync-agent", "default"} {
		_, err := cs.CoreV1().ServiceAccounts("regionsync-system").CreateToken(e.ctx, other, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("region %s creating a token of %s: %v, want Forbidden", e.region, other, err)
		}
	}

	// The documented step.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "regionsync-system", Name: e.serviceAccount()}}
	if err := e.management.Client.Delete(e.ctx, sa); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	e.eventually("the ServiceAccount is gone", 30*time.Second, func() error {
		if err := e.management.Client.Get(e.ctx, client.ObjectKeyFromObject(sa), &corev1.ServiceAccount{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})

	// The API server caches a token's authentication for 10 s.
	e.eventually("management refuses the first and the renewed token", 30*time.Second, func() error {
		for what, tok := range map[string]string{"first": e.original.Value, "renewed": renewed.Value} {
			if err := e.authenticated(tok); !apierrors.IsUnauthorized(err) {
				return fmt.Errorf("the %s token: %v, want 401 Unauthorized", what, err)
			}
		}
		return nil
	})
	e.eventually("the revoked agent stops syncing", 60*time.Second-time.Since(revoked), func() error {
		if v, err := p.metric("regionsync_shard_claimed"); err != nil || v != 0 {
			return fmt.Errorf("regionsync_shard_claimed = %v (%v)", v, err)
		}
		if !strings.Contains(p.logs(), "management refuses the region's credential") {
			return fmt.Errorf("the log does not say the credential is refused")
		}
		return nil
	})
	t.Logf("stopped %s after the revocation", time.Since(revoked).Round(100*time.Millisecond))

	// Nothing reaches the region any more: neither a change nor a new object.
	o := &demov1alpha1.Tenant{}
	if err := e.management.Client.Get(e.ctx, client.ObjectKey{Namespace: "tenant-a", Name: "t0-" + e.region}, o); err != nil {
		t.Fatal(err)
	}
	o.Spec.DisplayName = "after revocation"
	if err := e.management.Client.Update(e.ctx, o); err != nil {
		t.Fatal(err)
	}
	e.tenant("t1")
	testenv.Consistently(t, "nothing synced after the revocation", 15*time.Second, func() error {
		local := &demov1alpha1.Tenant{}
		if err := e.local.Client.Get(e.ctx, client.ObjectKey{Namespace: "tenant-a", Name: "t0"}, local); err != nil {
			return err
		}
		if local.Spec.DisplayName != "t0" {
			return fmt.Errorf("the change reached the region: %q", local.Spec.DisplayName)
		}
		if err := e.local.Client.Get(e.ctx, client.ObjectKey{Namespace: "tenant-a", Name: "t1"}, &demov1alpha1.Tenant{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("a new object reached the region: %v", err)
		}
		return nil
	})

	// Let back in: the ServiceAccount re-created (the management overlay applied again) and a new
	// token of it in the Secret; the refused agent looks there and resumes without a restart.
	e.create(e.management.Client, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "regionsync-system", Name: e.serviceAccount()}})
	s := &corev1.Secret{}
	if err := e.local.Client.Get(e.ctx, e.secret, s); err != nil {
		t.Fatal(err)
	}
	s.Data[agentconfig.Effective(e.cfg).Management.CredentialRenewal.SecretKey] = e.kubeconfig(e.issueToken(credential.MinLifetime).Value)
	if err := e.local.Client.Update(e.ctx, s); err != nil {
		t.Fatal(err)
	}
	e.waitLocal(e.local, "tenant-a", "t1", 90*time.Second)
}
