// Package layout keeps the import rules of the repository, as Kubernetes keeps its own with
// import-boss: each rule names the packages it holds for and what they must not depend on,
// and fails with the chain of imports that breaks it.
package layout

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/signet-pki/signet/"

type rule struct {
	why      string
	packages []string // relative to the module, "..." patterns allowed
	// forbidden reports whether a dependency (an import path) is not allowed.
	forbidden func(dep string) bool
	direct    bool // only direct imports count, not the whole dependency graph
}

var rules = []rule{
	{
		why:       "the watcher runs in the cluster and must not carry the signing server's code",
		packages:  []string{"watcher/...", "cmd/signet-watcher"},
		forbidden: func(dep string) bool { return strings.HasPrefix(dep, module+"server/") || dep == module+"server" },
	},
	{
		why:      "the client is shared by the watcher, signetctl, the bench and other tools: it carries neither the server nor the watcher",
		packages: []string{"signerclient"},
		forbidden: func(dep string) bool {
			return strings.HasPrefix(dep, module+"server") || strings.HasPrefix(dep, module+"watcher")
		},
	},
	{
		why:      "the watcher builds only the clients and informers it uses (watcher/kubeclient), not a whole clientset",
		packages: []string{"watcher/...", "cmd/signet-watcher"},
		forbidden: func(dep string) bool {
			return dep == "k8s.io/client-go/kubernetes" || strings.HasPrefix(dep, "k8s.io/client-go/informers")
		},
		direct: true,
	},
	{
		why:       "the watcher never holds a CA key: no keystore (and no PKCS#11 or TPM code) in it",
		packages:  []string{"watcher/...", "cmd/signet-watcher"},
		forbidden: func(dep string) bool { return strings.HasPrefix(dep, module+"keystore") },
	},
	{
		why:       "the keystore is the server's dependency, not the other way round: its backends and conformance suite carry no server code",
		packages:  []string{"keystore/..."},
		forbidden: func(dep string) bool { return strings.HasPrefix(dep, module+"server") },
	},
	{
		why: "the server's configuration is plain data (its profiles are server/profile/spec) and its check reads files: " +
			"neither they nor signetctl, a small client that runs the check in process, carry the lint gate (zlint), " +
			"the profiles' rules, an issuer or an authority; the server's wiring builds those from the configuration",
		packages: []string{"server/config/...", "server/configcheck/...", "server/profile/spec", "cmd/signetctl"},
		forbidden: func(dep string) bool {
			return strings.HasPrefix(dep, "github.com/zmap/zlint") || dep == module+"server/lint" || dep == module+"server/profile" ||
				dep == module+"server/issuance" || dep == module+"server/authority" || dep == module+"server/idempotency"
		},
	},
	{
		why:      "fieldscan is shared by the server's and the watcher's configuration checks (signetctl): it carries neither, nor zlint",
		packages: []string{"server/config/fieldscan"},
		forbidden: func(dep string) bool {
			return strings.HasPrefix(dep, module) || strings.HasPrefix(dep, "github.com/zmap/zlint")
		},
	},
	{
		why:       "no binary or demo links the testing package",
		packages:  []string{"cmd/...", "hack/demo"},
		forbidden: func(dep string) bool { return dep == "testing" },
	},
	{
		why: "the node agent runs on every node: it links no CA-key code (keystore), nothing of the server or the watcher, " +
			"and no gRPC client; attestation and internal/tpmconn are all it shares with them",
		packages: []string{"cmd/signet-node", "internal/nodeagent", "attestation/..."},
		forbidden: func(dep string) bool {
			return strings.HasPrefix(dep, module+"keystore") || strings.HasPrefix(dep, module+"server") ||
				strings.HasPrefix(dep, module+"watcher") || strings.HasPrefix(dep, module+"signerclient")
		},
	},
	{
		why:       "the ledger record is a leaf that every journal shares (the file ledger, a fleet's database): it imports nothing of the module",
		packages:  []string{"server/ledger/record"},
		forbidden: func(dep string) bool { return strings.HasPrefix(dep, module) },
	},
	{
		why:       "a fleet's state (server/pgstate) shares the record with the file ledger, not the file ledger's code",
		packages:  []string{"server/pgstate/..."},
		forbidden: func(dep string) bool { return dep == module+"server/ledger" || dep == module+"server/ledger/index" },
	},
	{
		why:       "the server takes requests from objects through objectrequest, never through the client",
		packages:  []string{"server/..."},
		forbidden: func(dep string) bool { return dep == module+"signerclient" },
	},
	{
		why:      "objectrequest is the one object → request conversion: it carries nothing but the API types",
		packages: []string{"objectrequest"},
		forbidden: func(dep string) bool {
			return strings.HasPrefix(dep, module) && dep != module+"proto/signet/v1" && dep != module+"objectrequest"
		},
	},
	{
		why:       "the decision core knows no transport: no gRPC in its dependencies",
		packages:  []string{"server/decision"},
		forbidden: func(dep string) bool { return strings.HasPrefix(dep, "google.golang.org/grpc") },
	},
	{
		why:       "the decision core knows no transport: it imports no HTTP package",
		packages:  []string{"server/decision"},
		forbidden: func(dep string) bool { return dep == "net/http" || strings.HasPrefix(dep, "github.com/go-chi/") },
		direct:    true,
	},
}

// pkg is what go list reports of one package.
type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
	DepOnly    bool
}

// TestImportRules checks every rule against `go list -deps` of its packages.
func TestImportRules(t *testing.T) {
	t.Parallel()
	for _, r := range rules {
		var patterns []string
		for _, p := range r.packages {
			patterns = append(patterns, module+p)
		}
		pkgs := list(t, patterns)
		checked := 0
		for _, p := range pkgs {
			if p.DepOnly {
				continue
			}
			checked++
			deps := p.Deps
			if r.direct {
				deps = p.Imports
			}
			for _, d := range deps {
				if r.forbidden(d) {
					t.Errorf("%s depends on %s (%s): %s", p.ImportPath, d, chain(pkgs, p.ImportPath, d), r.why)
				}
			}
		}
		if checked == 0 {
			t.Errorf("rule %q matched no package (%v)", r.why, r.packages)
		}
	}
}

// list runs go list -deps -json on patterns.
func list(t *testing.T, patterns []string) map[string]pkg {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-deps", "-json=ImportPath,Imports,Deps,DepOnly"}, patterns...)...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", patterns, err)
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decoding go list: %v", err)
		}
		pkgs[p.ImportPath] = p
	}
	return pkgs
}

// chain returns one import chain from from to to, "a -> b -> c", by breadth-first search.
func chain(pkgs map[string]pkg, from, to string) string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == to {
			var path []string
			for p := to; p != ""; p = prev[p] {
				path = append([]string{strings.TrimPrefix(p, module)}, path...)
			}
			return strings.Join(path, " -> ")
		}
		for _, next := range pkgs[cur].Imports {
			if _, seen := prev[next]; !seen {
				prev[next] = cur
				queue = append(queue, next)
			}
		}
	}
	return "no chain found"
}
