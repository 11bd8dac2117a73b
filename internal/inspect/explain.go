package inspect

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/shard/claim"
)

// Verdicts of Explain, the most fundamental first: the verdict is the first that applies.
const (
	VerdictNotFound           = "NotFound"
	VerdictNoShard            = "NoShard"
	VerdictShardOverlap       = "ShardOverlap"
	VerdictProtectedNamespace = "ProtectedNamespace"
	VerdictInvalidMapping     = "InvalidMapping"
	VerdictRegionNotLive      = "RegionNotLive"
	VerdictShardRefused       = "ShardRefused"
	VerdictDeletionHeld       = "DeletionHeld"
	VerdictDeleting           = "Deleting"
	VerdictPaused             = "Paused"
	VerdictWriteFight         = "WriteFight"
	VerdictNotClaimed         = "NotClaimed"
	VerdictNotCurrent         = "NotCurrent"
	VerdictSynced             = "Synced"
)

// Event reasons of the agent that Explain reads (internal/syncer's; this package does not link the
// agent).
const (
	reasonWriteFight         = "WriteFight"
	reasonDeletionHeld       = "DeletionHeld"
	reasonProtectedNamespace = "ProtectedNamespace"
	reasonInvalidMapping     = "InvalidMapping"
)

// Topics of Explain's findings, in the order they are printed.
const (
	TopicShard    = "shard"
	TopicRegion   = "region"
	TopicClaim    = "claim"
	TopicCurrent  = "current"
	TopicPaused   = "paused"
	TopicDeletion = "deletion"
	TopicFight    = "fight"
	TopicTrace    = "trace"
	// TopicDistribution names the Distribution and revision that placed a per-region object.
	TopicDistribution = "distribution"
	TopicCopy         = "copy"
	TopicDrift        = "drift"
)

// EventLine is one Event as Explain shows it.
type EventLine struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	From    string    `json:"from,omitempty"`
	Count   int32     `json:"count,omitempty"`
	Message string    `json:"message"`
}

// eventLineOf reads an Event, timed by its latest occurrence.
func eventLineOf(e *corev1.Event) EventLine {
	t := e.CreationTimestamp.Time
	for _, c := range []time.Time{e.FirstTimestamp.Time, e.LastTimestamp.Time, e.EventTime.Time} {
		if c.After(t) {
			t = c
		}
	}
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	from := e.ReportingController
	if from == "" {
		from = e.Source.Component
	}
	count := e.Count
	if e.Series != nil {
		count = e.Series.Count
	}
	return EventLine{Time: t, Type: e.Type, Reason: e.Reason, From: from, Count: count, Message: e.Message}
}

// sortEvents orders events oldest first.
func sortEvents(ev []EventLine) {
	sort.SliceStable(ev, func(i, j int) bool { return ev[i].Time.Before(ev[j].Time) })
}

// Miss is one reason a shard does not take an object.
type Miss struct {
	// Category: definition, kind, namespace, name or labels.
	Category string `json:"category"`
	Text     string `json:"text"`
}

// ShardVerdict is one shard's verdict on an object.
type ShardVerdict struct {
	Region string `json:"region"`
	Shard  string `json:"shard,omitempty"`
	Takes  bool   `json:"takes"`
	// Misses say why it does not take the object.
	Misses []Miss `json:"misses,omitempty"`
	// Local is the copy's key in the region when the shard takes the object (its namespace
	// without the region's localNamespaceSuffix, which management does not record).
	Local string `json:"local,omitempty"`
	// MapError says why the object's local name is invalid.
	MapError string `json:"mapError,omitempty"`
	// Protected: the local namespace is one of the system namespaces regionsync never writes.
	Protected bool `json:"protected,omitempty"`

	local      types.NamespacedName
	localKnown bool
}

// judgeShard decides whether shard s takes the object kind ns/name with labels (labels nil: not
// known, not judged), with the agent's own mapping logic.
func judgeShard(kind, ns, name string, labels map[string]string, s *ShardRecord) ShardVerdict {
	v := ShardVerdict{Region: s.Region}
	if s.DefErr != nil {
		v.Misses = append(v.Misses, Miss{"definition", s.DefErr.Error()})
		return v
	}
	d := s.Def
	v.Shard = d.String()
	if !slices.Contains(d.Kinds, kind) {
		v.Misses = append(v.Misses, Miss{"kind", fmt.Sprintf("syncs %s, not %s", strings.Join(d.Kinds, ","), kind)})
	}
	if !strings.HasPrefix(ns, d.NamespacePrefix) {
		v.Misses = append(v.Misses, Miss{"namespace", fmt.Sprintf("namespace %q does not start with the shard's namespacePrefix %q", ns, d.NamespacePrefix)})
	}
	if !strings.HasSuffix(ns, d.RemoteNamespaceSuffix) {
		v.Misses = append(v.Misses, Miss{"namespace", fmt.Sprintf("namespace %q does not end with the shard's remoteNamespaceSuffix %q", ns, d.RemoteNamespaceSuffix)})
	} else if rest := strings.TrimSuffix(ns, d.RemoteNamespaceSuffix); strings.HasPrefix(ns, d.NamespacePrefix) && !strings.HasPrefix(rest, d.NamespacePrefix) {
		v.Misses = append(v.Misses, Miss{"namespace", fmt.Sprintf("namespace %q without its suffix %q does not start with the prefix %q", ns, d.RemoteNamespaceSuffix, d.NamespacePrefix)})
	}
	if !strings.HasSuffix(name, d.RemoteResourceSuffix) {
		v.Misses = append(v.Misses, Miss{"name", fmt.Sprintf("name %q does not end with the shard's suffix %q", name, d.RemoteResourceSuffix)})
	}
	localSuffix, localKnown := s.localSuffix()
	mapper, err := shard.NewMapper(fleetspec.Shard{
		NamespacePrefix:       d.NamespacePrefix,
		RemoteResourceSuffix:  d.RemoteResourceSuffix,
		RemoteNamespaceSuffix: d.RemoteNamespaceSuffix,
		LocalNamespaceSuffix:  localSuffix,
		LabelSelector:         d.LabelSelector,
	})
	if err != nil {
		v.Misses = append(v.Misses, Miss{"definition", fmt.Sprintf("Lease %s: %v", s.Lease, err)})
		return v
	}
	if labels != nil && !mapper.MatchesLabels(labels) {
		v.Misses = append(v.Misses, Miss{"labels", fmt.Sprintf("labels %s do not match the shard's selector %q", formatLabels(labels), d.LabelSelector)})
	}
	if len(v.Misses) > 0 {
		return v
	}
	v.Takes = true
	local, err := mapper.ToLocal(types.NamespacedName{Namespace: ns, Name: name})
	if err != nil {
		v.MapError = err.Error()
		return v
	}
	v.local, v.localKnown = local, localKnown
	v.Local = local.String()
	v.Protected = slices.Contains(fleetspec.SystemNamespaces, local.Namespace)
	return v
}

func formatLabels(l map[string]string) string {
	if len(l) == 0 {
		return none
	}
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+l[k])
	}
	return strings.Join(parts, ",")
}

// Finding is one line of an Explanation: a topic and what was found, OK or a problem.
type Finding struct {
	Topic string `json:"topic"`
	OK    bool   `json:"ok"`
	Text  string `json:"text"`
}

// Explanation is what Explain found: the output of kubectl regionsync explain (its JSON and YAML
// form).
type Explanation struct {
	// Object is "Kind namespace/name" on management.
	Object  string `json:"object"`
	Verdict string `json:"verdict"`
	// Summary says the verdict in a sentence.
	Summary string `json:"summary"`
	// Region is the region whose shard takes the object ("" when none does).
	Region string `json:"region,omitempty"`
	// Shards are the shards that take the object, or, when none does, the nearest misses.
	Shards []ShardVerdict `json:"shards,omitempty"`
	// OtherShards counts the remaining shards by why they miss it.
	OtherShards string    `json:"otherShards,omitempty"`
	Findings    []Finding `json:"findings"`
	// TraceID is the trace the object's sync joins (its traceparent on management); CopyTraceID
	// the agent's own span of the last sync (the copy's traceparent).
	TraceID     string `json:"traceID,omitempty"`
	CopyTraceID string `json:"copyTraceID,omitempty"`
	// Events regarding the object on management; CopyEvents regarding the copy in the region.
	Events     []EventLine `json:"events,omitempty"`
	CopyEvents []EventLine `json:"copyEvents,omitempty"`
	// Copy is the regional copy's key and region, when read.
	Copy string `json:"copy,omitempty"`
	// CopyObject is the copy itself, without its managed fields.
	CopyObject map[string]any `json:"copyObject,omitempty"`
	// Drift is the spec diff between management (-) and the copy (+) ("" when none or not read).
	Drift string `json:"drift,omitempty"`
	// Distribution ("namespace/name") and Revision: the Distribution, and its revision, that
	// placed the object (a per-region object; "" otherwise).
	Distribution string `json:"distribution,omitempty"`
	Revision     string `json:"revision,omitempty"`
}

// ExplainInput is what Explain judges: what ReadExplainInput read, or a test's fixture.
type ExplainInput struct {
	Keys            shard.Keys
	Kind            string
	Namespace, Name string
	// Object is the management object (nil: not found).
	Object *unstructured.Unstructured
	Fleet  *Fleet
	Events []EventLine
	// RegionRead: the region was searched for the copy (kubectl regionsync explain's
	// --region-context).
	RegionRead bool
	// Copy is the regional copy (nil: none found).
	Copy       *unstructured.Unstructured
	CopyEvents []EventLine
	Now        time.Time
}

// nearMisses is how many shards that miss an object by one reason Explain lists.
const nearMisses = 5

// Explain is the reasoning of kubectl regionsync explain, pure: which shard takes the object and
// why (or why none), then the region's liveness, the claim, currentness, pause, deletion, fights,
// trace and drift.
func Explain(in ExplainInput) *Explanation {
	e := &Explanation{Object: fmt.Sprintf("%s %s/%s", in.Kind, in.Namespace, in.Name), Events: in.Events, CopyEvents: in.CopyEvents}
	var labels map[string]string
	if in.Object != nil {
		labels = in.Object.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
	}
	if in.Object == nil && in.Copy == nil {
		e.set(VerdictNotFound, fmt.Sprintf("%s is not on management", e.Object))
		if !in.RegionRead {
			e.Summary += " (give --region-context to look for a copy left in a region)"
		} else {
			e.Summary += " and no copy of it was found in the region"
		}
	}
	// Which shards take it.
	var takers []ShardVerdict
	var misses []ShardVerdict
	for _, s := range in.Fleet.shardList() {
		v := judgeShard(in.Kind, in.Namespace, in.Name, labels, s)
		if v.Takes {
			takers = append(takers, v)
		} else {
			misses = append(misses, v)
		}
	}
	if in.Copy != nil && in.Object == nil {
		// The object is gone; the copy's region mark says whose it was.
		takers = slices.DeleteFunc(takers, func(v ShardVerdict) bool {
			return in.Copy.GetLabels()[in.Fleet.Shards[v.Region].keys(in.Keys).Region] != v.Region
		})
	}
	if in.Object == nil && in.Copy == nil {
		// Nothing to judge labels on: only the shards whose names would fit are shown.
		e.Shards = takers
		e.finish(in)
		return e
	}
	switch len(takers) {
	case 0:
		e.noShard(in, labels, misses)
		e.finish(in)
		return e
	case 1:
	default:
		e.overlap(in, takers)
	}
	e.Shards = takers
	taker := takers[0]
	if e.Verdict == VerdictShardOverlap {
		for _, t := range takers {
			if s := in.Fleet.Shards[t.Region]; s.State == claim.StateSyncing && s.Live {
				taker = t
			}
		}
	}
	e.Region = taker.Region
	e.add(TopicShard, true, fmt.Sprintf("region %s takes it: %s; copy %s", taker.Region, taker.Shard, localText(taker)))
	if taker.MapError != "" {
		e.problem(VerdictInvalidMapping, TopicShard, "the mapped local name is invalid: "+taker.MapError)
	}
	if taker.Protected {
		msg := fmt.Sprintf("it maps to the region's system namespace %s, which regionsync never writes", taker.local.Namespace)
		if !taker.localKnown {
			msg += " (unless the region's localNamespaceSuffix, not registered on its Region, is not empty)"
		}
		e.problem(VerdictProtectedNamespace, TopicShard, msg)
	}
	if s := in.Fleet.Shards[taker.Region]; s != nil {
		in.Keys = s.keys(in.Keys) // the region's own annotation domain, where registered
	}
	for _, ev := range in.Events {
		switch ev.Reason {
		case reasonProtectedNamespace:
			e.problem(VerdictProtectedNamespace, TopicShard, "the agent refused it: "+ev.Message)
		case reasonInvalidMapping:
			e.problem(VerdictInvalidMapping, TopicShard, "the agent refused it: "+ev.Message)
		}
	}
	e.regionFindings(in, in.Fleet.Shards[taker.Region], in.Fleet.Regions[taker.Region])
	e.objectFindings(in, in.Fleet.Regions[taker.Region])
	e.finish(in)
	return e
}

// set sets the verdict unless a more fundamental one is set.
func (e *Explanation) set(verdict, summary string) {
	if e.Verdict == "" {
		e.Verdict, e.Summary = verdict, summary
	}
}

func (e *Explanation) add(topic string, ok bool, text string) {
	e.Findings = append(e.Findings, Finding{Topic: topic, OK: ok, Text: text})
}

// problem records a finding that needs attention and sets the verdict.
func (e *Explanation) problem(verdict, topic, text string) {
	e.add(topic, false, text)
	e.set(verdict, text)
}

func localText(v ShardVerdict) string {
	switch {
	case v.Local == "":
		return none
	case v.localKnown:
		return v.Local
	}
	return v.Local + " (plus the region's localNamespaceSuffix, if any: not registered on its Region)"
}

// noShard explains why no shard takes the object: the shard of the region it is labelled for,
// the nearest misses, and a count of the rest.
func (e *Explanation) noShard(in ExplainInput, labels map[string]string, misses []ShardVerdict) {
	if len(misses) == 0 {
		e.problem(VerdictNoShard, TopicShard, fmt.Sprintf("no region has a shard Lease in %s on management: no agent has claimed a shard", "the management namespace"))
		return
	}
	shown := map[string]bool{}
	if want := labels[regionsyncv1alpha1.RegionLabel]; want != "" {
		if _, ok := in.Fleet.Shards[want]; !ok {
			e.add(TopicShard, false, fmt.Sprintf("it is labelled %s=%s, but region %s has no shard Lease (no agent of that region has claimed)", regionsyncv1alpha1.RegionLabel, want, want))
		}
		for _, v := range misses {
			if v.Region == want {
				e.Shards = append(e.Shards, v)
				shown[v.Region] = true
			}
		}
	}
	near := 0
	for _, v := range misses {
		if !shown[v.Region] && len(v.Misses) == 1 && near < nearMisses {
			e.Shards = append(e.Shards, v)
			shown[v.Region] = true
			near++
		}
	}
	rest := map[string]int{}
	others := 0
	for _, v := range misses {
		if !shown[v.Region] {
			rest[v.Misses[0].Category]++
			others++
		}
	}
	if others > 0 {
		cats := make([]string, 0, len(rest))
		for c, n := range rest {
			cats = append(cats, fmt.Sprintf("%d by %s", n, c))
		}
		sort.Strings(cats)
		e.OtherShards = fmt.Sprintf("%d other shards miss it: %s", others, strings.Join(cats, ", "))
	}
	why := "no region's shard takes it"
	if len(e.Shards) > 0 {
		v := e.Shards[0]
		why += fmt.Sprintf("; nearest: region %s, whose shard %s", v.Region, v.Misses[0].Text)
	}
	e.problem(VerdictNoShard, TopicShard, why)
}

// overlap explains an object more than one shard takes.
func (e *Explanation) overlap(in ExplainInput, takers []ShardVerdict) {
	regions := make([]string, 0, len(takers))
	for _, t := range takers {
		regions = append(regions, t.Region)
	}
	a, b := in.Fleet.Shards[takers[0].Region], in.Fleet.Shards[takers[1].Region]
	_, why := shard.Overlap(a.Def, b.Def)
	syncing := []string{}
	for _, t := range takers {
		if s := in.Fleet.Shards[t.Region]; s.State == claim.StateSyncing && s.Live {
			syncing = append(syncing, t.Region)
		}
	}
	who := "none of them syncs"
	if len(syncing) > 0 {
		who = strings.Join(syncing, ", ") + " syncs (registered first); the others refuse"
	}
	e.problem(VerdictShardOverlap, TopicShard, fmt.Sprintf("the shards of regions %s overlap and all take it: %s; %s", strings.Join(regions, ", "), why, who))
}

// regionFindings judge the taking region: its Lease and its Region.
func (e *Explanation) regionFindings(in ExplainInput, s *ShardRecord, r *regionsyncv1alpha1.Region) {
	switch {
	case s.NoLease:
		msg := fmt.Sprintf("region %s's shard is registered on its Region (spec.shard) but no agent holds its shard Lease", s.Region)
		if c := condition(r, regionsyncv1alpha1.ConditionShardClaimed); c != nil && c.Status != metav1.ConditionTrue {
			msg += fmt.Sprintf(": ShardClaimed=%s (%s) %s", c.Status, c.Reason, c.Message)
		}
		e.problem(VerdictRegionNotLive, TopicRegion, msg)
	case s.Live:
		e.add(TopicRegion, true, fmt.Sprintf("shard Lease %s held by %s, renewed %s ago", s.Lease, s.Holder, since(in.Now, s.Renewed)))
	case s.Renewed.IsZero():
		e.problem(VerdictRegionNotLive, TopicRegion, fmt.Sprintf("region %s's agent is not live: its shard Lease %s was never renewed", s.Region, s.Lease))
	default:
		e.problem(VerdictRegionNotLive, TopicRegion, fmt.Sprintf("region %s's agent is not live: its shard Lease %s was last renewed %s ago and has run out", s.Region, s.Lease, since(in.Now, s.Renewed)))
	}
	if s.State == claim.StateRefused {
		msg := "the agent refuses to sync: its shard overlaps another live shard"
		if why := collisions(in.Fleet, s); why != "" {
			msg += ": " + why
		} else if c := condition(r, regionsyncv1alpha1.ConditionShardClaimed); c != nil && c.Message != "" {
			msg += ": " + c.Message
		}
		e.problem(VerdictShardRefused, TopicRegion, msg)
	}
	if r == nil {
		e.add(TopicRegion, false, fmt.Sprintf("there is no Region %s on management: the agent publishes no health", s.Region))
		return
	}
	if c := condition(r, regionsyncv1alpha1.ConditionReady); c != nil {
		text := fmt.Sprintf("Region %s Ready=%s (%s)", r.Name, c.Status, c.Reason)
		if c.Status != metav1.ConditionTrue {
			text += badConditions(r)
		}
		e.add(TopicRegion, c.Status == metav1.ConditionTrue, fmt.Sprintf("%s; status reported %s ago", text, since(in.Now, timeOf(r.Status.HeartbeatTime))))
	}
}

// badConditions lists the Region's conditions that are in their bad state (Ready's causes).
func badConditions(r *regionsyncv1alpha1.Region) string {
	var out []string
	for _, t := range []string{regionsyncv1alpha1.ConditionManagementConnected, regionsyncv1alpha1.ConditionShardClaimed, regionsyncv1alpha1.ConditionSynced, regionsyncv1alpha1.ConditionDeletionsHeld} {
		c := condition(r, t)
		if c == nil {
			continue
		}
		bad := c.Status != metav1.ConditionTrue
		if t == regionsyncv1alpha1.ConditionDeletionsHeld {
			bad = c.Status == metav1.ConditionTrue
		}
		if bad {
			out = append(out, fmt.Sprintf("%s=%s (%s): %s", c.Type, c.Status, c.Reason, c.Message))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return ": " + strings.Join(out, "; ")
}

// collisions describes the syncing, live shards that overlap s (shard.Overlap, the agents' own
// rule), or "".
func collisions(f *Fleet, s *ShardRecord) string {
	var out []string
	for _, o := range f.shardList() {
		if o.Region == s.Region || o.DefErr != nil || o.State != claim.StateSyncing || !o.Live {
			continue
		}
		if overlap, why := shard.Overlap(s.Def, o.Def); overlap {
			out = append(out, fmt.Sprintf("it collides with the shard of region %s (Lease %s): %s", o.Region, o.Lease, why))
		}
	}
	return strings.Join(out, "; ")
}

// objectFindings judge the object and its copy: claim, currentness, pause, deletion, fights.
func (e *Explanation) objectFindings(in ExplainInput, r *regionsyncv1alpha1.Region) {
	k := in.Keys
	obj, cp := in.Object, in.Copy
	if in.RegionRead {
		if cp != nil {
			e.Copy = fmt.Sprintf("%s/%s in region %s", cp.GetNamespace(), cp.GetName(), cp.GetLabels()[k.Region])
			e.add(TopicCopy, true, copyText(e.Copy, cp, k, in.Now))
			shown := cp.DeepCopy()
			shown.SetManagedFields(nil)
			e.CopyObject = shown.Object
		} else {
			e.add(TopicCopy, false, "no copy found in the region of --region-context")
		}
	}
	// Deletion first: a held deletion explains a stuck terminating object or a lingering copy.
	counts := countsOf(r, in.Kind)
	heldInRegion := counts != nil && counts.DeletionsHeld > 0
	heldEvent := hasReason(in.CopyEvents, reasonDeletionHeld)
	deleting := obj == nil || obj.GetDeletionTimestamp() != nil
	if deleting {
		what := "the object is gone from management"
		if obj != nil {
			what = fmt.Sprintf("the object is terminating (since %s ago)", since(in.Now, obj.GetDeletionTimestamp().Time))
		}
		switch {
		case heldInRegion || heldEvent:
			n := int32(0)
			if counts != nil {
				n = counts.DeletionsHeld
			}
			msg := fmt.Sprintf("%s, but region %s holds the deletion of its copy (deletion budget; %d %s deletions held in the region)", what, e.Region, n, in.Kind)
			if r != nil && r.Annotations[k.ReleaseDeletionsBefore] != "" {
				msg += fmt.Sprintf("; holds started before %s are released (%s on Region %s)", r.Annotations[k.ReleaseDeletionsBefore], k.ReleaseDeletionsBefore, r.Name)
			}
			msg += fmt.Sprintf(". Release it: kubectl regionsync release <kind>/<name> -n <namespace> --region-context <region> (the copy), or kubectl regionsync release --region %s --before now", e.Region)
			e.problem(VerdictDeletionHeld, TopicDeletion, msg)
		case obj != nil && !hasFinalizer(obj, k.Finalizer):
			e.add(TopicDeletion, true, what+"; no regionsync finalizer holds it")
		default:
			e.problem(VerdictDeleting, TopicDeletion, what+"; the agent deletes the copy, then removes its finalizer "+k.Finalizer)
		}
	}
	if obj == nil {
		return
	}
	if k.IsPaused(obj.GetAnnotations()) {
		e.problem(VerdictPaused, TopicPaused, fmt.Sprintf("paused on management (%s=true): the agent writes nothing for it", k.Paused))
	}
	if cp != nil && k.IsPaused(cp.GetAnnotations()) {
		e.problem(VerdictPaused, TopicPaused, fmt.Sprintf("the copy is paused in the region (%s=true): the agent writes nothing for it", k.Paused))
	}
	for _, ev := range [][]EventLine{in.Events, in.CopyEvents} {
		if f := lastWithReason(ev, reasonWriteFight); f != nil {
			e.problem(VerdictWriteFight, TopicFight, fmt.Sprintf("write fight %s ago: %s", since(in.Now, f.Time), f.Message))
		}
	}
	if hasFinalizer(obj, k.Finalizer) {
		e.add(TopicClaim, true, "claimed: finalizer "+k.Finalizer)
	} else if !deleting {
		e.problem(VerdictNotClaimed, TopicClaim, fmt.Sprintf("not claimed: no finalizer %s yet (the agent of region %s has not synced it)", k.Finalizer, e.Region))
	}
	e.currentFinding(k, obj, cp, deleting)
	if cp != nil {
		if d := drift(obj, cp); d != "" {
			e.Drift = d
			e.add(TopicDrift, false, "the copy differs from management (see the diff); under Replace the agent reverts it unless paused or fighting, under Apply fields of regional controllers stay")
		} else {
			e.add(TopicDrift, true, "the copy's content is management's")
		}
	}
	e.set(VerdictSynced, fmt.Sprintf("synced to region %s and current", e.Region))
}

// currentFinding says whether the region's copy is current: the generation annotations, and for a
// kind without metadata.generation the applied-content hash.
func (e *Explanation) currentFinding(k shard.Keys, obj, cp *unstructured.Unstructured, deleting bool) {
	gen := obj.GetGeneration()
	copied, copiedOK := obj.GetAnnotations()[k.RemoteGeneration]
	switch {
	case !copiedOK:
		if !deleting {
			e.problem(VerdictNotCurrent, TopicCurrent, fmt.Sprintf("never copied: no %s annotation (generation %d)", k.RemoteGeneration, gen))
		}
	case cp != nil && !k.GenerationsCurrent(obj.GetAnnotations(), gen, cp.GetGeneration()):
		e.problem(VerdictNotCurrent, TopicCurrent, fmt.Sprintf("not current: management generation %d, copied %s, the copy's generation %d, recorded %s", gen, copied, cp.GetGeneration(), obj.GetAnnotations()[k.LocalGeneration]))
	case copied != fmt.Sprint(gen):
		e.problem(VerdictNotCurrent, TopicCurrent, fmt.Sprintf("not current: management generation %d, last copied %s", gen, copied))
	case gen == 0 && obj.GetAnnotations()[k.AppliedHash] != k.AppliedContentHash(obj):
		// A kind without metadata.generation: the hash of the content copied tells.
		e.problem(VerdictNotCurrent, TopicCurrent, fmt.Sprintf("not current: the content changed since the agent last copied it (%s is not the hash of the object now; an agent that records none cannot tell)", k.AppliedHash))
	case gen == 0:
		e.add(TopicCurrent, true, fmt.Sprintf("current: the content copied down is the object's now (%s)", k.AppliedHash))
	default:
		e.add(TopicCurrent, true, fmt.Sprintf("current: generation %d copied down (copy generation %s)", gen, obj.GetAnnotations()[k.LocalGeneration]))
	}
}

// copyText describes the copy: its key, generation and age, and the agent's marks on it.
func copyText(ref string, cp *unstructured.Unstructured, k shard.Keys, now time.Time) string {
	parts := []string{fmt.Sprintf("copy %s, generation %d, created %s ago", ref, cp.GetGeneration(), since(now, cp.GetCreationTimestamp().Time))}
	if t := cp.GetDeletionTimestamp(); t != nil {
		parts = append(parts, fmt.Sprintf("terminating since %s ago (finalizers %v)", since(now, t.Time), cp.GetFinalizers()))
	}
	if k.IsReleased(cp.GetAnnotations()) {
		parts = append(parts, "its held deletion is released ("+k.ReleaseDeletion+"=true)")
	}
	return strings.Join(parts, "; ")
}

// finish adds the Distribution that placed the object and the trace IDs.
func (e *Explanation) finish(in ExplainInput) {
	if in.Object != nil {
		if dist := in.Object.GetLabels()[in.Keys.Distribution]; dist != "" {
			e.Distribution = in.Namespace + "/" + dist
			e.Revision = in.Object.GetAnnotations()[in.Keys.Revision]
			e.add(TopicDistribution, true, fmt.Sprintf("placed by Distribution %s, revision %s (kubectl regionsync explain distribution/%s -n %s)",
				e.Distribution, orDash(e.Revision), dist, in.Namespace))
		}
		if id := traceID(in.Object.GetAnnotations()[in.Keys.TraceParent]); id != "" {
			e.TraceID = id
			e.add(TopicTrace, true, "the sync joins trace "+id+" (traceparent on management)")
		}
	}
	if in.Copy != nil {
		if id := traceID(in.Copy.GetAnnotations()[in.Keys.TraceParent]); id != "" {
			e.CopyTraceID = id
			e.add(TopicTrace, true, "last sync: trace "+id+" (traceparent on the copy)")
		}
	}
}

// traceID is the trace ID of a W3C traceparent ("00-<trace id>-<span id>-<flags>"), or "".
func traceID(tp string) string {
	parts := strings.Split(tp, "-")
	if len(parts) != 4 || len(parts[1]) != 32 {
		return ""
	}
	return parts[1]
}

// drift is the diff of the synced content (everything but metadata and status) from management
// (-) to the copy (+).
func drift(remote, local *unstructured.Unstructured) string {
	content := func(u *unstructured.Unstructured) map[string]any {
		out := map[string]any{}
		for k, v := range u.Object {
			switch k {
			case "metadata", "status", "apiVersion", "kind":
				continue
			}
			out[k] = v
		}
		return out
	}
	return cmp.Diff(content(remote), content(local))
}

func hasFinalizer(u *unstructured.Unstructured, f string) bool {
	return slices.Contains(u.GetFinalizers(), f)
}

func hasReason(ev []EventLine, reason string) bool { return lastWithReason(ev, reason) != nil }

func lastWithReason(ev []EventLine, reason string) *EventLine {
	var last *EventLine
	for i := range ev {
		if ev[i].Reason == reason && (last == nil || !ev[i].Time.Before(last.Time)) {
			last = &ev[i]
		}
	}
	return last
}

func timeOf(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}

func since(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return duration.HumanDuration(now.Sub(t))
}
