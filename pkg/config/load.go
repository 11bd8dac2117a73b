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

// Default fills the unset optional fields that only the file has: leader election, the start
// jitter (5s for the binary, where the library waits none), the metrics and health addresses and
// the trace sampling ratio. Every field the file shares with regionsync.Options is left as written
// and defaulted by the library, once (Options.Validate reports those defaults' checks, New applies
// them).
func Default(c *AgentConfig) {
	le := &c.LeaderElection
	if le.Enabled == nil {
		le.Enabled = ptr.To(true)
	}
	le.Namespace = cmp.Or(le.Namespace, fleetspec.DefaultLeaderNamespace)
	defaultDuration(&le.LeaseDuration, fleetspec.DefaultLeaseDuration)
	defaultDuration(&le.RenewDeadline, fleetspec.DefaultRenewDeadline)
	defaultDuration(&le.RetryPeriod, fleetspec.DefaultRetryPeriod)
	if c.Management.StartJitter == nil {
		c.Management.StartJitter = &metav1.Duration{Duration: fleetspec.DefaultStartJitter}
	}
	c.Telemetry.MetricsAddr = cmp.Or(c.Telemetry.MetricsAddr, fleetspec.DefaultMetricsAddr)
	c.Telemetry.HealthAddr = cmp.Or(c.Telemetry.HealthAddr, fleetspec.DefaultHealthAddr)
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
// (for example "shard.remoteResourceSuffix: Invalid value: ..."). The fields only the file has are
// checked here; every other field is checked by the library (regionsync.Options.Validate on the
// file's Options), whose errors are given the file's field names (fileFieldNames).
func Validate(c *AgentConfig) error {
	var errs field.ErrorList
	if c.APIVersion != APIVersion {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), c.APIVersion, "must be "+APIVersion))
	}
	if c.Kind != Kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), c.Kind, "must be "+Kind))
	}
	errs = append(errs, validateManagement(field.NewPath(managementField), &c.Management)...)
	le := c.LeaderElection
	errs = append(errs, fleetspec.ValidateLeaseTimings(field.NewPath(leaderElectionField), le.LeaseDuration.Duration, le.RenewDeadline.Duration, le.RetryPeriod.Duration)...)
	errs = append(errs, validateTelemetry(field.NewPath("telemetry"), &c.Telemetry)...)
	var lib *fleetspec.ValidationError
	if err := c.Options(nil).Validate(); errors.As(err, &lib) {
		errs = append(errs, inFileTerms(lib.Errors)...)
	} else if err != nil {
		return err
	}
	if len(errs) == 0 {
		return nil
	}
	return &ValidationError{Errors: errs}
}

// fileFieldNames are the Options paths the file names differently, with the file's name: the
// claim's timings sit under management, the claim's fleet namespace is the leader-election
// namespace, and the heartbeat interval is a telemetry setting. Every other Options path is the
// file's own.
var fileFieldNames = []struct{ options, file string }{
	{"claim.fleetNamespace", leaderElectionField + ".namespace"},
	{"claim", managementField + "." + claimField},
	{"heartbeatInterval", "telemetry.heartbeatInterval"},
}

// inFileTerms renames the library's field paths, in each error's field and in its detail (a lease
// timing names its sibling: "must be greater than claim.renewDeadline"), to the file's.
func inFileTerms(errs field.ErrorList) field.ErrorList {
	out := make(field.ErrorList, 0, len(errs))
	for _, e := range errs {
		fe := *e
		fe.Field = fileName(fe.Field)
		fe.Detail = optionsPathInText.ReplaceAllStringFunc(fe.Detail, fileName)
		out = append(out, &fe)
	}
	return out
}

// optionsPathInText finds, in an error's detail, a path fileFieldNames renames.
var optionsPathInText = regexp.MustCompile(`\b(claim\.[A-Za-z]+|heartbeatInterval)\b`)

// fileName is the file's name of the Options path p.
func fileName(p string) string {
	for _, n := range fileFieldNames {
		if p == n.options || strings.HasPrefix(p, n.options+".") {
			return n.file + strings.TrimPrefix(p, n.options)
		}
	}
	return p
}

func validateManagement(p *field.Path, m *ManagementConfig) field.ErrorList {
	var errs field.ErrorList
	if m.Kubeconfig == "" {
		errs = append(errs, field.Required(p.Child("kubeconfig"), "the management cluster's kubeconfig file"))
	}
	if m.QPS < 0 {
		errs = append(errs, field.Invalid(p.Child("qps"), m.QPS, "must not be negative"))
	}
	if m.Burst < 0 {
		errs = append(errs, field.Invalid(p.Child("burst"), m.Burst, "must not be negative"))
	}
	// With renewal on, its fields are the library's (Options.Management.CredentialRenewal).
	cr, cp := m.CredentialRenewal, p.Child(credentialRenewalField)
	if !cr.Enabled && cr != (CredentialRenewalConfig{}) {
		errs = append(errs, field.Forbidden(cp, "renewal is off: set "+cp.Child("enabled").String()+": true, or remove the other fields"))
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
