package syncer

import "sync"

// memo is a typed concurrent map (sync.Map underneath): what the reconciler remembers per object
// between passes, each memo with its own key and value types.
type memo[K comparable, V any] struct{ m sync.Map }

// Load returns the value stored for k, if any.
func (m *memo[K, V]) Load(k K) (V, bool) { return typed[V](m.m.Load(k)) }

// Store sets the value for k.
func (m *memo[K, V]) Store(k K, v V) { m.m.Store(k, v) }

// LoadOrStore stores v for k unless k has a value, and returns the value k has afterwards.
func (m *memo[K, V]) LoadOrStore(k K, v V) (V, bool) {
	actual, loaded := m.m.LoadOrStore(k, v)
	return actual.(V), loaded
}

// LoadAndDelete removes k and returns its value, if it had one.
func (m *memo[K, V]) LoadAndDelete(k K) (V, bool) { return typed[V](m.m.LoadAndDelete(k)) }

// Delete removes k.
func (m *memo[K, V]) Delete(k K) { m.m.Delete(k) }

// Range calls f for every key and value until f returns false.
func (m *memo[K, V]) Range(f func(K, V) bool) {
	m.m.Range(func(k, v any) bool { return f(k.(K), v.(V)) })
}

// Clear removes every key.
func (m *memo[K, V]) Clear() { m.m.Clear() }

// typed is what sync.Map returned, as a V (the zero V when there was nothing).
func typed[V any](v any, ok bool) (V, bool) {
	if !ok {
		var zero V
		return zero, false
	}
	return v.(V), true
}
