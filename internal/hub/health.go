package hub

import (
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
)

// HealthRule is a Distribution's spec.health, compiled: CEL programs over the variable object
// (docs/design/hub.md#hub-and-distribution).
type HealthRule struct {
	current, failed cel.Program
	// invalid is why the rule does not compile: it judges every copy Unknown.
	invalid error
}

// healthEnv is the CEL environment of health rules: Kubernetes' CEL library (the one
// ValidatingAdmissionPolicy and CRD validation rules offer) and the variable object.
var healthEnv = sync.OnceValues(func() (*cel.Env, error) {
	version := environment.DefaultCompatibilityVersion()
	set, err := environment.MustBaseEnvSet(version).Extend(environment.VersionedOptions{
		IntroducedVersion: version,
		EnvOptions:        []cel.EnvOption{cel.Variable("object", cel.DynType)},
	})
	if err != nil {
		return nil, err
	}
	return set.Env(environment.NewExpressions)
})

// CompileHealthRule compiles spec.health; no rule (nil, nil) means kstatus judges. The error
// names the field that does not compile.
func CompileHealthRule(spec *regionsyncv1alpha1.HealthRule) (*HealthRule, error) {
	if spec == nil {
		return nil, nil
	}
	env, err := healthEnv()
	if err != nil {
		return nil, fmt.Errorf("the CEL environment of spec.health: %w", err)
	}
	compile := func(field, expr string) (cel.Program, error) {
		if expr == "" {
			return nil, nil
		}
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			return nil, fmt.Errorf("%s does not compile: %w", field, iss.Err())
		}
		if t := ast.OutputType(); !t.IsAssignableType(cel.BoolType) && t != cel.DynType {
			return nil, fmt.Errorf("%s must be a bool expression, is of type %s", field, t)
		}
		p, err := env.Program(ast, cel.CostLimit(celconfig.PerCallLimit))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		return p, nil
	}
	if spec.Current == "" {
		return nil, fmt.Errorf("spec.health.current is required")
	}
	r := &HealthRule{}
	if r.current, err = compile("spec.health.current", spec.Current); err != nil {
		return nil, err
	}
	if r.failed, err = compile("spec.health.failed", spec.Failed); err != nil {
		return nil, err
	}
	return r, nil
}

// Judge evaluates the rule on a copy (failed first, then current): Failed, Current or
// InProgress; an error names the field that failed to evaluate.
func (r *HealthRule) Judge(object map[string]any) (kstatus.Status, error) {
	if r.invalid != nil {
		return kstatus.UnknownStatus, r.invalid
	}
	eval := func(field string, p cel.Program) (bool, error) {
		if p == nil {
			return false, nil
		}
		out, _, err := p.Eval(map[string]any{"object": object})
		if err != nil {
			return false, fmt.Errorf("%s: %w", field, err)
		}
		b, ok := out.(types.Bool)
		if !ok {
			return false, fmt.Errorf("%s: evaluated to %s, not a bool", field, out.Type().TypeName())
		}
		return bool(b), nil
	}
	failed, err := eval("spec.health.failed", r.failed)
	if err != nil {
		return kstatus.UnknownStatus, err
	}
	if failed {
		return kstatus.FailedStatus, nil
	}
	current, err := eval("spec.health.current", r.current)
	switch {
	case err != nil:
		return kstatus.UnknownStatus, err
	case current:
		return kstatus.CurrentStatus, nil
	}
	return kstatus.InProgressStatus, nil
}

// maxHealthRules bounds the compiled rules kept; past it they are compiled again as needed.
const maxHealthRules = 1024

// healthRules keeps each distinct spec.health compiled once (the zero value is ready to use).
type healthRules struct {
	mu sync.Mutex
	m  map[regionsyncv1alpha1.HealthRule]compiledHealth
}

// compiledHealth is a compiled rule or why it does not compile.
type compiledHealth struct {
	rule *HealthRule
	err  error
}

// get returns spec's compiled rule, compiling it the first time it is seen. A rule that does not
// compile is returned with the error, judging every copy Unknown (never kstatus in its place).
func (h *healthRules) get(spec *regionsyncv1alpha1.HealthRule) (*HealthRule, error) {
	if spec == nil {
		return nil, nil
	}
	h.mu.Lock()
	c, ok := h.m[*spec]
	h.mu.Unlock()
	if ok {
		return c.rule, c.err
	}
	c.rule, c.err = CompileHealthRule(spec)
	if c.err != nil {
		c.rule = &HealthRule{invalid: c.err}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil || len(h.m) >= maxHealthRules {
		h.m = map[regionsyncv1alpha1.HealthRule]compiledHealth{}
	}
	h.m[*spec] = c
	return c.rule, c.err
}
