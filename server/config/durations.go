package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/signet-pki/signet/internal/configfile"
)

// strictField matches the decoder's unknown and duplicate field errors.
var strictField = regexp.MustCompile(`^(unknown|duplicate) field "([^"]+)"$`)

// durationType is the type of every duration field of the configuration.
var durationType = reflect.TypeFor[metav1.Duration]()

// scanDurations finds every duration field of a Config document (data, YAML) whose value is
// not a Go duration ("24hours", a bare number) and returns one error per field, naming its
// path and line: signers[0].maxLifetime (line 12): "24hours" is not a duration … The JSON
// decoder stops at the first such value and names neither field nor line, so the scan runs
// first, and cleaned is the document without those fields (nil when every duration is
// fine), for the decoder to report every other problem. A document that is not YAML is left to
// the decoder.
func scanDurations(data []byte) (cleaned []byte, errs []error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil || root.Kind != yaml.DocumentNode || len(root.Content) != 1 {
		return nil, nil
	}
	errs = walkDurations(root.Content[0], reflect.TypeFor[Config](), "")
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

// decode reads the file at path into a Config, strictly (configfile.Decode). The durations
// are scanned first (scanDurations): when some are wrong, they are returned and the rest of
// the document is decoded without them.
func decode(path string) (*Config, []error, error) {
	var cfg Config
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading config: %w", err)
	}
	cleaned, durationErrs := scanDurations(data)
	if cleaned == nil {
		if err := configfile.Decode(path, APIVersion, Kind, &cfg); err != nil {
			return nil, durationErrs, err
		}
		return &cfg, durationErrs, nil
	}
	if err := decodeData(cleaned, FieldLines(data), &cfg); err != nil {
		return nil, durationErrs, err
	}
	return &cfg, durationErrs, nil
}

// decodeData decodes a document already cleaned of its wrong durations as configfile.Decode
// decodes a file: case-sensitive field names, unknown and duplicate fields refused (named by
// path and their line in the file, from lines), apiVersion and kind checked.
func decodeData(data []byte, lines map[string]int, cfg *Config) error {
	jsonData, err := sigsyaml.YAMLToJSONStrict(data)
	if err != nil {
		return err
	}
	strictErrs, err := kjson.UnmarshalStrict(jsonData, cfg)
	if err != nil {
		return err
	}
	if len(strictErrs) > 0 {
		for i, e := range strictErrs {
			if m := strictField.FindStringSubmatch(e.Error()); m != nil && lines[m[2]] > 0 {
				strictErrs[i] = fmt.Errorf("%s field %q (line %d)", m[1], m[2], lines[m[2]])
			}
		}
		return errors.Join(strictErrs...)
	}
	if cfg.APIVersion != APIVersion || cfg.Kind != Kind {
		return fmt.Errorf("apiVersion/kind is %q/%q, want %q/%q", cfg.APIVersion, cfg.Kind, APIVersion, Kind)
	}
	return nil
}

// FieldLines maps the path of every field and list item of a YAML document to its line:
// "signers[0].maxLifetime" → 12. A document that is not YAML maps nothing.
func FieldLines(data []byte) map[string]int {
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
