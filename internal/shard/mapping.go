// Package shard decides which management objects belong to a region and where their local copies
// live (docs/design/sync-rules.md#shard-and-name-mapping), and names the marks (annotations, labels, finalizer) that say an object is the
// agent's. It is pure logic: no client, no cache.
package shard

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/regionsync/regionsync/internal/fleetspec"
)

// ErrNotInShard is returned by the mappings for keys that lie outside the shard. Callers ignore
// such objects; any other error is an invalid mapping of an object that is in the shard.
var ErrNotInShard = errors.New("not in shard")

// Mapper maps remote keys to local keys and back for one shard definition.
type Mapper struct {
	prefix, resourceSuffix, remoteNSSuffix, localNSSuffix string
	selector                                              labels.Selector
}

// NewMapper builds the mapper of a shard definition; the label selector must parse.
func NewMapper(s fleetspec.Shard) (*Mapper, error) {
	sel, err := labels.Parse(s.LabelSelector)
	if err != nil {
		return nil, fmt.Errorf("shard.labelSelector: %w", err)
	}
	return &Mapper{
		prefix:         s.NamespacePrefix,
		resourceSuffix: s.RemoteResourceSuffix,
		remoteNSSuffix: s.RemoteNamespaceSuffix,
		localNSSuffix:  s.LocalNamespaceSuffix,
		selector:       sel,
	}, nil
}

// Selector is the shard's label selector (labels.Everything() when unset); the remote cache is
// filtered by it server-side.
func (m *Mapper) Selector() labels.Selector { return m.selector }

// MatchesLabels reports whether an object's labels satisfy the shard's selector.
func (m *Mapper) MatchesLabels(l map[string]string) bool { return m.selector.Matches(labels.Set(l)) }

// ToLocal maps a remote key to its local key. It returns ErrNotInShard when the key is outside
// the shard (namespace without the prefix or suffix, name without the suffix), and a descriptive
// error when the key is in the shard but maps to an invalid local name.
func (m *Mapper) ToLocal(remote types.NamespacedName) (types.NamespacedName, error) {
	ns, ok := trimAround(remote.Namespace, m.prefix, m.remoteNSSuffix)
	if !ok || !strings.HasSuffix(remote.Name, m.resourceSuffix) {
		return types.NamespacedName{}, ErrNotInShard
	}
	local := types.NamespacedName{
		Namespace: ns + m.localNSSuffix,
		Name:      strings.TrimSuffix(remote.Name, m.resourceSuffix),
	}
	if err := validKey(local); err != nil {
		return types.NamespacedName{}, fmt.Errorf("remote %s maps to invalid local %s: %w", remote, local, err)
	}
	return local, nil
}

// ToRemote maps a local key back to its remote key, exactly inverting ToLocal. It returns
// ErrNotInShard for local namespaces outside the shard (without the prefix or local suffix).
func (m *Mapper) ToRemote(local types.NamespacedName) (types.NamespacedName, error) {
	ns, ok := trimAround(local.Namespace, m.prefix, m.localNSSuffix)
	if !ok || local.Name == "" {
		return types.NamespacedName{}, ErrNotInShard
	}
	remote := types.NamespacedName{
		Namespace: ns + m.remoteNSSuffix,
		Name:      local.Name + m.resourceSuffix,
	}
	if err := validKey(remote); err != nil {
		return types.NamespacedName{}, fmt.Errorf("local %s maps to invalid remote %s: %w", local, remote, err)
	}
	return remote, nil
}

// RemoteSecretName is the management-side name of an uploaded local secret.
func (m *Mapper) RemoteSecretName(local string) string { return local + m.resourceSuffix }

// trimAround removes suffix from s and checks that what remains starts with prefix. It returns
// the remainder (prefix kept) so that the other side's suffix can be appended.
func trimAround(s, prefix, suffix string) (string, bool) {
	if !strings.HasSuffix(s, suffix) {
		return "", false
	}
	rest := s[:len(s)-len(suffix)]
	if !strings.HasPrefix(rest, prefix) {
		return "", false
	}
	return rest, true
}

// validKey checks a namespace (DNS label) and an object name (DNS subdomain, the rule for custom
// resources and most built-in kinds).
func validKey(k types.NamespacedName) error {
	nsErrs, nameErrs := validation.IsDNS1123Label(k.Namespace), validation.IsDNS1123Subdomain(k.Name)
	msgs := make([]string, 0, len(nsErrs)+len(nameErrs))
	for _, e := range nsErrs {
		msgs = append(msgs, fmt.Sprintf("namespace %q: %s", k.Namespace, e))
	}
	for _, e := range nameErrs {
		msgs = append(msgs, fmt.Sprintf("name %q: %s", k.Name, e))
	}
	if len(msgs) > 0 {
		return errors.New(strings.Join(msgs, "; "))
	}
	return nil
}
