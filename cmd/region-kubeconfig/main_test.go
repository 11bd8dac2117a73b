//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/regionsync/regionsync/test/framework/testenv"
)

// scripts/region-kubeconfig.sh, run against a real API server with an admin kubeconfig that holds
// a client certificate and key, a CA file and a second user, writes a kubeconfig with exactly one
// user: a token that authenticates as the region's ServiceAccount, and nothing else of the
// caller's credentials.
func TestRegionKubeconfigScript(t *testing.T) {
	dir := t.TempDir()
	fleet, err := testenv.Start([]string{"management"}, testenv.Options{Dir: filepath.Join(dir, "clusters"), NoControllerManager: true, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleet.Stop() })
	mgmt := fleet.Cluster("management")
	ctx := context.Background()
	admin, err := kubernetes.NewForConfig(mgmt.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ServiceAccounts(Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "region-us-east-1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The caller's kubeconfig: the admin (client certificate and key), the CA as a file, and a
	// second user with a token of its own, current context on the other user.
	if len(mgmt.Config.CertData) == 0 || len(mgmt.Config.KeyData) == 0 {
		t.Fatal("the admin config has no client certificate to leak")
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, mgmt.Config.CAData, 0o600); err != nil {
		t.Fatal(err)
	}
	const otherToken = "other-users-token-must-not-leak"
	src := clientcmdapi.NewConfig()
	src.Clusters["mgmt"] = &clientcmdapi.Cluster{Server: mgmt.Config.Host, CertificateAuthority: caFile}
	src.Clusters["elsewhere"] = &clientcmdapi.Cluster{Server: "https://elsewhere.invalid:6443"}
	src.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: mgmt.Config.CertData, ClientKeyData: mgmt.Config.KeyData}
	src.AuthInfos["other"] = &clientcmdapi.AuthInfo{Token: otherToken, Username: "other", Password: "other-password"}
	src.Contexts["management-admin"] = &clientcmdapi.Context{Cluster: "mgmt", AuthInfo: "admin", Namespace: "kube-system"}
	src.Contexts["other"] = &clientcmdapi.Context{Cluster: "elsewhere", AuthInfo: "other"}
	src.CurrentContext = "other"
	srcPath := filepath.Join(dir, "admin-kubeconfig")
	if err := clientcmd.WriteToFile(*src, srcPath); err != nil {
		t.Fatal(err)
	}

	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "scripts", "region-kubeconfig.sh")
	runScript := func(args ...string) (stdout, stderr string, err error) {
		cmd := exec.Command(script, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+srcPath, "REGIONSYNC_CACHE="+filepath.Join(dir, "cache"))
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err = cmd.Run()
		return out.String(), errOut.String(), err
	}

	out, stderr, err := runScript("us-east-1", "--context", "management-admin", "--duration", "2h")
	if err != nil {
		t.Fatalf("region-kubeconfig.sh: %v\n%s", err, stderr)
	}
	t.Logf("stderr: %s", stderr)
	for _, secret := range []string{otherToken, "other-password", string(mgmt.Config.KeyData), base64.StdEncoding.EncodeToString(mgmt.Config.KeyData),
		string(mgmt.Config.CertData), base64.StdEncoding.EncodeToString(mgmt.Config.CertData), "elsewhere", "kube-system"} {
		if strings.Contains(out, secret) {
			t.Errorf("the output contains %.40q from the caller's kubeconfig", secret)
		}
	}
	kc, err := clientcmd.Load([]byte(out))
	if err != nil {
		t.Fatalf("output is no kubeconfig: %v\n%s", err, out)
	}
	if len(kc.AuthInfos) != 1 || len(kc.Clusters) != 1 || len(kc.Contexts) != 1 {
		t.Fatalf("want one user, cluster and context; got %d, %d, %d", len(kc.AuthInfos), len(kc.Clusters), len(kc.Contexts))
	}
	var user *clientcmdapi.AuthInfo
	for name, u := range kc.AuthInfos {
		if name != "region-us-east-1" {
			t.Errorf("user named %q", name)
		}
		user = u
	}
	if user.Token == "" || user.TokenFile != "" || len(user.ClientCertificateData) > 0 || user.ClientCertificate != "" ||
		len(user.ClientKeyData) > 0 || user.ClientKey != "" || user.Username != "" || user.Password != "" ||
		user.Exec != nil || user.AuthProvider != nil || user.Impersonate != "" || len(user.ImpersonateGroups) > 0 {
		t.Errorf("the user must hold a token and nothing else: %+v", user)
	}
	for _, c := range kc.Clusters {
		if c.Server != mgmt.Config.Host || !bytes.Equal(c.CertificateAuthorityData, mgmt.Config.CAData) || c.CertificateAuthority != "" || c.InsecureSkipTLSVerify {
			t.Errorf("cluster %+v: want server %s and the CA inline", c, mgmt.Config.Host)
		}
	}
	if ctx := kc.Contexts[kc.CurrentContext]; ctx == nil || ctx.Namespace != "" {
		t.Errorf("current context %q: %+v", kc.CurrentContext, ctx)
	}
	if exp, iat := tokenTimes(t, user.Token); exp-iat != int64((2 * time.Hour).Seconds()) {
		t.Errorf("token valid for %ds, want 2h", exp-iat)
	}

	// The output, used as is, authenticates as the region's ServiceAccount, which has no rights.
	restCfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	regionClient, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	review, err := regionClient.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := review.Status.UserInfo.Username, testenv.ServiceAccountUser(Namespace, "region-us-east-1"); got != want {
		t.Errorf("the token authenticates as %q, want %q", got, want)
	}
	if _, err := regionClient.CoreV1().Secrets("").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing secrets with the region's token: want Forbidden, got %v", err)
	}

	// Failures write nothing to stdout and say why.
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no such region identity": {[]string{"eu-west-9", "--context", "management-admin"}, "ServiceAccount regionsync-system/region-eu-west-9 not found"},
		"region not a DNS label":  {[]string{"US_East", "--context", "management-admin"}, `REGION "US_East"`},
		"unknown context":         {[]string{"us-east-1", "--context", "nope"}, `context "nope" does not exist`},
		"two regions":             {[]string{"us-east-1", "eu-west-1"}, "want exactly one REGION"},
		"too short":               {[]string{"us-east-1", "--context", "management-admin", "--duration", "1m"}, "--duration 1m0s"},
	} {
		t.Run(name, func(t *testing.T) {
			out, stderr, err := runScript(tc.args...)
			if err == nil || out != "" || !strings.Contains(stderr, tc.want) {
				t.Errorf("err %v, stdout %q, stderr %q: want a failure saying %q", err, out, stderr, tc.want)
			}
		})
	}
}

// tokenTimes returns a JWT's exp and iat claims (the token is not verified: the API server did).
func tokenTimes(t *testing.T, token string) (exp, iat int64) {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token is not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims struct{ Exp, Iat int64 }
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	return claims.Exp, claims.Iat
}
