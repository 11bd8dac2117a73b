package shard

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// FanOutReport is the value of the FanOutReport annotation an agent writes on a management
// object that asks for namespace fan-out: how many of the region's namespaces match, how many
// copies hold the object's current content, and which failed. The hub reads it to judge the
// region's copies of a Distribution with spec.namespaces (no status is uploaded from N copies).
type FanOutReport struct {
	// Matching is the number of namespaces the selector matches in the region's scope.
	Matching int `json:"matching"`
	// Current is the number of those namespaces whose copy holds the content of Generation (or
	// Hash).
	Current int `json:"current"`
	// Failed names the matching namespaces whose copy failed (refused or not written), at most
	// a few; MoreFailed counts the others.
	Failed     []string `json:"failed,omitempty"`
	MoreFailed int      `json:"moreFailed,omitempty"`
	// Generation is the management object's metadata.generation the pass copied (omitted for
	// kinds without one).
	Generation int64 `json:"generation,omitempty"`
	// Hash is, for kinds without metadata.generation, AppliedContentHash of the management
	// object the pass copied (one-way: it reveals nothing of the content).
	Hash string `json:"hash,omitempty"`
}

// ParseFanOutReport decodes a FanOutReport annotation value; the error names the annotation.
func (k Keys) ParseFanOutReport(value string) (FanOutReport, error) {
	var r FanOutReport
	if err := json.Unmarshal([]byte(value), &r); err != nil {
		return r, fmt.Errorf("annotation %s: %w", k.FanOutReport, err)
	}
	return r, nil
}

// FanOutCurrent reports whether a report says every matching namespace's copy holds o's content
// now: the report is of o's generation (or, for a kind without one, of its content hash) and no
// copy is missing or failed.
func (k Keys) FanOutCurrent(r FanOutReport, o *unstructured.Unstructured) bool {
	if o.GetGeneration() != 0 {
		if r.Generation != o.GetGeneration() {
			return false
		}
	} else if r.Hash == "" || r.Hash != k.AppliedContentHash(o) {
		return false
	}
	return r.Current == r.Matching && len(r.Failed) == 0 && r.MoreFailed == 0
}
