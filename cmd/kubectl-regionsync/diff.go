package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/hub"
	"github.com/regionsync/regionsync/internal/scheme"
)

// errDifferences is returned by diff when the hub would change something; main exits with 1 for
// it, as kubectl diff does.
var errDifferences = errors.New("differences found")

// exitError makes main exit with code: diff's own failures exit 2, as kubectl diff's do (1 means
// differences).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// diffOptions are diff's flags.
type diffOptions struct {
	file                      string
	output                    string
	defaultServiceAccountName string
	allowSecrets              bool
	hubNamespace              string
}

func newDiffCommand(o *options) *cobra.Command {
	do := &diffOptions{hubNamespace: "regionsync-system"}
	cmd := &cobra.Command{
		Use:   "diff -f <file>",
		Short: "What a new or changed Distribution, or a changed source object, would do in each region",
		Long: "diff reads Distributions and source objects from a file (YAML or JSON, several documents allowed; - for\n" +
			"stdin) and prints, for every region the Distribution would select, the per-region object as the hub\n" +
			"would write it, against what is placed on management now, with the region's wave, and the removals the\n" +
			"shrink guard would hold. A source object (any other kind) is previewed through every Distribution of\n" +
			"its namespace whose spec.source selects it, as given or as it is now.\n\n" +
			"Nothing is written: the Distribution is sent to the API server as a dry run (so its schema, CEL rules\n" +
			"and admission policies judge it), and each per-region object is rendered by the hub's own code and\n" +
			"applied as a dry run as the Distribution's ServiceAccount (the caller must be allowed to impersonate it,\n" +
			"as the admission policy requires of a Distribution's author), so the preview refuses what the hub would.\n" +
			"The preview is the state the rollout leads to: with a Progressive strategy each region gets it in its wave.\n\n" +
			"Exit code: 0 no differences, 1 differences, 2 diff itself failed (kubectl diff's).",
		Example: "  kubectl regionsync diff -f storefront.yaml -n tenant-fleet\n" +
			"  kubectl regionsync diff -f ca-configmap.yaml -n tenant-fleet -o yaml",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := o.diff(cmd, do)
			if err != nil && !errors.Is(err, errDifferences) {
				return &exitError{code: 2, err: err}
			}
			return err
		},
	}
	cmd.Flags().StringVarP(&do.file, "filename", "f", "", "file of Distributions and source objects (- for stdin)")
	cmd.Flags().StringVarP(&do.output, "output", "o", "", "output format: json or yaml (default: text with unified diffs)")
	cmd.Flags().StringVar(&do.defaultServiceAccountName, "default-service-account", "", "the hub configuration's defaultServiceAccountName (the shipped configuration sets none)")
	cmd.Flags().BoolVar(&do.allowSecrets, "allow-secrets", false, "the hub configuration's allowSecrets")
	cmd.Flags().StringVar(&do.hubNamespace, "hub-namespace", do.hubNamespace, "namespace of the hub, whose ConfigMap "+hub.GuardConfigMapName+" holds the shrink guard's memory")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

// diff previews every object of the file and prints the previews.
func (o *options) diff(cmd *cobra.Command, do *diffOptions) error {
	if err := checkOutput(do.output, outputTable, outputJSON, outputYAML); err != nil {
		return err
	}
	objs, err := readObjects(do.file, cmd.InOrStdin())
	if err != nil {
		return err
	}
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("management cluster: %w", err)
	}
	copts := client.Options{Scheme: scheme.New()}
	c, err := client.New(cfg, copts)
	if err != nil {
		return fmt.Errorf("management cluster: %w", err)
	}
	req := hub.PreviewRequest{
		Client: c, Writers: hub.NewWriters(cfg, copts), Keys: o.keys(),
		DefaultServiceAccountName: do.defaultServiceAccountName, AllowSecrets: do.allowSecrets,
		Guard: &hub.ShrinkGuard{Window: hub.DefaultShrinkWindow, Store: &hub.ConfigMapGuardStore{
			Reader: c, Key: types.NamespacedName{Namespace: do.hubNamespace, Name: hub.GuardConfigMapName}}},
		Now: o.now(),
	}
	var previews []*hub.Preview
	for _, u := range objs {
		if u.GetNamespace() == "" {
			u.SetNamespace(ns)
		}
		if u.GroupVersionKind().GroupKind() == regionsyncv1alpha1.GroupVersion.WithKind("Distribution").GroupKind() {
			d := &regionsyncv1alpha1.Distribution{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
				return fmt.Errorf("%s: Distribution %s/%s: %w", do.file, u.GetNamespace(), u.GetName(), err)
			}
			r := req
			r.Distribution = d
			p, err := hub.PreviewDistribution(cmd.Context(), r)
			if err != nil {
				return err
			}
			previews = append(previews, p)
			continue
		}
		ds, err := hub.DistributionsOfSource(cmd.Context(), c, u)
		if err != nil {
			return err
		}
		if len(ds) == 0 {
			fmt.Fprintf(o.streams.ErrOut, "%s %s/%s: no Distribution of namespace %s places it as a source\n", u.GetKind(), u.GetNamespace(), u.GetName(), u.GetNamespace())
		}
		for i := range ds {
			r := req
			r.Distribution, r.Source = &ds[i], u
			p, err := hub.PreviewDistribution(cmd.Context(), r)
			if err != nil {
				return err
			}
			previews = append(previews, p)
		}
	}
	if err := writeReport(o.streams.Out, do.output, previews, func(w io.Writer) error { return writePreviews(w, previews) }); err != nil {
		return err
	}
	for _, p := range previews {
		if p.Changed() {
			return errDifferences
		}
	}
	return nil
}

// readObjects decodes every document of file (- : in).
func readObjects(file string, in io.Reader) ([]*unstructured.Unstructured, error) {
	if file == "-" {
		return decodeObjects(file, in)
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return decodeObjects(file, f)
}

// decodeObjects decodes every YAML or JSON document of r (named file in errors), the items of a
// List each an object.
func decodeObjects(file string, r io.Reader) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(r), 4096)
	var out []*unstructured.Unstructured
	for i := 0; ; i++ {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s, document %d: %w", file, i+1, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		objs := []*unstructured.Unstructured{u}
		if u.IsList() { // kubectl get -o yaml writes a List
			objs = nil
			if err := u.EachListItem(func(o runtime.Object) error {
				objs = append(objs, o.(*unstructured.Unstructured))
				return nil
			}); err != nil {
				return nil, fmt.Errorf("%s, document %d: %w", file, i+1, err)
			}
		}
		for j, o := range objs {
			if o.GetKind() == "" || o.GetAPIVersion() == "" || o.GetName() == "" {
				where := fmt.Sprintf("document %d", i+1)
				if u.IsList() {
					where += fmt.Sprintf(", item %d", j)
				}
				return nil, fmt.Errorf("%s, %s: apiVersion, kind and metadata.name are required", file, where)
			}
		}
		out = append(out, objs...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no object", file)
	}
	return out, nil
}

// writePreviews prints each preview: a header, then per region its wave and, per object, the
// change and a unified diff of the object on management against the hub's write.
func writePreviews(w io.Writer, previews []*hub.Preview) error {
	b := &strings.Builder{}
	for _, p := range previews {
		state := "changed"
		if p.New {
			state = "new"
		}
		fmt.Fprintf(b, "Distribution %s (%s", p.Distribution, state)
		if p.Revision != "" {
			fmt.Fprintf(b, "; revision %s", p.Revision)
		}
		if len(p.Waves) > 0 {
			fmt.Fprintf(b, "; Progressive in %d waves", len(p.Waves))
		} else if p.Invalid == "" {
			b.WriteString("; every region at once")
		}
		b.WriteString(")\n")
		if p.Invalid != "" {
			fmt.Fprintf(b, "  not placeable, the hub would change nothing: %s\n", p.Invalid)
			continue
		}
		if p.Note != "" {
			fmt.Fprintf(b, "  note: %s\n", p.Note)
		}
		if len(p.Regions) == 0 {
			b.WriteString("  selects no region\n")
		}
		for _, r := range p.Regions {
			fmt.Fprintf(b, "region %s", r.Region)
			if r.Wave > 0 {
				fmt.Fprintf(b, " (wave %d of %d: %s)", r.Wave, len(p.Waves), r.WaveName)
			}
			b.WriteString("\n")
			for _, op := range r.Objects {
				writeObjectPreview(b, p, op)
			}
		}
		if p.Held {
			fmt.Fprintf(b, "removals: the shrink guard would hold them: %s\n", p.HeldWhy)
		}
		if p.GuardNote != "" {
			fmt.Fprintf(b, "note: the shrink guard's memory: %s\n", p.GuardNote)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeObjectPreview prints one object's change, with its diff.
func writeObjectPreview(b *strings.Builder, p *hub.Preview, op hub.ObjectPreview) {
	kind := p.Kind
	if i := strings.LastIndex(kind, "/"); i >= 0 {
		kind = kind[i+1:]
	}
	name := op.Name
	if name == "" {
		name = "(none)"
	}
	switch op.Change {
	case hub.ChangeNotPlaced:
		fmt.Fprintf(b, "  %s %s: not placed, %s (%s): %s\n", kind, name, op.State, op.Reason, op.Message)
		return
	case hub.ChangeNone:
		fmt.Fprintf(b, "  %s %s: unchanged\n", kind, name)
		return
	case hub.ChangeRemoveHeld:
		fmt.Fprintf(b, "  %s %s: would be removed, but the shrink guard holds it\n", kind, name)
	default:
		fmt.Fprintf(b, "  %s %s: %s\n", kind, name, strings.ToLower(string(op.Change)))
	}
	from, to := "management/"+name, "after/"+name
	if op.Live == nil {
		from = "/dev/null"
	}
	if op.Result == nil {
		to = "/dev/null"
	}
	text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: yamlLines(op.Live), B: yamlLines(op.Result), FromFile: from, ToFile: to, Context: 3,
	})
	if err != nil {
		fmt.Fprintf(b, "    (no diff: %v)\n", err)
		return
	}
	for _, line := range strings.SplitAfter(text, "\n") {
		if line != "" {
			b.WriteString("    " + line)
		}
	}
}

// yamlLines is u as YAML, line by line (none for nil).
func yamlLines(u *unstructured.Unstructured) []string {
	if u == nil {
		return nil
	}
	raw, err := yaml.Marshal(u.Object)
	if err != nil {
		return []string{fmt.Sprintf("(cannot encode: %v)\n", err)}
	}
	lines := strings.SplitAfter(string(raw), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}
