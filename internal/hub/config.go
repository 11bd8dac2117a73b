package hub

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/regionsync/regionsync/internal/fleetspec"
)

// ConfigKind is the kind of the hub's configuration file (apiVersion fleetspec.APIVersion).
const ConfigKind = "HubConfig"

// Defaults of the hub's configuration.
const (
	// DefaultLeaseDuration, DefaultRenewDeadline and DefaultRetryPeriod time the hub replicas'
	// leader election (client-go's usual values).
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
	// DefaultLivenessGrace is added to a shard Lease's duration before its region is judged
	// silent (Ready=Unknown, HeartbeatMissed).
	DefaultLivenessGrace = 20 * time.Second
	// DefaultShrinkWindow is the shrink guard's window.
	DefaultShrinkWindow = 10 * time.Minute
	// DefaultConcurrency is the number of Distributions reconciled at once.
	DefaultConcurrency = 4
	// StatusInterval is the shortest time between two status writes of one Distribution.
	StatusInterval = 5 * time.Second
)

// Config is the hub's configuration file (`hub --config FILE`), strictly decoded like the agent's.
type Config struct {
	metav1.TypeMeta `json:",inline"`
	// AnnotationDomain is the fleet's annotation domain D (default regionsync.dev): the label
	// D/distribution, the hub's finalizer D/hub, and the only domain of the regions it places in.
	AnnotationDomain string `json:"annotationDomain,omitempty"`
	// Namespace holds the regions' shard Leases on management (default regionsync-system).
	Namespace string `json:"namespace,omitempty"`
	// LeaderElection is the election among the hub's replicas (a Lease "regionsync-hub" in
	// leaderElection.namespace; default regionsync-system, 15s/10s/2s).
	LeaderElection fleetspec.LeaderElection `json:"leaderElection,omitempty"`
	// Liveness times the region liveness judgement.
	Liveness LivenessConfig `json:"liveness,omitempty"`
	// ShrinkGuard bounds removals of per-region objects.
	ShrinkGuard ShrinkGuardConfig `json:"shrinkGuard,omitempty"`
	// Concurrency is how many Distributions are reconciled at once (default 4).
	Concurrency int `json:"concurrency,omitempty"`
	// DefaultServiceAccountName is the ServiceAccount, of each Distribution's namespace, that the
	// hub writes as for a Distribution naming none in spec.serviceAccountName (no default:
	// such a Distribution places nothing, Applied=False naming the field).
	DefaultServiceAccountName string `json:"defaultServiceAccountName,omitempty"`
	// AllowSecrets lets Distributions place Secrets, as spec.template or spec.source (default
	// false: such a Distribution places nothing, Applied=False naming this field). The hub then
	// needs read access to Secrets (deploy/kustomize/hub/rbac.yaml), and each region whose
	// Region kinds include Secret receives the Secrets placed in the namespaces of its shard.
	AllowSecrets bool `json:"allowSecrets,omitempty"`
	// Telemetry configures metrics, health probes and tracing.
	Telemetry TelemetryConfig `json:"telemetry,omitempty"`
	// ClusterProfiles publishes one ClusterProfile per Region (off unless it names a namespace).
	ClusterProfiles ClusterProfilesConfig `json:"clusterProfiles,omitempty"`
}

// LivenessConfig times the region liveness judgement.
type LivenessConfig struct {
	// Grace is added to a shard Lease's duration (default 20s): a region whose Lease the hub has
	// not seen renewed for that long is Ready=Unknown (HeartbeatMissed).
	Grace metav1.Duration `json:"grace,omitempty"`
}

// ShrinkGuardConfig configures the shrink guard.
type ShrinkGuardConfig struct {
	// Window over which a Distribution's removals are counted (default 10m): more than
	// max(1, 10 %) of its per-region objects within it are held.
	Window metav1.Duration `json:"window,omitempty"`
}

// TelemetryConfig configures the hub's HTTP endpoints and tracing.
type TelemetryConfig struct {
	// MetricsAddr serves /metrics ("0" disables; default :8080).
	MetricsAddr string `json:"metricsAddr,omitempty"`
	// SecureMetrics serves metrics over HTTPS with Kubernetes authentication and authorization.
	SecureMetrics bool `json:"secureMetrics,omitempty"`
	// HealthAddr serves /healthz and /readyz ("0" disables; default :8081).
	HealthAddr string `json:"healthAddr,omitempty"`
	// Tracing configures the OTLP trace exporter (as the agent's).
	Tracing fleetspec.Tracing `json:"tracing,omitempty"`
}

// LoadConfig reads, strictly decodes (unknown and duplicate fields are errors), defaults and
// validates the hub's configuration file.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// ParseConfig strictly decodes, defaults and validates a configuration; the error names every
// offending field.
func ParseConfig(data []byte) (*Config, error) {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	c := &Config{}
	strict, err := sigsjson.UnmarshalStrict(js, c)
	if err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	if len(strict) > 0 {
		return nil, fmt.Errorf("decoding: %w", errors.Join(strict...))
	}
	c.Default()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Default fills the unset optional fields only the file has: leader election and telemetry. The
// fields the file shares with Options are left as written for Options.WithDefaults, once.
func (c *Config) Default() {
	le := &c.LeaderElection
	if le.Enabled == nil {
		le.Enabled = ptr.To(true)
	}
	le.Namespace = cmp.Or(le.Namespace, fleetspec.DefaultLeaderNamespace)
	le.LeaseDuration.Duration = cmp.Or(le.LeaseDuration.Duration, DefaultLeaseDuration)
	le.RenewDeadline.Duration = cmp.Or(le.RenewDeadline.Duration, DefaultRenewDeadline)
	le.RetryPeriod.Duration = cmp.Or(le.RetryPeriod.Duration, DefaultRetryPeriod)
	c.Telemetry.MetricsAddr = cmp.Or(c.Telemetry.MetricsAddr, fleetspec.DefaultMetricsAddr)
	c.Telemetry.HealthAddr = cmp.Or(c.Telemetry.HealthAddr, fleetspec.DefaultHealthAddr)
	if c.Telemetry.Tracing.SamplingRatio == nil {
		c.Telemetry.Tracing.SamplingRatio = ptr.To(fleetspec.DefaultSamplingRatio)
	}
}

// optionsFieldInFile names the Options fields the file calls differently.
var optionsFieldInFile = map[string]string{"livenessGrace": "liveness.grace", "shrinkWindow": "shrinkGuard.window"}

// Validate checks a defaulted configuration, naming every invalid field: the file's own fields
// here, the ones it shares with Options by Options.Validate (the same rules as for any caller),
// named as the file names them.
func (c *Config) Validate() error {
	var errs field.ErrorList
	if c.APIVersion != fleetspec.APIVersion {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), c.APIVersion, "must be "+fleetspec.APIVersion))
	}
	if c.Kind != ConfigKind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), c.Kind, "must be "+ConfigKind))
	}
	le, lp := c.LeaderElection, field.NewPath("leaderElection")
	errs = append(errs, fleetspec.ValidateDNSLabel(lp.Child("namespace"), le.Namespace)...)
	errs = append(errs, fleetspec.ValidateLeaseTimings(lp, le.LeaseDuration.Duration, le.RenewDeadline.Duration, le.RetryPeriod.Duration)...)
	var lib *fleetspec.ValidationError
	if errors.As(OptionsFromConfig(c).Validate(), &lib) {
		for _, e := range lib.Errors {
			fe := *e
			fe.Field = cmp.Or(optionsFieldInFile[fe.Field], fe.Field)
			errs = append(errs, &fe)
		}
	}
	errs = append(errs, c.ClusterProfiles.Validate(field.NewPath("clusterProfiles"))...)
	tp := field.NewPath("telemetry")
	for _, a := range []struct{ name, v string }{{"metricsAddr", c.Telemetry.MetricsAddr}, {"healthAddr", c.Telemetry.HealthAddr}} {
		if a.v == "0" {
			continue
		}
		if _, port, err := net.SplitHostPort(a.v); err != nil {
			errs = append(errs, field.Invalid(tp.Child(a.name), a.v, "must be host:port"))
		} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			errs = append(errs, field.Invalid(tp.Child(a.name), a.v, "port must be a number between 0 and 65535"))
		}
	}
	if r := ptr.Deref(c.Telemetry.Tracing.SamplingRatio, -1); r < 0 || r > 1 {
		errs = append(errs, field.Invalid(tp.Child("tracing", "samplingRatio"), r, "must be between 0 and 1"))
	}
	if len(errs) == 0 {
		return nil
	}
	return &fleetspec.ValidationError{Errors: errs}
}

// MetricsServerOptions is the hub's metrics endpoint as its configuration says: with
// SecureMetrics, HTTPS where each scraper's token is reviewed and its right to GET /metrics
// checked (the hub's ClusterRole may create TokenReviews and SubjectAccessReviews; scrapers are
// bound to regionsync-metrics-reader).
func MetricsServerOptions(t TelemetryConfig) metricsserver.Options {
	o := metricsserver.Options{BindAddress: t.MetricsAddr}
	if t.SecureMetrics {
		o.SecureServing = true
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return o
}
