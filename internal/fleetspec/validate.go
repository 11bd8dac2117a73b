package fleetspec

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Characters allowed in the pieces of a mapped name (namespaces are DNS labels, object names
// DNS subdomains); the whole mapped name is validated again when an object is mapped.
var (
	labelPiece     = regexp.MustCompile(`^[a-z0-9-]*$`)
	subdomainPiece = regexp.MustCompile(`^[a-z0-9.-]*$`)
	kindName       = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	versionName    = regexp.MustCompile(`^v[0-9]+((alpha|beta)[0-9]+)?$`)
)

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

// The rules below are the fleet's, one function each: pkg/config applies them to a file, the hub
// to its own, pkg/regionsync to its Options, each naming the field in its caller's terms (p).

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
func ValidateShard(p *field.Path, s *Shard) field.ErrorList {
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
func ValidateResources(p *field.Path, rs []Resource) field.ErrorList {
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
		} else if IsDenied(r.Group, r.Kind) {
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
func validateSecretResource(rp *field.Path, r Resource) field.ErrorList {
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
func validateFanOut(p *field.Path, f *FanOut) field.ErrorList {
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
