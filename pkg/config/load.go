package config

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/regionsync/regionsync/internal/fleetspec"
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
		c.AnnotationDomain = fleetspec.DefaultAnnotationDomain
	}
	if c.Management.Namespace == "" {
		c.Management.Namespace = fleetspec.DefaultManagementNamespace
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
			r.Concurrency = fleetspec.DefaultConcurrency
		}
	}
	le := &c.LeaderElection
	if le.Enabled == nil {
		le.Enabled = ptr.To(true)
	}
	if le.Namespace == "" {
		le.Namespace = fleetspec.DefaultLeaderNamespace
	}
	defaultDuration(&le.LeaseDuration, fleetspec.DefaultLeaseDuration)
	defaultDuration(&le.RenewDeadline, fleetspec.DefaultRenewDeadline)
	defaultDuration(&le.RetryPeriod, fleetspec.DefaultRetryPeriod)
	if cr := &c.Management.CredentialRenewal; cr.Enabled {
		cr.SecretName = cmp.Or(cr.SecretName, fleetspec.DefaultCredentialSecret)
		cr.SecretNamespace = cmp.Or(cr.SecretNamespace, le.Namespace)
		cr.SecretKey = cmp.Or(cr.SecretKey, fleetspec.DefaultCredentialSecretKey)
	}
	cl := &c.Management.Claim
	defaultDuration(&cl.LeaseDuration, fleetspec.DefaultClaimLeaseDuration)
	defaultDuration(&cl.RenewDeadline, fleetspec.DefaultClaimRenewDeadline)
	defaultDuration(&cl.RetryPeriod, fleetspec.DefaultClaimRetryPeriod)
	if c.Management.StartJitter == nil {
		c.Management.StartJitter = &metav1.Duration{Duration: fleetspec.DefaultStartJitter}
	}
	if c.DeletionBudget.MaxFraction == nil {
		c.DeletionBudget.MaxFraction = ptr.To(fleetspec.DefaultDeletionMaxFraction)
	}
	if c.DeletionBudget.MinObjects == nil {
		c.DeletionBudget.MinObjects = ptr.To(fleetspec.DefaultDeletionMinObjects)
	}
	defaultDuration(&c.DeletionBudget.Window, fleetspec.DefaultDeletionWindow)
	defaultDuration(&c.ResyncPeriod, fleetspec.DefaultResyncPeriod)
	if c.Telemetry.MetricsAddr == "" {
		c.Telemetry.MetricsAddr = fleetspec.DefaultMetricsAddr
	}
	if c.Telemetry.HealthAddr == "" {
		c.Telemetry.HealthAddr = fleetspec.DefaultHealthAddr
	}
	if c.Telemetry.Tracing.SamplingRatio == nil {
		c.Telemetry.Tracing.SamplingRatio = ptr.To(fleetspec.DefaultSamplingRatio)
	}
}

func defaultDuration(d *metav1.Duration, v time.Duration) {
	if d.Duration == 0 {
		d.Duration = v
	}
}

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
	errs = append(errs, fleetspec.ValidateDNSLabel(field.NewPath("region"), c.Region)...)
	errs = append(errs, fleetspec.ValidateAnnotationDomain(field.NewPath("annotationDomain"), c.AnnotationDomain)...)
	errs = append(errs, validateManagement(field.NewPath(managementField), &c.Management)...)
	errs = append(errs, fleetspec.ValidateShard(field.NewPath("shard"), &c.Shard)...)
	errs = append(errs, fleetspec.ValidateResources(field.NewPath("resources"), c.Resources)...)
	errs = append(errs, validateLeaderElection(field.NewPath(leaderElectionField), &c.LeaderElection)...)
	// Validate reads a defaulted configuration; one that skipped Default is told so, field by
	// field, instead of crashing.
	b := c.DeletionBudget
	errs = append(errs, fleetspec.ValidateDeletionBudget(field.NewPath("deletionBudget"), ptr.Deref(b.MaxFraction, -1), ptr.Deref(b.MinObjects, -1), b.Window.Duration)...)
	errs = append(errs, fleetspec.ValidateResyncPeriod(field.NewPath("resyncPeriod"), c.ResyncPeriod.Duration)...)
	errs = append(errs, validateTelemetry(field.NewPath("telemetry"), &c.Telemetry)...)
	if len(errs) == 0 {
		return nil
	}
	return &ValidationError{Errors: errs}
}

func validateManagement(p *field.Path, m *ManagementConfig) field.ErrorList {
	var errs field.ErrorList
	if m.Kubeconfig == "" {
		errs = append(errs, field.Required(p.Child("kubeconfig"), "the management cluster's kubeconfig file"))
	}
	errs = append(errs, fleetspec.ValidateDNSLabel(p.Child("namespace"), m.Namespace)...)
	if m.QPS < 0 {
		errs = append(errs, field.Invalid(p.Child("qps"), m.QPS, "must not be negative"))
	}
	if m.Burst < 0 {
		errs = append(errs, field.Invalid(p.Child("burst"), m.Burst, "must not be negative"))
	}
	errs = append(errs, fleetspec.ValidateClusterID(p.Child("clusterID"), m.ClusterID)...)
	c := m.Claim
	errs = append(errs, fleetspec.ValidateLeaseTimings(p.Child(claimField), c.LeaseDuration.Duration, c.RenewDeadline.Duration, c.RetryPeriod.Duration)...)
	if m.StartJitter != nil {
		errs = append(errs, fleetspec.ValidateStartJitter(p.Child("startJitter"), m.StartJitter.Duration)...)
	}
	cr, cp := m.CredentialRenewal, p.Child(credentialRenewalField)
	if cr.Enabled {
		return append(errs, fleetspec.ValidateCredentialRenewal(cp, cr.SecretName, cr.SecretNamespace, cr.SecretKey, cr.Lifetime.Duration, cr.RenewBefore.Duration)...)
	}
	if cr != (CredentialRenewalConfig{}) {
		errs = append(errs, field.Forbidden(cp, "renewal is off: set "+cp.Child("enabled").String()+": true, or remove the other fields"))
	}
	return errs
}

func validateLeaderElection(p *field.Path, le *LeaderElectionConfig) field.ErrorList {
	errs := fleetspec.ValidateDNSLabel(p.Child("namespace"), le.Namespace)
	return append(errs, fleetspec.ValidateLeaseTimings(p, le.LeaseDuration.Duration, le.RenewDeadline.Duration, le.RetryPeriod.Duration)...)
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
	errs = append(errs, fleetspec.ValidateHeartbeatInterval(p.Child("heartbeatInterval"), t.HeartbeatInterval.Duration)...)
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
