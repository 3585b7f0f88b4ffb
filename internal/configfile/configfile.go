// Package configfile holds what Signet's versioned configuration files share: strict decoding
// of a YAML file with an apiVersion and kind, and the checks of values that both the server's
// and the watcher's files carry.
package configfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// maxSignerNameLength is the longest signer name the kube-apiserver accepts
// (253 domain + '/' + 253 + '.' + 63 path).
const maxSignerNameLength = 571

// Decode reads the YAML file at path into out, strictly:
//   - field names are case-sensitive (as Kubernetes decodes its own configuration files;
//     encoding/json alone would take "maxLifeTime" for maxLifetime);
//   - unknown and duplicate fields are errors that name their path (server.adress) and line;
//   - a value of the wrong kind names its path, line, what was wanted and what was found, in
//     words (no Go type names);
//   - apiVersion and kind must be present and equal the given ones.
//
// Every error names the file.
func Decode(path, apiVersion, kind string, out any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading config: %w", err)
	}
	jsonData, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return fmt.Errorf("parsing config %s: %w", path, err)
	}
	strictErrs, err := kjson.UnmarshalStrict(jsonData, out)
	if err != nil {
		return fmt.Errorf("parsing config %s: %w", path, explain(data, err))
	}
	if len(strictErrs) > 0 {
		for i, e := range strictErrs {
			strictErrs[i] = explain(data, e)
		}
		return fmt.Errorf("parsing config %s: %w", path, errors.Join(strictErrs...))
	}
	var header struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(jsonData, &header); err != nil {
		return fmt.Errorf("parsing config %s: %w", path, err)
	}
	if header.APIVersion != apiVersion || header.Kind != kind {
		return fmt.Errorf("config %s: apiVersion/kind is %q/%q, want %q/%q", path, header.APIVersion, header.Kind, apiVersion, kind)
	}
	return nil
}

// ResolvePaths makes each relative path relative to dir, the folder of the configuration file
// that holds it, so that a file means the same whatever the working directory. Empty and
// absolute paths are left as they are.
func ResolvePaths(dir string, paths ...*string) {
	for _, p := range paths {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
}

// SignerNameProblems returns why name is not a signer name the kube-apiserver accepts, or
// nothing: exactly one '/', a domain of at least two DNS-1123 labels, and a path of
// dot-separated DNS-1123 subdomains, 571 characters at most.
func SignerNameProblems(name string) []string {
	domain, path, ok := strings.Cut(name, "/")
	if !ok || domain == "" || path == "" || strings.Contains(path, "/") {
		return []string{"must look like domain/path, for example example.com/serving"}
	}
	var problems []string
	if len(name) > maxSignerNameLength {
		problems = append(problems, fmt.Sprintf("is longer than %d characters", maxSignerNameLength))
	}
	labels := strings.Split(domain, ".")
	if len(labels) < 2 {
		problems = append(problems, "domain must have at least two dot-separated labels")
	}
	for _, label := range labels {
		if msgs := validation.IsDNS1123Label(label); len(msgs) > 0 {
			problems = append(problems, fmt.Sprintf("domain label %q: %s", label, strings.Join(msgs, "; ")))
			break
		}
	}
	for _, segment := range strings.Split(path, ".") {
		if msgs := validation.IsDNS1123Subdomain(segment); len(msgs) > 0 {
			problems = append(problems, fmt.Sprintf("path segment %q: %s", segment, strings.Join(msgs, "; ")))
			break
		}
	}
	return problems
}
