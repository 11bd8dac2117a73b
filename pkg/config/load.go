package config

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Load reads, strictly decodes, defaults and validates the configuration file at path.
func Load(path string) (*AgentConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	cfg, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// Parse strictly decodes YAML (unknown and duplicate fields are errors), applies defaults and
// validates the result. The error names every offending field.
func Parse(data []byte) (*AgentConfig, error) {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	cfg := &AgentConfig{}
	strict, err := sigsjson.UnmarshalStrict(js, cfg)
	if err != nil {
		if ferr := durationFieldError(js); ferr != nil {
			return nil, ferr
		}
		return nil, fmt.Errorf("decoding: %w", err)
	}
	if len(strict) > 0 {
		return nil, fmt.Errorf("decoding: %w", errors.Join(strict...))
	}
	Default(cfg)
	if err := Validate(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// leaderElectionField, managementField and claimField are the JSON names of
// Config.LeaderElection, Config.Management and ManagementConfig.Claim, used in field paths.
const (
	leaderElectionField = "leaderElection"
	managementField     = "management"
	claimField          = "claim"
	// credentialRenewalField is ManagementConfig.CredentialRenewal's.
	credentialRenewalField = "credentialRenewal"
)

// durationFields are the duration-typed fields; encoding/json reports their parse errors without a
// path, so a failed decode is checked against them to name the field.
var durationFields = [][]string{
	{"resyncPeriod"},
	{"telemetry", "heartbeatInterval"},
	{leaderElectionField, "leaseDuration"},
	{leaderElectionField, "renewDeadline"},
	{leaderElectionField, "retryPeriod"},
	{"deletionBudget", "window"},
	{managementField, claimField, "leaseDuration"},
	{managementField, claimField, "renewDeadline"},
	{managementField, claimField, "retryPeriod"},
	{managementField, credentialRenewalField, "lifetime"},
	{managementField, credentialRenewalField, "renewBefore"},
}

func durationFieldError(js []byte) error {
	var doc map[string]any
	if json.Unmarshal(js, &doc) != nil {
		return nil
	}
	for _, path := range durationFields {
		var v any = doc
		for _, k := range path {
			m, ok := v.(map[string]any)
			if !ok {
				v = nil
				break
			}
			v = m[k]
		}
		if v == nil {
			continue
		}
		fp := field.NewPath(path[0], path[1:]...)
		s, ok := v.(string)
		if !ok {
			return field.Invalid(fp, v, "must be a duration string such as 15s")
		}
		if _, err := time.ParseDuration(s); err != nil {
			return field.Invalid(fp, s, "must be a duration such as 15s or 2m")
		}
	}
	return nil
}

// Default fills every optional field that is unset.
func Default(c *AgentConfig) {
	if c.AnnotationDomain == "" {
		c.AnnotationDomain = DefaultAnnotationDomain
	}
	if c.Management.Namespace == "" {
		c.Management.Namespace = DefaultManagementNamespace
	}
	for i := range c.Resources {
		r := &c.Resources[i]
		if r.Strategy == "" {
			r.Strategy = StrategyReplace
		}
		if r.Adoption == "" {
			r.Adoption = AdoptionRefuse
		}
		if r.DeletePropagation == "" {
			r.DeletePropagation = metav1.DeletePropagationForeground
		}
		if r.Concurrency == 0 {
			r.Concurrency = DefaultConcurrency
		}
	}
	le := &c.LeaderElection
	if le.Enabled == nil {
		le.Enabled = ptr.To(true)
	}
	if le.Namespace == "" {
		le.Namespace = DefaultLeaderNamespace
	}
	defaultDuration(&le.LeaseDuration, DefaultLeaseDuration)
	defaultDuration(&le.RenewDeadline, DefaultRenewDeadline)
	defaultDuration(&le.RetryPeriod, DefaultRetryPeriod)
	if cr := &c.Management.CredentialRenewal; cr.Enabled {
		cr.SecretName = cmp.Or(cr.SecretName, DefaultCredentialSecret)
		cr.SecretNamespace = cmp.Or(cr.SecretNamespace, le.Namespace)
		cr.SecretKey = cmp.Or(cr.SecretKey, DefaultCredentialSecretKey)
	}
	cl := &c.Management.Claim
	defaultDuration(&cl.LeaseDuration, DefaultClaimLeaseDuration)
	defaultDuration(&cl.RenewDeadline, DefaultClaimRenewDeadline)
	defaultDuration(&cl.RetryPeriod, DefaultClaimRetryPeriod)
	if c.Management.StartJitter == nil {
		c.Management.StartJitter = &metav1.Duration{Duration: DefaultStartJitter}
	}
	if c.DeletionBudget.MaxFraction == nil {
		c.DeletionBudget.MaxFraction = ptr.To(DefaultDeletionMaxFraction)
	}
	if c.DeletionBudget.MinObjects == nil {
		c.DeletionBudget.MinObjects = ptr.To(DefaultDeletionMinObjects)
	}
	defaultDuration(&c.DeletionBudget.Window, DefaultDeletionWindow)
	defaultDuration(&c.ResyncPeriod, DefaultResyncPeriod)
	if c.Telemetry.MetricsAddr == "" {
		c.Telemetry.MetricsAddr = DefaultMetricsAddr
	}
	if c.Telemetry.HealthAddr == "" {
		c.Telemetry.HealthAddr = DefaultHealthAddr
	}
	if c.Telemetry.Tracing.SamplingRatio == nil {
		c.Telemetry.Tracing.SamplingRatio = ptr.To(DefaultSamplingRatio)
	}
}

func defaultDuration(d *metav1.Duration, v time.Duration) {
	if d.Duration == 0 {
		d.Duration = v
	}
}

// Characters allowed in the pieces of a mapped name (namespaces are DNS labels, object names
// DNS subdomains); the whole mapped name is validated again when an object is mapped.
var (
	labelPiece     = regexp.MustCompile(`^[a-z0-9-]*$`)
	subdomainPiece = regexp.MustCompile(`^[a-z0-9.-]*$`)
	kindName       = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	versionName    = regexp.MustCompile(`^v[0-9]+((alpha|beta)[0-9]+)?$`)
)

// Validate checks a defaulted configuration and returns every problem, each naming its field
// (for example "shard.remoteResourceSuffix: Invalid value: ...").
func Validate(c *AgentConfig) error {
	var errs field.ErrorList
	if c.APIVersion != APIVersion {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), c.APIVersion, "must be "+APIVersion))
	}
	if c.Kind != Kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), c.Kind, "must be "+Kind))
	}
	errs = append(errs, ValidateDNSLabel(field.NewPath("region"), c.Region)...)
	errs = append(errs, ValidateAnnotationDomain(field.NewPath("annotationDomain"), c.AnnotationDomain)...)
	errs = append(errs, validateManagement(field.NewPath(managementField), &c.Management)...)
	errs = append(errs, ValidateShard(field.NewPath("shard"), &c.Shard)...)
	errs = append(errs, ValidateResources(field.NewPath("resources"), c.Resources)...)
	errs = append(errs, validateLeaderElection(field.NewPath(leaderElectionField), &c.LeaderElection)...)
	// Validate reads a defaulted configuration; one that skipped Default is told so, field by
	// field, instead of crashing.
	b := c.DeletionBudget
	errs = append(errs, ValidateDeletionBudget(field.NewPath("deletionBudget"), ptr.Deref(b.MaxFraction, -1), ptr.Deref(b.MinObjects, -1), b.Window.Duration)...)
	errs = append(errs, ValidateResyncPeriod(field.NewPath("resyncPeriod"), c.ResyncPeriod.Duration)...)
	errs = append(errs, validateTelemetry(field.NewPath("telemetry"), &c.Telemetry)...)
	if len(errs) == 0 {
		return nil
	}
	return &ValidationError{Errors: errs}
}

// ValidationError lists every invalid field of a configuration, one per line.
type ValidationError struct {
	Errors field.ErrorList
}

// Error lists the invalid fields, one per line.
func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		lines[i] = fe.Error()
	}
	if len(lines) == 1 {
		return "invalid field " + lines[0]
	}
	return fmt.Sprintf("%d invalid fields:\n  %s", len(lines), strings.Join(lines, "\n  "))
}

// The rules below are the configuration's, one function each; Validate applies them to a file and
// pkg/regionsync to its Options, each naming the field in its caller's terms (p).

// ValidateDNSLabel requires v to be a DNS label (RFC 1123): a region, a namespace.
func ValidateDNSLabel(p *field.Path, v string) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	for _, m := range validation.IsDNS1123Label(v) {
		errs = append(errs, field.Invalid(p, v, m))
	}
	return errs
}

// ValidateAnnotationDomain requires a DNS subdomain.
func ValidateAnnotationDomain(p *field.Path, v string) field.ErrorList {
	msgs := validation.IsDNS1123Subdomain(v)
	errs := make(field.ErrorList, 0, len(msgs))
	for _, m := range msgs {
		errs = append(errs, field.Invalid(p, v, m))
	}
	return errs
}

// ValidateClusterID accepts empty or the UID of a kube-system namespace.
func ValidateClusterID(p *field.Path, v string) field.ErrorList {
	if v != "" && !clusterIDPattern.MatchString(v) {
		return field.ErrorList{field.Invalid(p, v,
			"must be the UID of the management cluster's kube-system namespace (kubectl get namespace kube-system -o jsonpath='{.metadata.uid}')")}
	}
	return nil
}

// ValidateDeletionBudget checks the deletion budget's limits (p is the budget).
func ValidateDeletionBudget(p *field.Path, maxFraction float64, minObjects int, window time.Duration) field.ErrorList {
	var errs field.ErrorList
	if !(maxFraction > 0 && maxFraction <= 1) {
		errs = append(errs, field.Invalid(p.Child("maxFraction"), maxFraction, "must be greater than 0 and at most 1"))
	}
	if minObjects < 0 {
		errs = append(errs, field.Invalid(p.Child("minObjects"), minObjects, "must not be negative"))
	}
	if window < time.Second {
		errs = append(errs, field.Invalid(p.Child("window"), window.String(), "must be at least 1s"))
	}
	return errs
}

// ValidateResyncPeriod requires at least 10s.
func ValidateResyncPeriod(p *field.Path, d time.Duration) field.ErrorList {
	if d < 10*time.Second {
		return field.ErrorList{field.Invalid(p, d.String(), "must be at least 10s")}
	}
	return nil
}

// ValidateHeartbeatInterval requires 0 (off: the Region status is written only on change) or
// 1s to 10m.
func ValidateHeartbeatInterval(p *field.Path, d time.Duration) field.ErrorList {
	if d != 0 && (d < time.Second || d > 10*time.Minute) {
		return field.ErrorList{field.Invalid(p, d.String(), "must be 0 (off) or between 1s and 10m")}
	}
	return nil
}

// ValidateStartJitter requires 0 (no wait) to 5m.
func ValidateStartJitter(p *field.Path, d time.Duration) field.ErrorList {
	if d < 0 || d > 5*time.Minute {
		return field.ErrorList{field.Invalid(p, d.String(), "must be between 0s (no wait) and 5m")}
	}
	return nil
}

func validateManagement(p *field.Path, m *ManagementConfig) field.ErrorList {
	var errs field.ErrorList
	if m.Kubeconfig == "" {
		errs = append(errs, field.Required(p.Child("kubeconfig"), "the management cluster's kubeconfig file"))
	}
	errs = append(errs, ValidateDNSLabel(p.Child("namespace"), m.Namespace)...)
	if m.QPS < 0 {
		errs = append(errs, field.Invalid(p.Child("qps"), m.QPS, "must not be negative"))
	}
	if m.Burst < 0 {
		errs = append(errs, field.Invalid(p.Child("burst"), m.Burst, "must not be negative"))
	}
	errs = append(errs, ValidateClusterID(p.Child("clusterID"), m.ClusterID)...)
	c := m.Claim
	errs = append(errs, ValidateLeaseTimings(p.Child(claimField), c.LeaseDuration.Duration, c.RenewDeadline.Duration, c.RetryPeriod.Duration)...)
	if m.StartJitter != nil {
		errs = append(errs, ValidateStartJitter(p.Child("startJitter"), m.StartJitter.Duration)...)
	}
	cr, cp := m.CredentialRenewal, p.Child(credentialRenewalField)
	if cr.Enabled {
		return append(errs, ValidateCredentialRenewal(cp, cr.SecretName, cr.SecretNamespace, cr.SecretKey, cr.Lifetime.Duration, cr.RenewBefore.Duration)...)
	}
	if cr != (CredentialRenewalConfig{}) {
		errs = append(errs, field.Forbidden(cp, "renewal is off: set "+cp.Child("enabled").String()+": true, or remove the other fields"))
	}
	return errs
}

// minTokenLifetime is the shortest token the TokenRequest API issues.
const minTokenLifetime = 10 * time.Minute

// ValidateCredentialRenewal checks the renewal of the management credential (p is the renewal):
// the Secret's name, namespace and key, a lifetime of 0 (the token's own) or at least 10m, and a
// margin that leaves the token some life.
func ValidateCredentialRenewal(p *field.Path, secretName, secretNamespace, key string, lifetime, renewBefore time.Duration) field.ErrorList {
	var errs field.ErrorList
	if secretName == "" {
		errs = append(errs, field.Required(p.Child("secretName"), "the Secret holding the management kubeconfig"))
	} else {
		for _, m := range validation.IsDNS1123Subdomain(secretName) {
			errs = append(errs, field.Invalid(p.Child("secretName"), secretName, m))
		}
	}
	errs = append(errs, ValidateDNSLabel(p.Child("secretNamespace"), secretNamespace)...)
	for _, m := range validation.IsConfigMapKey(key) {
		errs = append(errs, field.Invalid(p.Child("secretKey"), key, m))
	}
	if lifetime != 0 && lifetime < minTokenLifetime {
		errs = append(errs, field.Invalid(p.Child("lifetime"), lifetime.String(), "must be at least 10m (the shortest token the API server issues), or 0 for the token's own lifetime"))
	}
	switch {
	case renewBefore < 0:
		errs = append(errs, field.Invalid(p.Child("renewBefore"), renewBefore.String(), "must not be negative"))
	case lifetime != 0 && renewBefore >= lifetime:
		errs = append(errs, field.Invalid(p.Child("renewBefore"), renewBefore.String(), "must be less than lifetime ("+lifetime.String()+")"))
	}
	return errs
}

// clusterIDPattern is a Kubernetes UID (an RFC 4122 UUID).
var clusterIDPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// ValidateShard checks the shard definition: the pieces of mapped names, the selector, the exclusions.
func ValidateShard(p *field.Path, s *ShardConfig) field.ErrorList {
	var errs field.ErrorList
	piece := func(name, v string, re *regexp.Regexp, maxLen int, what string) {
		fp := p.Child(name)
		switch {
		case !re.MatchString(v):
			errs = append(errs, field.Invalid(fp, v, "must consist of "+what))
		case len(v) >= maxLen:
			errs = append(errs, field.TooLong(fp, v, maxLen-1))
		}
	}
	piece("namespacePrefix", s.NamespacePrefix, labelPiece, validation.DNS1123LabelMaxLength, "lower case alphanumeric characters or '-'")
	if strings.HasPrefix(s.NamespacePrefix, "-") {
		errs = append(errs, field.Invalid(p.Child("namespacePrefix"), s.NamespacePrefix, "must start with an alphanumeric character"))
	}
	piece("remoteResourceSuffix", s.RemoteResourceSuffix, subdomainPiece, validation.DNS1123SubdomainMaxLength, "lower case alphanumeric characters, '-' or '.'")
	if strings.HasSuffix(s.RemoteResourceSuffix, "-") || strings.HasSuffix(s.RemoteResourceSuffix, ".") {
		errs = append(errs, field.Invalid(p.Child("remoteResourceSuffix"), s.RemoteResourceSuffix, "must end with an alphanumeric character"))
	}
	for _, f := range []struct{ name, v string }{
		{"remoteNamespaceSuffix", s.RemoteNamespaceSuffix},
		{"localNamespaceSuffix", s.LocalNamespaceSuffix},
	} {
		piece(f.name, f.v, labelPiece, validation.DNS1123LabelMaxLength, "lower case alphanumeric characters or '-'")
		if strings.HasSuffix(f.v, "-") {
			errs = append(errs, field.Invalid(p.Child(f.name), f.v, "must end with an alphanumeric character"))
		}
	}
	if _, err := labels.Parse(s.LabelSelector); err != nil {
		errs = append(errs, field.Invalid(p.Child("labelSelector"), s.LabelSelector, err.Error()))
	}
	seen := sets.New[string]()
	for i, ns := range s.ExcludedNamespaces {
		ep := p.Child("excludedNamespaces").Index(i)
		errs = append(errs, ValidateDNSLabel(ep, ns)...)
		if seen.Has(ns) {
			errs = append(errs, field.Duplicate(ep, ns))
		}
		seen.Insert(ns)
	}
	return errs
}

// ValidateResources checks the kinds to sync (defaulted): at least one, each once, each allowed.
func ValidateResources(p *field.Path, rs []ResourceConfig) field.ErrorList {
	var errs field.ErrorList
	if len(rs) == 0 {
		return field.ErrorList{field.Required(p, "at least one resource kind to sync")}
	}
	seen := sets.New[string]()
	for i, r := range rs {
		rp := p.Index(i)
		if r.Group != "" {
			for _, m := range validation.IsDNS1123Subdomain(r.Group) {
				errs = append(errs, field.Invalid(rp.Child("group"), r.Group, m))
			}
		}
		if !versionName.MatchString(r.Version) {
			errs = append(errs, field.Invalid(rp.Child("version"), r.Version, "must be a Kubernetes API version such as v1 or v1alpha1"))
		}
		if !kindName.MatchString(r.Kind) {
			errs = append(errs, field.Invalid(rp.Child("kind"), r.Kind, "must be a CamelCase kind such as Tenant"))
		} else if isDenied(r.Group, r.Kind) {
			errs = append(errs, field.Forbidden(rp.Child("kind"), r.Kind+" cannot be synced: it is cluster-scoped"))
		} else if IsSecret(r.Group, r.Kind) {
			errs = append(errs, validateSecretResource(rp, r)...)
		} else if IsPrivileged(r.Group, r.Kind) && !r.AllowPrivileged {
			errs = append(errs, field.Forbidden(rp.Child("kind"), fmt.Sprintf("%s grants privileges in the region; set %s: true to sync it",
				strings.TrimSuffix(r.Kind+"."+r.Group, "."), rp.Child("allowPrivileged"))))
		}
		gk := r.Kind + "." + r.Group
		if seen.Has(gk) {
			errs = append(errs, field.Duplicate(rp, gk))
		}
		seen.Insert(gk)
		secrets := sets.New[string]()
		for j, s := range r.Secrets {
			sp := rp.Child("secrets").Index(j)
			for _, m := range validation.IsDNS1123Subdomain(s) {
				errs = append(errs, field.Invalid(sp, s, m))
			}
			if secrets.Has(s) {
				errs = append(errs, field.Duplicate(sp, s))
			}
			secrets.Insert(s)
		}
		if r.Strategy != StrategyReplace && r.Strategy != StrategyApply {
			errs = append(errs, field.NotSupported(rp.Child("strategy"), r.Strategy, []Strategy{StrategyReplace, StrategyApply}))
		}
		if r.Adoption != AdoptionAdopt && r.Adoption != AdoptionRefuse {
			errs = append(errs, field.NotSupported(rp.Child("adoption"), r.Adoption, []AdoptionPolicy{AdoptionAdopt, AdoptionRefuse}))
		}
		switch r.DeletePropagation {
		case metav1.DeletePropagationForeground, metav1.DeletePropagationBackground, metav1.DeletePropagationOrphan:
		default:
			errs = append(errs, field.NotSupported(rp.Child("deletePropagation"), r.DeletePropagation,
				[]metav1.DeletionPropagation{metav1.DeletePropagationForeground, metav1.DeletePropagationBackground, metav1.DeletePropagationOrphan}))
		}
		if r.Concurrency < 1 || r.Concurrency > 256 {
			errs = append(errs, field.Invalid(rp.Child("concurrency"), r.Concurrency, "must be between 1 and 256"))
		}
		errs = append(errs, validateFanOut(rp.Child("fanOut"), r.FanOut)...)
	}
	return errs
}

// validateSecretResource checks the Secret kind: it carries credentials, so it is synced only by
// namespace fan-out (never as an ordinary copy of one management object) and only with
// allowPrivileged (whoever may write a fan-out Secret on management then holds its credentials in
// every namespace it reaches); it uploads no Secrets of its own.
func validateSecretResource(rp *field.Path, r ResourceConfig) field.ErrorList {
	var errs field.ErrorList
	if !r.FanOutEnabled() {
		errs = append(errs, field.Forbidden(rp.Child("kind"), fmt.Sprintf("Secret is synced only by namespace fan-out, never as an ordinary copy; set %s: true",
			rp.Child("fanOut", "enabled"))))
	}
	if !r.AllowPrivileged {
		errs = append(errs, field.Forbidden(rp.Child("allowPrivileged"), fmt.Sprintf(
			"a Secret fanned out grants its credentials in every namespace it reaches; set %s: true to sync it", rp.Child("allowPrivileged"))))
	}
	if len(r.Secrets) > 0 {
		errs = append(errs, field.Forbidden(rp.Child("secrets"), "the Secret kind uploads no Secrets"))
	}
	return errs
}

// validateFanOut checks a kind's fan-out configuration: wide source namespaces are namespace
// names, each once, and only where fan-out is enabled.
func validateFanOut(p *field.Path, f *FanOutConfig) field.ErrorList {
	if f == nil {
		return nil
	}
	var errs field.ErrorList
	if !f.Enabled && len(f.WideSourceNamespaces) > 0 {
		errs = append(errs, field.Invalid(p.Child("wideSourceNamespaces"), f.WideSourceNamespaces, "set only with "+p.Child("enabled").String()+": true"))
	}
	seen := sets.New[string]()
	for i, ns := range f.WideSourceNamespaces {
		np := p.Child("wideSourceNamespaces").Index(i)
		errs = append(errs, ValidateDNSLabel(np, ns)...)
		if seen.Has(ns) {
			errs = append(errs, field.Duplicate(np, ns))
		}
		seen.Insert(ns)
	}
	return errs
}

func validateLeaderElection(p *field.Path, le *LeaderElectionConfig) field.ErrorList {
	errs := ValidateDNSLabel(p.Child("namespace"), le.Namespace)
	return append(errs, ValidateLeaseTimings(p, le.LeaseDuration.Duration, le.RenewDeadline.Duration, le.RetryPeriod.Duration)...)
}

// ValidateLeaseTimings checks what client-go's leader election requires of the three durations
// (p holds leaseDuration, renewDeadline and retryPeriod).
func ValidateLeaseTimings(p *field.Path, lease, renew, retry time.Duration) field.ErrorList {
	var errs field.ErrorList
	if lease <= renew {
		errs = append(errs, field.Invalid(p.Child("leaseDuration"), lease.String(), "must be greater than "+p.Child("renewDeadline").String()))
	}
	// client-go requires renewDeadline > 1.2 × retryPeriod (its jitter factor).
	if float64(renew) <= 1.2*float64(retry) {
		errs = append(errs, field.Invalid(p.Child("renewDeadline"), renew.String(), "must be greater than 1.2 × "+p.Child("retryPeriod").String()))
	}
	if retry <= 0 {
		errs = append(errs, field.Invalid(p.Child("retryPeriod"), retry.String(), "must be positive"))
	}
	return errs
}

func validateTelemetry(p *field.Path, t *TelemetryConfig) field.ErrorList {
	var errs field.ErrorList
	for _, a := range []struct{ name, v string }{{"metricsAddr", t.MetricsAddr}, {"healthAddr", t.HealthAddr}} {
		if a.v == "0" { // disabled
			continue
		}
		if err := validateListenAddr(a.v); err != nil {
			errs = append(errs, field.Invalid(p.Child(a.name), a.v, err.Error()))
		}
	}
	errs = append(errs, ValidateHeartbeatInterval(p.Child("heartbeatInterval"), t.HeartbeatInterval.Duration)...)
	tp := p.Child("tracing")
	if r := ptr.Deref(t.Tracing.SamplingRatio, -1); r < 0 || r > 1 {
		errs = append(errs, field.Invalid(tp.Child("samplingRatio"), r, "must be between 0 and 1"))
	}
	if e := t.Tracing.Endpoint; e != "" {
		if err := validateEndpoint(e); err != nil {
			errs = append(errs, field.Invalid(tp.Child("endpoint"), e, err.Error()))
		}
	}
	return errs
}

func validateListenAddr(a string) error {
	_, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("must be host:port: %w", err)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return errors.New("port must be a number between 0 and 65535")
	}
	return nil
}

// validateEndpoint accepts an OTLP endpoint as host:port or an http(s) URL.
func validateEndpoint(e string) error {
	if strings.Contains(e, "://") {
		u, err := url.Parse(e)
		if err != nil {
			return err
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return errors.New("URL scheme must be http or https")
		}
		if u.Host == "" {
			return errors.New("URL must have a host")
		}
		return nil
	}
	return validateListenAddr(e)
}
