// Package fieldscan reads a YAML configuration document alongside the Go type it decodes into,
// for what the JSON decoder cannot say: the line of every field, and every duration that is not
// one (the decoder stops at the first, naming neither its field nor its line). It is shared by
// signet-server's and signet-watcher's configuration checks and imports neither.
package fieldscan

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	sigsyaml "sigs.k8s.io/yaml"
)

// durationType is the type of every duration field of Signet's configuration files.
var durationType = reflect.TypeFor[metav1.Duration]()

// Durations finds every duration field (metav1.Duration) of a document (data, YAML) decoded
// into schema whose value is not a Go duration ("24hours", a bare number) and returns one
// error per field, naming its path and line: signers[0].maxLifetime (line 12): "24hours" is
// not a duration … cleaned is the document without those fields (nil when every duration is
// fine), for the decoder to report every other problem. A document that is not YAML is left
// to the decoder.
func Durations(data []byte, schema reflect.Type) (cleaned []byte, errs []error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil || root.Kind != yaml.DocumentNode || len(root.Content) != 1 {
		return nil, nil
	}
	errs = walkDurations(root.Content[0], schema, "")
	if len(errs) == 0 {
		return nil, nil
	}
	out, err := yaml.Marshal(&root)
	if err != nil {
		return nil, errs
	}
	return out, errs
}

// walkDurations checks the duration fields under n, a node of a value of type t at path, and
// removes the ones it reports from their mapping.
func walkDurations(n *yaml.Node, t reflect.Type, path string) []error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode {
		return nil // an anchor's value is checked where it is defined
	}
	switch {
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		var errs []error
		for i, item := range n.Content {
			errs = append(errs, walkDurations(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
		}
		return errs
	case t.Kind() != reflect.Struct || t == durationType || n.Kind != yaml.MappingNode:
		return nil
	}
	fields := jsonFields(t)
	var errs []error
	kept := n.Content[:0:0]
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, value := n.Content[i], n.Content[i+1]
		ft, ok := fields[key.Value]
		at := key.Value
		if path != "" {
			at = path + "." + key.Value
		}
		switch {
		case !ok:
			// Unknown fields are the decoder's to report.
		case ft == durationType || ft.Kind() == reflect.Pointer && ft.Elem() == durationType:
			if err := checkDuration(value, at); err != nil {
				errs = append(errs, err)
				continue
			}
		default:
			errs = append(errs, walkDurations(value, ft, at)...)
		}
		kept = append(kept, key, value)
	}
	n.Content = kept
	return errs
}

// checkDuration reports a duration value that metav1.Duration would refuse, with its path and
// line.
func checkDuration(n *yaml.Node, at string) error {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		found := "a list or mapping"
		if n.Kind == yaml.ScalarNode {
			found = fmt.Sprintf("%s (a number or other non-string value)", n.Value)
		}
		return fmt.Errorf("%s (line %d): want a duration such as 24h, 90m or 1h30m, found %s", at, n.Line, found)
	}
	if _, err := time.ParseDuration(n.Value); err != nil {
		return fmt.Errorf("%s (line %d): %q is not a duration (write it as 24h, 90m or 1h30m: units h, m, s, ms): %w", at, n.Line, n.Value, err)
	}
	return nil
}

// jsonFields maps the JSON names of t's fields to their types, with the fields of inline and
// embedded structs lifted.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" && (f.Anonymous || strings.Contains(opts, "inline")) && f.Type.Kind() == reflect.Struct {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// strictField matches the decoder's unknown and duplicate field errors.
var strictField = regexp.MustCompile(`^(unknown|duplicate) field "([^"]+)"$`)

// DecodeStrict decodes a document (cleaned of its wrong durations) as
// internal/configfile.Decode decodes a file: case-sensitive field names, and unknown and
// duplicate fields refused, every one, named by path and by their line in lines (the lines
// of the document as written, Lines). apiVersion and kind are the caller's to check.
func DecodeStrict(data []byte, lines map[string]int, out any) error {
	jsonData, err := sigsyaml.YAMLToJSONStrict(data)
	if err != nil {
		return err
	}
	strictErrs, err := kjson.UnmarshalStrict(jsonData, out)
	if err != nil {
		return err
	}
	for i, e := range strictErrs {
		if m := strictField.FindStringSubmatch(e.Error()); m != nil && lines[m[2]] > 0 {
			strictErrs[i] = fmt.Errorf("%s field %q (line %d)", m[1], m[2], lines[m[2]])
		}
	}
	return errors.Join(strictErrs...)
}

// Lines maps the path of every field and list item of a YAML document to its line:
// "signers[0].maxLifetime" → 12. A document that is not YAML maps nothing.
func Lines(data []byte) map[string]int {
	lines := map[string]int{}
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil || len(root.Content) != 1 {
		return lines
	}
	var walk func(n *yaml.Node, at string)
	walk = func(n *yaml.Node, at string) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				key := n.Content[i].Value
				if at != "" {
					key = at + "." + key
				}
				lines[key] = n.Content[i].Line
				walk(n.Content[i+1], key)
			}
		case yaml.SequenceNode:
			for i, item := range n.Content {
				key := fmt.Sprintf("%s[%d]", at, i)
				lines[key] = item.Line
				walk(item, key)
			}
		}
	}
	walk(root.Content[0], "")
	return lines
}

// Line is the line of the field at path in lines, or of the nearest field or list item that
// holds it (signers[0] for a signers[0].key the document does not have); 0 when none has one.
func Line(lines map[string]int, path string) int {
	for p := path; p != ""; p = parent(p) {
		if l := lines[p]; l > 0 {
			return l
		}
	}
	return 0
}

// parent is the path of the field or list that holds the field at path: signers[0] for
// signers[0].key, signers for signers[0]; "" at the top.
func parent(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}
