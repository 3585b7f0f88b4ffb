package configfile

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// The messages of the JSON decoder that name Go types: a value of the wrong kind for a field,
// and a whole document of the wrong kind.
var (
	typeErrorInField = regexp.MustCompile(`^json: cannot unmarshal (\w+) into Go struct field [^. ]*\.(\S+) of type (.+)$`)
	typeErrorInValue = regexp.MustCompile(`^json: cannot unmarshal (\w+) into Go value of type (.+)$`)
	unknownField     = regexp.MustCompile(`^(unknown|duplicate) field "([^"]+)"$`)
)

// explain rewrites a decoding error for people: the field path with list indexes and the line
// of the YAML file that holds it, what was expected and what was found, and no Go type names.
// An error it does not recognise is returned as it is.
func explain(data []byte, err error) error {
	msg := err.Error()
	var root yaml.Node
	if yerr := yaml.Unmarshal(data, &root); yerr != nil {
		return err
	}
	if m := unknownField.FindStringSubmatch(msg); m != nil {
		path := parsePath(m[2])
		if n := lookup(&root, path); n != nil {
			return fmt.Errorf("%s field %q (line %d)", m[1], m[2], n.Line)
		}
		return err
	}
	if m := typeErrorInField.FindStringSubmatch(msg); m != nil {
		found, dotted, goType := m[1], m[2], m[3]
		path, line := find(&root, strings.Split(dotted, "."), found)
		where := dotted
		if path != "" {
			where = fmt.Sprintf("%s (line %d)", path, line)
		}
		return fmt.Errorf("%s: want %s, found %s", where, want(goType), article(found))
	}
	if m := typeErrorInValue.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("the file must be a mapping of fields, found %s", article(m[1]))
	}
	return err
}

// want says in words what a Go type accepts.
func want(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.HasPrefix(goType, "map["), strings.HasPrefix(goType, "struct"), strings.Contains(goType, "."):
		// Named types of other packages are structs here (metav1.Duration decodes from a
		// string and reports itself as string).
		return "a mapping of fields"
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "true or false"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"), strings.HasPrefix(goType, "float"):
		return "a number"
	}
	return "a value of another kind"
}

// article names a JSON kind as the decoder reports it ("array", "object", "string", "number",
// "bool") in words.
func article(kind string) string {
	switch kind {
	case "array":
		return "a list"
	case "object":
		return "a mapping"
	case "bool":
		return "true or false"
	case "number":
		return "a number"
	case "string":
		return "a string"
	}
	return kind
}

// pathStep is one step of a field path: a field name, or an index into a list (index >= 0).
type pathStep struct {
	name  string
	index int
}

// parsePath parses a path like signers[0].maxLifeTime.
func parsePath(p string) []pathStep {
	var out []pathStep
	for _, part := range strings.Split(p, ".") {
		name, rest, _ := strings.Cut(part, "[")
		if name != "" {
			out = append(out, pathStep{name: name, index: -1})
		}
		for rest != "" {
			idx, after, _ := strings.Cut(rest, "]")
			n, err := strconv.Atoi(idx)
			if err != nil {
				return out
			}
			out = append(out, pathStep{index: n})
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return out
}

// lookup returns the node at path under root (a document node), or nil.
func lookup(root *yaml.Node, path []pathStep) *yaml.Node {
	n := document(root)
	for _, step := range path {
		switch {
		case n == nil:
			return nil
		case step.index >= 0:
			if n.Kind != yaml.SequenceNode || step.index >= len(n.Content) {
				return nil
			}
			n = n.Content[step.index]
		default:
			n = field(n, step.name)
		}
	}
	return n
}

// find walks the dotted field names (lists crossed at any index) to the first value of the
// found kind, and returns its path with indexes and its line; "" when there is none.
func find(root *yaml.Node, names []string, found string) (string, int) {
	var walk func(n *yaml.Node, names []string, at string) (string, int)
	walk = func(n *yaml.Node, names []string, at string) (string, int) {
		if n == nil {
			return "", 0
		}
		if n.Kind == yaml.SequenceNode && len(names) > 0 {
			for i, item := range n.Content {
				if p, line := walk(item, names, fmt.Sprintf("%s[%d]", at, i)); p != "" {
					return p, line
				}
			}
			return "", 0
		}
		if len(names) == 0 {
			if kindOf(n) == found || (n.Kind == yaml.SequenceNode && found == "array") {
				return at, n.Line
			}
			if n.Kind == yaml.SequenceNode {
				for i, item := range n.Content {
					if kindOf(item) == found {
						return fmt.Sprintf("%s[%d]", at, i), item.Line
					}
				}
			}
			return "", 0
		}
		next := names[0]
		if at != "" {
			next = at + "." + names[0]
		}
		return walk(field(n, names[0]), names[1:], next)
	}
	return walk(document(root), names, "")
}

// kindOf is the JSON kind of a YAML node as the decoder names it.
func kindOf(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "array"
	case yaml.MappingNode:
		return "object"
	}
	switch n.Tag {
	case "!!int", "!!float":
		return "number"
	case "!!bool":
		return "bool"
	}
	return "string"
}

func document(root *yaml.Node) *yaml.Node {
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		return root.Content[0]
	}
	return root
}

// field returns the value of a mapping node's key name, or nil.
func field(n *yaml.Node, name string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == name {
			return n.Content[i+1]
		}
	}
	return nil
}
