package config

import (
	"bufio"
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// configurationDoc is the configuration reference whose field table must match AgentConfig.
const configurationDoc = "../../docs/configuration.md"

// plannedFields are documented in docs/configuration.md before they exist in AgentConfig: their
// rows are tolerated while the field is missing from the types. Remove a path once its field has
// been merged (the test says when), and keep this list empty in a release.
var plannedFields = []string{}

// TestConfigurationDocumented fails for every AgentConfig field missing from the field table of
// docs/configuration.md, and for every documented path that no longer names a field.
func TestConfigurationDocumented(t *testing.T) {
	leaves, nodes := configPaths(reflect.TypeOf(AgentConfig{}), "")
	if len(leaves) < 30 {
		t.Fatalf("walked only %d fields of AgentConfig: %v", len(leaves), leaves)
	}
	documented := documentedPaths(t, configurationDoc)

	for _, p := range leaves {
		if !documented[p] {
			t.Errorf("field %s is not documented in %s (add a row to the field table)", p, configurationDoc)
		}
	}
	exists := map[string]bool{}
	for _, p := range append(slices.Clone(leaves), nodes...) {
		exists[p] = true
	}
	for p := range documented {
		switch {
		case exists[p] && slices.Contains(plannedFields, p):
			t.Errorf("planned field %s now exists: remove it from plannedFields", p)
		case exists[p], slices.Contains(plannedFields, p):
		default:
			t.Errorf("%s documents %s, which is not a field of AgentConfig (removed or renamed?)", configurationDoc, p)
		}
	}
}

var jsonMarshaler = reflect.TypeFor[json.Marshaler]()

// configPaths walks a configuration type by its json tags and returns the paths that must be
// documented (fields a file sets to a value: scalars, lists, durations; a list of structs too) and
// the inner nodes that may be (structs, "name[]"). Inline fields (TypeMeta) add their fields to
// the parent; a field of every entry of a list is written "name[].field" ("resources[].kind").
func configPaths(t reflect.Type, prefix string) (leaves, nodes []string) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if name == "" && (f.Anonymous || strings.Contains(opts, "inline")) && ft.Kind() == reflect.Struct {
			l, n := configPaths(ft, prefix)
			leaves, nodes = append(leaves, l...), append(nodes, n...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		path := prefix + name
		switch {
		case ft.Kind() == reflect.Slice && !isLeaf(ft.Elem()):
			// The list is documented itself (its own row) and so is each field of its entries.
			leaves, nodes = append(leaves, path), append(nodes, path+"[]")
			l, n := configPaths(ft.Elem(), path+"[].")
			leaves, nodes = append(leaves, l...), append(nodes, n...)
		case !isLeaf(ft):
			nodes = append(nodes, path)
			l, n := configPaths(ft, path+".")
			leaves, nodes = append(leaves, l...), append(nodes, n...)
		default:
			leaves = append(leaves, path)
		}
	}
	return leaves, nodes
}

// isLeaf reports whether a type is written as one value: anything but a struct, or a struct that
// encodes itself (metav1.Duration is a string such as "15s").
func isLeaf(t reflect.Type) bool {
	if t.Kind() != reflect.Struct {
		return true
	}
	return t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler)
}

// tableRow matches a field row: its first cell is a backquoted path.
var tableRow = regexp.MustCompile("^\\|\\s*`([A-Za-z][A-Za-z0-9]*(?:\\[\\])?(?:\\.[A-Za-z][A-Za-z0-9]*(?:\\[\\])?)*)`\\s*\\|")

// documentedPaths reads the field rows between the markers "<!-- fields:begin -->" and
// "<!-- fields:end -->" of the configuration reference.
func documentedPaths(t *testing.T, file string) map[string]bool {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatalf("the configuration reference: %v", err)
	}
	defer f.Close()
	out := map[string]bool{}
	in, sawBegin, sawEnd := false, false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch line {
		case "<!-- fields:begin -->":
			in, sawBegin = true, true
			continue
		case "<!-- fields:end -->":
			in, sawEnd = false, true
			continue
		}
		if !in {
			continue
		}
		if m := tableRow.FindStringSubmatch(line); m != nil {
			if out[m[1]] {
				t.Errorf("%s documents %s twice", file, m[1])
			}
			out[m[1]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !sawBegin || !sawEnd || len(out) == 0 {
		t.Fatalf("%s has no field table between <!-- fields:begin --> and <!-- fields:end -->", file)
	}
	return out
}
