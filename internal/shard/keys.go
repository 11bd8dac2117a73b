package shard

import (
	"strconv"
	"strings"
)

// Keys are the annotation, label and finalizer names the agent reads and writes, all under one
// annotation domain D (docs/design/README.md#annotation-keys). With D = cloud.teleport.dev the keys and the finalizer are
// exactly gravitational/sync-controller's.
type Keys struct {
	// Domain is the annotation domain D itself ("regionsync.dev").
	Domain string
	// RemoteGeneration (on remote objects) is the remote metadata.generation copied down.
	RemoteGeneration string
	// LocalGeneration (on remote objects) is the local metadata.generation after that copy.
	LocalGeneration string
	// Owner (on local namespaces) names the local object the agent created the namespace for.
	Owner string
	// OwnerKind (on local namespaces) is the Kind.group of that object, so two kinds with the
	// same object name cannot both claim one namespace.
	OwnerKind string
	// Paused "true" on either side stops every write for the object.
	Paused string
	// Finalizer (on remote objects) holds remote deletion until the local copy is gone.
	Finalizer string
	// LastUploadedHash (on remote secrets) is the hash of the secret data last uploaded.
	LastUploadedHash string
	// TraceParent carries W3C trace context across clusters.
	TraceParent string
	// Region (label on local objects and namespaces the agent manages) names the agent's region;
	// the local caches select on it.
	Region string
	// RemoteUID (on local objects) is the UID of the remote object the copy belongs to.
	RemoteUID string
	// ReleaseDeletion "true" on a local copy lets the agent delete it although the deletion
	// budget holds it (the operator's release, consumed by the deletion it lets through).
	ReleaseDeletion string
	// ReleaseDeletionsBefore (on the region's Region on management) is an RFC 3339 time: every
	// deletion hold that started before it is released.
	ReleaseDeletionsBefore string
	// CopiedKeys (on local objects, Replace strategy) lists the label and annotation keys copied
	// from the remote, so that a key removed on the remote is removed locally while keys only the
	// local side has are kept.
	CopiedKeys string
	// AppliedHash (on local objects, Apply strategy) hashes the last applied configuration, so a
	// removed remote field is noticed without a write on every resync.
	AppliedHash string
	// FanOutNamespaces (on remote objects) is a label selector ("*": every namespace in scope):
	// the object is copied into every matching local namespace instead of its mapped one.
	FanOutNamespaces string
	// FanOutReport (on remote objects, written by the agent) reports a fan-out object's copies
	// in the region: how many namespaces match, how many copies are current, which failed.
	FanOutReport string
	// FanOutSource (label on fan-out copies) is a hash of the remote object's key: the copies
	// of one source are listed by it.
	FanOutSource string
	// FanOutSourceKey (annotation on fan-out copies) is the remote object's "namespace/name".
	FanOutSourceKey string

	// The hub's keys (docs/design/hub.md#hub-and-distribution).

	// Distribution (label on per-region objects on management) names the Distribution in the
	// object's namespace that placed it: the one mark of "this Distribution's object".
	Distribution string
	// HubFinalizer (on Distributions) holds a Distribution's deletion until the hub has removed
	// (deletionPolicy Delete) or released (Orphan) its per-region objects.
	HubFinalizer string
	// ConfirmRemovalsBefore (on a Distribution) is an RFC 3339 time: removals the shrink guard
	// holds since before it go ahead.
	ConfirmRemovalsBefore string
	// Revision (on per-region objects) names the Distribution revision (a ControllerRevision)
	// the object was rendered from: a rollout's state is rebuilt from it.
	Revision string
	// RetryRollout (on a Distribution) is an RFC 3339 time: a rollout halted before it starts
	// again from its first wave.
	RetryRollout string
}

// NewKeys returns the keys of an annotation domain.
func NewKeys(domain string) Keys {
	k := func(name string) string { return domain + "/" + name }
	return Keys{
		Domain:                 domain,
		RemoteGeneration:       k("sync-remote-generation"),
		LocalGeneration:        k("sync-local-generation"),
		Owner:                  k("sync-owner"),
		OwnerKind:              k("sync-owner-kind"),
		Paused:                 k("paused"),
		Finalizer:              k("sync-local"),
		LastUploadedHash:       k("last-uploaded-hash"),
		TraceParent:            k("traceparent"),
		Region:                 k("sync-region"),
		RemoteUID:              k("sync-remote-uid"),
		AppliedHash:            k("sync-applied-hash"),
		ReleaseDeletion:        k("release-deletion"),
		ReleaseDeletionsBefore: k("release-deletions-before"),
		CopiedKeys:             k("sync-copied-keys"),
		FanOutNamespaces:       k("fan-out-namespaces"),
		FanOutReport:           k("fan-out-report"),
		FanOutSource:           k("fan-out-source"),
		FanOutSourceKey:        k("fan-out-source-key"),
		Distribution:           k("distribution"),
		HubFinalizer:           k("hub"),
		ConfirmRemovalsBefore:  k("confirm-removals-before"),
		Revision:               k("revision"),
		RetryRollout:           k("retry-rollout"),
	}
}

// IsPaused reports whether an object's annotations pause it.
func (k Keys) IsPaused(annotations map[string]string) bool {
	return strings.EqualFold(annotations[k.Paused], "true")
}

// GenerationsCurrent reports what a management controller checks (docs/design/sync-rules.md#generation-annotations): the remote object's
// generation annotations say that its current generation was copied down and that the local copy
// has the given generation, so a status reporting localGeneration as observed is current.
func (k Keys) GenerationsCurrent(remoteAnnotations map[string]string, remoteGeneration, localGeneration int64) bool {
	return remoteAnnotations[k.RemoteGeneration] == strconv.FormatInt(remoteGeneration, 10) &&
		remoteAnnotations[k.LocalGeneration] == strconv.FormatInt(localGeneration, 10)
}

// IsReleased reports whether an operator released a held deletion of this object.
func (k Keys) IsReleased(annotations map[string]string) bool {
	return strings.EqualFold(annotations[k.ReleaseDeletion], "true")
}

// IsAgentKey reports whether an annotation is the agent's own bookkeeping or per-side state
// (pause, trace context), which is never copied from remote to local.
func (k Keys) IsAgentKey(key string) bool {
	switch key {
	case k.RemoteGeneration, k.LocalGeneration, k.Owner, k.OwnerKind, k.LastUploadedHash,
		k.Region, k.RemoteUID, k.AppliedHash, k.TraceParent, k.Paused, k.ReleaseDeletion, k.CopiedKeys,
		k.FanOutNamespaces, k.FanOutReport, k.FanOutSource, k.FanOutSourceKey:
		return true
	}
	return false
}

// OwnsNamespace reports whether a local namespace with these annotations was created by the
// agent for the copy named copyName of kind (a KindName): its owner annotation names the copy
// and its owner-kind annotation, when present, the kind. A namespace sync-controller created
// carries only the owner name, which is accepted.
func (k Keys) OwnsNamespace(namespaceAnnotations map[string]string, copyName, kind string) bool {
	if namespaceAnnotations[k.Owner] != copyName {
		return false
	}
	owner, ok := namespaceAnnotations[k.OwnerKind]
	return !ok || owner == kind
}
